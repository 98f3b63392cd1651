// ApplyIsrChange against a real etcd behind tests/tools/fault_proxy.py: a leader's ISR
// change whose etcd answer is lost. The write applied (the answer dropped on its way
// back) is answered as applied, with etcd's revision; one that never reached etcd (the
// request dropped) is refused and etcd still holds the old ISR (0018 review item 1's
// re-read, tested as the review asked).
#include <gtest/gtest.h>

#include <future>

#include "broker/cluster_controller_view.h"
#include "broker/etcd_isr_store.h"
#include "cluster/cluster_values.h"
#include "cluster/etcd_client.h"
#include "cluster/tests/etcd_fixture.h"
#include "cluster/tests/etcd_test_util.h"
#include "cluster/tests/fault_proxy_process.h"

namespace sluice::broker {
namespace etcd_isr_apply_test {
namespace {

using cluster::testing::EtcdCluster;
using cluster::testing::FaultProxyProcess;
using cluster::testing::WaitFor;

constexpr const char* kIncA = "AAAAAAAAAAAAAAAAAAAAAA";
constexpr const char* kIncB = "BBBBBBBBBBBBBBBBBBBBBA";
constexpr const char* kTopicId = "MkU3OEVBNTcwNTJENDM2Qg";

class EtcdIsrApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Unavailable().empty()) GTEST_SKIP() << EtcdCluster::Unavailable();
    auto etcd = EtcdCluster::Start();
    ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
    etcd_ = std::move(*etcd);
    auto direct = cluster::EtcdClient::Create({.endpoints = etcd_->endpoints()});
    ASSERT_TRUE(direct.ok());
    direct_ = std::move(*direct);
    auto proxy = FaultProxyProcess::Start("127.0.0.1", etcd_->client_port(0));
    ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
    proxy_ = std::move(*proxy);
    // A leader's controller reaches etcd through the proxy; an exchange gives up soon,
    // a read is retried for long.
    auto via = cluster::EtcdClient::Create({.endpoints = {proxy_->url()},
                                            .request_timeout_ms = 500,
                                            .connect_timeout_ms = 500,
                                            .call_timeout_ms = 60'000});
    ASSERT_TRUE(via.ok());
    via_ = std::move(*via);
    // Broker 1 leads t-0 in epoch 4 with ISR {1, 2}.
    const cluster::KeyLayout& k = view_.keys();
    Put(k.Broker(1), cluster::ToJson(cluster::BrokerRegistration{"h1", 9001, "i1", 19001, kIncA}));
    Put(k.Broker(2), cluster::ToJson(cluster::BrokerRegistration{"h2", 9002, "i2", 19002, kIncB}));
    Put(k.Topic("t"), cluster::ToJson(cluster::TopicAssignment{kTopicId, {{1, 2}}, {}}));
    Put(k.Partition("t", 0),
        cluster::ToJson(cluster::PartitionState{1, 4, {{1, kIncA}, {2, kIncB}}, 1}));
    auto all = direct_->RangePrefix(k.prefix());
    ASSERT_TRUE(all.ok());
    for (const cluster::KeyValue& kv : all->kvs) {
      ASSERT_TRUE(view_.Put(kv.key, kv.value, kv.mod_revision, kv.create_revision).ok());
    }
    version_ = view_.partitions().at({"t", 0}).mod_revision;
  }
  void Put(const std::string& key, const std::string& value) {
    ASSERT_TRUE(direct_->Put(key, value).ok());
  }
  cluster::GetResponse Held() {
    auto g = direct_->Get(view_.keys().Partition("t", 0));
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return g.ok() ? *g : cluster::GetResponse{};
  }
  // The shrink to {1}, as the leader asks it.
  cluster::MetadataWrite Shrink() {
    cluster::MetadataWrite w;
    EXPECT_EQ(IsrChangeWrite(view_, "t", 0, 1, 4, {1}, version_, {}, &w), IsrError::kNone);
    return w;
  }
  int64_t Dropped(const std::string& direction) {
    auto stats = proxy_->Stats();
    if (!stats.ok()) return 0;
    const std::string key = "\"dropped_" + direction + "\": ";
    const size_t at = stats->find(key);
    return at == std::string::npos ? 0 : std::stoll(stats->substr(at + key.size()));
  }

  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<cluster::EtcdClient> direct_;
  std::unique_ptr<FaultProxyProcess> proxy_;
  std::unique_ptr<cluster::EtcdClient> via_;
  ClusterView view_{"isr-apply"};
  int64_t version_ = 0;
};

TEST_F(EtcdIsrApplyTest, AnAppliedChangeWhoseAnswerIsLostCountsAsApplied) {
  const cluster::MetadataWrite w = Shrink();
  ASSERT_TRUE(proxy_->Blackhole("down").ok());  // requests arrive, answers are dropped
  auto applied = std::async(std::launch::async, [&] { return ApplyIsrChange(*via_, w, version_); });
  // etcd applied it: the key holds the new ISR. Then the path heals for the re-read.
  ASSERT_TRUE(WaitFor([&] {
    auto held = Held();
    return held.kv.has_value() && held.kv->value == w.puts[0].value;
  }));
  ASSERT_TRUE(WaitFor([&] { return Dropped("down") > 0; }));
  ASSERT_TRUE(proxy_->Pass().ok());
  const IsrApplied a = applied.get();
  EXPECT_EQ(a.error, IsrError::kNone);
  EXPECT_EQ(a.revision, Held().kv->mod_revision);
  EXPECT_GT(a.revision, version_);
}

TEST_F(EtcdIsrApplyTest, AChangeThatNeverReachedEtcdIsRefused) {
  const cluster::MetadataWrite w = Shrink();
  const std::string before = Held().kv->value;
  ASSERT_TRUE(proxy_->Blackhole("up").ok());  // requests are dropped
  auto applied = std::async(std::launch::async, [&] { return ApplyIsrChange(*via_, w, version_); });
  ASSERT_TRUE(WaitFor([&] { return Dropped("up") > 0; }));
  ASSERT_TRUE(proxy_->Pass().ok());
  const IsrApplied a = applied.get();
  EXPECT_EQ(a.error, IsrError::kInvalidVersion);
  EXPECT_EQ(Held().kv->value, before);
  EXPECT_EQ(Held().kv->mod_revision, version_);
}

TEST_F(EtcdIsrApplyTest, AnAnsweredRefusalIsRefused) {
  // Another write moved the key after the leader's view: the CAS fails, and says so.
  const cluster::MetadataWrite w = Shrink();
  Put(view_.keys().Partition("t", 0),
      cluster::ToJson(cluster::PartitionState{2, 5, {{2, kIncB}}, 2}));
  const IsrApplied a = ApplyIsrChange(*via_, w, version_);
  EXPECT_EQ(a.error, IsrError::kInvalidVersion);
}

}  // namespace
}  // namespace etcd_isr_apply_test
}  // namespace sluice::broker
