// The partition half of TxnParticipants::WritePartitionMarkers (broker/txn_markers.h,
// docs/design/0016-transactions.md, "Partitions"): on each partition's owner shard, a
// commit or abort marker is appended as a control batch, durably, and closes the
// producer's transaction there; an abort adds its entry to the aborted-transaction index
// of the segment taking the marker. Fetches waiting under read_committed are woken by the
// log's own wake-up once the marker is readable (the LSO moves with it).
#pragma once

#include <functional>
#include <vector>

#include "broker/offset_log.h"  // TopicPartition
#include "broker/shards.h"
#include "broker/txn_markers.h"
#include "kafka/protocol/api.h"

namespace sluice::broker {

// Writes `marker` to every partition of `partitions` (any thread; the broker's shards
// must be attached, or the caller must own the provisional shard). `done` runs once, on
// an I/O thread, a shard's thread or the caller's, with one error per partition in order:
//   kNone                          the marker is durable there
//   UNKNOWN_TOPIC_OR_PARTITION     no such topic or partition
//   NOT_LEADER_OR_FOLLOWER         the partition is not open here (being created or
//                                  deleted) or the broker is stopping: retry
//   INVALID_PRODUCER_EPOCH         the marker's producer epoch is older than the one the
//                                  partition knows
//   TRANSACTION_COORDINATOR_FENCED an older coordinator epoch than the last marker's
//   KAFKA_STORAGE_ERROR            the append or its sync failed
// Writing the same marker twice is harmless: the second finds no open transaction.
void WriteTxnMarkers(Shards& shards, const TxnMarker& marker,
                     std::vector<TopicPartition> partitions,
                     std::function<void(std::vector<kafka::ErrorCode>)> done);

}  // namespace sluice::broker
