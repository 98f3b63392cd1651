#include "sinks/kafka_sink.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>

#include "base/crash_point.h"
#include "base/logging.h"
#include "sinks/duck_rows.h"

namespace sluice::sinks {

namespace {

using namespace std::chrono_literals;

const Logger kLog("sinks");

constexpr std::string_view kDefaultMessageTimeoutMs = "60000";
// Exactly-once: a transaction a crashed member left open holds read_committed consumers
// back this long at most (Kafka Streams' choice for its exactly-once mode).
constexpr std::string_view kDefaultTransactionTimeoutMs = "10000";

void Merge(const SourceOffsets& from, SourceOffsets* into) {
  for (const auto& [tp, next] : from) {
    int64_t& at = (*into)[tp];
    at = std::max(at, next);
  }
}

}  // namespace

// A topic written through a transactional KafkaSink's producer, inside its transactions
// (the dead letters of an exactly-once pipeline).
class KafkaTopicInTransaction final : public Sink {
 public:
  KafkaTopicInTransaction(KafkaSink* owner, std::string topic)
      : owner_(owner), topic_(std::move(topic)) {}
  Status Write(duck::Connection& conn, std::string_view table, const SourceOffsets& offsets,
               std::vector<RejectedRow>* rejected) override {
    RETURN_IF_ERROR(owner_->BeginIfNeeded());
    Merge(offsets, &owner_->uncommitted_);
    return owner_->ProduceRows(conn, table, topic_, rejected);
  }
  Status Flush() override { return owner_->WaitForDeliveries(topic_); }
  std::string Describe() const override {
    return fmt::format("kafka topic {} (in the transactions of {})", topic_, owner_->Describe());
  }

 private:
  KafkaSink* owner_;
  std::string topic_;
};

Result<std::unique_ptr<KafkaSink>> KafkaSink::Create(KafkaSinkOptions options) {
  if (options.topic.empty()) return InvalidArgumentError("kafka sink: topic is empty");
  if (options.brokers.empty()) return InvalidArgumentError("kafka sink: brokers is empty");
  for (size_t i = 0; i < options.brokers.size(); ++i) {
    if (options.brokers[i].empty()) {
      return InvalidArgumentError("kafka sink: brokers[{}] is empty", i);
    }
  }
  kafka::client::Config config;
  config["bootstrap.servers"] = fmt::format("{}", fmt::join(options.brokers, ","));
  config["message.timeout.ms"] = std::string(kDefaultMessageTimeoutMs);
  if (!options.transactional_id.empty()) {
    if (options.properties.contains("transactional.id")) {
      return InvalidArgumentError(
          "kafka sink: transactional.id is set by exactly_once, not as a property");
    }
    config["transactional.id"] = options.transactional_id;
    auto timeout = options.properties.find("transaction.timeout.ms");
    config["transaction.timeout.ms"] = timeout == options.properties.end()
                                           ? std::string(kDefaultTransactionTimeoutMs)
                                           : timeout->second;
    // librdkafka refuses a message timeout above the transaction timeout.
    config["message.timeout.ms"] = config["transaction.timeout.ms"];
  }
  for (const auto& [name, value] : options.properties) config[name] = value;
  if (options.properties.contains("delivery.timeout.ms")) {
    // librdkafka's alias of message.timeout.ms: the user's value, not our default.
    config.erase("message.timeout.ms");
  }
  int64_t timeout_ms = 0;
  {
    auto it = config.find("message.timeout.ms");
    if (it == config.end()) it = config.find("delivery.timeout.ms");
    const std::string& v = it->second;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), timeout_ms);
    if (ec != std::errc() || end != v.data() + v.size() || timeout_ms < 0) {
      return InvalidArgumentError("kafka sink: {} is not a number of milliseconds: '{}'", it->first,
                                  v);
    }
  }

  auto sink = std::unique_ptr<KafkaSink>(new KafkaSink(std::move(options)));
  // 0 means no timeout for librdkafka; the flush then waits an hour at most.
  sink->flush_timeout_ =
      timeout_ms == 0 ? std::chrono::milliseconds(1h) : std::chrono::milliseconds(timeout_ms) + 10s;
  KafkaSink* self = sink.get();
  auto producer = kafka::client::Producer::Create(
      config, [self](const kafka::client::DeliveryReport& r) { self->OnDelivery(r); });
  if (!producer.ok()) return producer.status().WithContext("kafka sink");
  sink->producer_ = std::move(producer).value();
  if (sink->transactional()) {
    Status st = sink->producer_->InitTransactions(sink->options_.transaction_call_timeout);
    if (!st.ok()) {
      return st.WithContext(fmt::format("kafka sink (topic {}, transactional.id {})",
                                        sink->options_.topic, sink->options_.transactional_id));
    }
  }
  return sink;
}

