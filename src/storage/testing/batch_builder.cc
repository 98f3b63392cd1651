#include "storage/testing/batch_builder.h"

#include <algorithm>

#include "base/crc32c.h"
#include "storage/batch_header.h"

namespace sluice::storage::testing {
namespace {

void PutVarlong(std::vector<uint8_t>& out, int64_t v) {
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  while (z >= 0x80) {
    out.push_back(static_cast<uint8_t>(z | 0x80));
    z >>= 7;
  }
  out.push_back(static_cast<uint8_t>(z));
}

void PutBytes(std::vector<uint8_t>& out, const std::string& s, bool null_if_empty) {
  if (s.empty() && null_if_empty) {
    PutVarlong(out, -1);
    return;
  }
  PutVarlong(out, static_cast<int64_t>(s.size()));
  out.insert(out.end(), s.begin(), s.end());
}

}  // namespace

std::vector<uint8_t> BuildBatch(const BatchSpec& spec) {
  std::vector<uint8_t> out(kBatchHeaderSize, 0);
  int64_t max_delta = 0;
  std::vector<uint8_t> rec;
  for (size_t i = 0; i < spec.records.size(); ++i) {
    const TestRecord& r = spec.records[i];
    rec.clear();
    rec.push_back(0);  // attributes
    PutVarlong(rec, r.timestamp_delta);
    PutVarlong(rec, static_cast<int64_t>(i));  // offset delta
    PutBytes(rec, r.key, true);
    PutBytes(rec, r.value, false);
    PutVarlong(rec, 0);  // headers
    PutVarlong(out, static_cast<int64_t>(rec.size()));
    out.insert(out.end(), rec.begin(), rec.end());
    max_delta = std::max(max_delta, r.timestamp_delta);
  }
  uint8_t* h = out.data();
  StoreBE64(h, 0);
  StoreBE32(h + kBatchLengthOffset, static_cast<uint32_t>(out.size() - kBatchLogOverhead));
  StoreBE32(h + kLeaderEpochOffset, 0);
  h[kMagicOffset] = 2;
  StoreBE16(h + kAttributesOffset, static_cast<uint16_t>(spec.attributes));
  StoreBE32(h + kLastOffsetDeltaOffset, static_cast<uint32_t>(spec.records.size() - 1));
  StoreBE64(h + kBaseTimestampOffset, static_cast<uint64_t>(spec.base_timestamp));
  StoreBE64(h + kMaxTimestampOffset, static_cast<uint64_t>(spec.base_timestamp + max_delta));
  StoreBE64(h + 43, static_cast<uint64_t>(spec.producer_id));
  StoreBE16(h + 51, static_cast<uint16_t>(spec.producer_epoch));
  StoreBE32(h + 53, static_cast<uint32_t>(spec.base_sequence));
  StoreBE32(h + kRecordsCountOffset, static_cast<uint32_t>(spec.records.size()));
  StoreBE32(h + kCrcOffset, crc32c::Value(h + kAttributesOffset, out.size() - kAttributesOffset));
  return out;
}

std::vector<uint8_t> MakeBatch(int count, size_t value_bytes, int64_t base_timestamp,
                               uint64_t seed) {
  BatchSpec spec;
  spec.base_timestamp = base_timestamp;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < count; ++i) {
    TestRecord r;
    r.value.resize(value_bytes);
    for (char& c : r.value) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      c = static_cast<char>('a' + x % 26);
    }
    r.timestamp_delta = i;
    spec.records.push_back(std::move(r));
  }
  return BuildBatch(spec);
}

std::vector<uint8_t> EmptiedBatch(const std::vector<uint8_t>& batch) {
  std::vector<uint8_t> out(batch.begin(), batch.begin() + kBatchHeaderSize);
  auto store32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) out[at + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
  };
  store32(kBatchLengthOffset, static_cast<uint32_t>(kBatchHeaderSize - kBatchLogOverhead));
  store32(kRecordsCountOffset, 0);
  store32(kCrcOffset, crc32c::Value(std::span<const uint8_t>(out).subspan(kAttributesOffset)));
  return out;
}

}  // namespace sluice::storage::testing
