// LeaseKeeper against a real etcd: a lease outlives its TTL while kept, goes with Stop, and
// its loss is reported when etcd revokes it or cannot be reached for a whole TTL; its local
// deadline is measured from the renewal's request and passes before etcd drops the lease.
#include "cluster/lease_keeper.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "base/clock.h"
#include "cluster/tests/etcd_fixture.h"
#include "cluster/tests/etcd_test_util.h"
#include "cluster/tests/fault_proxy_process.h"

namespace sluice::cluster {
namespace {

using testing::EtcdCluster;
using testing::FaultProxyProcess;
using testing::WaitFor;

class LeaseKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Unavailable().empty()) GTEST_SKIP() << EtcdCluster::Unavailable();
    auto c = EtcdCluster::Start();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    etcd_ = std::move(c).value();
    auto client = EtcdClient::Create({.endpoints = etcd_->endpoints()});
    ASSERT_TRUE(client.ok());
    client_ = std::move(client).value();
  }

  // What on_lost reported.
  struct Loss {
    std::mutex mu;
    int calls = 0;  // guarded by mu
    Status why;     // guarded by mu
    LeaseKeeper::LostFn Fn() {
      return [this](int64_t, const Status& s) {
        std::lock_guard lock(mu);
        ++calls;
        why = s;
      };
    }
    int count() {
      std::lock_guard lock(mu);
      return calls;
    }
  };

  bool KeyExists(const std::string& key) {
    auto g = client_->Get(key);
    return g.ok() && g->kv.has_value();
  }

  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(LeaseKeeperTest, KeepsTheLeaseAlivePastItsTtlAndRevokesOnStop) {
  Loss loss;
  auto k = LeaseKeeper::Start(*client_, 2, loss.Fn());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_GE((*k)->granted_ttl_s(), 2);
  ASSERT_TRUE(client_->Put("/broker/1", "alive", (*k)->lease_id()).ok());
  // Six renewals at TTL/3 span two TTLs: without them the key would be gone.
  ASSERT_TRUE(WaitFor([&] { return (*k)->renewals() >= 6; }));
  EXPECT_TRUE(KeyExists("/broker/1"));
  EXPECT_FALSE((*k)->lost());
  EXPECT_EQ(loss.count(), 0);
  ASSERT_TRUE((*k)->Stop().ok());
  EXPECT_FALSE(KeyExists("/broker/1"));  // revoked, not left to expire
  EXPECT_TRUE((*k)->Stop().ok());        // twice is fine
  EXPECT_EQ(loss.count(), 0);
}

TEST_F(LeaseKeeperTest, ReportsLossWhenTheLeaseIsRevokedElsewhere) {
  Loss loss;
  auto k = LeaseKeeper::Start(*client_, 2, loss.Fn());
  ASSERT_TRUE(k.ok());
  ASSERT_TRUE(client_->Revoke((*k)->lease_id()).ok());
  ASSERT_TRUE(WaitFor([&] { return loss.count() > 0; }));
  EXPECT_TRUE((*k)->lost());
  {
    std::lock_guard lock(loss.mu);
    EXPECT_EQ(loss.why.code(), StatusCode::kNotFound) << loss.why.ToString();
  }
  EXPECT_TRUE((*k)->Stop().ok());
  EXPECT_EQ(loss.count(), 1);
}

TEST_F(LeaseKeeperTest, ReportsLossWhenEtcdIsUnreachableForATtl) {
  Loss loss;
  auto k = LeaseKeeper::Start(*client_, 2, loss.Fn());
  ASSERT_TRUE(k.ok());
  ASSERT_TRUE(etcd_->Kill(0).ok());
  ASSERT_TRUE(WaitFor([&] { return loss.count() > 0; }));
  EXPECT_TRUE((*k)->lost());
  {
    std::lock_guard lock(loss.mu);
    EXPECT_EQ(loss.why.code(), StatusCode::kIOError) << loss.why.ToString();
    EXPECT_NE(loss.why.message().find("not renewed"), std::string::npos) << loss.why.ToString();
  }
  (*k)->Abandon();
}

// A hung member (SIGSTOP: connections open, nothing answered) cannot hold a renewal past
// the lease: the keeper's own calls give up within TTL/3.
TEST_F(LeaseKeeperTest, ReportsLossWhenEtcdHangs) {
  Loss loss;
  auto k = LeaseKeeper::Start(*client_, 2, loss.Fn());
  ASSERT_TRUE(k.ok());
  ASSERT_TRUE(etcd_->Pause(0).ok());
  ASSERT_TRUE(WaitFor([&] { return loss.count() > 0; }));
  ASSERT_TRUE(etcd_->Resume(0).ok());
  EXPECT_TRUE((*k)->lost());
  EXPECT_TRUE((*k)->Stop().ok());  // lost: nothing to revoke
}

