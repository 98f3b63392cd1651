// Producer: RAII over a librdkafka producer handle. Produce enqueues a record for a
// topic and partition; librdkafka batches and sends it from its own threads; Poll and
// Flush serve the delivery reports, which update the counters and call the delivery
// callback. With `transactional.id` set it is a transactional producer (KIP-98):
// InitTransactions once, then Begin / SendOffsets / Commit or Abort per transaction.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kafka/client/config.h"
#include "kafka/client/consumer.h"

struct rd_kafka_error_s;  // rd_kafka_error_t

namespace sluice::kafka::client {

// The outcome of one produced record. The views live only during the callback.
struct DeliveryReport {
  std::string_view topic;
  int32_t partition = -1;  // the partition it went to (or was meant for)
  int64_t offset = -1;     // its offset, when the broker said (acks >= 1)
  size_t value_bytes = 0;
  uint64_t cookie = 0;  // what Produce was given
  Status status;        // OK when delivered
};

struct ProducerCounters {
  uint64_t produced = 0;         // accepted by Produce
  uint64_t delivered = 0;        // reported delivered
  uint64_t failed = 0;           // reported failed
  uint64_t delivered_bytes = 0;  // value bytes of the delivered records
};

// Lifecycle: Create, Produce any number of times, Flush, destroy. Destroying it drops
// records not yet delivered (without reports): Flush first.
// Threads: Produce from one thread at a time; Poll and Flush from one thread at a time,
// which may be another one. The delivery callback runs inside Poll or Flush, on the
// thread that called them. counters() and last_error() may be read from any thread.
class Producer {
 public:
  using DeliveryCallback = std::function<void(const DeliveryReport&)>;
  // librdkafka's statistics JSON (its STATISTICS.md), every statistics.interval.ms.
  using StatsCallback = std::function<void(std::string_view json)>;

  // `config` needs at least bootstrap.servers. Fails on a property librdkafka does not
  // know or a value it refuses (InvalidArgument, naming the property). Both callbacks
  // run inside Poll or Flush.
  static Result<std::unique_ptr<Producer>> Create(const Config& config,
                                                  DeliveryCallback on_delivery = nullptr,
                                                  StatsCallback on_stats = nullptr);
  ~Producer();
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // What Produce does with the value bytes (librdkafka always copies the key).
  enum class Value {
    kCopy,    // copied at once: the caller may reuse the buffer when Produce returns
    kBorrow,  // used in place: must stay valid and unchanged until the record's delivery
              // report has been served (saves a copy per record; the bytes are copied
              // once into the request either way)
  };

  // Enqueues one record. A key or value whose data() is null is sent as null.
  // `partition` may be kAnyPartition. `cookie` comes back in the DeliveryReport.
  // ResourceExhausted when the local queue is full (queue.buffering.max.messages /
  // .kbytes): Poll, then try again.
  // `timestamp_ms` 0: the client's clock (CreateTime now).
  Status Produce(std::string_view topic, int32_t partition, std::string_view key,
                 std::string_view value, uint64_t cookie = 0, Value value_mode = Value::kCopy,
                 int64_t timestamp_ms = 0);

  // One record with headers, copied; a key or value of nullopt is Kafka's null (a
  // tombstone's value), not an empty one.
  Status ProduceRecord(std::string_view topic, int32_t partition,
                       std::optional<std::string_view> key, std::optional<std::string_view> value,
                       const std::vector<RecordHeader>& headers, uint64_t cookie = 0);

