#include "broker/leader_epochs.h"

#include <gtest/gtest.h>

#include <future>

#include "storage/log.h"
#include "storage/testing/batch_builder.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace leader_epochs_test {
namespace {

using Entry = LeaderEpochCache::Entry;

TEST(LeaderEpochCacheTest, ParsesKafkasFormat) {
  auto e = LeaderEpochCache::Parse("0\n2\n0 0\n3 150\n");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(*e, (std::vector<Entry>{{0, 0}, {3, 150}}));
  EXPECT_EQ(LeaderEpochCache::Format(*e), "0\n2\n0 0\n3 150\n");
  EXPECT_TRUE(LeaderEpochCache::Parse("0\n0\n").ok());
}

TEST(LeaderEpochCacheTest, RejectsMalformedText) {
  for (const char* bad :
       {"", "0\n", "1\n0\n", "0\n1\n", "0\n2\n0 0\n", "0\n1\n0 0", "0\n1\n00\n", "0\n1\nx 0\n",
        "0\n1\n0 -4\n", "0\n1\n-1 0\n", "0\n2\n3 10\n2 20\n", "0\n2\n1 10\n2 5\n", "0\n1\n1  5\n",
        "0\n-1\n", "0\n1\n1 5 6\n", "0\n1\n99999999999 5\n"}) {
    EXPECT_FALSE(LeaderEpochCache::Parse(bad).ok()) << "'" << bad << "'";
  }
}

// A tiered segment's own epochs (design 0025): the one holding its base starts there.
TEST(LeaderEpochCacheTest, WithinClipsTheEntriesToASegment) {
  const std::vector<Entry> e = {{0, 0}, {2, 30}, {5, 70}};
  EXPECT_EQ(LeaderEpochCache::Within(e, 0, 30), (std::vector<Entry>{{0, 0}}));
  EXPECT_EQ(LeaderEpochCache::Within(e, 10, 50), (std::vector<Entry>{{0, 10}, {2, 30}}));
  EXPECT_EQ(LeaderEpochCache::Within(e, 30, 31), (std::vector<Entry>{{2, 30}}));
  EXPECT_EQ(LeaderEpochCache::Within(e, 40, 100), (std::vector<Entry>{{2, 40}, {5, 70}}));
  EXPECT_EQ(LeaderEpochCache::Within(e, 80, 90), (std::vector<Entry>{{5, 80}}));
  EXPECT_EQ(LeaderEpochCache::Within({{3, 50}}, 10, 60), (std::vector<Entry>{{3, 50}}));
  EXPECT_TRUE(LeaderEpochCache::Within({{3, 50}}, 10, 50).empty());
  EXPECT_TRUE(LeaderEpochCache::Within({}, 0, 10).empty());
}

TEST(LeaderEpochCacheTest, EndOffsetForFollowsKafka) {
  // Epochs above the log's latest, and undefined ones, have no end offset.
  storage::testing::TempDir dir("sluice-epochs");
  storage::IoExecutor executor(1);
  storage::LogOptions o;
  o.executor = &executor;
  auto log = storage::PartitionLog::Open(dir.path(), o);
  ASSERT_TRUE(log.ok());
  storage::testing::WriteFileBytes(dir.path() + "/" + kLeaderEpochFile,
                                   std::vector<uint8_t>{'0', '\n', '3', '\n', '2', ' ', '0', '\n',
                                                        '4', ' ', '0', '\n', '7', ' ', '0', '\n'});
  auto cache = LeaderEpochCache::Open(**log);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_EQ(cache->latest_epoch(), 7);
  EXPECT_EQ(cache->EndOffsetFor(7, 0), std::make_pair(7, int64_t{0}));
  EXPECT_EQ(cache->EndOffsetFor(8, 0), std::make_pair(-1, int64_t{-1}));
  EXPECT_EQ(cache->EndOffsetFor(-1, 0), std::make_pair(-1, int64_t{-1}));
}

class LeaderEpochLogTest : public ::testing::Test {
 protected:
  std::unique_ptr<storage::PartitionLog> OpenLog() {
    storage::LogOptions o;
    o.executor = &executor_;
    auto log = storage::PartitionLog::Open(dir_.path(), o);
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    return std::move(*log);
  }
  void Append(storage::PartitionLog& log, int32_t epoch, int records) {
    auto done = std::make_shared<std::promise<Status>>();
    storage::AppendOptions ao;
    ao.leader_epoch = epoch;
    ao.on_ack = [done](const Status& st, const storage::AppendInfo&) { done->set_value(st); };
    ASSERT_TRUE(log.Append(storage::testing::MakeBatch(records, 50, 1000, 0), std::move(ao)).ok());
    ASSERT_TRUE(done->get_future().get().ok());
  }
  std::string Path() const { return dir_.path() + "/" + kLeaderEpochFile; }
  storage::testing::TempDir dir_{"sluice-epochs"};
  storage::IoExecutor executor_{1};
};

TEST_F(LeaderEpochLogTest, NewLogStartsAtEpochZeroAndWritesTheFile) {
  auto log = OpenLog();
  auto cache = LeaderEpochCache::Open(*log);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->latest_epoch(), 0);
  auto bytes = storage::testing::ReadFileBytes(Path());
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "0\n1\n0 0\n");
}

