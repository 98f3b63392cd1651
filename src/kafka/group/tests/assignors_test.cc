// Tests of the range and roundrobin assignors (assignors.h): the examples of Kafka's own
// documentation (RangeAssignor/RoundRobinAssignor javadoc), uneven subscriptions, static
// members, edge cases, and properties over random groups.
#include "kafka/group/assignors.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace sluice::kafka::group {
namespace {

Member M(std::string id, std::vector<std::string> topics,
         std::optional<std::string> instance = std::nullopt) {
  Member m;
  m.member_id = std::move(id);
  m.group_instance_id = std::move(instance);
  m.subscription.topics = std::move(topics);
  return m;
}

// A member's partitions as Kafka's docs write them: "t0p1".
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

// What every assignment of these assignors must be: every member present; every partition
// of a topic someone subscribes to given to exactly one subscriber; nothing else; topics in
// order and partitions ascending; no user data.
void ExpectValid(const std::vector<Member>& members, const PartitionCounts& counts,
                 const GroupAssignment& g) {
  ASSERT_EQ(g.size(), members.size());
  std::map<TopicPartition, int> times;
  for (const Member& m : members) {
    auto it = g.find(m.member_id);
    ASSERT_NE(it, g.end()) << m.member_id;
    const Assignment& a = it->second;
    EXPECT_FALSE(a.user_data.has_value());
    EXPECT_EQ(a.assigned_partitions, GroupByTopic(Flatten(a.assigned_partitions)));
    for (const TopicPartition& tp : Flatten(a.assigned_partitions)) {
      const auto& topics = m.subscription.topics;
      EXPECT_NE(std::find(topics.begin(), topics.end(), tp.topic), topics.end())
          << m.member_id << " is given " << tp.topic << " it does not subscribe to";
      ++times[tp];
    }
  }
  std::set<std::string> subscribed;
  for (const Member& m : members)
    subscribed.insert(m.subscription.topics.begin(), m.subscription.topics.end());
  size_t expected = 0;
  for (const auto& [topic, count] : counts) {
    if (!subscribed.count(topic)) continue;
    for (int32_t p = 0; p < count; ++p) {
      EXPECT_EQ((times[TopicPartition{topic, p}]), 1) << topic << "-" << p;
      ++expected;
    }
  }
  EXPECT_EQ(times.size(), expected);
}

const PartitionCounts kTwoTopicsOfThree = {{"t0", 3}, {"t1", 3}};

// ------------------------------------------------------------------ range

// RangeAssignor's javadoc: C0 [t0p0, t0p1, t1p0, t1p1], C1 [t0p2, t1p2].
TEST(RangeAssignorTest, KafkaDocumentedExample) {
  std::vector<Member> members = {M("C0", {"t0", "t1"}), M("C1", {"t0", "t1"})};
  Result<GroupAssignment> g = AssignRange(members, kTwoTopicsOfThree);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(Names(*g, "C0"), (Names_{"t0p0", "t0p1", "t1p0", "t1p1"}));
  EXPECT_EQ(Names(*g, "C1"), (Names_{"t0p2", "t1p2"}));
  ExpectValid(members, kTwoTopicsOfThree, *g);
}

// The javadoc's static membership example: after a rolling bounce the member ids change
// order (C3 was C0, C2 was C1), but instance ids I0/I1 keep the assignment.
TEST(RangeAssignorTest, StaticMembersAreOrderedByInstanceId) {
  std::vector<Member> members = {M("C3", {"t0", "t1"}, "I0"), M("C2", {"t0", "t1"}, "I1")};
  Result<GroupAssignment> g = AssignRange(members, kTwoTopicsOfThree);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Names(*g, "C3"), (Names_{"t0p0", "t0p1", "t1p0", "t1p1"}));
  EXPECT_EQ(Names(*g, "C2"), (Names_{"t0p2", "t1p2"}));

  // Without instance ids the member ids decide: C2 first.
  members = {M("C3", {"t0", "t1"}), M("C2", {"t0", "t1"})};
  g = AssignRange(members, kTwoTopicsOfThree);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Names(*g, "C2"), (Names_{"t0p0", "t0p1", "t1p0", "t1p1"}));
  EXPECT_EQ(Names(*g, "C3"), (Names_{"t0p2", "t1p2"}));

  // Static members come before dynamic ones, whatever their ids.
  members = {M("A", {"t0"}), M("Z", {"t0"}, "I9")};
  g = AssignRange(members, {{"t0", 3}});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Names(*g, "Z"), (Names_{"t0p0", "t0p1"}));
  EXPECT_EQ(Names(*g, "A"), (Names_{"t0p2"}));
}

