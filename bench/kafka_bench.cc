// `sluice bench kafka` and `sluice demo` (kafka_bench.h): the single-broker run (or one
// against --bootstrap), its table and JSON lines; --cluster goes to kafka_cluster_bench.cc.
// The phases themselves are in kafka_phases.cc.
#include "bench/kafka_bench.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "bench/bench_util.h"
#include "bench/kafka_cluster_bench.h"
#include "bench/kafka_phases.h"
#include "bench/kafka_tiered_bench.h"
#include "bench/machine_info.h"
#include "kafka/client/admin.h"
#include "net/testing/test_certs.h"

namespace sluice::bench {
namespace {

namespace kc = kafka::client;
using namespace std::chrono_literals;
using namespace kafka_phases;

std::string JoinedPartitions(const std::vector<int>& counts) {
  std::string out;
  for (int c : counts) out += (out.empty() ? "" : ", ") + std::to_string(c);
  return out;
}

void PrintHeader(const Settings& s, const KafkaBenchOptions& o, const std::vector<int>& counts,
                 const std::vector<std::string>& acks, const MachineInfo& m, double load,
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
  if (!s.security.empty()) {
    fmt::print("  listener  {} on {}\n", s.tls_label, s.bootstrap);
  } else if (o.tls) {
    fmt::print("  listener  PLAINTEXT on {} (the reference for the TLS run)\n", s.bootstrap);
  }
  fmt::print("  client    librdkafka {} through kafka/client\n", kc::LibraryVersion());
  fmt::print("  topics    {}{}, {} partitions; {} B values, null keys; acks {}; compression {}\n",
             s.topic, counts.size() > 1 ? "-p<N>" : "", JoinedPartitions(counts), s.record_size,
             fmt::join(acks, ", "), o.compression);
  if (s.produce) {
    fmt::print(
        "  produce   {} records as fast as the producer takes them, with each acks in turn; "
        "linger.ms {}, batch.size {}; timed to the last delivery report\n",
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
        "  consume   one consumer, every partition assigned from where the first produce "
        "phase started (no group); fetch.max.bytes {}, {} per partition\n",
        s.consumer.at("fetch.max.bytes"), s.consumer.at("fetch.message.max.bytes"));
  }
  if (s.latency) {
    fmt::print(
        "  latency   {} records at {} records/s with each acks, each sent on schedule; "
        "linger.ms {}; Produce to delivery report\n",
        Grouped(static_cast<uint64_t>(s.latency_records)),
        Grouped(static_cast<uint64_t>(s.latency_rate)), s.latency_producer.at("linger.ms"));
  }
  if (loopback.mb_per_s) {
    fmt::print("  loopback  {:.1f} MB/s ({})\n", *loopback.mb_per_s, loopback.note);
  } else {
    fmt::print("  loopback  none: {}\n", loopback.note);
  }
  fmt::print(
      "  MB = 10^6 bytes of record values; % loop = MB/s / loopback MB/s; cpu s = CPU "
      "seconds in the phase of the bench process (the client) / the broker / the rest of "
      "the machine; broker s/M = the broker's CPU seconds per million records\n");
}

// What the phases of one run compare: the acks=1 produce and latency of each partition
// count, and the first count's phases.
struct References {
  std::map<std::pair<int, std::string>, PhaseResult> acks_1;         // (partitions, phase)
  std::map<std::pair<std::string, std::string>, PhaseResult> first;  // (phase, acks)
  int first_partitions = 0;

