// The crash-recovery property test of PartitionLog.
//
// Simulated power loss: each crash point runs appenders against a log over a FaultEnv,
// "kills" the process at a random moment (FaultEnv::SimulateCrash), drops the unsynced
// bytes the way a power loss would (cut, torn, or corrupted in the middle), reopens the
// log and checks that
//   (a) every batch acknowledged durable is there, byte for byte, at its offsets;
//   (b) the log is exactly a prefix, in offset order, of the batches appended;
//   (c) end, written end and durable end are the offset after that prefix;
//   (d) the log takes new appends and reads them back;
// and that, before that, every accepted append got exactly one callback and closing the
// crashed log did not hang.
//
// Crashes inside TruncateTo and ApplyRetention, at every disk call in turn: the log must
// reopen and hold a prefix (a suffix, for retention) of what it held.
//
// SIGKILL: a child process appends a deterministic sequence to a real log and reports
// each durable ack through a pipe; the parent kills it at a random moment and checks the
// reopened log the same way.
//
// SLUICE_CRASH_POINTS (default 50) sets the number of crash points; the SIGKILL cases are
// a tenth of it. SLUICE_CRASH_SEED (default fixed) seeds everything and is printed; a
// failure names its point, and SLUICE_CRASH_ONLY=<point> replays just that one.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "storage/batch_header.h"
#include "storage/io_executor.h"
#include "storage/log.h"
#include "storage/testing/batch_builder.h"
#include "storage/testing/fault_env.h"
#include "storage/testing/files.h"

namespace sluice::storage::testing {
namespace {

constexpr uint64_t kDefaultSeed = 0x5111CE0C4A5Full;
constexpr int kDefaultPoints = 50;

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 0);
}

uint64_t Seed() { return EnvU64("SLUICE_CRASH_SEED", kDefaultSeed); }
int Points() { return static_cast<int>(EnvU64("SLUICE_CRASH_POINTS", kDefaultPoints)); }
std::optional<int> OnlyPoint() {
  if (std::getenv("SLUICE_CRASH_ONLY") == nullptr) return std::nullopt;
  return static_cast<int>(EnvU64("SLUICE_CRASH_ONLY", 0));
}

// splitmix64: independent seeds for each point and each use.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
uint64_t Derive(uint64_t seed, uint64_t a, uint64_t b = 0) { return Mix(Mix(seed ^ Mix(a)) ^ b); }

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  // Uniform in [lo, hi].
  int64_t Range(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen_);
  }
  bool OneIn(int n) { return Range(0, n - 1) == 0; }
  uint64_t Next() { return gen_(); }

 private:
  std::mt19937_64 gen_;
};

using testing::TempDir;