// With several members, a silent one (it takes the connection and never answers) costs a
// renewal half its budget, not all of it: the keepalive goes on to the next member, and
// later renewals start there. The lease is never lost.
TEST_F(LeaseKeeperTest, RenewsThroughAnotherMemberWhenTheFirstIsSilent) {
  testing::SilentListener silent;
  ASSERT_GT(silent.port(), 0);
  auto via = EtcdClient::Create({.endpoints = {silent.url(), etcd_->endpoint(0)}});
  ASSERT_TRUE(via.ok());
  Loss loss;
  auto k = LeaseKeeper::Start(**via, 2, loss.Fn());  // the grant waits the silent one out
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  // Past three TTLs of renewals.
  ASSERT_TRUE(WaitFor([&] { return (*k)->renewals() >= 9 || loss.count() > 0; }));
  EXPECT_EQ(loss.count(), 0);
  EXPECT_FALSE((*k)->lost());
  EXPECT_TRUE((*k)->Stop().ok());
}

TEST_F(LeaseKeeperTest, AnAbandonedLeaseExpiresByItself) {
  auto k = LeaseKeeper::Start(*client_, 2, nullptr);
  ASSERT_TRUE(k.ok());
  ASSERT_TRUE(client_->Put("/broker/2", "alive", (*k)->lease_id()).ok());
  (*k)->Abandon();
  ASSERT_TRUE(WaitFor([&] { return !KeyExists("/broker/2"); }));
  EXPECT_FALSE(LeaseKeeper::Start(*client_, 0, nullptr).ok());
}

// Review item 5 of 0018: etcd restarts the TTL when it handles a renewal, before its answer
// comes back; with the answers held back D ms on the way back, a deadline counted from
// the answer would run D past the lease. Counted from the request, it is at most
// now - D + TTL whenever it is read (the answer that set it arrived at least D after the
// request left).
TEST_F(LeaseKeeperTest, TheDeadlineIsCountedFromTheRenewalsRequest) {
  auto proxy = FaultProxyProcess::Start("127.0.0.1", etcd_->client_port(0));
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  auto via = EtcdClient::Create({.endpoints = {(*proxy)->url()}});
  ASSERT_TRUE(via.ok());
  constexpr int64_t kTtlS = 6;
  constexpr int64_t kDelayMs = 800;
  ASSERT_TRUE((*proxy)->Delay(kDelayMs, "down").ok());
  std::atomic<int64_t> published{0};
  auto k = LeaseKeeper::Start(**via, kTtlS, nullptr, &published);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const int64_t bound = (kTtlS * 1000 - kDelayMs) * 1'000'000 - LeaseKeeper::MarginNanos(kTtlS);
  EXPECT_LE((*k)->valid_until_ns(), MonotonicNanos() + bound);  // the grant's
  EXPECT_TRUE((*k)->valid());
  for (int64_t seen = 0; seen < 3; ++seen) {
    ASSERT_TRUE(WaitFor([&] { return (*k)->renewals() > seen; }));
    const int64_t until = (*k)->valid_until_ns();
    EXPECT_LE(until, MonotonicNanos() + bound) << "renewal " << seen;
    EXPECT_EQ(published.load(), until);  // the owner's copy is the same
  }
  EXPECT_FALSE((*k)->lost());
  ASSERT_TRUE((*k)->Stop().ok());
}

// Cut off from etcd, the keeper's deadline passes (the owner stops leading) while etcd
// still holds the lease: every deadline it published is below the time etcd dropped the
// key, and the loss is reported with the deadline at 0.
TEST_F(LeaseKeeperTest, CutOffTheDeadlinePassesBeforeEtcdDropsTheLease) {
  auto proxy = FaultProxyProcess::Start("127.0.0.1", etcd_->client_port(0));
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  auto via = EtcdClient::Create({.endpoints = {(*proxy)->url()}});
  ASSERT_TRUE(via.ok());
  Loss loss;
  std::atomic<int64_t> published{0};
  auto k = LeaseKeeper::Start(**via, 2, loss.Fn(), &published);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  ASSERT_TRUE(client_->Put("/broker/3", "alive", (*k)->lease_id()).ok());
  ASSERT_TRUE(WaitFor([&] { return (*k)->renewals() >= 1; }));
  ASSERT_TRUE((*proxy)->Blackhole().ok());
  int64_t latest = published.load();
  // etcd, asked directly, drops the key only once the lease expired in etcd.
  ASSERT_TRUE(WaitFor([&] {
    latest = std::max(latest, published.load());
    return !KeyExists("/broker/3");
  }));
  const int64_t gone_ns = MonotonicNanos();
  EXPECT_LT(latest, gone_ns);
  ASSERT_TRUE(WaitFor([&] { return loss.count() > 0; }));
  EXPECT_FALSE((*k)->valid());
  EXPECT_EQ(published.load(), 0);
  (*k)->Abandon();
}

}  // namespace
}  // namespace sluice::cluster
