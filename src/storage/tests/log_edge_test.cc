// Edge cases found in review: recovery durability, retention racing a sync, callbacks
// re-entering the log, damaged indexes, segment.ms across reopens.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <thread>

#include "storage/log.h"
#include "storage/testing/batch_builder.h"
#include "storage/testing/fault_env.h"
#include "storage/testing/files.h"

namespace sluice::storage {
namespace {
using testing::MakeBatch;
using testing::ReadFileBytes;
using testing::WriteFileBytes;
using namespace std::chrono_literals;

// An Env whose first Sync() of a path containing `gate_path` blocks until released.
class GateEnv final : public Env {
 public:
  explicit GateEnv(Env* base) : base_(base) {}
  std::string gate_path;
  std::promise<void> reached, release;
  std::atomic<bool> armed{false};
  class GFile final : public File {
   public:
    GFile(GateEnv* env, std::unique_ptr<File> f) : env_(env), f_(std::move(f)) {}
    Status WriteAt(uint64_t pos, std::span<const uint8_t> d) override {
      return f_->WriteAt(pos, d);
    }
    Result<size_t> ReadAt(uint64_t pos, std::span<uint8_t> out) override {
      return f_->ReadAt(pos, out);
    }
    Status Sync() override {
      if (env_->armed && path().find(env_->gate_path) != std::string::npos &&
          env_->armed.exchange(false)) {
        env_->reached.set_value();
        env_->release.get_future().wait();
      }
      return f_->Sync();
    }
    Status Truncate(uint64_t s) override { return f_->Truncate(s); }
    Result<uint64_t> Size() override { return f_->Size(); }
    Result<bool> Unlinked() override { return f_->Unlinked(); }
    int fd() const override { return f_->fd(); }
    const std::string& path() const override { return f_->path(); }

   private:
    GateEnv* env_;
    std::unique_ptr<File> f_;
  };
  Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override {
    ASSIGN_OR_RETURN(auto f, base_->Open(path, mode));
    return std::unique_ptr<File>(std::make_unique<GFile>(this, std::move(f)));
  }
  Status Remove(const std::string& p) override { return base_->Remove(p); }
  Status Rename(const std::string& a, const std::string& b) override { return base_->Rename(a, b); }
  Status CreateDirs(const std::string& p) override { return base_->CreateDirs(p); }
  Status SyncDir(const std::string& p) override { return base_->SyncDir(p); }
  Result<std::vector<std::string>> ListDir(const std::string& p) override {
    return base_->ListDir(p);
  }
  bool Exists(const std::string& p) override { return base_->Exists(p); }

 private:
  Env* base_;
};

class LogEdgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    opts_.executor = &executor_;
    opts_.clock = &clock_;
    opts_.index_interval_bytes = 1024;
    opts_.flush_policy = FlushPolicy::kDurable;
  }
  std::unique_ptr<PartitionLog> OpenLog() {
    auto log = PartitionLog::Open(dir_, opts_);
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    return log.ok() ? std::move(*log) : nullptr;
  }
  Status AppendWait(PartitionLog& log, const std::vector<uint8_t>& batch,
                    AckLevel ack = AckLevel::kDurable) {
    auto done = std::make_shared<std::promise<Status>>();
    AppendOptions o;
    o.ack = ack;
    o.on_ack = [done](const Status& st, const AppendInfo&) { done->set_value(st); };
    auto info = log.Append(batch, std::move(o));
    if (!info.ok()) return info.status();
    return done->get_future().get();
  }
  std::string Seg(int64_t base, const char* ext) {
    char name[64];
    snprintf(name, sizeof name, "/%020lld%s", static_cast<long long>(base), ext);
    return dir_ + name;
  }
  testing::TempDir tmp_{"sluice-log"};
  std::string dir_;
  IoExecutor executor_{2};
  ManualClock clock_;
  LogOptions opts_;
};

