#include "sinks/kafka_sink.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>

#include "base/crash_point.h"
#include "base/logging.h"
#include "sinks/duck_rows.h"
#include "sinks/loggers.h"

namespace sluice::sinks {

namespace {

using namespace std::chrono_literals;

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
    owner_->lost_.clear();
    RETURN_IF_ERROR(owner_->BeginIfNeeded());
    Merge(offsets, &owner_->uncommitted_);
    return Ended(owner_->ProduceRows(conn, table, topic_, rejected));
  }
  Status Flush() override {
    owner_->lost_.clear();
    return Ended(owner_->WaitForDeliveries(topic_));
  }
  std::string Describe() const override {
    return fmt::format("kafka topic {} (in the transactions of {})", topic_, owner_->Describe());
  }

 private:
  // A failure of the dead letters stops the pipeline (nowhere left to put them), unless
  // the producer was fenced or the transaction failed with no record to blame: then the
  // owner's transaction is lost (or, fenced by a live producer, fatal).
  Status Ended(Status st) {
    if (st.ok() || !owner_->in_transaction_) return st;
    if (owner_->producer_->Fenced()) return owner_->End(st, "");
    if (owner_->NotTheRecords(st)) {
      return owner_->End(Status(StatusCode::kAborted, st.message()), "abortable");
    }
    return st;
  }

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

  int64_t txn_timeout_ms = 0;
  if (!options.transactional_id.empty()) {
    const std::string& v = config["transaction.timeout.ms"];
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), txn_timeout_ms);
    if (ec != std::errc() || end != v.data() + v.size() || txn_timeout_ms <= 0) {
      return InvalidArgumentError(
          "kafka sink: transaction.timeout.ms is not a number of milliseconds: '{}'", v);
    }
  }

  auto sink = std::unique_ptr<KafkaSink>(new KafkaSink(std::move(options)));
  // 0 means no timeout for librdkafka; the flush then waits an hour at most.
  sink->flush_timeout_ =
      timeout_ms == 0 ? std::chrono::milliseconds(1h) : std::chrono::milliseconds(timeout_ms) + 10s;
  sink->txn_timeout_ = std::chrono::milliseconds(txn_timeout_ms);
  sink->config_ = std::move(config);
  RETURN_IF_ERROR(sink->NewProducer());
  return sink;
}

Status KafkaSink::NewProducer() {
  producer_.reset();  // a fenced one first: its records are dropped, not reported
  produced_since_flush_ = failed_since_flush_ = 0;
  first_failure_ = Status::OK();
  auto producer = kafka::client::Producer::Create(
      config_, [this](const kafka::client::DeliveryReport& r) { OnDelivery(r); });
  if (!producer.ok()) return producer.status().WithContext("kafka sink");
  producer_ = std::move(producer).value();
  if (!transactional()) return Status::OK();
  Status st = producer_->InitTransactions(options_.transaction_call_timeout);
  return st.WithContext(fmt::format("kafka sink (topic {}, transactional.id {})", options_.topic,
                                    options_.transactional_id));
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
  txn_begun_ = std::chrono::steady_clock::now();
  return Status::OK();
}

bool KafkaSink::PastTimeout() const {
  return in_transaction_ && std::chrono::steady_clock::now() - txn_begun_ >= txn_timeout_;
}

Status KafkaSink::End(const Status& cause, std::string_view lose_as) {
  // Before the abort: whether the transaction was open longer than the broker lets it.
  const bool past_timeout = PastTimeout();
  uncommitted_.clear();
  Status aborted;
  if (!producer_->Fenced() && cause.code() != StatusCode::kFailedPrecondition) {
    aborted = producer_->AbortTransaction(options_.transaction_call_timeout);
  }
  in_transaction_ = false;
  if (producer_->Fenced()) {
    const std::string fenced = producer_->FatalError().message();
    if (!past_timeout) {
      // Fenced inside its timeout: another live producer has this transactional.id.
      return FailedPreconditionError(
          "{}; fenced: another producer with transactional.id {} started meanwhile (a zombie: "
          "two members configured with the same transactional_id and no group.instance.id?) "
          "— {}",
          cause.message(), options_.transactional_id, fenced);
    }
    // Open past transaction.timeout.ms: the broker aborted it and bumped the epoch, which
    // librdkafka cannot take up (a fatal error): a new producer takes over the id.
    SLUICE_LOG(kLog, kWarn,
               "kafka sink (topic {}, transactional.id {}): the transaction was open longer "
               "than transaction.timeout.ms ({} ms), so the broker aborted it and fenced the "
               "producer ({}); starting a new producer",
               options_.topic, options_.transactional_id, txn_timeout_.count(), fenced);
    if (Status made = NewProducer(); !made.ok()) {
      return Status(made.code(), fmt::format("{}; the broker aborted the transaction at its "
                                             "timeout, and a new producer failed: {}",
                                             cause.message(), made.message()));
    }
    lost_ = "timeout";
    return Status(StatusCode::kAborted,
                  fmt::format("{}; the broker had aborted the transaction at its timeout ({} ms)",
                              cause.message(), txn_timeout_.count()));
  }
  if (cause.code() == StatusCode::kFailedPrecondition) return cause;  // another fatal error
  if (!aborted.ok()) {
    return Status(aborted.code(), fmt::format("{}; then the abort failed too: {}", cause.message(),
                                              aborted.message()));
  }
  // The aborted transaction's records still due reports (purged): served now, so that
  // they do not count against the next transaction's Flush.
  (void)producer_->Flush(flush_timeout_);
  produced_since_flush_ = failed_since_flush_ = 0;
  first_failure_ = Status::OK();
  if (!lose_as.empty()) {
    lost_ = std::string(lose_as);
    return Status(StatusCode::kAborted, cause.message() + "; the transaction was aborted");
  }
  return Status(cause.code(), cause.message() + "; the transaction was aborted");
}

