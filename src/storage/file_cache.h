// FileCache: bounds the file descriptors the storage engine holds open. Every segment
// file is reached through the cache; the least recently used descriptors are closed
// when more than `capacity` are open. A handle in use stays valid after eviction (it is
// shared), so eviction never breaks a read or a write in progress. Thread-safe.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "storage/env.h"

namespace sluice::storage {

class FileCache {
 public:
  FileCache(Env* env, size_t capacity);

  // An open handle on `path`, opened with `mode` when not cached. A file cached read-only
  // is reopened when a writable handle is asked for.
  Result<std::shared_ptr<File>> Get(const std::string& path, OpenMode mode);
  // Forgets `path` (before removing or renaming the file).
  void Evict(const std::string& path);

  size_t open_count() const;
  size_t capacity() const { return capacity_; }
  Env* env() const { return env_; }

 private:
  struct Entry {
    std::shared_ptr<File> file;
    bool writable;
    std::list<std::string>::iterator lru_pos;
  };

  Env* const env_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // guarded by mu_
  std::list<std::string> lru_;                      // guarded by mu_; front = most recent
  uint64_t evictions_ = 0;                          // guarded by mu_; Evict calls so far
};

}  // namespace sluice::storage
