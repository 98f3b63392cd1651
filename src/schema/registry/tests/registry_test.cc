// The registry's operations and its REST API over a log kept in memory (the broker's
// `_schemas` topic is exercised end to end in tests/integration/schema_registry_test.py).
#include "schema/registry/registry.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "schema/registry/registry_http.h"
#include "schema/registry/tests/memory_log.h"

namespace sluice::schema::registry {
namespace {

using nlohmann::json;

constexpr const char* kUserV1 =
    R"({"type":"record","name":"User","namespace":"acme","fields":[{"name":"name","type":"string"}]})";
constexpr const char* kUserV2 =
    R"({"type":"record","name":"User","namespace":"acme","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]})";
constexpr const char* kUserNoDefault =
    R"({"type":"record","name":"User","namespace":"acme","fields":[{"name":"name","type":"string"},{"name":"email","type":"string"}]})";

class RegistryTest : public ::testing::Test {
 protected:
  RegistryTest() : registry(&log) { log.registry = &registry; }

  HttpResponse Call(std::string method, std::string path, std::string body = "",
                    std::map<std::string, std::string> query = {}) {
    HttpRequest r;
    r.method = std::move(method);
    r.path = std::move(path);
    r.body = std::move(body);
    r.query = std::move(query);
    return HandleRegistryRequest(registry, r);
  }
  static json Body(const HttpResponse& r) { return json::parse(r.body); }
  static std::string SchemaBody(std::string_view schema, std::string_view type = "") {
    json b = {{"schema", schema}};
    if (!type.empty()) b["schemaType"] = type;
    return b.dump();
  }
  int32_t Register(std::string_view subject, std::string_view schema, std::string_view type = "") {
    HttpResponse r =
        Call("POST", fmt::format("/subjects/{}/versions", subject), SchemaBody(schema, type));
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? Body(r)["id"].get<int32_t>() : -1;
  }

  MemoryLog log;
  Registry registry;
};

TEST_F(RegistryTest, AnIdenticalSchemaGetsOneIdInEverySubjectAndOneVersion) {
  int32_t id = Register("users-value", kUserV1);
  EXPECT_EQ(id, 1);
  // Written differently (spaces, attribute order): the same schema.
  EXPECT_EQ(Register("users-value",
                     R"({"namespace": "acme", "name": "User", "type": "record",
                         "fields": [ {"type": "string", "name": "name"} ]})"),
            1);
  EXPECT_EQ(Register("other-value", kUserV1), 1);
  EXPECT_EQ(Body(Call("GET", "/subjects/users-value/versions")), json({1}));
  json v = Body(Call("GET", "/subjects/other-value/versions/latest"));
  EXPECT_EQ(v["subject"], "other-value");
  EXPECT_EQ(v["version"], 1);
  EXPECT_EQ(v["id"], 1);
  EXPECT_FALSE(v.contains("schemaType"));  // Avro is the default, not named
  EXPECT_EQ(Body(Call("GET", "/subjects")), json({"other-value", "users-value"}));
  EXPECT_EQ(
      Body(Call("GET", "/schemas/ids/1/versions")),
      json::parse(
          R"([{"subject":"other-value","version":1},{"subject":"users-value","version":1}])"));
  EXPECT_EQ(Body(Call("GET", "/schemas/ids/1/subjects")), json({"other-value", "users-value"}));
}

