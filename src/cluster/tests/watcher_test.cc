// Watcher against a real etcd: delivery in order, history from a start revision, resumption
// after etcd restarts or a member goes silent, the compacted-revision path, progress
// notifications, and a prompt Cancel.
#include "cluster/watcher.h"

#include <gtest/gtest.h>

#include <mutex>

#include "cluster/tests/etcd_fixture.h"
#include "cluster/tests/etcd_test_util.h"

namespace sluice::cluster {
namespace {

using testing::EtcdCluster;
using testing::WaitFor;

// Collects what a watcher delivers, from its thread.
struct Collected {
  std::mutex mu;
  std::vector<WatchEvent> events;    // guarded by mu
  std::vector<int64_t> compactions;  // guarded by mu
  std::vector<int64_t> progress;     // guarded by mu

  WatchHandlers Handlers(std::function<int64_t(int64_t)> on_compacted = nullptr) {
    return WatchHandlers{.on_events =
                             [this](const WatchBatch& b) {
                               std::lock_guard lock(mu);
                               for (const WatchEvent& e : b.events) events.push_back(e);
                             },
                         .on_compacted = std::move(on_compacted),
                         .on_progress =
                             [this](int64_t r) {
                               std::lock_guard lock(mu);
                               progress.push_back(r);
                             }};
  }
  size_t size() {
    std::lock_guard lock(mu);
    return events.size();
  }
  std::vector<WatchEvent> Copy() {
    std::lock_guard lock(mu);
    return events;
  }
};

std::unique_ptr<EtcdClient> ClientOf(const EtcdCluster& etcd) {
  auto c = EtcdClient::Create({.endpoints = etcd.endpoints()});
  return c.ok() ? std::move(c).value() : nullptr;
}

class WatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Unavailable().empty()) GTEST_SKIP() << EtcdCluster::Unavailable();
    auto c = EtcdCluster::Start({.progress_notify_interval_ms = 300});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    etcd_ = std::move(c).value();
    client_ = ClientOf(*etcd_);
    ASSERT_NE(client_, nullptr);
  }
  // A watch with `options` through a client whose first member takes connections and never
  // answers: it must be created on the real member and deliver a change made there.
  void ExpectTheSilentMemberLeft(WatchOptions options) {
    testing::SilentListener silent;
    ASSERT_GT(silent.port(), 0);
    auto c = EtcdClient::Create({.endpoints = {silent.url(), etcd_->endpoint(0)}});
    ASSERT_TRUE(c.ok());
    ASSERT_EQ((*c)->preferred_endpoint(), 0u);  // the silent one first
    const std::string key = options.key;
    Collected got;
    auto w = Watcher::Start(**c, std::move(options), got.Handlers());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(WaitFor([&] { return (*w)->next_revision() > 0; }));  // created on the real one
    ASSERT_TRUE(client_->Put(key, "v").ok());
    ASSERT_TRUE(WaitFor([&] { return got.size() >= 1; }));
    EXPECT_GE((*w)->connections(), 2);
  }
  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(WatcherTest, DeliversEveryChangeUnderAPrefixInRevisionOrder) {
  Collected got;
  auto w =
      Watcher::Start(*client_, {.key = "/w/", .range_end = PrefixRangeEnd("/w/"), .prev_kv = true},
                     got.Handlers());
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return (*w)->next_revision() > 0; }));  // created
  ASSERT_TRUE(client_->Put("/w/a", "1").ok());
  ASSERT_TRUE(client_->Put("/x/outside", "no").ok());
  ASSERT_TRUE(client_->Put("/w/a", "2").ok());
  // Two events of one revision arrive together, in the transaction's order.
  ASSERT_TRUE(client_->Txn({.success = {TxnOp::Put("/w/b", "3"), TxnOp::Delete("/w/a")}}).ok());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(client_->Put("/w/n", std::to_string(i)).ok());
  ASSERT_TRUE(WaitFor([&] { return got.size() >= 54; }));
  auto events = got.Copy();
  ASSERT_EQ(events.size(), 54u);
  EXPECT_EQ(events[0].type, EventType::kPut);
  EXPECT_EQ(events[0].kv.key, "/w/a");
  EXPECT_EQ(events[0].kv.value, "1");
  EXPECT_EQ(events[0].kv.version, 1);
  EXPECT_FALSE(events[0].prev_kv.has_value());
  EXPECT_EQ(events[1].kv.value, "2");
  EXPECT_EQ(events[1].kv.version, 2);
  ASSERT_TRUE(events[1].prev_kv.has_value());
  EXPECT_EQ(events[1].prev_kv->value, "1");
  EXPECT_EQ(events[2].kv.key, "/w/b");
  EXPECT_EQ(events[3].type, EventType::kDelete);
  EXPECT_EQ(events[3].kv.key, "/w/a");
  EXPECT_EQ(events[3].kv.mod_revision, events[2].kv.mod_revision);
  ASSERT_TRUE(events[3].prev_kv.has_value());
  EXPECT_EQ(events[3].prev_kv->value, "2");
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_GE(events[i].kv.mod_revision, events[i - 1].kv.mod_revision);
  }
  for (int i = 0; i < 50; ++i) EXPECT_EQ(events[4 + i].kv.value, std::to_string(i));
  EXPECT_EQ((*w)->next_revision(), events.back().kv.mod_revision + 1);
  EXPECT_EQ((*w)->connections(), 1);
}

