// The internal logs as compacted topics: OffsetLog and TxnLog cleaned by a real
// compaction::LogCleaner over real files. Many writes over few keys cleaned and reopened
// against an oracle; the log bounded over a long run; cleaning racing appends;
// tombstones gone after delete.retention.ms; pending transactional offsets surviving
// cleaning and cleaned markers never bringing a transaction back; data directories
// written by the snapshots of earlier versions; InternalLog over a log owned elsewhere.
#include "broker/internal_log.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "broker/offset_log.h"
#include "broker/txn_log.h"
#include "compaction/cleaner.h"
#include "kafka/protocol/records.h"
#include "storage/batch_header.h"
#include "storage/io_executor.h"
#include "storage/log.h"
#include "storage/log_swap.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace internal_log_test {
namespace {

using storage::testing::TempDir;

constexpr uint64_t kSegmentBytes = 4096;
constexpr int64_t kRetentionMs = 1000;

Status WaitDurable(const std::function<Status(InternalLog::Done)>& start) {
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future();
  RETURN_IF_ERROR(start([p](const Status& s) { p->set_value(s); }));
  if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    return InternalError("no durable callback");
  }
  return f.get();
}

CommittedOffset Value(int64_t offset) {
  return CommittedOffset{offset, 3, "m" + std::to_string(offset), 1'700'000'000'000 + offset};
}

// What a scan of the files shows of one batch.
struct Scanned {
  storage::BatchHeader header;
  int64_t producer_id = -1;
  bool control = false;
  bool transactional = false;
  int records = 0;
  int tombstones = 0;
};

// What an OffsetLog should hold: visible offsets, group records, pending offsets.
struct OffsetModel {
  std::map<std::pair<std::string, TopicPartition>, CommittedOffset> offsets;
  std::map<std::string, GroupRecord> groups;
  std::map<std::tuple<int64_t, std::string, TopicPartition>, CommittedOffset> pending;
  bool operator==(const OffsetModel&) const = default;
};

OffsetModel StateOf(const OffsetLog& log) {
  OffsetModel m;
  for (const std::string& g : log.GroupIds()) {
    if (const auto* offsets = log.Offsets(g)) {
      for (const auto& [tp, v] : *offsets) m.offsets[{g, tp}] = v;
    }
    if (const GroupRecord* r = log.Group(g)) m.groups[g] = *r;
  }
  for (int64_t pid : log.OpenProducers()) {
    for (const std::string& g : log.GroupIds()) {
      for (int p = 0; p < 8; ++p) {
        for (const char* t : {"t0", "t1", "t"}) {
          TopicPartition tp{t, p};
          if (const CommittedOffset* v = log.FindPending(pid, g, tp)) m.pending[{pid, g, tp}] = *v;
        }
      }
    }
  }
  return m;
}

class InternalLogTest : public ::testing::Test {
 protected:
  InternalLogTest() {
    compaction::CleanerOptions co;
    co.clock = &clock_;
    co.dedupe_buffer_bytes = 8 << 20;
    co.backoff_ms = 5;
    cleaner_ = std::make_unique<compaction::LogCleaner>(co);
  }
  ~InternalLogTest() override { cleaner_->Stop(); }

