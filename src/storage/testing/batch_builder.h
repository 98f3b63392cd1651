// Builds valid Kafka record batches (v2, uncompressed) for tests and benchmarks, the way
// a producer would: records with varint framing, header fields, CRC32C.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::storage::testing {

struct TestRecord {
  std::string key;  // empty = null key
  std::string value;
  int64_t timestamp_delta = 0;
};

struct BatchSpec {
  std::vector<TestRecord> records;
  int64_t base_timestamp = 1'700'000'000'000;
  int16_t attributes = 0;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t base_sequence = -1;
};

// A valid batch with base offset 0 and leader epoch 0 (the log assigns both).
std::vector<uint8_t> BuildBatch(const BatchSpec& spec);

// `count` records with `value_bytes`-byte values derived from `seed`, timestamps
// base_timestamp + i.
std::vector<uint8_t> MakeBatch(int count, size_t value_bytes, int64_t base_timestamp,
                               uint64_t seed);

// `batch` with its records removed, as the cleaner keeps a producer's emptied last batch
// (docs/design/0017, decision 6): the header only, count 0, offsets and producer fields
// kept, the CRC recomputed. The log refuses such a batch on Append; a CleanedSegment
// takes it.
std::vector<uint8_t> EmptiedBatch(const std::vector<uint8_t>& batch);

}  // namespace sluice::storage::testing
