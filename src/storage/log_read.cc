// PartitionLog, the read side: reads and lookups, truncation, retention, the log start,
// verification and the header walk. The contract is in log.h; open, recovery, appends
// and the I/O jobs are in log.cc.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <optional>

#include "base/logging.h"
#include "storage/log.h"
#include "storage/loggers.h"
#include "storage/segment.h"

namespace sluice::storage {
using namespace log_internal;  // NOLINT(google-build-using-namespace)

// ---------------------------------------------------------------------------------------
// Reads

int64_t PartitionLog::start_offset() const {
  std::lock_guard lock(mu_);
  return StartLocked();
}
int64_t PartitionLog::records_start_offset() const {
  std::lock_guard lock(mu_);
  return log_start_;
}
int64_t PartitionLog::StartLocked() const {
  return std::max(segments_.front()->base_offset, log_start_);
}
int64_t PartitionLog::end_offset() const {
  std::lock_guard lock(mu_);
  return next_offset_;
}
int64_t PartitionLog::written_end_offset() const {
  std::lock_guard lock(mu_);
  return written_end_;
}
int64_t PartitionLog::durable_end_offset() const {
  std::lock_guard lock(mu_);
  return durable_end_;
}
uint64_t PartitionLog::size_bytes() const {
  std::lock_guard lock(mu_);
  uint64_t total = 0;
  for (const auto& s : segments_) total += s->size;
  return total;
}
int PartitionLog::segment_count() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(segments_.size());
}
uint64_t PartitionLog::MaxStoredBatch() const {
  return std::max<uint64_t>(max_stored_batch_.load(std::memory_order_relaxed), kMaxBatchFloor);
}

uint64_t PartitionLog::sync_count() const {
  std::lock_guard lock(mu_);
  return sync_count_;
}

