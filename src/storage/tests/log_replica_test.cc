// PartitionLog::AppendReplica: a follower's appends keep the leader's offsets and leader
// epochs (docs/design/0018-cluster.md, decision 5), refuse going backwards, allow the
// gaps compaction leaves, check the CRC, and survive a reopen; a follower behind its
// leader's start restarts its log there (TruncateFullyAndStartAt); WhenDurable tells a
// follower when what it reports is synced.
#include <gtest/gtest.h>

#include <future>

#include "storage/log.h"
#include "storage/testing/batch_builder.h"
#include "storage/testing/files.h"

namespace sluice::storage {
namespace {

using testing::MakeBatch;

class LogReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    opts_.executor = &executor_;
    opts_.flush_policy = FlushPolicy::kDurable;
  }
  std::unique_ptr<PartitionLog> OpenLog() {
    auto log = PartitionLog::Open(tmp_.path(), opts_);
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    return log.ok() ? std::move(*log) : nullptr;
  }
  // A batch of `n` records stamped as the leader wrote it: at `base`, in `epoch`.
  static std::vector<uint8_t> Fetched(int n, int64_t base, int32_t epoch, uint64_t seed) {
    std::vector<uint8_t> b = MakeBatch(n, 20, 1000, seed);
    AssignOffsets(b, base, epoch);
    return b;
  }
  // Appends as a replica and waits until durable.
  Result<AppendInfo> ReplicaSync(PartitionLog& log, const std::vector<uint8_t>& batch) {
    std::promise<Status> done;
    AppendOptions o;
    o.ack = AckLevel::kDurable;
    o.leader_epoch = 99;  // ignored: the batch keeps its own
    o.on_ack = [&](const Status& st, const AppendInfo&) { done.set_value(st); };
    Result<AppendInfo> info = log.AppendReplica(batch, std::move(o));
    if (!info.ok()) return info;
    Status st = done.get_future().get();
    if (!st.ok()) return st;
    return info;
  }
  std::vector<BatchHeader> Headers(PartitionLog& log) {
    std::vector<BatchHeader> out;
    EXPECT_TRUE(log.ForEachBatchHeader(0,
                                       [&](const BatchHeader& h, std::span<const uint8_t>) {
                                         out.push_back(h);
                                         return true;
                                       })
                    .ok());
    return out;
  }

  testing::TempDir tmp_{"sluice-log-replica"};
  IoExecutor executor_{2};
  LogOptions opts_;
};

TEST_F(LogReplicaTest, KeepsTheLeadersOffsetsAndEpochs) {
  auto log = OpenLog();
  auto a = ReplicaSync(*log, Fetched(3, 0, 1, 1));
  auto b = ReplicaSync(*log, Fetched(2, 3, 4, 2));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->base_offset, 0);
  EXPECT_EQ(b->base_offset, 3);
  EXPECT_EQ(b->last_offset, 4);
  EXPECT_EQ(log->end_offset(), 5);
  auto hs = Headers(*log);
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs[0].leader_epoch, 1);
  EXPECT_EQ(hs[1].leader_epoch, 4);
  // The stored bytes are the fetched bytes.
  auto r = log->Read(3, 1 << 20);
  ASSERT_TRUE(r.ok());
  std::vector<uint8_t> got;
  ASSERT_TRUE(PartitionLog::ReadSlice(r->slice, &got).ok());
  EXPECT_EQ(got, Fetched(2, 3, 4, 2));
}

TEST_F(LogReplicaTest, RefusesABatchBelowTheEnd) {
  auto log = OpenLog();
  ASSERT_TRUE(ReplicaSync(*log, Fetched(3, 0, 1, 1)).ok());
  auto again = log->AppendReplica(Fetched(3, 0, 1, 1), {});
  EXPECT_EQ(again.status().code(), StatusCode::kOutOfRange);
  auto overlap = log->AppendReplica(Fetched(3, 2, 1, 3), {});
  EXPECT_EQ(overlap.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(log->end_offset(), 3);
}

TEST_F(LogReplicaTest, AllowsTheGapsCompactionLeaves) {
  auto log = OpenLog();
  ASSERT_TRUE(ReplicaSync(*log, Fetched(3, 0, 1, 1)).ok());
  auto gap = ReplicaSync(*log, Fetched(2, 10, 1, 2));
  ASSERT_TRUE(gap.ok()) << gap.status().ToString();
  EXPECT_EQ(gap->base_offset, 10);
  EXPECT_EQ(log->end_offset(), 12);
  // A read inside the gap gets the next batch.
  auto r = log->Read(5, 1 << 20);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first_offset, 10);
}

