// FaultEnv (see fault_env.h): the tracking of synced sizes, the crash, the power loss.
#include "storage/testing/fault_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <utility>

namespace sluice::storage::testing {
namespace {

// The key a path is tracked under: "a//b/./c/" and "a/b/c" are the same file.
std::string Normalize(std::string_view path) {
  std::string p = std::filesystem::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// The directory holding `path` (already normalized).
std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string ErrnoName(int err) {
  switch (err) {
    case ENOSPC:
      return "ENOSPC";
    case EIO:
      return "EIO";
    case EDQUOT:
      return "EDQUOT";
    case EROFS:
      return "EROFS";
    case EBADF:
      return "EBADF";
    case EINTR:
      return "EINTR";
    default:
      return fmt::format("errno {}", err);
  }
}

Status InjectedError(std::string_view op, std::string_view path, int err) {
  return IOError("{} {}: {} (injected {})", op, path, std::strerror(err), ErrnoName(err));
}

Status CrashError(std::string_view op, std::string_view path) {
  return IOError("simulated crash: {} {}", op, path);
}

}  // namespace

std::string_view TearModeName(TearMode mode) {
  switch (mode) {
    case TearMode::kDropAll:
      return "drop-all";
    case TearMode::kKeepPrefix:
      return "keep-prefix";
    case TearMode::kCorruptMiddle:
      return "corrupt-middle";
  }
  return "unknown";
}

// What the env knows of one file opened for writing. Shared by every handle on the file
// (the FileCache may hold a reader and a writer); follows the file through renames.
struct FaultEnv::FileState {
  std::string path;               // current normalized path
  uint64_t synced_size = 0;       // covered by the last successful Sync()
  bool created_unsynced = false;  // created since its directory's last SyncDir()
  bool removed = false;           // no longer reachable by name
};

struct FaultEnv::PendingRename {
  std::string from;
  std::string to;
  std::shared_ptr<FileState> state;  // null when the file was never opened for writing
};

// Marks one call as in flight, so SimulateCrash() can wait for it.
class FaultEnv::OpGuard {
 public:
  OpGuard(FaultEnv* env, uint64_t generation) : env_(env), generation_(generation) {}
  OpGuard(OpGuard&& other) noexcept
      : env_(std::exchange(other.env_, nullptr)), generation_(other.generation_) {}
  OpGuard& operator=(OpGuard&&) = delete;
  ~OpGuard() {
    if (env_ != nullptr) env_->EndOp();
  }
  uint64_t generation() const { return generation_; }

 private:
  FaultEnv* env_;
  uint64_t generation_;
};

namespace {
constexpr uint64_t kAnyGeneration = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kMinCorruptBytes = 32;
}  // namespace

class FaultEnv::FaultFile final : public File {
 public:
  FaultFile(FaultEnv* env, std::unique_ptr<File> base, std::shared_ptr<FileState> state,
            uint64_t generation)
      : env_(env), base_(std::move(base)), state_(std::move(state)), generation_(generation) {}

  Status WriteAt(uint64_t pos, std::span<const uint8_t> data) override {
    ASSIGN_OR_RETURN(OpGuard guard, env_->BeginOp(generation_, OpKind::kMutate, "write", path()));
    bool partial = false;
    if (int err = env_->TakeWriteFault(path(), &partial); err != 0) {
      if (partial && data.size() > 1) {
        // A torn write: part of the data reached the file before the error.
        RETURN_IF_ERROR(base_->WriteAt(pos, data.first(data.size() / 2)));
      }
      return InjectedError(fmt::format("write {} bytes at byte {} of", data.size(), pos), path(),
                           err);
    }
    RETURN_IF_ERROR(base_->WriteAt(pos, data));
    std::lock_guard lock(env_->mu_);
    ++env_->write_count_;
    return Status::OK();
  }

  Result<size_t> ReadAt(uint64_t pos, std::span<uint8_t> out) override {
    ASSIGN_OR_RETURN(OpGuard guard, env_->BeginOp(generation_, OpKind::kInspect, "read", path()));
    return base_->ReadAt(pos, out);
  }

