// Consumer: RAII over a librdkafka consumer handle. Either Assign partitions with start
// offsets (no consumer group: works against any broker, nothing is committed) or
// Subscribe to topics as a member of group.id (rebalancing and Commit). Poll returns a
// batch of records as views into librdkafka's buffers, valid while the batch lives.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kafka/client/config.h"

struct rd_kafka_message_s;                  // rd_kafka_message_t
struct rd_kafka_consumer_group_metadata_s;  // rd_kafka_consumer_group_metadata_t

namespace sluice::kafka::client {

// One record. The views point into the MessageBatch that holds it. A null key or value
// has data() == nullptr.
struct Message {
  std::string_view topic;
  int32_t partition = -1;
  int64_t offset = -1;
  int64_t timestamp_ms = -1;  // -1 when the record carries none
  std::string_view key;
  std::string_view value;
};

struct TopicPartition {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = kOffsetBeginning;  // where Assign starts, or what Commit stores
};

// A group member's identity as the group coordinator knows it now (group id, generation,
// member id, group.instance.id): what a transactional producer sends with the consumed
// offsets (Producer::SendOffsetsToTransaction, KIP-447). A copy taken at one moment: take
// a new one for each transaction, as a rebalance changes the generation. Move-only.
class GroupMetadata {
 public:
  GroupMetadata() = default;
  // Built by hand (tests, a source that is not a librdkafka consumer).
  static GroupMetadata Make(const std::string& group_id, int32_t generation,
                            const std::string& member_id, const std::string& instance_id = "");
  GroupMetadata(GroupMetadata&& other) noexcept : md_(std::exchange(other.md_, nullptr)) {}
  GroupMetadata& operator=(GroupMetadata&& other) noexcept;
  ~GroupMetadata();
  rd_kafka_consumer_group_metadata_s* get() const { return md_; }

 private:
  friend class Consumer;
  explicit GroupMetadata(rd_kafka_consumer_group_metadata_s* md) : md_(md) {}
  rd_kafka_consumer_group_metadata_s* md_ = nullptr;
};

// A change of a group member's assignment, as the rebalance listener sees it.
struct RebalanceEvent {
  enum class Kind {
    kAssigned,  // these partitions are about to be this member's
    kRevoked,   // these are about to be given up: commit what was processed now
    kLost,      // these were already given to others (session lost): do not commit
  };
  Kind kind;
  // Offsets unset (kOffsetInvalid). For kAssigned the listener may set a partition's
  // offset: fetching starts there instead of at the group's committed offset (how a
  // pipeline with its own durable state resumes where its state ends).
  std::vector<TopicPartition> partitions;
  // kRevoked: the listener may set this to keep the partitions until it calls
  // Consumer::CompleteRevocation (after Poll returns, which it then does soon), instead of
  // giving them up as it returns: it finishes and commits what it holds outside Poll.
  bool defer = false;
};

// Where a consumer stands on one assigned partition, from what it last heard of the
// broker (no request is made).
struct PartitionLag {
  std::string topic;
  int32_t partition = 0;
  int64_t position = -1;        // the next offset the application will get; -1 unknown
  int64_t high_watermark = -1;  // -1 unknown
  // The last stable offset (below it every transaction has ended), from librdkafka's
  // statistics when the caller gathers them (KafkaSource does); -1 unknown. A
  // read_committed consumer reads nothing at or past it until the transactions end.
  int64_t last_stable_offset = -1;
  // high_watermark - position, or -1 when either is unknown.
  int64_t lag() const {
    return position < 0 || high_watermark < 0 ? -1 : high_watermark - position;
  }
  // Offsets between the last stable offset and the high watermark (open transactions'
  // records and markers), or -1 when either is unknown.
  int64_t unstable() const {
    if (last_stable_offset < 0 || high_watermark < 0) return -1;
    return high_watermark > last_stable_offset ? high_watermark - last_stable_offset : 0;
  }
};

// What one Poll returned: records, partitions that reached their end (with
// enable.partition.eof=true), and per-partition errors (librdkafka keeps fetching after
// most of them). Move-only; destroying it releases the records.
class MessageBatch {
 public:
  struct PartitionEnd {
    std::string topic;
    int32_t partition;
    int64_t offset;  // the end offset reached: the next record will have this offset
  };

