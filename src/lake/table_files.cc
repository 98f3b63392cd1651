#include "lake/table_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <filesystem>

#include "lake/storage.h"
#include "lake/table_metadata.h"

namespace sluice::lake {
namespace {

constexpr std::string_view kHint = "version-hint.text";

Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", dir, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  return rc == 0 ? Status::OK() : ErrnoError("fsync", dir, err);
}

// Writes a new file (O_EXCL) and fsyncs it.
Status WriteNew(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("create", path, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(path.c_str());
      return ErrnoError("write", path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return ErrnoError("fsync", path, err);
  }
  ::close(fd);
  return Status::OK();
}

std::string Dir(const std::string& path) {
  return std::filesystem::path(path).parent_path().string();
}

// "v12.metadata.json" -> 12.
std::optional<int64_t> VersionOf(std::string_view name) {
  constexpr std::string_view kSuffix = ".metadata.json";
  if (name.size() <= 1 + kSuffix.size() || name[0] != 'v' || !name.ends_with(kSuffix))
    return std::nullopt;
  std::string_view digits = name.substr(1, name.size() - 1 - kSuffix.size());
  int64_t v = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || p != digits.data() + digits.size() || v < 1) return std::nullopt;
  return v;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

Result<std::string> LocalPath(std::string_view location) {
  std::string_view p = location;
  if (p.starts_with("file://")) {
    p.remove_prefix(7);
  } else if (p.starts_with("file:/")) {
    p.remove_prefix(5);  // Hadoop's file:/a/b
  }
  if (p.empty() || p[0] != '/') {
    return InvalidArgumentError("location {} is not a local path (file:///... or /...)", location);
  }
  while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
  return std::string(p);
}

std::string FileUri(std::string_view path) {
  if (IsS3Location(path)) return std::string(path);
  return fmt::format("file://{}", path);
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  std::string tmp = fmt::format("{}.{}.tmp", path, NewUuid());
  RETURN_IF_ERROR(WriteNew(tmp, bytes));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError("rename", path, err);
  }
  return SyncDir(Dir(path));
}

Result<std::string> ReadWholeFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError("{} does not exist", path);
    return ErrnoError("open", path, errno);
  }
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return ErrnoError("read", path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status SyncFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  return rc == 0 ? Status::OK() : ErrnoError("fsync", path, err);
}

TableFiles::TableFiles(std::string root) : root_(std::move(root)) {
  if (IsS3Location(root_)) root_ = NormalLocation(root_);
  Result<const Storage*> storage = StorageFor(root_);
  if (storage.ok()) {
    storage_ = *storage;
  } else {
    storage_error_ = storage.status();
  }
}

Result<bool> TableFiles::Exists(const std::string& path) const {
  if (storage_ == nullptr) return storage_error_;
  if (storage_->local()) return PathExists(path);
  ASSIGN_OR_RETURN(std::optional<uint64_t> size, storage_->Size(path));
  return size.has_value();
}

std::string TableFiles::VersionPath(int64_t version) const {
  return fmt::format("{}/v{}.metadata.json", metadata_dir(), version);
}

Result<std::optional<int64_t>> TableFiles::ScanVersions() const {
  if (storage_ == nullptr) return storage_error_;
  if (!storage_->local()) {
    ASSIGN_OR_RETURN(std::vector<StoredObject> objects, storage_->List(metadata_dir()));
    std::optional<int64_t> best;
    for (const StoredObject& o : objects) {
      std::string_view name = o.location;
      name.remove_prefix(name.rfind('/') + 1);
      if (std::optional<int64_t> v = VersionOf(name); v && (!best || *v > *best)) best = v;
    }
    return best;
  }
  DIR* d = ::opendir(metadata_dir().c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return std::optional<int64_t>();
    return ErrnoError("opendir", metadata_dir(), errno);
  }
  std::optional<int64_t> best;
  while (dirent* e = ::readdir(d)) {
    if (std::optional<int64_t> v = VersionOf(e->d_name); v && (!best || *v > *best)) best = v;
  }
  ::closedir(d);
  return best;
}

Result<std::optional<MetadataVersion>> TableFiles::Current() const {
  ASSIGN_OR_RETURN(std::optional<MetadataVersion> out, CurrentVersion());
  if (!out) return out;
  if (storage_ == nullptr) return storage_error_;
  Result<std::string> json = storage_->Read(out->path);
  if (!json.ok()) return json.status();
  out->json = std::move(*json);
  return out;
}

Result<std::optional<MetadataVersion>> TableFiles::CurrentVersion() const {
  if (storage_ == nullptr) return storage_error_;
  std::optional<int64_t> start;
  if (Result<std::string> hint = storage_->Read(metadata_dir() + "/" + std::string(kHint));
      hint.ok()) {
    std::string_view t = *hint;
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ' || t.back() == '\r'))
      t.remove_suffix(1);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec == std::errc() && p == t.data() + t.size() && v >= 1) {
      ASSIGN_OR_RETURN(bool there, Exists(VersionPath(v)));
      if (there) start = v;
    }
  } else if (hint.status().code() != StatusCode::kNotFound && !storage_->local()) {
    return hint.status();  // a store failing is not a missing table
  }
  if (!start) {
    ASSIGN_OR_RETURN(start, ScanVersions());
  }
  if (!start) return std::optional<MetadataVersion>();
  int64_t v = *start;
  while (true) {  // a hint left behind
    ASSIGN_OR_RETURN(bool newer, Exists(VersionPath(v + 1)));
    if (!newer) break;
    ++v;
  }
  MetadataVersion out;
  out.version = v;
  out.path = VersionPath(v);
  return std::optional<MetadataVersion>(std::move(out));
}