TEST_F(RegistryTest, BackwardIsTheDefaultAndRefusesAFieldWithoutDefault) {
  Register("u", kUserV1);
  HttpResponse r = Call("POST", "/subjects/u/versions", SchemaBody(kUserNoDefault));
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(Body(r)["error_code"], 409);
  EXPECT_NE(Body(r)["message"].get<std::string>().find("READER_FIELD_MISSING_DEFAULT_VALUE"),
            std::string::npos)
      << r.body;
  json check = Body(Call("POST", "/compatibility/subjects/u/versions/latest",
                         SchemaBody(kUserNoDefault), {{"verbose", "true"}}));
  EXPECT_EQ(check["is_compatible"], false);
  EXPECT_FALSE(check["messages"].empty());
  EXPECT_EQ(Body(Call("POST", "/compatibility/subjects/u/versions/1",
                      SchemaBody(kUserV2)))["is_compatible"],
            true);
  EXPECT_EQ(Register("u", kUserV2), 2);
  EXPECT_EQ(Body(Call("GET", "/subjects/u/versions")), json({1, 2}));
  // NONE takes anything.
  EXPECT_EQ(Call("PUT", "/config/u", R"({"compatibility":"NONE"})").status, 200);
  EXPECT_EQ(Body(Call("GET", "/config/u"))["compatibilityLevel"], "NONE");
  EXPECT_EQ(Register("u", kUserNoDefault), 3);
  // FORWARD: the old schema must read the new one's data.
  EXPECT_EQ(Call("PUT", "/config/u", R"({"compatibility":"FORWARD_TRANSITIVE"})").status, 200);
  EXPECT_EQ(Body(Call("GET", "/config"))["compatibilityLevel"], "BACKWARD");
  EXPECT_EQ(Body(Call("DELETE", "/config/u"))["compatibilityLevel"], "FORWARD_TRANSITIVE");
  EXPECT_EQ(Call("GET", "/config/u").status, 404);
  EXPECT_EQ(Body(Call("GET", "/config/u", "", {{"defaultToGlobal", "true"}}))["compatibilityLevel"],
            "BACKWARD");
}

TEST_F(RegistryTest, BadInputGetsTheApisErrorCodes) {
  auto code = [](const HttpResponse& r) { return json::parse(r.body)["error_code"].get<int>(); };
  EXPECT_EQ(code(Call("GET", "/subjects/nope/versions")), 40401);
  Register("s", kUserV1);
  EXPECT_EQ(code(Call("GET", "/subjects/s/versions/7")), 40402);
  EXPECT_EQ(code(Call("GET", "/subjects/s/versions/abc")), 42202);
  EXPECT_EQ(code(Call("GET", "/subjects/s/versions/0")), 42202);
  EXPECT_EQ(code(Call("GET", "/schemas/ids/99")), 40403);
  EXPECT_EQ(code(Call("GET", "/schemas/ids/x")), 40403);
  EXPECT_EQ(code(Call("POST", "/subjects/s/versions", SchemaBody("{not json"))), 42201);
  EXPECT_EQ(code(Call("POST", "/subjects/s/versions", SchemaBody(R"({"type":"record"})"))), 42201);
  EXPECT_EQ(code(Call("POST", "/subjects/s/versions", SchemaBody("x", "XML"))), 42201);
  EXPECT_EQ(Call("POST", "/subjects/s/versions", "[1,2]").status, 400);
  EXPECT_EQ(Call("POST", "/subjects/s/versions", "").status, 400);
  EXPECT_EQ(code(Call("POST", "/subjects/s/versions", R"({"schema": 5})")), 42201);
  EXPECT_EQ(code(Call("PUT", "/config", R"({"compatibility":"SIDEWAYS"})")), 42203);
  // A JSON schema nested past the limit is refused, not written back level by level.
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += R"({"a":)";
  deep += "1" + std::string(100000, '}');
  EXPECT_EQ(code(Call("POST", "/subjects/s/versions", SchemaBody(deep, "JSON"))), 42201);
  EXPECT_EQ(code(Call("PUT", "/mode", R"({"mode":"SOMETIMES"})")), 42204);
  EXPECT_EQ(code(Call("POST", "/subjects/s", SchemaBody(kUserV2))), 40403);
  EXPECT_EQ(code(Call("POST", "/subjects/none", SchemaBody(kUserV2))), 40401);
  EXPECT_EQ(Call("GET", "/nothing/here").status, 404);
  EXPECT_EQ(Call("GET", "/subjects/%zz/versions").status, 404);
  EXPECT_EQ(Call("PATCH", "/subjects").status, 405);
  EXPECT_EQ(
      code(Call("POST", "/subjects/s/versions",
                json{{"schema", kUserV1},
                     {"references", {{{"name", "x"}, {"subject", "missing"}, {"version", 1}}}}}
                    .dump())),
      42201);
}

