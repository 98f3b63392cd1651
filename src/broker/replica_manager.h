// ReplicaManager: a broker's replicated partitions — it makes a local replica the
// leader or a follower of a leader epoch (what the cluster controller decides; tests
// call it directly), runs one ReplicaFetcher per leader broker for its followers, the
// periodic ISR check on every shard, and the ISR changes through the IsrStore
// (docs/design/0018-cluster.md, decisions 5-7).
//
// A partition no one told anything stays a single node's (Partition::replica null).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "broker/partition.h"
#include "broker/remote_store.h"
#include "broker/replica_checkpoint.h"
#include "broker/replica_isr_store.h"

namespace sluice::broker {

namespace handlers {
struct Context;
}
class ReplicaFetcher;
struct InterBrokerSecurity;  // inter_broker_connection.h

struct ReplicaManagerOptions {
  int32_t node_id = 1;
  // This broker's registration (the etcd create_revision in phase C), sent in fetches'
  // replica_state; a leader refuses fetches with an older one.
  int64_t broker_epoch = -1;
  // Where the current registration's epoch is read at each fetch, when it can change (a
  // broker that lost its lease registers again with a newer one; leaders add a follower
  // to the ISR only with its current epoch, KIP-903). Null: broker_epoch. Outlives the
  // manager.
  const std::atomic<int64_t>* broker_epoch_source = nullptr;
  // The local deadline of this broker's etcd lease (LeaseKeeper::valid_until_ns, in
  // MonotonicNanos), read by the shards: once it passed, leaders here refuse produce
  // (NOT_LEADER_OR_FOLLOWER) and their high watermarks stand still, before the controller
  // steps them down (0018 review item 5). Null: no lease (tests). Outlives the manager.
  const std::atomic<int64_t>* lease_deadline_ns = nullptr;
  int64_t replica_lag_time_max_ms = 30'000;     // replica.lag.time.max.ms
  int64_t isr_check_interval_ms = -1;           // -1: replica_lag_time_max_ms / 2, as Kafka
  int32_t fetch_max_wait_ms = 500;              // replica.fetch.wait.max.ms
  int32_t fetch_max_bytes = 10 << 20;           // replica.fetch.response.max.bytes
  int32_t fetch_partition_max_bytes = 1 << 20;  // replica.fetch.max.bytes
  int64_t fetch_backoff_ms = 1'000;             // replica.fetch.backoff.ms
  int32_t socket_timeout_ms = 30'000;           // replica.socket.timeout.ms
  // replica.follower.direct.writes: a follower's log is written around the page cache
  // (storage::PartitionLog::SetDirectWrites; 0018, "pagecache"). A leader's is not.
  bool follower_direct_writes = true;
  // replica.high.watermark.checkpoint.interval.ms: how often the high watermarks are
  // written to <data-dir>/replication-offset-checkpoint (also at Stop); 0: never.
  int64_t hw_checkpoint_interval_ms = 5'000;
  IsrStore* isr_store = nullptr;  // required; outlives the manager
  Clock* clock = Clock::Real();
  // How followers reach their leaders' inter-broker listener (null: plaintext).
  std::shared_ptr<const InterBrokerSecurity> inter_broker_security;
  // Tiered storage's store (design 0025, decision 9): a follower starting over at its
  // leader's local start takes the producers and epochs there from it. Null: none.
  const RemoteStore* remote_store = nullptr;
};

// Lifecycle: made once the broker is open (it reaches the partitions through the
// handlers' Context and its shards; it reads the high-watermark checkpoint of the data
// directory), Start() once the server runs, Stop() before the server stops (it joins
// the fetchers, which post to the shards, and writes the checkpoint a last time);
// destroyed after the broker closed (the logs' last acks reach it). BecomeLeader and
// BecomeFollower from any thread but a shard's (they run on the owner and wait);
// PostToPartition and SubmitIsrChange are for the owner threads.
class ReplicaManager {
 public:
  ReplicaManager(ReplicaManagerOptions options, handlers::Context& ctx);
  ~ReplicaManager();  // Stop()s
  ReplicaManager(const ReplicaManager&) = delete;
  ReplicaManager& operator=(const ReplicaManager&) = delete;

  void Start();
  void Stop();

  struct Leadership {
    int32_t leader_epoch = 0;
    std::vector<int32_t> replicas;  // this node included
    std::vector<int32_t> isr;       // as committed in the IsrStore
    int64_t isr_version = 0;
    int32_t min_insync_replicas = 1;  // the topic's min.insync.replicas
  };
  // This node leads `topic`-`partition` in `leadership.leader_epoch` (which must not be
  // older than the one it knows): it stops fetching it, appends (epoch, log end) to the
  // leader epochs before any write, keeps its high watermark (a replica new since the
  // start takes the checkpointed one) and takes writes.
  // FailedPrecondition for an older epoch, NotFound for an unknown partition.
  Status BecomeLeader(const std::string& topic, int32_t partition, const Leadership& leadership);
  // This node follows `leader` (at host:port, its inter-broker address) in
  // `leader_epoch`: acks=all waits are answered NOT_LEADER_OR_FOLLOWER, the log is
  // synced, and the leader's fetcher takes the partition from its log end; a diverged
  // tail is truncated by the diverging-epoch answer. A `leader` of -1 (none registered,
  // none elected yet) makes it a follower of no one: it fetches nothing and keeps its log
  // and high watermark for the next role, so a failover onto it needs no reopening and
  // starts from its current high watermark (0018 review item 6).
  Status BecomeFollower(const std::string& topic, int32_t partition, int32_t leader_epoch,
                        int32_t leader, const std::string& host, int32_t port);

