// IsrChangeWrite: a leader's ISR change as the CAS EtcdIsrStore sends to etcd, and each
// refusal (unknown partition, another leader or epoch, a stale version, a bad ISR).
#include "broker/etcd_isr_store.h"

#include <gtest/gtest.h>

#include "cluster/cluster_values.h"

namespace sluice::broker {
namespace etcd_isr_store_test {
namespace {

using namespace cluster;  // NOLINT

constexpr const char* kIncA = "AAAAAAAAAAAAAAAAAAAAAA";
constexpr const char* kIncB = "BBBBBBBBBBBBBBBBBBBBBA";
constexpr const char* kIncB2 = "BBBBBBBBBBBBBBBBBBBBBQ";
constexpr const char* kTopicId = "MkU3OEVBNTcwNTJENDM2Qg";

class IsrChangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const KeyLayout& k = view_.keys();
    Put(k.Broker(1), ToJson(BrokerRegistration{"h1", 9001, "i1", 19001, kIncA, true}));
    Put(k.Broker(2), ToJson(BrokerRegistration{"h2", 9002, "i2", 19002, kIncB2, true}));
    Put(k.Topic("t"), ToJson(TopicAssignment{kTopicId, {{1, 2, 3}}, {}}));
    Put(k.Partition("t", 0), ToJson(PartitionState{1, 4, {{1, kIncA}, {2, kIncB}}, 7}));
    version_ = revision_;
  }
  void Put(const std::string& key, const std::string& value) {
    ++revision_;
    ASSERT_TRUE(view_.Put(key, value, revision_, revision_).ok());
  }
  IsrError Change(int32_t leader, int32_t epoch, std::vector<int32_t> isr, int64_t version,
                  MetadataWrite* w, const IsrStore::BrokerEpochs& epochs = {}) {
    return IsrChangeWrite(view_, "t", 0, leader, epoch, isr, version, epochs, w);
  }

  ClusterView view_{"test"};
  int64_t revision_ = 0;
  int64_t version_ = 0;
};

TEST_F(IsrChangeTest, AShrinkIsACasOnThePartitionsRevisionKeepingIncarnations) {
  MetadataWrite w;
  ASSERT_EQ(Change(1, 4, {1}, version_, &w), IsrError::kNone);
  const std::string key = view_.keys().Partition("t", 0);
  ASSERT_EQ(w.compares.size(), 1u);
  EXPECT_EQ(w.compares[0].key, key);
  EXPECT_EQ(w.compares[0].mod_revision, revision_);
  ASSERT_EQ(w.puts.size(), 1u);
  EXPECT_EQ(w.puts[0].key, key);
  auto written = ParsePartitionState(w.puts[0].value);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(*written, (PartitionState{1, 4, {{1, kIncA}}, 7}));
}

TEST_F(IsrChangeTest, AMemberAddedTakesItsLiveIncarnation) {
  // Broker 2 is in the ISR with an old incarnation: kept as it joined. A new member
  // (broker 3) must be registered.
  MetadataWrite w;
  EXPECT_EQ(Change(1, 4, {1, 2, 3}, version_, &w), IsrError::kInvalidIsr);
  Put(view_.keys().Broker(3), ToJson(BrokerRegistration{"h3", 9003, "i3", 19003, kIncB2, true}));
  ASSERT_EQ(Change(1, 4, {1, 2, 3}, version_, &w, {{3, revision_}}), IsrError::kNone);
  auto written = ParsePartitionState(w.puts.at(0).value);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(written->isr, (std::vector<IsrMember>{{1, kIncA}, {2, kIncB}, {3, kIncB2}}));
}

TEST_F(IsrChangeTest, AMemberAddedMustRunAsTheRegistrationItFetchedWith) {
  // KIP-903: broker 3 caught up in a fetch made as registration R; it restarted since
  // (wiped, perhaps) and registered again at R' — the fetch at R does not add R'.
  Put(view_.keys().Broker(3), ToJson(BrokerRegistration{"h3", 9003, "i3", 19003, kIncA, true}));
  const int64_t fetched_as = revision_;
  const int64_t registered = revision_ + 100;  // a new create_revision, as a new lease's key
  ASSERT_TRUE(view_
                  .Put(view_.keys().Broker(3),
                       ToJson(BrokerRegistration{"h3", 9003, "i3", 19003, kIncB2, false}),
                       registered, registered)
                  .ok());
  MetadataWrite w;
  EXPECT_EQ(Change(1, 4, {1, 2, 3}, version_, &w, {{3, fetched_as}}), IsrError::kInvalidIsr);
  EXPECT_EQ(Change(1, 4, {1, 2, 3}, version_, &w), IsrError::kInvalidIsr);  // no epoch seen
  EXPECT_EQ(Change(1, 4, {1, 2, 3}, version_, &w, {{3, -1}}), IsrError::kInvalidIsr);
  EXPECT_TRUE(w.puts.empty());
  // A member kept needs none: it joined with its own incarnation.
  ASSERT_EQ(Change(1, 4, {1, 2}, version_, &w), IsrError::kNone);
  w = {};
  ASSERT_EQ(Change(1, 4, {1, 2, 3}, version_, &w, {{3, registered}}), IsrError::kNone);
  auto written = ParsePartitionState(w.puts.at(0).value);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(written->isr, (std::vector<IsrMember>{{1, kIncA}, {2, kIncB}, {3, kIncB2}}));
}

TEST_F(IsrChangeTest, RefusalsNameWhyAndWriteNothing) {
  MetadataWrite w;
  EXPECT_EQ(IsrChangeWrite(view_, "nope", 0, 1, 4, {1}, version_, {}, &w),
            IsrError::kUnknownPartition);
  EXPECT_EQ(IsrChangeWrite(view_, "t", 1, 1, 4, {1}, version_, {}, &w),
            IsrError::kUnknownPartition);
  EXPECT_EQ(Change(2, 4, {2}, version_, &w), IsrError::kFencedLeaderEpoch);  // not the leader
  EXPECT_EQ(Change(1, 3, {1}, version_, &w), IsrError::kFencedLeaderEpoch);  // an old epoch
  EXPECT_EQ(Change(1, 5, {1}, version_, &w), IsrError::kFencedLeaderEpoch);
  EXPECT_EQ(Change(1, 4, {1}, version_ - 1, &w), IsrError::kInvalidVersion);
  EXPECT_EQ(Change(1, 4, {}, version_, &w), IsrError::kInvalidIsr);
  EXPECT_EQ(Change(1, 4, {2}, version_, &w), IsrError::kInvalidIsr);     // without the leader
  EXPECT_EQ(Change(1, 4, {1, 1}, version_, &w), IsrError::kInvalidIsr);  // a duplicate
  EXPECT_EQ(Change(1, 4, {1, 4}, version_, &w), IsrError::kInvalidIsr);  // not a replica
  EXPECT_TRUE(w.compares.empty());
  EXPECT_TRUE(w.puts.empty());
}

}  // namespace
}  // namespace etcd_isr_store_test
}  // namespace sluice::broker
