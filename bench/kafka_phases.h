// The phases `sluice bench kafka` runs and what they share, for the single-broker run
// (kafka_bench.cc) and the cluster run (kafka_cluster_bench.cc): a `sluice serve` child
// process, the iperf3 loopback reference, the settings of the librdkafka clients, the
// produce / consume / latency / transaction phases, CPU per phase, and the JSON line of a
// phase. Internal to bench/: the command's contract is kafka_bench.h.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "bench/child_process.h"
#include "bench/kafka_bench.h"
#include "bench/machine_info.h"
#include "kafka/client/admin.h"
#include "kafka/client/config.h"
#include "kafka/client/producer.h"

namespace sluice::bench::kafka_phases {

using Json = nlohmann::ordered_json;

inline constexpr double kMB = 1e6;
inline constexpr std::chrono::seconds kAdminTimeout{20};
inline constexpr std::chrono::seconds kFlushTimeout{300};
inline constexpr int kWarmupRecords = 1000;  // latency phase: connect before timing

// CPU seconds (user + system) of this process, librdkafka's threads included.
double SelfCpuSeconds();

// A loopback TCP port that was free a moment ago (the kernel's choice, then released).
Result<int> FreeLoopbackPort();

// `binary` with /proc/self/exe resolved to the file it names (so a command line printed
// or started again names the real binary).
std::string ResolveBinary(const std::string& binary);

// `sluice serve` as a child process on 127.0.0.1. Lifecycle: Start, Stop (SIGTERM, wait,
// exit status 0 = OK) or Kill (SIGKILL, reaped); the destructor kills a broker that was
// not stopped. Owned by one thread.
class BrokerProcess {
 public:
  // `serve_args` follow `serve --data-dir <data_dir>`; empty: a port the kernel picks for
  // Kafka, HTTP and Postgres. Its output goes to <log_prefix>.out and .err, which must be
  // new files (the listening line is looked for there).
  static Result<std::unique_ptr<BrokerProcess>> Start(const std::string& binary,
                                                      const std::string& data_dir,
                                                      const std::string& log_prefix,
                                                      std::vector<std::string> serve_args = {});

  Status Stop() { return child_->Stop(); }
  Status CheckAlive() { return child_->CheckAlive(); }
  double CpuSeconds() const { return child_->CpuSeconds(); }
  const std::string& address() const { return child_->address(); }
  pid_t pid() const { return child_->pid(); }
  const std::string& data_dir() const { return data_dir_; }
  const std::string& err_path() const { return child_->err_path(); }
  std::string command() const;

 private:
  BrokerProcess() = default;
  std::unique_ptr<ListeningChild> child_;
  std::string data_dir_;
};

// The loopback reference: one TCP stream through iperf3 on 127.0.0.1.
struct Loopback {
  std::optional<double> mb_per_s;
  std::string note;  // why there is no figure, or how it was measured
};
Loopback MeasureLoopback(const std::string& work_dir, int seconds);

// What the phases run with: the clients' librdkafka settings and the sizes.
struct Settings {
  std::string bootstrap;
  std::string topic;
  int partitions = 0;
  int64_t records = 0;
  int record_size = 0;
  int64_t latency_records = 0;
  int64_t latency_rate = 0;
  int iperf_seconds = 0;
  bool produce = false, consume = false, latency = false;
  // The consume phase reads the produced records again, pass after pass, until it has run
  // this long (0: one pass): a pass of a second or less measures mostly its start.
  double consume_min_seconds = 0;
  // The listener's security for every client (SASL_SSL with --tls); empty: plaintext.
  kafka::client::Config security;
  std::string tls_label;                   // what runs under --tls, for the header and JSON
  kafka::client::Config producer;          // throughput phase
  kafka::client::Config latency_producer;  // latency phase
  kafka::client::Config consumer;
};

struct PhaseResult {
  std::string phase;
  std::string acks;    // the producer's (consume: the produce phase's that wrote it); "" unset
  int partitions = 0;  // the topic's; 0 unset
  int64_t records = 0;
  int64_t bytes = 0;
  double seconds = 0;
  double client_cpu = 0;
  double broker_cpu = -1;               // -1: not measured (external broker); a cluster's: the sum
  std::vector<double> broker_cpu_each;  // a cluster's: per broker, in node order
  double etcd_cpu = -1;                 // a cluster's etcd; -1 without one
  double other_cpu = -1;                // the rest of the machine (with an external broker: it too)
  // Latency phase only.
  std::optional<double> p50_ms, p99_ms, p999_ms, max_ms, mean_ms, max_send_lag_ms;
  std::optional<int64_t> target_rate;
  // librdkafka's own view of the latency phase, from its statistics windows (1 s each):
  // the broker round trip (request written to response read) and the time records wait
  // in the client's queue before a request takes them. p50: the median window's p50;
  // p99: the worst window's p99.
  std::optional<double> rtt_p50_ms, rtt_p99_ms, queue_p50_ms, queue_p99_ms;
  std::string check;                // what was verified
  int passes = 0;                   // consume: passes over the produced records (0: n/a)
  int64_t commits = -1;             // produce_txn: transactions committed
  std::optional<double> txn_ratio;  // produce_txn: its records/s over produce_idempotent's
  std::optional<double> commit_p50_ms, commit_max_ms;  // produce_txn: CommitTransaction

