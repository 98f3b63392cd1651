#include "query/lake_planner/file_cache.h"

#include <sys/stat.h>

#include <cerrno>

#include "lake/storage.h"
#include "lake/table_files.h"

namespace sluice::query {

Result<FileCache::Identity> FileCache::Stat(const std::string& path) {
  if (lake::IsS3Location(path)) {
    // Manifests and lists have fresh names: the name is their identity, without a request.
    // A table's v<N>.metadata.json can come back with other bytes after the table is
    // dropped and created again under its name: its ETag (one HEAD) is part of it.
    if (!path.ends_with(".metadata.json")) return Identity{};
    ASSIGN_OR_RETURN(std::string etag, lake::S3ETag(path));
    return Identity{.etag = std::move(etag)};
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return NotFoundError("{} does not exist", path);
    return ErrnoError("stat", path, errno);
  }
  return Identity{st.st_dev, st.st_ino, static_cast<int64_t>(st.st_size),
                  static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

Result<std::string> FileCache::Read(const std::string& path) {
  if (lake::IsS3Location(path)) return lake::ReadLocation(path);
  return lake::ReadWholeFile(path);
}

std::shared_ptr<const void> FileCache::Lookup(const std::string& key, const Identity& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end() || !(it->second->id == id)) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->value;
}

void FileCache::Insert(const std::string& key, const Identity& id,
                       std::shared_ptr<const void> value, size_t bytes) {
  if (bytes > capacity_) return;  // would push out everything else (or caching is off)
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  lru_.push_front(Entry{key, id, std::move(value), bytes});
  index_[key] = lru_.begin();
  bytes_ += bytes;
  while (bytes_ > capacity_ && !lru_.empty()) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
}

FileCache::Stats FileCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Stats{hits_, misses_, lru_.size(), bytes_};
}

}  // namespace sluice::query
