#include "storage/log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "base/clock.h"
#include "storage/testing/batch_builder.h"
#include "storage/testing/fault_env.h"
#include "storage/testing/files.h"

namespace sluice::storage {
namespace {

using testing::MakeBatch;
using testing::ReadFileBytes;
using testing::ResidentPages;
using testing::WriteFileBytes;

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    opts_.executor = &executor_;
    opts_.clock = &clock_;
    opts_.index_interval_bytes = 1024;
    opts_.flush_policy = FlushPolicy::kDurable;  // durable acks without waiting for flush.ms
  }

  std::unique_ptr<PartitionLog> OpenLog() {
    auto log = PartitionLog::Open(dir_, opts_);
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    return log.ok() ? std::move(*log) : nullptr;
  }

  // Appends and waits until durable.
  AppendInfo AppendSync(PartitionLog& log, const std::vector<uint8_t>& batch,
                        AppendOptions o = {}) {
    std::promise<Status> done;
    o.ack = AckLevel::kDurable;
    o.on_ack = [&](const Status& st, const AppendInfo&) { done.set_value(st); };
    auto info = log.Append(batch, std::move(o));
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    Status st = done.get_future().get();
    EXPECT_TRUE(st.ok()) << st.ToString();
    return info.ok() ? *info : AppendInfo{};
  }

  // Every batch from `from` to the written end, concatenated.
  std::vector<uint8_t> ReadAll(PartitionLog& log, int64_t from) {
    std::vector<uint8_t> all, part;
    int64_t off = from;
    while (off < log.written_end_offset()) {
      auto r = log.Read(off, 1 << 20);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (!r.ok()) break;
      EXPECT_TRUE(PartitionLog::ReadSlice(r->slice, &part).ok());
      all.insert(all.end(), part.begin(), part.end());
      off = r->next_offset;
    }
    return all;
  }

  std::string Seg(int64_t base, const char* ext) {
    char name[64];
    snprintf(name, sizeof name, "/%020lld%s", static_cast<long long>(base), ext);
    return dir_ + name;
  }

  // Base offsets of the segments on disk, in order.
  std::vector<int64_t> SegmentBases() {
    std::vector<int64_t> bases;
    auto names = Env::Posix()->ListDir(dir_);
    for (auto& name : *names) {
      if (name.size() == 24 && name.ends_with(".log"))
        bases.push_back(std::stoll(name.substr(0, 20)));
    }
    std::sort(bases.begin(), bases.end());
    return bases;
  }

  testing::TempDir tmp_{"sluice-log"};
  std::string dir_;
  IoExecutor executor_{2};
  ManualClock clock_;
  LogOptions opts_;
};

// The bytes the log stores for `batch` appended at `base`.
std::vector<uint8_t> Stored(std::vector<uint8_t> batch, int64_t base, int32_t epoch = 0) {
  AssignOffsets(batch, base, epoch);
  return batch;
}

TEST_F(LogTest, AppendAssignsConsecutiveOffsets) {
  auto log = OpenLog();
  EXPECT_EQ(log->end_offset(), 0);
  auto a = AppendSync(*log, MakeBatch(3, 10, 1000, 1));
  auto b = AppendSync(*log, MakeBatch(5, 10, 1000, 2));
  EXPECT_EQ(a.base_offset, 0);
  EXPECT_EQ(a.last_offset, 2);
  EXPECT_EQ(b.base_offset, 3);
  EXPECT_EQ(b.last_offset, 7);
  EXPECT_EQ(log->end_offset(), 8);
  EXPECT_EQ(log->written_end_offset(), 8);
  EXPECT_EQ(log->durable_end_offset(), 8);
}

TEST_F(LogTest, StoresBatchesVerbatimExceptOffsetAndEpoch) {
  auto log = OpenLog();
  auto batch = MakeBatch(4, 50, 1000, 3);
  AppendOptions o;
  o.leader_epoch = 7;
  AppendSync(*log, MakeBatch(2, 10, 1000, 1));
  AppendSync(*log, batch, o);
  auto r = log->Read(2, 1 << 20);
  ASSERT_TRUE(r.ok());
  std::vector<uint8_t> got;
  ASSERT_TRUE(PartitionLog::ReadSlice(r->slice, &got).ok());
  EXPECT_EQ(got, Stored(batch, 2, 7));
  EXPECT_TRUE(ValidateBatch(got, 1 << 20).ok());
}

TEST_F(LogTest, InvalidBatchIsRejectedAndLogUnchanged) {
  auto log = OpenLog();
  auto bad = MakeBatch(3, 10, 1000, 1);
  bad[70] ^= 1;
  auto r = log->Append(bad, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("CRC"), std::string::npos);
  EXPECT_EQ(log->end_offset(), 0);
  AppendSync(*log, MakeBatch(1, 10, 1000, 1));
  EXPECT_EQ(log->end_offset(), 1);
}

TEST_F(LogTest, ReadReturnsTheBatchContainingTheOffset) {
  auto log = OpenLog();
  std::vector<std::vector<uint8_t>> batches;
  for (int i = 0; i < 50; ++i) {
    batches.push_back(MakeBatch(10, 100, 1000 + i, i));
    AppendSync(*log, batches.back());
  }
  for (int64_t off : {0, 5, 9, 10, 255, 499}) {
    auto r = log->Read(off, 1);  // max_bytes 1: still one whole batch
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->first_offset, off / 10 * 10);
    EXPECT_EQ(r->next_offset, off / 10 * 10 + 10);
    std::vector<uint8_t> got;
    ASSERT_TRUE(PartitionLog::ReadSlice(r->slice, &got).ok());
    EXPECT_EQ(got, Stored(batches[off / 10], off / 10 * 10));
  }
}

TEST_F(LogTest, ReadStopsAtMaxBytesOnBatchBoundaries) {
  auto log = OpenLog();
  auto b = MakeBatch(10, 100, 1000, 1);
  for (int i = 0; i < 10; ++i) AppendSync(*log, b);
  auto r = log->Read(0, b.size() * 3 + 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->slice.size, b.size() * 3);
  EXPECT_EQ(r->next_offset, 30);
  EXPECT_EQ(r->slice.position, 0u);
  EXPECT_GE(r->slice.file->fd(), 0);  // usable with sendfile
}

TEST_F(LogTest, ReadsOfSmallBatchesTakeAsManyWholeBatchesAsFitAtAnyMaxBytes) {
  // Small batches of varied sizes (the index entries, every 1024 bytes, fall at varied
  // places): a read's end comes from the index, then the headers after the entry. The
  // slice must be exactly the whole batches that fit, as a walk of every header says.
  // An entry every 256 bytes: over a thousand, so the index search probes before it
  // reads the last 512 entries whole.
  opts_.index_interval_bytes = 256;
  auto log = OpenLog();
  std::vector<uint64_t> ends;  // end position of each batch
  uint64_t total = 0;
  for (int i = 0; i < 900; ++i) {
    auto b = MakeBatch(1 + i % 3, 20 + (i * 37) % 300, 1000 + i, i);
    AppendSync(*log, b);
    total += b.size();
    ends.push_back(total);
  }
  ASSERT_GT(total, 3u * 64 * 1024);  // reads past the two header blocks a walk would take
  for (int64_t from : {0, 1, 40, 1000}) {
    auto first = log->Read(from, 1);
    ASSERT_TRUE(first.ok());
    const uint64_t start = first->slice.position;
    for (uint64_t max = 1; max < total - start + 300; max += max < 120'000 ? 9973 : 397) {
      auto r = log->Read(from, max);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      // The reference: the first batch always, then each one that still fits.
      uint64_t want_end = start + first->slice.size;
      for (uint64_t e : ends) {
        if (e > want_end && e - start <= max) want_end = e;
      }
      EXPECT_EQ(r->slice.position, start);
      EXPECT_EQ(r->slice.size, want_end - start) << "from " << from << ", max_bytes " << max;
      EXPECT_TRUE(r->holds_records);
      // And the next read goes on from where this one ended.
      if (want_end < total) {
        auto next = log->Read(r->next_offset, 1);
        ASSERT_TRUE(next.ok());
        EXPECT_EQ(next->slice.position, want_end) << "from " << from << ", max_bytes " << max;
      } else {
        EXPECT_EQ(r->next_offset, log->written_end_offset());
      }
    }
  }
}

