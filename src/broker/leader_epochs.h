// LeaderEpochCache: a partition's leader epochs and the offset each began at, kept in
// <partition>/leader-epoch-checkpoint in Kafka's text format (docs/design/0002, decision 7):
//
//   0              format version
//   <n>            number of entries
//   <epoch> <start offset>      n lines, epochs and offsets strictly increasing
//
// A single node is its partitions' only leader, so the epoch changes only when recovery
// cut the log's tail (records acknowledged under an epoch may be gone): the next epoch
// then starts at the new end, and clients that fetched the lost records learn it through
// OffsetForLeaderEpoch, as after a leader change in Kafka.
//
// Replicated (docs/design/0018-cluster.md, decision 3), the cache grows after open:
// a new leader Assigns (its epoch, its log end) before it takes writes, a follower
// Assigns each new epoch it sees in fetched batches, and truncations of the log cut the
// entries (Kafka's LeaderEpochFileCache assign / truncateFromEnd / truncateFromStart).
// Every change is written durably before the call returns.
//
// Threads: owned by its partition (the owner shard); not thread-safe.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "storage/log.h"

namespace sluice::broker {

// Kafka's checkpoint files (this one, replication-offset-checkpoint) share a frame:
// "0\n<n>\n", then n entry lines, each ending with a newline. Returns the entry lines
// (the first is line 3), or InvalidArgument naming the line and what is wrong.
Result<std::vector<std::string_view>> CheckpointEntryLines(std::string_view text);
// A whole decimal number, nothing before or after it.
template <typename T>
bool ParseCheckpointNumber(std::string_view s, T* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

class LeaderEpochCache {
 public:
  struct Entry {
    int32_t epoch;
    int64_t start_offset;
    bool operator==(const Entry&) const = default;
  };

  // Who starts this partition's epochs, and when Open may start one.
  enum class Owner {
    // A single node: when recovery truncated the log, a new epoch starts at its end.
    kLocal,
    // A single node whose last run died: an unsynced tail may be gone even when the
    // files end at a batch boundary, so a new epoch starts at the end of a non-empty log
    // (as after a cut).
    kLocalUncleanStart,
    // A cluster: etcd and the leaders decide the epochs (0018 decision 3); Open never
    // starts one, whatever recovery cut (a follower with an epoch its leader never had
    // could not fetch again).
    kCluster,
  };

  // Loads the checkpoint of `log`'s directory. A missing or malformed file (reported) is
  // rebuilt from the epochs stamped in the log's batch headers. Entries past the log's
  // end are dropped; then a new epoch may start at its end (`owner`). The file is
  // rewritten durably whenever this changed it.
  static Result<LeaderEpochCache> Open(storage::PartitionLog& log, Owner owner = Owner::kLocal);

  // Parses the checkpoint text; InvalidArgument names the line and what is wrong.
  static Result<std::vector<Entry>> Parse(std::string_view text);
  static std::string Format(const std::vector<Entry>& entries);
  // The checkpoint of the partition directory `dir`, parsed (NotFound when there is none).
  // Read by other threads than the owner too: the file is only ever replaced whole.
  static Result<std::vector<Entry>> ReadCheckpoint(storage::Env* env, const std::string& dir);
  // The entries of `entries` that hold offsets of [base, next): the one holding `base`
  // (starting at it) and those starting inside (a tiered segment's epochs, design 0025).
  static std::vector<Entry> Within(const std::vector<Entry>& entries, int64_t base, int64_t next);

  int32_t latest_epoch() const { return entries_.empty() ? 0 : entries_.back().epoch; }
  // The epoch that was current when `offset` was written (the latest at or below it).
  int32_t EpochAt(int64_t offset) const { return EpochAt(entries_, offset); }
  // The same over a copy of the entries (taken off the partition's owner).
  static int32_t EpochAt(const std::vector<Entry>& entries, int64_t offset);
  // Kafka's LeaderEpochFileCache.endOffsetFor: for the latest epoch, (it, log_end); for an
  // older one, (the largest epoch <= it, the start offset of the next larger epoch); for
  // one below every entry, (it, the first entry's start); (-1, -1) past the latest.
  std::pair<int32_t, int64_t> EndOffsetFor(int32_t epoch, int64_t log_end) const;
  const std::vector<Entry>& entries() const { return entries_; }

  // Kafka's assign: `epoch` starts at `start_offset`. Nothing changes when the latest
  // entry is this epoch starting at or before `start_offset`; otherwise the entries it
  // contradicts (an epoch >= `epoch`, or a start >= `start_offset`) are dropped and it is
  // appended. InvalidArgument for negative values.
  Status Assign(int32_t epoch, int64_t start_offset);
  // The log was cut to `end_offset`: entries starting at or past it go.
  Status TruncateFromEnd(int64_t end_offset);
  // The log now starts at `start_offset`: entries wholly below it go, and the one
  // holding it starts there.
  Status TruncateFromStart(int64_t start_offset);

 private:
  Status Save();

  std::vector<Entry> entries_;
  storage::Env* env_ = nullptr;  // the log's, set by Open; null: nothing is written
  std::string dir_;
};

// The checkpoint file's name in a partition directory.
inline constexpr const char* kLeaderEpochFile = "leader-epoch-checkpoint";

}  // namespace sluice::broker
