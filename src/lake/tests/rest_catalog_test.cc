// Every route of the REST catalog over a temporary warehouse, as (method, path, query,
// body) -> (status, JSON): the spec's bodies and status codes, its error types, and the
// files each route leaves in the warehouse (docs/design/0009, "REST catalog").
#include "lake/rest_catalog.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "lake/table_files.h"

namespace sluice::lake {
namespace rest_catalog_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSchema = R"({"type": "struct", "schema-id": 0, "fields": [
  {"id": 1, "name": "id", "type": "long", "required": true},
  {"id": 2, "name": "ts", "type": "timestamptz", "required": false},
  {"id": 3, "name": "city", "type": "string", "required": false}]})";

class RestCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rest_catalog_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    Reopen();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Reopen() {
    auto opened = RestCatalog::Open(
        {.warehouse = (dir_ / "wh").string(), .now_ms = [this] { return ++now_; }});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    catalog_ = std::move(opened).value();
  }

  HttpResponse Call(const std::string& method, const std::string& path,
                    const std::string& body = "", std::map<std::string, std::string> query = {}) {
    return catalog_->Handle(
        {.method = method, .path = path, .query = std::move(query), .body = body});
  }
  // The response body as JSON (null when empty).
  static json Body(const HttpResponse& r) { return r.body.empty() ? json() : json::parse(r.body); }
  static std::string ErrorType(const HttpResponse& r) {
    json b = Body(r);
    EXPECT_EQ(b["error"]["code"], r.status) << r.body;
    EXPECT_TRUE(b["error"]["message"].is_string()) << r.body;
    return b["error"]["type"].get<std::string>();
  }

  void CreateNamespace(const json& ns, const json& props = json::object()) {
    HttpResponse r =
        Call("POST", "/v1/namespaces", json{{"namespace", ns}, {"properties", props}}.dump());
    ASSERT_EQ(r.status, 200) << r.body;
  }
  json CreateTable(const std::string& ns_path, const std::string& name,
                   const std::string& extra = "") {
    std::string body = R"({"name": ")" + name + R"(", "schema": )" + kSchema + extra + "}";
    HttpResponse r = Call("POST", "/v1/namespaces/" + ns_path + "/tables", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return Body(r);
  }
  std::string SetProps(const std::string& uuid, const std::string& key) {
    return json{{"requirements", {{{"type", "assert-table-uuid"}, {"uuid", uuid}}}},
                {"updates", {{{"action", "set-properties"}, {"updates", {{key, "v"}}}}}}}
        .dump();
  }

  fs::path dir_;
  int64_t now_ = 1'700'000'000'000;
  std::unique_ptr<RestCatalog> catalog_;
};

TEST_F(RestCatalogTest, ConfigListsTheEndpoints) {
  HttpResponse r = Call("GET", "/v1/config", "", {{"warehouse", "x"}});
  ASSERT_EQ(r.status, 200);
  json b = Body(r);
  EXPECT_TRUE(b["defaults"].is_object());
  EXPECT_TRUE(b["overrides"].is_object());
  EXPECT_NE(
      std::find(b["endpoints"].begin(), b["endpoints"].end(), "POST /v1/{prefix}/tables/rename"),
      b["endpoints"].end());
}

