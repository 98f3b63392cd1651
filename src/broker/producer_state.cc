#include "broker/producer_state.h"

#include <fmt/format.h>

#include "storage/log.h"

namespace sluice::broker {

int32_t ProducerBatch::last_sequence() const {
  int64_t last = static_cast<int64_t>(base_sequence) + record_count - 1;
  if (last > INT32_MAX) last -= static_cast<int64_t>(INT32_MAX) + 1;
  return static_cast<int32_t>(last);
}

ProducerBatch ProducerBatch::FromHeader(std::span<const uint8_t> raw) {
  using namespace storage;
  ProducerBatch b;
  b.producer_id = static_cast<int64_t>(LoadBE64(raw.data() + kProducerIdOffset));
  b.producer_epoch = static_cast<int16_t>(LoadBE16(raw.data() + kProducerEpochOffset));
  b.base_sequence = static_cast<int32_t>(LoadBE32(raw.data() + kBaseSequenceOffset));
  b.record_count = static_cast<int32_t>(LoadBE32(raw.data() + kRecordsCountOffset));
  return b;
}

ProducerStateTable::Check ProducerStateTable::CheckBatch(const ProducerBatch& b) const {
  Check c;
  if (!b.idempotent()) return c;
  auto it = producers_.find(b.producer_id);
  if (it == producers_.end()) {
    if (b.base_sequence != 0) {
      c.verdict = Verdict::kUnknownProducer;
      c.message =
          fmt::format("producer {} has no state here; its first batch must have sequence 0, not {}",
                      b.producer_id, b.base_sequence);
    }
    return c;
  }
  const Producer& p = it->second;
  if (b.producer_epoch < p.epoch) {
    c.verdict = Verdict::kFenced;
    c.message = fmt::format("producer {} epoch {} is older than the current epoch {}",
                            b.producer_id, b.producer_epoch, p.epoch);
    return c;
  }
  if (b.producer_epoch > p.epoch) {
    if (b.base_sequence != 0) {
      c.verdict = Verdict::kOutOfOrder;
      c.message = fmt::format("producer {} new epoch {} must start at sequence 0, not {}",
                              b.producer_id, b.producer_epoch, b.base_sequence);
    }
    return c;
  }
  for (const Entry& e : p.batches) {
    if (e.first_seq == b.base_sequence && e.last_seq == b.last_sequence()) {
      c.verdict = Verdict::kDuplicate;
      c.first_offset = e.first_offset;
      c.last_offset = e.last_offset;
      return c;
    }
  }
  int32_t expected = p.batches.empty()                        ? 0
                     : p.batches.back().last_seq == INT32_MAX ? 0
                                                              : p.batches.back().last_seq + 1;
  if (b.base_sequence != expected) {
    c.verdict = Verdict::kOutOfOrder;
    c.message = fmt::format("producer {} epoch {}: expected sequence {}, got {}", b.producer_id,
                            b.producer_epoch, expected, b.base_sequence);
  }
  return c;
}

void ProducerStateTable::OnAppended(const ProducerBatch& b, int64_t first_offset) {
  if (!b.idempotent()) return;
  Producer& p = producers_[b.producer_id];
  if (b.producer_epoch != p.epoch) {
    p.epoch = b.producer_epoch;
    p.batches.clear();
  }
  p.batches.push_back(
      Entry{b.base_sequence, b.last_sequence(), first_offset, first_offset + b.record_count - 1});
  if (p.batches.size() > kKeep) p.batches.pop_front();
}

Status ProducerStateTable::Rebuild(storage::PartitionLog& log) {
  producers_.clear();
  return log.ForEachBatchHeader(
      0, [this](const storage::BatchHeader& h, std::span<const uint8_t> raw) {
        ProducerBatch b = ProducerBatch::FromHeader(raw);
        // The offsets the batch took (the log checked count = last offset delta + 1).
        b.record_count = h.last_offset_delta + 1;
        OnAppended(b, h.base_offset);
        return true;
      });
}

}  // namespace sluice::broker
