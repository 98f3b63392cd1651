// LogCleaner: threads, the registry of compacted logs and the choice of the next one.
#include "compaction/cleaner.h"

#include "base/logging.h"
#include "compaction/loggers.h"

namespace sluice::compaction {
namespace {

constexpr uint64_t kIoReserveBytes = 4ull << 20;

}  // namespace

uint64_t KeyMapBytes(uint64_t per_thread_buffer) {
  if (per_thread_buffer >= 2 * kIoReserveBytes) return per_thread_buffer - kIoReserveBytes;
  return per_thread_buffer / 2;
}

LogCleaner::LogCleaner(CleanerOptions options)
    : options_(options), throttler_(options.io_max_bytes_per_second) {}

LogCleaner::~LogCleaner() { Stop(); }

void LogCleaner::Add(const std::string& name, storage::PartitionLog* log,
                     const CleanConfig& config) {
  std::lock_guard lock(mu_);
  auto& e = logs_[name];
  if (e == nullptr) e = std::make_shared<Entry>();
  e->log = log;
  e->config = config;
  cv_.notify_all();
}

void LogCleaner::Remove(const std::string& name) {
  std::unique_lock lock(mu_);
  auto it = logs_.find(name);
  if (it == logs_.end()) return;
  std::shared_ptr<Entry> e = it->second;
  logs_.erase(it);
  e->cancel = true;
  cv_.wait(lock, [&] { return !e->busy; });
}

bool LogCleaner::Contains(const std::string& name) const {
  std::lock_guard lock(mu_);
  return logs_.count(name) != 0;
}

std::optional<LogCleaner::LogStatus> LogCleaner::Status(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = logs_.find(name);
  if (it == logs_.end()) return std::nullopt;
  return it->second->status;
}

void LogCleaner::Start() {
  std::lock_guard lock(mu_);
  if (!threads_.empty()) return;
  stopping_ = false;
  stop_flag_ = false;
  for (auto& [n, e] : logs_) e->cancel = false;
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    threads_.emplace_back([this, i] { Run(i); });
  }
}

void LogCleaner::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    stop_flag_ = true;
    for (auto& [n, e] : logs_) e->cancel = true;
    cv_.notify_all();
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
}

sluice::Status LogCleaner::CleanEntry(Entry& e, KeyMap& map, CleanStats* stats, bool force) {
  storage::Env* env = e.log->options().env;
  if (!e.checkpoint_read) {
    ASSIGN_OR_RETURN(e.status.first_dirty, ReadCheckpoint(env, e.log->dir()));
    e.checkpoint_read = true;
  }
  int64_t first_dirty = e.status.first_dirty;
  sluice::Status st =
      CleanLog(*e.log, e.config, map, &throttler_, options_.clock, &first_dirty, stats, &e.cancel);
  e.status.first_dirty = first_dirty;
  return st;
}

Result<CleanStats> LogCleaner::CleanNow(const std::string& name) {
  std::shared_ptr<Entry> e;
  {
    std::unique_lock lock(mu_);
    auto it = logs_.find(name);
    if (it == logs_.end()) return NotFoundError("log {} is not registered for cleaning", name);
    e = it->second;
    cv_.wait(lock, [&] { return !e->busy; });
    e->busy = true;
  }
  KeyMap map(KeyMapBytes(options_.dedupe_buffer_bytes / std::max(1, options_.threads)));
  CleanStats stats;
  sluice::Status st = CleanEntry(*e, map, &stats, /*force=*/true);
  {
    std::lock_guard lock(mu_);
    e->status.last = stats;
    e->status.last_error = st.ok() ? "" : st.ToString();
    ++e->status.cleanings;
  }
  Release(e);
  if (!st.ok()) return st;
  ++cleanings_;
  return stats;
}

void LogCleaner::Release(const std::shared_ptr<Entry>& e) {
  std::lock_guard lock(mu_);
  e->busy = false;
  cv_.notify_all();
}

