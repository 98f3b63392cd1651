// Controlled shutdown: the shutdown/<node> key and value (malformed input refused), the
// controller's moves (MoveAway) and what a stopping broker waits for (ClusterView).
#include "broker/controlled_shutdown.h"

#include <gtest/gtest.h>

#include "broker/cluster_controller_view.h"

namespace sluice::broker {
namespace controlled_shutdown_test {
namespace {

using namespace cluster;  // NOLINT

constexpr const char* kInc1 = "AAAAAAAAAAAAAAAAAAAAAA";
constexpr const char* kInc2 = "BBBBBBBBBBBBBBBBBBBBBA";
constexpr const char* kInc3 = "CCCCCCCCCCCCCCCCCCCCCA";
constexpr const char* kTopicId = "MkU3OEVBNTcwNTJENDM2Qg";

LiveBrokers ThreeLive() { return {{1, {kInc1, true}}, {2, {kInc2, true}}, {3, {kInc3, true}}}; }

PartitionState State(int32_t leader, int32_t epoch, std::vector<int32_t> isr) {
  PartitionState s;
  s.leader = leader;
  s.leader_epoch = epoch;
  s.controller_epoch = 1;
  for (int32_t n : isr) s.isr.push_back({n, n == 1 ? kInc1 : n == 2 ? kInc2 : kInc3});
  return s;
}

std::vector<int32_t> Nodes(const PartitionState& s) {
  std::vector<int32_t> out;
  for (const IsrMember& m : s.isr) out.push_back(m.node);
  return out;
}

TEST(ShutdownRequestTest, KeyAndValueRoundTrip) {
  KeyLayout keys("c");
  EXPECT_EQ(ShutdownKey(keys, 7), "/sluice/c/shutdown/7");
  EXPECT_EQ(NodeOfShutdownKey(keys, "/sluice/c/shutdown/7"), 7);
  EXPECT_EQ(NodeOfShutdownKey(keys, ShutdownKey(keys, 2147483647)), 2147483647);
  auto parsed = ParseShutdownRequest(ToJson(ShutdownRequest{123456789012}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->broker_epoch, 123456789012);
  // Unknown fields are ignored (a later version may add some).
  EXPECT_TRUE(ParseShutdownRequest(R"({"broker_epoch":5,"reason":"x"})").ok());
}

TEST(ShutdownRequestTest, MalformedKeysNameNoNode) {
  KeyLayout keys("c");
  for (const char* key :
       {"/sluice/c/shutdown/", "/sluice/c/shutdown/-1", "/sluice/c/shutdown/+1",
        "/sluice/c/shutdown/01", "/sluice/c/shutdown/1x", "/sluice/c/shutdown/2147483648",
        "/sluice/c/shutdown/99999999999", "/sluice/c/shutdown/1/2", "/sluice/d/shutdown/1",
        "/sluice/c/brokers/1", "/sluice/c/shutdown/ 1"}) {
    EXPECT_FALSE(NodeOfShutdownKey(keys, key).has_value()) << key;
  }
}

TEST(ShutdownRequestTest, MalformedValuesAreRefused) {
  for (const std::string& bad :
       {std::string(""), std::string("{"), std::string("[]"), std::string("5"), std::string("{}"),
        std::string(R"({"broker_epoch":"5"})"), std::string(R"({"broker_epoch":-1})"),
        std::string(R"({"broker_epoch":1.5})"),
        std::string(R"({"broker_epoch":18446744073709551615})"),
        std::string(R"({"broker_epoch":null})"), std::string(R"({"broker_epoch":5)"),
        std::string(R"({"broker_epoch":5} trailing)"),
        "{\"pad\":\"" + std::string(5000, 'x') + "\",\"broker_epoch\":1}"}) {
    EXPECT_FALSE(ParseShutdownRequest(bad).ok()) << bad.substr(0, 60);
  }
}

TEST(MoveAwayTest, ALeavingLeaderHandsOverToTheNextInSyncReplica) {
  auto next = MoveAway({1, 2, 3}, State(1, 4, {1, 2, 3}), ThreeLive(), {1}, 9);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->leader, 2);
  EXPECT_EQ(next->leader_epoch, 5);
  EXPECT_EQ(Nodes(*next), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(next->controller_epoch, 9);
}

TEST(MoveAwayTest, ALeavingFollowerLeavesTheIsrInANewEpoch) {
  auto next = MoveAway({1, 2, 3}, State(2, 4, {2, 1, 3}), ThreeLive(), {1}, 9);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->leader, 2);
  // The leader starts an epoch without the follower's progress: it never waits for it.
  EXPECT_EQ(next->leader_epoch, 5);
  EXPECT_EQ(Nodes(*next), (std::vector<int32_t>{2, 3}));
}

TEST(MoveAwayTest, WithNoOtherElectableReplicaTheLeaderStays) {
  // Replication factor 1: offline only when the broker is gone.
  EXPECT_FALSE(MoveAway({1}, State(1, 0, {1}), ThreeLive(), {1}, 9).has_value());
  // The other ISR member is dead, or another incarnation than the one that joined.
  LiveBrokers live = ThreeLive();
  live.erase(2);
  EXPECT_FALSE(MoveAway({1, 2}, State(1, 3, {1, 2}), live, {1}, 9).has_value());
  live = ThreeLive();
  live[2].incarnation = kInc3;
  EXPECT_FALSE(MoveAway({1, 2}, State(1, 3, {1, 2}), live, {1}, 9).has_value());
  // An unclean one that is not the ISR's last member.
  live = ThreeLive();
  live[2].clean = false;
  EXPECT_FALSE(MoveAway({1, 2}, State(1, 3, {1, 2}), live, {1}, 9).has_value());
}

TEST(MoveAwayTest, AnotherLeavingBrokerIsNeverChosen) {
  auto next = MoveAway({1, 2, 3}, State(1, 4, {1, 2, 3}), ThreeLive(), {1, 2}, 9);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->leader, 3);
  EXPECT_EQ(Nodes(*next), (std::vector<int32_t>{3}));
}

TEST(MoveAwayTest, PartitionsWithoutTheLeavingBrokerDoNotChange) {
  EXPECT_FALSE(MoveAway({2, 3, 1}, State(2, 4, {2, 3}), ThreeLive(), {1}, 9).has_value());
  EXPECT_FALSE(MoveAway({1, 2, 3}, State(2, 4, {2, 3, 1}), ThreeLive(), {}, 9).has_value());
}

class ShutdownViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const KeyLayout& k = view_.keys();
    Put(k.Broker(1), ToJson(BrokerRegistration{"h1", 9001, "h1", 9001, kInc1, true}), 10);
    Put(k.Broker(2), ToJson(BrokerRegistration{"h2", 9002, "h2", 9002, kInc2, true}), 11);
    Put(k.Broker(3), ToJson(BrokerRegistration{"h3", 9003, "h3", 9003, kInc3, true}), 12);
    Put(k.Topic("t"), ToJson(TopicAssignment{kTopicId, {{1, 2, 3}, {2, 3, 1}, {1}}, {}}), 13);
    Put(k.Partition("t", 0), ToJson(State(1, 0, {1, 2, 3})), 14);
    Put(k.Partition("t", 1), ToJson(State(2, 0, {2, 3, 1})), 15);
    Put(k.Partition("t", 2), ToJson(State(1, 0, {1})), 16);
  }
  void Put(const std::string& key, const std::string& value, int64_t create_revision) {
    ASSERT_TRUE(view_.Put(key, value, ++revision_ + 100, create_revision).ok()) << key;
  }

