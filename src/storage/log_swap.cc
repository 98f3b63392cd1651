// PartitionLog's compaction side: CleanedSegment (the files a cleaner writes), the
// crash-safe swap of cleaned segments into the log, and its recovery at open. The states
// a crash can leave and how each is finished are in docs/formats/storage.md ("Cleaned
// segments and the swap"):
//
//   1. <A>.log.cleaned, <A>.index.cleaned, <A>.timeindex.cleaned (+ .txnindex.cleaned)
//      and the manifest <A>.replace.cleaned ("end E", the files) written and synced;
//   2. each data file renamed .cleaned -> .swap, the directory synced, then the manifest
//      renamed to <A>.replace.swap and the directory synced: the commit point;
//   3. every old segment file with a base in [A, E) renamed to <name>.deleted, then the
//      manifest renamed to <A>.replace.installing;
//   4. the .swap files renamed into place; the manifest and the .deleted files removed.
//
// Recovery finishes a swap whose manifest is .replace.swap (from 3) or .replace.installing
// (from 4), and removes every other .cleaned, .swap and .deleted file: a swap that did not
// reach its commit point is undone.
#include "storage/log_swap.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "base/crash_point.h"
#include "base/logging.h"
#include "storage/loggers.h"
#include "storage/segment.h"
#include "storage/txn_index.h"

namespace sluice::storage {
namespace {

constexpr size_t kCleanedBufferBytes = 1 << 20;
constexpr uint64_t kMaxManifestBytes = 4096;

using log_internal::ParseSegmentName;
using log_internal::SegmentName;

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

Status WriteSynced(Env* env, const std::string& path, std::span<const uint8_t> bytes) {
  ASSIGN_OR_RETURN(auto f, env->Open(path, OpenMode::kCreate));
  RETURN_IF_ERROR(f->Truncate(0));
  if (!bytes.empty()) RETURN_IF_ERROR(f->WriteAt(0, bytes));
  return f->Sync();
}

Result<std::vector<uint8_t>> ReadWhole(Env* env, const std::string& path, uint64_t max) {
  ASSIGN_OR_RETURN(auto f, env->Open(path, OpenMode::kRead));
  ASSIGN_OR_RETURN(uint64_t size, f->Size());
  if (size > max) return CorruptionError("{} is {} bytes, more than {}", path, size, max);
  std::vector<uint8_t> out(size);
  ASSIGN_OR_RETURN(size_t n, f->ReadAt(0, out));
  if (n != size) return CorruptionError("{}: read {} of {} bytes", path, n, size);
  return out;
}

// The manifest: "sluice-swap 1\nend <E>\nfiles .log .index ...\n".
struct Manifest {
  int64_t end = 0;
  std::vector<std::string> exts;
};

std::string FormatManifest(const Manifest& m) {
  std::string files;
  for (const auto& e : m.exts) files += " " + e;
  return fmt::format("sluice-swap 1\nend {}\nfiles{}\n", m.end, files);
}

Result<Manifest> ParseManifest(const std::string& path, std::string_view text) {
  Manifest m;
  std::vector<std::string_view> lines;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  auto bad = [&](std::string_view why) {
    return CorruptionError("swap manifest {}: {}", path, why);
  };
  if (lines.size() < 3 || lines[0] != "sluice-swap 1") return bad("not version 1");
  if (lines[1].substr(0, 4) != "end ") return bad("no end line");
  std::string_view num = lines[1].substr(4);
  auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), m.end);
  if (ec != std::errc() || p != num.data() + num.size() || m.end < 0) return bad("bad end offset");
  if (lines[2].substr(0, 5) != "files") return bad("no files line");
  std::string_view rest = lines[2].substr(5);
  while (!rest.empty()) {
    if (rest[0] != ' ') return bad("bad files line");
    rest.remove_prefix(1);
    size_t sp = rest.find(' ');
    std::string_view ext = rest.substr(0, sp);
    if (std::find_if(std::begin(kSegmentFileExts), std::end(kSegmentFileExts),
                     [&](const char* e) { return ext == e; }) == std::end(kSegmentFileExts)) {
      return bad(fmt::format("unknown file extension '{}'", ext));
    }
    m.exts.emplace_back(ext);
    rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp);
  }
  if (m.exts.empty() || m.exts[0] != ".log") return bad("the files do not start with .log");
  return m;
}