  OffsetLogOptions OffsetOptions() {
    OffsetLogOptions o;
    o.dir = dir_.path() + "/" + kOffsetsLogName;
    o.executor = &executor_;
    o.flush_policy = storage::FlushPolicy::kDurable;
    o.segment_bytes = kSegmentBytes;
    o.cleaner = cleaner_.get();
    o.delete_retention_ms = kRetentionMs;
    return o;
  }
  TxnLogOptions TxnOptions() {
    TxnLogOptions o;
    o.dir = dir_.path() + "/" + kTxnLogName;
    o.executor = &executor_;
    o.segment_bytes = kSegmentBytes;
    o.cleaner = cleaner_.get();
    o.delete_retention_ms = kRetentionMs;
    return o;
  }
  std::unique_ptr<OffsetLog> OpenOffsets(OffsetLogOptions o) {
    auto log = OffsetLog::Open(std::move(o));
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    return log.ok() ? std::move(log).value() : nullptr;
  }
  std::unique_ptr<TxnLog> OpenTxn(TxnLogOptions o) {
    auto log = TxnLog::Open(std::move(o));
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    return log.ok() ? std::move(log).value() : nullptr;
  }
  static Status Write(OffsetLog& log, const OffsetWrite& w) {
    return WaitDurable([&](InternalLog::Done cb) { return log.Write(w, std::move(cb)); });
  }
  static Status Txn(OffsetLog& log, int64_t pid, int16_t epoch, const OffsetWrite& w) {
    return WaitDurable(
        [&](InternalLog::Done cb) { return log.WriteTxnOffsets(pid, epoch, w, std::move(cb)); });
  }
  static Status Marker(OffsetLog& log, int64_t pid, int16_t epoch, bool commit) {
    return WaitDurable([&](InternalLog::Done cb) {
      return log.CompleteTxn(pid, epoch, commit, 0, std::move(cb));
    });
  }
  static OffsetWrite One(const std::string& group, TopicPartition tp, CommittedOffset v) {
    OffsetWrite w;
    w.Commit(group, std::move(tp), std::move(v));
    return w;
  }
  // Plain commits of group "filler" until the log has `segments` more segments.
  static void Fill(OffsetLog& log, int segments) {
    const int target = log.segment_count() + segments;
    for (int i = 0; log.segment_count() < target; ++i) {
      ASSERT_LT(i, 100000);
      ASSERT_TRUE(Write(log, One("filler", {"t", i % 3}, Value(i))).ok());
    }
  }
  void Clean(const char* name) {
    auto stats = cleaner_->CleanNow(name);
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  }

  // Every batch in the log in `dir` (opened raw: its owner must be closed).
  std::vector<Scanned> Scan(const std::string& dir) {
    std::vector<Scanned> out;
    storage::LogOptions lo;
    lo.executor = &executor_;
    auto plog = storage::PartitionLog::Open(dir, lo);
    EXPECT_TRUE(plog.ok());
    if (!plog.ok()) return out;
    auto il = InternalLog::Attach(plog->get(), InternalLogOptions{.dir = dir});
    Status st = il->Replay(
        [&](const InternalBatch& b) {
          out.push_back(Scanned{b.header, b.producer_id, b.control(), b.transactional(),
                                b.header.records_count, 0});
          return !b.control();
        },
        [&](const InternalBatch&, int64_t, std::span<const uint8_t>,
            std::optional<std::span<const uint8_t>> value) {
          if (!value) ++out.back().tombstones;
        });
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(il->Close().ok());
    EXPECT_TRUE((*plog)->Close().ok());
    return out;
  }

  TempDir dir_{"internal-log-test"};
  storage::IoExecutor executor_{2};
  ManualClock clock_;
  std::unique_ptr<compaction::LogCleaner> cleaner_;
};

