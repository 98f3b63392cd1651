// The cleaning of one log (see log_cleaner.h for the rules and their Kafka origins).
#include "compaction/log_cleaner.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include "base/logging.h"
#include "compaction/batch_filter.h"
#include "compaction/loggers.h"
#include "storage/batch_header.h"
#include "storage/log_swap.h"

namespace sluice::compaction {
namespace {

using storage::BatchHeader;
using storage::PartitionLog;

constexpr uint64_t kReadBytes = 1 << 20;               // per read of a segment
constexpr size_t kMaxDecompressed = size_t{64} << 20;  // as the produce path allows
constexpr uint64_t kCleanedSegmentBuffer = 1 << 20;    // CleanedSegment's write buffer

int64_t ProducerId(std::span<const uint8_t> raw_header) {
  return static_cast<int64_t>(storage::LoadBE64(raw_header.data() + storage::kProducerIdOffset));
}
bool IsControl(const BatchHeader& h) {
  return (static_cast<uint16_t>(h.attributes) & storage::kAttrControl) != 0;
}
bool IsTransactional(const BatchHeader& h) {
  return (static_cast<uint16_t>(h.attributes) & storage::kAttrTransactional) != 0;
}

// Calls fn(batch) for every batch whose base offset is in [from, to), through Read. A log
// start inside the first segment (DeleteRecords, or the snapshots of the internal logs
// before they were compacted) is where reading begins: the records below it are deleted,
// and a cleaned segment leaves them out.
template <typename F>
Status ForEachBatch(PartitionLog& log, int64_t from, int64_t to, std::vector<uint8_t>& buf,
                    Throttler* throttler, uint64_t* bytes, F&& fn) {
  int64_t offset = std::max(from, log.start_offset());
  while (offset < to) {
    ASSIGN_OR_RETURN(storage::ReadResult r, log.Read(offset, kReadBytes));
    if (r.slice.size == 0) break;
    RETURN_IF_ERROR(PartitionLog::ReadSlice(r.slice, &buf));
    if (throttler != nullptr) throttler->Acquire(buf.size());
    size_t pos = 0;
    int64_t next = offset;
    while (pos + storage::kBatchHeaderSize <= buf.size()) {
      BatchHeader h = storage::ParseBatchHeader(std::span<const uint8_t>(buf).subspan(pos));
      if (h.total_size() > buf.size() - pos) {
        return CorruptionError("log {}: batch at offset {} runs past its read", log.dir(),
                               h.base_offset);
      }
      if (h.base_offset >= to) return Status::OK();
      *bytes += h.total_size();
      RETURN_IF_ERROR(fn(std::span<const uint8_t>(buf).subspan(pos, h.total_size()), h));
      pos += h.total_size();
      next = h.next_offset();
    }
    if (next <= offset) {
      return CorruptionError("log {}: the read at offset {} did not advance", log.dir(), offset);
    }
    offset = next;
  }
  return Status::OK();
}

// What the batch headers of the whole log say about producers and transactions.
struct TxnScan {
  std::unordered_map<int64_t, int64_t>
      last_data_offset;  // producer -> last offset of its last data batch
  // producer -> aborted transactions (first offset, marker offset), by first offset
  std::unordered_map<int64_t, std::vector<std::pair<int64_t, int64_t>>> aborted;
  int64_t first_open_txn = INT64_MAX;  // the last stable offset bound

