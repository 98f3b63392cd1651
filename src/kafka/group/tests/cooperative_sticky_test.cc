// Tests of the cooperative-sticky assignor (AssignCooperativeSticky in assignors.h): the
// examples of Kafka's StickyAssignor javadoc, generation checks on claimed partitions, the
// cooperative hold-back, and groups run over many rebalances (members joining and leaving,
// topics growing) checking what Kafka's assignor guarantees: no partition given while
// another member holds it, every partition given once the group settles, balance, and as
// many owned partitions kept as balance allows.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kafka/group/assignors.h"

namespace sluice::kafka::group {
namespace cooperative_sticky_test {
namespace {

Member M(std::string id, std::vector<std::string> topics, PartitionsByTopic owned = {},
         int32_t generation = -1) {
  Member m;
  m.member_id = std::move(id);
  m.subscription.topics = std::move(topics);
  m.subscription.owned_partitions = std::move(owned);
  m.subscription.generation_id = generation;
  return m;
}

std::vector<std::string> Names(const GroupAssignment& g, const std::string& member) {
  std::vector<std::string> out;
  auto it = g.find(member);
  if (it == g.end()) return {"<missing member>"};
  for (const TopicPartition& tp : Flatten(it->second.assigned_partitions)) {
    out.push_back(fmt::format("{}p{}", tp.topic, tp.partition));
  }
  return out;
}

using Names_ = std::vector<std::string>;

GroupAssignment Sticky(const std::vector<Member>& members, const PartitionCounts& counts) {
  Result<GroupAssignment> g = AssignCooperativeSticky(members, counts);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : GroupAssignment{};
}

// ------------------------------------------------------------------ Kafka's examples

// StickyAssignor's javadoc: three consumers, four topics of two partitions. From scratch
// C0 [t0p0, t1p1, t3p0], C1 [t0p1, t2p0, t3p1], C2 [t1p0, t2p1]; when C1 leaves, C0 and C2
// keep theirs and share C1's: C0 [t0p0, t1p1, t3p0, t2p0], C2 [t1p0, t2p1, t0p1, t3p1].
TEST(CooperativeStickyTest, KafkaDocumentedExample) {
  const std::vector<std::string> all = {"t0", "t1", "t2", "t3"};
  const PartitionCounts counts = {{"t0", 2}, {"t1", 2}, {"t2", 2}, {"t3", 2}};
  GroupAssignment g = Sticky({M("C0", all), M("C1", all), M("C2", all)}, counts);
  EXPECT_EQ(Names(g, "C0"), (Names_{"t0p0", "t1p1", "t3p0"}));
  EXPECT_EQ(Names(g, "C1"), (Names_{"t0p1", "t2p0", "t3p1"}));
  EXPECT_EQ(Names(g, "C2"), (Names_{"t1p0", "t2p1"}));

  g = Sticky(
      {M("C0", all, g["C0"].assigned_partitions, 1), M("C2", all, g["C2"].assigned_partitions, 1)},
      counts);
  EXPECT_EQ(Names(g, "C0"), (Names_{"t0p0", "t1p1", "t2p0", "t3p0"}));
  EXPECT_EQ(Names(g, "C2"), (Names_{"t0p1", "t1p0", "t2p1", "t3p1"}));
}

// The javadoc's uneven example: t0, t1, t2 of 1, 2, 3 partitions; C0 subscribes t0, C1 t0
// and t1, C2 all three. Sticky gives C0 [t0p0], C1 [t1p0, t1p1], C2 [t2p0, t2p1, t2p2]
// (roundrobin's C2 would hold four); when C0 leaves, C1 takes t0p0 and nothing moves.
TEST(CooperativeStickyTest, KafkaDocumentedUnevenExample) {
  const PartitionCounts counts = {{"t0", 1}, {"t1", 2}, {"t2", 3}};
  GroupAssignment g =
      Sticky({M("C0", {"t0"}), M("C1", {"t0", "t1"}), M("C2", {"t0", "t1", "t2"})}, counts);
  EXPECT_EQ(Names(g, "C0"), (Names_{"t0p0"}));
  EXPECT_EQ(Names(g, "C1"), (Names_{"t1p0", "t1p1"}));
  EXPECT_EQ(Names(g, "C2"), (Names_{"t2p0", "t2p1", "t2p2"}));

  g = Sticky({M("C1", {"t0", "t1"}, g["C1"].assigned_partitions, 1),
              M("C2", {"t0", "t1", "t2"}, g["C2"].assigned_partitions, 1)},
             counts);
  EXPECT_EQ(Names(g, "C1"), (Names_{"t0p0", "t1p0", "t1p1"}));
  EXPECT_EQ(Names(g, "C2"), (Names_{"t2p0", "t2p1", "t2p2"}));
}

// KIP-429's example: a member joins a group whose only member holds everything. The first
// rebalance takes half away from the holder and gives it to no one; once the holder has
// revoked it (and rejoined, holding the rest), the second gives it to the newcomer.
TEST(CooperativeStickyTest, NewMemberGetsPartitionsOnlyAfterTheOwnerRevokes) {
  const PartitionCounts counts = {{"t", 4}};
  GroupAssignment g = Sticky({M("a", {"t"}, {{"t", {0, 1, 2, 3}}}, 3), M("b", {"t"})}, counts);
  EXPECT_EQ(Names(g, "a"), (Names_{"tp0", "tp1"}));
  EXPECT_EQ(Names(g, "b"), Names_{});

  g = Sticky({M("a", {"t"}, {{"t", {0, 1}}}, 4), M("b", {"t"}, {}, 4)}, counts);
  EXPECT_EQ(Names(g, "a"), (Names_{"tp0", "tp1"}));
  EXPECT_EQ(Names(g, "b"), (Names_{"tp2", "tp3"}));
}

// Partitions nobody claims are given at once, even in the round that takes others away.
TEST(CooperativeStickyTest, UnclaimedPartitionsAreGivenAtOnce) {
  const PartitionCounts counts = {{"t", 6}};
  GroupAssignment g = Sticky({M("a", {"t"}, {{"t", {0, 1, 2, 3}}}, 3), M("b", {"t"})}, counts);
  EXPECT_EQ(Names(g, "a"), (Names_{"tp0", "tp1", "tp2"}));
  EXPECT_EQ(Names(g, "b"), (Names_{"tp4", "tp5"}));  // tp3 waits for a to revoke it
}

// With uneven subscriptions a member may be given partitions and still have to give some
// up: it gives up the ones it was just given. Here C0 keeps b0 and hands on b2 (from the
// fill) rather than the other way round, which would hold b0 back for a round.
TEST(CooperativeStickyTest, NewlyGivenPartitionsMoveBeforeKeptOnes) {
  const PartitionCounts counts = {{"a", 1}, {"b", 3}, {"c", 4}, {"d", 4}};
  GroupAssignment g = Sticky({M("C0", {"b", "d"}, {{"b", {0}}}, 1), M("C1", {"b"}, {}, 1),
                              M("C2", {"d"}, {{"d", {1, 3}}}, 1), M("C3", {"c", "d"}, {}, 1)},
                             counts);
  EXPECT_EQ(Names(g, "C0"), (Names_{"bp0", "dp0"}));
  EXPECT_EQ(Names(g, "C1"), (Names_{"bp1", "bp2"}));
  EXPECT_EQ(Names(g, "C2"), (Names_{"dp1", "dp2", "dp3"}));
  EXPECT_EQ(Names(g, "C3"), (Names_{"cp0", "cp1", "cp2", "cp3"}));
}

// ------------------------------------------------------------------ generations

// Of two members claiming a partition, the one of the newer generation keeps it.
TEST(CooperativeStickyTest, TheNewerGenerationKeepsAPartitionClaimedTwice) {
  const PartitionCounts counts = {{"t", 2}};
  GroupAssignment g =
      Sticky({M("a", {"t"}, {{"t", {0}}}, 5), M("b", {"t"}, {{"t", {0, 1}}}, 3)}, counts);
  EXPECT_EQ(Names(g, "a"), (Names_{"tp0"}));
  EXPECT_EQ(Names(g, "b"), (Names_{"tp1"}));

  // Whatever the order the members come in, and when the older claimant is listed first.
  g = Sticky({M("b", {"t"}, {{"t", {0, 1}}}, 7), M("a", {"t"}, {{"t", {0}}}, 9)}, counts);
  EXPECT_EQ(Names(g, "a"), (Names_{"tp0"}));
  EXPECT_EQ(Names(g, "b"), (Names_{"tp1"}));
}

// The newer claimant owning too much: balance moves one to the stale claimant, which must
// not get it while the owner may still read it.
TEST(CooperativeStickyTest, AStaleClaimantWaitsLikeAnyoneElse) {
  const PartitionCounts counts = {{"t", 2}};
  GroupAssignment g =
      Sticky({M("a", {"t"}, {{"t", {0, 1}}}, 5), M("b", {"t"}, {{"t", {0}}}, 3)}, counts);
  EXPECT_EQ(Names(g, "a"), (Names_{"tp0"}));
  EXPECT_EQ(Names(g, "b"), Names_{});
}

// Two members of one generation claiming a partition: neither keeps it, and it waits until
// both have revoked it (Kafka logs this as an error: it should not happen).
TEST(CooperativeStickyTest, AClaimOfTheSameGenerationTwiceIsDroppedAndWaits) {
  const PartitionCounts counts = {{"t", 2}};
  GroupAssignment g =
      Sticky({M("a", {"t"}, {{"t", {0, 1}}}, 3), M("b", {"t"}, {{"t", {0}}}, 3)}, counts);
  EXPECT_EQ(Names(g, "a"), (Names_{"tp1"}));
  EXPECT_EQ(Names(g, "b"), Names_{});

  // A third claimant of a newer generation wins over the tie.
  g = Sticky({M("a", {"t"}, {{"t", {0, 1}}}, 3), M("b", {"t"}, {{"t", {0}}}, 3),
              M("c", {"t"}, {{"t", {0}}}, 4)},
             counts);
  EXPECT_EQ(Names(g, "a"), (Names_{"tp1"}));
  EXPECT_EQ(Names(g, "b"), Names_{});
  EXPECT_EQ(Names(g, "c"), (Names_{"tp0"}));
}

// Subscriptions before v2 carry no generation: the Java assignor's user data does (an
// int32), and is read when the generation id is absent (-1).
TEST(CooperativeStickyTest, GenerationComesFromUserDataWithoutAGenerationId) {
  EXPECT_EQ(CooperativeStickyUserData(9), (std::vector<uint8_t>{0, 0, 0, 9}));
  EXPECT_EQ(CooperativeStickyUserData(-1), (std::vector<uint8_t>{0xff, 0xff, 0xff, 0xff}));
  const PartitionCounts counts = {{"t", 2}};
  Member a = M("a", {"t"}, {{"t", {0}}});
  a.subscription.user_data = CooperativeStickyUserData(9);
  Member b = M("b", {"t"}, {{"t", {0, 1}}}, 4);
  GroupAssignment g = Sticky({a, b}, counts);
  EXPECT_EQ(Names(g, "a"), (Names_{"tp0"}));
  EXPECT_EQ(Names(g, "b"), (Names_{"tp1"}));

  // User data too short to hold one (librdkafka sends it empty) is generation -1: b owns
  // both, keeps the lower, and tp1 waits for b to revoke it before going to a.
  a.subscription.user_data = std::vector<uint8_t>{0, 9};
  g = Sticky({a, b}, counts);
  EXPECT_EQ(Names(g, "a"), Names_{});
  EXPECT_EQ(Names(g, "b"), (Names_{"tp0"}));
}

// ------------------------------------------------------------------ what is claimed

// A partition of a topic its owner no longer subscribes to goes to a subscriber, after
// the owner has revoked it.
TEST(CooperativeStickyTest, ATopicUnsubscribedIsRevokedFirst) {
  const PartitionCounts counts = {{"t0", 1}, {"t1", 1}};
  GroupAssignment g =
      Sticky({M("a", {"t1"}, {{"t0", {0}}, {"t1", {0}}}, 2), M("b", {"t0"}, {}, 2)}, counts);
  EXPECT_EQ(Names(g, "a"), (Names_{"t1p0"}));
  EXPECT_EQ(Names(g, "b"), Names_{});
  g = Sticky({M("a", {"t1"}, {{"t1", {0}}}, 3), M("b", {"t0"}, {}, 3)}, counts);
  EXPECT_EQ(Names(g, "b"), (Names_{"t0p0"}));
}

// Claims on topics that are gone, partitions past a topic's end, negative partitions and a
// partition listed twice change nothing.
TEST(CooperativeStickyTest, ClaimsOnPartitionsThatDoNotExistAreIgnored) {
  const PartitionCounts counts = {{"t", 2}};
  Member a = M("a", {"t", "gone"}, {{"gone", {0}}, {"t", {1, 1, 7, -1}}}, 2);
  GroupAssignment g = Sticky({a, M("b", {"t"}, {}, 2)}, counts);
  EXPECT_EQ(Names(g, "a"), (Names_{"tp1"}));
  EXPECT_EQ(Names(g, "b"), (Names_{"tp0"}));
}

TEST(CooperativeStickyTest, EdgeCases) {
  EXPECT_TRUE(Sticky({}, {{"t", 3}}).empty());
  GroupAssignment g = Sticky({M("a", {"t"}), M("b", {"t"}), M("c", {"t"})}, {{"t", 2}});
  EXPECT_EQ(Names(g, "a"), (Names_{"tp0"}));
  EXPECT_EQ(Names(g, "b"), (Names_{"tp1"}));
  EXPECT_EQ(Names(g, "c"), Names_{});
  g = Sticky({M("a", {"missing"}), M("b", {})}, {{"t", 2}});
  EXPECT_EQ(g.size(), 2u);
  EXPECT_EQ(Names(g, "a"), Names_{});
  const std::vector<Member> twice = {M("a", {"t"}), M("a", {"t"})};
  Status st = AssignCooperativeSticky(twice, {{"t", 1}}).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  ASSERT_NE(FindAssignor("cooperative-sticky"), nullptr);
  EXPECT_TRUE(FindAssignor("cooperative-sticky")->cooperative);
  EXPECT_FALSE(FindAssignor("range")->cooperative);
  EXPECT_FALSE(FindAssignor("roundrobin")->cooperative);
}

// ------------------------------------------------------------------ a group over time

// Members that follow the cooperative protocol: each holds what it was last given, and
// sends it with the generation it was given in.
class Group {
 public:
  explicit Group(PartitionCounts counts) : counts_(std::move(counts)) {}

