// `sluice bench kafka --cluster N` (kafka_cluster_bench.h): etcd and N brokers as child
// processes, the single-broker reference, the replicated phases, the failover phase and
// the idle replicas. The produce / consume / latency phases are kafka_phases.cc's.
#include "bench/kafka_cluster_bench.h"

#include <dirent.h>
#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "bench/bench_util.h"
#include "bench/child_process.h"
#include "bench/kafka_phases.h"
#include "bench/machine_info.h"
#include "cluster/cluster_values.h"
#include "cluster/etcd_client.h"
#include "kafka/client/admin.h"
#include "kafka/client/producer.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
namespace kc = kafka::client;
using namespace std::chrono_literals;
using namespace kafka_phases;

constexpr int kReplicationFactor = 3;
constexpr int kMinInsyncReplicas = 2;
constexpr auto kEtcdStartTimeout = 30s;
constexpr auto kReadyTimeout = 120s;       // a topic's leaders elected and every ISR full
constexpr auto kFailoverTimeout = 60s;     // a kill to the first write acknowledged after it
constexpr auto kIdleCreateTimeout = 300s;  // CreateTopics of the idle partitions
constexpr auto kPollInterval = 10ms;       // etcd read while waiting for an election

// The consume phases (single broker and cluster alike) read the produced records pass
// after pass for this long: one pass of a million records takes 0.5-1 s, mostly the
// consumer's start, and its ratio moved from 0.47 to 1.95 between runs (0018, dupfix).
double ConsumeMinSeconds(const KafkaBenchOptions& o) { return o.quick ? 1.0 : 5.0; }

double SecondsSince(int64_t start_ns) {
  return static_cast<double>(MonotonicNanos() - start_ns) / 1e9;
}

// ---------------------------------------------------------------------------------------
// A process's resident memory and open file descriptors.

// VmRSS from /proc/<pid>/status in bytes, or -1.
int64_t RssBytes(pid_t pid) {
  std::istringstream in(ReadFile(fmt::format("/proc/{}/status", pid)));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return -1;
}

// Entries of /proc/<pid>/fd, or -1.
int64_t OpenFds(pid_t pid) {
  DIR* dir = ::opendir(fmt::format("/proc/{}/fd", pid).c_str());
  if (dir == nullptr) return -1;
  int64_t n = 0;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n;
}

// ---------------------------------------------------------------------------------------
// etcd: one member on loopback ports, its data on tmpfs (etcd 3.4 cannot skip fsync).
// Lifecycle: Start (waits until it answers), destroyed (SIGKILL, data removed). Owned by
// the bench's thread; its client may be used from any thread.

class EtcdProcess {
 public:
  static Result<std::unique_ptr<EtcdProcess>> Start(const std::string& binary,
                                                    const std::string& log_path) {
    std::unique_ptr<EtcdProcess> e(new EtcdProcess());
    std::string tmpl = "/dev/shm/sluice-bench-etcd-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return ErrnoError("mkdtemp", "/dev/shm (tmpfs for etcd's data)", errno);
    }
    e->data_dir_ = tmpl;
    ASSIGN_OR_RETURN(int client_port, FreeLoopbackPort());
    ASSIGN_OR_RETURN(int peer_port, FreeLoopbackPort());
    e->endpoint_ = fmt::format("http://127.0.0.1:{}", client_port);
    std::string peer = fmt::format("http://127.0.0.1:{}", peer_port);
    e->args_ = {binary,
                "--name=bench",
                "--data-dir=" + e->data_dir_ + "/bench",
                "--listen-client-urls=" + e->endpoint_,
                "--advertise-client-urls=" + e->endpoint_,
                "--listen-peer-urls=" + peer,
                "--initial-advertise-peer-urls=" + peer,
                "--initial-cluster=bench=" + peer,
                "--initial-cluster-state=new",
                "--initial-cluster-token=" + fs::path(e->data_dir_).filename().string(),
                "--logger=zap",
                "--log-outputs=stderr",
                "--log-level=warn"};
    e->log_ = log_path;
    ASSIGN_OR_RETURN(e->pid_, Spawn(e->args_, log_path, log_path));
    ASSIGN_OR_RETURN(e->client_, cluster::EtcdClient::Create({.endpoints = {e->endpoint_},
                                                              .request_timeout_ms = 1000,
                                                              .call_timeout_ms = 2000}));
    auto deadline = std::chrono::steady_clock::now() + kEtcdStartTimeout;
    while (true) {
      Result<cluster::StatusResponse> st = e->client_->Status();
      if (st.ok() && st->leader != 0) {
        e->version_ = st->version;
        return e;
      }
      if (std::optional<int> ended = WaitFor(e->pid_, 0ms)) {
        e->pid_ = -1;
        return IOError("etcd {} at start; its log:\n{}", DescribeWaitStatus(*ended),
                       Tail(log_path, 20));
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return IOError("etcd did not answer at {} within {} s; its log:\n{}", e->endpoint_,
                       kEtcdStartTimeout.count(), Tail(log_path, 20));
      }
      std::this_thread::sleep_for(50ms);
    }
  }

  ~EtcdProcess() {
    client_.reset();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      WaitFor(pid_, 5s);
    }
    std::error_code ec;
    if (!data_dir_.empty()) fs::remove_all(data_dir_, ec);
  }
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  cluster::EtcdClient& client() { return *client_; }
  const std::string& endpoint() const { return endpoint_; }
  const std::string& version() const { return version_; }
  pid_t pid() const { return pid_; }
  std::string command() const {
    std::string s;
    for (const std::string& a : args_) s += (s.empty() ? "" : " ") + a;
    return s;
  }

 private:
  EtcdProcess() = default;
  pid_t pid_ = -1;
  std::string data_dir_, endpoint_, log_, version_;
  std::vector<std::string> args_;
  std::unique_ptr<cluster::EtcdClient> client_;
};

// ---------------------------------------------------------------------------------------
// The cluster: etcd and the brokers, node ids 1..N, each on a fixed loopback port (a
// cluster broker registers its address) that is also its inter-broker address. Owned by
// the bench's thread.

