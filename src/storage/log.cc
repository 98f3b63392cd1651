// PartitionLog: segments, indexes, group commit, recovery, retention.
// The byte layouts are in docs/formats/storage.md; the contract is in log.h.
#include "storage/log.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>

#include "base/logging.h"
#include "storage/loggers.h"
#include "storage/segment.h"

namespace sluice::storage {
namespace {

// The log whose append callbacks this thread is running, if any (see InCallback()).
thread_local const void* tls_in_callback = nullptr;

}  // namespace

using namespace log_internal;  // NOLINT(google-build-using-namespace)

Result<FlushPolicy> ParseFlushPolicy(std::string_view text) {
  if (text == "durable") return FlushPolicy::kDurable;
  if (text == "interval") return FlushPolicy::kInterval;
  return InvalidArgumentError("unknown flush policy '{}' (want durable or interval)", text);
}

std::string_view FlushPolicyName(FlushPolicy policy) {
  return policy == FlushPolicy::kDurable ? "durable" : "interval";
}

PartitionLog::PartitionLog(std::string dir, LogOptions options)
    : dir_(std::move(dir)), options_(options) {
  limits_ = {options_.segment_bytes, options_.segment_ms, options_.retention_bytes,
             options_.retention_ms, options_.max_batch_bytes};
  max_stored_batch_ = options_.max_batch_bytes;
  if (options_.files == nullptr) {
    own_files_ = std::make_unique<FileCache>(options_.env, 16);
    files_ = own_files_.get();
  } else {
    files_ = options_.files;
  }
}

PartitionLog::~PartitionLog() {
  Status st = Close();
  if (!st.ok()) SLUICE_LOG(kLog, kWarn, "closing log {}: {}", dir_, st.ToString());
}

Result<std::unique_ptr<PartitionLog>> PartitionLog::Open(const std::string& dir,
                                                         LogOptions options) {
  if (options.executor == nullptr) return InvalidArgumentError("log {}: no IoExecutor given", dir);
  if (options.max_batch_bytes < kBatchHeaderSize) {
    return InvalidArgumentError("message.max.bytes {} is smaller than a batch header",
                                options.max_batch_bytes);
  }
  if (options.segment_bytes < kBatchHeaderSize ||
      options.segment_bytes + options.max_batch_bytes > INT32_MAX) {
    return InvalidArgumentError("segment.bytes {} is outside [{}, {}]", options.segment_bytes,
                                kBatchHeaderSize, INT32_MAX - options.max_batch_bytes);
  }
  if (options.segment_ms < 1)
    return InvalidArgumentError("segment.ms {} must be positive", options.segment_ms);
  if (options.flush_ms < 1)
    return InvalidArgumentError("flush.ms {} must be positive", options.flush_ms);
  if (options.flush_bytes < 1) return InvalidArgumentError("flush.bytes must be positive");
  std::unique_ptr<PartitionLog> log(new PartitionLog(dir, options));
  RETURN_IF_ERROR(log->Recover().WithContext("recovering log " + dir));
  return log;
}

Result<std::shared_ptr<File>> PartitionLog::LogFile(const Segment& seg, OpenMode mode) {
  return files_->Get(seg.log_path, mode);
}

// ---------------------------------------------------------------------------------------
// Recovery

std::shared_ptr<PartitionLog::Segment> PartitionLog::NewSegment(int64_t base) const {
  auto seg = std::make_shared<Segment>();
  seg->base_offset = base;
  seg->log_path = dir_ + "/" + SegmentName(base, ".log");
  seg->index_path = dir_ + "/" + SegmentName(base, ".index");
  seg->time_index_path = dir_ + "/" + SegmentName(base, ".timeindex");
  seg->txn_index_path = dir_ + "/" + SegmentName(base, ".txnindex");
  seg->next_offset = base;
  seg->created_ms = options_.clock->NowMillis();
  return seg;
}

// Walks the batches of seg's file in [from, to): each must be a whole batch (CRC checked
// when asked) whose offsets follow the previous one's. Stops at the first that is not,
// or before the first batch holding an offset >= stop_at. With `build_index`, rebuilds
// the index entries for the bytes walked (from must then be 0).
Result<PartitionLog::ScanResult> PartitionLog::ScanBatches(File& file, const Segment& seg,
                                                           uint64_t from, uint64_t to,
                                                           bool check_crc, bool build_index,
                                                           int64_t stop_at) const {
  ScanResult r;
  r.end = from;
  r.next_offset = seg.base_offset;
  SegmentScanner scan(file, from, to, MaxStoredBatch());
  uint64_t since_index = 0;
  int64_t last_indexed_ts = -1;
  for (;;) {
    ASSIGN_OR_RETURN(auto batch, scan.Next(check_crc, &r.problem));
    if (!batch) break;
    const BatchHeader& h = scan.header();
    if (h.base_offset < r.next_offset || h.last_offset() - seg.base_offset > INT32_MAX) {
      r.problem = fmt::format("batch offset {} is out of sequence (expected at least {})",
                              h.base_offset, r.next_offset);
      break;
    }
    if (h.next_offset() > stop_at) break;
    if (r.first_base < 0) {
      r.first_base = h.base_offset;
      r.first_batch_ts = h.max_timestamp;
    }
    if (build_index) {
      if (since_index >= options_.index_interval_bytes && scan.batch_pos() > 0) {
        int32_t rel = static_cast<int32_t>(h.base_offset - seg.base_offset);
        PutOffsetEntry(r.index, rel, static_cast<uint32_t>(scan.batch_pos()));
        if (r.max_timestamp > last_indexed_ts) {
          PutTimeEntry(r.time_index, r.max_timestamp, rel);
          last_indexed_ts = r.max_timestamp;
        }
        since_index = 0;
      }
      since_index += h.total_size();
    }
    r.max_timestamp = std::max(r.max_timestamp, h.max_timestamp);
    r.next_offset = h.next_offset();
    r.end = scan.pos();
  }
  r.bytes_since_index = since_index;
  r.last_indexed_ts = last_indexed_ts;
  return r;
}

// Replaces seg's index files with the entries of `r` (a scan from byte 0 with
// build_index) and sets the segment's sizes, offsets and counters from it. A closed
// segment's time index gets its closing entry.
Status PartitionLog::InstallScan(Segment& seg, ScanResult& r, bool closed) {
  int64_t last_indexed_ts = r.last_indexed_ts;
  if (closed && r.max_timestamp > last_indexed_ts) {
    PutTimeEntry(r.time_index, r.max_timestamp,
                 static_cast<int32_t>(r.next_offset - seg.base_offset));
    last_indexed_ts = r.max_timestamp;
  }
  for (auto [path, bytes] :
       {std::pair{&seg.index_path, &r.index}, std::pair{&seg.time_index_path, &r.time_index}}) {
    ASSIGN_OR_RETURN(auto f, files_->Get(*path, OpenMode::kCreate));
    RETURN_IF_ERROR(f->Truncate(0));
    if (!bytes->empty()) RETURN_IF_ERROR(f->WriteAt(0, *bytes));
    RETURN_IF_ERROR(f->Sync());
  }
  seg.size = seg.written_size = r.end;
  seg.next_offset = r.next_offset;
  seg.max_timestamp = r.max_timestamp;
  seg.first_batch_ts = r.first_batch_ts;
  seg.bytes_since_index = r.bytes_since_index;
  seg.last_indexed_ts = last_indexed_ts;
  seg.index_entries = seg.written_index_entries = r.index.size() / kOffsetEntrySize;
  seg.time_entries = seg.written_time_entries = r.time_index.size() / kTimeEntrySize;
  return Status::OK();
}

Status PartitionLog::Recover() {
  Env* env = options_.env;
  RETURN_IF_ERROR(env->CreateDirs(dir_));
  // The partition directory's own entry must survive a power loss too.
  if (size_t slash = dir_.find_last_of('/'); slash != std::string::npos && slash > 0) {
    RETURN_IF_ERROR(env->SyncDir(dir_.substr(0, slash)));
  }
  RETURN_IF_ERROR(RecoverSwaps());
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir_));
  std::vector<int64_t> logs, indexes;
  for (const std::string& name : names) {
    if (auto b = ParseSegmentName(name, ".log")) {
      logs.push_back(*b);
    } else if (auto bi = ParseSegmentName(name, ".index")) {
      indexes.push_back(*bi);
    } else if (auto bt = ParseSegmentName(name, ".timeindex")) {
      indexes.push_back(*bt);
    } else if (auto bx = ParseSegmentName(name, ".txnindex")) {
      indexes.push_back(*bx);
    }
    // Other names are not ours; leave them alone.
  }
  std::sort(logs.begin(), logs.end());
  for (int64_t b : indexes) {
    if (std::binary_search(logs.begin(), logs.end(), b)) continue;
    if (logs.empty() || b < logs.front()) {
      // Left over from retention (the log file goes first): finish the removal.
      for (std::string_view ext : {".index", ".timeindex", ".txnindex"}) {
        std::string p = dir_ + "/" + SegmentName(b, ext);
        if (env->Exists(p)) RETURN_IF_ERROR(env->Remove(p));
      }
      continue;
    }
    return CorruptionError("segment {} is missing but its index files exist",
                           dir_ + "/" + SegmentName(b, ".log"));
  }

  if (logs.empty()) {
    auto seg = NewSegment(0);
    for (const std::string* p :
         {&seg->log_path, &seg->index_path, &seg->time_index_path, &seg->txn_index_path}) {
      RETURN_IF_ERROR(files_->Get(*p, OpenMode::kCreate).status());
    }
    RETURN_IF_ERROR(env->SyncDir(dir_));
    segments_.push_back(std::move(seg));
  } else {
    int64_t prev_next = -1;
    for (size_t i = 0; i < logs.size(); ++i) {
      auto seg = NewSegment(logs[i]);
      if (seg->base_offset < prev_next) {
        return CorruptionError(
            "segment {} starts at offset {}, inside the previous segment (which ends at {})",
            seg->log_path, seg->base_offset, prev_next);
      }
      bool is_last = i + 1 == logs.size();
      RETURN_IF_ERROR(is_last ? RecoverLastSegment(*seg) : RecoverClosedSegment(*seg));
      RETURN_IF_ERROR(RecoverTxnIndex(*seg, is_last));
      seg->closed_durable = !is_last;
      prev_next = seg->next_offset;
      segments_.push_back(std::move(seg));
    }
  }
  recovery_.segments = static_cast<int>(segments_.size());
  RETURN_IF_ERROR(LoadLogStart());
  next_offset_ = written_end_ = durable_end_ = segments_.back()->next_offset;
  last_written_ = segments_.back();
  last_sync_ns_ = MonotonicNanos();
  return Status::OK();
}