// Aborts the process, naming the point and the stage, when a stage never ends: a hang
// must fail the test with its seed, not wait for ctest's timeout. Not a duration check:
// the limit is far beyond anything a working log needs.
class HangWatchdog {
 public:
  HangWatchdog() : thread_([this] { Run(); }) {}
  ~HangWatchdog() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Stage(std::string what) {
    std::lock_guard lock(mu_);
    stage_ = std::move(what);
    ++generation_;
    cv_.notify_all();
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    while (!done_) {
      uint64_t seen = generation_;
      if (!cv_.wait_for(lock, std::chrono::seconds(120),
                        [&] { return done_ || generation_ != seen; })) {
        std::fprintf(stderr, "crash_test: HANG for 120 s at %s\n", stage_.c_str());
        std::abort();
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::string stage_ = "start";
  uint64_t generation_ = 0;
  bool done_ = false;
  std::thread thread_;
};

// One batch as the log stores it, read back.
struct StoredBatch {
  int64_t base_offset;
  int64_t last_offset;
  std::vector<uint8_t> bytes;
};

// Every batch from start_offset() to written_end_offset(), through Read and ReadSlice,
// `max_bytes` at a time.
Result<std::vector<StoredBatch>> ReadAll(PartitionLog& log, uint64_t max_bytes) {
  std::vector<StoredBatch> out;
  int64_t offset = log.start_offset();
  const int64_t end = log.written_end_offset();
  std::vector<uint8_t> buf;
  while (offset < end) {
    ASSIGN_OR_RETURN(ReadResult r, log.Read(offset, max_bytes));
    if (r.slice.size == 0) {
      return InternalError("Read({}) returned nothing before the written end {}", offset, end);
    }
    if (r.first_offset != offset) {
      return InternalError("Read({}) starts at batch {}, not at a batch boundary", offset,
                           r.first_offset);
    }
    RETURN_IF_ERROR(PartitionLog::ReadSlice(r.slice, &buf));
    size_t pos = 0;
    int64_t next = offset;
    while (pos < buf.size()) {
      if (buf.size() - pos < kBatchHeaderSize) {
        return InternalError("Read({}): {} trailing bytes are not a batch", offset,
                             buf.size() - pos);
      }
      BatchHeader h = ParseBatchHeader(std::span<const uint8_t>(buf).subspan(pos));
      if (h.length < 0 || h.total_size() > buf.size() - pos) {
        return InternalError("Read({}): batch at byte {} of the slice runs past it", offset, pos);
      }
      if (h.base_offset != next) {
        return InternalError("Read({}): batch at byte {} of the slice has base offset {}, want {}",
                             offset, pos, h.base_offset, next);
      }
      out.push_back(StoredBatch{
          h.base_offset, h.last_offset(),
          std::vector<uint8_t>(buf.begin() + static_cast<ptrdiff_t>(pos),
                               buf.begin() + static_cast<ptrdiff_t>(pos + h.total_size()))});
      pos += h.total_size();
      next = h.next_offset();
    }
    if (r.next_offset != next) {
      return InternalError("Read({}): next_offset {} but the slice ends at offset {}", offset,
                           r.next_offset, next);
    }
    offset = next;
  }
  if (offset != end)
    return InternalError("read up to offset {}, past the written end {}", offset, end);
  ASSIGN_OR_RETURN(ReadResult tail, log.Read(end, max_bytes));
  if (tail.slice.size != 0) return InternalError("Read at the written end {} returned bytes", end);
  return out;
}

// A batch the test appended: what it sent and what the log must store.
struct SentBatch {
  int64_t base_offset = -1;
  int64_t last_offset = -1;
  std::vector<uint8_t> expected;  // the input with the log's offset and epoch applied
  std::atomic<int> callbacks{0};
  std::atomic<bool> durable_ok{false};
};

// The batches the log may hold, in offset order.
struct Expected {
  int64_t offset = 0;  // base offset of the next batch
  const std::vector<uint8_t>* bytes = nullptr;
  int64_t last_offset = 0;
  bool durable = false;
};

// Checks (a), (b), (c) on a reopened log against `sent` (in offset order). Returns the
// number of batches recovered.
size_t CheckRecovered(PartitionLog& log, const std::vector<Expected>& sent, uint64_t max_bytes,
                      const std::string& context) {
  auto read = ReadAll(log, max_bytes);
  EXPECT_TRUE(read.ok()) << context << "\nreading the recovered log: " << read.status().ToString();
  if (!read.ok()) return 0;
  const std::vector<StoredBatch>& got = *read;

  // (b) a prefix, byte for byte.
  size_t k = 0;
  for (; k < got.size(); ++k) {
    if (k >= sent.size()) {
      ADD_FAILURE() << context << "\nrecovered batch " << k << " at offset " << got[k].base_offset
                    << " was never appended (only " << sent.size() << " were)";
      return k;
    }
    if (got[k].base_offset != sent[k].offset || got[k].bytes != *sent[k].bytes) {
      size_t diff = 0;
      while (diff < got[k].bytes.size() && diff < sent[k].bytes->size() &&
             got[k].bytes[diff] == (*sent[k].bytes)[diff]) {
        ++diff;
      }
      ADD_FAILURE() << context << "\nrecovered batch " << k << " differs from the one appended: "
                    << "offset " << got[k].base_offset << " (want " << sent[k].offset << "), "
                    << got[k].bytes.size() << " bytes (want " << sent[k].bytes->size()
                    << "), first difference at byte " << diff;
      return k;
    }
  }

  // (a) every durable ack survived.
  for (size_t i = k; i < sent.size(); ++i) {
    if (sent[i].durable) {
      ADD_FAILURE() << context << "\nLOST ACKNOWLEDGED DATA: batch " << i << " at offsets ["
                    << sent[i].offset << ", " << sent[i].last_offset
                    << "] was acknowledged durable but the recovered log ends at offset "
                    << (k == 0 ? log.start_offset() : sent[k - 1].last_offset + 1) << " (" << k
                    << " of " << sent.size() << " batches)";
      break;
    }
  }

  // (c) the offsets agree with the prefix.
  int64_t want_end = k == 0 ? 0 : sent[k - 1].last_offset + 1;
  EXPECT_EQ(log.start_offset(), 0) << context;
  EXPECT_EQ(log.end_offset(), want_end) << context;
  EXPECT_EQ(log.written_end_offset(), want_end) << context;
  EXPECT_EQ(log.durable_end_offset(), want_end) << context;
  return k;
}

// (d): the log takes new appends after recovery, and they read back.
void CheckAppendsAfterRecovery(PartitionLog& log, Rng& rng, const std::string& context) {
  std::vector<std::vector<uint8_t>> stored;
  int64_t base = log.end_offset();
  int64_t next = base;
  int n = static_cast<int>(rng.Range(1, 5));
  std::atomic<int> acked{0};
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> batch =
        MakeBatch(static_cast<int>(rng.Range(1, 8)), static_cast<size_t>(rng.Range(0, 64)),
                  1'700'000'000'000 + i, rng.Next());
    AppendOptions opts;
    opts.on_ack = [&acked](const Status& st, const AppendInfo&) {
      if (st.ok()) ++acked;
    };
    auto info = log.Append(batch, std::move(opts));
    ASSERT_TRUE(info.ok()) << context << "\nappend after recovery: " << info.status().ToString();
    EXPECT_EQ(info->base_offset, next) << context;
    AssignOffsets(batch, info->base_offset, 0);
    stored.push_back(std::move(batch));
    next = info->last_offset + 1;
  }
  Status st = log.Flush();
  ASSERT_TRUE(st.ok()) << context << "\nflush after recovery: " << st.ToString();
  EXPECT_EQ(acked.load(), n) << context;
  EXPECT_EQ(log.end_offset(), next) << context;
  EXPECT_EQ(log.durable_end_offset(), next) << context;
  std::vector<uint8_t> buf;
  int64_t offset = base;
  for (size_t i = 0; i < stored.size(); ++i) {
    auto r = log.Read(offset, 1);  // one batch at a time
    ASSERT_TRUE(r.ok()) << context << "\nread after recovery: " << r.status().ToString();
    ASSERT_TRUE(PartitionLog::ReadSlice(r->slice, &buf).ok()) << context;
    EXPECT_EQ(buf, stored[i]) << context << "\nnew batch " << i << " at offset " << offset;
    offset = r->next_offset;
  }
}

// ---------------------------------------------------------------------------------------
// Simulated power loss

// What makes the process "die".
enum class CrashTrigger {
  kAfterAppends,    // once the appenders got this many appends accepted
  kAfterMillis,     // after a few milliseconds
  kAfterDiskCalls,  // FaultEnv::CrashAfter: at the n-th disk-changing call
  kDiskFull,        // a write fails (ENOSPC or EIO, maybe torn), the log fails, then the crash
  kSyncError,       // an fdatasync fails (EIO), the log fails, then the crash
};

std::string_view TriggerUnit(CrashTrigger t) {
  switch (t) {
    case CrashTrigger::kAfterAppends:
      return "appends";
    case CrashTrigger::kAfterMillis:
      return "ms";
    case CrashTrigger::kAfterDiskCalls:
      return "disk calls";
    case CrashTrigger::kDiskFull:
      return "writes, then a failed write";
    case CrashTrigger::kSyncError:
      return "syncs, then a failed sync";
  }
  return "?";
}

struct PointConfig {
  LogOptions options;
  int executor_threads;
  int appenders;
  int max_in_flight;
  CrashTrigger trigger;
  int crash_after;  // appends, milliseconds, disk calls, writes or syncs
  int fault_errno;
  bool torn_write;  // kDiskFull: the failed write wrote half its bytes
  bool power_loss;  // false: the process dies but the page cache survives
  TearMode tear;
  bool crash_in_recovery;  // the first reopen dies too, after a few disk calls
  int recovery_crash_calls;
  TearMode recovery_tear;
  bool reader;  // a thread reads while the appenders append
  bool reopen_with_fault_env;
  uint64_t read_max_bytes;
  int max_records;
  int max_value_bytes;
  int32_t leader_epoch;

  std::string Describe() const {
    return fmt::format(
        "policy={} flush_ms={} segment_bytes={} index_interval_bytes={} io_threads={} "
        "appenders={} in_flight={} reader={} crash_after={} {}{} power_loss={} {} reopen_env={} "
        "read_max_bytes={}",
        FlushPolicyName(options.flush_policy), options.flush_ms, options.segment_bytes,
        options.index_interval_bytes, executor_threads, appenders, max_in_flight, reader,
        crash_after, TriggerUnit(trigger),
        trigger == CrashTrigger::kDiskFull || trigger == CrashTrigger::kSyncError
            ? fmt::format(" ({}{})", std::strerror(fault_errno), torn_write ? ", torn" : "")
            : std::string(),
        power_loss ? TearModeName(tear) : "none",
        crash_in_recovery ? fmt::format("then crash in recovery after {} disk calls, tear={}",
                                        recovery_crash_calls, TearModeName(recovery_tear))
                          : std::string("no crash in recovery"),
        reopen_with_fault_env ? "fault" : "posix", read_max_bytes);
  }
};

PointConfig ChoosePoint(Rng& rng) {
  PointConfig c;
  c.options.flush_policy = rng.OneIn(2) ? FlushPolicy::kDurable : FlushPolicy::kInterval;
  c.options.flush_ms = rng.Range(1, 10);
  c.options.flush_bytes =
      rng.OneIn(3) ? static_cast<uint64_t>(rng.Range(1024, 32 * 1024)) : 64ull << 20;
  c.options.segment_bytes =
      rng.OneIn(3) ? 1ull << 30 : static_cast<uint64_t>(rng.Range(8, 64)) * 1024;
  c.options.index_interval_bytes = static_cast<uint32_t>(rng.Range(64, 4096));
  c.executor_threads = static_cast<int>(rng.Range(1, 2));
  c.appenders = static_cast<int>(rng.Range(1, 3));
  c.max_in_flight = static_cast<int>(rng.Range(1, 4));
  // Mostly plain crashes; a failed write or sync in one point of five.
  int64_t t = rng.Range(0, 9);
  c.trigger = t < 3   ? CrashTrigger::kAfterAppends
              : t < 5 ? CrashTrigger::kAfterMillis
              : t < 8 ? CrashTrigger::kAfterDiskCalls
              : t < 9 ? CrashTrigger::kDiskFull
                      : CrashTrigger::kSyncError;
  switch (c.trigger) {
    case CrashTrigger::kAfterAppends:
      c.crash_after = static_cast<int>(rng.Range(0, 300));
      break;
    case CrashTrigger::kAfterMillis:
      c.crash_after = static_cast<int>(rng.Range(0, 30));
      break;
    case CrashTrigger::kAfterDiskCalls:
      c.crash_after = static_cast<int>(rng.Range(0, 200));
      break;
    case CrashTrigger::kDiskFull:
      c.crash_after = static_cast<int>(rng.Range(0, 60));
      break;
    case CrashTrigger::kSyncError:
      c.crash_after = static_cast<int>(rng.Range(0, 20));
      break;
  }
  c.fault_errno = c.trigger == CrashTrigger::kDiskFull && rng.OneIn(2) ? ENOSPC : EIO;
  c.torn_write = rng.OneIn(2);
  c.power_loss = !rng.OneIn(4);
  c.tear = static_cast<TearMode>(rng.Range(0, 2));
  c.crash_in_recovery = rng.OneIn(4);
  c.recovery_crash_calls = static_cast<int>(rng.Range(0, 12));
  c.recovery_tear = static_cast<TearMode>(rng.Range(0, 2));
  c.reader = rng.OneIn(2);
  c.reopen_with_fault_env = rng.OneIn(2);
  c.read_max_bytes = rng.OneIn(2) ? 1 : static_cast<uint64_t>(rng.Range(1, 64 * 1024));
  c.max_records = static_cast<int>(rng.Range(1, 16));
  c.max_value_bytes = static_cast<int>(rng.Range(0, 200));
  c.leader_epoch = static_cast<int32_t>(rng.Range(0, 5));
  return c;
}

// Appends random batches with up to `max_in_flight` unacknowledged, until told to stop or
// the log refuses.
class Appender {
 public:
  Appender(PartitionLog& log, const PointConfig& config, uint64_t seed,
           std::atomic<int>& total_appends)
      : log_(log), config_(config), rng_(seed), total_appends_(total_appends) {}

  void Run(const std::atomic<bool>& stop) {
    while (!stop.load()) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return in_flight_ < config_.max_in_flight || stop.load(); });
        if (stop.load()) return;
        ++in_flight_;
      }
      auto sent = std::make_unique<SentBatch>();
      std::vector<uint8_t> batch =
          MakeBatch(static_cast<int>(rng_.Range(1, config_.max_records)),
                    static_cast<size_t>(rng_.Range(0, config_.max_value_bytes)),
                    1'700'000'000'000 + rng_.Range(0, 1000), rng_.Next());
      AppendOptions opts;
      opts.leader_epoch = config_.leader_epoch;
      opts.ack = AckLevel::kDurable;
      SentBatch* s = sent.get();
      opts.on_ack = [this, s](const Status& st, const AppendInfo&) {
        if (st.ok()) s->durable_ok = true;
        ++s->callbacks;
        std::lock_guard lock(mu_);
        --in_flight_;
        cv_.notify_all();
      };
      sent->expected = batch;
      auto info = log_.Append(batch, std::move(opts));
      if (!info.ok()) {
        // Refused: no callback comes. After a crash or a failed write this is expected.
        std::lock_guard lock(mu_);
        --in_flight_;
        refused = true;
        return;
      }
      sent->base_offset = info->base_offset;
      sent->last_offset = info->last_offset;
      AssignOffsets(sent->expected, info->base_offset, config_.leader_epoch);
      {
        std::lock_guard lock(mu_);
        sent_.push_back(std::move(sent));
      }
      ++total_appends_;
    }
  }

  void Wake() {
    std::lock_guard lock(mu_);
    cv_.notify_all();
  }

  // After the log is gone.
  std::vector<std::unique_ptr<SentBatch>>& sent() { return sent_; }

  std::atomic<bool> refused{false};  // the log refused an append: it has failed

 private:
  PartitionLog& log_;
  const PointConfig& config_;
  Rng rng_;
  std::atomic<int>& total_appends_;
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;                             // guarded by mu_
  std::vector<std::unique_ptr<SentBatch>> sent_;  // guarded by mu_
};

