// The controller's decisions without etcd: Kafka's replica assignment, elections from the
// ISR, ISR removal, and the writes they produce — applied to an in-memory model of etcd's
// transaction (compare mod_revision, then put/delete at a new revision) to show the
// fencing: a write made from a stale read, or by a replaced controller, does not apply.
#include "cluster/controller_decisions.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "cluster/metadata_txn.h"

namespace sluice::cluster {
namespace {

constexpr const char* kIncA = "AAAAAAAAAAAAAAAAAAAAAA";
constexpr const char* kIncB = "BBBBBBBBBBBBBBBBBBBBBA";
constexpr const char* kIncC = "CCCCCCCCCCCCCCCCCCCCCA";
constexpr const char* kIncNew = "ZZZZZZZZZZZZZZZZZZZZZA";

// etcd's store as a transaction sees it: every key's value and mod_revision, one revision
// for the whole store, bumped by each transaction that changes something.
class MemoryKv {
 public:
  bool Apply(const MetadataWrite& w) {
    for (const auto& c : w.compares) {
      if (ModRevision(c.key) != c.mod_revision) return false;
    }
    ++revision_;
    for (const auto& p : w.puts) kv_[p.key] = {p.value, revision_};
    for (const auto& k : w.deletes) kv_.erase(k);
    for (const auto& prefix : w.delete_prefixes) {
      std::erase_if(kv_, [&](const auto& e) { return e.first.starts_with(prefix); });
    }
    return true;
  }
  int64_t ModRevision(const std::string& key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? 0 : it->second.second;
  }
  std::string Value(const std::string& key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? "" : it->second.first;
  }
  bool Has(const std::string& key) const { return kv_.count(key) != 0; }
  size_t size() const { return kv_.size(); }

