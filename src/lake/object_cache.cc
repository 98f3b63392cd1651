#include "lake/object_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

namespace sluice::lake {
namespace {

namespace fs = std::filesystem;

// Objects are fetched in ranged GETs of this size, each streamed into the copy's file
// (Storage::ReadRangeToFile).
constexpr uint64_t kRange = 32ULL << 20;

std::string Mib(uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

Result<std::unique_ptr<ObjectCache>> ObjectCache::Open(const Storage& storage, std::string dir,
                                                       uint64_t capacity_bytes, int parallel,
                                                       std::string section) {
  RETURN_IF_ERROR(MakePrivateDir(dir, section));
  std::error_code ec;
  // One directory per process; those of processes gone are removed.
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    int pid = 0;
    auto [p, perr] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (perr != std::errc() || p != name.data() + name.size() || pid <= 0) continue;
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM) continue;
    std::error_code rec;
    fs::remove_all(it->path(), rec);
  }
  std::string mine = fmt::format("{}/{}", dir, ::getpid());
  fs::remove_all(mine, ec);
  fs::create_directories(mine, ec);
  if (ec) {
    return IOError("{}.cache_dir {}: cannot create {}: {}", section, dir, mine, ec.message());
  }
  return std::unique_ptr<ObjectCache>(new ObjectCache(storage, std::move(mine), capacity_bytes,
                                                      std::max(1, parallel), std::move(section)));
}

ObjectCache::~ObjectCache() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

ObjectCacheStats ObjectCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ObjectCacheStats s = stats_;
  s.bytes = used_;
  s.capacity = capacity_;
  return s;
}

bool ObjectCache::ReserveLocked(uint64_t bytes) {
  // Least recently used first: the back of the list.
  auto it = lru_.end();
  while (used_ + bytes > capacity_ && it != lru_.begin()) {
    --it;
    auto e = entries_.find(*it);
    if (e == entries_.end()) continue;
    Entry& entry = e->second;
    // Held by a reader (or loading): kept.
    if (entry.object->state_ != CachedObject::State::kReady || entry.object.use_count() > 1)
      continue;
    std::error_code ec;
    fs::remove(entry.object->path_, ec);
    used_ -= entry.reserved;
    ++stats_.evictions;
    it = lru_.erase(it);
    entries_.erase(e);
  }
  if (used_ + bytes > capacity_) return false;
  used_ += bytes;
  return true;
}

Status ObjectCache::Download(CachedObject& object) {
  std::string tmp = object.path_ + ".part";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("create", tmp, errno);
  const uint64_t length = object.length_ > 0 ? object.length_ : UINT64_MAX;
  uint64_t size = 0;
  Status st;
  while (size < length) {
    const uint64_t want = std::min(kRange, length - size);
    Result<uint64_t> piece =
        storage_.ReadRangeToFile(object.location_, object.offset_ + size, want, fd, size);
    if (!piece.ok()) {
      st = piece.status();
      break;
    }
    size += *piece;
    if (*piece < want) break;
  }
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), object.path_.c_str()) != 0)
    st = ErrnoError("rename", object.path_, errno);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  object.size_ = size;
  return Status::OK();
}

Result<std::vector<std::shared_ptr<const CachedObject>>> ObjectCache::Fetch(
    const std::vector<std::string>& locations, const std::vector<uint64_t>& sizes) {
  std::vector<Want> wants(locations.size());
  for (size_t i = 0; i < locations.size(); ++i) {
    wants[i].key = wants[i].location = locations[i];
    if (i < sizes.size()) wants[i].size = sizes[i];
  }
  return FetchWants(wants);
}

Result<std::shared_ptr<const CachedObject>> ObjectCache::FetchRange(const std::string& location,
                                                                    uint64_t offset,
                                                                    uint64_t length) {
  if (length == 0) return InvalidArgumentError("a part of {} of no bytes", location);
  Want w{fmt::format("{}#{}+{}", location, offset, length), location, offset, length, length};
  ASSIGN_OR_RETURN(std::vector<std::shared_ptr<const CachedObject>> got, FetchWants({w}));
  return got.front();
}