// What the crash points exercised, printed at the end so a quiet run can be judged.
struct CrashStats {
  int points = 0;
  uint64_t appended = 0;
  uint64_t acked = 0;
  uint64_t recovered = 0;
  int torn_tails = 0;     // recoveries that cut bytes
  int multi_segment = 0;  // recoveries of more than one segment
};

// Reads random ranges while the log is appended to and then crashes. Until the crash every
// read must succeed and return whole, valid batches in offset order; after it, reads may
// fail but must not return bad bytes. Returns the first problem seen, empty when none.
std::string ReadWhileAppending(PartitionLog& log, uint64_t seed, const std::atomic<bool>& stop) {
  Rng rng(seed);
  std::vector<uint8_t> buf;
  while (!stop.load()) {
    int64_t end = log.written_end_offset();
    int64_t offset = rng.Range(0, end);
    uint64_t max_bytes = static_cast<uint64_t>(rng.Range(1, 32 * 1024));
    auto r = log.Read(offset, max_bytes);
    Status st = r.ok() ? PartitionLog::ReadSlice(r->slice, &buf) : r.status();
    if (!st.ok()) {
      if (st.message().find("simulated crash") != std::string::npos) continue;
      return fmt::format("Read({}, {}) with written end {}: {}", offset, max_bytes, end,
                         st.ToString());
    }
    if (r->slice.size == 0) {
      if (offset != end)
        return fmt::format("Read({}) below the written end {} was empty", offset, end);
      continue;
    }
    size_t pos = 0;
    int64_t next = r->first_offset;
    while (pos < buf.size()) {
      if (buf.size() - pos < kBatchHeaderSize) return fmt::format("Read({}): torn slice", offset);
      BatchHeader h = ParseBatchHeader(std::span<const uint8_t>(buf).subspan(pos));
      if (h.length < 0 || h.total_size() > buf.size() - pos || h.base_offset != next ||
          !CrcMatches(std::span<const uint8_t>(buf).subspan(pos, h.total_size()))) {
        return fmt::format("Read({}): bad batch at byte {} of the slice (base offset {}, want {})",
                           offset, pos, h.base_offset, next);
      }
      if (pos == 0 && !(h.base_offset <= offset && offset <= h.last_offset())) {
        return fmt::format("Read({}): first batch holds [{}, {}]", offset, h.base_offset,
                           h.last_offset());
      }
      pos += h.total_size();
      next = h.next_offset();
    }
    if (next != r->next_offset) return fmt::format("Read({}): next_offset disagrees", offset);
  }
  return std::string();
}

