// OffsetLog: the durable store of the group coordinator, the committed offsets of every
// consumer group and each group's last generation, kept in memory and written to an
// internal PartitionLog (<data-dir>/__consumer_offsets-0) as Kafka's own
// __consumer_offsets records (docs/formats/consumer-offsets.md). Open replays the log
// (last record per key wins, a null value deletes the key); records that do not decode
// are skipped with a warning.
//
// The log is an internal compacted topic (InternalLog, internal_log.h): the process's
// log cleaner keeps the latest record of each key, drops tombstones after
// delete.retention.ms and the records of aborted transactions, and keeps a commit or abort
// marker as long as a batch of its transaction is left, so replay after any cleaning
// gives the state replay before it gave. Every deletion writes a tombstone (null value):
// deleted groups' offsets and group records, the offsets of deleted topics.
//
// Transactions (docs/design/0016-transactions.md, "Group offsets"): WriteTxnOffsets
// appends offsets as a transactional batch of a producer and holds them pending, invisible
// to Find/Offsets, until CompleteTxn appends the producer's commit or abort marker (a
// control batch) and makes them visible or drops them. Replay does the same from the
// log; a transaction without a marker stays pending (the cleaner never cleans past the
// first record of a transaction still open).
//
// Offset commits (docs/design/0018-cluster.md, "coordfix"): AppendOffsets appends a
// commit without showing it; the owner makes it visible with FinishOffsets once the write
// is acknowledged (durable, or under the replicated log's high watermark), or drops it
// when the write failed — Kafka's pendingOffsetCommits. A failed commit is never seen by
// OffsetFetch. Transactional offsets are pending until their marker anyway; a failed
// WriteTxnOffsets is taken back with FailTxnOffsets.
//
// Threads: one owner thread (the coordinator's loop) calls every method. Write (group
// records, deletions) applies its changes to the in-memory state at once, so reads show
// them before they are durable; the `on_durable` callbacks run on an IoExecutor thread
// and must not call back into the OffsetLog (the coordinator posts them to its own loop).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"
#include "broker/internal_log.h"
#include "compaction/cleaner.h"
#include "storage/file_cache.h"
#include "storage/io_executor.h"
#include "storage/log.h"

namespace sluice::broker {

struct TopicPartition {
  std::string topic;
  int32_t partition = 0;
  auto operator<=>(const TopicPartition&) const = default;  // NOLINT(modernize-use-nullptr)
};

// OffsetCommitValue: what a group committed for one partition.
struct CommittedOffset {
  int64_t offset = -1;
  int32_t leader_epoch = -1;  // -1: none
  std::string metadata;
  int64_t commit_timestamp_ms = -1;
  bool operator==(const CommittedOffset&) const = default;
};

// GroupMetadataValue without members: what survives a restart of a group's membership
// (members are not persisted; docs/design/0003-group-coordinator.md).
struct GroupRecord {
  std::string protocol_type;
  int32_t generation = 0;
  std::optional<std::string> protocol;
  std::optional<std::string> leader;
  bool operator==(const GroupRecord&) const = default;
};

// One set of changes for OffsetLog::Write, applied in the order added.
class OffsetWrite {
 public:
  void Commit(std::string group, TopicPartition tp, CommittedOffset value);
  void SetGroup(std::string group, GroupRecord record);
  // Every offset of `group` and its group record.
  void DeleteGroup(std::string group);
  // Every group's offsets of `topic`.
  void DeleteTopic(std::string topic);
  bool empty() const { return ops_.empty(); }

