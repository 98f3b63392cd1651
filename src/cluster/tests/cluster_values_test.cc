// The etcd values round-trip through their JSON, and every malformed value is refused with a
// reason (bad JSON, wrong types, out-of-range ids, oversized arrays, deep nesting).
#include "cluster/cluster_values.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::cluster {
namespace {

constexpr const char* kInc = "AAAAAAAAAAAAAAAAAAAAAA";
constexpr const char* kInc2 = "MkU3OEVBNTcwNTJENDM2Qg";

template <typename T, typename Parse>
void ExpectRoundTrip(const T& v, Parse parse) {
  std::string json = ToJson(v);
  auto back = parse(json);
  ASSERT_TRUE(back.ok()) << json << ": " << back.status().ToString();
  EXPECT_EQ(*back, v) << json;
}

template <typename Parse>
void ExpectRefused(Parse parse, const std::string& json, const std::string& reason) {
  auto r = parse(json);
  ASSERT_FALSE(r.ok()) << json;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(reason), std::string::npos)
      << json << " -> " << r.status().message();
}

TEST(ClusterValuesTest, EveryValueRoundTrips) {
  ExpectRoundTrip(ClusterIdValue{kInc2}, ParseClusterIdValue);
  ExpectRoundTrip(BrokerRegistration{"127.0.0.1", 9092, "10.0.0.1", 19092, kInc, false},
                  ParseBrokerRegistration);
  ExpectRoundTrip(
      BrokerRegistration{"127.0.0.1",
                         9093,
                         "127.0.0.1",
                         9094,
                         kInc,
                         true,
                         {{"SASL_SSL", "b1.example", 9093}, {"SSL", "127.0.0.1", 9094}}},
      ParseBrokerRegistration);
  ExpectRoundTrip(IncarnationValue{kInc}, ParseIncarnationValue);
  ExpectRoundTrip(ControllerValue{3, 17}, ParseControllerValue);
  ExpectRoundTrip(ControllerEpochValue{1LL << 40}, ParseControllerEpochValue);
  ExpectRoundTrip(TopicAssignment{kInc2, {{1, 2, 3}, {2, 3, 1}}, {{"cleanup.policy", "compact"}}},
                  ParseTopicAssignment);
  ExpectRoundTrip(PartitionState{2, 7, {{2, kInc}, {3, kInc2}}, 4}, ParsePartitionState);
  ExpectRoundTrip(PartitionState{-1, 8, {}, 5}, ParsePartitionState);
  ExpectRoundTrip(ProducerIdBlock{123000}, ParseProducerIdBlock);
  ExpectRoundTrip(DeletingValue{kInc2}, ParseDeletingValue);
}

TEST(ClusterValuesTest, TheJsonIsTheDocumentedOne) {
  EXPECT_EQ(ToJson(PartitionState{2, 7, {{2, kInc}}, 4}),
            std::string(R"({"controller_epoch":4,"isr":[[2,")") + kInc +
                R"("]],"leader":2,"leader_epoch":7})");
  EXPECT_EQ(ToJson(ControllerValue{3, 17}), R"({"epoch":17,"node":3})");
  // Unknown fields (a newer broker's) are ignored.
  auto c = ParseControllerValue(R"({"node": 1, "epoch": 2, "since": "later"})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->node, 1);
}

// A registration names each listener's address: a known protocol name at most once, a
// host, a real port; a registration without the field (kafka.addr) has none.
TEST(ClusterValuesTest, ARegistrationsListenersAreChecked) {
  const std::string head = std::string(R"({"host":"h","port":9092,"inter_broker_host":"h",)") +
                           R"("inter_broker_port":9093,"incarnation":")" + kInc +
                           R"(","clean":true)";
  auto plain = ParseBrokerRegistration(head + "}");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(plain->listeners.empty());
  EXPECT_EQ(ToJson(*plain).find("listeners"), std::string::npos);
  ExpectRefused(ParseBrokerRegistration, head + R"(,"listeners":{}})", "is not an array");
  ExpectRefused(ParseBrokerRegistration, head + R"(,"listeners":[1]})", "is not an object");
  ExpectRefused(ParseBrokerRegistration,
                head + R"(,"listeners":[{"name":"INTERNAL","host":"h","port":1}]})",
                "not a Kafka security protocol");
  ExpectRefused(ParseBrokerRegistration,
                head + R"(,"listeners":[{"name":"SSL","host":"","port":1}]})", "empty host");
  ExpectRefused(ParseBrokerRegistration,
                head + R"(,"listeners":[{"name":"SSL","host":"h","port":70000}]})",
                "\"port\" is 70000");
  ExpectRefused(ParseBrokerRegistration, head + R"(,"listeners":[{"name":"SSL","port":1}]})",
                "no \"host\"");
  ExpectRefused(ParseBrokerRegistration,
                head + R"(,"listeners":[{"name":"SSL","host":"h","port":1},)" +
                    R"({"name":"SSL","host":"h","port":2}]})",
                "listener SSL twice");
  std::string five = head + R"(,"listeners":[)";
  for (int i = 0; i < 5; ++i)
    five += std::string(i ? "," : "") + R"({"name":"SSL","host":"h","port":1})";
  ExpectRefused(ParseBrokerRegistration, five + "]}", "more than 4");
}