  double records_per_s() const { return seconds > 0 ? static_cast<double>(records) / seconds : 0; }
  // The broker's CPU seconds per million records of the phase (-1: not measured).
  double broker_cpu_per_million() const {
    return broker_cpu >= 0 && records > 0 ? broker_cpu * 1e6 / static_cast<double>(records) : -1;
  }
  double mb_per_s() const { return seconds > 0 ? static_cast<double>(bytes) / kMB / seconds : 0; }
};

// The processes whose CPU a phase reports apart from the client's: the broker(s) and a
// cluster's etcd. Empty: an external broker.
struct ServerPids {
  std::vector<pid_t> brokers;
  pid_t etcd = -1;
};

// Measures CPU over a phase: this process (the client), the servers, and everything else
// on the machine (other work on a shared machine; iperf3 never runs then). A server that
// dies during the phase counts for what it used until its last reading.
class CpuMeter {
 public:
  explicit CpuMeter(ServerPids servers);
  void Finish(PhaseResult* r) const;

 private:
  ServerPids servers_;
  double self_;
  std::vector<double> broker_start_;
  double etcd_start_;
  double machine_start_;
};

// A value of `size` printable bytes, the same for every record (as the perf tests do).
std::string MakePayload(int size);

// Enqueues one record of `payload` (borrowed) for `partition` of `topic`, serving
// delivery reports while the client's queue is full.
Status ProduceRecord(kafka::client::Producer& producer, const std::string& topic,
                     const std::string& payload, int32_t partition = -1);

// The phases; each checks what it says in its PhaseResult::check.
Result<PhaseResult> RunProduce(const Settings& s, const ServerPids& servers);
Result<PhaseResult> RunConsume(const Settings& s, const std::vector<int64_t>& start,
                               const std::vector<int64_t>& end, const ServerPids& servers);
Result<PhaseResult> RunProduceTxn(const Settings& s, bool transactional, int commit_interval_ms,
                                  const ServerPids& servers);
Result<std::string> CheckCommitted(const Settings& s, const std::vector<int64_t>& start,
                                   const std::vector<int64_t>& end, int64_t expected);
Result<PhaseResult> RunLatency(const Settings& s, int64_t rate, const ServerPids& servers);

// Sleeps until CLOCK_MONOTONIC reaches `monotonic_ns`.
void SleepUntil(int64_t monotonic_ns);

Status ParseConfigList(const std::vector<std::string>& items, std::string_view flag,
                       kafka::client::Config* config);
// `security`: the listener's client properties (SASL_SSL with --tls), for every client.
Result<Settings> MakeSettings(const KafkaBenchOptions& o, const std::string& bootstrap,
                              const kafka::client::Config& security = {});
Status Validate(const KafkaBenchOptions& o);

// "1.23", or "-" without a value.
std::string Ms(const std::optional<double>& v);

// The table's column header and one row (kafka_bench.cc's header names the columns).
void PrintColumns();
void PrintRow(const PhaseResult& r, const Loopback& loopback);

// The JSON object of one phase: its figures, the settings, what it ran on. `brokers` and
// `replication_factor` say what the phase ran against (1 and 1 for a single broker);
// `broker` is "own", "own-cluster" or "external".
Json PhaseJson(const PhaseResult& r, const Settings& s, const KafkaBenchOptions& o,
               const MachineInfo& m, double load, std::string_view broker, int brokers,
               int replication_factor, std::string_view acks, const Loopback& loopback);

// Creates the topic unless it exists (with `replication_factor` and `topic_config`);
// returns its partition count.
Result<int> EnsureTopic(kafka::client::Admin* admin, const Settings& s, bool* created,
                        int replication_factor = 1, const kafka::client::Config& topic_config = {});

Result<std::vector<int64_t>> EndOffsets(kafka::client::Admin* admin, const Settings& s);

}  // namespace sluice::bench::kafka_phases