class Cluster {
 public:
  static Result<std::unique_ptr<Cluster>> Start(const KafkaBenchOptions& o,
                                                const std::string& work_dir) {
    std::unique_ptr<Cluster> c(new Cluster());
    c->binary_ = ResolveBinary(o.sluice_binary);
    c->work_dir_ = work_dir;
    ASSIGN_OR_RETURN(c->etcd_, EtcdProcess::Start(o.etcd_binary, work_dir + "/etcd.log"));
    c->config_path_ = work_dir + "/cluster.yaml";
    std::string config = fmt::format("cluster:\n  session_timeout: {}ms\n", o.session_timeout_ms);
    RETURN_IF_ERROR(WriteFile(c->config_path_, config));
    for (int i = 0; i < o.cluster; ++i) {
      Node n;
      n.id = i + 1;
      ASSIGN_OR_RETURN(int port, FreeLoopbackPort());
      n.address = fmt::format("127.0.0.1:{}", port);
      n.data_dir = fmt::format("{}/broker-{}", work_dir, n.id);
      c->nodes_.push_back(std::move(n));
    }
    for (size_t i = 0; i < c->nodes_.size(); ++i) RETURN_IF_ERROR(c->StartNode(i));
    return c;
  }

  // Stops every broker with SIGTERM (each must exit with status 0), then etcd.
  Status Stop() {
    Status first;
    for (Node& n : nodes_) {
      if (n.process == nullptr) continue;
      Status st = n.process->Stop();
      n.process.reset();
      if (!st.ok() && first.ok()) first = st.WithContext(fmt::format("broker {}", n.id));
    }
    etcd_.reset();
    return first;
  }

  Status StartNode(size_t i) {
    Node& n = nodes_[i];
    ++n.runs;
    std::vector<std::string> args = {"--kafka-addr",
                                     n.address,
                                     "--http-addr",
                                     "off",
                                     "--pg-addr",
                                     "off",
                                     "--schema-registry-addr",
                                     "off",
                                     "--node-id",
                                     std::to_string(n.id),
                                     "--etcd",
                                     etcd_->endpoint(),
                                     "--inter-broker-addr",
                                     n.address,
                                     "--config",
                                     config_path_};
    ASSIGN_OR_RETURN(n.process,
                     BrokerProcess::Start(binary_, n.data_dir,
                                          fmt::format("{}/broker-{}.{}", work_dir_, n.id, n.runs),
                                          std::move(args)));
    return Status::OK();
  }

  // The log (stderr) of node `id`'s current run, or "" while it is down.
  std::string LogPathOf(int32_t id) const {
    std::optional<size_t> i = IndexOf(id);
    if (!i || nodes_[*i].process == nullptr) return "";
    return nodes_[*i].process->err_path();
  }

  // SIGKILL, reaped before it returns.
  void KillNode(size_t i) { nodes_[i].process.reset(); }

  // Dead brokers named with their logs, or OK.
  Status CheckAlive() {
    for (Node& n : nodes_) {
      if (n.process == nullptr) continue;
      Status st = n.process->CheckAlive();
      if (!st.ok()) return st.WithContext(fmt::format("broker {}", n.id));
    }
    return Status::OK();
  }

  std::optional<size_t> IndexOf(int32_t node) const {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].id == node) return i;
    }
    return std::nullopt;
  }

  std::string Bootstrap() const {
    std::string s;
    for (const Node& n : nodes_) s += (s.empty() ? "" : ",") + n.address;
    return s;
  }

  ServerPids Pids() const {
    ServerPids p;
    for (const Node& n : nodes_) p.brokers.push_back(n.process ? n.process->pid() : -1);
    p.etcd = etcd_->pid();
    return p;
  }

  // Every partition's state in etcd, by partition number.
  Result<std::map<int32_t, cluster::PartitionState>> Partitions(const std::string& topic) {
    ASSIGN_OR_RETURN(cluster::RangeResponse r,
                     etcd_->client().RangePrefix(layout_.PartitionsOf(topic)));
    std::map<int32_t, cluster::PartitionState> out;
    for (const cluster::KeyValue& kv : r.kvs) {
      std::optional<std::pair<std::string, int32_t>> key = layout_.PartitionOf(kv.key);
      if (!key || key->first != topic) continue;
      ASSIGN_OR_RETURN(out[key->second], cluster::ParsePartitionState(kv.value));
    }
    return out;
  }

  Result<cluster::PartitionState> Partition(const std::string& topic, int32_t p) {
    ASSIGN_OR_RETURN(cluster::GetResponse r, etcd_->client().Get(layout_.Partition(topic, p)));
    if (!r.kv) return NotFoundError("no state in etcd for {}-{}", topic, p);
    return cluster::ParsePartitionState(r.kv->value);
  }

  Result<int32_t> Controller() {
    ASSIGN_OR_RETURN(cluster::GetResponse r, etcd_->client().Get(layout_.Controller()));
    if (!r.kv) return -1;
    ASSIGN_OR_RETURN(cluster::ControllerValue v, cluster::ParseControllerValue(r.kv->value));
    return v.node;
  }

  // Waits until each of `topics` has `partitions[i]` partitions in etcd, each with a
  // live leader and every replica in its ISR.
  Status WaitReady(const std::vector<std::pair<std::string, int>>& topics,
                   std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string why;
    while (true) {
      why.clear();
      for (const auto& [topic, count] : topics) {
        Result<std::map<int32_t, cluster::PartitionState>> states = Partitions(topic);
        if (!states.ok()) {
          why = states.status().ToString();
          break;
        }
        int ready = 0;
        for (const auto& [p, st] : *states) {
          std::optional<size_t> leader = IndexOf(st.leader);
          if (leader && nodes_[*leader].process != nullptr &&
              st.isr.size() == static_cast<size_t>(std::min<int>(kReplicationFactor, size()))) {
            ++ready;
          }
        }
        if (ready < count) {
          why = fmt::format("{}: {} of {} partitions led with a full ISR", topic, ready, count);
          break;
        }
      }
      if (why.empty()) return Status::OK();
      RETURN_IF_ERROR(CheckAlive());
      if (std::chrono::steady_clock::now() >= deadline) {
        return AbortedError("not ready after {} s: {}", timeout.count(), why);
      }
      std::this_thread::sleep_for(50ms);
    }
  }

  // The last lines of each running broker's log, for an error.
  std::string LogTails(int lines) const {
    std::string out;
    for (const Node& n : nodes_) {
      if (n.process == nullptr) continue;
      out += fmt::format("  broker {}:\n{}", n.id, Tail(n.process->err_path(), lines));
    }
    return out;
  }

  int size() const { return static_cast<int>(nodes_.size()); }
  int32_t node_id(size_t i) const { return nodes_[i].id; }
  pid_t pid(size_t i) const { return nodes_[i].process ? nodes_[i].process->pid() : -1; }
  std::string command(size_t i) const {
    return nodes_[i].process ? nodes_[i].process->command() : "";
  }
  EtcdProcess& etcd() { return *etcd_; }
  const std::string& config_path() const { return config_path_; }

 private:
  struct Node {
    int32_t id = 0;
    std::string address;
    std::string data_dir;
    int runs = 0;
    std::unique_ptr<BrokerProcess> process;  // null while killed
  };

  Cluster() = default;

  static Status WriteFile(const std::string& path, const std::string& text) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) return ErrnoError("fopen", path, errno);
    size_t n = std::fwrite(text.data(), 1, text.size(), f);
    if (std::fclose(f) != 0 || n != text.size()) return IOError("cannot write {}", path);
    return Status::OK();
  }

  std::string binary_, work_dir_, config_path_;
  cluster::KeyLayout layout_{"sluice"};
  std::unique_ptr<EtcdProcess> etcd_;
  std::vector<Node> nodes_;
};