  // This node stops fetching `topic`-`partition` (its replica goes, or its log is about to
  // close). Any thread.
  void StopReplica(const std::string& topic, int32_t partition) {
    StopFetching({topic, partition});
  }

  // What a replica looks like now (tests and, later, metrics).
  struct View {
    bool replicated = false;
    ReplicaRole role = ReplicaRole::kFollower;
    int32_t leader_epoch = -1;
    int64_t high_watermark = -1;
    int64_t log_end = -1;
    int64_t log_start = -1;
    int64_t durable_end = -1;
    std::vector<int32_t> isr;
    int64_t isr_version = -1;
    std::vector<LeaderEpochCache::Entry> epochs;
    std::map<int32_t, int64_t> follower_log_ends;  // a leader's: each follower's last report
  };
  Result<View> Describe(const std::string& topic, int32_t partition);
  // Whether a fetcher from `leader` runs (tests: an unused one is stopped and removed).
  bool HasFetcherFor(int32_t leader);

  // For the replica code (replica_leader.cc, replica_fetcher.cc).
  const ReplicaManagerOptions& options() const { return options_; }
  // False once this broker's lease deadline passed (it may no longer be registered; the
  // controller may be electing other leaders). Any thread.
  bool LeaseValid() const {
    return options_.lease_deadline_ns == nullptr ||
           MonotonicNanos() < options_.lease_deadline_ns->load(std::memory_order_acquire);
  }
  handlers::Context& context() { return ctx_; }
  storage::FlushPolicy flush_policy() const;
  // Runs fn(partition) on its owner's thread if its replica state is still of
  // `generation` (a role change since makes it a no-op). Any thread.
  void PostToPartition(const PartitionKey& key, uint64_t generation,
                       std::function<void(Partition&)> fn);
  // Runs fn(partition or null) on the owner's thread and waits. Not from a shard thread.
  // False when the shards are stopping.
  bool RunOnPartition(const PartitionKey& key, const std::function<void(Partition*)>& fn);
  // Runs fn(partition or null, i) for every parts[i] (a key and its topic id, which
  // names the owner) on its owner's thread: one post per owner shard, the owners in
  // parallel, and waits for all. Not from a shard thread. False when the shards are
  // stopping (some may not have run).
  struct Located {
    PartitionKey key;
    kafka::Uuid topic_id;
  };
  bool RunOnPartitions(const std::vector<Located>& parts,
                       const std::function<void(Partition*, size_t)>& fn);
  // A leader's ISR change (owner's thread): sent to the IsrStore, committed on the owner
  // when it answers; one at a time per partition.
  void SubmitIsrChange(Partition& part, std::vector<int32_t> new_isr);

 private:
  int OwnerOf(const PartitionKey& key) const;
  // Takes `key` off the fetcher that has it, if any; a fetcher left empty is stopped.
  void StopFetching(const PartitionKey& key);
  // Takes `key` off `leader`'s fetcher; one left empty leaves fetchers_ for `retired`
  // (stopped by the caller once mu_ is released). With mu_ held.
  void RemoveFromFetcherLocked(int32_t leader, const PartitionKey& key,
                               std::vector<std::unique_ptr<ReplicaFetcher>>* retired);
  void ScheduleIsrCheck(int shard);
  // Where a replica without a ReplicaState starts its high watermark: the checkpoint's,
  // within the log, else all the log has (a single node's history is committed). Owner.
  int64_t StartingHighWatermark(const Partition& part, std::optional<int64_t> checkpointed);
  std::optional<int64_t> Checkpointed(const PartitionKey& key);
  // Gathers every replica's high watermark (from the shards) and writes the checkpoint
  // when it changed. Not from a shard thread.
  void WriteCheckpoint();

  const ReplicaManagerOptions options_;
  handlers::Context& ctx_;
  std::atomic<uint64_t> next_generation_{1};
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};

  std::mutex mu_;
  std::map<int32_t, std::unique_ptr<ReplicaFetcher>> fetchers_;  // by leader; guarded by mu_
  std::map<PartitionKey, int32_t> fetching_from_;                // guarded by mu_
  std::vector<EventLoop::TimerId> isr_timers_;  // per shard, each its shard's thread's
  HighWatermarks checkpointed_;                 // as last read or written; guarded by mu_
  std::condition_variable checkpoint_cv_;       // with mu_: Stop wakes the thread
  std::thread checkpoint_thread_;
};

}  // namespace sluice::broker