// After a process crash the unsynced tail is still in the page cache; recovery accepts it
// and reports it durable, so it must sync it first.
TEST_F(LogEdgeTest, RecoverySyncsTheTailItReportsDurable) {
  testing::FaultEnv env(Env::Posix());
  opts_.env = &env;
  opts_.flush_policy = FlushPolicy::kInterval;
  opts_.flush_ms = 3600 * 1000;
  opts_.flush_bytes = 1ull << 40;
  {
    auto log = OpenLog();
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(AppendWait(*log, MakeBatch(3, 100, 1000, i), AckLevel::kWritten).ok());
    EXPECT_EQ(log->durable_end_offset(), 0);
    env.SimulateCrash();  // the process dies; the page cache (the files) stays
  }
  env.Reset();
  {
    auto log = OpenLog();
    EXPECT_EQ(log->durable_end_offset(), 15);
    EXPECT_EQ(env.SyncedSize(Seg(0, ".log")),
              static_cast<int64_t>(ReadFileBytes(Seg(0, ".log")).size()));
    env.SimulateCrash();
  }
  ASSERT_TRUE(env.DropUnsyncedData(1, testing::TearMode::kDropAll).ok());
  env.Reset();
  auto log = OpenLog();
  EXPECT_EQ(log->end_offset(), 15);
}

// A sync task still running on a segment that was rolled (and synced by its closing) and
// then deleted by retention is not a failure of the log.
TEST_F(LogEdgeTest, RetentionDuringAnInFlightSyncKeepsTheLogServing) {
  GateEnv env(Env::Posix());
  env.gate_path = "00000000000000000000.log";
  opts_.env = &env;
  opts_.segment_bytes = 4096;
  opts_.retention_bytes = 0;
  auto log = OpenLog();
  env.armed = true;
  auto first_acked = std::make_shared<std::promise<Status>>();
  AppendOptions o;
  o.on_ack = [first_acked](const Status& st, const AppendInfo&) { first_acked->set_value(st); };
  ASSERT_TRUE(log->Append(MakeBatch(3, 1000, 1000, 1), std::move(o)).ok());
  env.reached.get_future().wait();  // the sync task is blocked in fdatasync of segment 0
  ASSERT_TRUE(log->Append(MakeBatch(3, 3000, 1000, 2), {}).ok());  // rolls
  ASSERT_TRUE(log->Append(MakeBatch(3, 3000, 1000, 3), {}).ok());
  while (log->written_end_offset() < 9) std::this_thread::sleep_for(1ms);
  auto n = log->ApplyRetention();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_GE(*n, 1);
  env.release.set_value();
  EXPECT_TRUE(first_acked->get_future().get().ok());
  ASSERT_TRUE(log->Flush().ok());
  EXPECT_TRUE(AppendWait(*log, MakeBatch(1, 10, 1000, 4)).ok());
}

TEST_F(LogEdgeTest, FlushCloseAndTruncateFromACallbackFailInsteadOfDeadlocking) {
  auto log = OpenLog();
  std::promise<std::vector<Status>> results;
  PartitionLog* lp = log.get();
  AppendOptions o;
  o.ack = AckLevel::kWritten;
  o.on_ack = [&, lp](const Status&, const AppendInfo&) {
    EXPECT_TRUE(lp->Append(MakeBatch(1, 10, 1000, 9), {}).ok());  // safe
    results.set_value({lp->Flush(), lp->TruncateTo(0), lp->Close()});
  };
  ASSERT_TRUE(log->Append(MakeBatch(1, 10, 1000, 1), std::move(o)).ok());
  for (const Status& st : results.get_future().get()) {
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
    EXPECT_NE(st.message().find("callback"), std::string::npos);
  }
  EXPECT_TRUE(log->Flush().ok());
  EXPECT_EQ(log->end_offset(), 2);
}

// An offset-index entry (not the last, which recovery checks) pointing at a later batch
// makes Read fail with Corruption naming the index, not skip data silently.
TEST_F(LogEdgeTest, CorruptMiddleIndexEntryIsReportedNotSkipped) {
  opts_.segment_bytes = 64 * 1024;
  {
    auto log = OpenLog();
    for (int i = 0; i < 60; ++i)
      ASSERT_TRUE(AppendWait(*log, MakeBatch(1, 1500, 1000 + i, i)).ok());
    ASSERT_GE(log->segment_count(), 2);
  }
  auto idx = ReadFileBytes(Seg(0, ".index"));
  ASSERT_GE(idx.size(), 24u);
  for (int k = 0; k < 4; ++k) idx[4 + k] = idx[16 + 4 + k];  // entry 0 -> entry 2's position
  WriteFileBytes(Seg(0, ".index"), idx);
  auto log = OpenLog();
  ASSERT_NE(log, nullptr);
  int64_t rel0 = (int64_t{idx[0]} << 24) | (idx[1] << 16) | (idx[2] << 8) | idx[3];
  auto r = log->Read(rel0, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find(Seg(0, ".index")), std::string::npos)
      << r.status().ToString();
}

