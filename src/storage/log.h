// PartitionLog: the on-disk log of one Kafka partition. It stores record batches
// (format v2) verbatim in segment files named by base offset, with a sparse offset index
// and a time index beside each (docs/formats/storage.md).
//
// Writes are group-committed: Append validates a batch, assigns its offsets, copies it
// into the pending buffer and returns at once; an IoExecutor job writes everything that
// accumulated with one write per segment and, by the flush policy, one fdatasync. While
// a job runs, new appends gather for the next one. Each append's callback says when its
// batch is written or durable.
//
// Offsets: start_offset() <= durable_end_offset() <= written_end_offset() <= end_offset().
// Reads see up to written_end_offset().
//
// Threads: one owner (the shard that owns the partition) appends, reads and manages the
// log; the methods are also safe to call from several threads (an internal mutex guards
// the state shared with I/O completions). Callbacks run on an IoExecutor thread and must
// not block; from a callback, Append, Read, FindOffsetByTimestamp, ApplyRetention, Verify
// and the getters are safe, while Flush, TruncateTo and Close return FailedPrecondition
// (they wait for the very task running the callback), and destroying the log is a bug.
//
// Reads racing with TruncateTo or ApplyRetention may fail with OutOfRange: retry.
//
// Failure: when a write or fdatasync fails, every pending append fails with that error
// and the log refuses further appends; reopening it recovers what reached the disk.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "storage/batch_header.h"
#include "storage/env.h"
#include "storage/file_cache.h"
#include "storage/io_executor.h"
#include "storage/txn_index.h"

namespace sluice::storage {

class CleanedSegment;   // log_swap.h
struct SegmentSummary;  // log_swap.h

enum class FlushPolicy {
  kDurable,   // every write group is fdatasync'd before its appends are acknowledged
  kInterval,  // fdatasync every flush_ms or flush_bytes, whichever comes first
};

// Names as in configuration: "durable", "interval".
Result<FlushPolicy> ParseFlushPolicy(std::string_view text);
std::string_view FlushPolicyName(FlushPolicy policy);

struct LogOptions {
  Env* env = Env::Posix();
  Clock* clock = Clock::Real();
  IoExecutor* executor = nullptr;  // required; must outlive the log
  FileCache* files = nullptr;      // shared descriptor cache; when null the log owns one of 16

  uint64_t segment_bytes = 1ull << 30;          // segment.bytes: roll past this size
  int64_t segment_ms = 7LL * 24 * 3600 * 1000;  // segment.ms: roll a segment this old
  uint32_t index_interval_bytes = 4096;         // index.interval.bytes
  FlushPolicy flush_policy = FlushPolicy::kInterval;
  int64_t flush_ms = 100;                         // flush.ms (interval policy)
  uint64_t flush_bytes = 64ull << 20;             // flush.bytes (interval policy)
  int64_t retention_bytes = -1;                   // retention.bytes, -1 = unlimited
  int64_t retention_ms = 7LL * 24 * 3600 * 1000;  // retention.ms, -1 = forever
  uint32_t max_batch_bytes = 1048588;             // message.max.bytes