// Random commits, generations and deletions over 4 groups x 2 topics x 3 partitions,
// cleaned every 40 writes with the clock moving on, so tombstones expire along the way:
// the state after each cleaning and reopen is the oracle's, and the log stays bounded.
//
// The bound: after a cleaning, the closed segments hold at most one record per key (28
// keys), each possibly alone in its batch (61-byte header, at most 150 bytes of record
// here); the active segment, never cleaned, holds less than segment.bytes plus one write,
// and one more closed segment may still await its closing sync.
TEST_F(InternalLogTest, OffsetsCleanToTheOracleAndStayBounded) {
  constexpr int kKeys = 4 * 2 * 3 + 4;
  constexpr uint64_t kMaxWriteBytes = 10 * 150 + 61;
  constexpr uint64_t kBound = kKeys * (61 + 150) + 2 * (kSegmentBytes + kMaxWriteBytes);
  std::mt19937 rng(20);
  OffsetModel model;
  auto log = OpenOffsets(OffsetOptions());
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(cleaner_->Contains(kOffsetsLogName));
  uint64_t written = 0;
  int cleanings = 0;
  for (int round = 0; round < 600; ++round) {
    OffsetWrite w;
    for (int op = 0; op < 10; ++op) {
      const std::string group = "g" + std::to_string(rng() % 4);
      const TopicPartition tp{"t" + std::to_string(rng() % 2), static_cast<int32_t>(rng() % 3)};
      const unsigned kind = rng() % 100;
      if (kind < 80) {
        CommittedOffset v = Value(round * 10 + op);
        w.Commit(group, tp, v);
        model.offsets[{group, tp}] = v;
      } else if (kind < 94) {
        GroupRecord r{"consumer", round, "range", "m-" + std::to_string(round)};
        w.SetGroup(group, r);
        model.groups[group] = r;
      } else if (kind < 98) {
        w.DeleteGroup(group);
        std::erase_if(model.offsets, [&](const auto& e) { return e.first.first == group; });
        model.groups.erase(group);
      } else {
        w.DeleteTopic(tp.topic);
        std::erase_if(model.offsets,
                      [&](const auto& e) { return e.first.second.topic == tp.topic; });
      }
    }
    const uint64_t before = log->log_bytes();
    ASSERT_TRUE(Write(*log, w).ok());
    written += log->log_bytes() - before;
    if (round % 40 == 39) {
      Clean(kOffsetsLogName);
      ++cleanings;
      clock_.Advance(kRetentionMs / 2 + 1);
      EXPECT_LE(log->log_bytes(), kBound) << "after cleaning " << cleanings;
      ASSERT_EQ(StateOf(*log), model);
    }
  }
  // The bound means something: without cleaning the log would be far larger.
  EXPECT_GT(written, 10 * kBound);
  const uint64_t live = log->live_bytes();
  ASSERT_TRUE(log->Close().ok());
  EXPECT_FALSE(cleaner_->Contains(kOffsetsLogName));

  auto reopened = OpenOffsets(OffsetOptions());
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(reopened->skipped_records(), 0);
  EXPECT_EQ(StateOf(*reopened), model);
  EXPECT_EQ(reopened->live_bytes(), live);
}

// The cleaner's own thread cleans while commits are appended.
TEST_F(InternalLogTest, CleaningRacesAppends) {
  OffsetLogOptions o = OffsetOptions();
  o.min_cleanable_dirty_ratio = 0.1;
  OffsetModel model;
  auto log = OpenOffsets(o);
  ASSERT_NE(log, nullptr);
  cleaner_->Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int round = 0;
  while (round < 300 || cleaner_->cleanings() < 3) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the cleaner never cleaned";
    OffsetWrite w;
    for (int p = 0; p < 4; ++p) {
      const std::string group = "g" + std::to_string((round + p) % 3);
      const TopicPartition tp{"t", (round * 7 + p) % 5};
      w.Commit(group, tp, Value(round));
      model.offsets[{group, tp}] = Value(round);
    }
    if (round % 50 == 49) {
      w.DeleteGroup("g1");
      std::erase_if(model.offsets, [](const auto& e) { return e.first.first == "g1"; });
    }
    ASSERT_TRUE(Write(*log, w).ok());
    ++round;
  }
  ASSERT_EQ(StateOf(*log), model);
  ASSERT_TRUE(log->Close().ok());  // waits for a cleaning under way
  auto status = cleaner_->Status(kOffsetsLogName);
  EXPECT_FALSE(status.has_value());
  cleaner_->Stop();
  auto reopened = OpenOffsets(o);
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(reopened->skipped_records(), 0);
  EXPECT_EQ(StateOf(*reopened), model);
}

