// The cleaning of one partition log, as Kafka's LogCleaner.Cleaner does it:
//
//   1. The cleanable range: from the log start to the first uncleanable offset, which is
//      the lowest of the active segment's base (the active segment is never cleaned), the
//      first offset of a transaction still open (the last stable offset), and the base of
//      the first segment holding a record newer than min.compaction.lag.ms. Whole closed
//      segments only.
//   2. The dirty part starts at the first dirty offset (the checkpoint of the last
//      cleaning). A pass builds the key map over it (keyed records of data batches that
//      are not aborted) until the map is full or the range ends: the pass end.
//   3. Every segment from the log start up to the pass end is rewritten, in groups whose
//      sizes add up to at most segment.bytes, each swapped in crash-safely
//      (storage/log_swap.h). A record goes when a later offset holds its key; records
//      without a key go; a tombstone stays until its batch's delete horizon
//      (delete.retention.ms after the cleaning that first kept it) has passed; aborted
//      transactional batches go; a commit or abort marker goes once its transaction has
//      no batch left and its own horizon has passed; a producer's last batch stays, empty
//      if need be, so its sequence and epoch survive.
//   4. Passes repeat until the dirty part is done: a log whose keys do not fit the map is
//      cleaned in several passes, never with more memory.
//
// The first dirty offset is kept in <log dir>/cleaner-offset-checkpoint.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "compaction/key_map.h"
#include "storage/log.h"

namespace sluice::compaction {

// The topic settings that drive cleaning (Kafka's names and defaults).
struct CleanConfig {
  double min_cleanable_dirty_ratio = 0.5;                               // min.cleanable.dirty.ratio
  int64_t min_compaction_lag_ms = 0;                                    // min.compaction.lag.ms
  int64_t max_compaction_lag_ms = std::numeric_limits<int64_t>::max();  // max.compaction.lag.ms
  int64_t delete_retention_ms = 86'400'000;                             // delete.retention.ms
  uint64_t segment_bytes = 1ull << 30;                                  // segment.bytes
};

// Limits the cleaners' I/O to `bytes_per_second` (log.cleaner.io.max.bytes.per.second),
// shared by every cleaner thread, as Kafka's Throttler: a caller that got ahead sleeps.
// Thread-safe.
class Throttler {
 public:
  explicit Throttler(double bytes_per_second) : rate_(bytes_per_second) {}
  void Acquire(uint64_t bytes);
  void set_rate(double bytes_per_second);

 private:
  std::mutex mu_;
  double rate_;              // guarded by mu_
  int64_t start_ns_ = 0;     // guarded by mu_; the window's start
  double window_bytes_ = 0;  // guarded by mu_
};

struct CleanStats {
  int passes = 0;
  int groups = 0;               // cleaned segments swapped in
  uint64_t bytes_read = 0;      // of segments rewritten (the map's reads not counted)
  uint64_t map_bytes_read = 0;  // read while building the key map
  uint64_t bytes_written = 0;
  uint64_t records_read = 0;
  uint64_t records_kept = 0;
  uint64_t tombstones_removed = 0;
  uint64_t aborted_removed = 0;  // records of aborted transactions
  uint64_t markers_removed = 0;
  uint64_t empty_batches_kept = 0;
  uint64_t peak_buffer_bytes = 0;  // the largest I/O buffers held (map not included)
  int64_t first_dirty_after = 0;
  // The earliest delete horizon still ahead among the batches kept (tombstones or markers
  // waiting): the log wants cleaning again then. INT64_MAX when none.
  int64_t next_horizon_ms = std::numeric_limits<int64_t>::max();
};

// What a log looks like to the scheduler (LogCleaner picks by these).
struct CleanableInfo {
  int64_t first_dirty = 0;
  int64_t first_uncleanable = 0;
  uint64_t clean_bytes = 0;
  uint64_t dirty_bytes = 0;
  int64_t oldest_dirty_ms = -1;  // first batch timestamp of the first dirty segment
  double dirty_ratio() const {
    uint64_t total = clean_bytes + dirty_bytes;
    return total == 0 ? 0.0 : static_cast<double>(dirty_bytes) / static_cast<double>(total);
  }
};

// The checkpoint file in a log directory.
inline constexpr const char* kCheckpointFile = "cleaner-offset-checkpoint";
Result<int64_t> ReadCheckpoint(storage::Env* env, const std::string& dir);  // 0 when missing
Status WriteCheckpoint(storage::Env* env, const std::string& dir, int64_t offset);

// The range a cleaning of `log` would cover now. With `scan_transactions` it walks every
// batch header to bound the range by open transactions (as a cleaning does); without, it
// looks at segment summaries only (the scheduler's cheap estimate, run every backoff).
Result<CleanableInfo> Inspect(storage::PartitionLog& log, const CleanConfig& config,
                              int64_t first_dirty, Clock* clock, bool scan_transactions = true);

// Cleans `log` from `*first_dirty` until its dirty part is done, one pass per map-full;
// advances `*first_dirty` (and its checkpoint file) after each pass. `map` is cleared
// first and at each pass; `throttler` may be null. `stop` (may be null) ends it between
// groups. With nothing dirty it does nothing, unless `force`: then one pass rewrites the
// cleaned part (tombstones and markers whose delete horizon passed go).
Status CleanLog(storage::PartitionLog& log, const CleanConfig& config, KeyMap& map,
                Throttler* throttler, Clock* clock, int64_t* first_dirty, CleanStats* stats,
                const std::atomic<bool>* stop = nullptr, bool force = true);

}  // namespace sluice::compaction