// The base of a segment file name with any of the segment extensions followed by
// `suffix` ("" for the plain names), or nullopt.
std::optional<int64_t> SegmentFileBase(std::string_view name, std::string_view suffix) {
  for (const char* ext : kSegmentFileExts) {
    if (auto b = ParseSegmentName(name, std::string(ext) + std::string(suffix))) return b;
  }
  return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// CleanedSegment

CleanedSegment::CleanedSegment(Env* env, std::string dir, int64_t base,
                               uint32_t index_interval_bytes)
    : env_(env),
      dir_(std::move(dir)),
      base_(base),
      index_interval_bytes_(index_interval_bytes),
      next_offset_(base) {}

CleanedSegment::~CleanedSegment() {
  if (!swapped_) RemoveFiles();
}

Status CleanedSegment::Open() {
  ASSIGN_OR_RETURN(log_,
                   env_->Open(dir_ + "/" + SegmentName(base_, ".log.cleaned"), OpenMode::kCreate));
  return log_->Truncate(0);
}

void CleanedSegment::RemoveFiles() {
  log_.reset();
  for (const char* ext : kSegmentFileExts) {
    for (std::string_view state : {".cleaned", ".swap"}) {
      std::string p = dir_ + "/" + SegmentName(base_, std::string(ext) + std::string(state));
      if (env_->Exists(p)) (void)env_->Remove(p);
    }
  }
  std::string m = dir_ + "/" + SegmentName(base_, ".replace.cleaned");
  if (env_->Exists(m)) (void)env_->Remove(m);
}

Status CleanedSegment::Append(std::span<const uint8_t> batch) {
  if (batch.size() < kBatchHeaderSize) return InvalidArgumentError("batch shorter than a header");
  BatchHeader h = ParseBatchHeader(batch);
  if (h.total_size() != batch.size()) {
    return InvalidArgumentError("batch length {} does not match its {} bytes", h.total_size(),
                                batch.size());
  }
  if (h.base_offset < next_offset_) {
    return InvalidArgumentError("batch at offset {} is below the cleaned segment's next offset {}",
                                h.base_offset, next_offset_);
  }
  if (h.last_offset() - base_ > INT32_MAX || size_ + batch.size() > INT32_MAX) {
    return InvalidArgumentError("batch at offset {} does not fit a segment based at {}",
                                h.base_offset, base_);
  }
  if (since_index_ >= index_interval_bytes_ && size_ > 0) {
    int32_t rel = static_cast<int32_t>(h.base_offset - base_);
    log_internal::PutOffsetEntry(index_, rel, static_cast<uint32_t>(size_));
    if (max_timestamp_ > last_indexed_ts_) {
      log_internal::PutTimeEntry(time_index_, max_timestamp_, rel);
      last_indexed_ts_ = max_timestamp_;
    }
    since_index_ = 0;
  }
  since_index_ += batch.size();
  max_timestamp_ = std::max(max_timestamp_, h.max_timestamp);
  buffer_.insert(buffer_.end(), batch.begin(), batch.end());
  size_ += batch.size();
  next_offset_ = h.next_offset();
  ++batches_;
  if (buffer_.size() >= kCleanedBufferBytes) return FlushBuffer();
  return Status::OK();
}

Status CleanedSegment::FlushBuffer() {
  if (buffer_.empty()) return Status::OK();
  RETURN_IF_ERROR(log_->WriteAt(written_, buffer_));
  written_ += buffer_.size();
  buffer_.clear();
  return Status::OK();
}

Status CleanedSegment::Finish() {
  RETURN_IF_ERROR(FlushBuffer());
  RETURN_IF_ERROR(log_->Sync());
  // The closing time entry, as a rolled segment has.
  if (max_timestamp_ > last_indexed_ts_) {
    log_internal::PutTimeEntry(time_index_, max_timestamp_,
                               static_cast<int32_t>(next_offset_ - base_));
    last_indexed_ts_ = max_timestamp_;
  }
  RETURN_IF_ERROR(WriteSynced(env_, dir_ + "/" + SegmentName(base_, ".index.cleaned"), index_));
  return WriteSynced(env_, dir_ + "/" + SegmentName(base_, ".timeindex.cleaned"), time_index_);
}

// ---------------------------------------------------------------------------------------
// PartitionLog: the cleaner's view and the swap

std::vector<SegmentSummary> PartitionLog::ClosedSegments() const {
  std::lock_guard lock(mu_);
  std::vector<SegmentSummary> out;
  if (closed_) return out;
  for (size_t i = 0; i + 1 < segments_.size(); ++i) {
    const Segment& s = *segments_[i];
    if (!s.closed_durable) break;
    out.push_back({s.base_offset, s.next_offset, s.size, s.max_timestamp, s.first_batch_ts});
  }
  return out;
}

Result<std::unique_ptr<CleanedSegment>> PartitionLog::BeginCleaned(int64_t base_offset) {
  std::unique_ptr<CleanedSegment> seg(
      new CleanedSegment(options_.env, dir_, base_offset, options_.index_interval_bytes));
  RETURN_IF_ERROR(seg->Open());
  return seg;
}

Status PartitionLog::ReplaceSegments(const std::vector<int64_t>& old_bases,
                                     std::unique_ptr<CleanedSegment> cleaned) {
  if (cleaned == nullptr || old_bases.empty() || old_bases.front() != cleaned->base_offset()) {
    return InvalidArgumentError("log {}: a swap needs old segments starting at the cleaned base",
                                dir_);
  }
  RETURN_IF_ERROR(cleaned->Finish());
  Env* env = options_.env;
  const int64_t base = cleaned->base_offset();
  std::vector<std::pair<Waiter, Status>> ready;
  Status result;
  {
    std::unique_lock lock(mu_);
    if (closed_) return FailedPreconditionError("log {} is closed", dir_);
    if (!failed_.ok()) return failed_;
    auto first = std::find_if(segments_.begin(), segments_.end(),
                              [&](const auto& s) { return s->base_offset == base; });
    size_t i = static_cast<size_t>(first - segments_.begin());
    size_t n = old_bases.size();
    bool present = first != segments_.end() && i + n < segments_.size();
    for (size_t k = 0; present && k < n; ++k) {
      present = segments_[i + k]->base_offset == old_bases[k] && segments_[i + k]->closed_durable;
    }
    if (!present) {
      return FailedPreconditionError(
          "log {}: the segments from {} to swap are no longer the log's (retention or "
          "truncation ran)",
          dir_, base);
    }
    const int64_t end = segments_[i + n]->base_offset;
    if (cleaned->next_offset() > end) {
      return InvalidArgumentError("log {}: cleaned segment ends at {}, past the next segment {}",
                                  dir_, cleaned->next_offset(), end);
    }
    Manifest m{end, {".log", ".index", ".timeindex"}};
    // The aborted-transaction entries of the old segments go with the new one, in marker
    // order, those whose marker offset (bytes 18-25 of Kafka's entry) is inside the new
    // segment: an entry whose marker the cleaner removed only names records that are gone
    // too, and recovery keeps entries with a marker offset inside their segment.
    std::vector<uint8_t> txn;
    for (size_t k = 0; k < n; ++k) {
      std::string p = dir_ + "/" + SegmentName(old_bases[k], ".txnindex");
      if (!env->Exists(p)) continue;
      ASSIGN_OR_RETURN(auto bytes, ReadWhole(env, p, uint64_t{INT32_MAX}));
      for (size_t at = 0; at + kAbortedTxnSize <= bytes.size(); at += kAbortedTxnSize) {
        auto marker = static_cast<int64_t>(LoadBE64(bytes.data() + at + 18));
        if (marker < base || marker >= cleaned->next_offset()) continue;
        txn.insert(txn.end(), bytes.begin() + static_cast<std::ptrdiff_t>(at),
                   bytes.begin() + static_cast<std::ptrdiff_t>(at + kAbortedTxnSize));
      }
    }
    // Written also when empty: every segment has its .txnindex (docs/formats/storage.md).
    RETURN_IF_ERROR(WriteSynced(env, dir_ + "/" + SegmentName(base, ".txnindex.cleaned"), txn));
    m.exts.push_back(".txnindex");
    std::string manifest = FormatManifest(m);
    RETURN_IF_ERROR(
        WriteSynced(env, dir_ + "/" + SegmentName(base, ".replace.cleaned"), Bytes(manifest)));
    RETURN_IF_ERROR(env->SyncDir(dir_));
    CrashPoint("compaction-cleaned-written");
    for (const std::string& ext : m.exts) {
      RETURN_IF_ERROR(env->Rename(dir_ + "/" + SegmentName(base, ext + ".cleaned"),
                                  dir_ + "/" + SegmentName(base, ext + ".swap")));
    }
    RETURN_IF_ERROR(env->SyncDir(dir_));
    RETURN_IF_ERROR(env->Rename(dir_ + "/" + SegmentName(base, ".replace.cleaned"),
                                dir_ + "/" + SegmentName(base, ".replace.swap")));
    RETURN_IF_ERROR(env->SyncDir(dir_));
    // Committed: from here a crash leaves the new segment, and so must an error.
    CrashPoint("compaction-swap-committed");
    cleaned->swapped_ = true;
    ++swap_gen_;
    result = FinishSwap(base, m.end, m.exts);
    // Handles cached on the old files must not serve the new ones.
    for (size_t k = 0; k < n; ++k) {
      for (const char* ext : kSegmentFileExts)
        files_->Evict(dir_ + "/" + SegmentName(old_bases[k], ext));
    }
    if (!result.ok()) {
      FailLocked(result, &ready);
      if (!ready.empty()) ++callbacks_running_;
    } else {
      auto seg = NewSegment(base);
      seg->size = seg->written_size = cleaned->size();
      seg->next_offset = cleaned->next_offset();
      seg->max_timestamp = cleaned->max_timestamp_;
      seg->first_batch_ts = segments_[i]->first_batch_ts;
      seg->last_indexed_ts = cleaned->last_indexed_ts_;
      seg->index_entries = seg->written_index_entries =
          cleaned->index_.size() / log_internal::kOffsetEntrySize;
      seg->time_entries = seg->written_time_entries =
          cleaned->time_index_.size() / log_internal::kTimeEntrySize;
      seg->txn_entries = seg->written_txn_entries = txn.size() / kAbortedTxnSize;
      seg->closed_durable = true;
      segments_.erase(segments_.begin() + static_cast<std::ptrdiff_t>(i),
                      segments_.begin() + static_cast<std::ptrdiff_t>(i + n));
      segments_.insert(segments_.begin() + static_cast<std::ptrdiff_t>(i), std::move(seg));
      ++layout_gen_;
    }
    ++swap_gen_;
  }
  if (!ready.empty()) {
    for (auto& [w, st] : ready) w.cb(st, w.info);
    std::lock_guard lock(mu_);
    --callbacks_running_;
    idle_cv_.notify_all();
  }
  return result;
}

// Steps 3 and 4 for the committed swap of base `base`; also what recovery runs.
Status PartitionLog::FinishSwap(int64_t base, int64_t end, const std::vector<std::string>& exts) {
  Env* env = options_.env;
  const std::string swap_manifest = dir_ + "/" + SegmentName(base, ".replace.swap");
  const std::string installing = dir_ + "/" + SegmentName(base, ".replace.installing");
  if (env->Exists(swap_manifest)) {
    ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir_));
    for (const std::string& name : names) {
      auto b = SegmentFileBase(name, "");
      if (b && *b >= base && *b < end) {
        RETURN_IF_ERROR(env->Rename(dir_ + "/" + name, dir_ + "/" + name + ".deleted"));
      }
    }
    RETURN_IF_ERROR(env->SyncDir(dir_));
    CrashPoint("compaction-old-deleted");
    RETURN_IF_ERROR(env->Rename(swap_manifest, installing));
    RETURN_IF_ERROR(env->SyncDir(dir_));
  }
  for (const std::string& ext : exts) {
    std::string from = dir_ + "/" + SegmentName(base, ext + ".swap");
    if (env->Exists(from)) RETURN_IF_ERROR(env->Rename(from, dir_ + "/" + SegmentName(base, ext)));
  }
  RETURN_IF_ERROR(env->SyncDir(dir_));
  CrashPoint("compaction-swap-installed");
  RETURN_IF_ERROR(env->Remove(installing));
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir_));
  for (const std::string& name : names) {
    auto b = SegmentFileBase(name, ".deleted");
    if (b && *b >= base && *b < end) RETURN_IF_ERROR(env->Remove(dir_ + "/" + name));
  }
  return env->SyncDir(dir_);
}

