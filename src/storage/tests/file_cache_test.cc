#include "storage/file_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "base/status.h"

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

}  // namespace
}  // namespace sluice::storage
