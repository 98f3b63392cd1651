// Admin: topic administration and cluster queries over a librdkafka handle: create and
// delete topics and add partitions, describe the cluster and topics, read and change topic
// configs, read partitions' watermarks; list, describe and delete consumer groups and read
// and change their committed offsets. What `sluice topic|group|cluster` and the console's
// /api/v1 do (docs/design/0026-console.md); it works against any Kafka cluster.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kafka/client/config.h"
#include "kafka/client/consumer.h"

namespace sluice::kafka::client {

struct Watermarks {
  int64_t low = 0;   // the first offset still in the log
  int64_t high = 0;  // the offset the next record will get
};

// Kafka's name of the error a call of this module failed with ("TOPIC_ALREADY_EXISTS",
// "UNKNOWN_MEMBER_ID", librdkafka's local ones with their leading underscore: "_TIMED_OUT"),
// read from the end of the message (ErrorStatus writes it there in parentheses); "" when
// the status does not carry one (a check made before any request).
std::string_view KafkaErrorName(const Status& status);

struct BrokerInfo {
  int32_t node_id = -1;
  std::string host;
  int port = 0;
};

struct PartitionInfo {
  int32_t partition = 0;
  int32_t leader = -1;  // -1: none now
  std::vector<int32_t> replicas, isr;
  std::string error;  // Kafka's error name for this partition, "" when none
};

struct TopicDescription {
  std::string name;
  bool internal = false;  // a name starting with "__" (Metadata v1's flag is not exposed)
  std::vector<PartitionInfo> partitions;  // by partition number
};

struct ClusterDescription {
  std::string cluster_id;                // "" when the broker has none
  int32_t controller_id = -1;            // -1 when not known
  std::vector<BrokerInfo> brokers;       // by node id
  std::vector<TopicDescription> topics;  // asked for; by name
};

// A topic config as DescribeConfigs reports it.
struct ConfigEntry {
  std::string name;
  std::optional<std::string> value;  // none: sensitive or unset
  // DYNAMIC_TOPIC_CONFIG (set on the topic), DEFAULT_CONFIG, STATIC_BROKER_CONFIG, ...:
  // librdkafka's source names.
  std::string source;
  bool read_only = false, sensitive = false, is_default = false;
};

struct GroupListing {
  std::string group_id;
  std::string state;    // "Stable", "Empty", "PreparingRebalance", ... ("Unknown")
  bool simple = false;  // committed offsets with no membership protocol (no members ever)
};

struct GroupMember {
  std::string member_id, group_instance_id, client_id, host;
  std::vector<TopicPartition> assignment;  // offsets unused
};

struct GroupDescription {
  std::string group_id;
  std::string state;
  std::string assignor;  // the protocol chosen ("range", "cooperative-sticky")
  bool simple = false;
  BrokerInfo coordinator;
  std::vector<GroupMember> members;
};

// Lifecycle: Create, call, destroy. Threads: any, one call at a time. Every call waits
// at most its timeout.
class Admin {
 public:
  // `config` needs bootstrap.servers.
  static Result<std::unique_ptr<Admin>> Create(const Config& config);
  ~Admin();
  Admin(const Admin&) = delete;
  Admin& operator=(const Admin&) = delete;

  // CreateTopics for one topic; AlreadyExists when it does. `partitions` and
  // `replication_factor` are at least 1, or -1 for the broker's default. `topic_config`
  // holds topic properties by Kafka's names ("retention.ms").
  Status CreateTopic(std::string_view name, int partitions, int replication_factor,
                     const Config& topic_config, std::chrono::milliseconds timeout);

  Status DeleteTopic(std::string_view name, std::chrono::milliseconds timeout);

  // From a Metadata request; NotFound when the broker does not know the topic.
  Result<int> PartitionCount(std::string_view topic, std::chrono::milliseconds timeout);

  // From a Metadata request for every topic: each topic's name and partition count, in the
  // broker's order. Topics the broker reports with an error are left out.
  struct TopicInfo {
    std::string name;
    int partitions = 0;
  };
  Result<std::vector<TopicInfo>> ListTopics(std::chrono::milliseconds timeout);

