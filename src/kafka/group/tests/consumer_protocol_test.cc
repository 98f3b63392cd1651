// Tests of the embedded consumer protocol (consumer_protocol.h): golden bytes derived by
// hand from Kafka's ConsumerProtocolSubscription/Assignment JSON, round trips of every
// version, newer versions, and each malformed input that matters.
#include "kafka/group/consumer_protocol.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::kafka::group {
namespace {

using Bytes = std::vector<uint8_t>;

// A subscription with every field set to something other than its default.
Subscription FullSubscription() {
  Subscription s;
  s.topics = {"orders", "payments"};
  s.user_data = Bytes{0xde, 0xad, 0xbe, 0xef};
  s.owned_partitions = {{"orders", {0, 3}}, {"payments", {1}}};
  s.generation_id = 42;
  s.rack_id = "rack-a";
  return s;
}

// What FullSubscription() reads back as after going through `version`.
Subscription AsOfVersion(Subscription s, int16_t version) {
  if (version < 1) s.owned_partitions.clear();
  if (version < 2) s.generation_id = -1;
  if (version < 3) s.rack_id.reset();
  return s;
}

Bytes WithVersion(Bytes b, int16_t version) {
  b[0] = static_cast<uint8_t>(static_cast<uint16_t>(version) >> 8);
  b[1] = static_cast<uint8_t>(version);
  return b;
}

void ExpectInvalid(const Status& st) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
}

// ------------------------------------------------------------------ golden bytes

// ConsumerProtocolSubscription v0 has two fields, neither flexible:
//   Topics   []string: int32 count, then each string as an int16 length and its bytes
//   UserData bytes, nullable: int32 length (-1 for null), then the bytes
// after the int16 version that prefixes every consumer protocol struct.
TEST(ConsumerProtocolTest, SubscriptionV0MatchesGoldenBytes) {
  Subscription s;
  s.topics = {"t0", "t1"};
  s.user_data = Bytes{0x01, 0x02};
  s.owned_partitions = {{"t0", {0}}};  // v1+: left out of v0
  s.generation_id = 7;                 // v2+: left out
  s.rack_id = "r";                     // v3+: left out
  const Bytes golden = {
      0x00, 0x00,              // version 0
      0x00, 0x00, 0x00, 0x02,  // Topics: 2
      0x00, 0x02, 't',  '0',   //   "t0"
      0x00, 0x02, 't',  '1',   //   "t1"
      0x00, 0x00, 0x00, 0x02,  // UserData: 2 bytes
      0x01, 0x02,
  };
  EXPECT_EQ(s.Encode(0), golden);
}

// v1 appends OwnedPartitions []TopicPartition, each a Topic string and Partitions []int32
// (int32 count, then each int32 big-endian). A null UserData is length -1.
TEST(ConsumerProtocolTest, SubscriptionV1MatchesGoldenBytes) {
  Subscription s;
  s.topics = {"orders"};
  s.owned_partitions = {{"orders", {0, 2}}};
  s.generation_id = 7;  // v2+: left out of v1
  const Bytes golden = {
      0x00, 0x01,                        // version 1
      0x00, 0x00, 0x00, 0x01,            // Topics: 1
      0x00, 0x06, 'o',  'r',  'd', 'e',  //   "orders"
      'r',  's',                         //
      0xff, 0xff, 0xff, 0xff,            // UserData: null
      0x00, 0x00, 0x00, 0x01,            // OwnedPartitions: 1
      0x00, 0x06, 'o',  'r',  'd', 'e',  //   Topic "orders"
      'r',  's',                         //
      0x00, 0x00, 0x00, 0x02,            //   Partitions: 2
      0x00, 0x00, 0x00, 0x00,            //     0
      0x00, 0x00, 0x00, 0x02,            //     2
  };
  EXPECT_EQ(s.Encode(1), golden);
  Result<Subscription> back = Subscription::Decode(golden);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  Subscription expected = s;
  expected.generation_id = -1;
  EXPECT_EQ(*back, expected);
}

