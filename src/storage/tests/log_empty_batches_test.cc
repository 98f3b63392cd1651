// Reads over record-less batches (a producer's last batch that the cleaner kept empty):
// EmptyBatches::kKeep serves them as they are; kSkip (a consumer's read) passes over
// them to the first batch with records, within a segment and across segments, and serves
// them only when no batch with records comes before the limit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "storage/batch_header.h"
#include "storage/io_executor.h"
#include "storage/log.h"
#include "storage/log_swap.h"
#include "storage/testing/batch_builder.h"
#include "storage/testing/files.h"

namespace sluice::storage::testing {
namespace {

using Batches = std::map<int64_t, std::vector<uint8_t>>;  // base offset -> bytes

LogOptions Options(IoExecutor* exec) {
  LogOptions o;
  o.executor = exec;
  o.env = Env::Posix();
  o.segment_bytes = 1024;
  o.index_interval_bytes = 256;
  o.flush_policy = FlushPolicy::kDurable;
  return o;
}

// Every batch of the log, as stored (kKeep, whole segments at a time).
Batches AllBatches(PartitionLog& log) {
  Batches out;
  int64_t offset = log.start_offset();
  std::vector<uint8_t> buf;
  while (offset < log.written_end_offset()) {
    auto r = log.Read(offset, 1 << 20);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || r->slice.size == 0) break;
    EXPECT_TRUE(PartitionLog::ReadSlice(r->slice, &buf).ok());
    for (size_t pos = 0; pos < buf.size();) {
      BatchHeader h = ParseBatchHeader(std::span<const uint8_t>(buf).subspan(pos));
      out[h.base_offset].assign(buf.begin() + static_cast<ptrdiff_t>(pos),
                                buf.begin() + static_cast<ptrdiff_t>(pos + h.total_size()));
      pos += h.total_size();
    }
    offset = r->next_offset;
  }
  return out;
}

// Replaces closed segment `seg` by a cleaned one holding its batches, those in `empty`
// emptied.
void CleanSegment(PartitionLog& log, const SegmentSummary& seg, const Batches& all,
                  const std::set<int64_t>& empty) {
  auto cleaned = log.BeginCleaned(seg.base_offset);
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  for (const auto& [base, bytes] : all) {
    if (base < seg.base_offset || base >= seg.next_offset) continue;
    Status st = (*cleaned)->Append(empty.count(base) ? EmptiedBatch(bytes) : bytes);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  Status st = log.ReplaceSegments({seg.base_offset}, std::move(*cleaned));
  ASSERT_TRUE(st.ok()) << st.ToString();
}

// The base offsets of `all`'s batches in [from, to).
std::vector<int64_t> BasesIn(const Batches& all, int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (const auto& [base, bytes] : all) {
    if (base >= from && base < to) out.push_back(base);
  }
  return out;
}

class LogEmptyBatchesTest : public ::testing::Test {
 protected:
  // 60 batches of 3 keyed records over several segments; then segment 0 keeps its first
  // batch and has the rest emptied (it ends in record-less batches), segment 1 has every
  // batch emptied, segment 3 has its first two emptied.
  void SetUp() override {
    auto log = PartitionLog::Open(dir_.path(), Options(&exec_));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    log_ = std::move(*log);
    for (int i = 0; i < 60; ++i) {
      BatchSpec spec;
      spec.producer_id = 7;
      spec.producer_epoch = 0;
      spec.base_sequence = i * 3;
      for (int r = 0; r < 3; ++r) {
        spec.records.push_back({fmt::format("k{}", i * 3 + r), fmt::format("v{}-{}", i, r)});
      }
      ASSERT_TRUE(log_->Append(BuildBatch(spec), {}).ok());
    }
    ASSERT_TRUE(log_->Flush().ok());
    closed_ = log_->ClosedSegments();
    ASSERT_GE(closed_.size(), 5u);
    Batches all = AllBatches(*log_);
    std::vector<int64_t> s0 = BasesIn(all, closed_[0].base_offset, closed_[0].next_offset);
    std::vector<int64_t> s1 = BasesIn(all, closed_[1].base_offset, closed_[1].next_offset);
    std::vector<int64_t> s3 = BasesIn(all, closed_[3].base_offset, closed_[3].next_offset);
    ASSERT_GE(s0.size(), 3u);
    ASSERT_GE(s3.size(), 3u);
    empty_.insert(s0.begin() + 1, s0.end());
    empty_.insert(s1.begin(), s1.end());
    empty_.insert(s3[0]);
    empty_.insert(s3[1]);
    CleanSegment(*log_, closed_[0], all, empty_);
    CleanSegment(*log_, closed_[1], all, empty_);
    CleanSegment(*log_, closed_[3], all, empty_);
    batches_ = AllBatches(*log_);
    ASSERT_EQ(batches_.size(), all.size());
    first_empty_ = s0[1];
    s3_ = s3;
  }

  TempDir dir_;
  IoExecutor exec_{2};
  std::unique_ptr<PartitionLog> log_;
  std::vector<SegmentSummary> closed_;
  std::set<int64_t> empty_;
  Batches batches_;
  int64_t first_empty_ = -1;
  std::vector<int64_t> s3_;
};

TEST_F(LogEmptyBatchesTest, KeepServesRecordlessBatchesAsStored) {
  auto r = log_->Read(first_empty_, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->first_offset, first_empty_);
  EXPECT_FALSE(r->holds_records);
  EXPECT_EQ(r->slice.size, kBatchHeaderSize);
  auto data = log_->Read(closed_[0].base_offset, 1);
  ASSERT_TRUE(data.ok());
  EXPECT_TRUE(data->holds_records);
}

TEST_F(LogEmptyBatchesTest, SkipReadsOnIntoTheNextSegmentWithRecords) {
  for (uint64_t max_bytes : {1u, 100u, 1u << 20}) {
    auto r = log_->Read(first_empty_, max_bytes, INT64_MAX, EmptyBatches::kSkip);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    // Segment 0's tail and all of segment 1 hold no records: segment 2 is next.
    EXPECT_EQ(r->first_offset, closed_[2].base_offset) << max_bytes;
    EXPECT_TRUE(r->holds_records);
    std::vector<uint8_t> buf;
    ASSERT_TRUE(PartitionLog::ReadSlice(r->slice, &buf).ok());
    BatchHeader h = ParseBatchHeader(buf);
    EXPECT_EQ(h.base_offset, closed_[2].base_offset);
    EXPECT_GT(h.records_count, 0);
  }
}

TEST_F(LogEmptyBatchesTest, SkipPassesOverRecordlessBatchesInsideASegment) {
  auto r = log_->Read(s3_[0], 1, INT64_MAX, EmptyBatches::kSkip);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->first_offset, s3_[2]);
  EXPECT_TRUE(r->holds_records);
  // The skipped batches do not count toward max_bytes.
  auto keep = log_->Read(s3_[0], 2 * kBatchHeaderSize, INT64_MAX, EmptyBatches::kKeep);
  ASSERT_TRUE(keep.ok());
  EXPECT_EQ(keep->first_offset, s3_[0]);
  EXPECT_FALSE(keep->holds_records);
  auto skip = log_->Read(s3_[0], 2 * kBatchHeaderSize, INT64_MAX, EmptyBatches::kSkip);
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ(skip->first_offset, s3_[2]);
}

TEST_F(LogEmptyBatchesTest, SkipServesTheRecordlessRunWhenNothingFollowsBeforeTheLimit) {
  // Visible only up to segment 2: nothing with records after segment 0's first batch.
  const int64_t limit = closed_[2].base_offset;
  auto r = log_->Read(first_empty_, 1 << 20, limit, EmptyBatches::kSkip);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->holds_records);
  // The last segment read's run: a reader moves past everything before the limit.
  EXPECT_EQ(r->first_offset, closed_[1].base_offset);
  EXPECT_EQ(r->next_offset, limit);
  EXPECT_EQ(r->slice.size % kBatchHeaderSize, 0u);
  // The limit inside a segment: segment 3's first two batches are all there is.
  auto inside = log_->Read(s3_[0], 1 << 20, s3_[2], EmptyBatches::kSkip);
  ASSERT_TRUE(inside.ok()) << inside.status().ToString();
  EXPECT_FALSE(inside->holds_records);
  EXPECT_EQ(inside->first_offset, s3_[0]);
  EXPECT_EQ(inside->next_offset, s3_[2]);
  // At the limit itself: the end, an empty slice.
  auto end = log_->Read(limit, 1 << 20, limit, EmptyBatches::kSkip);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->slice.size, 0u);
}