TEST_F(WatcherTest, StartRevisionReplaysHistoryAndProgressMovesTheResumePoint) {
  auto first = client_->Put("/h", "1");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(client_->Put("/h", "2").ok());
  auto last = client_->Put("/h", "3");
  ASSERT_TRUE(last.ok());
  ASSERT_TRUE(client_->Put("/other", "x").ok());  // moves the store's revision on
  Collected got;
  auto w = Watcher::Start(
      *client_, {.key = "/h", .start_revision = first->header.revision, .progress_notify = true},
      got.Handlers());
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(WaitFor([&] { return got.size() >= 3; }));
  auto events = got.Copy();
  EXPECT_EQ(events[0].kv.value, "1");
  EXPECT_EQ(events[2].kv.value, "3");
  // Progress notifications (every 300 ms here) report the revision everything was sent up
  // to: past /other's, which this watch does not see.
  ASSERT_TRUE(WaitFor([&] { return (*w)->next_revision() > last->header.revision + 1; }));
  std::lock_guard lock(got.mu);
  ASSERT_FALSE(got.progress.empty());
  EXPECT_GE(got.progress.back(), last->header.revision + 1);
}

TEST_F(WatcherTest, ResumesAfterEtcdRestartsWithoutLossOrRepeat) {
  Collected got;
  auto w =
      Watcher::Start(*client_, {.key = "/r/", .range_end = PrefixRangeEnd("/r/")}, got.Handlers());
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(WaitFor([&] { return (*w)->next_revision() > 0; }));
  int next = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 5; ++i, ++next)
      ASSERT_TRUE(client_->Put("/r/k", std::to_string(next)).ok());
    ASSERT_TRUE(WaitFor([&] { return got.size() >= static_cast<size_t>(next); }));
    ASSERT_TRUE(etcd_->Kill(0).ok());
    // Written right after the restart, likely before the watcher is back (its backoff
    // grows while the member is down): the watch resumes from its last revision + 1.
    ASSERT_TRUE(etcd_->Restart(0).ok()) << etcd_->LogTail(0);
    for (int i = 0; i < 5; ++i, ++next)
      ASSERT_TRUE(client_->Put("/r/k", std::to_string(next)).ok());
  }
  ASSERT_TRUE(WaitFor([&] { return got.size() >= static_cast<size_t>(next); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // room for a repeat to show
  auto events = got.Copy();
  ASSERT_EQ(events.size(), static_cast<size_t>(next));
  for (int i = 0; i < next; ++i) EXPECT_EQ(events[i].kv.value, std::to_string(i)) << i;
  EXPECT_GE((*w)->connections(), 4);
}

TEST_F(WatcherTest, CompactedStartRevisionAsksTheOwnerToRelist) {
  auto first = client_->Put("/c", "1");
  ASSERT_TRUE(first.ok());
  auto second = client_->Put("/c", "2");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(client_->Compact(second->header.revision).ok());
  Collected got;
  std::atomic<int64_t> relisted_at{0};
  std::string relisted_value;
  auto w = Watcher::Start(*client_, {.key = "/c", .start_revision = first->header.revision},
                          got.Handlers([&](int64_t compact_revision) -> int64_t {
                            {
                              std::lock_guard lock(got.mu);
                              got.compactions.push_back(compact_revision);
                            }
                            auto list = client_->Get("/c");  // the owner's re-list
                            if (!list.ok()) return 0;
                            relisted_value = list->kv->value;
                            relisted_at = list->header.revision;
                            return list->header.revision + 1;
                          }));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(WaitFor([&] { return relisted_at.load() > 0; }));
  EXPECT_EQ(relisted_value, "2");
  ASSERT_TRUE(client_->Put("/c", "3").ok());
  ASSERT_TRUE(WaitFor([&] { return got.size() >= 1; }));
  auto events = got.Copy();
  ASSERT_EQ(events.size(), 1u);  // nothing from before the re-list
  EXPECT_EQ(events[0].kv.value, "3");
  std::lock_guard lock(got.mu);
  ASSERT_EQ(got.compactions.size(), 1u);
  EXPECT_EQ(got.compactions[0], second->header.revision);
}

TEST_F(WatcherTest, CompactionWithoutAHandlerStopsTheWatch) {
  auto first = client_->Put("/s", "1");
  ASSERT_TRUE(first.ok());
  auto second = client_->Put("/s", "2");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(client_->Compact(second->header.revision).ok());
  auto w = Watcher::Start(*client_, {.key = "/s", .start_revision = first->header.revision}, {});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(WaitFor([&] { return (*w)->stopped(); }));
}

TEST_F(WatcherTest, ASilentMemberIsLeftAfterTheIdleTimeout) {
  ExpectTheSilentMemberLeft({.key = "/i", .progress_notify = true, .idle_timeout_ms = 1000});
}

// A member that takes the stream and never answers, with no idle timeout and no progress
// notifications: the probe (a Status on a connection of its own) goes unanswered too, and
// the watch moves to the next member.
TEST_F(WatcherTest, ASilentMemberIsLeftWhenItDoesNotAnswerAProbe) {
  ExpectTheSilentMemberLeft({.key = "/q", .probe_interval_ms = 300});
  EXPECT_FALSE(Watcher::Start(*client_, {.key = "/q", .probe_interval_ms = -1}, {}).ok());
}

// A quiet stream on a member that answers its probes is kept: no reconnection while
// nothing changes, and the next change arrives on it.
TEST_F(WatcherTest, AQuietStreamOnAMemberThatAnswersIsKept) {
  Collected got;
  auto w = Watcher::Start(*client_, {.key = "/k", .probe_interval_ms = 100}, got.Handlers());
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(WaitFor([&] { return (*w)->next_revision() > 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // ten probe intervals
  ASSERT_TRUE(client_->Put("/k", "v").ok());
  ASSERT_TRUE(WaitFor([&] { return got.size() >= 1; }));
  EXPECT_EQ((*w)->connections(), 1);
}

// A member cut off from the majority keeps its client port: without etcd's require-leader
// the watch there would stay open and silent. It ends instead, and the watcher comes back
// once a majority is.
TEST(WatcherLeaderTest, AWatchOnAMemberThatLostItsLeaderMovesOn) {
  if (!EtcdCluster::Unavailable().empty()) GTEST_SKIP() << EtcdCluster::Unavailable();
  auto c = EtcdCluster::Start({.members = 3});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EtcdCluster& etcd = **c;
  auto client = EtcdClient::Create({.endpoints = etcd.endpoints()});
  ASSERT_TRUE(client.ok());
  ASSERT_EQ((*client)->preferred_endpoint(), 0u);
  Collected got;
  auto w = Watcher::Start(**client, {.key = "/l"}, got.Handlers());
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(WaitFor([&] { return (*w)->next_revision() > 0; }));
  ASSERT_TRUE(etcd.Kill(1).ok());
  ASSERT_TRUE(etcd.Kill(2).ok());
  ASSERT_TRUE(WaitFor([&] { return (*w)->connections() >= 2; }));  // the stream was ended
  ASSERT_TRUE(etcd.Restart(1).ok());
  ASSERT_TRUE(etcd.Restart(2).ok());
  ASSERT_TRUE((*client)->Put("/l", "back").ok());
  ASSERT_TRUE(WaitFor([&] { return got.size() >= 1; }));
  EXPECT_EQ(got.Copy()[0].kv.value, "back");
}

TEST_F(WatcherTest, CancelReturnsWhileAStreamIsBlocked) {
  testing::SilentListener silent;
  auto c = EtcdClient::Create({.endpoints = {silent.url()}});
  ASSERT_TRUE(c.ok());
  auto blocked = Watcher::Start(**c, {.key = "/b"}, {});  // reads forever from `silent`
  ASSERT_TRUE(blocked.ok());
  ASSERT_TRUE(WaitFor([&] { return (*blocked)->connections() >= 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  (*blocked)->Cancel();  // the test's timeout catches a hang
  Collected got;
  auto idle = Watcher::Start(*client_, {.key = "/b"}, got.Handlers());
  ASSERT_TRUE(idle.ok());
  ASSERT_TRUE(WaitFor([&] { return (*idle)->next_revision() > 0; }));
  idle->reset();  // the destructor cancels a stream waiting on etcd
  EXPECT_FALSE(Watcher::Start(*client_, {.key = "/b", .start_revision = -1}, {}).ok());
}

}  // namespace
}  // namespace sluice::cluster