TEST(RangeAssignorTest, FirstMembersGetOneExtra) {
  std::vector<Member> members = {M("a", {"t"}), M("b", {"t"}), M("c", {"t"})};
  const PartitionCounts counts = {{"t", 8}};
  Result<GroupAssignment> g = AssignRange(members, counts);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Names(*g, "a"), (Names_{"tp0", "tp1", "tp2"}));
  EXPECT_EQ(Names(*g, "b"), (Names_{"tp3", "tp4", "tp5"}));
  EXPECT_EQ(Names(*g, "c"), (Names_{"tp6", "tp7"}));
  ExpectValid(members, counts, *g);
}

// Each topic is cut among its own subscribers only.
TEST(RangeAssignorTest, UnevenSubscriptions) {
  std::vector<Member> members = {M("C0", {"t0"}), M("C1", {"t0", "t1"}), M("C2", {"t1", "t2"})};
  const PartitionCounts counts = {{"t0", 3}, {"t1", 2}, {"t2", 1}};
  Result<GroupAssignment> g = AssignRange(members, counts);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Names(*g, "C0"), (Names_{"t0p0", "t0p1"}));
  EXPECT_EQ(Names(*g, "C1"), (Names_{"t0p2", "t1p0"}));
  EXPECT_EQ(Names(*g, "C2"), (Names_{"t1p1", "t2p0"}));
  ExpectValid(members, counts, *g);
}

TEST(RangeAssignorTest, MoreMembersThanPartitions) {
  std::vector<Member> members = {M("a", {"t"}), M("b", {"t"}), M("c", {"t"})};
  Result<GroupAssignment> g = AssignRange(members, {{"t", 2}});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Names(*g, "a"), (Names_{"tp0"}));
  EXPECT_EQ(Names(*g, "b"), (Names_{"tp1"}));
  EXPECT_EQ(Names(*g, "c"), Names_{});
  EXPECT_TRUE(g->at("c").assigned_partitions.empty());  // no empty topic entry
}

// Range puts every topic's first partitions on the first member: with many one-partition
// topics it is the only one to get anything (the known cost of range).
TEST(RangeAssignorTest, OnePartitionTopicsAllGoToTheFirstMember) {
  std::vector<Member> members = {M("a", {"x", "y", "z"}), M("b", {"x", "y", "z"})};
  Result<GroupAssignment> g = AssignRange(members, {{"x", 1}, {"y", 1}, {"z", 1}});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Names(*g, "a"), (Names_{"xp0", "yp0", "zp0"}));
  EXPECT_EQ(Names(*g, "b"), Names_{});
}

// ------------------------------------------------------------------ roundrobin

// RoundRobinAssignor's javadoc: C0 [t0p0, t0p2, t1p1], C1 [t0p1, t1p0, t1p2].
TEST(RoundRobinAssignorTest, KafkaDocumentedExample) {
  std::vector<Member> members = {M("C0", {"t0", "t1"}), M("C1", {"t0", "t1"})};
  Result<GroupAssignment> g = AssignRoundRobin(members, kTwoTopicsOfThree);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(Names(*g, "C0"), (Names_{"t0p0", "t0p2", "t1p1"}));
  EXPECT_EQ(Names(*g, "C1"), (Names_{"t0p1", "t1p0", "t1p2"}));
  ExpectValid(members, kTwoTopicsOfThree, *g);
}

// The javadoc's uneven example: C0 subscribes t0, C1 t0 and t1, C2 t0, t1 and t2; the
// topics have 1, 2 and 3 partitions. C0 [t0p0], C1 [t1p0], C2 [t1p1, t2p0, t2p1, t2p2].
TEST(RoundRobinAssignorTest, KafkaDocumentedUnevenSubscriptions) {
  std::vector<Member> members = {M("C0", {"t0"}), M("C1", {"t0", "t1"}),
                                 M("C2", {"t0", "t1", "t2"})};
  const PartitionCounts counts = {{"t0", 1}, {"t1", 2}, {"t2", 3}};
  Result<GroupAssignment> g = AssignRoundRobin(members, counts);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Names(*g, "C0"), (Names_{"t0p0"}));
  EXPECT_EQ(Names(*g, "C1"), (Names_{"t1p0"}));
  EXPECT_EQ(Names(*g, "C2"), (Names_{"t1p1", "t2p0", "t2p1", "t2p2"}));
  ExpectValid(members, counts, *g);
}