  // Serves delivery reports (and error events) for up to `timeout`, returning as soon
  // as there was at least one. Returns how many events it served.
  int Poll(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  // Waits until every record produced so far has been reported, serving the reports.
  // Aborted when `timeout` passes first (the message says how many are in flight).
  Status Flush(std::chrono::milliseconds timeout);

  // Records produced and not yet reported (and other queued events).
  int64_t InFlight() const;

  ProducerCounters counters() const;
  // The last error librdkafka reported for the handle as a whole (all brokers down, a
  // fatal error), or OK. Per-record errors go to the DeliveryReport instead.
  Status last_error() const;

  std::string name() const;

  // The transactional API (`transactional.id` set; librdkafka's rd_kafka_*_transaction*).
  // Each call blocks at most `timeout` and returns librdkafka's error class as the code:
  //   kResourceExhausted  retriable: the same call may be made again (a timeout, say);
  //   kAborted            the transaction cannot commit: AbortTransaction, then Begin again
  //                       (a record not delivered, a stale group generation, KIP-447);
  //   kFailedPrecondition fatal: the producer is unusable and must be destroyed (fenced by
  //                       a newer producer with the same transactional.id, or the broker
  //                       refused transactions); the message starts with "fatal: ";
  //   kInvalidArgument    a call out of order (Begin with a transaction open, say).
  // The message carries librdkafka's reason and error name.
  // InitTransactions: once, before the first Begin. It fences older producers with the
  // same transactional.id and aborts (or completes) what they left open.
  Status InitTransactions(std::chrono::milliseconds timeout);
  Status BeginTransaction();
  // The consumer's next offsets, committed for `group` when the transaction commits
  // (KIP-447: the group coordinator checks the metadata's generation and member id, so
  // a member that lost its partitions cannot commit them).
  Status SendOffsetsToTransaction(const std::vector<TopicPartition>& offsets,
                                  const GroupMetadata& group, std::chrono::milliseconds timeout);
  // Flushes what was produced and commits; on an abortable error the transaction must be
  // aborted.
  Status CommitTransaction(std::chrono::milliseconds timeout);
  Status AbortTransaction(std::chrono::milliseconds timeout);
  // The fatal error librdkafka raised for the handle (a fenced producer), or OK.
  Status FatalError() const;
  // True when that fatal error is a fence: the transaction coordinator knows a newer
  // epoch of this transactional.id. Either another producer with the same id called
  // InitTransactions (a zombie's case), or the coordinator aborted a transaction open past
  // transaction.timeout.ms and bumped the epoch as it did: the client sees the same
  // PRODUCER_FENCED / INVALID_PRODUCER_EPOCH for both (librdkafka 2.0 then refuses every
  // call; only a new producer can go on).
  bool Fenced() const;
  // Why the last transactional call failed, beyond its class (the Status code):
  // kMembership when the group coordinator refused the offsets because the member is no
  // longer the one it was (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID: a rebalance or a session
  // the member missed, KIP-447; abortable); kFencedInstance when another live member has
  // taken its group.instance.id (FENCED_INSTANCE_ID: a static member's zombie; abortable
  // for the producer, fatal for the consumer); kNone after a call that succeeded.
  enum class TxnError { kNone, kMembership, kFencedInstance, kOther };
  TxnError last_txn_error() const { return last_txn_error_; }

 private:
  Producer(DeliveryCallback on_delivery, StatsCallback on_stats)
      : on_delivery_(std::move(on_delivery)), on_stats_(std::move(on_stats)) {}
  rd_kafka_topic_s* Topic(std::string_view topic, Status* status);
  // librdkafka's error object (consumed) as a Status whose code is its class; sets
  // last_txn_error_.
  Status TxnStatus(rd_kafka_error_s* error, std::string_view what);

  friend struct ProducerCallbacks;  // librdkafka's C callbacks (producer.cc)

  DeliveryCallback on_delivery_;
  StatsCallback on_stats_;
  detail::KafkaPtr rk_;  // reset first in the destructor
  // Topic handles by name, touched only by Produce.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, detail::TopicPtr, Hash, std::equal_to<>> topics_;

  std::atomic<uint64_t> produced_{0};
  std::atomic<uint64_t> delivered_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> delivered_bytes_{0};
  mutable std::mutex error_mu_;
  Status last_error_;                          // guarded by error_mu_
  TxnError last_txn_error_ = TxnError::kNone;  // the transactional API's thread
};

}  // namespace sluice::kafka::client