// The last offset-index entry of a closed segment pointing inside a batch: the index is
// inconsistent and rebuilt; the .log is fine.
TEST_F(LogEdgeTest, BadLastIndexEntryIsRebuilt) {
  opts_.segment_bytes = 64 * 1024;
  {
    auto log = OpenLog();
    for (int i = 0; i < 60; ++i)
      ASSERT_TRUE(AppendWait(*log, MakeBatch(1, 1500, 1000 + i, i)).ok());
  }
  auto idx = ReadFileBytes(Seg(0, ".index"));
  size_t last = idx.size() - 8;
  uint32_t pos = (uint32_t{idx[last + 4]} << 24) | (idx[last + 5] << 16) | (idx[last + 6] << 8) |
                 idx[last + 7];
  pos += 7;  // inside the batch
  idx[last + 4] = pos >> 24;
  idx[last + 5] = pos >> 16;
  idx[last + 6] = pos >> 8;
  idx[last + 7] = pos;
  WriteFileBytes(Seg(0, ".index"), idx);
  auto log = OpenLog();
  ASSERT_NE(log, nullptr);
  EXPECT_GE(log->recovery().indexes_rebuilt, 2);
  EXPECT_TRUE(log->Verify().ok());
}

// A garbage closing time-index entry is caught at recovery (it must be the segment's max
// timestamp) and rebuilt, so retention and timestamp lookups are not misled.
TEST_F(LogEdgeTest, GarbageClosingTimeEntryIsRebuilt) {
  opts_.segment_bytes = 16 * 1024;
  opts_.retention_ms = 3600 * 1000;
  int64_t now = clock_.NowMillis();
  {
    auto log = OpenLog();
    for (int i = 0; i < 30; ++i) ASSERT_TRUE(AppendWait(*log, MakeBatch(1, 1500, now, i)).ok());
    ASSERT_GE(log->segment_count(), 2);
  }
  auto t = ReadFileBytes(Seg(0, ".timeindex"));
  ASSERT_GE(t.size(), 12u);
  for (int k = 0; k < 8; ++k) t[t.size() - 12 + k] = 0;  // closing entry ts = 0 (1970)
  WriteFileBytes(Seg(0, ".timeindex"), t);
  auto log = OpenLog();
  auto n = log->ApplyRetention();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
  auto f = log->FindOffsetByTimestamp(now);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->offset, 0);
}

TEST_F(LogEdgeTest, TruncateDoesNotLeaveTheIntervalPolicySyncingEveryWrite) {
  opts_.flush_policy = FlushPolicy::kInterval;
  opts_.flush_ms = 3600 * 1000;
  opts_.flush_bytes = 1ull << 40;
  auto log = OpenLog();
  for (int i = 0; i < 50; ++i)
    ASSERT_TRUE(AppendWait(*log, MakeBatch(2, 50, 1000, i), AckLevel::kWritten).ok());
  ASSERT_TRUE(log->Flush().ok());
  ASSERT_TRUE(log->TruncateTo(10).ok());
  uint64_t before = log->sync_count();
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(AppendWait(*log, MakeBatch(2, 50, 1000, i), AckLevel::kWritten).ok());
  EXPECT_EQ(log->sync_count(), before);
}

