// MetadataSnapshot: the topics as every shard sees them, and MetadataPublisher, the one
// place a new snapshot is published and shards pick it up
// (docs/design/0002-broker-plan.md, decision 16).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "broker/topic_store.h"
#include "kafka/protocol/wire.h"

namespace sluice::broker {

// An immutable copy made by the metadata controller after each change (topic created,
// deleted, grown, reconfigured; the advertised address set) and published to all shards
// at once. Requests read it without a lock; a shard keeps its own reference and takes
// the new one on its next request.
//
// A single node (`cluster` false) leads every partition itself, at the advertised address.
// In a cluster (docs/design/0018-cluster.md) the snapshot also carries the live brokers, the
// controller and, per partition, its leader, replicas and ISR as etcd holds them.
struct MetadataSnapshot {
  // A partition as the cluster sees it (cluster mode only).
  struct Leadership {
    int32_t leader = -1;  // -1: none (offline)
    int32_t leader_epoch = 0;
    std::vector<int32_t> replicas;  // assignment order
    std::vector<int32_t> isr;
    std::vector<int32_t> offline;  // replicas on brokers that are not live
    bool operator==(const Leadership&) const = default;
  };
  struct Topic {
    TopicInfo info;
    std::vector<int32_t> leader_epochs;  // per partition, as its log was opened (0: none)
    std::vector<Leadership> partitions;  // per partition, cluster mode only
  };
  // kafka.listeners (docs/design/0019-security.md): the address a request that came in
  // on each listener is told, as Kafka answers.
  struct Endpoint {
    std::string listener, host;
    int32_t port = 0;
    bool operator==(const Endpoint&) const = default;
  };
  struct Broker {
    int32_t node_id = -1;
    std::string host;
    int32_t port = 0;
    // Where other brokers reach it (followers' fetches, transaction markers).
    std::string inter_broker_host;
    int32_t inter_broker_port = 0;
    // Its listeners as it registered them; empty: host:port on every listener.
    std::vector<Endpoint> endpoints;
    bool operator==(const Broker&) const = default;
    // Its address for a client on `listener`; nullopt when it has no such listener
    // (Kafka leaves such a broker out of the answer).
    std::optional<std::pair<std::string_view, int32_t>> AddressFor(
        std::string_view listener) const {
      if (endpoints.empty()) return std::pair<std::string_view, int32_t>{host, port};
      for (const Endpoint& e : endpoints) {
        if (e.listener == listener) return std::pair<std::string_view, int32_t>{e.host, e.port};
      }
      return std::nullopt;
    }
  };
  std::map<std::string, Topic> topics;  // by name
  std::string advertised_host;
  int32_t advertised_port = 0;
  // This node's listeners; empty: advertised_host:advertised_port on every listener.
  std::vector<Endpoint> endpoints;
  // This node's address for a request that came in on `listener` (views into this
  // snapshot).
  std::pair<std::string_view, int32_t> AdvertisedFor(std::string_view listener) const {
    for (const Endpoint& e : endpoints) {
      if (e.listener == listener) return {e.host, e.port};
    }
    return {advertised_host, advertised_port};
  }
  // Cluster mode: this broker's node id, the live brokers (by node id) and the controller
  // (-1: none elected now).
  bool cluster = false;
  int32_t node_id = 1;  // a single node is kNodeId (broker_options.h)
  std::vector<Broker> brokers;
  int32_t controller_id = -1;

  const Topic* Find(const std::string& name) const {
    auto it = topics.find(name);
    return it == topics.end() ? nullptr : &it->second;
  }
  const Topic* FindById(const kafka::Uuid& id) const;
  // A live broker of the cluster; nullptr when `node` is not one.
  const Broker* FindBroker(int32_t node) const {
    for (const Broker& b : brokers) {
      if (b.node_id == node) return &b;
    }
    return nullptr;
  }
};

// Holds the published snapshot and the advertised address. Publishing swaps a shared_ptr
// under a mutex and bumps an atomic version; a reader that keeps its own copy compares
// the version (one atomic load) and takes the mutex only after a change. Any thread.
class MetadataPublisher {
 public:
  MetadataPublisher(std::string advertised_host, int32_t advertised_port);

  // Publishes `topics` (its advertised address is set here).
  void Publish(std::shared_ptr<MetadataSnapshot> topics);
  // Republishes the current topics with a new advertised address.
  void SetAdvertisedAddress(std::string host, int32_t port);
  // Republishes the current topics with one advertised address per listener.
  void SetAdvertisedEndpoints(std::vector<MetadataSnapshot::Endpoint> endpoints);
  std::shared_ptr<const MetadataSnapshot> Current() const;

  // Brings a reader's copy (`*copy`, of `*version`) up to date and returns it.
  const MetadataSnapshot& Refresh(std::shared_ptr<const MetadataSnapshot>* copy,
                                  uint64_t* version) const {
    const uint64_t now = version_.load(std::memory_order_acquire);
    if (*copy == nullptr || *version != now) {
      std::lock_guard lock(mu_);
      *copy = published_;
      *version = version_.load(std::memory_order_relaxed);
    }
    return **copy;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const MetadataSnapshot> published_;  // guarded by mu_
  std::string advertised_host_;                        // guarded by mu_
  int32_t advertised_port_ = 0;                        // guarded by mu_
  std::vector<MetadataSnapshot::Endpoint> endpoints_;  // guarded by mu_
  std::atomic<uint64_t> version_{1};                   // written under mu_
};

}  // namespace sluice::broker