// Every partition's end offset, asking again while leaders move, each time through a new
// client (librdkafka's watermark query keeps asking the leader its metadata cache names).
Result<std::vector<int64_t>> EndOffsetsRetrying(const Settings& s) {
  auto deadline = std::chrono::steady_clock::now() + kReadyTimeout;
  while (true) {
    ASSIGN_OR_RETURN(std::unique_ptr<kc::Admin> admin,
                     kc::Admin::Create({{"bootstrap.servers", s.bootstrap}}));
    Result<std::vector<int64_t>> ends = EndOffsets(admin.get(), s);
    if (ends.ok() || std::chrono::steady_clock::now() >= deadline) return ends;
    std::this_thread::sleep_for(200ms);
  }
}

// ---------------------------------------------------------------------------------------
// The failover phase.

struct FailoverSample {
  int32_t partition = -1;
  int32_t killed = -1;  // the node that led it
  bool was_controller = false;
  int32_t new_leader = -1;
  double elected_s = -1;      // kill to etcd naming another leader
  int32_t leader_epoch = -1;  // the new leader's epoch, as etcd named it
  double serving_s = -1;      // kill to the new leader taking the partition (its log)
  double acked_s = -1;        // kill to the first write of the partition acknowledged after it
  double back_in_isr_s = -1;  // restart to every ISR full again
};

struct FailoverResult {
  PhaseResult phase;  // the load: records acknowledged over the phase
  std::vector<FailoverSample> samples;
  int64_t failed = 0;  // delivery reports with an error
  std::string first_error;
};

// When a broker's log says it took `topic`-`partition` as leader in `epoch`
// (replica_manager.cc's "<topic>-<p>: leader in epoch <E> from offset"), as wall-clock
// milliseconds from the line's timestamp; -1 when no such line is there.
int64_t LeaderSinceWallMs(const std::string& log_path, const std::string& topic, int32_t partition,
                          int32_t epoch) {
  if (log_path.empty() || epoch < 0) return -1;
  const std::string needle =
      fmt::format(" replica: {}-{}: leader in epoch {} from offset", topic, partition, epoch);
  std::istringstream in(ReadFile(log_path));
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) == std::string::npos) continue;
    // 2026-12-02T19:48:05.744Z ...
    struct tm tm = {};
    int ms = 0;
    if (std::sscanf(line.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon,
                    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7) {
      return -1;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<int64_t>(::timegm(&tm)) * 1000 + ms;
  }
  return -1;
}