TEST_F(LogReplicaTest, ChecksTheCrc) {
  auto log = OpenLog();
  auto bad = Fetched(3, 0, 1, 1);
  bad[bad.size() - 1] ^= 0x40;  // a record byte, covered by the CRC
  EXPECT_EQ(log->AppendReplica(bad, {}).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(log->end_offset(), 0);
  std::vector<uint8_t> truncated = Fetched(3, 0, 1, 1);
  truncated.resize(truncated.size() - 5);
  EXPECT_FALSE(log->AppendReplica(truncated, {}).ok());
  EXPECT_EQ(log->end_offset(), 0);
}

TEST_F(LogReplicaTest, ReopenRecoversTheReplicatedOffsetsAndTakesLeaderAppendsAfter) {
  {
    auto log = OpenLog();
    ASSERT_TRUE(ReplicaSync(*log, Fetched(3, 0, 2, 1)).ok());
    ASSERT_TRUE(ReplicaSync(*log, Fetched(4, 7, 3, 2)).ok());
    ASSERT_TRUE(log->Close().ok());
  }
  auto log = OpenLog();
  EXPECT_EQ(log->end_offset(), 11);
  auto hs = Headers(*log);
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs[1].base_offset, 7);
  EXPECT_EQ(hs[1].leader_epoch, 3);
  // Become a leader: the next append takes offsets from the end.
  std::promise<Status> done;
  AppendOptions o;
  o.leader_epoch = 4;
  o.on_ack = [&](const Status& st, const AppendInfo&) { done.set_value(st); };
  auto info = log->Append(MakeBatch(1, 10, 1000, 3), std::move(o));
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(done.get_future().get().ok());
  EXPECT_EQ(info->base_offset, 11);
}

TEST_F(LogReplicaTest, TruncateThenAppendReplicaAgain) {
  auto log = OpenLog();
  ASSERT_TRUE(ReplicaSync(*log, Fetched(3, 0, 1, 1)).ok());
  ASSERT_TRUE(ReplicaSync(*log, Fetched(3, 3, 1, 2)).ok());
  ASSERT_TRUE(log->TruncateTo(3).ok());
  EXPECT_EQ(log->end_offset(), 3);
  auto again = ReplicaSync(*log, Fetched(5, 3, 2, 3));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(log->end_offset(), 8);
  auto hs = Headers(*log);
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs[1].leader_epoch, 2);
}

TEST_F(LogReplicaTest, TruncateFullyAndStartAtRestartsTheLogAtTheNewStart) {
  opts_.segment_bytes = 200;  // several segments
  auto log = OpenLog();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(ReplicaSync(*log, Fetched(2, i * 2, 1, i)).ok());
  ASSERT_GT(log->segment_count(), 1);
  ASSERT_TRUE(log->DeleteRecordsBefore(3).ok());  // a start file of the old log
  ASSERT_TRUE(log->TruncateFullyAndStartAt(40).ok());
  EXPECT_EQ(log->start_offset(), 40);
  EXPECT_EQ(log->end_offset(), 40);
  EXPECT_EQ(log->durable_end_offset(), 40);
  EXPECT_EQ(log->segment_count(), 1);
  EXPECT_EQ(log->Read(5, 1 << 20).status().code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(Headers(*log).empty());
  auto next = ReplicaSync(*log, Fetched(3, 40, 2, 9));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  ASSERT_TRUE(log->Close().ok());
  log.reset();
  // A restart finds the same: the fresh segment's base is the start.
  log = OpenLog();
  EXPECT_EQ(log->start_offset(), 40);
  EXPECT_EQ(log->end_offset(), 43);
  auto hs = Headers(*log);
  ASSERT_EQ(hs.size(), 1u);
  EXPECT_EQ(hs[0].base_offset, 40);
  // Lower than before is a fresh start too (nothing of the old start file is left).
  ASSERT_TRUE(log->TruncateFullyAndStartAt(7).ok());
  ASSERT_TRUE(log->Close().ok());
  log = OpenLog();
  EXPECT_EQ(log->start_offset(), 7);
  EXPECT_EQ(log->end_offset(), 7);
  EXPECT_FALSE(log->TruncateFullyAndStartAt(-1).ok());
}

TEST_F(LogReplicaTest, WhenDurableRunsOnceTheOffsetIsSynced) {
  opts_.flush_policy = FlushPolicy::kInterval;
  opts_.flush_ms = 3'600'000;  // no sync by time: only asked ones
  auto log = OpenLog();
  std::promise<Status> written;
  AppendOptions o;
  o.ack = AckLevel::kWritten;
  o.on_ack = [&](const Status& st, const AppendInfo&) { written.set_value(st); };
  ASSERT_TRUE(log->AppendReplica(Fetched(4, 0, 1, 1), std::move(o)).ok());
  ASSERT_TRUE(written.get_future().get().ok());
  ASSERT_LT(log->durable_end_offset(), 4);
  std::promise<int64_t> durable_then;
  log->WhenDurable(4, [&](const Status& st, const AppendInfo&) {
    EXPECT_TRUE(st.ok()) << st.ToString();
    durable_then.set_value(log->durable_end_offset());
  });
  EXPECT_GE(durable_then.get_future().get(), 4);
  // Already durable: at once, on this thread.
  bool ran = false;
  log->WhenDurable(2, [&](const Status& st, const AppendInfo&) { ran = st.ok(); });
  EXPECT_TRUE(ran);
  // Past the end: refused.
  Status past;
  log->WhenDurable(5, [&](const Status& st, const AppendInfo&) { past = st; });
  EXPECT_EQ(past.code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace sluice::storage
