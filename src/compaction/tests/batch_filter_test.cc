// Batch rewriting for the cleaner: records read raw, batches rebuilt with the kept records
// (every codec), delete horizons, empty batches, control types, the null-key check, and
// malformed records.
#include "compaction/batch_filter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kafka/protocol/records.h"

namespace sluice::compaction {
namespace {

using kafka::AsBytes;
using kafka::Compression;

std::vector<uint8_t> Batch(Compression codec, std::vector<std::pair<const char*, const char*>> kv,
                           int64_t pid = 42, bool control = false) {
  std::vector<kafka::RecordInput> records;
  for (size_t i = 0; i < kv.size(); ++i) {
    kafka::RecordInput r;
    if (kv[i].first) r.key = AsBytes(kv[i].first);
    if (kv[i].second) r.value = AsBytes(kv[i].second);
    r.timestamp_delta = static_cast<int64_t>(i) * 10;
    records.push_back(r);
  }
  kafka::BatchBuilderOptions o;
  o.compression = codec;
  o.base_offset = 100;
  o.partition_leader_epoch = 3;
  o.base_timestamp = 1'700'000'000'000;
  o.producer_id = pid;
  o.producer_epoch = 2;
  o.base_sequence = 17;
  o.control = control;
  o.transactional = control;
  return kafka::BuildBatch(o, records);
}

struct Decoded {
  int64_t offset;
  int64_t timestamp;
  std::optional<std::string> key, value;
};

std::vector<Decoded> Decode(std::span<const uint8_t> batch) {
  std::vector<Decoded> out;
  kafka::RecordReader reader;
  EXPECT_TRUE(reader.Open(batch, 1 << 20).ok());
  kafka::Record r;
  auto str = [](const std::optional<std::span<const uint8_t>>& v) -> std::optional<std::string> {
    if (!v) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(v->data()), v->size());
  };
  while (reader.Next(&r)) {
    out.push_back({reader.header().base_offset + r.offset_delta,
                   kafka::RecordTimestamp(reader.header(), r), str(r.key), str(r.value)});
  }
  EXPECT_TRUE(reader.status().ok()) << reader.status().ToString();
  return out;
}

class BatchFilterCodecTest : public ::testing::TestWithParam<Compression> {};

TEST_P(BatchFilterCodecTest, RebuildKeepsHeaderOffsetsAndCodec) {
  auto batch = Batch(GetParam(), {{"a", "1"}, {"b", "2"}, {"a", "3"}, {"c", nullptr}});
  std::vector<uint8_t> scratch;
  std::vector<RawRecord> records;
  ASSERT_TRUE(ReadRecords(batch, 1 << 20, &scratch, &records).ok());
  ASSERT_EQ(records.size(), 4u);
  EXPECT_TRUE(records[3].null_value);
  std::vector<const RawRecord*> kept{&records[1], &records[2]};
  std::vector<uint8_t> out;
  ASSERT_TRUE(RebuildBatch(batch, kept, std::nullopt, &out).ok());
  auto oh = storage::ParseBatchHeader(batch), nh = storage::ParseBatchHeader(out);
  EXPECT_TRUE(storage::CrcMatches(out));
  EXPECT_EQ(nh.total_size(), out.size());
  EXPECT_EQ(nh.base_offset, oh.base_offset);
  EXPECT_EQ(nh.last_offset_delta, oh.last_offset_delta);  // the producer's last sequence stays
  EXPECT_EQ(nh.leader_epoch, oh.leader_epoch);
  EXPECT_EQ(nh.attributes, oh.attributes);
  EXPECT_EQ(nh.base_timestamp, oh.base_timestamp);
  EXPECT_EQ(nh.max_timestamp, oh.max_timestamp);
  EXPECT_EQ(nh.records_count, 2);
  EXPECT_EQ(storage::LoadBE64(out.data() + storage::kProducerIdOffset), 42u);
  EXPECT_EQ(storage::LoadBE32(out.data() + storage::kBaseSequenceOffset), 17u);
  auto recs = Decode(out);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].offset, 101);
  EXPECT_EQ(recs[0].value, "2");
  EXPECT_EQ(recs[1].offset, 102);
  EXPECT_EQ(recs[1].timestamp, 1'700'000'000'020);
}

TEST_P(BatchFilterCodecTest, DeleteHorizonMovesTheBaseNotTheRecordTimestamps) {
  auto batch = Batch(GetParam(), {{"a", "1"}, {"c", nullptr}});
  std::vector<uint8_t> scratch;
  std::vector<RawRecord> records;
  ASSERT_TRUE(ReadRecords(batch, 1 << 20, &scratch, &records).ok());
  std::vector<const RawRecord*> kept{&records[0], &records[1]};
  std::vector<uint8_t> out;
  ASSERT_TRUE(RebuildBatch(batch, kept, int64_t{1'800'000'000'000}, &out).ok());
  auto nh = storage::ParseBatchHeader(out);
  EXPECT_EQ(DeleteHorizon(nh), 1'800'000'000'000);
  EXPECT_FALSE(DeleteHorizon(storage::ParseBatchHeader(batch)).has_value());
  auto recs = Decode(out);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].timestamp, 1'700'000'000'000);
  EXPECT_EQ(recs[1].timestamp, 1'700'000'000'010);
  EXPECT_EQ(recs[1].value, std::nullopt);
}