// The javadoc's three-member example: C0 [t0p0, t1p0], C1 [t0p1, t1p1], C2 [t0p2, t1p2];
// and with instance ids I0..I2 the same, whatever the member ids.
TEST(RoundRobinAssignorTest, KafkaDocumentedThreeMembersAndStaticMembers) {
  std::vector<Member> members = {M("C0", {"t0", "t1"}), M("C1", {"t0", "t1"}),
                                 M("C2", {"t0", "t1"})};
  Result<GroupAssignment> g = AssignRoundRobin(members, kTwoTopicsOfThree);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Names(*g, "C0"), (Names_{"t0p0", "t1p0"}));
  EXPECT_EQ(Names(*g, "C1"), (Names_{"t0p1", "t1p1"}));
  EXPECT_EQ(Names(*g, "C2"), (Names_{"t0p2", "t1p2"}));

  members = {M("C5", {"t0", "t1"}, "I0"), M("C3", {"t0", "t1"}, "I1"), M("C4", {"t0", "t1"}, "I2")};
  g = AssignRoundRobin(members, kTwoTopicsOfThree);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Names(*g, "C5"), (Names_{"t0p0", "t1p0"}));
  EXPECT_EQ(Names(*g, "C3"), (Names_{"t0p1", "t1p1"}));
  EXPECT_EQ(Names(*g, "C4"), (Names_{"t0p2", "t1p2"}));
}

// The deal goes on across topics: t1 starts where t0 stopped.
TEST(RoundRobinAssignorTest, DealContinuesAcrossTopics) {
  std::vector<Member> members = {M("a", {"x", "y"}), M("b", {"x", "y"}), M("c", {"x", "y"})};
  Result<GroupAssignment> g = AssignRoundRobin(members, {{"x", 2}, {"y", 2}});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Names(*g, "a"), (Names_{"xp0", "yp1"}));
  EXPECT_EQ(Names(*g, "b"), (Names_{"xp1"}));
  EXPECT_EQ(Names(*g, "c"), (Names_{"yp0"}));
}

TEST(RoundRobinAssignorTest, MoreMembersThanPartitions) {
  std::vector<Member> members = {M("a", {"t"}), M("b", {"t"}), M("c", {"t"})};
  Result<GroupAssignment> g = AssignRoundRobin(members, {{"t", 2}});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Names(*g, "a"), (Names_{"tp0"}));
  EXPECT_EQ(Names(*g, "b"), (Names_{"tp1"}));
  EXPECT_EQ(Names(*g, "c"), Names_{});
}

// ------------------------------------------------------------------ both

struct Case {
  const char* name;
  AssignFn assign;
};
const Case kBoth[] = {{"range", AssignRange}, {"roundrobin", AssignRoundRobin}};

TEST(AssignorsTest, NoMembersGiveAnEmptyAssignment) {
  for (const Case& c : kBoth) {
    SCOPED_TRACE(c.name);
    Result<GroupAssignment> g = c.assign({}, kTwoTopicsOfThree);
    ASSERT_TRUE(g.ok());
    EXPECT_TRUE(g->empty());
  }
}

TEST(AssignorsTest, TopicsThatDoNotExistGiveNothing) {
  std::vector<Member> members = {M("a", {"missing", "t"}), M("b", {"missing"}),
                                 M("c", {"empty", "negative"})};
  const PartitionCounts counts = {{"t", 1}, {"empty", 0}, {"negative", -3}, {"unwanted", 4}};
  for (const Case& c : kBoth) {
    SCOPED_TRACE(c.name);
    Result<GroupAssignment> g = c.assign(members, counts);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(Names(*g, "a"), (Names_{"tp0"}));
    EXPECT_EQ(Names(*g, "b"), Names_{});  // present, with nothing
    EXPECT_EQ(Names(*g, "c"), Names_{});
    ExpectValid(members, counts, *g);
  }
}

TEST(AssignorsTest, NoTopicsAtAll) {
  std::vector<Member> members = {M("a", {}), M("b", {"t"})};
  for (const Case& c : kBoth) {
    SCOPED_TRACE(c.name);
    Result<GroupAssignment> g = c.assign(members, {});
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->size(), 2u);
    EXPECT_EQ(Names(*g, "a"), Names_{});
    EXPECT_EQ(Names(*g, "b"), Names_{});
  }
}

