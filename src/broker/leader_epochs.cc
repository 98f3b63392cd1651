#include "broker/leader_epochs.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/logging.h"
#include "broker/loggers.h"
#include "broker/meta_files.h"

namespace sluice::broker {
namespace {

constexpr size_t kMaxCheckpointBytes = 1 << 20;

}  // namespace

Result<std::vector<std::string_view>> CheckpointEntryLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      return InvalidArgumentError("line {} does not end with a newline", lines.size() + 1);
    }
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  if (lines.size() < 2) return InvalidArgumentError("{} lines, want at least 2", lines.size());
  int version = -1;
  if (!ParseCheckpointNumber(lines[0], &version) || version != 0) {
    return InvalidArgumentError("line 1: version '{}', want 0", lines[0]);
  }
  int64_t count = -1;
  if (!ParseCheckpointNumber(lines[1], &count) || count < 0 ||
      count != static_cast<int64_t>(lines.size()) - 2) {
    return InvalidArgumentError("line 2: count '{}' for {} entry lines", lines[1],
                                lines.size() - 2);
  }
  lines.erase(lines.begin(), lines.begin() + 2);
  return lines;
}

Result<std::vector<LeaderEpochCache::Entry>> LeaderEpochCache::Parse(std::string_view text) {
  ASSIGN_OR_RETURN(std::vector<std::string_view> lines, CheckpointEntryLines(text));
  std::vector<Entry> entries;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    size_t space = l.find(' ');
    Entry e{};
    if (space == std::string_view::npos || !ParseCheckpointNumber(l.substr(0, space), &e.epoch) ||
        !ParseCheckpointNumber(l.substr(space + 1), &e.start_offset) || e.epoch < 0 ||
        e.start_offset < 0) {
      return InvalidArgumentError("line {}: '{}' is not '<epoch> <offset>'", i + 3, l);
    }
    if (!entries.empty() &&
        (e.epoch <= entries.back().epoch || e.start_offset < entries.back().start_offset)) {
      return InvalidArgumentError("line {}: epoch {} at {} does not follow epoch {} at {}", i + 3,
                                  e.epoch, e.start_offset, entries.back().epoch,
                                  entries.back().start_offset);
    }
    entries.push_back(e);
  }
  return entries;
}

std::string LeaderEpochCache::Format(const std::vector<Entry>& entries) {
  std::string out = fmt::format("0\n{}\n", entries.size());
  for (const Entry& e : entries) out += fmt::format("{} {}\n", e.epoch, e.start_offset);
  return out;
}

Result<std::vector<LeaderEpochCache::Entry>> LeaderEpochCache::ReadCheckpoint(
    storage::Env* env, const std::string& dir) {
  ASSIGN_OR_RETURN(std::string text,
                   ReadSmallFile(env, dir + "/" + kLeaderEpochFile, kMaxCheckpointBytes));
  return Parse(text);
}

std::vector<LeaderEpochCache::Entry> LeaderEpochCache::Within(const std::vector<Entry>& entries,
                                                              int64_t base, int64_t next) {
  std::vector<Entry> out;
  for (const Entry& e : entries) {
    if (e.start_offset >= next) break;
    if (e.start_offset <= base) {
      out = {{e.epoch, base}};
    } else {
      out.push_back(e);
    }
  }
  return out;
}