void RunCrashPoint(uint64_t seed, int point, HangWatchdog& watchdog, CrashStats& stats) {
  const uint64_t point_seed = Derive(seed, static_cast<uint64_t>(point));
  Rng rng(point_seed);
  PointConfig config = ChoosePoint(rng);
  const std::string context =
      fmt::format("crash point {} (replay: SLUICE_CRASH_SEED={:#x} SLUICE_CRASH_ONLY={}): {}",
                  point, seed, point, config.Describe());
  auto stage = [&](std::string_view what) { watchdog.Stage(fmt::format("{}: {}", context, what)); };
  SCOPED_TRACE(context);

  TempDir dir("crash_test");
  FaultEnv env(Env::Posix());
  IoExecutor executor(config.executor_threads);
  LogOptions options = config.options;
  options.env = &env;
  options.executor = &executor;

  stage("open");
  auto opened = PartitionLog::Open(dir.path(), options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<PartitionLog> log = std::move(*opened);

  std::atomic<int> total_appends{0};
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<Appender>> appenders;
  for (int i = 0; i < config.appenders; ++i) {
    appenders.push_back(
        std::make_unique<Appender>(*log, config, Derive(point_seed, 1, i), total_appends));
  }
  stage("append");
  switch (config.trigger) {
    case CrashTrigger::kAfterDiskCalls:
      env.CrashAfter(config.crash_after);
      break;
    case CrashTrigger::kDiskFull: {
      WriteFault fault;
      fault.error = config.fault_errno;
      fault.after = static_cast<uint64_t>(config.crash_after);
      fault.partial = config.torn_write;
      env.InjectWriteFault(fault);
      break;
    }
    case CrashTrigger::kSyncError:
      env.FailNextSyncs(1000, config.fault_errno, static_cast<uint64_t>(config.crash_after));
      break;
    default:
      break;
  }
  std::vector<std::thread> threads;
  for (auto& a : appenders) threads.emplace_back([&a, &stop] { a->Run(stop); });
  std::string read_problem;
  std::thread reader;
  if (config.reader) {
    reader =
        std::thread([&] { read_problem = ReadWhileAppending(*log, Derive(point_seed, 4), stop); });
  }

  // The crash, as chosen; never later than 200 ms in, to keep the data small.
  const auto start = std::chrono::steady_clock::now();
  const auto deadline =
      start + std::chrono::milliseconds(
                  config.trigger == CrashTrigger::kAfterMillis ? config.crash_after : 200);
  auto crash_due = [&] {
    switch (config.trigger) {
      case CrashTrigger::kAfterAppends:
        return total_appends.load() >= config.crash_after;
      case CrashTrigger::kAfterMillis:
        return false;
      case CrashTrigger::kAfterDiskCalls:
        return env.crashed();
      case CrashTrigger::kDiskFull:
      case CrashTrigger::kSyncError:
        // The log failed: every appender was refused.
        return std::all_of(appenders.begin(), appenders.end(),
                           [](const auto& a) { return a->refused.load(); });
    }
    return true;
  };
  while (std::chrono::steady_clock::now() < deadline && !crash_due()) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  stage("simulate crash");
  env.SimulateCrash();
  stop = true;
  for (auto& a : appenders) a->Wake();
  stage("join appenders and reader after the crash");
  for (auto& t : threads) t.join();
  if (reader.joinable()) reader.join();
  EXPECT_EQ(read_problem, "") << "reading while appending";
  stage("destroy the crashed log (Close must fail, not hang)");
  log.reset();

  // Every accepted append was answered exactly once.
  std::vector<SentBatch*> sent;
  for (auto& a : appenders) {
    for (auto& s : a->sent()) sent.push_back(s.get());
  }
  std::sort(sent.begin(), sent.end(),
            [](const SentBatch* a, const SentBatch* b) { return a->base_offset < b->base_offset; });
  int64_t next = 0;
  int acked = 0;
  for (const SentBatch* s : sent) {
    EXPECT_EQ(s->callbacks.load(), 1) << "batch at offset " << s->base_offset;
    EXPECT_EQ(s->base_offset, next) << "offsets were not assigned contiguously";
    next = s->last_offset + 1;
    acked += s->durable_ok ? 1 : 0;
  }
  if (::testing::Test::HasFailure()) return;

  std::string drop_report = "(no power loss)\n";
  if (config.power_loss) {
    stage("drop unsynced data");
    Status dropped = env.DropUnsyncedData(Derive(point_seed, 2), config.tear, &drop_report);
    ASSERT_TRUE(dropped.ok()) << dropped.ToString();
  }
  env.Reset();

  if (config.crash_in_recovery) {
    // The machine dies again while the log recovers.
    stage("reopen, crashing during recovery");
    env.CrashAfter(config.recovery_crash_calls);
    auto interrupted = PartitionLog::Open(dir.path(), options);
    if (interrupted.ok()) interrupted->reset();
    env.SimulateCrash();
    std::string second;
    Status dropped = env.DropUnsyncedData(Derive(point_seed, 3), config.recovery_tear, &second);
    ASSERT_TRUE(dropped.ok()) << dropped.ToString();
    env.Reset();
    drop_report += fmt::format("recovery {} ({}), then power loss again:\n{}",
                               interrupted.ok() ? "finished" : "crashed",
                               interrupted.ok() ? "" : interrupted.status().ToString(), second);
  }

  stage("reopen");
  options.env = config.reopen_with_fault_env ? static_cast<Env*>(&env) : Env::Posix();
  auto reopened = PartitionLog::Open(dir.path(), options);
  ASSERT_TRUE(reopened.ok()) << "reopening after the crash: " << reopened.status().ToString()
                             << "\npower loss:\n"
                             << drop_report;
  log = std::move(*reopened);

  std::vector<Expected> expected;
  for (const SentBatch* s : sent) {
    expected.push_back(
        Expected{s->base_offset, &s->expected, s->last_offset, s->durable_ok.load()});
  }
  const RecoveryReport& rec = log->recovery();
  const std::string detail = fmt::format(
      "{} batches appended, {} acknowledged durable\nrecovery: {} segments, truncated {} bytes "
      "({}), {} indexes rebuilt\npower loss:\n{}",
      sent.size(), acked, rec.segments, rec.truncated_bytes, rec.truncation_reason,
      rec.indexes_rebuilt, drop_report);
  stage("check the recovered log");
  size_t recovered = CheckRecovered(*log, expected, config.read_max_bytes, detail);
  if (::testing::Test::HasFailure()) return;
  ++stats.points;
  stats.appended += sent.size();
  stats.acked += static_cast<uint64_t>(acked);
  stats.recovered += recovered;
  stats.torn_tails += rec.truncated_bytes > 0 ? 1 : 0;
  stats.multi_segment += rec.segments > 1 ? 1 : 0;
  Status verified = log->Verify();
  EXPECT_TRUE(verified.ok()) << verified.ToString() << "\n" << detail;

  stage("append after recovery");
  CheckAppendsAfterRecovery(*log, rng, detail);
  if (::testing::Test::HasFailure()) return;

  // A second, clean reopen sees the same log.
  stage("clean reopen");
  int64_t end = log->end_offset();
  Status closed = log->Close();
  ASSERT_TRUE(closed.ok()) << closed.ToString();
  log.reset();
  auto again = PartitionLog::Open(dir.path(), options);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->end_offset(), end);
  EXPECT_EQ((*again)->recovery().truncated_bytes, 0u) << (*again)->recovery().truncation_reason;
}

