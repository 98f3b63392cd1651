// The controller's writes (controller_decisions.h, as etcd transactions by metadata_txn.h)
// against a real etcd: what the in-memory model of controller_decisions_test shows holds in
// etcd itself — an election from a stale read fails, a replaced controller cannot write,
// a node id registers once, producer-id blocks never overlap, a deletion takes the
// partition states with it.
#include <gtest/gtest.h>

#include "cluster/cluster_values.h"
#include "cluster/controller_decisions.h"
#include "cluster/etcd_client.h"
#include "cluster/metadata_txn.h"
#include "cluster/tests/etcd_fixture.h"

namespace sluice::cluster {
namespace {

using testing::EtcdCluster;

constexpr const char* kIncA = "AAAAAAAAAAAAAAAAAAAAAA";
constexpr const char* kIncB = "BBBBBBBBBBBBBBBBBBBBBA";

class ControllerWritesEtcdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!EtcdCluster::Unavailable().empty()) return;
    auto c = EtcdCluster::Start();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    etcd_ = std::move(c).value().release();
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override {
    if (etcd_ == nullptr) GTEST_SKIP() << EtcdCluster::Unavailable();
    auto c = EtcdClient::Create({.endpoints = etcd_->endpoints()});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
    // A cluster name of this test only.
    keys_ = KeyLayout(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  bool Apply(const MetadataWrite& w) {
    auto r = client_->Txn(ToTxn(w));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && r->succeeded;
  }
  int64_t ModRevision(const std::string& key) {
    auto g = client_->Get(key);
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return g.ok() && g->kv.has_value() ? g->kv->mod_revision : 0;
  }
  std::string Value(const std::string& key) {
    auto g = client_->Get(key);
    return g.ok() && g->kv.has_value() ? g->kv->value : "";
  }
  ControllerFence Elect(int32_t node) {
    const std::string epoch_key = keys_.ControllerEpoch();
    int64_t previous = 0;
    if (auto v = ParseControllerEpochValue(Value(epoch_key)); v.ok()) previous = v->epoch;
    EXPECT_TRUE(Apply(ControllerElectionWrite(keys_, node, 0, previous, ModRevision(epoch_key))));
    return {previous + 1, ModRevision(epoch_key)};
  }
  PartitionState Read(const std::string& topic, int32_t p) {
    auto s = ParsePartitionState(Value(keys_.Partition(topic, p)));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : PartitionState{};
  }

  static EtcdCluster* etcd_;
  std::unique_ptr<EtcdClient> client_;
  KeyLayout keys_{"unset"};
};

EtcdCluster* ControllerWritesEtcdTest::etcd_ = nullptr;

LiveBrokers Live(std::initializer_list<int32_t> nodes) {
  LiveBrokers live;
  for (int32_t n : nodes) live[n] = {n == 1 ? kIncA : kIncB, true};
  return live;
}

TEST_F(ControllerWritesEtcdTest, AnElectionFromAStaleRevisionFails) {
  ControllerFence fence = Elect(1);
  TopicAssignment topic{kIncA, {{1, 2}}, {}};
  for (const MetadataWrite& w : CreateTopicWrites(keys_, fence, "t", topic, Live({1, 2}))) {
    ASSERT_TRUE(Apply(w));
  }
  const int64_t read_rev = ModRevision(keys_.Partition("t", 0));
  const PartitionState read = Read("t", 0);
  EXPECT_EQ(read.leader, 1);
  auto first = Reelect({1, 2}, read, Live({2}), {}, fence.epoch);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(Apply(PartitionStateWrite(keys_, fence, "t", 0, read_rev, *first)));
  // The same read again (a second decider, or a retry that did not re-read): refused.
  PartitionState other = read;
  other.leader_epoch = first->leader_epoch;
  other.leader = 1;
  EXPECT_FALSE(Apply(PartitionStateWrite(keys_, fence, "t", 0, read_rev, other)));
  EXPECT_EQ(Read("t", 0), *first);
  EXPECT_EQ(Read("t", 0).leader, 2);
}

TEST_F(ControllerWritesEtcdTest, AReplacedControllerCannotWrite) {
  ControllerFence old_fence = Elect(1);
  TopicAssignment topic{kIncA, {{1, 2}}, {}};
  for (const MetadataWrite& w : CreateTopicWrites(keys_, old_fence, "t", topic, Live({1, 2}))) {
    ASSERT_TRUE(Apply(w));
  }
  // While the controller key exists nobody else is elected.
  EXPECT_FALSE(Apply(
      ControllerElectionWrite(keys_, 2, 0, old_fence.epoch, ModRevision(keys_.ControllerEpoch()))));
  ASSERT_TRUE(client_->Delete(keys_.Controller()).ok());  // its lease expired
  ControllerFence new_fence = Elect(2);
  EXPECT_EQ(new_fence.epoch, old_fence.epoch + 1);
  const int64_t rev = ModRevision(keys_.Partition("t", 0));
  auto change = Reelect({1, 2}, Read("t", 0), Live({2}), {}, old_fence.epoch);
  ASSERT_TRUE(change.has_value());
  EXPECT_FALSE(Apply(PartitionStateWrite(keys_, old_fence, "t", 0, rev, *change)));
  EXPECT_FALSE(Apply(CreateTopicWrites(keys_, old_fence, "u", topic, Live({2}))[0]));
  EXPECT_EQ(Value(keys_.Topic("u")), "");
  change->controller_epoch = new_fence.epoch;
  EXPECT_TRUE(Apply(PartitionStateWrite(keys_, new_fence, "t", 0, rev, *change)));
  EXPECT_EQ(Read("t", 0).controller_epoch, new_fence.epoch);
}

TEST_F(ControllerWritesEtcdTest, DeletionTakesThePartitionStatesAndBlocksRecreation) {
  ControllerFence fence = Elect(1);
  TopicAssignment topic{kIncA, std::vector<std::vector<int32_t>>(150, {1}), {}};
  auto writes = CreateTopicWrites(keys_, fence, "big", topic, Live({1}));
  ASSERT_EQ(writes.size(), 3u);  // etcd takes at most 128 operations a transaction
  for (const MetadataWrite& w : writes) ASSERT_TRUE(Apply(w));
  auto listed = client_->RangePrefix(keys_.PartitionsOf("big"));
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->kvs.size(), 150u);
  ASSERT_TRUE(Apply(DeleteTopicWrite(keys_, fence, "big", ModRevision(keys_.Topic("big")), kIncA)));
  listed = client_->RangePrefix(keys_.PartitionsOf("big"));
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->kvs.empty());
  EXPECT_FALSE(Apply(CreateTopicWrites(keys_, fence, "big", topic, Live({1}))[0]));
}

