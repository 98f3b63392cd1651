// KafkaSchemaLog: the registry's log as the compacted topic `_schemas` (one partition) on
// a Kafka cluster, read and written with librdkafka as the broker's own client.
//
// Writes are serialized across every broker of a cluster by Kafka's own fencing: each
// registry writes through a transactional producer with one transactional.id for the
// whole cluster (kWriterTransactionalId). BecomeWriter initializes it, which fences any
// other broker's writer; the registry then reads the log to its end and decides; its
// commit fails if another broker became the writer since (it is fenced), and the registry
// starts over. So a write is decided on the whole log and appended right after it, and
// two brokers never give one id or one version to two schemas (docs/design/0022,
// "Storage").
//
// The reader is a thread that consumes `_schemas`-0 from its start (read_committed) and
// hands every record to the registry, and each end of the partition it reaches.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "kafka/client/admin.h"
#include "kafka/client/consumer.h"
#include "kafka/client/producer.h"
#include "schema/registry/registry.h"

namespace sluice::schema::registry {

inline constexpr const char* kSchemasTopic = "_schemas";
inline constexpr const char* kWriterTransactionalId = "__sluice_schema_registry";

struct KafkaSchemaLogOptions {
  // bootstrap.servers and the credential (the broker's internal client properties).
  kafka::client::Config client;
  std::string topic = kSchemasTopic;
  int replication_factor = 0;  // 0: 3 in a cluster (fewer with fewer brokers), 1 alone
  // A broker of a cluster (etcd): brokers started together register one by one, so three
  // replicas are asked for during the first 15 s.
  bool cluster = false;
  std::chrono::milliseconds timeout{10000};
};

class KafkaSchemaLog final : public SchemaLog {
 public:
  // Creates the topic when it is missing (compacted, one partition), and starts reading
  // it into `registry` (which must outlive the log).
  static Result<std::unique_ptr<KafkaSchemaLog>> Open(KafkaSchemaLogOptions options,
                                                      Registry* registry);
  ~KafkaSchemaLog() override;

  Status BecomeWriter() override;
  Result<int64_t> Append(const std::string& key, const std::optional<std::string>& value) override;
  Result<int64_t> End() override;

 private:
  KafkaSchemaLog() = default;
  void ReadLoop();

  KafkaSchemaLogOptions options_;
  Registry* registry_ = nullptr;
  std::unique_ptr<kafka::client::Admin> admin_;
  std::unique_ptr<kafka::client::Consumer> consumer_;
  std::unique_ptr<kafka::client::Producer> producer_;  // null until BecomeWriter
  std::mutex write_mu_;
  int64_t delivered_offset_ = -1;  // the last delivery report's offset, under write_mu_
  Status delivered_status_;
  std::atomic<bool> stop_{false};
  std::thread reader_;
};

}  // namespace sluice::schema::registry
