// Partition: one open partition as its owner shard holds it — the log, the idempotent
// producers' state, the leader epochs, the fetches waiting for data
// (docs/design/0002-broker-plan.md, decision 2) and, when it is replicated, its replica
// state (docs/design/0018-cluster.md).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "broker/leader_epochs.h"
#include "broker/producer_state.h"
#include "broker/replica_state.h"
#include "kafka/protocol/wire.h"
#include "storage/log.h"

namespace sluice::broker {

using PartitionKey = std::pair<std::string, int32_t>;  // (topic, partition)

struct FetchWait;  // handlers/fetch.h

// Made and destroyed on the metadata controller's thread (or at Open/Close); between its
// installation and removal its owner shard's thread alone uses the producer state and
// the waits. The log is thread-safe; the epochs change after open only when replicated
// (on the owner's thread).
struct Partition {
  kafka::Uuid topic_id;
  int shard = 0;                                // its owner; set before it is installed
  std::unique_ptr<storage::PartitionLog> log;   // thread-safe
  ProducerStateTable producers;                 // owner's thread
  LeaderEpochCache epochs;                      // owner's thread (open, replication)
  std::vector<std::weak_ptr<FetchWait>> waits;  // owner's thread: fetches waiting on it
  // waits.size(), read by the log's I/O thread to skip posting a wake-up nobody needs.
  std::atomic<int> waiting{0};
  // Owner's thread: the role, ISR and high watermark of a replicated partition; null on
  // a single node (its high watermark is then the log's, below).
  std::unique_ptr<ReplicaState> replica;
  // Tiered storage (docs/design/0025): the offset after the last segment uploaded, -1 when
  // none (or the topic is not tiered); written by the uploader's thread, read by
  // ListOffsets (-5, latest tiered) and local retention (nothing above it is deleted).
  std::atomic<int64_t> tiered_next{-1};
  // The first offset tiered storage serves, -1 when none, kTieredUnknown while the uploader
  // has not listed the partition's remote segments yet (after a start, or with S3 away):
  // the log start clients see is the lower of it and the local log's. Written by the
  // uploader's thread.
  static constexpr int64_t kTieredUnknown = -2;
  std::atomic<int64_t> tiered_start{-1};
};

// A partition's log start as clients see it (design 0025, decision 6): the local log's, or
// below it where tiered storage serves older offsets (never below DeleteRecords' start).
// `unknown` while tiered storage's part is not listed yet (S3 away since the start) and
// offsets below the local start could be there. On the partition's owner.
struct LogStart {
  int64_t start = 0;
  int64_t local = 0;
  bool unknown = false;
};
inline LogStart LogStartOf(const Partition& part) {
  const int64_t local = part.log->start_offset();
  LogStart s{local, local, false};
  const int64_t tiered = part.tiered_start.load(std::memory_order_acquire);
  if (tiered == Partition::kTieredUnknown) {
    s.unknown = local > part.log->records_start_offset();
  } else if (tiered >= 0 && tiered < local) {
    s.start = std::max(tiered, part.log->records_start_offset());
  }
  return s;
}

// What consumers may read up to (decision 5 of the plan): the durable end under the
// durable flush policy, the written end otherwise.
inline int64_t HighWatermark(storage::FlushPolicy policy, const storage::PartitionLog& log) {
  return policy == storage::FlushPolicy::kDurable ? log.durable_end_offset()
                                                  : log.written_end_offset();
}

// What consumers of `part` may read up to, on its owner's thread: the replicated
// high watermark (0018 decision 6) or, on a single node, the log's as above.
inline int64_t HighWatermark(storage::FlushPolicy policy, const Partition& part) {
  if (part.replica != nullptr) [[unlikely]]
    return part.replica->high_watermark;
  return HighWatermark(policy, *part.log);
}

}  // namespace sluice::broker