TEST(CrashTest, RecoveryAfterPowerLossKeepsAcknowledgedPrefix) {
  const uint64_t seed = Seed();
  const int points = Points();
  std::printf("crash_test: SLUICE_CRASH_SEED=%#llx SLUICE_CRASH_POINTS=%d\n",
              static_cast<unsigned long long>(seed), points);
  std::fflush(stdout);
  LogLevel old_level = GetLogLevel();
  SetLogLevel(LogLevel::kOff);  // every crash logs failed writes; they are expected
  HangWatchdog watchdog;
  CrashStats stats;
  std::optional<int> only = OnlyPoint();
  for (int point = 0; point < points; ++point) {
    if (only && *only != point) continue;
    RunCrashPoint(seed, point, watchdog, stats);
    if (::testing::Test::HasFailure()) break;  // the first failing point is the one to read
  }
  SetLogLevel(old_level);
  std::printf(
      "crash_test: %d points passed: %llu batches appended, %llu acknowledged durable, "
      "%llu recovered; %d recoveries cut a torn tail, %d had several segments\n",
      stats.points, static_cast<unsigned long long>(stats.appended),
      static_cast<unsigned long long>(stats.acked),
      static_cast<unsigned long long>(stats.recovered), stats.torn_tails, stats.multi_segment);
}

// ---------------------------------------------------------------------------------------
// Crashes during TruncateTo

// A log of several small segments, durable, and the batches it holds.
struct TemplateLog {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<Expected> batches;
};

LogOptions TruncateLogOptions(Env* env, IoExecutor* executor) {
  LogOptions o;
  o.env = env;
  o.executor = executor;
  o.flush_policy = FlushPolicy::kInterval;  // one Flush at the end: building stays quick
  o.segment_bytes = 4096;
  o.index_interval_bytes = 512;
  return o;
}

// Builds the template log in `dir`: 40 small batches over several 4 KiB segments.
void BuildTemplateLog(const std::string& dir, uint64_t seed, TemplateLog* t) {
  IoExecutor executor(1);
  auto log = PartitionLog::Open(dir, TruncateLogOptions(Env::Posix(), &executor));
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  Rng rng(seed);
  t->bytes.resize(40);
  for (int i = 0; i < 40; ++i) {
    t->bytes[i] =
        MakeBatch(static_cast<int>(rng.Range(1, 5)), static_cast<size_t>(rng.Range(20, 120)),
                  1'700'000'000'000 + i, rng.Next());
    auto info = (*log)->Append(t->bytes[i], AppendOptions{});
    ASSERT_TRUE(info.ok());
    AssignOffsets(t->bytes[i], info->base_offset, 0);
    t->batches.push_back(Expected{info->base_offset, nullptr, info->last_offset, true});
  }
  for (size_t i = 0; i < t->batches.size(); ++i) t->batches[i].bytes = &t->bytes[i];
  ASSERT_TRUE((*log)->Flush().ok());
  ASSERT_GE((*log)->segment_count(), 3);
}