TEST_F(RegistryTest, DeletesAreSoftThenPermanentAndIdsAreNeverReused) {
  Register("d", kUserV1);
  Register("d", kUserV2);
  auto code = [](const HttpResponse& r) { return json::parse(r.body)["error_code"].get<int>(); };
  EXPECT_EQ(code(Call("DELETE", "/subjects/d/versions/1", "", {{"permanent", "true"}})), 40407);
  EXPECT_EQ(Body(Call("DELETE", "/subjects/d/versions/1")), 1);
  EXPECT_EQ(code(Call("DELETE", "/subjects/d/versions/1")), 40406);
  EXPECT_EQ(Body(Call("GET", "/subjects/d/versions")), json({2}));
  EXPECT_EQ(Body(Call("GET", "/subjects/d/versions", "", {{"deleted", "true"}})), json({1, 2}));
  EXPECT_EQ(code(Call("GET", "/subjects/d/versions/1")), 40402);
  EXPECT_EQ(Body(Call("GET", "/subjects/d/versions/1", "", {{"deleted", "true"}}))["deleted"],
            true);
  EXPECT_EQ(code(Call("DELETE", "/subjects/d", "", {{"permanent", "true"}})), 40405);
  EXPECT_EQ(Body(Call("DELETE", "/subjects/d")), json({2}));
  EXPECT_EQ(code(Call("DELETE", "/subjects/d")), 40404);
  EXPECT_EQ(code(Call("GET", "/subjects/d/versions")), 40401);
  EXPECT_EQ(Body(Call("GET", "/subjects", "", {{"deleted", "true"}})), json({"d"}));
  EXPECT_EQ(Body(Call("DELETE", "/subjects/d", "", {{"permanent", "true"}})), json({1, 2}));
  EXPECT_EQ(Body(Call("GET", "/subjects", "", {{"deleted", "true"}})), json::array());
  EXPECT_EQ(Call("GET", "/schemas/ids/1").status, 404);
  // A schema registered after the hard delete gets a new id: 1 and 2 stay taken.
  EXPECT_EQ(Register("d", kUserV1), 3);
  EXPECT_EQ(Body(Call("GET", "/subjects/d/versions")), json({1}));
}

TEST_F(RegistryTest, ARestartedRegistryRebuildsTheSameAnswersFromTheLog) {
  Register("a", kUserV1);
  Register("a", kUserV2);
  Register("b", R"("string")");
  Call("DELETE", "/subjects/a/versions/1");
  Call("PUT", "/config/b", R"({"compatibility":"FULL"})");
  Call("PUT", "/mode/b", R"({"mode":"READONLY"})");
  MemoryLog log2;
  Registry again(&log2);
  log2.registry = &again;
  for (size_t i = 0; i < log.records.size(); ++i) {
    std::optional<std::string_view> v;
    if (log.records[i].second) v = *log.records[i].second;
    again.Feed(static_cast<int64_t>(i), log.records[i].first, v);
  }
  for (const char* path : {"/subjects", "/subjects/a/versions", "/schemas", "/config/b", "/mode/b",
                           "/schemas/ids/2", "/subjects/b/versions/latest"}) {
    HttpRequest r;
    r.method = "GET";
    r.path = path;
    EXPECT_EQ(HandleRegistryRequest(again, r).body, Call("GET", path).body) << path;
  }
  EXPECT_EQ(Call("POST", "/subjects/b/versions", SchemaBody(R"("int")")).status, 422);  // read-only
}

