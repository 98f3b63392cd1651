// The seam between the transaction coordinator and the partitions it writes to
// (docs/design/0016-transactions.md, decision 3). On one node both sides are in-process;
// a cluster puts WriteTxnMarkers and AddPartitionsToTxn (verify only) behind the same
// interfaces.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "broker/offset_log.h"  // TopicPartition
#include "kafka/protocol/api.h"

namespace sluice::broker {

// A commit or abort marker of one producer's transaction.
struct TxnMarker {
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  bool commit = false;
  int32_t coordinator_epoch = 0;
};

// What the transaction coordinator asks of the rest of the broker. Both methods may be
// called from any thread; `done` runs once, on any thread, with one error per element
// of the input in its order (kNone: the marker is durable there), and must not block.
class TxnParticipants {
 public:
  virtual ~TxnParticipants() = default;
  // Appends `marker` as a control batch to each partition, on its owner shard, and
  // closes the producer's open transaction there. A partition with no open transaction
  // of the producer still gets the marker (a rewrite after a restart is harmless).
  virtual void WritePartitionMarkers(const TxnMarker& marker,
                                     std::vector<TopicPartition> partitions,
                                     std::function<void(std::vector<kafka::ErrorCode>)> done) = 0;
  // The same, answered in parts as Kafka's TransactionMarkerChannelManager answers per
  // broker: `part` runs once for each group of partitions answered together (a cluster:
  // one leader's), on any thread, with their indexes into `partitions` and their errors;
  // every partition is in exactly one part. So one slow leader never holds back the
  // others' answers (and the coordinator's retries of them). The default answers every
  // partition in one part, through WritePartitionMarkers.
  using MarkerPart =
      std::function<void(std::vector<size_t> which, std::vector<kafka::ErrorCode> errors)>;
  virtual void WritePartitionMarkersInParts(const TxnMarker& marker,
                                            std::vector<TopicPartition> partitions,
                                            MarkerPart part) {
    const size_t n = partitions.size();
    WritePartitionMarkers(marker, std::move(partitions),
                          [n, part = std::move(part)](std::vector<kafka::ErrorCode> errors) {
                            std::vector<size_t> which(n);
                            for (size_t i = 0; i < n; ++i) which[i] = i;
                            errors.resize(n, kafka::ErrorCode::kUnknownServerError);
                            part(std::move(which), std::move(errors));
                          });
  }
  // Completes the producer's transactional offsets in each group: a commit makes them
  // visible to OffsetFetch, an abort drops them.
  virtual void CompleteGroupOffsets(const TxnMarker& marker, std::vector<std::string> groups,
                                    std::function<void(std::vector<kafka::ErrorCode>)> done) = 0;
};

// What the produce path asks of the transaction coordinator (KIP-890 part 1): whether
// each partition is part of the ongoing transaction of `transactional_id`, run by
// `producer_id` at `producer_epoch`. Any thread; `done` runs once on any thread with one
// error per partition: kNone, or the error the produce request answers for it
// (INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH / PRODUCER_FENCED,
// INVALID_PRODUCER_ID_MAPPING, COORDINATOR_NOT_AVAILABLE).
class TxnVerifier {
 public:
  virtual ~TxnVerifier() = default;
  virtual void Verify(std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
                      std::vector<TopicPartition> partitions,
                      std::function<void(std::vector<kafka::ErrorCode>)> done) = 0;
};

}  // namespace sluice::broker