 private:
  std::map<std::string, std::pair<std::string, int64_t>> kv_;
  int64_t revision_ = 0;
};

LiveBrokers Live(std::initializer_list<int32_t> nodes) {
  static const std::map<int32_t, std::string> kIncs = {{1, kIncA}, {2, kIncB}, {3, kIncC}};
  LiveBrokers live;
  for (int32_t n : nodes) live[n] = {kIncs.at(n), true};
  return live;
}

PartitionState State(int32_t leader, int32_t epoch, std::initializer_list<int32_t> isr) {
  static const std::map<int32_t, std::string> kIncs = {{1, kIncA}, {2, kIncB}, {3, kIncC}};
  PartitionState s;
  s.leader = leader;
  s.leader_epoch = epoch;
  for (int32_t n : isr) s.isr.push_back({n, kIncs.at(n)});
  s.controller_epoch = 1;
  return s;
}

std::vector<int32_t> IsrNodes(const PartitionState& s) {
  std::vector<int32_t> out;
  for (const IsrMember& m : s.isr) out.push_back(m.node);
  return out;
}

// ---------------------------------------------------------------------------------------
// Assignment

TEST(AssignmentTest, MatchesKafkasDocumentedExample) {
  // AdminUtils' javadoc: five brokers, ten partitions, three replicas, from broker 0.
  Assignment a = AssignReplicas({4, 2, 0, 3, 1}, 10, 3, 0, 0);
  ASSERT_EQ(a.error, AssignmentError::kNone);
  ASSERT_EQ(a.replicas.size(), 10u);
  EXPECT_EQ(a.replicas[0], (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(a.replicas[4], (std::vector<int32_t>{4, 0, 1}));
  EXPECT_EQ(a.replicas[5], (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(a.replicas[9], (std::vector<int32_t>{4, 1, 2}));
}

TEST(AssignmentTest, SpreadsReplicasAndLeadersEvenlyFromAnyStart) {
  for (int32_t start = 0; start < 6; ++start) {
    for (int32_t shift = 0; shift < 6; ++shift) {
      Assignment a = AssignReplicas({1, 2, 3, 4, 5, 6}, 12, 3, start, shift);
      ASSERT_EQ(a.error, AssignmentError::kNone);
      std::map<int32_t, int> replicas, leaders;
      for (const auto& r : a.replicas) {
        ASSERT_EQ(r.size(), 3u);
        EXPECT_EQ(std::set<int32_t>(r.begin(), r.end()).size(), 3u);  // distinct brokers
        ++leaders[r[0]];
        for (int32_t n : r) ++replicas[n];
      }
      for (int32_t n = 1; n <= 6; ++n) {
        EXPECT_EQ(replicas[n], 6) << "broker " << n << " start " << start << " shift " << shift;
        EXPECT_EQ(leaders[n], 2);
      }
    }
  }
  // Three brokers, replication factor 3: every broker holds every partition, and leads one
  // in three.
  Assignment three = AssignReplicas({1, 2, 3}, 3, 3, 1, 2);
  std::set<int32_t> first;
  for (const auto& r : three.replicas) first.insert(r[0]);
  EXPECT_EQ(first.size(), 3u);
}

TEST(AssignmentTest, RefusesWhatKafkaRefuses) {
  Assignment a = AssignReplicas({1, 2, 3}, 4, 4, 0, 0);
  EXPECT_EQ(a.error, AssignmentError::kInvalidReplicationFactor);
  EXPECT_EQ(a.message, "Replication factor: 4 larger than available brokers: 3.");
  EXPECT_EQ(AssignReplicas({1, 2, 3}, 4, 0, 0, 0).error,
            AssignmentError::kInvalidReplicationFactor);
  EXPECT_EQ(AssignReplicas({1, 2, 3}, 0, 1, 0, 0).error, AssignmentError::kInvalidPartitions);
  EXPECT_EQ(AssignReplicas({}, 1, 1, 0, 0).error, AssignmentError::kInvalidReplicationFactor);
  // Replication factor 1 works with one broker (the n - 1 of the follower shift is unused).
  Assignment one = AssignReplicas({7}, 3, 1, 0, 0);
  ASSERT_EQ(one.error, AssignmentError::kNone);
  EXPECT_EQ(one.replicas, (std::vector<std::vector<int32_t>>{{7}, {7}, {7}}));
}

TEST(AssignmentTest, NewPartitionsContinueTheTopicsAssignment) {
  const std::vector<int32_t> brokers = {1, 2, 3};
  for (int32_t start = 0; start < 3; ++start) {
    Assignment whole = AssignReplicas(brokers, 7, 2, start, 1);
    Assignment first = AssignReplicas(brokers, 3, 2, start, 1);
    Assignment more = AssignNewPartitions(first.replicas, brokers, 4, 1);
    ASSERT_EQ(more.error, AssignmentError::kNone);
    ASSERT_EQ(more.replicas.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(more.replicas[i], whole.replicas[3 + i]);
  }
  // The replication factor is partition 0's, even when brokers joined since.
  Assignment grown = AssignNewPartitions({{2}}, {1, 2, 3, 4}, 2, 0);
  ASSERT_EQ(grown.error, AssignmentError::kNone);
  for (const auto& r : grown.replicas) EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(AssignNewPartitions({{1, 2, 3}}, {1, 2}, 1, 0).error,
            AssignmentError::kInvalidReplicationFactor);
}

// ---------------------------------------------------------------------------------------
// Elections

TEST(ElectionTest, ALeadersDeathElectsTheFirstIsrReplicaInAssignmentOrder) {
  auto next = Reelect({1, 3, 2}, State(1, 4, {1, 2, 3}), Live({2, 3}), {}, 9);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->leader, 3);  // assignment order, not ISR order
  EXPECT_EQ(next->leader_epoch, 5);
  EXPECT_EQ(IsrNodes(*next), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(next->controller_epoch, 9);
}

TEST(ElectionTest, AReplicaOutsideTheIsrIsNeverElected) {
  // 2 is live but out of the ISR: with 1 gone, 3 leads.
  auto next = Reelect({1, 2, 3}, State(1, 0, {1, 3}), Live({2, 3}), {}, 1);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->leader, 3);
  // No live ISR member: offline, the last member kept, the epoch still moves on.
  auto offline = Reelect({1, 2}, State(1, 2, {1}), Live({2}), {}, 1);
  ASSERT_TRUE(offline.has_value());
  EXPECT_EQ(offline->leader, -1);
  EXPECT_EQ(offline->leader_epoch, 3);
  EXPECT_EQ(IsrNodes(*offline), (std::vector<int32_t>{1}));
}

TEST(ElectionTest, AnOfflinePartitionComesBackWithItsLastIsrMember) {
  PartitionState offline = State(-1, 3, {1});
  EXPECT_FALSE(Reelect({1}, offline, Live({}), {}, 1).has_value());  // nothing changes
  auto back = Reelect({1}, offline, Live({1}), {}, 2);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->leader, 1);
  EXPECT_EQ(back->leader_epoch, 4);
}

TEST(ElectionTest, AFollowersDeathShrinksTheIsrAndKeepsTheEpoch) {
  auto next = Reelect({1, 2, 3}, State(1, 4, {1, 2, 3}), Live({1, 3}), {}, 1);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->leader, 1);
  EXPECT_EQ(next->leader_epoch, 4);
  EXPECT_EQ(IsrNodes(*next), (std::vector<int32_t>{1, 3}));
  // Nothing to do when every member lives.
  EXPECT_FALSE(Reelect({1, 2, 3}, State(1, 4, {1, 2, 3}), Live({1, 2, 3}), {}, 1).has_value());
}

TEST(ElectionTest, AReincarnatedBrokerLeavesEveryIsrAndIsNotElected) {
  LiveBrokers live = Live({1, 2, 3});
  live[1].incarnation = kIncNew;  // broker 1 came back with an empty data directory
  auto next = Reelect({1, 2, 3}, State(1, 4, {1, 2, 3}), live, {1}, 1);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->leader, 2);
  EXPECT_EQ(next->leader_epoch, 5);
  EXPECT_EQ(IsrNodes(*next), (std::vector<int32_t>{2, 3}));
  // As the only ISR member, a wiped broker is still not elected: its data is gone.
  auto alone = Reelect({1}, State(-1, 4, {1}), live, {1}, 1);
  EXPECT_FALSE(alone.has_value());
  EXPECT_EQ(ChooseLeader({1}, State(-1, 4, {1}), live), -1);
}

TEST(ElectionTest, AnUncleanBrokerLeadsOnlyAsTheLastIsrMember) {
  LiveBrokers live = Live({1, 2});
  live[1].clean = false;
  // Followers with all the data exist: 1 leaves the ISR, 2 leads.
  auto next = Reelect({1, 2}, State(1, 0, {1, 2}), live, {1}, 1);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->leader, 2);
  EXPECT_EQ(IsrNodes(*next), (std::vector<int32_t>{2}));
  // No other copy can hold more than it does: it leads (replication factor 1).
  auto alone = Reelect({1}, State(-1, 0, {1}), live, {1}, 1);
  ASSERT_TRUE(alone.has_value());
  EXPECT_EQ(alone->leader, 1);
}

TEST(ElectionTest, ADeadLeaderStaysInTheIsrWhenOnlyAnUncleanFollowerIsLeft) {
  // Leader 1 dies; follower 2 restarted uncleanly (same incarnation) and may have lost
  // records it had reported. Removing 1 would leave {2}, which the last-member rule would
  // elect: an unclean election. The partition goes offline with 1 kept in the ISR.
  LiveBrokers live = Live({2});
  live[2].clean = false;
  auto next = Reelect({1, 2}, State(1, 5, {1, 2}), live, {}, 1);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->leader, -1);
  EXPECT_EQ(next->leader_epoch, 6);
  EXPECT_EQ(IsrNodes(*next), (std::vector<int32_t>{1, 2}));
  // Another pass before 1 returns (any change of the view) keeps it: dropping the dead
  // member now would make 2 the last member, elected alone (seen in cluster_faults.py).
  EXPECT_FALSE(Reelect({1, 2}, *next, live, {}, 2).has_value());
  // When 1 returns it leads again, with everything it acknowledged.
  auto back = Reelect({1, 2}, *next, Live({1, 2}), {}, 1);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->leader, 1);
}

