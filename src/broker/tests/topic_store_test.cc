#include "broker/topic_store.h"

#include <gtest/gtest.h>

#include "storage/env.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace topic_store_test {
namespace {

using kafka::ErrorCode;
using storage::testing::ReadFileBytes;
using storage::testing::TempDir;
using storage::testing::WriteFileBytes;

class TopicStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<TopicStore> Open() {
    auto s = TopicStore::Open(dir_.path(), TopicConfig{});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  void WriteMeta(const std::string& text) {
    std::string dir = dir_.path() + "/meta";
    ASSERT_TRUE(storage::Env::Posix()->CreateDirs(dir).ok());
    WriteFileBytes(dir + "/topics.json", std::vector<uint8_t>(text.begin(), text.end()));
  }
  TempDir dir_{"topic-store"};
};

TEST_F(TopicStoreTest, CreatedTopicsSurviveReopenWithTheirIds) {
  kafka::Uuid id;
  {
    auto store = Open();
    TopicInfo info;
    ASSERT_TRUE(store->Create("orders", 3, {{"retention.ms", "1000"}}, false, &info).ok());
    EXPECT_FALSE(info.id.IsZero());
    EXPECT_EQ(info.config.retention_ms, 1000);
    id = info.id;
    ASSERT_TRUE(store->Create("a.b-c_d", 1, {}, false, nullptr).ok());
  }
  auto store = Open();
  const TopicInfo* t = store->Find("orders");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->id, id);
  EXPECT_EQ(t->partitions, 3);
  EXPECT_EQ(t->config.retention_ms, 1000);
  EXPECT_EQ(t->overrides.at("retention.ms"), "1000");
  EXPECT_EQ(store->FindById(id), t);
  EXPECT_EQ(store->List().size(), 2u);
}

TEST_F(TopicStoreTest, RecreatedTopicGetsANewId) {
  auto store = Open();
  TopicInfo first, second;
  ASSERT_TRUE(store->Create("t", 1, {}, false, &first).ok());
  ASSERT_TRUE(store->Delete("t").ok());
  EXPECT_EQ(store->Find("t"), nullptr);
  ASSERT_TRUE(store->Create("t", 1, {}, false, &second).ok());
  EXPECT_NE(first.id, second.id);
}

TEST_F(TopicStoreTest, KafkaErrorsForBadCreates) {
  auto store = Open();
  ASSERT_TRUE(store->Create("t", 1, {}, false, nullptr).ok());
  EXPECT_EQ(store->Create("t", 1, {}, false, nullptr).code, ErrorCode::kTopicAlreadyExists);
  EXPECT_EQ(store->Create("", 1, {}, false, nullptr).code, ErrorCode::kInvalidTopicException);
  EXPECT_EQ(store->Create("..", 1, {}, false, nullptr).code, ErrorCode::kInvalidTopicException);
  EXPECT_EQ(store->Create("bad name", 1, {}, false, nullptr).code,
            ErrorCode::kInvalidTopicException);
  EXPECT_EQ(store->Create(std::string(250, 'x'), 1, {}, false, nullptr).code,
            ErrorCode::kInvalidTopicException);
  EXPECT_EQ(store->Create("zero", 0, {}, false, nullptr).code, ErrorCode::kInvalidPartitions);
  EXPECT_EQ(store->Create("neg", -1, {}, false, nullptr).code, ErrorCode::kInvalidPartitions);
  TopicError e = store->Create("cfg", 1, {{"retention.ms", "soon"}}, false, nullptr);
  EXPECT_EQ(e.code, ErrorCode::kInvalidConfig);
  EXPECT_NE(e.message.find("retention.ms"), std::string::npos) << e.message;
  EXPECT_EQ(store->Create("cfg", 1, {{"no.such.config", "1"}}, false, nullptr).code,
            ErrorCode::kInvalidConfig);
  for (auto [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"cleanup.policy", "shred"},
                                                        {"cleanup.policy", ""},
                                                        {"cleanup.policy", "compact,,delete"},
                                                        {"min.cleanable.dirty.ratio", "1.5"},
                                                        {"min.cleanable.dirty.ratio", "-0.1"},
                                                        {"min.cleanable.dirty.ratio", "half"},
                                                        {"min.compaction.lag.ms", "-1"},
                                                        {"max.compaction.lag.ms", "0"},
                                                        {"delete.retention.ms", "-5"},
                                                        {"min.insync.replicas", "0"},
                                                        {"min.insync.replicas", "-1"},
                                                        {"min.insync.replicas", "two"},
                                                        {"min.insync.replicas", "4294967297"}}) {
    TopicError bad = store->Create("cfg", 1, {{key, value}}, false, nullptr);
    EXPECT_EQ(bad.code, ErrorCode::kInvalidConfig) << key << "=" << value;
    EXPECT_NE(bad.message.find(key), std::string::npos) << bad.message;
  }
  // The lags must be in order.
  EXPECT_EQ(
      store
          ->Create("cfg", 1, {{"min.compaction.lag.ms", "10"}, {"max.compaction.lag.ms", "5"}},
                   false, nullptr)
          .code,
      ErrorCode::kInvalidConfig);
}

