// EtcdClient against a real etcd 3.4 (/usr/bin/etcd) on loopback: every call, compare-and-
// swap both ways, leases, errors, and failover across a three-member cluster.
#include "cluster/etcd_client.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "cluster/tests/etcd_fixture.h"

namespace sluice::cluster {
namespace {

using testing::EtcdCluster;

class EtcdClientTest : public ::testing::Test {
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
    // Keys of this test only.
    prefix_ =
        std::string("/") + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/";
  }

  static EtcdCluster* etcd_;
  std::unique_ptr<EtcdClient> client_;
  std::string prefix_;
};

EtcdCluster* EtcdClientTest::etcd_ = nullptr;

TEST_F(EtcdClientTest, PutGetRangeDeleteRoundTripBinaryKeysAndValues) {
  const std::string binary_value("\0\x01\xff\n\"{", 6);
  auto put = client_->Put(prefix_ + "a", binary_value);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_GT(put->header.revision, 0);
  EXPECT_NE(put->header.cluster_id, 0u);
  EXPECT_NE(put->header.member_id, 0u);
  EXPECT_GT(put->header.raft_term, 0u);
  EXPECT_FALSE(put->prev_kv.has_value());

  auto got = client_->Get(prefix_ + "a");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->kv.has_value());
  EXPECT_EQ(got->kv->value, binary_value);
  EXPECT_EQ(got->kv->version, 1);
  EXPECT_EQ(got->kv->create_revision, put->header.revision);
  EXPECT_EQ(got->kv->mod_revision, put->header.revision);
  EXPECT_EQ(got->header.revision, put->header.revision);

  auto second = client_->Put(PutRequest{.key = prefix_ + "a", .value = "", .prev_kv = true});
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(second->prev_kv.has_value());
  EXPECT_EQ(second->prev_kv->value, binary_value);
  got = client_->Get(prefix_ + "a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->kv->value, "");  // an empty value: "value" left out by the gateway
  EXPECT_EQ(got->kv->version, 2);

  const std::string odd_key = prefix_ + std::string("\xff\x00z", 3);
  ASSERT_TRUE(client_->Put(odd_key, "odd").ok());
  ASSERT_TRUE(client_->Put(prefix_ + "b", "2").ok());
  ASSERT_TRUE(client_->Put(prefix_ + "c", "3").ok());
  ASSERT_TRUE(client_->Put(prefix_.substr(0, prefix_.size() - 1) + "0", "outside").ok());

  auto all = client_->RangePrefix(prefix_);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->kvs.size(), 4u);
  EXPECT_EQ(all->count, 4);
  EXPECT_EQ(all->kvs[0].key, prefix_ + "a");
  EXPECT_EQ(all->kvs[3].key, odd_key);

  auto limited = client_->RangePrefix(prefix_, 2);
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->kvs.size(), 2u);
  EXPECT_TRUE(limited->more);
  EXPECT_EQ(limited->count, 4);

  // The newest change first: "c" was put last inside the prefix (the key outside it later).
  auto newest = client_->Range({.key = prefix_,
                                .range_end = PrefixRangeEnd(prefix_),
                                .limit = 1,
                                .keys_only = true,
                                .newest_first = true});
  ASSERT_TRUE(newest.ok()) << newest.status().ToString();
  ASSERT_EQ(newest->kvs.size(), 1u);
  EXPECT_EQ(newest->kvs[0].key, prefix_ + "c");
  EXPECT_LT(newest->kvs[0].mod_revision, newest->header.revision);

  // A read at the revision of the first put sees the first value.
  auto past = client_->Range({.key = prefix_ + "a", .revision = put->header.revision});
  ASSERT_TRUE(past.ok()) << past.status().ToString();
  ASSERT_EQ(past->kvs.size(), 1u);
  EXPECT_EQ(past->kvs[0].value, binary_value);

  auto missing = client_->Get(prefix_ + "nope");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->kv.has_value());

  auto del = client_->Delete(DeleteRequest{.key = prefix_ + "b", .prev_kv = true});
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(del->deleted, 1);
  ASSERT_EQ(del->prev_kvs.size(), 1u);
  EXPECT_EQ(del->prev_kvs[0].value, "2");
  auto none = client_->Delete(prefix_ + "b");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->deleted, 0);  // "deleted" left out

  auto prefix_del = client_->DeletePrefix(prefix_);
  ASSERT_TRUE(prefix_del.ok());
  EXPECT_EQ(prefix_del->deleted, 3);
  auto left = client_->RangePrefix(prefix_.substr(0, prefix_.size() - 1));
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->kvs.size(), 1u);
  EXPECT_EQ(left->kvs[0].value, "outside");
}