TEST_F(RestCatalogTest, NamespacesCreateListLoadDrop) {
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces"))["namespaces"], json::array());
  CreateNamespace({"sales"}, {{"owner", "ann"}});
  CreateNamespace({"ops"});
  EXPECT_TRUE(fs::exists(dir_ / "wh" / "sales" / ".namespace.json"));
  HttpResponse again = Call("POST", "/v1/namespaces", R"({"namespace": ["sales"]})");
  EXPECT_EQ(again.status, 409);
  EXPECT_EQ(ErrorType(again), "AlreadyExistsException");

  EXPECT_EQ(Body(Call("GET", "/v1/namespaces"))["namespaces"],
            json::parse(R"([["ops"], ["sales"]])"));
  HttpResponse load = Call("GET", "/v1/namespaces/sales");
  ASSERT_EQ(load.status, 200);
  EXPECT_EQ(Body(load), json::parse(R"({"namespace": ["sales"], "properties": {"owner": "ann"}})"));
  EXPECT_EQ(Call("HEAD", "/v1/namespaces/sales").status, 204);
  EXPECT_EQ(Call("HEAD", "/v1/namespaces/nope").status, 404);
  HttpResponse missing = Call("GET", "/v1/namespaces/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(ErrorType(missing), "NoSuchNamespaceException");

  EXPECT_EQ(Call("DELETE", "/v1/namespaces/ops").status, 204);
  EXPECT_EQ(Call("DELETE", "/v1/namespaces/ops").status, 404);
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces"))["namespaces"], json::parse(R"([["sales"]])"));
}

TEST_F(RestCatalogTest, MultiLevelNamespacesUseTheUnitSeparator) {
  CreateNamespace({"a", "b", "c"});
  EXPECT_TRUE(fs::exists(dir_ / "wh" / "a" / "b" / "c" / ".namespace.json"));
  // The levels above exist as the directories that hold it.
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces"))["namespaces"], json::parse(R"([["a"]])"));
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces", "", {{"parent", "a"}}))["namespaces"],
            json::parse(R"([["a", "b"]])"));
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces", "",
                      {{"parent",
                        "a\x1f"
                        "b"}}))["namespaces"],
            json::parse(R"([["a", "b", "c"]])"));
  EXPECT_EQ(Call("GET", "/v1/namespaces", "", {{"parent", "zz"}}).status, 404);
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces/a%1Fb%1fc"))["namespace"],
            json::parse(R"(["a", "b", "c"])"));
  CreateTable("a%1Fb%1Fc", "t");
  EXPECT_TRUE(fs::exists(dir_ / "wh" / "a" / "b" / "c" / "t" / "metadata" / "v1.metadata.json"));
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces/a%1Fb%1Fc/tables"))["identifiers"],
            json::parse(R"([{"namespace": ["a", "b", "c"], "name": "t"}])"));
  // Not empty: a child namespace, or a table.
  HttpResponse busy = Call("DELETE", "/v1/namespaces/a%1Fb");
  EXPECT_EQ(busy.status, 409);
  EXPECT_EQ(ErrorType(busy), "NamespaceNotEmptyException");
  EXPECT_EQ(ErrorType(Call("DELETE", "/v1/namespaces/a%1Fb%1Fc")), "NamespaceNotEmptyException");
}

TEST_F(RestCatalogTest, BadNamesAndBadJsonAreBadRequests) {
  for (const char* body :
       {"{", "[]", R"({"namespace": "a"})", R"({"namespace": []})", R"({"namespace": ["."]})",
        R"({"namespace": [".hidden"]})", R"({"namespace": ["a/b"]})",
        R"({"namespace": ["a"], "properties": {"k": 1}})"}) {
    HttpResponse r = Call("POST", "/v1/namespaces", body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(ErrorType(r), "BadRequestException") << body;
  }
  EXPECT_EQ(Call("GET", "/v1/namespaces/..").status, 400);
  EXPECT_EQ(Call("GET", "/v1/namespaces/a%2Fb").status, 400);
  EXPECT_EQ(Call("GET", "/v1/namespaces/a%zz").status, 400);
  EXPECT_EQ(Call("GET", "/v1/namespaces/a%1").status, 400);
  // Not UTF-8: a 400 naming the problem, not a failure to write the JSON answer.
  HttpResponse latin1 = Call("GET", "/v1/namespaces/caf%E9");
  EXPECT_EQ(latin1.status, 400) << latin1.body;
  EXPECT_NE(latin1.body.find("UTF-8"), std::string::npos) << latin1.body;
  EXPECT_EQ(Call("GET", "/v1/namespaces/db/tables/caf%E9").status, 400);
  // No such route: 404; a route that does not take the method: 405.
  EXPECT_EQ(Call("GET", "/v1/nothing").status, 404);
  EXPECT_EQ(Call("GET", "/v1/namespaces/db/tables/t/nothing").status, 404);
  EXPECT_EQ(Call("PUT", "/v1/namespaces").status, 405);
  EXPECT_EQ(Call("PUT", "/v1/namespaces/db/tables/t").status, 405);
  EXPECT_EQ(Call("GET", "/v1/tables/rename").status, 405);
  CreateNamespace({"db"});
  // Locations outside the warehouse are refused.
  HttpResponse outside = Call("POST", "/v1/namespaces/db/tables",
                              R"({"name": "t", "location": "file:///etc/sluice",
                                  "schema": {"type": "struct", "fields": []}})");
  EXPECT_EQ(outside.status, 400) << outside.body;
  EXPECT_NE(outside.body.find("outside the warehouse"), std::string::npos) << outside.body;
  for (const std::string& location :
       {"file://" + (dir_ / "wh").string(), "file://" + (dir_ / "wh/db/%2e%2e/x").string()}) {
    EXPECT_EQ(Call("POST", "/v1/namespaces/db/tables",
                   json{{"name", "t"},
                        {"location", location},
                        {"schema", {{"type", "struct"}, {"fields", json::array()}}}}
                       .dump())
                  .status,
              400)
        << location;
  }
  // A symbolic link inside the warehouse that leads out of it.
  fs::create_symlink(dir_, dir_ / "wh" / "db" / "out");
  EXPECT_EQ(Call("POST", "/v1/namespaces/db/tables",
                 json{{"name", "t"},
                      {"location", "file://" + (dir_ / "wh/db/out/x").string()},
                      {"schema", {{"type", "struct"}, {"fields", json::array()}}}}
                     .dump())
                .status,
            400);
  fs::remove(dir_ / "wh" / "db" / "out");
  EXPECT_EQ(Call("POST", "/v1/namespaces/db/tables",
                 json{{"name", "t"},
                      {"location", "file://" + (dir_ / "wh/../elsewhere").string()},
                      {"schema", {{"type", "struct"}, {"fields", json::array()}}}}
                     .dump())
                .status,
            400);
  EXPECT_EQ(Call("POST", "/v1/namespaces/db/tables", "{").status, 400);
  EXPECT_EQ(Call("POST", "/v1/namespaces/db/tables", R"({"name": "t"})").status, 400);
  EXPECT_EQ(Call("POST", "/v1/namespaces/db/tables",
                 R"({"name": "t", "schema": {"type": "struct", "fields": [{"id": 1}]}})")
                .status,
            400);
  EXPECT_EQ(Call("POST", "/v1/namespaces/db/tables/t", "not json").status, 400);
  EXPECT_EQ(Call("POST", "/v1/tables/rename", R"({"source": {"namespace": ["db"]}})").status, 400);
  EXPECT_EQ(Call("GET", "/v1/namespaces/db/tables", "", {{"pageSize", "x"}}).status, 400);
}

