// The swap of cleaned segments (log_swap.cc): a swap replaces old segments by a cleaned
// one that keeps a subset of their batches; reads skip the gaps; the log reopens the same;
// a simulated power loss at every disk call of a swap, and a SIGKILL at each of its crash
// points, leave the old segments or the new one, whole; a reader racing swaps always
// sees batches that one of the two logs holds, in offset order.
#include "storage/log_swap.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "storage/io_executor.h"
#include "storage/log.h"
#include "storage/testing/batch_builder.h"
#include "storage/testing/fault_env.h"
#include "storage/testing/files.h"

namespace sluice::storage::testing {
namespace {

using Batches = std::map<int64_t, std::vector<uint8_t>>;  // base offset -> bytes

std::vector<std::string> Names(const std::string& dir) {
  auto names = Env::Posix()->ListDir(dir);
  return names.ok() ? *names : std::vector<std::string>{};
}

LogOptions Options(IoExecutor* exec, Env* env) {
  LogOptions o;
  o.executor = exec;
  o.env = env;
  o.segment_bytes = 1024;
  o.index_interval_bytes = 256;
  o.flush_policy = FlushPolicy::kDurable;
  return o;
}

// Appends `n` batches of 3 records each; returns what the log stores.
void Fill(PartitionLog& log, int n) {
  for (int i = 0; i < n; ++i) {
    BatchSpec spec;
    for (int r = 0; r < 3; ++r) {
      spec.records.push_back({fmt::format("k{}", (i * 3 + r) % 7), fmt::format("v{}-{}", i, r)});
    }
    auto batch = BuildBatch(spec);
    ASSERT_TRUE(log.Append(batch, {}).ok());
  }
  ASSERT_TRUE(log.Flush().ok());
}

// A log in `dir` holding `batches` batches of Fill.
Result<std::unique_ptr<PartitionLog>> OpenFilled(const std::string& dir, IoExecutor* exec, Env* env,
                                                 int batches) {
  ASSIGN_OR_RETURN(auto log, PartitionLog::Open(dir, Options(exec, env)));
  Fill(*log, batches);
  return log;
}

// Every batch the log serves from its start, read `max_bytes` at a time.
Result<Batches> ReadBatches(PartitionLog& log, uint64_t max_bytes = 700) {
  Batches out;
  int64_t offset = log.start_offset();
  int64_t end = log.written_end_offset();
  std::vector<uint8_t> buf;
  while (offset < end) {
    ASSIGN_OR_RETURN(ReadResult r, log.Read(offset, max_bytes));
    if (r.slice.size == 0) break;
    RETURN_IF_ERROR(PartitionLog::ReadSlice(r.slice, &buf));
    size_t pos = 0;
    int64_t last_next = -1;
    while (pos < buf.size()) {
      BatchHeader h = ParseBatchHeader(std::span<const uint8_t>(buf).subspan(pos));
      if (h.base_offset < offset && pos > 0) return InternalError("batches out of order");
      out[h.base_offset] = std::vector<uint8_t>(
          buf.begin() + static_cast<ptrdiff_t>(pos),
          buf.begin() + static_cast<ptrdiff_t>(pos) + static_cast<ptrdiff_t>(h.total_size()));
      pos += h.total_size();
      last_next = h.next_offset();
    }
    if (last_next <= offset) return InternalError("read at {} did not advance", offset);
    offset = last_next;
  }
  return out;
}

// The cleaning the tests use: keeps the batches of the first `count` closed segments whose
// base offset is not 3 mod 9 (and drops every batch of the second segment), as a cleaner
// dropping superseded batches would. Returns the old bases and the expected content.
struct Plan {
  std::vector<int64_t> old_bases;
  Batches expected;  // the whole log after the swap
};

Result<Plan> Clean(PartitionLog& log, size_t count, std::unique_ptr<CleanedSegment>* out) {
  Plan plan;
  auto closed = log.ClosedSegments();
  if (closed.size() < count) return InternalError("only {} closed segments", closed.size());
  ASSIGN_OR_RETURN(Batches all, ReadBatches(log));
  ASSIGN_OR_RETURN(*out, log.BeginCleaned(closed[0].base_offset));
  int64_t end = count < closed.size() ? closed[count].base_offset : log.end_offset();
  for (size_t i = 0; i < count; ++i) plan.old_bases.push_back(closed[i].base_offset);
  for (const auto& [base, bytes] : all) {
    bool in_range = base < end;
    bool second = count > 1 && base >= closed[1].base_offset && base < closed[1].next_offset;
    if (in_range && (base % 9 == 3 || second)) continue;
    if (in_range) RETURN_IF_ERROR((*out)->Append(bytes));
    plan.expected[base] = bytes;
  }
  return plan;
}

TEST(LogSwapTest, SwapKeepsTheCleanedBatchesAndReadsSkipGaps) {
  TempDir dir;
  IoExecutor exec(2);
  Batches expected, before;
  {
    auto log = OpenFilled(dir.path(), &exec, Env::Posix(), 60);
    ASSERT_TRUE(log.ok());
    before = *ReadBatches(**log);
    int segments = (*log)->segment_count();
    ASSERT_GE(segments, 5);
    std::unique_ptr<CleanedSegment> cleaned;
    auto plan = Clean(**log, 3, &cleaned);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    Status st = (*log)->ReplaceSegments(plan->old_bases, std::move(cleaned));
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ((*log)->segment_count(), segments - 2);
    expected = plan->expected;
    EXPECT_LT(expected.size(), before.size());
    for (uint64_t max_bytes : {1u, 100u, 700u, 100000u}) {
      auto got = ReadBatches(**log, max_bytes);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, expected) << "max_bytes " << max_bytes;
    }
    // An offset inside a gap reads from the next batch.
    int64_t gap = -1;
    for (int64_t o = 0; o < (*log)->end_offset() && gap < 0; ++o) {
      if (!expected.count(o) && before.count(o)) gap = o;
    }
    ASSERT_GE(gap, 0);
    auto r = (*log)->Read(gap, 1);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_GT(r->first_offset, gap);
    EXPECT_TRUE(expected.count(r->first_offset));
    ASSERT_TRUE((*log)->Verify().ok());
    // Appends go on.
    Fill(**log, 3);
    expected = *ReadBatches(**log);
  }
  for (const auto& name : Names(dir.path())) {
    EXPECT_EQ(name.find(".cleaned"), std::string::npos) << name;
    EXPECT_EQ(name.find(".swap"), std::string::npos) << name;
    EXPECT_EQ(name.find(".deleted"), std::string::npos) << name;
    EXPECT_EQ(name.find(".replace"), std::string::npos) << name;
  }
  auto log = PartitionLog::Open(dir.path(), Options(&exec, Env::Posix()));
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ((*log)->recovery().indexes_rebuilt, 1);  // only the active segment's, as always
  EXPECT_EQ(*ReadBatches(**log), expected);
  ASSERT_TRUE((*log)->Verify().ok());
}

TEST(LogSwapTest, EmptyCleanedSegmentKeepsTheLogStart) {
  TempDir dir;
  IoExecutor exec(2);
  auto log = OpenFilled(dir.path(), &exec, Env::Posix(), 40);
  ASSERT_TRUE(log.ok());
  auto closed = (*log)->ClosedSegments();
  ASSERT_GE(closed.size(), 3u);
  auto cleaned = (*log)->BeginCleaned(0);
  ASSERT_TRUE(cleaned.ok());
  ASSERT_TRUE((*log)->ReplaceSegments({0, closed[1].base_offset}, std::move(*cleaned)).ok());
  EXPECT_EQ((*log)->start_offset(), 0);
  auto r = (*log)->Read(0, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->first_offset, closed[2].base_offset);
  log->reset();
  auto again = PartitionLog::Open(dir.path(), Options(&exec, Env::Posix()));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->start_offset(), 0);
  EXPECT_EQ((*again)->Read(0, 1)->first_offset, closed[2].base_offset);
}