TEST(AssignorsTest, AMemberListedTwiceIsInvalid) {
  std::vector<Member> members = {M("a", {"t"}), M("b", {"t"}), M("a", {"t"})};
  for (const Case& c : kBoth) {
    SCOPED_TRACE(c.name);
    Status st = c.assign(members, {{"t", 3}}).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("member a"), std::string::npos) << st.message();
  }
}

// A topic listed twice in a subscription counts once.
TEST(AssignorsTest, DuplicateTopicsInASubscriptionCountOnce) {
  std::vector<Member> members = {M("a", {"t", "t"}), M("b", {"t"})};
  for (const Case& c : kBoth) {
    SCOPED_TRACE(c.name);
    Result<GroupAssignment> g = c.assign(members, {{"t", 2}});
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(Names(*g, "a"), (Names_{"tp0"}));
    EXPECT_EQ(Names(*g, "b"), (Names_{"tp1"}));
  }
}

std::vector<Member> RandomGroup(std::mt19937& rng, PartitionCounts* counts) {
  const std::vector<std::string> topics = {"a", "b", "c", "d", "e", "missing"};
  counts->clear();
  for (size_t i = 0; i + 1 < topics.size(); ++i) {
    (*counts)[topics[i]] = static_cast<int32_t>(rng() % 9);
  }
  std::vector<Member> members;
  const int n = static_cast<int>(rng() % 7);
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> sub;
    for (const std::string& t : topics) {
      if (rng() % 2) sub.push_back(t);
    }
    std::optional<std::string> instance;
    if (rng() % 3 == 0) instance = fmt::format("i{}", rng() % 100);
    members.push_back(M(fmt::format("m{}", rng() % 1000 * 10 + i), sub, instance));
  }
  return members;
}

TEST(AssignorsTest, RandomGroupsGiveValidAssignmentsWhateverTheMemberOrder) {
  std::mt19937 rng(20261201);
  for (int round = 0; round < 500; ++round) {
    PartitionCounts counts;
    std::vector<Member> members = RandomGroup(rng, &counts);
    for (const Case& c : kBoth) {
      SCOPED_TRACE(fmt::format("{} round {}", c.name, round));
      Result<GroupAssignment> g = c.assign(members, counts);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      ExpectValid(members, counts, *g);
      std::vector<Member> shuffled = members;
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      Result<GroupAssignment> again = c.assign(shuffled, counts);
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(*again, *g);
    }
  }
}

// With identical subscriptions both balance to within one partition per member (range per
// topic, roundrobin over all).
TEST(AssignorsTest, IdenticalSubscriptionsAreBalanced) {
  std::vector<Member> members;
  for (int i = 0; i < 4; ++i) members.push_back(M(fmt::format("m{}", i), {"x", "y"}));
  const PartitionCounts counts = {{"x", 7}, {"y", 5}};
  for (const Case& c : kBoth) {
    SCOPED_TRACE(c.name);
    Result<GroupAssignment> g = c.assign(members, counts);
    ASSERT_TRUE(g.ok());
    for (const std::string topic : {"x", "y"}) {
      std::vector<size_t> sizes;
      for (const auto& [id, a] : *g) {
        auto it = a.assigned_partitions.find(topic);
        sizes.push_back(it == a.assigned_partitions.end() ? 0 : it->second.size());
      }
      auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
      EXPECT_LE(*hi - *lo, 1u) << topic;
    }
  }
}

TEST(AssignorsTest, FindAssignorByName) {
  ASSERT_NE(FindAssignor("range"), nullptr);
  EXPECT_EQ(FindAssignor("range")->assign, &AssignRange);
  ASSERT_NE(FindAssignor("roundrobin"), nullptr);
  EXPECT_EQ(FindAssignor("roundrobin")->assign, &AssignRoundRobin);
  EXPECT_EQ(FindAssignor("Range"), nullptr);
  EXPECT_EQ(FindAssignor("sticky"), nullptr);
  EXPECT_EQ(Assignors().front().name, "range");
}

TEST(AssignorsTest, AssignByName) {
  std::vector<Member> members = {M("C0", {"t0", "t1"}), M("C1", {"t0", "t1"})};
  Result<GroupAssignment> g = Assign("roundrobin", members, kTwoTopicsOfThree);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, *AssignRoundRobin(members, kTwoTopicsOfThree));
  Status st = Assign("sticky", members, kTwoTopicsOfThree).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("unknown partition assignor 'sticky' (range, roundrobin"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace sluice::kafka::group