TEST_F(RestCatalogTest, NamespacePropertiesUpdate) {
  CreateNamespace({"db"}, {{"a", "1"}, {"b", "2"}});
  HttpResponse r = Call("POST", "/v1/namespaces/db/properties",
                        R"({"removals": ["a", "zz"], "updates": {"c": "3", "b": "20"}})");
  ASSERT_EQ(r.status, 200) << r.body;
  json b = Body(r);
  EXPECT_EQ(b["updated"], json::parse(R"(["b", "c"])"));
  EXPECT_EQ(b["removed"], json::parse(R"(["a"])"));
  EXPECT_EQ(b["missing"], json::parse(R"(["zz"])"));
  Reopen();  // on disk
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces/db"))["properties"],
            json::parse(R"({"b": "20", "c": "3"})"));
  HttpResponse both =
      Call("POST", "/v1/namespaces/db/properties", R"({"removals": ["b"], "updates": {"b": "x"}})");
  EXPECT_EQ(both.status, 422);
  EXPECT_EQ(ErrorType(both), "UnprocessableEntityException");
  EXPECT_EQ(Call("POST", "/v1/namespaces/nope/properties", R"({"updates": {}})").status, 404);
}

TEST_F(RestCatalogTest, CreateLoadAndListTables) {
  CreateNamespace({"db"});
  json created = CreateTable(
      "db", "events",
      R"(, "partition-spec": {"spec-id": 0, "fields": [{"source-id": 2, "transform": "day", "name": "ts_day"}]},
                                 "properties": {"owner": "ann"})");
  const fs::path root = dir_ / "wh" / "db" / "events";
  EXPECT_EQ(created["metadata-location"],
            "file://" + (root / "metadata" / "v1.metadata.json").string());
  EXPECT_EQ(created["metadata"]["location"], "file://" + root.string());
  EXPECT_EQ(created["metadata"]["format-version"], 2);
  EXPECT_EQ(created["metadata"]["properties"]["owner"], "ann");
  EXPECT_EQ(created["metadata"]["partition-specs"][0]["fields"][0]["field-id"], 1000);
  EXPECT_EQ(created["metadata"]["partition-specs"][0]["fields"][0]["transform"], "day");
  EXPECT_TRUE(created["config"].is_object());

  HttpResponse dup = Call("POST", "/v1/namespaces/db/tables",
                          std::string(R"({"name": "events", "schema": )") + kSchema + "}");
  EXPECT_EQ(dup.status, 409);
  EXPECT_EQ(ErrorType(dup), "AlreadyExistsException");
  HttpResponse no_ns = Call("POST", "/v1/namespaces/nope/tables",
                            std::string(R"({"name": "t", "schema": )") + kSchema + "}");
  EXPECT_EQ(no_ns.status, 404);
  EXPECT_EQ(ErrorType(no_ns), "NoSuchNamespaceException");

  HttpResponse load = Call("GET", "/v1/namespaces/db/tables/events");
  ASSERT_EQ(load.status, 200);
  EXPECT_EQ(Body(load)["metadata"], created["metadata"]);
  EXPECT_EQ(Body(load)["metadata-location"], created["metadata-location"]);
  EXPECT_EQ(Call("HEAD", "/v1/namespaces/db/tables/events").status, 204);
  EXPECT_EQ(Call("HEAD", "/v1/namespaces/db/tables/nope").status, 404);
  HttpResponse missing = Call("GET", "/v1/namespaces/db/tables/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(ErrorType(missing), "NoSuchTableException");
  EXPECT_EQ(ErrorType(Call("GET", "/v1/namespaces/nope/tables/t")), "NoSuchNamespaceException");
  EXPECT_EQ(ErrorType(Call("GET", "/v1/namespaces/nope/tables")), "NoSuchNamespaceException");

  CreateTable("db", "alpha");
  CreateTable("db", "zeta");
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces/db/tables"))["identifiers"].size(), 3u);
  // Pages: the token is the last name of the page before.
  json p1 = Body(Call("GET", "/v1/namespaces/db/tables", "", {{"pageSize", "2"}}));
  EXPECT_EQ(p1["identifiers"][1]["name"], "events");
  ASSERT_EQ(p1["next-page-token"], "events");
  json p2 = Body(
      Call("GET", "/v1/namespaces/db/tables", "", {{"pageSize", "2"}, {"pageToken", "events"}}));
  EXPECT_EQ(p2["identifiers"], json::parse(R"([{"namespace": ["db"], "name": "zeta"}])"));
  EXPECT_FALSE(p2.contains("next-page-token"));
  // A table is not a namespace.
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces", "", {{"parent", "db"}}))["namespaces"],
            json::array());
}