// The last segment: every batch is verified and the file is cut at the first bad one (a
// torn write). The file is then synced either way: after a process crash its tail may
// still be only in the page cache, and it is reported durable from here on. Its indexes
// are rebuilt.
Status PartitionLog::RecoverLastSegment(Segment& seg) {
  ASSIGN_OR_RETURN(auto file, files_->Get(seg.log_path, OpenMode::kReadWrite));
  ASSIGN_OR_RETURN(uint64_t file_size, file->Size());
  ASSIGN_OR_RETURN(ScanResult r, ScanBatches(*file, seg, 0, file_size, /*check_crc=*/true,
                                             /*build_index=*/true, INT64_MAX));
  if (r.end < file_size) {
    recovery_.truncated_bytes = file_size - r.end;
    recovery_.truncation_reason = fmt::format("{} at byte {}: {}", seg.log_path, r.end, r.problem);
    // Zeros to the end of the last block: the padding of direct writes (SetDirectWrites),
    // expected after a crash, not damage.
    bool padding = file_size % kDirectIoAlign == 0 && file_size - r.end < kDirectIoAlign;
    if (padding) {
      std::vector<uint8_t> tail(file_size - r.end);
      auto n = file->ReadAt(r.end, tail);
      padding = n.ok() && *n == tail.size() &&
                std::all_of(tail.begin(), tail.end(), [](uint8_t b) { return b == 0; });
    }
    if (padding) {
      SLUICE_LOG(kLog, kInfo, "recovery: cutting the {}-byte zero padding of direct writes off {}",
                 file_size - r.end, seg.log_path);
    } else {
      SLUICE_LOG(kLog, kWarn, "recovery: truncating {} bytes of {} at byte {}: {}",
                 file_size - r.end, seg.log_path, r.end, r.problem);
    }
    RETURN_IF_ERROR(file->Truncate(r.end));
  }
  RETURN_IF_ERROR(file->Sync());
  ++recovery_.indexes_rebuilt;
  return InstallScan(seg, r, /*closed=*/false);
}

