// BatchDecoder: fetched bytes of whole v2 batches into consumer records, with Kafka's Java
// consumer's rules for control batches, aborted transactions and the fetch offset.
#include "kafka/local/local_batches.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/crc32c.h"
#include "storage/batch_header.h"
#include "storage/testing/batch_builder.h"

namespace sluice::kafka::local {
namespace {

using client::Message;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Bytes = std::vector<uint8_t>;

constexpr int64_t kBaseTimestamp = 1'700'000'000'000;
constexpr std::string_view kTopic = "events";

// A batch of `count` records at `base_offset`: key "k<offset>", value "v<offset>",
// timestamp base + index.
Bytes Batch(int64_t base_offset, int count, BatchBuilderOptions options = {}) {
  std::vector<std::string> keys, values;
  for (int i = 0; i < count; ++i) {
    keys.push_back("k" + std::to_string(base_offset + i));
    values.push_back("v" + std::to_string(base_offset + i));
  }
  std::vector<RecordInput> records(static_cast<size_t>(count));
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].key = AsBytes(keys[i]);
    records[i].value = AsBytes(values[i]);
    records[i].timestamp_delta = static_cast<int64_t>(i);
  }
  options.base_offset = base_offset;
  options.base_timestamp = kBaseTimestamp;
  return BuildBatch(options, records);
}

// A transactional batch of `producer_id`.
Bytes TxnBatch(int64_t base_offset, int count, int64_t producer_id) {
  BatchBuilderOptions o;
  o.transactional = true;
  o.producer_id = producer_id;
  o.producer_epoch = 0;
  o.base_sequence = 0;
  return Batch(base_offset, count, o);
}

// The coordinator's commit or abort marker of `producer_id` at `offset`.
Bytes Marker(int64_t offset, int64_t producer_id, bool commit) {
  Bytes b = BuildTxnMarkerBatch(producer_id, 0, commit, 0, kBaseTimestamp);
  storage::AssignOffsets(b, offset, 0);
  return b;
}

template <typename... B>
Bytes Concat(const B&... batches) {
  Bytes out;
  (out.insert(out.end(), batches.begin(), batches.end()), ...);
  return out;
}

// Fixes the CRC of a batch after an edit.
void Reseal(Bytes* b) {
  storage::StoreBE32(b->data() + storage::kCrcOffset,
                     crc32c::Value(b->data() + storage::kAttributesOffset,
                                   b->size() - storage::kAttributesOffset));
}

FetchedBytes Fetched(const Bytes& bytes, int64_t fetch_offset = 0) {
  FetchedBytes f;
  f.topic = kTopic;
  f.partition = 3;
  f.bytes = bytes;
  f.fetch_offset = fetch_offset;
  return f;
}

std::vector<int64_t> Offsets(const std::vector<Message>& messages) {
  std::vector<int64_t> out;
  for (const Message& m : messages) out.push_back(m.offset);
  return out;
}

bool PointsInto(std::string_view view, const Bytes& bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(view.data());
  return p >= bytes.data() && p + view.size() <= bytes.data() + bytes.size();
}

TEST(BatchDecoderTest, DecodesAPlainBatchIntoViewsOfTheBytes) {
  std::string value(100, 'x');
  std::vector<RecordInput> records(3);
  records[0].key = AsBytes("a");
  records[0].value = AsBytes(value);
  records[1].key = std::nullopt;  // null key
  records[1].value = AsBytes("");
  records[1].timestamp_delta = 5;
  records[2].key = AsBytes("c");
  records[2].value = std::nullopt;  // a tombstone
  BatchBuilderOptions o;
  o.base_offset = 40;
  o.base_timestamp = kBaseTimestamp;
  const Bytes bytes = BuildBatch(o, records);

  BatchDecoder decoder;
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(bytes, 40), &out);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.next_offset, 43);
  EXPECT_EQ(r.bytes_consumed, bytes.size());
  EXPECT_EQ(r.batches_consumed, 1);
  ASSERT_EQ(out.size(), 3u);
  for (const Message& m : out) {
    EXPECT_EQ(m.topic, "events");
    EXPECT_EQ(m.topic.data(), kTopic.data());
    EXPECT_EQ(m.partition, 3);
  }
  EXPECT_THAT(Offsets(out), ElementsAre(40, 41, 42));
  EXPECT_EQ(out[0].key, "a");
  EXPECT_EQ(out[0].value, value);
  EXPECT_EQ(out[0].timestamp_ms, kBaseTimestamp);
  EXPECT_TRUE(PointsInto(out[0].key, bytes));
  EXPECT_TRUE(PointsInto(out[0].value, bytes));
  EXPECT_EQ(out[1].key.data(), nullptr);
  EXPECT_NE(out[1].value.data(), nullptr);  // empty, not null
  EXPECT_TRUE(out[1].value.empty());
  EXPECT_EQ(out[1].timestamp_ms, kBaseTimestamp + 5);
  EXPECT_EQ(out[2].key, "c");
  EXPECT_EQ(out[2].value.data(), nullptr);
  EXPECT_EQ(decoder.held_batches(), 0u);  // nothing decompressed
}

