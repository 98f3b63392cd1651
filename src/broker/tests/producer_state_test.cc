#include "broker/producer_state.h"

#include <gtest/gtest.h>

#include <future>

#include "storage/log.h"
#include "storage/testing/batch_builder.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace producer_state_test {
namespace {

using Verdict = ProducerStateTable::Verdict;

ProducerBatch B(int64_t pid, int16_t epoch, int32_t seq, int32_t count) {
  return ProducerBatch{pid, epoch, seq, count};
}

// A durable log in a temporary directory, appended to one batch at a time.
struct TestLog {
  explicit TestLog(uint64_t segment_bytes = 1 << 20) {
    storage::LogOptions opts;
    opts.executor = &executor;
    opts.flush_policy = storage::FlushPolicy::kDurable;
    opts.segment_bytes = segment_bytes;
    auto opened = storage::PartitionLog::Open(dir.path(), opts);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (opened.ok()) log = std::move(*opened);
  }
  // Appends and waits for the durable ack.
  void Append(const storage::testing::BatchSpec& spec) {
    std::promise<void> done;
    storage::AppendOptions o;
    o.on_ack = [&](const Status&, const storage::AppendInfo&) { done.set_value(); };
    ASSERT_TRUE(log->Append(storage::testing::BuildBatch(spec), std::move(o)).ok());
    done.get_future().wait();
  }

