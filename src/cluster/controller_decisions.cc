// The controller's decisions. See controller_decisions.h.
#include "cluster/controller_decisions.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace sluice::cluster {
namespace {

// Kafka's AdminUtils.replicaIndex: the j-th follower of a partition whose first replica is
// at `first`, `shift` places further on (never the first replica itself).
int32_t FollowerIndex(int32_t first, int32_t shift, int32_t j, int32_t n) {
  const int32_t step = 1 + (shift + j) % (n - 1);
  return (first + step) % n;
}

// ISR members: every replica of a new partition, with the incarnation it is live with.
std::vector<IsrMember> InitialIsr(const std::vector<int32_t>& replicas, const LiveBrokers& live) {
  std::vector<IsrMember> isr;
  for (int32_t node : replicas) {
    auto it = live.find(node);
    if (it != live.end()) isr.push_back({node, it->second.incarnation});
  }
  return isr;
}

void AddFence(MetadataWrite* w, const KeyLayout& keys, const ControllerFence& fence) {
  w->compares.push_back({keys.ControllerEpoch(), fence.controller_epoch_revision});
}

// Initial partition states for partitions [first, replicas.size()), in writes of at most
// kMaxPutsPerWrite, each creating keys that must not exist.
void AppendInitialStates(std::vector<MetadataWrite>* out, const KeyLayout& keys,
                         const ControllerFence& fence, const std::string& name,
                         const std::vector<std::vector<int32_t>>& replicas, int32_t first,
                         const LiveBrokers& live) {
  MetadataWrite w;
  for (size_t p = static_cast<size_t>(first); p < replicas.size(); ++p) {
    PartitionState state;
    state.isr = InitialIsr(replicas[p], live);
    // The first replica leads when it is live (it is at creation, unless it died since).
    state.leader = ChooseLeader(replicas[p], state, live);
    state.leader_epoch = 0;
    state.controller_epoch = fence.epoch;
    const std::string key = keys.Partition(name, static_cast<int32_t>(p));
    w.compares.push_back({key, 0});
    w.puts.push_back({key, ToJson(state), 0});
    if (w.puts.size() == kMaxPutsPerWrite) {
      AddFence(&w, keys, fence);
      out->push_back(std::move(w));
      w = MetadataWrite{};
    }
  }
  if (!w.puts.empty()) {
    AddFence(&w, keys, fence);
    out->push_back(std::move(w));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Replica assignment

Assignment AssignReplicas(std::vector<int32_t> brokers, int32_t partitions,
                          int32_t replication_factor, int32_t start_index, int32_t replica_shift,
                          int32_t start_partition) {
  Assignment out;
  if (partitions <= 0) {
    out.error = AssignmentError::kInvalidPartitions;
    out.message = "Number of partitions must be larger than 0.";
    return out;
  }
  if (replication_factor <= 0) {
    out.error = AssignmentError::kInvalidReplicationFactor;
    out.message = "Replication factor must be larger than 0.";
    return out;
  }
  std::sort(brokers.begin(), brokers.end());
  brokers.erase(std::unique(brokers.begin(), brokers.end()), brokers.end());
  const auto n = static_cast<int32_t>(brokers.size());
  if (replication_factor > n) {
    out.error = AssignmentError::kInvalidReplicationFactor;
    out.message = fmt::format("Replication factor: {} larger than available brokers: {}.",
                              replication_factor, n);
    return out;
  }
  start_index = std::max(start_index, 0) % n;
  int32_t shift = std::max(replica_shift, 0) % n;
  int32_t current = std::max(0, start_partition);
  out.replicas.reserve(static_cast<size_t>(partitions));
  for (int32_t i = 0; i < partitions; ++i, ++current) {
    if (current > 0 && current % n == 0) ++shift;
    const int32_t first = (current + start_index) % n;
    std::vector<int32_t> replicas{brokers[static_cast<size_t>(first)]};
    for (int32_t j = 0; j < replication_factor - 1; ++j) {
      replicas.push_back(brokers[static_cast<size_t>(FollowerIndex(first, shift, j, n))]);
    }
    out.replicas.push_back(std::move(replicas));
  }
  return out;
}

Assignment AssignNewPartitions(const std::vector<std::vector<int32_t>>& existing,
                               std::vector<int32_t> brokers, int32_t add, int32_t replica_shift) {
  if (existing.empty() || existing[0].empty()) {
    return {AssignmentError::kInvalidPartitions, "the topic has no partition 0", {}};
  }
  std::sort(brokers.begin(), brokers.end());
  // The first broker whose id is at least partition 0's leader (0 when none is).
  const int32_t first_leader = existing[0][0];
  auto at = std::lower_bound(brokers.begin(), brokers.end(), first_leader);
  const int32_t start_index = at == brokers.end() ? 0 : static_cast<int32_t>(at - brokers.begin());
  return AssignReplicas(std::move(brokers), add, static_cast<int32_t>(existing[0].size()),
                        start_index, replica_shift, static_cast<int32_t>(existing.size()));
}

// ---------------------------------------------------------------------------------------
// Elections

bool Electable(const IsrMember& member, const PartitionState& state, const LiveBrokers& live) {
  auto it = live.find(member.node);
  if (it == live.end() || it->second.incarnation != member.incarnation) return false;
  return it->second.clean || state.isr.size() == 1;
}

int32_t ChooseLeader(const std::vector<int32_t>& replicas, const PartitionState& state,
                     const LiveBrokers& live) {
  auto member = [&](int32_t node) -> const IsrMember* {
    for (const IsrMember& m : state.isr) {
      if (m.node == node) return &m;
    }
    return nullptr;
  };
  if (state.leader >= 0) {
    const IsrMember* m = member(state.leader);
    if (m != nullptr && Electable(*m, state, live)) return state.leader;
  }
  for (int32_t node : replicas) {
    const IsrMember* m = member(node);
    if (m != nullptr && Electable(*m, state, live)) return node;
  }
  return -1;
}

PartitionState WithoutIsrMember(PartitionState state, int32_t node) {
  if (state.isr.size() <= 1) return state;
  std::erase_if(state.isr, [node](const IsrMember& m) { return m.node == node; });
  return state;
}

std::optional<PartitionState> Reelect(const std::vector<int32_t>& replicas,
                                      const PartitionState& state, const LiveBrokers& live,
                                      const std::vector<int32_t>& remove,
                                      int64_t controller_epoch) {
  PartitionState next = state;
  // Removed members (a new incarnation, an unclean start) leave the ISR, the last one
  // excepted; the leader itself only once another is chosen.
  for (const IsrMember& m : state.isr) {
    const bool removed = std::find(remove.begin(), remove.end(), m.node) != remove.end();
    if (removed && m.node != state.leader) next = WithoutIsrMember(next, m.node);
  }
  const bool leader_removed =
      state.leader >= 0 && std::find(remove.begin(), remove.end(), state.leader) != remove.end();
  if (leader_removed) next.leader = -1;
  // Chosen with the dead still in the ISR: an unclean member leads only when it is the
  // last member of the ISR as it was, not one made last by dropping the dead.
  next.leader = ChooseLeader(replicas, next, live);
  // Dead members leave the ISR too (Kafka's controller on a broker failure), the last one
  // excepted, but only once someone leads: with nobody electable they stay, so the
  // partition comes back with the first of them to return (a pass after the leader went
  // -1 used to drop them, leaving an unclean member to be elected alone, or members none
  // of which could lead, for ever).
  // A member whose broker came back as another incarnation (a wiped directory) is dead
  // too: that copy is gone, whatever the node id says.
  if (next.leader >= 0) {
    for (const IsrMember& m : state.isr) {
      auto it = live.find(m.node);
      const bool dead = it == live.end() || it->second.incarnation != m.incarnation;
      if (dead && m.node != state.leader) next = WithoutIsrMember(next, m.node);
    }
  }
  // The old leader leaves the ISR only for a chosen successor. With nobody electable it
  // stays (leader -1, as Kafka keeps the last ISR): removing it could leave one unclean
  // member, which the last-member rule would then elect over records it may have lost.
  if (state.leader >= 0 && next.leader >= 0 && next.leader != state.leader) {
    next = WithoutIsrMember(next, state.leader);
  }
  if (next.leader != state.leader) next.leader_epoch = state.leader_epoch + 1;
  if (next.leader == state.leader && next.isr == state.isr) return std::nullopt;
  next.controller_epoch = controller_epoch;
  return next;
}

// ---------------------------------------------------------------------------------------
// Writes

MetadataWrite PartitionStateWrite(const KeyLayout& keys, const ControllerFence& fence,
                                  const std::string& topic, int32_t partition, int64_t revision,
                                  const PartitionState& state) {
  MetadataWrite w;
  const std::string key = keys.Partition(topic, partition);
  w.compares.push_back({key, revision});
  AddFence(&w, keys, fence);
  w.puts.push_back({key, ToJson(state), 0});
  return w;
}

std::vector<MetadataWrite> CreateTopicWrites(const KeyLayout& keys, const ControllerFence& fence,
                                             const std::string& name, const TopicAssignment& topic,
                                             const LiveBrokers& live) {
  std::vector<MetadataWrite> out;
  MetadataWrite w;
  w.compares.push_back({keys.Topic(name), 0});
  w.compares.push_back({keys.Deleting(name), 0});
  AddFence(&w, keys, fence);
  w.puts.push_back({keys.Topic(name), ToJson(topic), 0});
  out.push_back(std::move(w));
  AppendInitialStates(&out, keys, fence, name, topic.partitions, 0, live);
  return out;
}

std::vector<MetadataWrite> AddPartitionsWrites(const KeyLayout& keys, const ControllerFence& fence,
                                               const std::string& name, int64_t topic_revision,
                                               const TopicAssignment& grown, int32_t first_new,
                                               const LiveBrokers& live) {
  std::vector<MetadataWrite> out;
  MetadataWrite w;
  w.compares.push_back({keys.Topic(name), topic_revision});
  AddFence(&w, keys, fence);
  w.puts.push_back({keys.Topic(name), ToJson(grown), 0});
  out.push_back(std::move(w));
  AppendInitialStates(&out, keys, fence, name, grown.partitions, first_new, live);
  return out;
}

std::vector<MetadataWrite> InitialStateWrites(const KeyLayout& keys, const ControllerFence& fence,
                                              const std::string& name,
                                              const std::vector<std::vector<int32_t>>& replicas,
                                              int32_t first, const LiveBrokers& live) {
  std::vector<MetadataWrite> out;
  AppendInitialStates(&out, keys, fence, name, replicas, first, live);
  return out;
}

MetadataWrite DeleteTopicWrite(const KeyLayout& keys, const ControllerFence& fence,
                               const std::string& name, int64_t topic_revision,
                               const std::string& topic_id) {
  MetadataWrite w;
  w.compares.push_back({keys.Topic(name), topic_revision});
  AddFence(&w, keys, fence);
  w.deletes.push_back(keys.Topic(name));
  w.delete_prefixes.push_back(keys.PartitionsOf(name));
  w.puts.push_back({keys.Deleting(name), ToJson(DeletingValue{topic_id}), 0});
  return w;
}

MetadataWrite ControllerElectionWrite(const KeyLayout& keys, int32_t node, int64_t lease,
                                      int64_t previous_epoch, int64_t epoch_revision) {
  MetadataWrite w;
  const int64_t epoch = previous_epoch + 1;
  w.compares.push_back({keys.Controller(), 0});
  w.compares.push_back({keys.ControllerEpoch(), epoch_revision});
  w.puts.push_back({keys.Controller(), ToJson(ControllerValue{node, epoch}), lease});
  w.puts.push_back({keys.ControllerEpoch(), ToJson(ControllerEpochValue{epoch}), 0});
  return w;
}

MetadataWrite RegistrationWrite(const KeyLayout& keys, int32_t node, int64_t lease,
                                const BrokerRegistration& registration) {
  MetadataWrite w;
  w.compares.push_back({keys.Broker(node), 0});
  w.puts.push_back({keys.Broker(node), ToJson(registration), lease});
  return w;
}

std::pair<int64_t, MetadataWrite> TakeProducerIdBlock(const KeyLayout& keys,
                                                      std::optional<ProducerIdBlock> current,
                                                      int64_t revision) {
  const int64_t first = current.has_value() ? current->next : 0;
  MetadataWrite w;
  w.compares.push_back({keys.ProducerIds(), current.has_value() ? revision : 0});
  w.puts.push_back({keys.ProducerIds(), ToJson(ProducerIdBlock{first + kProducerIdBlockSize}), 0});
  return {first, std::move(w)};
}

}  // namespace sluice::cluster
