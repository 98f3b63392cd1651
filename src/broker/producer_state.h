// ProducerState: what an idempotent producer has written to one partition, so the broker
// can accept the next batch, acknowledge a retried duplicate with its original offsets,
// or reject it with Kafka's error. Per producer id: the epoch and the last five batches'
// sequence ranges and offsets (Kafka keeps five: a producer has at most five requests in
// flight). Rebuilt at open from the partition's batch headers.
//
// Threads: owned by the shard that owns the partition; not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "storage/batch_header.h"

namespace sluice::storage {
class PartitionLog;
}

namespace sluice::broker {

// The idempotence fields of a batch header.
struct ProducerBatch {
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t base_sequence = -1;
  int32_t record_count = 0;

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
  };
  struct Check {
    Verdict verdict = Verdict::kAppend;
    int64_t first_offset = -1;  // for kDuplicate: the original offsets
    int64_t last_offset = -1;
    std::string message;  // for the errors: what was expected
  };

  // What to do with `batch` (always kAppend for non-idempotent batches).
  Check CheckBatch(const ProducerBatch& batch) const;
  // Records a batch written at [first_offset, first_offset + record_count).
  void OnAppended(const ProducerBatch& batch, int64_t first_offset);
  // Forgets everything and replays the log's batch headers from its start.
  Status Rebuild(storage::PartitionLog& log);

  size_t producer_count() const { return producers_.size(); }

 private:
  struct Entry {
    int32_t first_seq, last_seq;
    int64_t first_offset, last_offset;
  };
  struct Producer {
    int16_t epoch = -1;
    std::deque<Entry> batches;  // oldest first, at most kKeep
  };
  static constexpr size_t kKeep = 5;

  std::unordered_map<int64_t, Producer> producers_;
};

}  // namespace sluice::broker