TEST_F(LogTest, OnReadableFiresWhenWrittenDataBecomesReadable) {
  std::atomic<int> calls{0};
  opts_.on_readable = [&] { ++calls; };
  auto log = OpenLog();
  AppendSync(*log, MakeBatch(2, 10, 1000, 1));  // durable policy: a write job and a sync
  ASSERT_TRUE(log->Close().ok());
  EXPECT_GE(calls.load(), 2);
}

TEST_F(LogTest, ReadStopsAtTheLimitOffset) {
  auto log = OpenLog();
  auto b = MakeBatch(10, 100, 1000, 1);
  for (int i = 0; i < 5; ++i) AppendSync(*log, b);
  auto r = log->Read(0, 1 << 20, /*limit=*/30);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->next_offset, 30);
  EXPECT_EQ(r->slice.size, b.size() * 3);
  auto at = log->Read(30, 1 << 20, 30);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->slice.size, 0u);
  EXPECT_EQ(log->Read(31, 1 << 20, 30).status().code(), StatusCode::kOutOfRange);
}

TEST_F(LogTest, ReadAtEndIsEmptyAndOutsideIsOutOfRange) {
  auto log = OpenLog();
  AppendSync(*log, MakeBatch(3, 10, 1000, 1));
  auto end = log->Read(3, 1000);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->slice.size, 0u);
  EXPECT_EQ(end->next_offset, 3);
  auto past = log->Read(4, 1000);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), StatusCode::kOutOfRange);
  EXPECT_FALSE(log->Read(-1, 1000).ok());
}

TEST_F(LogTest, RollsBySizeIntoSegmentsNamedByBaseOffset) {
  opts_.segment_bytes = 4096;
  auto log = OpenLog();
  auto b = MakeBatch(10, 100, 1000, 1);  // ~1.2 KB
  for (int i = 0; i < 20; ++i) AppendSync(*log, b);
  EXPECT_GT(log->segment_count(), 4);
  EXPECT_TRUE(access(Seg(0, ".log").c_str(), F_OK) == 0);
  EXPECT_TRUE(access(Seg(30, ".log").c_str(), F_OK) == 0);
  EXPECT_TRUE(access(Seg(30, ".index").c_str(), F_OK) == 0);
  EXPECT_TRUE(access(Seg(30, ".timeindex").c_str(), F_OK) == 0);
  std::vector<uint8_t> expect;
  for (int i = 0; i < 20; ++i) {
    auto s = Stored(b, i * 10);
    expect.insert(expect.end(), s.begin(), s.end());
  }
  EXPECT_EQ(ReadAll(*log, 0), expect);
}

