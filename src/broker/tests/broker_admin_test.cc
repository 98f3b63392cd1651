// Broker admin APIs over real sockets on 127.0.0.1: CreatePartitions, DescribeConfigs,
// AlterConfigs, IncrementalAlterConfigs, DeleteRecords, OffsetForLeaderEpoch, and leader
// epochs across a recovery that cut the log.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "broker/broker.h"
#include "broker/server.h"
#include "broker/tests/broker_test_util.h"
#include "broker/tier_uploader.h"
#include "kafka/protocol/records.h"
#include "storage/batch_header.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace broker_admin_test {
namespace {

using kafka::ApiKey;
using kafka::ErrorCode;
using testing::Bytes;
using testing::Client;

class BrokerAdminTest : public testing::BrokerFixture {
 protected:
  // Record i of the batch is dated base_timestamp + i * step.
  static Bytes Batch(int n, size_t value_bytes = 10, int64_t base_timestamp = 1000,
                     int64_t step = 0) {
    std::string value(value_bytes, 'v');
    std::vector<kafka::RecordInput> recs(n);
    for (int i = 0; i < n; ++i) {
      recs[i].value = kafka::AsBytes(value);
      recs[i].timestamp_delta = i * step;
    }
    kafka::BatchBuilderOptions o;
    o.base_timestamp = base_timestamp;
    return kafka::BuildBatch(o, recs);
  }
  kafka::ProduceResponse::PartitionProduceResponse Produce(Client& c, const std::string& topic,
                                                           int32_t partition, const Bytes& batch) {
    kafka::ProduceRequest req;
    req.acks = -1;
    req.timeout_ms = 5000;
    req.topic_data.push_back({topic, {{partition, std::span<const uint8_t>(batch), {}}}, {}});
    auto resp = c.Call<kafka::ProduceResponse>(ApiKey::kProduce, 9, req);
    return resp.responses.at(0).partition_responses.at(0);
  }
  // Topic "t": tiered, one batch per segment (1 KiB, or `segment_bytes`), every closed
  // segment deleted locally once uploaded, kept remotely whatever its age (the tests'
  // batches are dated 1970).
  void CreateTieredTopic(Client& c, int segment_bytes = 1024) {
    kafka::CreateTopicsRequest create;
    create.topics.push_back({"t",
                             1,
                             -1,
                             {},
                             {{"segment.bytes", std::to_string(segment_bytes), {}},
                              {"remote.storage.enable", "true", {}},
                              {"local.retention.bytes", "1", {}},
                              {"retention.ms", "-1", {}}},
                             {}});
    auto created = c.Call<kafka::CreateTopicsResponse>(ApiKey::kCreateTopics, 7, create);
    ASSERT_EQ(created.topics[0].error_code, ErrorCode::kNone) << *created.topics[0].error_message;
  }
  // A fetch of partition 0 from `offset`; with `max_wait_ms` a long poll for a byte.
  kafka::FetchResponse::PartitionData Fetch(Client& c, const std::string& topic, int64_t offset,
                                            int32_t current_epoch = -1, int32_t max_wait_ms = 0) {
    kafka::FetchRequest req;
    req.max_bytes = 1 << 20;
    req.max_wait_ms = max_wait_ms;
    req.min_bytes = max_wait_ms > 0 ? 1 : 0;
    kafka::FetchRequest::FetchPartition p;
    p.fetch_offset = offset;
    p.current_leader_epoch = current_epoch;
    p.partition_max_bytes = 1 << 20;
    req.topics.push_back({topic, {}, {p}, {}});
    last_fetch_ = c.Call<kafka::FetchResponse>(ApiKey::kFetch, 11, req);
    return last_fetch_.responses.at(0).partitions.at(0);
  }
  int64_t Earliest(Client& c, const std::string& topic, int32_t partition = 0) {
    kafka::ListOffsetsRequest req;
    req.replica_id = -1;
    kafka::ListOffsetsRequest::Partition p;
    p.partition_index = partition;
    p.timestamp = -2;
    req.topics.push_back({topic, {p}, {}});
    return c.Call<kafka::ListOffsetsResponse>(ApiKey::kListOffsets, 7, req)
        .topics.at(0)
        .partitions.at(0)
        .offset;
  }
  // ListOffsets v9 of partition 0 at `timestamp` (or -1 .. -5).
  kafka::ListOffsetsResponse::Partition ListOffset(Client& c, const std::string& topic,
                                                   int64_t timestamp) {
    kafka::ListOffsetsRequest req;
    req.replica_id = -1;
    kafka::ListOffsetsRequest::Partition p;
    p.timestamp = timestamp;
    req.topics.push_back({topic, {p}, {}});
    return c.Call<kafka::ListOffsetsResponse>(ApiKey::kListOffsets, 9, req)
        .topics.at(0)
        .partitions.at(0);
  }
  // Waits until the local log of partition 0 starts at `offset` (tiered: uploaded, then
  // deleted locally); returns where it starts.
  int64_t WaitForLocalStart(Client& c, const std::string& topic, int64_t offset) {
    int64_t at = ListOffset(c, topic, -4).offset;
    for (int i = 0; i < 1000 && at < offset; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      at = ListOffset(c, topic, -4).offset;
    }
    return at;
  }
  kafka::MetadataResponse::Topic Meta(Client& c, const std::string& topic) {
    kafka::MetadataRequest req;
    req.topics.emplace();
    req.topics->push_back({{}, topic, {}});
    return c.Call<kafka::MetadataResponse>(ApiKey::kMetadata, 9, req).topics.at(0);
  }
  kafka::OffsetForLeaderEpochResponse::Partition EpochEnd(Client& c, const std::string& topic,
                                                          int32_t epoch, int32_t current = -1) {
    kafka::OffsetForLeaderEpochRequest req;
    req.replica_id = -1;
    kafka::OffsetForLeaderEpochRequest::Partition p;
    p.current_leader_epoch = current;
    p.leader_epoch = epoch;
    req.topics.push_back({topic, {p}, {}});
    return c.Call<kafka::OffsetForLeaderEpochResponse>(ApiKey::kOffsetForLeaderEpoch, 4, req)
        .topics.at(0)
        .partitions.at(0);
  }
  kafka::DescribeConfigsResponse::Result Describe(
      Client& c, int8_t type, const std::string& name,
      std::optional<std::vector<std::string>> keys = std::nullopt) {
    kafka::DescribeConfigsRequest req;
    req.resources.push_back({type, name, keys, {}});
    req.include_synonyms = true;
    req.include_documentation = true;
    return c.Call<kafka::DescribeConfigsResponse>(ApiKey::kDescribeConfigs, 4, req).results.at(0);
  }
  static const kafka::DescribeConfigsResponse::Config* Find(
      const kafka::DescribeConfigsResponse::Result& r, const std::string& name) {
    for (const auto& c : r.configs) {
      if (c.name == name) return &c;
    }
    return nullptr;
  }
  kafka::AlterConfigsResourceResponse Incremental(Client& c, const std::string& topic,
                                                  const std::string& name, int8_t op,
                                                  std::optional<std::string> value) {
    kafka::IncrementalAlterConfigsRequest req;
    req.resources.push_back({2, topic, {{name, op, value, {}}}, {}});
    return c.Call<kafka::IncrementalAlterConfigsResponse>(ApiKey::kIncrementalAlterConfigs, 1, req)
        .responses.at(0);
  }
  kafka::FetchResponse last_fetch_;
};

TEST_F(BrokerAdminTest, CreatePartitionsGrowsATopic) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  auto call = [&](const std::string& name, int32_t count, bool validate_only = false,
                  std::optional<std::vector<kafka::CreatePartitionsRequest::Assignment>> a = {}) {
    kafka::CreatePartitionsRequest req;
    req.topics.push_back({name, count, std::move(a), {}});
    req.validate_only = validate_only;
    return c.Call<kafka::CreatePartitionsResponse>(ApiKey::kCreatePartitions, 3, req).results.at(0);
  };
  EXPECT_EQ(call("t", 3, /*validate_only=*/true).error_code, ErrorCode::kNone);
  EXPECT_EQ(Meta(c, "t").partitions.size(), 1u);
  EXPECT_EQ(call("t", 3).error_code, ErrorCode::kNone);
  EXPECT_EQ(Meta(c, "t").partitions.size(), 3u);
  EXPECT_EQ(Produce(c, "t", 2, Batch(4)).error_code, ErrorCode::kNone);
  EXPECT_EQ(call("t", 3).error_code, ErrorCode::kInvalidPartitions);
  EXPECT_EQ(call("t", 2).error_code, ErrorCode::kInvalidPartitions);
  EXPECT_EQ(call("nope", 4).error_code, ErrorCode::kUnknownTopicOrPartition);
  using A = kafka::CreatePartitionsRequest::Assignment;
  EXPECT_EQ(call("t", 4, false, std::vector<A>{A{{7}, {}}}).error_code,
            ErrorCode::kInvalidReplicaAssignment);
  EXPECT_EQ(call("t", 4, false, std::vector<A>{A{{1}, {}}}).error_code, ErrorCode::kNone);
  // The new partitions survive a restart.
  Stop();
  Start();
  Client c2(port());
  EXPECT_EQ(Meta(c2, "t").partitions.size(), 4u);
}