  void Join(const std::string& id, std::vector<std::string> topics) {
    subs_[id] = std::move(topics);
  }
  void Leave(std::string id) {  // a copy: callers pass a key of subs_
    subs_.erase(id);
    owned_.erase(id);
  }
  void Subscribe(const std::string& id, std::vector<std::string> topics) {
    subs_[id] = std::move(topics);
  }
  void Grow(const std::string& topic, int32_t count) { counts_[topic] = count; }
  const PartitionCounts& counts() const { return counts_; }
  const std::map<std::string, std::vector<std::string>>& subs() const { return subs_; }

  std::vector<Member> Members() const {
    std::vector<Member> out;
    for (const auto& [id, topics] : subs_) {
      auto it = owned_.find(id);
      out.push_back(it == owned_.end() ? M(id, topics) : M(id, topics, it->second, generation_));
    }
    return out;
  }

  // One rebalance; checks that nothing is given while another member holds it, and what
  // every assignment must be. Returns how many partitions stayed with their holder.
  int Rebalance(std::mt19937& rng, GroupAssignment* out) {
    std::vector<Member> members = Members();
    std::shuffle(members.begin(), members.end(), rng);
    Result<GroupAssignment> g = AssignCooperativeSticky(members, counts_);
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    if (!g.ok()) return 0;
    int kept = 0;
    std::set<TopicPartition> given;
    for (const auto& [id, a] : *g) {
      const std::vector<std::string>& topics = subs_.at(id);
      for (const TopicPartition& tp : Flatten(a.assigned_partitions)) {
        EXPECT_TRUE(given.insert(tp).second) << tp.topic << "-" << tp.partition << " twice";
        EXPECT_NE(std::find(topics.begin(), topics.end(), tp.topic), topics.end());
        auto count = counts_.find(tp.topic);
        EXPECT_TRUE(count != counts_.end() && tp.partition >= 0 && tp.partition < count->second);
        for (const auto& [other, owned] : owned_) {
          auto held = owned.find(tp.topic);
          const bool holds =
              held != owned.end() &&
              std::binary_search(held->second.begin(), held->second.end(), tp.partition);
          if (other == id) {
            kept += holds;
          } else {
            EXPECT_FALSE(holds) << tp.topic << "-" << tp.partition << " given to " << id
                                << " while " << other << " holds it";
          }
        }
      }
    }
    ++generation_;
    owned_.clear();
    for (const auto& [id, a] : *g) owned_[id] = a.assigned_partitions;
    *out = std::move(g).value();
    return kept;
  }