TEST(LogSwapTest, TruncateInsideAGapKeepsTheEndThere) {
  TempDir dir;
  IoExecutor exec(2);
  int64_t gap_end;
  {
    auto log = OpenFilled(dir.path(), &exec, Env::Posix(), 40);
    ASSERT_TRUE(log.ok());
    auto closed = (*log)->ClosedSegments();
    ASSERT_GE(closed.size(), 3u);
    // The first two segments become one holding only the first segment's first batch.
    auto cleaned = (*log)->BeginCleaned(0);
    ASSERT_TRUE(cleaned.ok());
    auto first = (*log)->Read(0, 1);
    ASSERT_TRUE(first.ok());
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(PartitionLog::ReadSlice(first->slice, &bytes).ok());
    ASSERT_TRUE((*cleaned)->Append(bytes).ok());
    ASSERT_TRUE((*log)->ReplaceSegments({0, closed[1].base_offset}, std::move(*cleaned)).ok());
    gap_end = closed[2].base_offset;
    int64_t inside = first->next_offset + 1;
    ASSERT_LT(inside, gap_end);
    ASSERT_TRUE((*log)->TruncateTo(inside).ok());
    EXPECT_EQ((*log)->end_offset(), inside);
    auto info = (*log)->Append(BuildBatch(BatchSpec{{{"k", "after"}}}), {});
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->base_offset, inside);
    ASSERT_TRUE((*log)->Flush().ok());
  }
  auto log = PartitionLog::Open(dir.path(), Options(&exec, Env::Posix()));
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  auto got = ReadBatches(**log);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 2u);
  EXPECT_EQ((*log)->end_offset(), got->rbegin()->first + 1);
}

