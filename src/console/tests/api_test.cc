// ConsoleApi's answers to bad input, before any broker is asked: the broker address given
// is one nobody listens on, so a request that got past the checks would fail with a
// Kafka error instead (and does, in the last test). Requests against a real broker are in
// tests/integration/console_api_test.py.
#include "console/api.h"

#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

#include "console/openapi.h"

namespace sluice::console {
namespace {

class ApiTest : public ::testing::Test {
 protected:
  ApiTest()
      : api_(ConsoleApiOptions{.client_for =
                                   [](const std::string&) {
                                     return kafka::client::Config{
                                         {"bootstrap.servers", "127.0.0.1:1"},
                                         {"socket.connection.setup.timeout.ms", "1000"}};
                                   },
                               .metrics = &registry_,
                               .kafka_timeout = std::chrono::milliseconds(700)}) {}

  HttpResponse Ask(std::string method, std::string path, std::string body = "",
                   std::map<std::string, std::string> query = {}) {
    HttpRequest r;
    r.method = std::move(method);
    r.path = std::move(path);
    r.body = std::move(body);
    r.query = std::move(query);
    return api_.Handle(r);
  }

  // The error code of a JSON error answer.
  static std::string Code(const HttpResponse& r) {
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_discarded() || !j.contains("error")) return "(not an error: " + r.body + ")";
    return j["error"]["code"].get<std::string>();
  }

