// The aborted-transaction index: its entries, the control record key, and the .txnindex
// files of a PartitionLog through appends, rolls, reopen, truncation, retention and
// simulated power loss.
#include "storage/txn_index.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "storage/batch_header.h"
#include "storage/log.h"
#include "storage/testing/batch_builder.h"
#include "storage/testing/fault_env.h"
#include "storage/testing/files.h"

namespace sluice::storage {
namespace {

using testing::BatchSpec;
using testing::BuildBatch;
using testing::FaultEnv;
using testing::TempDir;

std::string ControlKey(int16_t type) { return std::string{0, 0, 0, static_cast<char>(type)}; }

// A transactional data batch of `n` records of producer `pid`.
std::vector<uint8_t> TxnData(int64_t pid, int n, size_t value_bytes = 100) {
  BatchSpec spec;
  for (int i = 0; i < n; ++i) spec.records.push_back({"k", std::string(value_bytes, 'x'), i});
  spec.attributes = kAttrTransactional;
  spec.producer_id = pid;
  spec.producer_epoch = 0;
  spec.base_sequence = 0;
  return BuildBatch(spec);
}

// A marker as the coordinator writes it: control + transactional, one record.
std::vector<uint8_t> Marker(int64_t pid, ControlType type) {
  BatchSpec spec;
  spec.records.push_back(
      {ControlKey(static_cast<int16_t>(type)), std::string{0, 0, 0, 0, 0, 7}, 0});
  spec.attributes = kAttrTransactional | kAttrControl;
  spec.producer_id = pid;
  spec.producer_epoch = 0;
  return BuildBatch(spec);
}

TEST(TxnIndexTest, EntriesRoundTripInKafkasLayout) {
  AbortedTxn t{0x0102030405060708, 10, 20, 21};
  uint8_t buf[kAbortedTxnSize];
  EncodeAbortedTxn(t, buf);
  EXPECT_EQ(buf[0], 0);
  EXPECT_EQ(buf[1], 0);
  EXPECT_EQ(buf[2], 0x01);
  EXPECT_EQ(buf[9], 0x08);
  EXPECT_EQ(LoadBE64(buf + 18), 20u);
  TxnIndexContents c = ParseTxnIndex(buf);
  ASSERT_EQ(c.entries.size(), 1u);
  EXPECT_EQ(c.entries[0], t);
  EXPECT_TRUE(c.problem.empty());
}

TEST(TxnIndexTest, ParseStopsAtATornEntryOrAnUnknownVersion) {
  std::vector<uint8_t> bytes(3 * kAbortedTxnSize);
  for (int i = 0; i < 3; ++i) EncodeAbortedTxn({1, i * 10, i * 10 + 5, i * 10 + 6}, &bytes[i * 34]);
  TxnIndexContents torn = ParseTxnIndex(std::span(bytes).first(2 * kAbortedTxnSize + 7));
  EXPECT_EQ(torn.entries.size(), 2u);
  EXPECT_NE(torn.problem.find("7 trailing bytes"), std::string::npos) << torn.problem;
  bytes[kAbortedTxnSize + 1] = 1;  // version 1
  TxnIndexContents versioned = ParseTxnIndex(bytes);
  EXPECT_EQ(versioned.entries.size(), 1u);
  EXPECT_NE(versioned.problem.find("version 1"), std::string::npos) << versioned.problem;
  bytes[kAbortedTxnSize] = 0xff;  // a negative version
  EXPECT_EQ(ParseTxnIndex(bytes).entries.size(), 1u);
  EXPECT_TRUE(ParseTxnIndex({}).entries.empty());
}

TEST(TxnIndexTest, CollectKeepsOverlapsAndStopsAtAnLsoPastTheRange) {
  std::vector<AbortedTxn> entries = {
      {1, 0, 4, 5},     // before the range
      {2, 3, 12, 13},   // overlaps
      {3, 14, 30, 31},  // starts inside
      {4, 40, 50, 51},  // starts past: not taken, its LSO stops the search
      {5, 60, 70, 71},
  };
  std::vector<AbortedTxn> out;
  EXPECT_TRUE(CollectAbortedTxns(entries, 5, 35, &out));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].producer_id, 2);
  EXPECT_EQ(out[1].producer_id, 3);
  out.clear();
  EXPECT_FALSE(CollectAbortedTxns(entries, 0, 100, &out));
  EXPECT_EQ(out.size(), 5u);
}

