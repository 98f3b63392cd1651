#include "storage/batch_header.h"

#include <gtest/gtest.h>

#include "base/crc32c.h"
#include "storage/testing/batch_builder.h"

namespace sluice::storage {
namespace {

std::vector<uint8_t> Batch(int count = 5) { return testing::MakeBatch(count, 100, 1000, 7); }

void Recrc(std::vector<uint8_t>& b) {
  StoreBE32(b.data() + kCrcOffset,
            crc32c::Value(b.data() + kAttributesOffset, b.size() - kAttributesOffset));
}

TEST(BatchHeaderTest, ValidBatchPasses) {
  auto b = Batch();
  auto h = ValidateBatch(b, 1 << 20);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->records_count, 5);
  EXPECT_EQ(h->last_offset_delta, 4);
  EXPECT_EQ(h->total_size(), b.size());
  EXPECT_EQ(h->base_timestamp, 1000);
  EXPECT_EQ(h->max_timestamp, 1004);
}

TEST(BatchHeaderTest, RejectsBufferShorterThanHeader) {
  auto b = Batch();
  auto h = ValidateBatch(std::span(b).first(60), 1 << 20);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("shorter than the 61-byte header"), std::string::npos);
}

TEST(BatchHeaderTest, RejectsTruncatedBatch) {
  auto b = Batch();
  auto h = ValidateBatch(std::span(b).first(b.size() - 1), 1 << 20);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("does not match"), std::string::npos);
}

TEST(BatchHeaderTest, RejectsNegativeLength) {
  auto b = Batch();
  StoreBE32(b.data() + kBatchLengthOffset, 0xFFFFFFF0u);
  auto h = ValidateBatch(b, 1 << 20);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("-16"), std::string::npos) << h.status().message();
}

TEST(BatchHeaderTest, RejectsAbsurdLength) {
  auto b = Batch();
  StoreBE32(b.data() + kBatchLengthOffset, 0x7FFFFFFFu);
  EXPECT_FALSE(ValidateBatch(b, 1 << 20).ok());
}

TEST(BatchHeaderTest, RejectsWrongMagic) {
  auto b = Batch();
  b[kMagicOffset] = 1;
  auto h = ValidateBatch(b, 1 << 20);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("magic 1"), std::string::npos);
}

TEST(BatchHeaderTest, RejectsWrongCrc) {
  auto b = Batch();
  b[b.size() - 3] ^= 0x40;
  auto h = ValidateBatch(b, 1 << 20);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kCorruption);
  EXPECT_NE(h.status().message().find("CRC"), std::string::npos);
}

TEST(BatchHeaderTest, RejectsRecordCountThatDisagreesWithOffsetDelta) {
  auto b = Batch();
  StoreBE32(b.data() + kRecordsCountOffset, 7);
  Recrc(b);
  auto h = ValidateBatch(b, 1 << 20);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("record count 7"), std::string::npos);
}

TEST(BatchHeaderTest, RejectsZeroRecords) {
  auto b = Batch();
  StoreBE32(b.data() + kRecordsCountOffset, 0);
  StoreBE32(b.data() + kLastOffsetDeltaOffset, 0xFFFFFFFFu);
  Recrc(b);
  EXPECT_FALSE(ValidateBatch(b, 1 << 20).ok());
}

TEST(BatchHeaderTest, RejectsBatchOverMaximum) {
  auto b = Batch();
  auto h = ValidateBatch(b, static_cast<uint32_t>(b.size() - 1));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(h.status().message().find("exceeds the maximum"), std::string::npos);
}

TEST(BatchHeaderTest, AssignOffsetsKeepsCrcValid) {
  auto b = Batch();
  AssignOffsets(b, 123456789, 42);
  auto h = ValidateBatch(b, 1 << 20);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->base_offset, 123456789);
  EXPECT_EQ(h->leader_epoch, 42);
  EXPECT_EQ(h->last_offset(), 123456793);
}

TEST(BatchHeaderTest, SetLogAppendTimeRewritesAndRecomputesCrc) {
  auto b = Batch();
  SetLogAppendTime(b, 5555);
  auto h = ValidateBatch(b, 1 << 20);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->max_timestamp, 5555);
  EXPECT_EQ(h->base_timestamp, 1000);
  EXPECT_NE(h->attributes & kAttrTimestampTypeLogAppend, 0);
}

TEST(BatchHeaderTest, StoredHeaderChecks) {
  auto b = Batch();
  BatchHeader h = ParseBatchHeader(b);
  EXPECT_TRUE(CheckStoredHeader(h, 1 << 20).ok());
  h.length = 10;
  EXPECT_EQ(CheckStoredHeader(h, 1 << 20).code(), StatusCode::kCorruption);
  h = ParseBatchHeader(b);
  h.magic = 0;
  EXPECT_EQ(CheckStoredHeader(h, 1 << 20).code(), StatusCode::kCorruption);
  h = ParseBatchHeader(b);
  EXPECT_EQ(CheckStoredHeader(h, 100).code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace sluice::storage
