// Tests of FaultEnv (testing/fault_env.h) on real files in a temporary directory.
#include "storage/testing/fault_env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace sluice::storage::testing {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The whole file, read with plain C++ (not through any Env).
std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class FaultEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fault_env_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // A file created through the env, written with `synced` then Sync()ed, then `unsynced`
  // written after it. The directory is synced so the file itself survives.
  std::unique_ptr<File> MakeFile(const std::string& name, const std::string& synced,
                                 const std::string& unsynced) {
    auto file = env_.Open(Path(name), OpenMode::kCreate);
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    EXPECT_TRUE(env_.SyncDir(dir_).ok());
    EXPECT_TRUE((*file)->WriteAt(0, Bytes(synced)).ok());
    EXPECT_TRUE((*file)->Sync().ok());
    EXPECT_TRUE((*file)->WriteAt(synced.size(), Bytes(unsynced)).ok());
    return std::move(*file);
  }

  std::string dir_;
  FaultEnv env_{Env::Posix()};
};

TEST_F(FaultEnvTest, PassesReadsAndWritesThrough) {
  auto file = env_.Open(Path("a"), OpenMode::kCreate);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->WriteAt(0, Bytes("hello world")).ok());
  std::vector<uint8_t> buf(5);
  auto n = (*file)->ReadAt(6, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 5u);
  EXPECT_EQ(std::string(buf.begin(), buf.end()), "world");
  EXPECT_EQ(*(*file)->Size(), 11u);
  EXPECT_EQ((*file)->path(), Path("a"));
  EXPECT_GE((*file)->fd(), 0);
  EXPECT_TRUE(env_.Exists(Path("a")));
  auto names = env_.ListDir(dir_);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"a"});
  EXPECT_EQ(env_.write_count(), 1u);
}

TEST_F(FaultEnvTest, SyncRecordsTheSizeItCovers) {
  auto file = env_.Open(Path("a"), OpenMode::kCreate);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(env_.SyncedSize(Path("a")), 0);
  ASSERT_TRUE((*file)->WriteAt(0, Bytes("0123456789")).ok());
  EXPECT_EQ(env_.SyncedSize(Path("a")), 0);
  ASSERT_TRUE((*file)->Sync().ok());
  EXPECT_EQ(env_.SyncedSize(Path("a")), 10);
  ASSERT_TRUE((*file)->WriteAt(10, Bytes("abc")).ok());
  EXPECT_EQ(env_.SyncedSize(Path("a")), 10);
  EXPECT_EQ(env_.SyncedSize(Path("never-opened")), -1);
  EXPECT_EQ(env_.sync_count(), 1u);
}

TEST_F(FaultEnvTest, SyncThroughAnotherHandleCoversTheFile) {
  auto writer = env_.Open(Path("a"), OpenMode::kCreate);
  auto other = env_.Open(Path("a"), OpenMode::kReadWrite);
  ASSERT_TRUE(writer.ok() && other.ok());
  ASSERT_TRUE((*writer)->WriteAt(0, Bytes("0123456789")).ok());
  ASSERT_TRUE((*other)->Sync().ok());
  EXPECT_EQ(env_.SyncedSize(Path("a")), 10);
}

TEST_F(FaultEnvTest, SyncThroughAReadOnlyHandleCountsToo) {
  auto writer = MakeFile("a", "", "0123");
  auto reader = env_.Open(Path("a"), OpenMode::kRead);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE((*reader)->Sync().ok());
  EXPECT_EQ(env_.SyncedSize(Path("a")), 4);
}

TEST_F(FaultEnvTest, DropAllCutsEveryFileToItsSyncedSize) {
  MakeFile("a", "synced-a", "unsynced-a");
  MakeFile("b", "", "unsynced-b");
  env_.SimulateCrash();
  std::string report;
  ASSERT_TRUE(env_.DropUnsyncedData(1, TearMode::kDropAll, &report).ok());
  EXPECT_EQ(Slurp(Path("a")), "synced-a");
  EXPECT_EQ(Slurp(Path("b")), "");
  EXPECT_NE(report.find("cut from 18 to synced size 8"), std::string::npos) << report;
  EXPECT_TRUE(env_.TrackedPaths().empty());
}