TEST(LogSwapTest, AbortedTxnEntriesWithTheirMarkersInsideGoAlong) {
  TempDir dir;
  IoExecutor exec(2);
  auto log = OpenFilled(dir.path(), &exec, Env::Posix(), 40);
  ASSERT_TRUE(log.ok());
  auto closed = (*log)->ClosedSegments();
  ASSERT_GE(closed.size(), 3u);
  // Kafka's 34-byte entries (version, producer, first, last = the marker, LSO), one per
  // old segment's index; the cleaned segment keeps offsets 0-2 only.
  auto entry = [](int64_t pid, int64_t first, int64_t marker) {
    std::vector<uint8_t> e(34, 0);
    StoreBE64(e.data() + 2, static_cast<uint64_t>(pid));
    StoreBE64(e.data() + 10, static_cast<uint64_t>(first));
    StoreBE64(e.data() + 18, static_cast<uint64_t>(marker));
    return e;
  };
  auto seg = [&](int64_t base, const char* ext) {
    return dir.path() + "/" + fmt::format("{:020d}{}", base, ext);
  };
  std::vector<uint8_t> first = entry(7, 0, 1), second = entry(8, 2, closed[1].base_offset + 1);
  WriteFileBytes(seg(0, ".txnindex"), first);
  WriteFileBytes(seg(closed[1].base_offset, ".txnindex"), second);
  auto cleaned = (*log)->BeginCleaned(0);
  ASSERT_TRUE(cleaned.ok());
  auto r = (*log)->Read(0, 1);
  ASSERT_TRUE(r.ok());
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(PartitionLog::ReadSlice(r->slice, &bytes).ok());
  ASSERT_TRUE((*cleaned)->Append(bytes).ok());
  ASSERT_TRUE((*log)->ReplaceSegments({0, closed[1].base_offset}, std::move(*cleaned)).ok());
  EXPECT_EQ(ReadFileBytes(seg(0, ".txnindex")), first);
  EXPECT_FALSE(Env::Posix()->Exists(seg(closed[1].base_offset, ".txnindex")));
}

TEST(LogSwapTest, SwapRefusedWhenRetentionRemovedTheSegments) {
  TempDir dir;
  IoExecutor exec(2);
  auto log = OpenFilled(dir.path(), &exec, Env::Posix(), 40);
  ASSERT_TRUE(log.ok());
  std::unique_ptr<CleanedSegment> cleaned;
  auto plan = Clean(**log, 2, &cleaned);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE((*log)->DeleteRecordsBefore(plan->old_bases[1] + 1).ok());
  Status st = (*log)->ReplaceSegments(plan->old_bases, std::move(cleaned));
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  for (const auto& name : Names(dir.path()))
    EXPECT_EQ(name.find(".cleaned"), std::string::npos) << name;
}