TEST(ElectionTest, DeadMembersOfAnOfflinePartitionStayUntilOneCanLead) {
  // Leader 1 dies while 2 and 3 are alive but not electable (unclean starts the controller
  // has not handled): offline, every member kept. A later pass with the same brokers
  // changes nothing; once 3 is electable it leads and the dead 1 leaves.
  LiveBrokers live = Live({2, 3});
  live[2].clean = false;
  live[3].clean = false;
  auto offline = Reelect({1, 2, 3}, State(1, 6, {1, 2, 3}), live, {}, 1);
  ASSERT_TRUE(offline.has_value());
  EXPECT_EQ(offline->leader, -1);
  EXPECT_EQ(IsrNodes(*offline), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(Reelect({1, 2, 3}, *offline, live, {}, 1).has_value());
  live[3].clean = true;
  auto back = Reelect({1, 2, 3}, *offline, live, {}, 1);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->leader, 3);
  EXPECT_EQ(back->leader_epoch, 8);
  EXPECT_EQ(IsrNodes(*back), (std::vector<int32_t>{2, 3}));
}

TEST(ElectionTest, AMemberOfAnIncarnationThatIsGoneLeavesOnceSomeoneLeads) {
  // Broker 3 led, was killed and came back wiped while no one else was registered: its old
  // entry stayed (the leader is kept while nobody can lead), and its new registration was
  // handled then. Once 1 can lead, the old entry must go: no pass removes 3 as "removed"
  // again, and it is live by node id (cluster_faults.py --seed 22: an ISR holding a copy
  // that no longer exists, never whole again).
  LiveBrokers live = Live({1, 2, 3});
  live[3].incarnation = kIncNew;
  auto next = Reelect({3, 1, 2}, State(-1, 2, {3, 1, 2}), live, {}, 5);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->leader, 1);
  EXPECT_EQ(IsrNodes(*next), (std::vector<int32_t>{1, 2}));
  // A leader that stays: the stale member still leaves.
  auto kept = Reelect({1, 2, 3}, State(1, 4, {1, 2, 3}), live, {}, 5);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->leader, 1);
  EXPECT_EQ(kept->leader_epoch, 4);
  EXPECT_EQ(IsrNodes(*kept), (std::vector<int32_t>{1, 2}));
}