TEST_F(LogTest, RollsByAge) {
  // As in Kafka: from the first batch's timestamp to the new batch's.
  opts_.segment_ms = 60'000;
  auto log = OpenLog();
  AppendSync(*log, MakeBatch(2, 10, clock_.NowMillis(), 1));
  clock_.Advance(59'000);
  AppendSync(*log, MakeBatch(2, 10, clock_.NowMillis(), 1));
  EXPECT_EQ(log->segment_count(), 1);
  clock_.Advance(1'000);
  AppendSync(*log, MakeBatch(2, 10, clock_.NowMillis(), 1));
  EXPECT_EQ(log->segment_count(), 2);
  EXPECT_TRUE(access(Seg(4, ".log").c_str(), F_OK) == 0);
}

TEST_F(LogTest, ReopenRecoversEverything) {
  opts_.segment_bytes = 8192;
  std::vector<uint8_t> expect;
  {
    auto log = OpenLog();
    for (int i = 0; i < 30; ++i) {
      auto b = MakeBatch(7, 150, 1000 + i, i);
      auto info = AppendSync(*log, b);
      auto s = Stored(b, info.base_offset);
      expect.insert(expect.end(), s.begin(), s.end());
    }
    ASSERT_TRUE(log->Close().ok());
  }
  auto log = OpenLog();
  EXPECT_EQ(log->end_offset(), 210);
  EXPECT_EQ(log->durable_end_offset(), 210);
  EXPECT_EQ(log->recovery().truncated_bytes, 0u);
  EXPECT_EQ(ReadAll(*log, 0), expect);
  EXPECT_TRUE(log->Verify().ok());
  auto more = AppendSync(*log, MakeBatch(1, 10, 1000, 1));
  EXPECT_EQ(more.base_offset, 210);
}

TEST_F(LogTest, DurableAckComesAfterTheSyncThatCoversIt) {
  opts_.flush_policy = FlushPolicy::kDurable;
  auto log = OpenLog();
  std::atomic<int64_t> durable_at_ack{-1};
  std::promise<void> done;
  AppendOptions o;
  o.ack = AckLevel::kDurable;
  PartitionLog* raw = log.get();
  o.on_ack = [&](const Status& st, const AppendInfo& info) {
    EXPECT_TRUE(st.ok());
    durable_at_ack = raw->durable_end_offset();
    done.set_value();
  };
  ASSERT_TRUE(log->Append(MakeBatch(4, 10, 1000, 1), std::move(o)).ok());
  done.get_future().wait();
  EXPECT_GE(durable_at_ack.load(), 4);
}

TEST_F(LogTest, IntervalPolicySyncsWithoutBeingAsked) {
  opts_.flush_policy = FlushPolicy::kInterval;
  opts_.flush_ms = 20;
  auto log = OpenLog();
  std::promise<void> written, durable;
  AppendOptions w;
  w.ack = AckLevel::kWritten;
  w.on_ack = [&](const Status&, const AppendInfo&) { written.set_value(); };
  ASSERT_TRUE(log->Append(MakeBatch(4, 10, 1000, 1), std::move(w)).ok());
  AppendOptions d;
  d.ack = AckLevel::kDurable;
  d.on_ack = [&](const Status&, const AppendInfo&) { durable.set_value(); };
  ASSERT_TRUE(log->Append(MakeBatch(4, 10, 1000, 1), std::move(d)).ok());
  written.get_future().wait();
  durable.get_future().wait();  // nobody called Flush()
  EXPECT_EQ(log->durable_end_offset(), 8);
}

TEST_F(LogTest, IntervalPolicySyncsWrittenAppendsByTheTimer) {
  opts_.flush_policy = FlushPolicy::kInterval;
  opts_.flush_ms = 20;
  auto log = OpenLog();
  std::promise<void> written;
  AppendOptions w;
  w.ack = AckLevel::kWritten;
  w.on_ack = [&](const Status&, const AppendInfo&) { written.set_value(); };
  ASSERT_TRUE(log->Append(MakeBatch(4, 10, 1000, 1), std::move(w)).ok());
  written.get_future().wait();
  // No append waits for durability and nobody calls Flush(): only the flush.ms timer
  // syncs. A missing timer hangs until the test timeout.
  while (log->sync_count() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(log->durable_end_offset(), 4);
}

// acks=all under the interval policy: a durable append starts a sync as soon as it is
// written, not at the next flush.ms (an hour here), and one sync covers the appends
// written by then.
TEST_F(LogTest, IntervalPolicyDurableAppendStartsAGroupCommitAtOnce) {
  opts_.flush_policy = FlushPolicy::kInterval;
  opts_.flush_ms = 3'600'000;
  auto log = OpenLog();
  constexpr int kAppends = 20;
  std::vector<std::promise<Status>> acks(kAppends);
  for (int i = 0; i < kAppends; ++i) {
    AppendOptions d;
    d.ack = AckLevel::kDurable;
    d.on_ack = [&acks, i](const Status& st, const AppendInfo&) { acks[i].set_value(st); };
    ASSERT_TRUE(log->Append(MakeBatch(4, 10, 1000, 1), std::move(d)).ok());
  }
  // Waiting for an hour's timer would fail this wait (it gives up after a minute).
  for (auto& a : acks) {
    auto f = a.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    EXPECT_TRUE(f.get().ok());
  }
  EXPECT_EQ(log->durable_end_offset(), 4 * kAppends);
  // Never more than one sync per append (how many share one depends on timing).
  EXPECT_LE(log->sync_count(), static_cast<uint64_t>(kAppends));
  EXPECT_GE(log->sync_count(), 1u);
}

TEST_F(LogTest, IntervalPolicySyncsAfterFlushBytes) {
  opts_.flush_policy = FlushPolicy::kInterval;
  opts_.flush_ms = 3'600'000;
  opts_.flush_bytes = 4096;
  auto log = OpenLog();
  auto b = MakeBatch(10, 100, 1000, 1);
  int64_t last = 0;
  for (int i = 0; i < 10; ++i) {
    AppendOptions o;
    o.ack = AckLevel::kWritten;
    std::promise<void> p;
    o.on_ack = [&](const Status&, const AppendInfo&) { p.set_value(); };
    last = log->Append(b, std::move(o))->last_offset;
    p.get_future().wait();
  }
  // 10 batches of ~2.7 KB passed flush.bytes: a sync follows without Flush() and long
  // before flush.ms (an hour). Wait for it; a missing sync hangs until the test timeout.
  while (log->sync_count() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GT(log->durable_end_offset(), 0);
  ASSERT_TRUE(log->Flush().ok());
  EXPECT_EQ(log->durable_end_offset(), last + 1);
}

// An Env whose segment-file fdatasync blocks until released, and which counts writes and
// syncs of .log files: group commit made visible.
class GatedEnv : public Env {
 public:
  class GatedFile : public File {
   public:
    GatedFile(std::unique_ptr<File> f, GatedEnv* env) : f_(std::move(f)), env_(env) {}
    Status WriteAt(uint64_t pos, std::span<const uint8_t> d) override {
      if (IsLog()) ++env_->log_writes;
      return f_->WriteAt(pos, d);
    }
    Result<size_t> ReadAt(uint64_t pos, std::span<uint8_t> out) override {
      if (path().ends_with(".index")) ++env_->index_reads;
      if (IsLog()) ++env_->log_reads;
      return f_->ReadAt(pos, out);
    }
    Status Sync() override {
      if (IsLog()) {
        ++env_->log_syncs;
        std::unique_lock l(env_->mu);
        env_->in_sync = true;
        env_->cv.notify_all();
        env_->cv.wait(l, [&] { return env_->open; });
        env_->in_sync = false;
      }
      return f_->Sync();
    }
    Status Truncate(uint64_t s) override { return f_->Truncate(s); }
    Result<uint64_t> Size() override { return f_->Size(); }
    Result<bool> Unlinked() override { return f_->Unlinked(); }
    int fd() const override { return f_->fd(); }
    const std::string& path() const override { return f_->path(); }

   private:
    bool IsLog() const { return path().ends_with(".log"); }
    std::unique_ptr<File> f_;
    GatedEnv* env_;
  };

  Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override {
    ASSIGN_OR_RETURN(auto f, base->Open(path, mode));
    return std::unique_ptr<File>(std::make_unique<GatedFile>(std::move(f), this));
  }
  Status Remove(const std::string& p) override { return base->Remove(p); }
  Status Rename(const std::string& a, const std::string& b) override { return base->Rename(a, b); }
  Status CreateDirs(const std::string& p) override { return base->CreateDirs(p); }
  Status SyncDir(const std::string& p) override { return base->SyncDir(p); }
  Result<std::vector<std::string>> ListDir(const std::string& p) override {
    return base->ListDir(p);
  }
  bool Exists(const std::string& p) override { return base->Exists(p); }

  void Close() {
    std::lock_guard l(mu);
    open = false;
  }
  void OpenGate() {
    std::lock_guard l(mu);
    open = true;
    cv.notify_all();
  }
  void WaitInSync() {
    std::unique_lock l(mu);
    cv.wait(l, [&] { return in_sync; });
  }

  Env* base = Env::Posix();
  std::atomic<int> log_writes{0}, log_syncs{0}, log_reads{0}, index_reads{0};
  std::mutex mu;
  std::condition_variable cv;
  bool open = true, in_sync = false;
};

TEST_F(LogTest, GroupCommitWritesAndSyncsConcurrentAppendsTogether) {
  GatedEnv env;
  IoExecutor one_thread(1);  // the blocked sync holds it: appends can only gather
  opts_.env = &env;
  opts_.executor = &one_thread;
  opts_.flush_policy = FlushPolicy::kDurable;
  auto log = OpenLog();
  env.log_writes = 0;
  env.log_syncs = 0;
  env.Close();
  std::atomic<int> acked{0};
  auto on_ack = [&](const Status& st, const AppendInfo&) {
    EXPECT_TRUE(st.ok());
    ++acked;
  };
  // The first append's job blocks inside its fdatasync...
  AppendOptions first;
  first.on_ack = on_ack;
  ASSERT_TRUE(log->Append(MakeBatch(1, 10, 1000, 0), std::move(first)).ok());
  env.WaitInSync();
  // ... while 4 threads append 100 batches between them.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        AppendOptions o;
        o.on_ack = on_ack;
        ASSERT_TRUE(log->Append(MakeBatch(2, 10, 1000, t * 100 + i), std::move(o)).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(acked.load(), 0);  // nothing is acknowledged before its fdatasync
  env.OpenGate();
  ASSERT_TRUE(log->Flush().ok());
  EXPECT_EQ(acked.load(), 101);
  // One write + one fdatasync for the first append, one of each for the other 100.
  EXPECT_EQ(env.log_writes.load(), 2);
  EXPECT_EQ(env.log_syncs.load(), 2);
  EXPECT_EQ(log->end_offset(), 201);
}

// With two I/O threads and the fdatasyncs of two logs hanging (a slow disk), appends
// acknowledged when written still complete: the syncs may hold at most one thread, so the
// write jobs have the other. (When syncs could take every thread, the second log's sync
// took the last one and the first log's next write waited for a sync to finish.)
TEST_F(LogTest, WrittenAcksDoNotQueueBehindOtherLogsSyncs) {
  GatedEnv env;
  IoExecutor two_threads(2);
  opts_.env = &env;
  opts_.executor = &two_threads;
  opts_.flush_policy = FlushPolicy::kDurable;  // a sync after every write job
  testing::TempDir other_dir{"sluice-log-b"};
  auto a = OpenLog();
  auto b_or = PartitionLog::Open(other_dir.path(), opts_);
  ASSERT_TRUE(b_or.ok()) << b_or.status().ToString();
  auto b = std::move(*b_or);
  env.Close();
  auto append_written = [](PartitionLog& log, int64_t seq) {
    auto done = std::make_shared<std::promise<Status>>();
    AppendOptions o;
    o.ack = AckLevel::kWritten;
    o.on_ack = [done](const Status& st, const AppendInfo&) { done->set_value(st); };
    EXPECT_TRUE(log.Append(MakeBatch(2, 10, 1000, seq), std::move(o)).ok());
    return done->get_future();
  };
  auto written = [](std::future<Status> f) {
    // Not a timing assertion: a generous bound so that a regression fails instead of hanging.
    if (f.wait_for(std::chrono::seconds(60)) != std::future_status::ready) return false;
    return f.get().ok();
  };
  EXPECT_TRUE(written(append_written(*a, 1)));
  env.WaitInSync();  // a's sync hangs on one thread
  EXPECT_TRUE(written(append_written(*b, 1)));
  // b's sync is due as well; however the threads are shared, writes of both logs go on.
  EXPECT_TRUE(written(append_written(*a, 2)));
  EXPECT_TRUE(written(append_written(*b, 2)));
  EXPECT_TRUE(written(append_written(*a, 3)));
  EXPECT_EQ(a->durable_end_offset(), 0);  // nothing was synced meanwhile
  env.OpenGate();
  ASSERT_TRUE(a->Flush().ok());
  ASSERT_TRUE(b->Flush().ok());
  EXPECT_EQ(a->durable_end_offset(), 6);
  EXPECT_EQ(b->durable_end_offset(), 4);
  ASSERT_TRUE(a->Close().ok());
  ASSERT_TRUE(b->Close().ok());
}

// Bytes the file system has allocated to `path` (st_blocks), -1 when it cannot tell.
int64_t AllocatedBytes(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_blocks) * 512 : -1;
}

// Whether fallocate(FALLOC_FL_KEEP_SIZE) reserves blocks in `dir`.
bool ReservesBlocks(const std::string& dir) {
  std::string probe = dir + "/reserve-probe";
  int fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return false;
  bool ok = ::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 1 << 20) == 0;
  ::close(fd);
  ok = ok && AllocatedBytes(probe) >= (1 << 20);
  ::unlink(probe.c_str());
  return ok;
}

// The active segment has its blocks reserved ahead of the writes (so appends do not wait
// for the file system to allocate them in the writeback of a sync); its size and bytes
// stay what was written, and a rolled or truncated segment gives the reservation back.
TEST_F(LogTest, ActiveSegmentReservesBlocksAheadAndGivesThemBack) {
  if (!ReservesBlocks(dir_)) GTEST_SKIP() << "fallocate does not reserve blocks in " << dir_;
  constexpr int64_t kSlack = 64 << 10;  // file system rounding
  opts_.segment_bytes = 1 << 20;
  auto log = OpenLog();
  std::vector<uint8_t> appended;
  int64_t seq = 0;
  auto append = [&] {
    auto batch = MakeBatch(10, 10'000, 1000, seq++);
    auto info = AppendSync(*log, batch);
    auto stored = Stored(batch, info.base_offset);
    appended.insert(appended.end(), stored.begin(), stored.end());
  };
  for (int i = 0; i < 3; ++i) append();
  ASSERT_EQ(log->segment_count(), 1);
  const std::string first = Seg(0, ".log");
  ASSERT_LT(appended.size() + kSlack, size_t{1} << 20);
  EXPECT_EQ(Env::Posix()->Open(first, OpenMode::kRead).value()->Size().value(), appended.size());
  EXPECT_GE(AllocatedBytes(first), int64_t{1} << 20);  // reserved up to segment.bytes
  while (log->segment_count() == 1) append();
  // Rolled: only its bytes keep their blocks. The new active segment reserves again.
  uint64_t first_size = Env::Posix()->Open(first, OpenMode::kRead).value()->Size().value();
  EXPECT_LE(AllocatedBytes(first), static_cast<int64_t>(first_size) + kSlack);
  std::vector<int64_t> bases = SegmentBases();
  ASSERT_EQ(bases.size(), 2u);
  const std::string second = Seg(bases[1], ".log");
  EXPECT_GE(AllocatedBytes(second), int64_t{1} << 20);
  EXPECT_EQ(ReadAll(*log, 0), appended);
  // Cut inside the active segment: the reservation goes with the cut.
  append();
  ASSERT_EQ(log->segment_count(), 2);
  ASSERT_TRUE(log->TruncateTo(bases[1] + 10).ok());
  ASSERT_EQ(log->end_offset(), bases[1] + 10);
  uint64_t second_size = Env::Posix()->Open(second, OpenMode::kRead).value()->Size().value();
  EXPECT_LE(AllocatedBytes(second), static_cast<int64_t>(second_size) + kSlack);
  // Reserved blocks are never mistaken for data: reopened, nothing is cut and every batch
  // checks out.
  append();
  ASSERT_TRUE(log->Close().ok());
  log = OpenLog();
  EXPECT_EQ(log->recovery().truncated_bytes, 0u);
  EXPECT_TRUE(log->Verify().ok());
}

TEST_F(LogTest, LogAppendTimeRewritesTimestampAndCrc) {
  clock_.Set(1'800'000'000'000);
  auto log = OpenLog();
  AppendOptions o;
  o.log_append_time = true;
  auto info = AppendSync(*log, MakeBatch(3, 10, 1000, 1), std::move(o));
  EXPECT_EQ(info.log_append_time_ms, 1'800'000'000'000);
  auto r = log->Read(0, 1 << 20);
  ASSERT_TRUE(r.ok());
  std::vector<uint8_t> got;
  ASSERT_TRUE(PartitionLog::ReadSlice(r->slice, &got).ok());
  auto h = ValidateBatch(got, 1 << 20);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->max_timestamp, 1'800'000'000'000);
  EXPECT_NE(h->attributes & kAttrTimestampTypeLogAppend, 0);
}

TEST_F(LogTest, FindsFirstOffsetAtOrAfterTimestamp) {
  opts_.segment_bytes = 4096;
  auto log = OpenLog();
  // Batch i has 10 records with timestamps 10000 + 10 i + j.
  for (int i = 0; i < 40; ++i) AppendSync(*log, MakeBatch(10, 100, 10000 + 10 * i, i));
  ASSERT_GT(log->segment_count(), 3);
  for (int64_t ts : {0, 10000, 10001, 10055, 10200, 10399}) {
    auto r = log->FindOffsetByTimestamp(ts);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->has_value()) << ts;
    int64_t want = std::max<int64_t>(0, ts - 10000);
    EXPECT_EQ((*r)->offset, want) << ts;
    EXPECT_EQ((*r)->timestamp, 10000 + want);
    EXPECT_TRUE((*r)->exact);
  }
  auto none = log->FindOffsetByTimestamp(10400);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // Same answers after a reopen, from the recovered indexes.
  ASSERT_TRUE(log->Close().ok());
  log = OpenLog();
  auto again = log->FindOffsetByTimestamp(10255);
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->offset, 255);
}

TEST_F(LogTest, RecoveryTruncatesATornTail) {
  std::vector<uint8_t> expect;
  {
    auto log = OpenLog();
    for (int i = 0; i < 5; ++i) {
      auto b = MakeBatch(3, 100, 1000, i);
      AppendSync(*log, b);
      auto s = Stored(b, i * 3);
      expect.insert(expect.end(), s.begin(), s.end());
    }
  }
  auto bytes = ReadFileBytes(Seg(0, ".log"));
  auto torn = Stored(MakeBatch(3, 100, 1000, 9), 15);
  bytes.insert(bytes.end(), torn.begin(), torn.begin() + 100);  // half a batch
  WriteFileBytes(Seg(0, ".log"), bytes);
  auto log = OpenLog();
  EXPECT_EQ(log->end_offset(), 15);
  EXPECT_EQ(log->recovery().truncated_bytes, 100u);
  EXPECT_NE(log->recovery().truncation_reason.find("at byte " + std::to_string(expect.size())),
            std::string::npos)
      << log->recovery().truncation_reason;
  EXPECT_EQ(ReadAll(*log, 0), expect);
  EXPECT_EQ(ReadFileBytes(Seg(0, ".log")).size(), expect.size());
}

TEST_F(LogTest, RecoveryStopsAtACorruptBatchEvenWhenLaterOnesAreIntact) {
  std::vector<size_t> ends;
  {
    auto log = OpenLog();
    for (int i = 0; i < 6; ++i) {
      AppendSync(*log, MakeBatch(3, 100, 1000, i));
      ends.push_back(log->size_bytes());
    }
  }
  auto bytes = ReadFileBytes(Seg(0, ".log"));
  bytes[ends[2] + 80] ^= 0xff;  // inside the 4th batch's records
  WriteFileBytes(Seg(0, ".log"), bytes);
  auto log = OpenLog();
  EXPECT_EQ(log->end_offset(), 9);
  EXPECT_NE(log->recovery().truncation_reason.find("CRC"), std::string::npos);
  EXPECT_EQ(log->recovery().truncated_bytes, bytes.size() - ends[2]);
}

TEST_F(LogTest, RecoveryTruncatesAtNegativeOrAbsurdLength) {
  for (uint32_t bad_len : {0xFFFFFFFFu, 0x7FFFFFFFu, 3u}) {
    {
      auto log = OpenLog();
      AppendSync(*log, MakeBatch(2, 10, 1000, 1));
    }
    auto bytes = ReadFileBytes(Seg(0, ".log"));
    size_t good = bytes.size();
    auto next = Stored(MakeBatch(2, 10, 1000, 2), 2);
    StoreBE32(next.data() + kBatchLengthOffset, bad_len);
    bytes.insert(bytes.end(), next.begin(), next.end());
    WriteFileBytes(Seg(0, ".log"), bytes);
    auto log = OpenLog();
    EXPECT_EQ(log->end_offset(), 2) << bad_len;
    EXPECT_EQ(log->recovery().truncated_bytes, next.size()) << bad_len;
    ASSERT_EQ(system(("rm -f " + dir_ + "/*").c_str()), 0);
    (void)good;
  }
}

TEST_F(LogTest, RecoveryRebuildsMissingAndInconsistentIndexes) {
  opts_.segment_bytes = 8192;
  std::vector<uint8_t> expect;
  {
    auto log = OpenLog();
    for (int i = 0; i < 30; ++i) {
      auto b = MakeBatch(5, 200, 1000 + i, i);
      AppendSync(*log, b);
      auto s = Stored(b, i * 5);
      expect.insert(expect.end(), s.begin(), s.end());
    }
  }
  ASSERT_EQ(unlink(Seg(0, ".index").c_str()), 0);
  // An index whose last entry points past the end of its segment.
  auto bases = SegmentBases();
  ASSERT_GE(bases.size(), 3u);
  auto idx = ReadFileBytes(Seg(bases[1], ".index"));
  ASSERT_GE(idx.size(), 8u);
  StoreBE32(idx.data() + idx.size() - 4, 1u << 30);
  WriteFileBytes(Seg(bases[1], ".index"), idx);
  // A time index of a size no entry layout allows.
  auto tidx = ReadFileBytes(Seg(0, ".timeindex"));
  tidx.push_back(1);
  WriteFileBytes(Seg(0, ".timeindex"), tidx);
  auto log = OpenLog();
  EXPECT_GE(log->recovery().indexes_rebuilt, 2);
  EXPECT_EQ(ReadAll(*log, 0), expect);
  for (int64_t off : {0, 33, 77, 149}) {
    auto r = log->Read(off, 1);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->first_offset, off / 5 * 5);
  }
}