TEST(LogSwapTest, RecoveryRemovesAnUncommittedSwap) {
  TempDir dir;
  IoExecutor exec(2);
  Batches before;
  {
    auto log = OpenFilled(dir.path(), &exec, Env::Posix(), 40);
    ASSERT_TRUE(log.ok());
    before = *ReadBatches(**log);
  }
  // Files a crash before the commit point leaves: cleaned and swap files, no manifest.
  auto name = [&](const char* ext) { return dir.path() + "/" + fmt::format("{:020d}{}", 0, ext); };
  WriteFileBytes(name(".log.cleaned"), {1, 2, 3});
  WriteFileBytes(name(".index.swap"), {4});
  WriteFileBytes(name(".replace.cleaned"), {'x'});
  WriteFileBytes(name(".timeindex.deleted"), {5});
  auto log = PartitionLog::Open(dir.path(), Options(&exec, Env::Posix()));
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(*ReadBatches(**log), before);
  for (const char* ext : {".log.cleaned", ".index.swap", ".replace.cleaned", ".timeindex.deleted"})
    EXPECT_FALSE(Env::Posix()->Exists(name(ext))) << ext;
}

TEST(LogSwapTest, CorruptManifestIsReported) {
  TempDir dir;
  IoExecutor exec(2);
  {
    auto log = OpenFilled(dir.path(), &exec, Env::Posix(), 10);
    ASSERT_TRUE(log.ok());
  }
  std::string m = dir.path() + "/" + fmt::format("{:020d}.replace.swap", 0);
  for (std::string text :
       {"", "sluice-swap 2\nend 5\nfiles .log\n", "sluice-swap 1\nend -3\nfiles .log\n",
        "sluice-swap 1\nend 5\nfiles .exe\n", "sluice-swap 1\nend 9\nfiles\n",
        "sluice-swap 1\nend 99999999999999999999999\nfiles .log\n"}) {
    WriteFileBytes(m, std::vector<uint8_t>(text.begin(), text.end()));
    auto log = PartitionLog::Open(dir.path(), Options(&exec, Env::Posix()));
    ASSERT_FALSE(log.ok()) << text;
    EXPECT_EQ(log.status().code(), StatusCode::kCorruption) << log.status().ToString();
  }
}

// Power loss at each disk call of a swap, with each way of tearing unsynced bytes.
TEST(LogSwapTest, PowerLossAtEveryStepLeavesOldOrNew) {
  int outcomes_old = 0, outcomes_new = 0;
  // Each disk call in turn, with each way of tearing the unsynced bytes.
  for (TearMode mode : {TearMode::kDropAll, TearMode::kKeepPrefix, TearMode::kCorruptMiddle}) {
    // On tmpfs when there is one: the power loss is simulated, the fsyncs need not be real.
    const std::string prefix =
        Env::Posix()->Exists("/dev/shm") ? "/dev/shm/sluice-swap-crash" : "sluice-test";
    for (uint64_t k = 0;; ++k) {
      TempDir dir(prefix);
      IoExecutor exec(2);
      FaultEnv env(Env::Posix());
      Batches before, after;
      bool done = false;
      {
        auto log = OpenFilled(dir.path(), &exec, &env, 40);
        ASSERT_TRUE(log.ok());
        before = *ReadBatches(**log);
        std::unique_ptr<CleanedSegment> cleaned;
        auto plan = Clean(**log, 3, &cleaned);
        ASSERT_TRUE(plan.ok()) << plan.status().ToString();
        after = plan->expected;
        env.CrashAfter(k);
        done = (*log)->ReplaceSegments(plan->old_bases, std::move(cleaned)).ok();
        if (!done) env.SimulateCrash();
      }
      if (done) break;
      std::string report;
      ASSERT_TRUE(env.DropUnsyncedData(k * 31 + 7, mode, &report).ok());
      env.Reset();
      auto log = PartitionLog::Open(dir.path(), Options(&exec, &env));
      ASSERT_TRUE(log.ok()) << "crash at disk call " << k << ", " << TearModeName(mode) << ": "
                            << log.status().ToString() << "\n"
                            << report;
      auto got = ReadBatches(**log);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      if (*got == before) {
        ++outcomes_old;
      } else {
        ASSERT_EQ(*got, after) << "crash at disk call " << k << ", " << TearModeName(mode)
                               << ": the log is neither the old nor the new one\n"
                               << report;
        ++outcomes_new;
      }
      ASSERT_TRUE((*log)->Verify().ok());
      for (const auto& name : Names(dir.path())) {
        EXPECT_EQ(name.find(".swap"), std::string::npos) << name;
        EXPECT_EQ(name.find(".cleaned"), std::string::npos) << name;
      }
    }
  }
  EXPECT_GT(outcomes_old, 0);
  EXPECT_GT(outcomes_new, 0);
}