// A deleted group's tombstones stay through cleanings until delete.retention.ms after the
// cleaning that first kept them, then go; the group stays deleted.
TEST_F(InternalLogTest, TombstonesGoAfterDeleteRetention) {
  auto log = OpenOffsets(OffsetOptions());
  ASSERT_NE(log, nullptr);
  OffsetWrite w;
  for (int p = 0; p < 4; ++p) w.Commit("gone", {"t", p}, Value(p));
  w.SetGroup("gone", GroupRecord{"consumer", 3, "range", "m"});
  ASSERT_TRUE(Write(*log, w).ok());
  OffsetWrite d;
  d.DeleteGroup("gone");
  ASSERT_TRUE(Write(*log, d).ok());
  Fill(*log, 2);
  auto count_tombstones = [&] {
    EXPECT_TRUE(log->Close().ok());
    int n = 0;
    for (const Scanned& s : Scan(OffsetOptions().dir)) n += s.tombstones;
    log = OpenOffsets(OffsetOptions());
    EXPECT_EQ(log->Group("gone"), nullptr);
    EXPECT_EQ(log->Offsets("gone"), nullptr);
    return n;
  };
  Clean(kOffsetsLogName);
  EXPECT_EQ(count_tombstones(), 5);  // four offsets and the group record
  clock_.Advance(kRetentionMs - 1);
  Clean(kOffsetsLogName);
  EXPECT_EQ(count_tombstones(), 5);
  clock_.Advance(2);
  Clean(kOffsetsLogName);
  EXPECT_EQ(count_tombstones(), 0);
  EXPECT_EQ(log->skipped_records(), 0);
  EXPECT_NE(log->Offsets("filler"), nullptr);
}

// Offsets of a transaction still open survive any cleaning (the cleaner stops at the
// transaction's first record), and become visible at its commit; an aborted
// transaction's records are removed.
TEST_F(InternalLogTest, PendingTransactionalOffsetsSurviveCleaning) {
  auto log = OpenOffsets(OffsetOptions());
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(Write(*log, One("g", {"t", 0}, Value(1))).ok());
  ASSERT_TRUE(Txn(*log, 2, 0, One("g", {"t", 1}, Value(20))).ok());
  ASSERT_TRUE(Marker(*log, 2, 0, /*commit=*/false).ok());
  Fill(*log, 3);
  ASSERT_TRUE(Txn(*log, 1, 0, One("g", {"t", 0}, Value(10))).ok());
  Fill(*log, 3);
  const uint64_t before = log->log_bytes();
  Clean(kOffsetsLogName);
  EXPECT_LT(log->log_bytes(), before);
  clock_.Advance(kRetentionMs + 1);
  Clean(kOffsetsLogName);
  ASSERT_TRUE(log->Close().ok());
  int aborted_records = 0;
  for (const Scanned& s : Scan(OffsetOptions().dir)) {
    if (s.producer_id == 2 && !s.control) aborted_records += s.records;
  }
  EXPECT_EQ(aborted_records, 0);

  log = OpenOffsets(OffsetOptions());
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->skipped_records(), 0);
  EXPECT_EQ(log->OpenProducers(), (std::vector<int64_t>{1}));
  ASSERT_NE(log->FindPending(1, "g", {"t", 0}), nullptr);
  EXPECT_EQ(*log->FindPending(1, "g", {"t", 0}), Value(10));
  EXPECT_EQ(*log->Find("g", {"t", 0}), Value(1));
  EXPECT_EQ(log->Find("g", {"t", 1}), nullptr);
  EXPECT_EQ(log->ProducerEpoch(1), std::optional<int16_t>(0));

  ASSERT_TRUE(Marker(*log, 1, 0, /*commit=*/true).ok());
  Fill(*log, 2);
  Clean(kOffsetsLogName);
  ASSERT_TRUE(log->Close().ok());
  log = OpenOffsets(OffsetOptions());
  EXPECT_EQ(*log->Find("g", {"t", 0}), Value(10));
  EXPECT_EQ(log->pending_count(), 0u);
}