// ---------------------------------------------------------------------------------------
// Writes and fencing

class ControllerWritesTest : public ::testing::Test {
 protected:
  // Broker `node` becomes the controller; its fence.
  ControllerFence Elect(int32_t node) {
    int64_t previous = 0;
    if (kv_.Has(keys_.ControllerEpoch())) {
      previous = ParseControllerEpochValue(kv_.Value(keys_.ControllerEpoch()))->epoch;
    }
    MetadataWrite w = ControllerElectionWrite(keys_, node, 77, previous,
                                              kv_.ModRevision(keys_.ControllerEpoch()));
    EXPECT_TRUE(kv_.Apply(w));
    return {previous + 1, kv_.ModRevision(keys_.ControllerEpoch())};
  }
  PartitionState Read(const std::string& topic, int32_t p) {
    auto s = ParsePartitionState(kv_.Value(keys_.Partition(topic, p)));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : PartitionState{};
  }

  KeyLayout keys_{"test"};
  MemoryKv kv_;
};

TEST_F(ControllerWritesTest, CreatingATopicWritesItsAssignmentAndInitialStates) {
  ControllerFence fence = Elect(1);
  TopicAssignment topic{kIncA, AssignReplicas({1, 2, 3}, 250, 3, 0, 0).replicas, {}};
  std::vector<MetadataWrite> writes =
      CreateTopicWrites(keys_, fence, "orders", topic, Live({1, 2, 3}));
  ASSERT_EQ(writes.size(), 4u);  // the topic, then 100 + 100 + 50 states
  for (const MetadataWrite& w : writes) {
    EXPECT_LE(w.puts.size(), kMaxPutsPerWrite);
    EXPECT_LE(w.compares.size(), 128u);
    EXPECT_TRUE(kv_.Apply(w));
  }
  EXPECT_EQ(ParseTopicAssignment(kv_.Value(keys_.Topic("orders")))->partitions.size(), 250u);
  PartitionState p7 = Read("orders", 7);
  EXPECT_EQ(p7.leader, topic.partitions[7][0]);
  EXPECT_EQ(p7.leader_epoch, 0);
  EXPECT_EQ(p7.isr.size(), 3u);
  EXPECT_EQ(p7.controller_epoch, fence.epoch);
  // A second creation of the same name fails its CAS and changes nothing.
  const size_t before = kv_.size();
  EXPECT_FALSE(kv_.Apply(CreateTopicWrites(keys_, fence, "orders", topic, Live({1}))[0]));
  EXPECT_EQ(kv_.size(), before);
}