  // Called after written_end_offset() or durable_end_offset() advanced (the broker wakes
  // its waiting fetches), on an IoExecutor thread, outside the log's lock. Must not block
  // and must not call Flush/TruncateTo/Close of this log.
  std::function<void()> on_readable;
};

enum class AckLevel {
  kWritten,  // the batch is in the file (page cache) and readable
  kDurable,  // the batch is covered by an fdatasync
};

struct AppendInfo {
  int64_t base_offset = -1;
  int64_t last_offset = -1;
  int64_t log_append_time_ms = -1;  // set for LogAppendTime appends
};

// Called once per append, on an IoExecutor thread: OK when the batch reached the asked
// level, the write error otherwise.
using AppendCallback = std::function<void(const Status&, const AppendInfo&)>;

struct AppendOptions {
  int32_t leader_epoch = 0;
  bool log_append_time = false;  // rewrite attributes and max timestamp (CRC recomputed)
  // The caller has already checked the batch's CRC (the broker's kafka::ValidateRecords):
  // Append checks the rest of the header but does not compute the CRC again.
  bool crc_checked = false;
  AckLevel ack = AckLevel::kDurable;
  AppendCallback on_ack;  // may be empty
  // For an abort marker: the transaction to add to the .txnindex of the segment that
  // takes the batch, written and synced before the batch itself (storage/log_txn.cc).
  // Append sets its last_offset to the batch's; a last_stable_offset of -1 means the
  // offset after the batch.
  std::optional<AbortedTxn> aborted_txn;
  // A follower's append (AppendReplica): the batch keeps the base offset and partition
  // leader epoch the leader gave it; `leader_epoch` and `log_append_time` are ignored.
  bool keep_offsets = false;
};

// A byte range of one segment file, for sendfile or a copy. `file` keeps the descriptor
// open even if the segment is deleted meanwhile.
struct FileSlice {
  std::shared_ptr<File> file;
  uint64_t position = 0;
  uint64_t size = 0;
};

struct ReadResult {
  FileSlice slice;             // whole batches; empty at the end of the log
  int64_t first_offset = -1;   // base offset of the first batch (may be below the asked offset)
  int64_t next_offset = -1;    // offset after the last batch returned
  bool holds_records = false;  // some batch of the slice has a record (count > 0)
};

// What a read does with batches that hold no record: a producer's last batch the cleaner
// kept empty (docs/design/0017-log-compaction.md, decision 6).
enum class EmptyBatches {
  kKeep,  // served as any other batch (replication, tools: the log as it is)
  // A consumer's read: record-less batches before the first batch with records are passed
  // over, in the following segments too; they are not in the slice and do not count
  // toward max_bytes. When no batch with records comes before the limit, the slice holds
  // the last segment's record-less batches from where reading it started, so a reader
  // still moves past them.
  kSkip,
};

struct TimestampLookup {
  int64_t offset;     // first offset whose record has timestamp >= the asked one
  int64_t timestamp;  // the timestamp found there (the batch max timestamp when inexact)
  bool exact;         // false for compressed batches: `offset` is the batch's base offset
};

struct RecoveryReport {
  int segments = 0;
  uint64_t truncated_bytes = 0;   // bytes cut from the tail of the last segment
  std::string truncation_reason;  // why the scan stopped, with file and position
  int indexes_rebuilt = 0;
};

class PartitionLog {
 public:
  // Opens (creating when missing) the log in `dir`, recovering it: see docs/formats/storage.md.
  static Result<std::unique_ptr<PartitionLog>> Open(const std::string& dir, LogOptions options);

  ~PartitionLog();  // Close()s
  PartitionLog(const PartitionLog&) = delete;
  PartitionLog& operator=(const PartitionLog&) = delete;

  // Validates `batch` (one whole v2 batch), assigns its offsets and queues it. Returns the
  // assigned offsets at once; `opts.on_ack` tells when it is written or durable.
  Result<AppendInfo> Append(std::span<const uint8_t> batch, AppendOptions opts);

  // A follower's append of a batch fetched from its leader (docs/design/0018, decision 5):
  // its offsets and partition leader epoch are kept, its CRC is checked (unless
  // opts.crc_checked). Its base offset must be at or past end_offset() — a gap is what
  // compaction leaves on the leader, as Kafka's follower appends require increasing
  // offsets, not contiguous ones; OutOfRange otherwise.
  Result<AppendInfo> AppendReplica(std::span<const uint8_t> batch, AppendOptions opts) {
    opts.keep_offsets = true;
    return Append(batch, std::move(opts));
  }

  // The batches from the one containing `offset`, whole, up to `max_bytes` (the first
  // batch is returned whole even when larger), within one segment (kSkip may read on into
  // the next ones to find records). An empty slice at
  // written_end_offset(); OutOfRange outside [start_offset, written_end_offset].
  // `limit` caps what is visible below written_end_offset() (a broker under the durable
  // policy passes durable_end_offset(): consumers never see past it); it must be a batch
  // boundary, as every end offset of the log is.
  // `empty` says what becomes of batches without records (EmptyBatches).
  Result<ReadResult> Read(int64_t offset, uint64_t max_bytes, int64_t limit = INT64_MAX,
                          EmptyBatches empty = EmptyBatches::kKeep);

  // The first offset at or after `timestamp_ms`, or nullopt when every record is older.
  Result<std::optional<TimestampLookup>> FindOffsetByTimestamp(int64_t timestamp_ms);

  // Writes and fdatasyncs everything appended so far; returns when done and the acks of
  // those appends have run.
  Status Flush();

