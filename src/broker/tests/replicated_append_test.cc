// ReplicatedAppend (coordinator_partitions.h): a coordinator's batch appended on the
// partition's owner shard of a real replicated leader and acknowledged by the high
// watermark — once the ISR follower has it; NOT_COORDINATOR from an older epoch or on a
// follower; COORDINATOR_NOT_AVAILABLE below min.insync.replicas or when the high
// watermark does not pass it in time (docs/design/0018-cluster.md, "coordmove").
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "broker/coordinator_partitions.h"
#include "broker/handlers/context.h"
#include "broker/shards.h"
#include "broker/tests/replica_test_util.h"
#include "kafka/protocol/records.h"

namespace sluice::broker {
namespace replicated_append_test {
namespace {

using kafka::ErrorCode;
using testing::WaitUntil;

class ReplicatedAppendTest : public testing::ReplicaClusterFixture {
 protected:
  // Appends one keyed record through node `id`'s owner shard of t-0, as a coordinator
  // leading it in `epoch`, and waits for the verdict.
  Status AppendThrough(int32_t id, int32_t epoch, int32_t timeout_ms = 10'000) {
    Broker& b = *node(id).broker;
    Shards& shards = b.context_for_testing().shards;
    const MetadataSnapshot::Topic* t = b.Snapshot()->Find("t");
    EXPECT_NE(t, nullptr);
    if (t == nullptr) return InternalError("no topic");
    const int shard = Shards::OwnerOf(t->info.id, 0, shards.size());
    auto append = ReplicatedAppend(shards, "t", 0, shard, epoch, timeout_ms);
    const std::string key = "key", value = "value";
    kafka::RecordInput in;
    in.key = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(key.data()), key.size());
    in.value =
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size());
    kafka::BatchBuilderOptions bo;
    std::vector<kafka::RecordInput> inputs{in};
    std::promise<Status> verdict;
    append(kafka::BuildBatch(bo, inputs), [&](const Status& st) { verdict.set_value(st); });
    return verdict.get_future().get();
  }
  int64_t LogEnd(int32_t id) { return node(id).View("t").log_end; }
};

TEST_F(ReplicatedAppendTest, AcknowledgedOnceTheIsrHasIt) {
  auto l = StartCluster(2);
  Status st = AppendThrough(1, l.leader_epoch);
  ASSERT_TRUE(st.ok()) << st.ToString();
  // Acknowledged by the high watermark: the follower holds the record.
  EXPECT_EQ(node(1).View("t").high_watermark, 1);
  EXPECT_TRUE(WaitUntil([&] { return LogEnd(2) == 1; }));
}

TEST_F(ReplicatedAppendTest, AnotherEpochOrAFollowerIsNotTheCoordinator) {
  auto l = StartCluster(2);
  Status older = AppendThrough(1, l.leader_epoch - 1);
  EXPECT_EQ(CoordinatorWriteError(older), ErrorCode::kNotCoordinator) << older.ToString();
  Status follower = AppendThrough(2, l.leader_epoch);
  EXPECT_EQ(CoordinatorWriteError(follower), ErrorCode::kNotCoordinator) << follower.ToString();
  EXPECT_EQ(LogEnd(1), 0);  // nothing appended
}

TEST_F(ReplicatedAppendTest, TooFewInSyncReplicasOrNoProgressIsNotAvailable) {
  StartCluster(2);
  node(2).Stop();
  // The follower away but still in the ISR: the high watermark cannot pass the batch.
  auto l = Elect("t", 0, 1, {1, 2}, std::vector<int32_t>{1, 2});
  Status timed_out = AppendThrough(1, l.leader_epoch, 300);
  EXPECT_EQ(CoordinatorWriteError(timed_out), ErrorCode::kCoordinatorNotAvailable)
      << timed_out.ToString();
  // The ISR of one with min.insync.replicas 2: refused before anything is appended.
  l = Elect("t", 0, 1, {1, 2}, std::vector<int32_t>{1}, 2);
  const int64_t end = LogEnd(1);
  Status refused = AppendThrough(1, l.leader_epoch);
  EXPECT_EQ(CoordinatorWriteError(refused), ErrorCode::kCoordinatorNotAvailable)
      << refused.ToString();
  EXPECT_EQ(LogEnd(1), end);
}

}  // namespace
}  // namespace replicated_append_test
}  // namespace sluice::broker
