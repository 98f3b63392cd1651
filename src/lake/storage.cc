#include "lake/storage.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "lake/table_files.h"
#include "lake/table_metadata.h"

namespace sluice::lake {
Result<uint64_t> Storage::ReadRangeToFile(const std::string& location, uint64_t offset,
                                          uint64_t length, int fd, uint64_t file_offset) const {
  ASSIGN_OR_RETURN(std::string bytes, ReadRange(location, offset, length));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done,
                         static_cast<off_t>(file_offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return InternalError("writing {} to a file: {}", location, std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return static_cast<uint64_t>(bytes.size());
}

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kS3Schemes[] = {"s3://", "s3a://", "s3n://"};

// ---- the local file system ----

class LocalStorage final : public Storage {
 public:
  Result<std::string> Read(const std::string& location) const override {
    ASSIGN_OR_RETURN(std::string path, LocalPath(location));
    return ReadWholeFile(path);
  }

  Result<std::string> ReadRange(const std::string& location, uint64_t offset,
                                uint64_t length) const override {
    ASSIGN_OR_RETURN(std::string path, LocalPath(location));
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return NotFoundError("{} does not exist", path);
      return ErrnoError("open", path, errno);
    }
    std::string out(length, '\0');
    size_t done = 0;
    while (done < length) {
      ssize_t n = ::pread(fd, out.data() + done, length - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        ::close(fd);
        return ErrnoError("read", path, err);
      }
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    out.resize(done);
    return out;
  }

  Result<std::optional<uint64_t>> Size(const std::string& location) const override {
    ASSIGN_OR_RETURN(std::string path, LocalPath(location));
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::optional<uint64_t>();
      return ErrnoError("stat", path, errno);
    }
    return std::optional<uint64_t>(static_cast<uint64_t>(st.st_size));
  }

  // No directory is made: a table's metadata/ exists from its first commit, and a write
  // into one dropped or renamed meanwhile must fail rather than bring the name back.
  Status Write(const std::string& location, std::string_view bytes) const override {
    ASSIGN_OR_RETURN(std::string path, LocalPath(location));
    return WriteFileAtomically(path, bytes);
  }

  Status CreateExclusive(const std::string& location, std::string_view bytes) const override {
    ASSIGN_OR_RETURN(std::string path, LocalPath(location));
    std::string tmp = fmt::format("{}.{}.tmp", path, NewUuid());
    RETURN_IF_ERROR(WriteFileAtomically(tmp, bytes));
    int rc = ::link(tmp.c_str(), path.c_str());
    int err = errno;
    ::unlink(tmp.c_str());
    if (rc != 0) {
      if (err == EEXIST) return AlreadyExistsError("{} exists", path);
      return ErrnoError("link", path, err);
    }
    return SyncFile(fs::path(path).parent_path().string());  // the new name, durable
  }

  Status Upload(const std::string& path, const std::string& location) const override {
    ASSIGN_OR_RETURN(std::string target, LocalPath(location));
    if (target == path) return SyncFile(path);
    std::error_code ec;
    fs::create_directories(fs::path(target).parent_path(), ec);
    fs::copy_file(path, target, fs::copy_options::overwrite_existing, ec);
    if (ec) return IOError("cannot copy {} to {}: {}", path, target, ec.message());
    return SyncFile(target);
  }

  Status Delete(const std::string& location) const override {
    ASSIGN_OR_RETURN(std::string path, LocalPath(location));
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoError("unlink", path, errno);
    return Status::OK();
  }

  Result<std::vector<StoredObject>> List(const std::string& prefix) const override {
    ASSIGN_OR_RETURN(std::string dir, LocalPath(prefix));
    std::vector<StoredObject> out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      struct stat st;
      if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      out.push_back(
          {it->path().string(), static_cast<uint64_t>(st.st_size),
           static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000});
    }
    if (ec && ec != std::errc::no_such_file_or_directory)
      return IOError("cannot list {}: {}", dir, ec.message());
    return out;
  }

  bool local() const override { return true; }
};

// ---- S3 ----

class S3Storage final : public Storage {
 public:
  S3Storage(s3::S3Client client, uint64_t part_size, int upload_threads)
      : client_(std::move(client)),
        part_size_(std::max<uint64_t>(part_size, 5ULL << 20)),
        upload_threads_(std::max(1, upload_threads)) {}

