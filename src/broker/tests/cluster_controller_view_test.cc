// ClusterView: etcd's keys in, the snapshot the shards serve and the partitions a broker
// leads out; a malformed value is refused with its key and leaves no trace.
#include "broker/cluster_controller_view.h"

#include <gtest/gtest.h>

namespace sluice::broker {
namespace cluster_controller_view_test {
namespace {

using namespace cluster;  // NOLINT

constexpr const char* kIncA = "AAAAAAAAAAAAAAAAAAAAAA";
constexpr const char* kIncB = "BBBBBBBBBBBBBBBBBBBBBA";
constexpr const char* kTopicId = "MkU3OEVBNTcwNTJENDM2Qg";

class ClusterViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const KeyLayout& k = view_.keys();
    ASSERT_TRUE(Put(k.Broker(1), ToJson(BrokerRegistration{"h1", 9001, "i1", 19001, kIncA, true})));
    ASSERT_TRUE(
        Put(k.Broker(2), ToJson(BrokerRegistration{"h2", 9002, "i2", 19002, kIncB, false})));
    ASSERT_TRUE(Put(k.Controller(), ToJson(ControllerValue{2, 5})));
    ASSERT_TRUE(
        Put(k.Topic("t"),
            ToJson(TopicAssignment{kTopicId, {{1, 2}, {2, 3}, {3}}, {{"retention.ms", "1000"}}})));
    ASSERT_TRUE(
        Put(k.Partition("t", 0), ToJson(PartitionState{1, 4, {{1, kIncA}, {2, kIncB}}, 5})));
    ASSERT_TRUE(Put(k.Partition("t", 1), ToJson(PartitionState{3, 2, {{3, kIncA}}, 5})));
  }
  bool Put(const std::string& key, const std::string& value) {
    ++revision_;
    Status st = view_.Put(key, value, revision_, revision_);
    return st.ok();
  }

  ClusterView view_{"test"};
  int64_t revision_ = 0;
};

TEST_F(ClusterViewTest, TheSnapshotCarriesBrokersControllerAndPartitions) {
  auto meta = view_.Snapshot(1, TopicConfig{});
  EXPECT_TRUE(meta->cluster);
  EXPECT_EQ(meta->node_id, 1);
  EXPECT_EQ(meta->controller_id, 2);
  ASSERT_EQ(meta->brokers.size(), 2u);
  EXPECT_EQ(meta->brokers[0], (MetadataSnapshot::Broker{1, "h1", 9001, "i1", 19001}));
  const MetadataSnapshot::Topic* t = meta->Find("t");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->info.partitions, 3);
  EXPECT_EQ(t->info.id.ToString(), kTopicId);
  EXPECT_EQ(t->info.config.retention_ms, 1000);
  ASSERT_EQ(t->partitions.size(), 3u);
  EXPECT_EQ(t->partitions[0].leader, 1);
  EXPECT_EQ(t->partitions[0].leader_epoch, 4);
  EXPECT_EQ(t->partitions[0].isr, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(t->partitions[0].offline.empty());
  // Broker 3 is not registered: its replicas are offline, and it leads nothing.
  EXPECT_EQ(t->partitions[1].leader, -1);
  EXPECT_EQ(t->partitions[1].offline, (std::vector<int32_t>{3}));
  // No state written yet: no leader.
  EXPECT_EQ(t->partitions[2].leader, -1);
  EXPECT_EQ(t->partitions[2].replicas, (std::vector<int32_t>{3}));
}

TEST_F(ClusterViewTest, ABrokerThatLostItsLeaseNamesItselfLeaderOfNothing) {
  // Broker 1's lease is gone but etcd has not deleted its key yet (the view still has it):
  // its own snapshot must not send clients back to it.
  auto meta = view_.Snapshot(1, TopicConfig{}, /*self_live=*/false);
  ASSERT_EQ(meta->brokers.size(), 1u);
  EXPECT_EQ(meta->brokers[0].node_id, 2);
  const MetadataSnapshot::Topic* t = meta->Find("t");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->partitions[0].leader, -1);
  EXPECT_EQ(t->partitions[0].offline, (std::vector<int32_t>{1}));
  EXPECT_EQ(t->partitions[0].isr, (std::vector<int32_t>{1, 2}));  // etcd's, unchanged
  // Another broker's view of the same state still names broker 1.
  EXPECT_EQ(view_.Snapshot(2, TopicConfig{})->Find("t")->partitions[0].leader, 1);
}

TEST_F(ClusterViewTest, LedByNamesEachPartitionWithItsEpoch) {
  auto led = view_.LedBy(1);
  ASSERT_EQ(led.size(), 1u);
  EXPECT_EQ(led.begin()->first, (std::pair<std::string, int32_t>{"t", 0}));
  EXPECT_EQ(led.begin()->second, 4);
  EXPECT_EQ(view_.LedBy(3).size(), 1u);  // etcd says so, registered or not
  EXPECT_TRUE(view_.LedBy(2).empty());
  // A state outside the topic's assignment leads nothing.
  ASSERT_TRUE(Put(view_.keys().Partition("t", 9), ToJson(PartitionState{2, 0, {{2, kIncB}}, 5})));
  EXPECT_TRUE(view_.LedBy(2).empty());
}