void CopyDir(const std::string& from, const std::string& to) {
  std::filesystem::copy(
      from, to,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
}

// TruncateTo is crashed at its k-th disk-changing call, for every k until it gets through,
// with power loss after each. The log must reopen, hold a prefix of what it held, keep every
// batch below the truncation offset, and after a TruncateTo that returned OK, hold nothing
// at or past it.
TEST(CrashTest, RecoveryAfterCrashDuringTruncateTo) {
  const uint64_t seed = Seed();
  const int cases = std::max(2, Points() / 25);
  TempDir template_dir;
  TemplateLog t;
  BuildTemplateLog(template_dir.path(), Derive(seed, 500), &t);
  if (::testing::Test::HasFailure()) return;
  const int64_t end = t.batches.back().last_offset + 1;
  LogLevel old_level = GetLogLevel();
  SetLogLevel(LogLevel::kOff);
  std::optional<int> only = OnlyPoint();
  for (int c = 0; c < cases && !::testing::Test::HasFailure(); ++c) {
    if (only && *only != c) continue;
    Rng rng(Derive(seed, 600, static_cast<uint64_t>(c)));
    const int64_t offset = c == 0 ? 0 : rng.Range(0, end - 1);
    // The batches that stay: those wholly below `offset`.
    size_t keep = 0;
    while (keep < t.batches.size() && t.batches[keep].last_offset < offset) ++keep;
    std::vector<Expected> expected = t.batches;
    for (size_t i = keep; i < expected.size(); ++i) expected[i].durable = false;

    bool finished = false;
    for (int k = 0; !finished && k < 100 && !::testing::Test::HasFailure(); ++k) {
      const TearMode tear = static_cast<TearMode>(rng.Range(0, 2));
      SCOPED_TRACE(fmt::format(
          "TruncateTo({}) crashed at disk call {}, tear={} (replay: SLUICE_CRASH_SEED={:#x} "
          "SLUICE_CRASH_ONLY={})",
          offset, k, TearModeName(tear), seed, c));
      TempDir dir("crash_test");
      CopyDir(template_dir.path(), dir.path());
      FaultEnv env(Env::Posix());
      IoExecutor executor(1);
      Status truncated;
      {
        auto log = PartitionLog::Open(dir.path(), TruncateLogOptions(&env, &executor));
        ASSERT_TRUE(log.ok()) << log.status().ToString();
        env.CrashAfter(static_cast<uint64_t>(k));
        truncated = (*log)->TruncateTo(offset);
      }
      finished = truncated.ok() && !env.crashed();
      env.SimulateCrash();
      std::string report;
      ASSERT_TRUE(env.DropUnsyncedData(rng.Next(), tear, &report).ok());
      env.Reset();
      auto log = PartitionLog::Open(dir.path(), TruncateLogOptions(&env, &executor));
      ASSERT_TRUE(log.ok()) << "reopening after TruncateTo returned " << truncated.ToString()
                            << ": " << log.status().ToString() << "\npower loss:\n"
                            << report;
      const std::string detail =
          fmt::format("TruncateTo returned {}\npower loss:\n{}", truncated.ToString(), report);
      size_t k_got = 0;
      if (offset == 0 && (*log)->end_offset() == 0) {
        EXPECT_EQ((*log)->start_offset(), 0) << detail;
      } else {
        k_got = CheckRecovered(**log, expected, 64 * 1024, detail);
      }
      if (truncated.ok()) {
        EXPECT_EQ(k_got, keep) << "TruncateTo returned OK but the log holds " << k_got
                               << " batches, not " << keep << "\n"
                               << detail;
      }
    }
    EXPECT_TRUE(finished) << "TruncateTo(" << offset << ") never got through 100 disk calls";
  }
  SetLogLevel(old_level);
}

// TruncateFullyAndStartAt (a follower's reset to its leader's start) is crashed at its
// k-th disk-changing call, for every k until it gets through, with power loss after each.
// The log must reopen holding either a suffix of its batches up to its old end (what the
// follower resets again) or nothing, starting at 0 or at the new start; once the call
// returned OK, nothing, starting and ending at the new start.
TEST(CrashTest, RecoveryAfterCrashDuringTruncateFullyAndStartAt) {
  const uint64_t seed = Seed();
  TempDir template_dir;
  TemplateLog t;
  BuildTemplateLog(template_dir.path(), Derive(seed, 700), &t);
  if (::testing::Test::HasFailure()) return;
  {
    // A DeleteRecords start of the old log, which the reset must not carry over.
    IoExecutor executor(1);
    auto log = PartitionLog::Open(template_dir.path(), TruncateLogOptions(Env::Posix(), &executor));
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->DeleteRecordsBefore(t.batches[3].offset).ok());
  }
  const int64_t end = t.batches.back().last_offset + 1;
  const int64_t target = end + 1000;
  std::vector<int64_t> bases;
  for (const Expected& e : t.batches) bases.push_back(e.offset);
  LogLevel old_level = GetLogLevel();
  SetLogLevel(LogLevel::kOff);
  Rng rng(Derive(seed, 701));
  bool finished = false;
  for (int k = 0; !finished && k < 200 && !::testing::Test::HasFailure(); ++k) {
    const TearMode tear = static_cast<TearMode>(rng.Range(0, 2));
    SCOPED_TRACE(
        fmt::format("TruncateFullyAndStartAt({}) crashed at disk call {}, tear={} "
                    "(replay: SLUICE_CRASH_SEED={:#x})",
                    target, k, TearModeName(tear), seed));
    TempDir dir("crash_test");
    CopyDir(template_dir.path(), dir.path());
    FaultEnv env(Env::Posix());
    IoExecutor executor(1);
    Status reset;
    {
      auto log = PartitionLog::Open(dir.path(), TruncateLogOptions(&env, &executor));
      ASSERT_TRUE(log.ok()) << log.status().ToString();
      env.CrashAfter(static_cast<uint64_t>(k));
      reset = (*log)->TruncateFullyAndStartAt(target);
    }
    finished = reset.ok() && !env.crashed();
    env.SimulateCrash();
    std::string report;
    ASSERT_TRUE(env.DropUnsyncedData(rng.Next(), tear, &report).ok());
    env.Reset();
    auto log = PartitionLog::Open(dir.path(), TruncateLogOptions(&env, &executor));
    const std::string detail = fmt::format("TruncateFullyAndStartAt returned {}\npower loss:\n{}",
                                           reset.ToString(), report);
    ASSERT_TRUE(log.ok()) << log.status().ToString() << "\n" << detail;
    std::vector<int64_t> got;
    ASSERT_TRUE((*log)
                    ->ForEachBatchHeader(0,
                                         [&](const BatchHeader& h, std::span<const uint8_t>) {
                                           got.push_back(h.base_offset);
                                           return true;
                                         })
                    .ok())
        << detail;
    if (got.empty()) {
      EXPECT_EQ((*log)->start_offset(), (*log)->end_offset()) << detail;
      EXPECT_TRUE((*log)->end_offset() == 0 || (*log)->end_offset() == target) << detail;
    } else {
      // A suffix of the old batches, through the old end.
      ASSERT_LE(got.size(), bases.size()) << detail;
      EXPECT_TRUE(std::equal(got.begin(), got.end(), bases.end() - got.size())) << detail;
      EXPECT_EQ((*log)->end_offset(), end) << detail;
    }
    if (reset.ok()) {
      EXPECT_TRUE(got.empty()) << detail;
      EXPECT_EQ((*log)->start_offset(), target) << detail;
      EXPECT_EQ((*log)->end_offset(), target) << detail;
    }
  }
  EXPECT_TRUE(finished) << "TruncateFullyAndStartAt never got through 200 disk calls";
  SetLogLevel(old_level);
}

