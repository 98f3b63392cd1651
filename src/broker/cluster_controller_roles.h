// ReplicaRoles: what the cluster controller tells the replication core when a local
// replica's role changes (docs/design/0018-cluster.md, decision 2). The ClusterController
// calls it on its own thread after it applied a change from etcd; the replication core's
// ReplicaManager implements it (phase B). Until then a broker told it leads a partition
// opens its log and serves it alone (replication factor 1), and nothing follows.
#pragma once

#include <cstdint>
#include <vector>

#include "broker/partition.h"

namespace sluice::broker {

class ReplicaRoles {
 public:
  virtual ~ReplicaRoles() = default;

  // This broker leads `key` from `leader_epoch`, with `isr` (node ids) as etcd holds it.
  virtual void BecomeLeader(const PartitionKey& key, int32_t leader_epoch,
                            const std::vector<int32_t>& isr) = 0;
  // This broker follows `leader` (-1: none now) in `leader_epoch`.
  virtual void BecomeFollower(const PartitionKey& key, int32_t leader, int32_t leader_epoch) = 0;
  // This broker holds no replica of `key` any more; `deleted`: the topic went.
  virtual void StopReplica(const PartitionKey& key, bool deleted) = 0;
};

}  // namespace sluice::broker