  // Runs `cb` once everything below `offset` is durable (at once, on this thread, when it
  // already is; otherwise from the log's I/O thread, like an append's durable ack), with
  // the log's error if it failed or is closed (OutOfRange past the end). A sync is started
  // if one is needed. For
  // a follower that reports an offset as synced (docs/design/0018, decision 5).
  void WhenDurable(int64_t offset, AppendCallback cb);

  // Kafka's truncateFullyAndStartAt, for a follower behind its leader's log start: every
  // segment goes and the log restarts empty at `offset`, which becomes its start and end
  // (a fresh segment with that base, so a restart finds the same). Waits for pending I/O.
  Status TruncateFullyAndStartAt(int64_t offset);

  // Removes every batch that holds an offset >= `offset` (a batch straddling it goes
  // too); end_offset() becomes the base of the first removed batch, or `offset` when
  // nothing was removed. Waits for pending I/O first.
  Status TruncateTo(int64_t offset);

  // Deletes whole closed segments past retention_bytes / retention_ms, only those whose
  // every offset is below `upper_bound` (a replicated log's high watermark: as Kafka's
  // deleteOldSegments, retention never deletes what the ISR does not all hold yet).
  // Returns how many.
  Result<int> ApplyRetention(int64_t upper_bound = std::numeric_limits<int64_t>::max());

  // Moves the log start offset up to `offset` (Kafka's DeleteRecords): reads below it
  // are OutOfRange from now on, and whole segments below it are deleted. The new start is
  // recorded durably in <dir>/log-start-offset before returning, so it survives a crash.
  // OutOfRange when `offset` is past written_end_offset(); an `offset` at or below the
  // last one recorded changes nothing (one below the first segment is recorded: a tiered
  // log's older offsets are remote, records_start_offset()). Returns the start offset
  // after the call.
  Result<int64_t> DeleteRecordsBefore(int64_t offset);

  // The limits a topic's config can change while its log is open (segment.bytes,
  // segment.ms, retention.*, max.message.bytes); they apply from the next append or
  // retention pass. options() keeps the values the log was opened with.
  struct Limits {
    uint64_t segment_bytes;
    int64_t segment_ms;
    int64_t retention_bytes;
    int64_t retention_ms;
    uint32_t max_batch_bytes;
  };
  void Reconfigure(const Limits& limits);

  // When on, batches go to the .log with O_DIRECT, around the page cache: for a
  // follower's log, whose copy is read again only if it comes to lead. The page cache
  // then holds what leaders' consumers read, and the writer does not pay for growing it
  // (where a hypervisor lends the memory, several CPU seconds per GB: 0018, "pagecache").
  // Each write covers whole blocks (kDirectIoAlign): the partial block at the end is kept
  // in memory and written again with the next batch, and the file is zero-padded to the
  // block's end until the segment or the log is closed (recovery cuts such a padding as
  // a torn tail). Where the file system refuses O_DIRECT, writes stay buffered. Off when
  // opened; takes effect from the next write.
  void SetDirectWrites(bool on);

  // Reads every segment in full and checks every batch (header and CRC). Corruption
  // names the file and byte position.
  Status Verify();

  // Calls `fn` with the header of every written batch from the one holding `from` (or
  // the first) to the written end, reading only headers (one small read per batch).
  // For rebuilding state kept beside the log (producer sequences, epochs) at open.
  // For a control batch `raw_header` also holds up to kControlPeekBytes of the records
  // that follow the header (its type: ParseControlType). `fn` returns false to stop early.
  Status ForEachBatchHeader(
      int64_t from,
      const std::function<bool(const BatchHeader&, std::span<const uint8_t> raw_header)>& fn);

  // The aborted transactions overlapping [from, upper), from the .txnindex of the segment
  // holding `from` onwards, with Kafka's early stop (storage/txn_index.h). Only entries
  // whose markers are written are seen.
  Result<std::vector<AbortedTxn>> CollectAbortedTxns(int64_t from, int64_t upper);
  // Adds to each segment's .txnindex the transactions of `txns` (aborted, by a marker in
  // that segment) it lacks, matched by last offset, keeping marker order; a transaction
  // whose marker is not in the log is skipped. For the owner at open, when it has read
  // the markers back (an index file lost or damaged); FailedPrecondition while appends
  // are pending. Returns how many entries were added.
  Result<int> AddMissingAbortedTxns(std::span<const AbortedTxn> txns);

  // Waits for pending I/O, syncs, closes files. Further calls fail.
  Status Close();