KafkaSink::~KafkaSink() {
  if (in_transaction_ && producer_ != nullptr) {
    // Stopped on an error with a transaction open: end it now rather than leave
    // read_committed consumers waiting for transaction.timeout.ms.
    Status st = producer_->AbortTransaction(options_.transaction_call_timeout);
    if (!st.ok()) {
      SLUICE_LOG(kLog, kWarn, "kafka sink (topic {}): {}", options_.topic, st.message());
    }
  }
}

Status KafkaSink::BeginIfNeeded() {
  if (!transactional() || in_transaction_) return Status::OK();
  Status st = producer_->BeginTransaction();
  if (!st.ok()) {
    return st.WithContext(fmt::format("kafka sink (topic {}, transactional.id {})", options_.topic,
                                      options_.transactional_id));
  }
  in_transaction_ = true;
  return Status::OK();
}

Status KafkaSink::AbortAfter(const Status& cause) {
  uncommitted_.clear();
  if (cause.code() == StatusCode::kFailedPrecondition) {
    // Fatal (fenced): the producer can do nothing more; the transaction is the new
    // producer's to end.
    in_transaction_ = false;
    return cause;
  }
  Status aborted = producer_->AbortTransaction(options_.transaction_call_timeout);
  in_transaction_ = false;
  if (!aborted.ok()) {
    return Status(aborted.code(), fmt::format("{}; then the abort failed too: {}", cause.message(),
                                              aborted.message()));
  }
  return Status(cause.code(), cause.message() + "; the transaction was aborted");
}

void KafkaSink::Skip(const SourceOffsets& offsets) { Merge(offsets, &uncommitted_); }

Result<SourceOffsets> KafkaSink::Commit(bool /*force*/) {
  // Every batch commits (the strategy calls this once per batch): a transaction never
  // spans batches, so an abort loses one batch's work at most.
  if (!transactional() || (uncommitted_.empty() && !in_transaction_)) return SourceOffsets{};
  const std::string what = fmt::format("kafka sink (topic {}, transactional.id {})", options_.topic,
                                       options_.transactional_id);
  if (!group_) return FailedPreconditionError("{}: no consumer group to commit offsets to", what);
  RETURN_IF_ERROR(BeginIfNeeded());
  Result<kafka::client::GroupMetadata> group = group_();
  if (!group.ok()) return AbortAfter(group.status().WithContext(what));
  std::vector<kafka::client::TopicPartition> offsets;
  for (const auto& [tp, next] : uncommitted_) offsets.push_back({tp.first, tp.second, next});
  const auto deadline = std::chrono::steady_clock::now() + options_.transaction_call_timeout;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  };
  // Retriable errors (a timeout, a coordinator moving) are retried until the deadline.
  Status st;
  do {
    st = producer_->SendOffsetsToTransaction(offsets, *group, left());
  } while (st.code() == StatusCode::kResourceExhausted &&
           std::chrono::steady_clock::now() < deadline);
  if (!st.ok()) return AbortAfter(st.WithContext(what));
  CrashPoint("kafka-txn-offsets-sent");
  do {
    st = producer_->CommitTransaction(left());
  } while (st.code() == StatusCode::kResourceExhausted &&
           std::chrono::steady_clock::now() < deadline);
  if (!st.ok()) return AbortAfter(st.WithContext(what));
  in_transaction_ = false;
  CrashPoint("kafka-txn-committed");
  // What Flush counted belongs to the committed transaction.
  produced_since_flush_ = failed_since_flush_ = 0;
  first_failure_ = Status::OK();
  return std::exchange(uncommitted_, {});
}

Status KafkaSink::Discard() {
  if (!transactional()) return Status::OK();
  uncommitted_.clear();
  if (!in_transaction_) return Status::OK();
  in_transaction_ = false;
  Status st = producer_->AbortTransaction(options_.transaction_call_timeout);
  return st.WithContext(fmt::format("kafka sink (topic {}): discarding", options_.topic));
}