// At open, before the segments are read: finishes committed swaps, undoes the others.
Status PartitionLog::RecoverSwaps() {
  Env* env = options_.env;
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir_));
  std::sort(names.begin(), names.end());
  bool changed = false;
  for (const std::string& name : names) {
    std::optional<int64_t> base = ParseSegmentName(name, ".replace.swap");
    if (!base) base = ParseSegmentName(name, ".replace.installing");
    if (!base) continue;
    const std::string path = dir_ + "/" + name;
    ASSIGN_OR_RETURN(auto bytes, ReadWhole(env, path, kMaxManifestBytes));
    ASSIGN_OR_RETURN(
        Manifest m,
        ParseManifest(path,
                      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())));
    SLUICE_LOG(kLog, kInfo, "recovery: finishing the swap of cleaned segment {} (up to {})", path,
               m.end);
    RETURN_IF_ERROR(FinishSwap(*base, m.end, m.exts));
    changed = true;
  }
  ASSIGN_OR_RETURN(names, env->ListDir(dir_));
  for (const std::string& name : names) {
    bool leftover = SegmentFileBase(name, ".cleaned") || SegmentFileBase(name, ".swap") ||
                    SegmentFileBase(name, ".deleted") || ParseSegmentName(name, ".replace.cleaned");
    if (!leftover) continue;
    SLUICE_LOG(kLog, kInfo, "recovery: removing {} left by an unfinished swap", name);
    RETURN_IF_ERROR(env->Remove(dir_ + "/" + name));
    changed = true;
  }
  if (changed) RETURN_IF_ERROR(env->SyncDir(dir_));
  return Status::OK();
}

}  // namespace sluice::storage