TEST_F(FaultEnvTest, KeepPrefixKeepsARandomPrefixOfTheUnsyncedBytes) {
  const std::string synced = "synced:";
  const std::string unsynced = "0123456789abcdefghijklmnopqrstuvwxyz";
  bool saw_torn = false;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    FaultEnv env(Env::Posix());
    auto file = env.Open(Path("a"), OpenMode::kCreate);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Truncate(0).ok());
    ASSERT_TRUE(env.SyncDir(dir_).ok());
    ASSERT_TRUE((*file)->WriteAt(0, Bytes(synced)).ok());
    ASSERT_TRUE((*file)->Sync().ok());
    ASSERT_TRUE((*file)->WriteAt(synced.size(), Bytes(unsynced)).ok());
    env.SimulateCrash();
    file->reset();
    ASSERT_TRUE(env.DropUnsyncedData(seed, TearMode::kKeepPrefix).ok());
    std::string got = Slurp(Path("a"));
    ASSERT_GE(got.size(), synced.size()) << "seed " << seed;
    ASSERT_LE(got.size(), synced.size() + unsynced.size()) << "seed " << seed;
    EXPECT_EQ(got, (synced + unsynced).substr(0, got.size())) << "seed " << seed;
    if (got.size() > synced.size() && got.size() < synced.size() + unsynced.size()) {
      saw_torn = true;
    }
  }
  EXPECT_TRUE(saw_torn);
}

TEST_F(FaultEnvTest, CorruptMiddleChangesOnlyUnsyncedBytesAndKeepsTheSize) {
  const std::string synced(100, 's');
  const std::string unsynced(3000, 'u');
  int corrupted = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    FaultEnv env(Env::Posix());
    std::filesystem::remove(Path("a"));
    auto file = env.Open(Path("a"), OpenMode::kCreate);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(env.SyncDir(dir_).ok());
    ASSERT_TRUE((*file)->WriteAt(0, Bytes(synced)).ok());
    ASSERT_TRUE((*file)->Sync().ok());
    ASSERT_TRUE((*file)->WriteAt(synced.size(), Bytes(unsynced)).ok());
    env.SimulateCrash();
    file->reset();
    std::string report;
    ASSERT_TRUE(env.DropUnsyncedData(seed, TearMode::kCorruptMiddle, &report).ok());
    std::string got = Slurp(Path("a"));
    ASSERT_EQ(got.size(), synced.size() + unsynced.size()) << "seed " << seed;
    EXPECT_EQ(got.substr(0, synced.size()), synced) << "seed " << seed << "\n" << report;
    if (got.substr(synced.size()) != unsynced) ++corrupted;
  }
  EXPECT_GE(corrupted, 15);
}

TEST_F(FaultEnvTest, FilesCreatedSinceTheirDirectorySyncAreDeleted) {
  auto a = env_.Open(Path("a"), OpenMode::kCreate);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE((*a)->WriteAt(0, Bytes("aaa")).ok());
  ASSERT_TRUE((*a)->Sync().ok());
  EXPECT_TRUE(env_.CreatedSinceDirSync(Path("a")));
  ASSERT_TRUE(env_.SyncDir(dir_ + "/").ok());  // the same directory, spelled differently
  EXPECT_FALSE(env_.CreatedSinceDirSync(Path("a")));
  auto b = env_.Open(Path("b"), OpenMode::kCreate);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->WriteAt(0, Bytes("bbb")).ok());
  ASSERT_TRUE((*b)->Sync().ok());  // the data is synced, the name is not
  EXPECT_TRUE(env_.CreatedSinceDirSync(Path("b")));
  env_.SimulateCrash();
  std::string report;
  ASSERT_TRUE(env_.DropUnsyncedData(1, TearMode::kDropAll, &report).ok());
  EXPECT_EQ(Slurp(Path("a")), "aaa");
  EXPECT_FALSE(std::filesystem::exists(Path("b"))) << report;
}

