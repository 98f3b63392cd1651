#include "broker/producer_state.h"

#include <gtest/gtest.h>

#include <future>

#include "storage/log.h"
#include "storage/testing/batch_builder.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace {

using Verdict = ProducerStateTable::Verdict;

ProducerBatch B(int64_t pid, int16_t epoch, int32_t seq, int32_t count) {
  return ProducerBatch{pid, epoch, seq, count};
}

TEST(ProducerStateTest, NonIdempotentBatchesAreAlwaysAppended) {
  ProducerStateTable t;
  EXPECT_EQ(t.CheckBatch(B(-1, -1, -1, 5)).verdict, Verdict::kAppend);
  t.OnAppended(B(-1, -1, -1, 5), 0);
  EXPECT_EQ(t.producer_count(), 0u);
}

TEST(ProducerStateTest, SequencesContinueAndRetriesAreDuplicates) {
  ProducerStateTable t;
  EXPECT_EQ(t.CheckBatch(B(7, 0, 0, 3)).verdict, Verdict::kAppend);
  t.OnAppended(B(7, 0, 0, 3), 100);
  EXPECT_EQ(t.CheckBatch(B(7, 0, 3, 2)).verdict, Verdict::kAppend);
  t.OnAppended(B(7, 0, 3, 2), 103);
  auto dup = t.CheckBatch(B(7, 0, 0, 3));
  EXPECT_EQ(dup.verdict, Verdict::kDuplicate);
  EXPECT_EQ(dup.first_offset, 100);
  EXPECT_EQ(dup.last_offset, 102);
  auto gap = t.CheckBatch(B(7, 0, 6, 1));
  EXPECT_EQ(gap.verdict, Verdict::kOutOfOrder);
  EXPECT_NE(gap.message.find("expected sequence 5"), std::string::npos) << gap.message;
}

TEST(ProducerStateTest, OnlyTheLastFiveBatchesAreRemembered) {
  ProducerStateTable t;
  for (int i = 0; i < 6; ++i) t.OnAppended(B(1, 0, i, 1), i);
  EXPECT_EQ(t.CheckBatch(B(1, 0, 1, 1)).verdict, Verdict::kDuplicate);
  EXPECT_EQ(t.CheckBatch(B(1, 0, 0, 1)).verdict, Verdict::kOutOfOrder);
}

TEST(ProducerStateTest, EpochsFenceAndRestartSequences) {
  ProducerStateTable t;
  t.OnAppended(B(1, 3, 0, 1), 0);
  EXPECT_EQ(t.CheckBatch(B(1, 2, 1, 1)).verdict, Verdict::kFenced);
  EXPECT_EQ(t.CheckBatch(B(1, 4, 5, 1)).verdict, Verdict::kOutOfOrder);
  EXPECT_EQ(t.CheckBatch(B(1, 4, 0, 1)).verdict, Verdict::kAppend);
}

TEST(ProducerStateTest, UnknownProducerMustStartAtZero) {
  ProducerStateTable t;
  EXPECT_EQ(t.CheckBatch(B(9, 0, 4, 1)).verdict, Verdict::kUnknownProducer);
  EXPECT_EQ(t.CheckBatch(B(9, 0, 0, 1)).verdict, Verdict::kAppend);
}

TEST(ProducerStateTest, SequenceWrapsPastInt32Max) {
  ProducerStateTable t;
  t.OnAppended(B(1, 0, 0, 1), 0);
  ProducerBatch near_max = B(1, 0, INT32_MAX - 1, 2);
  EXPECT_EQ(near_max.last_sequence(), INT32_MAX);
  ProducerBatch wrapping = B(1, 0, INT32_MAX, 3);
  EXPECT_EQ(wrapping.last_sequence(), 1);
  ProducerStateTable u;
  u.OnAppended(near_max, 10);
  EXPECT_EQ(u.CheckBatch(B(1, 0, 0, 1)).verdict, Verdict::kAppend);
}

TEST(ProducerStateTest, RebuiltFromTheLogHeaders) {
  storage::testing::TempDir dir("producer-state");
  storage::IoExecutor executor(2);
  storage::LogOptions opts;
  opts.executor = &executor;
  opts.flush_policy = storage::FlushPolicy::kDurable;
  opts.segment_bytes = 4096;
  auto log = storage::PartitionLog::Open(dir.path(), opts);
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 12; ++i) {
    storage::testing::BatchSpec spec;
    for (int r = 0; r < 3; ++r) spec.records.push_back({"", std::string(200, 'v'), r});
    spec.producer_id = 42;
    spec.producer_epoch = 1;
    spec.base_sequence = i * 3;
    std::promise<void> done;
    storage::AppendOptions o;
    o.on_ack = [&](const Status&, const storage::AppendInfo&) { done.set_value(); };
    ASSERT_TRUE((*log)->Append(storage::testing::BuildBatch(spec), std::move(o)).ok());
    done.get_future().wait();
  }
  ProducerStateTable t;
  ASSERT_TRUE(t.Rebuild(**log).ok());
  EXPECT_EQ(t.producer_count(), 1u);
  auto dup = t.CheckBatch(B(42, 1, 33, 3));
  EXPECT_EQ(dup.verdict, Verdict::kDuplicate);
  EXPECT_EQ(dup.first_offset, 33);
  EXPECT_EQ(t.CheckBatch(B(42, 1, 36, 1)).verdict, Verdict::kAppend);
  EXPECT_EQ(t.CheckBatch(B(42, 1, 15, 3)).verdict,
            Verdict::kOutOfOrder);  // older than the last five
}

}  // namespace
}  // namespace sluice::broker