TEST(TxnIndexTest, ControlTypeIsReadFromTheRecordKey) {
  for (ControlType type : {ControlType::kAbort, ControlType::kCommit}) {
    std::vector<uint8_t> batch = Marker(9, type);
    auto records = std::span<const uint8_t>(batch).subspan(kBatchHeaderSize);
    int32_t coordinator_epoch = -1;
    EXPECT_EQ(ParseControlType(records, &coordinator_epoch), static_cast<int16_t>(type));
    EXPECT_EQ(coordinator_epoch, 7);
    // A value cut short: the type still, the epoch not.
    coordinator_epoch = -1;
    EXPECT_EQ(ParseControlType(records.first(12), &coordinator_epoch), static_cast<int16_t>(type));
    EXPECT_EQ(coordinator_epoch, -1);
    // Every truncation of the key fails cleanly.
    for (size_t n = 0; n < records.size() && n < 9; ++n) {
      EXPECT_EQ(ParseControlType(records.first(n)), std::nullopt) << n;
    }
  }
}

TEST(TxnIndexTest, ControlTypeRejectsOtherKeys) {
  BatchSpec spec;
  spec.records.push_back({std::string{0, 1, 0, 0}, "v", 0});  // key version 1
  std::vector<uint8_t> v1 = BuildBatch(spec);
  EXPECT_EQ(ParseControlType(std::span<const uint8_t>(v1).subspan(kBatchHeaderSize)), std::nullopt);
  spec.records[0].key = "ab";  // too short
  std::vector<uint8_t> short_key = BuildBatch(spec);
  EXPECT_EQ(ParseControlType(std::span<const uint8_t>(short_key).subspan(kBatchHeaderSize)),
            std::nullopt);
  spec.records[0].key = "";  // null key (length -1)
  std::vector<uint8_t> null_key = BuildBatch(spec);
  EXPECT_EQ(ParseControlType(std::span<const uint8_t>(null_key).subspan(kBatchHeaderSize)),
            std::nullopt);
  const uint8_t negative_length[] = {0x01, 0, 0, 0, 0x08, 0, 0, 0, 0};  // length -1
  EXPECT_EQ(ParseControlType(negative_length), std::nullopt);
  const uint8_t endless_varint[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(ParseControlType(endless_varint), std::nullopt);
}

class TxnLogTest : public ::testing::Test {
 protected:
  LogOptions Options(Env* env = Env::Posix()) {
    LogOptions o;
    o.env = env;
    o.executor = &executor_;
    o.flush_policy = FlushPolicy::kDurable;
    o.segment_bytes = 1024;
    return o;
  }

  // Appends and waits for the durable ack; returns the base offset.
  int64_t Append(PartitionLog& log, const std::vector<uint8_t>& batch,
                 std::optional<AbortedTxn> aborted = std::nullopt) {
    std::promise<Status> done;
    AppendOptions o;
    o.aborted_txn = aborted;
    o.on_ack = [&](const Status& st, const AppendInfo&) { done.set_value(st); };
    auto info = log.Append(batch, std::move(o));
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    if (!info.ok()) return -1;
    Status st = done.get_future().get();
    EXPECT_TRUE(st.ok()) << st.ToString();
    return info->base_offset;
  }

  std::vector<AbortedTxn> All(PartitionLog& log) {
    auto all = log.CollectAbortedTxns(0, INT64_MAX);
    EXPECT_TRUE(all.ok()) << all.status().ToString();
    return all.ok() ? *all : std::vector<AbortedTxn>{};
  }

  // Writes three transactions of producers 1, 2, 3 that interleave; 1 and 3 abort.
  // Returns the expected index entries.
  std::vector<AbortedTxn> WriteInterleaved(PartitionLog& log) {
    int64_t first1 = Append(log, TxnData(1, 3));
    int64_t first2 = Append(log, TxnData(2, 3));
    Append(log, TxnData(1, 3));
    // Producer 2 is still open: the LSO after 1's abort is its first offset.
    int64_t abort1 = Append(log, Marker(1, ControlType::kAbort), AbortedTxn{1, first1, -1, first2});
    Append(log, Marker(2, ControlType::kCommit));
    int64_t first3 = Append(log, TxnData(3, 5));
    int64_t abort3 = Append(log, Marker(3, ControlType::kAbort), AbortedTxn{3, first3, -1, -1});
    return {{1, first1, abort1, first2}, {3, first3, abort3, abort3 + 1}};
  }

  IoExecutor executor_{2};
  TempDir dir_{"txn-index"};
};

TEST_F(TxnLogTest, AbortsAreIndexedInTheSegmentHoldingTheMarker) {
  auto log = PartitionLog::Open(dir_.path(), Options());
  ASSERT_TRUE(log.ok());
  std::vector<AbortedTxn> want = WriteInterleaved(**log);
  EXPECT_EQ(All(**log), want);
  ASSERT_GT((*log)->segment_count(), 1);
  // The marker of producer 3 is in a later segment than its first batch; its entry is
  // in the marker's segment.
  int found = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    if (e.path().extension() != ".txnindex") continue;
    auto bytes = testing::ReadFileBytes(e.path());
    TxnIndexContents c = ParseTxnIndex(bytes);
    int64_t base = std::stoll(e.path().stem().string());
    for (const AbortedTxn& t : c.entries) {
      EXPECT_GE(t.last_offset, base);
      ++found;
    }
  }
  EXPECT_EQ(found, 2);
  // A range before the second abort: only the first; Kafka's stop after an LSO at or
  // past the range's end.
  auto early = (*log)->CollectAbortedTxns(0, want[0].first_offset + 1);
  ASSERT_TRUE(early.ok());
  ASSERT_EQ(early->size(), 1u);
  EXPECT_EQ((*early)[0], want[0]);
  auto late = (*log)->CollectAbortedTxns(want[1].first_offset, want[1].last_offset + 1);
  ASSERT_TRUE(late.ok());
  ASSERT_EQ(late->size(), 1u);
  EXPECT_EQ((*late)[0], want[1]);
  // Reopened: the same entries.
  log->reset();
  auto again = PartitionLog::Open(dir_.path(), Options());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(All(**again), want);
  EXPECT_EQ((*again)->recovery().indexes_rebuilt, 1);  // the last segment's offset index only
}

