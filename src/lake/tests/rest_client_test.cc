// The REST catalog client against sluice's own REST catalog served over HTTP on loopback
// (a real HttpServer, a real warehouse directory): tables created through it (namespaces
// made as needed), appended to by two writers that race, the config's path prefix, a
// commit whose reply is lost (the outcome re-read, never applied twice), a table replaced
// under a writer, OAuth2 client credentials with a token refused mid-way, and the errors
// of a catalog that is down, refuses, or answers garbage.
#include "lake/rest_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "base/http_server.h"
#include "base/metrics.h"
#include "lake/rest_catalog.h"
#include "lake/table.h"

namespace sluice::lake {
namespace rest_client_test {
namespace {

namespace fs = std::filesystem;

Schema TwoColumns() {
  Schema s;
  s.fields.push_back(NestedField{1, "id", true, Type::Primitive(TypeId::kLong), std::nullopt});
  s.fields.push_back(NestedField{2, "city", false, Type::Primitive(TypeId::kString), std::nullopt});
  return s;
}

DataFile FakeFile(const Table& t, int64_t rows) {
  DataFile f;
  f.file_path = t.metadata().location + "/data/" + NewUuid() + ".parquet";
  f.record_count = rows;
  f.file_size_in_bytes = 100 + rows;
  return f;
}

int64_t TotalRecords(const Table& t) {
  const Snapshot* s = t.metadata().CurrentSnapshot();
  return s == nullptr ? 0 : std::stoll(s->summary.at("total-records"));
}

class RestClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rest_client_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    auto opened = RestCatalog::Open({.warehouse = (dir_ / "wh").string()});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    catalog_ = std::move(opened).value();
  }
  void TearDown() override {
    if (server_) server_->Stop();
    fs::remove_all(dir_);
  }

  // Serves the catalog under /v1/ (and under /v1/<prefix>/ when the config names one);
  // `wrap` may answer a request itself (faults), else nullopt.
  void Serve(std::string prefix = "",
             std::function<std::optional<HttpResponse>(const HttpRequest&)> wrap = {},
             HttpServerOptions options = {}) {
    prefix_ = prefix;
    std::vector<HttpRoute> routes;
    routes.push_back(
        {"/v1/oauth/tokens", [this](const HttpRequest& r) { return IssueToken(r); }, false, true});
    routes.push_back({"/v1/", [this, wrap](const HttpRequest& r) -> HttpResponse {
                        ++requests_;
                        if (wrap) {
                          if (std::optional<HttpResponse> answered = wrap(r)) return *answered;
                        }
                        HttpRequest inner = r;
                        if (inner.path == "/v1/config") {
                          nlohmann::json c = {{"defaults", nlohmann::json::object()},
                                              {"overrides", nlohmann::json::object()}};
                          if (!prefix_.empty()) c["overrides"]["prefix"] = prefix_;
                          return {.status = 200, .body = c.dump()};
                        }
                        if (!prefix_.empty()) {
                          std::string p = "/v1/" + prefix_ + "/";
                          if (!inner.path.starts_with(p)) return {.status = 404, .body = ""};
                          inner.path = "/v1/" + inner.path.substr(p.size());
                        }
                        return catalog_->Handle(inner);
                      }});
    auto started = HttpServer::Start(
        "127.0.0.1:0", registry_, [] { return std::string(); }, std::move(routes),
        std::move(options));
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value();
    uri_ = fmt::format("http://127.0.0.1:{}", server_->port());
  }