  bool IsAborted(int64_t pid, int64_t offset) const {
    auto it = aborted.find(pid);
    if (it == aborted.end()) return false;
    const auto& v = it->second;
    auto r = std::upper_bound(v.begin(), v.end(), std::make_pair(offset, INT64_MAX));
    return r != v.begin() && std::prev(r)->second >= offset;
  }
};

Result<TxnScan> ScanTransactions(PartitionLog& log) {
  TxnScan scan;
  std::unordered_map<int64_t, int64_t> open;  // producer -> first offset of its open txn
  std::vector<std::tuple<int64_t, int64_t, int64_t>> closed;  // pid, first, marker offset
  RETURN_IF_ERROR(
      log.ForEachBatchHeader(0, [&](const BatchHeader& h, std::span<const uint8_t> raw) {
        int64_t pid = ProducerId(raw);
        if (pid < 0) return true;
        if (IsControl(h)) {
          auto it = open.find(pid);
          if (it != open.end()) {
            closed.emplace_back(pid, it->second, h.base_offset);
            open.erase(it);
          }
          return true;
        }
        scan.last_data_offset[pid] = h.last_offset();
        if (IsTransactional(h) && !open.count(pid)) open[pid] = h.base_offset;
        return true;
      }));
  for (const auto& [pid, first] : open) scan.first_open_txn = std::min(scan.first_open_txn, first);
  // The type of each marker needs its record: read those batches (few).
  std::vector<uint8_t> buf;
  for (const auto& [pid, first, marker] : closed) {
    ASSIGN_OR_RETURN(storage::ReadResult r, log.Read(marker, 1));
    RETURN_IF_ERROR(PartitionLog::ReadSlice(r.slice, &buf));
    if (buf.size() < storage::kBatchHeaderSize) continue;
    BatchHeader h = storage::ParseBatchHeader(buf);
    if (h.base_offset != marker || h.total_size() > buf.size()) continue;
    if (ReadControlType(std::span<const uint8_t>(buf).first(h.total_size())) ==
        ControlType::kAbort) {
      scan.aborted[pid].emplace_back(first, marker);
    }
  }
  for (auto& [pid, v] : scan.aborted) std::sort(v.begin(), v.end());
  return scan;
}

Result<CleanableInfo> InspectWith(PartitionLog& log, const CleanConfig& config, int64_t first_dirty,
                                  Clock* clock, int64_t first_open_txn,
                                  std::vector<storage::SegmentSummary>* cleanable) {
  CleanableInfo info;
  std::vector<storage::SegmentSummary> closed = log.ClosedSegments();
  int64_t now = clock->NowMillis();
  int64_t start = log.start_offset();
  // The first uncleanable offset, then down to a segment boundary.
  int64_t limit = closed.empty() ? start : closed.back().next_offset;
  limit = std::min(limit, first_open_txn);
  cleanable->clear();
  for (const auto& s : closed) {
    if (s.next_offset > limit) break;
    bool too_new = config.min_compaction_lag_ms > 0 && s.max_timestamp >= 0 &&
                   s.max_timestamp > now - config.min_compaction_lag_ms;
    if (too_new) break;
    cleanable->push_back(s);
  }
  int64_t end = cleanable->empty() ? start : cleanable->back().next_offset;
  if (!cleanable->empty() && cleanable->size() < closed.size()) {
    end = closed[cleanable->size()].base_offset;
  }
  info.first_uncleanable = end;
  first_dirty = std::clamp(first_dirty, start, std::max(start, end));
  info.first_dirty = first_dirty;
  for (const auto& s : *cleanable) {
    if (s.next_offset <= first_dirty && s.base_offset < first_dirty) {
      info.clean_bytes += s.size;
    } else {
      info.dirty_bytes += s.size;
      if (info.oldest_dirty_ms < 0) {
        info.oldest_dirty_ms = s.first_batch_ts >= 0 ? s.first_batch_ts : s.max_timestamp;
      }
    }
  }
  return info;
}

// One pass's rewriting state: the order-dependent transaction bookkeeping of Kafka's
// CleanedTransactionMetadata.
struct PassState {
  const TxnScan* txns;
  KeyMap* map;
  int64_t pass_end;
  int64_t now;
  int64_t delete_retention_ms;
  std::set<int64_t> committed_seen;  // producers with a kept-transaction batch since its marker
  std::set<int64_t> aborted_seen;    // producers with an aborted batch since its marker
  std::vector<RawRecord> records;
  std::vector<const RawRecord*> kept;
  std::vector<uint8_t> scratch, out;
  std::vector<std::pair<uint64_t, uint64_t>> hashes;
  std::vector<int64_t> found;
};

// Looks up (or with `put`, records) every keyed record of st.records in the map: all keys
// hashed and their slots prefetched first, so the cache misses overlap. Lookups fill
// st.found (-1: not in the map, or not looked up: no key or at/past `limit`).
bool MapRecords(PassState& st, KeyMap& map, int64_t base_offset, int64_t limit, bool put) {
  st.hashes.resize(st.records.size());
  for (size_t i = 0; i < st.records.size(); ++i) {
    const RawRecord& r = st.records[i];
    if (!r.key) continue;
    HashKey(*r.key, &st.hashes[i].first, &st.hashes[i].second);
    map.Prefetch(st.hashes[i].first);
  }
  st.found.assign(st.records.size(), -1);
  for (size_t i = 0; i < st.records.size(); ++i) {
    const RawRecord& r = st.records[i];
    int64_t offset = base_offset + r.offset_delta;
    if (!r.key || offset >= limit) continue;
    if (put) {
      if (!map.PutHashed(st.hashes[i].first, st.hashes[i].second, offset)) return false;
    } else {
      st.found[i] = map.GetHashed(st.hashes[i].first, st.hashes[i].second);
    }
  }
  return true;
}

// Appends what stays of `batch` to `cleaned`.
Status FilterOne(PassState& st, std::span<const uint8_t> batch, const BatchHeader& h,
                 storage::CleanedSegment& cleaned, CleanStats* stats) {
  int64_t pid = ProducerId(batch);
  std::optional<int64_t> horizon = DeleteHorizon(h);
  bool horizon_passed = horizon && st.now >= *horizon;
  st.out.clear();
  if (IsControl(h)) {
    ControlType type = ReadControlType(batch);
    bool discardable = false;
    if (type == ControlType::kCommit) discardable = !st.committed_seen.erase(pid);
    if (type == ControlType::kAbort) discardable = !st.aborted_seen.erase(pid);
    if (discardable && horizon_passed) {
      ++stats->markers_removed;
      return Status::OK();
    }
    if (discardable && !horizon) {
      RETURN_IF_ERROR(ReadRecords(batch, kMaxDecompressed, &st.scratch, &st.records));
      st.kept.clear();
      for (const auto& r : st.records) st.kept.push_back(&r);
      int64_t new_horizon = st.now + st.delete_retention_ms;
      RETURN_IF_ERROR(RebuildBatch(batch, st.kept, new_horizon, &st.out));
      stats->next_horizon_ms = std::min(stats->next_horizon_ms, new_horizon);
      return cleaned.Append(st.out);
    }
    if (discardable) stats->next_horizon_ms = std::min(stats->next_horizon_ms, *horizon);
    return cleaned.Append(batch);
  }

  bool aborted = IsTransactional(h) && st.txns->IsAborted(pid, h.base_offset);
  if (IsTransactional(h)) (aborted ? st.aborted_seen : st.committed_seen).insert(pid);
  auto last = st.txns->last_data_offset.find(pid);
  bool producers_last =
      pid >= 0 && last != st.txns->last_data_offset.end() && last->second == h.last_offset();

  RETURN_IF_ERROR(ReadRecords(batch, kMaxDecompressed, &st.scratch, &st.records));
  stats->records_read += st.records.size();
  if (!aborted) MapRecords(st, *st.map, h.base_offset, st.pass_end, false);
  st.kept.clear();
  bool tombstones_kept = false;
  for (size_t i = 0; i < st.records.size(); ++i) {
    const RawRecord& r = st.records[i];
    int64_t offset = h.base_offset + r.offset_delta;
    bool keep;
    if (aborted) {
      keep = false;
      ++stats->aborted_removed;
    } else if (offset >= st.pass_end) {
      keep = true;  // not in this pass's map: newer than what it knows
    } else if (!r.key) {
      keep = false;  // a compacted topic's records need keys
    } else {
      keep = offset >= st.found[i];
      if (keep && r.null_value && horizon_passed) {
        keep = false;
        ++stats->tombstones_removed;
      }
    }
    if (keep) {
      st.kept.push_back(&r);
      tombstones_kept = tombstones_kept || r.null_value;
    }
  }
  stats->records_kept += st.kept.size();
  if (st.kept.empty()) {
    if (!producers_last) return Status::OK();
    ++stats->empty_batches_kept;
    if (h.records_count == 0) return cleaned.Append(batch);
    EmptyBatch(batch, &st.out);
    return cleaned.Append(st.out);
  }
  bool set_horizon = tombstones_kept && !horizon;
  if (tombstones_kept && horizon)
    stats->next_horizon_ms = std::min(stats->next_horizon_ms, *horizon);
  if (st.kept.size() == st.records.size() && !set_horizon) return cleaned.Append(batch);
  std::optional<int64_t> new_horizon;
  if (set_horizon) {
    new_horizon = st.now + st.delete_retention_ms;
    stats->next_horizon_ms = std::min(stats->next_horizon_ms, *new_horizon);
  }
  RETURN_IF_ERROR(RebuildBatch(batch, st.kept, new_horizon, &st.out));
  return cleaned.Append(st.out);
}

uint64_t BufferBytes(const std::vector<uint8_t>& read_buf, const PassState& st) {
  return read_buf.capacity() + st.scratch.capacity() + st.out.capacity() +
         st.records.capacity() * sizeof(RawRecord) + st.kept.capacity() * sizeof(void*) +
         kCleanedSegmentBuffer;
}

}  // namespace

void Throttler::Acquire(uint64_t bytes) {
  int64_t sleep_ns = 0;
  {
    std::lock_guard lock(mu_);
    if (!(rate_ > 0) || rate_ >= 1e18) return;
    int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
    if (start_ns_ == 0 || now - start_ns_ > 1'000'000'000) {
      start_ns_ = now;
      window_bytes_ = 0;
    }
    window_bytes_ += static_cast<double>(bytes);
    double due_ns = window_bytes_ / rate_ * 1e9;
    sleep_ns = static_cast<int64_t>(due_ns) - (now - start_ns_);
  }
  if (sleep_ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(sleep_ns));
}

void Throttler::set_rate(double bytes_per_second) {
  std::lock_guard lock(mu_);
  rate_ = bytes_per_second;
}

Result<int64_t> ReadCheckpoint(storage::Env* env, const std::string& dir) {
  std::string path = dir + "/" + kCheckpointFile;
  if (!env->Exists(path)) return int64_t{0};
  ASSIGN_OR_RETURN(auto f, env->Open(path, storage::OpenMode::kRead));
  char text[32] = {};
  ASSIGN_OR_RETURN(size_t n, f->ReadAt(0, std::span<uint8_t>(reinterpret_cast<uint8_t*>(text),
                                                             sizeof(text) - 1)));
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text, text + n, v);
  if (ec != std::errc() || v < 0 || (p != text + n && *p != '\n')) {
    // A damaged checkpoint only costs a cleaning from the start.
    SLUICE_LOG(kLog, kWarn, "{}: not an offset; cleaning from the log start", path);
    return int64_t{0};
  }
  return v;
}

