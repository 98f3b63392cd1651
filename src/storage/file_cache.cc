#include "storage/file_cache.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "base/clock.h"

namespace sluice::storage {

FileCache::FileCache(Env* env, size_t capacity, int64_t idle_timeout_ms)
    : env_(env),
      capacity_(capacity < 1 ? 1 : capacity),
      idle_timeout_ns_(std::max<int64_t>(idle_timeout_ms, 0) * 1'000'000) {
  if (idle_timeout_ns_ == 0) return;
  const auto interval =
      std::chrono::milliseconds(std::clamp<int64_t>(idle_timeout_ms / 2, 1, 1000));
  sweeper_ = std::thread([this, interval] {
    std::unique_lock lock(stop_mu_);
    while (!stop_cv_.wait_for(lock, interval, [this] { return stopping_; })) {
      lock.unlock();
      CloseIdle(MonotonicNanos());
      lock.lock();
    }
  });
}

FileCache::~FileCache() {
  if (!sweeper_.joinable()) return;
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  sweeper_.join();
}

Result<std::shared_ptr<File>> FileCache::Get(const std::string& path, OpenMode mode) {
  if (mode == OpenMode::kDirect) {
    return InvalidArgumentError("{}: direct descriptors are not cached", path);
  }
  bool want_write = mode != OpenMode::kRead;
  uint64_t evictions;
  {
    std::lock_guard lock(mu_);
    evictions = evictions_;
    auto it = entries_.find(path);
    if (it != entries_.end() && (it->second.writable || !want_write)) {
      lru_.splice(lru_.begin(), lru_, it->second.lru_pos);
      it->second.last_used_ns = MonotonicNanos();
      return it->second.file;
    }
  }
  // Open outside the lock: opening can block on the disk.
  ASSIGN_OR_RETURN(std::unique_ptr<File> opened, env_->Open(path, mode));
  std::shared_ptr<File> file(std::move(opened));
  std::lock_guard lock(mu_);
  // An Evict meanwhile may mean the path now names another file (a swap renamed one
  // into place): what we opened is not cached, the caller alone uses it.
  if (evictions_ != evictions) return file;
  const int64_t now = MonotonicNanos();
  auto it = entries_.find(path);
  if (it != entries_.end()) {
    if (it->second.writable || !want_write) {
      lru_.splice(lru_.begin(), lru_, it->second.lru_pos);
      it->second.last_used_ns = now;
      return it->second.file;  // another thread won the race; ours closes on return
    }
    lru_.erase(it->second.lru_pos);
    entries_.erase(it);
  }
  lru_.push_front(path);
  entries_.emplace(path, Entry{file, want_write, lru_.begin(), now});
  while (entries_.size() > capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  return file;
}

void FileCache::Evict(const std::string& path) {
  std::lock_guard lock(mu_);
  ++evictions_;
  auto it = entries_.find(path);
  if (it == entries_.end()) return;
  lru_.erase(it->second.lru_pos);
  entries_.erase(it);
}

size_t FileCache::CloseIdle(int64_t now_ns) {
  if (idle_timeout_ns_ == 0) return 0;
  const int64_t cutoff = now_ns - idle_timeout_ns_;
  std::vector<std::shared_ptr<File>> closing;  // closed outside the lock
  {
    std::lock_guard lock(mu_);
    auto pos = lru_.end();
    while (pos != lru_.begin()) {
      --pos;
      auto it = entries_.find(*pos);
      if (it->second.last_used_ns > cutoff) break;  // this one and all before it are newer
      if (it->second.file.use_count() > 1) continue;
      closing.push_back(std::move(it->second.file));
      entries_.erase(it);
      pos = lru_.erase(pos);
    }
  }
  return closing.size();
}

size_t FileCache::open_count() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace sluice::storage