  storage::testing::TempDir dir{"producer-state"};
  storage::IoExecutor executor{2};
  std::unique_ptr<storage::PartitionLog> log;
};

// 12 batches of 3 records of producer 42 (epoch 1): offsets and sequences 0..35.
void AppendBatchesOf42(TestLog& log) {
  for (int i = 0; i < 12; ++i) {
    storage::testing::BatchSpec spec;
    for (int r = 0; r < 3; ++r) spec.records.push_back({"", std::string(200, 'v'), r});
    spec.producer_id = 42;
    spec.producer_epoch = 1;
    spec.base_sequence = i * 3;
    log.Append(spec);
  }
}

// A transactional batch.
ProducerBatch T(int64_t pid, int16_t epoch, int32_t seq, int32_t count) {
  ProducerBatch b{pid, epoch, seq, count};
  b.transactional = true;
  return b;
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

// A batch refused before it was written (the broker was still taking its leadership):
// the batches the client had sent behind it get the same retriable error, not
// OUT_OF_ORDER_SEQUENCE_NUMBER, until the refused one is written.
TEST(ProducerStateTest, AGapBehindARefusedBatchGetsTheRefusal) {
  constexpr int16_t kNotLeader = 6;
  ProducerStateTable t;
  t.OnAppended(B(7, 0, 0, 3), 100);
  t.OnRefused(B(7, 0, 3, 2), kNotLeader);  // the next batch: remembered
  t.OnRefused(B(7, 0, 5, 2), kNotLeader);  // behind it (not next): ignored
  auto gap = t.CheckBatch(B(7, 0, 5, 2));
  EXPECT_EQ(gap.verdict, Verdict::kEarlierRefused);
  EXPECT_EQ(gap.refused_error, kNotLeader);
  EXPECT_NE(gap.message.find("sequence 3 was refused"), std::string::npos) << gap.message;
  // Other gaps and the refused batch itself are what they were.
  EXPECT_EQ(t.CheckBatch(B(7, 0, 3, 2)).verdict, Verdict::kAppend);
  EXPECT_EQ(t.CheckBatch(B(7, 1, 4, 1)).verdict, Verdict::kOutOfOrder);  // another epoch
  EXPECT_EQ(t.CheckBatch(B(8, 0, 4, 1)).verdict, Verdict::kUnknownProducer);
  // Written at last: the next gap is out of order again.
  t.OnAppended(B(7, 0, 3, 2), 103);
  EXPECT_EQ(t.CheckBatch(B(7, 0, 5, 2)).verdict, Verdict::kAppend);
  EXPECT_EQ(t.CheckBatch(B(7, 0, 9, 2)).verdict, Verdict::kOutOfOrder);
}

TEST(ProducerStateTest, ARefusedFirstBatchCoversAnUnknownProducersGap) {
  constexpr int16_t kNotEnoughReplicas = 19;
  ProducerStateTable t;
  t.OnRefused(B(9, 0, 0, 4), kNotEnoughReplicas);
  auto gap = t.CheckBatch(B(9, 0, 4, 1));
  EXPECT_EQ(gap.verdict, Verdict::kEarlierRefused);
  EXPECT_EQ(gap.refused_error, kNotEnoughReplicas);
  // A new epoch's first batch refused: a gap in that epoch too.
  t.OnAppended(B(9, 0, 0, 4), 0);
  t.OnRefused(B(9, 1, 0, 2), kNotEnoughReplicas);
  EXPECT_EQ(t.CheckBatch(B(9, 1, 2, 2)).verdict, Verdict::kEarlierRefused);
  // A rebuild forgets refusals (they were this process's answers).
  TestLog log;
  ASSERT_TRUE(t.Rebuild(*log.log).ok());
  EXPECT_EQ(t.CheckBatch(B(9, 1, 2, 2)).verdict, Verdict::kUnknownProducer);
}

TEST(ProducerStateTest, EarlyGapsInALeadershipAreBoundedAndEndWithAWrite) {
  ProducerStateTable t;
  t.OnAppended(B(7, 0, 0, 3), 100);  // written before the leadership began at 200
  auto gap = t.CheckBatch(B(7, 0, 5, 1));
  EXPECT_EQ(gap.verdict, Verdict::kOutOfOrder);
  EXPECT_EQ(gap.expected_sequence, 3);
  for (int i = 0; i < ProducerStateTable::kMaxEarlyGaps; ++i) {
    EXPECT_TRUE(t.TakeEarlyGap(7, 4, 200)) << i;
  }
  EXPECT_FALSE(t.TakeEarlyGap(7, 4, 200));  // bounded
  EXPECT_TRUE(t.TakeEarlyGap(7, 5, 250));   // a new leadership counts again
  t.OnAppended(B(7, 0, 3, 2), 300);         // written in it: a gap is the producer's own
  EXPECT_FALSE(t.TakeEarlyGap(7, 5, 250));
  EXPECT_EQ(t.CheckBatch(B(9, 0, 4, 1)).expected_sequence, 0);  // unknown producer: 0 is due
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
  TestLog log(4096);
  ASSERT_NE(log.log, nullptr);
  AppendBatchesOf42(log);
  ProducerStateTable t;
  ASSERT_TRUE(t.Rebuild(*log.log).ok());
  EXPECT_EQ(t.producer_count(), 1u);
  auto dup = t.CheckBatch(B(42, 1, 33, 3));
  EXPECT_EQ(dup.verdict, Verdict::kDuplicate);
  EXPECT_EQ(dup.first_offset, 33);
  EXPECT_EQ(t.CheckBatch(B(42, 1, 36, 1)).verdict, Verdict::kAppend);
  EXPECT_EQ(t.CheckBatch(B(42, 1, 15, 3)).verdict,
            Verdict::kOutOfOrder);  // older than the last five
}

TEST(ProducerStateTest, ATransactionHoldsTheLsoUntilItsMarkerIsBelowTheHighWatermark) {
  ProducerStateTable t;
  EXPECT_EQ(t.LastStableOffset(10), 10);
  t.OnAppended(B(1, 0, 0, 5), 0);  // idempotent, not transactional: stable at once
  t.OnAppended(T(2, 0, 0, 3), 5);
  t.OnAppended(T(2, 0, 3, 3), 8);  // continues the open transaction
  EXPECT_EQ(t.OpenTxn(2), 5);
  EXPECT_EQ(t.LastStableOffset(11), 5);
  t.OnAppended(T(3, 0, 0, 2), 11);
  EXPECT_EQ(t.open_txn_count(), 2u);
  EXPECT_EQ(t.LastStableOffsetWithout(2), 11);
  EXPECT_EQ(t.LastStableOffsetWithout(3), 5);
  t.OnMarker(2, 0, 0, 13);
  EXPECT_EQ(t.OpenTxn(2), std::nullopt);
  // The marker at 13 is not below the HW yet: the decided transaction still holds it.
  EXPECT_EQ(t.LastStableOffset(13), 5);
  EXPECT_EQ(t.LastStableOffset(14), 11);
  t.OnMarker(3, 0, 0, 14);
  EXPECT_EQ(t.LastStableOffset(15), 15);
  EXPECT_EQ(t.open_txn_count(), 0u);
  EXPECT_EQ(t.LastStableOffsetWithout(2), -1);
}

TEST(ProducerStateTest, APlainBatchDuringAnOpenTransactionIsInvalidTxnState) {
  ProducerStateTable t;
  t.OnAppended(T(4, 0, 0, 2), 0);
  auto c = t.CheckBatch(B(4, 0, 2, 1));
  EXPECT_EQ(c.verdict, Verdict::kInvalidTxnState);
  EXPECT_NE(c.message.find("transaction open here since offset 0"), std::string::npos) << c.message;
  EXPECT_EQ(t.CheckBatch(T(4, 0, 2, 1)).verdict, Verdict::kAppend);
  // A retry of the transactional batch is still a duplicate.
  EXPECT_EQ(t.CheckBatch(T(4, 0, 0, 2)).verdict, Verdict::kDuplicate);
  t.OnMarker(4, 0, 0, 2);
  EXPECT_EQ(t.CheckBatch(B(4, 0, 2, 1)).verdict, Verdict::kAppend);
}

TEST(ProducerStateTest, MarkersCheckAndTakeEpochs) {
  ProducerStateTable t;
  EXPECT_EQ(t.CheckMarker(5, 0, 0), ProducerStateTable::MarkerVerdict::kOk);  // unknown producer
  t.OnAppended(T(5, 2, 0, 1), 0);
  EXPECT_EQ(t.CheckMarker(5, 1, 0), ProducerStateTable::MarkerVerdict::kFenced);
  EXPECT_EQ(t.CheckMarker(5, 2, 0), ProducerStateTable::MarkerVerdict::kOk);
  // An abort by timeout bumps the epoch (KIP-360): the zombie's next batch is fenced.
  t.OnMarker(5, 3, 4, 1);
  EXPECT_EQ(t.CheckBatch(T(5, 2, 1, 1)).verdict, Verdict::kFenced);
  EXPECT_EQ(t.CheckBatch(T(5, 3, 0, 1)).verdict, Verdict::kAppend);
  EXPECT_EQ(t.CheckMarker(5, 3, 3), ProducerStateTable::MarkerVerdict::kCoordinatorFenced);
  EXPECT_EQ(t.CheckMarker(5, 3, 4), ProducerStateTable::MarkerVerdict::kOk);
  // A marker with no open transaction changes nothing but epochs.
  t.OnMarker(5, 3, 4, 2);
  EXPECT_EQ(t.LastStableOffset(3), 3);
  auto views = t.Describe();
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].epoch, 3);
  EXPECT_EQ(views[0].coordinator_epoch, 4);
  EXPECT_EQ(views[0].txn_start_offset, -1);
}