TEST_F(LogTest, CorruptionInAClosedSegmentIsReportedWithFileAndPosition) {
  opts_.segment_bytes = 8192;
  {
    auto log = OpenLog();
    for (int i = 0; i < 30; ++i) AppendSync(*log, MakeBatch(5, 200, 1000 + i, i));
  }
  // Corrupt the last batch of the first (closed) segment: recovery checks the tail.
  auto bytes = ReadFileBytes(Seg(0, ".log"));
  bytes[bytes.size() - 10] ^= 0xff;
  WriteFileBytes(Seg(0, ".log"), bytes);
  auto log = PartitionLog::Open(dir_, opts_);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), StatusCode::kCorruption);
  EXPECT_NE(log.status().message().find(Seg(0, ".log")), std::string::npos)
      << log.status().message();
  EXPECT_NE(log.status().message().find("at byte"), std::string::npos);
}

TEST_F(LogTest, VerifyFindsCorruptionInTheMiddleOfAClosedSegment) {
  opts_.segment_bytes = 8192;
  {
    auto log = OpenLog();
    for (int i = 0; i < 30; ++i) AppendSync(*log, MakeBatch(5, 200, 1000 + i, i));
  }
  auto bytes = ReadFileBytes(Seg(0, ".log"));
  bytes[100] ^= 0xff;  // first batch's records: before any index entry
  WriteFileBytes(Seg(0, ".log"), bytes);
  auto log = OpenLog();  // recovery only checks closed segments' tails
  ASSERT_NE(log, nullptr);
  Status st = log->Verify();
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find(Seg(0, ".log") + " at byte 0"), std::string::npos) << st.message();
}