 private:
  friend class OffsetLog;
  struct CommitOp {
    std::string group;
    TopicPartition tp;
    CommittedOffset value;
  };
  struct SetGroupOp {
    std::string group;
    GroupRecord record;
  };
  struct DeleteGroupOp {
    std::string group;
  };
  struct DeleteTopicOp {
    std::string topic;
  };
  std::vector<std::variant<CommitOp, SetGroupOp, DeleteGroupOp, DeleteTopicOp>> ops_;
};

// Offsets appended by AppendOffsets (or WriteTxnOffsets) and not yet finished: each
// with the log offset of its record.
struct AppendedOffsets {
  struct Entry {
    std::string group;
    TopicPartition tp;
    CommittedOffset value;
    int64_t at = -1;
  };
  int64_t producer_id = -1;  // >= 0: transactional offsets of that producer
  std::vector<Entry> entries;
};

// The internal log's options (internal_log.h: dir, executor, files, env, flush policy,
// segment.bytes, the cleaner and its settings); Open sets `name` and `max_batch_bytes`.
// segment.bytes is 8 MiB: Kafka's offsets.topic.segment.bytes is 100 MiB, smaller here
// so that the active segment, never cleaned, bounds what a restart replays beyond the
// live state.
struct OffsetLogOptions : InternalLogOptions {
  OffsetLogOptions() {
    flush_policy = storage::FlushPolicy::kInterval;
    segment_bytes = 8ull << 20;
  }
};

// The offsets log's name in the cleaner (and its directory's name in the data dir).
inline constexpr const char kOffsetsLogName[] = "__consumer_offsets-0";

class OffsetLog {
 public:
  using OffsetMap = std::map<TopicPartition, CommittedOffset>;
  using Done = std::function<void(const Status&)>;

  // Opens (creating when missing) and replays the log in options.dir.
  static Result<std::unique_ptr<OffsetLog>> Open(OffsetLogOptions options);
  ~OffsetLog();  // Close()s
  OffsetLog(const OffsetLog&) = delete;
  OffsetLog& operator=(const OffsetLog&) = delete;

  // Applies `write` to the in-memory state and appends its records. On OK, `on_durable`
  // runs exactly once: with OK when every record is covered by an fdatasync, or with the
  // log's write error; on an IoExecutor thread, or inline (before Write returns) when the
  // write turned out to hold no record (deleting what does not exist). On an error
  // return `on_durable` never runs: InvalidArgument when a record is too large (nothing
  // changed), or the log's error (the log has failed or is closed; the in-memory state
  // may then be ahead of the disk, and it stays so: a failed log refuses every later
  // write until the process restarts and replays what reached the disk).
  Status Write(const OffsetWrite& write, Done on_durable);

  // Appends the Commit ops of `write` (any other op is InvalidArgument, nothing
  // written) without applying them: `appended` gets each offset with its record's log
  // offset, for FinishOffsets, which the owner calls once `on_durable` ran (on its own
  // thread). Until then OffsetFetch does not see them (require_stable answers
  // UNSTABLE_OFFSET_COMMIT for their partitions). Errors as for Write; on an error
  // nothing is pending.
  Status AppendOffsets(const OffsetWrite& write, Done on_durable, AppendedOffsets* appended);
  // The write of `appended` was acknowledged (`ok`): each offset becomes visible unless a
  // newer record of its key is visible or a deletion written after it removed the key
  // (Kafka's onOffsetCommitAppend); or it failed: they are dropped.
  void FinishOffsets(const AppendedOffsets& appended, bool ok);
  // A WriteTxnOffsets whose write failed: its pending offsets are dropped (those a later
  // write of the producer replaced stay). Kafka's failPendingTxnOffsetCommit.
  void FailTxnOffsets(const AppendedOffsets& appended);

  // Reads of the visible state (Write's changes at once, commits once finished).
  const CommittedOffset* Find(const std::string& group, const TopicPartition& tp) const;
  // The group's visible offsets, or null when it has none.
  const OffsetMap* Offsets(const std::string& group) const;
  // Visible or pending offsets (Kafka's GroupMetadata.hasOffsets).
  bool HasOffsets(const std::string& group) const {
    return Offsets(group) != nullptr || HasPendingOffsets(group);
  }
  const GroupRecord* Group(const std::string& group) const;
  // Every group with offsets (visible or pending) or a group record, sorted.
  std::vector<std::string> GroupIds() const;
  size_t offset_count() const;
  // Bytes of the live state as records (keys, values, record framing).
  uint64_t live_bytes() const { return live_bytes_; }
  uint64_t log_bytes() const { return log_->log().size_bytes(); }
  int segment_count() const { return log_->log().segment_count(); }
  // What Open skipped: records whose key or value did not decode, and batches or
  // markers of transactions that did not.
  int skipped_records() const { return log_->skipped_records(); }