// An idempotent acks=all producer holds `rate` records/s over every partition of
// `topic` (round robin) on a thread of its own, while the main thread, `kills` times,
// SIGKILLs the leader of one partition (partition k % partitions for kill k), measures
// the time to the first write of that partition acknowledged after the kill (counting only
// records handed to the producer after the killed broker was reaped: nothing the old
// leader could have acknowledged), restarts the broker on its data directory and waits
// until every ISR is full again. At the end every partition's acknowledged offsets must
// be exactly the offsets its log gained: none lost, none twice.
Result<FailoverResult> RunFailover(Cluster& c, const Settings& s, const std::string& topic,
                                   int kills, int64_t rate,
                                   const std::vector<std::pair<std::string, int>>& ready) {
  Settings fs_settings = s;
  fs_settings.topic = topic;
  ASSIGN_OR_RETURN(std::vector<int64_t> start, EndOffsetsRetrying(fs_settings));

  std::mutex mu;  // guards acked, failed, first_error
  std::vector<std::vector<int64_t>> acked(static_cast<size_t>(s.partitions));
  FailoverResult out;
  std::atomic<int32_t> watched{-1};
  std::atomic<int64_t> armed_after{INT64_MAX};  // produce time (ns) after the reap
  std::atomic<int64_t> first_ack{0};
  auto on_delivery = [&](const kc::DeliveryReport& r) {
    int64_t now = MonotonicNanos();
    std::lock_guard<std::mutex> lock(mu);
    if (!r.status.ok()) {
      if (out.failed++ == 0) out.first_error = r.status.ToString();
      return;
    }
    if (r.partition >= 0 && r.partition < s.partitions) acked[r.partition].push_back(r.offset);
    if (r.partition == watched.load() && static_cast<int64_t>(r.cookie) >= armed_after.load()) {
      int64_t zero = 0;
      first_ack.compare_exchange_strong(zero, now);
    }
  };
  kc::Config config = s.latency_producer;
  config["client.id"] = "sluice-bench-failover";
  config["acks"] = "all";
  config["enable.idempotence"] = "true";
  config.erase("statistics.interval.ms");
  // The Java client's default (librdkafka's is 10 s; a --producer-config value wins): a
  // broker killed earlier and restarted leads nothing until a failover makes it the new
  // leader, and librdkafka's reconnect backoff to it grew while it was down, so with 10 s
  // the first write to it waited up to that long after it led (0018, "replperf").
  config.emplace("reconnect.backoff.max.ms", "1000");
  const std::string payload = MakePayload(s.record_size);
  ASSIGN_OR_RETURN(std::unique_ptr<kc::Producer> producer,
                   kc::Producer::Create(config, on_delivery));

  std::atomic<bool> stop{false};
  Status send_error;
  std::thread poller([&] {
    while (!stop.load(std::memory_order_acquire)) producer->Poll(100ms);
  });
  std::thread sender([&] {
    const int64_t begin = MonotonicNanos();
    for (int64_t i = 0; !stop.load(std::memory_order_acquire); ++i) {
      int64_t due = begin + static_cast<int64_t>(static_cast<__int128>(i) * 1'000'000'000 / rate);
      if (MonotonicNanos() < due) SleepUntil(due);
      int32_t partition = static_cast<int32_t>(i % s.partitions);
      while (!stop.load(std::memory_order_acquire)) {
        Status st = producer->Produce(topic, partition, {}, payload,
                                      static_cast<uint64_t>(MonotonicNanos()),
                                      kc::Producer::Value::kBorrow);
        if (st.ok()) break;
        if (st.code() != StatusCode::kResourceExhausted) {
          send_error = st;
          stop.store(true);
          return;
        }
        std::this_thread::sleep_for(1ms);
      }
    }
  });
  auto finish_load = [&] {
    stop.store(true, std::memory_order_release);
    sender.join();
    poller.join();
  };

  CpuMeter cpu(c.Pids());
  int64_t phase_start = MonotonicNanos();
  Status status;
  std::this_thread::sleep_for(1s);  // the load running before the first kill
  for (int k = 0; k < kills && status.ok(); ++k) {
    FailoverSample sample;
    sample.partition = k % s.partitions;
    Result<cluster::PartitionState> state = c.Partition(topic, sample.partition);
    if (!state.ok()) {
      status = state.status();
      break;
    }
    std::optional<size_t> victim = c.IndexOf(state->leader);
    if (!victim || c.pid(*victim) <= 0) {
      status =
          InternalError("{}-{} has no live leader before kill {}", topic, sample.partition, k + 1);
      break;
    }
    sample.killed = state->leader;
    Result<int32_t> controller = c.Controller();
    sample.was_controller = controller.ok() && *controller == sample.killed;
    watched.store(sample.partition);
    first_ack.store(0);
    int64_t killed_at = MonotonicNanos();
    const int64_t killed_wall_ms = WallMillis();
    c.KillNode(*victim);
    armed_after.store(MonotonicNanos());
    auto deadline = killed_at + std::chrono::nanoseconds(kFailoverTimeout).count();
    while (first_ack.load() == 0 && MonotonicNanos() < deadline) {
      if (sample.elected_s < 0) {
        Result<cluster::PartitionState> now = c.Partition(topic, sample.partition);
        if (now.ok() && now->leader != sample.killed && now->leader >= 0) {
          sample.elected_s = SecondsSince(killed_at);
          sample.new_leader = now->leader;
          sample.leader_epoch = now->leader_epoch;
        }
      }
      std::this_thread::sleep_for(kPollInterval);
    }
    armed_after.store(INT64_MAX);
    if (first_ack.load() == 0) {
      Result<cluster::PartitionState> now = c.Partition(topic, sample.partition);
      status = AbortedError(
          "failover {}: no write of {}-{} acknowledged within {} s of killing broker {}; etcd "
          "holds leader {}, ISR of {}; the brokers' logs:\n{}",
          k + 1, topic, sample.partition, kFailoverTimeout.count(), sample.killed,
          now.ok() ? now->leader : -1, now.ok() ? now->isr.size() : 0, c.LogTails(15));
      break;
    }
    sample.acked_s = static_cast<double>(first_ack.load() - killed_at) / 1e9;
    if (sample.elected_s < 0) {  // acknowledged before the poll saw the election
      sample.elected_s = sample.acked_s;
      Result<cluster::PartitionState> now = c.Partition(topic, sample.partition);
      if (now.ok()) {
        sample.new_leader = now->leader;
        sample.leader_epoch = now->leader_epoch;
      }
    }
    // Where the time after the election goes: the new leader's own log says when it took
    // the partition; the rest, to the first acknowledgement, is the client's finding it.
    const int64_t serving_ms = LeaderSinceWallMs(c.LogPathOf(sample.new_leader), topic,
                                                 sample.partition, sample.leader_epoch);
    if (serving_ms >= 0) sample.serving_s = static_cast<double>(serving_ms - killed_wall_ms) / 1e3;
    int64_t restarted_at = MonotonicNanos();
    status = c.StartNode(*victim);
    if (status.ok()) status = c.WaitReady(ready, kReadyTimeout);
    sample.back_in_isr_s = SecondsSince(restarted_at);
    out.samples.push_back(sample);
  }
  finish_load();
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(send_error);
  RETURN_IF_ERROR(producer->Flush(kFlushTimeout));
  out.phase.phase = "failover";
  out.phase.seconds = SecondsSince(phase_start);
  cpu.Finish(&out.phase);
  // The killed brokers' CPU went with them and their successors started mid-phase: no
  // broker or machine split here, only the client's.
  out.phase.broker_cpu = -1;
  out.phase.broker_cpu_each.clear();
  out.phase.other_cpu = -1;
  out.phase.target_rate = rate;

  // Every acknowledged offset is in the log once, and the log gained exactly the records
  // acknowledged. An idempotent producer may report a record delivered without an offset
  // (offset -1001: librdkafka's implicit ack of a batch that failed with a retriable error
  // after a later batch of the same producer succeeded, which proves it was written): those
  // count, but have no place to check.
  ASSIGN_OR_RETURN(std::vector<int64_t> end, EndOffsetsRetrying(fs_settings));
  int64_t offsetless = 0;
  for (int p = 0; p < s.partitions; ++p) {
    std::vector<int64_t>& offsets = acked[p];
    std::sort(offsets.begin(), offsets.end());
    auto first_valid = std::lower_bound(offsets.begin(), offsets.end(), int64_t{0});
    const int64_t without = first_valid - offsets.begin();
    const bool distinct = std::adjacent_find(first_valid, offsets.end()) == offsets.end();
    const bool in_range =
        first_valid == offsets.end() || (*first_valid >= start[p] && offsets.back() < end[p]);
    if (!distinct || !in_range || start[p] + static_cast<int64_t>(offsets.size()) != end[p]) {
      return InternalError(
          "failover: partition {}: {} acknowledged records ({} without an offset), the log "
          "gained [{}, {}); offsets distinct: {}, in range: {} (first {}, last {})",
          p, offsets.size(), without, start[p], end[p], distinct, in_range,
          first_valid == offsets.end() ? -1 : *first_valid, offsets.empty() ? -1 : offsets.back());
    }
    offsetless += without;
    out.phase.records += static_cast<int64_t>(offsets.size());
  }
  out.phase.bytes = out.phase.records * s.record_size;
  out.phase.check = fmt::format(
      "{} kills; {} records acknowledged ({} without an offset), each offset once, the logs "
      "gaining exactly as many records; {} delivery errors",
      out.samples.size(), Grouped(static_cast<uint64_t>(out.phase.records)), offsetless,
      out.failed);
  return out;
}

// CreateTopics through a new client each time, asking again while the answer is
// NOT_CONTROLLER: after a failover a client's metadata may still name the old controller,
// and librdkafka returns that error rather than asking the new one.
Status CreateTopicRetrying(const std::string& bootstrap, const std::string& topic, int partitions,
                           int replication_factor, const kc::Config& config,
                           std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    ASSIGN_OR_RETURN(std::unique_ptr<kc::Admin> admin,
                     kc::Admin::Create({{"bootstrap.servers", bootstrap}}));
    Status st = admin->CreateTopic(topic, partitions, replication_factor, config, timeout);
    if (st.ok() || st.code() == StatusCode::kAlreadyExists) return Status::OK();
    if (st.message().find("NOT_CONTROLLER") == std::string::npos ||
        std::chrono::steady_clock::now() >= deadline) {
      return st;
    }
    std::this_thread::sleep_for(500ms);
  }
}