// Markers the cleaner removes (their transaction's records gone, delete.retention.ms
// past) never leave a transaction pending at replay: the cleaner keeps a marker as long
// as a batch of its transaction is in the log, a producer's last batch emptied included.
TEST_F(InternalLogTest, CleanedMarkersNeverBringATransactionBack) {
  auto log = OpenOffsets(OffsetOptions());
  ASSERT_NE(log, nullptr);
  // Producer 1: two committed transactions; the first one's record is then superseded.
  ASSERT_TRUE(Txn(*log, 1, 0, One("g", {"t", 0}, Value(10))).ok());
  ASSERT_TRUE(Marker(*log, 1, 0, true).ok());
  ASSERT_TRUE(Txn(*log, 1, 0, One("g", {"t", 1}, Value(11))).ok());
  ASSERT_TRUE(Marker(*log, 1, 0, true).ok());
  ASSERT_TRUE(Write(*log, One("g", {"t", 0}, Value(5))).ok());
  // Producer 3: aborted, then committed.
  ASSERT_TRUE(Txn(*log, 3, 0, One("g", {"t", 2}, Value(30))).ok());
  ASSERT_TRUE(Marker(*log, 3, 0, false).ok());
  ASSERT_TRUE(Txn(*log, 3, 1, One("g", {"t", 2}, Value(31))).ok());
  ASSERT_TRUE(Marker(*log, 3, 1, true).ok());
  // Producer 4: one transaction whose record is superseded: its last batch is kept empty.
  ASSERT_TRUE(Txn(*log, 4, 0, One("g", {"t", 3}, Value(40))).ok());
  ASSERT_TRUE(Marker(*log, 4, 0, true).ok());
  ASSERT_TRUE(Write(*log, One("g", {"t", 3}, Value(41))).ok());
  Fill(*log, 2);
  const OffsetModel before = StateOf(*log);
  Clean(kOffsetsLogName);
  clock_.Advance(kRetentionMs + 1);
  Clean(kOffsetsLogName);
  clock_.Advance(kRetentionMs + 1);
  Clean(kOffsetsLogName);
  ASSERT_TRUE(log->Close().ok());

  // On disk: every transactional batch still holding records (or kept empty) is followed
  // by a marker of its producer; the first transactions' markers of 1 and 3 are gone.
  std::vector<Scanned> batches = Scan(OffsetOptions().dir);
  std::map<int64_t, int> markers, open;
  bool empty_kept = false;
  for (const Scanned& s : batches) {
    if (s.producer_id < 0) continue;
    if (s.control) {
      ++markers[s.producer_id];
      open[s.producer_id] = 0;
    } else {
      open[s.producer_id] = 1;
      empty_kept = empty_kept || (s.producer_id == 4 && s.records == 0);
    }
  }
  for (const auto& [pid, n] : open) EXPECT_EQ(n, 0) << "producer " << pid << " left open";
  EXPECT_EQ(markers[1], 1);
  EXPECT_EQ(markers[3], 1);
  EXPECT_EQ(markers[4], 1);
  EXPECT_TRUE(empty_kept);

  log = OpenOffsets(OffsetOptions());
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->skipped_records(), 0);
  EXPECT_EQ(log->pending_count(), 0u);
  EXPECT_EQ(StateOf(*log), before);
  EXPECT_EQ(*log->Find("g", {"t", 0}), Value(5));
  EXPECT_EQ(*log->Find("g", {"t", 2}), Value(31));
  EXPECT_EQ(*log->Find("g", {"t", 3}), Value(41));
  EXPECT_EQ(log->ProducerEpoch(4), std::optional<int16_t>(0));
}

