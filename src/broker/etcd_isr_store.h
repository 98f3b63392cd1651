// EtcdIsrStore: the IsrStore of a cluster broker (docs/design/0018-cluster.md, decision 7):
// a leader's ISR change is a compare-and-swap on partitions/<topic>/<p> (its mod_revision,
// the version the leader holds, so the leader and its epoch are unchanged too), run on the
// cluster controller's thread, never on a shard. IsrChangeWrite is the decision, without
// etcd; ClusterController::AlterIsr applies it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "broker/cluster_controller_view.h"
#include "broker/replica_isr_store.h"
#include "cluster/controller_decisions.h"
#include "cluster/etcd_client.h"

namespace sluice::broker {

class ClusterController;

// The write that replaces the ISR of `topic`-`partition` with `new_isr`, if `view` holds
// the partition led by `leader` in `leader_epoch` at revision `expected_version`, and
// `new_isr` is non-empty, has the leader, no duplicates and only assigned replicas. Members
// kept keep the incarnation they joined with; a new member takes its live registration's,
// only if the broker epoch it fetched with (`broker_epochs`) is that registration's
// create_revision (KIP-903: an unregistered one, or one restarted since, is kInvalidIsr).
// kNone and *out set, or the refusal.
IsrError IsrChangeWrite(const ClusterView& view, const std::string& topic, int32_t partition,
                        int32_t leader, int32_t leader_epoch, const std::vector<int32_t>& new_isr,
                        int64_t expected_version, const IsrStore::BrokerEpochs& broker_epochs,
                        cluster::MetadataWrite* out);

// Applies an IsrChangeWrite made at `expected_version` to etcd (a CAS on the partition
// key's mod_revision). kNone with the new revision; kInvalidVersion when etcd refused it.
// A call whose answer was lost may have applied the write: the key is read again, and if
// it holds exactly what was written at a revision after `expected_version` the change went
// through (kNone with that revision; a leader's CAS is the only writer of its ISR in its
// epoch, and a controller's identical value means the same ISR); otherwise
// kInvalidVersion, or kUnavailable when the re-read fails too.
struct IsrApplied {
  IsrError error = IsrError::kNone;
  int64_t revision = 0;
};
IsrApplied ApplyIsrChange(cluster::EtcdClient& etcd, const cluster::MetadataWrite& write,
                          int64_t expected_version);

// Thread-safe; the controller outlives it, and it is not used after the controller stops.
class EtcdIsrStore final : public IsrStore {
 public:
  explicit EtcdIsrStore(ClusterController* controller) : controller_(controller) {}
  void AlterIsr(const std::string& topic, int32_t partition, int32_t leader, int32_t leader_epoch,
                std::vector<int32_t> new_isr, int64_t expected_version, BrokerEpochs broker_epochs,
                Done done) override;

 private:
  ClusterController* const controller_;
};

}  // namespace sluice::broker
