// Admin: topic administration and cluster queries over a librdkafka handle: create and
// delete topics, count a topic's partitions, read a partition's watermarks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kafka/client/config.h"

namespace sluice::kafka::client {

struct Watermarks {
  int64_t low = 0;   // the first offset still in the log
  int64_t high = 0;  // the offset the next record will get
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