// ---------------------------------------------------------------------------------------
// Idle replicas: memory and descriptors before and after `partitions` idle partitions.

struct IdleResult {
  int partitions = 0;
  int replicas_per_broker = 0;
  std::vector<int64_t> rss_before, rss_after, fds_before, fds_after;
  double settle_seconds = 0;
  PhaseResult cpu;  // over the settle time: what idle replicas cost in CPU

  double RssPerReplica(size_t i) const {
    return static_cast<double>(rss_after[i] - rss_before[i]) / replicas_per_broker;
  }
  double FdsPerReplica(size_t i) const {
    return static_cast<double>(fds_after[i] - fds_before[i]) / replicas_per_broker;
  }
  double MeanRssPerReplica() const {
    double sum = 0;
    for (size_t i = 0; i < rss_before.size(); ++i) sum += RssPerReplica(i);
    return rss_before.empty() ? 0 : sum / static_cast<double>(rss_before.size());
  }
  double MeanFdsPerReplica() const {
    double sum = 0;
    for (size_t i = 0; i < fds_before.size(); ++i) sum += FdsPerReplica(i);
    return fds_before.empty() ? 0 : sum / static_cast<double>(fds_before.size());
  }
};

// Creates `topic` with `partitions` partitions, waits until `ready` says they are served
// (a cluster: led with full ISRs), lets it settle `settle`, and reads each broker's RSS
// and descriptors before and after.
Result<IdleResult> RunIdle(const std::string& bootstrap, const std::vector<pid_t>& brokers,
                           const std::string& topic, int partitions, int replication_factor,
                           const kc::Config& topic_config, std::chrono::seconds settle,
                           const std::function<Status()>& ready) {
  IdleResult r;
  r.partitions = partitions;
  r.replicas_per_broker =
      partitions * replication_factor / static_cast<int>(std::max<size_t>(1, brokers.size()));
  for (pid_t pid : brokers) {
    r.rss_before.push_back(RssBytes(pid));
    r.fds_before.push_back(OpenFds(pid));
  }
  RETURN_IF_ERROR(CreateTopicRetrying(bootstrap, topic, partitions, replication_factor,
                                      topic_config, kIdleCreateTimeout));
  RETURN_IF_ERROR(ready());
  CpuMeter cpu(ServerPids{brokers, -1});
  int64_t start = MonotonicNanos();
  std::this_thread::sleep_for(settle);
  r.settle_seconds = SecondsSince(start);
  cpu.Finish(&r.cpu);
  for (pid_t pid : brokers) {
    r.rss_after.push_back(RssBytes(pid));
    r.fds_after.push_back(OpenFds(pid));
  }
  for (size_t i = 0; i < brokers.size(); ++i) {
    if (r.rss_before[i] < 0 || r.rss_after[i] < 0 || r.fds_before[i] < 0 || r.fds_after[i] < 0) {
      return IOError("cannot read /proc/{}/status or /proc/{}/fd", brokers[i], brokers[i]);
    }
  }
  return r;
}

Json IdleJson(const IdleResult& r, Json j) {
  j["partitions_idle"] = r.partitions;
  j["replicas_per_broker"] = r.replicas_per_broker;
  j["rss_bytes_per_replica"] = Round(r.MeanRssPerReplica(), 0);
  j["fds_per_replica"] = Round(r.MeanFdsPerReplica(), 4);
  Json each = Json::array();
  for (size_t i = 0; i < r.rss_before.size(); ++i) {
    each.push_back({{"rss_before", r.rss_before[i]},
                    {"rss_after", r.rss_after[i]},
                    {"fds_before", r.fds_before[i]},
                    {"fds_after", r.fds_after[i]}});
  }
  j["per_broker"] = each;
  j["settle_seconds"] = Round(r.settle_seconds, 3);
  j["idle_broker_cpu_per_s"] =
      r.settle_seconds > 0 ? Json(Round(r.cpu.broker_cpu / r.settle_seconds, 4)) : Json(nullptr);
  return j;
}

std::string IdleLine(const std::string& label, const IdleResult& r) {
  return fmt::format(
      "{:<18} {} partitions, {} replicas per broker: {:.1f} KiB RSS and {:.3f} descriptors "
      "per replica (per broker: {}); brokers' CPU while idle {:.3f} s/s",
      label, r.partitions, r.replicas_per_broker, r.MeanRssPerReplica() / 1024,
      r.MeanFdsPerReplica(),
      [&] {
        std::string s;
        for (size_t i = 0; i < r.rss_before.size(); ++i) {
          s += fmt::format("{}{:.1f} KiB {:+d} fds", i ? ", " : "", r.RssPerReplica(i) / 1024,
                           r.fds_after[i] - r.fds_before[i]);
        }
        return s;
      }(),
      r.settle_seconds > 0 ? r.cpu.broker_cpu / r.settle_seconds : 0.0);
}

// ---------------------------------------------------------------------------------------
// The run.

struct Output {
  const KafkaBenchOptions& o;
  MachineInfo machine;
  double load;
  Loopback loopback;

