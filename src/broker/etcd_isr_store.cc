// EtcdIsrStore and the ISR change's etcd write. See etcd_isr_store.h.
#include "broker/etcd_isr_store.h"

#include <algorithm>
#include <utility>

#include "base/logging.h"
#include "broker/cluster_controller.h"
#include "broker/loggers.h"
#include "cluster/cluster_values.h"
#include "cluster/metadata_txn.h"

namespace sluice::broker {
IsrError IsrChangeWrite(const ClusterView& view, const std::string& topic, int32_t partition,
                        int32_t leader, int32_t leader_epoch, const std::vector<int32_t>& new_isr,
                        int64_t expected_version, const IsrStore::BrokerEpochs& broker_epochs,
                        cluster::MetadataWrite* out) {
  auto state = view.partitions().find({topic, partition});
  auto assigned = view.topics().find(topic);
  if (state == view.partitions().end() || assigned == view.topics().end() || partition < 0 ||
      static_cast<size_t>(partition) >= assigned->second.value.partitions.size()) {
    return IsrError::kUnknownPartition;
  }
  const cluster::PartitionState& now = state->second.value;
  if (now.leader != leader || now.leader_epoch != leader_epoch) return IsrError::kFencedLeaderEpoch;
  if (state->second.mod_revision != expected_version) {
    return IsrError::kInvalidVersion;
  }
  const std::vector<int32_t>& replicas =
      assigned->second.value.partitions[static_cast<size_t>(partition)];
  if (new_isr.empty() || std::find(new_isr.begin(), new_isr.end(), leader) == new_isr.end()) {
    return IsrError::kInvalidIsr;
  }
  cluster::PartitionState next = now;
  next.isr.clear();
  for (int32_t node : new_isr) {
    if (std::find(replicas.begin(), replicas.end(), node) == replicas.end()) {
      return IsrError::kInvalidIsr;
    }
    if (std::any_of(next.isr.begin(), next.isr.end(),
                    [node](const cluster::IsrMember& m) { return m.node == node; })) {
      return IsrError::kInvalidIsr;
    }
    auto kept = std::find_if(now.isr.begin(), now.isr.end(),
                             [node](const cluster::IsrMember& m) { return m.node == node; });
    if (kept != now.isr.end()) {
      next.isr.push_back(*kept);
      continue;
    }
    // A member added back: caught up in a fetch made as the registration it runs as now
    // (KIP-903), not an earlier one that restarted (perhaps empty) since.
    auto reg = view.brokers().find(node);
    if (reg == view.brokers().end()) return IsrError::kInvalidIsr;
    auto fetched_as = broker_epochs.find(node);
    if (fetched_as == broker_epochs.end() || fetched_as->second != reg->second.create_revision) {
      return IsrError::kInvalidIsr;
    }
    next.isr.push_back({node, reg->second.value.incarnation});
  }
  const std::string key = view.keys().Partition(topic, partition);
  out->compares.push_back({key, state->second.mod_revision});
  out->puts.push_back({key, cluster::ToJson(next), 0});
  return IsrError::kNone;
}

IsrApplied ApplyIsrChange(cluster::EtcdClient& etcd, const cluster::MetadataWrite& write,
                          int64_t expected_version) {
  auto r = etcd.Txn(cluster::ToTxn(write));
  if (r.ok()) {
    if (!r->succeeded) return {IsrError::kInvalidVersion, 0};
    return {IsrError::kNone, r->header.revision};
  }
  // The answer was lost, not necessarily the write: what etcd holds decides.
  SLUICE_LOG(kClusterLog, kWarn, "ISR change of {}: {}; re-reading it", write.puts.at(0).key,
             r.status().ToString());
  auto held = etcd.Get(write.puts[0].key);
  if (!held.ok()) return {IsrError::kUnavailable, 0};
  if (held->kv.has_value() && held->kv->value == write.puts[0].value &&
      held->kv->mod_revision > expected_version) {
    return {IsrError::kNone, held->kv->mod_revision};
  }
  return {IsrError::kInvalidVersion, 0};  // it did not go through; the watch brings what did
}

void EtcdIsrStore::AlterIsr(const std::string& topic, int32_t partition, int32_t leader,
                            int32_t leader_epoch, std::vector<int32_t> new_isr,
                            int64_t expected_version, BrokerEpochs broker_epochs, Done done) {
  controller_->AlterIsr(topic, partition, leader, leader_epoch, std::move(new_isr),
                        expected_version, std::move(broker_epochs), std::move(done));
}

}  // namespace sluice::broker