// The coordinators' internal topics cannot be deleted, grown or cut (0018, "controller
// (session 14)"): INVALID_TOPIC_EXCEPTION, as Kafka refuses appends to them.
TEST_F(BrokerAdminTest, InternalTopicsCannotBeDeletedGrownOrCut) {
  Client c(port());
  for (const std::string name : {"__consumer_offsets", "__transaction_state"}) {
    kafka::DeleteTopicsRequest del;
    del.topic_names = {name};
    del.timeout_ms = 1000;
    auto d = c.Call<kafka::DeleteTopicsResponse>(ApiKey::kDeleteTopics, 5, del);
    ASSERT_EQ(d.responses.size(), 1u);
    EXPECT_EQ(d.responses[0].error_code, ErrorCode::kInvalidTopicException) << name;
    ASSERT_TRUE(d.responses[0].error_message.has_value());
    EXPECT_NE(d.responses[0].error_message->find("internal topic " + name), std::string::npos);

    kafka::CreatePartitionsRequest grow;
    grow.topics.push_back({name, 8, {}, {}});
    grow.timeout_ms = 1000;
    auto g = c.Call<kafka::CreatePartitionsResponse>(ApiKey::kCreatePartitions, 3, grow);
    EXPECT_EQ(g.results.at(0).error_code, ErrorCode::kInvalidTopicException) << name;

    kafka::DeleteRecordsRequest cut;
    cut.topics.push_back({name, {{0, 0, {}}}, {}});
    cut.timeout_ms = 1000;
    auto r = c.Call<kafka::DeleteRecordsResponse>(ApiKey::kDeleteRecords, 2, cut);
    EXPECT_EQ(r.topics.at(0).partitions.at(0).error_code, ErrorCode::kInvalidTopicException);
  }
  // A user topic is unaffected, and answered at once with timeout_ms 0 too.
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  kafka::DeleteTopicsRequest del;
  del.topic_names = {"t"};
  del.timeout_ms = 0;
  EXPECT_EQ(
      c.Call<kafka::DeleteTopicsResponse>(ApiKey::kDeleteTopics, 5, del).responses.at(0).error_code,
      ErrorCode::kNone);
}

TEST_F(BrokerAdminTest, DescribeConfigsShowsEffectiveValuesAndSources) {
  Client c(port());
  kafka::CreateTopicsRequest create;
  create.topics.push_back({"t", 1, -1, {}, {{"retention.ms", "60000", {}}}, {}});
  ASSERT_EQ(
      c.Call<kafka::CreateTopicsResponse>(ApiKey::kCreateTopics, 7, create).topics[0].error_code,
      ErrorCode::kNone);
  auto r = Describe(c, 2, "t");
  EXPECT_EQ(r.error_code, ErrorCode::kNone);
  EXPECT_EQ(r.configs.size(), TopicConfig::Names().size());
  const auto* ret = Find(r, "retention.ms");
  ASSERT_NE(ret, nullptr);
  EXPECT_EQ(ret->value, "60000");
  EXPECT_EQ(ret->config_source, 1);  // DYNAMIC_TOPIC_CONFIG
  ASSERT_EQ(ret->synonyms.size(), 2u);
  EXPECT_EQ(ret->synonyms[1].name, "log.retention.ms");
  const auto* seg = Find(r, "segment.bytes");
  ASSERT_NE(seg, nullptr);
  EXPECT_EQ(seg->config_source, 5);  // DEFAULT_CONFIG
  EXPECT_EQ(seg->value, std::to_string(1LL << 30));
  EXPECT_TRUE(seg->documentation.has_value());

  auto some = Describe(c, 2, "t", std::vector<std::string>{"cleanup.policy", "no.such"});
  ASSERT_EQ(some.configs.size(), 1u);
  EXPECT_EQ(some.configs[0].value, "delete");

  EXPECT_EQ(Describe(c, 2, "missing").error_code, ErrorCode::kUnknownTopicOrPartition);
  EXPECT_EQ(Describe(c, 9, "x").error_code, ErrorCode::kInvalidRequest);
  auto broker = Describe(c, 4, "1");
  EXPECT_EQ(broker.error_code, ErrorCode::kNone);
  const auto* auto_create = Find(broker, "auto.create.topics.enable");
  ASSERT_NE(auto_create, nullptr);
  EXPECT_EQ(auto_create->value, "false");
  EXPECT_TRUE(auto_create->read_only);
  EXPECT_EQ(Describe(c, 4, "2").error_code, ErrorCode::kInvalidRequest);
  // v0 has is_default instead of sources.
  kafka::DescribeConfigsRequest v0;
  v0.resources.push_back({2, "t", std::nullopt, {}});
  auto old = c.Call<kafka::DescribeConfigsResponse>(ApiKey::kDescribeConfigs, 0, v0).results.at(0);
  EXPECT_FALSE(Find(old, "retention.ms")->is_default);
  EXPECT_TRUE(Find(old, "segment.ms")->is_default);
}