TEST(BatchDecoderTest, DecodesSeveralBatchesInOrderAndAppends) {
  const Bytes bytes = Concat(Batch(0, 2), Batch(2, 3), Batch(5, 1));
  BatchDecoder decoder;
  std::vector<Message> out(1);  // appended to, not replaced
  DecodeResult r = decoder.Decode(Fetched(bytes), &out);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(out.size(), 7u);
  out.erase(out.begin());
  EXPECT_THAT(Offsets(out), ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_EQ(out[3].value, "v3");
  EXPECT_EQ(out[3].timestamp_ms, kBaseTimestamp + 1);
  EXPECT_EQ(r.next_offset, 6);
  EXPECT_EQ(r.batches_consumed, 3);
  EXPECT_EQ(r.bytes_consumed, bytes.size());
}

TEST(BatchDecoderTest, SkipsTheRecordsBeforeTheFetchOffset) {
  const Bytes bytes = Concat(Batch(10, 5), Batch(15, 2));
  BatchDecoder decoder;
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(bytes, 13), &out);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_THAT(Offsets(out), ElementsAre(13, 14, 15, 16));
  EXPECT_EQ(out[0].value, "v13");
  EXPECT_EQ(r.next_offset, 17);
}

TEST(BatchDecoderTest, NextOffsetNeverGoesBelowTheFetchOffset) {
  const Bytes bytes = Batch(10, 5);
  BatchDecoder decoder;
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(bytes, 30), &out);
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(r.next_offset, 30);
  EXPECT_EQ(r.batches_consumed, 1);

  r = decoder.Decode(Fetched(Bytes{}, 30), &out);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.next_offset, 30);
  EXPECT_EQ(r.bytes_consumed, 0u);
}

TEST(BatchDecoderTest, DecodesEveryCodecIntoBuffersItHolds) {
  for (Compression codec :
       {Compression::kGzip, Compression::kSnappy, Compression::kLz4, Compression::kZstd}) {
    SCOPED_TRACE(CompressionName(codec));
    BatchBuilderOptions o;
    o.compression = codec;
    const Bytes bytes = Concat(Batch(0, 50, o), Batch(50, 3));
    BatchDecoder decoder;
    std::vector<Message> out;
    DecodeResult r = decoder.Decode(Fetched(bytes, 2), &out);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    ASSERT_EQ(out.size(), 51u);
    EXPECT_EQ(out[0].offset, 2);
    EXPECT_EQ(out[0].key, "k2");
    EXPECT_EQ(out[47].value, "v49");
    EXPECT_EQ(out[47].timestamp_ms, kBaseTimestamp + 49);
    EXPECT_FALSE(PointsInto(out[0].value, bytes));  // in the decoder's buffer
    EXPECT_TRUE(PointsInto(out[48].value, bytes));  // the uncompressed batch
    EXPECT_EQ(r.next_offset, 53);
    EXPECT_EQ(decoder.held_batches(), 1u);
    EXPECT_GT(decoder.held_bytes(), 0u);
    decoder.ReleaseUpTo(r.generation);
    EXPECT_EQ(decoder.held_batches(), 0u);
    EXPECT_EQ(decoder.held_bytes(), 0u);
  }
}

