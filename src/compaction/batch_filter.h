// The record-level side of cleaning: reading the records of a stored batch (decompressed
// when needed), and writing a batch back with only the records kept, as Kafka's
// MemoryRecords.filterTo does:
//   - the header keeps its base offset, last offset delta (so a producer's last sequence
//     survives), producer id, epoch, base sequence, leader epoch, max timestamp and flags;
//   - kept records are copied byte for byte (their offset and timestamp deltas stay valid),
//     recompressed with the batch's codec;
//   - setting the delete horizon (KIP-534: attribute bit 6, the horizon in the base
//     timestamp) rewrites each record's timestamp delta so record timestamps do not move;
//   - a batch with no record left can be kept as an empty batch (no records, count 0), for
//     a producer whose last batch it is.
// Also the null-key check a compacted topic applies on produce (HasNullKey).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "storage/batch_header.h"

namespace sluice::compaction {

// Batch attribute bit 6: the base timestamp holds the delete horizon (KIP-534).
inline constexpr uint16_t kAttrDeleteHorizon = 0x40;

// Control record types (the key of a control batch's record: version, type).
enum class ControlType : int16_t { kAbort = 0, kCommit = 1, kUnknown = -1 };

// One record as it sits in the records section.
struct RawRecord {
  std::span<const uint8_t> bytes;  // the whole record, its length varint included
  int64_t timestamp_delta = 0;
  int32_t offset_delta = 0;
  std::optional<std::span<const uint8_t>> key;   // nullopt = null
  bool null_value = false;                       // a tombstone
  std::span<const uint8_t> fields_after_offset;  // key, value, headers: the rest
  int8_t attributes = 0;
};

// Reads a batch's records (decompressing into `scratch`, at most `max_decompressed`
// bytes) into `out`. InvalidArgument/Corruption naming the record for bad bytes.
Status ReadRecords(std::span<const uint8_t> batch, size_t max_decompressed,
                   std::vector<uint8_t>* scratch, std::vector<RawRecord>* out);

// The type of a control batch's marker (kUnknown when the record is not a marker).
ControlType ReadControlType(std::span<const uint8_t> batch);

// `original` with only `kept` (records read from it) in its records section, compressed
// with its codec. With `horizon_ms`, sets the delete horizon. Appends to `out`.
Status RebuildBatch(std::span<const uint8_t> original, std::span<const RawRecord* const> kept,
                    std::optional<int64_t> horizon_ms, std::vector<uint8_t>* out);

// `original`'s header with no records: count 0, uncompressed, the offsets kept. Appends
// to `out`.
void EmptyBatch(std::span<const uint8_t> original, std::vector<uint8_t>* out);

// True when the (whole, valid v2) batch holds a record with a null key: a compacted topic
// refuses it with INVALID_RECORD, as Kafka does. Control batches hold no keyed records and
// are false. Errors for records that do not decode.
Result<bool> HasNullKey(std::span<const uint8_t> batch, size_t max_decompressed = size_t{64} << 20);

// The delete horizon of a stored batch, when set.
std::optional<int64_t> DeleteHorizon(const storage::BatchHeader& h);

}  // namespace sluice::compaction