TEST_F(EtcdClientTest, TxnCompareAndSwapSucceedsAndFails) {
  const std::string key = prefix_ + "epoch";
  // Create only if absent.
  TxnRequest create{.compares = {Compare::Version(key, CompareResult::kEqual, 0)},
                    .success = {TxnOp::Put(key, "1")},
                    .failure = {TxnOp::Get(key)}};
  auto first = client_->Txn(create);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->succeeded);
  ASSERT_EQ(first->responses.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<PutResponse>(first->responses[0]));
  const int64_t created_at = first->header.revision;

  auto again = client_->Txn(create);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->succeeded);
  ASSERT_EQ(again->responses.size(), 1u);
  const auto& current = std::get<RangeResponse>(again->responses[0]);
  ASSERT_EQ(current.kvs.size(), 1u);
  EXPECT_EQ(current.kvs[0].value, "1");
  EXPECT_EQ(again->header.revision, created_at);  // nothing written

  // Swap on the mod revision: the first writer wins, the stale one fails.
  TxnRequest bump{.compares = {Compare::ModRevision(key, CompareResult::kEqual, created_at)},
                  .success = {TxnOp::Put(PutRequest{.key = key, .value = "2", .prev_kv = true}),
                              TxnOp::Put(prefix_ + "isr", "1,2,3")}};
  auto won = client_->Txn(bump);
  ASSERT_TRUE(won.ok()) << won.status().ToString();
  EXPECT_TRUE(won->succeeded);
  ASSERT_EQ(won->responses.size(), 2u);
  EXPECT_EQ(std::get<PutResponse>(won->responses[0]).prev_kv->value, "1");
  auto lost = client_->Txn(bump);
  ASSERT_TRUE(lost.ok());
  EXPECT_FALSE(lost->succeeded);
  EXPECT_TRUE(lost->responses.empty());  // an empty failure branch: no "responses"

  // Every target and operator.
  auto value_ne = client_->Txn({.compares = {Compare::Value(key, CompareResult::kNotEqual, "2")}});
  ASSERT_TRUE(value_ne.ok());
  EXPECT_FALSE(value_ne->succeeded);
  auto checks = client_->Txn(
      {.compares = {Compare::Value(key, CompareResult::kEqual, "2"),
                    Compare::Version(key, CompareResult::kGreater, 1),
                    Compare::Version(key, CompareResult::kLess, 3),
                    Compare::CreateRevision(key, CompareResult::kEqual, created_at),
                    Compare::ModRevision(key, CompareResult::kGreater, created_at),
                    Compare::Lease(key, CompareResult::kEqual, 0)},
       .success = {TxnOp::Delete(DeleteRequest{.key = key, .prev_kv = true}),
                   TxnOp::Range({.key = prefix_, .range_end = PrefixRangeEnd(prefix_)})}});
  ASSERT_TRUE(checks.ok()) << checks.status().ToString();
  EXPECT_TRUE(checks->succeeded);
  EXPECT_EQ(std::get<DeleteResponse>(checks->responses[0]).deleted, 1);
  // Operations in one transaction see the ones before them.
  const auto& after = std::get<RangeResponse>(checks->responses[1]);
  ASSERT_EQ(after.kvs.size(), 1u);
  EXPECT_EQ(after.kvs[0].key, prefix_ + "isr");
}

