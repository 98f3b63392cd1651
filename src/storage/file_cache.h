// FileCache: bounds the file descriptors the storage engine holds open. Every segment
// file is reached through the cache; the least recently used descriptors are closed
// when more than `capacity` are open, and, with an idle timeout, those nobody asked for
// in that long (an idle partition then holds none: issue 21's "no open file descriptor
// per idle replica"). A handle in use stays valid after eviction (it is shared), so
// eviction never breaks a read or a write in progress. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "storage/env.h"

namespace sluice::storage {

class FileCache {
 public:
  // `idle_timeout_ms` > 0 (storage.file_idle_timeout): a thread of the cache closes,
  // about every min(timeout / 2, 1 s), the descriptors only the cache holds that were
  // not asked for in `idle_timeout_ms`. 0: only the capacity closes them.
  FileCache(Env* env, size_t capacity, int64_t idle_timeout_ms = 0);
  ~FileCache();
  FileCache(const FileCache&) = delete;
  FileCache& operator=(const FileCache&) = delete;

  // An open handle on `path`, opened with `mode` when not cached. A file cached read-only
  // is reopened when a writable handle is asked for.
  Result<std::shared_ptr<File>> Get(const std::string& path, OpenMode mode);
  // Forgets `path` (before removing or renaming the file).
  void Evict(const std::string& path);
  // The idle thread's pass: forgets every entry last asked for before `now_ns` (the
  // monotonic clock) less the idle timeout that no caller holds, closing its descriptor.
  // Returns how many. A held entry stays (forgetting it would only open a second
  // descriptor at the next Get). Public for tests; a no-op without an idle timeout.
  size_t CloseIdle(int64_t now_ns);

  size_t open_count() const;
  size_t capacity() const { return capacity_; }
  Env* env() const { return env_; }

 private:
  struct Entry {
    std::shared_ptr<File> file;
    bool writable;
    std::list<std::string>::iterator lru_pos;
    int64_t last_used_ns;  // the monotonic clock at the last Get
  };

  Env* const env_;
  const size_t capacity_;
  const int64_t idle_timeout_ns_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // guarded by mu_
  // Guarded by mu_; front = most recent, so the entries' last_used_ns fall towards the back.
  std::list<std::string> lru_;
  uint64_t evictions_ = 0;  // guarded by mu_; Evict calls so far

  // The idle thread (with an idle timeout only).
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by stop_mu_
  std::thread sweeper_;
};

}  // namespace sluice::storage