  void Emit(const PhaseResult& r, const Settings& s, int brokers, std::string_view acks,
            const std::string& label, Json extra = Json::object()) const {
    if (o.json) {
      Json j = PhaseJson(r, s, o, machine, LoadAverage1m(), brokers > 1 ? "own-cluster" : "own",
                         brokers, brokers > 1 ? kReplicationFactor : 1, acks, loopback);
      for (auto& [k, v] : extra.items()) j[k] = v;
      fmt::print("{}\n", j.dump());
      std::fflush(stdout);
    } else {
      PhaseResult shown = r;
      shown.phase = label;
      PrintRow(shown, loopback);
    }
  }
};

std::string Verdict(bool met) { return met ? "met" : "MISSED"; }

// The single broker's CPU seconds per record (client and broker) over the cluster's
// (client, brokers and etcd): the records/s ratio the phase would have on cores nothing
// else used, which a shared machine's other work does not move as it moves the rates.
double CpuRatio(const PhaseResult& single, const PhaseResult& cluster) {
  auto per_record = [](const PhaseResult& r) {
    double cpu = r.client_cpu + std::max(0.0, r.broker_cpu) + std::max(0.0, r.etcd_cpu);
    return r.records > 0 ? cpu / static_cast<double>(r.records) : 0.0;
  };
  double c = per_record(cluster);
  return c > 0 ? per_record(single) / c : 0.0;
}

Status Validate(const KafkaBenchOptions& o) {
  if (o.cluster < kReplicationFactor || o.cluster > 9) {
    return InvalidArgumentError(
        "--cluster must be 3 to 9 brokers (replication factor 3 on this machine), not {}",
        o.cluster);
  }
  if (!o.bootstrap.empty()) {
    return InvalidArgumentError("--cluster starts its own brokers: --bootstrap is not for it");
  }
  if (o.transactions) return InvalidArgumentError("--cluster does not run --transactions");
  if (!o.topic.empty()) return InvalidArgumentError("--cluster makes its own topics: no --topic");
  if (::access(o.etcd_binary.c_str(), X_OK) != 0) {
    return NotFoundError("{} is not installed (apt-get install etcd-server): --cluster needs it",
                         o.etcd_binary);
  }
  if (o.session_timeout_ms < 2000 || o.session_timeout_ms > 300'000) {
    return InvalidArgumentError("--session-timeout-ms must be 2000 to 300000, not {}",
                                o.session_timeout_ms);
  }
  if (o.failover_kills < 0 || o.failover_kills > 1000) {
    return InvalidArgumentError("--failover-kills must be 0 to 1000, not {}", o.failover_kills);
  }
  if (o.failover_rate < 0 || o.failover_rate > 1'000'000) {
    return InvalidArgumentError("--failover-rate must be 1 to 1000000, not {}", o.failover_rate);
  }
  if (o.idle_partitions < -1 || o.idle_partitions > 20'000) {
    return InvalidArgumentError("--idle-partitions must be 0 to 20000, not {}", o.idle_partitions);
  }
  return Status::OK();
}