TEST(ClusterValuesTest, NotJsonOrNotAnObjectIsRefused) {
  for (const char* bad : {"", "{", "{\"node\": 1,", "[1,2]", "42", "\"x\"", "null", "{} {}",
                          "\xff\xfe", "{\"node\": 1 \"epoch\": 2}"}) {
    auto r = ParseControllerValue(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(ClusterValuesTest, WrongTypesAndMissingFieldsNameTheField) {
  ExpectRefused(ParseControllerValue, R"({"epoch": 1})", "no \"node\"");
  ExpectRefused(ParseControllerValue, R"({"node": "1", "epoch": 1})", "\"node\" is not an integer");
  ExpectRefused(ParseControllerValue, R"({"node": 1.5, "epoch": 1})", "\"node\" is not an integer");
  ExpectRefused(ParseControllerValue, R"({"node": true, "epoch": 1})", "not an integer");
  ExpectRefused(ParseBrokerRegistration,
                std::string(R"({"host":"h","port":9092,"inter_broker_host":"h",)") +
                    R"("inter_broker_port":9093,"incarnation":")" + kInc + R"(","clean":"yes"})",
                "\"clean\" is not true or false");
  ExpectRefused(ParseBrokerRegistration,
                std::string(R"({"host":"h","port":0,"inter_broker_host":"h",)") +
                    R"("inter_broker_port":9093,"incarnation":")" + kInc + R"(","clean":true})",
                "\"port\" is 0");
  ExpectRefused(ParseBrokerRegistration,
                R"({"host":"h","port":1,"inter_broker_host":"h","inter_broker_port":2,)"
                R"("incarnation":"short","clean":true})",
                "\"incarnation\" is not an id");
  ExpectRefused(ParseTopicAssignment, R"({"id": 5, "partitions": [[1]]})",
                "\"id\" is not a string");
  ExpectRefused(ParseTopicAssignment, std::string(R"({"id":")") + kInc + R"(","partitions":{}})",
                "\"partitions\" is not an array");
  ExpectRefused(ParseTopicAssignment,
                std::string(R"({"id":")") + kInc + R"(","partitions":[[1]],"configs":{"a":1}})",
                "config \"a\" is not a string");
  ExpectRefused(ParsePartitionState,
                R"({"leader":1,"leader_epoch":0,"isr":[[1]],"controller_epoch":0})",
                "not [node, incarnation]");
  ExpectRefused(ParsePartitionState,
                R"({"leader":1,"leader_epoch":0,"isr":[[1,"x"]],"controller_epoch":0})",
                "no valid incarnation");
}

TEST(ClusterValuesTest, NegativeAndOutOfRangeIdsAreRefused) {
  ExpectRefused(ParseControllerValue, R"({"node": -1, "epoch": 1})", "\"node\" is -1");
  ExpectRefused(ParseControllerValue, R"({"node": 2147483648, "epoch": 1})", "outside");
  ExpectRefused(ParseControllerValue, R"({"node": 1, "epoch": -5})", "\"epoch\" is -5");
  ExpectRefused(ParseControllerValue, R"({"node": 1, "epoch": 18446744073709551615})",
                "out of range");
  ExpectRefused(ParseControllerValue, R"({"node": 1, "epoch": 1e30})", "not an integer");
  // -1 is a leader (none); -2 is not.
  ExpectRefused(ParsePartitionState,
                R"({"leader":-2,"leader_epoch":0,"isr":[],"controller_epoch":0})",
                "\"leader\" is -2");
  ExpectRefused(ParsePartitionState,
                R"({"leader":1,"leader_epoch":-1,"isr":[],"controller_epoch":0})",
                "\"leader_epoch\" is -1");
  ExpectRefused(ParsePartitionState,
                std::string(R"({"leader":1,"leader_epoch":0,"isr":[[-3,")") + kInc +
                    R"("]],"controller_epoch":0})",
                "\"isr\" is -3");
  ExpectRefused(ParseTopicAssignment,
                std::string(R"({"id":")") + kInc + R"(","partitions":[[1,-1]]})",
                "\"partitions\" is -1");
  ExpectRefused(ParseProducerIdBlock, R"({"next": -1})", "\"next\" is -1");
  ExpectRefused(ParseProducerIdBlock, R"({"next": 9223372036854775807})", "outside");
}

TEST(ClusterValuesTest, DuplicatesAndEmptyAssignmentsAreRefused) {
  ExpectRefused(ParseTopicAssignment,
                std::string(R"({"id":")") + kInc + R"(","partitions":[[1,2,1]]})",
                "names node 1 twice");
  ExpectRefused(ParseTopicAssignment, std::string(R"({"id":")") + kInc + R"(","partitions":[]})",
                "no partitions");
  ExpectRefused(ParseTopicAssignment, std::string(R"({"id":")") + kInc + R"(","partitions":[[]]})",
                "partition 0 is not an array");
  ExpectRefused(ParsePartitionState,
                std::string(R"({"leader":1,"leader_epoch":0,"isr":[[1,")") + kInc + R"("],[1,")" +
                    kInc2 + R"("]],"controller_epoch":0})",
                "in the ISR twice");
}

TEST(ClusterValuesTest, HugeArraysAndValuesAreRefusedBeforeUse) {
  std::string many = "[";
  for (size_t i = 0; i <= kMaxReplicas; ++i) many += (i ? "," : "") + std::to_string(i);
  many += "]";
  ExpectRefused(ParseTopicAssignment,
                std::string(R"({"id":")") + kInc + R"(","partitions":[)" + many + "]}",
                "partition 0 is not an array of 1 to 256");
  std::string parts = "[";
  for (size_t i = 0; i <= kMaxPartitions; ++i) parts += i ? ",[1]" : "[1]";
  parts += "]";
  ExpectRefused(ParseTopicAssignment,
                std::string(R"({"id":")") + kInc + R"(","partitions":)" + parts + "}",
                "more than 100000");
  std::string isr = "[";
  for (size_t i = 0; i <= kMaxReplicas; ++i)
    isr += (i ? "," : "") + std::string("[") + std::to_string(i) + ",\"" + kInc + "\"]";
  isr += "]";
  ExpectRefused(ParsePartitionState,
                R"({"leader":1,"leader_epoch":0,"isr":)" + isr + R"(,"controller_epoch":0})",
                "\"isr\" has 257 entries");
  ExpectRefused(ParseControllerValue, std::string(kMaxValueBytes + 1, ' '), "more than");
  ExpectRefused(ParseControllerValue, std::string(100000, '[') + std::string(100000, ']'),
                "nested deeper");
  // Brackets inside strings are not nesting.
  auto ok = ParseClusterIdValue(std::string(R"({"id":")") + kInc + R"(","x":"[[[[[[[[[[[["})");
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(ClusterValuesTest, IdTextRoundTripsAndRefusesTrailingBits) {
  uint64_t hi = 0, lo = 0;
  const std::string text = IdText(0x0123456789abcdefULL, 0xfedcba9876543210ULL);
  EXPECT_EQ(text.size(), 22u);
  ASSERT_TRUE(ParseIdText(text, &hi, &lo));
  EXPECT_EQ(hi, 0x0123456789abcdefULL);
  EXPECT_EQ(lo, 0xfedcba9876543210ULL);
  EXPECT_FALSE(ParseIdText("AAAAAAAAAAAAAAAAAAAAAB", &hi, &lo));  // bits past the 128th
  EXPECT_FALSE(ParseIdText("AAAAAAAAAAAAAAAAAAAAA", &hi, &lo));
  EXPECT_FALSE(ParseIdText("AAAAAAAAAAAAAAAAAAAAA=", &hi, &lo));
}

TEST(ClusterValuesTest, KeysAreUnderTheClusterAndParseBack) {
  KeyLayout keys("prod");
  EXPECT_EQ(keys.Broker(3), "/sluice/prod/brokers/3");
  EXPECT_EQ(keys.Partition("orders.v1", 12), "/sluice/prod/partitions/orders.v1/12");
  EXPECT_EQ(keys.Controller(), "/sluice/prod/controller");
  EXPECT_EQ(keys.NodeOfBroker("/sluice/prod/brokers/3"), 3);
  EXPECT_EQ(keys.NodeOfBroker("/sluice/prod/brokers/03"), std::nullopt);
  EXPECT_EQ(keys.NodeOfBroker("/sluice/prod/brokers/-1"), std::nullopt);
  EXPECT_EQ(keys.NodeOfBroker("/sluice/prod/brokers/99999999999"), std::nullopt);
  EXPECT_EQ(keys.NodeOfBroker("/sluice/other/brokers/3"), std::nullopt);
  auto p = keys.PartitionOf("/sluice/prod/partitions/orders.v1/12");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->first, "orders.v1");
  EXPECT_EQ(p->second, 12);
  EXPECT_FALSE(keys.PartitionOf("/sluice/prod/partitions/orders.v1/").has_value());
  EXPECT_FALSE(keys.PartitionOf("/sluice/prod/partitions//1").has_value());
  EXPECT_FALSE(keys.PartitionOf("/sluice/prod/partitions/a/b/1").has_value());
  EXPECT_EQ(keys.TopicOf("/sluice/prod/topics/orders"), "orders");
  EXPECT_FALSE(keys.TopicOf("/sluice/prod/topics/").has_value());
  EXPECT_EQ(keys.DeletingOf("/sluice/prod/deleting/orders"), "orders");
  EXPECT_EQ(keys.NodeOfIncarnation("/sluice/prod/incarnations/0"), 0);
}

}  // namespace
}  // namespace sluice::cluster
