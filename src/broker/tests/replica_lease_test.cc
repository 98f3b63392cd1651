// A leader whose etcd lease may be gone stops at the lease keeper's local deadline, on its
// shards, without waiting for the controller's thread (0018 review item 5): real brokers
// on 127.0.0.1, a LeaseKeeper on a real etcd behind tests/tools/fault_proxy.py, cut.
#include <gtest/gtest.h>

#include <atomic>

#include "broker/tests/broker_test_util.h"
#include "broker/tests/replica_test_util.h"
#include "cluster/lease_keeper.h"
#include "cluster/tests/etcd_fixture.h"
#include "cluster/tests/fault_proxy_process.h"

namespace sluice::broker {
namespace replica_lease_test {
namespace {

using kafka::ApiKey;
using kafka::ErrorCode;
using testing::Client;
using testing::WaitUntil;

kafka::ProduceResponse::PartitionProduceResponse Produce(Client& c, const testing::Bytes& batch,
                                                         int16_t acks) {
  kafka::ProduceRequest req;
  req.acks = acks;
  req.timeout_ms = 10'000;
  req.topic_data.push_back({"t", {{0, std::span<const uint8_t>(batch), {}}}, {}});
  auto resp = c.Call<kafka::ProduceResponse>(ApiKey::kProduce, 9, req);
  if (resp.responses.size() != 1 || resp.responses[0].partition_responses.size() != 1) {
    ADD_FAILURE() << "bad produce response shape";
    return {};
  }
  return resp.responses[0].partition_responses[0];
}

class ReplicaLeaseTest : public testing::ReplicaClusterFixture {
 protected:
  void SetUp() override {
    ReplicaClusterFixture::SetUp();
    if (!cluster::testing::EtcdCluster::Unavailable().empty()) {
      GTEST_SKIP() << cluster::testing::EtcdCluster::Unavailable();
    }
    auto etcd = cluster::testing::EtcdCluster::Start();
    ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
    etcd_ = std::move(*etcd);
    auto proxy = cluster::testing::FaultProxyProcess::Start("127.0.0.1", etcd_->client_port(0));
    ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
    proxy_ = std::move(*proxy);
    auto client = cluster::EtcdClient::Create({.endpoints = {proxy_->url()}});
    ASSERT_TRUE(client.ok());
    client_ = std::move(*client);
  }
  void TearDown() override {
    ReplicaClusterFixture::TearDown();
    if (lease_ != nullptr) lease_->Abandon();
  }

  std::unique_ptr<cluster::testing::EtcdCluster> etcd_;
  std::unique_ptr<cluster::testing::FaultProxyProcess> proxy_;
  std::unique_ptr<cluster::EtcdClient> client_;
  std::unique_ptr<cluster::LeaseKeeper> lease_;
  std::atomic<int64_t> deadline_{0};
  std::atomic<int> losses_{0};
};

TEST_F(ReplicaLeaseTest, ALeaderCutOffFromEtcdStopsAtItsLeaseDeadline) {
  MakeNodes(2, "t");
  // Node 1's shards read the deadline its lease keeper publishes. Nothing acts on the
  // reported loss (no controller): the shards stop by themselves.
  auto k = cluster::LeaseKeeper::Start(
      *client_, 3, [this](int64_t, const Status&) { losses_.fetch_add(1); }, &deadline_);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  lease_ = std::move(*k);
  node(1).replica_options.lease_deadline_ns = &deadline_;
  node(1).Start();
  node(2).Start();
  Elect("t", 0, 1, {1, 2}, std::vector<int32_t>{1, 2});
  Client c(node(1).port());
  ASSERT_EQ(Produce(c, testing::ValueBatch("a", 2, 1000), -1).error_code, ErrorCode::kNone);
  ASSERT_EQ(node(1).View("t").high_watermark, 2);

  // The follower goes away; an acks=1 batch is written but not committed.
  node(2).Stop();
  ASSERT_EQ(Produce(c, testing::ValueBatch("b", 3, 1000), 1).error_code, ErrorCode::kNone);
  EXPECT_EQ(node(1).View("t").high_watermark, 2);

  // etcd cut off: once the deadline passed, produce of any acks is refused.
  ASSERT_TRUE(proxy_->Blackhole().ok());
  ASSERT_TRUE(WaitUntil([&] { return !lease_->valid(); }, 60'000));
  for (int16_t acks : {int16_t{1}, int16_t{-1}}) {
    auto r = Produce(c, testing::ValueBatch("c", 1, 1000), acks);
    EXPECT_EQ(r.error_code, ErrorCode::kNotLeaderOrFollower) << "acks=" << acks;
  }
  EXPECT_EQ(node(1).View("t").log_end, 5);  // nothing appended

  // The follower comes back and fetches everything: the high watermark stays where it
  // was (another leader may already commit in a newer epoch).
  node(2).Start();
  LeaderAndIsr l = *store_.Get("t", 0);
  ASSERT_TRUE(node(2)
                  .replicas->BecomeFollower("t", 0, l.leader_epoch, 1, "127.0.0.1", node(1).port())
                  .ok());
  ASSERT_TRUE(WaitUntil([&] { return node(1).View("t").follower_log_ends[2] == 5; }));
  EXPECT_EQ(node(1).View("t").high_watermark, 2);
  EXPECT_EQ(node(1).View("t").role, ReplicaRole::kLeader);  // no one stepped it down
}

}  // namespace
}  // namespace replica_lease_test
}  // namespace sluice::broker