TEST_F(BrokerAdminTest, AlterConfigsChangeWhatProduceAccepts) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  EXPECT_EQ(Produce(c, "t", 0, Batch(1, 2000)).error_code, ErrorCode::kNone);
  EXPECT_EQ(Incremental(c, "t", "max.message.bytes", 0, "1000").error_code, ErrorCode::kNone);
  EXPECT_EQ(Produce(c, "t", 0, Batch(1, 2000)).error_code, ErrorCode::kMessageTooLarge);
  EXPECT_EQ(Find(Describe(c, 2, "t"), "max.message.bytes")->value, "1000");
  // Delete the override: back to the default.
  EXPECT_EQ(Incremental(c, "t", "max.message.bytes", 1, std::nullopt).error_code, ErrorCode::kNone);
  EXPECT_EQ(Produce(c, "t", 0, Batch(1, 2000)).error_code, ErrorCode::kNone);
  // Bad input.
  EXPECT_EQ(Incremental(c, "t", "max.message.bytes", 0, "lots").error_code,
            ErrorCode::kInvalidConfig);
  EXPECT_EQ(Incremental(c, "t", "no.such.config", 0, "1").error_code, ErrorCode::kInvalidConfig);
  EXPECT_EQ(Incremental(c, "t", "retention.ms", 2, "5").error_code, ErrorCode::kInvalidConfig);
  EXPECT_EQ(Incremental(c, "t", "retention.ms", 9, "5").error_code, ErrorCode::kInvalidConfig);
  EXPECT_EQ(Incremental(c, "t", "retention.ms", 0, std::nullopt).error_code,
            ErrorCode::kInvalidConfig);
  EXPECT_EQ(Incremental(c, "gone", "retention.ms", 0, "5").error_code,
            ErrorCode::kUnknownTopicOrPartition);

  // AlterConfigs replaces every override.
  kafka::AlterConfigsRequest alter;
  alter.resources.push_back({2, "t", {{"segment.ms", "3600000", {}}}, {}});
  auto a = c.Call<kafka::AlterConfigsResponse>(ApiKey::kAlterConfigs, 2, alter).responses.at(0);
  EXPECT_EQ(a.error_code, ErrorCode::kNone);
  EXPECT_EQ(Incremental(c, "t", "retention.ms", 0, "77").error_code, ErrorCode::kNone);
  alter.resources[0].configs = {{"segment.ms", "7200000", {}}};
  EXPECT_EQ(c.Call<kafka::AlterConfigsResponse>(ApiKey::kAlterConfigs, 0, alter)
                .responses.at(0)
                .error_code,
            ErrorCode::kNone);
  auto d = Describe(c, 2, "t");
  EXPECT_EQ(Find(d, "segment.ms")->value, "7200000");
  EXPECT_EQ(Find(d, "retention.ms")->config_source, 5);  // the override went
  // Broker configs are static.
  alter.resources[0] = {4, "1", {{"log.retention.ms", "1", {}}}, {}};
  EXPECT_EQ(c.Call<kafka::AlterConfigsResponse>(ApiKey::kAlterConfigs, 1, alter)
                .responses.at(0)
                .error_code,
            ErrorCode::kInvalidRequest);
  // Overrides survive a restart.
  Stop();
  Start();
  Client c2(port());
  EXPECT_EQ(Find(Describe(c2, 2, "t"), "segment.ms")->value, "7200000");
}

TEST_F(BrokerAdminTest, DeleteRecordsMovesTheLogStartDurably) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(Produce(c, "t", 0, Batch(3)).error_code, ErrorCode::kNone);
  auto del = [&](int64_t offset) {
    kafka::DeleteRecordsRequest req;
    req.topics.push_back({"t", {{0, offset, {}}}, {}});
    req.timeout_ms = 1000;
    return c.Call<kafka::DeleteRecordsResponse>(ApiKey::kDeleteRecords, 2, req)
        .topics.at(0)
        .partitions.at(0);
  };
  auto r = del(5);
  EXPECT_EQ(r.error_code, ErrorCode::kNone);
  EXPECT_EQ(r.low_watermark, 5);
  EXPECT_EQ(Earliest(c, "t"), 5);
  EXPECT_EQ(Fetch(c, "t", 4).error_code, ErrorCode::kOffsetOutOfRange);
  auto f = Fetch(c, "t", 5);
  EXPECT_EQ(f.error_code, ErrorCode::kNone);
  EXPECT_EQ(f.log_start_offset, 5);
  EXPECT_EQ(del(13).error_code, ErrorCode::kOffsetOutOfRange);
  EXPECT_EQ(del(-7).error_code, ErrorCode::kOffsetOutOfRange);
  EXPECT_EQ(del(2).low_watermark, 5);  // lower: nothing changes
  Stop();
  Start();
  Client c2(port());
  EXPECT_EQ(Earliest(c2, "t"), 5);
  kafka::DeleteRecordsRequest all;
  all.topics.push_back({"t", {{0, -1, {}}, {3, 0, {}}}, {}});
  auto resp = c2.Call<kafka::DeleteRecordsResponse>(ApiKey::kDeleteRecords, 0, all);
  EXPECT_EQ(resp.topics.at(0).partitions.at(0).low_watermark, 12);  // -1: the high watermark
  EXPECT_EQ(resp.topics.at(0).partitions.at(1).error_code, ErrorCode::kUnknownTopicOrPartition);
}

// The console's topics list reads offsets in the process (InProcessKafka::Watermarks): the
// same log start and high watermark ListOffsets answers, nothing for what is not here.
TEST_F(BrokerAdminTest, InProcessWatermarksAreListOffsetsEarliestAndLatest) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 2).topics[0].error_code, ErrorCode::kNone);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Produce(c, "t", 1, Batch(4)).error_code, ErrorCode::kNone);
  kafka::DeleteRecordsRequest cut;
  cut.topics.push_back({"t", {{1, 6, {}}}, {}});
  cut.timeout_ms = 1000;
  ASSERT_EQ(c.Call<kafka::DeleteRecordsResponse>(ApiKey::kDeleteRecords, 2, cut)
                .topics.at(0)
                .partitions.at(0)
                .error_code,
            ErrorCode::kNone);
  auto got = broker_->in_process().Watermarks("", {{"t", 0}, {"t", 1}, {"t", 2}, {"nope", 0}},
                                              std::chrono::seconds(10));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 4u);
  ASSERT_TRUE((*got)[0].has_value());
  EXPECT_EQ((*got)[0]->earliest, 0);
  EXPECT_EQ((*got)[0]->latest, 0);
  ASSERT_TRUE((*got)[1].has_value());
  EXPECT_EQ((*got)[1]->earliest, Earliest(c, "t", 1));
  EXPECT_EQ((*got)[1]->earliest, 6);
  EXPECT_EQ((*got)[1]->latest, 12);
  EXPECT_FALSE((*got)[2].has_value());  // past the partition count
  EXPECT_FALSE((*got)[3].has_value());  // no such topic
  auto none = broker_->in_process().Watermarks("", {}, std::chrono::seconds(10));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_F(BrokerAdminTest, OffsetForLeaderEpochAnswersForTheCurrentEpoch) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, "t", 0, Batch(5)).error_code, ErrorCode::kNone);
  auto e = EpochEnd(c, "t", 0);
  EXPECT_EQ(e.error_code, ErrorCode::kNone);
  EXPECT_EQ(e.leader_epoch, 0);
  EXPECT_EQ(e.end_offset, 5);
  auto future = EpochEnd(c, "t", 3);
  EXPECT_EQ(future.leader_epoch, -1);
  EXPECT_EQ(future.end_offset, -1);
  EXPECT_EQ(EpochEnd(c, "t", 0, 4).error_code, ErrorCode::kUnknownLeaderEpoch);
  EXPECT_EQ(EpochEnd(c, "nope", 0).error_code, ErrorCode::kUnknownTopicOrPartition);
  EXPECT_EQ(Meta(c, "t").partitions.at(0).leader_epoch, 0);
}

