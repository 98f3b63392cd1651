// ClusterProcesses: real etcd (src/cluster/tests/etcd_fixture.h) and three `sluice serve
// --node-id N --etcd URL` brokers (SluiceProcess) on fixed free loopback ports, for the
// C++ integration tests of a replicated cluster (docs/design/0018-cluster.md). The C++
// twin of cluster_controller_test.py's three_brokers(): session timeout 2 s (etcd's
// shortest lease), group rebalances without delay.
// Lifecycle: Start once; brokers may be killed and started again; the destructor kills
// every broker and etcd member and removes their directories. One thread owns it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cluster/tests/etcd_fixture.h"
#include "sluice_process.h"

namespace sluice::integration {

class ClusterProcesses {
 public:
  // "" when etcd can run here, otherwise why not (tests GTEST_SKIP with it).
  static std::string Unavailable();

  ClusterProcesses() = default;
  ClusterProcesses(const ClusterProcesses&) = delete;
  ClusterProcesses& operator=(const ClusterProcesses&) = delete;

  // etcd, then brokers 1..3 (each waited for until it listens). "" or what went wrong.
  std::string Start(const std::string& sluice);

  // Broker `node` (1..3).
  SluiceProcess& broker(int node) { return *brokers_.at(static_cast<size_t>(node - 1)); }
  // Every broker's HOST:PORT, comma-separated (bootstrap.servers).
  std::string Bootstraps() const;
  // The node id in etcd's `controller` key, or -1 when none is elected.
  int Controller() const;

  void DumpLogs(int lines = 60) const;

 private:
  std::unique_ptr<cluster::testing::EtcdCluster> etcd_;
  std::vector<std::unique_ptr<SluiceProcess>> brokers_;
};

}  // namespace sluice::integration