// A closed segment was synced when it was rolled, so damage in it is real: it is
// reported with the file and position, never skipped. The indexes are checked (whole
// entries; the last offset-index entry points at a batch with its offset) and the bytes
// after the last entry are verified; a missing or inconsistent index is rebuilt from a
// full verified scan.
Status PartitionLog::RecoverClosedSegment(Segment& seg) {
  ASSIGN_OR_RETURN(auto file, files_->Get(seg.log_path, OpenMode::kRead));
  ASSIGN_OR_RETURN(uint64_t file_size, file->Size());
  if (file_size > INT32_MAX) {
    return CorruptionError("segment {} is {} bytes, more than a segment can hold", seg.log_path,
                           file_size);
  }
  auto corruption = [&](const ScanResult& r) {
    return CorruptionError("segment {} at byte {}: {}", seg.log_path, r.end, r.problem);
  };

  auto index = files_->Get(seg.index_path, OpenMode::kRead);
  auto tindex = files_->Get(seg.time_index_path, OpenMode::kRead);
  uint64_t index_size = 0, time_size = 0;
  bool consistent = index.ok() && tindex.ok();
  if (consistent) {
    ASSIGN_OR_RETURN(index_size, (*index)->Size());
    ASSIGN_OR_RETURN(time_size, (*tindex)->Size());
    consistent = index_size % kOffsetEntrySize == 0 && time_size % kTimeEntrySize == 0;
  }
  int64_t entry_offset = seg.base_offset;
  uint64_t entry_pos = 0;
  if (consistent && index_size > 0) {
    uint8_t e[kOffsetEntrySize];
    ASSIGN_OR_RETURN(size_t n, (*index)->ReadAt(index_size - kOffsetEntrySize, e));
    int32_t rel = static_cast<int32_t>(LoadBE32(e));
    entry_pos = LoadBE32(e + 4);
    entry_offset = seg.base_offset + rel;
    consistent = n == kOffsetEntrySize && rel >= 0 && entry_pos < file_size;
  }
  int64_t last_entry_ts = -1;
  if (consistent && time_size > 0) {
    uint8_t e[kTimeEntrySize];
    ASSIGN_OR_RETURN(size_t n, (*tindex)->ReadAt(time_size - kTimeEntrySize, e));
    last_entry_ts = static_cast<int64_t>(LoadBE64(e));
    consistent = n == kTimeEntrySize && static_cast<int32_t>(LoadBE32(e + 8)) >= 0;
  }
  if (consistent) {
    ASSIGN_OR_RETURN(ScanResult r, ScanBatches(*file, seg, entry_pos, file_size, /*check_crc=*/true,
                                               /*build_index=*/false, INT64_MAX));
    // The entry must point at a whole batch carrying its offset; if not, the index is
    // what is wrong.
    consistent = (index_size == 0 || r.first_base == entry_offset) &&
                 (r.first_base >= 0 || file_size == entry_pos) &&
                 // The closing time entry is the segment's max timestamp: at least the
                 // max of the batches after the last offset entry.
                 (time_size == 0 || last_entry_ts >= r.max_timestamp);
    if (consistent) {
      if (r.end < file_size) return corruption(r);
      seg.size = seg.written_size = file_size;
      seg.next_offset = r.first_base >= 0 ? r.next_offset : seg.base_offset;
      seg.max_timestamp = std::max(last_entry_ts, r.max_timestamp);
      seg.index_entries = seg.written_index_entries = index_size / kOffsetEntrySize;
      seg.time_entries = seg.written_time_entries = time_size / kTimeEntrySize;
      seg.last_indexed_ts = last_entry_ts;
      return Status::OK();
    }
  }
  SLUICE_LOG(kLog, kWarn, "recovery: rebuilding the indexes of {}", seg.log_path);
  ASSIGN_OR_RETURN(ScanResult r, ScanBatches(*file, seg, 0, file_size, /*check_crc=*/true,
                                             /*build_index=*/true, INT64_MAX));
  if (r.end < file_size) return corruption(r);
  ++recovery_.indexes_rebuilt;
  return InstallScan(seg, r, /*closed=*/true);
}