  Result<std::string> Read(const std::string& location) const override {
    ASSIGN_OR_RETURN(auto bk, SplitS3Location(location));
    return client_.GetObject(bk.first, bk.second);
  }

  Result<std::string> ReadRange(const std::string& location, uint64_t offset,
                                uint64_t length) const override {
    ASSIGN_OR_RETURN(auto bk, SplitS3Location(location));
    if (length == 0) return std::string();
    Result<std::string> r = client_.GetObject(bk.first, bk.second, s3::ByteRange{offset, length});
    if (!r.ok() && r.status().code() == StatusCode::kOutOfRange) return std::string();
    return r;
  }

  Result<uint64_t> ReadRangeToFile(const std::string& location, uint64_t offset, uint64_t length,
                                   int fd, uint64_t file_offset) const override {
    ASSIGN_OR_RETURN(auto bk, SplitS3Location(location));
    if (length == 0) return uint64_t{0};
    Result<uint64_t> r = client_.GetObjectToFile(bk.first, bk.second, s3::ByteRange{offset, length},
                                                 fd, file_offset);
    if (!r.ok() && r.status().code() == StatusCode::kOutOfRange) return uint64_t{0};
    return r;
  }

  Result<std::optional<uint64_t>> Size(const std::string& location) const override {
    ASSIGN_OR_RETURN(auto bk, SplitS3Location(location));
    Result<s3::ObjectInfo> info = client_.HeadObject(bk.first, bk.second);
    if (!info.ok()) {
      if (info.status().code() == StatusCode::kNotFound) return std::optional<uint64_t>();
      return info.status();
    }
    return std::optional<uint64_t>(info->size);
  }

  Status Write(const std::string& location, std::string_view bytes) const override {
    ASSIGN_OR_RETURN(auto bk, SplitS3Location(location));
    return client_.PutObject(bk.first, bk.second, bytes).status();
  }

  Status CreateExclusive(const std::string& location, std::string_view bytes) const override {
    ASSIGN_OR_RETURN(auto bk, SplitS3Location(location));
    RETURN_IF_ERROR(CheckConditionalCreate(bk.first, bk.second));
    s3::PutOptions create;
    create.if_none_match_star = true;
    Result<std::string> put = client_.PutObject(bk.first, bk.second, bytes, create);
    if (put.ok()) return Status::OK();
    // 412: the key exists. 409 (AWS's ConditionalRequestConflict): another conditional
    // PUT of the key is in flight; either way another writer may have it.
    if (put.status().code() != StatusCode::kAlreadyExists &&
        put.status().code() != StatusCode::kAborted) {
      return put.status();
    }
    // Ours, made by an attempt whose reply was lost? Then the create happened.
    Result<std::string> there = client_.GetObject(bk.first, bk.second);
    if (there.ok() && *there == bytes) return Status::OK();
    return AlreadyExistsError("{} exists", location);
  }

  Status Upload(const std::string& path, const std::string& location) const override {
    ASSIGN_OR_RETURN(auto bk, SplitS3Location(location));
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoError("stat", path, errno);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size <= part_size_) {
      ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
      return client_.PutObject(bk.first, bk.second, bytes).status();
    }
    return UploadParts(path, size, bk.first, bk.second);
  }

  Status Delete(const std::string& location) const override {
    ASSIGN_OR_RETURN(auto bk, SplitS3Location(location));
    return client_.DeleteObject(bk.first, bk.second);
  }

  Result<std::vector<StoredObject>> List(const std::string& prefix) const override {
    ASSIGN_OR_RETURN(auto bk, SplitS3Location(prefix));
    std::string key_prefix = bk.second.empty() ? std::string() : bk.second + "/";
    std::vector<StoredObject> out;
    std::string token;
    do {
      ASSIGN_OR_RETURN(s3::ListObjectsPage page,
                       client_.ListObjectsV2(bk.first, key_prefix, token));
      for (const s3::ListedObject& o : page.objects) {
        out.push_back({fmt::format("s3://{}/{}", bk.first, o.key), o.size, o.last_modified_ms});
      }
      token = page.truncated ? page.next_continuation_token : std::string();
    } while (!token.empty());
    return out;
  }

  bool local() const override { return false; }