TEST(ProducerStateTest, VerificationEndsWithAMarker) {
  ProducerStateTable t;
  uint64_t token = t.StartVerification(6);
  EXPECT_NE(token, 0u);
  EXPECT_EQ(t.StartVerification(6), token);  // a second request verifying meanwhile
  EXPECT_TRUE(t.Verified(6, token));
  EXPECT_FALSE(t.Verified(6, 0));
  EXPECT_FALSE(t.Verified(6, token + 1));
  // The coordinator ended the verified transaction before the batch came: refused.
  t.OnMarker(6, 0, 0, 0);
  EXPECT_FALSE(t.Verified(6, token));
  EXPECT_NE(t.StartVerification(6), token);
  token = t.StartVerification(6);
  t.OnAppended(T(6, 0, 0, 1), 1);
  // Open here now: nothing to verify.
  EXPECT_EQ(t.StartVerification(6), 0u);
  EXPECT_TRUE(t.Verified(6, 0));
}

TEST(ProducerStateTest, TransactionsRebuiltFromTheLog) {
  TestLog log;
  ASSERT_NE(log.log, nullptr);
  auto append = [&](const storage::testing::BatchSpec& spec) { log.Append(spec); };
  auto data = [&](int64_t pid, int32_t seq) {
    storage::testing::BatchSpec spec;
    spec.records = {{"k", "v", 0}, {"k", "v", 1}};
    spec.attributes = storage::kAttrTransactional;
    spec.producer_id = pid;
    spec.producer_epoch = 0;
    spec.base_sequence = seq;
    append(spec);
  };
  auto marker = [&](int64_t pid, int16_t epoch, bool commit) {
    storage::testing::BatchSpec spec;
    spec.records = {{std::string{0, 0, 0, static_cast<char>(commit ? 1 : 0)},
                     std::string{0, 0, 0, 0, 0, 9}, 0}};
    spec.attributes = storage::kAttrTransactional | storage::kAttrControl;
    spec.producer_id = pid;
    spec.producer_epoch = epoch;
    append(spec);
  };
  data(1, 0);           // 0-1
  data(2, 0);           // 2-3
  marker(1, 0, true);   // 4
  data(1, 2);           // 5-6: a second transaction of producer 1
  marker(2, 1, false);  // 7: aborted with a bumped epoch
  ProducerStateTable t;
  ASSERT_TRUE(t.Rebuild(*log.log).ok());
  EXPECT_EQ(t.OpenTxn(1), 5);
  EXPECT_EQ(t.OpenTxn(2), std::nullopt);
  EXPECT_EQ(t.LastStableOffset(log.log->written_end_offset()), 5);
  EXPECT_EQ(t.CheckMarker(2, 0, 9), ProducerStateTable::MarkerVerdict::kFenced);
  EXPECT_EQ(t.CheckMarker(2, 1, 8), ProducerStateTable::MarkerVerdict::kCoordinatorFenced);
  EXPECT_EQ(t.CheckBatch(B(1, 0, 4, 1)).verdict, Verdict::kInvalidTxnState);
}

