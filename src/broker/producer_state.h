// ProducerState: what producers have written to one partition, so the broker can accept
// the next batch, acknowledge a retried duplicate with its original offsets, or reject it
// with Kafka's error; and which transactions are open there, for the last stable offset
// (docs/design/0016-transactions.md, "Partitions").
//
// Per producer id: the epoch, the last five batches' sequence ranges and offsets (Kafka
// keeps five: a producer has at most five requests in flight), the coordinator epoch of
// its last marker and the first offset of its open transaction. A transactional batch
// (attributes bit 4) opens the producer's transaction when none is open; a marker (a
// control batch written by the transaction coordinator) closes it. Rebuilt at open from
// the partition's batch headers.
//
// Threads: owned by the shard that owns the partition; not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "storage/batch_header.h"

namespace sluice::storage {
class PartitionLog;
struct AbortedTxn;
}  // namespace sluice::storage

namespace sluice::broker {

// The producer fields of a batch header.
struct ProducerBatch {
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t base_sequence = -1;
  int32_t record_count = 0;
  bool transactional = false;
  int64_t max_timestamp = -1;

  bool idempotent() const { return producer_id >= 0; }
  int32_t last_sequence() const;  // wraps past INT32_MAX to 0, as Kafka's sequences do

  static ProducerBatch FromHeader(std::span<const uint8_t> raw_header);
};

class ProducerStateTable {
 public:
  enum class Verdict {
    kAppend,           // new data: append it
    kDuplicate,        // a retry of a batch already written: answer with its offsets
    kOutOfOrder,       // OUT_OF_ORDER_SEQUENCE_NUMBER
    kFenced,           // INVALID_PRODUCER_EPOCH: an older epoch than the one seen
    kUnknownProducer,  // UNKNOWN_PRODUCER_ID: no state and a sequence that is not 0
    kInvalidTxnState,  // INVALID_TXN_STATE: a plain batch while the producer's transaction is open
    kEarlierRefused,   // a gap after a batch refused here: answer `refused_error` (see OnRefused)
  };
  struct Check {
    Verdict verdict = Verdict::kAppend;
    int64_t first_offset = -1;  // for kDuplicate: the original offsets
    int64_t last_offset = -1;
    int16_t refused_error = 0;       // for kEarlierRefused: the error the earlier batch got
    int32_t expected_sequence = -1;  // for kOutOfOrder and kUnknownProducer: the one due
    std::string message;             // for the errors: what was expected
  };

  // What to do with `batch` (always kAppend for batches without a producer id).
  Check CheckBatch(const ProducerBatch& batch) const;
  // A batch this table would have taken next (CheckBatch said kAppend) was refused with a
  // retriable `error_code` before it was written (NOT_LEADER_OR_FOLLOWER while this broker
  // was taking its leadership, NOT_ENOUGH_REPLICAS, ...). Until the producer writes here
  // again, a batch of its that skips the refused one is answered `error_code` too
  // (kEarlierRefused), not OUT_OF_ORDER_SEQUENCE_NUMBER: the client resends the refused
  // batch first and the rest after it. librdkafka answers an out-of-order sequence behind
  // a failed request by bumping its epoch, which renumbers every batch it holds for a
  // retry — also those a former leader wrote but could not commit, which are then
  // written twice (docs/design/0018-cluster.md, "dupfix").
  void OnRefused(const ProducerBatch& batch, int16_t error_code);
  // A leader's gap (a batch past the sequence due) from a producer that has written
  // nothing here since this leadership began at `epoch_start_offset`: its earlier batches
  // may still be on their way to the previous leader (a client sends to the new one
  // before the old one answered), so true — answer NOT_LEADER_OR_FOLLOWER and the client
  // resends in order — at most kMaxEarlyGaps times per producer and leader epoch; false
  // after, or once the producer wrote in this leadership (a gap is then its own).
  bool TakeEarlyGap(int64_t producer_id, int32_t leader_epoch, int64_t epoch_start_offset);
  static constexpr int kMaxEarlyGaps = 5;
  // Records a batch written at [first_offset, first_offset + record_count); a
  // transactional one opens the producer's transaction when none is open.
  void OnAppended(const ProducerBatch& batch, int64_t first_offset);

  // KIP-890 part 1. A transactional batch that would open a transaction here must have
  // been verified with the coordinator first: StartVerification returns 0 when the
  // producer's transaction is open here already (nothing to verify), else a token the
  // produce path keeps while it asks (one token for requests verifying meanwhile); Verified(token)
  // then says whether the append may open the transaction — false when a marker for the producer
  // came in between (the verified transaction has ended; the batch would open one the coordinator
  // does not know).
  uint64_t StartVerification(int64_t producer_id);
  bool Verified(int64_t producer_id, uint64_t token) const;

