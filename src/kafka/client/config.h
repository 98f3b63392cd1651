// kafka/client configuration: librdkafka properties by name, and the handle types the
// public headers share. librdkafka's header stays out of every public header: other
// modules see only these forward declarations (docs/architecture.md: kafka/client is the only
// place that talks to librdkafka).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"

struct rd_kafka_s;        // rd_kafka_t
struct rd_kafka_topic_s;  // rd_kafka_topic_t
struct rd_kafka_queue_s;  // rd_kafka_queue_t

namespace sluice::kafka::client {

// A record header: Kafka allows a name more than once, and a null value.
struct RecordHeader {
  std::string name;
  std::optional<std::string> value;
};

// librdkafka properties ("bootstrap.servers", "linger.ms", ...), as strings, exactly as
// librdkafka's CONFIGURATION.md names them. Topic-level properties ("acks",
// "compression.codec") go in the same map: librdkafka applies them to the default topic
// configuration.
using Config = std::map<std::string, std::string, std::less<>>;

// Start offsets for Consumer::Assign, as librdkafka defines them.
inline constexpr int64_t kOffsetBeginning = -2;
inline constexpr int64_t kOffsetEnd = -1;
// No offset: a partition the group has not committed (Consumer::Committed).
inline constexpr int64_t kOffsetInvalid = -1001;
// Produce to this partition to let the client's partitioner choose.
inline constexpr int32_t kAnyPartition = -1;

namespace detail {
struct KafkaDeleter {
  void operator()(rd_kafka_s* rk) const;
};
struct TopicDeleter {
  void operator()(rd_kafka_topic_s* rkt) const;
};
struct QueueDeleter {
  void operator()(rd_kafka_queue_s* rkqu) const;
};
using KafkaPtr = std::unique_ptr<rd_kafka_s, KafkaDeleter>;
using TopicPtr = std::unique_ptr<rd_kafka_topic_s, TopicDeleter>;
using QueuePtr = std::unique_ptr<rd_kafka_queue_s, QueueDeleter>;
}  // namespace detail

// librdkafka's version string ("2.0.2").
std::string LibraryVersion();

// Checks each property name and value as librdkafka will when a client is created
// (InvalidArgument naming the first it refuses), without creating one. Combinations
// (enable.idempotence with acks=1) are checked only at creation.
Status CheckConfig(const Config& config);

}  // namespace sluice::kafka::client