  // The object's ETag; NotFound when it is not there.
  Result<std::string> ETag(const std::string& location) const {
    ASSIGN_OR_RETURN(auto bk, SplitS3Location(location));
    ASSIGN_OR_RETURN(s3::ObjectInfo info, client_.HeadObject(bk.first, bk.second));
    return info.etag;
  }

  // The names of the "directories" right under `prefix`/ (S3's common prefixes with the
  // delimiter '/'), without their trailing '/'.
  Result<std::vector<std::string>> ListChildren(const std::string& prefix) const {
    ASSIGN_OR_RETURN(auto bk, SplitS3Location(prefix));
    std::string key_prefix = bk.second.empty() ? std::string() : bk.second + "/";
    std::vector<std::string> out;
    std::string token;
    do {
      ASSIGN_OR_RETURN(s3::ListObjectsPage page,
                       client_.ListObjectsV2(bk.first, key_prefix, token, "/"));
      for (const std::string& p : page.common_prefixes) {
        if (p.size() <= key_prefix.size() + 1 || !p.starts_with(key_prefix)) continue;
        out.push_back(p.substr(key_prefix.size(), p.size() - key_prefix.size() - 1));
      }
      token = page.truncated ? page.next_continuation_token : std::string();
    } while (!token.empty());
    return out;
  }

 private:
  // Once per bucket and process: a store that lets a second create of one key succeed
  // would let two writers both commit a version (0024 decision 3). Refused.
  Status CheckConditionalCreate(const std::string& bucket, const std::string& key) const {
    std::lock_guard<std::mutex> lock(probe_mu_);
    if (probed_.contains(bucket)) return Status::OK();
    std::string dir = key.substr(0, key.rfind('/') + 1);
    Status st = s3::ProbeConditionalCreate(client_, bucket, dir);
    if (!st.ok()) {
      // Never AlreadyExists: that would read as a commit lost to another writer.
      StatusCode code = st.code() == StatusCode::kAlreadyExists ? StatusCode::kInternal : st.code();
      return Status(code, fmt::format("refusing to commit Iceberg tables in s3://{}: {}", bucket,
                                      st.message()));
    }
    probed_.insert(bucket);
    return Status::OK();
  }

  Status UploadParts(const std::string& path, uint64_t size, const std::string& bucket,
                     const std::string& key) const {
    ASSIGN_OR_RETURN(std::string upload_id, client_.CreateMultipartUpload(bucket, key));
    const int parts = static_cast<int>((size + part_size_ - 1) / part_size_);
    std::vector<s3::CompletedPart> done(static_cast<size_t>(parts));
    std::atomic<int> next{0};
    std::mutex mu;
    Status failed;
    auto work = [&] {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        std::lock_guard<std::mutex> lock(mu);
        if (failed.ok()) failed = ErrnoError("open", path, errno);
        return;
      }
      std::string buf;
      for (int i = next++; i < parts; i = next++) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!failed.ok()) break;
        }
        const uint64_t offset = static_cast<uint64_t>(i) * part_size_;
        const uint64_t n = std::min(part_size_, size - offset);
        buf.resize(n);
        size_t got = 0;
        Status st;
        while (got < n) {
          ssize_t r = ::pread(fd, buf.data() + got, n - got, static_cast<off_t>(offset + got));
          if (r < 0 && errno == EINTR) continue;
          if (r <= 0) {
            st = r == 0 ? IOError("{} shrank while it was uploaded", path)
                        : ErrnoError("read", path, errno);
            break;
          }
          got += static_cast<size_t>(r);
        }
        Result<std::string> etag = st.ok() ? client_.UploadPart(bucket, key, upload_id, i + 1, buf)
                                           : Result<std::string>(st);
        std::lock_guard<std::mutex> lock(mu);
        if (!etag.ok()) {
          if (failed.ok()) failed = etag.status();
          break;
        }
        done[static_cast<size_t>(i)] = s3::CompletedPart{i + 1, std::move(*etag)};
      }
      ::close(fd);
    };
    std::vector<std::thread> threads;
    const int n_threads = std::min(upload_threads_, parts);
    for (int t = 1; t < n_threads; ++t) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
    if (failed.ok()) {
      Result<std::string> completed = client_.CompleteMultipartUpload(bucket, key, upload_id, done);
      if (completed.ok()) return Status::OK();
      failed = completed.status();
    }
    (void)client_.AbortMultipartUpload(bucket, key, upload_id);
    return failed;
  }

  s3::S3Client client_;
  uint64_t part_size_;
  int upload_threads_;
  mutable std::mutex probe_mu_;
  mutable std::set<std::string> probed_;
};