TEST_F(TopicStoreTest, MinInsyncReplicas) {
  auto store = Open();
  TopicInfo info;
  ASSERT_TRUE(store->Create("d", 1, {}, false, &info).ok());
  EXPECT_EQ(info.config.min_insync_replicas, 1);  // Kafka's default
  EXPECT_EQ(info.config.ToMap()["min.insync.replicas"], "1");
  ASSERT_TRUE(store->Create("m", 1, {{"min.insync.replicas", "2"}}, false, &info).ok());
  EXPECT_EQ(info.config.min_insync_replicas, 2);
  EXPECT_EQ(info.config.ToMap()["min.insync.replicas"], "2");
}

TEST_F(TopicStoreTest, CompactionConfigs) {
  auto store = Open();
  TopicInfo info;
  ASSERT_TRUE(store
                  ->Create("c", 1,
                           {{"cleanup.policy", "delete, compact"},
                            {"min.cleanable.dirty.ratio", "0.25"},
                            {"min.compaction.lag.ms", "100"},
                            {"max.compaction.lag.ms", "5000"},
                            {"delete.retention.ms", "0"}},
                           false, &info)
                  .ok());
  EXPECT_EQ(info.config.cleanup_policy, "compact,delete");
  EXPECT_TRUE(info.config.compacted());
  EXPECT_TRUE(info.config.deletes());
  EXPECT_DOUBLE_EQ(info.config.min_cleanable_dirty_ratio, 0.25);
  EXPECT_EQ(info.config.min_compaction_lag_ms, 100);
  EXPECT_EQ(info.config.max_compaction_lag_ms, 5000);
  EXPECT_EQ(info.config.delete_retention_ms, 0);
  auto map = info.config.ToMap();
  EXPECT_EQ(map["min.cleanable.dirty.ratio"], "0.25");
  EXPECT_EQ(map["delete.retention.ms"], "0");
  ASSERT_TRUE(store->Create("k", 1, {{"cleanup.policy", "compact"}}, false, &info).ok());
  EXPECT_TRUE(info.config.compacted());
  EXPECT_FALSE(info.config.deletes());
  TopicConfig defaults;
  EXPECT_FALSE(defaults.compacted());
  EXPECT_TRUE(defaults.deletes());
  EXPECT_EQ(defaults.ToMap()["max.compaction.lag.ms"], "9223372036854775807");
  EXPECT_EQ(defaults.ToMap()["delete.retention.ms"], "86400000");
}

