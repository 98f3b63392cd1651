// The record a ListOffsets by time answers with. See record_lookup.h.
#include "broker/record_lookup.h"

#include "kafka/protocol/records.h"

namespace sluice::broker {

std::optional<std::pair<int64_t, int64_t>> FindRecordInBatch(
    std::span<const uint8_t> batch, int64_t from, const std::function<bool(int64_t)>& pick) {
  kafka::RecordReader reader;
  if (!reader.Open(batch, size_t{64} << 20).ok()) return std::nullopt;
  kafka::Record record;
  while (reader.Next(&record)) {
    const int64_t offset = reader.header().base_offset + record.offset_delta;
    const int64_t ts = kafka::RecordTimestamp(reader.header(), record);
    if (offset >= from && pick(ts)) return std::make_pair(offset, ts);
  }
  return std::nullopt;
}

}  // namespace sluice::broker