TEST_F(LogTest, ClosedSegmentMissingAtOpenIsReported) {
  opts_.segment_bytes = 8192;
  opts_.flush_policy = FlushPolicy::kDurable;
  {
    auto log = OpenLog();
    for (int i = 0; i < 30; ++i) AppendSync(*log, MakeBatch(5, 200, 1000 + i, i));
  }
  // A closed segment's log file disappears while its indexes stay: reopening reports it.
  auto bases = SegmentBases();
  ASSERT_GE(bases.size(), 3u);
  ASSERT_EQ(unlink(Seg(bases[1], ".log").c_str()), 0);
  auto log = PartitionLog::Open(dir_, opts_);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), StatusCode::kCorruption);
  EXPECT_NE(log.status().message().find(Seg(bases[1], ".log") + " is missing"), std::string::npos)
      << log.status().message();
}

TEST_F(LogTest, ActiveSegmentDeletedWhileWritingFailsTheAppend) {
  opts_.flush_policy = FlushPolicy::kDurable;
  auto log = OpenLog();
  AppendSync(*log, MakeBatch(2, 10, 1000, 1));
  ASSERT_EQ(unlink(Seg(0, ".log").c_str()), 0);
  std::promise<Status> done;
  AppendOptions o;
  o.on_ack = [&](const Status& st, const AppendInfo&) { done.set_value(st); };
  ASSERT_TRUE(log->Append(MakeBatch(2, 10, 1000, 2), std::move(o)).ok());
  Status st = done.get_future().get();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("deleted"), std::string::npos) << st.ToString();
  auto again = log->Append(MakeBatch(2, 10, 1000, 3), {});
  EXPECT_FALSE(again.ok());
}

TEST_F(LogTest, ClosedSegmentDeletedUnderTheLogGivesAClearReadError) {
  opts_.segment_bytes = 8192;
  auto log = OpenLog();
  for (int i = 0; i < 30; ++i) AppendSync(*log, MakeBatch(5, 200, 1000 + i, i));
  ASSERT_TRUE(log->Close().ok());
  log = OpenLog();
  // Reads of a segment go through a descriptor cache; a fresh log has not opened seg 0
  // for reading yet beyond recovery, which a small cache has evicted by now.
  ASSERT_EQ(unlink(Seg(0, ".log").c_str()), 0);
  for (int i = 0; i < 40; ++i) {
    // Touch other segments to push segment 0 out of the 16-entry cache.
    (void)log->Read(log->written_end_offset() - 1, 1);
    (void)log->Read(30 + i % 60, 1);
  }
  auto r = log->Read(0, 1 << 20);
  if (!r.ok()) {
    EXPECT_NE(r.status().message().find(Seg(0, ".log")), std::string::npos)
        << r.status().ToString();
  } else {
    // Still cached: the open descriptor keeps the deleted file readable, as in Kafka.
    std::vector<uint8_t> got;
    EXPECT_TRUE(PartitionLog::ReadSlice(r->slice, &got).ok());
  }
}