TEST_F(FaultEnvTest, FileThatExistedBeforeCountsAsSynced) {
  { std::ofstream(Path("old"), std::ios::binary) << "on disk before"; }
  auto file = env_.Open(Path("old"), OpenMode::kCreate);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(env_.SyncedSize(Path("old")), 14);
  EXPECT_FALSE(env_.CreatedSinceDirSync(Path("old")));
  ASSERT_TRUE((*file)->WriteAt(14, Bytes(", and more")).ok());
  env_.SimulateCrash();
  ASSERT_TRUE(env_.DropUnsyncedData(1, TearMode::kDropAll).ok());
  EXPECT_EQ(Slurp(Path("old")), "on disk before");
}

TEST_F(FaultEnvTest, ReadOnlyOpensAreNotTracked) {
  { std::ofstream(Path("r"), std::ios::binary) << "x"; }
  auto file = env_.Open(Path("r"), OpenMode::kRead);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(env_.SyncedSize(Path("r")), -1);
  auto missing = env_.Open(Path("missing"), OpenMode::kRead);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(FaultEnvTest, ShrinkingTruncateLowersTheSyncedSize) {
  auto file = MakeFile("a", "0123456789", "");
  ASSERT_TRUE(file->Truncate(4).ok());
  EXPECT_EQ(env_.SyncedSize(Path("a")), 4);
  ASSERT_TRUE(file->Truncate(100).ok());  // growing is not durable without a sync
  EXPECT_EQ(env_.SyncedSize(Path("a")), 4);
  env_.SimulateCrash();
  ASSERT_TRUE(env_.DropUnsyncedData(1, TearMode::kDropAll).ok());
  EXPECT_EQ(Slurp(Path("a")), "0123");
}

TEST_F(FaultEnvTest, UnsyncedRenameIsUndoneAndSyncedRenameStays) {
  MakeFile("a", "AAA", "aaa");
  MakeFile("b", "BBB", "");
  ASSERT_TRUE(env_.Rename(Path("a"), Path("a2")).ok());
  ASSERT_TRUE(env_.Rename(Path("b"), Path("b2")).ok());
  EXPECT_EQ(env_.SyncedSize(Path("a2")), 3);
  EXPECT_EQ(env_.SyncedSize(Path("a")), -1);
  ASSERT_TRUE(env_.SyncDir(dir_).ok());
  ASSERT_TRUE(env_.Rename(Path("a2"), Path("a3")).ok());
  env_.SimulateCrash();
  std::string report;
  ASSERT_TRUE(env_.DropUnsyncedData(1, TearMode::kDropAll, &report).ok());
  EXPECT_FALSE(std::filesystem::exists(Path("a3"))) << report;
  EXPECT_EQ(Slurp(Path("a2")), "AAA") << report;
  EXPECT_EQ(Slurp(Path("b2")), "BBB") << report;
}

TEST_F(FaultEnvTest, RemovedFileIsForgotten) {
  MakeFile("a", "AAA", "aaa");
  ASSERT_TRUE(env_.Remove(Path("a")).ok());
  EXPECT_EQ(env_.SyncedSize(Path("a")), -1);
  env_.SimulateCrash();
  ASSERT_TRUE(env_.DropUnsyncedData(1, TearMode::kDropAll).ok());
  EXPECT_FALSE(std::filesystem::exists(Path("a")));
}

TEST_F(FaultEnvTest, SimulateCrashFailsEveryCall) {
  auto file = MakeFile("a", "AAA", "aaa");
  env_.SimulateCrash();
  EXPECT_TRUE(env_.crashed());
  std::vector<uint8_t> buf(3);
  std::vector<Status> failures = {
      file->WriteAt(6, Bytes("x")),
      file->ReadAt(0, buf).status(),
      file->Sync(),
      file->Truncate(0),
      file->Size().status(),
      file->Unlinked().status(),
      env_.Open(Path("a"), OpenMode::kRead).status(),
      env_.Open(Path("new"), OpenMode::kCreate).status(),
      env_.Remove(Path("a")),
      env_.Rename(Path("a"), Path("b")),
      env_.CreateDirs(Path("sub")),
      env_.SyncDir(dir_),
      env_.ListDir(dir_).status(),
  };
  for (const Status& st : failures) {
    EXPECT_EQ(st.code(), StatusCode::kIOError) << st.ToString();
    EXPECT_NE(st.message().find("simulated crash"), std::string::npos) << st.ToString();
  }
  EXPECT_FALSE(env_.Exists(Path("a")));
  EXPECT_FALSE(std::filesystem::exists(Path("new")));
  EXPECT_EQ(Slurp(Path("a")), "AAAaaa");  // nothing reached the disk
}

TEST_F(FaultEnvTest, ResetRevivesTheEnvButNotFilesFromBeforeTheCrash) {
  auto old_file = MakeFile("a", "AAA", "aaa");
  env_.SimulateCrash();
  ASSERT_TRUE(env_.DropUnsyncedData(1, TearMode::kDropAll).ok());
  env_.Reset();
  EXPECT_FALSE(env_.crashed());
  Status st = old_file->WriteAt(3, Bytes("zzz"));
  EXPECT_NE(st.message().find("simulated crash"), std::string::npos) << st.ToString();
  auto file = env_.Open(Path("a"), OpenMode::kReadWrite);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(env_.SyncedSize(Path("a")), 3);  // what survived counts as synced
  ASSERT_TRUE((*file)->WriteAt(3, Bytes("bbb")).ok());
  EXPECT_EQ(Slurp(Path("a")), "AAAbbb");
}

TEST_F(FaultEnvTest, SimulateCrashWaitsForCallsInProgressAndStopsWriters) {
  auto file = MakeFile("a", "", "");
  std::atomic<bool> started{false};
  std::atomic<uint64_t> ok_writes{0};
  std::thread writer([&] {
    std::string chunk(512, 'w');
    for (uint64_t pos = 0;; pos += chunk.size()) {
      started = true;
      if (!file->WriteAt(pos, Bytes(chunk)).ok()) return;
      ++ok_writes;
      if (pos % 8192 == 0 && !file->Sync().ok()) return;
    }
  });
  while (!started) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  env_.SimulateCrash();
  uint64_t size_at_crash = std::filesystem::file_size(Path("a"));
  writer.join();  // must see the error and stop, not hang
  EXPECT_EQ(std::filesystem::file_size(Path("a")), size_at_crash);
  EXPECT_EQ(size_at_crash, ok_writes * 512);
}

TEST_F(FaultEnvTest, CrashAfterCountsOnlyCallsThatChangeTheDisk) {
  auto file = MakeFile("a", "", "");
  env_.CrashAfter(2);
  std::vector<uint8_t> buf(1);
  EXPECT_TRUE(file->WriteAt(0, Bytes("1")).ok());
  for (int i = 0; i < 5; ++i) {  // reads and stats do not count
    EXPECT_TRUE(file->ReadAt(0, buf).ok());
    EXPECT_TRUE(file->Size().ok());
    EXPECT_TRUE(env_.Exists(Path("a")));
  }
  EXPECT_TRUE(file->Sync().ok());
  EXPECT_FALSE(env_.crashed());
  Status st = file->WriteAt(1, Bytes("2"));
  EXPECT_NE(st.message().find("simulated crash"), std::string::npos) << st.ToString();
  EXPECT_TRUE(env_.crashed());
  EXPECT_FALSE(file->ReadAt(0, buf).ok());
  EXPECT_EQ(Slurp(Path("a")), "1");
  env_.SimulateCrash();  // still fine to call: waits for calls in progress
  env_.Reset();
  auto fresh = env_.Open(Path("a"), OpenMode::kReadWrite);
  ASSERT_TRUE(fresh.ok());
  for (int i = 0; i < 10; ++i) EXPECT_TRUE((*fresh)->WriteAt(0, Bytes("x")).ok());  // off again
}

TEST_F(FaultEnvTest, FailNextWritesFailsThatManyWithTheInjectedErrno) {
  auto file = MakeFile("a", "", "");
  env_.FailNextWrites(2, ENOSPC);
  for (int i = 0; i < 2; ++i) {
    Status st = file->WriteAt(0, Bytes("x"));
    EXPECT_EQ(st.code(), StatusCode::kIOError);
    EXPECT_NE(st.message().find("injected ENOSPC"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(Path("a")), std::string::npos) << st.ToString();
  }
  EXPECT_TRUE(file->WriteAt(0, Bytes("x")).ok());
  EXPECT_EQ(Slurp(Path("a")), "x");
}

TEST_F(FaultEnvTest, FailWritesAfterLetsTheFirstKThroughThenFailsForever) {
  auto file = MakeFile("a", "", "");
  env_.FailWritesAfter(3, EIO);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(file->WriteAt(i, Bytes("x")).ok());
  for (int i = 3; i < 10; ++i) {
    Status st = file->WriteAt(i, Bytes("x"));
    EXPECT_NE(st.message().find("injected EIO"), std::string::npos) << st.ToString();
  }
  EXPECT_EQ(Slurp(Path("a")), "xxx");
  env_.ClearFaults();
  EXPECT_TRUE(file->WriteAt(3, Bytes("y")).ok());
}

TEST_F(FaultEnvTest, PartialWriteFaultTearsTheWrite) {
  auto file = MakeFile("a", "", "");
  WriteFault fault;
  fault.error = ENOSPC;
  fault.count = 1;
  fault.partial = true;
  env_.InjectWriteFault(fault);
  EXPECT_FALSE(file->WriteAt(0, Bytes("12345678")).ok());
  EXPECT_EQ(Slurp(Path("a")), "1234");
}

TEST_F(FaultEnvTest, WriteFaultCanTargetOnePath) {
  auto log = MakeFile("0.log", "", "");
  auto index = MakeFile("0.index", "", "");
  WriteFault fault;
  fault.error = EIO;
  fault.path_contains = ".index";
  env_.InjectWriteFault(fault);
  EXPECT_TRUE(log->WriteAt(0, Bytes("x")).ok());
  EXPECT_FALSE(index->WriteAt(0, Bytes("x")).ok());
}

TEST_F(FaultEnvTest, FailNextSyncsLeavesTheDataUnsynced) {
  auto file = MakeFile("a", "AAA", "aaa");
  env_.FailNextSyncs(1, EIO);
  Status st = file->Sync();
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_NE(st.message().find("fdatasync"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("injected EIO"), std::string::npos) << st.ToString();
  EXPECT_EQ(env_.SyncedSize(Path("a")), 3);
  EXPECT_TRUE(file->Sync().ok());
  EXPECT_EQ(env_.SyncedSize(Path("a")), 6);
}

TEST_F(FaultEnvTest, FailNextSyncsCanWaitForSomeSyncsFirst) {
  auto file = MakeFile("a", "", "");
  env_.FailNextSyncs(2, EIO, /*after=*/1);
  EXPECT_TRUE(file->Sync().ok());
  EXPECT_FALSE(file->Sync().ok());
  EXPECT_FALSE(file->Sync().ok());
  EXPECT_TRUE(file->Sync().ok());
}

TEST_F(FaultEnvTest, ResetClearsInjectedFaults) {
  auto file = MakeFile("a", "", "");
  env_.FailWritesAfter(0, EIO);
  env_.FailNextSyncs(5);
  env_.SimulateCrash();
  env_.Reset();
  auto fresh = env_.Open(Path("a"), OpenMode::kReadWrite);
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE((*fresh)->WriteAt(0, Bytes("x")).ok());
  EXPECT_TRUE((*fresh)->Sync().ok());
}

TEST(TearModeTest, NamesEveryMode) {
  EXPECT_EQ(TearModeName(TearMode::kDropAll), "drop-all");
  EXPECT_EQ(TearModeName(TearMode::kKeepPrefix), "keep-prefix");
  EXPECT_EQ(TearModeName(TearMode::kCorruptMiddle), "corrupt-middle");
}

}  // namespace
}  // namespace sluice::storage::testing