// ---------------------------------------------------------------------------------------
// Appends and the group-commit writer

Result<AppendInfo> PartitionLog::Append(std::span<const uint8_t> batch, AppendOptions opts) {
  uint32_t max_batch;
  {
    std::lock_guard lock(mu_);
    max_batch = limits_.max_batch_bytes;
  }
  ASSIGN_OR_RETURN(BatchHeader h, ValidateBatch(batch, max_batch, /*check_crc=*/!opts.crc_checked));
  std::lock_guard lock(mu_);
  if (closed_) return FailedPreconditionError("log {} is closed", dir_);
  if (!failed_.ok()) return failed_.WithContext(fmt::format("log {} failed earlier", dir_));

  if (opts.keep_offsets) {
    if (h.base_offset < next_offset_) {
      return OutOfRangeError("log {}: a replicated batch at offset {} is below the end {}", dir_,
                             h.base_offset, next_offset_);
    }
    opts.log_append_time = false;  // the leader set the timestamps
  }
  // Where the batch starts: the next offset, or a replicated batch's own base.
  const int64_t base = opts.keep_offsets ? h.base_offset : next_offset_;
  int64_t now_ms = options_.clock->NowMillis();
  int64_t batch_max_ts = opts.log_append_time ? now_ms : h.max_timestamp;
  Segment* seg = segments_.back().get();
  // segment.ms as Kafka measures it: from the first batch's timestamp to this one's, or
  // by the clock when the batches carry no timestamps.
  int64_t waited = seg->first_batch_ts >= 0 && batch_max_ts >= 0
                       ? batch_max_ts - seg->first_batch_ts
                       : now_ms - seg->created_ms;
  if (seg->size > 0 &&
      (seg->size + batch.size() > limits_.segment_bytes || waited >= limits_.segment_ms ||
       base + h.last_offset_delta - seg->base_offset > INT32_MAX)) {
    RollLocked(base);
    seg = segments_.back().get();
  }

  Chunk& c = PendingChunkLocked(segments_.back());
  if (c.bytes.capacity() == 0) c.bytes = options_.executor->TakeBuffer();
  size_t at = c.bytes.size();
  c.bytes.insert(c.bytes.end(), batch.begin(), batch.end());
  std::span<uint8_t> stored(c.bytes.data() + at, batch.size());

  AppendInfo info;
  info.base_offset = base;
  info.last_offset = base + h.last_offset_delta;
  if (!opts.keep_offsets) AssignOffsets(stored, info.base_offset, opts.leader_epoch);
  if (opts.log_append_time) {
    SetLogAppendTime(stored, now_ms);
    info.log_append_time_ms = now_ms;
  }
  if (seg->size == 0) seg->first_batch_ts = batch_max_ts;
  if (opts.aborted_txn) {
    AbortedTxn txn = *opts.aborted_txn;
    txn.last_offset = info.last_offset;
    if (txn.last_stable_offset < 0) txn.last_stable_offset = info.last_offset + 1;
    c.txn_index_bytes.resize(c.txn_index_bytes.size() + kAbortedTxnSize);
    EncodeAbortedTxn(txn, c.txn_index_bytes.data() + c.txn_index_bytes.size() - kAbortedTxnSize);
    ++seg->txn_entries;
  }

  if (seg->bytes_since_index >= options_.index_interval_bytes && seg->size > 0) {
    int32_t rel = static_cast<int32_t>(info.base_offset - seg->base_offset);
    PutOffsetEntry(c.index_bytes, rel, static_cast<uint32_t>(seg->size));
    ++seg->index_entries;
    if (seg->max_timestamp > seg->last_indexed_ts) {
      PutTimeEntry(c.time_index_bytes, seg->max_timestamp, rel);
      seg->last_indexed_ts = seg->max_timestamp;
      ++seg->time_entries;
    }
    seg->bytes_since_index = 0;
  }
  seg->bytes_since_index += batch.size();
  seg->size += batch.size();
  seg->max_timestamp = std::max(seg->max_timestamp, batch_max_ts);
  next_offset_ = info.last_offset + 1;
  seg->next_offset = next_offset_;
  c.end_offset = next_offset_;

  if (opts.on_ack) {
    auto& q = opts.ack == AckLevel::kDurable ? durable_waiters_ : written_waiters_;
    q.push_back(Waiter{info.last_offset, info, std::move(opts.on_ack)});
  }
  MaybeScheduleLocked();
  return info;
}

// The pending chunk for `seg`, started when the last pending bytes are another
// segment's (or nothing is pending).
PartitionLog::Chunk& PartitionLog::PendingChunkLocked(const std::shared_ptr<Segment>& seg) {
  if (pending_.empty() || pending_.back().seg != seg) {
    Chunk c;
    c.seg = seg;
    c.file_pos = seg->size;
    c.index_pos = seg->index_entries * kOffsetEntrySize;
    c.time_index_pos = seg->time_entries * kTimeEntrySize;
    c.txn_index_pos = seg->txn_entries * kAbortedTxnSize;
    c.end_offset = seg->next_offset;
    pending_.push_back(std::move(c));
  }
  return pending_.back();
}