TEST_F(ControllerWritesTest, StatesACreationLeftUnwrittenAreWrittenLater) {
  ControllerFence fence = Elect(1);
  TopicAssignment topic{kIncA, AssignReplicas({1, 2}, 150, 2, 0, 0).replicas, {}};
  std::vector<MetadataWrite> writes = CreateTopicWrites(keys_, fence, "t", topic, Live({1, 2}));
  ASSERT_EQ(writes.size(), 3u);
  ASSERT_TRUE(kv_.Apply(writes[0]));
  ASSERT_TRUE(kv_.Apply(writes[1]));  // the controller died before the last one
  EXPECT_FALSE(kv_.Has(keys_.Partition("t", 100)));
  // The next controller writes partitions 100-149; 0-99 exist and are left alone.
  ControllerFence next = fence;
  auto rest = InitialStateWrites(keys_, next, "t", topic.partitions, 100, Live({1, 2}));
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_TRUE(kv_.Apply(rest[0]));
  EXPECT_EQ(Read("t", 149).leader, topic.partitions[149][0]);
  // Written from an earlier partition, the write would overwrite nothing: it fails.
  EXPECT_FALSE(kv_.Apply(InitialStateWrites(keys_, next, "t", topic.partitions, 99, Live({1}))[0]));
}

TEST_F(ControllerWritesTest, AnElectionFromAStaleReadFails) {
  ControllerFence fence = Elect(1);
  TopicAssignment topic{kIncA, {{1, 2, 3}}, {}};
  for (const MetadataWrite& w : CreateTopicWrites(keys_, fence, "t", topic, Live({1, 2, 3}))) {
    ASSERT_TRUE(kv_.Apply(w));
  }
  const int64_t read_rev = kv_.ModRevision(keys_.Partition("t", 0));
  const PartitionState read = Read("t", 0);
  // Broker 1 dies: the controller elects 2 from what it read.
  auto first = Reelect(topic.partitions[0], read, Live({2, 3}), {}, fence.epoch);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(kv_.Apply(PartitionStateWrite(keys_, fence, "t", 0, read_rev, *first)));
  // A second decision from the same (now stale) read — another election, or a leader's
  // ISR change — does not apply: no two values ever name leaders of one epoch.
  auto second = Reelect(topic.partitions[0], read, Live({3}), {}, fence.epoch);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->leader_epoch, first->leader_epoch);
  EXPECT_NE(second->leader, first->leader);
  EXPECT_FALSE(kv_.Apply(PartitionStateWrite(keys_, fence, "t", 0, read_rev, *second)));
  EXPECT_EQ(Read("t", 0), *first);
  // Re-read, decided again: the epoch moves past the first election's.
  auto third = Reelect(topic.partitions[0], Read("t", 0), Live({3}), {}, fence.epoch);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->leader, 3);
  EXPECT_EQ(third->leader_epoch, first->leader_epoch + 1);
  EXPECT_TRUE(kv_.Apply(
      PartitionStateWrite(keys_, fence, "t", 0, kv_.ModRevision(keys_.Partition("t", 0)), *third)));
}