// A data directory as earlier versions left it: commits, then a snapshot (the live state
// appended again, pending offsets as transactional batches of their producer) and the
// log start moved to it by DeleteRecordsBefore, inside a segment; then more commits. It
// opens to the same state, cleans, and reopens to the same state.
TEST_F(InternalLogTest, OffsetsWrittenWithSnapshotsOpenAndClean) {
  const std::string dir = OffsetOptions().dir;
  OffsetModel model;
  {
    storage::LogOptions lo;
    lo.executor = &executor_;
    lo.segment_bytes = kSegmentBytes;
    lo.flush_policy = storage::FlushPolicy::kDurable;
    ASSERT_TRUE(storage::Env::Posix()->CreateDirs(dir).ok());
    auto plog = storage::PartitionLog::Open(dir, lo);
    ASSERT_TRUE(plog.ok());
    auto raw = InternalLog::Attach(plog->get(), InternalLogOptions{.dir = dir});
    auto append = [&](std::vector<InternalRecord> recs) {
      ASSERT_TRUE(WaitDurable([&](InternalLog::Done cb) {
                    return raw->Append(recs, 1 << 10, std::move(cb));
                  }).ok());
    };
    auto commit = [&](const std::string& g, TopicPartition tp, CommittedOffset v,
                      int64_t pid = -1) {
      InternalRecord r{offsets_format::EncodeOffsetKey(g, tp), offsets_format::EncodeOffsetValue(v),
                       pid, static_cast<int16_t>(pid >= 0 ? 0 : -1)};
      if (pid < 0) model.offsets[{g, tp}] = v;
      return r;
    };
    for (int i = 0; i < 150; ++i) {
      append({commit("g" + std::to_string(i % 3), {"t", i % 4}, Value(i)),
              commit("g" + std::to_string(i % 3), {"t", 4 + i % 2}, Value(i))});
    }
    append({commit("g0", {"t", 7}, Value(900), 9)});
    model.pending[{9, "g0", TopicPartition{"t", 7}}] = Value(900);
    GroupRecord rec{"consumer", 7, "range", "leader"};
    model.groups["g1"] = rec;
    append({{offsets_format::EncodeGroupKey("g1"), offsets_format::EncodeGroupValue(rec)}});
    // The snapshot: group records, visible offsets, then the pending one.
    const int64_t snapshot_start = (*plog)->end_offset();
    std::vector<InternalRecord> live{
        {offsets_format::EncodeGroupKey("g1"), offsets_format::EncodeGroupValue(rec)}};
    for (const auto& [key, v] : model.offsets) live.push_back(commit(key.first, key.second, v));
    append(live);
    append({commit("g0", {"t", 7}, Value(900), 9)});
    auto start = (*plog)->DeleteRecordsBefore(snapshot_start);
    ASSERT_TRUE(start.ok());
    ASSERT_EQ(*start, snapshot_start);
    // More commits after the snapshot, over a few segments.
    for (int i = 0; i < 100; ++i) append({commit("g2", {"t", i % 4}, Value(5000 + i))});
    auto closed = (*plog)->ClosedSegments();
    ASSERT_FALSE(closed.empty());
    ASSERT_LT(closed.front().base_offset, snapshot_start);  // the start is inside it
    ASSERT_TRUE(raw->Close().ok());
    ASSERT_TRUE((*plog)->Close().ok());
  }
  auto log = OpenOffsets(OffsetOptions());
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->skipped_records(), 0);
  EXPECT_EQ(StateOf(*log), model);
  // The open transaction holds the cleaner back (its first batch, below the start, is the
  // first uncleanable offset); its marker, written now, completes the offset the snapshot
  // rewrote and lets the cleaner go on.
  ASSERT_TRUE(Marker(*log, 9, 0, true).ok());
  model.offsets[{"g0", TopicPartition{"t", 7}}] = Value(900);
  model.pending.clear();
  EXPECT_EQ(StateOf(*log), model);
  for (int i = 0, target = log->segment_count() + 2; log->segment_count() < target; ++i) {
    ASSERT_LT(i, 100000);
    ASSERT_TRUE(Write(*log, One("g1", {"t", i % 4}, Value(7000 + i))).ok());
    model.offsets[{"g1", TopicPartition{"t", i % 4}}] = Value(7000 + i);
  }
  const uint64_t before = log->log_bytes();
  Clean(kOffsetsLogName);  // the first segment's records below the start are left out
  EXPECT_LT(log->log_bytes(), before / 2);
  EXPECT_EQ(StateOf(*log), model);
  ASSERT_TRUE(log->Close().ok());
  log = OpenOffsets(OffsetOptions());
  EXPECT_EQ(log->skipped_records(), 0);
  EXPECT_EQ(StateOf(*log), model);
}