  // A token endpoint for client credentials "app:s3cret"; tokens are "t<N>", the current
  // one only.
  HttpResponse IssueToken(const HttpRequest& r) {
    if (token_fails_) return {.status = 503, .body = "down"};
    if (r.body.find("client_id=app") == std::string::npos ||
        r.body.find("client_secret=s3cret") == std::string::npos ||
        r.body.find("grant_type=client_credentials") == std::string::npos) {
      return {.status = 401, .body = R"({"error":"invalid_client","error_description":"no"})"};
    }
    ++tokens_issued_;
    valid_token_ = "t" + std::to_string(tokens_issued_.load());
    return {.status = 200,
            .body = nlohmann::json({{"access_token", valid_token_},
                                    {"token_type", "bearer"},
                                    {"expires_in", 3600}})
                        .dump()};
  }
  HttpServerOptions BearerOnly() {
    HttpServerOptions o;
    o.authenticate = [this](const HttpRequest& r) {
      const std::string* h = r.Header("authorization");
      if (h != nullptr && *h == "Bearer " + valid_token_) return HttpAuthResult{.allowed = true};
      return HttpAuthResult{
          .allowed = false,
          .refusal = {.status = 401, .body = R"({"error":{"message":"login","type":
                                                  "NotAuthorizedException","code":401}})"}};
    };
    return o;
  }

  std::shared_ptr<RestCatalogClient> Connect(RestCatalogConfig c = {}) {
    c.uri = uri_;
    auto client = RestCatalogClient::Connect(c);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? *client : nullptr;
  }

  fs::path dir_;
  std::unique_ptr<RestCatalog> catalog_;
  MetricsRegistry registry_;
  std::unique_ptr<HttpServer> server_;
  std::string uri_;
  std::string prefix_;
  std::atomic<int> requests_{0};
  std::atomic<int> tokens_issued_{0};
  std::string valid_token_ = "none";
  std::atomic<bool> token_fails_{false};
};