TEST(BatchDecoderTest, HoldsNoBufferForACompressedBatchWhollyBeforeTheFetchOffset) {
  BatchBuilderOptions o;
  o.compression = Compression::kLz4;
  const Bytes bytes = Concat(Batch(0, 5, o), Batch(5, 5, o));
  BatchDecoder decoder;
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(bytes, 7), &out);
  ASSERT_TRUE(r.status.ok());
  EXPECT_THAT(Offsets(out), ElementsAre(7, 8, 9));
  EXPECT_EQ(decoder.held_batches(), 1u);
}

TEST(BatchDecoderTest, LogAppendTimeBatchesGiveTheMaxTimestamp) {
  BatchBuilderOptions o;
  o.log_append_time = true;
  o.max_timestamp = kBaseTimestamp + 999;
  const Bytes bytes = Batch(0, 3, o);
  BatchDecoder decoder;
  std::vector<Message> out;
  ASSERT_TRUE(decoder.Decode(Fetched(bytes), &out).status.ok());
  ASSERT_EQ(out.size(), 3u);
  for (const Message& m : out) EXPECT_EQ(m.timestamp_ms, kBaseTimestamp + 999);
}

TEST(BatchDecoderTest, SkipsControlBatchesAndMovesPastThem) {
  const Bytes bytes = Concat(TxnBatch(0, 2, 7), Marker(2, 7, /*commit=*/true));
  for (bool read_committed : {false, true}) {
    SCOPED_TRACE(read_committed);
    BatchDecoder decoder;
    std::vector<Message> out;
    FetchedBytes f = Fetched(bytes);
    f.read_committed = read_committed;
    DecodeResult r = decoder.Decode(f, &out);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_THAT(Offsets(out), ElementsAre(0, 1));
    EXPECT_EQ(r.next_offset, 3);
    EXPECT_EQ(r.batches_consumed, 2);
  }
}

// Producer 1's transaction (0, 1, 4) is aborted, producer 2's (2, 3, 5) committed; then
// producer 1 commits a new one (8) and a plain producer writes (10, 11).
Bytes InterleavedTransactions() {
  return Concat(TxnBatch(0, 2, 1), TxnBatch(2, 2, 2), TxnBatch(4, 1, 1), TxnBatch(5, 1, 2),
                Marker(6, 1, /*commit=*/false), Marker(7, 2, /*commit=*/true), TxnBatch(8, 1, 1),
                Marker(9, 1, /*commit=*/true), Batch(10, 2));
}

TEST(BatchDecoderTest, ReadCommittedSkipsTheAbortedTransaction) {
  const Bytes bytes = InterleavedTransactions();
  const std::vector<AbortedTransaction> aborted = {{1, 0}};
  BatchDecoder decoder;
  std::vector<Message> out;
  FetchedBytes f = Fetched(bytes);
  f.read_committed = true;
  f.aborted = aborted;
  DecodeResult r = decoder.Decode(f, &out);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_THAT(Offsets(out), ElementsAre(2, 3, 5, 8, 10, 11));
  EXPECT_EQ(out[3].value, "v8");
  EXPECT_EQ(r.next_offset, 12);
  EXPECT_EQ(r.batches_consumed, 9);
}

TEST(BatchDecoderTest, ReadCommittedFromInsideTheAbortedTransaction) {
  // A read from offset 4 still gets the transaction that began at 0 (the broker lists
  // every aborted transaction overlapping the read).
  const Bytes all = InterleavedTransactions();
  const Bytes bytes(all.begin() + static_cast<std::ptrdiff_t>(
                                      Concat(TxnBatch(0, 2, 1), TxnBatch(2, 2, 2)).size()),
                    all.end());
  const std::vector<AbortedTransaction> aborted = {{1, 0}};
  BatchDecoder decoder;
  std::vector<Message> out;
  FetchedBytes f = Fetched(bytes, 4);
  f.read_committed = true;
  f.aborted = aborted;
  DecodeResult r = decoder.Decode(f, &out);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_THAT(Offsets(out), ElementsAre(5, 8, 10, 11));
}

TEST(BatchDecoderTest, ReadUncommittedShowsTheAbortedRecords) {
  const Bytes bytes = InterleavedTransactions();
  const std::vector<AbortedTransaction> aborted = {{1, 0}};  // ignored
  BatchDecoder decoder;
  std::vector<Message> out;
  FetchedBytes f = Fetched(bytes);
  f.aborted = aborted;
  DecodeResult r = decoder.Decode(f, &out);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_THAT(Offsets(out), ElementsAre(0, 1, 2, 3, 4, 5, 8, 10, 11));
  EXPECT_EQ(r.next_offset, 12);
}

