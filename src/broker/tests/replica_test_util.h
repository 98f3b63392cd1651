// A cluster of real brokers in one test process for the replication tests: each node a
// Broker on its own data directory served on a free 127.0.0.1 port, with a
// ReplicaManager, all sharing one InProcessIsrStore (the seam the etcd controller
// implements in phase C). Topics are made once and their topics.json copied to every
// node, so topic ids agree as they will when they come from etcd.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "broker/broker.h"
#include "broker/handlers/context.h"
#include "broker/replica_isr_store.h"
#include "broker/replica_manager.h"
#include "broker/server.h"
#include "broker/tests/broker_test_util.h"
#include "broker/topic_store.h"

namespace sluice::broker::testing {

// Waits until `pred` holds (polling); false after `ms` (only there so a broken broker
// fails the test instead of hanging it).
inline bool WaitUntil(const std::function<bool()>& pred, int ms = kTimeoutMs) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

struct ReplicaNode {
  int32_t id = 0;
  std::filesystem::path dir;
  BrokerOptions options;
  ReplicaManagerOptions replica_options;
  std::unique_ptr<Broker> broker;
  std::unique_ptr<Server> server;
  std::unique_ptr<ReplicaManager> replicas;

  bool running() const { return broker != nullptr; }
  uint16_t port() const { return server->port(); }

  void Start() {
    BrokerOptions o = options;
    o.data_dir = dir.string();
    auto b = Broker::Open(o);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    broker = std::move(*b);
    ServerOptions so;
    so.shards = 2;
    server = std::make_unique<Server>(so, broker.get());
    Status st = server->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    broker->SetAdvertisedAddress("127.0.0.1", server->port());
    replicas = std::make_unique<ReplicaManager>(replica_options, broker->context_for_testing());
    replicas->Start();
  }
  // A clean stop: fetchers first, then the server, then the logs; the manager last (the
  // logs' last acks reach it).
  void Stop() {
    if (!running()) return;
    replicas->Stop();
    broker->StopWaking();
    server->Stop();
    server.reset();
    Status st = broker->Close();
    EXPECT_TRUE(st.ok()) << st.ToString();
    broker.reset();
    replicas.reset();
  }
  ReplicaManager::View View(const std::string& topic, int32_t p = 0) {
    auto v = replicas->Describe(topic, p);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : ReplicaManager::View{};
  }
};

class ReplicaClusterFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("replica_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override {
    for (auto& n : nodes_) n->Stop();
    std::filesystem::remove_all(root_);
  }

  // `count` nodes (ids 1..count) holding topic `topic` with `partitions` partitions,
  // not started.
  void MakeNodes(int count, const std::string& topic, int32_t partitions = 1) {
    for (int i = 1; i <= count; ++i) {
      auto n = std::make_unique<ReplicaNode>();
      n->id = i;
      n->dir = root_ / ("n" + std::to_string(i));
      n->options.flush_policy = storage::FlushPolicy::kDurable;
      n->replica_options.node_id = i;
      n->replica_options.broker_epoch = 100 + i;
      n->replica_options.isr_store = &store_;
      n->replica_options.replica_lag_time_max_ms = 60'000;
      n->replica_options.isr_check_interval_ms = 50;
      n->replica_options.fetch_max_wait_ms = 200;
      n->replica_options.fetch_backoff_ms = 50;
      n->replica_options.socket_timeout_ms = 3000;
      nodes_.push_back(std::move(n));
    }
    std::filesystem::create_directories(root_ / "n1");
    {
      auto store = TopicStore::Open((root_ / "n1").string(), TopicConfig{});
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      TopicInfo info;
      TopicError e = (*store)->Create(topic, partitions, {}, false, &info);
      ASSERT_EQ(e.code, kafka::ErrorCode::kNone) << e.message;
    }
    for (int i = 2; i <= count; ++i) {
      std::filesystem::create_directories(root_ / ("n" + std::to_string(i)) / "meta");
      std::filesystem::copy_file(root_ / "n1" / "meta" / "topics.json",
                                 root_ / ("n" + std::to_string(i)) / "meta" / "topics.json");
    }
  }
  ReplicaNode& node(int32_t id) { return *nodes_[static_cast<size_t>(id - 1)]; }
  // `count` nodes with topic "t" (one partition), all started, node 1 elected leader with
  // every node in the ISR.
  LeaderAndIsr StartCluster(int count, int32_t min_isr = 1) {
    MakeNodes(count, "t");
    std::vector<int32_t> all;
    for (int i = 1; i <= count; ++i) {
      node(i).Start();
      all.push_back(i);
    }
    return Elect("t", 0, 1, all, all, min_isr);
  }

  // The controller's part: elects `leader` in a new epoch in the store and tells every
  // running replica its role.
  LeaderAndIsr Elect(const std::string& topic, int32_t p, int32_t leader,
                     std::vector<int32_t> replicas, std::optional<std::vector<int32_t>> isr,
                     int32_t min_isr = 1) {
    LeaderAndIsr l = store_.Elect(topic, p, leader, replicas, isr);
    for (int32_t r : replicas) {
      ReplicaNode& n = node(r);
      if (!n.running()) continue;
      Status st = r == leader ? n.replicas->BecomeLeader(topic, p, LeaderFor(l, min_isr))
                              : n.replicas->BecomeFollower(topic, p, l.leader_epoch, leader,
                                                           "127.0.0.1", node(leader).port());
      EXPECT_TRUE(st.ok()) << "node " << r << ": " << st.ToString();
    }
    return l;
  }
  static ReplicaManager::Leadership LeaderFor(const LeaderAndIsr& l, int32_t min_isr) {
    ReplicaManager::Leadership out;
    out.leader_epoch = l.leader_epoch;
    out.replicas = l.replicas;
    out.isr = l.isr;
    out.isr_version = l.version;
    out.min_insync_replicas = min_isr;
    return out;
  }
  std::vector<int32_t> StoredIsr(const std::string& topic, int32_t p = 0) {
    auto l = store_.Get(topic, p);
    if (!l.has_value()) return {};
    std::vector<int32_t> isr = l->isr;
    std::sort(isr.begin(), isr.end());
    return isr;
  }

  std::filesystem::path root_;
  InProcessIsrStore store_;
  std::vector<std::unique_ptr<ReplicaNode>> nodes_;
};

}  // namespace sluice::broker::testing