  // The first readable offset: the first segment's base, or above it after
  // DeleteRecordsBefore.
  int64_t start_offset() const;
  // The start DeleteRecordsBefore set (0 when never), whatever retention deleted since.
  int64_t records_start_offset() const;
  int64_t end_offset() const;          // the next offset Append assigns
  int64_t written_end_offset() const;  // readable up to here
  int64_t durable_end_offset() const;  // covered by fdatasync up to here
  uint64_t size_bytes() const;         // all segments, including pending bytes
  int segment_count() const;
  uint64_t sync_count() const;  // fdatasyncs of segment data so far (for benchmarks)
  const RecoveryReport& recovery() const { return recovery_; }
  const std::string& dir() const { return dir_; }
  const LogOptions& options() const { return options_; }

  // Copies `slice` into `out` (for callers that do not sendfile).
  static Status ReadSlice(const FileSlice& slice, std::vector<uint8_t>* out);

  // Compaction (log_swap.h/.cc; the cleaner is src/compaction). The closed segments
  // (every one before the active segment whose closing sync is done), oldest first.
  std::vector<SegmentSummary> ClosedSegments() const;
  // A new cleaned segment based at `base_offset`, to fill and hand to ReplaceSegments.
  Result<std::unique_ptr<CleanedSegment>> BeginCleaned(int64_t base_offset);
  // Replaces the consecutive closed segments `old_bases` (the first is cleaned's base) by
  // `cleaned`, crash-safely: a crash leaves the old segments or the new one, whole.
  // Readers see one or the other. FailedPrecondition, changing nothing, when those are
  // no longer the log's segments (retention or truncation ran meanwhile).
  Status ReplaceSegments(const std::vector<int64_t>& old_bases,
                         std::unique_ptr<CleanedSegment> cleaned);

 private:
  struct Segment;
  struct Chunk;
  struct Waiter;

  // Writes `bytes` at `pos` of seg's .log with O_DIRECT (SetDirectWrites); *used is the
  // descriptor written through. Write job only.
  Status WriteDirect(const std::shared_ptr<Segment>& seg, uint64_t pos,
                     std::span<const uint8_t> bytes, std::shared_ptr<File>* used);
  // Cuts the zero padding of direct writes off seg's .log, whose bytes end at `size`
  // (a segment's closing, Close).
  Status CutPadding(Segment& seg, uint64_t size);

  PartitionLog(std::string dir, LogOptions options);

  // What ScanBatches found; see log.cc.
  struct ScanResult {
    uint64_t end = 0;         // byte after the last good batch
    int64_t next_offset = 0;  // offset after the last good batch
    int64_t first_base = -1;  // base offset of the first good batch
    int64_t first_batch_ts = -1;
    int64_t max_timestamp = -1;
    std::string problem;                     // why the walk stopped early; empty when it did not
    std::vector<uint8_t> index, time_index;  // rebuilt entries
    uint64_t bytes_since_index = 0;
    int64_t last_indexed_ts = -1;
  };

  Status Recover();
  Status RecoverSwaps();  // log_swap.cc
  Status FinishSwap(int64_t base, int64_t end, const std::vector<std::string>& exts);
  Status RecoverLastSegment(Segment& seg);
  Status RecoverClosedSegment(Segment& seg);
  std::shared_ptr<Segment> NewSegment(int64_t base) const;
  Result<ScanResult> ScanBatches(File& file, const Segment& seg, uint64_t from, uint64_t to,
                                 bool check_crc, bool build_index, int64_t stop_at) const;
  Status InstallScan(Segment& seg, ScanResult& r, bool closed);
  uint64_t MaxStoredBatch() const;
  Status LayoutChangedOr(uint64_t gen, Status st) const;
  bool InCallback() const;
  // hint: a byte position where a batch starting at `offset` was found before (a read
  // hint), tried before the offset index.
  // `written_next`: the offset after the segment's written batches.
  Result<ReadResult> ReadSegment(const Segment& seg, uint64_t written_size, uint64_t index_entries,
                                 int64_t written_next, int64_t offset, uint64_t max_bytes,
                                 int64_t limit, EmptyBatches empty, std::optional<uint64_t> hint);
  void NoteReadHintLocked(const Segment* seg, int64_t offset, uint64_t pos);
  void RollLocked(int64_t base_offset);
  Chunk& PendingChunkLocked(const std::shared_ptr<Segment>& seg);
  void MaybeScheduleLocked();
  void RunIoJob();
  void ReserveAhead(File& file, Segment& seg, uint64_t pos, uint64_t end, uint64_t segment_bytes);
  void ReleaseReserved(Segment& seg, uint64_t size);
  void RunSync();
  void OnSyncTimer();
  void FailLocked(const Status& st, std::vector<std::pair<Waiter, Status>>* ready);
  void CollectReadyLocked(std::vector<std::pair<Waiter, Status>>* ready);
  void FinishTask(std::vector<std::pair<Waiter, Status>>& ready, bool* running);
  Status WaitIdleLocked(std::unique_lock<std::mutex>& lock);
  Result<std::shared_ptr<File>> LogFile(const Segment& seg, OpenMode mode);
  // Deletes the files of segments already removed from segments_ (log file first).
  Status RemoveSegmentFiles(const std::vector<std::shared_ptr<Segment>>& doomed);
  Status LoadLogStart();
  // The .txnindex of a recovered segment made to agree with its log (log_txn.cc).
  Status RecoverTxnIndex(Segment& seg, bool is_last);
  // Drops the .txnindex entries of `seg` whose markers are at or past its end.
  Status CutTxnIndex(Segment& seg);
  int64_t StartLocked() const;