// ApplyRetention is crashed at its k-th disk-changing call, for every k until it gets
// through. The log must reopen and hold a suffix of what it held, whole segments gone from
// the front only; after a retention that returned OK, exactly the segments it kept.
TEST(CrashTest, RecoveryAfterCrashDuringRetention) {
  const uint64_t seed = Seed();
  TempDir template_dir;
  TemplateLog t;
  BuildTemplateLog(template_dir.path(), Derive(seed, 700), &t);
  if (::testing::Test::HasFailure()) return;
  LogLevel old_level = GetLogLevel();
  SetLogLevel(LogLevel::kOff);
  Rng rng(Derive(seed, 701));
  const int64_t retention_bytes = rng.Range(0, 8192);
  auto options = [&](Env* env, IoExecutor* executor) {
    LogOptions o = TruncateLogOptions(env, executor);
    o.retention_bytes = retention_bytes;
    return o;
  };
  // Where a retention that gets through leaves the log.
  int64_t kept_start;
  {
    TempDir dir("crash_test");
    CopyDir(template_dir.path(), dir.path());
    IoExecutor executor(1);
    auto log = PartitionLog::Open(dir.path(), options(Env::Posix(), &executor));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    auto removed = (*log)->ApplyRetention();
    ASSERT_TRUE(removed.ok()) << removed.status().ToString();
    ASSERT_GE(*removed, 1) << "retention.bytes " << retention_bytes << " removes nothing";
    kept_start = (*log)->start_offset();
  }

  bool finished = false;
  for (int k = 0; !finished && k < 100 && !::testing::Test::HasFailure(); ++k) {
    const TearMode tear = static_cast<TearMode>(rng.Range(0, 2));
    SCOPED_TRACE(fmt::format(
        "ApplyRetention with retention.bytes {} crashed at disk call {}, tear={} (replay: "
        "SLUICE_CRASH_SEED={:#x})",
        retention_bytes, k, TearModeName(tear), seed));
    TempDir dir("crash_test");
    CopyDir(template_dir.path(), dir.path());
    FaultEnv env(Env::Posix());
    IoExecutor executor(1);
    Status applied;
    {
      auto log = PartitionLog::Open(dir.path(), options(&env, &executor));
      ASSERT_TRUE(log.ok()) << log.status().ToString();
      env.CrashAfter(static_cast<uint64_t>(k));
      applied = (*log)->ApplyRetention().status();
    }
    finished = applied.ok() && !env.crashed();
    env.SimulateCrash();
    std::string report;
    ASSERT_TRUE(env.DropUnsyncedData(rng.Next(), tear, &report).ok());
    env.Reset();
    auto log = PartitionLog::Open(dir.path(), options(&env, &executor));
    ASSERT_TRUE(log.ok()) << "reopening after ApplyRetention returned " << applied.ToString()
                          << ": " << log.status().ToString() << "\npower loss:\n"
                          << report;
    const std::string detail =
        fmt::format("ApplyRetention returned {}\npower loss:\n{}", applied.ToString(), report);
    auto got = ReadAll(**log, 64 * 1024);
    ASSERT_TRUE(got.ok()) << got.status().ToString() << "\n" << detail;
    const int64_t start = (*log)->start_offset();
    size_t first = 0;
    while (first < t.batches.size() && t.batches[first].offset < start) ++first;
    ASSERT_LT(first, t.batches.size()) << "the log starts at " << start << "\n" << detail;
    EXPECT_EQ(t.batches[first].offset, start) << "the log starts inside a batch\n" << detail;
    EXPECT_LE(start, kept_start) << "retention removed more than it should\n" << detail;
    if (finished) {
      EXPECT_EQ(start, kept_start) << detail;
    }
    ASSERT_EQ(got->size(), t.batches.size() - first)
        << "the log does not run from " << start << " to the end\n"
        << detail;
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_EQ((*got)[i].bytes, *t.batches[first + i].bytes)
          << "batch at offset " << (*got)[i].base_offset << "\n"
          << detail;
    }
    EXPECT_EQ((*log)->end_offset(), t.batches.back().last_offset + 1) << detail;
  }
  EXPECT_TRUE(finished) << "ApplyRetention never got through 100 disk calls";
  SetLogLevel(old_level);
}

// A deterministic case the property test found (seed 5, point 753): an fdatasync that
// fails while closing a rolled segment, in the same job that wrote that segment's last
// batches. Reads must still see every offset below written_end_offset().
TEST(CrashTest, ReadsBelowWrittenEndWorkAfterFailedSegmentCloseSync) {
  TempDir dir("crash_test");
  FaultEnv env(Env::Posix());
  IoExecutor executor(1);
  LogOptions options;
  options.env = &env;
  options.executor = &executor;
  options.flush_policy = FlushPolicy::kDurable;
  options.segment_bytes = 4096;
  auto opened = PartitionLog::Open(dir.path(), options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  PartitionLog& log = **opened;

  std::vector<uint8_t> first = MakeBatch(4, 200, 1'700'000'000'000, 1);  // ~1 KiB
  ASSERT_TRUE(log.Append(first, AppendOptions{}).ok());
  ASSERT_TRUE(log.Flush().ok());

  // Hold the only I/O thread so the next appends gather into one job: the old segment's
  // last batch, the roll, and the new segment's first batch.
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  executor.Submit([&] {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return release; });
  });
  std::vector<uint8_t> last = MakeBatch(4, 200, 1'700'000'000'000, 2);     // still fits
  std::vector<uint8_t> rolling = MakeBatch(8, 300, 1'700'000'000'000, 3);  // does not
  auto last_info = log.Append(last, AppendOptions{});
  ASSERT_TRUE(last_info.ok());
  ASSERT_TRUE(log.Append(rolling, AppendOptions{}).ok());
  ASSERT_EQ(log.segment_count(), 2);
  env.FailNextSyncs(1, EIO);  // the first sync of the job: closing the old segment
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  Status flushed = log.Flush();
  EXPECT_NE(flushed.message().find("injected EIO"), std::string::npos) << flushed.ToString();

  const int64_t written_end = log.written_end_offset();
  for (int64_t offset = 0; offset < written_end; ++offset) {
    auto r = log.Read(offset, 1 << 20);
    EXPECT_TRUE(r.ok()) << "Read(" << offset << ") with written end " << written_end << ": "
                        << r.status().ToString();
  }
  EXPECT_GE(written_end, last_info->base_offset);
}

// ---------------------------------------------------------------------------------------
// SIGKILL

struct KillSpec {
  int count;
  size_t value_bytes;
  uint64_t seed;
};

// Batch i of the deterministic sequence of a SIGKILL case.
KillSpec KillBatch(uint64_t case_seed, int i) {
  uint64_t h = Derive(case_seed, 100, static_cast<uint64_t>(i));
  return KillSpec{1 + static_cast<int>(h % 10), static_cast<size_t>((h >> 8) % 150), h};
}

constexpr int kKillMaxBatches = 20000;

