// Shards: the per-shard plumbing of the broker — which shard owns a partition, each
// shard's partitions and snapshot copy, running parts of a request on their owners and
// posting between threads through one gate (docs/design/0002-broker-plan.md, decision 2).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "broker/event_loop.h"
#include "broker/metadata_snapshot.h"
#include "broker/partition.h"

namespace sluice::broker {

// The order of a shard's partitions: by partition number, then by topic name (shortest
// first), so that a lookup among many partitions of one topic compares numbers and the
// name once, not the whole name at every level (a 1,000-partition fetch looks up each).
// Nothing iterates them in name order.
struct PartitionKeyLess {
  bool operator()(const PartitionKey& a, const PartitionKey& b) const {
    if (a.second != b.second) return a.second < b.second;
    if (a.first.size() != b.first.size()) return a.first.size() < b.first.size();
    return a.first < b.first;
  }
};

// A shard's partitions by (topic name, number), as a map, with an index by (topic id,
// number): a request's partitions, already resolved to topic ids, are found by hashing
// 20 bytes rather than comparing names down a tree (a 1,000-partition fetch looks up each,
// on every fetch). Every change goes through emplace, Extract and clear, which keep the
// index; a partition's topic id never changes while it is here.
class ShardPartitions {
 public:
  using Map = std::map<PartitionKey, std::unique_ptr<Partition>, PartitionKeyLess>;
  using iterator = Map::iterator;
  using const_iterator = Map::const_iterator;

  iterator begin() { return map_.begin(); }
  iterator end() { return map_.end(); }
  const_iterator begin() const { return map_.begin(); }
  const_iterator end() const { return map_.end(); }
  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  iterator find(const PartitionKey& key) { return map_.find(key); }
  const_iterator find(const PartitionKey& key) const { return map_.find(key); }

  std::pair<iterator, bool> emplace(const PartitionKey& key, std::unique_ptr<Partition> part);
  // Removes the partition at `it` and hands it over.
  std::unique_ptr<Partition> Extract(iterator it);
  void clear();
  // Partition `partition` of the topic with id `topic_id`, or null.
  Partition* FindById(const kafka::Uuid& topic_id, int32_t partition) const;

 private:
  struct IdKey {
    kafka::Uuid topic_id;
    int32_t partition;
    bool operator==(const IdKey&) const = default;
  };
  struct IdKeyHash {
    size_t operator()(const IdKey& k) const {
      uint64_t h = k.topic_id.hi * 0x9e3779b97f4a7c15ULL ^ k.topic_id.lo;
      h ^= static_cast<uint64_t>(static_cast<uint32_t>(k.partition)) * 0xc2b2ae3d27d4eb4fULL;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  Map map_;
  std::unordered_map<IdKey, Partition*, IdKeyHash> by_id_;
};

// What a shard's thread owns.
struct Shard {
  EventLoop* loop = nullptr;  // null until Attach
  int index = 0;
  ShardPartitions partitions;
  // Its copy of the published snapshot and the version it is of.
  std::shared_ptr<const MetadataSnapshot> metadata;
  uint64_t metadata_version = 0;
};

// One partition named by a request: where it lives.
struct Target {
  PartitionKey key;
  kafka::Uuid topic_id;
  int shard = -1;  // -1: the topic or partition does not exist (the visitor gets null)
};

// Lifecycle: made with one provisional shard, which the controlling thread owns while
// the broker opens its logs; Attach() (before the server's threads run) replaces it with
// one shard per loop and deals its partitions to their owners. From then on each Shard's
// contents belong to its loop's thread, and to the controlling thread again once the
// server stopped. PostGated, StopWaking and the snapshot reads are for any thread.
class Shards {
 public:
  explicit Shards(const MetadataPublisher* publisher);
  Shards(const Shards&) = delete;
  Shards& operator=(const Shards&) = delete;

  // The shard owning a partition among `shards`.
  static int OwnerOf(const kafka::Uuid& topic_id, int32_t partition, int shards);

  // The server's loops, one per shard (once, before their threads start).
  void Attach(const std::vector<EventLoop*>& loops);
  bool attached() const { return attached_.load(std::memory_order_acquire); }
  int size() const { return static_cast<int>(shards_.size()); }
  Shard& at(int i) { return *shards_[static_cast<size_t>(i)]; }

  // The shard whose loop `loop` is.
  Shard& ShardOf(EventLoop* loop);
  // The snapshot a request on `shard` reads: its copy, refreshed when a newer one was
  // published (one atomic load when none was). The shard's thread.
  const MetadataSnapshot& SnapshotFor(Shard& shard) {
    return publisher_->Refresh(&shard.metadata, &shard.metadata_version);
  }
  // The published snapshot itself (takes a short lock: a shard's requests use
  // SnapshotFor).
  std::shared_ptr<const MetadataSnapshot> Published() const { return publisher_->Current(); }
  // A Target for partition `p` of `topic` (shard -1 when it does not exist).
  Target TargetOf(const MetadataSnapshot::Topic* topic, const std::string& name, int32_t p) const;

  // Posts `task` to `loop` unless StopWaking() was called; false when it was not posted.
  bool PostGated(EventLoop* loop, std::function<void()> task);
  // Closes the gate and returns once no post is in progress.
  void StopWaking();
  bool waking_stopped() const { return waking_stopped_.load(); }

  // Runs visit(partition or null, i) for every targets[i] on its owner's thread (inline
  // for the home shard), then done() on `home`'s thread once all ran. `visit` may write
  // only to state of index i; done() sees all of it.
  void VisitOwners(Shard& home, std::vector<Target> targets,
                   std::function<void(Partition*, size_t)> visit, std::function<void()> done);
  // Runs `fn` on `shard`'s thread and waits for it (inline before Attach). False when it
  // could not run (the server is stopping). Never from a shard's thread.
  bool RunOnShard(int shard, const std::function<void()>& fn);

  // Hands an open partition to its owner (which it sets in part->shard).
  Status Place(const PartitionKey& key, std::unique_ptr<Partition> part);
  // Takes a partition back from its owner `shard`, running on_taken(partition) there
  // first; null when it is not there or the owner is stopping.
  std::unique_ptr<Partition> Take(const PartitionKey& key, int shard,
                                  const std::function<void(Partition&)>& on_taken);
  // Closes every partition's log and drops them all (the controlling thread, after the
  // server stopped); the first error.
  Status CloseAll();

 private:
  const MetadataPublisher* const publisher_;
  // Sized once (one before Attach, then one per loop) on the controlling thread before
  // the shard threads run.
  std::vector<std::unique_ptr<Shard>> shards_;
  // Set before the shard threads start; read by other threads too (the tiered uploader).
  std::atomic<bool> attached_{false};

  // The gate on posting to the shards' loops: posters count themselves in posting_,
  // StopWaking() closes it and waits for posting_ to drain.
  std::atomic<bool> waking_stopped_{false};
  std::atomic<int> posting_{0};
};

}  // namespace sluice::broker
