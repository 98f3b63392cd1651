// The header of a Kafka record batch, format v2 (magic 2): parsing, validation and the
// in-place rewrites the log performs. The byte layout is in docs/formats/storage.md.
//
//   offset  size  field
//   0       8     base offset            (rewritten by the log, not covered by the CRC)
//   8       4     batch length           (bytes after this field)
//   12      4     partition leader epoch (rewritten by the log, not covered by the CRC)
//   16      1     magic = 2
//   17      4     crc: CRC32C of bytes 21..end
//   21      2     attributes
//   23      4     last offset delta
//   27      8     base timestamp
//   35      8     max timestamp
//   43      8     producer id
//   51      2     producer epoch
//   53      4     base sequence
//   57      4     records count
//   61            records
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"

namespace sluice::storage {

inline constexpr size_t kBatchHeaderSize = 61;
inline constexpr size_t kBatchLengthOffset = 8;
inline constexpr size_t kBatchLogOverhead = 12;  // base offset + length, before the length's span
inline constexpr size_t kLeaderEpochOffset = 12;
inline constexpr size_t kMagicOffset = 16;
inline constexpr size_t kCrcOffset = 17;
inline constexpr size_t kAttributesOffset = 21;
inline constexpr size_t kLastOffsetDeltaOffset = 23;
inline constexpr size_t kBaseTimestampOffset = 27;
inline constexpr size_t kMaxTimestampOffset = 35;
inline constexpr size_t kProducerIdOffset = 43;
inline constexpr size_t kProducerEpochOffset = 51;
inline constexpr size_t kBaseSequenceOffset = 53;
inline constexpr size_t kRecordsCountOffset = 57;

inline constexpr uint16_t kAttrCompressionMask = 0x07;
inline constexpr uint16_t kAttrTimestampTypeLogAppend = 0x08;
inline constexpr uint16_t kAttrTransactional = 0x10;
inline constexpr uint16_t kAttrControl = 0x20;

struct BatchHeader {
  int64_t base_offset;
  int32_t length;  // as stored: bytes after the length field
  int32_t leader_epoch;
  int8_t magic;
  uint32_t crc;
  int16_t attributes;
  int32_t last_offset_delta;
  int64_t base_timestamp;
  int64_t max_timestamp;
  int32_t records_count;

  uint64_t total_size() const { return kBatchLogOverhead + static_cast<uint32_t>(length); }
  int64_t last_offset() const { return base_offset + last_offset_delta; }
  int64_t next_offset() const { return last_offset() + 1; }
};

// Decodes the fixed header (producer fields: see the k*Offset constants). `bytes` must
// hold at least kBatchHeaderSize bytes.
BatchHeader ParseBatchHeader(std::span<const uint8_t> bytes);

// Checks a whole batch as it arrives to be appended: the buffer holds exactly one batch,
// the length agrees with the buffer, magic is 2, the CRC matches, the record count is
// 1 + last offset delta, and the batch is at most `max_bytes` long. The message says
// which rule failed and the values seen; the code tells the broker which Kafka error to
// answer: Corruption for a CRC mismatch (CORRUPT_MESSAGE), ResourceExhausted for a batch
// over max_bytes (MESSAGE_TOO_LARGE), InvalidArgument for the rest. `check_crc` false
// skips the CRC, for a caller that has checked it already.
Result<BatchHeader> ValidateBatch(std::span<const uint8_t> batch, uint32_t max_bytes,
                                  bool check_crc = true);

// Checks a header read back from a segment: plausible length (at least a header, at most
// `max_bytes`) and magic 2. Does not look at the CRC.
Status CheckStoredHeader(const BatchHeader& h, uint32_t max_bytes);

// True when the CRC stored in the batch matches its bytes (the whole batch in `batch`).
bool CrcMatches(std::span<const uint8_t> batch);

// Offset assignment: writes base offset and leader epoch (not covered by the CRC).
void AssignOffsets(std::span<uint8_t> batch, int64_t base_offset, int32_t leader_epoch);

// For LogAppendTime topics: marks the timestamp type as LogAppendTime, sets the max
// timestamp to `append_time_ms` and recomputes the CRC.
void SetLogAppendTime(std::span<uint8_t> batch, int64_t append_time_ms);

// Big-endian helpers for the fixed-width fields of Kafka formats.
inline uint16_t LoadBE16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline uint32_t LoadBE32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}
inline uint64_t LoadBE64(const uint8_t* p) { return uint64_t{LoadBE32(p)} << 32 | LoadBE32(p + 4); }
inline void StoreBE16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void StoreBE32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
inline void StoreBE64(uint8_t* p, uint64_t v) {
  StoreBE32(p, static_cast<uint32_t>(v >> 32));
  StoreBE32(p + 4, static_cast<uint32_t>(v));
}

}  // namespace sluice::storage
