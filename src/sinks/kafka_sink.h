// KafkaSink: sqlflow's `sink.type: kafka`. Each row of a batch becomes one record on the
// topic: its value is the row as a JSON object (DuckDB's to_json, as the console sink
// prints it), its key null, its partition chosen by librdkafka's partitioner.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kafka/client/config.h"
#include "kafka/client/producer.h"
#include "sinks/sink.h"

namespace sluice::sinks {

struct KafkaSinkOptions {
  std::vector<std::string> brokers;  // "host:port" each; bootstrap.servers
  std::string topic;
  // Any librdkafka producer property (sluice's addition to sqlflow's keys); they override
  // the sink's defaults. librdkafka's own default acks=all is kept unless set here.
  kafka::client::Config properties;
};

// Write renders the batch and enqueues one record per row; Flush waits for every record's
// delivery report and fails, naming the first error and how many failed, if any record
// was not delivered. "Durable" means acknowledged by the brokers under the producer's
// acks (all in-sync replicas by default; sluice's broker acknowledges acks=all only after
// its fsync). A record that fails is not retried by the sink beyond librdkafka's own
// retries: the pipeline resends the batch (at-least-once, duplicates possible).
//
// A record librdkafka refuses on its own (larger than message.max.bytes) goes to
// `rejected`. Delivery fails after message.timeout.ms, 60 s unless set in `properties`
// (librdkafka's default is 5 minutes); Flush waits that long plus 10 s at most.
// Owned by the pipeline's thread.
class KafkaSink final : public Sink {
 public:
  // InvalidArgument when brokers or topic is empty, or a property is refused by
  // librdkafka (naming it). Does not connect: librdkafka connects in the background.
  static Result<std::unique_ptr<KafkaSink>> Create(KafkaSinkOptions options);
  ~KafkaSink() override;

  Status Write(duck::Connection& conn, std::string_view table, const SourceOffsets& offsets,
               std::vector<RejectedRow>* rejected) override;
  Status Flush() override;
  std::string Describe() const override { return "kafka topic " + options_.topic; }

 private:
  explicit KafkaSink(KafkaSinkOptions options) : options_(std::move(options)) {}
  void OnDelivery(const kafka::client::DeliveryReport& report);

  KafkaSinkOptions options_;
  std::chrono::milliseconds flush_timeout_{0};
  // Delivery outcomes since the last Flush; delivery reports run inside Poll and Flush,
  // on the pipeline's thread.
  uint64_t produced_since_flush_ = 0;
  uint64_t failed_since_flush_ = 0;
  Status first_failure_;
  // Last: destroyed first, while the members its delivery callback touches still live.
  std::unique_ptr<kafka::client::Producer> producer_;
};

}  // namespace sluice::sinks