TEST_F(ControllerWritesTest, AReplacedControllerCannotWrite) {
  ControllerFence old_fence = Elect(1);
  TopicAssignment topic{kIncA, {{1, 2}}, {}};
  for (const MetadataWrite& w : CreateTopicWrites(keys_, old_fence, "t", topic, Live({1, 2}))) {
    ASSERT_TRUE(kv_.Apply(w));
  }
  // Controller 1's lease expires (its key goes), broker 2 takes over.
  ASSERT_TRUE(kv_.Apply(MetadataWrite{{}, {}, {keys_.Controller()}, {}}));
  ControllerFence new_fence = Elect(2);
  EXPECT_EQ(new_fence.epoch, old_fence.epoch + 1);
  const int64_t rev = kv_.ModRevision(keys_.Partition("t", 0));
  auto change = Reelect({1, 2}, Read("t", 0), Live({2}), {}, old_fence.epoch);
  ASSERT_TRUE(change.has_value());
  EXPECT_FALSE(kv_.Apply(PartitionStateWrite(keys_, old_fence, "t", 0, rev, *change)));
  EXPECT_FALSE(kv_.Apply(CreateTopicWrites(keys_, old_fence, "u", topic, Live({2}))[0]));
  EXPECT_FALSE(
      kv_.Apply(DeleteTopicWrite(keys_, old_fence, "t", kv_.ModRevision(keys_.Topic("t")), kIncA)));
  // The new controller's own write goes through.
  auto mine = Reelect({1, 2}, Read("t", 0), Live({2}), {}, new_fence.epoch);
  EXPECT_TRUE(kv_.Apply(PartitionStateWrite(keys_, new_fence, "t", 0, rev, *mine)));
  // While a controller key exists, nobody else becomes controller.
  EXPECT_FALSE(kv_.Apply(ControllerElectionWrite(keys_, 1, 5, new_fence.epoch,
                                                 kv_.ModRevision(keys_.ControllerEpoch()))));
}

TEST_F(ControllerWritesTest, DeletingATopicRemovesItsStatesAndMarksIt) {
  ControllerFence fence = Elect(1);
  TopicAssignment topic{kIncA, {{1}, {1}, {1}}, {}};
  for (const MetadataWrite& w : CreateTopicWrites(keys_, fence, "t", topic, Live({1}))) {
    ASSERT_TRUE(kv_.Apply(w));
  }
  ASSERT_TRUE(kv_.Apply(CreateTopicWrites(keys_, fence, "t2", topic, Live({1}))[0]));
  ASSERT_TRUE(
      kv_.Apply(DeleteTopicWrite(keys_, fence, "t", kv_.ModRevision(keys_.Topic("t")), kIncA)));
  EXPECT_FALSE(kv_.Has(keys_.Topic("t")));
  EXPECT_FALSE(kv_.Has(keys_.Partition("t", 2)));
  EXPECT_TRUE(kv_.Has(keys_.Topic("t2")));
  EXPECT_EQ(ParseDeletingValue(kv_.Value(keys_.Deleting("t")))->id, kIncA);
  // Not re-created while its deletion is under way.
  EXPECT_FALSE(kv_.Apply(CreateTopicWrites(keys_, fence, "t", topic, Live({1}))[0]));
}

TEST_F(ControllerWritesTest, GrowingATopicAddsOnlyTheNewStates) {
  ControllerFence fence = Elect(1);
  TopicAssignment topic{kIncA, {{1, 2}}, {}};
  for (const MetadataWrite& w : CreateTopicWrites(keys_, fence, "t", topic, Live({1, 2}))) {
    ASSERT_TRUE(kv_.Apply(w));
  }
  const int64_t rev = kv_.ModRevision(keys_.Topic("t"));
  TopicAssignment grown = topic;
  grown.partitions.push_back({2, 1});
  auto writes = AddPartitionsWrites(keys_, fence, "t", rev, grown, 1, Live({1, 2}));
  ASSERT_EQ(writes.size(), 2u);
  EXPECT_EQ(writes[1].puts.size(), 1u);
  for (const MetadataWrite& w : writes) ASSERT_TRUE(kv_.Apply(w));
  EXPECT_EQ(Read("t", 1).leader, 2);
  // From the old revision, a second grow fails.
  EXPECT_FALSE(kv_.Apply(AddPartitionsWrites(keys_, fence, "t", rev, grown, 1, Live({1}))[0]));
}