TEST_F(LogTest, RetentionBySizeDeletesOldestClosedSegments) {
  opts_.segment_bytes = 4096;
  opts_.retention_bytes = 10000;
  opts_.retention_ms = -1;
  auto log = OpenLog();
  auto b = MakeBatch(10, 100, 1000, 1);
  for (int i = 0; i < 40; ++i) AppendSync(*log, b);
  uint64_t before = log->size_bytes();
  auto n = log->ApplyRetention();
  ASSERT_TRUE(n.ok());
  EXPECT_GT(*n, 0);
  EXPECT_GE(log->size_bytes(), 10000u);
  EXPECT_LT(log->size_bytes(), before);
  EXPECT_GT(log->start_offset(), 0);
  EXPECT_EQ(access(Seg(0, ".log").c_str(), F_OK), -1);
  EXPECT_EQ(access(Seg(0, ".index").c_str(), F_OK), -1);
  auto r = log->Read(0, 100);
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  // Reopen: the start offset is the first remaining segment.
  int64_t start = log->start_offset();
  ASSERT_TRUE(log->Close().ok());
  log = OpenLog();
  EXPECT_EQ(log->start_offset(), start);
  EXPECT_EQ(log->end_offset(), 400);
}

// A replicated log's retention stops at its high watermark: a segment holding an offset
// at or past the bound stays, however old or large the log.
TEST_F(LogTest, RetentionKeepsSegmentsNotWhollyBelowTheBound) {
  opts_.segment_bytes = 4096;
  opts_.retention_bytes = 0;  // everything may go
  opts_.retention_ms = -1;
  auto log = OpenLog();
  auto b = MakeBatch(10, 100, 1000, 1);
  for (int i = 0; i < 40; ++i) AppendSync(*log, b);
  ASSERT_TRUE(log->ApplyRetention(0).ok());
  EXPECT_EQ(log->start_offset(), 0);  // nothing is below offset 0
  ASSERT_TRUE(log->ApplyRetention(150).ok());
  const int64_t start = log->start_offset();
  EXPECT_GT(start, 0);
  EXPECT_LE(start, 150);  // the segment holding offset 150 is kept
  auto r = log->Read(150, 100);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(log->ApplyRetention().ok());  // unbounded: down to the active segment
  EXPECT_GT(log->start_offset(), 150);
  EXPECT_EQ(log->end_offset(), 400);
}