Status RunCluster(const KafkaBenchOptions& options) {
  RETURN_IF_ERROR(Validate(options));
  KafkaBenchOptions o = options;
  const int kills = o.failover_kills > 0 ? o.failover_kills : (o.quick ? 2 : 10);
  const int64_t failover_rate = o.failover_rate > 0 ? o.failover_rate : 10'000;
  const int idle = o.idle_partitions >= 0 ? o.idle_partitions : (o.quick ? 60 : 1000);
  // Longer than storage.file_idle_timeout (5 s) and the cache's sweep (1 s): idle
  // replicas' descriptors are closed by the time they are counted.
  const auto settle = o.quick ? 1s : 10s;
  ASSIGN_OR_RETURN(std::unique_ptr<WorkDir> work, WorkDir::Create(o.data_dir, "kafka-cluster"));
  Output out{o, GetMachineInfo(), LoadAverage1m(), {}};
  Progress progress;
  const std::string base = fmt::format("sluice-bench-{}-{}", ::getpid(), WallMillis());

  ASSIGN_OR_RETURN(Settings single, MakeSettings(o, ""));
  progress.Show(
      fmt::format("measuring loopback TCP with iperf3 for {} s ...", single.iperf_seconds));
  out.loopback = MeasureLoopback(work->path(), single.iperf_seconds);
  progress.Clear();

  if (!o.json) {
    const MachineInfo& m = out.machine;
    fmt::print("sluice bench kafka --cluster {}\n", o.cluster);
    fmt::print("  machine   {}, {} cores, {} memory, {}; load average {} at the start\n",
               m.cpu_model, m.cores, FormatBinaryBytes(m.memory_bytes), m.kernel, LoadAverages());
    fmt::print("  commit    {}\n", SourceCommit().empty() ? "unknown" : SourceCommit());
    fmt::print(
        "  client    librdkafka {} through kafka/client, in this process; every broker, "
        "etcd and the client share the machine's cores\n",
        kc::LibraryVersion());
    fmt::print(
        "  records   {} records of {} B (null keys), {} partitions; linger.ms {}, "
        "batch.size {}; compression {}\n",
        Grouped(static_cast<uint64_t>(single.records)), single.record_size, single.partitions,
        single.producer.at("linger.ms"), single.producer.at("batch.size"), o.compression);
    if (out.loopback.mb_per_s) {
      fmt::print("  loopback  {:.1f} MB/s ({})\n", *out.loopback.mb_per_s, out.loopback.note);
    } else {
      fmt::print("  loopback  none: {}\n", out.loopback.note);
    }
  }

  // 1. The reference: one broker, acks=1, replication factor 1.
  std::optional<PhaseResult> ref_produce, ref_consume;
  std::optional<IdleResult> ref_idle;
  {
    KafkaBenchOptions so = o;
    so.acks = "1";
    ASSIGN_OR_RETURN(
        std::unique_ptr<BrokerProcess> broker,
        BrokerProcess::Start(o.sluice_binary, work->path() + "/single", work->path() + "/single"));
    ASSIGN_OR_RETURN(single, MakeSettings(so, broker->address()));
    single.topic = base;
    single.consume_min_seconds = ConsumeMinSeconds(o);
    if (!o.json) {
      fmt::print("  single    {} (pid {}); acks=1, replication factor 1\n", broker->command(),
                 broker->pid());
    }
    ASSIGN_OR_RETURN(std::unique_ptr<kc::Admin> admin,
                     kc::Admin::Create({{"bootstrap.servers", single.bootstrap}}));
    bool created = false;
    ASSIGN_OR_RETURN(single.partitions, EnsureTopic(admin.get(), single, &created));
    ServerPids pids{{broker->pid()}, -1};
    ASSIGN_OR_RETURN(std::vector<int64_t> start, EndOffsets(admin.get(), single));
    progress.Show("single broker: produce ...");
    Result<PhaseResult> produced = RunProduce(single, pids);
    progress.Clear();
    if (!produced.ok()) return produced.status().WithContext("single broker");
    ref_produce = *produced;
    ASSIGN_OR_RETURN(std::vector<int64_t> end, EndOffsets(admin.get(), single));
    progress.Show("single broker: consume ...");
    Result<PhaseResult> consumed = RunConsume(single, start, end, pids);
    progress.Clear();
    if (!consumed.ok()) return consumed.status().WithContext("single broker");
    ref_consume = *consumed;
    if (idle > 0) {
      progress.Show(fmt::format("single broker: {} idle partitions ...", idle));
      ASSIGN_OR_RETURN(ref_idle, RunIdle(single.bootstrap, {broker->pid()}, base + "-idle", idle, 1,
                                         {}, settle, [] { return Status::OK(); }));
      progress.Clear();
    }
    admin.reset();
    RETURN_IF_ERROR(broker->Stop().WithContext("single broker"));
  }

  // 2. The cluster.
  progress.Show(fmt::format("starting etcd and {} brokers ...", o.cluster));
  ASSIGN_OR_RETURN(std::unique_ptr<Cluster> cluster, Cluster::Start(o, work->path()));
  progress.Clear();
  KafkaBenchOptions co = o;
  co.acks = "all";
  ASSIGN_OR_RETURN(Settings s, MakeSettings(co, cluster->Bootstrap()));
  s.consume_min_seconds = ConsumeMinSeconds(o);
  s.topic = base;
  if (!o.json) {
    fmt::print("  etcd      {} {} (pid {}), data on tmpfs\n", cluster->etcd().version(),
               cluster->etcd().command(), cluster->etcd().pid());
    for (int i = 0; i < cluster->size(); ++i) {
      fmt::print("  broker {}  {} (pid {})\n", cluster->node_id(i), cluster->command(i),
                 cluster->pid(i));
    }
    fmt::print(
        "  cluster   replication factor {}, min.insync.replicas {}, acks=all; "
        "cluster.session_timeout {} ms (in {})\n",
        kReplicationFactor, kMinInsyncReplicas, o.session_timeout_ms, cluster->config_path());
    fmt::print(
        "  latency   {} records at {} records/s, acks=all, linger.ms {}; Produce to delivery "
        "report\n",
        Grouped(static_cast<uint64_t>(s.latency_records)),
        Grouped(static_cast<uint64_t>(s.latency_rate)), s.latency_producer.at("linger.ms"));
    fmt::print(
        "  failover  {} kills under an idempotent acks=all load of {} records/s; kill to the first "
        "write of the partition acknowledged after it\n",
        kills, Grouped(static_cast<uint64_t>(failover_rate)));
    fmt::print(
        "  MB = 10^6 bytes of record values; % loop = MB/s / loopback MB/s; cpu s = CPU seconds "
        "in the phase of the client / the broker(s) / the rest of the machine (etcd "
        "included)\n\n");
    PrintColumns();
    out.Emit(*ref_produce, single, 1, "1", "1 broker produce");
    out.Emit(*ref_consume, single, 1, "1", "1 broker consume");
  } else {
    out.Emit(*ref_produce, single, 1, "1", "");
    out.Emit(*ref_consume, single, 1, "1", "");
    if (ref_idle) {
      PhaseResult r = ref_idle->cpu;
      r.phase = "idle_replicas";
      out.Emit(r, single, 1, "1", "", IdleJson(*ref_idle, Json::object()));
    }
  }

  auto with_cluster = [&](Status st) {
    if (st.ok()) return st;
    Status dead = cluster->CheckAlive();
    return dead.ok() ? st : Status(st.code(), st.message() + "\n" + dead.message());
  };
  ASSIGN_OR_RETURN(std::unique_ptr<kc::Admin> admin,
                   kc::Admin::Create({{"bootstrap.servers", s.bootstrap}}));
  const kc::Config topic_config = {{"min.insync.replicas", std::to_string(kMinInsyncReplicas)}};
  const std::string failover_topic = base + "-failover";
  bool created = false;
  Settings fo = s;
  fo.topic = failover_topic;
  for (Settings* t : {&s, &fo}) {
    Result<int> n = EnsureTopic(admin.get(), *t, &created, kReplicationFactor, topic_config);
    if (!n.ok()) return with_cluster(n.status().WithContext("creating " + t->topic));
  }
  std::vector<std::pair<std::string, int>> topics = {{s.topic, s.partitions},
                                                     {failover_topic, s.partitions}};
  RETURN_IF_ERROR(with_cluster(cluster->WaitReady(topics, kReadyTimeout)));

  std::vector<std::string> checks;
  ASSIGN_OR_RETURN(std::vector<int64_t> start, EndOffsetsRetrying(s));
  progress.Show("cluster: produce ...");
  Result<PhaseResult> produced = RunProduce(s, cluster->Pids());
  progress.Clear();
  if (!produced.ok()) return with_cluster(produced.status());
  double produce_ratio = produced->records_per_s() / ref_produce->records_per_s();
  double produce_cpu_ratio = CpuRatio(*ref_produce, *produced);
  out.Emit(*produced, s, cluster->size(), "all", fmt::format("{} brokers produce", cluster->size()),
           {{"single_broker_ratio", Round(produce_ratio, 4)},
            {"single_broker_cpu_ratio", Round(produce_cpu_ratio, 4)}});
  checks.push_back("produce: " + produced->check);
  ASSIGN_OR_RETURN(std::vector<int64_t> end, EndOffsetsRetrying(s));
  progress.Show("cluster: consume ...");
  Result<PhaseResult> consumed = RunConsume(s, start, end, cluster->Pids());
  progress.Clear();
  if (!consumed.ok()) return with_cluster(consumed.status());
  double consume_ratio = consumed->records_per_s() / ref_consume->records_per_s();
  double consume_cpu_ratio = CpuRatio(*ref_consume, *consumed);
  out.Emit(*consumed, s, cluster->size(), "all", fmt::format("{} brokers consume", cluster->size()),
           {{"single_broker_ratio", Round(consume_ratio, 4)},
            {"single_broker_cpu_ratio", Round(consume_cpu_ratio, 4)}});
  checks.push_back("consume: " + consumed->check);
  progress.Show(fmt::format("cluster: latency at {}/s ...", Grouped(s.latency_rate)));
  Result<PhaseResult> latency = RunLatency(s, s.latency_rate, cluster->Pids());
  progress.Clear();
  if (!latency.ok()) return with_cluster(latency.status());
  out.Emit(*latency, s, cluster->size(), "all", fmt::format("{} brokers latency", cluster->size()));
  checks.push_back("latency: " + latency->check);

  // Failover.
  progress.Show(fmt::format("cluster: failover, {} kills ...", kills));
  Result<FailoverResult> failover =
      RunFailover(*cluster, fo, failover_topic, kills, failover_rate, topics);
  progress.Clear();
  if (!failover.ok()) return with_cluster(failover.status());
  std::vector<double> acked, elected;
  for (const FailoverSample& f : failover->samples) {
    acked.push_back(f.acked_s);
    elected.push_back(f.elected_s);
  }
  double p50 = Median(acked), mx = *std::max_element(acked.begin(), acked.end());
  if (o.json) {
    Json samples = Json::array();
    for (const FailoverSample& f : failover->samples) {
      samples.push_back({{"partition", f.partition},
                         {"killed", f.killed},
                         {"was_controller", f.was_controller},
                         {"new_leader", f.new_leader},
                         {"elected_s", Round(f.elected_s, 3)},
                         {"serving_s", Round(f.serving_s, 3)},
                         {"acked_s", Round(f.acked_s, 3)},
                         {"back_in_isr_s", Round(f.back_in_isr_s, 3)}});
    }
    out.Emit(failover->phase, fo, cluster->size(), "all", "",
             {{"kills", failover->samples.size()},
              {"p50_s", Round(p50, 3)},
              {"max_s", Round(mx, 3)},
              {"election_p50_s", Round(Median(elected), 3)},
              {"election_max_s", Round(*std::max_element(elected.begin(), elected.end()), 3)},
              {"session_timeout_ms", o.session_timeout_ms},
              {"delivery_errors", failover->failed},
              {"samples", samples}});
  } else {
    out.Emit(failover->phase, fo, cluster->size(), "all", "failover load");
  }
  checks.push_back("failover: " + failover->phase.check);
  if (failover->failed > 0)
    checks.push_back("failover: first delivery error: " + failover->first_error);

  // Idle replicas.
  std::optional<IdleResult> cluster_idle;
  if (idle > 0) {
    progress.Show(fmt::format("cluster: {} idle partitions ...", idle));
    const std::string idle_topic = base + "-idle";
    std::vector<pid_t> pids = cluster->Pids().brokers;
    Result<IdleResult> r =
        RunIdle(s.bootstrap, pids, idle_topic, idle, kReplicationFactor, topic_config, settle, [&] {
          return cluster->WaitReady({{idle_topic, idle}}, kReadyTimeout);
        });
    progress.Clear();
    if (!r.ok()) return with_cluster(r.status());
    cluster_idle = *r;
    if (o.json) {
      PhaseResult row = cluster_idle->cpu;
      row.phase = "idle_replicas";
      out.Emit(row, s, cluster->size(), "all", "", IdleJson(*cluster_idle, Json::object()));
    }
  }
  admin.reset();
  progress.Show("stopping the brokers and etcd ...");
  Status stopped = cluster->Stop();
  progress.Clear();
  RETURN_IF_ERROR(stopped);

  if (!o.json) {
    fmt::print("\n");
    if (ref_idle) fmt::print("{}\n", IdleLine("idle, 1 broker", *ref_idle));
    if (cluster_idle) {
      fmt::print("{}\n", IdleLine(fmt::format("idle, {} brokers", cluster->size()), *cluster_idle));
    }
    fmt::print(
        "failover           {} kills: kill to first acknowledged write p50 {:.2f} s, max "
        "{:.2f} s; kill to election in etcd p50 {:.2f} s, max {:.2f} s\n",
        acked.size(), p50, mx, Median(elected), *std::max_element(elected.begin(), elected.end()));
    for (const FailoverSample& f : failover->samples) {
      fmt::print(
          "  partition {:>2}: broker {} killed{}, broker {} elected at {:.2f} s, leading at {:.2f} "
          "s, first write acknowledged at {:.2f} s; restarted and back in every ISR after {:.2f} "
          "s\n",
          f.partition, f.killed, f.was_controller ? " (the controller)" : "", f.new_leader,
          f.elected_s, f.serving_s, f.acked_s, f.back_in_isr_s);
    }
    fmt::print("\nagainst issue 21's targets (load average now {})\n", LoadAverages());
    fmt::print(
        "  produce RF={} acks=all / 1 broker acks=1   {:.3f}  (>= 0.35: {}); by CPU per record "
        "{:.3f}\n",
        kReplicationFactor, produce_ratio, Verdict(produce_ratio >= 0.35), produce_cpu_ratio);
    fmt::print(
        "  consume RF={} / 1 broker                   {:.3f}  (>= 0.8: {}); by CPU per record "
        "{:.3f}\n",
        kReplicationFactor, consume_ratio, Verdict(consume_ratio >= 0.8), consume_cpu_ratio);
    fmt::print("  failover p50 {:.2f} s (<= 3 s: {}), max {:.2f} s (<= 10 s: {})\n", p50,
               Verdict(p50 <= 3), mx, Verdict(mx <= 10));
    if (cluster_idle) {
      double kib = cluster_idle->MeanRssPerReplica() / 1024;
      double fds = cluster_idle->MeanFdsPerReplica();
      fmt::print("  idle replica {:.1f} KiB RSS (<= 64 KiB: {}), {:.3f} descriptors (0: {})\n", kib,
                 Verdict(kib <= 64), fds, Verdict(fds < 0.01));
    }
    fmt::print("\n");
    for (const std::string& c : checks) fmt::print("  {}\n", c);
    fmt::print("  brokers and etcd: stopped by SIGTERM, every broker exited with status 0\n");
  }
  return Status::OK();
}

}  // namespace

Status RunClusterBench(const KafkaBenchOptions& options) { return RunCluster(options); }

}  // namespace sluice::bench
