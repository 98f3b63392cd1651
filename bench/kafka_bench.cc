#include "bench/kafka_bench.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <malloc.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string_view>
#include <thread>

#include "base/clock.h"
#include "base/status.h"
#include "bench/bench_util.h"
#include "bench/child_process.h"
#include "bench/machine_info.h"
#include "kafka/client/admin.h"
#include "kafka/client/consumer.h"
#include "kafka/client/producer.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
namespace kc = kafka::client;
using namespace std::chrono_literals;
using Json = nlohmann::ordered_json;

constexpr double kMB = 1e6;
constexpr auto kBrokerStartTimeout = 30s;
constexpr auto kBrokerStopTimeout = 30s;
constexpr auto kAdminTimeout = 20s;
constexpr auto kFlushTimeout = 300s;
constexpr auto kTxnTimeout = 60s;            // each transactional call
constexpr auto kConsumeStallTimeout = 30s;   // no record for this long = stuck
constexpr int kWarmupRecords = 1000;         // latency phase: connect before timing
constexpr int64_t kPaceQuantumNs = 100'000;  // latency phase: shortest sleep between sends

// ---------------------------------------------------------------------------------------
// Small helpers.

// CPU seconds (user + system) of this process, librdkafka's threads included.
double SelfCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// The absolute path of `name` on $PATH, or empty.
std::string FindOnPath(std::string_view name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + std::string(name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// A loopback TCP port that was free a moment ago (the kernel's choice, then released).
Result<int> FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError("socket", "127.0.0.1", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError("bind", "127.0.0.1:0", err);
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

// ---------------------------------------------------------------------------------------
// Child processes: the broker and iperf3.

// `sluice serve` as a child process on 127.0.0.1 and a port the kernel picks.
// Lifecycle: Start, Stop (SIGTERM, wait, exit status 0 = OK); the destructor kills a
// broker that was not stopped. Owned by one thread.
class BrokerProcess {
 public:
  static Result<std::unique_ptr<BrokerProcess>> Start(const std::string& binary,
                                                      const std::string& data_dir,
                                                      const std::string& log_dir) {
    std::unique_ptr<BrokerProcess> b(new BrokerProcess());
    b->data_dir_ = data_dir;
    std::string exe = binary;
    if (exe == "/proc/self/exe") {
      std::error_code ec;
      fs::path self = fs::read_symlink("/proc/self/exe", ec);
      if (!ec) exe = self.string();
    }
    // It prints "sluice: serving Kafka on HOST:PORT (...)" once it listens.
    ASSIGN_OR_RETURN(
        b->child_,
        ListeningChild::Start("sluice serve",
                              {exe, "serve", "--kafka-addr", "127.0.0.1:0", "--http-addr",
                               "127.0.0.1:0", "--pg-addr", "127.0.0.1:0", "--data-dir", data_dir},
                              log_dir + "/broker", "sluice: serving Kafka on ", false,
                              kBrokerStartTimeout, kBrokerStopTimeout));
    return b;
  }

  Status Stop() { return child_->Stop(); }
  Status CheckAlive() { return child_->CheckAlive(); }
  double CpuSeconds() const { return child_->CpuSeconds(); }
  const std::string& address() const { return child_->address(); }
  pid_t pid() const { return child_->pid(); }
  const std::string& data_dir() const { return data_dir_; }
  std::string command() const {
    std::string s;
    for (const std::string& a : child_->args()) s += (s.empty() ? "" : " ") + a;
    return s;
  }

 private:
  BrokerProcess() = default;
  std::unique_ptr<ListeningChild> child_;
  std::string data_dir_;
};

// ---------------------------------------------------------------------------------------
// The loopback reference: one TCP stream through iperf3 on 127.0.0.1.

struct Loopback {
  std::optional<double> mb_per_s;
  std::string note;  // why there is no figure, or how it was measured
};

Loopback MeasureLoopback(const std::string& work_dir, int seconds) {
  Loopback result;
  std::string iperf = FindOnPath("iperf3");
  if (iperf.empty()) {
    result.note = "iperf3 not found on PATH: no loopback reference (scripts/setup.sh installs it)";
    return result;
  }
  Result<int> port = FreeLoopbackPort();
  if (!port.ok()) {
    result.note = "no free port for iperf3: " + port.status().ToString();
    return result;
  }
  std::string server_log = work_dir + "/iperf3-server.log";
  std::string client_out = work_dir + "/iperf3-client.json";
  std::string client_err = work_dir + "/iperf3-client.err";
  Result<pid_t> server = Spawn({iperf, "-s", "-1", "-p", std::to_string(*port), "-B", "127.0.0.1"},
                               server_log, server_log);
  if (!server.ok()) {
    result.note = "cannot start iperf3 -s: " + server.status().ToString();
    return result;
  }
  // The one-off server must get exactly one test: probing it would use that up, so the
  // client itself retries while the server is not listening yet (iperf3 -J exits 0 even
  // then; its JSON says "Connection refused").
  std::string why;
  bool server_gone = false;
  int attempts = 0;
  while (attempts < 50) {
    ++attempts;
    std::error_code ec;
    fs::remove(client_out, ec);
    Result<pid_t> client = Spawn({iperf, "-c", "127.0.0.1", "-p", std::to_string(*port), "-t",
                                  std::to_string(seconds), "-J"},
                                 client_out, client_err);
    if (!client.ok()) {
      why = "cannot start iperf3 -c: " + client.status().ToString();
      break;
    }
    std::optional<int> status = WaitFor(*client, std::chrono::seconds(seconds + 30));
    if (!status) {
      ::kill(*client, SIGKILL);
      WaitFor(*client, 5s);
      why = "iperf3 -c did not finish";
      break;
    }
    Json j = Json::parse(ReadFile(client_out), nullptr, false);
    if (!j.is_discarded() && j.contains("end") && j["end"].contains("sum_received") &&
        j["end"]["sum_received"].contains("bits_per_second")) {
      double bps = j["end"]["sum_received"]["bits_per_second"].get<double>();
      result.mb_per_s = bps / 8 / kMB;
      result.note = fmt::format("iperf3, 1 TCP stream over 127.0.0.1 for {} s", seconds);
      break;
    }
    why = !j.is_discarded() && j.contains("error") && j["error"].is_string()
              ? j["error"].get<std::string>()
              : fmt::format("iperf3 -c {}: {}", DescribeWaitStatus(*status), Tail(client_err, 3));
    if (WaitFor(*server, 0ms)) {  // the server is gone: retrying cannot help
      server_gone = true;
      break;
    }
    if (why.find("refused") == std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  if (!server_gone && !WaitFor(*server, 5s)) {
    ::kill(*server, SIGKILL);
    WaitFor(*server, 5s);
  }
  if (!result.mb_per_s) {
    result.note = fmt::format("iperf3 gave no result after {} attempt(s): {}{}", attempts, why,
                              server_gone ? "; its server had exited: " + Tail(server_log, 3) : "");
  }
  return result;
}

// ---------------------------------------------------------------------------------------
// The phases.

struct Settings {
  std::string bootstrap;
  std::string topic;
  int partitions = 0;
  int64_t records = 0;
  int record_size = 0;
  int64_t latency_records = 0;
  int iperf_seconds = 0;
  bool produce = false, consume = false, latency = false;
  kc::Config producer;          // throughput phase
  kc::Config latency_producer;  // latency phase
  kc::Config consumer;
};

struct PhaseResult {
  std::string phase;
  int64_t records = 0;
  int64_t bytes = 0;
  double seconds = 0;
  double client_cpu = 0;
  double broker_cpu = -1;  // -1: not measured (external broker)
  double other_cpu = -1;   // the rest of the machine (with an external broker: it too)
  // Latency phase only.
  std::optional<double> p50_ms, p99_ms, p999_ms, max_ms, mean_ms, max_send_lag_ms;
  std::optional<int64_t> target_rate;
  // librdkafka's own view of the latency phase, from its statistics windows (1 s each):
  // the broker round trip (request written to response read) and the time records wait
  // in the client's queue before a request takes them. p50: the median window's p50;
  // p99: the worst window's p99.
  std::optional<double> rtt_p50_ms, rtt_p99_ms, queue_p50_ms, queue_p99_ms;
  std::string check;                // what was verified
  int64_t commits = -1;             // produce_txn: transactions committed
  std::optional<double> txn_ratio;  // produce_txn: its records/s over produce_idempotent's
  std::optional<double> commit_p50_ms, commit_max_ms;  // produce_txn: CommitTransaction

  double records_per_s() const { return seconds > 0 ? static_cast<double>(records) / seconds : 0; }
  double mb_per_s() const { return seconds > 0 ? static_cast<double>(bytes) / kMB / seconds : 0; }
};

// Busy CPU seconds of the whole machine (all cores) from /proc/stat, or -1.
double MachineBusySeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) ||
      cpu != "cpu") {
    return -1;
  }
  return static_cast<double>(user + nice + system + irq + softirq + steal) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Measures CPU over a phase: this process (the client), the own broker, and everything
// else on the machine (other work on a shared machine, and iperf3 never runs then).
class CpuMeter {
 public:
  explicit CpuMeter(const BrokerProcess* broker)
      : broker_(broker),
        self_(SelfCpuSeconds()),
        broker_start_(broker ? broker->CpuSeconds() : -1),
        machine_start_(MachineBusySeconds()) {}
  void Finish(PhaseResult* r) const {
    r->client_cpu = SelfCpuSeconds() - self_;
    if (broker_ != nullptr && broker_start_ >= 0) {
      double now = broker_->CpuSeconds();
      if (now >= 0) r->broker_cpu = now - broker_start_;
    }
    double machine = MachineBusySeconds();
    if (machine_start_ >= 0 && machine >= 0) {
      r->other_cpu =
          std::max(0.0, machine - machine_start_ - r->client_cpu - std::max(0.0, r->broker_cpu));
    }
  }

 private:
  const BrokerProcess* broker_;
  double self_;
  double broker_start_;
  double machine_start_;
};

// A value of `size` printable bytes, the same for every record (as the perf tests do).
std::string MakePayload(int size) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> letter('a', 'z');
  std::string s(static_cast<size_t>(size), 'x');
  for (char& c : s) c = static_cast<char>(letter(rng));
  return s;
}

// Enqueues one record of `payload` (borrowed) for any partition of `topic`, serving
// delivery reports while the client's queue is full.
Status ProduceRecord(kc::Producer& producer, const std::string& topic, const std::string& payload) {
  while (true) {
    Status st =
        producer.Produce(topic, kc::kAnyPartition, {}, payload, 0, kc::Producer::Value::kBorrow);
    if (st.ok()) return st;
    if (st.code() != StatusCode::kResourceExhausted) return st;
    producer.Poll(1ms);  // the local queue is full: let deliveries drain it
  }
}

// Produces `n` records as fast as the producer takes them, then waits for every
// delivery report. Timed from the first Produce to the last report.
Result<PhaseResult> RunProduce(const Settings& s, const BrokerProcess* broker) {
  Status first_failure;
  auto on_delivery = [&first_failure](const kc::DeliveryReport& r) {
    if (!r.status.ok() && first_failure.ok()) first_failure = r.status;
  };
  // Declared before the producer, which borrows it until its last delivery report.
  const std::string payload = MakePayload(s.record_size);
  ASSIGN_OR_RETURN(std::unique_ptr<kc::Producer> producer,
                   kc::Producer::Create(s.producer, on_delivery));
  PhaseResult r;
  r.phase = "produce";
  CpuMeter cpu(broker);
  int64_t start = MonotonicNanos();
  for (int64_t i = 0; i < s.records; ++i) {
    RETURN_IF_ERROR(ProduceRecord(*producer, s.topic, payload));
    if ((i & 1023) == 0) producer->Poll(0ms);
    if (!first_failure.ok()) return first_failure;
  }
  RETURN_IF_ERROR(producer->Flush(kFlushTimeout));
  r.seconds = static_cast<double>(MonotonicNanos() - start) / 1e9;
  cpu.Finish(&r);
  RETURN_IF_ERROR(first_failure);
  kc::ProducerCounters c = producer->counters();
  if (c.delivered != static_cast<uint64_t>(s.records) || c.failed != 0) {
    return InternalError("produce: {} records produced, {} delivered, {} failed", s.records,
                         c.delivered, c.failed);
  }
  r.records = static_cast<int64_t>(c.delivered);
  r.bytes = static_cast<int64_t>(c.delivered_bytes);
  r.check = fmt::format("{} delivery reports, all OK", Grouped(c.delivered));
  return r;
}

// Reads every partition from `start[p]` to `end[p]` and checks that exactly those
// records arrive, in offset order, with the expected value size.
Result<PhaseResult> RunConsume(const Settings& s, const std::vector<int64_t>& start,
                               const std::vector<int64_t>& end, const BrokerProcess* broker) {
  int64_t expected = 0;
  for (int p = 0; p < s.partitions; ++p) expected += end[p] - start[p];
  ASSIGN_OR_RETURN(std::unique_ptr<kc::Consumer> consumer, kc::Consumer::Create(s.consumer));
  std::vector<kc::TopicPartition> assignment;
  for (int p = 0; p < s.partitions; ++p) assignment.push_back({s.topic, p, start[p]});
  std::vector<int64_t> next = start;
  int remaining = 0;
  for (int p = 0; p < s.partitions; ++p) remaining += next[p] < end[p] ? 1 : 0;

  PhaseResult r;
  r.phase = "consume";
  CpuMeter cpu(broker);
  int64_t begin = MonotonicNanos();
  RETURN_IF_ERROR(consumer->Assign(assignment));
  int64_t last_progress = begin;
  int64_t stall_ns = std::chrono::nanoseconds(kConsumeStallTimeout).count();
  while (remaining > 0) {
    ASSIGN_OR_RETURN(kc::MessageBatch batch, consumer->Poll(100ms, 10'000));
    if (!batch.errors().empty()) return batch.errors().front();
    for (size_t i = 0; i < batch.size(); ++i) {
      kc::Message m = batch[i];
      int p = m.partition;
      if (p < 0 || p >= s.partitions) return InternalError("consume: record from partition {}", p);
      if (next[p] >= end[p]) continue;  // written after the produce phase: not ours
      if (m.offset != next[p]) {
        return InternalError("consume: partition {}: offset {} where {} was next", p, m.offset,
                             next[p]);
      }
      if (m.value.size() != static_cast<size_t>(s.record_size)) {
        return InternalError("consume: partition {} offset {}: {} value bytes, not {}", p, m.offset,
                             m.value.size(), s.record_size);
      }
      ++r.records;
      r.bytes += static_cast<int64_t>(m.value.size());
      if (++next[p] == end[p]) --remaining;
    }
    int64_t now = MonotonicNanos();
    if (batch.size() > 0) {
      last_progress = now;
    } else if (now - last_progress > stall_ns) {
      std::string behind;
      for (int p = 0; p < s.partitions; ++p) {
        if (next[p] < end[p]) behind += fmt::format(" {}:{}/{}", p, next[p], end[p]);
      }
      Status err = consumer->last_error();
      return AbortedError(
          "consume: no record for {} s with {} of {} read; behind (partition:"
          "next/end):{}{}",
          kConsumeStallTimeout.count(), r.records, expected, behind,
          err.ok() ? "" : "; last client error: " + err.ToString());
    }
  }
  r.seconds = static_cast<double>(MonotonicNanos() - begin) / 1e9;
  cpu.Finish(&r);
  if (r.records != expected) {
    return InternalError("consume: read {} records, expected {}", r.records, expected);
  }
  r.check = fmt::format("{} records read back, every one of {} partitions up to its end offset",
                        Grouped(static_cast<uint64_t>(r.records)), s.partitions);
  return r;
}

// The producer of the transaction phases: acks=all and idempotence (what a
// transactional producer implies), and a transactional.id for produce_txn.
kc::Config TxnProducerConfig(const Settings& s, bool transactional) {
  kc::Config c = s.producer;
  c["acks"] = "all";
  c["enable.idempotence"] = "true";
  if (transactional) {
    c["client.id"] = "sluice-bench-txn";
    c["transactional.id"] = fmt::format("sluice-bench-txn-{}-{}", ::getpid(), WallMillis());
  }
  return c;
}

// produce_idempotent (transactional false) or produce_txn: `s.records` records as fast as
// the producer takes them; produce_txn commits every `commit_interval_ms` and at the end.
// Timed from the first Produce to the last delivery report (idempotent) or the last
// commit (transactional).
Result<PhaseResult> RunProduceTxn(const Settings& s, bool transactional, int commit_interval_ms,
                                  const BrokerProcess* broker) {
  Status first_failure;
  auto on_delivery = [&first_failure](const kc::DeliveryReport& r) {
    if (!r.status.ok() && first_failure.ok()) first_failure = r.status;
  };
  const std::string payload = MakePayload(s.record_size);
  ASSIGN_OR_RETURN(std::unique_ptr<kc::Producer> producer,
                   kc::Producer::Create(TxnProducerConfig(s, transactional), on_delivery));
  PhaseResult r;
  r.phase = transactional ? "produce_txn" : "produce_idempotent";
  if (transactional) {
    RETURN_IF_ERROR(producer->InitTransactions(kTxnTimeout).WithContext("InitTransactions"));
    r.commits = 0;
  }
  const int64_t interval_ns = int64_t{commit_interval_ms} * 1'000'000;
  std::vector<double> commit_ms;  // how long each CommitTransaction blocked
  CpuMeter cpu(broker);
  int64_t start = MonotonicNanos();
  int64_t next_commit = start + interval_ns;
  if (transactional) RETURN_IF_ERROR(producer->BeginTransaction());
  for (int64_t i = 0; i < s.records; ++i) {
    RETURN_IF_ERROR(ProduceRecord(*producer, s.topic, payload));
    if ((i & 1023) == 0) producer->Poll(0ms);
    if (!first_failure.ok()) return first_failure;
    if (transactional && (i & 255) == 0 && MonotonicNanos() >= next_commit) {
      int64_t commit_start = MonotonicNanos();
      RETURN_IF_ERROR(producer->CommitTransaction(kTxnTimeout).WithContext("CommitTransaction"));
      commit_ms.push_back(static_cast<double>(MonotonicNanos() - commit_start) / 1e6);
      ++r.commits;
      RETURN_IF_ERROR(producer->BeginTransaction());
      next_commit = MonotonicNanos() + interval_ns;
    }
  }
  if (transactional) {
    RETURN_IF_ERROR(producer->CommitTransaction(kTxnTimeout).WithContext("CommitTransaction"));
    ++r.commits;
  }
  RETURN_IF_ERROR(producer->Flush(kFlushTimeout));
  r.seconds = static_cast<double>(MonotonicNanos() - start) / 1e9;
  cpu.Finish(&r);
  RETURN_IF_ERROR(first_failure);
  kc::ProducerCounters c = producer->counters();
  if (c.delivered != static_cast<uint64_t>(s.records) || c.failed != 0) {
    return InternalError("{}: {} records produced, {} delivered, {} failed", r.phase, s.records,
                         c.delivered, c.failed);
  }
  r.records = static_cast<int64_t>(c.delivered);
  r.bytes = static_cast<int64_t>(c.delivered_bytes);
  if (!commit_ms.empty()) {
    std::sort(commit_ms.begin(), commit_ms.end());
    r.commit_p50_ms = commit_ms[commit_ms.size() / 2];
    r.commit_max_ms = commit_ms.back();
  }
  r.check = transactional ? fmt::format("{} delivery reports, all OK; {} commits",
                                        Grouped(c.delivered), r.commits)
                          : fmt::format("{} delivery reports, all OK", Grouped(c.delivered));
  return r;
}

// A read_committed consumer reads every partition from `start[p]` to `end[p]` (the
// offsets between hold records and transaction markers, which it does not see) and must
// find exactly `expected` records.
Result<std::string> CheckCommitted(const Settings& s, const std::vector<int64_t>& start,
                                   const std::vector<int64_t>& end, int64_t expected) {
  kc::Config config = s.consumer;
  config["isolation.level"] = "read_committed";
  ASSIGN_OR_RETURN(std::unique_ptr<kc::Consumer> consumer, kc::Consumer::Create(config));
  std::vector<kc::TopicPartition> assignment;
  for (int p = 0; p < s.partitions; ++p) assignment.push_back({s.topic, p, start[p]});
  RETURN_IF_ERROR(consumer->Assign(assignment));
  int64_t seen = 0;
  std::vector<int64_t> next = start;
  int64_t last_progress = MonotonicNanos();
  const int64_t stall_ns = std::chrono::nanoseconds(kConsumeStallTimeout).count();
  while (seen < expected) {
    ASSIGN_OR_RETURN(kc::MessageBatch batch, consumer->Poll(100ms, 10'000));
    if (!batch.errors().empty()) return batch.errors().front();
    for (size_t i = 0; i < batch.size(); ++i) {
      kc::Message m = batch[i];
      int p = m.partition;
      if (p < 0 || p >= s.partitions) return InternalError("read_committed: partition {}", p);
      if (m.offset < next[p] || m.offset >= end[p]) {
        return InternalError("read_committed: partition {}: offset {} outside [{}, {})", p,
                             m.offset, next[p], end[p]);
      }
      next[p] = m.offset + 1;
      ++seen;
    }
    int64_t now = MonotonicNanos();
    if (batch.size() > 0) {
      last_progress = now;
    } else if (now - last_progress > stall_ns) {
      return AbortedError("read_committed: no record for {} s with {} of {} read",
                          kConsumeStallTimeout.count(), seen, expected);
    }
  }
  // Anything more would be a record read twice or one nobody committed.
  ASSIGN_OR_RETURN(kc::MessageBatch extra, consumer->Poll(500ms, 10'000));
  if (extra.size() > 0) {
    return InternalError("read_committed: {} records past the {} expected", extra.size(), expected);
  }
  return fmt::format("read_committed consumer read back {} records, no more",
                     Grouped(static_cast<uint64_t>(seen)));
}

void SleepUntil(int64_t monotonic_ns) {
  timespec ts{};
  ts.tv_sec = monotonic_ns / 1'000'000'000;
  ts.tv_nsec = monotonic_ns % 1'000'000'000;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// Produces `latency_records` records at `rate` records/s, each sent at its scheduled
// time or up to kPaceQuantumNs later (sleeping until then; sending what is due, never
// ahead of schedule, so a stall is not followed by a burst beyond what is due), and
// measures each record's time from Produce to its delivery report. A second thread
// serves the delivery reports as they arrive, so a report waits for no sleep.
Result<PhaseResult> RunLatency(const Settings& s, int64_t rate, const BrokerProcess* broker) {
  const int64_t n = s.latency_records;
  std::vector<int64_t> latencies;
  latencies.reserve(static_cast<size_t>(n));
  Status first_failure;
  // Runs on the poller thread (and on this one for the warm-up, before it starts).
  auto on_delivery = [&](const kc::DeliveryReport& r) {
    if (r.cookie == 0) return;  // warm-up
    int64_t now = MonotonicNanos();
    if (!r.status.ok()) {
      if (first_failure.ok()) first_failure = r.status;
      return;
    }
    latencies.push_back(now - static_cast<int64_t>(r.cookie));
  };
  // librdkafka's statistics windows, on the poller thread: per window and broker, the
  // round trip and the client-queue latency percentiles in microseconds.
  struct Window {
    double rtt_p50, rtt_p99, queue_p50, queue_p99;
  };
  std::vector<Window> windows;
  std::atomic<bool> measuring{false};
  auto on_stats = [&](std::string_view text) {
    if (!measuring.load(std::memory_order_acquire)) return;
    Json j = Json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.contains("brokers")) return;
    for (const auto& [name, b] : j["brokers"].items()) {
      if (b.value("nodeid", -1) < 0 || !b.contains("rtt") || !b.contains("int_latency")) continue;
      if (b["rtt"].value("cnt", 0) == 0) continue;
      windows.push_back({b["rtt"].value("p50", 0.0), b["rtt"].value("p99", 0.0),
                         b["int_latency"].value("p50", 0.0), b["int_latency"].value("p99", 0.0)});
    }
  };
  // Declared before the producer, which borrows it until its last delivery report.
  const std::string payload = MakePayload(s.record_size);
  ASSIGN_OR_RETURN(std::unique_ptr<kc::Producer> producer,
                   kc::Producer::Create(s.latency_producer, on_delivery, on_stats));

  // Warm-up: connections and metadata before the clock starts.
  for (int i = 0; i < std::min<int64_t>(kWarmupRecords, n); ++i) {
    RETURN_IF_ERROR(producer->Produce(s.topic, kc::kAnyPartition, {}, payload, 0));
  }
  RETURN_IF_ERROR(producer->Flush(kFlushTimeout));

  PhaseResult r;
  r.phase = "latency";
  r.target_rate = rate;
  measuring.store(true, std::memory_order_release);
  std::atomic<bool> stop{false};
  std::thread poller([&] {
    while (!stop.load(std::memory_order_acquire)) producer->Poll(100ms);
  });
  // Wake up on time: the default 50 us timer slack would bunch the sends.
  int old_slack = ::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  ::prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0);
  CpuMeter cpu(broker);
  const int64_t start = MonotonicNanos();
  int64_t max_lag = 0;
  Status send_error;
  for (int64_t i = 0; i < n && send_error.ok(); ++i) {
    // Scheduled time of record i, without drift: start + i / rate.
    int64_t due = start + static_cast<int64_t>(static_cast<__int128>(i) * 1'000'000'000 / rate);
    int64_t now = MonotonicNanos();
    if (now < due) {
      // At most one wake-up per quantum: a sleep per record (10 us apart at 100K/s) costs
      // more CPU than the record, on a machine the broker shares.
      SleepUntil(std::max(due, now + kPaceQuantumNs));
      now = MonotonicNanos();
    }
    max_lag = std::max(max_lag, now - due);
    while (true) {
      Status st =
          producer->Produce(s.topic, kc::kAnyPartition, {}, payload,
                            static_cast<uint64_t>(MonotonicNanos()), kc::Producer::Value::kBorrow);
      if (st.ok()) break;
      if (st.code() != StatusCode::kResourceExhausted) {
        send_error = st;
        break;
      }
      std::this_thread::sleep_for(100us);
    }
  }
  const int64_t sent_end = MonotonicNanos();
  ::prctl(PR_SET_TIMERSLACK, old_slack > 0 ? old_slack : 50'000, 0, 0, 0);
  // Wait for the last reports while the poller serves them.
  auto deadline = std::chrono::steady_clock::now() + kFlushTimeout;
  while (send_error.ok()) {
    kc::ProducerCounters c = producer->counters();
    if (c.delivered + c.failed >= c.produced) break;
    if (std::chrono::steady_clock::now() > deadline) {
      send_error = AbortedError("latency: {} records still in flight after {} s",
                                c.produced - c.delivered - c.failed, kFlushTimeout.count());
      break;
    }
    std::this_thread::sleep_for(1ms);
  }
  stop.store(true, std::memory_order_release);
  poller.join();
  cpu.Finish(&r);
  RETURN_IF_ERROR(send_error);
  RETURN_IF_ERROR(first_failure);
  if (static_cast<int64_t>(latencies.size()) != n) {
    return InternalError("latency: {} of {} records reported delivered", latencies.size(), n);
  }
  // The rate actually held: records over the time it took to send them.
  r.records = n;
  r.bytes = n * s.record_size;
  r.seconds = static_cast<double>(std::max(sent_end - start, int64_t{1})) / 1e9;
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double q) {
    size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(latencies.size())));
    rank = std::clamp<size_t>(rank, 1, latencies.size());
    return static_cast<double>(latencies[rank - 1]) / 1e6;
  };
  double sum = 0;
  for (int64_t v : latencies) sum += static_cast<double>(v);
  r.p50_ms = pct(0.50);
  r.p99_ms = pct(0.99);
  r.p999_ms = pct(0.999);
  r.max_ms = static_cast<double>(latencies.back()) / 1e6;
  r.mean_ms = sum / static_cast<double>(latencies.size()) / 1e6;
  r.max_send_lag_ms = static_cast<double>(max_lag) / 1e6;
  if (!windows.empty()) {
    auto median = [&](double Window::*field) {
      std::vector<double> v;
      for (const Window& w : windows) v.push_back(w.*field);
      std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
      return v[v.size() / 2] / 1e3;
    };
    auto worst = [&](double Window::*field) {
      double m = 0;
      for (const Window& w : windows) m = std::max(m, w.*field);
      return m / 1e3;
    };
    r.rtt_p50_ms = median(&Window::rtt_p50);
    r.rtt_p99_ms = worst(&Window::rtt_p99);
    r.queue_p50_ms = median(&Window::queue_p50);
    r.queue_p99_ms = worst(&Window::queue_p99);
  }
  r.check = fmt::format("{} delivery reports, all OK; sends at most {:.2f} ms behind schedule",
                        Grouped(static_cast<uint64_t>(n)), *r.max_send_lag_ms);
  if (r.rtt_p99_ms) {
    r.check += fmt::format(
        "\n  latency, as librdkafka sees it ({} windows of 1 s): broker round trip p50 {:.2f} / "
        "p99 {:.2f} ms, records queued in the client p50 {:.2f} / p99 {:.2f} ms (median "
        "window's p50, worst window's p99)",
        windows.size(), *r.rtt_p50_ms, *r.rtt_p99_ms, *r.queue_p50_ms, *r.queue_p99_ms);
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// Options, output, and the run.

Status ParseConfigList(const std::vector<std::string>& items, std::string_view flag,
                       kc::Config* config) {
  for (const std::string& item : items) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError("{} wants NAME=VALUE, not '{}'", flag, item);
    }
    (*config)[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return Status::OK();
}

Result<Settings> MakeSettings(const KafkaBenchOptions& o, const std::string& bootstrap) {
  Settings s;
  s.bootstrap = bootstrap;
  s.partitions = o.partitions;
  // The transaction phases run 5 M so that produce_txn spans tens of commits.
  s.records = o.records > 0    ? o.records
              : o.quick        ? 100'000
              : o.transactions ? 5'000'000
                               : 1'000'000;
  s.record_size = o.record_size;
  s.latency_records =
      o.latency_records > 0 ? o.latency_records : o.latency_rate * (o.quick ? 1 : 5);
  s.iperf_seconds = o.iperf_seconds > 0 ? o.iperf_seconds : (o.quick ? 1 : 3);
  s.topic = o.topic.empty() ? fmt::format("sluice-bench-{}-{}", ::getpid(), WallMillis()) : o.topic;
  for (const std::string& phase : o.transactions ? std::vector<std::string>{} : o.phases) {
    if (phase == "produce") {
      s.produce = true;
    } else if (phase == "consume") {
      s.consume = true;
    } else if (phase == "latency") {
      s.latency = true;
    } else {
      return InvalidArgumentError("unknown phase '{}': use produce, consume or latency", phase);
    }
  }
  if (s.consume && !s.produce) {
    return InvalidArgumentError(
        "the consume phase reads what the produce phase wrote: "
        "run produce too");
  }
  if (!s.produce && !s.latency && !o.transactions) return InvalidArgumentError("no phase to run");

  // Tuned as kafka-producer-perf-test is usually run: batches up to 1 MB, a few ms of
  // linger, 32 MiB of records queued in the client (the Java producer's buffer.memory);
  // TCP_NODELAY as the Java client sets it.
  kc::Config common = {
      {"bootstrap.servers", bootstrap},
      {"socket.nagle.disable", "true"},
  };
  s.producer = common;
  s.producer["client.id"] = "sluice-bench-producer";
  s.producer["acks"] = o.acks;
  s.producer["compression.codec"] = o.compression;
  s.producer["linger.ms"] = "5";
  s.producer["batch.size"] = "1000000";
  s.producer["batch.num.messages"] = "100000";
  s.producer["queue.buffering.max.messages"] = "1000000";
  s.producer["queue.buffering.max.kbytes"] = "32768";
  RETURN_IF_ERROR(ParseConfigList(o.producer_config, "--producer-config", &s.producer));
  s.latency_producer = s.producer;
  s.latency_producer["client.id"] = "sluice-bench-latency";
  s.latency_producer["linger.ms"] = "1";
  s.latency_producer.emplace("statistics.interval.ms", "1000");  // a user's value wins
  // A user's explicit linger.ms wins in both phases.
  for (const std::string& item : o.producer_config) {
    if (item.rfind("linger.ms=", 0) == 0) s.latency_producer["linger.ms"] = item.substr(10);
  }

  // Fetch up to 512 KiB per partition (8 MiB per response with 16 partitions), up to
  // 50 MiB per request, and report each partition's end, so the bench knows when it has
  // read everything. 1 MiB per partition (librdkafka's default) cost the client about
  // 1.6 times the CPU per record here (bench/README.md).
  s.consumer = common;
  s.consumer["client.id"] = "sluice-bench-consumer";
  s.consumer["enable.partition.eof"] = "true";
  s.consumer["fetch.min.bytes"] = "1";
  s.consumer["fetch.wait.max.ms"] = "100";
  s.consumer["fetch.message.max.bytes"] = "524288";
  s.consumer["fetch.max.bytes"] = "52428800";
  s.consumer["queued.max.messages.kbytes"] = "262144";
  RETURN_IF_ERROR(ParseConfigList(o.consumer_config, "--consumer-config", &s.consumer));
  return s;
}

Status Validate(const KafkaBenchOptions& o) {
  if (o.partitions < 1 || o.partitions > 100'000) {
    return InvalidArgumentError("--partitions must be in [1, 100000], not {}", o.partitions);
  }
  if (o.records < 0) return InvalidArgumentError("--records must be positive, not {}", o.records);
  if (o.record_size < 1 || o.record_size > 900'000) {
    return InvalidArgumentError("--record-size must be in [1, 900000], not {}", o.record_size);
  }
  if (o.latency_rate < 1 || o.latency_rate > 10'000'000) {
    return InvalidArgumentError("--latency-rate must be in [1, 10000000], not {}", o.latency_rate);
  }
  if (o.latency_records < 0) {
    return InvalidArgumentError("--latency-records must be positive, not {}", o.latency_records);
  }
  if (o.iperf_seconds < 0 || o.iperf_seconds > 600) {
    return InvalidArgumentError("--iperf-seconds must be in [1, 600], not {}", o.iperf_seconds);
  }
  // Property errors now, not after the broker started and iperf3 ran.
  kc::Config producer = {{"acks", o.acks}, {"compression.codec", o.compression}};
  RETURN_IF_ERROR(ParseConfigList(o.producer_config, "--producer-config", &producer));
  RETURN_IF_ERROR(kc::CheckConfig(producer));
  kc::Config consumer;
  RETURN_IF_ERROR(ParseConfigList(o.consumer_config, "--consumer-config", &consumer));
  return kc::CheckConfig(consumer);
}

std::string Ms(const std::optional<double>& v) {
  return v ? fmt::format("{:.2f}", *v) : std::string("-");
}

void PrintHeader(const Settings& s, const KafkaBenchOptions& o, const MachineInfo& m, double load,
                 const BrokerProcess* broker, const Loopback& loopback) {
  fmt::print("sluice bench kafka\n");
  fmt::print("  machine   {}, {} cores, {} memory, {}; load average {:.2f} at the start\n",
             m.cpu_model, m.cores, FormatBinaryBytes(m.memory_bytes), m.kernel, load);
  if (broker != nullptr) {
    fmt::print("  broker    own: {} (pid {}), on {}; client and broker share the machine\n",
               broker->command(), broker->pid(), broker->address());
  } else {
    fmt::print("  broker    {} (--bootstrap)\n", s.bootstrap);
  }
  fmt::print("  client    librdkafka {} through kafka/client\n", kc::LibraryVersion());
  fmt::print("  topic     {}, {} partitions; {} B values, null keys; acks={}, compression {}\n",
             s.topic, s.partitions, s.record_size, o.transactions ? "all" : o.acks, o.compression);
  if (s.produce) {
    fmt::print(
        "  produce   {} records as fast as the producer takes them; linger.ms {}, "
        "batch.size {}; timed to the last delivery report\n",
        Grouped(static_cast<uint64_t>(s.records)), s.producer.at("linger.ms"),
        s.producer.at("batch.size"));
  }
  if (o.transactions) {
    fmt::print(
        "  txn       acks=all, enable.idempotence; produce_idempotent, then produce_txn with a "
        "transactional.id and a commit every {} ms; {} records each, linger.ms {}; then a "
        "read_committed consumer reads both back\n",
        o.commit_interval_ms, Grouped(static_cast<uint64_t>(s.records)),
        s.producer.at("linger.ms"));
  }
  if (s.consume) {
    fmt::print(
        "  consume   one consumer, every partition assigned from where the produce "
        "phase started (no group); fetch.max.bytes {}, {} per partition\n",
        s.consumer.at("fetch.max.bytes"), s.consumer.at("fetch.message.max.bytes"));
  }
  if (s.latency) {
    fmt::print(
        "  latency   {} records at {} records/s, each sent on schedule; linger.ms {}; "
        "Produce to delivery report\n",
        Grouped(static_cast<uint64_t>(s.latency_records)),
        Grouped(static_cast<uint64_t>(o.latency_rate)), s.latency_producer.at("linger.ms"));
  }
  if (loopback.mb_per_s) {
    fmt::print("  loopback  {:.1f} MB/s ({})\n", *loopback.mb_per_s, loopback.note);
  } else {
    fmt::print("  loopback  none: {}\n", loopback.note);
  }
  fmt::print(
      "  MB = 10^6 bytes of record values; % loop = MB/s / loopback MB/s; cpu s = CPU "
      "seconds in the phase of the bench process (the client) / the broker / the rest of "
      "the machine\n\n");
  fmt::print("{:<18} {:>11} {:>8} {:>7} {:>7} {:>8} {:>9} {:>7} {:>20} {:>8}\n", "phase",
             "records/s", "MB/s", "p50 ms", "p99 ms", "p99.9 ms", "loop MB/s", "% loop", "cpu s",
             "seconds");
  std::fflush(stdout);
}

void PrintRow(const PhaseResult& r, const Loopback& loopback) {
  std::string loop = loopback.mb_per_s ? fmt::format("{:.1f}", *loopback.mb_per_s) : "-";
  std::string pct = loopback.mb_per_s && *loopback.mb_per_s > 0
                        ? fmt::format("{:.1f}%", 100 * r.mb_per_s() / *loopback.mb_per_s)
                        : "-";
  auto secs = [](double v) { return v >= 0 ? fmt::format("{:.2f}", v) : std::string("-"); };
  std::string cpu =
      fmt::format("{} / {} / {}", secs(r.client_cpu), secs(r.broker_cpu), secs(r.other_cpu));
  fmt::print("{:<18} {:>11} {:>8.1f} {:>7} {:>7} {:>8} {:>9} {:>7} {:>20} {:>8.2f}\n", r.phase,
             Grouped(static_cast<uint64_t>(r.records_per_s() + 0.5)), r.mb_per_s(), Ms(r.p50_ms),
             Ms(r.p99_ms), Ms(r.p999_ms), loop, pct, cpu, r.seconds);
  std::fflush(stdout);
}

void PrintJson(const PhaseResult& r, const Settings& s, const KafkaBenchOptions& o,
               const MachineInfo& m, double load, const BrokerProcess* broker,
               const Loopback& loopback) {
  auto opt = [](const std::optional<double>& v) -> Json {
    return v ? Json(Round(*v, 3)) : Json(nullptr);
  };
  Json j;
  j["bench"] = "kafka";
  j["phase"] = r.phase;
  j["records"] = r.records;
  j["bytes"] = r.bytes;
  j["seconds"] = Round(r.seconds, 6);
  j["records_per_s"] = Round(r.records_per_s(), 1);
  j["mb_per_s"] = Round(r.mb_per_s(), 3);
  j["p50_ms"] = opt(r.p50_ms);
  j["p99_ms"] = opt(r.p99_ms);
  j["p999_ms"] = opt(r.p999_ms);
  j["max_ms"] = opt(r.max_ms);
  j["mean_ms"] = opt(r.mean_ms);
  j["target_rate"] = r.target_rate ? Json(*r.target_rate) : Json(nullptr);
  j["max_send_lag_ms"] = opt(r.max_send_lag_ms);
  j["rtt_p50_ms"] = opt(r.rtt_p50_ms);
  j["rtt_p99_ms"] = opt(r.rtt_p99_ms);
  j["client_queue_p50_ms"] = opt(r.queue_p50_ms);
  j["client_queue_p99_ms"] = opt(r.queue_p99_ms);
  j["loopback_mb_per_s"] = opt(loopback.mb_per_s);
  j["loopback_ratio"] = loopback.mb_per_s && *loopback.mb_per_s > 0
                            ? Json(Round(r.mb_per_s() / *loopback.mb_per_s, 4))
                            : Json(nullptr);
  j["loopback_note"] = loopback.note;
  j["client_cpu_seconds"] = Round(r.client_cpu, 3);
  j["broker_cpu_seconds"] = r.broker_cpu >= 0 ? Json(Round(r.broker_cpu, 3)) : Json(nullptr);
  j["other_cpu_seconds"] = r.other_cpu >= 0 ? Json(Round(r.other_cpu, 3)) : Json(nullptr);
  j["commits"] = r.commits >= 0 ? Json(r.commits) : Json(nullptr);
  j["txn_to_idempotent"] = opt(r.txn_ratio);
  j["commit_p50_ms"] = opt(r.commit_p50_ms);
  j["commit_max_ms"] = opt(r.commit_max_ms);
  j["commit_interval_ms"] = r.commits >= 0 ? Json(o.commit_interval_ms) : Json(nullptr);
  j["check"] = r.check;
  j["broker"] = broker != nullptr ? "own" : "external";
  j["bootstrap"] = s.bootstrap;
  j["topic"] = s.topic;
  j["partitions"] = s.partitions;
  j["record_size"] = s.record_size;
  j["acks"] = o.transactions ? "all" : o.acks;
  j["compression"] = o.compression;
  j["linger_ms"] =
      r.phase == "latency" ? s.latency_producer.at("linger.ms") : s.producer.at("linger.ms");
  j["librdkafka"] = kc::LibraryVersion();
  j["cpu"] = m.cpu_model;
  j["cores"] = m.cores;
  j["memory_bytes"] = m.memory_bytes;
  j["kernel"] = m.kernel;
  j["load_1m"] = Round(load, 2);
  fmt::print("{}\n", j.dump());
  std::fflush(stdout);
}

// Creates the topic unless it exists; returns its partition count.
Result<int> EnsureTopic(kc::Admin* admin, const Settings& s, bool* created) {
  Status st = admin->CreateTopic(s.topic, s.partitions, 1, {}, kAdminTimeout);
  *created = st.ok();
  if (!st.ok() && st.code() != StatusCode::kAlreadyExists) return st;
  // Metadata reaches the broker's answer a moment after creation on some brokers.
  Status last;
  for (int attempt = 0; attempt < 50; ++attempt) {
    Result<int> n = admin->PartitionCount(s.topic, kAdminTimeout);
    if (n.ok() && *n > 0) return *n;
    last = n.ok() ? NotFoundError("topic '{}' has no partitions yet", s.topic) : n.status();
    std::this_thread::sleep_for(100ms);
  }
  return last;
}

Result<std::vector<int64_t>> EndOffsets(kc::Admin* admin, const Settings& s) {
  std::vector<int64_t> ends;
  for (int p = 0; p < s.partitions; ++p) {
    ASSIGN_OR_RETURN(kc::Watermarks w, admin->QueryWatermarks(s.topic, p, kAdminTimeout));
    ends.push_back(w.high);
  }
  return ends;
}

// The phases against `bootstrap`; `broker` is the own broker or null.
Status RunPhases(const KafkaBenchOptions& o, const std::string& bootstrap,
                 const std::string& work_dir, BrokerProcess* broker) {
  ASSIGN_OR_RETURN(Settings s, MakeSettings(o, bootstrap));
  MachineInfo machine = GetMachineInfo();
  double load = LoadAverage1m();
  Progress progress;

  progress.Show(fmt::format("measuring loopback TCP with iperf3 for {} s ...", s.iperf_seconds));
  Loopback loopback = MeasureLoopback(work_dir, s.iperf_seconds);
  progress.Clear();

  ASSIGN_OR_RETURN(
      std::unique_ptr<kc::Admin> admin,
      kc::Admin::Create({{"bootstrap.servers", bootstrap}, {"client.id", "sluice-bench-admin"}}));
  bool created = false;
  int requested = s.partitions;
  Result<int> partitions = EnsureTopic(admin.get(), s, &created);
  if (!partitions.ok()) return partitions.status().WithContext(fmt::format("broker {}", bootstrap));
  s.partitions = *partitions;
  if (!created && s.partitions != requested && !o.json) {
    fmt::print(stderr, "sluice bench kafka: topic '{}' exists with {} partitions; using them\n",
               s.topic, s.partitions);
  }
  if (!o.json) PrintHeader(s, o, machine, load, broker, loopback);

  auto emit = [&](const PhaseResult& r) {
    if (o.json) {
      PrintJson(r, s, o, machine, load, broker, loopback);
    } else {
      PrintRow(r, loopback);
    }
  };
  auto with_broker = [&](Status st) {
    if (st.ok() || broker == nullptr) return st;
    Status dead = broker->CheckAlive();
    return dead.ok() ? st : Status(st.code(), st.message() + "\n" + dead.message());
  };

  std::vector<std::string> checks;
  Status status;
  if (o.transactions) {
    ASSIGN_OR_RETURN(std::vector<int64_t> start, EndOffsets(admin.get(), s));
    std::optional<PhaseResult> idempotent;
    for (bool transactional : {false, true}) {
      progress.Show(fmt::format("{}: {} records ...",
                                transactional ? "produce_txn" : "produce_idempotent",
                                Grouped(static_cast<uint64_t>(s.records))));
      Result<PhaseResult> produced = RunProduceTxn(s, transactional, o.commit_interval_ms, broker);
      progress.Clear();
      if (!produced.ok()) return with_broker(produced.status());
      if (!transactional) {
        idempotent = *produced;
      } else if (idempotent->records_per_s() > 0) {
        produced->txn_ratio = produced->records_per_s() / idempotent->records_per_s();
      }
      emit(*produced);
      checks.push_back(produced->phase + ": " + produced->check);
      if (produced->txn_ratio) {
        checks.push_back(fmt::format(
            "produce_txn ran at {:.2f}x the records/s of produce_idempotent; a commit blocked "
            "{} ms (median), {} ms at most",
            *produced->txn_ratio, Ms(produced->commit_p50_ms), Ms(produced->commit_max_ms)));
      }
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> end, EndOffsets(admin.get(), s));
    progress.Show("read_committed read-back ...");
    Result<std::string> committed = CheckCommitted(s, start, end, 2 * s.records);
    progress.Clear();
    if (!committed.ok()) return with_broker(committed.status());
    checks.push_back(*committed);
  }
  if (s.produce) {
    ASSIGN_OR_RETURN(std::vector<int64_t> start, EndOffsets(admin.get(), s));
    progress.Show(
        fmt::format("produce: {} records ...", Grouped(static_cast<uint64_t>(s.records))));
    Result<PhaseResult> produced = RunProduce(s, broker);
    progress.Clear();
    if (!produced.ok()) return with_broker(produced.status());
    emit(*produced);
    checks.push_back("produce: " + produced->check);
    if (s.consume) {
      ASSIGN_OR_RETURN(std::vector<int64_t> end, EndOffsets(admin.get(), s));
      int64_t in_range = 0;
      for (int p = 0; p < s.partitions; ++p) in_range += end[p] - start[p];
      if (in_range != s.records) {
        return InternalError(
            "the topic's end offsets moved by {} during the produce phase, "
            "for {} records produced (another producer on topic '{}'?)",
            in_range, s.records, s.topic);
      }
      progress.Show("consume ...");
      Result<PhaseResult> consumed = RunConsume(s, start, end, broker);
      progress.Clear();
      if (!consumed.ok()) return with_broker(consumed.status());
      emit(*consumed);
      checks.push_back("consume: " + consumed->check);
    }
  }
  if (s.latency) {
    progress.Show(fmt::format("latency: {} records at {}/s ...",
                              Grouped(static_cast<uint64_t>(s.latency_records)),
                              Grouped(static_cast<uint64_t>(o.latency_rate))));
    Result<PhaseResult> latency = RunLatency(s, o.latency_rate, broker);
    progress.Clear();
    if (!latency.ok()) return with_broker(latency.status());
    emit(*latency);
    checks.push_back("latency: " + latency->check);
  }
  if (!o.json) {
    fmt::print("\n");
    for (const std::string& c : checks) fmt::print("  {}\n", c);
  }
  if (created && o.topic.empty() && broker == nullptr) {
    // A name the bench made up on someone else's broker: leave nothing behind.
    Status st = admin->DeleteTopic(s.topic, kAdminTimeout);
    if (!st.ok()) fmt::print(stderr, "sluice bench kafka: {}\n", st.ToString());
  }
  return Status::OK();
}

// The load generator's allocator. librdkafka allocates a buffer per produce request
// (batches up to 1 MB) and a message per record; glibc by default serves the big ones
// with mmap and hands freed memory back to the kernel (munmap, and madvise in thread
// arenas), so each request faults in fresh pages. Profiles of the produce phase showed
// a quarter of the client's time in those page faults. Keeping freed memory for reuse
// makes the bench cheaper, which matters when it shares the cores with the broker.
void TuneAllocator() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

Status Run(const KafkaBenchOptions& o) {
  RETURN_IF_ERROR(Validate(o));
  if (std::getenv("SLUICE_BENCH_NO_MALLOPT") == nullptr) TuneAllocator();
  ASSIGN_OR_RETURN(std::unique_ptr<WorkDir> work, WorkDir::Create(o.data_dir, "kafka"));
  if (!o.bootstrap.empty()) return RunPhases(o, o.bootstrap, work->path(), nullptr);
  ASSIGN_OR_RETURN(std::unique_ptr<BrokerProcess> broker,
                   BrokerProcess::Start(o.sluice_binary, work->path() + "/data", work->path()));
  Status st = RunPhases(o, broker->address(), work->path(), broker.get());
  Status stopped = broker->Stop();
  if (!st.ok()) return st;
  if (!stopped.ok()) return stopped;
  if (!o.json) fmt::print("  broker: stopped by SIGTERM, exit status 0\n");
  return Status::OK();
}

Status Demo(const KafkaBenchOptions& options) {
  KafkaBenchOptions o = options;
  o.quick = true;
  if (o.topic.empty()) o.topic = "demo";
  RETURN_IF_ERROR(Validate(o));
  ASSIGN_OR_RETURN(std::unique_ptr<WorkDir> work, WorkDir::Create(o.data_dir, "kafka"));
  std::string data = work->path() + "/data";
  fmt::print(
      "sluice demo: the Kafka-compatible broker, driven by a real Kafka client "
      "(librdkafka {}).\n\n",
      kc::LibraryVersion());
  fmt::print("[1/4] starting the broker on a free loopback port, data in {}\n", data);
  std::fflush(stdout);
  ASSIGN_OR_RETURN(std::unique_ptr<BrokerProcess> broker,
                   BrokerProcess::Start(o.sluice_binary, data, work->path()));
  fmt::print("      $ {}\n      serving Kafka on {} (pid {})\n\n", broker->command(),
             broker->address(), broker->pid());
  o.bootstrap = broker->address();
  fmt::print(
      "[2/4] $ sluice bench kafka --bootstrap {} --quick --topic {}\n"
      "      creates topic '{}' ({} partitions), produces {} records of {} B, consumes "
      "them back and checks every one,\n      then holds {} records/s for 1 s to "
      "measure produce latency\n\n",
      o.bootstrap, o.topic, o.topic, o.partitions,
      Grouped(o.records > 0 ? static_cast<uint64_t>(o.records) : 100'000), o.record_size,
      Grouped(static_cast<uint64_t>(o.latency_rate)));
  std::fflush(stdout);
  Status st = RunPhases(o, o.bootstrap, work->path(), broker.get());
  if (!st.ok()) {
    Status dead = broker->CheckAlive();
    return dead.ok() ? st : Status(st.code(), st.message() + "\n" + dead.message());
  }

  fmt::print("\n[3/4] what the broker holds now (ListOffsets per partition)\n");
  ASSIGN_OR_RETURN(std::unique_ptr<kc::Admin> admin,
                   kc::Admin::Create({{"bootstrap.servers", o.bootstrap}}));
  ASSIGN_OR_RETURN(int partitions, admin->PartitionCount(o.topic, kAdminTimeout));
  int64_t total = 0, low = -1, high = 0;
  for (int p = 0; p < partitions; ++p) {
    ASSIGN_OR_RETURN(kc::Watermarks w, admin->QueryWatermarks(o.topic, p, kAdminTimeout));
    total += w.high - w.low;
    low = low < 0 ? w.high - w.low : std::min(low, w.high - w.low);
    high = std::max(high, w.high - w.low);
  }
  admin.reset();
  fmt::print(
      "      topic '{}': {} partitions, {} records (between {} and {} per partition; the "
      "producer's\n      partitioner picks them): the produce phase's, {} warm-up records "
      "and the latency phase's\n\n",
      o.topic, partitions, Grouped(static_cast<uint64_t>(total)),
      Grouped(static_cast<uint64_t>(low)), Grouped(static_cast<uint64_t>(high)),
      Grouped(kWarmupRecords));

  fmt::print("[4/4] stopping the broker: SIGTERM to pid {}\n", broker->pid());
  std::fflush(stdout);
  RETURN_IF_ERROR(broker->Stop());
  std::string removed = work->path();
  work.reset();
  fmt::print("      it flushed its logs and exited with status 0; removed {}\n\n", removed);
  fmt::print("The full-size run is `sluice bench kafka` (figures in docs/benchmarks.md).\n");
  return Status::OK();
}

int Guarded(Status (*fn)(const KafkaBenchOptions&), const KafkaBenchOptions& o,
            std::string_view what) {
  try {
    Status st = fn(o);
    if (!st.ok()) {
      std::fflush(stdout);
      fmt::print(stderr, "{}: {}\n", what, st.ToString());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {  // bad_alloc, filesystem or thread errors
    std::fflush(stdout);
    fmt::print(stderr, "{}: {}\n", what, e.what());
    return 1;
  }
}

}  // namespace

int RunKafkaBench(const KafkaBenchOptions& options) {
  return Guarded(Run, options, "sluice bench kafka");
}

int RunKafkaDemo(const KafkaBenchOptions& options) { return Guarded(Demo, options, "sluice demo"); }

}  // namespace sluice::bench