Result<std::unique_ptr<Sink>> KafkaSink::DeadLetterTopic(std::string topic) {
  if (!transactional()) {
    return FailedPreconditionError("kafka sink (topic {}) is not transactional", options_.topic);
  }
  if (topic.empty()) return InvalidArgumentError("kafka sink: topic is empty");
  return std::unique_ptr<Sink>(std::make_unique<KafkaTopicInTransaction>(this, std::move(topic)));
}

void KafkaSink::OnDelivery(const kafka::client::DeliveryReport& report) {
  if (report.status.ok()) return;
  if (failed_since_flush_++ == 0) {
    first_failure_ =
        report.status.WithContext(fmt::format("record to {} [{}]", report.topic, report.partition));
  }
}

Status KafkaSink::Write(duck::Connection& conn, std::string_view table,
                        const SourceOffsets& offsets, std::vector<RejectedRow>* rejected) {
  RETURN_IF_ERROR(BeginIfNeeded());
  if (transactional()) Merge(offsets, &uncommitted_);
  Status st = ProduceRows(conn, table, options_.topic, rejected);
  return st.ok() || !in_transaction_ ? st : AbortKeepingOffsets(st);
}

Status KafkaSink::AbortKeepingOffsets(const Status& cause) {
  // Some of the batch's rows may be in the transaction: none may commit, since on_error
  // now dead-letters or skips the whole batch; its offsets go into the next transaction.
  SourceOffsets keep = uncommitted_;
  Status st = AbortAfter(cause);
  uncommitted_ = std::move(keep);
  return st;
}

Status KafkaSink::ProduceRows(duck::Connection& conn, std::string_view table,
                              const std::string& topic, std::vector<RejectedRow>* rejected) {
  ASSIGN_OR_RETURN(duck::QueryResult rows, RowsAsJson(conn, table));
  const auto deadline = std::chrono::steady_clock::now() + flush_timeout_;
  for (size_t i = 0; i < rows.chunk_count(); ++i) {
    duck::ResultChunk c = rows.chunk(i);
    for (size_t r = 0; r < c.size(); ++r) {
      std::string_view value = c.GetString(0, r);
      for (;;) {
        Status st =
            producer_->Produce(topic, kafka::client::kAnyPartition, std::string_view(), value);
        if (st.ok()) {
          ++produced_since_flush_;
          break;
        }
        if (st.code() == StatusCode::kResourceExhausted) {
          // The local queue is full: serve delivery reports until there is room.
          if (std::chrono::steady_clock::now() > deadline) {
            return st.WithContext(
                fmt::format("kafka sink (topic {}): the producer queue "
                            "stayed full for {} ms",
                            topic, flush_timeout_.count()));
          }
          producer_->Poll(100ms);
          continue;
        }
        if (st.code() == StatusCode::kInvalidArgument) {
          // This record alone (too large, say): the others go on.
          rejected->push_back({std::string(value), st.message()});
          break;
        }
        return st.WithContext(fmt::format("kafka sink (topic {})", topic));
      }
    }
  }
  producer_->Poll(0ms);
  return Status::OK();
}

Status KafkaSink::Flush() {
  Status st = WaitForDeliveries(options_.topic);
  // A record not delivered makes the transaction abortable: the batch's rows go, and its
  // dead letters and offsets go into the next transaction (the runner's on_error).
  return st.ok() || !in_transaction_ ? st : AbortKeepingOffsets(st);
}

Status KafkaSink::WaitForDeliveries(const std::string& topic) {
  Status st = producer_->Flush(flush_timeout_);
  if (!st.ok()) {
    // Reports still due keep counting toward the next Flush, which waits again.
    return st.WithContext(fmt::format("kafka sink (topic {})", topic));
  }
  const uint64_t produced = produced_since_flush_;
  const uint64_t failed = failed_since_flush_;
  Status first = std::move(first_failure_);
  produced_since_flush_ = 0;
  failed_since_flush_ = 0;
  first_failure_ = Status::OK();
  if (failed > 0) {
    return Status(first.code(),
                  fmt::format("kafka sink (topic {}): {} of {} records were not delivered; "
                              "the first: {}",
                              topic, failed, produced, first.message()));
  }
  return Status::OK();
}

}  // namespace sluice::sinks