// Starts a new active segment at `base_offset`. No I/O here: the job that writes the
// old segment's last bytes syncs and closes it, then creates the new files.
void PartitionLog::RollLocked(int64_t base_offset) {
  Segment* old = segments_.back().get();
  Chunk& last = PendingChunkLocked(segments_.back());
  // The closing entry of the time index: the segment's max timestamp.
  if (old->max_timestamp > old->last_indexed_ts) {
    PutTimeEntry(last.time_index_bytes, old->max_timestamp,
                 static_cast<int32_t>(old->next_offset - old->base_offset));
    old->last_indexed_ts = old->max_timestamp;
    ++old->time_entries;
  }
  last.closes_segment = true;

  auto seg = NewSegment(base_offset);
  Chunk& c = PendingChunkLocked(seg);
  c.opens_segment = true;
  segments_.push_back(std::move(seg));
}

// Starts what is due: a write job when appends are pending, a sync task when unsynced
// bytes must be synced, or the flush.ms timer. At most one of each runs per log; a sync
// runs beside the next write job, so the disk syncs one group while the next is written.
// The sync is a blocking task: however long the disk takes to sync, the executor keeps
// threads free for write jobs, so a write (and the acks waiting for it) never queues
// behind the syncs of other logs.
void PartitionLog::MaybeScheduleLocked() {
  if (closed_ || !failed_.ok()) return;
  if (!job_running_ && !pending_.empty()) {
    job_running_ = true;
    options_.executor->Submit([this] { RunIoJob(); });
  }
  if (sync_running_ || unsynced_bytes_ == 0) return;
  // An append waiting for durability (acks=all) whose bytes are written starts a sync at
  // once under either policy: the group commit then covers every such append written by
  // the time it starts, and the ones written while it runs share the next. Waiting for
  // flush.ms instead held each acks=all produce request up to 100 ms (ten requests a
  // second per connection, whatever their size).
  bool durable_waiting =
      !durable_waiters_.empty() && durable_waiters_.front().last_offset < written_end_;
  bool due = options_.flush_policy == FlushPolicy::kDurable || sync_due_ || durable_waiting ||
             flush_target_ > durable_end_ || unsynced_bytes_ >= options_.flush_bytes ||
             MonotonicNanos() - last_sync_ns_ >= options_.flush_ms * 1'000'000;
  if (due) {
    sync_running_ = true;
    sync_due_ = false;
    options_.executor->SubmitBlocking([this] { RunSync(); });
  } else if (timer_id_ == 0) {
    // Interval policy: unsynced bytes get their fdatasync within flush.ms.
    int64_t deadline = last_sync_ns_ + options_.flush_ms * 1'000'000;
    timer_id_ =
        options_.executor->SubmitAt(std::max<int64_t>(deadline, 1), [this] { OnSyncTimer(); });
  }
}

void PartitionLog::OnSyncTimer() {
  std::lock_guard lock(mu_);
  timer_id_ = 0;
  sync_due_ = true;
  MaybeScheduleLocked();
  idle_cv_.notify_all();
}

// Fails every waiter and the log itself with `st`. Returns the waiters to call.
void PartitionLog::FailLocked(const Status& st, std::vector<std::pair<Waiter, Status>>* ready) {
  if (failed_.ok()) {
    failed_ = st;
    SLUICE_LOG(kLog, kError, "log {} failed: {}", dir_, st.ToString());
  }
  pending_.clear();
  for (auto* q : {&written_waiters_, &durable_waiters_}) {
    for (Waiter& w : *q) ready->emplace_back(std::move(w), failed_);
    q->clear();
  }
}

void PartitionLog::CollectReadyLocked(std::vector<std::pair<Waiter, Status>>* ready) {
  while (!written_waiters_.empty() && written_waiters_.front().last_offset < written_end_) {
    ready->emplace_back(std::move(written_waiters_.front()), Status::OK());
    written_waiters_.pop_front();
  }
  while (!durable_waiters_.empty() && durable_waiters_.front().last_offset < durable_end_) {
    ready->emplace_back(std::move(durable_waiters_.front()), Status::OK());
    durable_waiters_.pop_front();
  }
}

// Callbacks run before the task counts as finished, so Close() waits for them.
void PartitionLog::FinishTask(std::vector<std::pair<Waiter, Status>>& ready, bool* running) {
  const void* outer = tls_in_callback;
  tls_in_callback = this;
  for (auto& [w, st] : ready) w.cb(st, w.info);
  tls_in_callback = outer;
  std::lock_guard lock(mu_);
  if (!ready.empty()) --callbacks_running_;
  *running = false;
  MaybeScheduleLocked();
  idle_cv_.notify_all();
}

