// LogCleaner: the background cleaners of a process (Kafka's LogCleaner and
// LogCleanerManager). Logs of compacted topics are registered with their settings; each
// of `threads` threads repeatedly picks the log most in need of cleaning and cleans it
// (log_cleaner.h), with its own key map of dedupe_buffer_bytes / threads (less the I/O
// buffers), under one shared I/O rate limit.
//
// A log is due when its dirty ratio (dirty bytes / cleanable bytes) is at least
// min.cleanable.dirty.ratio, when its oldest dirty record is older than
// max.compaction.lag.ms, or when a delete horizon it was waiting for has passed (tombstones
// and markers to remove). Among the due logs, those past max.compaction.lag.ms go first,
// then the dirtiest. With nothing due a thread sleeps backoff_ms (log.cleaner.backoff.ms).
//
// Lifecycle: construct, Add logs, Start; Remove a log before closing it; Stop (or the
// destructor) joins the threads. Add/Remove/Start/Stop from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "compaction/log_cleaner.h"
#include "storage/log.h"

namespace sluice::compaction {

struct CleanerOptions {
  int threads = 1;                              // log.cleaner.threads
  uint64_t dedupe_buffer_bytes = 128ull << 20;  // log.cleaner.dedupe.buffer.size
  double io_max_bytes_per_second =
      std::numeric_limits<double>::max();  // log.cleaner.io.max.bytes.per.second
  int64_t backoff_ms = 15'000;             // log.cleaner.backoff.ms
  Clock* clock = Clock::Real();
};

// The key map's share of one thread's buffer: the rest is for the I/O buffers.
uint64_t KeyMapBytes(uint64_t per_thread_buffer);

class LogCleaner {
 public:
  explicit LogCleaner(CleanerOptions options);
  ~LogCleaner();
  LogCleaner(const LogCleaner&) = delete;
  LogCleaner& operator=(const LogCleaner&) = delete;

  // Registers `log` under `name` (or changes its settings). The log must stay open until
  // Remove(name) returns.
  void Add(const std::string& name, storage::PartitionLog* log, const CleanConfig& config);
  // Unregisters; waits for a cleaning of that log in progress to stop.
  void Remove(const std::string& name);
  bool Contains(const std::string& name) const;

  void Start();
  void Stop();

  // Cleans `name` now on the calling thread, due or not (tests, tools).
  Result<CleanStats> CleanNow(const std::string& name);

  struct LogStatus {
    int64_t first_dirty = 0;
    int cleanings = 0;
    CleanStats last;
    std::string last_error;
  };
  std::optional<LogStatus> Status(const std::string& name) const;
  uint64_t cleanings() const { return cleanings_.load(); }

 private:
  struct Entry {
    storage::PartitionLog* log = nullptr;
    CleanConfig config;
    bool busy = false;                // a thread inspects or cleans it
    std::atomic<bool> cancel{false};  // set by Remove and Stop: ends a cleaning in progress
    bool checkpoint_read = false;
    bool horizon_due = false;  // picked because a delete horizon passed: clean even if not dirty
    LogStatus status;
  };

  void Run(int index);
  // Picks a due log and marks it busy; nullptr when none.
  std::shared_ptr<Entry> PickLocked(std::unique_lock<std::mutex>& lock, std::string* name);
  sluice::Status CleanEntry(Entry& e, KeyMap& map, CleanStats* stats, bool force);
  void Release(const std::shared_ptr<Entry>& e);

  const CleanerOptions options_;
  Throttler throttler_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Entry>> logs_;  // guarded by mu_
  bool stopping_ = false;                               // guarded by mu_
  std::atomic<bool> stop_flag_{false};
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> cleanings_{0};
};

}  // namespace sluice::compaction
