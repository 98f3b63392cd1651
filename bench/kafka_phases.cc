// The phases of `sluice bench kafka` and what they share (kafka_phases.h): the broker
// child process, the loopback reference, the clients' settings, the produce, consume,
// latency and transaction phases, CPU per phase and the JSON of a phase.
#include "bench/kafka_phases.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
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

namespace sluice::bench::kafka_phases {
namespace {

namespace fs = std::filesystem;
namespace kc = kafka::client;
using namespace std::chrono_literals;

constexpr auto kBrokerStartTimeout = 30s;
constexpr auto kBrokerStopTimeout = 30s;
constexpr auto kTxnTimeout = 60s;            // each transactional call
constexpr auto kConsumeStallTimeout = 30s;   // no record for this long = stuck
constexpr int64_t kPaceQuantumNs = 100'000;  // latency phase: shortest sleep between sends

}  // namespace

double SelfCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

namespace {

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

}  // namespace

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

std::string ResolveBinary(const std::string& binary) {
  if (binary != "/proc/self/exe") return binary;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? binary : self.string();
}

// ---------------------------------------------------------------------------------------
// The broker child process.

Result<std::unique_ptr<BrokerProcess>> BrokerProcess::Start(const std::string& binary,
                                                            const std::string& data_dir,
                                                            const std::string& log_prefix,
                                                            std::vector<std::string> serve_args) {
  std::unique_ptr<BrokerProcess> b(new BrokerProcess());
  b->data_dir_ = data_dir;
  if (serve_args.empty()) {
    serve_args = {"--kafka-addr",
                  "127.0.0.1:0",
                  "--http-addr",
                  "127.0.0.1:0",
                  "--pg-addr",
                  "127.0.0.1:0",
                  "--schema-registry-addr",
                  "off"};
  }
  std::vector<std::string> args = {ResolveBinary(binary), "serve", "--data-dir", data_dir};
  args.insert(args.end(), serve_args.begin(), serve_args.end());
  // It prints "sluice: serving Kafka on HOST:PORT (...)" once it listens.
  ASSIGN_OR_RETURN(b->child_, ListeningChild::Start("sluice serve", std::move(args), log_prefix,
                                                    "sluice: serving Kafka on ", false,
                                                    kBrokerStartTimeout, kBrokerStopTimeout));
  return b;
}

std::string BrokerProcess::command() const {
  std::string s;
  for (const std::string& a : child_->args()) s += (s.empty() ? "" : " ") + a;
  return s;
}

// ---------------------------------------------------------------------------------------
// The loopback reference: one TCP stream through iperf3 on 127.0.0.1.

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

namespace {

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

}  // namespace

CpuMeter::CpuMeter(ServerPids servers)
    : servers_(std::move(servers)),
      self_(SelfCpuSeconds()),
      etcd_start_(servers_.etcd > 0 ? ProcessCpuSeconds(servers_.etcd) : -1),
      machine_start_(MachineBusySeconds()) {
  for (pid_t pid : servers_.brokers) broker_start_.push_back(pid > 0 ? ProcessCpuSeconds(pid) : -1);
}

void CpuMeter::Finish(PhaseResult* r) const {
  r->client_cpu = SelfCpuSeconds() - self_;
  double servers = 0;
  if (!servers_.brokers.empty()) {
    r->broker_cpu = 0;
    r->broker_cpu_each.clear();
    for (size_t i = 0; i < servers_.brokers.size(); ++i) {
      double now = servers_.brokers[i] > 0 ? ProcessCpuSeconds(servers_.brokers[i]) : -1;
      double used = now >= 0 && broker_start_[i] >= 0 ? now - broker_start_[i] : 0;
      r->broker_cpu_each.push_back(used);
      r->broker_cpu += used;
    }
    servers += r->broker_cpu;
  }
  if (servers_.etcd > 0 && etcd_start_ >= 0) {
    double now = ProcessCpuSeconds(servers_.etcd);
    if (now >= 0) r->etcd_cpu = now - etcd_start_;
    servers += std::max(0.0, r->etcd_cpu);
  }
  double machine = MachineBusySeconds();
  if (machine_start_ >= 0 && machine >= 0) {
    r->other_cpu = std::max(0.0, machine - machine_start_ - r->client_cpu - servers);
  }
}

// A value of `size` printable bytes, the same for every record (as the perf tests do).
std::string MakePayload(int size) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> letter('a', 'z');
  std::string s(static_cast<size_t>(size), 'x');
  for (char& c : s) c = static_cast<char>(letter(rng));
  return s;
}