// Recovery cut acknowledged records (a torn tail): the epoch moves on, and a consumer
// that read under the old epoch is fenced until it checks for truncation.
TEST_F(BrokerAdminTest, RecoveryThatCutTheLogBumpsTheLeaderEpoch) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, "t", 0, Batch(5)).error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, "t", 0, Batch(5)).error_code, ErrorCode::kNone);
  Stop();
  std::string seg = (dir_ / "t-0" / "00000000000000000000.log").string();
  auto bytes = storage::testing::ReadFileBytes(seg);
  bytes.resize(bytes.size() - 7);
  storage::testing::WriteFileBytes(seg, bytes);
  Start();
  Client c2(port());
  EXPECT_EQ(Meta(c2, "t").partitions.at(0).leader_epoch, 1);
  EXPECT_EQ(Fetch(c2, "t", 5, /*current_epoch=*/0).error_code, ErrorCode::kFencedLeaderEpoch);
  auto e = EpochEnd(c2, "t", 0);
  EXPECT_EQ(e.leader_epoch, 0);
  EXPECT_EQ(e.end_offset, 5);  // epoch 0 ends where the cut was
  // New appends carry the new epoch, also after another restart.
  ASSERT_EQ(Produce(c2, "t", 0, Batch(2)).error_code, ErrorCode::kNone);
  Stop();
  Start();
  Client c3(port());
  EXPECT_EQ(Meta(c3, "t").partitions.at(0).leader_epoch, 1);
  auto f = Fetch(c3, "t", 5, 1);
  EXPECT_EQ(f.error_code, ErrorCode::kNone);
  EXPECT_EQ(f.high_watermark, 7);
}

TEST_F(BrokerAdminTest, RetentionRunsPeriodically) {
  Stop();
  options_.retention_check_interval_ms = 20;
  Start();
  Client c(port());
  kafka::CreateTopicsRequest create;
  create.topics.push_back(
      {"t", 1, -1, {}, {{"segment.bytes", "1024", {}}, {"retention.bytes", "2048", {}}}, {}});
  ASSERT_EQ(
      c.Call<kafka::CreateTopicsResponse>(ApiKey::kCreateTopics, 7, create).topics[0].error_code,
      ErrorCode::kNone);
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(Produce(c, "t", 0, Batch(5, 100)).error_code, ErrorCode::kNone);
  int64_t earliest = 0;
  for (int i = 0; i < 500 && earliest == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    earliest = Earliest(c, "t");
  }
  EXPECT_GT(earliest, 0) << "no retention pass deleted a segment";
}

// A RemoteStore in memory, for the uploader inside a real broker.
class MemoryStore : public RemoteStore {
 public:
  Status Upload(const std::string& local_path, const std::string& key) const override {
    std::ifstream in(local_path, std::ios::binary);
    if (!in) return NotFoundError("{}: cannot open", local_path);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return Put(key, bytes);
  }
  Status Put(const std::string& key, std::string_view bytes) const override {
    std::lock_guard<std::mutex> lock(mu_);
    objects_[key] = std::string(bytes);
    return Status::OK();
  }
  Result<std::string> Get(const std::string& key) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return NotFoundError("{}", key);
    return it->second;
  }
  Result<std::vector<std::string>> List(const std::string& prefix) const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [k, v] : objects_) {
      if (k.starts_with(prefix)) out.push_back(k);
    }
    return out;
  }
  Status Delete(const std::string& key) const override {
    std::lock_guard<std::mutex> lock(mu_);
    objects_.erase(key);
    return Status::OK();
  }
  // A copy in a file under the temporary directory, removed when its last holder lets go.
  // Held (Hold), it waits for Release.
  Result<Copy> Fetch(const std::string& key, uint64_t) const override {
    return FetchRange(key, 0, std::string::npos);
  }
  Result<Copy> FetchRange(const std::string& key, uint64_t offset, uint64_t length) const override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      released_.wait(lock, [&] { return !held_; });
    }
    ASSIGN_OR_RETURN(std::string whole, Get(key));
    const std::string bytes = whole.substr(std::min<size_t>(offset, whole.size()), length);
    fetches_.fetch_add(1);
    if (length != std::string::npos) chunks_.fetch_add(1);
    const std::filesystem::path path =
        std::filesystem::temp_directory_path() /
        fmt::format("sluice-memory-store-{}-{}", ::getpid(), copies_.fetch_add(1));
    std::ofstream(path, std::ios::binary) << bytes;
    auto hold = std::shared_ptr<const void>(nullptr, [path](const void*) {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    });
    return Copy{path.string(), hold};
  }
  int64_t fetches() const { return fetches_.load(); }
  int64_t chunks() const { return chunks_.load(); }  // FetchRange calls
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
    released_.notify_all();
  }
  std::string Describe() const override { return "memory"; }
  size_t Count(std::string_view suffix) const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& [k, v] : objects_) n += k.ends_with(suffix);
    return n;
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable released_;
  bool held_ = false;  // guarded by mu_
  mutable std::map<std::string, std::string> objects_;
  mutable std::atomic<int64_t> copies_{0}, fetches_{0}, chunks_{0};
};

// (base offset, next offset) of every batch in a fetch's records.
std::vector<std::pair<int64_t, int64_t>> BatchesOf(const kafka::FetchResponse::PartitionData& p) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (!p.records.inline_bytes.has_value()) return out;
  const std::span<const uint8_t> b = *p.records.inline_bytes;
  for (size_t at = 0; at + 27 <= b.size();) {
    const int64_t base = static_cast<int64_t>(storage::LoadBE64(b.data() + at));
    const int32_t length = static_cast<int32_t>(storage::LoadBE32(b.data() + at + 8));
    const int32_t last_delta = static_cast<int32_t>(storage::LoadBE32(b.data() + at + 23));
    out.emplace_back(base, base + last_delta + 1);
    at += 12 + static_cast<size_t>(length);
  }
  return out;
}

// Options for a broker tiering to a new in-memory store, retention checked often.
std::shared_ptr<MemoryStore> TieredWithMemoryStore(BrokerOptions& options) {
  auto store = std::make_shared<MemoryStore>();
  options.remote_store = store;
  options.topic_defaults.remote_storage_available = true;
  options.retention_check_interval_ms = 20;
  return store;
}