std::string_view KafkaSink::LossOf(const Status& st) const {
  using TxnError = kafka::client::Producer::TxnError;
  if (st.code() != StatusCode::kAborted) return {};
  switch (producer_->last_txn_error()) {
    case TxnError::kMembership:
      return "rebalance";
    case TxnError::kFencedInstance:
      return {};  // another live member has our group.instance.id: not ours to retry
    default:
      return "abortable";
  }
}

void KafkaSink::Skip(const SourceOffsets& offsets) { Merge(offsets, &uncommitted_); }

Result<SourceOffsets> KafkaSink::Commit(bool /*force*/) {
  // Every batch commits (the strategy calls this once per batch): a transaction never
  // spans batches, so an abort loses one batch's work at most.
  lost_.clear();
  if (!transactional() || (uncommitted_.empty() && !in_transaction_)) return SourceOffsets{};
  const std::string what = fmt::format("kafka sink (topic {}, transactional.id {})", options_.topic,
                                       options_.transactional_id);
  if (!group_) return FailedPreconditionError("{}: no consumer group to commit offsets to", what);
  RETURN_IF_ERROR(BeginIfNeeded());
  Result<kafka::client::GroupMetadata> group = group_();
  if (!group.ok()) {
    // Aborted: the consumer is no member now (its session was lost; it rejoins). Its
    // metadata would carry no generation, which the group coordinator does not check:
    // the offsets of partitions that may be another member's by now would commit.
    return End(group.status().WithContext(what),
               group.status().code() == StatusCode::kAborted ? "rebalance" : "");
  }
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
  if (!st.ok()) {
    if (producer_->last_txn_error() == kafka::client::Producer::TxnError::kFencedInstance) {
      // A static member's zombie: stop, as the consumer (fatal for librdkafka) does.
      Status ended = End(st.WithContext(what), "");
      return FailedPreconditionError(
          "{}; another live member of the group has this member's group.instance.id",
          ended.message());
    }
    return End(st.WithContext(what), LossOf(st));
  }
  CrashPoint("kafka-txn-offsets-sent");
  do {
    st = producer_->CommitTransaction(left());
  } while (st.code() == StatusCode::kResourceExhausted &&
           std::chrono::steady_clock::now() < deadline);
  if (!st.ok()) return End(st.WithContext(what), LossOf(st));
  in_transaction_ = false;
  CrashPoint("kafka-txn-committed");
  // What Flush counted belongs to the committed transaction.
  produced_since_flush_ = failed_since_flush_ = 0;
  first_failure_ = Status::OK();
  return std::exchange(uncommitted_, {});
}

Status KafkaSink::Discard() {
  if (!transactional()) return Status::OK();
  lost_.clear();
  uncommitted_.clear();
  if (!in_transaction_) return Status::OK();
  Status st = End(Status(StatusCode::kAborted, "the partitions were lost"), "lost");
  if (!lost_.empty()) {
    // Aborted (by us, or by the broker at its timeout: a new producer was made), as a
    // discard wants; nothing to re-read, the partitions are gone.
    lost_.clear();
    return Status::OK();
  }
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
  lost_.clear();
  RETURN_IF_ERROR(BeginIfNeeded());
  if (transactional()) Merge(offsets, &uncommitted_);
  Status st = ProduceRows(conn, table, options_.topic, rejected);
  return st.ok() || !in_transaction_ ? st : AbortKeepingOffsets(st);
}

bool KafkaSink::NotTheRecords(const Status& cause) const {
  const Status& why = first_failure_.ok() ? cause : first_failure_;
  return why.code() == StatusCode::kAborted ||
         (why.code() == StatusCode::kFailedPrecondition && producer_->FatalError().ok());
}

Status KafkaSink::AbortKeepingOffsets(const Status& cause) {
  // Fenced: the records failed because the producer did, not by themselves (lost at the
  // broker's timeout, or fatal).
  if (producer_->Fenced()) return End(cause, "");
  // Timed out, or in error with no record to blame (NotTheRecords): the transaction is
  // lost and the batch read again, rather than dead-lettered.
  if (NotTheRecords(cause)) return End(Status(StatusCode::kAborted, cause.message()), "abortable");
  // Some of the batch's rows may be in the transaction: none may commit, since on_error
  // now dead-letters or skips the whole batch; its offsets go into the next transaction.
  SourceOffsets keep = uncommitted_;
  Status st = End(cause, "");
  uncommitted_ = std::move(keep);
  return st;
}

Status KafkaSink::ProduceRows(duck::Connection& conn, std::string_view table,
                              const std::string& topic, std::vector<RejectedRow>* rejected) {
  const auto deadline = std::chrono::steady_clock::now() + flush_timeout_;
  auto produce = [&](std::string_view value) -> Status {
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
    return Status::OK();
  };
  if (options_.render && topic == options_.topic) {
    // The sink's own rows in its format; dead letters stay JSON.
    RETURN_IF_ERROR(options_.render(conn, table, produce));
  } else {
    ASSIGN_OR_RETURN(duck::QueryResult rows, RowsAsJson(conn, table));
    for (size_t i = 0; i < rows.chunk_count(); ++i) {
      duck::ResultChunk c = rows.chunk(i);
      for (size_t r = 0; r < c.size(); ++r) RETURN_IF_ERROR(produce(c.GetString(0, r)));
    }
  }
  producer_->Poll(0ms);
  return Status::OK();
}

Status KafkaSink::Flush() {
  lost_.clear();
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