TxnRecord Record(int64_t pid, int16_t epoch, TxnState state) {
  TxnRecord r;
  r.producer_id = pid;
  r.producer_epoch = epoch;
  r.timeout_ms = 60000;
  r.state = state;
  if (state != TxnState::kEmpty) r.partitions = {{"a", epoch % 3}};
  r.last_update_ms = 1000 + epoch;
  r.start_ms = 900;
  return r;
}

Status WriteTxn(TxnLog& log, const std::string& id, std::optional<TxnRecord> rec) {
  return WaitDurable([&](InternalLog::Done cb) { return log.Write(id, rec, std::move(cb)); });
}

// State changes over 8 transactional ids, some expiring (tombstones) and coming back,
// cleaned along the way: reopened, the state is the oracle's and the log bounded (8 ids
// of at most 200 bytes each alone in a batch, plus an active and a closing segment).
TEST_F(InternalLogTest, TxnStateCleansToTheOracleAndStaysBounded) {
  constexpr uint64_t kBound = 8 * (61 + 200) + 2 * (kSegmentBytes + 300);
  std::map<std::string, TxnRecord> model;
  auto log = OpenTxn(TxnOptions());
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(cleaner_->Contains(kTxnLogName));
  std::mt19937 rng(21);
  for (int i = 0; i < 500; ++i) {
    const std::string id = "id" + std::to_string(rng() % 8);
    if (rng() % 10 == 0) {
      ASSERT_TRUE(WriteTxn(*log, id, std::nullopt).ok());
      model.erase(id);
    } else {
      TxnRecord r = Record(static_cast<int64_t>(id.back()), static_cast<int16_t>(i),
                           i % 3 == 0 ? TxnState::kEmpty : TxnState::kOngoing);
      ASSERT_TRUE(WriteTxn(*log, id, r).ok());
      model[id] = r;
    }
    if (i % 50 == 49) {
      Clean(kTxnLogName);
      clock_.Advance(kRetentionMs / 2 + 1);
      EXPECT_LE(log->log_bytes(), kBound);
      ASSERT_EQ(log->records(), model);
    }
  }
  ASSERT_TRUE(log->Close().ok());
  EXPECT_FALSE(cleaner_->Contains(kTxnLogName));
  log = OpenTxn(TxnOptions());
  EXPECT_EQ(log->skipped_records(), 0);
  EXPECT_EQ(log->records(), model);
}

