// ClusterView: a broker's copy of its cluster's etcd state (docs/design/0018-cluster.md,
// decision 2): every key under /sluice/<name>/ decoded, with the revision each was last
// written at, kept current from a listing and then the watch. It builds the
// MetadataSnapshot the shards serve and says which partitions a broker leads. No etcd here:
// the ClusterController feeds it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "base/status.h"
#include "broker/controlled_shutdown.h"
#include "broker/metadata_snapshot.h"
#include "broker/topic_store.h"
#include "cluster/cluster_values.h"
#include "cluster/controller_decisions.h"

namespace sluice::broker {

// Owned by the cluster controller's thread.
class ClusterView {
 public:
  template <typename T>
  struct Versioned {
    T value;
    int64_t mod_revision = 0;
    int64_t create_revision = 0;
  };

  explicit ClusterView(const std::string& cluster_name);

  // A key's new value at `mod_revision`. A value that does not decode leaves the key out
  // (as if deleted) and returns the reason; keys of no known kind are ignored. A value
  // older than the one held is ignored: the broker's own writes enter the view before the
  // watch brings the changes that preceded them.
  Status Put(const std::string& key, const std::string& value, int64_t mod_revision,
             int64_t create_revision);
  // The key's deletion at `revision` (0: whatever is held), ignored when the value held is
  // newer.
  void Delete(const std::string& key, int64_t revision = 0);
  // Forgets everything (before a new listing).
  void Clear();

  const cluster::KeyLayout& keys() const { return keys_; }
  const std::map<int32_t, Versioned<cluster::BrokerRegistration>>& brokers() const {
    return brokers_;
  }
  const std::map<int32_t, Versioned<cluster::IncarnationValue>>& incarnations() const {
    return incarnations_;
  }
  const std::optional<Versioned<cluster::ClusterIdValue>>& cluster_id() const {
    return cluster_id_;
  }
  const std::optional<Versioned<cluster::ControllerValue>>& controller() const {
    return controller_;
  }
  const std::optional<Versioned<cluster::ControllerEpochValue>>& controller_epoch() const {
    return controller_epoch_;
  }
  const std::map<std::string, Versioned<cluster::TopicAssignment>>& topics() const {
    return topics_;
  }
  const std::map<std::pair<std::string, int32_t>, Versioned<cluster::PartitionState>>& partitions()
      const {
    return partitions_;
  }
  const std::map<std::string, Versioned<cluster::DeletingValue>>& deleting() const {
    return deleting_;
  }
  const std::optional<Versioned<cluster::ProducerIdBlock>>& producer_ids() const {
    return producer_ids_;
  }
  const std::map<int32_t, Versioned<ShutdownRequest>>& shutdowns() const { return shutdowns_; }

  // The live brokers with their incarnations and clean flags (for elections).
  cluster::LiveBrokers Live() const;
  // The live brokers shutting down: a shutdown/<node> key whose broker epoch is the
  // node's registration's create_revision (controlled_shutdown.h).
  std::set<int32_t> Leaving() const;
  // How many partitions still have `node` as their leader or in their ISR that the
  // controller can move it out of (MoveAway): what a broker shutting down waits for.
  size_t PartitionsToMoveAway(int32_t node) const;
  // A topic as the broker's handlers see it: its id, partitions and effective configs
  // over `defaults` (a config etcd holds that this broker cannot read falls back to the
  // default, logged by the caller).
  Result<TopicInfo> TopicInfoOf(const std::string& name, const TopicConfig& defaults) const;
  // The snapshot for the shards (its advertised address is the publisher's). With
  // `self_live` false (this broker lost its lease, and etcd may not have deleted its
  // registration yet) it names this broker as no partition's leader and as offline, so
  // clients asking it look for the leader elsewhere instead of being sent back here.
  std::shared_ptr<MetadataSnapshot> Snapshot(int32_t self, const TopicConfig& defaults,
                                             bool self_live = true) const;
  // Whether Snapshot(self, ..., self_live) would give topic `name` (of id `id_text`, unless
  // empty) at least `partitions` partitions, each with a leader.
  bool PartitionsLed(const std::string& name, const std::string& id_text, int32_t partitions,
                     int32_t self, bool self_live) const;
  // The partitions `node` leads now, with their leader epochs: those whose state was
  // written at or after `written_since` (the node's broker epoch; 0: all).
  std::map<std::pair<std::string, int32_t>, int32_t> LedBy(int32_t node,
                                                           int64_t written_since = 0) const;

 private:
  cluster::KeyLayout keys_;
  std::optional<Versioned<cluster::ClusterIdValue>> cluster_id_;
  std::map<int32_t, Versioned<cluster::BrokerRegistration>> brokers_;
  std::map<int32_t, Versioned<cluster::IncarnationValue>> incarnations_;
  std::optional<Versioned<cluster::ControllerValue>> controller_;
  std::optional<Versioned<cluster::ControllerEpochValue>> controller_epoch_;
  std::map<std::string, Versioned<cluster::TopicAssignment>> topics_;
  std::map<std::pair<std::string, int32_t>, Versioned<cluster::PartitionState>> partitions_;
  std::map<std::string, Versioned<cluster::DeletingValue>> deleting_;
  std::optional<Versioned<cluster::ProducerIdBlock>> producer_ids_;
  std::map<int32_t, Versioned<ShutdownRequest>> shutdowns_;
};

}  // namespace sluice::broker