  MessageBatch() = default;
  MessageBatch(MessageBatch&& other) noexcept;
  MessageBatch& operator=(MessageBatch&& other) noexcept;
  ~MessageBatch();

  size_t size() const { return messages_.size(); }
  bool empty() const { return messages_.empty(); }
  Message operator[](size_t i) const;
  // Record i's headers, in order (parsed on this call: the pipelines never ask), and
  // whether its key or value is null (Message shows null as empty).
  std::vector<RecordHeader> Headers(size_t i) const;
  bool KeyIsNull(size_t i) const;
  bool ValueIsNull(size_t i) const;
  // Key and value bytes of all the records.
  uint64_t bytes() const { return bytes_; }
  const std::vector<PartitionEnd>& ends() const { return ends_; }
  const std::vector<Status>& errors() const { return errors_; }

 private:
  friend class Consumer;
  std::vector<rd_kafka_message_s*> messages_;  // owned; destroyed with the batch
  uint64_t bytes_ = 0;
  std::vector<PartitionEnd> ends_;
  std::vector<Status> errors_;
};

// Lifecycle: Create, then Assign or Subscribe (once), Poll repeatedly, destroy (which
// stops the fetchers and, for a group member, leaves the group).
// Threads: one thread at a time; last_error() from any thread.
class Consumer {
 public:
  // librdkafka's statistics JSON (its STATISTICS.md), every statistics.interval.ms.
  using StatsCallback = std::function<void(std::string_view json)>;

  // `config` needs bootstrap.servers; group.id only for Subscribe and Commit.
  // enable.auto.commit defaults to false here (commits are explicit), unless set.
  // `on_stats` runs inside Poll (with statistics.interval.ms set).
  static Result<std::unique_ptr<Consumer>> Create(const Config& config,
                                                  StatsCallback on_stats = nullptr);
  ~Consumer();
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // Starts fetching each partition at its offset (an offset, kOffsetBeginning or
  // kOffsetEnd), outside any consumer group. Once per consumer; not with Subscribe.
  Status Assign(const std::vector<TopicPartition>& partitions);

  // Joins group.id and consumes the topics the group assigns. Once; not with Assign.
  Status Subscribe(const std::vector<std::string>& topics);

  // Called inside Poll (on the polling thread) when the group changes this member's
  // assignment, for eager and cooperative assignors alike: kRevoked before the partitions
  // are given up, so the listener may process what it holds and Commit; kAssigned just
  // before they are taken, so it may choose where each starts. Set before Subscribe. The
  // listener must not call Poll. An assignment takes effect as the Poll that announced it
  // returns: every record a Poll returns was fetched under the assignment that held when
  // that Poll began, including records of partitions it then revoked or lost (before the
  // event), which the caller must drop; it tells them apart by the Poll that brought them.
  using RebalanceListener = std::function<void(RebalanceEvent&)>;
  void SetRebalanceListener(RebalanceListener listener);
  // Gives up the partitions of a revocation the listener deferred (RebalanceEvent::defer);
  // nothing when none is. Poll and the destructor call it first.
  void CompleteRevocation();

  // The partitions currently assigned (by Assign or by the group).
  Result<std::vector<TopicPartition>> Assignment() const;
  // Position and high watermark of every assigned partition.
  Result<std::vector<PartitionLag>> Lag() const;

  // Waits up to `timeout` for records, and returns at most `max_messages` (at least
  // one record, end or error, or none after the timeout).
  Result<MessageBatch> Poll(std::chrono::milliseconds timeout, size_t max_messages = 1024);

