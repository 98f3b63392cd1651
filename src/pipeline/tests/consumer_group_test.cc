// The consumer protocol's bytes (golden, derived by hand from Kafka's
// ConsumerProtocolSubscription/Assignment definitions), round trips, malformed input, and
// the range and roundrobin assignors on the Java client's documented examples.
#include "pipeline/consumer_group.h"

#include <gtest/gtest.h>

namespace sluice::pipeline::consumer_group {
namespace {

using Parts = std::map<std::string, std::vector<int32_t>>;

Member M(std::string id, std::vector<std::string> topics) {
  Member m;
  m.member_id = std::move(id);
  m.subscription.topics = std::move(topics);
  return m;
}

// v0: int16 version 0, array of 1 topic "ab" (int32 count, int16 length, bytes), user data
// null (int32 -1).
TEST(ConsumerGroupTest, SubscriptionV0Bytes) {
  Subscription s;
  s.topics = {"ab"};
  const std::vector<uint8_t> want = {0, 0, 0, 0, 0, 1, 0, 2, 'a', 'b', 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(EncodeSubscription(s, 0), want);
  auto back = DecodeSubscription(want);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->topics, std::vector<std::string>{"ab"});
  EXPECT_FALSE(back->user_data.has_value());
  // librdkafka may leave the user data out of a v0 subscription.
  auto short_form = DecodeSubscription(std::span<const uint8_t>(want.data(), want.size() - 4));
  ASSERT_TRUE(short_form.ok()) << short_form.status().ToString();
  EXPECT_EQ(short_form->topics, std::vector<std::string>{"ab"});
}

// v1 adds owned partitions: [topic "t", [3]] after the user data.
TEST(ConsumerGroupTest, SubscriptionV1BytesAndRoundTrips) {
  Subscription s;
  s.topics = {"t"};
  s.user_data = std::vector<uint8_t>{7};
  s.owned_partitions = {{"t", {3}}};
  const std::vector<uint8_t> want = {0, 1, 0, 0, 0, 1,   0, 1, 't', 0, 0, 0, 1, 7, 0,
                                     0, 0, 1, 0, 1, 't', 0, 0, 0,   1, 0, 0, 0, 3};
  EXPECT_EQ(EncodeSubscription(s, 1), want);
  s.generation_id = 9;
  s.rack_id = "r1";
  for (int16_t v = 0; v <= 3; ++v) {
    auto back = DecodeSubscription(EncodeSubscription(s, v));
    ASSERT_TRUE(back.ok()) << v << ": " << back.status().ToString();
    EXPECT_EQ(back->topics, s.topics);
    EXPECT_EQ(back->user_data, s.user_data);
    EXPECT_EQ(back->owned_partitions, v >= 1 ? s.owned_partitions : Parts{});
    EXPECT_EQ(back->generation_id, v >= 2 ? 9 : -1);
    EXPECT_EQ(back->rack_id, v >= 3 ? std::optional<std::string>("r1") : std::nullopt);
  }
}

// v0: version, [topic "t", [0, 2]], user data null.
TEST(ConsumerGroupTest, AssignmentBytes) {
  Assignment a;
  a.partitions = {{"t", {0, 2}}};
  const std::vector<uint8_t> want = {0, 0, 0, 0, 0, 1, 0, 1, 't',  0,    0,    0,   2,
                                     0, 0, 0, 0, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(EncodeAssignment(a, 0), want);
  auto back = DecodeAssignment(want);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->partitions, a.partitions);
}

TEST(ConsumerGroupTest, MalformedBytesAreErrors) {
  const std::vector<std::vector<uint8_t>> bad = {
      {},                                   // no version
      {0},                                  // half a version
      {0xff, 0xff, 0, 0, 0, 0},             // a negative version
      {0, 0, 0x7f, 0xff, 0xff, 0xff},       // 2^31 topics in 6 bytes
      {0, 0, 0, 0, 0, 1, 0, 9, 'a'},        // a topic name cut short
      {0, 0, 0, 0, 0, 1, 0xff, 0xfe, 'a'},  // a negative name length
  };
  for (const auto& b : bad) {
    EXPECT_FALSE(DecodeSubscription(b).ok()) << b.size();
    EXPECT_FALSE(DecodeAssignment(b).ok()) << b.size();
  }
  // An assignment whose partition list is cut short.
  EXPECT_FALSE(
      DecodeAssignment(std::vector<uint8_t>{0, 0, 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 2, 0, 0, 0, 1})
          .ok());
}

// Kafka's RangeAssignor example: two members, topics t0 and t1 of three partitions each.
TEST(ConsumerGroupTest, RangeSplitsEachTopicInRanges) {
  auto r = Assign("range", {M("C1", {"t0", "t1"}), M("C0", {"t0", "t1"})}, {{"t0", 3}, {"t1", 3}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["C0"].partitions, (Parts{{"t0", {0, 1}}, {"t1", {0, 1}}}));
  EXPECT_EQ((*r)["C1"].partitions, (Parts{{"t0", {2}}, {"t1", {2}}}));
}

// Kafka's RoundRobinAssignor example: the same group.
TEST(ConsumerGroupTest, RoundRobinDealsInACircle) {
  auto r =
      Assign("roundrobin", {M("C0", {"t0", "t1"}), M("C1", {"t0", "t1"})}, {{"t0", 3}, {"t1", 3}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["C0"].partitions, (Parts{{"t0", {0, 2}}, {"t1", {1}}}));
  EXPECT_EQ((*r)["C1"].partitions, (Parts{{"t0", {1}}, {"t1", {0, 2}}}));
}

// Uneven subscriptions (Kafka's example: C0 [t0], C1 [t0, t1], C2 [t0, t1, t2], topics of
// 1, 2 and 3 partitions), more members than partitions, a missing topic, no members.
TEST(ConsumerGroupTest, UnevenSubscriptionsAndEdges) {
  auto rr =
      Assign("roundrobin", {M("C0", {"t0"}), M("C1", {"t0", "t1"}), M("C2", {"t0", "t1", "t2"})},
             {{"t0", 1}, {"t1", 2}, {"t2", 3}});
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ((*rr)["C0"].partitions, (Parts{{"t0", {0}}}));
  EXPECT_EQ((*rr)["C1"].partitions, (Parts{{"t1", {0}}}));
  EXPECT_EQ((*rr)["C2"].partitions, (Parts{{"t1", {1}}, {"t2", {0, 1, 2}}}));

  auto range = Assign("range", {M("a", {"t"}), M("b", {"t"}), M("c", {"t", "gone"})}, {{"t", 2}});
  ASSERT_TRUE(range.ok());
  EXPECT_EQ((*range)["a"].partitions, (Parts{{"t", {0}}}));
  EXPECT_EQ((*range)["b"].partitions, (Parts{{"t", {1}}}));
  EXPECT_TRUE((*range)["c"].partitions.empty());

  auto none = Assign("range", {}, {{"t", 2}});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(Assign("sticky", {M("a", {"t"})}, {{"t", 1}}).ok());
}

// Static members (a group instance id each) are ordered by it, not by member id.
TEST(ConsumerGroupTest, StaticMembersSortByInstanceId) {
  Member a = M("z-member", {"t"});
  a.group_instance_id = "i1";
  Member b = M("a-member", {"t"});
  b.group_instance_id = "i2";
  auto r = Assign("range", {b, a}, {{"t", 3}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["z-member"].partitions, (Parts{{"t", {0, 1}}}));
  EXPECT_EQ((*r)["a-member"].partitions, (Parts{{"t", {2}}}));
}

}  // namespace
}  // namespace sluice::pipeline::consumer_group
