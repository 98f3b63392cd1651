// Where tiered topics' segments go (docs/design/0025-tiered-storage.md): an object store
// under one prefix, as the composition root (src/app) makes it over the lake's S3 storage.
// The broker does not link the lake; it sees only this. Blocking and thread-safe: never
// called on a shard's loop.
//
//   RETURN_IF_ERROR(store.Upload("/data/t-0/00000000000000000000.log", "t-<id>/0/x.log"));
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::broker {

class RemoteStore {
 public:
  virtual ~RemoteStore() = default;
  // The local file's bytes as the object `key` (relative to the store's prefix).
  virtual Status Upload(const std::string& local_path, const std::string& key) const = 0;
  virtual Status Put(const std::string& key, std::string_view bytes) const = 0;
  // NotFound when there is no such object.
  virtual Result<std::string> Get(const std::string& key) const = 0;
  // The keys under `prefix` (relative to the store's prefix, as Upload names them).
  virtual Result<std::vector<std::string>> List(const std::string& prefix) const = 0;
  // A local copy of the whole object (`size` bytes, 0: unknown), shared by concurrent
  // callers and kept at `path` while `hold` lives (an object cache of its own, within its
  // byte budget: ResourceExhausted naming tiered_storage.cache_bytes past it). For remote
  // reads.
  struct Copy {
    std::string path;
    std::shared_ptr<const void> hold;
  };
  virtual Result<Copy> Fetch(const std::string& key, uint64_t size) const = 0;
  // The same for bytes [offset, offset + length) of the object (a chunk of a remote
  // segment's .log, decision 10), cached apart from the whole object and other chunks.
  virtual Result<Copy> FetchRange(const std::string& key, uint64_t offset,
                                  uint64_t length) const = 0;
  // OK when it is not there.
  virtual Status Delete(const std::string& key) const = 0;
  // "s3://bucket/prefix", for messages.
  virtual std::string Describe() const = 0;
};

}  // namespace sluice::broker
