// KafkaSink: sqlflow's `sink.type: kafka`. Each row of a batch becomes one record on the
// topic: its value is the row as a JSON object (DuckDB's to_json, as the console sink
// prints it), its key null, its partition chosen by librdkafka's partitioner.
//
// With a transactional.id (sluice's `exactly_once: true`, docs/design/0006 #12) it is a
// deferring sink whose commit is a Kafka transaction: a batch's rows, its dead letters
// (DeadLetterTopic) and the consumed offsets (send_offsets_to_transaction) commit
// together or not at all.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
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
  // The record values of a batch's rows, handed to `emit` in order (sink.kafka.format avro
  // or protobuf: schema::FramedEncoder). Null: each row as a JSON object.
  using Render = std::function<Status(duck::Connection& conn, std::string_view table,
                                      const std::function<Status(std::string_view)>& emit)>;
  Render render;
  // Any librdkafka producer property (sluice's addition to sqlflow's keys); they override
  // the sink's defaults. librdkafka's own default acks=all is kept unless set here.
  kafka::client::Config properties;
  // Exactly-once: the producer's transactional.id ("" = not transactional). Unless set in
  // `properties`, transaction.timeout.ms is 10 s (how long a transaction a crashed member
  // left open may hold read_committed consumers back) and message.timeout.ms the same.
  std::string transactional_id;
  // The longest InitTransactions, a commit or an abort may take (each).
  std::chrono::milliseconds transaction_call_timeout{60000};
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
//
// Transactional: Write begins a transaction when none is open; Flush waits for the
// deliveries. A Write or Flush that fails aborts the transaction (the batch's rows are
// gone; its dead letters and offsets go into the next one) — unless the records timed out
// (message.timeout.ms, which follows transaction.timeout.ms) or the producer was fenced,
// which lose the transaction as below; Commit (the strategy's, once
// per batch) sends the offsets of every batch written or skipped since the last commit
// with the group's current metadata and commits. What a failure does (docs/design/0006
// #12, "Failures"):
// - an abortable error at commit (a member no longer in its generation: ILLEGAL_GENERATION,
//   UNKNOWN_MEMBER_ID; or a member with no member id at all, whose offsets the sink does
//   not send) aborts; the transaction is lost (TransactionLost: "rebalance" or
//   "abortable"), the pipeline re-reads from the group's commit; FENCED_INSTANCE_ID
//   (another live member took this one's group.instance.id) aborts and is fatal;
// - fenced (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH, from any call) while the open
//   transaction is older than transaction.timeout.ms: the broker aborted it at its timeout
//   and bumped the epoch; the sink makes a new producer (InitTransactions) and the
//   transaction is lost ("timeout");
// - fenced otherwise (a younger transaction, or none open): another live producer has
//   this transactional.id (a zombie, or two members configured with one id): returned as
//   FailedPrecondition, the pipeline stops; so does any other fatal error.
// Discard aborts (partitions lost; a transaction the broker already aborted at its
// timeout just gets a new producer); destroying the sink aborts what is open. Crash points
// (base/crash_point.h, for the crash tests): kafka-txn-offsets-sent (the offsets are in the
// transaction, not committed), kafka-txn-committed (committed, not yet reported).
// Owned by the pipeline's thread.
class KafkaSink final : public Sink {
 public:
  // InvalidArgument when brokers or topic is empty, or a property is refused by
  // librdkafka (naming it). Does not connect: librdkafka connects in the background,
  // except with a transactional_id, when it waits for InitTransactions (which fences
  // older producers with the same id and ends what they left open), at most
  // transaction_call_timeout.
  static Result<std::unique_ptr<KafkaSink>> Create(KafkaSinkOptions options);
  ~KafkaSink() override;

  Status Write(duck::Connection& conn, std::string_view table, const SourceOffsets& offsets,
               std::vector<RejectedRow>* rejected) override;
  Status Flush() override;
  std::string Describe() const override { return "kafka topic " + options_.topic; }

  bool Defers() const override { return transactional(); }
  Result<SourceOffsets> Commit(bool force) override;
  void Skip(const SourceOffsets& offsets) override;
  Status Discard() override;
  bool CommitsSourceOffsets() const override { return transactional(); }
  void SetGroupMetadata(GroupMetadataFn group) override { group_ = std::move(group); }
  std::string_view TransactionLost() const override { return lost_; }

  // A sink for `topic` on the same cluster whose records go into this sink's transaction
  // (the pipeline's dead letters). Its Flush waits for deliveries; committing is this
  // sink's. This sink must outlive it. FailedPrecondition when not transactional.
  Result<std::unique_ptr<Sink>> DeadLetterTopic(std::string topic);

  bool transactional() const { return !options_.transactional_id.empty(); }
  bool in_transaction() const { return in_transaction_; }
  const std::vector<std::string>& brokers() const { return options_.brokers; }

 private:
  friend class KafkaTopicInTransaction;
  explicit KafkaSink(KafkaSinkOptions options) : options_(std::move(options)) {}
  void OnDelivery(const kafka::client::DeliveryReport& report);
  // The rows of `table` as records to `topic`.
  Status ProduceRows(duck::Connection& conn, std::string_view table, const std::string& topic,
                     std::vector<RejectedRow>* rejected);
  Status WaitForDeliveries(const std::string& topic);
  Status BeginIfNeeded();
  // Makes producer_ from config_ (and, transactional, InitTransactions).
  Status NewProducer();
  // The open transaction is older than transaction.timeout.ms.
  bool PastTimeout() const;
  // Ends the open transaction after `cause` failed a call and returns `cause` with what
  // happened. Fenced: see the class comment (a new producer and lost "timeout", or
  // fatal). Otherwise it aborts; then, when `lose_as` is set, the transaction is lost with
  // that cause (TransactionLost) and the result is Aborted.
  Status End(const Status& cause, std::string_view lose_as);
  // A failed Write or Flush: ends the transaction keeping the offsets not yet committed
  // (on_error deals with the batch's messages in the next transaction), unless fenced.
  Status AbortKeepingOffsets(const Status& cause);
  // A failed Write or Flush that is not the records' fault: a delivery (or the flush)
  // timed out, or the transaction is in an abortable error with no record's report to
  // blame (a produce refused with _STATE).
  bool NotTheRecords(const Status& cause) const;
  // The cause of a loss, when `st` (a failed SendOffsetsToTransaction or
  // CommitTransaction) is abortable.
  std::string_view LossOf(const Status& st) const;

  KafkaSinkOptions options_;
  kafka::client::Config config_;  // the producer's properties
  // Transactional: a transaction is open (since txn_begun_), and the offsets of what was
  // written or skipped since the last commit (sent with the commit).
  bool in_transaction_ = false;
  std::chrono::steady_clock::time_point txn_begun_;
  std::chrono::milliseconds txn_timeout_{0};  // transaction.timeout.ms
  SourceOffsets uncommitted_;
  std::string lost_;  // TransactionLost
  GroupMetadataFn group_;
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