// segment.ms counts from the first batch's timestamp, so it survives reopening; an
// expired active segment is rolled by retention and deleted by the next pass.
TEST_F(LogEdgeTest, SegmentAgeSurvivesReopenAndExpiredActiveSegmentGoes) {
  opts_.segment_ms = 1000;
  opts_.retention_ms = 5000;
  {
    auto log = OpenLog();
    ASSERT_TRUE(AppendWait(*log, MakeBatch(1, 10, clock_.NowMillis(), 1)).ok());
  }
  clock_.Advance(60'000);
  auto log = OpenLog();
  ASSERT_TRUE(AppendWait(*log, MakeBatch(1, 10, clock_.NowMillis(), 2)).ok());
  EXPECT_EQ(log->segment_count(), 2);
  clock_.Advance(60'000);
  auto n = log->ApplyRetention();  // deletes segment 0, rolls the expired active one
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  ASSERT_TRUE(log->Close().ok());  // lets the roll's closing sync finish
  log = OpenLog();
  n = log->ApplyRetention();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(log->start_offset(), 2);
  EXPECT_EQ(log->end_offset(), 2);
  EXPECT_TRUE(AppendWait(*log, MakeBatch(1, 10, clock_.NowMillis(), 3)).ok());
}

}  // namespace

// DeleteRecordsBefore: the start moves, reads below it are out of range, whole segments
// below it go, and the start survives a reopen.
TEST_F(LogEdgeTest, DeleteRecordsBeforeMovesTheStartDurably) {
  opts_.segment_bytes = 4096;  // a few batches per segment
  {
    auto log = OpenLog();
    for (int i = 0; i < 40; ++i) ASSERT_TRUE(AppendWait(*log, MakeBatch(5, 200, 1000, i)).ok());
    int before = log->segment_count();
    ASSERT_GT(before, 4);
    auto start = log->DeleteRecordsBefore(102);
    ASSERT_TRUE(start.ok()) << start.status().ToString();
    EXPECT_EQ(*start, 102);
    EXPECT_EQ(log->start_offset(), 102);
    EXPECT_LT(log->segment_count(), before);
    EXPECT_EQ(log->Read(101, 1 << 20).status().code(), StatusCode::kOutOfRange);
    auto r = log->Read(102, 1 << 20);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->first_offset, 100);  // the batch holding 102, whole
    // Lower than the start: nothing changes.
    EXPECT_EQ(*log->DeleteRecordsBefore(50), 102);
    // Past the end: out of range.
    EXPECT_EQ(log->DeleteRecordsBefore(201).status().code(), StatusCode::kOutOfRange);
    EXPECT_EQ(*log->DeleteRecordsBefore(200), 200);
  }
  auto log = OpenLog();
  EXPECT_EQ(log->start_offset(), 200);
  EXPECT_EQ(log->end_offset(), 200);
  ASSERT_TRUE(AppendWait(*log, MakeBatch(5, 200, 1000, 99)).ok());
  EXPECT_EQ(log->end_offset(), 205);
}

// A damaged log-start-offset file hides nothing and stops nothing.
TEST_F(LogEdgeTest, GarbageLogStartFileIsIgnored) {
  {
    auto log = OpenLog();
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(AppendWait(*log, MakeBatch(5, 100, 1000, i)).ok());
  }
  for (const std::string& junk :
       std::vector<std::string>{"", "abc\n", "-5\n", "12", "7\n8\n", std::string(40, '9')}) {
    WriteFileBytes(dir_ + "/log-start-offset", std::vector<uint8_t>(junk.begin(), junk.end()));
    auto log = OpenLog();
    ASSERT_NE(log, nullptr);
    EXPECT_EQ(log->start_offset(), 0) << junk;
  }
  // A start past the end (the tail was cut by recovery) is clamped to the end.
  std::string big = "1000\n";
  WriteFileBytes(dir_ + "/log-start-offset", std::vector<uint8_t>(big.begin(), big.end()));
  auto log = OpenLog();
  EXPECT_EQ(log->start_offset(), 15);
}

// Reconfigure: a smaller segment.bytes rolls on the next append; a smaller
// max.message.bytes rejects larger batches, yet batches stored before stay readable.
TEST_F(LogEdgeTest, ReconfigureAppliesToLaterAppends) {
  auto log = OpenLog();
  ASSERT_TRUE(AppendWait(*log, MakeBatch(10, 1000, 1000, 0)).ok());
  EXPECT_EQ(log->segment_count(), 1);
  PartitionLog::Limits limits{2048, opts_.segment_ms, -1, -1, 5000};
  log->Reconfigure(limits);
  ASSERT_TRUE(AppendWait(*log, MakeBatch(1, 100, 1000, 1)).ok());
  EXPECT_EQ(log->segment_count(), 2);
  auto big = log->Append(MakeBatch(10, 1000, 1000, 2), {});
  EXPECT_FALSE(big.ok());
  auto r = log->Read(0, 1 << 20);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->next_offset, 10);
}

}  // namespace sluice::storage