// The child of KilledAtEachCrashPointLeavesOldOrNew: fills a log in $SLUICE_SWAP_DIR and
// swaps, with SLUICE_TEST_CRASH_AT set by the parent. Skipped unless run by that test.
TEST(LogSwapTest, DISABLED_SwapChild) {
  const char* where = std::getenv("SLUICE_SWAP_DIR");
  ASSERT_NE(where, nullptr);
  IoExecutor exec(2);
  auto log = OpenFilled(where, &exec, Env::Posix(), 40);
  ASSERT_TRUE(log.ok());
  std::unique_ptr<CleanedSegment> cleaned;
  auto plan = Clean(**log, 3, &cleaned);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE((*log)->ReplaceSegments(plan->old_bases, std::move(cleaned)).ok());
}

// SIGKILL at each crash point of the swap (base/crash_point.h), in a fresh process (the
// hook reads its setting once per process): the reopened log is the old one before the
// commit point, the new one from it on.
TEST(LogSwapTest, KilledAtEachCrashPointLeavesOldOrNew) {
  for (const char* point : {"compaction-cleaned-written", "compaction-swap-committed",
                            "compaction-old-deleted", "compaction-swap-installed"}) {
    TempDir dir;
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("SLUICE_TEST_CRASH_AT", fmt::format("{}:1", point).c_str(), 1);
      setenv("SLUICE_SWAP_DIR", dir.path().c_str(), 1);
      execl("/proc/self/exe", "log_swap_child", "--gtest_filter=LogSwapTest.DISABLED_SwapChild",
            "--gtest_also_run_disabled_tests", static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << point << ": child status " << status;
    IoExecutor exec(2);
    auto log = PartitionLog::Open(dir.path(), Options(&exec, Env::Posix()));
    ASSERT_TRUE(log.ok()) << point << ": " << log.status().ToString();
    auto got = ReadBatches(**log);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE((*log)->Verify().ok());
    // The plan drops batches; the old log has all 40.
    bool before_commit = std::string_view(point) == "compaction-cleaned-written";
    EXPECT_EQ(got->size() == 40, before_commit) << point << ": " << got->size() << " batches";
    for (const auto& name : Names(dir.path())) {
      EXPECT_EQ(name.find(".swap"), std::string::npos) << point << " " << name;
      EXPECT_EQ(name.find(".deleted"), std::string::npos) << point << " " << name;
    }
  }
}

// A reader going over the log while segments are swapped sees, at every offset, the
// batch both logs hold there, and offsets only grow.
TEST(LogSwapTest, ReadersDuringSwapsSeeAConsistentLog) {
  TempDir dir;
  IoExecutor exec(2);
  auto log = OpenFilled(dir.path(), &exec, Env::Posix(), 80);
  ASSERT_TRUE(log.ok());
  Batches original = *ReadBatches(**log);
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0};
  std::string failure;
  std::thread reader([&] {
    while (!stop) {
      auto got = ReadBatches(**log, 300);
      if (!got.ok()) {
        failure = got.status().ToString();
        return;
      }
      for (const auto& [base, bytes] : *got) {
        auto it = original.find(base);
        if (it == original.end() || it->second != bytes) {
          failure = fmt::format("batch at {} is not the log's", base);
          return;
        }
      }
      ++reads;
    }
  });
  for (int round = 0; round < 6; ++round) {
    std::unique_ptr<CleanedSegment> cleaned;
    auto closed = (*log)->ClosedSegments();
    if (closed.size() < 3) break;
    auto plan = Clean(**log, 2, &cleaned);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_TRUE((*log)->ReplaceSegments(plan->old_bases, std::move(cleaned)).ok());
  }
  while (reads < 3 && failure.empty()) std::this_thread::yield();
  stop = true;
  reader.join();
  EXPECT_EQ(failure, "");
}

}  // namespace
}  // namespace sluice::storage::testing