INSTANTIATE_TEST_SUITE_P(Codecs, BatchFilterCodecTest,
                         ::testing::Values(Compression::kNone, Compression::kGzip,
                                           Compression::kSnappy, Compression::kLz4,
                                           Compression::kZstd));

TEST(BatchFilterTest, EmptyBatchKeepsTheOffsetsAndProducer) {
  auto batch = Batch(Compression::kZstd, {{"a", "1"}, {"b", "2"}, {"c", "3"}});
  std::vector<uint8_t> out;
  EmptyBatch(batch, &out);
  auto h = storage::ParseBatchHeader(out);
  EXPECT_EQ(out.size(), storage::kBatchHeaderSize);
  EXPECT_TRUE(storage::CrcMatches(out));
  EXPECT_EQ(h.records_count, 0);
  EXPECT_EQ(h.last_offset(), 102);
  EXPECT_EQ(h.attributes & storage::kAttrCompressionMask, 0);
  EXPECT_EQ(storage::LoadBE32(out.data() + storage::kBaseSequenceOffset), 17u);
  EXPECT_TRUE(Decode(out).empty());
}

TEST(BatchFilterTest, ControlTypes) {
  const char abort_key[] = {0, 0, 0, 0};
  const char commit_key[] = {0, 0, 0, 1};
  auto make = [](const char* key) {
    kafka::RecordInput r;
    r.key = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(key), 4);
    r.value = AsBytes("\0\0\0\0\0\0");
    kafka::BatchBuilderOptions o;
    o.control = o.transactional = true;
    o.producer_id = 9;
    return kafka::BuildBatch(o, std::span<const kafka::RecordInput>(&r, 1));
  };
  EXPECT_EQ(ReadControlType(make(abort_key)), ControlType::kAbort);
  EXPECT_EQ(ReadControlType(make(commit_key)), ControlType::kCommit);
  EXPECT_EQ(ReadControlType(Batch(Compression::kNone, {{"ab", "x"}})), ControlType::kUnknown);
  EXPECT_EQ(HasNullKey(make(abort_key)).value(), false);
}

TEST(BatchFilterTest, NullKeysAreFound) {
  EXPECT_FALSE(HasNullKey(Batch(Compression::kNone, {{"a", "1"}, {"b", nullptr}})).value());
  EXPECT_TRUE(HasNullKey(Batch(Compression::kNone, {{"a", "1"}, {nullptr, "2"}})).value());
  EXPECT_TRUE(HasNullKey(Batch(Compression::kGzip, {{nullptr, "1"}})).value());
}

TEST(BatchFilterTest, MalformedRecordsAreErrors) {
  auto good = Batch(Compression::kNone, {{"key", "value"}, {"k2", "v2"}});
  std::vector<uint8_t> scratch;
  std::vector<RawRecord> records;
  // Truncated: the header's length no longer matches.
  auto cut = good;
  cut.resize(cut.size() - 3);
  EXPECT_FALSE(ReadRecords(cut, 1 << 20, &scratch, &records).ok());
  EXPECT_FALSE(
      ReadRecords(std::span<const uint8_t>(good).first(20), 1 << 20, &scratch, &records).ok());
  // More records declared than present.
  auto more = good;
  storage::StoreBE32(more.data() + storage::kRecordsCountOffset, 3);
  EXPECT_FALSE(ReadRecords(more, 1 << 20, &scratch, &records).ok());
  // Negative record count.
  auto neg = good;
  storage::StoreBE32(neg.data() + storage::kRecordsCountOffset, 0xffffffffu);
  EXPECT_FALSE(ReadRecords(neg, 1 << 20, &scratch, &records).ok());
  // Fewer declared: bytes left over.
  auto fewer = good;
  storage::StoreBE32(fewer.data() + storage::kRecordsCountOffset, 1);
  EXPECT_FALSE(ReadRecords(fewer, 1 << 20, &scratch, &records).ok());
  // A key length below -1, and one past the record (record 0's key length varint is at
  // byte 61 + length varint (1) + attributes (1) + ts delta (1) + offset delta (1)).
  for (uint8_t bad : {uint8_t{0x03}, uint8_t{0x7e}}) {  // zigzag: -2, 63
    auto k = good;
    k[storage::kBatchHeaderSize + 4] = bad;
    EXPECT_FALSE(ReadRecords(k, 1 << 20, &scratch, &records).ok()) << int{bad};
  }
  // Wrong magic, unknown codec.
  auto magic = good;
  magic[storage::kMagicOffset] = 1;
  EXPECT_FALSE(ReadRecords(magic, 1 << 20, &scratch, &records).ok());
  auto codec = good;
  codec[storage::kAttributesOffset + 1] |= 0x07;
  EXPECT_FALSE(ReadRecords(codec, 1 << 20, &scratch, &records).ok());
  // Oversized when decompressed.
  auto big = Batch(Compression::kGzip, {{"k", std::string(5000, 'x').c_str()}});
  EXPECT_FALSE(ReadRecords(big, 100, &scratch, &records).ok());
  EXPECT_FALSE(HasNullKey(cut).ok());
  ASSERT_TRUE(ReadRecords(good, 1 << 20, &scratch, &records).ok());
  EXPECT_EQ(records.size(), 2u);
}

}  // namespace
}  // namespace sluice::compaction