TEST_F(ControllerWritesEtcdTest, NodeIdsAndProducerIdBlocksAreTakenOnce) {
  BrokerRegistration reg{"127.0.0.1", 9092, "127.0.0.1", 9092, kIncA, true};
  EXPECT_TRUE(Apply(RegistrationWrite(keys_, 1, 0, reg)));
  EXPECT_FALSE(Apply(RegistrationWrite(keys_, 1, 0, reg)));
  auto [a_first, a] = TakeProducerIdBlock(keys_, std::nullopt, 0);
  auto [b_first, b] = TakeProducerIdBlock(keys_, std::nullopt, 0);
  EXPECT_TRUE(Apply(a));
  EXPECT_FALSE(Apply(b));
  auto current = ParseProducerIdBlock(Value(keys_.ProducerIds()));
  ASSERT_TRUE(current.ok());
  auto [c_first, c] = TakeProducerIdBlock(keys_, *current, ModRevision(keys_.ProducerIds()));
  EXPECT_TRUE(Apply(c));
  EXPECT_EQ(c_first, a_first + kProducerIdBlockSize);
}

// AppliedPuts against etcd's own answer: an updated key's create_revision is the one etcd
// keeps; a new key's is the write's revision.
TEST_F(ControllerWritesEtcdTest, AppliedPutsGiveTheRevisionsEtcdKeeps) {
  MetadataWrite first;
  first.puts.push_back({keys_.Broker(1), "a", 0});
  auto r1 = client_->Txn(ToTxn(first, true));
  ASSERT_TRUE(r1.ok() && r1->succeeded);
  MetadataWrite second;
  second.puts.push_back({keys_.Broker(1), "b", 0});
  second.puts.push_back({keys_.Broker(2), "c", 0});
  auto r2 = client_->Txn(ToTxn(second, true));
  ASSERT_TRUE(r2.ok() && r2->succeeded);
  const std::vector<AppliedPut> applied = AppliedPuts(second, *r2);
  ASSERT_EQ(applied.size(), 2u);
  for (const AppliedPut& a : applied) {
    auto g = client_->Get(a.key);
    ASSERT_TRUE(g.ok() && g->kv.has_value());
    EXPECT_EQ(a.create_revision, g->kv->create_revision) << a.key;
    EXPECT_EQ(a.mod_revision, g->kv->mod_revision) << a.key;
  }
  EXPECT_EQ(applied[0].create_revision, r1->header.revision);
  EXPECT_EQ(applied[1].create_revision, r2->header.revision);
}

}  // namespace
}  // namespace sluice::cluster
