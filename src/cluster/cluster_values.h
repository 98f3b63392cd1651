// The values sluice keeps in etcd (docs/design/0018-cluster.md, "etcd layout") as C++
// types, their JSON, and the keys they live under. Every decoder takes bytes from etcd as
// outside input: a value that is not what this code writes is an InvalidArgument naming
// the key kind and what is wrong, never a crash. Unknown fields are ignored (a newer
// broker may add some); missing or mistyped ones are errors.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace sluice::cluster {

// Limits a decoder enforces on outside input.
inline constexpr size_t kMaxValueBytes = 4 << 20;      // above etcd's 1.5 MiB request limit
inline constexpr size_t kMaxPartitions = 100'000;      // as topics.num_partitions
inline constexpr size_t kMaxReplicas = 256;            // per partition
inline constexpr size_t kMaxTopicConfigs = 1000;       // per topic
inline constexpr int64_t kProducerIdBlockSize = 1000;  // decision 12

// A cluster id, incarnation or topic id: a UUID as Kafka writes it, 22 characters of
// URL-safe base64 without padding.
bool IsIdText(std::string_view s);
// The 22-character text of a 128-bit id, and back (false when `text` is not one).
std::string IdText(uint64_t hi, uint64_t lo);
bool ParseIdText(std::string_view text, uint64_t* hi, uint64_t* lo);

// cluster_id: the cluster every broker's data directory must belong to.
struct ClusterIdValue {
  std::string id;
  bool operator==(const ClusterIdValue&) const = default;
};

// A named Kafka listener's advertised address (kafka.listeners; docs/design/0019-security.md).
struct ListenerAddress {
  std::string name;  // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
  std::string host;
  int32_t port = 0;
  bool operator==(const ListenerAddress&) const = default;
};

// brokers/<node>: a live broker (under its lease). Its epoch is the key's create_revision.
struct BrokerRegistration {
  std::string host;  // the advertised address clients connect to (the first listener's)
  int32_t port = 0;
  std::string inter_broker_host;  // where other brokers reach it
  int32_t inter_broker_port = 0;
  std::string incarnation;  // <data-dir>/meta/incarnation
  bool clean = true;        // cluster_identity.h, CleanForRegistration
  // Each listener's advertised address (at most 4, names distinct); empty (a broker
  // with kafka.addr, or a registration written before listeners): host:port answers on
  // every listener.
  std::vector<ListenerAddress> listeners;
  bool operator==(const BrokerRegistration&) const = default;
};

// incarnations/<node>: the incarnation the controller last handled for a node.
struct IncarnationValue {
  std::string incarnation;
  bool operator==(const IncarnationValue&) const = default;
};

// controller: who is the controller now (under its lease).
struct ControllerValue {
  int32_t node = -1;
  int64_t epoch = 0;
  bool operator==(const ControllerValue&) const = default;
};

// controller_epoch: the last controller's epoch; a new controller bumps it before acting.
struct ControllerEpochValue {
  int64_t epoch = 0;
  bool operator==(const ControllerEpochValue&) const = default;
};

// topics/<name>: a topic's id, its replica assignment (one list of node ids per
// partition, the first the preferred leader) and its config overrides.
struct TopicAssignment {
  std::string id;
  std::vector<std::vector<int32_t>> partitions;
  std::map<std::string, std::string> configs;
  bool operator==(const TopicAssignment&) const = default;
};

// One ISR member: the node and the incarnation it had when it joined.
struct IsrMember {
  int32_t node = -1;
  std::string incarnation;
  bool operator==(const IsrMember&) const = default;
};

// partitions/<topic>/<p>: the leader (-1: none, offline), its epoch, the ISR and the
// epoch of the controller that last wrote it.
struct PartitionState {
  int32_t leader = -1;
  int32_t leader_epoch = 0;
  std::vector<IsrMember> isr;
  int64_t controller_epoch = 0;
  bool operator==(const PartitionState&) const = default;

