// Reading and rewriting the records of stored batches for the cleaner (see batch_filter.h).
#include "compaction/batch_filter.h"

#include <fmt/format.h>

#include "base/crc32c.h"
#include "kafka/protocol/records.h"
#include "kafka/protocol/wire.h"
#include "storage/txn_index.h"

namespace sluice::compaction {
namespace {

using storage::BatchHeader;
using storage::kBatchHeaderSize;

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
  size_t next = 0;  // where the next record starts in the section
  out->reserve(static_cast<size_t>(std::min<int32_t>(h.records_count, 1 << 16)));
  for (int32_t i = 0; i < h.records_count; ++i) {
    auto bad = [&](std::string_view what) {
      return InvalidArgumentError("batch at offset {}, record {}: {}", h.base_offset, i, what);
    };
    kafka::Reader c(section.subspan(next));
    int64_t len = c.Varlong("record length");
    if (!c.ok() || len < 0 || static_cast<uint64_t>(len) > c.remaining())
      return bad("bad record length");
    std::span<const uint8_t> body = section.subspan(next + c.position(), static_cast<size_t>(len));
    RawRecord rec;
    kafka::Reader r(body);
    rec.attributes = r.Int8("attributes");
    rec.timestamp_delta = r.Varlong("timestamp delta");
    rec.offset_delta = r.Varint("offset delta");
    if (!r.ok()) return bad("bad attributes, timestamp or offset delta");
    rec.fields_after_offset = body.subspan(r.position());
    // Key and value: a varint length (-1 = null), then the bytes.
    int32_t key_len = r.Varint("key length");
    if (!r.ok() || key_len < -1 || (key_len > 0 && static_cast<size_t>(key_len) > r.remaining()))
      return bad("bad key length");
    const size_t key_at = r.position();
    if (key_len >= 0) rec.key = body.subspan(key_at, static_cast<size_t>(key_len));
    kafka::Reader v(body.subspan(key_at + static_cast<size_t>(std::max(key_len, 0))));
    int32_t value_len = v.Varint("value length");
    if (!v.ok() || value_len < -1 ||
        (value_len > 0 && static_cast<size_t>(value_len) > v.remaining()))
      return bad("bad value length");
    rec.null_value = value_len < 0;
    size_t record_end = next + c.position() + body.size();
    rec.bytes = section.subspan(next, record_end - next);
    out->push_back(rec);
    next = record_end;
  }
  if (next != section.size()) {
    return InvalidArgumentError("batch at offset {}: {} bytes after the last record", h.base_offset,
                                section.size() - next);
  }
  return Status::OK();
}

ControlType ReadControlType(std::span<const uint8_t> batch) {
  // Markers are never compressed: the key is in the bytes after the header.
  if (batch.size() <= storage::kBatchHeaderSize) return ControlType::kUnknown;
  std::optional<int16_t> type = storage::ParseControlType(batch.subspan(storage::kBatchHeaderSize));
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
    kafka::Writer b(&body);
    b.Int8(r->attributes);
    b.Varlong(h.base_timestamp + r->timestamp_delta - base_ts);
    b.Varint(r->offset_delta);
    b.Raw(r->fields_after_offset);
    kafka::Writer(&plain).Varint(static_cast<int32_t>(body.size()));
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
