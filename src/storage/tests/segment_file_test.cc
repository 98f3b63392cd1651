// Reads of a closed segment's files outside a log (segment_file.cc): whole, and in the
// chunks that tiered storage downloads them in (docs/design/0025, decision 10).
#include "storage/segment_file.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "storage/io_executor.h"
#include "storage/log.h"
#include "storage/log_swap.h"
#include "storage/segment.h"
#include "storage/testing/batch_builder.h"
#include "storage/testing/files.h"

namespace sluice::storage::testing {
namespace {

class SegmentFileTest : public ::testing::Test {
 protected:
  // A closed segment of batches of varying sizes, indexed every 256 bytes.
  void SetUp() override {
    LogOptions o;
    o.executor = &executor_;
    o.segment_bytes = 64 << 10;
    o.index_interval_bytes = 256;
    o.flush_policy = FlushPolicy::kDurable;
    auto log = PartitionLog::Open(dir_.path(), o);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    for (int i = 0; (*log)->ClosedSegments().empty(); ++i) {
      BatchSpec spec;
      spec.base_timestamp = i % 10 == 9 ? 500 : 1000 + i;  // now and then an older one
      for (int r = 0; r < 1 + i % 4; ++r) {
        spec.records.push_back({fmt::format("k{}", r), std::string(20 + (i * 37) % 400, 'v')});
      }
      ASSERT_TRUE((*log)->Append(BuildBatch(spec), {}).ok());
    }
    ASSERT_TRUE((*log)->Flush().ok());
    const SegmentSummary closed = (*log)->ClosedSegments().front();
    whole_.size = closed.size;
    whole_.base_offset = closed.base_offset;
    next_offset_ = closed.next_offset;
    log->reset();
    whole_.log = Open(log_internal::SegmentName(0, ".log"));
    whole_.index = Open(log_internal::SegmentName(0, ".index"));
    whole_.time_index = Open(log_internal::SegmentName(0, ".timeindex"));
    ASSERT_TRUE(ForEachSegmentFileBatch(whole_, 0, [&](const BatchHeader& h, uint64_t pos) {
                  batches_[pos] = h.base_offset;
                  return true;
                }).ok());
  }
  std::shared_ptr<File> Open(const std::string& name) {
    auto f = Env::Posix()->Open(dir_.path() + "/" + name, OpenMode::kRead);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::shared_ptr<File>(std::move(*f)) : nullptr;
  }
  // The segment with a file holding only its bytes [from, end), as a download would.
  SegmentFile Chunk(uint64_t from, uint64_t end) {
    std::vector<uint8_t> bytes(end - from);
    EXPECT_EQ(*whole_.log->ReadAt(from, bytes), bytes.size());
    const std::string name = fmt::format("chunk-{}-{}", from, end);
    WriteFileBytes(dir_.path() + "/" + name, bytes);
    SegmentFile c = whole_;
    c.log = Open(name);
    c.from = from;
    c.end = end;
    return c;
  }
  static std::vector<uint8_t> Bytes(const FileSlice& s) {
    std::vector<uint8_t> out;
    EXPECT_TRUE(PartitionLog::ReadSlice(s, &out).ok());
    return out;
  }
  // The chunks tiling the segment, by SegmentChunkAt from 0.
  std::vector<std::pair<uint64_t, uint64_t>> Tiling(uint64_t chunk_bytes) {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (uint64_t pos = 0; pos < whole_.size;) {
      auto c = SegmentChunkAt(whole_, pos, chunk_bytes);
      EXPECT_TRUE(c.ok()) << c.status().ToString();
      if (!c.ok() || c->first != pos || c->second <= pos) {
        ADD_FAILURE() << "chunk at " << pos;
        break;
      }
      out.push_back(*c);
      pos = c->second;
    }
    return out;
  }

