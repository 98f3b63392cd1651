// Fuzz target for the cleaner's batch rewriting (compaction/batch_filter.h): stored batches
// read raw, rebuilt with the records kept (with and without a delete horizon), emptied,
// and checked for null keys. Whatever ReadRecords accepts must come back out of
// RebuildBatch as a batch the protocol's own decoder reads, with the same records.
// Input: the records corpus (fuzz/seeds.py): the first byte is a mode the target ignores
// (bit 0 set: fix the length field and CRC up first), the rest a batch.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "base/crc32c.h"
#include "compaction/batch_filter.h"
#include "kafka/protocol/records.h"
#include "storage/batch_header.h"

using namespace sluice;

namespace {

constexpr size_t kMaxDecompressed = 1 << 20;

void Check(bool cond) {
  if (!cond) std::abort();
}

int32_t Count(std::span<const uint8_t> batch) {
  int32_t n = 0;
  Status st = kafka::ForEachRecord(batch, kMaxDecompressed, [&](const kafka::Record&) { ++n; });
  Check(st.ok());
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::vector<uint8_t> batch(data + 1, data + size);
  if ((data[0] & 1) && batch.size() >= storage::kBatchHeaderSize) {
    storage::StoreBE32(batch.data() + storage::kBatchLengthOffset,
                       static_cast<uint32_t>(batch.size() - storage::kBatchLogOverhead));
  }
  (void)compaction::HasNullKey(batch, kMaxDecompressed);
  (void)compaction::ReadControlType(batch);
  std::vector<uint8_t> scratch;
  std::vector<compaction::RawRecord> records;
  if (!compaction::ReadRecords(batch, kMaxDecompressed, &scratch, &records).ok()) return 0;
  std::vector<const compaction::RawRecord*> all, every_other;
  for (size_t i = 0; i < records.size(); ++i) {
    all.push_back(&records[i]);
    if (i % 2 == 0) every_other.push_back(&records[i]);
  }
  for (const auto* kept : {&all, &every_other}) {
    for (bool horizon : {false, true}) {
      std::vector<uint8_t> out;
      Status st = compaction::RebuildBatch(
          batch, *kept, horizon ? std::optional<int64_t>(1'800'000'000'000) : std::nullopt, &out);
      if (!st.ok()) continue;  // a codec the build cannot write back
      Check(storage::CrcMatches(out));
      Check(Count(out) == static_cast<int32_t>(kept->size()));
    }
  }
  std::vector<uint8_t> empty;
  compaction::EmptyBatch(batch, &empty);
  Check(storage::CrcMatches(empty) && Count(empty) == 0);
  return 0;
}