// The last offset-index entry (relative offset, position) for which `fits` holds, `fits`
// being true for a prefix of the entries; nullopt when it holds for none. Probes of one
// entry narrow the search to a range of kIndexTail entries, read with one pread (a
// search per read of a partition, and a syscall is dear).
template <typename Fits>
static Result<std::optional<std::pair<int64_t, uint64_t>>> SearchIndex(File& index,
                                                                       uint64_t entries,
                                                                       Fits fits) {
  constexpr uint64_t kIndexTail = 512;  // 4 KiB of entries
  uint64_t lo = 0, hi = entries;        // the answer's successor is in [lo, hi]
  std::optional<std::pair<int64_t, uint64_t>> found;
  auto check = [&](const uint8_t* e) {
    const int64_t rel = static_cast<int32_t>(LoadBE32(e));
    const uint64_t pos = LoadBE32(e + 4);
    if (!fits(rel, pos)) return false;
    found = std::pair(rel, pos);
    return true;
  };
  uint8_t e[kOffsetEntrySize];
  while (hi - lo > kIndexTail) {
    uint64_t mid = lo + (hi - lo) / 2;
    ASSIGN_OR_RETURN(size_t n, index.ReadAt(mid * kOffsetEntrySize, e));
    if (n != kOffsetEntrySize) {
      return CorruptionError("{}: entry {} is past the end of the file", index.path(), mid);
    }
    if (check(e)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < hi) {
    static thread_local std::vector<uint8_t> tail(kIndexTail * kOffsetEntrySize);
    const size_t want = static_cast<size_t>((hi - lo) * kOffsetEntrySize);
    ASSIGN_OR_RETURN(size_t n,
                     index.ReadAt(lo * kOffsetEntrySize, std::span<uint8_t>(tail.data(), want)));
    if (n != want) {
      return CorruptionError("{}: entries {} to {} are past the end of the file", index.path(), lo,
                             hi);
    }
    for (size_t i = 0; i < want && check(tail.data() + i); i += kOffsetEntrySize) {
    }
  }
  return found;
}

// Largest offset-index entry with relative offset <= rel, searched in the file; returns
// its position, or 0 when there is none; *entry_rel gets its relative offset (-1: none).
static Result<uint64_t> LookupOffsetIndex(File& index, uint64_t entries, int64_t rel,
                                          int64_t* entry_rel) {
  ASSIGN_OR_RETURN(auto found,
                   SearchIndex(index, entries, [rel](int64_t r, uint64_t) { return r <= rel; }));
  *entry_rel = found.has_value() ? found->first : -1;
  return found.has_value() ? found->second : 0;
}

// Largest offset-index entry at a position <= max_pos; nullopt when there is none.
// *entry_rel gets its relative offset.
static Result<std::optional<uint64_t>> LookupIndexByPosition(File& index, uint64_t entries,
                                                             uint64_t max_pos, int64_t* entry_rel) {
  ASSIGN_OR_RETURN(auto found, SearchIndex(index, entries, [max_pos](int64_t, uint64_t pos) {
                     return pos <= max_pos;
                   }));
  if (!found.has_value()) return std::optional<uint64_t>();
  *entry_rel = found->first;
  return std::optional<uint64_t>(found->second);
}

Result<ReadResult> PartitionLog::Read(int64_t offset, uint64_t max_bytes, int64_t limit,
                                      EmptyBatches empty) {
  for (;;) {  // once more from `offset` after a swap of cleaned segments raced the read
    // kSkip: the record-less batches of the last segment read, served when nothing with
    // records follows them.
    std::optional<ReadResult> tail;
    int64_t from = offset;
    bool raced = false;
    while (!raced) {
      std::shared_ptr<Segment> seg;
      uint64_t written_size, index_entries, gen, swap_gen;
      int64_t written_next;  // the offset after the segment's written batches
      int64_t asked = from;
      int64_t next_base = -1;  // the following segment's base, when it starts before the end
      std::optional<uint64_t> hint;
      {
        std::lock_guard lock(mu_);
        if (closed_) return FailedPreconditionError("log {} is closed", dir_);
        int64_t start = StartLocked();
        int64_t end = std::min(written_end_, limit);
        if (tail.has_value() && (from >= end || from < start)) return *std::move(tail);
        if (from < start || from > end) {
          return OutOfRangeError("offset {} is outside the log's range [{}, {}]", from, start, end);
        }
        if (from == end) {
          ReadResult r;
          r.first_offset = r.next_offset = from;
          return r;
        }
        auto it = std::upper_bound(segments_.begin(), segments_.end(), from,
                                   [](int64_t o, const auto& s) { return o < s->base_offset; });
        --it;
        // A cleaned segment may end before the next one starts: an offset in that gap is
        // read from the next batch on, as Kafka does.
        while (std::next(it) != segments_.end() && (*it)->next_offset <= asked) {
          ++it;
          asked = (*it)->base_offset;
        }
        if (asked >= end) {
          if (tail.has_value()) return *std::move(tail);
          ReadResult r;
          r.first_offset = r.next_offset = end;
          return r;
        }
        seg = *it;
        if (std::next(it) != segments_.end() && (*std::next(it))->base_offset < end) {
          next_base = (*std::next(it))->base_offset;
        }
        written_size = seg->written_size;
        index_entries = seg->written_index_entries;
        written_next =
            std::next(it) != segments_.end() && (*std::next(it))->base_offset <= written_end_
                ? seg->next_offset
                : std::min(written_end_, seg->next_offset);
        gen = layout_gen_;
        swap_gen = swap_gen_;
        for (const ReadHint& h : read_hints_) {
          if (h.seg == seg.get() && h.offset == asked && h.layout_gen == gen &&
              h.swap_gen == swap_gen && h.pos < written_size) {
            hint = h.pos;
            break;
          }
        }
      }
      auto r = ReadSegment(*seg, written_size, index_entries, written_next, asked, max_bytes, limit,
                           empty, hint);
      {
        // A swap of cleaned segments renamed files under the paths this read opened:
        // read again from the new segments (the swap is finished: it holds mu_).
        std::lock_guard lock(mu_);
        if (swap_gen_ != swap_gen) raced = true;
        if (!raced && r.ok() && layout_gen_ == gen && r->slice.file != nullptr) {
          // The next read from where this one ended starts at the byte after its slice.
          NoteReadHintLocked(seg.get(), r->next_offset, r->slice.position + r->slice.size);
        }
      }
      if (raced) break;
      if (!r.ok()) return LayoutChangedOr(gen, r.status());
      if (empty == EmptyBatches::kKeep || r->holds_records || next_base < 0) return r;
      // Only record-less batches up to this segment's end: read on from the next one.
      tail = *std::move(r);
      from = next_base;
    }
  }
}

void PartitionLog::NoteReadHintLocked(const Segment* seg, int64_t offset, uint64_t pos) {
  // A hint for the same place is refreshed; otherwise the oldest slot goes.
  ReadHint* slot = nullptr;
  for (ReadHint& h : read_hints_) {
    if (h.seg == seg && h.offset == offset) slot = &h;
  }
  if (slot == nullptr) {
    slot = &read_hints_[next_read_hint_];
    next_read_hint_ = (next_read_hint_ + 1) % kReadHints;
  }
  *slot = ReadHint{seg, layout_gen_, swap_gen_, offset, pos};
}

Result<ReadResult> PartitionLog::ReadSegment(const Segment& seg_ref, uint64_t written_size,
                                             uint64_t index_entries, int64_t written_next,
                                             int64_t offset, uint64_t max_bytes, int64_t limit,
                                             EmptyBatches empty, std::optional<uint64_t> hint) {
  const Segment* seg = &seg_ref;
  ASSIGN_OR_RETURN(auto file, LogFile(*seg, OpenMode::kRead));
  uint64_t pos = 0;
  int64_t entry_rel = -1;
  // Reused per thread: a fetch should not pay for a fresh 64 KiB buffer.
  static thread_local std::vector<uint8_t> block_buf(kHeaderBlock);
  uint64_t block_pos = 0, block_len = 0;
  uint64_t last_batch = 0;  // size of the batch whose header was read last
  auto header_at = [&](uint64_t p) -> Result<BatchHeader> {
    if (written_size - p < kBatchHeaderSize) {
      return CorruptionError("{} at byte {}: {} bytes left, less than a batch header",
                             seg->log_path, p, written_size - p);
    }
    if (p < block_pos || p + kBatchHeaderSize > block_pos + block_len) {
      // Small batches: a block holds many headers. Large ones: a block would copy mostly
      // records that the slice is about to send anyway, so only the header is read.
      // The first read of a ReadSegment takes 4 KiB: where the index takes the read's end
      // (or the batches are large) little more is walked.
      const uint64_t block = last_batch >= kHeaderBlock / 4 ? kBatchHeaderSize
                             : block_len == 0               ? kHeaderBlock / 16
                                                            : kHeaderBlock;
      size_t want = static_cast<size_t>(std::min<uint64_t>(block, written_size - p));
      ASSIGN_OR_RETURN(size_t n, file->ReadAt(p, std::span<uint8_t>(block_buf.data(), want)));
      block_pos = p;
      block_len = n;
      if (n < kBatchHeaderSize) {
        return CorruptionError("{} at byte {}: file is shorter than expected", seg->log_path, p);
      }
    }
    BatchHeader h = ParseBatchHeader(
        std::span<const uint8_t>(block_buf.data() + (p - block_pos), kBatchHeaderSize));
    Status st = CheckStoredHeader(
        h, static_cast<uint32_t>(std::min<uint64_t>(written_size - p, MaxStoredBatch())));
    if (!st.ok()) return CorruptionError("{} at byte {}: {}", seg->log_path, p, st.message());
    last_batch = h.total_size();
    return h;
  };
  bool hinted = false;
  if (hint.has_value()) {
    // A read that ended here before: trusted only when a batch starting at `offset` is
    // there; otherwise the index finds it.
    auto h = header_at(*hint);
    if (h.ok() && h->base_offset == offset) {
      pos = *hint;
      hinted = true;
    }
  }
  if (!hinted && index_entries > 0) {
    ASSIGN_OR_RETURN(auto index, files_->Get(seg->index_path, OpenMode::kRead));
    ASSIGN_OR_RETURN(
        pos, LookupOffsetIndex(*index, index_entries, offset - seg->base_offset, &entry_rel));
    if (pos >= written_size) {
      return CorruptionError("{}: index entry for offset {} points at byte {}, past the end ({})",
                             seg->index_path, offset, pos, written_size);
    }
  }
  // Walk headers to the batch holding `offset`, then take whole batches up to max_bytes.
  BatchHeader first{};
  if (entry_rel >= 0) {
    // An index entry points at the batch with its offset (compaction keeps that too).
    ASSIGN_OR_RETURN(first, header_at(pos));
    if (first.base_offset != seg->base_offset + entry_rel) {
      return CorruptionError("{}: the entry for offset {} leads to batch {} at byte {}",
                             seg->index_path, seg->base_offset + entry_rel, first.base_offset, pos);
    }
  }
  for (;;) {
    if (pos >= written_size) {
      return CorruptionError("{}: offset {} not found before byte {}", seg->log_path, offset, pos);
    }
    ASSIGN_OR_RETURN(first, header_at(pos));
    if (first.next_offset() > offset) break;
    pos += first.total_size();
  }
  // first.base_offset > offset only in a gap left by compaction: the read starts at the
  // next batch.
  if (empty == EmptyBatches::kSkip && first.records_count == 0) {
    // Past the record-less batches to the first one with records in this segment; with
    // none, the slice is the record-less run itself.
    uint64_t p = pos;
    BatchHeader h = first;
    bool found = false;
    while (!found) {
      const uint64_t next = p + h.total_size();
      if (next >= written_size) break;
      ASSIGN_OR_RETURN(BatchHeader n, header_at(next));
      if (n.base_offset >= limit) break;
      p = next;
      h = n;
      found = h.records_count > 0;
    }
    if (found) {
      pos = p;
      first = h;
    }
  }
  ReadResult r;
  r.first_offset = first.base_offset;
  r.next_offset = first.next_offset();
  r.holds_records = first.records_count > 0;
  uint64_t end = pos + first.total_size();
  // Small batches (a producer spreading over many partitions writes a few KB per batch):
  // the slice's end comes from positions instead of every header in between, which would
  // read (copy) all the bytes the slice is about to send from the file. Up to the written
  // end when it is visible and within max_bytes; otherwise up to the last index entry
  // within max_bytes, and the walk below goes on from there (index.interval.bytes at
  // most). next_offset is then the base offset of the batch there, which after
  // compaction may be past the last returned batch's end: nothing lies between.
  // Short reads walk a block or two (a tail reader's, whose start the read hint found
  // without the index, stays off the index entirely).
  if (r.holds_records && first.total_size() < kHeaderBlock / 4 && max_bytes >= 2 * kHeaderBlock &&
      limit >= written_next && end < written_size) {
    const uint64_t want_end = max_bytes > written_size - pos ? written_size : pos + max_bytes;
    if (want_end == written_size) {
      end = written_size;
      r.next_offset = written_next;
    } else if (index_entries > 0) {
      ASSIGN_OR_RETURN(auto index, files_->Get(seg->index_path, OpenMode::kRead));
      int64_t rel = -1;
      ASSIGN_OR_RETURN(std::optional<uint64_t> at,
                       LookupIndexByPosition(*index, index_entries, want_end, &rel));
      if (at.has_value() && *at > end) {
        if (*at > written_size) {
          return CorruptionError("{}: an index entry points at byte {}, past the end ({})",
                                 seg->index_path, *at, written_size);
        }
        end = *at;
        r.next_offset = seg->base_offset + rel;
      }
    }
  }
  while (end < written_size) {
    ASSIGN_OR_RETURN(BatchHeader h, header_at(end));
    if (h.base_offset >= limit || end + h.total_size() - pos > max_bytes) break;
    end += h.total_size();
    r.next_offset = h.next_offset();
    r.holds_records = r.holds_records || h.records_count > 0;
  }
  r.slice = FileSlice{std::move(file), pos, end - pos};
  return r;
}

Status PartitionLog::ReadSlice(const FileSlice& slice, std::vector<uint8_t>* out) {
  out->resize(slice.size);
  if (slice.size == 0) return Status::OK();
  ASSIGN_OR_RETURN(size_t n, slice.file->ReadAt(slice.position, *out));
  if (n != slice.size) {
    return CorruptionError("{}: read {} of {} bytes at byte {}", slice.file->path(), n, slice.size,
                           slice.position);
  }
  return Status::OK();
}

Result<std::optional<TimestampLookup>> PartitionLog::FindOffsetByTimestamp(int64_t ts) {
  struct Candidate {
    std::shared_ptr<Segment> seg;
    uint64_t written_size, index_entries, time_entries;
  };
  std::vector<Candidate> candidates;
  uint64_t gen;
  {
    std::lock_guard lock(mu_);
    if (closed_) return FailedPreconditionError("log {} is closed", dir_);
    for (const auto& s : segments_) {
      // Only written bytes are visible; max_timestamp may count pending batches, which
      // the scan below simply does not reach.
      if (s->max_timestamp >= ts && s->written_size > 0) {
        candidates.push_back(
            {s, s->written_size, s->written_index_entries, s->written_time_entries});
      }
    }
    gen = layout_gen_;
  }
  auto found = [&]() -> Result<std::optional<TimestampLookup>> {
    for (const Candidate& c : candidates) {
      const Segment& seg = *c.seg;
      // Time index: the last entry whose timestamp is < ts says every batch before its
      // offset is older than ts.
      int64_t start_rel = 0;
      if (c.time_entries > 0) {
        ASSIGN_OR_RETURN(auto tindex, files_->Get(seg.time_index_path, OpenMode::kRead));
        uint64_t lo = 0, hi = c.time_entries;
        uint8_t e[kTimeEntrySize];
        while (lo < hi) {
          uint64_t mid = lo + (hi - lo) / 2;
          ASSIGN_OR_RETURN(size_t n, tindex->ReadAt(mid * kTimeEntrySize, e));
          if (n != kTimeEntrySize)
            return CorruptionError("{}: short entry {}", seg.time_index_path, mid);
          if (static_cast<int64_t>(LoadBE64(e)) < ts) {
            start_rel = static_cast<int32_t>(LoadBE32(e + 8));
            lo = mid + 1;
          } else {
            hi = mid;
          }
        }
      }
      uint64_t pos = 0;
      if (c.index_entries > 0 && start_rel > 0) {
        ASSIGN_OR_RETURN(auto index, files_->Get(seg.index_path, OpenMode::kRead));
        int64_t entry_rel;
        ASSIGN_OR_RETURN(pos, LookupOffsetIndex(*index, c.index_entries, start_rel, &entry_rel));
      }
      ASSIGN_OR_RETURN(auto file, LogFile(seg, OpenMode::kRead));
      SegmentScanner scan(*file, std::min(pos, c.written_size), c.written_size);
      std::string problem;
      for (;;) {
        ASSIGN_OR_RETURN(auto batch, scan.Next(/*check_crc=*/false, &problem));
        if (!batch) break;
        const BatchHeader& h = scan.header();
        if (h.max_timestamp < ts) continue;
        bool compressed = (h.attributes & kAttrCompressionMask) != 0;
        bool log_append = (h.attributes & kAttrTimestampTypeLogAppend) != 0;
        if (log_append) return std::optional(TimestampLookup{h.base_offset, h.max_timestamp, true});
        if (compressed)
          return std::optional(TimestampLookup{h.base_offset, h.max_timestamp, false});
        if (auto found = FindInUncompressedBatch(*batch, h, ts)) return std::optional(*found);
        // Records that disagree with the header's max timestamp: the batch is the answer.
        return std::optional(TimestampLookup{h.base_offset, h.max_timestamp, false});
      }
      if (!problem.empty()) {
        return CorruptionError("{} at byte {}: {}", seg.log_path, scan.pos(), problem);
      }
    }
    return std::optional<TimestampLookup>();
  }();
  if (!found.ok()) return LayoutChangedOr(gen, found.status());
  return found;
}

// ---------------------------------------------------------------------------------------
// Truncation, retention, verification

Status PartitionLog::TruncateTo(int64_t offset) {
  if (InCallback())
    return FailedPreconditionError("TruncateTo called from an append callback of log {}", dir_);
  std::unique_lock lock(mu_);
  if (closed_) return FailedPreconditionError("log {} is closed", dir_);
  RETURN_IF_ERROR(WaitIdleLocked(lock));
  if (offset >= next_offset_) return Status::OK();
  if (offset < 0) return InvalidArgumentError("cannot truncate to negative offset {}", offset);
  Env* env = options_.env;
  ++layout_gen_;
  // Index files first: a crash in between leaves a whole .log whose indexes recovery
  // rebuilds, never index files without their .log (which recovery reports). The
  // directory is synced after each segment, so a power loss can only bring back a
  // suffix of what was removed, never leave a gap.
  auto remove_segment = [&](const Segment& s) -> Status {
    for (const std::string* p :
         {&s.index_path, &s.time_index_path, &s.txn_index_path, &s.log_path}) {
      files_->Evict(*p);
      if (env->Exists(*p)) RETURN_IF_ERROR(env->Remove(*p));
    }
    return env->SyncDir(dir_);
  };
  // Drop whole segments at or past `offset`, but always keep the first one.
  while (segments_.size() > 1 && segments_.back()->base_offset >= offset) {
    RETURN_IF_ERROR(remove_segment(*segments_.back()));
    segments_.pop_back();
  }
  std::shared_ptr<Segment> seg = segments_.back();
  int64_t new_end = offset;
  if (seg->base_offset >= offset) {
    // Everything goes: the log restarts empty at `offset`.
    RETURN_IF_ERROR(remove_segment(*seg));
    segments_.clear();
    auto fresh = NewSegment(offset);
    for (const std::string* p :
         {&fresh->log_path, &fresh->index_path, &fresh->time_index_path, &fresh->txn_index_path}) {
      RETURN_IF_ERROR(files_->Get(*p, OpenMode::kCreate).status());
    }
    RETURN_IF_ERROR(env->SyncDir(dir_));
    segments_.push_back(std::move(fresh));
  } else if (seg->closed_durable && seg->next_offset < offset) {
    // A cleaned segment ending before `offset` (compaction left a gap up to the segments
    // just dropped): nothing of it goes, and a new empty active segment at `offset`
    // keeps the end there across a restart (offsets are never handed out twice).
    auto fresh = NewSegment(offset);
    for (const std::string* p : {&fresh->log_path, &fresh->index_path, &fresh->time_index_path}) {
      RETURN_IF_ERROR(files_->Get(*p, OpenMode::kCreate).status());
    }
    RETURN_IF_ERROR(env->SyncDir(dir_));
    segments_.push_back(std::move(fresh));
  } else {
    ASSIGN_OR_RETURN(auto file, LogFile(*seg, OpenMode::kReadWrite));
    ASSIGN_OR_RETURN(ScanResult r,
                     ScanBatches(*file, *seg, 0, seg->written_size, /*check_crc=*/false,
                                 /*build_index=*/true, /*stop_at=*/offset));
    if (!r.problem.empty()) {
      return CorruptionError("{} at byte {}: {}", seg->log_path, r.end, r.problem);
    }
    RETURN_IF_ERROR(file->Truncate(r.end));  // also frees the blocks reserved past it
    seg->reserved_end = 0;
    seg->padded_end = 0;
    direct_.reset();  // its tail block is gone
    RETURN_IF_ERROR(file->Sync());
    RETURN_IF_ERROR(InstallScan(*seg, r, /*closed=*/false));
    RETURN_IF_ERROR(CutTxnIndex(*seg));
    seg->closed_durable = false;
    new_end = r.next_offset;
  }
  last_written_ = segments_.back();
  written_file_.reset();  // everything is durable; the file may be gone
  next_offset_ = written_end_ = durable_end_ = new_end;  // the cut is synced, the rest was
  log_start_ = std::min(log_start_, new_end);
  flush_target_ = std::min(flush_target_, new_end);
  unsynced_bytes_ = 0;
  return Status::OK();
}

Status PartitionLog::TruncateFullyAndStartAt(int64_t offset) {
  if (InCallback()) {
    return FailedPreconditionError(
        "TruncateFullyAndStartAt called from an append callback of log {}", dir_);
  }
  if (offset < 0) return InvalidArgumentError("cannot start a log at negative offset {}", offset);
  std::lock_guard file_lock(start_file_mu_);  // before mu_, as DeleteRecordsBefore
  std::unique_lock lock(mu_);
  if (closed_) return FailedPreconditionError("log {} is closed", dir_);
  RETURN_IF_ERROR(WaitIdleLocked(lock));
  ++layout_gen_;
  Status st = [&]() -> Status {
    // Oldest first, each followed by a directory sync (RemoveSegmentFiles): a power loss
    // leaves a suffix of the old segments (with their start), which the follower resets
    // again, or an empty log.
    const std::vector<std::shared_ptr<Segment>> doomed(segments_.begin(), segments_.end());
    RETURN_IF_ERROR(RemoveSegmentFiles(doomed));
    // A start recorded by DeleteRecords is the old log's: the fresh segment's base is the
    // start from now on.
    const std::string start_path = dir_ + "/" + kLogStartFile;
    if (options_.env->Exists(start_path)) RETURN_IF_ERROR(options_.env->Remove(start_path));
    auto fresh = NewSegment(offset);
    for (const std::string* p :
         {&fresh->log_path, &fresh->index_path, &fresh->time_index_path, &fresh->txn_index_path}) {
      RETURN_IF_ERROR(files_->Get(*p, OpenMode::kCreate).status());
    }
    RETURN_IF_ERROR(options_.env->SyncDir(dir_));
    segments_.assign(1, std::move(fresh));
    return Status::OK();
  }();
  if (!st.ok()) {
    // Half done: the segments listed may be gone. Nothing is served from this log again
    // until it is reopened (recovery finds what is left).
    failed_ = st;
    return st;
  }
  last_written_ = segments_.back();
  written_file_.reset();  // everything is durable; the file may be gone
  next_offset_ = written_end_ = durable_end_ = offset;
  // No start recorded, as after a restart (the fresh segment's base is the start): a
  // tiered log's older offsets are remote, not deleted (design 0025, decision 9).
  log_start_ = 0;
  flush_target_ = offset;
  unsynced_bytes_ = 0;
  return Status::OK();
}

Result<int> PartitionLog::ApplyRetention(int64_t upper_bound) {
  std::vector<std::shared_ptr<Segment>> doomed;
  {
    std::lock_guard lock(mu_);
    if (closed_) return FailedPreconditionError("log {} is closed", dir_);
    uint64_t total = 0;
    for (const auto& s : segments_) total += s->size;
    int64_t now_ms = options_.clock->NowMillis();
    auto expired = [&](const Segment& s) {
      int64_t newest = s.max_timestamp >= 0 ? s.max_timestamp : s.created_ms;
      return limits_.retention_ms >= 0 && now_ms - newest > limits_.retention_ms;
    };
    while (segments_.size() > 1) {
      const Segment& s = *segments_.front();
      if (!s.closed_durable) break;                        // still being written or synced by a job
      if (segments_[1]->base_offset > upper_bound) break;  // not all below the bound
      bool by_size = limits_.retention_bytes >= 0 &&
                     total - s.size >= static_cast<uint64_t>(limits_.retention_bytes);
      if (!by_size && !expired(s)) break;
      total -= s.size;
      doomed.push_back(segments_.front());
      segments_.pop_front();
    }
    // An expired active segment is rolled, as Kafka does, so that the next pass can
    // delete it once its closing sync is done; otherwise an idle partition would keep
    // its last segment forever.
    const Segment& active = *segments_.back();
    if (segments_.size() == 1 && active.size > 0 && expired(active) && failed_.ok()) {
      RollLocked(next_offset_);
      MaybeScheduleLocked();
    }
    if (!doomed.empty()) ++layout_gen_;
  }
  RETURN_IF_ERROR(RemoveSegmentFiles(doomed));
  return static_cast<int>(doomed.size());
}

// The log file goes first: recovery treats index files without a log before the first
// segment as leftovers of this and removes them. The directory is synced after each
// segment, so a power loss can only bring back a suffix of the deleted ones: the log
// never comes back with a gap of offsets in the middle.
Status PartitionLog::RemoveSegmentFiles(const std::vector<std::shared_ptr<Segment>>& doomed) {
  for (const auto& s : doomed) {
    for (const std::string* p :
         {&s->log_path, &s->index_path, &s->time_index_path, &s->txn_index_path}) {
      files_->Evict(*p);
      Status st = options_.env->Remove(*p);
      if (!st.ok() && options_.env->Exists(*p)) return st;
    }
    RETURN_IF_ERROR(options_.env->SyncDir(dir_));
  }
  return Status::OK();
}

Result<int64_t> PartitionLog::DeleteRecordsBefore(int64_t offset) {
  std::lock_guard file_lock(start_file_mu_);
  {
    std::lock_guard lock(mu_);
    if (closed_) return FailedPreconditionError("log {} is closed", dir_);
    if (offset > written_end_) {
      return OutOfRangeError("offset {} is past the log's end {}", offset, written_end_);
    }
    // Recorded also below the first segment (a tiered log's start is in remote storage).
    if (offset <= log_start_) return StartLocked();
  }
  // Recorded before anything is deleted: after a crash the start is at least this.
  Env* env = options_.env;
  const std::string path = dir_ + "/" + kLogStartFile;
  const std::string tmp = path + ".tmp";
  std::string text = std::to_string(offset) + "\n";
  {
    ASSIGN_OR_RETURN(auto f, env->Open(tmp, OpenMode::kCreate));
    RETURN_IF_ERROR(f->Truncate(0));
    RETURN_IF_ERROR(f->WriteAt(0, {reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
    RETURN_IF_ERROR(f->Sync());
  }
  RETURN_IF_ERROR(env->Rename(tmp, path));
  RETURN_IF_ERROR(env->SyncDir(dir_));

  std::vector<std::shared_ptr<Segment>> doomed;
  int64_t start;
  {
    std::lock_guard lock(mu_);
    if (closed_) return FailedPreconditionError("log {} is closed", dir_);
    log_start_ = std::max(log_start_, offset);
    // Whole segments below the start go; the active one stays (it is rolled by the next
    // append or retention pass, as in Kafka).
    while (segments_.size() > 1 && segments_[1]->base_offset <= log_start_ &&
           segments_.front()->closed_durable) {
      doomed.push_back(segments_.front());
      segments_.pop_front();
    }
    if (!doomed.empty()) ++layout_gen_;
    start = StartLocked();
  }
  RETURN_IF_ERROR(RemoveSegmentFiles(doomed));
  return start;
}

void PartitionLog::Reconfigure(const Limits& limits) {
  std::lock_guard lock(mu_);
  limits_ = limits;
  if (limits.max_batch_bytes > max_stored_batch_.load()) max_stored_batch_ = limits.max_batch_bytes;
}

// <dir>/log-start-offset: one decimal number and a newline. A file that does not parse
// is reported and ignored (the start falls back to the first segment's base): it only
// hides records that DeleteRecords removed, and never loses any.
Status PartitionLog::LoadLogStart() {
  Env* env = options_.env;
  const std::string path = dir_ + "/" + kLogStartFile;
  if (env->Exists(path + ".tmp")) RETURN_IF_ERROR(env->Remove(path + ".tmp"));
  if (!env->Exists(path)) return Status::OK();
  ASSIGN_OR_RETURN(auto f, env->Open(path, OpenMode::kRead));
  uint8_t buf[32];
  ASSIGN_OR_RETURN(size_t n, f->ReadAt(0, buf));
  std::string text(reinterpret_cast<const char*>(buf), n);
  int64_t value = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  bool ok = ec == std::errc() && value >= 0 && end != text.data() &&
            std::string_view(end, text.data() + text.size()) == "\n";
  if (!ok) {
    SLUICE_LOG(kLog, kWarn, "recovery: ignoring {}: not an offset ({} bytes)", path, n);
    return Status::OK();
  }
  // Never past the end: records the file claims deleted but that recovery cut anyway.
  log_start_ = std::min(value, segments_.back()->next_offset);
  return Status::OK();
}

Status PartitionLog::Verify() {
  std::vector<std::pair<std::shared_ptr<Segment>, uint64_t>> segs;
  uint64_t gen;
  {
    std::lock_guard lock(mu_);
    for (const auto& s : segments_) segs.emplace_back(s, s->written_size);
    gen = layout_gen_;
  }
  int64_t next = -1;
  for (const auto& entry : segs) {
    const auto& seg = entry.first;  // not a structured binding: clang 14 cannot capture those
    uint64_t size = entry.second;
    Status st = [&]() -> Status {
      ASSIGN_OR_RETURN(auto file, LogFile(*seg, OpenMode::kRead));
      ASSIGN_OR_RETURN(ScanResult r, ScanBatches(*file, *seg, 0, size, /*check_crc=*/true,
                                                 /*build_index=*/false, INT64_MAX));
      if (r.end < size)
        return CorruptionError("{} at byte {}: {}", seg->log_path, r.end, r.problem);
      if (r.first_base >= 0 && r.first_base < next) {
        return CorruptionError(
            "{} at byte 0: batch offset {} is below the previous segment's end {}", seg->log_path,
            r.first_base, next);
      }
      next = std::max(next, r.next_offset);
      return Status::OK();
    }();
    if (!st.ok()) return LayoutChangedOr(gen, st);
  }
  return Status::OK();
}

Status PartitionLog::ForEachBatchHeader(
    int64_t from, const std::function<bool(const BatchHeader&, std::span<const uint8_t>)>& fn) {
  std::vector<std::pair<std::shared_ptr<Segment>, uint64_t>> segs;
  uint64_t gen;
  {
    std::lock_guard lock(mu_);
    for (const auto& s : segments_) {
      if (s->next_offset > from || s == segments_.back()) segs.emplace_back(s, s->written_size);
    }
    gen = layout_gen_;
  }
  uint8_t raw[kBatchHeaderSize + kControlPeekBytes];
  for (const auto& entry : segs) {
    const Segment& seg = *entry.first;
    uint64_t size = entry.second;
    // A segment just rolled has no file until the I/O thread's first write creates it
    // (a cleaner walking headers while the owner appends met NotFound here).
    if (size == 0) continue;
    Status st = [&]() -> Status {
      ASSIGN_OR_RETURN(auto file, LogFile(seg, OpenMode::kRead));
      uint64_t pos = 0;
      while (pos < size) {
        if (size - pos < kBatchHeaderSize) {
          return CorruptionError("{} at byte {}: {} bytes left, less than a batch header",
                                 seg.log_path, pos, size - pos);
        }
        ASSIGN_OR_RETURN(size_t n, file->ReadAt(pos, std::span<uint8_t>(raw, kBatchHeaderSize)));
        if (n != kBatchHeaderSize)
          return CorruptionError("{} at byte {}: file is shorter than expected", seg.log_path, pos);
        BatchHeader h = ParseBatchHeader(raw);
        Status hs = CheckStoredHeader(
            h, static_cast<uint32_t>(std::min<uint64_t>(size - pos, MaxStoredBatch())));
        if (!hs.ok()) return CorruptionError("{} at byte {}: {}", seg.log_path, pos, hs.message());
        size_t raw_size = kBatchHeaderSize;
        if ((h.attributes & kAttrControl) != 0 && h.next_offset() > from) {
          // The control record's key, for the batch's type (txn_index.h).
          size_t peek = static_cast<size_t>(
              std::min<uint64_t>(kControlPeekBytes, h.total_size() - kBatchHeaderSize));
          ASSIGN_OR_RETURN(size_t got,
                           file->ReadAt(pos + kBatchHeaderSize,
                                        std::span<uint8_t>(raw + kBatchHeaderSize, peek)));
          raw_size += got;
        }
        if (h.next_offset() > from && !fn(h, std::span<const uint8_t>(raw, raw_size)))
          return AbortedError("stopped");
        pos += h.total_size();
      }
      return Status::OK();
    }();
    if (st.code() == StatusCode::kAborted) return Status::OK();
    if (!st.ok()) return LayoutChangedOr(gen, st);
  }
  return Status::OK();
}

// A read that failed while retention or truncation removed or cut what it was reading
// did not find corruption: it lost a race. That is reported as OutOfRange, to retry.
Status PartitionLog::LayoutChangedOr(uint64_t gen, Status st) const {
  std::lock_guard lock(mu_);
  if (layout_gen_ != gen) {
    return OutOfRangeError("log {} was truncated or had segments deleted during the read ({})",
                           dir_, st.message());
  }
  return st;
}

}  // namespace sluice::storage