// A snapshot (design 0025, decision 8) holds what a replay would: duplicates, the next
// sequence, epochs and an open transaction; a rebuild from it replays only what follows.
TEST(ProducerStateTest, ASnapshotRoundTripsAndARebuildStartsFromIt) {
  ProducerStateTable t;
  t.OnAppended(B(7, 2, 0, 3), 100);
  t.OnAppended(B(7, 2, 3, 2), 103);
  t.OnAppended(T(8, 0, 0, 1), 105);  // opens 8's transaction
  const std::string text = t.Snapshot(106, true);
  ProducerStateTable u;
  Result<ProducerStateTable::SnapshotInfo> info = u.LoadSnapshot(text);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->offset, 106);
  EXPECT_TRUE(info->complete);
  EXPECT_EQ(u.Snapshot(106, true), text);
  auto dup = u.CheckBatch(B(7, 2, 0, 3));
  EXPECT_EQ(dup.verdict, Verdict::kDuplicate);
  EXPECT_EQ(dup.first_offset, 100);
  EXPECT_EQ(u.CheckBatch(B(7, 2, 5, 1)).verdict, Verdict::kAppend);
  EXPECT_EQ(u.CheckBatch(B(7, 1, 5, 1)).verdict, Verdict::kFenced);
  EXPECT_EQ(u.OpenTxn(8), std::optional<int64_t>(105));
  EXPECT_EQ(u.LastStableOffset(200), 105);

  // A log of 12 batches of producer 42 at offsets 0..35; a snapshot at 18 that says
  // producer 99 wrote there (not in the log): a rebuild from it keeps 99 and replays
  // 42's batches from 18 only.
  TestLog log(4096);
  ASSERT_NE(log.log, nullptr);
  AppendBatchesOf42(log);
  ProducerStateTable at18;
  at18.OnAppended(B(99, 0, 0, 1), 17);
  ProducerStateTable r;
  ASSERT_TRUE(r.Rebuild(*log.log, at18.Snapshot(18, true)).ok());
  EXPECT_EQ(r.CheckBatch(B(99, 0, 1, 1)).verdict, Verdict::kAppend);
  EXPECT_EQ(r.CheckBatch(B(42, 1, 33, 3)).verdict, Verdict::kDuplicate);
  EXPECT_EQ(r.CheckBatch(B(42, 1, 36, 1)).verdict, Verdict::kAppend);
  // Past the log's end, or malformed: not used (a full replay).
  ProducerStateTable past;
  ASSERT_TRUE(past.Rebuild(*log.log, at18.Snapshot(37, true)).ok());
  EXPECT_EQ(past.CheckBatch(B(99, 0, 1, 1)).verdict, Verdict::kUnknownProducer);
  ASSERT_TRUE(past.Rebuild(*log.log, "{not json").ok());
  EXPECT_EQ(past.producer_count(), 1u);
}

