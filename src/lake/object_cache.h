// Local copies of whole S3 objects for readers that can only open local files: DuckDB's
// read_parquet in the embedded build, which has no httpfs and whose C API has no
// file-system hook (docs/design/0024, decision 6).
//
//   ASSIGN_OR_RETURN(auto copies, cache.Fetch({"s3://b/t/data/1.parquet", ...}));
//   // copies[i]->path() is a local file, kept until every holder of copies[i] lets go
//
// Bounded by a byte budget: objects no reader holds are evicted least recently used first
// to make room. A request for more than the budget fails before it downloads anything,
// with an error naming s3.cache_bytes (or the section given). Readers of one object share one
// download; the objects of one request download in parallel. Objects are immutable (Iceberg never
// rewrites a file in place), so a copy stays right as long as it is kept. A copy's path
// is a function of its location, so one evicted and fetched again is at the same path
// (a prepared statement's SQL names it). Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "lake/storage.h"

namespace sluice::lake {

class CachedObject {
 public:
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  const std::string& location() const { return location_; }

 private:
  friend class ObjectCache;
  enum class State { kLoading, kReady, kFailed };
  std::string path_;
  std::string location_;
  uint64_t offset_ = 0, length_ = 0;  // a part of the object (FetchRange); length_ 0: whole
  uint64_t size_ = 0;
  State state_ = State::kLoading;  // guarded by the cache's mutex
  Status error_;                   // kFailed: why
};

struct ObjectCacheStats {
  uint64_t bytes = 0;  // held now
  uint64_t capacity = 0;
  int64_t hits = 0;       // objects found cached
  int64_t downloads = 0;  // objects fetched
  uint64_t downloaded_bytes = 0;
  int64_t evictions = 0;
};

class ObjectCache {
 public:
  // Copies live in `dir`/<pid> (made; what processes gone left in `dir` is removed).
  // Errors name `<section>.cache_dir` and `<section>.cache_bytes`, the settings to change.
  static Result<std::unique_ptr<ObjectCache>> Open(const Storage& storage, std::string dir,
                                                   uint64_t capacity_bytes, int parallel = 8,
                                                   std::string section = "s3");
  ~ObjectCache();
  ObjectCache(const ObjectCache&) = delete;
  ObjectCache& operator=(const ObjectCache&) = delete;

  // Local copies of `locations` (in their order), each held until its last shared_ptr
  // goes. `sizes`, when given (from the manifests), lets the budget be checked before any
  // download. ResourceExhausted naming s3.cache_bytes when the request, or it with what
  // other readers hold, exceeds the budget.
  Result<std::vector<std::shared_ptr<const CachedObject>>> Fetch(
      const std::vector<std::string>& locations, const std::vector<uint64_t>& sizes = {});
  // A local copy of bytes [offset, offset + length) of `location` (fewer past its end),
  // cached as an object of its own: a part of an object too large to copy whole (a remote
  // segment's, docs/design/0025, decision 10). length > 0.
  Result<std::shared_ptr<const CachedObject>> FetchRange(const std::string& location,
                                                         uint64_t offset, uint64_t length);

  ObjectCacheStats stats() const;
  const std::string& dir() const { return dir_; }

 private:
  struct Entry {
    std::shared_ptr<CachedObject> object;
    uint64_t reserved = 0;  // bytes counted against the budget
    std::list<std::string>::iterator lru;
  };

  ObjectCache(const Storage& storage, std::string dir, uint64_t capacity, int parallel,
              std::string section)
      : storage_(storage),
        dir_(std::move(dir)),
        section_(std::move(section)),
        capacity_(capacity),
        parallel_(parallel) {}

  // What Fetch and FetchRange ask for: an object or a part of one, and the cache's key.
  struct Want {
    std::string key;
    std::string location;
    uint64_t offset = 0, length = 0;  // length 0: the whole object
    uint64_t size = 0;                // its bytes when known (the budget), else 0
  };
  Result<std::vector<std::shared_ptr<const CachedObject>>> FetchWants(
      const std::vector<Want>& wants);
  // Makes room for `bytes` by evicting unheld ready entries; false when it cannot.
  bool ReserveLocked(uint64_t bytes);
  Status Download(CachedObject& object);

  const Storage& storage_;
  const std::string dir_;
  const std::string section_;  // "s3": the settings errors name
  const uint64_t capacity_;
  const int parallel_;
  mutable std::mutex mu_;
  std::condition_variable loaded_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // front: most recently used
  uint64_t used_ = 0;
  ObjectCacheStats stats_;
};

// The process's cache of S3 objects, made at first use from CurrentS3Settings().
Result<ObjectCache*> S3ObjectCache();

}  // namespace sluice::lake