Result<LeaderEpochCache> LeaderEpochCache::Open(storage::PartitionLog& log, Owner owner) {
  storage::Env* env = log.options().env;  // the log's files and its checkpoint alike
  const std::string path = log.dir() + "/" + kLeaderEpochFile;
  LeaderEpochCache cache;
  cache.env_ = env;
  cache.dir_ = log.dir();
  bool loaded = false;
  bool changed = false;
  Result<std::vector<Entry>> read = ReadCheckpoint(env, log.dir());
  if (read.ok()) {
    cache.entries_ = std::move(*read);
    loaded = true;
  } else if (read.status().code() != StatusCode::kNotFound) {
    SLUICE_LOG(kLog, kWarn, "{}: {}; rebuilding it from the log", path, read.status().message());
  }
  if (!loaded) {
    // The epochs stamped in the batches: each one's first offset.
    RETURN_IF_ERROR(log.ForEachBatchHeader(
        log.start_offset(), [&](const storage::BatchHeader& h, std::span<const uint8_t>) {
          if (h.leader_epoch >= 0 &&
              (cache.entries_.empty() || h.leader_epoch > cache.entries_.back().epoch)) {
            cache.entries_.push_back({h.leader_epoch, h.base_offset});
          }
          return true;
        }));
    changed = true;
  }
  // Entries past the end describe records recovery cut: they are gone.
  const int64_t end = log.end_offset();
  while (!cache.entries_.empty() && cache.entries_.back().start_offset > end) {
    cache.entries_.pop_back();
    changed = true;
  }
  const bool cut = log.recovery().truncated_bytes > 0;
  const bool unclean_start = owner == Owner::kLocalUncleanStart;
  if (owner != Owner::kCluster && (cut || (unclean_start && end > log.start_offset()))) {
    int32_t next = cache.entries_.empty() ? 1 : cache.entries_.back().epoch + 1;
    SLUICE_LOG(kLog, kInfo, "{}: {}: leader epoch {} starts at offset {}", log.dir(),
               cut ? "recovery cut the log" : "an unclean stop", next, end);
    cache.entries_.push_back({next, end});
    changed = true;
  }
  if (cache.entries_.empty()) {
    cache.entries_.push_back({0, log.start_offset()});
    changed = true;
  }
  if (changed) RETURN_IF_ERROR(cache.Save());
  return cache;
}

int32_t LeaderEpochCache::EpochAt(const std::vector<Entry>& entries, int64_t offset) {
  int32_t epoch = entries.empty() ? 0 : entries.front().epoch;
  for (const Entry& e : entries) {
    if (e.start_offset > offset) break;
    epoch = e.epoch;
  }
  return epoch;
}

std::pair<int32_t, int64_t> LeaderEpochCache::EndOffsetFor(int32_t epoch, int64_t log_end) const {
  if (epoch < 0) return {-1, -1};
  if (epoch == latest_epoch()) return {epoch, log_end};
  if (epoch > latest_epoch()) return {-1, -1};
  // The first entry with a larger epoch ends the asked one.
  auto higher = std::upper_bound(entries_.begin(), entries_.end(), epoch,
                                 [](int32_t e, const Entry& x) { return e < x.epoch; });
  if (higher == entries_.begin()) return {epoch, higher->start_offset};
  return {std::prev(higher)->epoch, higher->start_offset};
}

Status LeaderEpochCache::Save() {
  if (env_ == nullptr) return Status::OK();
  return WriteFileDurably(env_, dir_, kLeaderEpochFile, Format(entries_));
}

Status LeaderEpochCache::Assign(int32_t epoch, int64_t start_offset) {
  if (epoch < 0 || start_offset < 0) {
    return InvalidArgumentError("leader epoch {} at offset {}", epoch, start_offset);
  }
  if (!entries_.empty() && entries_.back().epoch == epoch &&
      entries_.back().start_offset <= start_offset) {
    return Status::OK();
  }
  std::erase_if(entries_,
                [&](const Entry& e) { return e.epoch >= epoch || e.start_offset >= start_offset; });
  entries_.push_back({epoch, start_offset});
  return Save();
}

Status LeaderEpochCache::TruncateFromEnd(int64_t end_offset) {
  if (entries_.empty() || entries_.back().start_offset < end_offset) return Status::OK();
  std::erase_if(entries_, [&](const Entry& e) { return e.start_offset >= end_offset; });
  return Save();
}

Status LeaderEpochCache::TruncateFromStart(int64_t start_offset) {
  // The last entry starting at or below `start_offset` holds it; those before it go.
  auto holder = std::upper_bound(entries_.begin(), entries_.end(), start_offset,
                                 [](int64_t off, const Entry& e) { return off < e.start_offset; });
  if (holder == entries_.begin()) return Status::OK();
  --holder;
  if (holder == entries_.begin() && holder->start_offset == start_offset) return Status::OK();
  holder->start_offset = start_offset;
  entries_.erase(entries_.begin(), holder);
  return Save();
}

}  // namespace sluice::broker
