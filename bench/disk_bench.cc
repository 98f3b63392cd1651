#include "bench/disk_bench.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <deque>
#include <exception>
#include <filesystem>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>

#include "base/clock.h"
#include "base/status.h"
#include "bench/bench_util.h"
#include "bench/child_process.h"
#include "bench/machine_info.h"
#include "storage/env.h"
#include "storage/io_executor.h"
#include "storage/log.h"
#include "storage/testing/batch_builder.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
using storage::AckLevel;
using storage::FlushPolicy;
using storage::PartitionLog;

constexpr double kMB = 1e6;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kRawChunkBytes = 1 * kMiB;   // raw reference write size (interval, tmpfs)
constexpr uint64_t kMaxWriteBytes = 64 * kMiB;  // largest single raw write (durable groups)
constexpr uint64_t kMaxSegmentBytes = 256 * kMiB;
constexpr uint64_t kMinSegmentBytes = 16 * kMiB;
constexpr uint64_t kTmpfsBudgetBytes = 1536 * kMiB;  // what a tmpfs cell may hold at once
constexpr uint64_t kSlackBytes = 256 * kMiB;         // free space kept beyond the estimate
constexpr uint64_t kPoolBytesLimit = 256 * kMiB;
constexpr int kPoolBatches = 64;
constexpr auto kAckTimeout = std::chrono::seconds(120);  // no ack at all for this long = stuck

enum class Mode { kInterval, kDurable, kTmpfs };

std::string_view ModeName(Mode mode) {
  switch (mode) {
    case Mode::kInterval:
      return "interval";
    case Mode::kDurable:
      return "durable";
    case Mode::kTmpfs:
      return "tmpfs";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------
// Counting the engine's I/O. The log does all its file I/O through LogOptions::env, so a
// pass-through Env counts the fdatasyncs and bytes without touching storage code. The
// cost is one virtual call and one relaxed atomic add per write or sync.

struct IoCounters {
  std::atomic<uint64_t> segment_syncs{0};  // File::Sync on *.log segment files
  std::atomic<uint64_t> other_syncs{0};    // File::Sync on anything else (indexes)
  std::atomic<uint64_t> dir_syncs{0};      // Env::SyncDir
  std::atomic<uint64_t> segment_bytes{0};  // bytes written to segment files
  std::atomic<uint64_t> other_bytes{0};    // bytes written to other files
};

struct IoSnapshot {
  uint64_t segment_syncs = 0, other_syncs = 0, dir_syncs = 0, segment_bytes = 0, other_bytes = 0;

  static IoSnapshot Of(const IoCounters& c) {
    return {c.segment_syncs.load(), c.other_syncs.load(), c.dir_syncs.load(),
            c.segment_bytes.load(), c.other_bytes.load()};
  }
  IoSnapshot operator-(const IoSnapshot& o) const {
    return {segment_syncs - o.segment_syncs, other_syncs - o.other_syncs, dir_syncs - o.dir_syncs,
            segment_bytes - o.segment_bytes, other_bytes - o.other_bytes};
  }
};

class CountingFile final : public storage::File {
 public:
  CountingFile(std::unique_ptr<storage::File> base, IoCounters* counters, bool segment)
      : base_(std::move(base)), counters_(counters), segment_(segment) {}

  Status WriteAt(uint64_t pos, std::span<const uint8_t> data) override {
    Status st = base_->WriteAt(pos, data);
    if (st.ok()) (segment_ ? counters_->segment_bytes : counters_->other_bytes) += data.size();
    return st;
  }
  Result<size_t> ReadAt(uint64_t pos, std::span<uint8_t> out) override {
    return base_->ReadAt(pos, out);
  }
  Status Sync() override {
    Status st = base_->Sync();
    if (st.ok()) ++(segment_ ? counters_->segment_syncs : counters_->other_syncs);
    return st;
  }
  Status Truncate(uint64_t size) override { return base_->Truncate(size); }
  Result<uint64_t> Size() override { return base_->Size(); }
  Result<bool> Unlinked() override { return base_->Unlinked(); }
  int fd() const override { return base_->fd(); }
  const std::string& path() const override { return base_->path(); }

 private:
  const std::unique_ptr<storage::File> base_;
  IoCounters* const counters_;
  const bool segment_;
};

// Lifecycle: outlives every log (and file) opened through it.
class CountingEnv final : public storage::Env {
 public:
  explicit CountingEnv(storage::Env* base) : base_(base) {}

  Result<std::unique_ptr<storage::File>> Open(const std::string& path,
                                              storage::OpenMode mode) override {
    Result<std::unique_ptr<storage::File>> file = base_->Open(path, mode);
    if (!file.ok()) return file.status();
    bool segment = path.size() >= 4 && path.compare(path.size() - 4, 4, ".log") == 0;
    return std::unique_ptr<storage::File>(
        std::make_unique<CountingFile>(std::move(file).value(), &counters_, segment));
  }
  Status Remove(const std::string& path) override { return base_->Remove(path); }
  Status Rename(const std::string& from, const std::string& to) override {
    return base_->Rename(from, to);
  }
  Status CreateDirs(const std::string& path) override { return base_->CreateDirs(path); }
  Status SyncDir(const std::string& path) override {
    Status st = base_->SyncDir(path);
    if (st.ok()) ++counters_.dir_syncs;
    return st;
  }
  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    return base_->ListDir(path);
  }
  bool Exists(const std::string& path) override { return base_->Exists(path); }

  const IoCounters& counters() const { return counters_; }

 private:
  storage::Env* const base_;
  IoCounters counters_;
};

// ---------------------------------------------------------------------------------------
// Small helpers.

// Removes a directory tree when it goes out of scope (errors ignored: best effort).
class ScopedRemove {
 public:
  explicit ScopedRemove(std::string path) : path_(std::move(path)) {}
  ~ScopedRemove() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScopedRemove(const ScopedRemove&) = delete;
  ScopedRemove& operator=(const ScopedRemove&) = delete;

 private:
  std::string path_;
};

class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() { Reset(); }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return IOError("cannot create directory {}: {}", path, ec.message());
  return Status::OK();
}