  MetricsRegistry registry_;
  ConsoleApi api_;
};

TEST_F(ApiTest, OpenApiIsJsonNamingEveryPath) {
  HttpResponse r = Ask("GET", "/api/v1/openapi.json");
  EXPECT_EQ(r.status, 200);
  auto doc = nlohmann::json::parse(r.body, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["openapi"], "3.0.3");
  for (const char* p : {"/api/v1/cluster",
                        "/api/v1/overview",
                        "/api/v1/topics",
                        "/api/v1/topics/{topic}",
                        "/api/v1/topics/{topic}/messages",
                        "/api/v1/topics/{topic}/messages/live",
                        "/api/v1/groups",
                        "/api/v1/groups/{group}/reset-offsets",
                        "/api/v1/groups/{group}/history",
                        "/api/v1/pipelines",
                        "/api/v1/pipelines/{pipeline}",
                        "/api/v1/pipelines/{pipeline}/stop",
                        "/api/v1/pipelines/{pipeline}/start",
                        "/api/v1/pipelines/{pipeline}/history",
                        "/api/v1/sql",
                        "/api/v1/sql/{query_id}",
                        "/api/v1/sql/download",
                        "/api/v1/sql/schema",
                        "/api/v1/tables",
                        "/api/v1/tables/{namespace}/{table}",
                        "/api/v1/tables/{namespace}/{table}/files"}) {
    EXPECT_TRUE(doc["paths"].contains(p)) << p;
  }
  EXPECT_EQ(Ask("POST", "/api/v1/openapi.json").status, 405);
}

TEST_F(ApiTest, SqlAndTablesSayWhenTheyAreOff) {
  // No query server and no warehouse in this process: said so, not a generic 404.
  EXPECT_EQ(Code(Ask("POST", "/api/v1/sql", R"({"sql": "SELECT 1"})")), "SQL_OFF");
  EXPECT_EQ(Code(Ask("GET", "/api/v1/tables")), "TABLES_OFF");
  EXPECT_EQ(Code(Ask("GET", "/api/v1/tables/a/b")), "TABLES_OFF");
}

TEST_F(ApiTest, UnknownPathsAndMethods) {
  EXPECT_EQ(Ask("GET", "/api/v1/nope").status, 404);
  EXPECT_EQ(Code(Ask("GET", "/api/v1/nope")), "NOT_FOUND");
  EXPECT_EQ(Ask("GET", "/api/v1/topics/t/nope").status, 404);
  EXPECT_EQ(Ask("PUT", "/api/v1/topics").status, 405);
  EXPECT_EQ(Ask("POST", "/api/v1/cluster").status, 405);
  EXPECT_EQ(Ask("GET", "/api/v1/topics/%zz").status, 400);  // a bad escape
  EXPECT_EQ(Ask("GET", "/api/v1/topics/%2").status, 400);   // a cut one
  EXPECT_EQ(Ask("GET", "/api/v1/topics/").status, 400);     // no name
  EXPECT_EQ(Ask("DELETE", "/api/v1/groups/").status, 400);
}

TEST_F(ApiTest, CreateTopicBodies) {
  for (const char* body :
       {"", "not json", "[1]", "{\"name\": 5}", "{\"name\": \"\"}",
        "{\"name\": \"t\", \"partitions\": \"3\"}", "{\"name\": \"t\", \"partitions\": 0}",
        "{\"name\": \"t\", \"partitions\": -5}", "{\"name\": \"t\", \"partitions\": 1.5}",
        "{\"name\": \"t\", \"replication_factor\": 0}", "{\"name\": \"t\", \"configs\": [1]}",
        "{\"name\": \"t\", \"configs\": {\"a\": {\"b\": 1}}}", "{\"name\": \"t\", \"extra\": 1}",
        "{\"name\": \"t\""}) {
    HttpResponse r = Ask("POST", "/api/v1/topics", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
  }
  EXPECT_EQ(Code(Ask("POST", "/api/v1/topics", "{\"name\": \"t\", \"partitions\": 0}")),
            "INVALID_PARTITIONS");
  EXPECT_EQ(Code(Ask("POST", "/api/v1/topics", "{\"name\": \"t\", \"extra\": 1}")),
            "INVALID_REQUEST");
}

TEST_F(ApiTest, OtherBodiesAndParameters) {
  EXPECT_EQ(Ask("POST", "/api/v1/topics/t/partitions", "{}").status, 400);
  EXPECT_EQ(Ask("POST", "/api/v1/topics/t/partitions", "{\"count\": 0}").status, 400);
  EXPECT_EQ(Ask("PUT", "/api/v1/topics/t/configs", "{}").status, 400);
  EXPECT_EQ(Ask("PUT", "/api/v1/topics/t/configs", "{\"delete\": \"a\"}").status, 400);
  EXPECT_EQ(Ask("PUT", "/api/v1/topics/t/configs", "{\"delete\": [1]}").status, 400);
  EXPECT_EQ(Ask("POST", "/api/v1/topics/t/messages", "{\"value\": 5}").status, 400);
  EXPECT_EQ(Ask("POST", "/api/v1/topics/t/messages", "{\"headers\": [\"a\"]}").status, 400);
  EXPECT_EQ(Ask("POST", "/api/v1/topics/t/messages", "{\"partition\": -2}").status, 400);
  for (const auto& q :
       std::vector<std::map<std::string, std::string>>{{{"limit", "0"}},
                                                       {{"limit", "1001"}},
                                                       {{"limit", "ten"}},
                                                       {{"partition", "-2"}},
                                                       {{"offset", "-1"}},
                                                       {{"offset", "1"}, {"timestamp", "1"}},
                                                       {{"start", "middle"}},
                                                       {{"order", "up"}},
                                                       {{"binary", "oct"}},
                                                       {{"timestamp", "x"}}}) {
    HttpResponse r = Ask("GET", "/api/v1/topics/t/messages", "", q);
    EXPECT_EQ(r.status, 400) << q.begin()->first << "=" << q.begin()->second << " -> " << r.body;
  }
  for (const char* body : {"{}", "{\"topic\": \"t\"}", "{\"topic\": \"t\", \"to\": \"middle\"}",
                           "{\"topic\": \"t\", \"to\": \"offset\"}",
                           "{\"topic\": \"t\", \"to\": \"timestamp\", \"timestamp\": -1}",
                           "{\"topic\": \"t\", \"to\": \"latest\", \"partitions\": [-1]}",
                           "{\"topic\": \"t\", \"to\": \"latest\", \"dry_run\": \"yes\"}",
                           "{\"topic\": \"t\", \"to\": \"latest\", \"force\": true}"}) {
    HttpResponse r = Ask("POST", "/api/v1/groups/g/reset-offsets", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
  }
}

TEST_F(ApiTest, PipelineFilesAreCheckedLineByLine) {
  const std::string good = R"(pipeline:
  name: cities
  batch_size: 10
  source:
    type: kafka
    kafka:
      brokers: [127.0.0.1:1]
      group_id: g
      auto_offset_reset: earliest
      topics: [events]
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT city, count(*) AS n FROM batch GROUP BY city
  sink:
    type: console
)";
  HttpResponse r = Ask("POST", "/api/v1/pipelines/validate", nlohmann::json{{"yaml", good}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = nlohmann::json::parse(r.body);
  EXPECT_TRUE(j["valid"]) << r.body;
  EXPECT_EQ(j["name"], "cities");
  EXPECT_EQ(j["topics"], nlohmann::json::array({"events"}));
  EXPECT_TRUE(j["problems"].empty());

  // Two mistakes, each on its line.
  std::string bad = good;
  bad.replace(bad.find("batch_size: 10"), 14, "batch_size: ten");
  bad.replace(bad.find("type: console"), 13, "type: nowhere");
  r = Ask("POST", "/api/v1/pipelines/validate", nlohmann::json{{"yaml", bad}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  j = nlohmann::json::parse(r.body);
  EXPECT_FALSE(j["valid"]);
  std::set<int> lines;
  for (const auto& p : j["problems"]) {
    if (p["line"].is_number()) lines.insert(p["line"].get<int>());
    EXPECT_FALSE(p["message"].get<std::string>().empty());
  }
  EXPECT_TRUE(lines.contains(3)) << r.body;   // batch_size
  EXPECT_TRUE(lines.contains(15)) << r.body;  // sink.type

  // A YAML syntax error: its line, the column left out of the message.
  r = Ask("POST", "/api/v1/pipelines/validate",
          nlohmann::json{{"yaml", "pipeline:\n  name: x\n  source: [1,\n"}}.dump());
  j = nlohmann::json::parse(r.body);
  ASSERT_FALSE(j["problems"].empty()) << r.body;
  EXPECT_TRUE(j["problems"][0]["line"].is_number()) << r.body;
  EXPECT_FALSE(
      std::isdigit(static_cast<unsigned char>(j["problems"][0]["message"].get<std::string>()[0])))
      << r.body;
  for (const char* text : {"", "[1, 2", "just text", "pipeline: [1]"}) {
    r = Ask("POST", "/api/v1/pipelines/validate", nlohmann::json{{"yaml", text}}.dump());
    ASSERT_EQ(r.status, 200) << text << " -> " << r.body;
    j = nlohmann::json::parse(r.body);
    EXPECT_FALSE(j["valid"]) << text;
    EXPECT_FALSE(j["problems"].empty()) << text;
  }
  EXPECT_EQ(Ask("POST", "/api/v1/pipelines/validate", "{}").status, 400);
  EXPECT_EQ(Ask("POST", "/api/v1/pipelines/validate", "{\"yaml\": 5}").status, 400);
  EXPECT_EQ(Ask("GET", "/api/v1/pipelines/validate").status, 405);
  // A preview of a file that does not check says why, before any broker is asked.
  r = Ask("POST", "/api/v1/pipelines/preview", nlohmann::json{{"yaml", bad}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Code(r), "INVALID_PIPELINE");
  EXPECT_EQ(
      Ask("POST", "/api/v1/pipelines/preview", nlohmann::json{{"yaml", good}, {"limit", 0}}.dump())
          .status,
      400);
}

TEST_F(ApiTest, WithoutAPipelinesFolder) {
  HttpResponse r = Ask("GET", "/api/v1/pipelines");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Code(r), "PIPELINES_OFF");
  EXPECT_EQ(Code(Ask("PUT", "/api/v1/pipelines/x", "{\"yaml\": \"\"}")), "PIPELINES_OFF");
}

TEST(ConsoleRefusalTest, BeyondLoopbackWithoutTlsOrWithoutALoginWhereKafkaWantsOne) {
  // http_login, kafka_needs_login, loopback, tls
  EXPECT_EQ(ConsoleRefusalFor(false, false, true, false).code, "");
  EXPECT_EQ(ConsoleRefusalFor(true, true, true, false).code, "");
  EXPECT_EQ(ConsoleRefusalFor(true, true, false, true).code, "");
  EXPECT_EQ(ConsoleRefusalFor(false, true, true, false).code, "CONSOLE_NEEDS_LOGIN");
  EXPECT_EQ(ConsoleRefusalFor(false, true, false, true).code, "CONSOLE_NEEDS_LOGIN");
  // Beyond this machine without TLS, logins or not.
  for (bool login : {false, true}) {
    ConsoleRefusal r = ConsoleRefusalFor(login, false, false, false);
    EXPECT_EQ(r.code, "CONSOLE_NEEDS_TLS");
    EXPECT_NE(r.message.find("http.tls"), std::string::npos) << r.message;
  }
}

TEST(PipelineNameTest, FileNamesOnly) {
  for (const char* ok : {"a", "cities", "my-pipeline_2.v1"})
    EXPECT_TRUE(ValidPipelineName(ok)) << ok;
  EXPECT_TRUE(ValidPipelineName(std::string(100, 'x')));
  for (const char* bad : {"", ".hidden", "a/b", "..", "a b", "é", "a\\b", "a:b"}) {
    EXPECT_FALSE(ValidPipelineName(bad)) << bad;
  }
  EXPECT_FALSE(ValidPipelineName(std::string(101, 'x')));
}

TEST_F(ApiTest, AnUnreachableBrokerIsAGatewayError) {
  HttpResponse r = Ask("GET", "/api/v1/topics/t");
  EXPECT_GE(r.status, 500) << r.body;
  EXPECT_NE(Code(r).find("not an error"), 0u) << r.body;
}

}  // namespace
}  // namespace sluice::console