// Reserves the blocks of the active segment ahead of its writes, kReserveAheadBytes at a
// time: fallocate with FALLOC_FL_KEEP_SIZE, which changes neither the file's size nor its
// bytes (so going around the Env, as sendfile does, hides nothing from a fault-injecting
// one). Why: otherwise ext4 allocates a segment's blocks in the writeback of each
// fdatasync and converts them at I/O completion under the inode's i_data_sem, freeing
// extent-tree blocks there (with -o discard and no journal, by a synchronous discard);
// a pwrite that extends the file into new blocks needs that lock too, so appends stalled
// for tens of milliseconds behind their own segment's periodic sync. Writes into reserved
// blocks do not need it, and whole reserved stretches keep the extent tree small. Best
// effort: where fallocate fails, the write allocates its blocks as before.
void PartitionLog::ReserveAhead(File& file, Segment& seg, uint64_t pos, uint64_t end,
                                uint64_t segment_bytes) {
  // A segment this full rolls at the next append: its last writes are not worth it.
  if (end <= seg.reserved_end || end >= segment_bytes) return;
  if (!reserve_supported_ || file.fd() < 0) return;
  uint64_t from = std::max(seg.reserved_end, pos);  // bytes before `pos` have their blocks
  uint64_t to = std::min(end + kReserveAheadBytes, segment_bytes);
  seg.reserved_end = to;  // also on failure: one attempt per stretch, not one per write
  if (::fallocate(file.fd(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(from),
                  static_cast<off_t>(to - from)) != 0 &&
      (errno == EOPNOTSUPP || errno == ENOSYS)) {
    reserve_supported_ = false;
  }
}

// Gives back the blocks reserved past a segment's `size` (a truncation to the same size
// frees them), so a closed segment takes no more space than its bytes.
void PartitionLog::ReleaseReserved(Segment& seg, uint64_t size) {
  if (seg.reserved_end <= size) return;
  seg.reserved_end = 0;
  auto f = LogFile(seg, OpenMode::kReadWrite);
  Status st = f.ok() ? (*f)->Truncate(size) : f.status();
  if (!st.ok()) {
    SLUICE_LOG(kLog, kWarn, "log {}: giving back the space reserved past {}: {}", dir_,
               seg.log_path, st.ToString());
  }
}

void PartitionLog::SetDirectWrites(bool on) { direct_writes_.store(on, std::memory_order_relaxed); }

Status PartitionLog::WriteDirect(const std::shared_ptr<Segment>& seg, uint64_t pos,
                                 std::span<const uint8_t> bytes, std::shared_ptr<File>* used) {
  constexpr uint64_t kAlign = kDirectIoAlign;
  // The most one direct pwrite takes (a multiple of the block).
  constexpr size_t kDirectWindowBytes = 1 << 20;
  if (direct_ == nullptr) direct_ = std::make_unique<DirectWriter>();
  DirectWriter& d = *direct_;
  if (d.seg != seg) {
    d.seg = seg;
    d.file.reset();
    d.tail_valid = false;
  }
  std::shared_ptr<File> file = d.file.lock();
  if (file == nullptr) {
    auto opened = options_.env->Open(seg->log_path, OpenMode::kDirect);
    if (!opened.ok()) {
      if (opened.status().code() != StatusCode::kInvalidArgument) return opened.status();
      // This file system cannot (tmpfs): buffered writes from now on.
      direct_supported_ = false;
      SLUICE_LOG(kLog, kWarn, "log {}: writes stay buffered: {}", dir_, opened.status().ToString());
      ASSIGN_OR_RETURN(file, LogFile(*seg, OpenMode::kReadWrite));
      RETURN_IF_ERROR(file->WriteAt(pos, bytes));
      *used = std::move(file);
      return Status::OK();
    }
    file = std::move(*opened);
    d.file = file;
  }
  // One block-aligned buffer per write thread, not per partition (a follower partition
  // would otherwise keep its largest chunk's size until its segment rolls: gigabytes with
  // thousands of them); chunks larger than it go out window by window.
  struct AlignedBuffer {
    struct Free {
      void operator()(uint8_t* p) const { std::free(p); }
    };
    std::unique_ptr<uint8_t, Free> data;
  };
  thread_local AlignedBuffer window;
  if (window.data == nullptr) {
    void* p = std::aligned_alloc(kAlign, kDirectWindowBytes);
    if (p == nullptr) {
      return ResourceExhaustedError("log {}: no {} bytes to write", dir_, kDirectWindowBytes);
    }
    window.data.reset(static_cast<uint8_t*>(p));
  }
  uint8_t* buf = window.data.get();
  const uint64_t start = pos & ~(kAlign - 1);
  const size_t head = pos - start;
  if (head > 0) {
    if (d.tail_valid && d.tail_pos == start && d.tail.size() == head) {
      std::memcpy(buf, d.tail.data(), head);
    } else {
      // The block's first bytes, from the file (after a restart, a truncation, a switch).
      ASSIGN_OR_RETURN(auto reader, LogFile(*seg, OpenMode::kReadWrite));
      ASSIGN_OR_RETURN(size_t n, reader->ReadAt(start, std::span<uint8_t>(buf, head)));
      if (n != head) {
        return CorruptionError("{}: {} bytes before byte {}, {} expected", seg->log_path, n, pos,
                               head);
      }
    }
  }
  d.tail_valid = false;
  // Every window but the last is full (a multiple of the block); the last is padded.
  uint64_t at = start;
  size_t fill = head;
  size_t consumed = 0;
  for (;;) {
    const size_t take = std::min(bytes.size() - consumed, kDirectWindowBytes - fill);
    std::memcpy(buf + fill, bytes.data() + consumed, take);
    fill += take;
    consumed += take;
    const bool last = consumed == bytes.size();
    const size_t padded = (fill + kAlign - 1) & ~(kAlign - 1);
    std::memset(buf + fill, 0, padded - fill);
    RETURN_IF_ERROR(file->WriteAt(at, std::span<const uint8_t>(buf, padded)));
    if (last) {
      seg->padded_end = std::max(seg->padded_end, at + padded);
      const uint64_t end = pos + bytes.size();
      d.tail_pos = end & ~(kAlign - 1);
      d.tail.assign(buf + (d.tail_pos - at), buf + fill);
      d.tail_valid = true;
      break;
    }
    at += padded;
    fill = 0;
  }
  *used = std::move(file);
  return Status::OK();
}

Status PartitionLog::CutPadding(Segment& seg, uint64_t size) {
  if (seg.padded_end <= size) return Status::OK();
  seg.padded_end = 0;
  ASSIGN_OR_RETURN(auto f, LogFile(seg, OpenMode::kReadWrite));
  ASSIGN_OR_RETURN(uint64_t on_disk, f->Size());
  if (on_disk <= size) return Status::OK();
  RETURN_IF_ERROR(f->Truncate(size));
  return f->Sync();
}

// The write job: writes everything pending, one pwrite per segment. A segment being
// closed is synced here, before any byte of the next segment is written.
void PartitionLog::RunIoJob() {
  std::vector<Chunk> chunks;
  uint64_t segment_bytes;
  {
    std::lock_guard lock(mu_);
    chunks.swap(pending_);
    segment_bytes = limits_.segment_bytes;
  }

  Status st;
  int64_t written_to = -1, durable_to = -1;
  uint64_t written_bytes = 0;
  std::vector<const Chunk*> done;
  std::vector<Segment*> closed_durable;
  std::shared_ptr<File> last_file;  // the file of the last chunk written with bytes
  for (const Chunk& c : chunks) {
    if (c.opens_segment) {
      for (const std::string* p : {&c.seg->log_path, &c.seg->index_path, &c.seg->time_index_path,
                                   &c.seg->txn_index_path}) {
        auto f = files_->Get(*p, OpenMode::kCreate);
        if (!f.ok()) {
          st = f.status();
          break;
        }
      }
      if (st.ok()) st = options_.env->SyncDir(dir_);
      if (!st.ok()) break;
    }
    if (!c.txn_index_bytes.empty()) {
      // Durable before the markers it describes: a marker on disk always has its entry.
      auto idx = files_->Get(c.seg->txn_index_path, OpenMode::kCreate);
      st = idx.ok() ? (*idx)->WriteAt(c.txn_index_pos, c.txn_index_bytes) : idx.status();
      if (st.ok()) st = (*idx)->Sync();
      if (!st.ok()) break;
    }
    if (!c.bytes.empty()) {
      auto f = LogFile(*c.seg, OpenMode::kReadWrite);
      if (f.ok()) ReserveAhead(**f, *c.seg, c.file_pos, c.file_pos + c.bytes.size(), segment_bytes);
      if (!f.ok()) {
        st = f.status();
      } else if (direct_writes_.load(std::memory_order_relaxed) && direct_supported_) {
        st = WriteDirect(c.seg, c.file_pos, c.bytes, &last_file);
      } else {
        st = (*f)->WriteAt(c.file_pos, c.bytes);
        if (st.ok()) last_file = *f;
        // A buffered write after direct ones (the log came to lead) may end inside the
        // padding: what was kept of the tail block is stale from here on.
        if (direct_ != nullptr) direct_->tail_valid = false;
      }
    }
    if (st.ok() && !c.index_bytes.empty()) {
      auto idx = files_->Get(c.seg->index_path, OpenMode::kReadWrite);
      st = idx.ok() ? (*idx)->WriteAt(c.index_pos, c.index_bytes) : idx.status();
    }
    if (st.ok() && !c.time_index_bytes.empty()) {
      auto idx = files_->Get(c.seg->time_index_path, OpenMode::kReadWrite);
      st = idx.ok() ? (*idx)->WriteAt(c.time_index_pos, c.time_index_bytes) : idx.status();
    }
    if (!st.ok()) break;
    // Written: readable even if the closing sync below fails.
    written_bytes += c.bytes.size();
    written_to = std::max(written_to, c.end_offset);
    done.push_back(&c);
    if (c.closes_segment) {
      ReleaseReserved(*c.seg, c.file_pos + c.bytes.size());
      st = CutPadding(*c.seg, c.file_pos + c.bytes.size());
      if (!st.ok()) break;
      if (direct_ != nullptr && direct_->seg == c.seg) direct_.reset();
      // Only the last segment can ever have a torn tail (docs/formats/storage.md).
      for (const std::string* p : {&c.seg->log_path, &c.seg->index_path, &c.seg->time_index_path,
                                   &c.seg->txn_index_path}) {
        auto f = files_->Get(*p, OpenMode::kReadWrite);
        st = f.ok() ? (*f)->Sync() : f.status();
        if (!st.ok()) break;
      }
      if (!st.ok()) break;
      durable_to = std::max(durable_to, c.end_offset);
      closed_durable.push_back(c.seg.get());
    }
  }

  std::vector<std::pair<Waiter, Status>> ready;
  {
    std::lock_guard lock(mu_);
    for (const Chunk* c : done) {
      Segment* seg = c->seg.get();
      seg->written_size = c->file_pos + c->bytes.size();
      seg->written_index_entries = (c->index_pos + c->index_bytes.size()) / kOffsetEntrySize;
      seg->written_time_entries = (c->time_index_pos + c->time_index_bytes.size()) / kTimeEntrySize;
      seg->written_txn_entries = (c->txn_index_pos + c->txn_index_bytes.size()) / kAbortedTxnSize;
      if (!c->bytes.empty()) last_written_ = c->seg;
    }
    if (last_file != nullptr) written_file_ = std::move(last_file);
    for (Segment* seg : closed_durable) seg->closed_durable = true;
    if (written_to >= 0) written_end_ = std::max(written_end_, written_to);
    if (durable_to >= 0) durable_end_ = std::max(durable_end_, durable_to);
    unsynced_bytes_ += written_bytes;
    if (!st.ok()) {
      FailLocked(st, &ready);
    } else {
      CollectReadyLocked(&ready);
    }
    if (!ready.empty()) ++callbacks_running_;
  }
  for (Chunk& c : chunks) options_.executor->ReturnBuffer(std::move(c.bytes));
  chunks.clear();
  if (written_to >= 0 && st.ok() && options_.on_readable) options_.on_readable();
  FinishTask(ready, &job_running_);
}

// The sync task: one fdatasync of the segment last written, covering everything written
// before it started.
void PartitionLog::RunSync() {
  int64_t target;
  uint64_t covered;
  std::shared_ptr<Segment> seg;
  std::shared_ptr<File> written;
  int64_t started = MonotonicNanos();
  {
    std::lock_guard lock(mu_);
    target = written_end_;
    covered = unsynced_bytes_;
    seg = last_written_;
    written = written_file_;
  }
  Status st;
  // Through the descriptor the bytes were written with (written_file_); the cache's only
  // when nothing was written since the last sync.
  {
    Result<std::shared_ptr<File>> f = written != nullptr ? Result<std::shared_ptr<File>>(written)
                                                         : LogFile(*seg, OpenMode::kReadWrite);
    st = f.ok() ? (*f)->Sync() : f.status();
    if (st.ok()) {
      auto gone = (*f)->Unlinked();
      if (!gone.ok()) {
        st = gone.status();
      } else if (*gone) {
        st = IOError("segment {} was deleted while the log was writing it", seg->log_path);
      }
    }
  }
  std::vector<std::pair<Waiter, Status>> ready;
  {
    std::lock_guard lock(mu_);
    // Meanwhile the segment may have been rolled (and synced by its closing) and then
    // deleted by retention: everything this sync was to cover is durable all the same.
    if (!st.ok() && seg->closed_durable) st = Status::OK();
    if (!st.ok()) {
      FailLocked(st, &ready);
    } else {
      durable_end_ = std::max(durable_end_, target);
      // Nothing written since: the descriptor may go idle.
      if (written_file_ == written && written_end_ <= target) written_file_.reset();
      unsynced_bytes_ -= std::min(covered, unsynced_bytes_);
      last_sync_ns_ = started;
      ++sync_count_;
      CollectReadyLocked(&ready);
    }
    if (!ready.empty()) ++callbacks_running_;
  }
  written.reset();  // before the task ends: a Close after it finds the descriptor gone
  if (st.ok() && options_.on_readable) options_.on_readable();
  FinishTask(ready, &sync_running_);
}

void PartitionLog::WhenDurable(int64_t offset, AppendCallback cb) {
  Status now;
  {
    std::lock_guard lock(mu_);
    if (closed_) {
      now = FailedPreconditionError("log {} is closed", dir_);
    } else if (!failed_.ok()) {
      now = failed_;
    } else if (offset > next_offset_) {
      now = OutOfRangeError("log {}: offset {} is past the end {}", dir_, offset, next_offset_);
    } else if (durable_end_ < offset) {
      // Kept in order of offset, as the appends' durable waiters are.
      Waiter w{offset - 1, AppendInfo{}, std::move(cb)};
      auto at =
          std::upper_bound(durable_waiters_.begin(), durable_waiters_.end(), w.last_offset,
                           [](int64_t last, const Waiter& x) { return last < x.last_offset; });
      durable_waiters_.insert(at, std::move(w));
      flush_target_ = std::max(flush_target_, offset);
      MaybeScheduleLocked();
      return;
    }
  }
  cb(now, AppendInfo{});
}

Status PartitionLog::Flush() {
  if (InCallback())
    return FailedPreconditionError("Flush called from an append callback of log {}", dir_);
  std::unique_lock lock(mu_);
  if (closed_) return FailedPreconditionError("log {} is closed", dir_);
  int64_t target = next_offset_;
  flush_target_ = std::max(flush_target_, target);
  MaybeScheduleLocked();
  // Also wait for the callbacks of what is now durable: a caller of Flush() expects its
  // appends' acks to have run when it returns.
  idle_cv_.wait(
      lock, [&] { return (durable_end_ >= target && callbacks_running_ == 0) || !failed_.ok(); });
  return failed_;
}

// Waits until everything appended is written and synced (or the log failed) and no
// task runs.
Status PartitionLog::WaitIdleLocked(std::unique_lock<std::mutex>& lock) {
  flush_target_ = std::max(flush_target_, next_offset_);
  MaybeScheduleLocked();
  idle_cv_.wait(lock, [&] {
    return !job_running_ && !sync_running_ &&
           (!failed_.ok() || (pending_.empty() && durable_end_ >= next_offset_));
  });
  return failed_;
}

Status PartitionLog::Close() {
  if (InCallback())
    return FailedPreconditionError("Close called from an append callback of log {}", dir_);
  std::unique_lock lock(mu_);
  if (closed_) return Status::OK();
  Status st = WaitIdleLocked(lock);
  closed_ = true;
  if (timer_id_ != 0 && options_.executor->Cancel(timer_id_)) timer_id_ = 0;
  // A timer that is already running clears timer_id_ under the lock.
  idle_cv_.wait(lock, [&] { return timer_id_ == 0 && !job_running_ && !sync_running_; });
  written_file_.reset();
  direct_.reset();
  if (!segments_.empty() && st.ok()) {
    const Segment& last = *segments_.back();
    st = CutPadding(*segments_.back(), last.written_size);
  }
  for (const auto& seg : segments_) {
    files_->Evict(seg->log_path);
    files_->Evict(seg->index_path);
    files_->Evict(seg->time_index_path);
    files_->Evict(seg->txn_index_path);
  }
  return st;
}

bool PartitionLog::InCallback() const { return tls_in_callback == this; }

}  // namespace sluice::storage