TEST_F(TxnLogTest, HeaderWalkShowsTheControlType) {
  auto log = PartitionLog::Open(dir_.path(), Options());
  ASSERT_TRUE(log.ok());
  WriteInterleaved(**log);
  std::vector<int16_t> types;
  ASSERT_TRUE((*log)
                  ->ForEachBatchHeader(0,
                                       [&](const BatchHeader& h, std::span<const uint8_t> raw) {
                                         if ((h.attributes & kAttrControl) != 0) {
                                           auto t = ParseControlType(raw.subspan(kBatchHeaderSize));
                                           types.push_back(t.value_or(-1));
                                         }
                                         return true;
                                       })
                  .ok());
  EXPECT_EQ(types, (std::vector<int16_t>{0, 1, 0}));
}

TEST_F(TxnLogTest, TruncationCutsEntriesWhoseMarkersGo) {
  auto log = PartitionLog::Open(dir_.path(), Options());
  ASSERT_TRUE(log.ok());
  std::vector<AbortedTxn> want = WriteInterleaved(**log);
  ASSERT_TRUE((*log)->TruncateTo(want[1].last_offset).ok());
  EXPECT_EQ(All(**log), std::vector<AbortedTxn>{want[0]});
  // New aborts after the cut are appended in order.
  int64_t first = Append(**log, TxnData(4, 2));
  int64_t abort = Append(**log, Marker(4, ControlType::kAbort), AbortedTxn{4, first, -1, -1});
  std::vector<AbortedTxn> now = All(**log);
  ASSERT_EQ(now.size(), 2u);
  EXPECT_EQ(now[1], (AbortedTxn{4, first, abort, abort + 1}));
  ASSERT_TRUE((*log)->TruncateTo(want[0].last_offset).ok());
  EXPECT_TRUE(All(**log).empty());
  log->reset();
  auto again = PartitionLog::Open(dir_.path(), Options());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(All(**again).empty());
}

TEST_F(TxnLogTest, DeletedWithTheirSegments) {
  auto log = PartitionLog::Open(dir_.path(), Options());
  ASSERT_TRUE(log.ok());
  std::vector<AbortedTxn> want = WriteInterleaved(**log);
  for (int i = 0; i < 30; ++i) Append(**log, TxnData(7, 1));
  auto count_files = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path()))
      n += e.path().extension() == ".txnindex";
    return n;
  };
  EXPECT_EQ(count_files(), (*log)->segment_count());
  auto start = (*log)->DeleteRecordsBefore((*log)->written_end_offset());
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(count_files(), (*log)->segment_count());
  EXPECT_TRUE(All(**log).empty());
}

