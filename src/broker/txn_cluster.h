// Transactions across a cluster's brokers (docs/design/0018-cluster.md, "txncluster";
// docs/design/0016-transactions.md, decision 3): the two seams of txn_markers.h as a
// cluster broker fills them.
//
// - ClusterTxnParticipants is the transaction coordinator's TxnParticipants (Kafka's
//   TransactionMarkerChannelManager): each partition's marker goes to the partition's
//   leader as the published MetadataSnapshot names it now — written here, on the owner
//   shard, when this broker leads it, otherwise sent as one WriteTxnMarkers (API 27) per
//   leader broker to its inter-broker address. A partition answers kNone once its leader
//   has the marker under its high watermark (acks=all). Any other answer (a leader that
//   moved, a broker unreachable, no leader now) is the coordinator's to retry: it keeps
//   the transaction in PrepareCommit/PrepareAbort and writes the partitions still missing
//   again, each time to the leader the snapshot names then.
// - ClusterTxnVerifier is the produce path's TxnVerifier (Kafka's
//   AddPartitionsToTxnManager, KIP-890 part 1): asked of this broker's coordinator when it
//   coordinates the transactional id, otherwise sent to the coordinator's broker as
//   AddPartitionsToTxn v4 with verify_only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "broker/inter_broker_sender.h"
#include "broker/metadata_snapshot.h"
#include "broker/shards.h"
#include "broker/txn_markers.h"

namespace sluice::broker {

// The broker that coordinates `transactional_id` in a cluster: the leader of its
// partition of __transaction_state, as FindCoordinator answers (handlers/groups.cc;
// 0018 decision 11, "coordmove"). -1: none now.
int32_t TxnCoordinatorNode(const MetadataSnapshot& meta, const std::string& transactional_id);

// Where another broker of `meta` takes inter-broker requests (its registered inter-broker
// address); false when it is not a live broker of the snapshot.
bool InterBrokerAddress(const MetadataSnapshot& meta, int32_t node, std::string* host,
                        int32_t* port);

// Thread-safe; `shards`, `channel` and `groups` must outlive it, and `channel` must be
// stopped before it goes (its callbacks come back here).
class ClusterTxnParticipants : public TxnParticipants {
 public:
  // `groups` completes the groups' offsets (the broker's own group coordinator).
  ClusterTxnParticipants(Shards* shards, InterBrokerChannel* channel, TxnParticipants* groups)
      : shards_(shards), channel_(channel), groups_(groups) {}

  // One error per partition: kNone (replicated on its leader), or the leader's error,
  // NOT_LEADER_OR_FOLLOWER when no broker leads it now, NETWORK_EXCEPTION when its
  // leader did not answer (or answered something broken). The crash point
  // `txn-partition-marker` is passed as each partition is done, as on one node.
  void WritePartitionMarkers(const TxnMarker& marker, std::vector<TopicPartition> partitions,
                             std::function<void(std::vector<kafka::ErrorCode>)> done) override;
  // One part per leader (this broker's partitions, each other broker's), and one for the
  // partitions answered here (unknown, no leader now).
  void WritePartitionMarkersInParts(const TxnMarker& marker, std::vector<TopicPartition> partitions,
                                    MarkerPart part) override;
  void CompleteGroupOffsets(const TxnMarker& marker, std::vector<std::string> groups,
                            std::function<void(std::vector<kafka::ErrorCode>)> done) override;

 private:
  // One transaction's partitions led by one broker, waiting for their answer.
  struct Queued {
    TxnMarker marker;
    std::vector<TopicPartition> partitions;
    std::function<void(std::vector<kafka::ErrorCode>)> done;  // one error per partition
  };
  // Kafka's drain: one WriteTxnMarkers under way per leader broker; the markers that
  // come meanwhile (other transactions) go together in the next one.
  struct Destination {
    bool in_flight = false;
    std::string host;  // the address given last
    int32_t port = 0;
    std::vector<Queued> queued;
  };
  void SendToLeader(int32_t leader, const std::string& host, int32_t port, Queued q);
  void SendBatch(int32_t leader, const std::string& host, int32_t port, std::vector<Queued> batch);

  Shards* const shards_;
  InterBrokerChannel* const channel_;
  TxnParticipants* const groups_;
  std::mutex mu_;
  std::map<int32_t, Destination> destinations_;  // guarded by mu_
};

// Thread-safe; `shards`, `channel` and `local` must outlive it.
class ClusterTxnVerifier : public TxnVerifier {
 public:
  ClusterTxnVerifier(Shards* shards, InterBrokerChannel* channel, TxnVerifier* local)
      : shards_(shards), channel_(channel), local_(local) {}

  // The local coordinator's answer, or the remote one's; COORDINATOR_NOT_AVAILABLE
  // without a coordinator now, NETWORK_EXCEPTION when it did not answer (the produce
  // handler turns both into the retriable NOT_ENOUGH_REPLICAS).
  void Verify(std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
              std::vector<TopicPartition> partitions,
              std::function<void(std::vector<kafka::ErrorCode>)> done) override;

 private:
  Shards* const shards_;
  InterBrokerChannel* const channel_;
  TxnVerifier* const local_;
};

// What a cluster broker adds for transactions (Broker::Open makes it with --etcd): a
// channel for markers and one for verifications (so a marker waiting for replication
// never delays a produce's verification), and the two seams over them. Stop() (also
// in the destructor) ends both channels; what is in flight fails and is asked again.
struct ClusterTxnLinks {
  // `groups` completes group offsets; `local` is this broker's coordinator.
  // `security`: how the other brokers' inter-broker listener is spoken to (null: plaintext).
  ClusterTxnLinks(int32_t node_id, Shards* shards, TxnParticipants* groups,
                  std::shared_ptr<const InterBrokerSecurity> security = nullptr);
  ~ClusterTxnLinks() { Stop(); }
  void SetLocalCoordinator(TxnVerifier* local);
  void Stop();

  InterBrokerChannel markers;
  InterBrokerChannel verifications;
  ClusterTxnParticipants participants;
  std::unique_ptr<ClusterTxnVerifier> verifier;  // once the local coordinator exists
 private:
  Shards* const shards_;
};

// The topics of `partitions` in request order (one entry per topic, its partitions in the
// order given): the shape of WriteTxnMarkers' and AddPartitionsToTxn's topic lists.
std::vector<kafka::TxnTopic> GroupByTopic(const std::vector<TopicPartition>& partitions);

// Each of `partitions`' error in an answer's topic lists; `missing` for one it lacks.
std::vector<kafka::ErrorCode> ErrorsFor(const std::vector<TopicPartition>& partitions,
                                        const std::vector<kafka::TxnTopicErrors>& topics,
                                        kafka::ErrorCode missing);

}  // namespace sluice::broker