// A tiered topic keeps only local.retention.bytes on disk once its segments are uploaded;
// the offsets below the local start are fetched from the store, batch for batch as they
// were produced; ListOffsets -2 answers the remote start, -4 the local one.
TEST_F(BrokerAdminTest, TieredOffsetsBelowTheLocalStartAreFetchedFromTheStore) {
  Stop();
  auto store = TieredWithMemoryStore(options_);
  Start();
  Client c(port());
  CreateTieredTopic(c);
  // Batch i holds offsets [5i, 5i + 5) dated 10000 + 100i + 10j; batch 7's are the largest.
  for (int i = 0; i < 20; ++i) {
    const int64_t base_ts = i == 7 ? 50000 : 10000 + 100 * i;
    ASSERT_EQ(Produce(c, "t", 0, Batch(5, 100, base_ts, 10)).error_code, ErrorCode::kNone);
  }
  auto list = [&](int64_t timestamp) {
    kafka::ListOffsetsRequest req;
    req.replica_id = -1;
    kafka::ListOffsetsRequest::Partition p;
    p.timestamp = timestamp;
    req.topics.push_back({"t", {p}, {}});
    return c.Call<kafka::ListOffsetsResponse>(ApiKey::kListOffsets, 9, req)
        .topics.at(0)
        .partitions.at(0);
  };
  auto list_offsets = [&](int64_t timestamp) { return list(timestamp).offset; };
  // (offset, timestamp) of a lookup by time; the error code as the offset when it fails.
  auto by_time = [&](int64_t timestamp) {
    const kafka::ListOffsetsResponse::Partition p = list(timestamp);
    if (p.error_code != ErrorCode::kNone) {
      return std::make_pair(int64_t(p.error_code), int64_t{-9});
    }
    return std::make_pair(p.offset, p.timestamp);
  };
  // One batch per segment: 19 closed segments are uploaded, then deleted locally.
  int64_t local_start = 0;
  for (int i = 0; i < 1000 && local_start < 95; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    local_start = list_offsets(-4);
  }
  ASSERT_EQ(local_start, 95) << "the uploaded segments were not deleted locally";
  EXPECT_EQ(list_offsets(-2), 0);
  EXPECT_EQ(list_offsets(-5), 94);
  EXPECT_EQ(list_offsets(-1), 100);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "t-0" / "00000000000000000000.log"));

  // By time (design 0025, decision 6): the first record dated at or past the time, from
  // the store below the local start; -3 the first record with the largest date.
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(by_time(0), P(0, 10000));
  EXPECT_EQ(by_time(10000), P(0, 10000));
  EXPECT_EQ(by_time(10325), P(18, 10330));
  EXPECT_EQ(by_time(20000), P(35, 50000));
  EXPECT_EQ(by_time(-3), P(39, 50040));
  EXPECT_EQ(by_time(11910), P(35, 50000));  // Kafka's order: the first segment reaching it
  EXPECT_EQ(by_time(60000), P(-1, -1));
  EXPECT_EQ(list(10325).leader_epoch, 0);

  // Every offset, from the store below 95 and the disk from there, in order.
  int64_t next = 0;
  while (next < 100) {
    const kafka::FetchResponse::PartitionData p = Fetch(c, "t", next);
    ASSERT_EQ(p.error_code, ErrorCode::kNone) << "at offset " << next;
    EXPECT_EQ(p.log_start_offset, 0);
    EXPECT_EQ(p.high_watermark, 100);
    const auto batches = BatchesOf(p);
    ASSERT_FALSE(batches.empty()) << "nothing at offset " << next;
    for (const auto& [base, end] : batches) {
      ASSERT_EQ(base, next);
      next = end;
    }
  }
  EXPECT_EQ(next, 100);
  EXPECT_GE(store->fetches(), 19);
  // An offset inside a remote batch answers the batch holding it.
  const auto mid = BatchesOf(Fetch(c, "t", 47));
  ASSERT_FALSE(mid.empty());
  EXPECT_EQ(mid.front().first, 45);

  // DeleteRecords below the local start: the earliest offset moves at once, the offsets
  // below it are out of range, and the remote segments wholly below it are deleted.
  kafka::DeleteRecordsRequest del;
  del.topics.push_back({"t", {{0, 50, {}}}, {}});
  del.timeout_ms = 5000;
  auto deleted = c.Call<kafka::DeleteRecordsResponse>(ApiKey::kDeleteRecords, 2, del);
  EXPECT_EQ(deleted.topics.at(0).partitions.at(0).error_code, ErrorCode::kNone);
  EXPECT_EQ(deleted.topics.at(0).partitions.at(0).low_watermark, 50);
  EXPECT_EQ(list_offsets(-2), 50);
  EXPECT_EQ(by_time(10000), P(50, 11000));  // never below the log start
  EXPECT_EQ(by_time(-3), P(99, 11940));     // batch 7 is gone
  EXPECT_EQ(by_time(11910), P(96, 11910));  // local
  EXPECT_EQ(Fetch(c, "t", 47).error_code, ErrorCode::kOffsetOutOfRange);
  EXPECT_EQ(BatchesOf(Fetch(c, "t", 50)).front().first, 50);
  for (int i = 0; i < 1000 && store->Count(".manifest.json") > 9; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(store->Count(".manifest.json"), 9u);  // [50, 95) of the 19

  // The store down (its objects gone): a storage error, not a wrong answer or a hang.
  const Result<std::vector<std::string>> keys = store->List("");
  ASSERT_TRUE(keys.ok());
  for (const std::string& k : *keys) {
    if (k.ends_with(".log")) {
      ASSERT_TRUE(store->Delete(k).ok());
    }
  }
  EXPECT_EQ(Fetch(c, "t", 60).error_code, ErrorCode::kKafkaStorageError);
  EXPECT_EQ(by_time(11200).first, int64_t(ErrorCode::kKafkaStorageError));
  EXPECT_EQ(Fetch(c, "t", 96).error_code, ErrorCode::kNone);  // local offsets still read
  EXPECT_EQ(by_time(11910), P(96, 11910));
}

// An idempotent producer whose batches are all in segments deleted locally (uploaded,
// then local.retention.bytes) is known after a restart: the uploader's producer snapshot
// (design 0025, decision 8) rebuilds it, so its next batch is taken and a retry of an old
// one is a duplicate, not UNKNOWN_PRODUCER_ID.
TEST_F(BrokerAdminTest, ATieredLogsProducersSurviveARestartWithTheirSegmentsGone) {
  Stop();
  auto store = TieredWithMemoryStore(options_);
  Start();
  auto client = std::make_unique<Client>(port());
  CreateTieredTopic(*client);
  auto idempotent = [](int32_t sequence) {
    std::string value(100, 'v');
    std::vector<kafka::RecordInput> recs(5);
    for (auto& r : recs) r.value = kafka::AsBytes(value);
    kafka::BatchBuilderOptions o;
    o.base_timestamp = 1000;
    o.producer_id = 77;
    o.producer_epoch = 0;
    o.base_sequence = sequence;
    return kafka::BuildBatch(o, recs);
  };
  // Producer 77 writes [0, 95); another (not idempotent) the last batch, so only
  // segments that leave the disk hold 77's batches.
  for (int i = 0; i < 19; ++i) {
    ASSERT_EQ(Produce(*client, "t", 0, idempotent(i * 5)).error_code, ErrorCode::kNone);
  }
  ASSERT_EQ(Produce(*client, "t", 0, Batch(5, 100)).error_code, ErrorCode::kNone);
  ASSERT_EQ(WaitForLocalStart(*client, "t", 95), 95);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "t-0" / TierUploader::kProducerSnapshotFile));
  EXPECT_EQ(store->Count(".producers"), 19u);

  client.reset();
  Stop();
  Start();
  client = std::make_unique<Client>(port());
  const auto retry = Produce(*client, "t", 0, idempotent(90));  // the last batch of 77's
  EXPECT_EQ(retry.error_code, ErrorCode::kNone);
  EXPECT_EQ(retry.base_offset, 90);  // a duplicate: its offsets, not new ones
  const auto next = Produce(*client, "t", 0, idempotent(95));
  EXPECT_EQ(next.error_code, ErrorCode::kNone);
  EXPECT_EQ(next.base_offset, 100);
  EXPECT_EQ(Produce(*client, "t", 0, idempotent(100)).base_offset, 105);

  // Without the snapshot the same restart forgets 77 (what the snapshot is for).
  client.reset();
  Stop();
  std::filesystem::remove(dir_ / "t-0" / TierUploader::kProducerSnapshotFile);
  Start();
  client = std::make_unique<Client>(port());
  EXPECT_NE(Produce(*client, "t", 0, idempotent(90)).error_code, ErrorCode::kNone);
}

