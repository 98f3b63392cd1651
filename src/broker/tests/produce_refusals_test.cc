#include "broker/produce_refusals.h"

#include <gtest/gtest.h>

namespace sluice::broker {
namespace produce_refusals_test {
namespace {

using kafka::ErrorCode;

TEST(ProduceRefusalsTest, BatchesBehindARefusedOneGetItsError) {
  ProduceRefusals r;
  r.Refused("t", 2, 7, 0, 100, ErrorCode::kNotLeaderOrFollower, 1000);
  int32_t refused = -1;
  EXPECT_EQ(r.Check("t", 2, 7, 0, 102, 1010, &refused), ErrorCode::kNotLeaderOrFollower);
  EXPECT_EQ(refused, 100);
  // The resend itself, an older batch, another partition, producer or epoch: not held.
  EXPECT_EQ(r.Check("t", 2, 7, 0, 100, 1020), ErrorCode::kNone);
  EXPECT_EQ(r.Check("t", 2, 7, 0, 90, 1020), ErrorCode::kNone);
  EXPECT_EQ(r.Check("t", 1, 7, 0, 102, 1020), ErrorCode::kNone);
  EXPECT_EQ(r.Check("u", 2, 7, 0, 102, 1020), ErrorCode::kNone);
  EXPECT_EQ(r.Check("t", 2, 8, 0, 102, 1020), ErrorCode::kNone);
  EXPECT_EQ(r.Check("t", 2, -1, -1, -1, 1020), ErrorCode::kNone);
  EXPECT_EQ(r.Check("t", 2, 7, 0, 104, 1030), ErrorCode::kNotLeaderOrFollower);
  // Written: nothing owed any more.
  r.Written("t", 2, 7);
  EXPECT_EQ(r.Check("t", 2, 7, 0, 104, 1040), ErrorCode::kNone);
  EXPECT_EQ(r.size(), 0u);
}

TEST(ProduceRefusalsTest, TheLowestRefusedSequenceIsKept) {
  ProduceRefusals r;
  r.Refused("t", 0, 7, 0, 100, ErrorCode::kNotLeaderOrFollower, 1000);
  r.Refused("t", 0, 7, 0, 102, ErrorCode::kNotEnoughReplicas, 1001);
  int32_t refused = -1;
  EXPECT_EQ(r.Check("t", 0, 7, 0, 102, 1002, &refused), ErrorCode::kNotLeaderOrFollower);
  EXPECT_EQ(refused, 100);
  // A new epoch's refusal replaces the old epoch's.
  r.Refused("t", 0, 7, 1, 0, ErrorCode::kNotEnoughReplicas, 1003);
  EXPECT_EQ(r.Check("t", 0, 7, 1, 3, 1004), ErrorCode::kNotEnoughReplicas);
  EXPECT_EQ(r.Check("t", 0, 7, 0, 102, 1005), ErrorCode::kNone);  // and forgets the epoch
}

// Never a livelock: the requests in flight behind the refused one are at most five, and
// they arrive soon; past either bound the memory is dropped.
TEST(ProduceRefusalsTest, HeldAtMostFiveTimesAndThirtySeconds) {
  ProduceRefusals r;
  r.Refused("t", 0, 7, 0, 100, ErrorCode::kNotLeaderOrFollower, 0);
  for (int i = 0; i < ProduceRefusals::kMaxUses; ++i) {
    EXPECT_EQ(r.Check("t", 0, 7, 0, 101 + i, 10), ErrorCode::kNotLeaderOrFollower) << i;
  }
  EXPECT_EQ(r.Check("t", 0, 7, 0, 110, 10), ErrorCode::kNone);
  EXPECT_EQ(r.size(), 0u);
  r.Refused("t", 0, 7, 0, 100, ErrorCode::kNotLeaderOrFollower, 0);
  EXPECT_EQ(r.Check("t", 0, 7, 0, 101, ProduceRefusals::kMaxAgeMs + 1), ErrorCode::kNone);
  EXPECT_EQ(r.size(), 0u);
}

}  // namespace
}  // namespace produce_refusals_test
}  // namespace sluice::broker