TEST(BatchDecoderTest, AnAbortedTransactionCountsFromItsFirstOffsetOnly) {
  // Producer 5 commits 0-1, then its transaction 3-4 is aborted; a second aborted
  // transaction of producer 6 lies past the bytes. The list comes unordered.
  const Bytes bytes = Concat(TxnBatch(0, 2, 5), Marker(2, 5, true), TxnBatch(3, 2, 5), Batch(5, 1),
                             Marker(6, 5, false), TxnBatch(7, 1, 5));
  const std::vector<AbortedTransaction> aborted = {{6, 100}, {5, 3}};
  BatchDecoder decoder;
  std::vector<Message> out;
  FetchedBytes f = Fetched(bytes);
  f.read_committed = true;
  f.aborted = aborted;
  DecodeResult r = decoder.Decode(f, &out);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  // 7 belongs to producer 5's next transaction, begun after its abort marker.
  EXPECT_THAT(Offsets(out), ElementsAre(0, 1, 5, 7));
  EXPECT_EQ(r.next_offset, 8);
}

TEST(BatchDecoderTest, RecordlessBatchesMoveTheOffsetOnly) {
  const Bytes emptied = storage::testing::EmptiedBatch(TxnBatch(0, 3, 9));
  ASSERT_EQ(storage::ParseBatchHeader(emptied).records_count, 0);
  BatchDecoder decoder;
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(emptied), &out);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(r.next_offset, 3);
  EXPECT_EQ(r.batches_consumed, 1);

  const Bytes bytes = Concat(emptied, Batch(3, 2));
  r = decoder.Decode(Fetched(bytes), &out);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_THAT(Offsets(out), ElementsAre(3, 4));
  EXPECT_EQ(r.next_offset, 5);
}

TEST(BatchDecoderTest, LeavesATrailingPartialBatchForTheNextRead) {
  const Bytes first = Batch(0, 2);
  const Bytes second = Batch(2, 2);
  for (size_t cut = 0; cut < second.size(); ++cut) {
    SCOPED_TRACE(cut);
    Bytes bytes = first;
    bytes.insert(bytes.end(), second.begin(), second.begin() + static_cast<std::ptrdiff_t>(cut));
    BatchDecoder decoder;
    std::vector<Message> out;
    DecodeResult r = decoder.Decode(Fetched(bytes), &out);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_THAT(Offsets(out), ElementsAre(0, 1));
    EXPECT_EQ(r.next_offset, 2);
    EXPECT_EQ(r.bytes_consumed, first.size());
    EXPECT_EQ(r.batches_consumed, 1);
  }
}

TEST(BatchDecoderTest, CrcMismatchIsCorruptionNamingTheBatch) {
  const Bytes first = Batch(0, 2);
  Bytes bytes = Concat(first, Batch(2, 2), Batch(4, 1));
  bytes[first.size() + storage::kBatchHeaderSize + 8] ^= 0x01;  // inside the records
  BatchDecoder decoder;
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(bytes), &out);
  EXPECT_EQ(r.status.code(), StatusCode::kCorruption);
  EXPECT_THAT(r.status.message(),
              HasSubstr(fmt::format("events-3: batch 1 at byte {} (base offset 2)", first.size())));
  EXPECT_THAT(r.status.message(), HasSubstr("CRC"));
  EXPECT_THAT(Offsets(out), ElementsAre(0, 1));  // the batch before it
  EXPECT_EQ(r.next_offset, 2);
  EXPECT_EQ(r.bytes_consumed, first.size());
  EXPECT_EQ(r.batches_consumed, 1);

  // Without the check the flipped byte goes unnoticed, as in librdkafka by default.
  BatchDecoder unchecked(DecoderOptions{.check_crcs = false});
  out.clear();
  r = unchecked.Decode(Fetched(bytes), &out);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(out.size(), 5u);
}