// Tiered storage's topic configs (KIP-405's names and checks).
TEST(TopicConfigTest, TieredStorageConfigs) {
  TopicConfig tiered_broker;
  tiered_broker.remote_storage_available = true;
  TopicError err;
  auto c = TopicConfig::Resolve({{"remote.storage.enable", "true"},
                                 {"retention.ms", "86400000"},
                                 {"local.retention.ms", "3600000"},
                                 {"local.retention.bytes", "-2"}},
                                tiered_broker, &err);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->remote_storage_enable);
  EXPECT_EQ(c->EffectiveLocalRetentionMs(), 3600000);
  EXPECT_EQ(c->EffectiveLocalRetentionBytes(), c->retention_bytes);  // -2: as retention
  EXPECT_EQ(c->ToMap()["remote.storage.enable"], "true");
  EXPECT_EQ(c->ToMap()["local.retention.ms"], "3600000");
  // Without remote storage the local limits are the whole log's.
  auto plain = TopicConfig::Resolve({{"local.retention.ms", "1000"}}, tiered_broker, &err);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->EffectiveLocalRetentionMs(), plain->retention_ms);

  auto refused = [&](std::map<std::string, std::string> overrides, const TopicConfig& defaults,
                     const std::string& says) {
    TopicError e;
    auto r = TopicConfig::Resolve(overrides, defaults, &e);
    EXPECT_FALSE(r.ok()) << says;
    EXPECT_EQ(e.code, kafka::ErrorCode::kInvalidConfig) << says;
    EXPECT_NE(e.message.find(says), std::string::npos) << e.message;
  };
  refused({{"remote.storage.enable", "true"}}, TopicConfig{}, "no tiered storage");
  refused({{"remote.storage.enable", "yes"}}, tiered_broker, "true or false");
  refused({{"remote.storage.enable", "true"}, {"cleanup.policy", "compact"}}, tiered_broker,
          "cleanup.policy=compact");
  refused({{"remote.storage.enable", "true"}, {"cleanup.policy", "compact,delete"}}, tiered_broker,
          "cleanup.policy=compact,delete");
  refused(
      {{"remote.storage.enable", "true"}, {"retention.ms", "1000"}, {"local.retention.ms", "2000"}},
      tiered_broker, "must not exceed retention.ms");
  refused(
      {{"remote.storage.enable", "true"}, {"retention.ms", "1000"}, {"local.retention.ms", "-1"}},
      tiered_broker, "must not exceed retention.ms");
  refused({{"remote.storage.enable", "true"},
           {"retention.bytes", "1000"},
           {"local.retention.bytes", "5000"}},
          tiered_broker, "must not exceed retention.bytes");
  refused({{"local.retention.ms", "-3"}}, tiered_broker, "-2 (as retention) or more");
  refused({{"local.retention.bytes", "x"}}, tiered_broker, "-2 (as retention) or more");
  // Forever locally with forever in all is fine.
  EXPECT_TRUE(
      TopicConfig::Resolve(
          {{"remote.storage.enable", "true"}, {"retention.ms", "-1"}, {"local.retention.ms", "-1"}},
          tiered_broker, &err)
          .ok());
}

TEST_F(TopicStoreTest, DotAndUnderscoreNamesCollide) {
  auto store = Open();
  ASSERT_TRUE(store->Create("a.b", 1, {}, false, nullptr).ok());
  TopicError e = store->Create("a_b", 1, {}, false, nullptr);
  EXPECT_EQ(e.code, ErrorCode::kInvalidTopicException);
  EXPECT_NE(e.message.find("collides"), std::string::npos);
}

TEST_F(TopicStoreTest, ValidateOnlyChangesNothing) {
  auto store = Open();
  EXPECT_TRUE(store->Create("t", 4, {}, true, nullptr).ok());
  EXPECT_EQ(store->Find("t"), nullptr);
}

TEST_F(TopicStoreTest, PartitionsOnlyGrow) {
  auto store = Open();
  ASSERT_TRUE(store->Create("t", 2, {}, false, nullptr).ok());
  EXPECT_EQ(store->AddPartitions("t", 2, false).code, ErrorCode::kInvalidPartitions);
  EXPECT_EQ(store->AddPartitions("nope", 3, false).code, ErrorCode::kUnknownTopicOrPartition);
  ASSERT_TRUE(store->AddPartitions("t", 5, false).ok());
  store = Open();
  EXPECT_EQ(store->Find("t")->partitions, 5);
}