  ClusterView view_{"test"};
  int64_t revision_ = 0;
};

TEST_F(ShutdownViewTest, OnlyTheCurrentRegistrationsRequestCounts) {
  EXPECT_TRUE(view_.Leaving().empty());
  // A request of an older registration (another broker epoch) is not this one's.
  Put(ShutdownKey(view_.keys(), 1), ToJson(ShutdownRequest{9}), 200);
  EXPECT_TRUE(view_.Leaving().empty());
  Put(ShutdownKey(view_.keys(), 1), ToJson(ShutdownRequest{10}), 200);
  EXPECT_EQ(view_.Leaving(), (std::set<int32_t>{1}));
  // Gone with the broker's lease.
  view_.Delete(ShutdownKey(view_.keys(), 1));
  EXPECT_TRUE(view_.Leaving().empty());
  // A malformed value leaves no request.
  EXPECT_FALSE(view_.Put(ShutdownKey(view_.keys(), 2), "{\"broker_epoch\":-3}", 300, 300).ok());
  EXPECT_TRUE(view_.shutdowns().empty());
}

TEST_F(ShutdownViewTest, TheStoppingBrokerWaitsForWhatCanBeMoved) {
  // Broker 1 leads t-0 (movable), follows t-1 (movable), leads t-2 alone (not movable).
  EXPECT_EQ(view_.PartitionsToMoveAway(1), 2u);
  Put(view_.keys().Partition("t", 0), ToJson(State(2, 1, {2, 3})), 14);
  EXPECT_EQ(view_.PartitionsToMoveAway(1), 1u);
  Put(view_.keys().Partition("t", 1), ToJson(State(2, 1, {2, 3})), 15);
  EXPECT_EQ(view_.PartitionsToMoveAway(1), 0u);
  // Broker 3 is in two ISRs.
  EXPECT_EQ(view_.PartitionsToMoveAway(3), 2u);
}

}  // namespace
}  // namespace controlled_shutdown_test
}  // namespace sluice::broker