  // Transactions. WriteTxnOffsets appends the Commit ops of `write` (any other op is
  // InvalidArgument, nothing written) as transactional batches of the producer and holds
  // them pending; `on_durable` and the other errors are as for Write. Aborted when
  // `producer_epoch` is older than the producer's last epoch in this log (Kafka's
  // INVALID_PRODUCER_EPOCH); nothing is written then.
  // `appended` (optional) gets the offsets written, for FailTxnOffsets.
  Status WriteTxnOffsets(int64_t producer_id, int16_t producer_epoch, const OffsetWrite& write,
                         Done on_durable, AppendedOffsets* appended = nullptr);
  // Appends the producer's commit or abort marker and completes every pending offset of
  // the producer, in every group (a marker closes the producer's transaction in the whole
  // log, as in a Kafka partition): a commit makes each visible unless a record of the same
  // key written after it is already visible, an abort drops them. A marker with nothing
  // pending is written too. Aborted when `producer_epoch` is older than the producer's
  // last epoch here; OutOfRange when `coordinator_epoch` is older than the one of
  // the producer's last marker here (Kafka's TRANSACTION_COORDINATOR_FENCED: a deposed
  // transaction coordinator's late marker); nothing written then. `on_durable` and the
  // other errors as for Write.
  Status CompleteTxn(int64_t producer_id, int16_t producer_epoch, bool commit,
                     int32_t coordinator_epoch, Done on_durable);
  // Whether some producer holds a pending offset for the group's partition (OffsetFetch's
  // require_stable), or for any partition of the group.
  bool HasPendingOffset(const std::string& group, const TopicPartition& tp) const;
  bool HasPendingOffsets(const std::string& group) const;
  // The producer's pending offset for the group's partition, or null.
  const CommittedOffset* FindPending(int64_t producer_id, const std::string& group,
                                     const TopicPartition& tp) const;
  // Producers with pending offsets, sorted.
  std::vector<int64_t> OpenProducers() const;
  // The last epoch of the producer seen in this log (its transactional batches and
  // markers since the log start), if any.
  std::optional<int16_t> ProducerEpoch(int64_t producer_id) const;
  // The coordinator epoch of the producer's last marker in this log, if any.
  std::optional<int32_t> CoordinatorEpoch(int64_t producer_id) const;
  size_t pending_count() const;

  // Unregisters the log from the cleaner, waits for pending writes (their callbacks run),
  // syncs and closes the log. Idempotent.
  Status Close();

 private:
  struct GroupState {
    OffsetMap offsets;
    // The log offset of the record each visible offset came from: a transactional
    // offset committed later is applied only over an older record (Kafka's olderThan).
    std::map<TopicPartition, int64_t> offset_at;
    std::optional<GroupRecord> record;
    std::set<int64_t> open_producers;  // producers with pending offsets in this group
  };
  struct PendingOffset {
    CommittedOffset value;
    int64_t at = -1;  // log offset of its record
  };
  // One producer's open transaction: its pending offsets by group.
  struct ProducerTxn {
    int16_t epoch = -1;
    std::map<std::string, std::map<TopicPartition, PendingOffset>> offsets;
  };
  explicit OffsetLog(OffsetLogOptions options);
  Status Replay();
  void ReplayMarker(const InternalBatch& b);
  // `producer_id` >= 0: the record is in a transactional batch of that producer.
  void ApplyRecord(int64_t offset, std::span<const uint8_t> key,
                   std::optional<std::span<const uint8_t>> value, int64_t producer_id,
                   int16_t producer_epoch);
  // In-memory changes (with live_bytes_ kept up to date).
  void PutOffset(const std::string& group, const TopicPartition& tp, CommittedOffset value,
                 int64_t at);
  void EraseOffset(const std::string& group, const TopicPartition& tp);
  void PutGroup(const std::string& group, GroupRecord record);
  void EraseGroupRecord(const std::string& group);
  void DropIfEmpty(const std::string& group);
  void PutPending(int64_t producer_id, int16_t producer_epoch, const std::string& group,
                  const TopicPartition& tp, CommittedOffset value, int64_t at);
  void ErasePending(int64_t producer_id, const std::string& group, const TopicPartition& tp);
  // A tombstone outside a transaction: the key's pending offsets of every producer go.
  void ErasePendingOfAll(const std::string& group, const TopicPartition& tp);
  void ApplyMarker(int64_t producer_id, bool commit);
  void NoteEpoch(int64_t producer_id, int16_t producer_epoch);
  void NoteCoordinatorEpoch(int64_t producer_id, int32_t coordinator_epoch);
  // A commit of (group, tp) was appended (in flight); a deletion of the key written at
  // `at` supersedes the commits in flight before it.
  void NoteInFlight(const std::string& group, const TopicPartition& tp, int delta);
  void SupersedeInFlight(const std::string& group, const TopicPartition& tp, int64_t at);
  bool Fenced(int64_t producer_id, int16_t producer_epoch) const;
  Status CheckSizes(const OffsetWrite& write) const;
  Status AppendRecords(const std::vector<InternalRecord>& records, Done on_durable);
  // The Commit ops of `write` as records (of `producer_id`'s transaction when >= 0),
  // appended; `appended` gets each with its record's log offset.
  Status AppendCommits(const OffsetWrite& write, int64_t producer_id, int16_t producer_epoch,
                       Done on_durable, AppendedOffsets* appended);