  TempDir dir_{"sluice-segment-file"};
  IoExecutor executor_{1};
  SegmentFile whole_;
  int64_t next_offset_ = 0;
  std::map<uint64_t, int64_t> batches_;  // position -> base offset
};

TEST_F(SegmentFileTest, ChunksTileTheSegmentAtBatchStartsAndEveryReaderSplitsItAlike) {
  ASSERT_GT(batches_.size(), 100u);
  for (uint64_t chunk_bytes : {1ULL, 300ULL, 1000ULL, 4096ULL, 20000ULL, 1ULL << 30}) {
    const auto tiling = Tiling(chunk_bytes);
    ASSERT_FALSE(tiling.empty());
    EXPECT_EQ(tiling.back().second, whole_.size);
    for (const auto& [from, end] : tiling) {
      EXPECT_TRUE(batches_.count(from)) << from << " is not a batch start";
      if (chunk_bytes >= 1000 && end < whole_.size) {
        // About chunk_bytes: never more than it and an index interval and a batch.
        EXPECT_LE(end - from, chunk_bytes + 256 + 2000) << chunk_bytes;
      }
    }
    if (chunk_bytes == (1ULL << 30)) EXPECT_EQ(tiling.size(), 1u);
    // Any offset's indexed position lands in the tiling's chunk holding it.
    for (const auto& [pos, base] : batches_) {
      const uint64_t indexed = *IndexPosition(whole_, base);
      auto c = SegmentChunkAt(whole_, indexed, chunk_bytes);
      ASSERT_TRUE(c.ok());
      EXPECT_LE(c->first, pos);
      EXPECT_LT(pos, c->second) << "offset " << base << "'s batch is not in its chunk";
      EXPECT_TRUE(std::find(tiling.begin(), tiling.end(), *c) != tiling.end());
    }
  }
  // Without an index, or with no chunking: the whole segment.
  SegmentFile unindexed = whole_;
  unindexed.index = nullptr;
  EXPECT_EQ(*SegmentChunkAt(unindexed, 0, 1000), std::make_pair(uint64_t{0}, whole_.size));
  EXPECT_EQ(*SegmentChunkAt(whole_, 0, 0), std::make_pair(uint64_t{0}, whole_.size));
  EXPECT_EQ(SegmentChunkAt(whole_, whole_.size, 1000).status().code(), StatusCode::kOutOfRange);
  // A size no segment has (a corrupt manifest's) costs a few searches, not a walk.
  SegmentFile huge = whole_;
  huge.size = UINT64_MAX - 5;
  for (uint64_t pos : {uint64_t{0}, whole_.size + 100, huge.size - 1}) {
    auto c = SegmentChunkAt(huge, pos, 1000);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_LE(c->first, pos);
    EXPECT_GT(c->second, pos);
  }
}

TEST_F(SegmentFileTest, AChunkReadsAsTheWholeSegmentWithinItsBytes) {
  for (const auto& [from, end] : Tiling(1000)) {
    const SegmentFile chunk = Chunk(from, end);
    std::vector<BatchHeader> walked;
    ASSERT_TRUE(ForEachSegmentFileBatch(chunk, 0, [&](const BatchHeader& h, uint64_t pos) {
                  EXPECT_TRUE(batches_.count(pos));
                  walked.push_back(h);
                  return true;
                }).ok());
    ASSERT_FALSE(walked.empty());
    EXPECT_EQ(batches_.at(from), walked.front().base_offset);  // a later chunk: from its start
    for (int64_t o = walked.front().base_offset; o < walked.back().next_offset(); ++o) {
      auto want = ReadSegmentFile(whole_, o, 1);
      auto got = ReadSegmentFile(chunk, o, 1);
      ASSERT_TRUE(want.ok() && got.ok()) << o << ": " << got.status().ToString();
      EXPECT_EQ(Bytes(got->slice), Bytes(want->slice)) << o;
      EXPECT_EQ(got->next_offset, want->next_offset);
      auto most = ReadSegmentFile(chunk, o, 1 << 30);  // stops at the chunk's end
      ASSERT_TRUE(most.ok());
      EXPECT_EQ(most->next_offset, walked.back().next_offset());
      EXPECT_EQ(most->slice.position + most->slice.size, end - from);
    }
    // An offset before the chunk is refused (the wrong chunk), one past it is out of it.
    if (from > 0) {
      EXPECT_EQ(ReadSegmentFile(chunk, 0, 1).status().code(), StatusCode::kInvalidArgument);
    }
    if (end < whole_.size) {
      EXPECT_EQ(ReadSegmentFile(chunk, walked.back().next_offset(), 1).status().code(),
                StatusCode::kOutOfRange);
    }
  }
}

// A lookup by time starts where the time index says every batch before is older, and
// finds there the batch a walk from the start finds.
TEST_F(SegmentFileTest, TimeIndexStartSkipsOnlyOlderBatches) {
  std::vector<BatchHeader> all;
  ASSERT_TRUE(ForEachSegmentFileBatch(whole_, 0, [&](const BatchHeader& h, uint64_t) {
                all.push_back(h);
                return true;
              }).ok());
  int skipped = 0;
  for (int64_t target : {0L, 500L, 501L, 1000L, 1001L, 1050L, 1099L, 1100L, 1150L, 5000L}) {
    auto first = std::find_if(all.begin(), all.end(),
                              [&](const BatchHeader& h) { return h.max_timestamp >= target; });
    auto start = TimeIndexStart(whole_, target);
    ASSERT_TRUE(start.ok()) << start.status().ToString();
    EXPECT_GE(*start, 0);
    if (first != all.end()) {
      EXPECT_GT(first->next_offset(), *start) << target << ": the answer's batch is skipped";
      skipped += *start > 0;
    }
  }
  EXPECT_GT(skipped, 0) << "the time index never let a walk start later";
  SegmentFile untimed = whole_;
  untimed.time_index = nullptr;
  EXPECT_EQ(*TimeIndexStart(untimed, 1100), whole_.base_offset);
}

}  // namespace
}  // namespace sluice::storage::testing