// ---- the process's settings and storages ----

struct Registry {
  std::mutex mu;
  std::optional<S3Settings> configured;
  std::unique_ptr<S3Storage> s3;  // made at first use from the settings in force
  // Storages replaced by ConfigureS3: threads may still hold them.
  std::vector<std::unique_ptr<S3Storage>> retired;
};

Registry& TheRegistry() {
  static Registry* r = new Registry();  // never destroyed: used by threads until exit
  return *r;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace

bool IsS3Location(std::string_view location) {
  for (std::string_view s : kS3Schemes) {
    if (location.starts_with(s)) return true;
  }
  return false;
}

std::string NormalLocation(std::string_view location) {
  for (std::string_view s : kS3Schemes) {
    if (location.starts_with(s)) {
      std::string out = "s3://" + std::string(location.substr(s.size()));
      while (out.size() > 5 && out.back() == '/') out.pop_back();
      return out;
    }
  }
  if (Result<std::string> p = LocalPath(location); p.ok()) return *p;
  return std::string(location);
}

Result<std::pair<std::string, std::string>> SplitS3Location(std::string_view location) {
  std::string normal = NormalLocation(location);
  if (!normal.starts_with("s3://"))
    return InvalidArgumentError("{} is not an S3 location (s3://bucket/key)", location);
  std::string_view rest = std::string_view(normal).substr(5);
  size_t slash = rest.find('/');
  std::string bucket(rest.substr(0, slash));
  std::string key =
      slash == std::string_view::npos ? std::string() : std::string(rest.substr(slash + 1));
  if (bucket.empty()) return InvalidArgumentError("{} names no bucket (s3://bucket/key)", location);
  return std::make_pair(std::move(bucket), std::move(key));
}

Result<const Storage*> StorageFor(std::string_view location) {
  static const LocalStorage kLocal;
  if (!IsS3Location(location)) {
    if (location.find("://") != std::string_view::npos && !location.starts_with("file:"))
      return InvalidArgumentError(
          "{}: only local paths (file:// or /...) and S3 (s3://, s3a://, s3n://) are supported",
          location);
    return &kLocal;
  }
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.s3 == nullptr) {
    S3Settings settings;
    if (r.configured) {
      settings = *r.configured;
    } else {
      ASSIGN_OR_RETURN(settings, S3SettingsFrom(Config()));
    }
    Result<s3::S3Client> client = s3::S3Client::Create(settings.options);
    if (!client.ok()) {
      return InvalidArgumentError(
          "{}: S3 is not configured ({}): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
          "AWS_ENDPOINT_URL for a store other than AWS), or the s3: config section",
          location, client.status().message());
    }
    r.s3 = std::make_unique<S3Storage>(std::move(*client), settings.part_size,
                                       settings.upload_threads);
  }
  return r.s3.get();
}