  // Commits, for the group, the offset of the next record to read in each partition
  // (synchronously). Needs Subscribe.
  Status Commit(const std::vector<TopicPartition>& offsets);
  // The same without waiting for the broker's answer: commits are sent in order, and a
  // failure is logged and becomes last_error() (a later commit covers the same offsets).
  Status CommitAsync(const std::vector<TopicPartition>& offsets);

  // Asks the partition's leader for its high watermark (a ListOffsets round trip, at most
  // `timeout`). A side effect the pipeline runner relies on: the request wakes the
  // librdkafka thread that fetches from that broker. librdkafka 2.0 re-checks a partition
  // it stopped fetching (paused, or its queue bound reached) only when that thread
  // wakes, which without traffic is once a second (2.2 added fetch.queue.backoff.ms).
  Result<int64_t> QueryHighWatermark(const std::string& topic, int32_t partition,
                                     std::chrono::milliseconds timeout);

  // The member's current group metadata, for a transactional producer (KIP-447).
  // FailedPrecondition without group.id.
  Result<GroupMetadata> CurrentGroupMetadata() const;
  // The member id the group coordinator gave this consumer, or "" while it is no member:
  // before its first join, and once the coordinator forgot it (a session that expired)
  // until it has rejoined, which librdkafka does only after Poll reported the loss. Its
  // group metadata then carries generation -1 and no member id, which a group
  // coordinator lets a transaction commit (as it lets an admin's commit) unless
  // group.instance.id is set.
  std::string MemberId() const;

  // The group's committed offset of each partition (OffsetFetch; with
  // isolation.level=read_committed, librdkafka's default, only stable offsets: it waits
  // while a transaction holding offsets of the group is open), at most `timeout`.
  // TopicPartition::offset is kOffsetInvalid where the group has none. Needs group.id.
  Result<std::vector<TopicPartition>> Committed(const std::vector<TopicPartition>& partitions,
                                                std::chrono::milliseconds timeout) const;

  // Moves each assigned partition's fetch position to its offset (an offset,
  // kOffsetBeginning or kOffsetEnd); records fetched before and not yet returned by Poll
  // are dropped by librdkafka. At most `timeout`.
  Status Seek(const std::vector<TopicPartition>& partitions, std::chrono::milliseconds timeout);

  // The last error librdkafka reported for the handle as a whole, or OK.
  Status last_error() const;

  std::string name() const;

 private:
  Consumer() = default;
  void RecordError(Status st);      // becomes last_error() when not OK
  void ApplyPendingAssign();        // the assignment a rebalance callback announced
  friend struct ConsumerCallbacks;  // librdkafka's C callbacks (consumer.cc)

  enum class Mode { kNone, kAssigned, kSubscribed };
  // The destructor releases these in the order librdkafka needs (queue, topics, handle).
  detail::KafkaPtr rk_;
  detail::QueuePtr queue_;  // what Poll reads
  struct Started {
    rd_kafka_topic_s* topic;
    int32_t partition;
  };
  std::vector<detail::TopicPtr> topics_;  // topic handles Assign holds
  std::vector<Started> started_;          // partitions Assign started fetching
  Mode mode_ = Mode::kNone;
  RebalanceListener rebalance_listener_;
  StatsCallback on_stats_;
  bool has_group_ = false;
  std::vector<rd_kafka_message_s*> scratch_;                   // what Poll hands librdkafka to fill
  std::optional<std::vector<TopicPartition>> pending_assign_;  // announced, taken as Poll returns
  bool pending_cooperative_ = false;
  std::optional<std::vector<TopicPartition>> pending_revoke_;  // deferred by the listener
  bool pending_revoke_cooperative_ = false;
  bool closing_ = false;  // in the destructor: an announced assignment is taken at once
  mutable std::mutex error_mu_;
  Status last_error_;  // guarded by error_mu_
};

}  // namespace sluice::kafka::client