Result<std::vector<std::shared_ptr<const CachedObject>>> ObjectCache::FetchWants(
    const std::vector<Want>& wants) {
  std::vector<std::shared_ptr<CachedObject>> held(wants.size());
  std::vector<size_t> mine;  // indexes this call downloads
  {
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t wanted = 0;
    std::set<std::string_view> distinct;
    for (const Want& w : wants) {
      if (distinct.insert(w.key).second) wanted += w.size;
    }
    if (wanted > capacity_) {
      return ResourceExhaustedError(
          "the read needs {} of S3 objects at once, more than {}.cache_bytes ({}); raise "
          "{}.cache_bytes or {}",
          Mib(wanted), section_, Mib(capacity_), section_,
          section_ == "s3" ? "narrow the query" : "make the topic's segments smaller");
    }
    // Hold what is there (so making room below cannot evict it), then reserve the rest.
    uint64_t missing = 0;
    std::set<std::string_view> counted;  // a location named twice is fetched once
    for (size_t i = 0; i < wants.size(); ++i) {
      auto it = entries_.find(wants[i].key);
      if (it == entries_.end()) {
        if (counted.insert(wants[i].key).second) missing += wants[i].size;
        continue;
      }
      held[i] = it->second.object;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      ++stats_.hits;
    }
    if (!ReserveLocked(missing)) {
      return ResourceExhaustedError(
          "the read needs {} more of S3 objects but the cache holds {} of its {} "
          "({}.cache_bytes) for reads running now (queries, open prepared statements, "
          "fetches of tiered topics); raise {}.cache_bytes or read less at once",
          Mib(missing), Mib(used_), Mib(capacity_), section_, section_);
    }
    for (size_t i = 0; i < wants.size(); ++i) {
      const Want& w = wants[i];
      if (held[i] != nullptr) continue;
      if (auto it = entries_.find(w.key); it != entries_.end()) {
        held[i] = it->second.object;  // the same location twice in one request
        continue;
      }
      Entry e;
      e.object = std::make_shared<CachedObject>();
      // The key's hash and the location's own name (Iceberg's file names hold UUIDs): a
      // path no other key has, and the same each time this one is fetched.
      std::string_view name = w.location;
      name.remove_prefix(name.rfind('/') + 1);
      std::string safe;
      for (char c : name.substr(0, 96)) {
        safe += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_';
      }
      e.object->path_ = fmt::format("{}/{:016x}-{}", dir_, std::hash<std::string>{}(w.key), safe);
      if (w.length > 0) e.object->path_ += fmt::format("-{}", w.offset);
      e.object->location_ = w.location;
      e.object->offset_ = w.offset;
      e.object->length_ = w.length;
      e.reserved = w.size;
      lru_.push_front(w.key);
      e.lru = lru_.begin();
      held[i] = e.object;
      entries_.emplace(w.key, std::move(e));
      mine.push_back(i);
    }
  }

  // Download ours, a few at once.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k = next++; k < mine.size(); k = next++) {
      const size_t i = mine[k];
      Status st = Download(*held[i]);
      std::lock_guard<std::mutex> lock(mu_);
      CachedObject& o = *held[i];
      o.state_ = st.ok() ? CachedObject::State::kReady : CachedObject::State::kFailed;
      if (!st.ok()) o.error_ = st.WithContext(fmt::format("fetching {}", wants[i].location));
      loaded_.notify_all();
      // A loading entry is never evicted, so it is still there.
      auto it = entries_.find(wants[i].key);
      if (it == entries_.end() || it->second.object != held[i]) continue;
      Entry& e = it->second;
      if (st.ok()) {
        used_ = used_ - e.reserved + o.size_;
        e.reserved = o.size_;
        ++stats_.downloads;
        stats_.downloaded_bytes += o.size_;
      } else {
        used_ -= e.reserved;
        lru_.erase(e.lru);
        entries_.erase(it);
      }
    }
  };
  std::vector<std::thread> threads;
  const size_t n_threads = std::min(mine.size(), static_cast<size_t>(parallel_));
  for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(work);
  if (!mine.empty()) work();
  for (std::thread& t : threads) t.join();

  // Wait for the copies other readers are fetching.
  std::unique_lock<std::mutex> lock(mu_);
  Status failed;
  for (size_t i = 0; i < wants.size(); ++i) {
    CachedObject* o = held[i].get();
    loaded_.wait(lock, [&] { return o->state_ != CachedObject::State::kLoading; });
    if (o->state_ == CachedObject::State::kFailed && failed.ok()) failed = o->error_;
  }
  if (!failed.ok()) return failed;
  std::vector<std::shared_ptr<const CachedObject>> out(held.begin(), held.end());
  return out;
}

Result<ObjectCache*> S3ObjectCache() {
  static std::mutex mu;
  static std::unique_ptr<ObjectCache>* cache = new std::unique_ptr<ObjectCache>();
  std::lock_guard<std::mutex> lock(mu);
  if (*cache == nullptr) {
    ASSIGN_OR_RETURN(S3Settings settings, CurrentS3Settings());
    ASSIGN_OR_RETURN(const Storage* storage, StorageFor("s3://cache/"));
    ASSIGN_OR_RETURN(*cache,
                     ObjectCache::Open(*storage, S3CacheRoot(settings), settings.cache_bytes));
  }
  return cache->get();
}

}  // namespace sluice::lake