LogOptions KillLogOptions(uint64_t case_seed, IoExecutor* executor) {
  Rng rng(Derive(case_seed, 200));
  LogOptions o;
  o.env = Env::Posix();
  o.executor = executor;
  o.flush_policy = FlushPolicy::kDurable;
  o.segment_bytes = rng.OneIn(3) ? 1ull << 30 : static_cast<uint64_t>(rng.Range(8, 64)) * 1024;
  o.index_interval_bytes = static_cast<uint32_t>(rng.Range(64, 4096));
  return o;
}

void WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) ::_exit(3);
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// The child: appends the sequence durably, writing each acknowledged base offset to `fd`.
// Writes -1 and exits on an error; otherwise waits to be killed.
[[noreturn]] void RunKillChild(const std::string& dir, uint64_t case_seed, int fd) {
  SetLogLevel(LogLevel::kOff);
  IoExecutor executor(1);
  auto opened = PartitionLog::Open(dir, KillLogOptions(case_seed, &executor));
  const int64_t kError = -1;
  if (!opened.ok()) {
    WriteAll(fd, &kError, sizeof kError);
    ::_exit(2);
  }
  PartitionLog& log = **opened;
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  const int max_in_flight = 1 + static_cast<int>(Derive(case_seed, 300) % 4);
  for (int i = 0; i < kKillMaxBatches; ++i) {
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return in_flight < max_in_flight; });
      ++in_flight;
    }
    KillSpec spec = KillBatch(case_seed, i);
    std::vector<uint8_t> batch =
        MakeBatch(spec.count, spec.value_bytes, 1'700'000'000'000 + i, spec.seed);
    AppendOptions opts;
    opts.ack = AckLevel::kDurable;
    opts.on_ack = [&, fd](const Status& st, const AppendInfo& info) {
      int64_t v = st.ok() ? info.base_offset : kError;
      WriteAll(fd, &v, sizeof v);  // 8 bytes into a pipe the parent drains: does not block long
      std::lock_guard lock(mu);
      --in_flight;
      cv.notify_all();
    };
    if (!log.Append(batch, std::move(opts)).ok()) {
      WriteAll(fd, &kError, sizeof kError);
      ::_exit(4);
    }
  }
  for (;;) ::pause();
}

TEST(CrashTest, RecoveryAfterSigkillKeepsAcknowledgedPrefix) {
  const uint64_t seed = Seed();
  const int cases = std::max(1, Points() / 10);
  std::printf("crash_test: SIGKILL cases=%d SLUICE_CRASH_SEED=%#llx\n", cases,
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  std::optional<int> only = OnlyPoint();
  LogLevel old_level = GetLogLevel();
  for (int c = 0; c < cases; ++c) {
    if (only && *only != c) continue;
    const uint64_t case_seed = Derive(seed, 1'000'000 + static_cast<uint64_t>(c));
    Rng rng(case_seed);
    const int kill_after_acks = static_cast<int>(rng.Range(0, 150));
    const int extra_us = static_cast<int>(rng.Range(0, 3000));
    const std::string context = fmt::format(
        "SIGKILL case {} (replay: SLUICE_CRASH_SEED={:#x} SLUICE_CRASH_ONLY={}): kill after {} "
        "acks + {} us",
        c, seed, c, kill_after_acks, extra_us);
    SCOPED_TRACE(context);
    TempDir dir("crash_test");

    // No threads in this process here: the child starts its own after the fork.
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << std::strerror(errno);
    if (pid == 0) {
      ::close(fds[0]);
      RunKillChild(dir.path(), case_seed, fds[1]);
    }
    ::close(fds[1]);

    std::vector<int64_t> acks;
    bool child_error = false;
    auto read_ack = [&]() -> bool {
      int64_t v;
      size_t got = 0;
      while (got < sizeof v) {
        ssize_t n = ::read(fds[0], reinterpret_cast<char*>(&v) + got, sizeof v - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        got += static_cast<size_t>(n);
      }
      if (v < 0) {
        child_error = true;
      } else {
        acks.push_back(v);
      }
      return true;
    };
    while (static_cast<int>(acks.size()) < kill_after_acks && !child_error && read_ack()) {
    }
    ::usleep(static_cast<useconds_t>(extra_us));
    ::kill(pid, SIGKILL);
    int wstatus = 0;
    ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
    // Acks written before the child died count too.
    while (read_ack()) {
    }
    ::close(fds[0]);
    ASSERT_FALSE(child_error) << "the child failed to append (exit status " << wstatus << ")";
    ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
        << "the child ended on its own, status " << wstatus;

    // The deterministic sequence, with the offsets a single appender gets.
    std::vector<std::vector<uint8_t>> bytes;
    std::vector<Expected> expected;
    int64_t offset = 0;
    // The child appended at most a few batches past its last ack; 100 more is plenty.
    const int length = static_cast<int>(acks.size()) + 100;
    for (int i = 0; i < length; ++i) {
      KillSpec spec = KillBatch(case_seed, i);
      std::vector<uint8_t> b =
          MakeBatch(spec.count, spec.value_bytes, 1'700'000'000'000 + i, spec.seed);
      AssignOffsets(b, offset, 0);
      bytes.push_back(std::move(b));
      expected.push_back(Expected{offset, nullptr, offset + spec.count - 1, false});
      offset += spec.count;
    }
    for (size_t i = 0; i < expected.size(); ++i) expected[i].bytes = &bytes[i];
    size_t ack_i = 0;
    std::sort(acks.begin(), acks.end());
    for (Expected& e : expected) {
      while (ack_i < acks.size() && acks[ack_i] < e.offset) ++ack_i;
      if (ack_i < acks.size() && acks[ack_i] == e.offset) e.durable = true;
    }

    SetLogLevel(LogLevel::kOff);
    IoExecutor executor(1);
    auto reopened = PartitionLog::Open(dir.path(), KillLogOptions(case_seed, &executor));
    ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
    const RecoveryReport& rec = (*reopened)->recovery();
    const std::string detail =
        fmt::format("{} acks; recovery: {} segments, truncated {} bytes ({})", acks.size(),
                    rec.segments, rec.truncated_bytes, rec.truncation_reason);
    size_t k = CheckRecovered(**reopened, expected, 64 * 1024, detail);
    if (::testing::Test::HasFailure()) break;
    EXPECT_TRUE((*reopened)->Verify().ok());
    EXPECT_LT(k, expected.size()) << "the sequence is longer than what the child could write";
    Rng after(Derive(case_seed, 400));
    CheckAppendsAfterRecovery(**reopened, after, detail);
    if (::testing::Test::HasFailure()) break;
  }
  SetLogLevel(old_level);
}

}  // namespace
}  // namespace sluice::storage::testing