TEST_F(ControllerWritesTest, ANodeIdRegistersOnce) {
  BrokerRegistration reg{"127.0.0.1", 9092, "127.0.0.1", 9092, kIncA, true};
  EXPECT_TRUE(kv_.Apply(RegistrationWrite(keys_, 1, 100, reg)));
  EXPECT_FALSE(kv_.Apply(RegistrationWrite(keys_, 1, 101, reg)));
  EXPECT_TRUE(kv_.Apply(RegistrationWrite(keys_, 2, 102, reg)));
}

TEST_F(ControllerWritesTest, ProducerIdBlocksNeverOverlap) {
  // Two brokers read "absent" at once: one block each, never the same.
  auto [a_first, a_write] = TakeProducerIdBlock(keys_, std::nullopt, 0);
  auto [b_first, b_write] = TakeProducerIdBlock(keys_, std::nullopt, 0);
  EXPECT_TRUE(kv_.Apply(a_write));
  EXPECT_FALSE(kv_.Apply(b_write));
  auto current = ParseProducerIdBlock(kv_.Value(keys_.ProducerIds()));
  ASSERT_TRUE(current.ok());
  auto [b2_first, b2_write] =
      TakeProducerIdBlock(keys_, *current, kv_.ModRevision(keys_.ProducerIds()));
  EXPECT_TRUE(kv_.Apply(b2_write));
  EXPECT_EQ(a_first, 0);
  EXPECT_EQ(b2_first, kProducerIdBlockSize);
}

// Session 13's finding: the controller put what it wrote into its view with the write's
// revision as create_revision, so an update of an existing key took a new "creation"
// (a registration's create_revision is its broker epoch).
TEST(AppliedPutsTest, AnUpdatedKeyKeepsItsCreateRevisionANewOneTakesTheWrites) {
  MetadataWrite w;
  w.puts.push_back({"/sluice/x/brokers/1", "old-key", 0});
  w.puts.push_back({"/sluice/x/topics/t", "new-key", 0});
  w.deletes.push_back("/sluice/x/gone");
  const TxnRequest t = ToTxn(w, true);
  ASSERT_EQ(t.success.size(), 3u);
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(std::get<PutRequest>(t.success[i].request).prev_kv);
  EXPECT_FALSE(std::get<PutRequest>(ToTxn(w).success[0].request).prev_kv);

  TxnResponse r;
  r.succeeded = true;
  r.header.revision = 42;
  PutResponse existed;
  existed.prev_kv = KeyValue{.key = "/sluice/x/brokers/1", .create_revision = 7, .mod_revision = 9};
  r.responses = {existed, PutResponse{}, DeleteResponse{}};
  const std::vector<AppliedPut> applied = AppliedPuts(w, r);
  ASSERT_EQ(applied.size(), 2u);
  EXPECT_EQ(applied[0].key, "/sluice/x/brokers/1");
  EXPECT_EQ(applied[0].value, "old-key");
  EXPECT_EQ(applied[0].mod_revision, 42);
  EXPECT_EQ(applied[0].create_revision, 7);
  EXPECT_EQ(applied[1].mod_revision, 42);
  EXPECT_EQ(applied[1].create_revision, 42);
  // An answer without the puts' responses (not this write's): every key counts as new.
  r.responses.clear();
  EXPECT_EQ(AppliedPuts(w, r)[0].create_revision, 42);
}

}  // namespace
}  // namespace sluice::cluster