TEST_F(RestClientTest, CreatesAppendsAndRacesThroughTheCatalog) {
  Serve("pfx");
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  // The namespace's levels do not exist yet: made on the way.
  auto created = CreateRestTable(client, {"a", "b"}, "events", TwoColumns(), PartitionSpec{}, {});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Table& t = *created;
  EXPECT_TRUE(t.metadata().location.starts_with("file://" + (dir_ / "wh").string()))
      << t.metadata().location;
  EXPECT_TRUE(fs::exists(dir_ / "wh" / "a" / "b" / "events" / "metadata" / "v1.metadata.json"));

  // A second create of the name finds the same table.
  auto again = CreateRestTable(client, {"a", "b"}, "events", TwoColumns(), PartitionSpec{}, {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->metadata().table_uuid, t.metadata().table_uuid);

  // Two writers: the second commits between the first's read and commit.
  auto one = t.Append({FakeFile(t, 10)}, [](const TableMetadata&) {
    return std::map<std::string, std::string>{{"sluice.offsets.g.t", "{\"0\":10}"}};
  });
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  auto other = Table::Open(RestTableStore(client, {"a", "b"}, "events"));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_TRUE(
      other
          ->Append({FakeFile(*other, 5)},
                   [](const TableMetadata&) { return std::map<std::string, std::string>(); })
          .ok());
  // `t` is stale: its commit's requirements fail (409), it re-reads and commits on top.
  auto two = t.Append({FakeFile(t, 7)},
                      [](const TableMetadata&) { return std::map<std::string, std::string>(); });
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(TotalRecords(t), 22);
  EXPECT_EQ(t.NewestSummary("sluice.offsets.g.t"), "{\"0\":10}");  // carried forward

  // What the catalog's files say, read without the client.
  auto direct = Table::Load((dir_ / "wh" / "a" / "b" / "events").string());
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(TotalRecords(*direct), 22);
  EXPECT_EQ(direct->metadata().snapshots.size(), 3u);

  // Listing through the prefix.
  auto namespaces = client->ListNamespaces({"a"});
  ASSERT_TRUE(namespaces.ok()) << namespaces.status().ToString();
  EXPECT_EQ(*namespaces, (std::vector<std::vector<std::string>>{{"a", "b"}}));
  auto tables = client->ListTables({"a", "b"});
  ASSERT_TRUE(tables.ok());
  EXPECT_EQ(*tables, std::vector<std::string>{"events"});
  EXPECT_EQ(client->LoadTable({"a", "b"}, "nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client->ListTables({"zz"}).status().code(), StatusCode::kNotFound);
}

std::string ValueOrError(const Result<std::string>& r) {
  return r.ok() ? *r : r.status().ToString();
}

// write.data.path and write.metadata.path, as another engine may set them on a catalog's
// table: data files and manifests go there; a directory's table keeps its manifests in
// <location>/metadata (Iceberg's Hadoop tables do); bad values are refused by name.
TEST_F(RestClientTest, WritePathPropertiesPlaceDataAndManifests) {
  Serve("");
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  const std::string data = (dir_ / "elsewhere" / "data").string();
  const std::string manifests = (dir_ / "elsewhere" / "meta").string();
  auto created = CreateRestTable(
      client, {"db"}, "placed", TwoColumns(), PartitionSpec{},
      {{"write.data.path", "file://" + data + "/"}, {"write.metadata.path", manifests}});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Table& t = *created;
  EXPECT_EQ(ValueOrError(t.DataDir()), data);
  EXPECT_EQ(ValueOrError(t.ManifestDir()), manifests);
  ASSERT_TRUE(t.Append({FakeFile(t, 3)}, [](const TableMetadata&) {
                 return std::map<std::string, std::string>();
               }).ok());
  const Snapshot* s = t.metadata().CurrentSnapshot();
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->manifest_list.starts_with("file://" + manifests + "/snap-")) << s->manifest_list;
  int avro = 0;
  for (const auto& e : fs::directory_iterator(manifests)) avro += e.path().extension() == ".avro";
  EXPECT_EQ(avro, 2);  // the manifest and the list
  // The catalog's own version files stay under the location.
  EXPECT_TRUE(fs::exists(dir_ / "wh" / "db" / "placed" / "metadata" / "v2.metadata.json"));

  // The same table read as a directory: write.data.path still places data files, the
  // manifests go beside the versions.
  auto direct = Table::Load((dir_ / "wh" / "db" / "placed").string());
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  EXPECT_EQ(ValueOrError(direct->DataDir()), data);
  EXPECT_EQ(ValueOrError(direct->ManifestDir()),
            (dir_ / "wh" / "db" / "placed" / "metadata").string());

  // Values that are no absolute path, or on another storage than the table.
  for (const auto& [key, value, says] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"write.data.path", "relative/dir", "not a local path"},
           {"write.data.path", "s3://bucket/data", "another storage"},
           {"write.metadata.path", "hdfs://nn/x", "not a local path"}}) {
    auto bad = CreateRestTable(client, {"db"}, "bad_" + std::to_string(says.size()) + key,
                               TwoColumns(), PartitionSpec{}, {{key, value}});
    ASSERT_TRUE(bad.ok()) << bad.status().ToString();
    Result<std::string> dir = key == "write.data.path" ? bad->DataDir() : bad->ManifestDir();
    ASSERT_FALSE(dir.ok()) << key << "=" << value;
    EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(dir.status().message().find(key), std::string::npos) << dir.status().ToString();
    EXPECT_NE(dir.status().message().find(says), std::string::npos) << dir.status().ToString();
    if (key == "write.metadata.path") {  // where the manifest would go: nothing written
      EXPECT_FALSE(
          bad->Append({FakeFile(*bad, 1)},
                      [](const TableMetadata&) { return std::map<std::string, std::string>(); })
              .ok());
    }
  }
}

