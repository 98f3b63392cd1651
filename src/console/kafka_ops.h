// KafkaOps: the topic, message and consumer-group operations of the console's /api/v1 and
// of `sluice topic|group|cluster`, as a Kafka client of any cluster (librdkafka's admin API,
// a consumer without a group, a producer): docs/design/0026-console.md, decisions 1-4.
// Nothing here knows sluice's broker; errors are kafka::client's Status with Kafka's error
// name at the end (kafka::client::KafkaErrorName).
//
// Lifecycle: Create, call, destroy. Threads: any, one call at a time (the API keeps one per
// principal behind a lock, and makes its consumers and producers per call).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kafka/client/admin.h"
#include "kafka/client/config.h"
#include "kafka/client/consumer.h"

namespace sluice::console {

using kafka::client::ClusterDescription;
using kafka::client::ConfigEntry;
using kafka::client::GroupDescription;
using kafka::client::GroupListing;
using kafka::client::PartitionInfo;
using kafka::client::RecordHeader;
using kafka::client::Watermarks;

struct TopicSummary {
  std::string name;
  int partitions = 0;
  int replication_factor = 0;  // of partition 0
  bool internal = false;
  int64_t messages = 0;  // the sum over partitions of high - low (records and markers)
};

struct PartitionDetail {
  PartitionInfo info;
  Watermarks marks;
};

struct TopicDetail {
  std::string name;
  bool internal = false;
  std::vector<PartitionDetail> partitions;
  std::vector<ConfigEntry> configs;
};

// Where a read of messages starts, in every partition read (docs/design/0026 #4).
enum class StartAt {
  kNewest,     // the last `limit` records
  kOldest,     // the log start
  kOffset,     // `offset`, clamped to [low, high]
  kTimestamp,  // the first record at or after `timestamp_ms`
};

struct MessageQuery {
  std::string topic;
  std::optional<int32_t> partition;  // none: every partition
  StartAt start = StartAt::kNewest;
  int64_t offset = 0;
  int64_t timestamp_ms = 0;
  int limit = 50;  // 1..kMaxLimit
  std::chrono::milliseconds deadline{3000};
  static constexpr int kMaxLimit = 1000;
  // A page stops reading past this many bytes of keys and values kept (then `partial`).
  static constexpr size_t kMaxPageBytes = 32 << 20;
};

struct ReadRecord {
  int32_t partition = 0;
  int64_t offset = 0;
  int64_t timestamp_ms = -1;
  // none: null. At most kMaxShownBytes of each (message_view.h's CutForShowing); the
  // sizes are the whole ones.
  std::optional<std::string> key, value;
  size_t key_size = 0, value_size = 0;
  std::vector<RecordHeader> headers;
};

// A record of a batch as a page keeps it (keys and values cut for showing).
ReadRecord KeepRecord(const kafka::client::MessageBatch& batch, size_t i);

struct MessagePage {
  std::vector<ReadRecord> records;  // by timestamp, then partition and offset
  // Per partition read: where the next page starts (after the last record returned).
  std::map<int32_t, int64_t> next;
  bool partial = false;  // the deadline came before every partition had answered
};

struct GroupSummary {
  GroupListing listing;
  size_t members = 0;
  std::optional<int64_t> lag;  // summed over its committed partitions; none: not known
};

struct GroupOffset {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = -1;  // committed; -1: none
  int64_t high = -1;    // -1: not known
  int64_t lag = -1;     // high - offset; -1: not known
};

struct GroupDetail {
  GroupDescription description;
  std::vector<GroupOffset> offsets;  // by topic and partition
};

enum class ResetTo { kEarliest, kLatest, kOffset, kTimestamp };

struct ResetSpec {
  std::string topic;
  std::vector<int32_t> partitions;  // empty: every partition of the topic
  ResetTo to = ResetTo::kLatest;
  int64_t value = 0;     // the offset (kOffset) or time in ms (kTimestamp)
  bool execute = false;  // false: only say what would change
};

struct ResetRow {
  std::string topic;
  int32_t partition = 0;
  int64_t previous = -1;  // committed before; -1: none
  int64_t offset = 0;     // after
};

// Offsets read without Kafka's protocol (this process's broker: InProcessKafka::Watermarks),
// one entry per partition asked; nullopt for one it cannot answer, which is then asked over
// Kafka.
using LocalWatermarks = std::function<std::vector<std::optional<kafka::client::Watermarks>>(
    const std::vector<kafka::client::TopicPartition>&)>;

class KafkaOps {
 public:
  // `client`: librdkafka properties with bootstrap.servers (and any security ones).
  // `timeout`: what each call may take at most.
  static Result<std::unique_ptr<KafkaOps>> Create(kafka::client::Config client,
                                                  std::chrono::milliseconds timeout);
  ~KafkaOps();

  Result<ClusterDescription> Cluster();
  // Every topic (`internal`: the __ ones too), by name, with its messages (their offsets
  // from `local` where it answers).
  Result<std::vector<TopicSummary>> ListTopics(bool internal, const LocalWatermarks& local = {});
  Result<TopicDetail> DescribeTopic(const std::string& topic);

  Status CreateTopic(const std::string& topic, int partitions, int replication_factor,
                     const std::map<std::string, std::string>& configs);
  Status DeleteTopic(const std::string& topic);
  Status AddPartitions(const std::string& topic, int total);
  Status AlterConfigs(const std::string& topic, const std::map<std::string, std::string>& set,
                      const std::vector<std::string>& remove);

  // A page of records (MessageQuery). read_uncommitted: a browser shows what is there.
  // Each partition's records on a page are consecutive (merged by time, never split), so
  // reading on from `next` misses none.
  Result<MessagePage> ReadMessages(const MessageQuery& q);

  // Produces one record and waits for its acknowledgement (acks=all): where it went.
  struct Produced {
    int32_t partition = 0;
    int64_t offset = 0;
  };
  Result<Produced> Produce(const std::string& topic, std::optional<int32_t> partition,
                           std::optional<std::string> key, std::optional<std::string> value,
                           const std::vector<RecordHeader>& headers);

  // Every group, as ListConsumerGroups says (one request per broker).
  Result<std::vector<GroupListing>> GroupListings();
  // Every group, with its member count and lag (DescribeGroup of each).
  Result<std::vector<GroupSummary>> ListGroups();
  // NotFound (GROUP_ID_NOT_FOUND) when no broker knows the group.
  Result<GroupDetail> DescribeGroup(const std::string& group);
  // Computes the new offsets (ResetSpec) and, with `execute`, commits them; the coordinator
  // refuses while the group has members (FailedPrecondition, UNKNOWN_MEMBER_ID), and the
  // group is checked for members first so that a dry run says so too.
  Result<std::vector<ResetRow>> ResetOffsets(const std::string& group, const ResetSpec& spec);
  Status DeleteGroup(const std::string& group);
  // Commits `rows` (ResetOffsets' answers, execute false) for the group in one request:
  // several topics' resets all or none.
  Status CommitResets(const std::string& group, const std::vector<ResetRow>& rows);

  const kafka::client::Config& client() const { return client_; }
  kafka::client::Admin& admin() { return *admin_; }

 private:
  KafkaOps() = default;
  Result<std::vector<int32_t>> PartitionsOf(const std::string& topic);

  kafka::client::Config client_;
  std::chrono::milliseconds timeout_{10000};
  std::unique_ptr<kafka::client::Admin> admin_;
};

// "earliest", "latest", "offset", "timestamp"; InvalidArgument otherwise.
Result<ResetTo> ParseResetTo(std::string_view s);

}  // namespace sluice::console
