#include "lake/table_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "lake/table_metadata.h"
#include "lake/tests/scratch_dirs.h"

namespace sluice::lake {
namespace table_files_test {
namespace {

constexpr std::string_view kScratch = "sluice_table_files";
[[maybe_unused]] ::testing::Environment* const kScratchDirs =
    ::testing::AddGlobalTestEnvironment(new ScratchDirs(std::string(kScratch)));

std::string FreshDir(std::string_view name) { return ScratchDirs::Fresh(kScratch, name); }

TEST(TableFilesTest, EmptyTableHasNoVersion) {
  TableFiles t(FreshDir("empty"));
  Result<std::optional<MetadataVersion>> v = t.Current();
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_FALSE(v->has_value());
}

TEST(TableFilesTest, CommitsAreExclusiveAndTheHintOnlyAStart) {
  TableFiles t(FreshDir("exclusive"));
  ASSERT_TRUE(t.CommitVersion(1, R"({"v":1})").ok());
  Status again = t.CommitVersion(1, R"({"v":"other"})");
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists) << again.message();
  ASSERT_TRUE(t.CommitVersion(2, R"({"v":2})").ok());
  Result<std::optional<MetadataVersion>> v = t.Current();
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ((*v)->version, 2);
  EXPECT_EQ((*v)->json, R"({"v":2})");

  // A hint left behind (a crash after the link) and a garbage hint: still version 3.
  ASSERT_TRUE(t.CommitVersion(3, R"({"v":3})").ok());
  std::ofstream(t.metadata_dir() + "/version-hint.text") << "1";
  EXPECT_EQ((*t.Current())->version, 3);
  std::ofstream(t.metadata_dir() + "/version-hint.text") << "x\x01garbage";
  EXPECT_EQ((*t.Current())->version, 3);
  std::filesystem::remove(t.metadata_dir() + "/version-hint.text");
  EXPECT_EQ((*t.Current())->version, 3);
  // No temporary files are left.
  for (const auto& e : std::filesystem::directory_iterator(t.metadata_dir())) {
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  }
}

TEST(TableFilesTest, RacingWritersNeverShareAVersion) {
  TableFiles t(FreshDir("race"));
  constexpr int kWriters = 4, kCommits = 25;
  std::atomic<int> lost{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kCommits; ++i) {
        while (true) {
          Result<std::optional<MetadataVersion>> cur = t.Current();
          int64_t next = cur.ok() && cur->has_value() ? (*cur)->version + 1 : 1;
          Status st = t.CommitVersion(next, std::to_string(w) + ":" + std::to_string(i));
          if (st.ok()) break;
          ASSERT_EQ(st.code(), StatusCode::kAlreadyExists) << st.message();
          ++lost;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ((*t.Current())->version, kWriters * kCommits);
  std::set<std::string> seen;
  for (int v = 1; v <= kWriters * kCommits; ++v) {
    Result<std::string> body = ReadWholeFile(t.VersionPath(v));
    ASSERT_TRUE(body.ok());
    EXPECT_TRUE(seen.insert(*body).second) << "two versions hold " << *body;
  }
}

TEST(TableFilesTest, ANewTableDoesNotMoveIntoAnotherTablesFiles) {
  TableFiles renamed(FreshDir("leftover_renamed"));
  std::filesystem::create_directories(renamed.root() + "/metadata.renamed-123");
  Status st = renamed.CommitVersion(1, "{}");
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.message();
  EXPECT_NE(st.message().find("another table's files"), std::string::npos) << st.message();
  TableFiles dropped(FreshDir("leftover_data"));
  std::filesystem::create_directories(dropped.data_dir());
  std::ofstream(dropped.data_dir() + "/old.parquet") << "x";
  EXPECT_EQ(dropped.CommitVersion(1, "{}").code(), StatusCode::kFailedPrecondition);
  // An empty data/ (a sink makes it before the table) is fine.
  TableFiles fresh(FreshDir("empty_data"));
  std::filesystem::create_directories(fresh.data_dir());
  EXPECT_TRUE(fresh.CommitVersion(1, "{}").ok());
  // A later version needs the table's metadata/: gone (dropped, renamed) is an error.
  std::filesystem::rename(fresh.metadata_dir(), fresh.root() + "/metadata.renamed-1");
  EXPECT_EQ(fresh.CommitVersion(2, "{}").code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(fresh.metadata_dir()));
}

TEST(TableFilesTest, LocationsAreLocalPathsOnly) {
  EXPECT_EQ(*LocalPath("file:///a/b/"), "/a/b");
  EXPECT_EQ(*LocalPath("file:/a/b"), "/a/b");
  EXPECT_EQ(*LocalPath("/a"), "/a");
  EXPECT_FALSE(LocalPath("s3://bucket/t").ok());
  EXPECT_FALSE(LocalPath("relative/t").ok());
  EXPECT_EQ(FileUri("/a/b"), "file:///a/b");
  EXPECT_NE(NewUuid(), NewUuid());
  EXPECT_EQ(NewUuid().size(), 36u);
  EXPECT_EQ(NewUuid()[14], '4');
}

}  // namespace
}  // namespace table_files_test
}  // namespace sluice::lake