TEST_F(RestClientTest, ACommitWhoseReplyIsLostIsReadBackNotAppliedTwice) {
  std::atomic<int> lose{0};
  Serve("", [&](const HttpRequest& r) -> std::optional<HttpResponse> {
    if (r.method == "POST" && r.path.find("/tables/events") != std::string::npos && lose > 0) {
      --lose;
      HttpResponse done = catalog_->Handle(r);  // the catalog acts ...
      EXPECT_EQ(done.status, 200) << done.body;
      return HttpResponse{.status = 503, .body = "lost"};  // ... and the reply is lost
    }
    return std::nullopt;
  });
  auto client = Connect();
  auto t = CreateRestTable(client, {"db"}, "events", TwoColumns(), PartitionSpec{}, {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  lose = 1;
  auto id = t->Append({FakeFile(*t, 3)},
                      [](const TableMetadata&) { return std::map<std::string, std::string>(); });
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(lose.load(), 0);
  EXPECT_EQ(TotalRecords(*t), 3);
  auto direct = Table::Load((dir_ / "wh" / "db" / "events").string());
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->metadata().snapshots.size(), 1u);
  EXPECT_NE(direct->metadata().FindSnapshot(*id), nullptr);
}

TEST_F(RestClientTest, ATableReplacedUnderAWriterIsNotCommittedTo) {
  Serve();
  auto client = Connect();
  auto t = CreateRestTable(client, {"db"}, "events", TwoColumns(), PartitionSpec{}, {});
  ASSERT_TRUE(t.ok());
  // Dropped and created again by someone else: another uuid.
  ASSERT_EQ(catalog_
                ->Handle({.method = "DELETE",
                          .path = "/v1/namespaces/db/tables/events",
                          .query = {{"purgeRequested", "true"}}})
                .status,
            204);
  auto replaced = CreateRestTable(client, {"db"}, "events", TwoColumns(), PartitionSpec{}, {});
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  auto id = t->Append({FakeFile(*t, 3)},
                      [](const TableMetadata& base) -> Result<std::map<std::string, std::string>> {
                        return std::map<std::string, std::string>();
                      });
  // The stale writer re-reads and sees the new table: its append lands there, never as a
  // commit against the old table's history.
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(t->metadata().table_uuid, replaced->metadata().table_uuid);
}

TEST_F(RestClientTest, OAuthClientCredentialsAndATokenRefusedMidway) {
  Serve("", {}, BearerOnly());
  // Without a login the catalog refuses at connect.
  auto anonymous = RestCatalogClient::Connect({.uri = uri_, .max_retries = 0});
  ASSERT_FALSE(anonymous.ok());
  EXPECT_EQ(anonymous.status().code(), StatusCode::kFailedPrecondition)
      << anonymous.status().ToString();
  // A wrong secret: refused, and the secret is not in the message.
  auto wrong = RestCatalogClient::Connect({.uri = uri_, .credential = "app:WRONGSECRET"});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message().find("WRONGSECRET"), std::string::npos);
  EXPECT_NE(wrong.status().message().find("invalid_client"), std::string::npos)
      << wrong.status().ToString();

  auto client = Connect({.credential = "app:s3cret"});
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(tokens_issued_.load(), 1);
  auto t = CreateRestTable(client, {"db"}, "events", TwoColumns(), PartitionSpec{}, {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // The token stops being valid (revoked, expired early): one 401, a new token, on.
  valid_token_ = "revoked";
  auto id = t->Append({FakeFile(*t, 4)},
                      [](const TableMetadata&) { return std::map<std::string, std::string>(); });
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(tokens_issued_.load(), 2);
  EXPECT_EQ(TotalRecords(*t), 4);

  // A token endpoint that fails is said as such, not as a refused credential.
  token_fails_ = true;
  auto failing =
      RestCatalogClient::Connect({.uri = uri_, .credential = "app:s3cret", .max_retries = 1});
  ASSERT_FALSE(failing.ok());
  EXPECT_EQ(failing.status().code(), StatusCode::kUnavailable) << failing.status().ToString();
  EXPECT_NE(failing.status().message().find("token endpoint"), std::string::npos);
  EXPECT_EQ(failing.status().message().find("s3cret"), std::string::npos);
  token_fails_ = false;

  // A fixed bearer token that the catalog refuses is not retried forever.
  auto bearer = RestCatalogClient::Connect({.uri = uri_, .token = "bogus", .max_retries = 0});
  EXPECT_EQ(bearer.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(bearer.status().message().find("bogus"), std::string::npos);
}

TEST_F(RestClientTest, BadConfigurationAndBadCatalogs) {
  EXPECT_EQ(RestCatalogClient::Connect({.uri = "ftp://x"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RestCatalogClient::Connect({.uri = "http://127.0.0.1:1?x=1"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      RestCatalogClient::Connect({.uri = "http://127.0.0.1:1", .credential = "a:b", .token = "t"})
          .status()
          .code(),
      StatusCode::kInvalidArgument);
  // Nothing listens: a transport error after the retries.
  auto down = RestCatalogClient::Connect({.uri = "http://127.0.0.1:1", .max_retries = 1});
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), StatusCode::kIOError) << down.status().ToString();

  // A catalog that answers garbage: errors, never a crash or a table.
  std::string garbage;
  Serve("", [&](const HttpRequest& r) -> std::optional<HttpResponse> {
    if (r.path == "/v1/config" || garbage.empty()) return std::nullopt;
    return HttpResponse{.status = 200, .body = garbage};
  });
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  for (std::string body :
       {"not json", "[]", "{}", R"({"metadata": 5})", R"({"metadata": {"format-version": 9}})",
        R"({"namespaces": [[1]]})", R"({"identifiers": [{}]})"}) {
    garbage = body;
    EXPECT_FALSE(client->LoadTable({"db"}, "t").ok()) << body;
    EXPECT_FALSE(client->ListNamespaces({}).ok()) << body;
    EXPECT_FALSE(client->ListTables({"db"}).ok()) << body;
  }
}

TEST(RestCatalogConfigTest, TheCatalogSectionOfServesConfig) {
  auto from = [](std::string_view yaml) {
    Result<Config> c = Config::Parse(yaml, "sluice.yaml");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return RestCatalogConfigFrom(*c);
  };
  auto none = from("warehouse: /w\n");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto full = from(
      "catalog:\n  type: rest\n  uri: https://cat/api\n  warehouse: prod\n  token: t\n"
      "  scope: s\n  oauth2_server_uri: https://idp/token\n  request_timeout: 5s\n"
      "  max_retries: 0\n");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_TRUE(full->has_value());
  EXPECT_EQ((*full)->uri, "https://cat/api");
  EXPECT_EQ((*full)->warehouse, "prod");
  EXPECT_EQ((*full)->token, "t");
  EXPECT_EQ((*full)->scope, "s");
  EXPECT_EQ((*full)->oauth2_server_uri, "https://idp/token");
  EXPECT_EQ((*full)->request_timeout, std::chrono::milliseconds(5000));
  EXPECT_EQ((*full)->max_retries, 0);
  const std::pair<const char*, const char*> bad[] = {
      {"catalog:\n  uri: http://x\n", "catalog.type (not set) must be rest"},
      {"catalog:\n  type: glue\n  uri: http://x\n", "must be rest"},
      {"catalog:\n  type: rest\n", "catalog.uri (not set) must be an http"},
      {"catalog:\n  type: rest\n  uri: file:///x\n", "must be an http:// or https:// URL"},
      {"catalog:\n  type: rest\n  uri: http://x\n  credential: a:b\n  token: t\n",
       "set one, not both"},
      {"catalog:\n  type: rest\n  uri: http://x\n  request_timeout: 1ms\n", "from 100ms to 10m"},
      {"catalog:\n  type: rest\n  uri: http://x\n  request_timeout: soon\n",
       "catalog.request_timeout"},
      {"catalog:\n  type: rest\n  uri: http://x\n  max_retries: 1000\n", "catalog.max_retries"},
      {"catalog:\n  type: rest\n  uri: [a, b]\n", "catalog.uri"},
  };
  for (const auto& [yaml, words] : bad) {
    auto r = from(yaml);
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_NE(r.status().message().find(words), std::string::npos)
        << yaml << " -> " << r.status().ToString();
  }
}

}  // namespace
}  // namespace rest_client_test
}  // namespace sluice::lake
