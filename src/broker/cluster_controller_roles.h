// ReplicaRoles: what the cluster controller tells the replication core when a local
// replica's role changes (docs/design/0018-cluster.md, decision 2). The ClusterController
// calls it on its own thread after it applied a change from etcd. ReplicaManagerRoles is
// the implementation `sluice serve --etcd` passes: it forwards to the ReplicaManager once
// the server runs (before that it refuses, and the controller tells it again later).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "broker/partition.h"

namespace sluice::broker {

class ReplicaManager;

// A leadership as etcd holds it.
struct LeaderRole {
  int32_t leader_epoch = 0;
  std::vector<int32_t> replicas;  // the assignment, this node included
  std::vector<int32_t> isr;
  int64_t version = 0;  // the partition state's etcd mod_revision (the IsrStore's version)
  int32_t min_insync_replicas = 1;
};

class ReplicaRoles {
 public:
  virtual ~ReplicaRoles() = default;

  // Each returns false when the role was not taken (not ready yet, the partition is not
  // here, an older epoch): the controller tells it again at its next change.
  // This broker leads `key`.
  virtual bool BecomeLeader(const PartitionKey& key, const LeaderRole& role) = 0;
  // This broker follows `leader`, reached at host:port (its inter-broker address), in
  // `leader_epoch`.
  virtual bool BecomeFollower(const PartitionKey& key, int32_t leader, int32_t leader_epoch,
                              const std::string& host, int32_t port) = 0;
  // This broker holds no replica of `key` any more, or serves it no longer (its log is
  // about to be closed); `deleted`: the topic went.
  virtual void StopReplica(const PartitionKey& key, bool deleted) = 0;
};

// Lifecycle: made with the broker, given its ReplicaManager with SetManager once the server
// runs and SetManager(nullptr) before the manager stops. Any thread.
class ReplicaManagerRoles final : public ReplicaRoles {
 public:
  void SetManager(ReplicaManager* manager) { manager_.store(manager); }

  bool BecomeLeader(const PartitionKey& key, const LeaderRole& role) override;
  bool BecomeFollower(const PartitionKey& key, int32_t leader, int32_t leader_epoch,
                      const std::string& host, int32_t port) override;
  void StopReplica(const PartitionKey& key, bool deleted) override;

 private:
  std::atomic<ReplicaManager*> manager_{nullptr};
};

}  // namespace sluice::broker
