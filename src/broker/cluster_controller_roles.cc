// ReplicaManagerRoles: the cluster controller's role changes, forwarded to the
// ReplicaManager. See cluster_controller_roles.h.
#include "broker/cluster_controller_roles.h"

#include "base/logging.h"
#include "broker/loggers.h"
#include "broker/replica_manager.h"

namespace sluice::broker {
bool ReplicaManagerRoles::BecomeLeader(const PartitionKey& key, const LeaderRole& role) {
  ReplicaManager* m = manager_.load();
  if (m == nullptr) return false;
  ReplicaManager::Leadership l;
  l.leader_epoch = role.leader_epoch;
  l.replicas = role.replicas;
  l.isr = role.isr;
  l.isr_version = role.version;  // the partition state's etcd mod_revision
  l.min_insync_replicas = role.min_insync_replicas;
  Status st = m->BecomeLeader(key.first, key.second, l);
  if (!st.ok()) {
    SLUICE_LOG(kReplicaLog, kWarn, "{}-{}: not leading epoch {}: {}", key.first, key.second,
               role.leader_epoch, st.ToString());
  }
  return st.ok();
}

bool ReplicaManagerRoles::BecomeFollower(const PartitionKey& key, int32_t leader,
                                         int32_t leader_epoch, const std::string& host,
                                         int32_t port) {
  ReplicaManager* m = manager_.load();
  if (m == nullptr) return false;
  Status st = m->BecomeFollower(key.first, key.second, leader_epoch, leader, host, port);
  if (!st.ok()) {
    SLUICE_LOG(kReplicaLog, kWarn, "{}-{}: not following broker {} in epoch {}: {}", key.first,
               key.second, leader, leader_epoch, st.ToString());
  }
  return st.ok();
}

void ReplicaManagerRoles::StopReplica(const PartitionKey& key, bool /*deleted*/) {
  ReplicaManager* m = manager_.load();
  if (m != nullptr) m->StopReplica(key.first, key.second);
}

}  // namespace sluice::broker