  const OffsetLogOptions options_;
  std::unique_ptr<InternalLog> log_;
  std::map<std::string, GroupState> groups_;
  std::map<int64_t, ProducerTxn> txns_;            // producers with pending offsets
  std::map<int64_t, int16_t> producer_epochs_;     // last epoch seen per producer
  std::map<int64_t, int32_t> coordinator_epochs_;  // of each producer's last marker
  // Commits appended and not yet finished, per key: how many, and the log offset of the
  // last deletion of the key written since (a commit before it is not applied).
  struct InFlight {
    int count = 0;
    int64_t superseded_at = -1;
  };
  std::map<std::pair<std::string, TopicPartition>, InFlight> in_flight_;
  uint64_t live_bytes_ = 0;
  bool closed_ = false;
};

// The record formats of __consumer_offsets (docs/formats/consumer-offsets.md), public
// for tests and tools.
namespace offsets_format {

// Key versions: 0 and 1 are OffsetCommitKey (sluice writes 1), 2 is GroupMetadataKey.
struct Key {
  enum class Kind { kOffset, kGroup };
  Kind kind = Kind::kOffset;
  std::string group;
  TopicPartition tp;  // kOffset only
};

std::vector<uint8_t> EncodeOffsetKey(const std::string& group, const TopicPartition& tp);
std::vector<uint8_t> EncodeGroupKey(const std::string& group);
// OffsetCommitValue version 3.
std::vector<uint8_t> EncodeOffsetValue(const CommittedOffset& value);
// GroupMetadataValue version 0 with an empty members array.
std::vector<uint8_t> EncodeGroupValue(const GroupRecord& record);

// InvalidArgument naming the field and byte for bytes that do not decode, or an
// unknown version.
Result<Key> DecodeKey(std::span<const uint8_t> bytes);
// Versions 0-4 (a v1 expire timestamp is read and dropped).
Result<CommittedOffset> DecodeOffsetValue(std::span<const uint8_t> bytes);
// Versions 0-3 (members are read and dropped).
Result<GroupRecord> DecodeGroupValue(std::span<const uint8_t> bytes);

// The control record of a transaction marker (Kafka's ControlRecordType and
// EndTransactionMarker): key = version 0, type (0 abort, 1 commit); value = version 0,
// coordinator epoch.
std::vector<uint8_t> EncodeMarkerKey(bool commit);
std::vector<uint8_t> EncodeMarkerValue(int32_t coordinator_epoch);
// The coordinator epoch of a marker's value. InvalidArgument for a value shorter than 6
// bytes or a negative version; a version above 0 is read as version 0, as Kafka does.
Result<int32_t> DecodeMarkerValue(std::span<const uint8_t> bytes);
// True for a commit, false for an abort. InvalidArgument for a key shorter than 4 bytes,
// a negative version or an unknown type; a version above 0 is read as version 0, as
// Kafka does.
Result<bool> DecodeMarkerKey(std::span<const uint8_t> bytes);
// The whole control batch of a marker: transactional and control bits, the producer's id
// and epoch, one record.
std::vector<uint8_t> BuildMarkerBatch(int64_t producer_id, int16_t producer_epoch, bool commit,
                                      int32_t coordinator_epoch, int64_t timestamp_ms);

}  // namespace offsets_format

}  // namespace sluice::broker