TEST_F(EtcdClientTest, LeasesGrantRenewAttachExpireAndRevoke) {
  auto lease = client_->Grant(2);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_NE(lease->id, 0);
  EXPECT_GE(lease->ttl, 2);
  ASSERT_TRUE(client_->Put(prefix_ + "broker", "alive", lease->id).ok());
  auto got = client_->Get(prefix_ + "broker");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->kv->lease, lease->id);
  auto attached = client_->Txn(
      {.compares = {Compare::Lease(prefix_ + "broker", CompareResult::kEqual, lease->id)}});
  ASSERT_TRUE(attached.ok());
  EXPECT_TRUE(attached->succeeded);

  auto renewed = client_->KeepAliveOnce(lease->id);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_EQ(renewed->id, lease->id);
  EXPECT_GT(renewed->ttl, 0);

  // Left alone, the lease expires and takes its key along (waited for; no timing asserted).
  for (int i = 0;; ++i) {
    ASSERT_LT(i, 600) << "the lease's key outlived a minute";
    auto g = client_->Get(prefix_ + "broker");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    if (!g->kv.has_value()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto expired = client_->KeepAliveOnce(lease->id);
  ASSERT_TRUE(expired.ok()) << expired.status().ToString();
  EXPECT_LE(expired->ttl, 0);
  got = client_->Get(prefix_ + "broker");
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->kv.has_value());
  // Putting with the expired lease is etcd's NotFound.
  auto dead = client_->Put(prefix_ + "broker", "late", lease->id);
  ASSERT_FALSE(dead.ok());
  EXPECT_EQ(dead.status().code(), StatusCode::kNotFound) << dead.status().ToString();

  auto other = client_->Grant(60);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(client_->Put(prefix_ + "k2", "v", other->id).ok());
  auto revoked = client_->Revoke(other->id);
  ASSERT_TRUE(revoked.ok()) << revoked.status().ToString();
  EXPECT_GT(revoked->header.revision, 0);
  got = client_->Get(prefix_ + "k2");
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->kv.has_value());             // revoking deletes attached keys at once
  EXPECT_TRUE(client_->Revoke(other->id).ok());  // already gone: fine
  auto gone = client_->KeepAliveOnce(other->id);
  ASSERT_TRUE(gone.ok());
  EXPECT_LE(gone->ttl, 0);
  EXPECT_FALSE(client_->Grant(0).ok());
}

TEST_F(EtcdClientTest, StatusAndCompaction) {
  auto s = client_->Status();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->leader, s->header.member_id);  // a single member leads itself
  EXPECT_GT(s->raft_term, 0u);
  EXPECT_TRUE(s->version.starts_with("3."));
  auto one = client_->StatusOf(0);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->header.cluster_id, s->header.cluster_id);
  EXPECT_FALSE(client_->StatusOf(5).ok());

  auto p1 = client_->Put(prefix_ + "k", "1");
  ASSERT_TRUE(p1.ok());
  auto p2 = client_->Put(prefix_ + "k", "2");
  ASSERT_TRUE(p2.ok());
  ASSERT_TRUE(client_->Compact(p2->header.revision).ok());
  auto old = client_->Range({.key = prefix_ + "k", .revision = p1->header.revision});
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.status().code(), StatusCode::kOutOfRange) << old.status().ToString();
  auto future = client_->Range({.key = prefix_ + "k", .revision = p2->header.revision + 1000});
  ASSERT_FALSE(future.ok());
  EXPECT_NE(future.status().message().find("future revision"), std::string::npos)
      << future.status().ToString();
}

TEST(EtcdClientOptionsTest, RejectsBadEndpointsAndTimeouts) {
  EXPECT_FALSE(EtcdClient::Create({}).ok());
  EXPECT_FALSE(EtcdClient::Create({.endpoints = {"https://127.0.0.1:2379"}}).ok());
  EXPECT_FALSE(EtcdClient::Create({.endpoints = {"http://127.0.0.1"}}).ok());
  EXPECT_FALSE(EtcdClient::Create({.endpoints = {"http://127.0.0.1:0"}}).ok());
  EXPECT_FALSE(EtcdClient::Create({.endpoints = {"http://127.0.0.1:99999"}}).ok());
  EXPECT_FALSE(EtcdClient::Create({.endpoints = {"http://:2379"}}).ok());
  EXPECT_FALSE(EtcdClient::Create({.endpoints = {"http://a/b:2379"}}).ok());
  EXPECT_FALSE(EtcdClient::Create({.endpoints = {"127.0.0.1:2379"}, .request_timeout_ms = 0}).ok());
  auto ok = EtcdClient::Create({.endpoints = {"127.0.0.1:2379", "http://[::1]:2380/"}});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->endpoints()[0].url, "http://127.0.0.1:2379");
  EXPECT_EQ((*ok)->endpoints()[1].host, "::1");
  EXPECT_EQ((*ok)->endpoints()[1].port, 2380);
}

