#include "cluster_process.h"

#include <cstdio>
#include <regex>

#include "cluster/etcd_client.h"

namespace sluice::integration {

std::string ClusterProcesses::Unavailable() { return cluster::testing::EtcdCluster::Unavailable(); }

std::string ClusterProcesses::Start(const std::string& sluice) {
  auto etcd = cluster::testing::EtcdCluster::Start();
  if (!etcd.ok()) return "etcd: " + etcd.status().ToString();
  etcd_ = std::move(*etcd);
  std::string endpoints;
  for (const std::string& e : etcd_->endpoints()) endpoints += (endpoints.empty() ? "" : ",") + e;
  const std::vector<int> ports = cluster::testing::FreeLoopbackPorts(3);
  const std::string config =
      "groups:\n  initial_rebalance_delay: 0\ncluster:\n  session_timeout: 2s\n";
  for (int node = 1; node <= 3; ++node) {
    brokers_.push_back(std::make_unique<SluiceProcess>(
        sluice, config, "127.0.0.1:" + std::to_string(ports[node - 1]),
        std::vector<std::string>{"--node-id", std::to_string(node), "--etcd", endpoints}));
  }
  for (int node = 1; node <= 3; ++node) {
    std::string error = broker(node).Start();
    if (!error.empty()) return "broker " + std::to_string(node) + ": " + error;
  }
  return "";
}

std::string ClusterProcesses::Bootstraps() const {
  std::string out;
  for (const auto& b : brokers_) out += (out.empty() ? "" : ",") + b->bootstrap();
  return out;
}

int ClusterProcesses::Controller() const {
  auto client = cluster::EtcdClient::Create({.endpoints = etcd_->endpoints()});
  if (!client.ok()) return -1;
  // The default cluster name's key (0018's etcd layout): {"node": N, "epoch": E}.
  auto got = (*client)->Get("/sluice/sluice/controller");
  if (!got.ok() || !got->kv.has_value()) return -1;
  static const std::regex kNode(R"("node"\s*:\s*([0-9]+))");
  std::smatch m;
  if (!std::regex_search(got->kv->value, m, kNode)) return -1;
  return std::stoi(m[1]);
}

void ClusterProcesses::DumpLogs(int lines) const {
  for (size_t i = 0; i < brokers_.size(); ++i) {
    std::fprintf(stderr, "=== broker %zu\n", i + 1);
    brokers_[i]->DumpLogs(lines);
  }
}

}  // namespace sluice::integration