  bool InIsr(int32_t node) const;
};

// producer_ids: the first producer id no broker has taken yet.
struct ProducerIdBlock {
  int64_t next = 0;
  bool operator==(const ProducerIdBlock&) const = default;
};

// deleting/<name>: a topic being deleted, until every replica removed its directories.
struct DeletingValue {
  std::string id;
  bool operator==(const DeletingValue&) const = default;
};

std::string ToJson(const ClusterIdValue& v);
std::string ToJson(const BrokerRegistration& v);
std::string ToJson(const IncarnationValue& v);
std::string ToJson(const ControllerValue& v);
std::string ToJson(const ControllerEpochValue& v);
std::string ToJson(const TopicAssignment& v);
std::string ToJson(const PartitionState& v);
std::string ToJson(const ProducerIdBlock& v);
std::string ToJson(const DeletingValue& v);

Result<ClusterIdValue> ParseClusterIdValue(std::string_view json);
Result<BrokerRegistration> ParseBrokerRegistration(std::string_view json);
Result<IncarnationValue> ParseIncarnationValue(std::string_view json);
Result<ControllerValue> ParseControllerValue(std::string_view json);
Result<ControllerEpochValue> ParseControllerEpochValue(std::string_view json);
Result<TopicAssignment> ParseTopicAssignment(std::string_view json);
Result<PartitionState> ParsePartitionState(std::string_view json);
Result<ProducerIdBlock> ParseProducerIdBlock(std::string_view json);
Result<DeletingValue> ParseDeletingValue(std::string_view json);

// The keys of one cluster: every one under /sluice/<cluster-name>/.
class KeyLayout {
 public:
  explicit KeyLayout(const std::string& cluster_name);

  const std::string& prefix() const { return prefix_; }  // "/sluice/<name>/"
  std::string ClusterId() const { return prefix_ + "cluster_id"; }
  std::string Controller() const { return prefix_ + "controller"; }
  std::string ControllerEpoch() const { return prefix_ + "controller_epoch"; }
  std::string ProducerIds() const { return prefix_ + "producer_ids"; }
  // users: the user store's JSON (auth::UserStore; docs/design/0019-security.md, phase D).
  std::string Users() const { return prefix_ + "users"; }
  // acls: the ACL bindings' JSON (auth::AclStore; phase E).
  std::string Acls() const { return prefix_ + "acls"; }
  // quotas: the client quotas' JSON (broker::QuotaStore; phase F).
  std::string Quotas() const { return prefix_ + "quotas"; }
  // grants: the SQL grants' JSON (query::authz::GrantStore; docs/design/0020).
  std::string Grants() const { return prefix_ + "grants"; }
  std::string Brokers() const { return prefix_ + "brokers/"; }  // a prefix
  std::string Broker(int32_t node) const;
  std::string Incarnations() const { return prefix_ + "incarnations/"; }
  std::string Incarnation(int32_t node) const;
  std::string Topics() const { return prefix_ + "topics/"; }
  std::string Topic(std::string_view name) const;
  std::string Partitions() const { return prefix_ + "partitions/"; }
  std::string PartitionsOf(std::string_view topic) const;  // a prefix
  std::string Partition(std::string_view topic, int32_t partition) const;
  std::string Deletions() const { return prefix_ + "deleting/"; }
  std::string Deleting(std::string_view topic) const;

  // What a key under the prefix names; nullopt for a key of another kind or a malformed one.
  std::optional<int32_t> NodeOfBroker(std::string_view key) const;
  std::optional<int32_t> NodeOfIncarnation(std::string_view key) const;
  std::optional<std::string> TopicOf(std::string_view key) const;  // topics/<name>
  std::optional<std::pair<std::string, int32_t>> PartitionOf(std::string_view key) const;
  std::optional<std::string> DeletingOf(std::string_view key) const;

 private:
  std::string prefix_;
};

}  // namespace sluice::cluster