Status WriteCheckpoint(storage::Env* env, const std::string& dir, int64_t offset) {
  std::string path = dir + "/" + kCheckpointFile;
  std::string tmp = path + ".tmp";
  std::string text = fmt::format("{}\n", offset);
  {
    ASSIGN_OR_RETURN(auto f, env->Open(tmp, storage::OpenMode::kCreate));
    RETURN_IF_ERROR(f->Truncate(0));
    RETURN_IF_ERROR(f->WriteAt(0, {reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
    RETURN_IF_ERROR(f->Sync());
  }
  RETURN_IF_ERROR(env->Rename(tmp, path));
  return env->SyncDir(dir);
}

Result<CleanableInfo> Inspect(PartitionLog& log, const CleanConfig& config, int64_t first_dirty,
                              Clock* clock, bool scan_transactions) {
  int64_t first_open_txn = INT64_MAX;
  if (scan_transactions) {
    ASSIGN_OR_RETURN(TxnScan txns, ScanTransactions(log));
    first_open_txn = txns.first_open_txn;
  }
  std::vector<storage::SegmentSummary> cleanable;
  return InspectWith(log, config, first_dirty, clock, first_open_txn, &cleanable);
}

Status CleanLog(PartitionLog& log, const CleanConfig& config, KeyMap& map, Throttler* throttler,
                Clock* clock, int64_t* first_dirty, CleanStats* stats,
                const std::atomic<bool>* stop, bool force) {
  storage::Env* env = log.options().env;
  std::vector<uint8_t> read_buf;
  bool first_pass = true;
  for (;;) {
    if (stop != nullptr && stop->load()) return Status::OK();
    ASSIGN_OR_RETURN(TxnScan txns, ScanTransactions(log));
    std::vector<storage::SegmentSummary> segs;
    ASSIGN_OR_RETURN(CleanableInfo info,
                     InspectWith(log, config, *first_dirty, clock, txns.first_open_txn, &segs));
    if (segs.empty()) break;
    if (info.first_dirty >= info.first_uncleanable && !(first_pass && force)) break;
    first_pass = false;

    // The key map over the dirty part, until it is full: sized for the records there (it
    // can hold no more keys), within its memory.
    uint64_t dirty_records = 0;
    RETURN_IF_ERROR(log.ForEachBatchHeader(
        info.first_dirty, [&](const BatchHeader& h, std::span<const uint8_t>) {
          if (h.base_offset >= info.first_uncleanable) return false;
          if (!IsControl(h)) dirty_records += static_cast<uint64_t>(std::max(h.records_count, 0));
          return true;
        }));
    map.Clear(static_cast<size_t>(dirty_records));
    int64_t pass_end = info.first_uncleanable;
    PassState st;
    uint64_t map_read = 0;
    Status built = ForEachBatch(
        log, info.first_dirty, info.first_uncleanable, read_buf, throttler, &map_read,
        [&](std::span<const uint8_t> batch, const BatchHeader& h) -> Status {
          if (IsControl(h)) return Status::OK();
          int64_t pid = ProducerId(batch);
          if (IsTransactional(h) && txns.IsAborted(pid, h.base_offset)) return Status::OK();
          if (map.size() + static_cast<size_t>(std::max(h.records_count, 0)) > map.capacity()) {
            if (map.size() == 0) {
              return ResourceExhaustedError(
                  "log {}: a batch of {} records does not fit the cleaner's key map of {} "
                  "entries (raise log.cleaner.dedupe.buffer.size)",
                  log.dir(), h.records_count, map.capacity());
            }
            pass_end = h.base_offset;
            return AbortedError("map full");
          }
          RETURN_IF_ERROR(ReadRecords(batch, kMaxDecompressed, &st.scratch, &st.records));
          if (!MapRecords(st, map, h.base_offset, INT64_MAX, true)) {
            return InternalError("log {}: the key map filled up inside a batch", log.dir());
          }
          return Status::OK();
        });
    if (!built.ok() && built.code() != StatusCode::kAborted) return built;
    stats->map_bytes_read += map_read;
    ++stats->passes;

    // Rewrite every cleanable segment below the pass end, in groups up to segment.bytes.
    st.txns = &txns;
    st.map = &map;
    st.pass_end = pass_end;
    st.now = clock->NowMillis();
    st.delete_retention_ms = config.delete_retention_ms;
    size_t i = 0;
    while (i < segs.size() && segs[i].base_offset < pass_end) {
      if (stop != nullptr && stop->load()) return Status::OK();
      std::vector<int64_t> bases{segs[i].base_offset};
      uint64_t group_bytes = segs[i].size;
      size_t j = i + 1;
      while (j < segs.size() && segs[j].base_offset < pass_end &&
             group_bytes + segs[j].size <= config.segment_bytes &&
             segs[j].next_offset - segs[i].base_offset <= INT32_MAX) {
        group_bytes += segs[j].size;
        bases.push_back(segs[j].base_offset);
        ++j;
      }
      int64_t group_end = j < segs.size() ? segs[j].base_offset : info.first_uncleanable;
      ASSIGN_OR_RETURN(auto cleaned, log.BeginCleaned(segs[i].base_offset));
      RETURN_IF_ERROR(ForEachBatch(log, segs[i].base_offset, group_end, read_buf, throttler,
                                   &stats->bytes_read,
                                   [&](std::span<const uint8_t> batch, const BatchHeader& h) {
                                     return FilterOne(st, batch, h, *cleaned, stats);
                                   }));
      stats->peak_buffer_bytes = std::max(stats->peak_buffer_bytes, BufferBytes(read_buf, st));
      stats->bytes_written += cleaned->size();
      if (throttler != nullptr) throttler->Acquire(cleaned->size());
      Status swapped = log.ReplaceSegments(bases, std::move(cleaned));
      if (swapped.code() == StatusCode::kFailedPrecondition) {
        SLUICE_LOG(kLog, kInfo, "cleaning {}: {}; trying again later", log.dir(),
                   swapped.message());
        return Status::OK();
      }
      RETURN_IF_ERROR(swapped);
      ++stats->groups;
      i = j;
    }
    *first_dirty = std::max(*first_dirty, pass_end);
    stats->first_dirty_after = *first_dirty;
    RETURN_IF_ERROR(WriteCheckpoint(env, log.dir(), *first_dirty));
    if (pass_end >= info.first_uncleanable) break;
  }
  return Status::OK();
}

}  // namespace sluice::compaction