// v2 appends GenerationId int32, v3 RackId, a nullable string (int16 length, -1 null).
TEST(ConsumerProtocolTest, SubscriptionV3MatchesGoldenBytes) {
  Subscription s;
  s.topics = {"t"};
  s.user_data = Bytes{};
  s.generation_id = 5;
  s.rack_id = "r1";
  const Bytes golden = {
      0x00, 0x03,              // version 3
      0x00, 0x00, 0x00, 0x01,  // Topics: 1
      0x00, 0x01, 't',         //   "t"
      0x00, 0x00, 0x00, 0x00,  // UserData: empty (not null)
      0x00, 0x00, 0x00, 0x00,  // OwnedPartitions: 0
      0x00, 0x00, 0x00, 0x05,  // GenerationId 5
      0x00, 0x02, 'r',  '1',   // RackId "r1"
  };
  EXPECT_EQ(s.Encode(3), golden);
  EXPECT_EQ(s.Encode(), golden);  // 3 is the default
}

// ConsumerProtocolAssignment (every version): AssignedPartitions []TopicPartition, then
// UserData bytes, nullable.
TEST(ConsumerProtocolTest, AssignmentV0MatchesGoldenBytes) {
  Assignment a;
  a.assigned_partitions = {{"t0", {0, 1}}};
  const Bytes golden = {
      0x00, 0x00,              // version 0
      0x00, 0x00, 0x00, 0x01,  // AssignedPartitions: 1
      0x00, 0x02, 't',  '0',   //   Topic "t0"
      0x00, 0x00, 0x00, 0x02,  //   Partitions: 2
      0x00, 0x00, 0x00, 0x00,  //     0
      0x00, 0x00, 0x00, 0x01,  //     1
      0xff, 0xff, 0xff, 0xff,  // UserData: null
  };
  EXPECT_EQ(a.Encode(0), golden);
  EXPECT_EQ(a.Encode(3), WithVersion(golden, 3));  // the same fields in every version
  Result<Assignment> back = Assignment::Decode(golden);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, a);
}

// What librdkafka 2.0 (Debian 12's) sends: v1, user data empty rather than null, an empty
// owned-partitions array.
TEST(ConsumerProtocolTest, DecodesLibrdkafkaSubscription) {
  const Bytes bytes = {0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x03, 'a', 'b',
                       'c',  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  Result<Subscription> s = Subscription::Decode(bytes);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->topics, std::vector<std::string>{"abc"});
  EXPECT_EQ(s->user_data, Bytes{});
  EXPECT_TRUE(s->owned_partitions.empty());
  EXPECT_EQ(s->generation_id, -1);
  EXPECT_FALSE(s->rack_id.has_value());
}

// A topic listed twice (librdkafka 0.9 wrote one entry per run of a topic in its list) is
// one topic; partitions come out ascending, each once.
TEST(ConsumerProtocolTest, DecodeMergesATopicListedTwice) {
  const Bytes bytes = {
      0x00, 0x00,                                                       // version 0
      0x00, 0x00, 0x00, 0x03,                                           // AssignedPartitions: 3
      0x00, 0x01, 'b',                                                  //   "b"
      0x00, 0x00, 0x00, 0x02,                                           //   2: 5, 1
      0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 'a',  //   "a"
      0x00, 0x00, 0x00, 0x00,                                           //   none
      0x00, 0x01, 'b',                                                  //   "b" again
      0x00, 0x00, 0x00, 0x02,                                           //   2: 1, 0
      0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // UserData: empty
  };
  Result<Assignment> a = Assignment::Decode(bytes);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->assigned_partitions, (PartitionsByTopic{{"a", {}}, {"b", {0, 1, 5}}}));
  EXPECT_EQ(a->user_data, Bytes{});

  Subscription s;
  s.topics = {"t"};
  Bytes sub = s.Encode(1);
  sub.resize(sub.size() - 4);  // the empty OwnedPartitions
  Bytes owned = {0, 0, 0, 2, 0, 1, 't', 0, 0, 0, 1, 0, 0, 0, 3, 0, 1, 't', 0, 0, 0, 1, 0, 0, 0, 3};
  sub.insert(sub.end(), owned.begin(), owned.end());
  Result<Subscription> back = Subscription::Decode(sub);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->owned_partitions, (PartitionsByTopic{{"t", {3}}}));
}

// ------------------------------------------------------------------ round trips

TEST(ConsumerProtocolTest, SubscriptionRoundTripsEveryVersion) {
  for (int16_t v = 0; v <= 3; ++v) {
    SCOPED_TRACE(v);
    Bytes bytes = FullSubscription().Encode(v);
    EXPECT_EQ(bytes[1], v);
    Result<Subscription> back = Subscription::Decode(bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, AsOfVersion(FullSubscription(), v));
    EXPECT_EQ(back->Encode(v), bytes);
  }
}