TEST_F(LogTest, RetentionByTimeDeletesOldSegmentsAndRollsAnExpiredActiveOne) {
  opts_.segment_bytes = 4096;
  opts_.retention_ms = 1000;
  clock_.Set(100'000);
  auto log = OpenLog();
  for (int i = 0; i < 20; ++i) AppendSync(*log, MakeBatch(10, 100, 50'000, i));
  int segs = log->segment_count();
  auto n = log->ApplyRetention();  // timestamps 50'000: older than 1 s at 100'000
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, segs - 1);
  // The expired active segment was rolled, not deleted: the next pass deletes it.
  EXPECT_EQ(log->segment_count(), 2);
  EXPECT_EQ(log->end_offset(), 200);
  ASSERT_TRUE(log->Close().ok());
  log = OpenLog();
  n = log->ApplyRetention();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(log->segment_count(), 1);
  EXPECT_EQ(log->start_offset(), 200);
  AppendSync(*log, MakeBatch(1, 10, 100'000, 1));
  EXPECT_EQ(log->end_offset(), 201);
}

TEST_F(LogTest, TruncateToRemovesLaterBatchesAcrossSegments) {
  opts_.segment_bytes = 4096;
  auto log = OpenLog();
  std::vector<std::vector<uint8_t>> stored;
  for (int i = 0; i < 30; ++i) {
    auto b = MakeBatch(10, 100, 1000 + i, i);
    AppendSync(*log, b);
    stored.push_back(Stored(b, i * 10));
  }
  ASSERT_TRUE(log->TruncateTo(125).ok());  // inside batch 12: it goes too
  EXPECT_EQ(log->end_offset(), 120);
  EXPECT_EQ(log->written_end_offset(), 120);
  std::vector<uint8_t> expect;
  for (int i = 0; i < 12; ++i) expect.insert(expect.end(), stored[i].begin(), stored[i].end());
  EXPECT_EQ(ReadAll(*log, 0), expect);
  auto b = MakeBatch(3, 10, 1000, 99);
  auto info = AppendSync(*log, b);
  EXPECT_EQ(info.base_offset, 120);
  auto s = Stored(b, 120);
  expect.insert(expect.end(), s.begin(), s.end());
  ASSERT_TRUE(log->Close().ok());
  log = OpenLog();
  EXPECT_EQ(log->end_offset(), 123);
  EXPECT_EQ(ReadAll(*log, 0), expect);
  ASSERT_TRUE(log->TruncateTo(0).ok());
  EXPECT_EQ(log->end_offset(), 0);
  EXPECT_EQ(log->segment_count(), 1);
}

TEST_F(LogTest, ATailReaderGoesOnFromItsLastReadWithoutTheIndex) {
  GatedEnv env;
  opts_.env = &env;
  auto log = OpenLog();
  std::vector<uint8_t> expect;
  auto append = [&](int n, int value_size) {
    auto b = MakeBatch(n, value_size, 1000, 1);
    auto info = AppendSync(*log, b);
    auto s = Stored(b, info.base_offset);
    expect.insert(expect.end(), s.begin(), s.end());
  };
  for (int i = 0; i < 40; ++i) append(10, 100);  // many index entries
  // A follower catching up: the first read searches the index.
  auto r = log->Read(0, 5000);
  ASSERT_TRUE(r.ok());
  std::vector<uint8_t> got, part;
  ASSERT_TRUE(PartitionLog::ReadSlice(r->slice, &got).ok());
  int64_t next = r->next_offset;
  const int index_reads = env.index_reads;
  // Reading on from where each read ended: no index search, the bytes follow on.
  for (int rounds = 0; next < log->written_end_offset(); ++rounds) {
    ASSERT_LT(rounds, 1000) << "the reader at " << next << " does not catch up with "
                            << log->written_end_offset();
    r = log->Read(next, 5000);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(PartitionLog::ReadSlice(r->slice, &part).ok());
    got.insert(got.end(), part.begin(), part.end());
    next = r->next_offset;
    if (rounds < 60) append(3, 50);  // the tail grows while the reader follows
  }
  EXPECT_EQ(env.index_reads, index_reads);
  got.resize(std::min(got.size(), expect.size()));
  EXPECT_EQ(got, std::vector<uint8_t>(expect.begin(), expect.begin() + got.size()));

  // Truncated below the reader and written again with other batches: the old position no
  // longer holds a batch at `next`, and the read finds the new one.
  ASSERT_TRUE(log->TruncateTo(next - 20).ok());
  expect = ReadAll(*log, 0);
  while (log->written_end_offset() <= next) append(7, 300);
  expect = ReadAll(*log, 0);
  r = log->Read(next, 1 << 20);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LE(r->first_offset, next);
  EXPECT_GT(r->next_offset, next);
  ASSERT_TRUE(PartitionLog::ReadSlice(r->slice, &part).ok());
  auto tail = ReadAll(*log, r->first_offset);
  EXPECT_EQ(part, std::vector<uint8_t>(tail.begin(), tail.begin() + part.size()));
}

TEST_F(LogTest, LargeBatchesAreWalkedByTheirHeadersOnly) {
  GatedEnv env;
  opts_.env = &env;
  auto log = OpenLog();
  std::vector<uint8_t> expect;
  for (int i = 0; i < 12; ++i) {
    auto b = MakeBatch(4, 20000, 1000, i);  // ~80 KB each
    auto info = AppendSync(*log, b);
    auto s = Stored(b, info.base_offset);
    expect.insert(expect.end(), s.begin(), s.end());
  }
  const int before = env.log_reads;
  auto r = log->Read(0, 1 << 20);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->next_offset, 48);
  EXPECT_EQ(r->slice.size, expect.size());
  // One read per header at most; the records themselves go out by the slice.
  EXPECT_LE(env.log_reads - before, 12);
  EXPECT_EQ(ReadAll(*log, 0), expect);
  // From the middle of a batch, through the index.
  r = log->Read(21, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first_offset, 20);
  EXPECT_EQ(r->next_offset, 24);
}

TEST_F(LogTest, DirectWritesGoAroundThePageCacheAndKeepEveryByte) {
  if (!Env::Posix()->Open(dir_ + "/probe", OpenMode::kCreate).ok() ||
      !Env::Posix()->Open(dir_ + "/probe", OpenMode::kDirect).ok()) {
    GTEST_SKIP() << dir_ << " is on a file system without O_DIRECT";
  }
  ASSERT_TRUE(Env::Posix()->Remove(dir_ + "/probe").ok());
  opts_.segment_bytes = 256 << 10;
  auto log = OpenLog();
  std::vector<uint8_t> expect;
  int n = 0;
  auto append = [&](int count) {
    for (int i = 0; i < count; ++i, ++n) {
      auto b = MakeBatch(1 + n % 7, 300 + 97 * (n % 13), 1000, n);  // sizes off the blocks
      auto info = AppendSync(*log, b);
      auto s = Stored(b, info.base_offset);
      expect.insert(expect.end(), s.begin(), s.end());
    }
  };
  // Off when opened (a leader's log): what was written stays in the page cache.
  append(30);
  EXPECT_GE(ResidentPages(Seg(0, ".log")), 20u);

  // On (a follower's): nothing written from here is cached; the bytes are all there.
  log->SetDirectWrites(true);
  append(150);  // rolls past 256 KB several times
  std::vector<int64_t> bases = SegmentBases();
  ASSERT_GE(bases.size(), 3u);
  for (size_t i = 1; i < bases.size(); ++i) {
    EXPECT_EQ(ResidentPages(Seg(bases[i], ".log")), 0u) << bases[i];
  }
  EXPECT_EQ(ReadAll(*log, 0), expect);

  // A crash now: the closed segments were cut to their bytes, the active one is padded
  // with zeros to a block, which recovery cuts as a torn tail.
  const std::string copy = dir_ + "-crashed";
  std::filesystem::copy(dir_, copy, std::filesystem::copy_options::recursive);
  EXPECT_EQ(std::filesystem::file_size(Seg(bases.back(), ".log")) % kDirectIoAlign, 0u);
  {
    auto crashed = PartitionLog::Open(copy, opts_);
    ASSERT_TRUE(crashed.ok()) << crashed.status().ToString();
    EXPECT_LT((*crashed)->recovery().truncated_bytes, kDirectIoAlign);
    EXPECT_EQ(ReadAll(**crashed, 0), expect);
  }
  std::filesystem::remove_all(copy);

  // Truncated into the active segment (a follower's divergent tail) and written on.
  ASSERT_TRUE(log->TruncateTo(log->written_end_offset() - 5).ok());
  expect = ReadAll(*log, 0);
  append(20);
  EXPECT_EQ(ReadAll(*log, 0), expect);

  // Off (it came to lead), and on again: each write starts where the other ended.
  log->SetDirectWrites(false);
  append(7);
  log->SetDirectWrites(true);
  append(7);
  EXPECT_EQ(ReadAll(*log, 0), expect);

  // A clean close leaves no padding: the reopened log cuts nothing.
  ASSERT_TRUE(log->Close().ok());
  log.reset();
  log = OpenLog();
  EXPECT_EQ(log->recovery().truncated_bytes, 0u) << log->recovery().truncation_reason;
  EXPECT_EQ(ReadAll(*log, 0), expect);
}

// A chunk larger than the write thread's 1 MiB window goes out in several direct writes
// (full windows, then a padded last one) starting off a block boundary; every byte reads
// back, from the log and after a crash.
TEST_F(LogTest, DirectWritesOfChunksLargerThanTheWindow) {
  if (!Env::Posix()->Open(dir_ + "/probe", OpenMode::kCreate).ok() ||
      !Env::Posix()->Open(dir_ + "/probe", OpenMode::kDirect).ok()) {
    GTEST_SKIP() << dir_ << " is on a file system without O_DIRECT";
  }
  ASSERT_TRUE(Env::Posix()->Remove(dir_ + "/probe").ok());
  opts_.segment_bytes = 64 << 20;
  opts_.max_batch_bytes = 4 << 20;
  auto log = OpenLog();
  log->SetDirectWrites(true);
  std::vector<uint8_t> expect;
  int n = 0;
  for (size_t value : {333u, 2'700'000u, 777u, 1'048'576u, 5u}) {  // 2.7 MB: three windows
    auto b = MakeBatch(1, value, 1000, n++);
    auto info = AppendSync(*log, b);
    auto stored = Stored(b, info.base_offset);
    expect.insert(expect.end(), stored.begin(), stored.end());
  }
  EXPECT_EQ(ReadAll(*log, 0), expect);
  const std::string copy = dir_ + "-crashed";
  std::filesystem::copy(dir_, copy, std::filesystem::copy_options::recursive);
  {
    auto crashed = PartitionLog::Open(copy, opts_);
    ASSERT_TRUE(crashed.ok()) << crashed.status().ToString();
    EXPECT_EQ(ReadAll(**crashed, 0), expect);
  }
  std::filesystem::remove_all(copy);
}

TEST_F(LogTest, ManyPartitionsShareABoundedDescriptorCache) {
  FileCache files(Env::Posix(), 24);
  opts_.files = &files;
  std::vector<std::unique_ptr<PartitionLog>> logs;
  for (int p = 0; p < 100; ++p) {
    auto log = PartitionLog::Open(dir_ + "/p" + std::to_string(p), opts_);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    AppendSync(**log, MakeBatch(2, 10, 1000, p));
    logs.push_back(std::move(*log));
    EXPECT_LE(files.open_count(), 24u);
  }
  for (auto& log : logs) {
    EXPECT_EQ(ReadAll(*log, 0).size(), MakeBatch(2, 10, 1000, 0).size());
  }
  EXPECT_LE(files.open_count(), 24u);
}

// storage.file_idle_timeout: idle logs hold no descriptor, and read and append as before
// once asked again; under the interval policy the written segment's descriptor is held
// until the sync that covers it (a write-back error reaches only descriptors open when it
// happened).
TEST_F(LogTest, IdleLogsHoldNoDescriptorAndWorkAgain) {
  for (FlushPolicy policy : {FlushPolicy::kDurable, FlushPolicy::kInterval}) {
    SCOPED_TRACE(policy == FlushPolicy::kDurable ? "durable" : "interval");
    testing::TempDir tmp;
    FileCache files(Env::Posix(), 1024, /*idle_timeout_ms=*/30);
    opts_.files = &files;
    opts_.flush_policy = policy;
    opts_.flush_ms = 50;
    auto wait_closed = [&] {
      for (int i = 0; i < 500 && testing::OpenDescriptorsUnder(tmp.path()) > 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      EXPECT_EQ(testing::OpenDescriptorsUnder(tmp.path()), 0);
    };
    std::vector<std::unique_ptr<PartitionLog>> logs;
    std::vector<std::vector<uint8_t>> expect(10);
    for (int p = 0; p < 10; ++p) {
      auto log = PartitionLog::Open(tmp.path() + "/p" + std::to_string(p), opts_);
      ASSERT_TRUE(log.ok()) << log.status().ToString();
      auto b = MakeBatch(3, 100, 1000, p);
      AppendSync(**log, b);
      auto stored = Stored(b, 0);
      expect[p].insert(expect[p].end(), stored.begin(), stored.end());
      logs.push_back(std::move(*log));
    }
    wait_closed();
    for (int p = 0; p < 10; ++p) {
      EXPECT_EQ(ReadAll(*logs[p], 0), expect[p]);
      auto b = MakeBatch(2, 100, 2000, p);
      std::promise<Status> written;
      AppendOptions o;
      o.ack = AckLevel::kWritten;
      o.on_ack = [&](const Status& st, const AppendInfo&) { written.set_value(st); };
      ASSERT_TRUE(logs[p]->Append(b, std::move(o)).ok());
      ASSERT_TRUE(written.get_future().get().ok());
      auto stored = Stored(b, 3);
      expect[p].insert(expect[p].end(), stored.begin(), stored.end());
    }
    wait_closed();  // under the interval policy: after the flusher's sync
    for (int p = 0; p < 10; ++p) {
      EXPECT_EQ(logs[p]->durable_end_offset(), 5);
      EXPECT_EQ(ReadAll(*logs[p], 0), expect[p]);
    }
    for (auto& log : logs) ASSERT_TRUE(log->Close().ok());
    logs.clear();
    wait_closed();
    opts_.files = nullptr;
  }
}

// The descriptor a segment was written through is held (not closed as idle) until the sync
// that covers it; a truncation or a close lets it go.
TEST_F(LogTest, WrittenSegmentKeepsItsDescriptorUntilSynced) {
  FileCache files(Env::Posix(), 64, /*idle_timeout_ms=*/3'600'000);  // swept by hand below
  opts_.files = &files;
  opts_.flush_policy = FlushPolicy::kInterval;
  opts_.flush_ms = 3'600'000;  // no sync but the ones asked for
  constexpr int64_t kHour = int64_t{3'600'000} * 1'000'000;
  auto log = OpenLog();
  ASSERT_TRUE(log->Flush().ok());
  auto append_written = [&](int seed) {
    std::promise<Status> written;
    AppendOptions w;
    w.ack = AckLevel::kWritten;
    w.on_ack = [&](const Status& st, const AppendInfo&) { written.set_value(st); };
    ASSERT_TRUE(log->Append(MakeBatch(3, 100, 1000, seed), std::move(w)).ok());
    ASSERT_TRUE(written.get_future().get().ok());
  };
  append_written(1);
  EXPECT_EQ(log->durable_end_offset(), 0);
  files.CloseIdle(MonotonicNanos() + 2 * kHour);
  EXPECT_EQ(testing::OpenDescriptorsUnder(dir_), 1);  // the segment, held for its sync
  ASSERT_TRUE(log->Flush().ok());
  EXPECT_EQ(log->durable_end_offset(), 3);
  EXPECT_EQ(files.CloseIdle(MonotonicNanos() + 4 * kHour), 1u);
  EXPECT_EQ(testing::OpenDescriptorsUnder(dir_), 0);
  EXPECT_EQ(ReadAll(*log, 0), Stored(MakeBatch(3, 100, 1000, 1), 0));

  append_written(2);  // held again, then cut away: the truncation lets it go
  ASSERT_TRUE(log->TruncateTo(3).ok());
  files.CloseIdle(MonotonicNanos() + 6 * kHour);
  EXPECT_EQ(testing::OpenDescriptorsUnder(dir_), 0);
  append_written(3);
  ASSERT_TRUE(log->Close().ok());
  files.CloseIdle(MonotonicNanos() + 8 * kHour);
  EXPECT_EQ(testing::OpenDescriptorsUnder(dir_), 0);
  opts_.files = nullptr;
}

TEST_F(LogTest, FullDiskFailsPendingAppendsAndKeepsWhatWasDurable) {
  testing::FaultEnv env(Env::Posix());
  opts_.env = &env;
  std::vector<uint8_t> expect;
  {
    auto log = OpenLog();
    for (int i = 0; i < 3; ++i) {
      auto b = MakeBatch(2, 50, 1000, i);
      AppendSync(*log, b);
      auto st = Stored(b, i * 2);
      expect.insert(expect.end(), st.begin(), st.end());
    }
    env.InjectWriteFault({.error = ENOSPC, .path_contains = ".log"});
    std::promise<Status> done;
    AppendOptions o;
    o.on_ack = [&](const Status& st, const AppendInfo&) { done.set_value(st); };
    ASSERT_TRUE(log->Append(MakeBatch(2, 50, 1000, 9), std::move(o)).ok());
    Status st = done.get_future().get();
    EXPECT_EQ(st.code(), StatusCode::kIOError);
    EXPECT_NE(st.message().find("No space left on device"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(Seg(0, ".log")), std::string::npos) << st.ToString();
    // The log is offline until reopened: later appends fail at once with the cause.
    auto again = log->Append(MakeBatch(1, 10, 1000, 1), {});
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.status().message().find("No space left"), std::string::npos);
    EXPECT_EQ(log->durable_end_offset(), 6);
    EXPECT_FALSE(log->Close().ok());
  }
  env.ClearFaults();
  auto log = OpenLog();
  EXPECT_EQ(log->end_offset(), 6);
  EXPECT_EQ(ReadAll(*log, 0), expect);
}

TEST_F(LogTest, FailedSyncFailsDurableAcks) {
  testing::FaultEnv env(Env::Posix());
  opts_.env = &env;
  auto log = OpenLog();
  AppendSync(*log, MakeBatch(2, 50, 1000, 1));
  env.FailNextSyncs(1, EIO);
  std::promise<Status> done;
  AppendOptions o;
  o.on_ack = [&](const Status& st, const AppendInfo&) { done.set_value(st); };
  ASSERT_TRUE(log->Append(MakeBatch(2, 50, 1000, 2), std::move(o)).ok());
  Status st = done.get_future().get();
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_NE(st.message().find("Input/output error"), std::string::npos) << st.ToString();
  EXPECT_EQ(log->durable_end_offset(), 2);
  EXPECT_FALSE(log->Flush().ok());
}

TEST_F(LogTest, ForEachBatchHeaderWalksHeadersFromAnOffset) {
  opts_.segment_bytes = 4096;
  auto log = OpenLog();
  for (int i = 0; i < 20; ++i) AppendSync(*log, MakeBatch(5, 100, 1000 + i, i));
  ASSERT_GT(log->segment_count(), 3);
  std::vector<int64_t> bases;
  ASSERT_TRUE(log->ForEachBatchHeader(37,
                                      [&](const BatchHeader& h, std::span<const uint8_t> raw) {
                                        EXPECT_EQ(raw.size(), kBatchHeaderSize);
                                        bases.push_back(h.base_offset);
                                        return true;
                                      })
                  .ok());
  ASSERT_EQ(bases.size(), 13u);  // the batch holding 37 (base 35) to the last (base 95)
  EXPECT_EQ(bases.front(), 35);
  EXPECT_EQ(bases.back(), 95);
  int seen = 0;
  ASSERT_TRUE(log->ForEachBatchHeader(
                     0, [&](const BatchHeader&, std::span<const uint8_t>) { return ++seen < 3; })
                  .ok());
  EXPECT_EQ(seen, 3);
}

TEST_F(LogTest, RejectsBadOptions) {
  opts_.segment_bytes = 10;
  EXPECT_EQ(PartitionLog::Open(dir_, opts_).status().code(), StatusCode::kInvalidArgument);
  opts_.segment_bytes = 1 << 20;
  opts_.executor = nullptr;
  EXPECT_EQ(PartitionLog::Open(dir_, opts_).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(LogTest, IgnoresFilesThatAreNotSegments) {
  WriteFileBytes(dir_ + "/notes.txt", {1, 2, 3});
  WriteFileBytes(dir_ + "/123.log", {1, 2, 3});
  auto log = OpenLog();
  AppendSync(*log, MakeBatch(1, 10, 1000, 1));
  EXPECT_EQ(log->end_offset(), 1);
}

}  // namespace
}  // namespace sluice::storage