  // acks=all's ratio to acks=1: records/s for produce, p99 for latency.
  std::optional<double> VsAcks1(const PhaseResult& r) const {
    if (r.acks != "all") return std::nullopt;
    auto it = acks_1.find({r.partitions, r.phase});
    return it == acks_1.end() ? std::nullopt : Ratio(r, it->second);
  }
  // A later partition count's ratio to the first's, for the same phase and acks.
  std::optional<double> VsFirst(const PhaseResult& r) const {
    if (r.partitions == first_partitions) return std::nullopt;
    auto it = first.find({r.phase, r.acks});
    return it == first.end() ? std::nullopt : Ratio(r, it->second);
  }
  void Note(const PhaseResult& r) {
    if (r.acks == "1") acks_1.emplace(std::pair(r.partitions, r.phase), r);
    if (r.partitions == first_partitions) first.emplace(std::pair(r.phase, r.acks), r);
  }
  static std::optional<double> Ratio(const PhaseResult& r, const PhaseResult& ref) {
    if (r.p99_ms && ref.p99_ms) {
      return *ref.p99_ms > 0 ? std::optional(*r.p99_ms / *ref.p99_ms) : std::nullopt;
    }
    return ref.records_per_s() > 0 ? std::optional(r.records_per_s() / ref.records_per_s())
                                   : std::nullopt;
  }
};

// What a comparison says, for the lines under the table.
std::string Compared(const PhaseResult& r, double ratio, std::string_view against) {
  return r.p99_ms ? fmt::format("{} p99 {:.2f} ms, {:.2f}x that of {}", r.phase, *r.p99_ms, ratio,
                                against)
                  : fmt::format("{} {:.2f}x the records/s of {}", r.phase, ratio, against);
}

// The phases against `bootstrap`; `broker` is the own broker or null. `security`: the
// listener's client properties (--tls), `label` what they set up; `results` (optional)
// gets each phase's result. Every partition count of o.partitions_list gets its own
// topic; on each, produce and latency run with every acks of o.acks_list, and consume
// once after the first produce.
Status RunPhases(const KafkaBenchOptions& options, const std::string& bootstrap,
                 const std::string& work_dir, BrokerProcess* broker,
                 const kc::Config& security = {}, const std::string& label = "",
                 std::vector<PhaseResult>* results = nullptr) {
  const std::vector<int> counts = options.transactions
                                      ? std::vector<int>{options.partitions_list.front()}
                                      : options.partitions_list;
  // acks=1 before acks=all, so that acks=all's lines compare with it.
  std::vector<std::string> acks_values =
      options.transactions ? std::vector<std::string>{"all"} : options.acks_list;
  for (std::string& a : acks_values) {
    if (a == "-1") a = "all";
  }
  std::stable_sort(acks_values.begin(), acks_values.end(),
                   [](const std::string& x, const std::string& y) { return x < y; });
  KafkaBenchOptions o = options;
  o.partitions = counts.front();
  o.acks = acks_values.front();
  ASSIGN_OR_RETURN(Settings first, MakeSettings(o, bootstrap, security));
  const std::string base_topic = first.topic;
  MachineInfo machine = GetMachineInfo();
  double load = LoadAverage1m();
  Progress progress;

  progress.Show(
      fmt::format("measuring loopback TCP with iperf3 for {} s ...", first.iperf_seconds));
  Loopback loopback = MeasureLoopback(work_dir, first.iperf_seconds);
  progress.Clear();

  kc::Config admin_config = {{"bootstrap.servers", bootstrap}, {"client.id", "sluice-bench-admin"}};
  for (const auto& [k, v] : security) admin_config[k] = v;
  ASSIGN_OR_RETURN(std::unique_ptr<kc::Admin> admin, kc::Admin::Create(admin_config));
  if (!o.json) {
    first.tls_label = label;
    PrintHeader(first, o, counts, acks_values, machine, load, broker, loopback);
  }

  const ServerPids servers = broker != nullptr ? ServerPids{{broker->pid()}, -1} : ServerPids{};
  References refs;
  refs.first_partitions = counts.front();
  std::vector<std::string> checks, compared;
  auto with_broker = [&](Status st) {
    if (st.ok() || broker == nullptr) return st;
    Status dead = broker->CheckAlive();
    return dead.ok() ? st : Status(st.code(), st.message() + "\n" + dead.message());
  };
  for (int count : counts) {
    o.partitions = count;
    o.acks = acks_values.front();
    ASSIGN_OR_RETURN(Settings s, MakeSettings(o, bootstrap, security));
    s.tls_label = label;
    s.topic = counts.size() > 1 ? fmt::format("{}-p{}", base_topic, count) : base_topic;
    bool created = false;
    Result<int> partitions = EnsureTopic(admin.get(), s, &created);
    if (!partitions.ok()) {
      return partitions.status().WithContext(fmt::format("broker {}", bootstrap));
    }
    if (!created && *partitions != count && !o.json) {
      fmt::print(stderr, "sluice bench kafka: topic '{}' exists with {} partitions; using them\n",
                 s.topic, *partitions);
    }
    s.partitions = *partitions;
    if (!o.json) {
      fmt::print("\n{} ({} partitions)\n", s.topic, s.partitions);
      PrintColumns();
    }
    std::string acks_now = o.acks;
    auto emit = [&](PhaseResult r) {
      r.acks = acks_now;
      r.partitions = s.partitions;
      const std::optional<double> vs_acks_1 = refs.VsAcks1(r);
      const std::optional<double> vs_first = refs.VsFirst(r);
      refs.Note(r);
      if (vs_acks_1) {
        compared.push_back(fmt::format("{} partitions, acks=all: {}", s.partitions,
                                       Compared(r, *vs_acks_1, "acks=1")));
      }
      if (vs_first) {
        compared.push_back(
            fmt::format("{} partitions, acks={}: {}", s.partitions, r.acks,
                        Compared(r, *vs_first, fmt::format("{} partitions", counts.front()))));
      }
      if (results != nullptr) results->push_back(r);
      if (o.json) {
        // An external broker: how many brokers and replicas stand behind it is not known.
        Json j = PhaseJson(r, s, o, machine, load, broker != nullptr ? "own" : "external",
                           broker != nullptr ? 1 : 0, broker != nullptr ? 1 : 0, r.acks, loopback);
        j["vs_acks_1"] = vs_acks_1 ? Json(Round(*vs_acks_1, 4)) : Json(nullptr);
        j["vs_first_partitions"] = vs_first ? Json(Round(*vs_first, 4)) : Json(nullptr);
        j["first_partitions"] = counts.size() > 1 ? Json(counts.front()) : Json(nullptr);
        fmt::print("{}\n", j.dump());
        std::fflush(stdout);
      } else {
        PrintRow(r, loopback);
      }
    };

    if (o.transactions) {
      acks_now = "all";
      ASSIGN_OR_RETURN(std::vector<int64_t> start, EndOffsets(admin.get(), s));
      std::optional<PhaseResult> idempotent;
      for (bool transactional : {false, true}) {
        progress.Show(fmt::format("{}: {} records ...",
                                  transactional ? "produce_txn" : "produce_idempotent",
                                  Grouped(static_cast<uint64_t>(s.records))));
        Result<PhaseResult> produced =
            RunProduceTxn(s, transactional, o.commit_interval_ms, servers);
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
    for (size_t a = 0; a < acks_values.size() && !o.transactions; ++a) {
      acks_now = acks_values[a];
      s.producer["acks"] = acks_now;
      s.latency_producer["acks"] = acks_now;
      const std::string what = fmt::format("{} partitions, acks={}", s.partitions, acks_now);
      if (s.produce) {
        ASSIGN_OR_RETURN(std::vector<int64_t> start, EndOffsets(admin.get(), s));
        progress.Show(fmt::format("{}: produce {} records ...", what,
                                  Grouped(static_cast<uint64_t>(s.records))));
        Result<PhaseResult> produced = RunProduce(s, servers);
        progress.Clear();
        if (!produced.ok()) return with_broker(produced.status());
        emit(*produced);
        checks.push_back(fmt::format("{}: produce: {}", what, produced->check));
        if (s.consume && a == 0) {
          ASSIGN_OR_RETURN(std::vector<int64_t> end, EndOffsets(admin.get(), s));
          int64_t in_range = 0;
          for (int p = 0; p < s.partitions; ++p) in_range += end[p] - start[p];
          if (in_range != s.records) {
            return InternalError(
                "the topic's end offsets moved by {} during the produce phase, "
                "for {} records produced (another producer on topic '{}'?)",
                in_range, s.records, s.topic);
          }
          progress.Show(fmt::format("{}: consume ...", what));
          Result<PhaseResult> consumed = RunConsume(s, start, end, servers);
          progress.Clear();
          if (!consumed.ok()) return with_broker(consumed.status());
          emit(*consumed);
          checks.push_back(fmt::format("{}: consume: {}", what, consumed->check));
        }
      }
      if (s.latency) {
        progress.Show(fmt::format("{}: latency: {} records at {}/s ...", what,
                                  Grouped(static_cast<uint64_t>(s.latency_records)),
                                  Grouped(static_cast<uint64_t>(s.latency_rate))));
        Result<PhaseResult> latency = RunLatency(s, s.latency_rate, servers);
        progress.Clear();
        if (!latency.ok()) return with_broker(latency.status());
        emit(*latency);
        checks.push_back(fmt::format("{}: latency: {}", what, latency->check));
      }
    }
    if (created && o.topic.empty() && broker == nullptr) {
      // A name the bench made up on someone else's broker: leave nothing behind.
      Status st = admin->DeleteTopic(s.topic, kAdminTimeout);
      if (!st.ok()) fmt::print(stderr, "sluice bench kafka: {}\n", st.ToString());
    }
  }
  if (!o.json) {
    fmt::print("\n");
    for (const std::string& c : checks) fmt::print("  {}\n", c);
    if (!compared.empty()) fmt::print("\n  same run, compared:\n");
    for (const std::string& c : compared) fmt::print("    {}\n", c);
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

Status MakeDirTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return IOError("{}: {}", path, ec.message());
  return Status::OK();
}

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return NotFoundError("{}: cannot read", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// --tls: one broker with a PLAINTEXT and a SASL_SSL listener; the phases on each in turn,
// then TLS's share of plaintext's records/s per phase.
Status RunTls(const KafkaBenchOptions& o) {
  ASSIGN_OR_RETURN(std::unique_ptr<WorkDir> work, WorkDir::Create(o.data_dir, "kafka-tls"));
  const std::string tls_dir = work->path() + "/tls";
  RETURN_IF_ERROR(MakeDirTree(tls_dir));
  // A CA and the broker's certificate (EC P-256, 127.0.0.1) made for this run.
  net::testing::TestIdentity ca("sluice bench CA", nullptr, true, tls_dir, "ca");
  net::testing::TestIdentity server("127.0.0.1", &ca, false, tls_dir, "broker");
  const std::string config_path = work->path() + "/sluice.yaml";
  RETURN_IF_ERROR(WriteTextFile(
      config_path,
      fmt::format("tls:\n  cert_file: {}\n  key_file: {}\n"
                  "  ciphers: ECDHE-ECDSA-AES128-GCM-SHA256\n"
                  "  ciphersuites: TLS_AES_128_GCM_SHA256\n"
                  "kafka:\n  listeners: [\"PLAINTEXT://127.0.0.1:0\", \"SASL_SSL://127.0.0.1:0\"]\n"
                  "sasl:\n  enabled: true\n  mechanisms: [SCRAM-SHA-256]\n"
                  "  users: [\"bench:bench-secret\"]\n",
                  server.cert_file(), server.key_file())));
  ASSIGN_OR_RETURN(
      std::unique_ptr<BrokerProcess> broker,
      BrokerProcess::Start(o.sluice_binary, work->path() + "/data", work->path() + "/broker",
                           {"--http-addr", "127.0.0.1:0", "--pg-addr", "off",
                            "--schema-registry-addr", "off", "--config", config_path}));
  // The SASL_SSL listener's port, from the banner's "Kafka listeners:" line.
  std::string sasl_ssl;
  for (int i = 0; i < 100 && sasl_ssl.empty(); ++i) {
    Result<std::string> out = ReadTextFile(work->path() + "/broker.out");
    const size_t at = out.ok() ? out->find("SASL_SSL 127.0.0.1:") : std::string::npos;
    if (at != std::string::npos) {
      const size_t start = at + 9;
      sasl_ssl = out->substr(start, out->find(' ', start) - start);
    } else {
      std::this_thread::sleep_for(50ms);
    }
  }
  if (sasl_ssl.empty()) return InternalError("the broker printed no SASL_SSL listener");
  const bool ktls = ::access("/sys/module/tls", F_OK) == 0;
  const std::string label = fmt::format(
      "SASL_SSL (SCRAM-SHA-256), TLS_AES_128_GCM_SHA256 / ECDHE-ECDSA-AES128-GCM-SHA256, {}",
      ktls ? "kernel TLS module loaded (the broker's log says whether it ran)"
           : "user-space encryption (no kernel tls module)");
  const kc::Config security = {{"security.protocol", "SASL_SSL"},
                               {"ssl.ca.location", ca.cert_file()},
                               {"sasl.mechanisms", "SCRAM-SHA-256"},
                               {"sasl.username", "bench"},
                               {"sasl.password", "bench-secret"}};
  std::vector<PhaseResult> plain, tls;
  Status st = RunPhases(o, broker->address(), work->path(), broker.get(), {}, "", &plain);
  if (st.ok()) {
    if (!o.json) fmt::print("\n");
    st = RunPhases(o, "127.0.0.1:" + sasl_ssl.substr(sasl_ssl.find(':') + 1), work->path(),
                   broker.get(), security, label, &tls);
  }
  Status stopped = broker->Stop();
  if (!st.ok()) return st;
  if (!stopped.ok()) return stopped;
  if (!o.json) {
    fmt::print("\n  TLS beside plaintext, same broker, same run:\n");
    for (const PhaseResult& t : tls) {
      for (const PhaseResult& p : plain) {
        if (p.phase != t.phase || p.acks != t.acks || p.partitions != t.partitions ||
            p.records_per_s() <= 0) {
          continue;
        }
        fmt::print("    {:<10} {} partitions, acks={}: {:.2f}x the records/s{}\n", t.phase,
                   t.partitions, t.acks, t.records_per_s() / p.records_per_s(),
                   t.p50_ms && p.p50_ms
                       ? fmt::format(", p50 {:.2f} ms vs {:.2f} ms", *t.p50_ms, *p.p50_ms)
                       : "");
      }
    }
    fmt::print("  broker: stopped by SIGTERM, exit status 0\n");
  }
  return Status::OK();
}

Status Run(const KafkaBenchOptions& o) {
  RETURN_IF_ERROR(Validate(o));
  if (std::getenv("SLUICE_BENCH_NO_MALLOPT") == nullptr) TuneAllocator();
  if (o.tiered) return RunTieredBench(o);
  if (o.tls) {
    if (!o.bootstrap.empty() || o.cluster > 0 || o.transactions) {
      return InvalidArgumentError(
          "--tls runs its own single broker with a TLS listener: not with --bootstrap, "
          "--cluster or --transactions");
    }
    return RunTls(o);
  }
  if (o.cluster > 0) {
    if (o.partitions_list.size() != 1) {
      return InvalidArgumentError("--cluster runs one partition count, not {}",
                                  JoinedPartitions(o.partitions_list));
    }
    KafkaBenchOptions c = o;
    c.partitions = o.partitions_list.front();
    return RunClusterBench(c);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<WorkDir> work, WorkDir::Create(o.data_dir, "kafka"));
  if (!o.bootstrap.empty()) return RunPhases(o, o.bootstrap, work->path(), nullptr);
  ASSIGN_OR_RETURN(
      std::unique_ptr<BrokerProcess> broker,
      BrokerProcess::Start(o.sluice_binary, work->path() + "/data", work->path() + "/broker"));
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
  o.acks_list = {"all"};  // what clients send unless told otherwise
  o.partitions_list = {o.partitions_list.front()};
  o.partitions = o.partitions_list.front();
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
                   BrokerProcess::Start(o.sluice_binary, data, work->path() + "/broker"));
  fmt::print("      $ {}\n      serving Kafka on {} (pid {})\n\n", broker->command(),
             broker->address(), broker->pid());
  o.bootstrap = broker->address();
  fmt::print(
      "[2/4] $ sluice bench kafka --bootstrap {} --quick --topic {} --acks all\n"
      "      creates topic '{}' ({} partitions), produces {} records of {} B with acks=all, "
      "consumes "
      "them back and checks every one,\n      then holds {} records/s for 1 s to "
      "measure produce latency\n\n",
      o.bootstrap, o.topic, o.topic, o.partitions,
      Grouped(o.records > 0 ? static_cast<uint64_t>(o.records) : 100'000), o.record_size,
      Grouped(static_cast<uint64_t>(o.latency_rate > 0 ? o.latency_rate : 100'000)));
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

// The defaults that depend on the mode.
KafkaBenchOptions WithDefaults(KafkaBenchOptions o) {
  // --tiered: a record of 4 KiB, so that the consumer's per-record work does not hide what
  // S3 delivers on a small machine; 256 bytes otherwise (as the perf tests' default 100-1000).
  if (o.record_size == 0) o.record_size = o.tiered ? 4096 : 256;
  return o;
}

int RunKafkaBench(const KafkaBenchOptions& options) {
  return Guarded(Run, WithDefaults(options), "sluice bench kafka");
}

int RunKafkaDemo(const KafkaBenchOptions& options) {
  return Guarded(Demo, WithDefaults(options), "sluice demo");
}

}  // namespace sluice::bench