  // Every partition of a subscribed topic is given.
  bool Complete(const GroupAssignment& g) const {
    size_t given = 0, expected = 0;
    for (const auto& [id, a] : g) given += Flatten(a.assigned_partitions).size();
    std::set<std::string> subscribed;
    for (const auto& [id, topics] : subs_) subscribed.insert(topics.begin(), topics.end());
    for (const auto& [topic, count] : counts_) {
      if (subscribed.count(topic)) expected += std::max(count, 0);
    }
    return given == expected;
  }

  // Kafka's test of balance (AbstractStickyAssignor's isBalanced): no partition can move
  // to another subscriber of its topic holding two fewer.
  void ExpectBalanced(const GroupAssignment& g) const {
    std::map<std::string, size_t> load;
    for (const auto& [id, a] : g) load[id] = Flatten(a.assigned_partitions).size();
    for (const auto& [id, a] : g) {
      for (const auto& [topic, partitions] : a.assigned_partitions) {
        for (const auto& [other, topics] : subs_) {
          if (std::find(topics.begin(), topics.end(), topic) == topics.end()) continue;
          EXPECT_LE(load[id], load[other] + 1)
              << id << " could give a partition of " << topic << " to " << other;
        }
      }
    }
  }

  // With identical subscriptions: the most partitions a balanced assignment can leave
  // with their holders (counts of P / N, the first P % N members one more).
  int MostKeepable() const {
    std::vector<int> owned;
    int total = 0;
    for (const auto& [topic, count] : counts_) total += count;
    for (const auto& [id, topics] : subs_) {
      auto it = owned_.find(id);
      owned.push_back(it == owned_.end() ? 0 : static_cast<int>(Flatten(it->second).size()));
    }
    const int n = static_cast<int>(owned.size());
    if (n == 0) return 0;
    const int q = total / n, r = total % n;
    int keepable = 0, above = 0;
    for (int o : owned) {
      keepable += std::min(o, q);
      above += o > q;
    }
    return keepable + std::min(above, r);
  }

