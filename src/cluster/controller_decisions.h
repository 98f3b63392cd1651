// The cluster controller's decisions as pure functions over the etcd values
// (docs/design/0018-cluster.md, decisions 2, 3, 9, 10, 12): replica assignment (Kafka's
// rack-unaware AdminUtils.assignReplicasToBrokers), leader election from the ISR, the ISR
// removal of a dead or re-incarnated broker, and the etcd transaction each produces. No
// etcd and no clock here: the ClusterController reads the values, calls these, and sends
// the MetadataWrites; tests check the decisions and their fencing without etcd.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "cluster/cluster_values.h"

namespace sluice::cluster {

// One etcd transaction: every compare must hold (the key's mod_revision equals `revision`;
// 0: the key does not exist), then every put and delete runs; otherwise nothing does.
struct MetadataWrite {
  struct Compare {
    std::string key;
    int64_t mod_revision = 0;
    bool operator==(const Compare&) const = default;
  };
  struct Put {
    std::string key;
    std::string value;
    int64_t lease = 0;  // 0: none
    bool operator==(const Put&) const = default;
  };
  std::vector<Compare> compares;
  std::vector<Put> puts;
  std::vector<std::string> deletes;
  std::vector<std::string> delete_prefixes;  // every key starting with it
};

// etcd refuses a transaction of more than 128 operations (--max-txn-ops): partition states
// go in writes of at most this many puts.
inline constexpr size_t kMaxPutsPerWrite = 100;

// ---------------------------------------------------------------------------------------
// Replica assignment

// Why an assignment cannot be made, as Kafka's CreateTopics answers it.
enum class AssignmentError { kNone, kInvalidPartitions, kInvalidReplicationFactor };

struct Assignment {
  AssignmentError error = AssignmentError::kNone;
  std::string message;
  std::vector<std::vector<int32_t>> replicas;  // per partition, from start_partition
};

// Kafka's rack-unaware assignment: the first replica of each partition round-robin over the
// sorted brokers from `start_index`, the others at an increasing shift (`replica_shift`,
// bumped after each full round), so the replicas of one broker's partitions spread over
// the others. `brokers` need not be sorted; Kafka passes random start values (the
// controller does too), tests fixed ones.
Assignment AssignReplicas(std::vector<int32_t> brokers, int32_t partitions,
                          int32_t replication_factor, int32_t start_index, int32_t replica_shift,
                          int32_t start_partition = 0);

// The replicas of `add` new partitions after `existing` (CreatePartitions): the replication
// factor of partition 0, starting at partition 0's first replica in the broker list
// (Kafka's AdminZkClient.createNewPartitionsAssignment).
Assignment AssignNewPartitions(const std::vector<std::vector<int32_t>>& existing,
                               std::vector<int32_t> brokers, int32_t add, int32_t replica_shift);

// ---------------------------------------------------------------------------------------
// Elections

// A live broker as the controller sees it: registered, with this incarnation and flag.
struct LiveBroker {
  std::string incarnation;
  bool clean = true;
};
using LiveBrokers = std::map<int32_t, LiveBroker>;

// Whether `member` may lead: live, with the incarnation it joined the ISR with, and clean
// (an unclean one only when it is the ISR's only member: no other replica can hold more).
bool Electable(const IsrMember& member, const PartitionState& state, const LiveBrokers& live);

// The leader a partition should have: the current one while it is electable, else the
// first replica in assignment order that is an electable ISR member; -1 when none (the
// partition is offline; unclean election is off).
int32_t ChooseLeader(const std::vector<int32_t>& replicas, const PartitionState& state,
                     const LiveBrokers& live);

// `state` without `node` in its ISR, unless it is the last member (Kafka keeps the last one,
// so the partition comes back when it does).
PartitionState WithoutIsrMember(PartitionState state, int32_t node);

// The new state after the live set changed (a broker died, or re-registered with another
// incarnation or unclean: pass `remove` for those): the removed nodes leave the ISR, the
// leader is chosen again, and dead members leave once someone leads (not while offline);
// leader_epoch goes up by one whenever the leader changes (to -1 too), and
// controller_epoch becomes the caller's. nullopt when nothing changes.
std::optional<PartitionState> Reelect(const std::vector<int32_t>& replicas,
                                      const PartitionState& state, const LiveBrokers& live,
                                      const std::vector<int32_t>& remove, int64_t controller_epoch);

// ---------------------------------------------------------------------------------------
// The controller's writes. Each compares the controller_epoch key's revision (a write by a
// controller that was replaced fails, decision 10) and the revisions of what it read.

struct ControllerFence {
  int64_t epoch = 0;                      // this controller's epoch
  int64_t controller_epoch_revision = 0;  // mod_revision of controller_epoch as it wrote it
};

// A partition's new state, if `key` still has `revision` (the election's CAS).
MetadataWrite PartitionStateWrite(const KeyLayout& keys, const ControllerFence& fence,
                                  const std::string& topic, int32_t partition, int64_t revision,
                                  const PartitionState& state);

// A new topic: the topic key (absent, and not being deleted) in the first write, the initial
// partition states (leader: the first replica; ISR: every replica with its incarnation;
// epoch 0) in the following ones, each creating keys that must not exist.
std::vector<MetadataWrite> CreateTopicWrites(const KeyLayout& keys, const ControllerFence& fence,
                                             const std::string& name, const TopicAssignment& topic,
                                             const LiveBrokers& live);

// More partitions: the topic's new value (if it still has `topic_revision`), then the new
// partitions' initial states.
std::vector<MetadataWrite> AddPartitionsWrites(const KeyLayout& keys, const ControllerFence& fence,
                                               const std::string& name, int64_t topic_revision,
                                               const TopicAssignment& grown, int32_t first_new,
                                               const LiveBrokers& live);

// The initial states of partitions [first, replicas.size()) of a topic whose later writes
// never happened (its controller died between them): as CreateTopicWrites writes them,
// each key created only if it does not exist.
std::vector<MetadataWrite> InitialStateWrites(const KeyLayout& keys, const ControllerFence& fence,
                                              const std::string& name,
                                              const std::vector<std::vector<int32_t>>& replicas,
                                              int32_t first, const LiveBrokers& live);

// A deletion: the topic and its partition states go, deleting/<name> marks it until every
// replica removed its directories.
MetadataWrite DeleteTopicWrite(const KeyLayout& keys, const ControllerFence& fence,
                               const std::string& name, int64_t topic_revision,
                               const std::string& topic_id);

// Becoming the controller: the controller key (absent) under the broker's lease and the
// controller_epoch bumped (if it still has `epoch_revision`, 0 when absent), in one write.
// The new epoch is `previous_epoch + 1`.
MetadataWrite ControllerElectionWrite(const KeyLayout& keys, int32_t node, int64_t lease,
                                      int64_t previous_epoch, int64_t epoch_revision);

// A broker's registration under its lease, if its key does not exist (a node id in use
// fails the CAS).
MetadataWrite RegistrationWrite(const KeyLayout& keys, int32_t node, int64_t lease,
                                const BrokerRegistration& registration);

// A block of kProducerIdBlockSize producer ids from `current` (nullopt: the key is absent;
// ids start at 0): the first id of the block and the write that takes it.
std::pair<int64_t, MetadataWrite> TakeProducerIdBlock(const KeyLayout& keys,
                                                      std::optional<ProducerIdBlock> current,
                                                      int64_t revision);

}  // namespace sluice::cluster