Result<std::vector<std::string>> ListS3Tables(const std::string& warehouse) {
  const std::string root = NormalLocation(warehouse);
  ASSIGN_OR_RETURN(const Storage* storage, StorageFor(root));
  if (storage->local()) return InvalidArgumentError("{} is not an S3 location", warehouse);
  const auto* s3 = static_cast<const S3Storage*>(storage);
  // Namespaces are walked a level at a time (one listing each, with a delimiter); a prefix
  // holding metadata/ is a table and is not walked into, so data files are never listed.
  constexpr size_t kMaxDepth = 16;
  std::vector<std::string> out;
  std::vector<std::pair<std::string, size_t>> todo = {{"", 0}};
  while (!todo.empty()) {
    auto [rel, depth] = todo.back();
    todo.pop_back();
    ASSIGN_OR_RETURN(std::vector<std::string> children,
                     s3->ListChildren(rel.empty() ? root : root + "/" + rel));
    if (std::find(children.begin(), children.end(), "metadata") != children.end()) {
      if (!rel.empty()) out.push_back(rel);
      continue;
    }
    if (depth >= kMaxDepth) continue;
    for (const std::string& child : children) {
      if (child.empty() || child[0] == '.') continue;
      todo.emplace_back(rel.empty() ? child : rel + "/" + child, depth + 1);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::vector<std::string>> ListS3Children(const std::string& prefix) {
  const std::string root = NormalLocation(prefix);
  ASSIGN_OR_RETURN(const Storage* storage, StorageFor(root));
  if (storage->local()) return InvalidArgumentError("{} is not an S3 location", prefix);
  return static_cast<const S3Storage*>(storage)->ListChildren(root);
}

Result<std::string> S3ETag(const std::string& location) {
  const std::string normal = NormalLocation(location);
  ASSIGN_OR_RETURN(const Storage* storage, StorageFor(normal));
  if (storage->local()) return InvalidArgumentError("{} is not an S3 location", location);
  return static_cast<const S3Storage*>(storage)->ETag(normal);
}

Result<std::string> ReadLocation(std::string_view location) {
  ASSIGN_OR_RETURN(const Storage* storage, StorageFor(location));
  return storage->Read(NormalLocation(location));
}

Status WriteLocation(std::string_view location, std::string_view bytes) {
  ASSIGN_OR_RETURN(const Storage* storage, StorageFor(location));
  return storage->Write(NormalLocation(location), bytes);
}

Status DeleteLocation(std::string_view location) {
  ASSIGN_OR_RETURN(const Storage* storage, StorageFor(location));
  return storage->Delete(NormalLocation(location));
}

Status UploadAll(const std::vector<std::pair<std::string, std::string>>& files, int parallel) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status failed;
  auto work = [&] {
    for (size_t i = next++; i < files.size(); i = next++) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.ok()) return;
      }
      Result<const Storage*> storage = StorageFor(files[i].second);
      Status st =
          storage.ok() ? (*storage)->Upload(files[i].first, files[i].second) : storage.status();
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (failed.ok()) failed = st.WithContext(fmt::format("uploading {}", files[i].second));
      }
    }
  };
  std::vector<std::thread> threads;
  const size_t n = std::min(files.size(), static_cast<size_t>(std::max(1, parallel)));
  for (size_t t = 1; t < n; ++t) threads.emplace_back(work);
  if (!files.empty()) work();
  for (std::thread& t : threads) t.join();
  return failed;
}

std::string S3CacheRoot(const S3Settings& settings) {
  if (!settings.cache_dir.empty()) return settings.cache_dir;
  const char* tmp = std::getenv("TMPDIR");
  return fmt::format("{}/sluice-s3-cache-{}", tmp != nullptr && *tmp ? tmp : "/tmp", ::getuid());
}

Status MakePrivateDir(const std::string& dir, std::string_view section) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IOError("{}.cache_dir {}: cannot create it: {}", section, dir, ec.message());
  // Copies DuckDB reads and files about to be uploaded: nobody else may put them there.
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return ErrnoError("stat", dir, errno);
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) {
    return FailedPreconditionError(
        "{0}.cache_dir {1} is not a directory of this user (uid {2}): another user could "
        "change the files read from it; remove it or set {0}.cache_dir",
        section, dir, ::getuid());
  }
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0)
    return ErrnoError("chmod", dir, errno);
  return Status::OK();
}

Result<std::string> NewS3StagingDir() {
  static std::atomic<int64_t> counter{0};
  static std::once_flag swept;
  ASSIGN_OR_RETURN(S3Settings settings, CurrentS3Settings());
  const std::string root = S3CacheRoot(settings);
  RETURN_IF_ERROR(MakePrivateDir(root));
  std::error_code ec;
  std::call_once(swept, [&] {
    std::error_code it_ec;
    for (fs::directory_iterator it(root, it_ec), end; !it_ec && it != end; it.increment(it_ec)) {
      std::string name = it->path().filename().string();
      int pid = 0;
      if (std::sscanf(name.c_str(), "staging-%d-", &pid) != 1 || pid <= 0 || pid == ::getpid())
        continue;
      if (::kill(pid, 0) == 0 || errno == EPERM) continue;
      std::error_code rec;
      fs::remove_all(it->path(), rec);
    }
  });
  std::string dir = fmt::format("{}/staging-{}-{}", root, ::getpid(), counter++);
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return IOError("cannot create {}: {}", dir, ec.message());
  return dir;
}

