// The etcd client and watcher through tests/tools/fault_proxy.py: a member cut off (refused
// connections) or partitioned (a blackhole: connections hang) while etcd itself is fine.
#include <gtest/gtest.h>

#include <mutex>

#include "cluster/etcd_client.h"
#include "cluster/tests/etcd_fixture.h"
#include "cluster/tests/etcd_test_util.h"
#include "cluster/tests/fault_proxy_process.h"
#include "cluster/watcher.h"

namespace sluice::cluster {
namespace {

using testing::EtcdCluster;
using testing::FaultProxyProcess;
using testing::WaitFor;

class PartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Unavailable().empty()) GTEST_SKIP() << EtcdCluster::Unavailable();
  }
  std::unique_ptr<EtcdCluster> etcd_;
};

TEST_F(PartitionTest, WatchResumesWhereItStoppedWhenAPartitionHeals) {
  auto c = EtcdCluster::Start({.progress_notify_interval_ms = 300});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  etcd_ = std::move(c).value();
  auto proxy = FaultProxyProcess::Start("127.0.0.1", etcd_->client_port(0));
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  auto direct = EtcdClient::Create({.endpoints = etcd_->endpoints()});
  auto through = EtcdClient::Create({.endpoints = {(*proxy)->url()}});
  ASSERT_TRUE(direct.ok() && through.ok());

  std::mutex mu;
  std::vector<std::string> values;  // guarded by mu
  auto count = [&] {
    std::lock_guard lock(mu);
    return values.size();
  };
  auto w =
      Watcher::Start(**through, {.key = "/p", .progress_notify = true, .idle_timeout_ms = 1500},
                     {.on_events = [&](const WatchBatch& b) {
                       std::lock_guard lock(mu);
                       for (const WatchEvent& e : b.events) values.push_back(e.kv.value);
                     }});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(WaitFor([&] { return (*w)->next_revision() > 0; }));
  ASSERT_TRUE((*direct)->Put("/p", "0").ok());
  ASSERT_TRUE(WaitFor([&] { return count() == 1; }));

  // Partitioned: etcd goes on taking writes the watcher cannot see.
  ASSERT_TRUE((*proxy)->Blackhole().ok());
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE((*direct)->Put("/p", std::to_string(i)).ok());
  // Long enough for the idle timeout to drop the stream at least once.
  ASSERT_TRUE(WaitFor([&] { return (*w)->connections() >= 2; }));
  EXPECT_EQ(count(), 1u);
  ASSERT_TRUE((*proxy)->Pass().ok());
  ASSERT_TRUE(WaitFor([&] { return count() >= 6; }));
  ASSERT_TRUE((*direct)->Put("/p", "6").ok());
  ASSERT_TRUE(WaitFor([&] { return count() >= 7; }));
  std::lock_guard lock(mu);
  ASSERT_EQ(values.size(), 7u);  // none lost, none repeated
  for (int i = 0; i <= 6; ++i) EXPECT_EQ(values[i], std::to_string(i));
}

// Three members, the client's first one behind the proxy.
class ProxiedMemberTest : public PartitionTest {
 protected:
  void SetUp() override {
    PartitionTest::SetUp();
    if (IsSkipped()) return;
    auto c = EtcdCluster::Start({.members = 3});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    etcd_ = std::move(c).value();
    auto p = FaultProxyProcess::Start("127.0.0.1", etcd_->client_port(0));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    proxy_ = std::move(p).value();
    auto client =
        EtcdClient::Create({.endpoints = {proxy_->url(), etcd_->endpoint(1), etcd_->endpoint(2)},
                            .request_timeout_ms = 1000});
    ASSERT_TRUE(client.ok());
    client_ = std::move(client).value();
    ASSERT_TRUE(client_->Put("/m", "0").ok());
    ASSERT_EQ(client_->preferred_endpoint(), 0u);
  }
  std::unique_ptr<FaultProxyProcess> proxy_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(ProxiedMemberTest, ARefusedMemberIsSkippedByReadsAndWrites) {
  ASSERT_TRUE(proxy_->Cut().ok());
  // Nothing was sent to the refused member, so a write moves on as safely as a read.
  auto put = client_->Put("/m", "1");
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_NE(client_->preferred_endpoint(), 0u);
  auto got = client_->Get("/m");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->kv->value, "1");
  ASSERT_TRUE(proxy_->Pass().ok());
  auto through = client_->StatusOf(0);
  ASSERT_TRUE(through.ok()) << through.status().ToString();
}

TEST_F(ProxiedMemberTest, APartitionedMemberTimesOutReadsMoveOnWritesReportAnUnknownOutcome) {
  ASSERT_TRUE(proxy_->Blackhole().ok());
  // A read waits out one request timeout on the silent member, then asks the next.
  auto got = client_->Get("/m");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->kv->value, "0");
  EXPECT_NE(client_->preferred_endpoint(), 0u);
  // Back to the silent member first: a write sent there may have been applied, so it is
  // not sent again elsewhere.
  auto only_silent = EtcdClient::Create(
      {.endpoints = {proxy_->url(), etcd_->endpoint(1)}, .request_timeout_ms = 500});
  ASSERT_TRUE(only_silent.ok());
  auto put = (*only_silent)->Put("/m", "1");
  ASSERT_FALSE(put.ok());
  EXPECT_NE(put.status().message().find("may have been applied"), std::string::npos)
      << put.status().ToString();
  auto after = client_->Get("/m");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->kv->value, "0");  // the blackhole ate it
  // A transaction likewise; a lease keepalive (harmless to repeat) moves on.
  auto lease = client_->Grant(30);
  ASSERT_TRUE(lease.ok());
  auto renewed = (*only_silent)->KeepAliveOnce(lease->id);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_GT(renewed->ttl, 0);
}

// A failed call leaves the member it failed on behind: the next call (a write above all,
// which could not move on by itself) starts with the next member instead of waiting out
// the silent one again.
TEST_F(ProxiedMemberTest, TheNextCallStartsPastAMemberThatFailed) {
  ASSERT_TRUE(proxy_->Blackhole().ok());
  auto put = client_->Put("/m", "1");
  ASSERT_FALSE(put.ok());  // sent to the silent member: its outcome is unknown
  EXPECT_NE(put.status().message().find("may have been applied"), std::string::npos)
      << put.status().ToString();
  EXPECT_EQ(client_->preferred_endpoint(), 1u);
  auto again = client_->Put("/m", "2");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(client_->preferred_endpoint(), 1u);
}

}  // namespace
}  // namespace sluice::cluster