TEST(ConsumerProtocolTest, SubscriptionKeepsNullApartFromEmpty) {
  for (int16_t v = 0; v <= 3; ++v) {
    SCOPED_TRACE(v);
    Subscription empty;
    empty.user_data = Bytes{};
    if (v >= 3) empty.rack_id = "";
    Subscription null;
    for (const Subscription& s : {empty, null}) {
      Result<Subscription> back = Subscription::Decode(s.Encode(v));
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(*back, s);
    }
  }
}

TEST(ConsumerProtocolTest, AssignmentRoundTripsEveryVersion) {
  Assignment a;
  a.assigned_partitions = {{"orders", {0, 1, 2}}, {"payments", {}}, {"z", {7}}};
  a.user_data = Bytes{1, 2, 3};
  for (int16_t v = 0; v <= 3; ++v) {
    SCOPED_TRACE(v);
    Bytes bytes = a.Encode(v);
    Result<Assignment> back = Assignment::Decode(bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, a);
  }
  Assignment empty;
  Result<Assignment> back = Assignment::Decode(empty.Encode());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, empty);
}

TEST(ConsumerProtocolTest, EncodeWritesANewerVersionAsTheNewestKnown) {
  EXPECT_EQ(FullSubscription().Encode(9), FullSubscription().Encode(3));
  Assignment a;
  a.assigned_partitions = {{"t", {1}}};
  EXPECT_EQ(a.Encode(9), a.Encode(3));
}

// ------------------------------------------------------------------ newer versions

TEST(ConsumerProtocolTest, NewerSubscriptionVersionReadsKnownFieldsAndIgnoresTheRest) {
  Bytes bytes = WithVersion(FullSubscription().Encode(3), 4);
  bytes.insert(bytes.end(), {0x00, 0x00, 0x00, 0x09, 0xff});  // a future field
  Result<Subscription> s = Subscription::Decode(bytes);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s, FullSubscription());

  // Exactly v3's fields under version 32767 read too.
  s = Subscription::Decode(WithVersion(FullSubscription().Encode(3), INT16_MAX));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s, FullSubscription());

  // A newer version still needs every field v3 has.
  Bytes v3 = FullSubscription().Encode(3);
  v3.pop_back();
  ExpectInvalid(Subscription::Decode(WithVersion(v3, 4)).status());
}

TEST(ConsumerProtocolTest, NewerAssignmentVersionIgnoresTrailingBytes) {
  Assignment a;
  a.assigned_partitions = {{"t", {0}}};
  Bytes bytes = WithVersion(a.Encode(), 7);
  bytes.push_back(0x42);
  Result<Assignment> back = Assignment::Decode(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, a);
}

// ------------------------------------------------------------------ malformed input

TEST(ConsumerProtocolTest, EveryTruncationIsInvalid) {
  const Bytes sub = FullSubscription().Encode(3);
  for (size_t n = 0; n < sub.size(); ++n) {
    SCOPED_TRACE(n);
    ExpectInvalid(Subscription::Decode(std::span(sub.data(), n)).status());
  }
  Assignment a;
  a.assigned_partitions = {{"orders", {0, 1}}};
  a.user_data = Bytes{9};
  const Bytes asg = a.Encode();
  for (size_t n = 0; n < asg.size(); ++n) {
    SCOPED_TRACE(n);
    ExpectInvalid(Assignment::Decode(std::span(asg.data(), n)).status());
  }
}

TEST(ConsumerProtocolTest, TrailingBytesOfAKnownVersionAreInvalid) {
  for (int16_t v = 0; v <= 3; ++v) {
    SCOPED_TRACE(v);
    Bytes sub = FullSubscription().Encode(v);
    sub.push_back(0);
    Status st = Subscription::Decode(sub).status();
    ExpectInvalid(st);
    EXPECT_NE(st.message().find("after the last field"), std::string::npos) << st.message();
    Bytes asg = Assignment{}.Encode(v);
    asg.push_back(0);
    ExpectInvalid(Assignment::Decode(asg).status());
  }
}

TEST(ConsumerProtocolTest, NegativeVersionIsInvalid) {
  Bytes sub = WithVersion(FullSubscription().Encode(0), -1);
  ExpectInvalid(Subscription::Decode(sub).status());
  ExpectInvalid(Assignment::Decode(WithVersion(Assignment{}.Encode(0), INT16_MIN)).status());
}