const std::vector<std::string_view> kS3ConfigKeys = {
    "s3.endpoint",      "s3.region",      "s3.access_key_id",   "s3.secret_access_key",
    "s3.session_token", "s3.path_style",  "s3.request_timeout", "s3.max_retries",
    "s3.cache_dir",     "s3.cache_bytes", "s3.part_size"};

Result<S3Settings> S3SettingsFrom(const Config& config) {
  S3Settings s;
  s3::S3Options& o = s.options;
  o.access_key_id = Env("AWS_ACCESS_KEY_ID");
  o.secret_access_key = Env("AWS_SECRET_ACCESS_KEY");
  o.session_token = Env("AWS_SESSION_TOKEN");
  if (std::string region = Env("AWS_REGION"); !region.empty()) {
    o.region = region;
  } else if (std::string fallback = Env("AWS_DEFAULT_REGION"); !fallback.empty()) {
    o.region = fallback;
  }
  // A bad endpoint from the environment is the first S3 use's error (StorageFor): a
  // process that never reaches S3 must not fail on it.
  o.endpoint = Env("AWS_ENDPOINT_URL_S3");
  if (o.endpoint.empty()) o.endpoint = Env("AWS_ENDPOINT_URL");
  ASSIGN_OR_RETURN(o.endpoint, config.GetString("s3.endpoint", o.endpoint));
  if (config.Has("s3.endpoint")) {
    if (Status st = s3::ParseEndpoint(o.endpoint).status(); !st.ok())
      return InvalidArgumentError("s3.endpoint (set in {}): {}", config.Origin("s3.endpoint"),
                                  st.message());
  }
  ASSIGN_OR_RETURN(o.region, config.GetString("s3.region", o.region));
  if (o.region.empty())
    return InvalidArgumentError("s3.region (set in {}) is empty", config.Origin("s3.region"));
  // Secrets: a bad value is named by its key and origin only.
  ASSIGN_OR_RETURN(o.access_key_id, config.GetString("s3.access_key_id", o.access_key_id));
  ASSIGN_OR_RETURN(o.secret_access_key,
                   config.GetString("s3.secret_access_key", o.secret_access_key));
  ASSIGN_OR_RETURN(o.session_token, config.GetString("s3.session_token", o.session_token));
  if (config.Has("s3.path_style")) {
    ASSIGN_OR_RETURN(bool path_style, config.GetBool("s3.path_style", false));
    o.path_style = path_style;
  }
  ASSIGN_OR_RETURN(int64_t timeout,
                   config.GetDurationMs("s3.request_timeout", o.request_timeout.count()));
  if (timeout < 100) {
    return InvalidArgumentError("s3.request_timeout (set in {}) must be at least 100ms",
                                config.Origin("s3.request_timeout"));
  }
  o.request_timeout = std::chrono::milliseconds(timeout);
  ASSIGN_OR_RETURN(int64_t retries, config.GetInt("s3.max_retries", o.max_retries, 0, 100));
  o.max_retries = static_cast<int>(retries);
  ASSIGN_OR_RETURN(s.cache_dir, config.GetString("s3.cache_dir", ""));
  ASSIGN_OR_RETURN(int64_t cache_bytes,
                   config.GetBytes("s3.cache_bytes", static_cast<int64_t>(s.cache_bytes)));
  if (cache_bytes < (1 << 20)) {
    return InvalidArgumentError("s3.cache_bytes (set in {}) must be at least 1MiB",
                                config.Origin("s3.cache_bytes"));
  }
  s.cache_bytes = static_cast<uint64_t>(cache_bytes);
  ASSIGN_OR_RETURN(int64_t part_size,
                   config.GetBytes("s3.part_size", static_cast<int64_t>(s.part_size)));
  if (part_size < (5 << 20) || part_size > (5LL << 30)) {
    return InvalidArgumentError(
        "s3.part_size (set in {}) must be between 5MiB and 5GiB (S3's part sizes)",
        config.Origin("s3.part_size"));
  }
  s.part_size = static_cast<uint64_t>(part_size);
  return s;
}

void ConfigureS3(S3Settings settings) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.configured = std::move(settings);
  if (r.s3 != nullptr) r.retired.push_back(std::move(r.s3));
}

Result<S3Settings> CurrentS3Settings() {
  Registry& r = TheRegistry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.configured) return *r.configured;
  }
  return S3SettingsFrom(Config());
}

}  // namespace sluice::lake
