// The `sluice` command: argument parsing and wiring only; the work lives in the modules.
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/crc32c.h"
#include "base/logging.h"
#include "bench/disk_bench.h"
#include "bench/kafka_bench.h"
#include "broker/broker.h"
#include "broker/server.h"
#include "duck/database.h"
#include "kafka/client/config.h"

namespace {

constexpr const char* kVersion = "0.1.0";

void AddDiskBenchOptions(CLI::App* cmd, sluice::bench::DiskBenchOptions* o) {
  cmd->add_option("--bytes-per-cell", o->bytes_per_cell, "bytes written per cell (default 8 GiB)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50));
  cmd->add_option("--record-bytes", o->record_bytes, "value bytes per record")->capture_default_str();
  cmd->add_option("--records-per-batch", o->records_per_batch, "records per batch")->capture_default_str();
  cmd->add_option("--in-flight", o->in_flight, "appends in flight per writer")->capture_default_str();
  cmd->add_option("--writers", o->writers, "writers for the multi-writer row (0 = one per core)");
  cmd->add_option("--dir", o->dir, "directory on the disk under test")->capture_default_str();
  cmd->add_option("--tmpfs-dir", o->tmpfs_dir, "directory on a tmpfs")->capture_default_str();
  cmd->add_option("--flush", o->flush, "flush modes to run: interval, durable, tmpfs")
      ->delimiter(',');
  cmd->add_flag("--json", o->json, "one JSON object per row instead of a table");
}

void AddKafkaBenchOptions(CLI::App* cmd, sluice::bench::KafkaBenchOptions* o) {
  cmd->add_option("--bootstrap", o->bootstrap,
                  "HOST:PORT of a running broker (default: start `sluice serve` as a child)");
  cmd->add_option("--data-dir", o->data_dir,
                  "the own broker's data goes in DIR/run-<pid>, removed at the end "
                  "(default: a new directory under $TMPDIR or /tmp)");
  cmd->add_option("--topic", o->topic,
                  "topic to use, created if missing (default: a new sluice-bench-* topic)");
  cmd->add_option("--partitions", o->partitions, "partitions of a topic the bench creates")
      ->capture_default_str();
  cmd->add_option("--records", o->records,
                  "records in the produce phase (default 1000000; 100000 with --quick)");
  cmd->add_option("--record-size", o->record_size, "value bytes per record")->capture_default_str();
  cmd->add_option("--acks", o->acks, "producer acks: 0, 1, all")->capture_default_str();
  cmd->add_option("--compression", o->compression, "none, gzip, snappy, lz4, zstd")
      ->capture_default_str();
  cmd->add_option("--latency-rate", o->latency_rate, "records/s the latency phase holds")
      ->capture_default_str();
  cmd->add_option("--latency-records", o->latency_records,
                  "records in the latency phase (default: 5 s worth; 1 s with --quick)");
  cmd->add_option("--iperf-seconds", o->iperf_seconds,
                  "length of the iperf3 loopback reference (default 3; 1 with --quick)");
  cmd->add_option("--phases", o->phases, "phases to run: produce, consume, latency")
      ->delimiter(',');
  cmd->add_option("--producer-config", o->producer_config,
                  "extra librdkafka producer property NAME=VALUE (repeatable)");
  cmd->add_option("--consumer-config", o->consumer_config,
                  "extra librdkafka consumer property NAME=VALUE (repeatable)");
  cmd->add_flag("--quick", o->quick, "small sizes, for demos and smoke tests");
  cmd->add_flag("--json", o->json, "one JSON object per phase instead of a table");
}

struct ServeOptions {
  std::string kafka_addr = "127.0.0.1:9092";
  std::string data_dir = "./sluice-data";
  int shards = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string flush_policy = "interval";
  int64_t flush_ms = 100;
};

// Runs the broker until SIGTERM or SIGINT. The signals are blocked in every thread (the
// shard threads inherit the mask) and read from a signalfd here, so no work happens in
// a signal handler.
int RunServe(const ServeOptions& o) {
  auto colon = o.kafka_addr.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    const char* begin = o.kafka_addr.data() + colon + 1;
    const char* end = o.kafka_addr.data() + o.kafka_addr.size();
    auto [ptr, ec] = std::from_chars(begin, end, port);
    if (ec != std::errc() || ptr != end || begin == end) port = -1;
  }
  if (port < 0 || port > 65535) {
    std::fprintf(stderr, "sluice serve: --kafka-addr must be HOST:PORT, not '%s'\n",
                 o.kafka_addr.c_str());
    return 2;
  }
  std::string host = o.kafka_addr.substr(0, colon);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  if (pthread_sigmask(SIG_BLOCK, &signals, nullptr) != 0) {
    std::fprintf(stderr, "sluice serve: cannot block signals\n");
    return 1;
  }
  int sfd = signalfd(-1, &signals, SFD_CLOEXEC);
  if (sfd < 0) {
    std::fprintf(stderr, "sluice serve: signalfd: %s\n", std::strerror(errno));
    return 1;
  }

  sluice::broker::BrokerOptions bo;
  bo.data_dir = o.data_dir;
  bo.advertised_host = host;
  bo.advertised_port = port;
  bo.io_threads = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  auto policy = sluice::storage::ParseFlushPolicy(o.flush_policy);
  if (!policy.ok()) {
    std::fprintf(stderr, "sluice serve: --flush-policy: %s\n", policy.status().message().c_str());
    ::close(sfd);
    return 2;
  }
  bo.flush_policy = *policy;
  bo.flush_ms = o.flush_ms;
  auto broker = sluice::broker::Broker::Open(bo);
  if (!broker.ok()) {
    std::fprintf(stderr, "sluice serve: %s\n", broker.status().ToString().c_str());
    ::close(sfd);
    return 1;
  }
  sluice::broker::ServerOptions so;
  so.host = host;
  so.port = static_cast<uint16_t>(port);
  so.shards = o.shards;
  sluice::broker::Server server(so, broker->get());
  if (sluice::Status st = server.Start(); !st.ok()) {
    std::fprintf(stderr, "sluice serve: %s\n", st.ToString().c_str());
    ::close(sfd);
    return 1;
  }
  // With port 0 the kernel chose one; clients must be told the real one.
  (*broker)->SetAdvertisedAddress(host, server.port());
  fmt::print("sluice: serving Kafka on {}:{} (cluster {}, data in {}, {} shards)\n", host,
             server.port(), (*broker)->cluster_id(), o.data_dir, server.shard_count());
  std::fflush(stdout);

  signalfd_siginfo info{};
  ssize_t n;
  do {
    n = ::read(sfd, &info, sizeof(info));
  } while (n < 0 && errno == EINTR);
  ::close(sfd);
  fmt::print("sluice: {}, stopping\n", n == sizeof(info) ? strsignal(static_cast<int>(info.ssi_signo)) : "signalfd failed");
  std::fflush(stdout);
  (*broker)->StopWaking();
  server.Stop();
  if (sluice::Status st = (*broker)->Close(); !st.ok()) {
    std::fprintf(stderr, "sluice serve: closing logs: %s\n", st.ToString().c_str());
    return 1;
  }
  return n == sizeof(info) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sluice: a Kafka-compatible broker, SQL pipelines and SQL over lake tables, in one binary"};
  // 0 or 1 here, checked after parsing: with exactly 1 required, CLI11 reports an
  // unknown subcommand as "a subcommand is required", which misleads.
  app.require_subcommand(0, 1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "debug, info, warn, error or off")->capture_default_str();

  auto* version = app.add_subcommand("version", "print versions of sluice and its libraries");

  sluice::bench::KafkaBenchOptions demo_opts;
  auto* demo = app.add_subcommand(
      "demo", "run sluice's main job end to end: start the broker, produce to it and consume "
              "back with a Kafka client (sluice bench kafka --quick), stop it");
  demo->add_option("--data-dir", demo_opts.data_dir,
                   "the broker's data goes in DIR/run-<pid>, removed at the end (default: a new "
                   "directory under $TMPDIR or /tmp)");

  ServeOptions serve_opts;
  auto* serve = app.add_subcommand("serve", "run the Kafka-compatible broker until SIGTERM or SIGINT");
  serve->add_option("--kafka-addr", serve_opts.kafka_addr, "listen address HOST:PORT (port 0: any free port)")
      ->capture_default_str();
  serve->add_option("--data-dir", serve_opts.data_dir, "directory of the topics and logs")
      ->capture_default_str();
  serve->add_option("--flush-policy", serve_opts.flush_policy,
                    "interval (fdatasync every --flush-ms) or durable (fdatasync after every "
                    "write group; consumers see only durable data). acks=all is answered after "
                    "the fdatasync that covers the batch under both")
      ->capture_default_str();
  serve->add_option("--flush-ms", serve_opts.flush_ms, "fdatasync interval of the interval policy")
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}))
      ->capture_default_str();
  serve->add_option("--shards", serve_opts.shards, "event loop threads (default: one per core)")
      ->check(CLI::Range(1, 1024));

  auto* bench = app.add_subcommand("bench", "benchmarks; each prints a table and what it ran on");
  bench->require_subcommand(0, 1);
  sluice::bench::DiskBenchOptions disk_opts;
  auto* disk = bench->add_subcommand("disk", "storage engine append rate beside the raw disk write rate");
  AddDiskBenchOptions(disk, &disk_opts);
  sluice::bench::KafkaBenchOptions kafka_opts;
  auto* kafka = bench->add_subcommand(
      "kafka", "broker produce and consume rates and produce latency through librdkafka, beside "
               "loopback TCP (iperf3)");
  AddKafkaBenchOptions(kafka, &kafka_opts);

  CLI11_PARSE(app, argc, argv);
  if (app.get_subcommands().empty() || (bench->parsed() && bench->get_subcommands().empty())) {
    std::fputs((bench->parsed() ? bench->help() : app.help()).c_str(), stderr);
    return 2;
  }

  auto level = sluice::ParseLogLevel(log_level);
  if (!level.ok()) {
    std::fprintf(stderr, "sluice: %s\n", level.status().message().c_str());
    return 2;
  }
  sluice::SetLogLevel(*level);

  if (version->parsed()) {
    fmt::print("sluice {}\nduckdb {}\nlibrdkafka {}\ncrc32c {}\n", kVersion,
               sluice::duck::LibraryVersion(), sluice::kafka::client::LibraryVersion(),
               sluice::crc32c::HardwareAccelerated() ? "sse4.2" : "portable");
    return 0;
  }
  if (demo->parsed()) return sluice::bench::RunKafkaDemo(demo_opts);
  if (serve->parsed()) return RunServe(serve_opts);
  if (disk->parsed()) return sluice::bench::RunDiskBench(disk_opts);
  if (kafka->parsed()) return sluice::bench::RunKafkaBench(kafka_opts);
  return 0;
}
