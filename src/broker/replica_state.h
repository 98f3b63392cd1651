// ReplicaState: what the owner shard keeps for a replicated partition — its role
// (leader or follower), the leader epoch, the high watermark, and for a leader its
// followers' progress, its committed ISR and the acks=all produces waiting for the high
// watermark (docs/design/0018-cluster.md, decisions 4-7). A partition without one is a
// single node's (Partition::replica null): today's behaviour, untouched.
//
// The functions below are the leader's rules, run on the owner's thread
// (replica_leader.cc); the follower's side is ReplicaFetcher, the roles are set by
// ReplicaManager.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/event_loop.h"
#include "kafka/protocol/api.h"
#include "kafka/protocol/requests.h"
#include "storage/log.h"

namespace sluice::broker {

class ReplicaManager;
struct Partition;
namespace handlers {
struct Context;
}

enum class ReplicaRole { kLeader, kFollower };

// A leader's view of one follower (Kafka's Replica state).
struct FollowerProgress {
  int32_t node = -1;
  int64_t log_end = -1;  // its last fetch offset; -1 until it fetched in this epoch
  int64_t log_start = -1;
  int64_t last_caught_up_ms = 0;  // the last time it had everything the leader had
  int64_t last_fetch_ms = 0;
  int64_t last_fetch_leader_end = -1;  // the leader's end at its previous fetch
  int64_t broker_epoch = -1;           // the largest registration it fetched with
};

// An acks=all produce waiting for the high watermark to reach `required_offset`.
struct AcksWait {
  int64_t required_offset = 0;
  std::function<void(kafka::ErrorCode)> done;  // on the owner's thread, once
  EventLoop* loop = nullptr;                   // the owner's, for the timer
  EventLoop::TimerId timer = 0;
  bool answered = false;
};

// Owned by its Partition, used on the owner shard's thread only.
struct ReplicaState {
  ReplicaRole role = ReplicaRole::kFollower;
  std::string topic;
  int32_t partition = 0;
  int32_t leader_epoch = 0;
  // Bumped at every role change: timers, fetcher appends and ISR answers made for an
  // older role see a different generation and do nothing.
  uint64_t generation = 0;
  ReplicaManager* manager = nullptr;
  // Consumers read below it (leader); a follower keeps min(leader's, its log end), the
  // start of its high watermark if it becomes leader. Never moves back while a leader.
  // -1: a cluster broker opened the log but the ReplicaManager was not told its role yet
  // (a follower of no one: it takes no writes; the first role starts from the checkpoint).
  int64_t high_watermark = 0;

  // Leader.
  std::vector<int32_t> replicas;  // the assignment, this node included
  std::vector<int32_t> isr;       // as committed in the IsrStore, this node included
  int64_t isr_version = 0;        // the IsrStore's version of it (an etcd revision)
  bool isr_change_pending = false;
  // After the store refused a change (the controller moved on), none is asked again
  // before this time: the controller tells this broker its new role meanwhile.
  int64_t isr_retry_after_ms = 0;
  int32_t min_insync_replicas = 1;
  int64_t epoch_start_offset = 0;  // the log end when this node took leader_epoch
  std::vector<FollowerProgress> followers;
  std::vector<std::shared_ptr<AcksWait>> acks_waits;

  // Follower.
  int32_t leader_id = -1;

  bool leader() const { return role == ReplicaRole::kLeader; }
  FollowerProgress* Follower(int32_t node);
  bool InIsr(int32_t node) const;
};

namespace replica {

// The leader's own end for the high watermark: its durable end under the durable flush
// policy, its written end otherwise (0018 decision 6).
int64_t LocalEnd(storage::FlushPolicy policy, const storage::PartitionLog& log);

// Produce on the owner: NOT_LEADER_OR_FOLLOWER on a follower; NOT_ENOUGH_REPLICAS for
// acks=all when the committed ISR is smaller than min.insync.replicas. kNone to append.
kafka::ErrorCode CheckAppend(const Partition& part, int16_t acks, std::string* message);
// Sets the local ack level of a leader's append and chains a hook that recomputes the
// high watermark on the owner once the append is written (or durable).
void PrepareAppend(Partition& part, storage::AppendOptions* opts);
// An acks=all produce at [.., required_offset): done(kNone) once the high watermark
// reaches it, REQUEST_TIMED_OUT after `timeout_ms`, NOT_LEADER_OR_FOLLOWER when the
// partition stops being led here. On the owner's thread.
void AwaitHighWatermark(Partition& part, int64_t required_offset, int32_t timeout_ms,
                        std::function<void(kafka::ErrorCode)> done);
// Recomputes a leader's high watermark (min over the committed ISR of the followers'
// log ends and LocalEnd), answers the acks=all waits it passed and wakes the waiting
// fetches. True when it moved.
bool MaybeAdvanceHighWatermark(Partition& part);
// Answers every acks=all wait with `error` (a role change).
void FailAcksWaits(ReplicaState& rs, kafka::ErrorCode error);
// The ISR check of 0018 decision 7, run periodically: followers that have not caught up
// for replica.lag.time.max.ms leave the ISR (through the IsrStore).
void MaybeShrinkIsr(Partition& part, int64_t now_ms);

// A Fetch from follower `replica_id` for one partition, on the owner (Kafka's
// Partition.fetchRecords for a follower): checks the role, epochs and replica, answers a
// diverging epoch (KIP-595), records the follower's progress (which may expand the ISR
// or move the high watermark), and reads from fetch_offset up to the log's written end.
void ServeFetch(Partition& part, int32_t replica_id, int64_t replica_epoch,
                const kafka::FetchRequest::FetchPartition& fp, uint64_t max_bytes,
                kafka::FetchResponse::PartitionData* out, std::optional<storage::FileSlice>* slice);

// DeleteRecords on a replicated partition, from any thread but a shard's: the bound is
// its replicated high watermark, read on its owner (*hw set); NOT_LEADER_OR_FOLLOWER on a
// follower. kNone with *hw untouched for a single node's partition.
kafka::ErrorCode DeleteRecordsBound(handlers::Context& ctx, const std::string& topic,
                                    int32_t partition, int64_t* hw);

// The follower id of a Fetch (v0-14 replica_id, v15+ replica_state), -1 for consumers.
inline int32_t FetchReplicaId(const kafka::FetchRequest& req, int16_t version) {
  return version >= 15 ? req.replica_state.replica_id : req.replica_id;
}

}  // namespace replica
}  // namespace sluice::broker