// Remote segments larger than tiered_storage.chunk_bytes are downloaded a chunk at a time
// (design 0025, decision 10): every offset still reads from 0 in order, across chunks and
// segments, and a lookup by time walks the chunks.
TEST_F(BrokerAdminTest, TieredSegmentsAreReadInChunks) {
  Stop();
  auto store = TieredWithMemoryStore(options_);
  options_.tiered_chunk_bytes = 4096;
  Start();
  Client c(port());
  CreateTieredTopic(c, 65536);
  // Batch i: offsets [5i, 5i + 5), dated 10000 + i; about 600 bytes, a hundred a segment.
  constexpr int kBatches = 300;
  for (int i = 0; i < kBatches; ++i) {
    ASSERT_EQ(Produce(c, "t", 0, Batch(5, 100, 10000 + i)).error_code, ErrorCode::kNone);
  }
  const int64_t local_start = WaitForLocalStart(c, "t", 1000);
  ASSERT_GE(local_start, 1000) << "two segments should have left the disk";
  const int64_t fetches_before = store->chunks();
  int64_t offset = 0;
  for (int i = 0; i < 1000 && offset < kBatches * 5; ++i) {
    const auto p = Fetch(c, "t", offset);
    ASSERT_EQ(p.error_code, ErrorCode::kNone) << "at " << offset;
    for (const auto& [base, next] : BatchesOf(p)) {
      ASSERT_EQ(base, offset) << "a batch missing or repeated";
      offset = next;
    }
  }
  EXPECT_EQ(offset, kBatches * 5);
  // Chunks, not whole segments: several downloads per remote segment.
  EXPECT_GT(store->chunks() - fetches_before, 2 * store->Count(".manifest.json"));
  // By time, in a remote segment's middle: batch 150, its first record.
  const auto found = ListOffset(c, "t", 10150);
  EXPECT_EQ(found.error_code, ErrorCode::kNone);
  EXPECT_EQ(found.offset, 750);
  EXPECT_EQ(found.timestamp, 10150);
}

// A slow store does not hold a fetch past tiered_storage.remote_fetch_max_wait_ms: the fetch
// answers without the remote partition (no records, no error) while the download goes on,
// and a waiting fetch answers as soon as the download lands, not at its max_wait_ms.
TEST_F(BrokerAdminTest, ASlowStoreDoesNotHoldAFetchPastTheRemoteDeadline) {
  Stop();
  auto store = TieredWithMemoryStore(options_);
  options_.remote_fetch_max_wait_ms = 100;
  Start();
  Client c(port());
  CreateTieredTopic(c);
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(Produce(c, "t", 0, Batch(5, 100)).error_code, ErrorCode::kNone);
  ASSERT_EQ(WaitForLocalStart(c, "t", 20), 20);
  store->Hold();
  struct Releaser {
    MemoryStore* store;
    ~Releaser() { store->Release(); }
  } releaser{store.get()};
  const auto quick = Fetch(c, "t", 0);
  EXPECT_EQ(quick.error_code, ErrorCode::kNone);
  EXPECT_TRUE(BatchesOf(quick).empty());
  EXPECT_EQ(quick.high_watermark, 25);
  EXPECT_EQ(quick.log_start_offset, 0);
  // Local offsets are not held by the store.
  EXPECT_EQ(BatchesOf(Fetch(c, "t", 20)), (std::vector<std::pair<int64_t, int64_t>>{{20, 25}}));
  // A long poll of a minute (past the test client's 20 s patience) answers once the store
  // lets the download through.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    store->Release();
  });
  const auto waited = Fetch(c, "t", 0, -1, 60'000);
  release.join();
  EXPECT_EQ(waited.error_code, ErrorCode::kNone);
  ASSERT_FALSE(BatchesOf(waited).empty());
  EXPECT_EQ(BatchesOf(waited).front(), std::make_pair(int64_t{0}, int64_t{5}));
}