  // Markers. CheckMarker: kNone, INVALID_PRODUCER_EPOCH for an epoch older than the
  // producer's, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch.
  enum class MarkerVerdict { kOk, kFenced, kCoordinatorFenced };
  MarkerVerdict CheckMarker(int64_t producer_id, int16_t producer_epoch,
                            int32_t coordinator_epoch) const;
  // The first offset of the producer's open transaction, if one is open.
  std::optional<int64_t> OpenTxn(int64_t producer_id) const;
  // What the last stable offset is once `producer_id`'s transaction ends: the first
  // offset of the earliest other open transaction, or -1 when none is open (the LSO is
  // then the offset after the marker). For the aborted-transaction index entry.
  int64_t LastStableOffsetWithout(int64_t producer_id) const;
  // Applies a marker written at `offset`: closes the producer's transaction (which keeps
  // holding the LSO back until the high watermark passes the marker, as Kafka's
  // unreplicated transactions do), takes the marker's epochs, ends any verification.
  void OnMarker(int64_t producer_id, int16_t producer_epoch, int32_t coordinator_epoch,
                int64_t offset);

  // The last stable offset for a high watermark `hw`: the first offset of the earliest
  // transaction that is open, or decided by a marker at or past `hw`; `hw` when none.
  int64_t LastStableOffset(int64_t hw);

  // Forgets everything and replays the log's batch headers from its start; adds to the
  // log's aborted-transaction index any abort it lacks (a lost .txnindex). At open.
  // With a snapshot (Snapshot's text) taken at an offset in [the log's start, its end]:
  // its producers, then the batches from that offset (docs/design/0025, decision 8);
  // one that does not parse or is out of that range is not used (a full replay).
  Status Rebuild(storage::PartitionLog& log, std::string_view snapshot = {});
  // Applies one stored batch as Rebuild does: `raw` is its header and, for a marker, the
  // record after it (kControlPeekBytes); an abort's index entry goes to `aborted`.
  void Replay(const storage::BatchHeader& h, std::span<const uint8_t> raw,
              std::vector<storage::AbortedTxn>* aborted);

  // Kafka's producer-state snapshot (design 0025, decision 8): the producers as of `offset`
  // (everything below it applied, nothing at or past it), as JSON text. `complete`: built
  // from the log's first offset (or a complete snapshot), not from a later point.
  std::string Snapshot(int64_t offset, bool complete) const;
  struct SnapshotInfo {
    int64_t offset = -1;
    bool complete = false;
  };
  // Replaces the producers with a snapshot's. InvalidArgument naming what is wrong when it
  // does not parse or does not hold together; the table is then unchanged.
  Result<SnapshotInfo> LoadSnapshot(std::string_view text);

  // For DescribeProducers.
  struct ProducerView {
    int64_t producer_id = -1;
    int16_t epoch = -1;
    int32_t last_sequence = -1;
    int64_t last_timestamp = -1;
    int32_t coordinator_epoch = -1;
    int64_t txn_start_offset = -1;
  };
  std::vector<ProducerView> Describe() const;

  size_t producer_count() const { return producers_.size(); }
  size_t open_txn_count() const { return open_.size(); }

 private:
  struct Entry {
    int32_t first_seq, last_seq;
    int64_t first_offset, last_offset;
  };
  struct Producer {
    int16_t epoch = -1;
    std::deque<Entry> batches;  // oldest first, at most kKeep
    int32_t coordinator_epoch = -1;
    int64_t txn_first_offset = -1;  // -1: no open transaction
    int64_t last_timestamp = -1;
  };
  static constexpr size_t kKeep = 5;

  void TakeEpoch(Producer& p, int16_t epoch);
  // CheckBatch without the refusals.
  Check CheckSequence(const ProducerBatch& batch) const;

  std::unordered_map<int64_t, Producer> producers_;
  std::map<int64_t, int64_t> open_;     // first offset -> producer id
  std::map<int64_t, int64_t> decided_;  // first offset -> marker offset, until the HW passes
  std::unordered_map<int64_t, uint64_t> verifying_;  // producer id -> token
  struct Refused {
    int16_t epoch;
    int32_t base_sequence;
    int16_t error_code;
  };
  static constexpr size_t kMaxRefused = 4096;
  std::unordered_map<int64_t, Refused> refused_;  // producer id -> its refused next batch
  std::unordered_map<int64_t, std::pair<int32_t, int>> early_gaps_;  // -> (leader epoch, count)
  uint64_t next_token_ = 1;
};

}  // namespace sluice::broker
