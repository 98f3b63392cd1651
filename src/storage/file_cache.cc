#include "storage/file_cache.h"

namespace sluice::storage {

FileCache::FileCache(Env* env, size_t capacity)
    : env_(env), capacity_(capacity < 1 ? 1 : capacity) {}

Result<std::shared_ptr<File>> FileCache::Get(const std::string& path, OpenMode mode) {
  bool want_write = mode != OpenMode::kRead;
  uint64_t evictions;
  {
    std::lock_guard lock(mu_);
    evictions = evictions_;
    auto it = entries_.find(path);
    if (it != entries_.end() && (it->second.writable || !want_write)) {
      lru_.splice(lru_.begin(), lru_, it->second.lru_pos);
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
  auto it = entries_.find(path);
  if (it != entries_.end()) {
    if (it->second.writable || !want_write) {
      lru_.splice(lru_.begin(), lru_, it->second.lru_pos);
      return it->second.file;  // another thread won the race; ours closes on return
    }
    lru_.erase(it->second.lru_pos);
    entries_.erase(it);
  }
  lru_.push_front(path);
  entries_.emplace(path, Entry{file, want_write, lru_.begin()});
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

size_t FileCache::open_count() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace sluice::storage
