// Coordinator partitions: what a cluster needs to run the group and transaction
// coordinators on replicated internal partitions (docs/design/0018-cluster.md, decision
// 11 and "coordmove"): Kafka's key-to-partition hash (Java's String.hashCode), the
// internal topics' defaults, the append of a coordinator's batch on the partition's
// owner shard acknowledged by the high watermark (Kafka's appendRecords with acks=-1),
// and CoordinatorRoles, which tells the coordinators when this broker starts or stops
// leading an internal partition.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "broker/cluster_controller_roles.h"
#include "broker/internal_log.h"
#include "kafka/protocol/api.h"

namespace sluice::broker {

class Controller;
class GroupCoordinator;
class Shards;
class TxnCoordinator;

// The transaction coordinator's internal topic (kOffsetsTopic, group_coordinator.h, is
// the group coordinator's).
inline const char kTxnStateTopic[] = "__transaction_state";

// The internal topics' partition counts and replication factors in a cluster are serve
// keys (ClusterOptions: offsets.topic.*, transaction.state.log.*; 16 partitions where
// Kafka has 50, see 0018 "coordmove" and "coordfix"). A topic that exists already keeps
// its count: the hash uses the topic's.
// offsets.commit.timeout.ms: how long a coordinator's write waits for the high watermark.
inline constexpr int32_t kCoordinatorWriteTimeoutMs = 5000;

// Java's String.hashCode over the UTF-16 code units of `key` (UTF-8 here; a byte that is
// not valid UTF-8 counts as U+FFFD, as Java's decoder makes it).
int32_t JavaStringHash(std::string_view key);
// Kafka's Utils.abs(key.hashCode) % partitions: the partition of an internal topic whose
// leader coordinates `key` (a group id or a transactional id). `partitions` >= 1.
int32_t CoordinatorPartitionFor(std::string_view key, int32_t partitions);

// The error a coordinator answers for a write of its replicated log that failed with
// `st` (Kafka's GroupMetadataManager mapping): NOT_COORDINATOR when the partition is no
// longer led here, COORDINATOR_NOT_AVAILABLE otherwise (too few in-sync replicas, the
// high watermark did not pass it in time, the log failed).
kafka::ErrorCode CoordinatorWriteError(const Status& st);
// The same for a group's generation record (Kafka's storeGroup): a write whose high
// watermark did not pass it in time (kAborted, ReplicatedAppend's timeout) is
// REBALANCE_IN_PROGRESS, so the members join again rather than look for a coordinator.
kafka::ErrorCode GroupStoreError(const Status& st);
// The Status a replicated append reports when this broker no longer leads the partition.
Status NotLeadingError(const std::string& what);

// An InternalLogOptions::append for partition (topic, partition) led here in
// `leader_epoch`, owned by `shard`: each batch is posted to the owner, checked
// (NOT_LEADER_OR_FOLLOWER: another epoch or a follower now; NOT_ENOUGH_REPLICAS below
// min.insync.replicas), appended with the epoch and acknowledged once the high watermark
// passed it, or after `timeout_ms` with an error. `done` runs on the owner's thread.
InternalLogOptions::AppendFn ReplicatedAppend(Shards& shards, std::string topic, int32_t partition,
                                              int shard, int32_t leader_epoch, int32_t timeout_ms);

// What the coordinators are told by CoordinatorRoles, on the cluster controller's thread.
struct CoordinatorListener {
  // This broker now leads `key` of an internal topic in `leader_epoch`.
  std::function<void(const PartitionKey& key, int32_t leader_epoch)> on_lead;
  // It stopped leading `key` (a follower now, or the replica goes). Returns once no load
  // of the partition reads its log (a load under way is joined); the coordinator drops
  // the partition's state on its own thread after that; a write it still has under way
  // is refused by the log's owner (ReplicatedAppend: not this leader epoch any more).
  std::function<void(const PartitionKey& key)> on_resign;
};

// The listener `sluice serve --etcd` uses: a leadership of partition p of
// __consumer_offsets (__transaction_state) loads p into the group (transaction)
// coordinator over the open log of `controller` (its owner shard appends, acknowledged by
// the high watermark); a resignation unloads it. On the controller's thread; the
// coordinators must outlive the listener's use (CoordinatorRoles::Detach).
CoordinatorListener CoordinatorsFollowLeadership(Controller& controller, Shards& shards,
                                                 GroupCoordinator* groups, TxnCoordinator* txns,
                                                 InternalLogOptions defaults);

// ReplicaRoles in front of the broker's: forwards every role, and for the internal
// topics' partitions tells the listener after a leadership was taken and before a
// follower role or a stop is passed on (so the log is not closed under a coordinator).
// Lifecycle: made with the broker, before the ClusterController; `inner` must outlive it.
class CoordinatorRoles final : public ReplicaRoles {
 public:
  explicit CoordinatorRoles(ReplicaRoles* inner) : inner_(inner) {}

  bool BecomeLeader(const PartitionKey& key, const LeaderRole& role) override;
  bool BecomeFollower(const PartitionKey& key, int32_t leader, int32_t leader_epoch,
                      const std::string& host, int32_t port) override;
  void StopReplica(const PartitionKey& key, bool deleted) override;
  // Sets the listener (once, before the controller issues roles) and clears it (before
  // the coordinators close: a call under way finishes first). Any thread.
  void Attach(CoordinatorListener listener);
  void Detach();

 private:
  ReplicaRoles* const inner_;
  std::mutex mu_;
  CoordinatorListener listener_;  // guarded by mu_
};

}  // namespace sluice::broker