TEST_F(LeaderEpochLogTest, MissingOrDamagedFileIsRebuiltFromBatchHeaders) {
  {
    auto log = OpenLog();
    Append(*log, 0, 5);
    Append(*log, 2, 5);
    Append(*log, 2, 5);
    Append(*log, 5, 5);
  }
  for (std::string junk : std::vector<std::string>{"", "garbage", "0\n1\n9 9"}) {
    storage::testing::WriteFileBytes(Path(), std::vector<uint8_t>(junk.begin(), junk.end()));
    auto log = OpenLog();
    auto cache = LeaderEpochCache::Open(*log);
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    EXPECT_EQ(cache->entries(), (std::vector<Entry>{{0, 0}, {2, 5}, {5, 15}})) << junk;
    EXPECT_EQ(cache->EpochAt(4), 0);
    EXPECT_EQ(cache->EpochAt(14), 2);
    EXPECT_EQ(cache->EndOffsetFor(2, 20), std::make_pair(2, int64_t{15}));
    EXPECT_EQ(cache->EndOffsetFor(3, 20), std::make_pair(2, int64_t{15}));
    EXPECT_EQ(cache->EndOffsetFor(5, 20), std::make_pair(5, int64_t{20}));
  }
}

TEST_F(LeaderEpochLogTest, RecoveryThatCutTheLogStartsANewEpoch) {
  {
    auto log = OpenLog();
    Append(*log, 0, 5);
    Append(*log, 0, 5);
    ASSERT_TRUE(LeaderEpochCache::Open(*log).ok());
  }
  // A torn tail: half of the last batch's bytes.
  std::string seg = dir_.path() + "/00000000000000000000.log";
  auto bytes = storage::testing::ReadFileBytes(seg);
  bytes.resize(bytes.size() - 20);
  storage::testing::WriteFileBytes(seg, bytes);
  auto log = OpenLog();
  EXPECT_EQ(log->end_offset(), 5);
  auto cache = LeaderEpochCache::Open(*log);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->entries(), (std::vector<Entry>{{0, 0}, {1, 5}}));
  // A clean reopen keeps it.
  log.reset();
  log = OpenLog();
  cache = LeaderEpochCache::Open(*log);
  EXPECT_EQ(cache->latest_epoch(), 1);
}

// In a cluster the epochs are etcd's and the leaders': a follower whose tail recovery cut
// (a torn write, the zero padding of direct writes) must not start an epoch its leader
// never had, or its fetches would diverge forever.
TEST_F(LeaderEpochLogTest, RecoveryThatCutTheLogStartsNoEpochInACluster) {
  {
    auto log = OpenLog();
    Append(*log, 0, 5);
    Append(*log, 0, 5);
    ASSERT_TRUE(LeaderEpochCache::Open(*log, LeaderEpochCache::Owner::kCluster).ok());
  }
  std::string seg = dir_.path() + "/00000000000000000000.log";
  auto bytes = storage::testing::ReadFileBytes(seg);
  bytes.resize(bytes.size() - 20);
  storage::testing::WriteFileBytes(seg, bytes);
  auto log = OpenLog();
  ASSERT_GT(log->recovery().truncated_bytes, 0u);
  for (auto owner : {LeaderEpochCache::Owner::kCluster, LeaderEpochCache::Owner::kCluster}) {
    auto cache = LeaderEpochCache::Open(*log, owner);  // twice: nothing builds up
    ASSERT_TRUE(cache.ok());
    EXPECT_EQ(cache->entries(), (std::vector<Entry>{{0, 0}}));
  }
}