Status TableFiles::CheckBase(int64_t version) const {
  if (version <= 1) return Status::OK();
  ASSIGN_OR_RETURN(bool base, Exists(VersionPath(version - 1)));
  if (base) return Status::OK();
  // Expiry removes old versions only below the current one: a missing base is either a
  // commit lost to a newer version, or a table whose versions were retired (dropped or
  // renamed) meanwhile, which a late commit must not bring back.
  ASSIGN_OR_RETURN(bool taken, Exists(VersionPath(version)));
  if (taken) return AlreadyExistsError("{} was committed by another writer", VersionPath(version));
  return NotFoundError("{} is gone: the table was dropped or renamed", metadata_dir());
}

Status TableFiles::CheckNoLeftovers(const std::vector<std::string>& names, bool has_metadata,
                                    bool data_nonempty) const {
  // A new table in a directory another table left (dropped without purge, or renamed
  // away with its files in place) would share those files: its expiry or purge would
  // delete them. Refused.
  for (const std::string& name : names) {
    bool leftover = name.starts_with("metadata.renamed-") ||
                    name.starts_with(".metadata.dropped-") ||
                    (name == "data" && data_nonempty && !has_metadata);
    if (leftover) {
      return FailedPreconditionError(
          "{} holds another table's files ({}): a new table there would share them; "
          "use another name or location, or remove them",
          root_, name);
    }
  }
  return Status::OK();
}

Status TableFiles::CommitObject(int64_t version, std::string_view json) const {
  std::string target = VersionPath(version);
  if (version == 1) {
    Result<std::vector<std::string>> children = ListS3Children(root_);
    if (children.ok()) {
      const bool has_metadata =
          std::find(children->begin(), children->end(), "metadata") != children->end();
      // Only retired versions count: data uploaded before the first commit (an import,
      // the query bench's copy) is the new table's own.
      RETURN_IF_ERROR(CheckNoLeftovers(*children, has_metadata, /*data_nonempty=*/false));
    }
  } else {
    RETURN_IF_ERROR(CheckBase(version));
  }
  Status st = storage_->CreateExclusive(target, json);
  if (st.code() == StatusCode::kAlreadyExists)
    return AlreadyExistsError("{} was committed by another writer", target);
  RETURN_IF_ERROR(st);
  // The hint is only a starting point: a failure to move it loses nothing.
  (void)storage_->Write(metadata_dir() + "/" + std::string(kHint), std::to_string(version));
  return Status::OK();
}

Status TableFiles::CommitVersion(int64_t version, std::string_view json) const {
  if (storage_ == nullptr) return storage_error_;
  if (!storage_->local()) return CommitObject(version, json);
  std::error_code ec;
  if (version == 1) {
    std::vector<std::string> names;
    bool data_nonempty = false;
    for (auto it = std::filesystem::directory_iterator(root_, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      names.push_back(it->path().filename().string());
      std::error_code ec2;
      if (names.back() == "data" && it->is_directory(ec2))
        data_nonempty = !std::filesystem::is_empty(it->path(), ec2);
    }
    ec.clear();
    RETURN_IF_ERROR(
        CheckNoLeftovers(names, std::filesystem::exists(metadata_dir(), ec), data_nonempty));
    ec.clear();
    std::filesystem::create_directories(metadata_dir(), ec);
    if (ec) return IOError("cannot create {}: {}", metadata_dir(), ec.message());
  } else if (!std::filesystem::is_directory(metadata_dir(), ec)) {
    // Only a new table makes its metadata directory: a later commit to a table dropped or
    // renamed meanwhile must not bring the old name back.
    return NotFoundError("{} is gone: the table was dropped or renamed", metadata_dir());
  } else {
    // Its versions may have been retired (moved aside) with the directory kept.
    RETURN_IF_ERROR(CheckBase(version));
  }
  std::string target = VersionPath(version);
  std::string tmp = fmt::format("{}/{}.metadata.json.tmp", metadata_dir(), NewUuid());
  RETURN_IF_ERROR(WriteNew(tmp, json));
  // link(2) fails with EEXIST when the name is taken: the exclusive create that makes a
  // commit atomic against every other writer, in this process or another.
  int rc = ::link(tmp.c_str(), target.c_str());
  int err = errno;
  ::unlink(tmp.c_str());
  if (rc != 0) {
    if (err == EEXIST) return AlreadyExistsError("{} was committed by another writer", target);
    return ErrnoError("link", target, err);
  }
  RETURN_IF_ERROR(SyncDir(metadata_dir()));
  // The hint is only a starting point: a failure to move it loses nothing.
  (void)WriteFileAtomically(metadata_dir() + "/" + std::string(kHint), std::to_string(version));
  return Status::OK();
}

}  // namespace sluice::lake