TEST(BatchDecoderTest, LengthShorterThanAHeaderIsCorruption) {
  const Bytes first = Batch(0, 1);
  Bytes bytes = Concat(first, Batch(1, 1));
  storage::StoreBE32(bytes.data() + first.size() + storage::kBatchLengthOffset, 20);
  BatchDecoder decoder;
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(bytes), &out);
  EXPECT_EQ(r.status.code(), StatusCode::kCorruption);
  EXPECT_THAT(r.status.message(), HasSubstr("batch 1 at byte"));
  EXPECT_THAT(r.status.message(), HasSubstr("length 20 is shorter than a batch header"));
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(r.next_offset, 1);

  storage::StoreBE32(bytes.data() + first.size() + storage::kBatchLengthOffset, 0xFFFFFFF0);
  out.clear();
  r = decoder.Decode(Fetched(bytes), &out);
  EXPECT_EQ(r.status.code(), StatusCode::kCorruption);  // a negative length
}

TEST(BatchDecoderTest, TruncatedRecordsInTheMiddleAreCorruption) {
  // The first batch loses its last 3 bytes but keeps a good length and CRC: a batch whose
  // records end early, followed by a good batch.
  Bytes first = Batch(0, 3);
  first.resize(first.size() - 3);
  storage::StoreBE32(first.data() + storage::kBatchLengthOffset,
                     static_cast<uint32_t>(first.size() - storage::kBatchLogOverhead));
  Reseal(&first);
  const Bytes bytes = Concat(first, Batch(3, 1));
  BatchDecoder decoder;
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(bytes), &out);
  EXPECT_EQ(r.status.code(), StatusCode::kCorruption);
  EXPECT_THAT(r.status.message(), HasSubstr("batch 0 at byte 0 (base offset 0)"));
  EXPECT_THAT(r.status.message(), HasSubstr("record 2"));
  EXPECT_TRUE(out.empty());  // none of the batch's records, not even the good ones
  EXPECT_EQ(r.next_offset, 0);
  EXPECT_EQ(r.bytes_consumed, 0u);
}

TEST(BatchDecoderTest, ACompressedBatchFailingLateAppendsAndHoldsNothing) {
  BatchBuilderOptions o;
  o.compression = Compression::kZstd;
  Bytes bytes = Batch(0, 4, o);
  // One record more than the records section holds.
  storage::StoreBE32(bytes.data() + storage::kRecordsCountOffset, 5);
  storage::StoreBE32(bytes.data() + storage::kLastOffsetDeltaOffset, 4);
  Reseal(&bytes);
  BatchDecoder decoder;
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(bytes), &out);
  EXPECT_EQ(r.status.code(), StatusCode::kCorruption);
  EXPECT_THAT(r.status.message(), HasSubstr("declares 5 records"));
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(decoder.held_batches(), 0u);
  EXPECT_EQ(decoder.held_bytes(), 0u);
}

TEST(BatchDecoderTest, GarbageIsCorruption) {
  const std::string garbage = "this is not a record batch, only some text long enough";
  Bytes bytes(garbage.begin(), garbage.end());
  BatchDecoder decoder;
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(bytes), &out);
  EXPECT_EQ(r.status.code(), StatusCode::kCorruption);
  EXPECT_THAT(r.status.message(), HasSubstr("batch 0 at byte 0"));
  EXPECT_EQ(r.bytes_consumed, 0u);

  // After a good batch.
  const Bytes good = Batch(0, 1);
  bytes = Concat(good, bytes);
  r = decoder.Decode(Fetched(bytes), &out);
  EXPECT_EQ(r.status.code(), StatusCode::kCorruption);
  EXPECT_THAT(r.status.message(), HasSubstr(fmt::format("batch 1 at byte {}", good.size())));
  EXPECT_EQ(out.size(), 1u);

  // Fewer bytes than a length field needs: a partial batch, not an error.
  bytes = Bytes(garbage.begin(), garbage.begin() + 11);
  r = decoder.Decode(Fetched(bytes), &out);
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.bytes_consumed, 0u);
}

TEST(BatchDecoderTest, RecordOffsetDeltaPastTheBatchIsCorruption) {
  std::vector<RecordInput> records(2);
  records[0].value = AsBytes("a");
  records[1].value = AsBytes("b");
  records[1].offset_delta = 7;  // the header's last offset delta is 1
  const Bytes bytes = BuildBatch({}, records);
  BatchDecoder decoder;
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(bytes), &out);
  EXPECT_EQ(r.status.code(), StatusCode::kCorruption);
  EXPECT_THAT(r.status.message(), HasSubstr("record 1 has offset delta 7"));
  EXPECT_TRUE(out.empty());
}