 private:
  PartitionCounts counts_;
  std::map<std::string, std::vector<std::string>> subs_;
  std::map<std::string, PartitionsByTopic> owned_;
  int32_t generation_ = 1;
};

// Rebalances until the assignment is complete and the next rebalance changes nothing;
// cooperative rebalancing takes two rounds for a change (revoke, then give).
void Settle(Group& group, std::mt19937& rng, GroupAssignment* g) {
  for (int round = 0; round < 4; ++round) {
    GroupAssignment before = *g;
    group.Rebalance(rng, g);
    if (group.Complete(*g) && *g == before) return;
  }
  ADD_FAILURE() << "the group did not settle in four rebalances";
}

TEST(CooperativeStickyTest, IdenticalSubscriptionsStayBalancedAndKeepAllBalanceAllows) {
  std::mt19937 rng(4291);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE(trial);
    Group group({{"a", static_cast<int32_t>(rng() % 9)},
                 {"b", static_cast<int32_t>(rng() % 9)},
                 {"c", static_cast<int32_t>(rng() % 17)}});
    const std::vector<std::string> all = {"a", "b", "c"};
    int next_id = 0;
    GroupAssignment g;
    for (int step = 0; step < 12; ++step) {
      SCOPED_TRACE(step);
      const int what = static_cast<int>(rng() % 4);
      if (what == 0 || group.subs().size() < 2) {
        group.Join(fmt::format("m{:02}", next_id++), all);
      } else if (what == 1) {
        auto it = group.subs().begin();
        std::advance(it, rng() % group.subs().size());
        group.Leave(it->first);
      } else if (what == 2) {
        const std::string& topic = all[rng() % all.size()];
        group.Grow(topic, group.counts().at(topic) + static_cast<int32_t>(rng() % 4));
      }
      const int keepable = group.MostKeepable();
      const int kept = group.Rebalance(rng, &g);
      EXPECT_EQ(kept, keepable);
      Settle(group, rng, &g);
      std::vector<size_t> sizes;
      for (const auto& [id, a] : g) sizes.push_back(Flatten(a.assigned_partitions).size());
      auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
      EXPECT_LE(*hi - *lo, 1u);
    }
  }
}

TEST(CooperativeStickyTest, UnevenSubscriptionsSettleBalanced) {
  std::mt19937 rng(8848);
  const std::vector<std::string> topics = {"a", "b", "c", "d", "missing"};
  auto random_topics = [&] {
    std::vector<std::string> out;
    for (const std::string& t : topics) {
      if (rng() % 2) out.push_back(t);
    }
    return out;
  };
  for (int trial = 0; trial < 60; ++trial) {
    SCOPED_TRACE(trial);
    Group group({{"a", static_cast<int32_t>(rng() % 7)},
                 {"b", static_cast<int32_t>(rng() % 7)},
                 {"c", static_cast<int32_t>(1 + rng() % 12)},
                 {"d", 1}});
    int next_id = 0;
    GroupAssignment g;
    for (int step = 0; step < 10; ++step) {
      SCOPED_TRACE(step);
      const int what = static_cast<int>(rng() % 4);
      if (what == 0 || group.subs().empty()) {
        group.Join(fmt::format("m{:02}", next_id++), random_topics());
      } else if (what == 1) {
        auto it = group.subs().begin();
        std::advance(it, rng() % group.subs().size());
        group.Leave(it->first);
      } else if (what == 2) {
        auto it = group.subs().begin();
        std::advance(it, rng() % group.subs().size());
        group.Subscribe(it->first, random_topics());
      } else {
        const std::string& topic = topics[rng() % 4];
        group.Grow(topic, group.counts().at(topic) + static_cast<int32_t>(rng() % 3));
      }
      group.Rebalance(rng, &g);
      Settle(group, rng, &g);
      group.ExpectBalanced(g);
    }
  }
}

// A settled group that nothing changes in keeps its assignment, whatever the member order.
TEST(CooperativeStickyTest, ASettledGroupStaysPut) {
  std::mt19937 rng(7);
  Group group({{"x", 10}, {"y", 3}});
  group.Join("m0", {"x", "y"});
  group.Join("m1", {"x"});
  group.Join("m2", {"y"});
  group.Join("m3", {"x", "y"});
  GroupAssignment g;
  group.Rebalance(rng, &g);
  Settle(group, rng, &g);
  for (int i = 0; i < 5; ++i) {
    GroupAssignment again;
    EXPECT_EQ(group.Rebalance(rng, &again), 13);
    EXPECT_EQ(again, g);
  }
}

// Many members and partitions: the properties hold at scale (a test, not a benchmark).
TEST(CooperativeStickyTest, ALargeGroup) {
  std::mt19937 rng(1);
  PartitionCounts counts;
  for (int t = 0; t < 40; ++t) counts[fmt::format("topic{:02}", t)] = 50;
  Group group(counts);
  std::vector<std::string> all;
  for (const auto& [topic, count] : counts) all.push_back(topic);
  for (int m = 0; m < 150; ++m) group.Join(fmt::format("member{:03}", m), all);
  GroupAssignment g;
  group.Rebalance(rng, &g);
  EXPECT_TRUE(group.Complete(g));
  group.ExpectBalanced(g);
  for (int m = 0; m < 150; m += 3) group.Leave(fmt::format("member{:03}", m));
  group.Join("newcomer", all);
  const int keepable = group.MostKeepable();
  EXPECT_EQ(group.Rebalance(rng, &g), keepable);
  Settle(group, rng, &g);
  group.ExpectBalanced(g);
}

}  // namespace
}  // namespace cooperative_sticky_test
}  // namespace sluice::kafka::group