// Writes back every dirty page of the file system holding `dir`, so that one phase does
// not pay for the writeback of the one before.
void QuiesceFileSystem(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::syncfs(fd);
  ::close(fd);
}

Status CheckFreeSpace(const std::string& dir, uint64_t need, std::string_view what) {
  Result<uint64_t> free_bytes = FreeBytes(dir);
  if (!free_bytes.ok()) return free_bytes.status();
  if (*free_bytes < need) {
    return ResourceExhaustedError(
        "not enough free space in {} for {}: needs about {}, {} free (lower bytes_per_cell "
        "or writers)",
        dir, what, FormatBinaryBytes(need), FormatBinaryBytes(*free_bytes));
  }
  return Status::OK();
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

double Rate(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0; }

// CPU seconds (user + system) used so far by the whole process, and by the calling thread.
// Rates on a shared machine move with its load; CPU time per byte does much less.
double ProcessCpuSeconds() {
  struct rusage ru;
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

double ThreadCpuSeconds() {
  struct timespec ts;
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

// ---------------------------------------------------------------------------------------
// The workload: distinct batches built before any timing, appended cyclically.

struct Workload {
  std::vector<std::vector<uint8_t>> batches;
  uint64_t batch_bytes = 0;  // every batch has the same size
  int records_per_batch = 0;
};

Result<Workload> BuildWorkload(const DiskBenchOptions& options) {
  Workload w;
  w.records_per_batch = options.records_per_batch;
  int64_t now_ms = WallMillis();
  std::vector<uint8_t> first =
      storage::testing::MakeBatch(options.records_per_batch, options.record_bytes, now_ms, 1);
  w.batch_bytes = first.size();
  int pool =
      static_cast<int>(std::clamp<uint64_t>(kPoolBytesLimit / w.batch_bytes, 1, kPoolBatches));
  w.batches.push_back(std::move(first));
  for (int i = 1; i < pool; ++i) {
    w.batches.push_back(storage::testing::MakeBatch(options.records_per_batch, options.record_bytes,
                                                    now_ms, static_cast<uint64_t>(i) + 1));
    if (w.batches.back().size() != w.batch_bytes) {
      return InternalError("MakeBatch built batches of {} and {} bytes for the same shape",
                           w.batch_bytes, w.batches.back().size());
    }
  }
  return w;
}

// A buffer of `size` bytes of concatenated batches, so the raw reference writes the same
// kind of bytes as the engine (not zeros).
std::vector<uint8_t> FillBuffer(const Workload& w, size_t size) {
  std::vector<uint8_t> buf;
  buf.reserve(size);
  size_t i = 0;
  while (buf.size() < size) {
    const std::vector<uint8_t>& b = w.batches[i++ % w.batches.size()];
    size_t n = std::min(b.size(), size - buf.size());
    buf.insert(buf.end(), b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return buf;
}

// ---------------------------------------------------------------------------------------
// One cell: a flush mode at a writer count.

struct Cell {
  Mode mode;
  int writers;
  std::string dir;              // this cell's directory; removed afterwards
  uint64_t appends_per_writer;  // batches each writer appends
  uint64_t segment_bytes;       // segment.bytes, and retention.bytes
  bool disk;                    // false for tmpfs
};

// The segment size for `writers` writers: at most 256 MiB; small enough that a writer
// rolls at least about four times (so rolling and retention are part of what is
// measured) and that a tmpfs cell holds at most about 1.5 GiB (each log holds up to ~2.5
// segments: retention.bytes of closed segments, the active one, and what is appended
// between two ApplyRetention calls); at least 16 MiB.
uint64_t SegmentBytesFor(int writers, uint64_t bytes_per_writer) {
  uint64_t s =
      std::min({kMaxSegmentBytes, kTmpfsBudgetBytes * 2 / 5 / static_cast<uint64_t>(writers),
                bytes_per_writer / 4});
  s = s / kMiB * kMiB;
  return std::max(s, kMinSegmentBytes);
}

// Free space a phase needs, with some slack. The logs hold up to ~2.5 segments each. The
// raw reference on disk keeps every byte (see RunCell); on tmpfs it keeps two files of a
// segment each.
uint64_t EngineSpaceNeeded(const Cell& cell) {
  return static_cast<uint64_t>(cell.writers) * cell.segment_bytes * 5 / 2 + kSlackBytes;
}

uint64_t RawSpaceNeeded(const Cell& cell, uint64_t batch_bytes) {
  uint64_t writers = static_cast<uint64_t>(cell.writers);
  if (cell.disk) return cell.appends_per_writer * batch_bytes * writers + kSlackBytes;
  return writers * cell.segment_bytes * 2 + kSlackBytes;
}

Cell PlanCell(Mode mode, int writers, const std::string& root, const Workload& w,
              const DiskBenchOptions& options) {
  Cell cell;
  cell.mode = mode;
  cell.writers = writers;
  cell.dir = fmt::format("{}/{}-{}", root, ModeName(mode), writers);
  cell.disk = mode != Mode::kTmpfs;
  uint64_t per_writer = options.bytes_per_cell / static_cast<uint64_t>(writers);
  cell.appends_per_writer = std::max<uint64_t>(1, (per_writer + w.batch_bytes - 1) / w.batch_bytes);
  cell.segment_bytes = SegmentBytesFor(writers, per_writer);
  return cell;
}

// The appends of one writer that are not acknowledged yet. Acquire and Drain run on the
// writer's thread; Release on IoExecutor threads (from on_ack). The count is an atomic
// and the writer sleeps on it (futex) only when the window is full, so an ack costs the
// I/O thread an atomic decrement, and a wake-up only when the writer is asleep: the
// harness stays out of the engine's figures.
class AckWindow {
 public:
  explicit AckWindow(int limit) : limit_(limit) {}

  // Waits for a free slot and takes it. False once an append has failed.
  bool Acquire() {
    int64_t n = outstanding_.load(std::memory_order_acquire);
    if (n >= limit_) {
      int64_t start = MonotonicNanos();
      while (n >= limit_ && !failed_.load(std::memory_order_acquire)) {
        sleeping_.store(true, std::memory_order_seq_cst);
        n = outstanding_.load(std::memory_order_seq_cst);
        if (n >= limit_) outstanding_.wait(n, std::memory_order_acquire);
        sleeping_.store(false, std::memory_order_relaxed);
        n = outstanding_.load(std::memory_order_acquire);
      }
      int64_t waited = MonotonicNanos() - start;
      wait_ns_ += waited;
      max_wait_ns_ = std::max(max_wait_ns_, waited);
    }
    if (failed_.load(std::memory_order_acquire)) return false;
    outstanding_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // An acknowledgement.
  void Release(const Status& status) {
    if (!status.ok()) {
      std::lock_guard lock(error_mu_);
      if (error_.ok()) error_ = status;
      failed_.store(true, std::memory_order_release);
    }
    outstanding_.fetch_sub(1, std::memory_order_seq_cst);
    acks_.fetch_add(1, std::memory_order_relaxed);
    if (sleeping_.load(std::memory_order_seq_cst)) outstanding_.notify_one();
  }

  // Time the writer spent waiting for a slot, i.e. for the log's acks.
  double wait_seconds() const { return static_cast<double>(wait_ns_) / 1e9; }
  double max_wait_seconds() const { return static_cast<double>(max_wait_ns_) / 1e9; }

  // An Append that failed at once: no callback will come for it.
  void Abandon(const Status& status) { Release(status); }

  // Waits until every append is acknowledged (polling: it runs once, at the end); the
  // first error, if any. outstanding_ may go below zero if a log also called back an
  // append it refused.
  Status Drain() {
    uint64_t acks_seen = acks_.load();
    int64_t last_progress = MonotonicNanos();
    while (outstanding_.load(std::memory_order_acquire) > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      uint64_t acks = acks_.load();
      int64_t now = MonotonicNanos();
      if (acks != acks_seen) {
        acks_seen = acks;
        last_progress = now;
      } else if (now - last_progress > std::chrono::nanoseconds(kAckTimeout).count()) {
        return InternalError("{} appends not acknowledged after {} s without progress",
                             outstanding_.load(), kAckTimeout.count());
      }
    }
    std::lock_guard lock(error_mu_);
    return error_;
  }

 private:
  const int64_t limit_;
  std::atomic<int64_t> outstanding_{0};
  std::atomic<uint64_t> acks_{0};
  std::atomic<bool> sleeping_{false};  // the writer is (about to be) in outstanding_.wait
  std::atomic<bool> failed_{false};
  int64_t wait_ns_ = 0;  // only the writer's thread touches these two
  int64_t max_wait_ns_ = 0;
  std::mutex error_mu_;
  Status error_;  // guarded by error_mu_: the first failed ack
};

struct WriterResult {
  Status status;
  uint64_t appends = 0;
  uint64_t segments_deleted = 0;
  double cpu_seconds = 0;       // of the writer's thread
  double wait_seconds = 0;      // blocked with `in_flight` appends unacknowledged
  double max_wait_seconds = 0;  // the longest single such wait
};

// One writer's timed work: keeps up to `in_flight` appends unacknowledged, applies
// retention every quarter segment, and at the end waits for every ack (and, for the
// interval policy, Flush()es).
WriterResult RunWriter(PartitionLog& log, AckWindow& window, const Workload& w, const Cell& cell,
                       size_t first_batch) {
  WriterResult result;
  const double cpu_start = ThreadCpuSeconds();
  const AckLevel ack = cell.mode == Mode::kDurable ? AckLevel::kDurable : AckLevel::kWritten;
  const uint64_t retention_every = std::max<uint64_t>(cell.segment_bytes / 4, 1);
  uint64_t since_retention = 0;
  Status failed;
  for (uint64_t i = 0; i < cell.appends_per_writer; ++i) {
    if (!window.Acquire()) break;
    const std::vector<uint8_t>& batch = w.batches[(first_batch + i) % w.batches.size()];
    storage::AppendOptions opts;
    opts.ack = ack;
    opts.on_ack = [&window](const Status& st, const storage::AppendInfo&) { window.Release(st); };
    Result<storage::AppendInfo> appended = log.Append(batch, std::move(opts));
    if (!appended.ok()) {
      window.Abandon(appended.status().WithContext(fmt::format("append to {}", log.dir())));
      break;
    }
    ++result.appends;
    since_retention += w.batch_bytes;
    if (since_retention >= retention_every) {
      since_retention = 0;
      Result<int> deleted = log.ApplyRetention();
      if (!deleted.ok()) {
        failed = deleted.status().WithContext(fmt::format("retention in {}", log.dir()));
        break;
      }
      result.segments_deleted += static_cast<uint64_t>(*deleted);
    }
  }
  Status drained = window.Drain();
  if (!drained.ok()) {
    result.status = drained.message().find(log.dir()) == std::string::npos
                        ? drained.WithContext(fmt::format("log {}", log.dir()))
                        : drained;
    return result;
  }
  if (!failed.ok()) {
    result.status = failed;
    return result;
  }
  if (cell.mode != Mode::kDurable) {
    Status flushed = log.Flush();
    if (!flushed.ok()) {
      result.status = flushed.WithContext(fmt::format("flush of {}", log.dir()));
      return result;
    }
  }
  result.cpu_seconds = ThreadCpuSeconds() - cpu_start;
  result.wait_seconds = window.wait_seconds();
  result.max_wait_seconds = window.max_wait_seconds();
  return result;
}

struct EngineResult {
  uint64_t records = 0;
  uint64_t bytes = 0;  // batch bytes appended
  double seconds = 0;
  IoSnapshot io;  // during the timed part (after Open, before Close)
  uint64_t segments_deleted = 0;
  double cpu_seconds = 0;          // the process, during the timed part
  double writer_cpu_seconds = 0;   // the writer threads (Append, ApplyRetention, Flush)
  double writer_wait_seconds = 0;  // the writer threads, blocked on a full ack window
  double max_wait_seconds = 0;     // the longest single such block
};

// Starts `count` threads running `body(i)` together and returns the seconds from the
// start signal until the last one finished.
template <typename Body>
Result<double> RunThreads(int count, Body body) {
  std::latch go(1);
  std::atomic<bool> abort{false};
  std::vector<std::jthread> threads;
  try {
    for (int i = 0; i < count; ++i) {
      threads.emplace_back([&, i] {
        go.wait();
        if (!abort.load()) body(i);
      });
    }
  } catch (const std::system_error& e) {
    size_t started = threads.size();
    abort = true;
    go.count_down();
    threads.clear();  // joins
    return ResourceExhaustedError("cannot start thread {} of {}: {}", started + 1, count, e.what());
  }
  int64_t start = MonotonicNanos();
  go.count_down();
  for (std::jthread& t : threads) t.join();
  return static_cast<double>(MonotonicNanos() - start) / 1e9;
}

Result<EngineResult> RunEngine(const Cell& cell, const Workload& w,
                               const DiskBenchOptions& options) {
  // Declaration order is destruction order reversed: logs close first, then the windows
  // their callbacks point to, then the executor, then the Env their files came from.
  CountingEnv env(storage::Env::Posix());
  // Two threads per log: its sync task runs beside its next write job.
  storage::IoExecutor executor(2 * cell.writers);
  std::vector<std::unique_ptr<AckWindow>> windows;
  std::vector<std::unique_ptr<PartitionLog>> logs;

  for (int i = 0; i < cell.writers; ++i) {
    storage::LogOptions lo;
    lo.env = &env;
    lo.executor = &executor;
    lo.segment_bytes = cell.segment_bytes;
    lo.flush_policy = cell.mode == Mode::kDurable ? FlushPolicy::kDurable : FlushPolicy::kInterval;
    lo.retention_bytes = static_cast<int64_t>(cell.segment_bytes);
    lo.retention_ms = -1;  // only size retention: the run must not depend on timestamps
    lo.max_batch_bytes =
        std::max<uint32_t>(lo.max_batch_bytes, static_cast<uint32_t>(w.batch_bytes));
    std::string dir = fmt::format("{}/log/w{}", cell.dir, i);
    Result<std::unique_ptr<PartitionLog>> log = PartitionLog::Open(dir, lo);
    if (!log.ok()) return log.status().WithContext(fmt::format("open log {}", dir));
    logs.push_back(std::move(log).value());
    windows.push_back(std::make_unique<AckWindow>(options.in_flight));
  }

  std::vector<WriterResult> results(static_cast<size_t>(cell.writers));
  IoSnapshot before = IoSnapshot::Of(env.counters());
  double cpu_before = ProcessCpuSeconds();
  Result<double> seconds = RunThreads(cell.writers, [&](int i) {
    size_t first = static_cast<size_t>(i) * w.batches.size() / static_cast<size_t>(cell.writers);
    results[static_cast<size_t>(i)] =
        RunWriter(*logs[static_cast<size_t>(i)], *windows[static_cast<size_t>(i)], w, cell, first);
  });
  IoSnapshot after = IoSnapshot::Of(env.counters());
  double cpu_after = ProcessCpuSeconds();
  if (!seconds.ok()) return seconds.status();

  Status first_error;
  for (const WriterResult& r : results) {
    if (!r.status.ok() && first_error.ok()) first_error = r.status;
  }
  for (std::unique_ptr<PartitionLog>& log : logs) {
    Status closed = log->Close();
    if (!closed.ok() && first_error.ok()) {
      first_error = closed.WithContext(fmt::format("close of {}", log->dir()));
    }
  }
  RETURN_IF_ERROR(first_error);

  EngineResult out;
  for (const WriterResult& r : results) {
    out.records += r.appends * static_cast<uint64_t>(w.records_per_batch);
    out.bytes += r.appends * w.batch_bytes;
    out.segments_deleted += r.segments_deleted;
    out.writer_cpu_seconds += r.cpu_seconds;
    out.writer_wait_seconds += r.wait_seconds;
    out.max_wait_seconds = std::max(out.max_wait_seconds, r.max_wait_seconds);
  }
  out.cpu_seconds = cpu_after - cpu_before;
  out.seconds = *seconds;
  out.io = after - before;
  return out;
}

// ---------------------------------------------------------------------------------------
// The raw reference: plain write(2) and fdatasync, one file (or, on tmpfs, a rolling set
// of files) per thread.

struct RawPlan {
  uint64_t bytes_per_thread = 0;
  uint64_t sync_every = 0;  // fdatasync after this many bytes; 0 = only at the end
  uint64_t roll_bytes = 0;  // start a new file past this size, keeping two; 0 = one file
};

struct RawResult {
  uint64_t bytes = 0;
  double seconds = 0;
  uint64_t syncs = 0;
  double cpu_seconds = 0;  // the process, during the timed part
};

Status WriteAll(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write", path, errno);
    }
    if (w == 0) return IOError("write {}: wrote nothing", path);
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

Status RawWriter(const std::string& prefix, std::span<const uint8_t> buf, const RawPlan& plan,
                 uint64_t* syncs) {
  ScopedFd fd;
  std::string path;
  std::deque<std::string> files;  // live files, oldest first
  int next_index = 0;
  uint64_t in_file = 0;
  uint64_t since_sync = 0;
  auto open_next = [&]() -> Status {
    path = fmt::format("{}.{:04}", prefix, next_index++);
    int f = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f < 0) return ErrnoError("open", path, errno);
    fd.Reset(f);
    files.push_back(path);
    in_file = 0;
    while (files.size() > 2) {
      if (::unlink(files.front().c_str()) != 0) return ErrnoError("unlink", files.front(), errno);
      files.pop_front();
    }
    return Status::OK();
  };
  RETURN_IF_ERROR(open_next());
  uint64_t left = plan.bytes_per_thread;
  while (left > 0) {
    if (plan.roll_bytes > 0 && in_file >= plan.roll_bytes) RETURN_IF_ERROR(open_next());
    uint64_t n = std::min<uint64_t>(buf.size(), left);
    if (plan.sync_every > 0) n = std::min(n, plan.sync_every - since_sync);
    RETURN_IF_ERROR(WriteAll(fd.get(), buf.data(), n, path));
    left -= n;
    in_file += n;
    since_sync += n;
    if (plan.sync_every > 0 && since_sync >= plan.sync_every) {
      if (::fdatasync(fd.get()) != 0) return ErrnoError("fdatasync", path, errno);
      ++*syncs;
      since_sync = 0;
    }
  }
  if (since_sync > 0 || *syncs == 0) {
    if (::fdatasync(fd.get()) != 0) return ErrnoError("fdatasync", path, errno);
    ++*syncs;
  }
  return Status::OK();
}

Result<RawResult> RunRaw(const Cell& cell, const Workload& w, const RawPlan& plan) {
  std::string dir = cell.dir + "/raw";
  RETURN_IF_ERROR(MakeDirs(dir));
  uint64_t write_bytes =
      plan.sync_every > 0 ? std::min(plan.sync_every, kMaxWriteBytes) : kRawChunkBytes;
  std::vector<uint8_t> buf = FillBuffer(w, static_cast<size_t>(write_bytes));
  std::vector<Status> statuses(static_cast<size_t>(cell.writers));
  std::vector<uint64_t> syncs(static_cast<size_t>(cell.writers), 0);
  double cpu_before = ProcessCpuSeconds();
  Result<double> seconds = RunThreads(cell.writers, [&](int i) {
    statuses[static_cast<size_t>(i)] =
        RawWriter(fmt::format("{}/raw{}", dir, i), buf, plan, &syncs[static_cast<size_t>(i)]);
  });
  double cpu_after = ProcessCpuSeconds();
  if (!seconds.ok()) return seconds.status();
  for (const Status& st : statuses) RETURN_IF_ERROR(st.WithContext("raw reference"));
  RawResult out;
  out.cpu_seconds = cpu_after - cpu_before;
  out.bytes = plan.bytes_per_thread * static_cast<uint64_t>(cell.writers);
  out.seconds = *seconds;
  for (uint64_t s : syncs) out.syncs += s;
  return out;
}

// ---------------------------------------------------------------------------------------

struct Row {
  Mode mode;
  int writers;
  double load_1m;  // before the cell ran
  uint64_t segment_bytes;
  EngineResult engine;
  uint64_t bytes_per_sync;  // engine: appended bytes per segment fdatasync
  RawResult raw;
  uint64_t raw_bytes_per_sync;

  double records_per_s() const { return Rate(static_cast<double>(engine.records), engine.seconds); }
  double mb_per_s() const { return Rate(static_cast<double>(engine.bytes) / kMB, engine.seconds); }
  double raw_mb_per_s() const { return Rate(static_cast<double>(raw.bytes) / kMB, raw.seconds); }
  double ratio() const { return raw_mb_per_s() > 0 ? mb_per_s() / raw_mb_per_s() : 0; }
};

Result<Row> RunCell(const Cell& cell, const Workload& w, const DiskBenchOptions& options) {
  const Mode mode = cell.mode;
  const int writers = cell.writers;
  const std::string root = fs::path(cell.dir).parent_path().string();
  ScopedRemove remove_cell(cell.dir);
  RETURN_IF_ERROR(MakeDirs(cell.dir));

  Row row;
  row.mode = mode;
  row.writers = writers;
  row.load_1m = LoadAverage1m();
  row.segment_bytes = cell.segment_bytes;

  RETURN_IF_ERROR(CheckFreeSpace(root, EngineSpaceNeeded(cell), "the sluice logs"));
  QuiesceFileSystem(root);
  {
    ScopedRemove remove_logs(cell.dir + "/log");
    ASSIGN_OR_RETURN(row.engine, RunEngine(cell, w, options));
  }
  uint64_t syncs = row.engine.io.segment_syncs;
  row.bytes_per_sync = syncs > 0 ? row.engine.bytes / syncs : row.engine.bytes;

  RawPlan plan;
  plan.bytes_per_thread = row.engine.bytes / static_cast<uint64_t>(writers);
  if (mode == Mode::kDurable) plan.sync_every = std::max<uint64_t>(row.bytes_per_sync, 1);
  // On disk, one file per thread with nothing deleted, so every byte reaches the disk (a
  // file unlinked before writeback would never be written). tmpfs has no disk to reach:
  // roll like the log does so the cell stays within its memory budget.
  if (!cell.disk) plan.roll_bytes = cell.segment_bytes;
  RETURN_IF_ERROR(CheckFreeSpace(root, RawSpaceNeeded(cell, w.batch_bytes), "the raw reference"));
  QuiesceFileSystem(root);
  {
    ScopedRemove remove_raw(cell.dir + "/raw");
    ASSIGN_OR_RETURN(row.raw, RunRaw(cell, w, plan));
  }
  row.raw_bytes_per_sync = row.raw.syncs > 0 ? row.raw.bytes / row.raw.syncs : row.raw.bytes;
  return row;
}

// ---------------------------------------------------------------------------------------
// A directory the bench works in: <base>/run-<pid>, removed at the end, and <base> too
// when the bench created it (a directory that existed before is never removed).

class RunDir {
 public:
  static Result<std::unique_ptr<RunDir>> Create(const std::string& base) {
    std::error_code ec;
    bool existed = fs::exists(base, ec);
    if (ec) return IOError("cannot stat {}: {}", base, ec.message());
    RETURN_IF_ERROR(MakeDirs(base));
    std::string path = fmt::format("{}/run-{}", base, ::getpid());
    auto dir = std::unique_ptr<RunDir>(new RunDir(base, path, !existed));
    RETURN_IF_ERROR(MakeDirs(path));
    return dir;
  }
  ~RunDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
    if (created_base_) fs::remove(base_, ec);  // only when empty
  }
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  RunDir(std::string base, std::string path, bool created_base)
      : base_(std::move(base)), path_(std::move(path)), created_base_(created_base) {}
  std::string base_;
  std::string path_;
  bool created_base_;
};

std::string DescribeFs(const FsInfo& fs) {
  std::string device = fs.device;
  std::string extra;
  if (fs.rotational >= 0) extra = fmt::format("sysfs rotational={}", fs.rotational);
  if (!fs.device_model.empty()) extra += (extra.empty() ? "" : " ") + fs.device_model;
  return fmt::format("{}: {} on {}{} (mounted at {}), {} free of {}", fs.path, fs.fs_type, device,
                     extra.empty() ? "" : ", " + extra, fs.mount_point,
                     FormatBinaryBytes(fs.free_bytes), FormatBinaryBytes(fs.total_bytes));
}

struct Context {
  MachineInfo machine;
  std::optional<FsInfo> disk_fs;
  std::optional<FsInfo> tmpfs_fs;
  uint64_t batch_bytes = 0;
  size_t pool = 0;
  std::vector<int> writer_counts;
};

void PrintHeader(const DiskBenchOptions& o, const Context& ctx) {
  const MachineInfo& m = ctx.machine;
  fmt::print("sluice bench disk\n");
  fmt::print("  machine   {}, {} cores, {} memory, {}; load average {:.2f} at the start\n",
             m.cpu_model, m.cores, FormatBinaryBytes(m.memory_bytes), m.kernel, LoadAverage1m());
  if (ctx.disk_fs) {
    fmt::print("  dir       {}\n", DescribeFs(*ctx.disk_fs));
    if (ctx.disk_fs->is_tmpfs)
      fmt::print("            (warning: dir is on tmpfs: the disk rows measure memory)\n");
  }
  if (ctx.tmpfs_fs) {
    fmt::print("  tmpfs     {}\n", DescribeFs(*ctx.tmpfs_fs));
    if (!ctx.tmpfs_fs->is_tmpfs) fmt::print("            (warning: tmpfs_dir is not on tmpfs)\n");
  }
  std::string segments;
  for (int n : ctx.writer_counts) {
    uint64_t per_writer = o.bytes_per_cell / static_cast<uint64_t>(n);
    if (!segments.empty()) segments += ", ";
    segments +=
        fmt::format("{} with {} writer{}", FormatBinaryBytes(SegmentBytesFor(n, per_writer)), n,
                    n == 1 ? "" : "s");
  }
  storage::LogOptions defaults;
  fmt::print(
      "  workload  {} per cell; batches of {} records x {} B values = {} B ({} distinct, "
      "reused); {} appends in flight per writer; one log per writer\n",
      FormatBinaryBytes(o.bytes_per_cell), o.records_per_batch, o.record_bytes,
      Grouped(ctx.batch_bytes), ctx.pool, o.in_flight);
  fmt::print(
      "  log       segment.bytes {}; retention.bytes = segment.bytes, ApplyRetention every "
      "quarter segment; retention.ms -1; IoExecutor threads = 2 x writers\n",
      segments);
  fmt::print(
      "  flush     interval: flush.ms {}, flush.bytes {}, ack written, Flush() at the end "
      "(timed); durable: ack durable; tmpfs: as interval\n",
      defaults.flush_ms, FormatBinaryBytes(defaults.flush_bytes));
  fmt::print(
      "  raw       write(2) of {} chunks, one fdatasync at the end (interval, tmpfs); write + "
      "fdatasync of sluice's bytes/sync (durable); a file per writer thread\n",
      FormatBinaryBytes(kRawChunkBytes));
  fmt::print(
      "  MB = 10^6 bytes; ratio = sluice MB/s / raw MB/s; bytes/sync = bytes appended / "
      "segment fdatasyncs\n\n");
  fmt::print("{:<9} {:>7} {:>13} {:>10} {:>10} {:>6} {:>11} {:>8}\n", "mode", "writers",
             "records/s", "MB/s", "raw MB/s", "ratio", "bytes/sync", "seconds");
  std::fflush(stdout);
}

void PrintRow(const Row& r) {
  fmt::print("{:<9} {:>7} {:>13} {:>10.1f} {:>10.1f} {:>6.2f} {:>11} {:>8.2f}\n", ModeName(r.mode),
             r.writers, Grouped(static_cast<uint64_t>(r.records_per_s() + 0.5)), r.mb_per_s(),
             r.raw_mb_per_s(), r.ratio(), FormatBinaryBytes(r.bytes_per_sync), r.engine.seconds);
  std::fflush(stdout);
}

void PrintJson(const Row& r, const DiskBenchOptions& o, const Context& ctx) {
  const FsInfo* fs = r.mode == Mode::kTmpfs ? (ctx.tmpfs_fs ? &*ctx.tmpfs_fs : nullptr)
                                            : (ctx.disk_fs ? &*ctx.disk_fs : nullptr);
  std::string out = "{\"bench\":\"disk\"";
  auto add = [&](std::string_view key, const std::string& value) {
    out += fmt::format(",\"{}\":{}", key, value);
  };
  add("flush", JsonString(ModeName(r.mode)));
  add("writers", std::to_string(r.writers));
  add("records", std::to_string(r.engine.records));
  add("bytes", std::to_string(r.engine.bytes));
  add("seconds", fmt::format("{:.6f}", r.engine.seconds));
  add("records_per_s", fmt::format("{:.1f}", r.records_per_s()));
  add("mb_per_s", fmt::format("{:.3f}", r.mb_per_s()));
  add("raw_mb_per_s", fmt::format("{:.3f}", r.raw_mb_per_s()));
  add("ratio", fmt::format("{:.4f}", r.ratio()));
  add("bytes_per_sync", std::to_string(r.bytes_per_sync));
  add("syncs", std::to_string(r.engine.io.segment_syncs));
  add("index_syncs", std::to_string(r.engine.io.other_syncs));
  add("dir_syncs", std::to_string(r.engine.io.dir_syncs));
  add("written_bytes", std::to_string(r.engine.io.segment_bytes + r.engine.io.other_bytes));
  add("segments_deleted", std::to_string(r.engine.segments_deleted));
  add("cpu_seconds", fmt::format("{:.3f}", r.engine.cpu_seconds));
  add("writer_cpu_seconds", fmt::format("{:.3f}", r.engine.writer_cpu_seconds));
  add("writer_wait_seconds", fmt::format("{:.3f}", r.engine.writer_wait_seconds));
  add("max_wait_ms", fmt::format("{:.3f}", r.engine.max_wait_seconds * 1e3));
  add("raw_bytes", std::to_string(r.raw.bytes));
  add("raw_cpu_seconds", fmt::format("{:.3f}", r.raw.cpu_seconds));
  add("raw_seconds", fmt::format("{:.6f}", r.raw.seconds));
  add("raw_syncs", std::to_string(r.raw.syncs));
  add("raw_bytes_per_sync", std::to_string(r.raw_bytes_per_sync));
  add("record_bytes", std::to_string(o.record_bytes));
  add("records_per_batch", std::to_string(o.records_per_batch));
  add("batch_bytes", std::to_string(ctx.batch_bytes));
  add("in_flight", std::to_string(o.in_flight));
  add("segment_bytes", std::to_string(r.segment_bytes));
  add("retention_bytes", std::to_string(r.segment_bytes));
  add("flush_ms", std::to_string(storage::LogOptions{}.flush_ms));
  if (fs != nullptr) {
    add("dir", JsonString(fs->path));
    add("fs", JsonString(fs->fs_type));
    add("device", JsonString(fs->device));
  }
  add("cpu", JsonString(ctx.machine.cpu_model));
  add("cores", std::to_string(ctx.machine.cores));
  add("load_1m", fmt::format("{:.2f}", r.load_1m));
  add("memory_bytes", std::to_string(ctx.machine.memory_bytes));
  add("kernel", JsonString(ctx.machine.kernel));
  out += "}\n";
  fmt::print("{}", out);
  std::fflush(stdout);
}

Status Validate(const DiskBenchOptions& o, std::vector<Mode>* modes) {
  if (o.bytes_per_cell == 0) return InvalidArgumentError("bytes_per_cell must be positive");
  // Sizes are summed per cell; keep them far from overflow (a negative flag value parses
  // as a huge unsigned one).
  if (o.bytes_per_cell > (1ull << 50)) {
    return InvalidArgumentError("bytes_per_cell {} is more than 1 PiB", o.bytes_per_cell);
  }
  if (o.record_bytes == 0 || o.record_bytes > (64u << 20)) {
    return InvalidArgumentError("record_bytes must be in [1, 64 MiB], not {}", o.record_bytes);
  }
  if (o.records_per_batch < 1 || o.records_per_batch > 1'000'000) {
    return InvalidArgumentError("records_per_batch must be in [1, 1000000], not {}",
                                o.records_per_batch);
  }
  if (static_cast<uint64_t>(o.records_per_batch) * (o.record_bytes + 32) > (256u << 20)) {
    return InvalidArgumentError("a batch of {} records of {} B is over 256 MiB",
                                o.records_per_batch, o.record_bytes);
  }
  if (o.in_flight < 1)
    return InvalidArgumentError("in_flight must be at least 1, not {}", o.in_flight);
  if (o.writers < 0 || o.writers > 4096) {
    return InvalidArgumentError("writers must be in [0, 4096] (0 = one per core), not {}",
                                o.writers);
  }
  if (o.flush.empty())
    return InvalidArgumentError("no flush mode given (interval, durable, tmpfs)");
  for (const std::string& name : o.flush) {
    Mode m;
    if (name == "interval") {
      m = Mode::kInterval;
    } else if (name == "durable") {
      m = Mode::kDurable;
    } else if (name == "tmpfs") {
      m = Mode::kTmpfs;
    } else {
      return InvalidArgumentError("unknown flush mode '{}': use interval, durable or tmpfs", name);
    }
    if (std::find(modes->begin(), modes->end(), m) == modes->end()) modes->push_back(m);
  }
  if (o.dir.empty()) return InvalidArgumentError("dir is empty");
  if (o.tmpfs_dir.empty()) return InvalidArgumentError("tmpfs_dir is empty");
  return Status::OK();
}

Status Run(const DiskBenchOptions& o) {
  std::vector<Mode> modes;
  RETURN_IF_ERROR(Validate(o, &modes));

  Context ctx;
  ctx.machine = GetMachineInfo();
  int n = o.writers > 0 ? o.writers : std::max(1, ctx.machine.cores);
  ctx.writer_counts = {1};
  if (n > 1) ctx.writer_counts.push_back(n);

  ASSIGN_OR_RETURN(Workload w, BuildWorkload(o));
  ctx.batch_bytes = w.batch_bytes;
  ctx.pool = w.batches.size();

  bool need_disk =
      std::any_of(modes.begin(), modes.end(), [](Mode m) { return m != Mode::kTmpfs; });
  bool need_tmpfs = std::find(modes.begin(), modes.end(), Mode::kTmpfs) != modes.end();
  std::unique_ptr<RunDir> disk_dir, tmpfs_dir;
  if (need_disk) {
    ASSIGN_OR_RETURN(disk_dir, RunDir::Create(o.dir));
    ASSIGN_OR_RETURN(FsInfo info, GetFsInfo(o.dir));
    ctx.disk_fs = info;
  }
  if (need_tmpfs) {
    ASSIGN_OR_RETURN(tmpfs_dir, RunDir::Create(o.tmpfs_dir));
    ASSIGN_OR_RETURN(FsInfo info, GetFsInfo(o.tmpfs_dir));
    ctx.tmpfs_fs = info;
  }

  // Plan every cell and check the free space for the largest before running any, so a
  // run that cannot finish fails at once instead of after minutes.
  std::vector<Cell> cells;
  for (Mode mode : modes) {
    const std::string& root = mode == Mode::kTmpfs ? tmpfs_dir->path() : disk_dir->path();
    for (int writers : ctx.writer_counts) cells.push_back(PlanCell(mode, writers, root, w, o));
  }
  for (const Cell& cell : cells) {
    std::string root = fs::path(cell.dir).parent_path().string();
    std::string what = fmt::format("{} with {} writer{}", ModeName(cell.mode), cell.writers,
                                   cell.writers == 1 ? "" : "s");
    RETURN_IF_ERROR(CheckFreeSpace(root, EngineSpaceNeeded(cell), what + " (sluice logs)"));
    RETURN_IF_ERROR(
        CheckFreeSpace(root, RawSpaceNeeded(cell, w.batch_bytes), what + " (raw reference)"));
  }

  if (!o.json) PrintHeader(o, ctx);
  Progress progress;
  for (const Cell& cell : cells) {
    std::string what = fmt::format("{} with {} writer{}", ModeName(cell.mode), cell.writers,
                                   cell.writers == 1 ? "" : "s");
    progress.Show(fmt::format("running {} ...", what));
    Result<Row> row = RunCell(cell, w, o);
    progress.Clear();
    if (!row.ok()) return row.status().WithContext(what);
    if (o.json) {
      PrintJson(*row, o, ctx);
    } else {
      PrintRow(*row);
    }
  }
  return Status::OK();
}

}  // namespace

int RunDiskBench(const DiskBenchOptions& options) {
  try {
    Status st = Run(options);
    if (!st.ok()) {
      std::fflush(stdout);
      fmt::print(stderr, "sluice bench disk: {}\n", st.ToString());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {  // bad_alloc, filesystem or thread errors
    std::fflush(stdout);
    fmt::print(stderr, "sluice bench disk: {}\n", e.what());
    return 1;
  }
}

}  // namespace sluice::bench