TEST_F(TopicStoreTest, IncrementalAndFullConfigChanges) {
  auto store = Open();
  ASSERT_TRUE(store->Create("t", 1, {{"retention.ms", "1000"}}, false, nullptr).ok());
  ASSERT_TRUE(store->SetConfigs("t", {{"segment.bytes", "1048576"}}, false, false).ok());
  EXPECT_EQ(store->Find("t")->config.retention_ms, 1000);
  EXPECT_EQ(store->Find("t")->config.segment_bytes, 1048576);
  ASSERT_TRUE(store->SetConfigs("t", {{"retention.ms", std::nullopt}}, false, false).ok());
  EXPECT_EQ(store->Find("t")->config.retention_ms, TopicConfig{}.retention_ms);
  ASSERT_TRUE(
      store->SetConfigs("t", {{"message.timestamp.type", "LogAppendTime"}}, true, false).ok());
  EXPECT_TRUE(store->Find("t")->config.log_append_time);
  EXPECT_EQ(store->Find("t")->config.segment_bytes, TopicConfig{}.segment_bytes);  // replaced
  EXPECT_EQ(store->SetConfigs("t", {{"segment.bytes", "1"}}, false, false).code,
            ErrorCode::kInvalidConfig);
  EXPECT_EQ(store->Find("t")->overrides.size(), 1u);  // the bad change left nothing behind
}

TEST_F(TopicStoreTest, MalformedFilesAreCorruptionNamingTheFile) {
  const char* cases[] = {
      "not json",
      "[]",
      "{\"version\": 2, \"topics\": []}",
      "{\"version\": 1}",
      "{\"version\": 1, \"topics\": [{\"name\": \"t\"}]}",
      "{\"version\": 1, \"topics\": [{\"name\": \"bad name\", \"id\": "
      "\"00000000-0000-4000-8000-000000000001\", \"partitions\": 1}]}",
      "{\"version\": 1, \"topics\": [{\"name\": \"t\", \"id\": \"nope\", \"partitions\": 1}]}",
      "{\"version\": 1, \"topics\": [{\"name\": \"t\", \"id\": "
      "\"00000000-0000-4000-8000-000000000001\", \"partitions\": 0}]}",
      "{\"version\": 1, \"topics\": [{\"name\": \"t\", \"id\": "
      "\"00000000-0000-4000-8000-000000000001\", \"partitions\": 1, \"configs\": "
      "{\"retention.ms\": 5}}]}",
      "{\"version\": 1, \"topics\": [{\"name\": \"t\", \"id\": "
      "\"00000000-0000-4000-8000-000000000001\", \"partitions\": 1, \"configs\": {\"bogus\": "
      "\"5\"}}]}",
  };
  for (const char* text : cases) {
    WriteMeta(text);
    auto s = TopicStore::Open(dir_.path(), TopicConfig{});
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().code(), StatusCode::kCorruption) << text;
    EXPECT_NE(s.status().message().find("topics.json"), std::string::npos) << s.status().ToString();
  }
}

TEST_F(TopicStoreTest, ConfigMapListsEveryNameResolveAccepts) {
  auto map = TopicConfig{}.ToMap();
  for (const std::string& name : TopicConfig::Names()) EXPECT_EQ(map.count(name), 1u) << name;
  EXPECT_EQ(map.size(), TopicConfig::Names().size());
}

TEST(TopicNameTest, KafkaRules) {
  EXPECT_TRUE(ValidateTopicName("a").ok());
  EXPECT_TRUE(ValidateTopicName(std::string(249, 'z')).ok());
  EXPECT_TRUE(ValidateTopicName("Orders.v1_x-2").ok());
  EXPECT_FALSE(ValidateTopicName("a/b").ok());
  EXPECT_FALSE(ValidateTopicName("ä").ok());
}

TEST(UuidTest, RandomIdsAreVersion4AndDistinct) {
  kafka::Uuid a = RandomUuid(), b = RandomUuid();
  EXPECT_NE(a, b);
  EXPECT_EQ((a.hi >> 12) & 0xf, 4u);
  EXPECT_EQ(a.lo >> 62, 2u);
}

}  // namespace
}  // namespace topic_store_test
}  // namespace sluice::broker
