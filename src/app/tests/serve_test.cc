// ServeProcess in-process: the keys every module reads are known and nothing else is; the
// broker, the HTTP port and the query server start from one Config and stop in order.
#include "app/serve.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "broker/service.h"
#include "kafka/client/admin.h"
#include "storage/testing/files.h"

namespace sluice::app {
namespace {

using namespace std::chrono_literals;

Config LoopbackConfig(const std::string& data_dir) {
  Config c;
  c.Set("kafka.addr", "127.0.0.1:0", "test");
  c.Set("http.addr", "127.0.0.1:0", "test");
  c.Set("query.pg_addr", "127.0.0.1:0", "test");
  c.Set("schema_registry.addr", "127.0.0.1:0", "test");
  c.Set("data_dir", data_dir, "test");
  c.Set("shards", "2", "test");
  return c;
}

TEST(ServeConfigKeysTest, GatherEveryModulesKeys) {
  std::vector<std::string_view> keys = ServeConfigKeys();
  for (std::string_view want :
       {"kafka.addr", "storage.flush.ms", "sasl.users", "groups.max_size",
        "topics.defaults.retention.ms", "query.memory_limit", "query.pg_addr", "http.addr",
        "warehouse", "schema_registry.addr"}) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), want), keys.end()) << want;
  }
}

TEST(ServeProcessTest, UnknownKeyIsRefusedNamingItAndWhereItWasSet) {
  storage::testing::TempDir dir("sluice-app");
  Config c = LoopbackConfig(dir.path() + "/data");
  c.Set("query.memory_limt", "1GiB", "sluice.yaml:7");
  auto p = ServeProcess::Start(c, {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("query.memory_limt"), std::string::npos)
      << p.status().message();
  EXPECT_NE(p.status().message().find("sluice.yaml:7"), std::string::npos) << p.status().message();
}

TEST(ServeProcessTest, WarehouseWithoutTheHttpPortIsRefused) {
  storage::testing::TempDir dir("sluice-app");
  Config c = LoopbackConfig(dir.path() + "/data");
  c.Set("http.addr", "off", "--http-addr");
  c.Set("warehouse", dir.path() + "/lake", "--warehouse");
  auto p = ServeProcess::Start(c, {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("needs the HTTP port"), std::string::npos)
      << p.status().message();
}

// --check-config: the settings are checked as Start checks them, what would run is said,
// and nothing is made or listened on.
TEST(ServeProcessTest, CheckOnlyChecksSaysAndMakesNothing) {
  storage::testing::TempDir dir("sluice-app");
  const std::string data = dir.path() + "/data";
  std::vector<std::string> said;
  ServeOptions options;
  options.check_only = true;
  options.on_banner = [&](const std::string& line) { said.push_back(line); };
  auto p = ServeProcess::Start(LoopbackConfig(data), options);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, nullptr);
  EXPECT_FALSE(std::filesystem::exists(data));
  const std::string all = fmt::format("{}", fmt::join(said, "\n"));
  EXPECT_NE(all.find("Kafka on 127.0.0.1:0"), std::string::npos) << all;
  EXPECT_NE(all.find("Postgres wire protocol on 127.0.0.1:0"), std::string::npos) << all;
  EXPECT_NE(all.find("does not exist yet"), std::string::npos) << all;

  // What Start refuses, the check refuses, with the key and where it was set.
  const std::vector<std::tuple<std::string, std::string, std::string>> bad = {
      {"http.addr", "localhost", "http.addr"},
      {"schema_registry.addr", "127.0.0.1:99999", "schema_registry.addr"},
      {"log.format", "xml", "log.format"},
      {"log.level", "loud", "log.level"},
      {"storage.flush.ms", "soon", "storage.flush.ms"},
      {"query.memory_limt", "1GiB", "query.memory_limt"}};
  for (const auto& [key, value, named] : bad) {
    Config c = LoopbackConfig(data);
    c.Set(key, value, "sluice.yaml:3");
    auto r = ServeProcess::Start(c, options);
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find(named), std::string::npos) << r.status().message();
  }
  // A pipelines folder named and missing is refused, as at start.
  ServeOptions named = options;
  named.pipelines_dir = dir.path() + "/no-such-folder";
  EXPECT_FALSE(ServeProcess::Start(LoopbackConfig(data), named).ok());
  EXPECT_FALSE(std::filesystem::exists(data));
}

// /readyz: not ready while starting and from the start of Stop; ready in between.
TEST(ServeProcessTest, ReadinessFollowsStartAndStop) {
  storage::testing::TempDir dir("sluice-app");
  auto p = ServeProcess::Start(LoopbackConfig(dir.path() + "/data"), {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->Readiness(), "");
  ASSERT_TRUE((*p)->Stop().ok());
  EXPECT_EQ((*p)->Readiness(), "stopping");
}

TEST(ServeProcessTest, StartsEveryPartAnnouncesItAndStops) {
  storage::testing::TempDir dir("sluice-app");
  std::vector<std::string> banner;
  ServeOptions options;
  options.on_banner = [&](const std::string& line) { banner.push_back(line); };
  auto p = ServeProcess::Start(LoopbackConfig(dir.path() + "/data"), options);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_GT((*p)->kafka_port(), 0);
  EXPECT_GT((*p)->http_port(), 0);
  EXPECT_GT((*p)->pg_port(), 0);
  // The embedded defaults: a pipelines folder and a warehouse under the data directory.
  ASSERT_NE((*p)->pipelines(), nullptr);
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() + "/data/pipelines"));
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() + "/data/warehouse"));
  ASSERT_EQ(banner.size(), 7u) << fmt::format("{}", fmt::join(banner, "\n"));
  EXPECT_EQ(banner[0].rfind("serving Kafka on 127.0.0.1:" + std::to_string((*p)->kafka_port()), 0),
            0u)
      << banner[0];
  EXPECT_GT((*p)->schema_registry_port(), 0);
  EXPECT_EQ(banner[1],
            "Schema Registry on http://127.0.0.1:" + std::to_string((*p)->schema_registry_port()));
  EXPECT_EQ(banner[2], "running 0 pipeline(s) from " + dir.path() + "/data/pipelines");
  EXPECT_EQ(banner[3].rfind("metrics on http://127.0.0.1:", 0), 0u) << banner[3];
  EXPECT_EQ(banner[4].rfind("console on http://127.0.0.1:", 0), 0u) << banner[4];
  EXPECT_EQ(banner[5].rfind("Iceberg REST catalog on http://127.0.0.1:", 0), 0u) << banner[5];
  EXPECT_EQ(banner[6].rfind("Postgres wire protocol on 127.0.0.1:", 0), 0u) << banner[6];

  // A real client sees the broker.
  auto admin = kafka::client::Admin::Create(
      {{"bootstrap.servers", "127.0.0.1:" + std::to_string((*p)->kafka_port())}});
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->CreateTopic("t", 3, 1, {}, 30s).ok());
  auto count = (*admin)->PartitionCount("t", 30s);
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(*count, 3);
  admin->reset();
  EXPECT_TRUE((*p)->Stop().ok());
  EXPECT_TRUE((*p)->Stop().ok());  // idempotent
}

}  // namespace
}  // namespace sluice::app