TEST(ConsumerProtocolTest, NullOrNegativeArrayLengthsAreInvalid) {
  for (uint8_t low : {0xff, 0xfe}) {  // -1 (null: the arrays are not nullable) and -2
    SCOPED_TRACE(low);
    // Topics.
    ExpectInvalid(
        Subscription::Decode(Bytes{0, 0, 0xff, 0xff, 0xff, low, 0xff, 0xff, 0xff, 0xff}).status());
    // OwnedPartitions, then one topic's Partitions.
    ExpectInvalid(
        Subscription::Decode(Bytes{0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, low})
            .status());
    ExpectInvalid(Subscription::Decode(Bytes{0, 1, 0, 0, 0, 0,   0xff, 0xff, 0xff, 0xff, 0,
                                             0, 0, 1, 0, 1, 't', 0xff, 0xff, 0xff, low})
                      .status());
    // AssignedPartitions, then Partitions.
    ExpectInvalid(
        Assignment::Decode(Bytes{0, 0, 0xff, 0xff, 0xff, low, 0xff, 0xff, 0xff, 0xff}).status());
    ExpectInvalid(Assignment::Decode(Bytes{0, 0, 0, 0, 0, 1, 0, 1, 't', 0xff, 0xff, 0xff, low, 0xff,
                                           0xff, 0xff, 0xff})
                      .status());
  }
}

TEST(ConsumerProtocolTest, NegativeStringAndBytesLengthsAreInvalid) {
  // A topic name of length -1 (null: not nullable) and -2.
  ExpectInvalid(Subscription::Decode(Bytes{0, 0, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 0}).status());
  ExpectInvalid(Subscription::Decode(Bytes{0, 0, 0, 0, 0, 1, 0xff, 0xfe, 0, 0, 0, 0}).status());
  // UserData of length -2 (-1 is null, which is allowed).
  ExpectInvalid(Subscription::Decode(Bytes{0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe}).status());
  ExpectInvalid(Assignment::Decode(Bytes{0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0}).status());
  // RackId of length -2 (-1 is null).
  Subscription s;
  Bytes v3 = s.Encode(3);
  ASSERT_EQ(v3.back(), 0xff);
  v3.back() = 0xfe;
  ExpectInvalid(Subscription::Decode(v3).status());
}

TEST(ConsumerProtocolTest, CountsBeyondTheBytesLeftAreInvalidWithoutAllocating) {
  // 2^31 - 1 topics, 2^31 - 1 owned topics, 2^31 - 1 partitions, in a few bytes: refused
  // from the count alone (a reserve of that many would throw or exhaust memory).
  ExpectInvalid(Subscription::Decode(Bytes{0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 1, 't'}).status());
  ExpectInvalid(Subscription::Decode(
                    Bytes{0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0, 0})
                    .status());
  ExpectInvalid(Assignment::Decode(Bytes{0,    0,    0, 0, 0, 1, 0,    1,    't',  0x7f, 0xff,
                                         0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
                    .status());
  // A string or bytes longer than what is left.
  ExpectInvalid(Subscription::Decode(Bytes{0, 0, 0, 0, 0, 1, 0x7f, 0xff, 't'}).status());
  ExpectInvalid(Subscription::Decode(Bytes{0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 1}).status());
}

TEST(ConsumerProtocolTest, ErrorsNameTheStructAndTheField) {
  Status st = Subscription::Decode(Bytes{0, 0, 0, 0, 0, 1, 0xff, 0xfe}).status();
  EXPECT_NE(st.message().find("ConsumerProtocolSubscription"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("topic"), std::string::npos) << st.message();
  st = Assignment::Decode(Bytes{0}).status();
  EXPECT_NE(st.message().find("ConsumerProtocolAssignment"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("version"), std::string::npos) << st.message();
}

// ------------------------------------------------------------------ helpers

TEST(ConsumerProtocolTest, GroupByTopicSortsAndDropsDuplicates) {
  std::vector<TopicPartition> flat = {{"b", 2}, {"a", 1}, {"b", 0}, {"a", 1}, {"a", 0}};
  PartitionsByTopic grouped = GroupByTopic(flat);
  EXPECT_EQ(grouped, (PartitionsByTopic{{"a", {0, 1}}, {"b", {0, 2}}}));
  EXPECT_EQ(Flatten(grouped),
            (std::vector<TopicPartition>{{"a", 0}, {"a", 1}, {"b", 0}, {"b", 2}}));
  EXPECT_TRUE(GroupByTopic({}).empty());
}

}  // namespace
}  // namespace sluice::kafka::group
