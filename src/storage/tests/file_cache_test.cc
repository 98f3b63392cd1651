#include "storage/file_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <thread>

#include "base/clock.h"
#include "base/status.h"
#include "storage/testing/files.h"

namespace sluice::storage {
namespace {

class FileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice-fc-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { ASSERT_EQ(system(("rm -rf " + dir_).c_str()), 0); }
  std::string dir_;
};

TEST_F(FileCacheTest, BoundsOpenDescriptors) {
  FileCache cache(Env::Posix(), 4);
  std::vector<std::shared_ptr<File>> kept;
  for (int i = 0; i < 20; ++i) {
    auto f = cache.Get(dir_ + "/f" + std::to_string(i), OpenMode::kCreate);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_LE(cache.open_count(), 4u);
  }
}

TEST_F(FileCacheTest, EvictedHandleStaysUsable) {
  FileCache cache(Env::Posix(), 1);
  auto a = cache.Get(dir_ + "/a", OpenMode::kCreate);
  ASSERT_TRUE(a.ok());
  std::shared_ptr<File> held = *a;
  ASSERT_TRUE(cache.Get(dir_ + "/b", OpenMode::kCreate).ok());  // evicts a
  uint8_t byte = 7;
  EXPECT_TRUE(held->WriteAt(0, std::span<const uint8_t>(&byte, 1)).ok());
  EXPECT_EQ(*held->Size(), 1u);
}

TEST_F(FileCacheTest, ReadOnlyEntryIsReopenedForWriting) {
  FileCache cache(Env::Posix(), 4);
  ASSERT_TRUE(cache.Get(dir_ + "/a", OpenMode::kCreate).ok());
  cache.Evict(dir_ + "/a");
  auto ro = cache.Get(dir_ + "/a", OpenMode::kRead);
  ASSERT_TRUE(ro.ok());
  uint8_t byte = 7;
  EXPECT_FALSE((*ro)->WriteAt(0, std::span<const uint8_t>(&byte, 1)).ok());
  auto rw = cache.Get(dir_ + "/a", OpenMode::kReadWrite);
  ASSERT_TRUE(rw.ok());
  EXPECT_TRUE((*rw)->WriteAt(0, std::span<const uint8_t>(&byte, 1)).ok());
}

TEST_F(FileCacheTest, MissingFileIsNotFoundWithPath) {
  FileCache cache(Env::Posix(), 4);
  auto f = cache.Get(dir_ + "/nope", OpenMode::kRead);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find(dir_ + "/nope"), std::string::npos);
}

constexpr int64_t kSecond = 1'000'000'000;

// storage.file_idle_timeout: an entry nobody holds, not asked for in the timeout, is closed;
// one a caller holds, or asked for since, stays; the next Get opens it again.
TEST_F(FileCacheTest, ClosesIdleDescriptorsNobodyHolds) {
  FileCache cache(Env::Posix(), 16, /*idle_timeout_ms=*/60'000);  // the test calls CloseIdle
  auto a = cache.Get(dir_ + "/a", OpenMode::kCreate);
  ASSERT_TRUE(a.ok());
  uint8_t byte = 7;
  ASSERT_TRUE((*a)->WriteAt(0, std::span<const uint8_t>(&byte, 1)).ok());
  a = Status(StatusCode::kInternal, "dropped");  // the cache's reference only
  auto b = cache.Get(dir_ + "/b", OpenMode::kCreate);
  ASSERT_TRUE(b.ok());
  std::shared_ptr<File> held = std::move(*b);
  EXPECT_EQ(testing::OpenDescriptorsUnder(dir_), 2);
  EXPECT_EQ(cache.CloseIdle(MonotonicNanos()), 0u);                 // not idle yet
  EXPECT_EQ(cache.CloseIdle(MonotonicNanos() + 61 * kSecond), 1u);  // a; b is held
  EXPECT_EQ(cache.open_count(), 1u);
  EXPECT_EQ(testing::OpenDescriptorsUnder(dir_), 1);
  auto again = cache.Get(dir_ + "/a", OpenMode::kRead);
  ASSERT_TRUE(again.ok());
  uint8_t read = 0;
  auto n = (*again)->ReadAt(0, std::span<uint8_t>(&read, 1));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(read, 7);
  held.reset();
  again = Status(StatusCode::kInternal, "dropped");
  EXPECT_EQ(cache.CloseIdle(MonotonicNanos() + 61 * kSecond), 2u);
  EXPECT_EQ(testing::OpenDescriptorsUnder(dir_), 0);
}

TEST_F(FileCacheTest, WithoutAnIdleTimeoutOnlyTheCapacityCloses) {
  FileCache cache(Env::Posix(), 16);
  ASSERT_TRUE(cache.Get(dir_ + "/a", OpenMode::kCreate).ok());
  EXPECT_EQ(cache.CloseIdle(MonotonicNanos() + 3600 * kSecond), 0u);
  EXPECT_EQ(cache.open_count(), 1u);
  EXPECT_EQ(testing::OpenDescriptorsUnder(dir_), 1);
}

// The cache's own thread does it, and stops with the cache.
TEST_F(FileCacheTest, TheIdleThreadClosesThem) {
  auto cache = std::make_unique<FileCache>(Env::Posix(), 16, /*idle_timeout_ms=*/50);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(cache->Get(dir_ + "/f" + std::to_string(i), OpenMode::kCreate).ok());
  }
  EXPECT_EQ(testing::OpenDescriptorsUnder(dir_), 5);
  for (int i = 0; i < 400 && testing::OpenDescriptorsUnder(dir_) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(testing::OpenDescriptorsUnder(dir_), 0);
  EXPECT_EQ(cache->open_count(), 0u);
  cache.reset();  // joins the thread
}

}  // namespace
}  // namespace sluice::storage