// A state log written with snapshots (live state appended again, the start moved to it).
TEST_F(InternalLogTest, TxnStateWrittenWithSnapshotsOpensAndCleans) {
  const std::string dir = TxnOptions().dir;
  std::map<std::string, TxnRecord> model;
  {
    auto log = OpenTxn([&] {
      TxnLogOptions o = TxnOptions();
      o.cleaner = nullptr;
      return o;
    }());
    for (int i = 0; i < 200; ++i) {
      TxnRecord r = Record(i % 5, static_cast<int16_t>(i), TxnState::kOngoing);
      ASSERT_TRUE(WriteTxn(*log, "id" + std::to_string(i % 5), r).ok());
      model["id" + std::to_string(i % 5)] = r;
    }
    ASSERT_TRUE(WriteTxn(*log, "id4", std::nullopt).ok());
    model.erase("id4");
    ASSERT_TRUE(log->Close().ok());
    storage::LogOptions lo;
    lo.executor = &executor_;
    lo.segment_bytes = kSegmentBytes;
    auto plog = storage::PartitionLog::Open(dir, lo);
    ASSERT_TRUE(plog.ok());
    auto raw = InternalLog::Attach(plog->get(), InternalLogOptions{.dir = dir});
    const int64_t snapshot_start = (*plog)->end_offset();
    std::vector<InternalRecord> live;
    for (const auto& [id, r] : model) {
      live.push_back({txn_format::EncodeKey(id), txn_format::EncodeValue(r)});
    }
    ASSERT_TRUE(WaitDurable([&](InternalLog::Done cb) {
                  return raw->Append(live, 1 << 20, std::move(cb));
                }).ok());
    ASSERT_TRUE((*plog)->DeleteRecordsBefore(snapshot_start).ok());
    ASSERT_TRUE(raw->Close().ok());
    ASSERT_TRUE((*plog)->Close().ok());
  }
  auto log = OpenTxn(TxnOptions());
  ASSERT_NE(log, nullptr);
  EXPECT_GT(log->start_offset(), 0);
  EXPECT_EQ(log->records(), model);
  for (int i = 0; i < 60; ++i) {
    TxnRecord r = Record(1, static_cast<int16_t>(1000 + i), TxnState::kEmpty);
    ASSERT_TRUE(WriteTxn(*log, "id1", r).ok());
    model["id1"] = r;
  }
  Clean(kTxnLogName);
  ASSERT_TRUE(log->Close().ok());
  log = OpenTxn(TxnOptions());
  EXPECT_EQ(log->skipped_records(), 0);
  EXPECT_EQ(log->records(), model);
}

// Over a log someone else owns (a replicated partition, later): replay, append, and Close
// leaves the log open.
TEST_F(InternalLogTest, AttachedLogStaysOpenAfterClose) {
  const std::string dir = dir_.path() + "/attached";
  storage::LogOptions lo;
  lo.executor = &executor_;
  ASSERT_TRUE(storage::Env::Posix()->CreateDirs(dir).ok());
  auto plog = storage::PartitionLog::Open(dir, lo);
  ASSERT_TRUE(plog.ok());
  InternalLogOptions io;
  io.dir = dir;
  io.name = "attached";
  io.cleaner = cleaner_.get();
  auto il = InternalLog::Attach(plog->get(), io);
  std::vector<InternalRecord> recs{{{1}, std::vector<uint8_t>{2}}, {{3}, std::nullopt, 5, 0}};
  ASSERT_TRUE(WaitDurable([&](InternalLog::Done cb) {
                return il->Append(recs, 1 << 20, std::move(cb));
              }).ok());
  il->StartCleaning();
  EXPECT_TRUE(cleaner_->Contains("attached"));
  std::vector<std::pair<int64_t, bool>> seen;  // offset, transactional
  ASSERT_TRUE(il->Replay([](const InternalBatch&) { return true; },
                         [&](const InternalBatch& b, int64_t at, std::span<const uint8_t>,
                             std::optional<std::span<const uint8_t>>) {
                           seen.emplace_back(at, b.transactional());
                         })
                  .ok());
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, bool>>{{0, false}, {1, true}}));
  ASSERT_TRUE(il->Close().ok());
  EXPECT_FALSE(cleaner_->Contains("attached"));
  EXPECT_FALSE(il->Append(recs, 1 << 20, [](const Status&) {}).ok());
  EXPECT_EQ((*plog)->end_offset(), 2);
  ASSERT_TRUE((*plog)->Flush().ok());  // still open
  ASSERT_TRUE((*plog)->Close().ok());
}

}  // namespace
}  // namespace internal_log_test
}  // namespace sluice::broker
