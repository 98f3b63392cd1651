// BrokerTxnParticipants: the single-node TxnParticipants (broker/txn_markers.h) the
// transaction coordinator writes its markers through: each partition's marker by the
// partitions' writer (on the partition's owner shard), each group's through the group
// coordinator's CompleteTxn. docs/design/0016-transactions.md, decision 3.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "broker/txn_markers.h"

namespace sluice::broker {

// Writes `marker` to one partition; `done` once, on any thread, with kNone once durable.
using PartitionMarkerWriter = std::function<void(const TxnMarker& marker, const TopicPartition& tp,
                                                 std::function<void(kafka::ErrorCode)> done)>;

// Completes the producer's transactional offsets in one group (a commit or abort marker
// in the offsets log); `done` once, on any thread, with kNone once durable.
using GroupMarkerWriter = std::function<void(const TxnMarker& marker, const std::string& group,
                                             std::function<void(kafka::ErrorCode)> done)>;

// Gathers one answer per element, from any thread, and calls `done` once, after the last
// (on the thread that gave it). Shared by the participants of one node and of a cluster.
class TxnAnswerGather {
 public:
  TxnAnswerGather(size_t n, std::function<void(std::vector<kafka::ErrorCode>)> done)
      : errors_(n, kafka::ErrorCode::kNone), left_(n), done_(std::move(done)) {}
  void Set(size_t i, kafka::ErrorCode e);

 private:
  std::mutex mu_;
  std::vector<kafka::ErrorCode> errors_;  // guarded by mu_ until the last answer
  size_t left_;                           // guarded by mu_
  std::function<void(std::vector<kafka::ErrorCode>)> done_;
};

// Thread-safe: holds only the two writers, which must be thread-safe themselves.
class BrokerTxnParticipants : public TxnParticipants {
 public:
  BrokerTxnParticipants(PartitionMarkerWriter write_partition, GroupMarkerWriter write_group)
      : write_partition_(std::move(write_partition)), write_group_(std::move(write_group)) {}

  // One write per partition, all at once; `done` when every one has answered. The crash
  // point `txn-partition-marker` is passed as each partition's marker becomes durable,
  // so a crash test can stop the process between the partitions of one transaction.
  void WritePartitionMarkers(const TxnMarker& marker, std::vector<TopicPartition> partitions,
                             std::function<void(std::vector<kafka::ErrorCode>)> done) override;
  void CompleteGroupOffsets(const TxnMarker& marker, std::vector<std::string> groups,
                            std::function<void(std::vector<kafka::ErrorCode>)> done) override;

 private:
  PartitionMarkerWriter write_partition_;
  GroupMarkerWriter write_group_;
};

}  // namespace sluice::broker
