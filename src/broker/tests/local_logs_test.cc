// LocalLogs, the catalog both controllers keep their open partition logs in: real logs in
// a temporary directory on the one provisional shard (no server), the cleaner's
// registration following the topic's cleanup.policy.
#include "broker/local_logs.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "broker/metadata_snapshot.h"
#include "storage/testing/batch_builder.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace local_logs_test {
namespace {

using storage::testing::TempDir;

class LocalLogsTest : public ::testing::Test {
 protected:
  LocalLogsOptions Options() {
    LocalLogsOptions o;
    o.data_dir = dir_.path();
    o.executor = &executor_;
    o.files = &files_;
    o.wake_fetches = [this](Partition&) { ++woken_; };
    return o;
  }
  static TopicInfo Topic(const std::string& name, const std::string& policy) {
    TopicInfo t;
    t.name = name;
    t.partitions = 2;
    t.id = kafka::Uuid{1, name.size()};
    t.config.cleanup_policy = policy;
    return t;
  }
  Status OpenAndInstall(LocalLogs& logs, const TopicInfo& t, int32_t p) {
    auto part = logs.Open(t, p, LeaderEpochCache::Owner::kLocal);
    if (!part.ok()) return part.status();
    return logs.Install({t.name, p}, std::move(*part), &t.config);
  }

  TempDir dir_{"local-logs-test"};
  storage::IoExecutor executor_{2};
  storage::FileCache files_{storage::Env::Posix(), 64};
  MetadataPublisher publisher_{"127.0.0.1", 9092};
  Shards shards_{&publisher_};
  int woken_ = 0;
};

TEST_F(LocalLogsTest, OpensPlacesTakesBackAndCloses) {
  LocalLogs logs(Options(), &shards_);
  const TopicInfo t = Topic("events", "delete");
  ASSERT_TRUE(OpenAndInstall(logs, t, 0).ok());
  ASSERT_TRUE(OpenAndInstall(logs, t, 1).ok());
  EXPECT_EQ(logs.count(), 2u);
  EXPECT_TRUE(std::filesystem::is_directory(logs.Dir("events", 1)));
  EXPECT_EQ(logs.Dir("events", 1), dir_.path() + "/events-1");
  ASSERT_NE(logs.LogOf({"events", 0}), nullptr);
  // The same partition twice is refused by its owner.
  auto again = logs.Open(t, 1, LeaderEpochCache::Owner::kLocal);
  EXPECT_FALSE(again.ok() && logs.Install({"events", 1}, std::move(*again), &t.config).ok());

  // Taken back: its waiting fetches look again, the catalog forgets it.
  std::unique_ptr<Partition> taken = logs.Take({"events", 0});
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(woken_, 1);
  EXPECT_EQ(logs.count(), 1u);
  EXPECT_EQ(logs.LogOf({"events", 0}), nullptr);
  EXPECT_TRUE(taken->log->Close().ok());
  EXPECT_EQ(logs.Take({"events", 0}), nullptr);

  EXPECT_TRUE(logs.Close({"events", 1}).ok());
  EXPECT_TRUE(logs.Close({"events", 1}).ok());  // not open: nothing to do
  EXPECT_EQ(logs.count(), 0u);
  // The data stays on disk: removing it is the controllers' decision.
  EXPECT_TRUE(std::filesystem::is_directory(logs.Dir("events", 1)));
  EXPECT_TRUE(logs.CloseAll().ok());
}

TEST_F(LocalLogsTest, TheCleanerTakesOnlyCompactedTopics) {
  LocalLogs logs(Options(), &shards_);
  TopicInfo t = Topic("keyed", "compact");
  ASSERT_TRUE(OpenAndInstall(logs, t, 0).ok());
  EXPECT_TRUE(logs.cleaner()->Status("keyed-0").has_value());
  // A config change to delete unregisters it; back to compact,delete registers it again.
  t.config.cleanup_policy = "delete";
  logs.Reconfigure({"keyed", 0}, t.config);
  EXPECT_FALSE(logs.cleaner()->Status("keyed-0").has_value());
  t.config.cleanup_policy = "compact,delete";
  logs.Reconfigure({"keyed", 0}, t.config);
  EXPECT_TRUE(logs.cleaner()->Status("keyed-0").has_value());
  // No config (a topic the controller no longer knows): not cleaned.
  logs.UpdateCleaner({"keyed", 0}, nullptr);
  EXPECT_FALSE(logs.cleaner()->Status("keyed-0").has_value());
  logs.UpdateCleaner({"keyed", 0}, &t.config);
  // Taken back: unregistered before the log can close under a cleaning.
  std::unique_ptr<Partition> taken = logs.Take({"keyed", 0});
  ASSERT_NE(taken, nullptr);
  EXPECT_FALSE(logs.cleaner()->Status("keyed-0").has_value());
  EXPECT_TRUE(taken->log->Close().ok());
}

TEST_F(LocalLogsTest, RetentionPassesSkipTopicsThatDoNotDelete) {
  LocalLogs logs(Options(), &shards_);
  // Small segments, a retention of one byte: every closed segment may go.
  TopicInfo kept = Topic("kept", "compact");
  TopicInfo aged = Topic("aged", "delete");
  for (TopicInfo* t : {&kept, &aged}) {
    t->config.segment_bytes = 1024;
    t->config.retention_bytes = 1;
    ASSERT_TRUE(OpenAndInstall(logs, *t, 0).ok());
    for (int i = 0; i < 8; ++i) {
      auto batch = storage::testing::MakeBatch(4, 200, 1'700'000'000'000 + i, i);
      ASSERT_TRUE(logs.LogOf({t->name, 0})->Append(batch, {}).ok());
    }
  }
  logs.FlushAll();
  logs.RunRetention([&](const std::string& topic) -> const TopicConfig* {
    return topic == "kept" ? &kept.config : &aged.config;
  });
  EXPECT_GT(logs.LogOf({"aged", 0})->start_offset(), 0);
  EXPECT_EQ(logs.LogOf({"kept", 0})->start_offset(), 0);
  // A topic the controller no longer knows is treated as deleting (as both did).
  logs.RunRetention([](const std::string&) -> const TopicConfig* { return nullptr; });
  EXPECT_GT(logs.LogOf({"kept", 0})->start_offset(), 0);
  EXPECT_TRUE(logs.CloseAll().ok());
  EXPECT_EQ(logs.count(), 0u);
}

}  // namespace
}  // namespace local_logs_test
}  // namespace sluice::broker