// Each uploaded segment records its leader epochs (design 0025, decision 4): the manifest
// its own, `.epochs` the partition's checkpoint up to its end; a lookup by time answered
// from a remote segment takes its epoch from there, also when the local checkpoint lost
// the epochs of the segments that left the disk.
TEST_F(BrokerAdminTest, TieredSegmentsCarryTheirLeaderEpochs) {
  Stop();
  auto store = TieredWithMemoryStore(options_);
  Start();
  auto client = std::make_unique<Client>(port());
  CreateTieredTopic(*client);
  // Batch i: offsets [5i, 5i + 5), dated 10000 + 100i; one per segment.
  auto produce = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      ASSERT_EQ(Produce(*client, "t", 0, Batch(5, 100, 10000 + 100 * i)).error_code,
                ErrorCode::kNone);
    }
  };
  produce(0, 5);  // epoch 0
  ASSERT_EQ(WaitForLocalStart(*client, "t", 20), 20);
  client.reset();
  Stop();
  std::filesystem::remove(dir_ / "meta" / "clean_shutdown");  // an unclean stop: epoch 1
  Start();
  client = std::make_unique<Client>(port());
  ASSERT_EQ(Meta(*client, "t").partitions.at(0).leader_epoch, 1);
  produce(5, 10);  // epoch 1 from offset 25
  ASSERT_EQ(WaitForLocalStart(*client, "t", 45), 45);

  std::map<int64_t, nlohmann::json> manifests;  // by base offset
  const Result<std::vector<std::string>> keys = store->List("");
  ASSERT_TRUE(keys.ok() && !keys->empty());
  for (const std::string& k : *keys) {
    if (!k.ends_with(".manifest.json")) continue;
    nlohmann::json m = nlohmann::json::parse(*store->Get(k));
    manifests[m["base_offset"].get<int64_t>()] = m;
  }
  ASSERT_EQ(manifests.size(), 9u);
  EXPECT_EQ(manifests[0]["leader_epoch"], 0);
  EXPECT_EQ(manifests[0]["epochs"], nlohmann::json::parse("[[0, 0]]"));
  EXPECT_EQ(manifests[20]["leader_epoch"], 0);
  EXPECT_EQ(manifests[25]["leader_epoch"], 1);
  EXPECT_EQ(manifests[25]["epochs"], nlohmann::json::parse("[[1, 25]]"));
  // The `.epochs` a manifest names ("" when none).
  const std::string prefix = keys->front().substr(0, keys->front().rfind('/') + 1);
  auto epochs_file = [&](int64_t base) {
    for (const auto& f : manifests[base]["files"]) {
      if (f.get<std::string>().ends_with(".epochs"))
        return *store->Get(prefix + f.get<std::string>());
    }
    return std::string();
  };
  EXPECT_EQ(epochs_file(40), "0\n2\n0 0\n1 25\n");
  EXPECT_EQ(epochs_file(10), "0\n1\n0 0\n");

  auto by_time = [&](int64_t timestamp) {
    const kafka::ListOffsetsResponse::Partition p = ListOffset(*client, "t", timestamp);
    EXPECT_EQ(p.error_code, ErrorCode::kNone);
    return std::make_pair(p.offset, p.leader_epoch);
  };
  EXPECT_EQ(by_time(10100), std::make_pair(int64_t{5}, 0));
  EXPECT_EQ(by_time(10600), std::make_pair(int64_t{30}, 1));
  // The local checkpoint rebuilt from the local log knows only epoch 1; the remote
  // segments still answer with their own.
  client.reset();
  Stop();
  std::filesystem::remove(dir_ / "t-0" / kLeaderEpochFile);
  Start();
  client = std::make_unique<Client>(port());
  for (int i = 0; i < 1000 && ListOffset(*client, "t", -2).offset != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(by_time(10100), std::make_pair(int64_t{5}, 0));
  EXPECT_EQ(by_time(10600), std::make_pair(int64_t{30}, 1));
  // Epochs a manifest holds that do not fit its segment are not believed: the local ones
  // answer (the segment still reads).
  client.reset();
  Stop();
  for (const char* bad : {"[[0, 6]]", "[[0, 5], [0, 7]]", "\"x\"", "[[-1, 5]]", "[[0]]"}) {
    for (const std::string& k : *keys) {
      if (!k.ends_with(".manifest.json")) continue;
      nlohmann::json m = nlohmann::json::parse(*store->Get(k));
      if (m["base_offset"] != 5) continue;
      m["epochs"] = nlohmann::json::parse(bad);
      ASSERT_TRUE(store->Put(k, m.dump()).ok());
    }
    Start();
    client = std::make_unique<Client>(port());
    for (int i = 0; i < 1000 && ListOffset(*client, "t", -2).offset != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(by_time(10100), std::make_pair(int64_t{5}, 1)) << bad;
    EXPECT_EQ(by_time(10000), std::make_pair(int64_t{0}, 0)) << bad;
    client.reset();
    Stop();
  }
  Start();
}

// A tiered topic's closed segments go to the store; ListOffsets -5 (LATEST_TIERED, KIP-1005)
// answers the last offset uploaded, -1 before any and for an untiered topic; deleting the
// topic deletes its remote segments.
TEST_F(BrokerAdminTest, TieredSegmentsAreUploadedAndListOffsetsLatestTieredSaysHowFar) {
  Stop();
  auto store = std::make_shared<MemoryStore>();
  options_.remote_store = store;
  options_.topic_defaults.remote_storage_available = true;
  Start();
  Client c(port());
  kafka::CreateTopicsRequest create;
  create.topics.push_back(
      {"t", 1, -1, {}, {{"segment.bytes", "1024", {}}, {"remote.storage.enable", "true", {}}}, {}});
  create.topics.push_back({"plain", 1, -1, {}, {{"segment.bytes", "1024", {}}}, {}});
  auto created = c.Call<kafka::CreateTopicsResponse>(ApiKey::kCreateTopics, 7, create);
  ASSERT_EQ(created.topics[0].error_code, ErrorCode::kNone) << *created.topics[0].error_message;
  ASSERT_EQ(created.topics[1].error_code, ErrorCode::kNone);
  auto latest_tiered = [&](const std::string& topic) {
    kafka::ListOffsetsRequest req;
    req.replica_id = -1;
    kafka::ListOffsetsRequest::Partition p;
    p.timestamp = -5;
    req.topics.push_back({topic, {p}, {}});
    return c.Call<kafka::ListOffsetsResponse>(ApiKey::kListOffsets, 9, req)
        .topics.at(0)
        .partitions.at(0)
        .offset;
  };
  EXPECT_EQ(latest_tiered("t"), -1);
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(Produce(c, "t", 0, Batch(5, 100)).error_code, ErrorCode::kNone);
    ASSERT_EQ(Produce(c, "plain", 0, Batch(5, 100)).error_code, ErrorCode::kNone);
  }
  // Batches of 5 records, about 600 bytes: a segment holds one batch; 19 close.
  int64_t tiered = -1;
  for (int i = 0; i < 1000 && tiered < 94; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    tiered = latest_tiered("t");
  }
  EXPECT_EQ(tiered, 94);  // the last offset of the last closed segment
  EXPECT_EQ(store->Count(".manifest.json"), 19u);
  EXPECT_EQ(store->Count(".log"), 19u);  // none of "plain", nor the active segment
  EXPECT_EQ(latest_tiered("plain"), -1);

  // What a crash mid-upload leaves (a segment's file without a manifest, past the last
  // manifest) is deleted when the partition is registered again after a restart.
  std::string prefix;
  const Result<std::vector<std::string>> listed = store->List("");
  ASSERT_TRUE(listed.ok());
  for (const std::string& k : *listed) {
    if (k.ends_with(".manifest.json")) prefix = k.substr(0, k.rfind('/') + 1);
  }
  ASSERT_FALSE(prefix.empty());
  const std::string stray = prefix + "00000000000000000095-feedfacefeedface.log";
  Stop();
  ASSERT_TRUE(store->Put(stray, "half an upload").ok());
  Start();
  Client c2(port());
  for (int i = 0; i < 1000 && store->Get(stray).ok(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(store->Get(stray).ok()) << "an interrupted upload's object stayed";
  EXPECT_EQ(store->Count(".manifest.json"), 19u);  // the real ones kept

  // Deleting the topic deletes its remote segments.
  kafka::DeleteTopicsRequest del;
  del.topic_names = {"t"};
  del.timeout_ms = 10000;
  ASSERT_EQ(c2.Call<kafka::DeleteTopicsResponse>(ApiKey::kDeleteTopics, 5, del)
                .responses.at(0)
                .error_code,
            ErrorCode::kNone);
  for (int i = 0; i < 1000 && store->Count("") > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(store->Count(""), 0u) << "a deleted topic's remote objects stayed";
}

TEST_F(BrokerAdminTest, MetadataAutoCreatesTopicsOnlyWhenEnabled) {
  Client c(port());
  EXPECT_EQ(Meta(c, "auto").error_code, ErrorCode::kUnknownTopicOrPartition);
  Stop();
  options_.auto_create_topics = true;
  options_.num_partitions = 3;
  Start();
  Client c2(port());
  auto m = Meta(c2, "auto");
  EXPECT_EQ(m.error_code, ErrorCode::kNone);
  EXPECT_EQ(m.partitions.size(), 3u);
  EXPECT_EQ(Produce(c2, "auto", 2, Batch(1)).error_code, ErrorCode::kNone);
  // A client that disallows it (v4+), and invalid names, create nothing.
  kafka::MetadataRequest req;
  req.topics.emplace();
  req.topics->push_back({{}, "not-allowed", {}});
  req.allow_auto_topic_creation = false;
  EXPECT_EQ(c2.Call<kafka::MetadataResponse>(ApiKey::kMetadata, 9, req).topics.at(0).error_code,
            ErrorCode::kUnknownTopicOrPartition);
  EXPECT_EQ(Meta(c2, "bad/name").error_code, ErrorCode::kInvalidTopicException);
}

// A partition with much data takes at most partition_max_bytes of a response: the others
// still get theirs (Kafka's fetch fairness without sessions).
TEST_F(BrokerAdminTest, LargePartitionDoesNotStarveOthers) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 2).topics[0].error_code, ErrorCode::kNone);
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(Produce(c, "t", 0, Batch(10, 1000)).error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, "t", 1, Batch(2)).error_code, ErrorCode::kNone);
  kafka::FetchRequest req;
  req.max_bytes = 1 << 20;
  kafka::FetchRequest::FetchPartition p0, p1;
  p0.partition = 0;
  p0.partition_max_bytes = 16 * 1024;
  p1.partition = 1;
  p1.partition_max_bytes = 16 * 1024;
  req.topics.push_back({"t", {}, {p0, p1}, {}});
  auto resp = c.Call<kafka::FetchResponse>(ApiKey::kFetch, 11, req);
  const auto& parts = resp.responses.at(0).partitions;
  ASSERT_EQ(parts.size(), 2u);
  ASSERT_TRUE(parts[0].records.inline_bytes.has_value());
  ASSERT_TRUE(parts[1].records.inline_bytes.has_value());
  EXPECT_LE(parts[0].records.inline_bytes->size(), 16u * 1024 + 11000);  // whole batches
  EXPECT_GT(parts[1].records.inline_bytes->size(), 0u);
  // A response limit smaller than the first partition's data still answers with it, and
  // no more.
  req.max_bytes = 1;
  auto small = c.Call<kafka::FetchResponse>(ApiKey::kFetch, 11, req);
  EXPECT_GT(small.responses.at(0).partitions.at(0).records.inline_bytes->size(), 0u);
  EXPECT_EQ(small.responses.at(0).partitions.at(1).records.inline_bytes->size(), 0u);
}

