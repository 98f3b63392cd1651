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
#include "kafka/protocol/messages/txn.h"

namespace sluice::broker {

class GroupCoordinator;

// How long a replicated partition's marker waits for the high watermark to pass it
// (Kafka's request.timeout.ms for WriteTxnMarkers' acks=-1 append).
constexpr int32_t kMarkerReplicationTimeoutMs = 30000;

// Writes `marker` to every partition of `partitions` (any thread; the broker's shards
// must be attached, or the caller must own the provisional shard). `done` runs once, on
// an I/O thread, a shard's thread or the caller's, with one error per partition in order:
//   kNone                          the marker is durable there (replicated: the high
//                                  watermark passed it, as acks=all)
//   UNKNOWN_TOPIC_OR_PARTITION     no such topic or partition
//   NOT_LEADER_OR_FOLLOWER         the partition is not open here (being created or
//                                  deleted, or led by another broker), this broker
//                                  follows it, or the broker is stopping: retry
//   NOT_ENOUGH_REPLICAS            replicated, with fewer in-sync replicas than
//                                  min.insync.replicas (nothing written)
//   REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND
//                                  replicated, written but not (enough) replicated
//   INVALID_PRODUCER_EPOCH         the marker's producer epoch is older than the one the
//                                  partition knows
//   TRANSACTION_COORDINATOR_FENCED an older coordinator epoch than the last marker's
//   KAFKA_STORAGE_ERROR            the append or its sync failed
// Writing the same marker twice is harmless: the second finds no open transaction.
void WriteTxnMarkers(Shards& shards, const TxnMarker& marker,
                     std::vector<TopicPartition> partitions,
                     std::function<void(std::vector<kafka::ErrorCode>)> done);

// An answer to `req` with `error` for every partition, in the request's order.
kafka::WriteTxnMarkersResponse MarkersAnswerFor(const kafka::WriteTxnMarkersRequest& req,
                                                kafka::ErrorCode error);

// A WriteTxnMarkers request from a cluster's transaction coordinator (Kafka's API 27,
// handleWriteTxnMarkersRequest): every marker written as above, all at once; `done` runs
// once, on any thread, with one error per partition in the request's order. A marker for
// a partition of __consumer_offsets goes to `groups` (CompletePartitionTxn: the group
// coordinator writes it and makes the producer's pending offsets visible or drops them);
// without `groups` (closing) it is refused with NOT_COORDINATOR, never written raw.
void ServeWriteTxnMarkers(Shards& shards, const kafka::WriteTxnMarkersRequest& req,
                          std::function<void(kafka::WriteTxnMarkersResponse)> done,
                          GroupCoordinator* groups = nullptr);

}  // namespace sluice::broker