// Enqueues one record of `payload` (borrowed) for `partition` of `topic`, serving
// delivery reports while the client's queue is full.
Status ProduceRecord(kc::Producer& producer, const std::string& topic, const std::string& payload,
                     int32_t partition) {
  while (true) {
    Status st = producer.Produce(topic, partition, {}, payload, 0, kc::Producer::Value::kBorrow);
    if (st.ok()) return st;
    if (st.code() != StatusCode::kResourceExhausted) return st;
    producer.Poll(1ms);  // the local queue is full: let deliveries drain it
  }
}

// Produces `n` records as fast as the producer takes them, then waits for every
// delivery report. Timed from the first Produce to the last report.
Result<PhaseResult> RunProduce(const Settings& s, const ServerPids& servers) {
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
  CpuMeter cpu(servers);
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
// records arrive, in offset order, with the expected value size. With
// s.consume_min_seconds, each partition at its end is sought back to its start at once,
// on its own, and the phase ends once every partition was read whole and that long has
// passed: all partitions stay busy to the end, however uneven their sizes (a sticky
// partitioner's are), and the rate is never that of the largest one's tail alone.
Result<PhaseResult> RunConsume(const Settings& s, const std::vector<int64_t>& start,
                               const std::vector<int64_t>& end, const ServerPids& servers) {
  int64_t expected = 0;
  for (int p = 0; p < s.partitions; ++p) expected += end[p] - start[p];
  ASSIGN_OR_RETURN(std::unique_ptr<kc::Consumer> consumer, kc::Consumer::Create(s.consumer));
  std::vector<kc::TopicPartition> assignment;
  for (int p = 0; p < s.partitions; ++p) assignment.push_back({s.topic, p, start[p]});
  const auto n = static_cast<size_t>(s.partitions);
  std::vector<int64_t> next = start;
  // Per partition: whole passes read, and whether its last seek back is still to show
  // (records of the old position, fetched before the seek, may still come: skipped).
  std::vector<int64_t> whole(n, 0);
  std::vector<bool> reseeked(n, false);
  int unread = 0;  // partitions not yet read whole once
  for (size_t p = 0; p < n; ++p) {
    if (next[p] < end[p]) {
      ++unread;
    } else {
      whole[p] = 1;  // nothing to read
    }
  }

  PhaseResult r;
  r.phase = "consume";
  CpuMeter cpu(servers);
  int64_t begin = MonotonicNanos();
  int64_t last_progress = begin;
  int64_t stall_ns = std::chrono::nanoseconds(kConsumeStallTimeout).count();
  const auto min_ns = static_cast<int64_t>(s.consume_min_seconds * 1e9);
  int64_t seeks = 0, seek_ns = 0;
  RETURN_IF_ERROR(consumer->Assign(assignment));
  while (unread > 0 || MonotonicNanos() - begin < min_ns) {
    ASSIGN_OR_RETURN(kc::MessageBatch batch, consumer->Poll(100ms, 10'000));
    if (!batch.errors().empty()) return batch.errors().front();
    for (size_t i = 0; i < batch.size(); ++i) {
      kc::Message m = batch[i];
      int p = m.partition;
      if (p < 0 || p >= s.partitions) return InternalError("consume: record from partition {}", p);
      const auto pi = static_cast<size_t>(p);
      if (reseeked[pi]) {
        if (m.offset != start[pi]) continue;  // fetched before the seek back
        reseeked[pi] = false;
      }
      if (next[pi] >= end[pi]) continue;  // written after the produce phase: not ours
      if (m.offset != next[pi]) {
        return InternalError("consume: partition {}: offset {} where {} was next", p, m.offset,
                             next[pi]);
      }
      if (m.value.size() != static_cast<size_t>(s.record_size)) {
        return InternalError("consume: partition {} offset {}: {} value bytes, not {}", p, m.offset,
                             m.value.size(), s.record_size);
      }
      ++r.records;
      r.bytes += static_cast<int64_t>(m.value.size());
      if (++next[pi] < end[pi]) continue;
      if (++whole[pi] == 1) --unread;
      if (min_ns > 0) {
        const int64_t seek_start = MonotonicNanos();
        RETURN_IF_ERROR(consumer->Seek({{s.topic, p, start[pi]}}, 10s));
        seek_ns += MonotonicNanos() - seek_start;
        ++seeks;
        next[pi] = start[pi];
        reseeked[pi] = true;
      }
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
  int64_t want = 0;
  int64_t fewest = INT64_MAX;
  for (size_t p = 0; p < n; ++p) {
    want += whole[p] * (end[p] - start[p]) + (next[p] < end[p] ? next[p] - start[p] : 0);
    fewest = std::min(fewest, whole[p]);
  }
  if (fewest == INT64_MAX) fewest = 1;
  r.passes = static_cast<int>(fewest);
  if (r.records != want) {
    return InternalError("consume: read {} records, expected {} over the partitions' passes",
                         r.records, want);
  }
  r.check = fmt::format("{} records read back, every one of {} partitions up to its end offset",
                        Grouped(static_cast<uint64_t>(expected)), s.partitions);
  if (r.records > expected) {
    r.check += fmt::format(
        ", then again from the start until {:.0f} s ({} records in all, each partition whole {} "
        "times or more; {} seeks back, {:.2f} s in them)",
        s.consume_min_seconds, Grouped(static_cast<uint64_t>(r.records)), fewest, seeks,
        static_cast<double>(seek_ns) / 1e9);
  }
  return r;
}

namespace {

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

}  // namespace

// produce_idempotent (transactional false) or produce_txn: `s.records` records as fast as
// the producer takes them; produce_txn commits every `commit_interval_ms` and at the end.
// Timed from the first Produce to the last delivery report (idempotent) or the last
// commit (transactional).
Result<PhaseResult> RunProduceTxn(const Settings& s, bool transactional, int commit_interval_ms,
                                  const ServerPids& servers) {
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
  CpuMeter cpu(servers);
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
Result<PhaseResult> RunLatency(const Settings& s, int64_t rate, const ServerPids& servers) {
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
  CpuMeter cpu(servers);
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

Result<Settings> MakeSettings(const KafkaBenchOptions& o, const std::string& bootstrap,
                              const kc::Config& security) {
  Settings s;
  s.bootstrap = bootstrap;
  s.security = security;
  s.partitions = o.partitions;
  // 5 M, so that a produce phase lasts seconds, not the 0.3-1.5 s whose ratios (acks=all
  // to acks=1, cluster to single broker) were noise, and produce_txn spans tens of commits.
  s.records = o.records > 0 ? o.records : o.quick ? 100'000 : 5'000'000;
  s.record_size = o.record_size;
  s.latency_rate = o.latency_rate > 0 ? o.latency_rate : o.cluster > 0 ? 20'000 : 100'000;
  s.latency_records =
      o.latency_records > 0 ? o.latency_records : s.latency_rate * (o.quick ? 1 : 5);
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
  for (const auto& [k, v] : security) common[k] = v;
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
  if (o.partitions_list.empty() || o.acks_list.empty()) {
    return InvalidArgumentError("--partitions and --acks need at least one value");
  }
  for (size_t i = 0; i < o.partitions_list.size(); ++i) {
    const int n = o.partitions_list[i];
    if (n < 1 || n > 100'000) {
      return InvalidArgumentError("--partitions must be in [1, 100000], not {}", n);
    }
    if (std::find(o.partitions_list.begin(), o.partitions_list.begin() + i, n) !=
        o.partitions_list.begin() + i) {
      return InvalidArgumentError("--partitions names {} twice", n);
    }
  }
  for (size_t i = 0; i < o.acks_list.size(); ++i) {
    const std::string& a = o.acks_list[i];
    if (a != "0" && a != "1" && a != "all" && a != "-1") {
      return InvalidArgumentError("--acks must be 0, 1 or all (-1), not '{}'", a);
    }
    if (std::find(o.acks_list.begin(), o.acks_list.begin() + i, a) != o.acks_list.begin() + i) {
      return InvalidArgumentError("--acks names {} twice", a);
    }
  }
  if (o.records < 0) return InvalidArgumentError("--records must be positive, not {}", o.records);
  if (o.record_size < 1 || o.record_size > 900'000) {
    return InvalidArgumentError("--record-size must be in [1, 900000], not {}", o.record_size);
  }
  if (o.latency_rate < 0 || o.latency_rate > 10'000'000) {
    return InvalidArgumentError("--latency-rate must be in [1, 10000000], not {}", o.latency_rate);
  }
  if (o.latency_records < 0) {
    return InvalidArgumentError("--latency-records must be positive, not {}", o.latency_records);
  }
  if (o.iperf_seconds < 0 || o.iperf_seconds > 600) {
    return InvalidArgumentError("--iperf-seconds must be in [1, 600], not {}", o.iperf_seconds);
  }
  // Property errors now, not after the broker started and iperf3 ran.
  for (const std::string& acks : o.acks_list) {
    kc::Config producer = {{"acks", acks}, {"compression.codec", o.compression}};
    RETURN_IF_ERROR(ParseConfigList(o.producer_config, "--producer-config", &producer));
    RETURN_IF_ERROR(kc::CheckConfig(producer));
  }
  kc::Config consumer;
  RETURN_IF_ERROR(ParseConfigList(o.consumer_config, "--consumer-config", &consumer));
  return kc::CheckConfig(consumer);
}

std::string Ms(const std::optional<double>& v) {
  return v ? fmt::format("{:.2f}", *v) : std::string("-");
}

void PrintColumns() {
  fmt::print("{:<18} {:>11} {:>8} {:>7} {:>7} {:>8} {:>9} {:>7} {:>20} {:>10} {:>8}\n", "phase",
             "records/s", "MB/s", "p50 ms", "p99 ms", "p99.9 ms", "loop MB/s", "% loop", "cpu s",
             "broker s/M", "seconds");
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
  const double per_million = r.broker_cpu_per_million();
  // Produce and latency rows name their acks (consume reads what the first produce wrote).
  const std::string phase =
      r.acks.empty() || r.phase == "consume" || r.phase.starts_with("produce_")
          ? r.phase
          : fmt::format("{} acks={}", r.phase, r.acks);
  fmt::print("{:<18} {:>11} {:>8.1f} {:>7} {:>7} {:>8} {:>9} {:>7} {:>20} {:>10} {:>8.2f}\n", phase,
             Grouped(static_cast<uint64_t>(r.records_per_s() + 0.5)), r.mb_per_s(), Ms(r.p50_ms),
             Ms(r.p99_ms), Ms(r.p999_ms), loop, pct, cpu,
             per_million >= 0 ? fmt::format("{:.3f}", per_million) : std::string("-"), r.seconds);
  std::fflush(stdout);
}

Json PhaseJson(const PhaseResult& r, const Settings& s, const KafkaBenchOptions& o,
               const MachineInfo& m, double load, std::string_view broker, int brokers,
               int replication_factor, std::string_view acks, const Loopback& loopback) {
  auto opt = [](const std::optional<double>& v) -> Json {
    return v ? Json(Round(*v, 3)) : Json(nullptr);
  };
  Json j;
  j["bench"] = "kafka";
  j["phase"] = r.phase;
  j["tls"] = !s.security.empty();
  if (!s.tls_label.empty()) j["tls_setup"] = s.tls_label;
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
  j["broker_cpu_s_per_million"] =
      r.broker_cpu_per_million() >= 0 ? Json(Round(r.broker_cpu_per_million(), 4)) : Json(nullptr);
  if (!r.broker_cpu_each.empty()) {
    Json each = Json::array();
    for (double v : r.broker_cpu_each) each.push_back(Round(v, 3));
    j["broker_cpu_seconds_each"] = each;
  }
  if (r.etcd_cpu >= 0) j["etcd_cpu_seconds"] = Round(r.etcd_cpu, 3);
  j["other_cpu_seconds"] = r.other_cpu >= 0 ? Json(Round(r.other_cpu, 3)) : Json(nullptr);
  j["passes"] = r.passes > 0 ? Json(r.passes) : Json(nullptr);
  j["commits"] = r.commits >= 0 ? Json(r.commits) : Json(nullptr);
  j["txn_to_idempotent"] = opt(r.txn_ratio);
  j["commit_p50_ms"] = opt(r.commit_p50_ms);
  j["commit_max_ms"] = opt(r.commit_max_ms);
  j["commit_interval_ms"] = r.commits >= 0 ? Json(o.commit_interval_ms) : Json(nullptr);
  j["check"] = r.check;
  j["broker"] = broker;
  j["brokers"] = brokers > 0 ? Json(brokers) : Json(nullptr);
  j["replication_factor"] = replication_factor > 0 ? Json(replication_factor) : Json(nullptr);
  j["bootstrap"] = s.bootstrap;
  j["topic"] = s.topic;
  j["partitions"] = s.partitions;
  j["record_size"] = s.record_size;
  j["acks"] = acks;
  j["compression"] = o.compression;
  j["linger_ms"] =
      r.phase == "latency" ? s.latency_producer.at("linger.ms") : s.producer.at("linger.ms");
  j["librdkafka"] = kc::LibraryVersion();
  j["cpu"] = m.cpu_model;
  j["cores"] = m.cores;
  j["memory_bytes"] = m.memory_bytes;
  j["kernel"] = m.kernel;
  j["load_1m"] = Round(load, 2);
  return j;
}

Result<int> EnsureTopic(kc::Admin* admin, const Settings& s, bool* created, int replication_factor,
                        const kc::Config& topic_config) {
  Status st =
      admin->CreateTopic(s.topic, s.partitions, replication_factor, topic_config, kAdminTimeout);
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
}  // namespace sluice::bench::kafka_phases