TEST(ProducerStateTest, AMalformedSnapshotIsRefusedAndChangesNothing) {
  ProducerStateTable t;
  t.OnAppended(B(7, 0, 0, 1), 0);
  const std::string good =
      R"({"version":1,"offset":10,"complete":true,"producers":[{"id":5,"epoch":0,)"
      R"("coordinator_epoch":-1,"txn_first_offset":-1,"last_timestamp":1,"batches":[[0,0,3,3]]}]})";
  ASSERT_TRUE(ProducerStateTable().LoadSnapshot(good).ok());
  for (
      const char* bad : {
          "",
          "[]",
          "null",
          R"({"version":2,"offset":10,"complete":true,"producers":[]})",
          R"({"version":1,"offset":-1,"complete":true,"producers":[]})",
          R"({"version":1,"offset":10,"complete":1,"producers":[]})",
          R"({"version":1,"offset":10,"complete":true,"producers":{}})",
          R"({"version":1,"offset":10,"complete":true,"producers":[{"id":5}]})",
          R"({"version":1,"offset":10,"complete":true,"producers":[{"id":5,"epoch":70000,)"
          R"("coordinator_epoch":-1,"txn_first_offset":-1,"last_timestamp":1,"batches":[]}]})",
          // A batch at or past the snapshot's offset, a reversed one, one of 3 numbers.
          R"({"version":1,"offset":10,"complete":true,"producers":[{"id":5,"epoch":0,)"
          R"("coordinator_epoch":-1,"txn_first_offset":-1,"last_timestamp":1,"batches":[[0,0,10,10]]}]})",
          R"({"version":1,"offset":10,"complete":true,"producers":[{"id":5,"epoch":0,)"
          R"("coordinator_epoch":-1,"txn_first_offset":-1,"last_timestamp":1,"batches":[[0,0,4,3]]}]})",
          R"({"version":1,"offset":10,"complete":true,"producers":[{"id":5,"epoch":0,)"
          R"("coordinator_epoch":-1,"txn_first_offset":-1,"last_timestamp":1,"batches":[[0,0,3]]}]})",
          // An open transaction past the offset; a producer twice.
          R"({"version":1,"offset":10,"complete":true,"producers":[{"id":5,"epoch":0,)"
          R"("coordinator_epoch":-1,"txn_first_offset":10,"last_timestamp":1,"batches":[]}]})",
          R"({"version":1,"offset":10,"complete":true,"producers":[{"id":5,"epoch":0,)"
          R"("coordinator_epoch":-1,"txn_first_offset":-1,"last_timestamp":1,"batches":[]},{"id":5,"epoch":0,)"
          R"("coordinator_epoch":-1,"txn_first_offset":-1,"last_timestamp":1,"batches":[]}]})",
      }) {
    Result<ProducerStateTable::SnapshotInfo> info = t.LoadSnapshot(bad);
    EXPECT_FALSE(info.ok()) << bad;
    EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(t.producer_count(), 1u);
  EXPECT_EQ(t.CheckBatch(B(7, 0, 1, 1)).verdict, Verdict::kAppend);
}

}  // namespace
}  // namespace producer_state_test
}  // namespace sluice::broker
