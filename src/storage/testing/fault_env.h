// FaultEnv: an Env for tests that simulates power loss and disk errors over real files,
// in the manner of leveldb's FaultInjectionTestEnv.
//
// It passes every call to a base Env (normally Env::Posix()) and remembers, for each file
// it opened for writing, how much of it the last successful Sync() covered, and which
// files were created and which renames were made since the last SyncDir() of their
// directory.
// A test then:
//
//   FaultEnv env(Env::Posix());
//   ... run the log with options.env = &env ...
//   env.SimulateCrash();          // the process is "dead": every call fails from now on
//   ... destroy the log (its Close fails; it must not hang) ...
//   env.DropUnsyncedData(seed, TearMode::kKeepPrefix);  // the power loss hits the disk
//   env.Reset();                  // "reboot": the env works again; reopen the log
//
// Model and its limits: data written below a file's synced size (an overwrite of synced
// bytes) counts as durable at once; Remove() is durable at once (a removed file never comes
// back); an unsynced Rename() is undone by DropUnsyncedData, but a file it replaced is not
// restored; directories made by CreateDirs() always survive. A shrinking Truncate() lowers
// the synced size; a growing one is unsynced until the next Sync(). I/O done directly on
// File::fd() (sendfile) bypasses the env.
//
// Threads: every method is thread-safe. The env must outlive every File it handed out.
#pragma once

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "storage/env.h"

namespace sluice::storage::testing {

// What a power loss does to the bytes written after a file's last Sync().
enum class TearMode {
  kDropAll,        // every file is cut back to its synced size
  kKeepPrefix,     // a random-length prefix of the unsynced bytes survives (a torn write)
  kCorruptMiddle,  // all unsynced bytes survive, but a random range inside them (32 bytes
                   // to 4 KiB, like a torn sector) is overwritten with garbage or zeros,
                   // so intact data can follow torn data
};

std::string_view TearModeName(TearMode mode);

// Injected write errors: after `after` more writes succeed, the next `count` writes fail
// with `error`. Only writes to paths containing `path_contains` count (all when empty).
struct WriteFault {
  int error = ENOSPC;
  uint64_t after = 0;
  uint64_t count = std::numeric_limits<uint64_t>::max();  // max = every write from then on
  bool partial = false;  // a failing write first writes the first half of its bytes
  std::string path_contains;
};

class FaultEnv final : public Env {
 public:
  explicit FaultEnv(Env* base);
  ~FaultEnv() override;
  FaultEnv(const FaultEnv&) = delete;
  FaultEnv& operator=(const FaultEnv&) = delete;

  // Env. After SimulateCrash() each fails with IOError "simulated crash: ..."
  // (Exists() returns false).
  Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override;
  Status Remove(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status CreateDirs(const std::string& path) override;
  Status SyncDir(const std::string& path) override;
  Result<std::vector<std::string>> ListDir(const std::string& path) override;
  bool Exists(const std::string& path) override;

  // The process dies: from now on every call through the env and through every File it
  // handed out fails. Waits for the calls in progress to finish, so that when it returns
  // nothing more reaches the disk. Files opened before the crash stay dead after Reset().
  void SimulateCrash();
  // Crashes by itself after `calls` more calls that change the disk succeed (writes, syncs,
  // truncates, opens for writing, removes, renames, directory syncs and creations): the
  // next such call fails and the env is crashed as by SimulateCrash(), except that it does
  // not wait for calls in progress (call SimulateCrash() for that). Reads do not count, so
  // a crash point does not move with how often a test reads.
  void CrashAfter(uint64_t calls);
  bool crashed() const;

  // Applies the power loss to the real files, by `mode`, with random choices drawn from
  // `seed`: unsynced renames are undone, files created since their directory's last
  // SyncDir() are deleted, every other tracked file loses (some of) its unsynced bytes.
  // Afterwards every remaining file counts as synced and nothing is tracked. Call it after
  // SimulateCrash(), once the users of the env have stopped. When `report` is not null it
  // receives one line per file touched (for a failing test's message).
  Status DropUnsyncedData(uint64_t seed, TearMode mode, std::string* report = nullptr);

  // The machine is back: calls work again (for new Files) and every injected fault is
  // cleared.
  void Reset();

  // Injected errors. The messages say "injected" and which errno.
  void InjectWriteFault(WriteFault fault);
  void FailNextWrites(uint64_t n, int error = ENOSPC);
  void FailWritesAfter(uint64_t k, int error = ENOSPC);
  // After `after` more Sync() calls succeed, the next `n` fail with `error` without
  // syncing anything (the data stays unsynced).
  void FailNextSyncs(uint64_t n = 1, int error = EIO, uint64_t after = 0);
  // Every Sync() from now on waits `ms` before syncing (a slow disk); 0 stops it.
  void DelaySyncs(int ms) { sync_delay_ms_.store(ms); }
  void ClearFaults();

  // Introspection for tests. SyncedSize is -1 for an untracked path.
  int64_t SyncedSize(const std::string& path) const;
  bool CreatedSinceDirSync(const std::string& path) const;
  std::vector<std::string> TrackedPaths() const;
  uint64_t write_count() const;  // successful WriteAt calls
  uint64_t sync_count() const;   // successful Sync calls

 private:
  class FaultFile;
  struct FileState;
  struct PendingRename;
  class OpGuard;

  enum class OpKind { kInspect, kMutate };

  // Starts an operation: fails after a crash (or for a File from before the last crash),
  // otherwise counts it as in flight until the returned guard goes away.
  Result<OpGuard> BeginOp(uint64_t generation, OpKind kind, std::string_view op,
                          const std::string& path);
  void EndOp();
  // Decides whether this write fails: 0 = no, else the errno; `partial` says how.
  int TakeWriteFault(const std::string& path, bool* partial);
  int TakeSyncFault();

  Env* const base_;

  std::atomic<int> sync_delay_ms_{0};
  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  // All below guarded by mu_.
  bool crashed_ = false;
  uint64_t generation_ = 0;  // bumped by SimulateCrash()
  int in_flight_ = 0;
  int64_t crash_countdown_ = -1;  // CrashAfter(): disk-changing calls left; -1 = off
  std::map<std::string, std::shared_ptr<FileState>> files_;  // by current path
  std::vector<PendingRename> renames_;                       // not yet made durable
  std::vector<WriteFault> write_faults_;
  uint64_t sync_faults_ = 0;        // syncs still to fail
  uint64_t sync_faults_after_ = 0;  // syncs that succeed before those
  int sync_fault_error_ = EIO;
  uint64_t write_count_ = 0;
  uint64_t sync_count_ = 0;
};

}  // namespace sluice::storage::testing