TEST_F(RestCatalogTest, CommitWritesTheNextVersionAndStaleRequirementsGet409) {
  CreateNamespace({"db"});
  json created = CreateTable("db", "t");
  std::string uuid = created["metadata"]["table-uuid"];

  HttpResponse first = Call("POST", "/v1/namespaces/db/tables/t", SetProps(uuid, "k1"));
  ASSERT_EQ(first.status, 200) << first.body;
  json b = Body(first);
  EXPECT_EQ(b["metadata-location"],
            "file://" + (dir_ / "wh/db/t/metadata/v2.metadata.json").string());
  EXPECT_EQ(b["metadata"]["properties"]["k1"], "v");
  EXPECT_EQ(b["metadata"]["metadata-log"][0]["metadata-file"], created["metadata-location"]);

  // A stale requirement: 409, nothing written.
  HttpResponse stale = Call("POST", "/v1/namespaces/db/tables/t",
                            SetProps("00000000-0000-0000-0000-000000000000", "k2"));
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(ErrorType(stale), "CommitFailedException");
  EXPECT_FALSE(fs::exists(dir_ / "wh/db/t/metadata/v3.metadata.json"));
}

TEST_F(RestCatalogTest, TheSecondOfTwoCommitsFromOneBaseGets409) {
  CreateNamespace({"db"});
  CreateTable("db", "t");
  // Both clients loaded the table at its current schema 0 and add a column.
  auto add_column = [](const std::string& name) {
    return json{{"requirements",
                 {{{"type", "assert-current-schema-id"}, {"current-schema-id", 0}},
                  {{"type", "assert-last-assigned-field-id"}, {"last-assigned-field-id", 3}}}},
                {"updates",
                 {{{"action", "add-schema"},
                   {"schema",
                    {{"type", "struct"},
                     {"schema-id", 1},
                     {"fields", json::parse(std::string(R"([
                     {"id": 1, "name": "id", "type": "long", "required": true},
                     {"id": 2, "name": "ts", "type": "timestamptz", "required": false},
                     {"id": 3, "name": "city", "type": "string", "required": false},
                     {"id": 4, "name": ")") +
                                            name + R"(", "type": "int", "required": false}])")}}}},
                  {{"action", "set-current-schema"}, {"schema-id", -1}}}}}
        .dump();
  };
  HttpResponse a = Call("POST", "/v1/namespaces/db/tables/t", add_column("a"));
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(Body(a)["metadata"]["current-schema-id"], 1);
  HttpResponse b = Call("POST", "/v1/namespaces/db/tables/t", add_column("b"));
  EXPECT_EQ(b.status, 409) << b.body;
  EXPECT_EQ(ErrorType(b), "CommitFailedException");
  EXPECT_FALSE(fs::exists(dir_ / "wh/db/t/metadata/v3.metadata.json"));
}

TEST_F(RestCatalogTest, ACommitRacedToItsVersionGets409) {
  // Two commits read the same base (v2); the one that links v3 first wins, the other's
  // exclusive create fails: 409, and the winner's v3 stands.
  CreateNamespace({"db"});
  json created = CreateTable("db", "t");
  std::string uuid = created["metadata"]["table-uuid"];
  ASSERT_EQ(Call("POST", "/v1/namespaces/db/tables/t", SetProps(uuid, "first")).status, 200);
  bool raced = false;
  HttpResponse winner;
  auto opened = RestCatalog::Open({.warehouse = (dir_ / "wh").string(), .before_commit = [&] {
                                     if (raced) return;
                                     raced = true;
                                     winner = Call("POST", "/v1/namespaces/db/tables/t",
                                                   SetProps(uuid, "winner"));
                                   }});
  ASSERT_TRUE(opened.ok());
  HttpResponse loser = (*opened)->Handle(
      {.method = "POST", .path = "/v1/namespaces/db/tables/t", .body = SetProps(uuid, "loser")});
  ASSERT_TRUE(raced);
  EXPECT_EQ(winner.status, 200) << winner.body;
  EXPECT_EQ(loser.status, 409) << loser.body;
  EXPECT_EQ(ErrorType(loser), "CommitFailedException");
  json now = Body(Call("GET", "/v1/namespaces/db/tables/t"));
  EXPECT_EQ(now["metadata-location"],
            "file://" + (dir_ / "wh/db/t/metadata/v3.metadata.json").string());
  EXPECT_TRUE(now["metadata"]["properties"].contains("winner"));
  EXPECT_FALSE(now["metadata"]["properties"].contains("loser"));
}

TEST_F(RestCatalogTest, CommitErrors) {
  CreateNamespace({"db"});
  json created = CreateTable("db", "t");
  HttpResponse no_table = Call("POST", "/v1/namespaces/db/tables/nope", SetProps("x", "k"));
  EXPECT_EQ(no_table.status, 404);
  EXPECT_EQ(ErrorType(no_table), "NoSuchTableException");
  HttpResponse bad_update = Call(
      "POST", "/v1/namespaces/db/tables/t",
      R"({"requirements": [], "updates": [{"action": "set-current-schema", "schema-id": 7}]})");
  EXPECT_EQ(bad_update.status, 400);
  EXPECT_EQ(ErrorType(bad_update), "BadRequestException");
  HttpResponse unsupported =
      Call("POST", "/v1/namespaces/db/tables/t",
           R"({"requirements": [], "updates": [{"action": "remove-schemas", "schema-ids": [0]}]})");
  EXPECT_EQ(unsupported.status, 400);
  HttpResponse other = Call(
      "POST", "/v1/namespaces/db/tables/t",
      R"({"identifier": {"namespace": ["db"], "name": "u"}, "requirements": [], "updates": []})");
  EXPECT_EQ(other.status, 400);
  // A commit that changes nothing writes nothing.
  HttpResponse noop =
      Call("POST", "/v1/namespaces/db/tables/t", R"({"requirements": [], "updates": []})");
  ASSERT_EQ(noop.status, 200);
  EXPECT_EQ(Body(noop)["metadata-location"], created["metadata-location"]);
}

TEST_F(RestCatalogTest, StagedCreateCommitsWithAssertCreate) {
  CreateNamespace({"db"});
  json staged = CreateTable("db", "s", R"(, "stage-create": true)");
  EXPECT_FALSE(staged.contains("metadata-location"));
  EXPECT_EQ(Call("HEAD", "/v1/namespaces/db/tables/s").status, 404);
  json commit = {{"requirements", {{{"type", "assert-create"}}}},
                 {"updates",
                  {{{"action", "assign-uuid"}, {"uuid", staged["metadata"]["table-uuid"]}},
                   {{"action", "add-schema"}, {"schema", json::parse(kSchema)}},
                   {{"action", "set-current-schema"}, {"schema-id", -1}},
                   {{"action", "add-spec"}, {"spec", {{"spec-id", 0}, {"fields", json::array()}}}},
                   {{"action", "set-default-spec"}, {"spec-id", -1}},
                   {{"action", "add-sort-order"},
                    {"sort-order", {{"order-id", 0}, {"fields", json::array()}}}},
                   {{"action", "set-default-sort-order"}, {"sort-order-id", -1}}}}};
  HttpResponse r = Call("POST", "/v1/namespaces/db/tables/s", commit.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["metadata"]["location"], "file://" + (dir_ / "wh/db/s").string());
  EXPECT_EQ(Call("HEAD", "/v1/namespaces/db/tables/s").status, 204);
  // Once it exists, assert-create fails.
  HttpResponse again = Call("POST", "/v1/namespaces/db/tables/s", commit.dump());
  EXPECT_EQ(again.status, 409);
}

TEST_F(RestCatalogTest, DropTableKeepsOrPurgesData) {
  CreateNamespace({"db"});
  CreateTable("db", "keep");
  CreateTable("db", "purge");
  fs::create_directories(dir_ / "wh/db/keep/data");
  std::ofstream(dir_ / "wh/db/keep/data/f.parquet") << "x";
  fs::create_directories(dir_ / "wh/db/purge/data");
  std::ofstream(dir_ / "wh/db/purge/data/f.parquet") << "x";
  EXPECT_EQ(Call("DELETE", "/v1/namespaces/db/tables/keep").status, 204);
  EXPECT_EQ(
      Call("DELETE", "/v1/namespaces/db/tables/purge", "", {{"purgeRequested", "true"}}).status,
      204);
  EXPECT_TRUE(fs::exists(dir_ / "wh/db/keep/data/f.parquet"));
  // The versions are moved aside; manifests would stay where the snapshots name them.
  EXPECT_FALSE(fs::exists(dir_ / "wh/db/keep/metadata/v1.metadata.json"));
  EXPECT_FALSE(fs::exists(dir_ / "wh/db/keep/metadata/version-hint.text"));
  bool kept = false;
  for (const auto& e : fs::directory_iterator(dir_ / "wh/db/keep")) {
    kept |= e.path().filename().string().starts_with(".metadata.dropped-") &&
            fs::exists(e.path() / "v1.metadata.json");
  }
  EXPECT_TRUE(kept);
  EXPECT_FALSE(fs::exists(dir_ / "wh/db/purge"));
  EXPECT_EQ(Call("HEAD", "/v1/namespaces/db/tables/keep").status, 404);
  EXPECT_EQ(ErrorType(Call("DELETE", "/v1/namespaces/db/tables/keep")), "NoSuchTableException");
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces/db/tables"))["identifiers"], json::array());
  // What is left of a dropped table is neither a table nor a namespace: db is empty.
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces", "", {{"parent", "db"}}))["namespaces"],
            json::array());
  EXPECT_EQ(Call("DELETE", "/v1/namespaces/db").status, 204);
}

TEST_F(RestCatalogTest, RenameMovesTheMetadataAndKeepsTheData) {
  CreateNamespace({"db"});
  CreateNamespace({"archive"});
  json created = CreateTable("db", "t");
  auto rename = [&](const json& src, const json& dst) {
    return Call("POST", "/v1/tables/rename", json{{"source", src}, {"destination", dst}}.dump());
  };
  json src = {{"namespace", {"db"}}, {"name", "t"}};
  json dst = {{"namespace", {"archive"}}, {"name", "t2"}};
  EXPECT_EQ(ErrorType(rename({{"namespace", {"db"}}, {"name", "nope"}}, dst)),
            "NoSuchTableException");
  EXPECT_EQ(ErrorType(rename(src, {{"namespace", {"nope"}}, {"name", "x"}})),
            "NoSuchNamespaceException");
  CreateTable("db", "other");
  EXPECT_EQ(ErrorType(rename(src, {{"namespace", {"db"}}, {"name", "other"}})),
            "AlreadyExistsException");

  // A manifest list the table's snapshots would name: it stays where it is.
  std::ofstream(dir_ / "wh/db/t/metadata/snap-1-1-x.avro") << "list";
  ASSERT_EQ(rename(src, dst).status, 204);
  EXPECT_TRUE(fs::exists(dir_ / "wh/db/t/metadata/snap-1-1-x.avro"));
  EXPECT_FALSE(fs::exists(dir_ / "wh/db/t/metadata/v1.metadata.json"));
  EXPECT_EQ(Call("HEAD", "/v1/namespaces/db/tables/t").status, 404);
  json moved = Body(Call("GET", "/v1/namespaces/archive/tables/t2"));
  EXPECT_EQ(moved["metadata"]["table-uuid"], created["metadata"]["table-uuid"]);
  EXPECT_EQ(moved["metadata"]["location"], created["metadata"]["location"]);  // data in place
  EXPECT_EQ(moved["metadata-location"],
            "file://" + (dir_ / "wh/archive/t2/metadata/v1.metadata.json").string());
  bool retired = false;
  for (const auto& e : fs::directory_iterator(dir_ / "wh/db/t")) {
    retired |= e.path().filename().string().starts_with("metadata.renamed-");
  }
  EXPECT_TRUE(retired);
  // The renamed table takes commits.
  HttpResponse c = Call("POST", "/v1/namespaces/archive/tables/t2",
                        SetProps(moved["metadata"]["table-uuid"], "after"));
  EXPECT_EQ(c.status, 200) << c.body;
}

TEST_F(RestCatalogTest, RegisterWritesTheGivenMetadataAsVersionOne) {
  CreateNamespace({"db"});
  json created = CreateTable("db", "orig");
  std::string location = created["metadata-location"];
  HttpResponse r = Call("POST", "/v1/namespaces/db/register",
                        json{{"name", "copy"}, {"metadata-location", location}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json b = Body(r);
  EXPECT_EQ(b["metadata-location"],
            "file://" + (dir_ / "wh/db/copy/metadata/v1.metadata.json").string());
  EXPECT_EQ(b["metadata"]["location"], created["metadata"]["location"]);
  EXPECT_EQ(ErrorType(Call("POST", "/v1/namespaces/db/register",
                           json{{"name", "copy"}, {"metadata-location", location}}.dump())),
            "AlreadyExistsException");
  HttpResponse over =
      Call("POST", "/v1/namespaces/db/register",
           json{{"name", "copy"}, {"metadata-location", location}, {"overwrite", true}}.dump());
  ASSERT_EQ(over.status, 200) << over.body;
  EXPECT_EQ(Body(over)["metadata-location"],
            "file://" + (dir_ / "wh/db/copy/metadata/v2.metadata.json").string());
  EXPECT_EQ(
      Call(
          "POST", "/v1/namespaces/db/register",
          json{{"name", "x"}, {"metadata-location", "file:///nonexistent/v1.metadata.json"}}.dump())
          .status,
      400);
  EXPECT_EQ(Call("POST", "/v1/namespaces/db/register",
                 json{{"name", "x"}, {"metadata-location", "s3://bucket/v1.metadata.json"}}.dump())
                .status,
            400);
  // Metadata outside the warehouse, or metadata whose table lives outside it.
  fs::create_directories(dir_ / "outside");
  json foreign = Body(Call("GET", "/v1/namespaces/db/tables/orig"))["metadata"];
  { std::ofstream(dir_ / "outside" / "v1.metadata.json") << foreign.dump(); }
  HttpResponse far =
      Call("POST", "/v1/namespaces/db/register",
           json{{"name", "x"},
                {"metadata-location", "file://" + (dir_ / "outside/v1.metadata.json").string()}}
               .dump());
  EXPECT_EQ(far.status, 400) << far.body;
  EXPECT_NE(far.body.find("outside the warehouse"), std::string::npos) << far.body;
  foreign["location"] = "file:///etc";
  { std::ofstream(dir_ / "wh" / "db" / "foreign.metadata.json") << foreign.dump(); }
  HttpResponse elsewhere =
      Call("POST", "/v1/namespaces/db/register",
           json{{"name", "x"},
                {"metadata-location", "file://" + (dir_ / "wh/db/foreign.metadata.json").string()}}
               .dump());
  EXPECT_EQ(elsewhere.status, 400) << elsewhere.body;
  // A commit may not move the table out either.
  HttpResponse moved = Call(
      "POST", "/v1/namespaces/db/tables/orig",
      R"({"requirements": [], "updates": [{"action": "set-location", "location": "file:///tmp/x"}]})");
  EXPECT_EQ(moved.status, 400) << moved.body;
}

TEST_F(RestCatalogTest, TablesWrittenWithoutTheCatalogAreListed) {
  // What the iceberg sink leaves: <warehouse>/<ns>/<table>/metadata, no .namespace.json.
  TableFiles files((dir_ / "wh/lake/raw/events").string());
  json created;
  {
    CreateNamespace({"tmp"});
    created = CreateTable("tmp", "src");
  }
  auto v1 = TableFiles((dir_ / "wh/tmp/src").string()).Current();
  ASSERT_TRUE(v1.ok() && v1->has_value());
  ASSERT_TRUE(files.CommitVersion(1, (*v1)->json).ok());
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces"))["namespaces"],
            json::parse(R"([["lake"], ["tmp"]])"));
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces/lake%1Fraw/tables"))["identifiers"],
            json::parse(R"([{"namespace": ["lake", "raw"], "name": "events"}])"));
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces/lake%1Fraw"))["properties"], json::object());
  EXPECT_EQ(Call("GET", "/v1/namespaces/lake%1Fraw/tables/events").status, 200);
}

TEST_F(RestCatalogTest, StateSurvivesReopening) {
  CreateNamespace({"db"}, {{"k", "v"}});
  json created = CreateTable("db", "t");
  ASSERT_EQ(
      Call("POST", "/v1/namespaces/db/tables/t", SetProps(created["metadata"]["table-uuid"], "p"))
          .status,
      200);
  Reopen();
  EXPECT_EQ(Body(Call("GET", "/v1/namespaces/db"))["properties"]["k"], "v");
  json loaded = Body(Call("GET", "/v1/namespaces/db/tables/t"));
  EXPECT_EQ(loaded["metadata"]["properties"]["p"], "v");
  EXPECT_EQ(loaded["metadata-location"],
            "file://" + (dir_ / "wh/db/t/metadata/v2.metadata.json").string());
}

// A fixed table of who may do what, for the access checks of every route.
class FakeAccess : public CatalogAccess {
 public:
  bool Everything(const std::string& p) const override { return p == "root"; }
  bool SeeNamespace(const std::string& p, const std::vector<std::string>& ns) const override {
    return p == "reader" && ns[0] == "open";
  }
  bool ReadTable(const std::string& p, const std::vector<std::string>& ns,
                 const std::string& t) const override {
    return p == "reader" && ns[0] == "open" && t != "hidden";
  }
  bool WriteTable(const std::string& p, const std::vector<std::string>& ns,
                  const std::string& t) const override {
    return p == "reader" && ns[0] == "open" && t == "events";
  }
  bool CreateIn(const std::string& p, const std::vector<std::string>& ns) const override {
    return p == "reader" && ns.size() == 1 && ns[0] == "open";
  }
};

TEST_F(RestCatalogTest, AccessLimitsEveryRoute) {
  CreateNamespace({"open"});
  CreateNamespace({"closed"});
  json events = CreateTable("open", "events");
  CreateTable("open", "hidden");
  CreateTable("closed", "secret");
  catalog_->SetAccess(std::make_shared<FakeAccess>());
  auto as = [&](const std::string& who, const std::string& method, const std::string& path,
                const std::string& body = "") {
    return catalog_->Handle({.method = method, .path = path, .body = body, .principal = who});
  };

  // Lists keep what the principal may see.
  HttpResponse ns = as("reader", "GET", "/v1/namespaces");
  ASSERT_EQ(ns.status, 200);
  EXPECT_EQ(Body(ns)["namespaces"], json::parse(R"([["open"]])"));
  HttpResponse tables = as("reader", "GET", "/v1/namespaces/open/tables");
  ASSERT_EQ(tables.status, 200);
  EXPECT_EQ(Body(tables)["identifiers"].size(), 1u);
  EXPECT_EQ(as("root", "GET", "/v1/namespaces").status, 200);
  EXPECT_EQ(Body(as("root", "GET", "/v1/namespaces"))["namespaces"].size(), 2u);

  // Refusals: 403 with the spec's error, 401 without a login.
  for (auto [method, path, body] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"GET", "/v1/namespaces/closed", ""},
           {"HEAD", "/v1/namespaces/closed", ""},
           {"GET", "/v1/namespaces/closed/tables", ""},
           {"GET", "/v1/namespaces/closed/tables/secret", ""},
           {"HEAD", "/v1/namespaces/open/tables/hidden", ""},
           {"POST", "/v1/namespaces/open/tables/hidden", SetProps("x", "k")},
           {"DELETE", "/v1/namespaces/closed/tables/secret", ""},
           {"DELETE", "/v1/namespaces/closed", ""},
           {"POST", "/v1/namespaces/closed/properties", R"({"updates": {"a": "b"}})"},
           {"POST", "/v1/namespaces/closed/tables",
            std::string(R"({"name": "t", "schema": )") + kSchema + "}"},
           {"POST", "/v1/namespaces", R"({"namespace": ["new"]})"},
           {"POST", "/v1/tables/rename",
            R"({"source": {"namespace": ["open"], "name": "events"},
                "destination": {"namespace": ["closed"], "name": "moved"}})"}}) {
    HttpResponse r = as("reader", method, path, body);
    EXPECT_EQ(r.status, 403) << method << " " << path << ": " << r.body;
    if (method != "HEAD") {
      EXPECT_EQ(ErrorType(r), "ForbiddenException") << r.body;
    }
    HttpResponse anonymous = as("", method, path, body);
    EXPECT_EQ(anonymous.status, 401) << method << " " << path;
  }
  // What the grants allow.
  EXPECT_EQ(as("reader", "GET", "/v1/namespaces/open").status, 200);
  EXPECT_EQ(as("reader", "GET", "/v1/namespaces/open/tables/events").status, 200);
  std::string uuid = events["metadata"]["table-uuid"];
  EXPECT_EQ(as("reader", "POST", "/v1/namespaces/open/tables/events", SetProps(uuid, "k")).status,
            200);
  EXPECT_EQ(as("reader", "POST", "/v1/namespaces/open/tables",
               std::string(R"({"name": "mine", "schema": )") + kSchema + "}")
                .status,
            200);
  EXPECT_EQ(as("reader", "DELETE", "/v1/namespaces/open/tables/mine").status, 204);
  EXPECT_EQ(as("root", "DELETE", "/v1/namespaces/closed/tables/secret").status, 204);
}

TEST(PercentDecodeTest, DecodesAndRefusesBadEscapes) {
  EXPECT_EQ(*PercentDecode("a%20b%2Fc"), "a b/c");
  EXPECT_EQ(*PercentDecode("a+b"), "a+b");
  EXPECT_FALSE(PercentDecode("%").ok());
  EXPECT_FALSE(PercentDecode("%2").ok());
  EXPECT_FALSE(PercentDecode("%g0").ok());
  EXPECT_EQ(*DecodeNamespace("a%1Fb%1fc"), (std::vector<std::string>{"a", "b", "c"}));
}

}  // namespace
}  // namespace rest_catalog_test
}  // namespace sluice::lake
