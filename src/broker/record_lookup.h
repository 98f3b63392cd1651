// The record of a batch that a ListOffsets by time answers with (Kafka's
// LogSegment.findOffsetByTimestamp, past the index): shared by the local lookup
// (handlers/list_offsets.cc) and the remote one (remote_reader.cc).
//
//   auto rec = FindRecordInBatch(batch, 0, [&](int64_t ts) { return ts >= target; });
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <utility>

namespace sluice::broker {

// The first record of `batch` (one whole stored batch) at or past offset `from` whose
// timestamp satisfies `pick`, as (offset, timestamp); nullopt when none does or the batch
// does not decode.
std::optional<std::pair<int64_t, int64_t>> FindRecordInBatch(
    std::span<const uint8_t> batch, int64_t from, const std::function<bool(int64_t)>& pick);

}  // namespace sluice::broker
