// A broker's copy of its cluster's etcd state. See cluster_controller_view.h.
#include "broker/cluster_controller_view.h"

#include <algorithm>
#include <type_traits>

namespace sluice::broker {

using namespace cluster;  // NOLINT: the etcd value types, throughout

ClusterView::ClusterView(const std::string& cluster_name) : keys_(cluster_name) {}

void ClusterView::Clear() {
  cluster_id_.reset();
  brokers_.clear();
  incarnations_.clear();
  controller_.reset();
  controller_epoch_.reset();
  topics_.clear();
  partitions_.clear();
  deleting_.clear();
  producer_ids_.reset();
  shutdowns_.clear();
}

Status ClusterView::Put(const std::string& key, const std::string& value, int64_t mod_revision,
                        int64_t create_revision) {
  // Each kind: decode, or forget the key and say why.
  auto keep = [&](auto parsed, auto& slot) -> Status {
    if (slot.has_value() && slot->mod_revision > mod_revision) return Status::OK();
    if (!parsed.ok()) {
      slot.reset();
      return InvalidArgumentError("{}: {}", key, parsed.status().message());
    }
    using Held = typename std::remove_reference_t<decltype(slot)>::value_type;
    slot = Held{std::move(*parsed), mod_revision, create_revision};
    return Status::OK();
  };
  auto keep_in = [&](auto parsed, auto& map, const auto& map_key) -> Status {
    auto held = map.find(map_key);
    if (held != map.end() && held->second.mod_revision > mod_revision) return Status::OK();
    if (!parsed.ok()) {
      map.erase(map_key);
      return InvalidArgumentError("{}: {}", key, parsed.status().message());
    }
    auto& slot = map[map_key];
    slot.value = std::move(*parsed);
    slot.mod_revision = mod_revision;
    slot.create_revision = create_revision;
    return Status::OK();
  };
  if (key == keys_.ClusterId()) return keep(ParseClusterIdValue(value), cluster_id_);
  if (key == keys_.Controller()) return keep(ParseControllerValue(value), controller_);
  if (key == keys_.ControllerEpoch()) {
    return keep(ParseControllerEpochValue(value), controller_epoch_);
  }
  if (key == keys_.ProducerIds()) return keep(ParseProducerIdBlock(value), producer_ids_);
  if (auto node = keys_.NodeOfBroker(key)) {
    return keep_in(ParseBrokerRegistration(value), brokers_, *node);
  }
  if (auto node = keys_.NodeOfIncarnation(key)) {
    return keep_in(ParseIncarnationValue(value), incarnations_, *node);
  }
  if (auto topic = keys_.TopicOf(key)) return keep_in(ParseTopicAssignment(value), topics_, *topic);
  if (auto part = keys_.PartitionOf(key)) {
    return keep_in(ParsePartitionState(value), partitions_, *part);
  }
  if (auto topic = keys_.DeletingOf(key)) {
    return keep_in(ParseDeletingValue(value), deleting_, *topic);
  }
  if (auto node = NodeOfShutdownKey(keys_, key)) {
    return keep_in(ParseShutdownRequest(value), shutdowns_, *node);
  }
  return Status::OK();
}

void ClusterView::Delete(const std::string& key, int64_t revision) {
  // A held value newer than the deletion stays.
  auto drop = [revision](auto& slot) {
    if (slot.has_value() && (revision == 0 || slot->mod_revision <= revision)) slot.reset();
  };
  auto drop_in = [revision](auto& map, const auto& map_key) {
    auto it = map.find(map_key);
    if (it != map.end() && (revision == 0 || it->second.mod_revision <= revision)) map.erase(it);
  };
  if (key == keys_.ClusterId()) return drop(cluster_id_);
  if (key == keys_.Controller()) return drop(controller_);
  if (key == keys_.ControllerEpoch()) return drop(controller_epoch_);
  if (key == keys_.ProducerIds()) return drop(producer_ids_);
  if (auto node = keys_.NodeOfBroker(key)) {
    drop_in(brokers_, *node);
  } else if (auto inc = keys_.NodeOfIncarnation(key)) {
    drop_in(incarnations_, *inc);
  } else if (auto topic = keys_.TopicOf(key)) {
    drop_in(topics_, *topic);
  } else if (auto part = keys_.PartitionOf(key)) {
    drop_in(partitions_, *part);
  } else if (auto del = keys_.DeletingOf(key)) {
    drop_in(deleting_, *del);
  } else if (auto leaving = NodeOfShutdownKey(keys_, key)) {
    drop_in(shutdowns_, *leaving);
  }
}

LiveBrokers ClusterView::Live() const {
  LiveBrokers live;
  for (const auto& [node, reg] : brokers_) {
    // An unclean registration the controller has handled (incarnations/<node> written
    // after it registered) counts as clean: it left every ISR then, so each ISR entry it
    // has now was added back by a leader once it caught up (KIP-903). Otherwise a broker
    // restarted after a SIGKILL under the interval policy could never lead again, and a
    // partition whose clean leader died stayed offline with such members (found by
    // cluster_faults.py).
    auto inc = incarnations_.find(node);
    const bool handled = inc != incarnations_.end() &&
                         inc->second.value.incarnation == reg.value.incarnation &&
                         inc->second.mod_revision > reg.create_revision;
    live[node] = {reg.value.incarnation, reg.value.clean || handled};
  }
  return live;
}

std::set<int32_t> ClusterView::Leaving() const {
  std::set<int32_t> leaving;
  for (const auto& [node, request] : shutdowns_) {
    auto reg = brokers_.find(node);
    if (reg != brokers_.end() && reg->second.create_revision == request.value.broker_epoch) {
      leaving.insert(node);
    }
  }
  return leaving;
}

size_t ClusterView::PartitionsToMoveAway(int32_t node) const {
  const LiveBrokers live = Live();
  size_t left = 0;
  for (const auto& [key, state] : partitions_) {
    auto topic = topics_.find(key.first);
    if (topic == topics_.end() || key.second < 0 ||
        static_cast<size_t>(key.second) >= topic->second.value.partitions.size()) {
      continue;
    }
    const auto& replicas = topic->second.value.partitions[static_cast<size_t>(key.second)];
    if (MoveAway(replicas, state.value, live, {node}, 0).has_value()) ++left;
  }
  return left;
}

Result<TopicInfo> ClusterView::TopicInfoOf(const std::string& name,
                                           const TopicConfig& defaults) const {
  auto it = topics_.find(name);
  if (it == topics_.end()) return NotFoundError("no topic '{}'", name);
  const TopicAssignment& a = it->second.value;
  TopicInfo info;
  info.name = name;
  if (!ParseIdText(a.id, &info.id.hi, &info.id.lo)) {
    return InvalidArgumentError("topic '{}': id '{}' is not a topic id", name, a.id);
  }
  info.partitions = static_cast<int32_t>(a.partitions.size());
  info.overrides = a.configs;
  TopicError err;
  auto config = TopicConfig::Resolve(a.configs, defaults, &err);
  if (!config.ok()) {
    return InvalidArgumentError("topic '{}': {}", name, err.message);
  }
  info.config = *config;
  return info;
}

std::shared_ptr<MetadataSnapshot> ClusterView::Snapshot(int32_t self, const TopicConfig& defaults,
                                                        bool self_live) const {
  auto live = [&](int32_t node) {
    return brokers_.count(node) != 0 && (self_live || node != self);
  };
  auto meta = std::make_shared<MetadataSnapshot>();
  meta->cluster = true;
  meta->node_id = self;
  meta->controller_id = controller_.has_value() ? controller_->value.node : -1;
  for (const auto& [node, reg] : brokers_) {
    if (!live(node)) continue;
    MetadataSnapshot::Broker& b = meta->brokers.emplace_back();
    b.node_id = node;
    b.host = reg.value.host;
    b.port = reg.value.port;
    b.inter_broker_host = reg.value.inter_broker_host;
    b.inter_broker_port = reg.value.inter_broker_port;
    for (const cluster::ListenerAddress& l : reg.value.listeners) {
      b.endpoints.push_back({l.name, l.host, l.port});
    }
  }
  for (const auto& [name, topic] : topics_) {
    Result<TopicInfo> info = TopicInfoOf(name, defaults);
    if (!info.ok()) continue;  // reported when it arrived
    MetadataSnapshot::Topic& out = meta->topics[name];
    out.info = std::move(*info);
    const auto n = static_cast<size_t>(out.info.partitions);
    out.leader_epochs.assign(n, 0);
    out.partitions.resize(n);
    for (size_t p = 0; p < n; ++p) {
      MetadataSnapshot::Leadership& l = out.partitions[p];
      l.replicas = topic.value.partitions[p];
      for (int32_t r : l.replicas) {
        if (!live(r)) l.offline.push_back(r);
      }
      auto state = partitions_.find({name, static_cast<int32_t>(p)});
      if (state == partitions_.end()) continue;  // not written yet: no leader
      const PartitionState& s = state->second.value;
      // A leader whose registration is gone is no leader until the controller says so.
      l.leader = live(s.leader) ? s.leader : -1;
      l.leader_epoch = s.leader_epoch;
      out.leader_epochs[p] = s.leader_epoch;
      for (const IsrMember& m : s.isr) l.isr.push_back(m.node);
    }
  }
  return meta;
}

bool ClusterView::PartitionsLed(const std::string& name, const std::string& id_text,
                                int32_t partitions, int32_t self, bool self_live) const {
  auto topic = topics_.find(name);
  if (topic == topics_.end() || (!id_text.empty() && topic->second.value.id != id_text) ||
      topic->second.value.partitions.size() < static_cast<size_t>(std::max(partitions, 0))) {
    return false;
  }
  for (int32_t p = 0; p < partitions; ++p) {
    auto state = partitions_.find({name, p});
    if (state == partitions_.end()) return false;
    const int32_t leader = state->second.value.leader;
    // As Snapshot: a leader counts while registered (and this broker while its lease holds).
    if (brokers_.count(leader) == 0 || (!self_live && leader == self)) return false;
  }
  return true;
}

std::map<std::pair<std::string, int32_t>, int32_t> ClusterView::LedBy(int32_t node,
                                                                      int64_t written_since) const {
  std::map<std::pair<std::string, int32_t>, int32_t> led;
  for (const auto& [key, state] : partitions_) {
    if (state.value.leader != node || state.mod_revision < written_since) continue;
    auto topic = topics_.find(key.first);
    // Only partitions of a topic this broker knows, within its assignment.
    if (topic == topics_.end() || key.second < 0 ||
        static_cast<size_t>(key.second) >= topic->second.value.partitions.size()) {
      continue;
    }
    led[key] = state.value.leader_epoch;
  }
  return led;
}

}  // namespace sluice::broker
