// Fuzz target for the record-batch codec (kafka/protocol/records.h): decompression,
// record decoding and produce validation of outside bytes, with a small decompression
// limit so that no input can make it allocate much.
// Input: the first byte picks the mode, the second a codec (modes 2 and 3); the rest is
// the data.
//   0: data is a batch: ValidateRecords, then ForEachRecord
//   1: data is a batch whose length field and CRC are fixed up first, so that validation
//      gets past the header into the records
//   2: data is a compressed payload: Decompress; what decompresses must compress and
//      decompress back to itself
//   3: data is a records section: compressed with the codec and sealed into a batch
//      (count from its third byte), then validated and decoded
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "base/crc32c.h"
#include "kafka/protocol/records.h"
#include "storage/batch_header.h"

using namespace sluice;
using namespace sluice::kafka;

namespace {

constexpr size_t kMaxDecompressed = 1 << 20;

void Check(bool cond) {
  if (!cond) std::abort();
}

// Fixes the length field and CRC of a batch of at least a header's size.
void Seal(std::vector<uint8_t>* b) {
  storage::StoreBE32(b->data() + storage::kBatchLengthOffset,
                     static_cast<uint32_t>(b->size() - storage::kBatchLogOverhead));
  storage::StoreBE32(b->data() + storage::kCrcOffset,
                     crc32c::Value(b->data() + storage::kAttributesOffset,
                                   b->size() - storage::kAttributesOffset));
}

// Validates and decodes; reads every byte a record view points at (so ASan sees any view
// that strays outside its buffer).
void ValidateAndWalk(std::span<const uint8_t> batch) {
  ValidateOptions opts;
  opts.max_decompressed_bytes = kMaxDecompressed;
  opts.now_ms = 1'700'000'000'000;
  opts.max_timestamp_difference_ms = 3'600'000;
  BatchInfo info;
  Status valid = ValidateRecords(batch, opts, &info);
  (void)RecordsErrorCode(valid);

  volatile uint8_t sink = 0;
  auto touch = [&](std::span<const uint8_t> s) {
    for (uint8_t b : s) sink = sink ^ b;
  };
  int32_t count = 0;
  Status walked = ForEachRecord(batch, kMaxDecompressed, [&](const Record& r) {
    ++count;
    if (r.key) touch(*r.key);
    if (r.value) touch(*r.value);
    for (const RecordHeader& h : r.headers) {
      touch(std::span(reinterpret_cast<const uint8_t*>(h.key.data()), h.key.size()));
      if (h.value) touch(*h.value);
    }
  });
  // A batch that validates decodes, with the count its header declares.
  if (valid.ok()) {
    Check(walked.ok());
    Check(count == info.header.records_count);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0] % 4;
  const auto codec = static_cast<Compression>(data[1] % 5);
  std::span<const uint8_t> rest(data + 2, size - 2);
  if (mode == 0) {
    ValidateAndWalk(std::span(data + 1, size - 1));
  } else if (mode == 1) {
    std::vector<uint8_t> batch(data + 1, data + size);
    if (batch.size() >= storage::kBatchHeaderSize) Seal(&batch);
    ValidateAndWalk(batch);
  } else if (mode == 2) {
    Result<std::vector<uint8_t>> plain = Decompress(codec, rest, kMaxDecompressed);
    if (!plain.ok()) return 0;
    Check(plain->size() <= kMaxDecompressed);
    Result<std::vector<uint8_t>> packed = Compress(codec, *plain);
    Check(packed.ok());
    Result<std::vector<uint8_t>> again = Decompress(codec, *packed, kMaxDecompressed);
    Check(again.ok() && *again == *plain);
  } else {
    if (rest.empty()) return 0;
    const int32_t count = rest[0] % 8;
    Result<std::vector<uint8_t>> payload = Compress(codec, rest.subspan(1));
    Check(payload.ok());
    std::vector<uint8_t> batch = BuildBatch({}, {});
    batch.resize(storage::kBatchHeaderSize);
    storage::StoreBE16(batch.data() + storage::kAttributesOffset, static_cast<uint16_t>(codec));
    storage::StoreBE32(batch.data() + storage::kLastOffsetDeltaOffset,
                       static_cast<uint32_t>(count - 1));
    storage::StoreBE32(batch.data() + storage::kRecordsCountOffset, static_cast<uint32_t>(count));
    batch.insert(batch.end(), payload->begin(), payload->end());
    Seal(&batch);
    ValidateAndWalk(batch);
  }
  return 0;
}
