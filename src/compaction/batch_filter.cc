// Reading and rewriting the records of stored batches for the cleaner (see batch_filter.h).
#include "compaction/batch_filter.h"

#include <fmt/format.h>

#include "base/crc32c.h"
#include "kafka/protocol/records.h"

namespace sluice::compaction {
namespace {

using storage::BatchHeader;
using storage::kBatchHeaderSize;

class Cursor {
 public:
  Cursor(const uint8_t* p, const uint8_t* end) : p_(p), end_(end) {}
  bool Varlong(int64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return false;
      uint8_t b = *p_++;
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) {
        *out = static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
        return true;
      }
    }
    return false;
  }
  bool Varint(int32_t* out) {
    int64_t v;
    if (!Varlong(&v) || v < INT32_MIN || v > INT32_MAX) return false;
    *out = static_cast<int32_t>(v);
    return true;
  }
  bool Skip(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    p_ += n;
    return true;
  }
  const uint8_t* pos() const { return p_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

void PutVarlong(std::vector<uint8_t>* out, int64_t v) {
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  while (z >= 0x80) {
    out->push_back(static_cast<uint8_t>(z | 0x80));
    z >>= 7;
  }
  out->push_back(static_cast<uint8_t>(z));
}

void Seal(std::vector<uint8_t>* out, size_t at) {
  uint8_t* b = out->data() + at;
  size_t size = out->size() - at;
  storage::StoreBE32(b + storage::kBatchLengthOffset,
                     static_cast<uint32_t>(size - storage::kBatchLogOverhead));
  storage::StoreBE32(b + storage::kCrcOffset, crc32c::Value(b + storage::kAttributesOffset,
                                                            size - storage::kAttributesOffset));
}

}  // namespace

std::optional<int64_t> DeleteHorizon(const BatchHeader& h) {
  if ((static_cast<uint16_t>(h.attributes) & kAttrDeleteHorizon) == 0) return std::nullopt;
  return h.base_timestamp;
}

Status ReadRecords(std::span<const uint8_t> batch, size_t max_decompressed,
                   std::vector<uint8_t>* scratch, std::vector<RawRecord>* out) {
  out->clear();
  if (batch.size() < kBatchHeaderSize) return InvalidArgumentError("batch shorter than a header");
  BatchHeader h = storage::ParseBatchHeader(batch);
  if (h.total_size() != batch.size() || h.magic != 2) {
    return InvalidArgumentError("batch at offset {}: bad length or magic", h.base_offset);
  }
  if (h.records_count < 0) {
    return InvalidArgumentError("batch at offset {}: negative record count", h.base_offset);
  }
  ASSIGN_OR_RETURN(kafka::Compression codec, kafka::CompressionFromAttributes(h.attributes));
  std::span<const uint8_t> section = batch.subspan(kBatchHeaderSize);
  if (codec != kafka::Compression::kNone) {
    ASSIGN_OR_RETURN(*scratch, kafka::Decompress(codec, section, max_decompressed));
    section = *scratch;
  }
  Cursor c(section.data(), section.data() + section.size());
  out->reserve(static_cast<size_t>(std::min<int32_t>(h.records_count, 1 << 16)));
  for (int32_t i = 0; i < h.records_count; ++i) {
    auto bad = [&](std::string_view what) {
      return InvalidArgumentError("batch at offset {}, record {}: {}", h.base_offset, i, what);
    };
    const uint8_t* start = c.pos();
    int64_t len;
    if (!c.Varlong(&len) || len < 0 || static_cast<uint64_t>(len) > c.left())
      return bad("bad record length");
    const uint8_t* body_end = c.pos() + len;
    Cursor r(c.pos(), body_end);
    RawRecord rec;
    int32_t key_len, value_len;
    if (!r.Skip(1)) return bad("truncated attributes");
    rec.attributes = static_cast<int8_t>(*(r.pos() - 1));
    if (!r.Varlong(&rec.timestamp_delta) || !r.Varint(&rec.offset_delta))
      return bad("bad timestamp or offset delta");
    rec.fields_after_offset = std::span<const uint8_t>(r.pos(), body_end);
    if (!r.Varint(&key_len) || key_len < -1) return bad("bad key length");
    if (key_len >= 0) {
      rec.key = std::span<const uint8_t>(r.pos(), static_cast<size_t>(key_len));
      if (!r.Skip(static_cast<size_t>(key_len))) return bad("key runs past the record");
    }
    if (!r.Varint(&value_len) || value_len < -1) return bad("bad value length");
    rec.null_value = value_len < 0;
    if (value_len > 0 && !r.Skip(static_cast<size_t>(value_len)))
      return bad("value runs past the record");
    rec.bytes = std::span<const uint8_t>(start, body_end);
    out->push_back(rec);
    c.Skip(static_cast<size_t>(len));
  }
  if (c.left() != 0) {
    return InvalidArgumentError("batch at offset {}: {} bytes after the last record", h.base_offset,
                                c.left());
  }
  return Status::OK();
}

ControlType ReadControlType(std::span<const uint8_t> batch) {
  std::vector<uint8_t> scratch;
  std::vector<RawRecord> records;
  if (!ReadRecords(batch, 1 << 20, &scratch, &records).ok() || records.empty() || !records[0].key ||
      records[0].key->size() < 4) {
    return ControlType::kUnknown;
  }
  int16_t type = static_cast<int16_t>(storage::LoadBE16(records[0].key->data() + 2));
  if (type == 0) return ControlType::kAbort;
  if (type == 1) return ControlType::kCommit;
  return ControlType::kUnknown;
}

Status RebuildBatch(std::span<const uint8_t> original, std::span<const RawRecord* const> kept,
                    std::optional<int64_t> horizon_ms, std::vector<uint8_t>* out) {
  BatchHeader h = storage::ParseBatchHeader(original);
  ASSIGN_OR_RETURN(kafka::Compression codec, kafka::CompressionFromAttributes(h.attributes));
  int64_t base_ts = horizon_ms.value_or(h.base_timestamp);
  std::vector<uint8_t> plain;
  for (const RawRecord* r : kept) {
    if (!horizon_ms) {
      plain.insert(plain.end(), r->bytes.begin(), r->bytes.end());
      continue;
    }
    std::vector<uint8_t> body;
    body.push_back(static_cast<uint8_t>(r->attributes));
    PutVarlong(&body, h.base_timestamp + r->timestamp_delta - base_ts);
    PutVarlong(&body, r->offset_delta);
    body.insert(body.end(), r->fields_after_offset.begin(), r->fields_after_offset.end());
    PutVarlong(&plain, static_cast<int64_t>(body.size()));
    plain.insert(plain.end(), body.begin(), body.end());
  }
  std::vector<uint8_t> compressed;
  std::span<const uint8_t> payload = plain;
  if (codec != kafka::Compression::kNone) {
    ASSIGN_OR_RETURN(compressed, kafka::Compress(codec, plain));
    payload = compressed;
  }
  size_t at = out->size();
  out->insert(out->end(), original.begin(), original.begin() + kBatchHeaderSize);
  out->insert(out->end(), payload.begin(), payload.end());
  uint8_t* b = out->data() + at;
  uint16_t attrs = static_cast<uint16_t>(h.attributes);
  if (horizon_ms) {
    attrs |= kAttrDeleteHorizon;
    storage::StoreBE64(b + storage::kBaseTimestampOffset, static_cast<uint64_t>(base_ts));
  }
  storage::StoreBE16(b + storage::kAttributesOffset, attrs);
  storage::StoreBE32(b + storage::kRecordsCountOffset, static_cast<uint32_t>(kept.size()));
  Seal(out, at);
  return Status::OK();
}

void EmptyBatch(std::span<const uint8_t> original, std::vector<uint8_t>* out) {
  BatchHeader h = storage::ParseBatchHeader(original);
  size_t at = out->size();
  out->insert(out->end(), original.begin(), original.begin() + kBatchHeaderSize);
  uint8_t* b = out->data() + at;
  uint16_t attrs =
      static_cast<uint16_t>(h.attributes) & static_cast<uint16_t>(~storage::kAttrCompressionMask);
  storage::StoreBE16(b + storage::kAttributesOffset, attrs);
  storage::StoreBE32(b + storage::kRecordsCountOffset, 0);
  Seal(out, at);
}

Result<bool> HasNullKey(std::span<const uint8_t> batch, size_t max_decompressed) {
  if (batch.size() >= kBatchHeaderSize) {
    BatchHeader h = storage::ParseBatchHeader(batch);
    if (static_cast<uint16_t>(h.attributes) & storage::kAttrControl) return false;
  }
  std::vector<uint8_t> scratch;
  std::vector<RawRecord> records;
  RETURN_IF_ERROR(ReadRecords(batch, max_decompressed, &scratch, &records));
  for (const RawRecord& r : records) {
    if (!r.key) return true;
  }
  return false;
}

}  // namespace sluice::compaction