std::shared_ptr<LogCleaner::Entry> LogCleaner::PickLocked(std::unique_lock<std::mutex>& lock,
                                                          std::string* name) {
  // Inspection reads batch headers: done outside the lock, on entries marked busy.
  std::vector<std::pair<std::string, std::shared_ptr<Entry>>> candidates;
  for (auto& [n, e] : logs_) {
    if (e->busy) continue;
    e->busy = true;
    candidates.emplace_back(n, e);
  }
  lock.unlock();
  int64_t now = options_.clock->NowMillis();
  std::shared_ptr<Entry> best;
  std::string best_name;
  double best_score = -1;
  for (auto& [n, e] : candidates) {
    if (!e->checkpoint_read) {
      auto cp = ReadCheckpoint(e->log->options().env, e->log->dir());
      if (cp.ok()) e->status.first_dirty = *cp;
      e->checkpoint_read = true;
    }
    auto info = Inspect(*e->log, e->config, e->status.first_dirty, options_.clock,
                        /*scan_transactions=*/false);
    if (!info.ok()) {
      SLUICE_LOG(kLog, kWarn, "inspecting {}: {}", n, info.status().ToString());
      continue;
    }
    bool has_dirty = info->dirty_bytes > 0;
    bool lagging = has_dirty && info->oldest_dirty_ms >= 0 &&
                   e->config.max_compaction_lag_ms != std::numeric_limits<int64_t>::max() &&
                   now - info->oldest_dirty_ms > e->config.max_compaction_lag_ms;
    bool ratio = has_dirty && info->dirty_ratio() >= e->config.min_cleanable_dirty_ratio;
    bool horizon = e->status.cleanings > 0 && e->status.last.next_horizon_ms <= now;
    if (!lagging && !ratio && !horizon) continue;
    double score = (lagging ? 2.0 : 0.0) + info->dirty_ratio();
    e->horizon_due = horizon;
    if (score > best_score) {
      best_score = score;
      best = e;
      best_name = n;
    }
  }
  lock.lock();
  for (auto& [n, e] : candidates) {
    if (e != best) e->busy = false;
  }
  cv_.notify_all();
  *name = best_name;
  return best;
}

void LogCleaner::Run(int index) {
  KeyMap map(KeyMapBytes(options_.dedupe_buffer_bytes / std::max(1, options_.threads)));
  std::unique_lock lock(mu_);
  while (!stopping_) {
    std::string name;
    std::shared_ptr<Entry> e = PickLocked(lock, &name);
    if (stopping_) {
      if (e != nullptr) e->busy = false;
      cv_.notify_all();
      break;
    }
    if (e == nullptr) {
      cv_.wait_for(lock, std::chrono::milliseconds(options_.backoff_ms), [&] { return stopping_; });
      continue;
    }
    lock.unlock();
    CleanStats stats;
    sluice::Status st = CleanEntry(*e, map, &stats, e->horizon_due);
    if (!st.ok()) {
      SLUICE_LOG(kLog, kWarn, "cleaning {} (thread {}): {}", name, index, st.ToString());
    } else if (stats.groups > 0) {
      SLUICE_LOG(kLog, kInfo,
                 "cleaned {}: {} passes, {} bytes read, {} written, {} of {} records kept", name,
                 stats.passes, stats.bytes_read, stats.bytes_written, stats.records_kept,
                 stats.records_read);
    }
    ++cleanings_;
    lock.lock();
    // A cleaning that found nothing to do still waits for the horizon it knew of.
    if (stats.passes == 0) stats.next_horizon_ms = e->status.last.next_horizon_ms;
    e->status.last = stats;
    e->status.last_error = st.ok() ? "" : st.ToString();
    ++e->status.cleanings;
    e->busy = false;
    cv_.notify_all();
    if (!st.ok()) {
      // A failing log is not retried at once: back off as for an idle round.
      cv_.wait_for(lock, std::chrono::milliseconds(options_.backoff_ms), [&] { return stopping_; });
    }
  }
}

}  // namespace sluice::compaction