TEST_F(RegistryTest, AWriterThatLostToAnotherDecidesAgain) {
  Register("c", kUserV1);  // id 1
  // Another broker registers a schema as id 2, version 1 of "x", just before this one
  // appends: this one must not give id 2 to another schema.
  StoredSchema other{2, SchemaType::kAvro, R"("long")", {}};
  log.interleave.emplace_back(SchemaKey("x", 1), SchemaValue("x", 1, other, false));
  EXPECT_EQ(Register("y", R"("double")"), 3);
  EXPECT_EQ(Body(Call("GET", "/schemas/ids/2"))["schema"], R"("long")");
  // Records the state cannot take are skipped: garbage, a second schema for a taken id.
  log.Add("not json", std::string("{}"));
  log.Add(R"({"keytype":"SCHEMA","subject":"z","version":1,"magic":1})", std::string("[1]"));
  log.Add(SchemaKey("z", 1),
          SchemaValue("z", 1, {1, SchemaType::kAvro, R"("boolean")", {}}, false));
  log.Add(R"({"keytype":"FUTURE","magic":9})", std::string("{}"));
  EXPECT_EQ(Body(Call("GET", "/schemas/ids/1"))["schema"].get<std::string>().find("User") !=
                std::string::npos,
            true);
  EXPECT_EQ(Call("GET", "/subjects/z/versions").status, 404);
}

TEST_F(RegistryTest, ProtobufAndJsonSchemasWithReferences) {
  int32_t dep = Register("dep.proto",
                         R"(syntax = "proto3"; package acme; message Money { int64 cents = 1; })",
                         "PROTOBUF");
  json body = {
      {"schemaType", "PROTOBUF"},
      {"schema",
       R"(syntax = "proto3"; package acme; import "dep.proto"; message Order { string id = 1; acme.Money total = 2; })"},
      {"references", {{{"name", "dep.proto"}, {"subject", "dep.proto"}, {"version", 1}}}}};
  HttpResponse r = Call("POST", "/subjects/orders-value/versions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  int32_t id = Body(r)["id"];
  json got = Body(Call("GET", fmt::format("/schemas/ids/{}", id)));
  EXPECT_EQ(got["schemaType"], "PROTOBUF");
  EXPECT_EQ(got["references"][0]["subject"], "dep.proto");
  EXPECT_EQ(Body(Call("GET", "/subjects/dep.proto/versions/1/referencedby")), json({id}));
  EXPECT_EQ(Body(Call("DELETE", "/subjects/dep.proto/versions/1"))["error_code"], 42206);
  EXPECT_NE(dep, id);
  // JSON Schema: stored, and a required property added is not backward compatible.
  Register("j", R"({"type":"object","properties":{"a":{"type":"string"}}})", "JSON");
  HttpResponse bad =
      Call("POST", "/subjects/j/versions",
           SchemaBody(R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]})",
                      "JSON"));
  EXPECT_EQ(bad.status, 409) << bad.body;
  EXPECT_EQ(Body(Call("GET", "/schemas/types")), json({"JSON", "PROTOBUF", "AVRO"}));
}

TEST_F(RegistryTest, ImportModeTakesTheGivenIds) {
  EXPECT_EQ(Call("PUT", "/mode", R"({"mode":"IMPORT"})").status, 200);
  HttpResponse r = Call("POST", "/subjects/i/versions",
                        json{{"schema", kUserV1}, {"id", 100}, {"version", 4}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["id"], 100);
  EXPECT_EQ(Body(Call("GET", "/subjects/i/versions")), json({4}));
  EXPECT_EQ(Call("PUT", "/mode", R"({"mode":"READWRITE"})").status, 200);
  EXPECT_EQ(Register("i", kUserV2), 101);
  EXPECT_EQ(Call("PUT", "/mode/i", R"({"mode":"IMPORT"})").status, 422);  // it has schemas
}

TEST_F(RegistryTest, SubjectNamesArePercentDecoded) {
  EXPECT_EQ(Register("google%2Fprotobuf%2Ftimestamp.proto", R"("string")"), 1);
  EXPECT_EQ(Body(Call("GET", "/subjects")), json({"google/protobuf/timestamp.proto"}));
}

}  // namespace
}  // namespace sluice::schema::registry