  Status Sync() override {
    ASSIGN_OR_RETURN(OpGuard guard,
                     env_->BeginOp(generation_, OpKind::kMutate, "fdatasync", path()));
    if (int err = env_->TakeSyncFault(); err != 0) return InjectedError("fdatasync", path(), err);
    if (int ms = env_->sync_delay_ms_.load(); ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    // The size before the sync: a write racing with it is not known to be covered.
    ASSIGN_OR_RETURN(uint64_t size, base_->Size());
    RETURN_IF_ERROR(base_->Sync());
    std::lock_guard lock(env_->mu_);
    ++env_->sync_count_;
    FileState* state = state_.get();
    if (state == nullptr) {
      // fdatasync through a read-only descriptor syncs the file all the same.
      auto it = env_->files_.find(Normalize(path()));
      if (it != env_->files_.end()) state = it->second.get();
    }
    // Two syncs of one file can finish out of order (the log's sync task and a closing
    // sync): the later finisher must not lower what the earlier one covered.
    if (state != nullptr && !state->removed)
      state->synced_size = std::max(state->synced_size, size);
    return Status::OK();
  }

  Status Truncate(uint64_t size) override {
    ASSIGN_OR_RETURN(OpGuard guard,
                     env_->BeginOp(generation_, OpKind::kMutate, "truncate", path()));
    RETURN_IF_ERROR(base_->Truncate(size));
    std::lock_guard lock(env_->mu_);
    if (state_ != nullptr && size < state_->synced_size) state_->synced_size = size;
    return Status::OK();
  }

  Result<uint64_t> Size() override {
    ASSIGN_OR_RETURN(OpGuard guard, env_->BeginOp(generation_, OpKind::kInspect, "stat", path()));
    return base_->Size();
  }

  Result<bool> Unlinked() override {
    ASSIGN_OR_RETURN(OpGuard guard, env_->BeginOp(generation_, OpKind::kInspect, "stat", path()));
    return base_->Unlinked();
  }

  int fd() const override { return base_->fd(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultEnv* const env_;
  const std::unique_ptr<File> base_;
  const std::shared_ptr<FileState> state_;  // null for read-only handles
  const uint64_t generation_;               // the env's generation when opened
};

FaultEnv::FaultEnv(Env* base) : base_(base) {}

FaultEnv::~FaultEnv() = default;

Result<FaultEnv::OpGuard> FaultEnv::BeginOp(uint64_t generation, OpKind kind, std::string_view op,
                                            const std::string& path) {
  std::lock_guard lock(mu_);
  if (crashed_) return CrashError(op, path);
  if (generation != kAnyGeneration && generation != generation_) {
    return CrashError(op, fmt::format("{} (opened before the crash)", path));
  }
  if (kind == OpKind::kMutate && crash_countdown_ >= 0) {
    if (crash_countdown_ == 0) {
      // The calls in flight finish as if just before the crash; this one never starts.
      crashed_ = true;
      ++generation_;
      crash_countdown_ = -1;
      return CrashError(op, path);
    }
    --crash_countdown_;
  }
  ++in_flight_;
  return OpGuard(this, generation_);
}

void FaultEnv::EndOp() {
  std::lock_guard lock(mu_);
  if (--in_flight_ == 0) idle_cv_.notify_all();
}

int FaultEnv::TakeWriteFault(const std::string& path, bool* partial) {
  std::lock_guard lock(mu_);
  int err = 0;
  for (WriteFault& f : write_faults_) {
    if (!f.path_contains.empty() && path.find(f.path_contains) == std::string::npos) continue;
    if (f.after > 0) {
      --f.after;
      continue;
    }
    if (f.count == 0) continue;
    if (f.count != std::numeric_limits<uint64_t>::max()) --f.count;
    if (err == 0) {
      err = f.error;
      *partial = f.partial;
    }
  }
  std::erase_if(write_faults_, [](const WriteFault& f) { return f.count == 0; });
  return err;
}

int FaultEnv::TakeSyncFault() {
  std::lock_guard lock(mu_);
  if (sync_faults_ == 0) return 0;
  if (sync_faults_after_ > 0) {
    --sync_faults_after_;
    return 0;
  }
  --sync_faults_;
  return sync_fault_error_;
}

Result<std::unique_ptr<File>> FaultEnv::Open(const std::string& path, OpenMode mode) {
  ASSIGN_OR_RETURN(
      OpGuard guard,
      BeginOp(kAnyGeneration, mode == OpenMode::kRead ? OpKind::kInspect : OpKind::kMutate, "open",
              path));
  const bool writable = mode != OpenMode::kRead;
  const bool existed = mode != OpenMode::kCreate || base_->Exists(path);
  ASSIGN_OR_RETURN(std::unique_ptr<File> file, base_->Open(path, mode));
  std::shared_ptr<FileState> state;
  if (writable) {
    ASSIGN_OR_RETURN(uint64_t size, file->Size());
    std::string key = Normalize(path);
    std::lock_guard lock(mu_);
    auto it = files_.find(key);
    if (it != files_.end()) {
      state = it->second;
    } else {
      // A file that was there before we tracked it counts as synced as it is.
      state = std::make_shared<FileState>();
      state->path = key;
      state->synced_size = existed ? size : 0;
      state->created_unsynced = !existed;
      files_.emplace(key, state);
    }
  }
  return std::unique_ptr<File>(
      std::make_unique<FaultFile>(this, std::move(file), std::move(state), guard.generation()));
}

Status FaultEnv::Remove(const std::string& path) {
  ASSIGN_OR_RETURN(OpGuard guard, BeginOp(kAnyGeneration, OpKind::kMutate, "remove", path));
  RETURN_IF_ERROR(base_->Remove(path));
  std::string key = Normalize(path);
  std::lock_guard lock(mu_);
  auto it = files_.find(key);
  if (it != files_.end()) {
    it->second->removed = true;
    files_.erase(it);
  }
  // A removal counts as durable at once, so a rename of this file cannot be undone.
  std::erase_if(renames_, [&](const PendingRename& r) { return r.to == key; });
  return Status::OK();
}

Status FaultEnv::Rename(const std::string& from, const std::string& to) {
  ASSIGN_OR_RETURN(OpGuard guard, BeginOp(kAnyGeneration, OpKind::kMutate, "rename", from));
  RETURN_IF_ERROR(base_->Rename(from, to));
  std::string from_key = Normalize(from);
  std::string to_key = Normalize(to);
  std::lock_guard lock(mu_);
  if (auto old = files_.find(to_key); old != files_.end()) {
    old->second->removed = true;
    files_.erase(old);
  }
  std::erase_if(renames_, [&](const PendingRename& r) { return r.to == to_key; });
  std::shared_ptr<FileState> state;
  if (auto it = files_.find(from_key); it != files_.end()) {
    state = it->second;
    files_.erase(it);
    state->path = to_key;
    files_.emplace(to_key, state);
  }
  renames_.push_back(PendingRename{from_key, to_key, std::move(state)});
  return Status::OK();
}

Status FaultEnv::CreateDirs(const std::string& path) {
  ASSIGN_OR_RETURN(OpGuard guard, BeginOp(kAnyGeneration, OpKind::kMutate, "mkdir", path));
  return base_->CreateDirs(path);
}

Status FaultEnv::SyncDir(const std::string& path) {
  ASSIGN_OR_RETURN(OpGuard guard,
                   BeginOp(kAnyGeneration, OpKind::kMutate, "fsync directory", path));
  std::string dir = Normalize(path);
  // What the fsync covers is what the directory held when it started.
  std::vector<std::shared_ptr<FileState>> created;
  std::vector<std::string> renamed_to;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, state] : files_) {
      if (state->created_unsynced && DirOf(key) == dir) created.push_back(state);
    }
    for (const PendingRename& r : renames_) {
      if (DirOf(r.to) == dir) renamed_to.push_back(r.to);
    }
  }
  RETURN_IF_ERROR(base_->SyncDir(path));
  std::lock_guard lock(mu_);
  for (const auto& state : created) state->created_unsynced = false;
  std::erase_if(renames_, [&](const PendingRename& r) {
    return std::find(renamed_to.begin(), renamed_to.end(), r.to) != renamed_to.end();
  });
  return Status::OK();
}

Result<std::vector<std::string>> FaultEnv::ListDir(const std::string& path) {
  ASSIGN_OR_RETURN(OpGuard guard,
                   BeginOp(kAnyGeneration, OpKind::kInspect, "list directory", path));
  return base_->ListDir(path);
}

bool FaultEnv::Exists(const std::string& path) {
  Result<OpGuard> guard = BeginOp(kAnyGeneration, OpKind::kInspect, "exists", path);
  if (!guard.ok()) return false;
  return base_->Exists(path);
}

void FaultEnv::SimulateCrash() {
  std::unique_lock lock(mu_);
  if (!crashed_) {
    crashed_ = true;
    ++generation_;
  }
  crash_countdown_ = -1;
  idle_cv_.wait(lock, [this] { return in_flight_ == 0; });
}

void FaultEnv::CrashAfter(uint64_t calls) {
  std::lock_guard lock(mu_);
  crash_countdown_ = static_cast<int64_t>(calls);
}

bool FaultEnv::crashed() const {
  std::lock_guard lock(mu_);
  return crashed_;
}

Status FaultEnv::DropUnsyncedData(uint64_t seed, TearMode mode, std::string* report) {
  std::mt19937_64 rng(seed);
  std::string log;
  std::map<std::string, std::shared_ptr<FileState>> files;
  std::vector<PendingRename> renames;
  {
    std::lock_guard lock(mu_);
    files.swap(files_);
    renames.swap(renames_);
  }

  // Names first: an unsynced rename never happened.
  for (auto r = renames.rbegin(); r != renames.rend(); ++r) {
    if (!base_->Exists(r->to)) continue;
    RETURN_IF_ERROR(base_->Rename(r->to, r->from));
    log += fmt::format("{}: rename back to {}\n", r->to, r->from);
    if (r->state != nullptr && r->state->path == r->to) {
      files.erase(r->to);
      r->state->path = r->from;
      files[r->from] = r->state;
    }
  }

  for (const auto& [path, state] : files) {
    if (!base_->Exists(path)) continue;
    if (state->created_unsynced) {
      RETURN_IF_ERROR(base_->Remove(path));
      log += fmt::format("{}: removed (created since the last directory sync)\n", path);
      continue;
    }
    ASSIGN_OR_RETURN(std::unique_ptr<File> file, base_->Open(path, OpenMode::kReadWrite));
    ASSIGN_OR_RETURN(uint64_t size, file->Size());
    const uint64_t synced = state->synced_size;
    if (size <= synced) continue;
    const uint64_t unsynced = size - synced;
    switch (mode) {
      case TearMode::kDropAll:
        RETURN_IF_ERROR(file->Truncate(synced));
        log += fmt::format("{}: cut from {} to synced size {}\n", path, size, synced);
        break;
      case TearMode::kKeepPrefix: {
        uint64_t keep = rng() % (unsynced + 1);
        RETURN_IF_ERROR(file->Truncate(synced + keep));
        log += fmt::format("{}: cut from {} to {} (synced {}, kept {} unsynced bytes)\n", path,
                           size, synced + keep, synced, keep);
        break;
      }
      case TearMode::kCorruptMiddle: {
        // A torn sector is not a flipped byte: the range is at least kMinCorruptBytes
        // long (when the unsynced part allows), at most 4 KiB.
        uint64_t start = synced + rng() % unsynced;
        if (size - start < kMinCorruptBytes) start = size - std::min(unsynced, kMinCorruptBytes);
        uint64_t room = std::min<uint64_t>(size - start, 4096);
        uint64_t min_len = std::min(room, kMinCorruptBytes);
        uint64_t len = min_len + rng() % (room - min_len + 1);
        bool zeros = rng() % 2 == 0;
        std::vector<uint8_t> junk(len, 0);
        if (!zeros) {
          for (uint8_t& b : junk) b = static_cast<uint8_t>(rng());
        }
        RETURN_IF_ERROR(file->WriteAt(start, junk));
        log += fmt::format("{}: overwrote bytes [{}, {}) with {} (synced {}, size {})\n", path,
                           start, start + len, zeros ? "zeros" : "garbage", synced, size);
        break;
      }
    }
  }
  if (report != nullptr) *report = std::move(log);
  return Status::OK();
}

void FaultEnv::Reset() {
  std::lock_guard lock(mu_);
  crashed_ = false;
  crash_countdown_ = -1;
  write_faults_.clear();
  sync_faults_ = 0;
}

void FaultEnv::InjectWriteFault(WriteFault fault) {
  std::lock_guard lock(mu_);
  write_faults_.push_back(std::move(fault));
}

void FaultEnv::FailNextWrites(uint64_t n, int error) {
  WriteFault f;
  f.error = error;
  f.count = n;
  InjectWriteFault(std::move(f));
}

void FaultEnv::FailWritesAfter(uint64_t k, int error) {
  WriteFault f;
  f.error = error;
  f.after = k;
  InjectWriteFault(std::move(f));
}

void FaultEnv::FailNextSyncs(uint64_t n, int error, uint64_t after) {
  std::lock_guard lock(mu_);
  sync_faults_ = n;
  sync_faults_after_ = after;
  sync_fault_error_ = error;
}

void FaultEnv::ClearFaults() {
  std::lock_guard lock(mu_);
  write_faults_.clear();
  sync_faults_ = 0;
}

int64_t FaultEnv::SyncedSize(const std::string& path) const {
  std::lock_guard lock(mu_);
  auto it = files_.find(Normalize(path));
  return it == files_.end() ? -1 : static_cast<int64_t>(it->second->synced_size);
}

bool FaultEnv::CreatedSinceDirSync(const std::string& path) const {
  std::lock_guard lock(mu_);
  auto it = files_.find(Normalize(path));
  return it != files_.end() && it->second->created_unsynced;
}

std::vector<std::string> FaultEnv::TrackedPaths() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> paths;
  for (const auto& [key, state] : files_) paths.push_back(key);
  return paths;
}

uint64_t FaultEnv::write_count() const {
  std::lock_guard lock(mu_);
  return write_count_;
}

uint64_t FaultEnv::sync_count() const {
  std::lock_guard lock(mu_);
  return sync_count_;
}

}  // namespace sluice::storage::testing
