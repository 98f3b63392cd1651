#include "storage/batch_header.h"

#include "base/crc32c.h"

namespace sluice::storage {

BatchHeader ParseBatchHeader(std::span<const uint8_t> bytes) {
  const uint8_t* p = bytes.data();
  BatchHeader h;
  h.base_offset = static_cast<int64_t>(LoadBE64(p));
  h.length = static_cast<int32_t>(LoadBE32(p + kBatchLengthOffset));
  h.leader_epoch = static_cast<int32_t>(LoadBE32(p + kLeaderEpochOffset));
  h.magic = static_cast<int8_t>(p[kMagicOffset]);
  h.crc = LoadBE32(p + kCrcOffset);
  h.attributes = static_cast<int16_t>(LoadBE16(p + kAttributesOffset));
  h.last_offset_delta = static_cast<int32_t>(LoadBE32(p + kLastOffsetDeltaOffset));
  h.base_timestamp = static_cast<int64_t>(LoadBE64(p + kBaseTimestampOffset));
  h.max_timestamp = static_cast<int64_t>(LoadBE64(p + kMaxTimestampOffset));
  h.records_count = static_cast<int32_t>(LoadBE32(p + kRecordsCountOffset));
  return h;
}

bool CrcMatches(std::span<const uint8_t> batch) {
  if (batch.size() < kBatchHeaderSize) return false;
  uint32_t stored = LoadBE32(batch.data() + kCrcOffset);
  return crc32c::Value(batch.data() + kAttributesOffset, batch.size() - kAttributesOffset) ==
         stored;
}

Status CheckStoredHeader(const BatchHeader& h, uint32_t max_bytes) {
  if (h.length < static_cast<int32_t>(kBatchHeaderSize - kBatchLogOverhead)) {
    return CorruptionError("batch length {} is shorter than a batch header", h.length);
  }
  if (static_cast<uint64_t>(h.length) + kBatchLogOverhead > max_bytes) {
    return CorruptionError("batch length {} exceeds the maximum {}", h.length, max_bytes);
  }
  if (h.magic != 2) return CorruptionError("batch magic {} is not 2", h.magic);
  if (h.last_offset_delta < 0) {
    return CorruptionError("batch last offset delta {} is negative", h.last_offset_delta);
  }
  return Status::OK();
}

Result<BatchHeader> ValidateBatch(std::span<const uint8_t> batch, uint32_t max_bytes,
                                  bool check_crc) {
  if (batch.size() < kBatchHeaderSize) {
    return InvalidArgumentError("batch of {} bytes is shorter than the {}-byte header",
                                batch.size(), kBatchHeaderSize);
  }
  BatchHeader h = ParseBatchHeader(batch);
  if (h.length < 0 || h.total_size() != batch.size()) {
    return InvalidArgumentError("batch length field {} does not match the {} bytes given", h.length,
                                batch.size());
  }
  if (batch.size() > max_bytes) {
    return ResourceExhaustedError("batch of {} bytes exceeds the maximum {}", batch.size(),
                                  max_bytes);
  }
  if (h.magic != 2) return InvalidArgumentError("batch magic {} is not 2", h.magic);
  if (check_crc && !CrcMatches(batch)) {
    return CorruptionError("batch CRC {:#010x} does not match its bytes", h.crc);
  }
  if (h.records_count < 1 || h.last_offset_delta != h.records_count - 1) {
    return InvalidArgumentError("batch record count {} does not match last offset delta {}",
                                h.records_count, h.last_offset_delta);
  }
  return h;
}

void AssignOffsets(std::span<uint8_t> batch, int64_t base_offset, int32_t leader_epoch) {
  StoreBE64(batch.data(), static_cast<uint64_t>(base_offset));
  StoreBE32(batch.data() + kLeaderEpochOffset, static_cast<uint32_t>(leader_epoch));
}

void SetLogAppendTime(std::span<uint8_t> batch, int64_t append_time_ms) {
  uint8_t* p = batch.data();
  uint16_t attrs = LoadBE16(p + kAttributesOffset);
  StoreBE16(p + kAttributesOffset, attrs | kAttrTimestampTypeLogAppend);
  StoreBE64(p + kMaxTimestampOffset, static_cast<uint64_t>(append_time_ms));
  StoreBE32(p + kCrcOffset, crc32c::Value(p + kAttributesOffset, batch.size() - kAttributesOffset));
}

}  // namespace sluice::storage