  // One Metadata request: the cluster id, the controller, the brokers and `topics` (every
  // topic when `all_topics`; none when `topics` is empty and not `all_topics`). A topic
  // asked for by name that the broker does not know is NotFound.
  Result<ClusterDescription> DescribeCluster(bool all_topics,
                                             const std::vector<std::string>& topics,
                                             std::chrono::milliseconds timeout);

  // CreatePartitions: the topic's partition count becomes `total` (more than now).
  Status CreatePartitions(std::string_view topic, int total, std::chrono::milliseconds timeout);

  // DescribeConfigs of a topic: every config the broker reports, by name; NotFound when the
  // broker does not know the topic.
  Result<std::vector<ConfigEntry>> DescribeTopicConfigs(std::string_view topic,
                                                        std::chrono::milliseconds timeout);

  // Sets `set` and removes `remove` (back to the default) among a topic's own configs,
  // keeping the others: DescribeConfigs, then AlterConfigs with the topic's dynamic values
  // and the change (librdkafka 2.0 has no IncrementalAlterConfigs; a change made by another
  // client between the two can be lost). A name in both is InvalidArgument.
  Status AlterTopicConfigs(std::string_view topic, const std::map<std::string, std::string>& set,
                           const std::vector<std::string>& remove,
                           std::chrono::milliseconds timeout);

  // ListOffsets of many partitions at once: the earliest and latest offset of each, in the
  // order asked. A partition the broker failed is NotFound/Unavailable as Kafka said.
  Result<std::vector<Watermarks>> QueryWatermarks(const std::vector<TopicPartition>& partitions,
                                                  std::chrono::milliseconds timeout);

  // ListConsumerGroups from every broker, by group id. A broker that failed makes the call
  // fail (a partial list would hide groups).
  Result<std::vector<GroupListing>> ListGroups(std::chrono::milliseconds timeout);

  // DescribeConsumerGroups of one group. A group no broker knows comes back as state
  // "Dead" with no members (Kafka's answer), not as an error.
  Result<GroupDescription> DescribeGroup(std::string_view group, std::chrono::milliseconds timeout);

  // The group's committed offsets (ListConsumerGroupOffsets of every partition), by topic
  // and partition; an offset of -1 is none committed.
  Result<std::vector<TopicPartition>> GroupOffsets(std::string_view group,
                                                   std::chrono::milliseconds timeout);

  // AlterConsumerGroupOffsets: commits `offsets` for the group as an admin (no member).
  // The coordinator refuses while the group has members: FailedPrecondition with Kafka's
  // UNKNOWN_MEMBER_ID; a partition's own error fails the call with that error.
  Status AlterGroupOffsets(std::string_view group, const std::vector<TopicPartition>& offsets,
                           std::chrono::milliseconds timeout);

  // DeleteGroups of one group: NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND.
  Status DeleteGroup(std::string_view group, std::chrono::milliseconds timeout);

  // From ListOffsets (earliest and latest). A try that fails within kLeaderTry refreshes
  // the topic's leaders and tries again with the rest of `timeout`.
  static constexpr std::chrono::milliseconds kLeaderTry{2000};
  Result<Watermarks> QueryWatermarks(std::string_view topic, int32_t partition,
                                     std::chrono::milliseconds timeout);

  // From DescribeConfigs: the value of topic property `name` ("message.timestamp.type"),
  // the broker's default when the topic does not set it; NotFound when the broker does not
  // know the topic or does not list the property.
  Result<std::string> TopicConfig(std::string_view topic, std::string_view name,
                                  std::chrono::milliseconds timeout);

  // From ListOffsets by timestamp: the first offset whose record timestamp is at least
  // `timestamp_ms`, or the high watermark when no record is that late.
  Result<int64_t> OffsetForTime(std::string_view topic, int32_t partition, int64_t timestamp_ms,
                                std::chrono::milliseconds timeout);

 private:
  Admin() = default;
  detail::KafkaPtr rk_;
};

}  // namespace sluice::kafka::client