TEST_F(TxnLogTest, RecoveryDropsEntriesWithoutMarkersAndTornTails) {
  std::vector<AbortedTxn> want;
  std::string last_index;
  {
    auto log = PartitionLog::Open(dir_.path(), Options());
    ASSERT_TRUE(log.ok());
    want = WriteInterleaved(**log);
  }
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    if (e.path().extension() == ".txnindex") last_index = std::max(last_index, e.path().string());
  }
  // An entry for a marker past the end (its marker was lost) and half an entry.
  auto bytes = testing::ReadFileBytes(last_index);
  size_t had = bytes.size();
  bytes.resize(had + kAbortedTxnSize + 10);
  EncodeAbortedTxn({8, want[1].last_offset + 1, want[1].last_offset + 5, 0}, &bytes[had]);
  testing::WriteFileBytes(last_index, bytes);
  auto log = PartitionLog::Open(dir_.path(), Options());
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(All(**log), want);
  EXPECT_EQ(testing::ReadFileBytes(last_index).size(), had);
  // Appends continue after the kept entries.
  int64_t first = Append(**log, TxnData(9, 1));
  int64_t abort = Append(**log, Marker(9, ControlType::kAbort), AbortedTxn{9, first, -1, -1});
  EXPECT_EQ(All(**log).back(), (AbortedTxn{9, first, abort, abort + 1}));
}

// What the broker does at open when an index file was lost: the entries come back from
// the markers it read, in marker order, once.
TEST_F(TxnLogTest, MissingEntriesAreAddedBack) {
  std::vector<AbortedTxn> want;
  {
    auto log = PartitionLog::Open(dir_.path(), Options());
    ASSERT_TRUE(log.ok());
    want = WriteInterleaved(**log);
  }
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    if (e.path().extension() == ".txnindex") std::filesystem::remove(e.path());
  }
  auto log = PartitionLog::Open(dir_.path(), Options());
  ASSERT_TRUE(log.ok());
  EXPECT_TRUE(All(**log).empty());
  // Given in reverse order, with one whose marker is not in the log.
  std::vector<AbortedTxn> given = {want[1], want[0], {9, 500, 900, 901}};
  auto added = (*log)->AddMissingAbortedTxns(given);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(*added, 2);
  EXPECT_EQ(All(**log), want);
  added = (*log)->AddMissingAbortedTxns(given);
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(*added, 0);
  // Kept across a reopen, and appends go after them.
  log->reset();
  auto again = PartitionLog::Open(dir_.path(), Options());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(All(**again), want);
  int64_t first = Append(**again, TxnData(4, 1));
  int64_t abort = Append(**again, Marker(4, ControlType::kAbort), AbortedTxn{4, first, -1, -1});
  EXPECT_EQ(All(**again).back(), (AbortedTxn{4, first, abort, abort + 1}));
}

// A power loss at every disk call of an abort's append: after recovery every marker in
// the log has its entry and every entry its marker.
TEST_F(TxnLogTest, PowerLossLeavesMarkersAndEntriesInAgreement) {
  for (uint64_t point = 0; point < 12; ++point) {
    for (testing::TearMode mode : {testing::TearMode::kDropAll, testing::TearMode::kKeepPrefix}) {
      TempDir dir("txn-crash");
      FaultEnv env(Env::Posix());
      int64_t first = -1;
      {
        LogOptions o = Options(&env);
        o.segment_bytes = 1 << 20;
        auto log = PartitionLog::Open(dir.path(), o);
        ASSERT_TRUE(log.ok());
        std::promise<void> data_done;
        AppendOptions d;
        d.on_ack = [&](const Status&, const AppendInfo&) { data_done.set_value(); };
        auto info = (*log)->Append(TxnData(5, 4), std::move(d));
        ASSERT_TRUE(info.ok());
        data_done.get_future().wait();
        first = info->base_offset;
        env.CrashAfter(point);
        std::promise<void> done;
        AppendOptions o2;
        o2.aborted_txn = AbortedTxn{5, first, -1, -1};
        o2.on_ack = [&](const Status&, const AppendInfo&) { done.set_value(); };
        auto marker = (*log)->Append(Marker(5, ControlType::kAbort), std::move(o2));
        if (marker.ok()) done.get_future().wait();
        env.SimulateCrash();
      }
      ASSERT_TRUE(env.DropUnsyncedData(point, mode).ok());
      env.Reset();
      auto log = PartitionLog::Open(dir.path(), Options(&env));
      ASSERT_TRUE(log.ok()) << log.status().ToString();
      bool has_marker = false;
      ASSERT_TRUE((*log)
                      ->ForEachBatchHeader(0,
                                           [&](const BatchHeader& h, std::span<const uint8_t>) {
                                             has_marker |= (h.attributes & kAttrControl) != 0;
                                             return true;
                                           })
                      .ok());
      std::vector<AbortedTxn> entries = All(**log);
      SCOPED_TRACE(testing::TearModeName(mode));
      SCOPED_TRACE(point);
      if (has_marker) {
        ASSERT_EQ(entries.size(), 1u);
        EXPECT_EQ(entries[0].first_offset, first);
      } else {
        EXPECT_TRUE(entries.empty());
      }
    }
  }
}

}  // namespace
}  // namespace sluice::storage