// A waiting fetch with min_bytes over two partitions (and one listed twice) must stay one
// waiter however many appends wake it (the review found it multiplying itself).
TEST_F(BrokerAdminTest, WaitingFetchStaysOneWaiterAcrossManyAppends) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 2).topics[0].error_code, ErrorCode::kNone);
  Client consumer(port());
  kafka::FetchRequest req;
  req.max_wait_ms = 600'000;
  req.min_bytes = 100 << 20;
  req.max_bytes = 1 << 20;
  kafka::FetchRequest::FetchPartition p0, p1;
  p0.partition_max_bytes = p1.partition_max_bytes = 1 << 20;
  p1.partition = 1;
  req.topics.push_back({"t", {}, {p0, p1, p0}, {}});
  ASSERT_TRUE(consumer.SendRequest(ApiKey::kFetch, 11, 9, req));
  while (broker_->waiting_fetch_count() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Bytes b = Batch(1);
  for (int i = 0; i < 60; ++i) {
    kafka::ProduceRequest produce;
    produce.acks = 1;
    produce.timeout_ms = 5000;
    produce.topic_data.push_back({"t", {{i % 2, std::span<const uint8_t>(b), {}}}, {}});
    auto r = c.Call<kafka::ProduceResponse>(ApiKey::kProduce, 9, produce);
    ASSERT_EQ(r.responses.at(0).partition_responses.at(0).error_code, ErrorCode::kNone);
  }
  // Other clients are served promptly, and the fetch is registered once per partition.
  EXPECT_EQ(Meta(c, "t").partitions.size(), 2u);
  for (int i = 0; i < 1000 && broker_->waiting_fetch_count() > 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_LE(broker_->waiting_fetch_count(), 2u);
}

TEST_F(BrokerAdminTest, InternalTopicsAreNeverAutoCreated) {
  Stop();
  options_.auto_create_topics = true;
  Start();
  Client c(port());
  EXPECT_EQ(Meta(c, "__consumer_offsets").error_code, ErrorCode::kUnknownTopicOrPartition);
  EXPECT_EQ(Meta(c, "__transaction_state").error_code, ErrorCode::kUnknownTopicOrPartition);
}

// Any config the broker accepts lets it start again.
TEST_F(BrokerAdminTest, AcceptedConfigsNeverStopARestart) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  EXPECT_EQ(Incremental(c, "t", "max.message.bytes", 0, "10").error_code, ErrorCode::kNone);
  EXPECT_EQ(Incremental(c, "t", "segment.bytes", 0, "2100000000").error_code,
            ErrorCode::kInvalidConfig);
  EXPECT_EQ(Incremental(c, "t", "segment.bytes", 0, std::to_string(kMaxSegmentBytes)).error_code,
            ErrorCode::kNone);
  EXPECT_EQ(
      Incremental(c, "t", "max.message.bytes", 0, std::to_string(kMaxTopicMessageBytes)).error_code,
      ErrorCode::kNone);
  Stop();
  Start();
  Client c2(port());
  EXPECT_EQ(Meta(c2, "t").error_code, ErrorCode::kNone);
}

TEST_F(BrokerAdminTest, ListOffsetsByTimestampNeverAnswersBelowTheLogStart) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, "t", 0, Batch(10)).error_code, ErrorCode::kNone);
  kafka::DeleteRecordsRequest del;
  del.topics.push_back({"t", {{0, 5, {}}}, {}});
  ASSERT_EQ(c.Call<kafka::DeleteRecordsResponse>(ApiKey::kDeleteRecords, 2, del)
                .topics[0]
                .partitions[0]
                .error_code,
            ErrorCode::kNone);
  auto at = [&](int64_t ts, int16_t version = 9) {
    kafka::ListOffsetsRequest req;
    req.replica_id = -1;
    kafka::ListOffsetsRequest::Partition p;
    p.timestamp = ts;
    req.topics.push_back({"t", {p}, {}});
    return c.Call<kafka::ListOffsetsResponse>(ApiKey::kListOffsets, version, req)
        .topics.at(0)
        .partitions.at(0);
  };
  EXPECT_EQ(at(0).offset, 5);
  EXPECT_EQ(at(-4).offset, 5);   // EARLIEST_LOCAL: the log start without tiered storage
  EXPECT_EQ(at(-5).offset, -1);  // LATEST_TIERED: nothing is tiered
  EXPECT_EQ(at(-4, 7).error_code, ErrorCode::kInvalidRequest);  // not defined before v8
}

// The last run died (no clean-shutdown marker): every non-empty partition's epoch moves
// on, even when its files end at a batch boundary.
TEST_F(BrokerAdminTest, UncleanStopBumpsLeaderEpochs) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, "t", 0, Batch(5)).error_code, ErrorCode::kNone);
  Stop();
  Start();
  Client c2(port());
  EXPECT_EQ(Meta(c2, "t").partitions.at(0).leader_epoch, 0);  // a clean stop changes nothing
  Stop();
  std::filesystem::remove(dir_ / "meta" / "clean_shutdown");
  Start();
  Client c3(port());
  EXPECT_EQ(Meta(c3, "t").partitions.at(0).leader_epoch, 1);
  auto e = EpochEnd(c3, "t", 0);
  EXPECT_EQ(e.leader_epoch, 0);
  EXPECT_EQ(e.end_offset, 5);
}

}  // namespace
}  // namespace broker_admin_test
}  // namespace sluice::broker
