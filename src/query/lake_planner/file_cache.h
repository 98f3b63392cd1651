// A bounded cache of parsed lake files (table metadata JSON, manifest lists, manifests) for
// the query planner: a long-lived query server plans many queries over the same tables,
// and parsing their metadata and manifests again for each was most of a plan's time once
// the comparisons left DuckDB (docs/design/0012, decision 14).
//
//   FileCache cache(64 << 20);
//   ASSIGN_OR_RETURN(std::shared_ptr<const T> v,
//                    cache.Get<T>(path, "tag", [](std::string bytes) -> Result<T> {...}));
//
// An entry is the file's parsed form under a key (its path and a tag for anything else the
// parse depends on) and is used only while the file is the same file: device, inode, size
// and modification time as stat reports them now. Iceberg never rewrites these files in
// place (new metadata is a new version file, manifests have fresh names), so a commit is
// seen at once: it changes which file the table's current version names, and a table
// dropped has no current version. Bounded by an estimate of the parsed bytes (the file's
// size times the caller's factor), least recently used first out. Thread-safe: one mutex
// guards the index; parsing runs outside it (two threads missing together both parse, the
// later insert stays). Entries are shared_ptr<const T>: a plan holds its entries while an
// eviction drops the cache's reference.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/status.h"

namespace sluice::query {

class FileCache {
 public:
  // `capacity_bytes` 0: nothing is kept (every Get reads and parses).
  explicit FileCache(size_t capacity_bytes) : capacity_(capacity_bytes) {}
  FileCache(const FileCache&) = delete;
  FileCache& operator=(const FileCache&) = delete;

  // The parsed form of the file at `path` under `tag`: cached, or read whole and parsed by
  // `parse` (its error returned as is; NotFound when the file is not there). The entry
  // counts `cost_factor` times the file's size against the capacity.
  template <typename T>
  Result<std::shared_ptr<const T>> Get(const std::string& path, std::string_view tag,
                                       size_t cost_factor,
                                       const std::function<Result<T>(std::string bytes)>& parse) {
    ASSIGN_OR_RETURN(Identity id, Stat(path));
    const std::string key = path + '\0' + std::string(tag);
    if (std::shared_ptr<const void> hit = Lookup(key, id))
      return std::static_pointer_cast<const T>(hit);
    ASSIGN_OR_RETURN(std::string bytes, Read(path));
    const size_t size = bytes.size();  // S3 files have no size in their identity
    ASSIGN_OR_RETURN(T parsed, parse(std::move(bytes)));
    auto value = std::make_shared<const T>(std::move(parsed));
    Insert(key, id, value, size * cost_factor);
    return value;
  }

  struct Stats {
    int64_t hits = 0, misses = 0;
    size_t entries = 0, bytes = 0;
  };
  Stats stats() const;

 private:
  // Which file a path names now.
  struct Identity {
    dev_t dev = 0;
    ino_t ino = 0;
    int64_t size = 0;
    int64_t mtime_ns = 0;
    std::string etag;  // S3 metadata files
    bool operator==(const Identity&) const = default;
  };
  struct Entry {
    std::string key;
    Identity id;
    std::shared_ptr<const void> value;
    size_t bytes = 0;
  };
  static Result<Identity> Stat(const std::string& path);
  static Result<std::string> Read(const std::string& path);
  std::shared_ptr<const void> Lookup(const std::string& key, const Identity& id);
  void Insert(const std::string& key, const Identity& id, std::shared_ptr<const void> value,
              size_t bytes);

  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // guarded by mu_; front newest
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;  // guarded by mu_
  size_t bytes_ = 0;                                                   // guarded by mu_
  int64_t hits_ = 0, misses_ = 0;                                      // guarded by mu_
};

}  // namespace sluice::query