// What a CreateTopics / CreatePartitions answer waits for (AwaitMetadata): the snapshot's
// rule for every partition asked, the topic by id.
TEST_F(ClusterViewTest, PartitionsLedFollowsTheSnapshotsLeaders) {
  EXPECT_TRUE(view_.PartitionsLed("t", kTopicId, 1, 1, true));
  EXPECT_TRUE(view_.PartitionsLed("t", "", 1, 1, true));  // any id
  EXPECT_FALSE(view_.PartitionsLed("t", "AnotherTopicIdAAAAAAAAA", 1, 1, true));
  EXPECT_FALSE(view_.PartitionsLed("t", kTopicId, 2, 1, true));  // broker 3 unregistered
  EXPECT_FALSE(view_.PartitionsLed("t", kTopicId, 4, 1, true));  // past the assignment
  EXPECT_FALSE(view_.PartitionsLed("nope", "", 1, 1, true));
  // Broker 1 without its lease leads nothing in its own snapshot; the others' still do.
  EXPECT_FALSE(view_.PartitionsLed("t", kTopicId, 1, 1, false));
  EXPECT_TRUE(view_.PartitionsLed("t", kTopicId, 1, 2, false));
  // Once broker 3 registers and partition 2 has its state, the whole topic is led.
  const KeyLayout& k = view_.keys();
  ASSERT_TRUE(Put(k.Broker(3), ToJson(BrokerRegistration{"h3", 9003, "i3", 19003, kIncA, true})));
  EXPECT_FALSE(view_.PartitionsLed("t", kTopicId, 3, 1, true));
  ASSERT_TRUE(Put(k.Partition("t", 2), ToJson(PartitionState{3, 0, {{3, kIncA}}, 5})));
  EXPECT_TRUE(view_.PartitionsLed("t", kTopicId, 3, 1, true));
}

TEST_F(ClusterViewTest, LiveCarriesIncarnationsAndCleanFlags) {
  LiveBrokers live = view_.Live();
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[1].incarnation, kIncA);
  EXPECT_FALSE(live[2].clean);
}

TEST_F(ClusterViewTest, AnUncleanRegistrationTheControllerHandledCountsAsClean) {
  const KeyLayout& k = view_.keys();
  // An incarnation record from before the registration (a previous run's): still unclean.
  ASSERT_TRUE(Put(k.Broker(2), ToJson(BrokerRegistration{"h2", 9002, "i2", 19002, kIncB, false})));
  ASSERT_TRUE(view_.Put(k.Incarnation(2), ToJson(IncarnationValue{kIncB}), 1, 1).ok());
  EXPECT_FALSE(view_.Live()[2].clean);
  // Written after it (the controller took 2 out of every ISR, then recorded it): clean for
  // elections, since any ISR entry of 2 was added back caught up since.
  ASSERT_TRUE(Put(k.Incarnation(2), ToJson(IncarnationValue{kIncB})));
  EXPECT_TRUE(view_.Live()[2].clean);
  // Another incarnation's record does not count.
  ASSERT_TRUE(Put(k.Broker(2), ToJson(BrokerRegistration{"h2", 9002, "i2", 19002, kIncA, false})));
  EXPECT_FALSE(view_.Live()[2].clean);
}

TEST_F(ClusterViewTest, AMalformedValueIsRefusedAndForgotten) {
  Status st = view_.Put(view_.keys().Partition("t", 0), "{\"leader\": \"one\"}", 99, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/sluice/test/partitions/t/0"), std::string::npos) << st.message();
  EXPECT_TRUE(view_.LedBy(1).empty());
  EXPECT_FALSE(view_.Put(view_.keys().Broker(1), "not json", 100, 100).ok());
  EXPECT_EQ(view_.brokers().count(1), 0u);
  EXPECT_FALSE(view_.Put(view_.keys().Controller(), "[]", 101, 101).ok());
  EXPECT_EQ(view_.Snapshot(1, TopicConfig{})->controller_id, -1);
  // A topic whose configs this broker cannot read is left out of the snapshot.
  ASSERT_TRUE(Put(view_.keys().Topic("odd"),
                  ToJson(TopicAssignment{kTopicId, {{1}}, {{"retention.ms", "soon"}}})));
  EXPECT_EQ(view_.Snapshot(1, TopicConfig{})->Find("odd"), nullptr);
  EXPECT_FALSE(view_.TopicInfoOf("odd", TopicConfig{}).ok());
  // Keys of no known kind are ignored.
  EXPECT_TRUE(view_.Put("/sluice/test/future/thing", "?", 102, 102).ok());
}

TEST_F(ClusterViewTest, AnOlderValueOrDeletionDoesNotUndoANewerOne) {
  const std::string key = view_.keys().Partition("t", 0);
  // This broker's own write at revision 50 entered the view first...
  ASSERT_TRUE(view_.Put(key, ToJson(PartitionState{2, 5, {{2, kIncB}}, 6}), 50, 5).ok());
  // ...then the watch brings what came before it: ignored.
  ASSERT_TRUE(view_.Put(key, ToJson(PartitionState{1, 4, {{1, kIncA}}, 5}), 40, 5).ok());
  EXPECT_EQ(view_.partitions().at({"t", 0}).value.leader, 2);
  view_.Delete(key, 45);
  EXPECT_EQ(view_.partitions().count({"t", 0}), 1u);
  view_.Delete(key, 51);
  EXPECT_EQ(view_.partitions().count({"t", 0}), 0u);
}

TEST_F(ClusterViewTest, DeletesForgetKeys) {
  view_.Delete(view_.keys().Broker(1));
  view_.Delete(view_.keys().Controller());
  view_.Delete(view_.keys().Topic("t"));
  auto meta = view_.Snapshot(2, TopicConfig{});
  EXPECT_EQ(meta->brokers.size(), 1u);
  EXPECT_EQ(meta->controller_id, -1);
  EXPECT_EQ(meta->Find("t"), nullptr);
  EXPECT_TRUE(view_.LedBy(1).empty());  // its topic is gone
}

}  // namespace
}  // namespace cluster_controller_view_test
}  // namespace sluice::broker