TEST_F(LogEmptyBatchesTest, ASkippingReaderSeesEveryBatchWithRecordsOnce) {
  std::vector<int64_t> want;
  for (const auto& [base, bytes] : batches_) {
    if (!empty_.count(base)) want.push_back(base);
  }
  for (uint64_t max_bytes : {1u, 100u, 700u, 1u << 20}) {
    std::vector<int64_t> got;
    int64_t offset = log_->start_offset();
    std::vector<uint8_t> buf;
    int reads = 0;
    while (offset < log_->written_end_offset() && reads++ < 1000) {
      auto r = log_->Read(offset, max_bytes, INT64_MAX, EmptyBatches::kSkip);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_GT(r->slice.size, 0u);
      // Records exist up to the end of the log (its active segment is untouched).
      EXPECT_TRUE(r->holds_records) << "at " << offset;
      ASSERT_TRUE(PartitionLog::ReadSlice(r->slice, &buf).ok());
      for (size_t pos = 0; pos < buf.size();) {
        BatchHeader h = ParseBatchHeader(std::span<const uint8_t>(buf).subspan(pos));
        if (h.records_count > 0) got.push_back(h.base_offset);
        pos += h.total_size();
      }
      ASSERT_GT(r->next_offset, offset);
      offset = r->next_offset;
    }
    EXPECT_EQ(got, want) << "max_bytes " << max_bytes;
  }
}

TEST_F(LogEmptyBatchesTest, SkipKeepsTheRangeChecks) {
  EXPECT_EQ(
      log_->Read(log_->written_end_offset() + 1, 1, INT64_MAX, EmptyBatches::kSkip).status().code(),
      StatusCode::kOutOfRange);
  auto end = log_->Read(log_->written_end_offset(), 1, INT64_MAX, EmptyBatches::kSkip);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->slice.size, 0u);
  EXPECT_FALSE(end->holds_records);
}

}  // namespace
}  // namespace sluice::storage::testing