TEST(BatchDecoderTest, RecordsOutOfOrderAreSkippedAsJavaDoes) {
  std::vector<RecordInput> records(3);
  for (auto& rec : records) rec.value = AsBytes("x");
  records[0].offset_delta = 1;
  records[1].offset_delta = 0;  // behind the record before it
  records[2].offset_delta = 2;
  const Bytes bytes = BuildBatch({}, records);
  BatchDecoder decoder;
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(bytes), &out);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_THAT(Offsets(out), ElementsAre(1, 2));
}

TEST(BatchDecoderTest, DecompressingPastTheBoundIsResourceExhausted) {
  const std::string big(10'000, 'z');
  RecordInput record;
  record.value = AsBytes(big);
  BatchBuilderOptions o;
  o.compression = Compression::kZstd;
  const Bytes bytes = BuildBatch(o, std::span<const RecordInput>(&record, 1));
  BatchDecoder decoder(DecoderOptions{.max_decompressed_bytes = 1000});
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(bytes), &out);
  EXPECT_EQ(r.status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(decoder.held_batches(), 0u);
}

TEST(BatchDecoderTest, UnknownCodecIsUnimplemented) {
  Bytes bytes = Batch(0, 1);
  storage::StoreBE16(bytes.data() + storage::kAttributesOffset, 5);
  Reseal(&bytes);
  BatchDecoder decoder;
  std::vector<Message> out;
  DecodeResult r = decoder.Decode(Fetched(bytes), &out);
  EXPECT_EQ(r.status.code(), StatusCode::kUnimplemented);
}

TEST(BatchDecoderTest, ViewsStayValidAcrossDecodesUntilReleased) {
  BatchBuilderOptions o;
  o.compression = Compression::kGzip;
  const Bytes first = Concat(Batch(0, 3, o), Batch(3, 3, o));
  const Bytes second = Batch(6, 3, o);
  BatchDecoder decoder;
  std::vector<Message> a, b;
  DecodeResult ra = decoder.Decode(Fetched(first), &a);
  DecodeResult rb = decoder.Decode(Fetched(second, 6), &b);
  ASSERT_TRUE(ra.status.ok());
  ASSERT_TRUE(rb.status.ok());
  EXPECT_LT(ra.generation, rb.generation);
  EXPECT_EQ(decoder.held_batches(), 3u);
  // The first fetch's views survive the second decode (ASan would see them dangle).
  for (const Message& m : a) EXPECT_EQ(m.value, "v" + std::to_string(m.offset));

  decoder.ReleaseUpTo(ra.generation);
  EXPECT_EQ(decoder.held_batches(), 1u);
  for (const Message& m : b) EXPECT_EQ(m.value, "v" + std::to_string(m.offset));
  decoder.ReleaseUpTo(ra.generation);  // again: nothing more
  EXPECT_EQ(decoder.held_batches(), 1u);
  decoder.ReleaseAll();
  EXPECT_EQ(decoder.held_batches(), 0u);
  EXPECT_EQ(decoder.held_bytes(), 0u);
}

TEST(BatchDecoderTest, ControlBatchWithABadKeyIsCorruptionUnderReadCommitted) {
  // A control batch of producer 4 whose first record's key is 2 bytes long.
  RecordInput record;
  record.key = AsBytes(std::string_view("\x00\x00", 2));
  record.value = AsBytes("");
  BatchBuilderOptions o;
  o.control = true;
  o.transactional = true;
  o.producer_id = 4;
  o.producer_epoch = 0;
  const Bytes bytes = BuildBatch(o, std::span<const RecordInput>(&record, 1));
  BatchDecoder decoder;
  std::vector<Message> out;
  FetchedBytes f = Fetched(bytes);
  EXPECT_TRUE(decoder.Decode(f, &out).status.ok());  // read_uncommitted does not parse keys
  f.read_committed = true;
  DecodeResult r = decoder.Decode(f, &out);
  EXPECT_EQ(r.status.code(), StatusCode::kCorruption);
  EXPECT_THAT(r.status.message(), HasSubstr("control record key"));
}

}  // namespace
}  // namespace sluice::kafka::local