TEST_F(LeaderEpochLogTest, EntriesPastTheEndAreDropped) {
  {
    auto log = OpenLog();
    Append(*log, 0, 5);
  }
  std::string text = "0\n2\n0 0\n1 50\n";
  storage::testing::WriteFileBytes(Path(), std::vector<uint8_t>(text.begin(), text.end()));
  auto log = OpenLog();
  auto cache = LeaderEpochCache::Open(*log);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->entries(), (std::vector<Entry>{{0, 0}}));
}

TEST_F(LeaderEpochLogTest, AssignFollowsKafkaAndIsDurable) {
  auto log = OpenLog();
  Append(*log, 0, 5);
  auto cache = LeaderEpochCache::Open(*log);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->entries(), (std::vector<Entry>{{0, 0}}));
  // A new leader: (epoch, log end).
  ASSERT_TRUE(cache->Assign(3, 5).ok());
  // The same epoch again, later: nothing changes.
  ASSERT_TRUE(cache->Assign(3, 9).ok());
  EXPECT_EQ(cache->entries(), (std::vector<Entry>{{0, 0}, {3, 5}}));
  ASSERT_TRUE(cache->Assign(5, 12).ok());
  // On disk at once.
  auto bytes = storage::testing::ReadFileBytes(Path());
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "0\n3\n0 0\n3 5\n5 12\n");
  // An entry that contradicts later ones replaces them (a follower taking the leader's
  // history after a truncation).
  ASSERT_TRUE(cache->Assign(4, 8).ok());
  EXPECT_EQ(cache->entries(), (std::vector<Entry>{{0, 0}, {3, 5}, {4, 8}}));
  EXPECT_FALSE(cache->Assign(-1, 3).ok());
  EXPECT_FALSE(cache->Assign(2, -3).ok());
  EXPECT_EQ(cache->EndOffsetFor(3, 20), std::make_pair(3, int64_t{8}));
  EXPECT_EQ(cache->EndOffsetFor(4, 20), std::make_pair(4, int64_t{20}));
}

TEST_F(LeaderEpochLogTest, TruncateFromEndAndStart) {
  auto log = OpenLog();
  auto cache = LeaderEpochCache::Open(*log);
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(cache->Assign(1, 0).ok());
  ASSERT_TRUE(cache->Assign(2, 10).ok());
  ASSERT_TRUE(cache->Assign(4, 20).ok());
  EXPECT_EQ(cache->entries(), (std::vector<Entry>{{1, 0}, {2, 10}, {4, 20}}));
  ASSERT_TRUE(cache->TruncateFromEnd(25).ok());  // nothing starts at or past 25
  EXPECT_EQ(cache->entries().size(), 3u);
  ASSERT_TRUE(cache->TruncateFromEnd(20).ok());
  EXPECT_EQ(cache->entries(), (std::vector<Entry>{{1, 0}, {2, 10}}));
  ASSERT_TRUE(cache->Assign(4, 20).ok());
  ASSERT_TRUE(cache->TruncateFromStart(12).ok());
  EXPECT_EQ(cache->entries(), (std::vector<Entry>{{2, 12}, {4, 20}}));
  ASSERT_TRUE(cache->TruncateFromStart(5).ok());  // below the first: nothing
  EXPECT_EQ(cache->entries(), (std::vector<Entry>{{2, 12}, {4, 20}}));
  ASSERT_TRUE(cache->TruncateFromStart(20).ok());
  EXPECT_EQ(cache->entries(), (std::vector<Entry>{{4, 20}}));
  // On disk as Kafka writes it.
  auto bytes = storage::testing::ReadFileBytes(Path());
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "0\n1\n4 20\n");
}

}  // namespace
}  // namespace leader_epochs_test
}  // namespace sluice::broker