  const std::string dir_;
  const LogOptions options_;
  std::unique_ptr<FileCache> own_files_;
  FileCache* files_;
  RecoveryReport recovery_;

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  // All below guarded by mu_.
  std::deque<std::shared_ptr<Segment>> segments_;  // by base offset; back() is active
  int64_t next_offset_ = 0;
  int64_t written_end_ = 0;
  int64_t durable_end_ = 0;
  std::vector<Chunk> pending_;  // appended, not yet handed to a job
  uint64_t layout_gen_ = 0;     // bumped when segments are deleted or cut
  std::deque<Waiter> written_waiters_;
  std::deque<Waiter> durable_waiters_;
  bool job_running_ = false;               // a write job is queued or running
  bool sync_running_ = false;              // a sync task is queued or running
  bool sync_due_ = false;                  // the flush.ms timer fired
  int64_t flush_target_ = 0;               // Flush()/Close() want durable_end_ to reach this
  std::shared_ptr<Segment> last_written_;  // the segment a sync must cover
  // The descriptor last_written_ was written through, held until a sync covered it: the
  // file cache may close idle descriptors, and a write-back error is reported only to
  // descriptors open when it happened, so the sync goes through this one.
  std::shared_ptr<File> written_file_;
  uint64_t unsynced_bytes_ = 0;  // written, not yet covered by an fdatasync
  int64_t last_sync_ns_ = 0;
  IoExecutor::TaskId timer_id_ = 0;  // 0 = no flush timer scheduled
  uint64_t sync_count_ = 0;
  Limits limits_{};            // from options_, then Reconfigure
  int64_t log_start_ = 0;      // DeleteRecordsBefore; StartLocked() is the real start
  int callbacks_running_ = 0;  // tasks running acks outside the lock
  Status failed_;              // non-OK after a write error
  uint64_t swap_gen_ = 0;      // bumped by ReplaceSegments: a Read that raced it retries
  // Where recent reads ended. A reader at the tail (a follower, a live consumer) asks next
  // for the offset its last read ended at: found here, without a binary search of the
  // offset index (a pread per step) and a walk of headers. Valid for one layout.
  struct ReadHint {
    const Segment* seg = nullptr;
    uint64_t layout_gen = 0, swap_gen = 0;
    int64_t offset = -1;  // a batch starting here
    uint64_t pos = 0;     // at this byte of seg's .log
  };
  static constexpr size_t kReadHints = 8;
  std::array<ReadHint, kReadHints> read_hints_{};
  size_t next_read_hint_ = 0;
  bool closed_ = false;

  bool reserve_supported_ = true;  // false once fallocate said "not here"; write job only

  std::mutex start_file_mu_;  // serializes writers of <dir>/log-start-offset
  // The largest max_batch_bytes ever set: bounds scans of stored batches (read without mu_).
  std::atomic<uint32_t> max_stored_batch_{0};
  std::atomic<bool> direct_writes_{false};  // SetDirectWrites
  // The write job's state for direct writes; TruncateTo and Close (which wait for the job)
  // reset it.
  struct DirectWriter;
  std::unique_ptr<DirectWriter> direct_;
  bool direct_supported_ = true;  // false once the file system refused O_DIRECT
};

}  // namespace sluice::storage
