// ReplicaFetcher: a follower broker's fetcher from one leader broker (Kafka's
// ReplicaFetcherThread; docs/design/0018-cluster.md, decision 5). Its own thread sends
// Fetch v15 with the replica state over a plain TCP connection to the leader's
// inter-broker address (sluice's own codec), appends what comes back on each
// partition's owner shard with the leader's offsets and epochs (AppendReplica), and
// fetches on only from what is synced under the durable flush policy: the leader takes
// fetch_offset as the follower's log end. A diverging epoch in the answer truncates the
// local log on its owner; the next fetch asks again.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "broker/inter_broker_connection.h"
#include "broker/partition.h"
#include "broker/tier_uploader.h"
#include "kafka/protocol/requests.h"
#include "storage/batch_header.h"

namespace sluice::broker {

class ReplicaManager;

namespace replica {
// Splits the records of a fetch answer into whole batches (by their length fields; the
// CRC and the rest are checked by the append). A partial last batch is left out, as Kafka
// leaves it for the next fetch; a length shorter than a batch header is Corruption.
Status SplitFetchedBatches(std::span<const uint8_t> records,
                           std::vector<std::span<const uint8_t>>* batches);
// Checks a validated fetched batch's offsets against the follower's log end: a
// non-negative base, a last offset that does not overflow, and not straddling the end
// (a batch wholly below it is already here; one at or past it is appended). Corruption
// otherwise.
Status CheckFetchedBatch(const storage::BatchHeader& h, int64_t log_end);

// What a follower's owner shard did with one partition's fetch answer.
struct OwnerResult {
  bool stale = false;  // the partition is no longer a follower of the fetcher's epoch
  Status status;
  std::shared_ptr<std::promise<Status>> ack;  // to wait for before reporting `end`
  int64_t end = -1;
  int32_t last_epoch = -1;
};
}  // namespace replica

// Lifecycle: made by the ReplicaManager for a leader; its thread runs from the
// constructor to Stop() (or destruction). Add/Remove from any thread.
class ReplicaFetcher {
 public:
  // Where fetching a partition starts (read on its owner when it became a follower).
  struct Start {
    kafka::Uuid topic_id;
    int32_t leader_epoch = 0;
    uint64_t generation = 0;  // of the follower's ReplicaState
    int64_t fetch_offset = 0;
    int32_t last_fetched_epoch = -1;  // -1 for an empty log
  };

  ReplicaFetcher(ReplicaManager* manager, int32_t leader, std::string host, int32_t port);
  ~ReplicaFetcher();
  ReplicaFetcher(const ReplicaFetcher&) = delete;
  ReplicaFetcher& operator=(const ReplicaFetcher&) = delete;

  void Add(const PartitionKey& key, const Start& start);
  void Remove(const PartitionKey& key);
  bool empty();
  // Takes every partition off this fetcher with where it fetches from next (for a
  // fetcher re-pointed at the leader's new address).
  std::map<PartitionKey, Start> TakeAll();
  int32_t leader() const { return leader_; }
  const std::string& host() const { return host_; }
  int32_t port() const { return port_; }
  // Stops the thread (closing its connection) and joins it. Idempotent.
  void Stop();

 private:
  struct Fetched {
    Start state;
    int64_t delayed_until_ms = 0;  // after an error, not fetched until then
    int64_t added_ms = 0;          // when this role was given (Add)
  };

  void Run();
  bool Connect();
  void Disconnect();
  // One Fetch round trip and its handling; false on a connection failure.
  bool FetchOnce();
  // A partition answered without an error, and what its owner made of it.
  struct Answered {
    PartitionKey key;
    Start state;
    const kafka::FetchResponse::PartitionData* data = nullptr;
    replica::OwnerResult result;
  };
  // Applies the partitions' answers on their owners (one post per owner shard), waits
  // for their appends' acks and moves each fetch position.
  void HandlePartitions(std::vector<Answered>& work);
  // Empties the local log of a follower behind the leader's log start and fetches from
  // there on; with `state`, tiered storage's producers and epochs at that offset are taken.
  void ResetToLeaderStart(const PartitionKey& key, uint64_t generation, int64_t leader_start,
                          const TierUploader::StateAt* state = nullptr, int64_t whole_start = 0);
  // The leader's local log start (ListOffsets -4), for a follower whose offset only
  // tiered storage holds; an error leaves the connection unusable.
  Result<int64_t> LeaderLocalStart(const PartitionKey& key, const Fetched& f);
  // Not fetched again for replica.fetch.backoff.ms; for kShortBackoffMs when the leader
  // answered that it does not lead this epoch yet within that time of the role's start.
  void Delay(const PartitionKey& key, uint64_t generation,
             kafka::ErrorCode error = kafka::ErrorCode::kNone);
  void Update(const PartitionKey& key, uint64_t generation, int64_t fetch_offset,
              int32_t last_fetched_epoch);

  ReplicaManager* const manager_;
  const int32_t leader_;
  const std::string host_;
  const int32_t port_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<PartitionKey, Fetched> partitions_;  // guarded by mu_
  bool stopping_ = false;                       // guarded by mu_
  // The thread's; Stop() shuts it down from another thread.
  const std::unique_ptr<InterBrokerConnection> conn_;
  std::thread thread_;
};

}  // namespace sluice::broker