TEST(EtcdClientUnreachableTest, NoMemberListeningIsAnIOErrorWithinTheCallTimeout) {
  auto ports = testing::FreeLoopbackPorts(2);
  auto c = EtcdClient::Create({.endpoints = {"http://127.0.0.1:" + std::to_string(ports[0]),
                                             "http://127.0.0.1:" + std::to_string(ports[1])},
                               .call_timeout_ms = 300,
                               .retry_backoff_ms = 20});
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Get("k");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIOError);
  EXPECT_NE(r.status().message().find("gave up after"), std::string::npos) << r.status().ToString();
  // A refused connection never sent the write: it is retried, and fails the same way.
  auto w = (*c)->Put("k", "v");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message().find("may have been applied"), std::string::npos);
}

// Endpoints naming members of two different clusters: the first answer fixes the cluster,
// an answer from the other one is an error, not data.
TEST(EtcdClusterIdTest, AMemberOfAnotherClusterIsRefused) {
  if (!EtcdCluster::Unavailable().empty()) GTEST_SKIP() << EtcdCluster::Unavailable();
  auto a = EtcdCluster::Start();
  auto b = EtcdCluster::Start();
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = EtcdClient::Create({.endpoints = {(*a)->endpoint(0), (*b)->endpoint(0)}});
  ASSERT_TRUE(c.ok());
  auto put = (*c)->Put("/k", "a");
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ((*c)->cluster_id(), put->header.cluster_id);
  ASSERT_TRUE((*a)->Kill(0).ok());
  auto got = (*c)->Get("/k");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition) << got.status().ToString();
}

// Three members; the one the client talks to is killed, the client carries on with the
// others, and the member rejoins after a restart.
TEST(EtcdFailoverTest, CallsMoveToTheNextMemberWhenOneIsKilled) {
  if (!EtcdCluster::Unavailable().empty()) GTEST_SKIP() << EtcdCluster::Unavailable();
  auto cluster = EtcdCluster::Start({.members = 3});
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  EtcdCluster& etcd = **cluster;
  auto c = EtcdClient::Create({.endpoints = etcd.endpoints(), .request_timeout_ms = 1000});
  ASSERT_TRUE(c.ok());
  EtcdClient& client = **c;
  auto first = client.Put("/failover/k", "0");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const size_t talking_to = client.preferred_endpoint();
  const uint64_t cluster_id = first->header.cluster_id;
  std::set<uint64_t> members;
  for (size_t i = 0; i < 3; ++i) {
    auto s = client.StatusOf(i);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->header.cluster_id, cluster_id);
    members.insert(s->header.member_id);
  }
  EXPECT_EQ(members.size(), 3u);

  ASSERT_TRUE(etcd.Kill(static_cast<int>(talking_to)).ok());
  // Writes may meet a leader election: a write whose outcome is unknown is re-read, as a
  // real caller would, and retried.
  for (int i = 1; i <= 20; ++i) {
    std::string v = std::to_string(i);
    auto put = client.Put("/failover/k", v);
    if (!put.ok()) {
      ASSERT_NE(put.status().message().find("may have been applied"), std::string::npos)
          << put.status().ToString();
      auto check = client.Get("/failover/k");
      ASSERT_TRUE(check.ok()) << check.status().ToString();
      if (!check->kv || check->kv->value != v) {
        ASSERT_TRUE(client.Put("/failover/k", v).ok());
      }
    }
    EXPECT_NE(client.preferred_endpoint(), talking_to);
    auto got = client.Get("/failover/k");
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->kv->value, v);
    EXPECT_NE(got->header.member_id, 0u);
  }
  auto status = client.Status();
  ASSERT_TRUE(status.ok());
  EXPECT_NE(status->leader, 0u);
  EXPECT_FALSE(client.StatusOf(talking_to).ok());

  ASSERT_TRUE(etcd.Restart(static_cast<int>(talking_to)).ok()) << etcd.LogTail(talking_to);
  // The restarted member catches up (a linearizable read through it sees the last write).
  auto caught_up = client.StatusOf(talking_to);
  ASSERT_TRUE(caught_up.ok()) << caught_up.status().ToString();
  EXPECT_EQ(caught_up->header.cluster_id, cluster_id);
  auto only = EtcdClient::Create({.endpoints = {etcd.endpoint(static_cast<int>(talking_to))}});
  ASSERT_TRUE(only.ok());
  auto got = (*only)->Get("/failover/k");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->kv->value, "20");
}

}  // namespace
}  // namespace sluice::cluster
