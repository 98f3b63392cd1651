// The `sluice` command: argument parsing and wiring only; the work lives in the modules.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "app/serve.h"
#include "base/clock.h"
#include "base/config.h"
#include "base/crc32c.h"
#include "base/http_server.h"
#include "base/logging.h"
#include "base/metrics.h"
#include "base/service_notify.h"
#include "bench/compaction_bench.h"
#include "bench/console_bench.h"
#include "bench/disk_bench.h"
#include "bench/kafka_bench.h"
#include "bench/pipeline_bench.h"
#include "bench/query_bench.h"
#include "broker/broker.h"
#include "broker/server.h"
#include "broker/service.h"
#include "cli/acl_cmd.h"
#include "cli/build_info.h"
#include "cli/kafka_cmd.h"
#include "cli/pipeline_cmd.h"
#include "cli/quota_cmd.h"
#include "cli/sql_cmd.h"
#include "cli/table_cmd.h"
#include "cli/user_cmd.h"
#include "duck/database.h"
#include "kafka/client/config.h"
#include "lake/rest_catalog.h"
#include "query/engine.h"
#include "query/server.h"

namespace {

void AddDiskBenchOptions(CLI::App* cmd, sluice::bench::DiskBenchOptions* o) {
  cmd->add_option("--bytes-per-cell", o->bytes_per_cell, "bytes written per cell (default 8 GiB)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50));
  cmd->add_option("--record-bytes", o->record_bytes, "value bytes per record")
      ->capture_default_str();
  cmd->add_option("--records-per-batch", o->records_per_batch, "records per batch")
      ->capture_default_str();
  cmd->add_option("--in-flight", o->in_flight, "appends in flight per writer")
      ->capture_default_str();
  cmd->add_option("--writers", o->writers, "writers for the multi-writer row (0 = one per core)");
  cmd->add_option("--dir", o->dir, "directory on the disk under test")->capture_default_str();
  cmd->add_option("--tmpfs-dir", o->tmpfs_dir, "directory on a tmpfs")->capture_default_str();
  cmd->add_option("--flush", o->flush, "flush modes to run: interval, durable, tmpfs")
      ->delimiter(',');
  cmd->add_flag("--json", o->json, "one JSON object per row instead of a table");
}

void AddCompactionBenchOptions(CLI::App* cmd, sluice::bench::CompactionBenchOptions* o) {
  cmd->add_option("--records", o->records, "records written")->capture_default_str();
  cmd->add_option("--keys", o->keys, "distinct keys")->capture_default_str();
  cmd->add_option("--value-bytes", o->value_bytes, "value bytes per record")->capture_default_str();
  cmd->add_option("--records-per-batch", o->records_per_batch, "records per batch")
      ->capture_default_str();
  cmd->add_option("--tombstones", o->tombstone_share, "share of records that are deletes")
      ->capture_default_str();
  cmd->add_option("--buffer-bytes", o->buffer_bytes, "the cleaner's buffer (dedupe buffer size)")
      ->capture_default_str();
  cmd->add_option("--segment-bytes", o->segment_bytes, "the log's segment.bytes")
      ->capture_default_str();
  cmd->add_option("--compression", o->compression, "none, gzip, snappy, lz4 or zstd")
      ->capture_default_str();
  cmd->add_option("--dir", o->dir, "the log goes in DIR/run-<pid> (default: $TMPDIR)");
  cmd->add_flag("--json", o->json, "one JSON line instead of the table");
}

void AddKafkaBenchOptions(CLI::App* cmd, sluice::bench::KafkaBenchOptions* o) {
  cmd->add_option("--bootstrap", o->bootstrap,
                  "HOST:PORT of a running broker (default: start `sluice serve` as a child)");
  cmd->add_option("--data-dir", o->data_dir,
                  "the own broker's data goes in DIR/run-<pid>, removed at the end "
                  "(default: a new directory under $TMPDIR or /tmp)");
  cmd->add_option("--topic", o->topic,
                  "topic to use, created if missing (default: a new sluice-bench-* topic)");
  cmd->add_option("--partitions", o->partitions_list,
                  "partitions of the topic the bench creates; several (16 1000): the phases on "
                  "a topic of each count in turn (default 16)")
      ->delimiter(',');
  cmd->add_option("--records", o->records,
                  "records in the produce phase (default 5000000; 100000 with --quick)");
  cmd->add_option("--record-size", o->record_size,
                  "value bytes per record (default 256; 4096 with --tiered)");
  cmd->add_option("--acks", o->acks_list,
                  "producer acks, one or more of 0, 1, all: produce and latency with each in "
                  "turn (default 1 all)")
      ->delimiter(',');
  cmd->add_option("--compression", o->compression, "none, gzip, snappy, lz4, zstd")
      ->capture_default_str();
  cmd->add_option("--latency-rate", o->latency_rate,
                  "records/s the latency phase holds (default 100000; 20000 with --cluster)");
  cmd->add_option("--latency-records", o->latency_records,
                  "records in the latency phase (default: 5 s worth; 1 s with --quick)");
  cmd->add_option("--iperf-seconds", o->iperf_seconds,
                  "length of the iperf3 loopback reference (default 3; 1 with --quick)");
  cmd->add_flag("--tls", o->tls,
                "the own broker gets a SASL_SSL listener too; the phases run on PLAINTEXT, "
                "then SASL_SSL (AES-128-GCM), each JSON line saying which");
  cmd->add_flag("--tiered", o->tiered,
                "a consumer reading a 2 GB old range of a tiered topic from S3 (phase "
                "tiered_fetch), beside the S3 GET bandwidth; needs SLUICE_S3_BUCKET and AWS_*");
  cmd->add_flag("--transactions", o->transactions,
                "produce_idempotent and produce_txn (a commit every --commit-interval-ms) "
                "instead of --phases, then a read_committed read-back");
  cmd->add_option("--commit-interval-ms", o->commit_interval_ms,
                  "produce_txn: milliseconds between commits")
      ->capture_default_str();
  cmd->add_option("--phases", o->phases, "phases to run: produce, consume, latency")
      ->delimiter(',');
  cmd->add_option("--producer-config", o->producer_config,
                  "extra librdkafka producer property NAME=VALUE (repeatable)");
  cmd->add_option("--consumer-config", o->consumer_config,
                  "extra librdkafka consumer property NAME=VALUE (repeatable)");
  cmd->add_option("--cluster", o->cluster,
                  "N >= 3: a single broker's acks=1 produce and consume as the reference, then "
                  "etcd and N brokers: replication factor 3 acks=all produce, consume, latency, "
                  "failover, idle replicas");
  cmd->add_option("--etcd-binary", o->etcd_binary, "--cluster: the etcd to start")
      ->capture_default_str();
  cmd->add_option("--session-timeout-ms", o->session_timeout_ms,
                  "--cluster: the brokers' cluster.session_timeout")
      ->capture_default_str();
  cmd->add_option(
      "--failover-kills", o->failover_kills,
      "--cluster: leaders SIGKILLed in the failover phase (default 10; 2 with --quick)");
  cmd->add_option("--failover-rate", o->failover_rate,
                  "--cluster: records/s of the acks=all load during the kills (default 10000)");
  cmd->add_option("--idle-partitions", o->idle_partitions,
                  "--cluster: idle partitions whose memory and descriptors are measured, on the "
                  "single broker and on the cluster (default 1000; 60 with --quick; 0: none)");
  cmd->add_flag("--quick", o->quick, "small sizes, for demos and smoke tests");
  cmd->add_flag("--json", o->json, "one JSON object per phase instead of a table");
}

void AddConsoleBenchOptions(CLI::App* cmd, sluice::bench::ConsoleBenchOptions* o) {
  cmd->add_option("--topics", o->topics, "topics the broker holds")->capture_default_str();
  cmd->add_option("--partitions", o->partitions, "partitions of each")->capture_default_str();
  cmd->add_option("--pipelines", o->pipelines, "pipelines running (each reading one topic)")
      ->capture_default_str();
  cmd->add_option("--pipeline-files", o->pipeline_files,
                  "pipeline files in the folder: --pipelines running, the others stopped")
      ->capture_default_str();
  cmd->add_option("--calls", o->calls, "timed calls of each API list (after 3 not counted)")
      ->capture_default_str();
  cmd->add_option("--page-runs", o->page_runs,
                  "loads of each page in one tab: one cold, the others warm")
      ->capture_default_str();
  cmd->add_option("--cold-runs", o->cold_runs,
                  "cold loads of each page, each in a fresh browser context (the median is the "
                  "cold figure)")
      ->capture_default_str();
  cmd->add_option("--follow-rate", o->follow_rate,
                  "messages/s produced to the topic the page follows")
      ->capture_default_str();
  cmd->add_option("--follow-seconds", o->follow_seconds, "how long the page follows it")
      ->capture_default_str();
  cmd->add_option("--chromium", o->chromium, "the browser")->capture_default_str();
  cmd->add_option("--node", o->node, "the node interpreter that drives it")->capture_default_str();
  cmd->add_option("--node-modules", o->node_modules,
                  "node_modules holding puppeteer-core (default: the source tree's)");
  cmd->add_option("--data-dir", o->data_dir, "work files under DIR/run-<pid> (default: $TMPDIR)");
  cmd->add_option("--sluice", o->sluice_binary, "the sluice binary to run as the broker");
  cmd->add_flag("--json", o->json, "one JSON object instead of the tables");
  cmd->add_flag("--quick", o->quick,
                "100 topics, 2 pipelines, 10 calls, 2 page runs, 3 s following");
}

void AddPipelineBenchOptions(CLI::App* cmd, sluice::bench::PipelineBenchOptions* o) {
  cmd->add_option("--bootstrap", o->bootstrap,
                  "HOST:PORT of a running broker (default: start `sluice serve` as a child)");
  cmd->add_option("--data-dir", o->data_dir,
                  "work files (the own broker's data, pipeline files, logs) go in DIR/run-<pid>, "
                  "removed at the end (default: a new directory under $TMPDIR or /tmp)");
  cmd->add_option("--messages", o->messages,
                  "events published and consumed per run (default 10000000; 200000 with --quick)");
  cmd->add_option("--runs", o->runs,
                  "runs per cell, the median reported (default 3; 1 with --quick)");
  cmd->add_option(
         "--handlers", o->handlers,
         "StructuredBatch, InferredMemBatch (default: both; StructuredBatch with --window)")
      ->delimiter(',');
  cmd->add_option("--batch-sizes", o->batch_sizes, "pipeline batch sizes")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--compression", o->compression, "producer compression: none, lz4, zstd, ...")
      ->capture_default_str();
  cmd->add_option(
      "--consumer-config", o->consumer_config,
      "librdkafka consumer property NAME=VALUE for the pipelines' source.kafka.properties "
      "(repeatable)");
  cmd->add_option("--fetch-max-bytes", o->fetch_max_bytes,
                  "the pipelines' source.kafka.fetch.max_bytes (default: sluice's)");
  cmd->add_option("--fetch-max-partition-bytes", o->fetch_max_partition_bytes,
                  "the pipelines' source.kafka.fetch.max_partition_bytes (default: sluice's)");
  cmd->add_flag("--backlog", o->backlog,
                "check: peak RSS draining all the events within 10% of a run over a tenth of them");
  cmd->add_flag("--paced", o->paced,
                "check: working set over the last minute of a paced run within 10% of minute two's "
                "(--paced-reference)");
  cmd->add_option("--paced-minutes", o->paced_minutes, "length of the paced run")
      ->capture_default_str();
  cmd->add_option("--paced-rate", o->paced_rate, "events/s of the paced run")
      ->capture_default_str();
  cmd->add_option(
         "--paced-reference", o->paced_reference,
         "the minute whose working set the last minute's is compared with (windowed pipelines: "
         "after DuckDB's eviction queues fill, docs/benchmarks.md)")
      ->capture_default_str();
  cmd->add_flag(
         "--window", o->window,
         "windowed pipelines instead (docs/design/0007 #9): tumbling 1m and hopping 5m/1m "
         "pipeline.window, each without and with pipeline.state, per batch size; the state's "
         "cost beside sqlflow's 47%/29%/15% at batch 500/2000/5000 (target: under half); "
         "with --paced, the paced check runs each window in memory and with its state on file")
      ->excludes("--backlog");
  cmd->add_flag(
         "--iceberg", o->iceberg,
         "Iceberg cells instead (docs/design/0009): every event through to an Iceberg table beside "
         "the same pipeline into a noop sink, per batch size (use --batch-sizes 5000,50000), with "
         "the commit latency")
      ->excludes("--backlog")
      ->excludes("--window")
      ->excludes("--paced");
  cmd->add_option("--sink", o->sink,
                  "noop: the plain cells; iceberg: as --iceberg; postgres: every event through to "
                  "a table of a PostgreSQL server the bench starts, beside a noop sink and a plain "
                  "COPY FROM a file of the same rows (the reference), per batch size")
      ->check(CLI::IsMember({"noop", "iceberg", "postgres"}))
      ->capture_default_str();
  cmd->add_option("--postgres-commit-interval-ms", o->postgres_commit_interval_ms,
                  "--sink postgres: the sink's commit_interval_ms (0: a commit per batch)")
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000}))
      ->capture_default_str();
  cmd->add_option("--storage", o->storage,
                  "--iceberg: local (a warehouse directory), or s3: each batch size's Iceberg "
                  "cell also into a table on S3 (AWS_* variables) beside the local one")
      ->check(CLI::IsMember({"local", "s3"}))
      ->capture_default_str();
  cmd->add_option("--s3-warehouse", o->s3_warehouse,
                  "--storage s3: the S3 warehouse (default s3://$SLUICE_S3_BUCKET/"
                  "sluice-bench-pipeline)");
  cmd->add_option("--iceberg-commit-seconds", o->iceberg_commit_seconds,
                  "the Iceberg sink's commit_interval_seconds")
      ->capture_default_str();
  cmd->add_option("--format", o->formats,
                  "json, avro, protobuf: the message formats of the plain cells; json runs too, "
                  "as the reference the others are compared with (docs/design/0022)")
      ->delimiter(',')
      ->excludes("--window")
      ->excludes("--iceberg");
  cmd->add_flag("--in-process", o->in_process,
                "each plain cell (and --sink postgres's cells) over both sources: Kafka (`sluice "
                "pipeline run`, librdkafka) and in-process (the pipeline inside the bench's own "
                "`sluice serve`; "
                "docs/design/0023)")
      ->excludes("--window")
      ->excludes("--iceberg");
  cmd->add_flag("--quick", o->quick, "small sizes, for smoke tests");
  cmd->add_flag("--json", o->json, "one JSON object per cell instead of a table");
}

void AddQueryBenchOptions(CLI::App* cmd, sluice::bench::QueryBenchOptions* o) {
  cmd->add_option("--rows", o->rows, "sales rows (the full comparison: 150000000)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "the generator's seed")->capture_default_str();
  cmd->add_option("--files", o->files, "Parquet files of the sales table")->capture_default_str();
  cmd->add_option(
      "--data-dir", o->data_dir,
      "generated data is kept in DIR/rows-N-seed-S-*/ and reused; runs work in DIR/work-<pid> "
      "(default: $XDG_CACHE_HOME/sluice/bench-query, else /tmp/sluice-bench-query)");
  cmd->add_option("--queries", o->queries,
                  "q1 filter, q2 join aggregate, q3 latest row per customer, q4 group-by")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--engines", o->engines, "duckdb, polars, sluice-iceberg, sluice-parquet")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "threads every engine gets")->capture_default_str();
  cmd->add_option("--memory-settings", o->memory_settings,
                  "memory settings, each a round of every query and engine: 3GB, 1GB, 512MiB, ...")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--cap-gib", o->cap_gib, "a run's process tree is killed above this RSS (GiB)")
      ->capture_default_str();
  cmd->add_option("--runs", o->runs, "runs per cell; the median of the finished is reported")
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "seconds after which a run is killed (not finished)")
      ->capture_default_str();
  cmd->add_option("--node", o->node, "the node interpreter of the polars engine")
      ->capture_default_str();
  cmd->add_option("--node-modules", o->node_modules,
                  "node_modules holding nodejs-polars (default: the source tree's)");
  cmd->add_option(
      "--chart", o->chart,
      "write a PNG of median time and peak RSS per engine and query (gnuplot; installed with "
      "apt-get when missing)");
  cmd->add_flag("--keep-work", o->keep_work, "keep each run's logs and spill directory");
  cmd->add_flag("--json", o->json,
                "one JSON object per engine, query and memory setting instead of a table");
  cmd->add_option("--json-file", o->json_file,
                  "also append those JSON objects to FILE (beside the table)");
  cmd->add_option("--storage", o->storage,
                  "local: the generated warehouse; s3: the same tables copied to S3 (AWS_* "
                  "variables), queried cold and warm beside the local ones")
      ->check(CLI::IsMember({"local", "s3"}))
      ->capture_default_str();
  cmd->add_flag("--small-statements", o->small_statements,
                "instead of the queries: statements a second of --clients sessions sending "
                "SELECT 1, psql's \\d catalog query and a lake point lookup back to back, beside "
                "a PostgreSQL started in the same run");
  cmd->add_option("--clients", o->clients, "--small-statements: sessions sending at once")
      ->capture_default_str();
  cmd->add_option("--statement-seconds", o->statement_seconds,
                  "--small-statements: seconds each statement is sent (after 1 s not counted)")
      ->capture_default_str();
  cmd->add_option("--s3-warehouse", o->s3_warehouse,
                  "--storage s3: the S3 prefix the tables are copied under (default "
                  "s3://$SLUICE_S3_BUCKET/sluice-bench-query)");
}

// `sluice serve` flags; each one set overrides the config file's key.
struct ServeFlags {
  std::string config_file;
  std::string kafka_addr, advertised_addr, data_dir, flush_policy;
  int64_t flush_ms = 0;
  int shards = 0;
  std::string pipelines_dir;
  int64_t pipelines_budget_mib = 0;  // 0: half the machine's memory
  std::string http_addr;
  std::string warehouse;
  std::string pg_addr;
  std::string schema_registry_addr;
  std::string node_id;  // kept as text: the config checks it (and says where it came from)
  std::string etcd, inter_broker_addr;
  bool check_config = false;
  bool log_level_given = false;   // --log-level on the command line: log.level is not read
  bool log_format_given = false;  // --log-format: log.format is not read
};

// The settings `sluice serve` runs with: the config file's, with the flags set over them.
sluice::Result<sluice::Config> ServeConfigOf(const ServeFlags& f) {
  sluice::Config config;
  if (!f.config_file.empty()) {
    ASSIGN_OR_RETURN(config, sluice::Config::LoadFile(f.config_file));
  }
  if (!f.kafka_addr.empty()) config.Set("kafka.addr", f.kafka_addr, "--kafka-addr");
  if (!f.advertised_addr.empty())
    config.Set("kafka.advertised_addr", f.advertised_addr, "--advertised-addr");
  if (!f.data_dir.empty()) config.Set("data_dir", f.data_dir, "--data-dir");
  if (!f.flush_policy.empty()) config.Set("storage.flush.policy", f.flush_policy, "--flush-policy");
  if (f.flush_ms > 0) config.Set("storage.flush.ms", std::to_string(f.flush_ms), "--flush-ms");
  if (f.shards > 0) config.Set("shards", std::to_string(f.shards), "--shards");
  if (!f.http_addr.empty()) config.Set("http.addr", f.http_addr, "--http-addr");
  if (!f.warehouse.empty()) config.Set("warehouse", f.warehouse, "--warehouse");
  if (!f.pg_addr.empty()) config.Set("query.pg_addr", f.pg_addr, "--pg-addr");
  if (!f.schema_registry_addr.empty()) {
    config.Set("schema_registry.addr", f.schema_registry_addr, "--schema-registry-addr");
  }
  if (!f.node_id.empty()) config.Set("node_id", f.node_id, "--node-id");
  if (!f.etcd.empty()) config.Set("etcd", f.etcd, "--etcd");
  if (!f.inter_broker_addr.empty())
    config.Set("inter_broker_addr", f.inter_broker_addr, "--inter-broker-addr");
  return config;
}

// One line of what `sluice serve` says on stdout: "sluice: <line>", or with log.format
// json a log line of logger "serve" (at warn for a "warning: ..." line).
void Say(std::string_view line, sluice::LogLevel level = sluice::LogLevel::kInfo) {
  if (line.starts_with("warning:")) level = sluice::LogLevel::kWarn;
  std::fflush(stdout);
  sluice::SayLine(STDOUT_FILENO, "sluice", level, "serve", line);
}

// A failure of `sluice serve` on stderr: "sluice serve: <line>", or with log.format json a
// log line of logger "serve" at error.
void SayError(std::string_view line) {
  sluice::SayLine(STDERR_FILENO, "sluice serve", sluice::LogLevel::kError, "serve", line);
}

void ApplyLogSettings(const sluice::app::LogSettings& log, const ServeFlags& f) {
  if (!f.log_level_given) sluice::SetLogLevel(log.level);
  if (!f.log_format_given) sluice::SetLogFormat(log.format);
}

// systemd's notify protocol (Type=notify): a socket that cannot be reached is said once.
void Notify(std::string_view state) {
  static bool said = false;
  if (sluice::Status st = sluice::NotifyServiceManager(state); !st.ok() && !said) {
    said = true;
    Say(fmt::format("warning: cannot tell the service manager: {}", st.message()));
  }
}

// /metrics' sluice_build_info: 1, labelled with what this binary is.
void RegisterBuildInfo() {
  const sluice::cli::BuildInfo& b = sluice::cli::GetBuildInfo();
  sluice::MetricsRegistry::Global()
      .GetGauge("sluice_build_info", "The sluice binary: its version, commit and build type",
                {{"version", std::string(b.version)},
                 {"commit", std::string(b.commit)},
                 {"build_type", std::string(b.build_type)}})
      .Set(1);
}

// SIGHUP: what can change while running is read again: the config file's log.level and
// log.format, the tls: section's certificate and key, and the pipelines folder. Other keys
// that differ from `started` (what the process started with) are named as waiting for a
// restart, and a key the next start would refuse as unknown is named too. A file that no
// longer loads changes nothing.
void Reload(const ServeFlags& f, const sluice::Config& started,
            sluice::app::ServeProcess& process) {
  using sluice::LogLevel;
  if (!f.config_file.empty()) {
    sluice::Result<sluice::Config> next = ServeConfigOf(f);
    sluice::Result<sluice::app::LogSettings> log =
        next.ok() ? sluice::app::LogSettingsFrom(*next)
                  : sluice::Result<sluice::app::LogSettings>(next.status());
    if (!log.ok()) {
      Say(fmt::format("SIGHUP: {} not read again, nothing changed: {}", f.config_file,
                      log.status().message()),
          LogLevel::kWarn);
    } else {
      ApplyLogSettings(*log, f);
      std::vector<std::string> waiting;
      for (std::string& key : sluice::Config::ChangedKeys(started, *next)) {
        if (key != "log.level" && key != "log.format") waiting.push_back(std::move(key));
      }
      Say(fmt::format("SIGHUP: {} read again (log level {}{}, log format {}){}", f.config_file,
                      sluice::LogLevelName(sluice::GetLogLevel()),
                      f.log_level_given ? " from --log-level" : "",
                      log->format == sluice::LogFormat::kJson ? "json" : "text",
                      waiting.empty() ? ""
                                      : fmt::format("; changed, used after a restart: {}",
                                                    fmt::join(waiting, ", "))),
          waiting.empty() ? LogLevel::kInfo : LogLevel::kWarn);
      if (sluice::Status known = next->CheckKnown(sluice::app::ServeConfigKeys()); !known.ok()) {
        Say(fmt::format("warning: SIGHUP: the next start would refuse {}: {}", f.config_file,
                        known.message()));
      }
    }
  }
  // The old certificate stays in use when the new files do not load (the error says why).
  sluice::Status st = process.ReloadTls();
  if (!process.has_tls()) {
    // No tls: section, nothing to reload.
  } else if (st.ok()) {
    Say("SIGHUP: TLS certificate and key reloaded");
  } else {
    Say(fmt::format("SIGHUP: TLS reload failed, the certificate in use stays: {}", st.ToString()),
        LogLevel::kWarn);
  }
  if (sluice::app::PipelineSet* pipelines = process.pipelines()) {
    auto reloaded = pipelines->Reload();
    if (!reloaded.ok()) {
      Say(fmt::format("SIGHUP: pipelines folder not reloaded: {}", reloaded.status().message()),
          LogLevel::kWarn);
    } else {
      Say(fmt::format("SIGHUP: pipelines folder read again: {} added, {} removed, {} restarted",
                      reloaded->added.size(), reloaded->removed.size(),
                      reloaded->restarted.size()));
    }
  }
}

// Runs `sluice serve` (app::ServeProcess) until SIGTERM or SIGINT; SIGHUP reloads what can
// be reloaded (Reload). The signals are blocked in every thread (the threads started later
// inherit the mask) and read from a signalfd here, so no work happens in a signal handler.
// Under systemd (Type=notify) it says READY=1 once every part runs, RELOADING=1 while
// reloading and STOPPING=1 when stopping.
int RunServe(const ServeFlags& f) {
  sluice::Result<sluice::Config> loaded = ServeConfigOf(f);
  if (!loaded.ok()) {
    std::fprintf(stderr, "sluice serve: %s\n", loaded.status().message().c_str());
    return 2;
  }
  sluice::Config config = std::move(*loaded);
  sluice::Result<sluice::app::LogSettings> log = sluice::app::LogSettingsFrom(config);
  if (!log.ok()) {
    std::fprintf(stderr, "sluice serve: %s\n", log.status().message().c_str());
    return 2;
  }
  ApplyLogSettings(*log, f);

  sluice::app::ServeOptions options;
  options.pipelines_dir = f.pipelines_dir;
  options.pipelines_memory_budget_bytes = f.pipelines_budget_mib << 20;
  options.on_banner = [](const std::string& line) { Say(line); };
  if (f.check_config) {
    // Nothing is made or listened on; what would run is said.
    options.check_only = true;
    auto checked = sluice::app::ServeProcess::Start(config, options);
    if (!checked.ok()) {
      const bool setting = checked.status().code() == sluice::StatusCode::kInvalidArgument;
      std::fprintf(stderr, "sluice serve --check-config: %s\n",
                   (setting ? checked.status().message() : checked.status().ToString()).c_str());
      return setting ? 2 : 1;
    }
    Say(fmt::format("configuration OK ({})",
                    f.config_file.empty() ? "no config file, flags and defaults" : f.config_file));
    return 0;
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  if (pthread_sigmask(SIG_BLOCK, &signals, nullptr) != 0) {
    SayError("cannot block signals");
    return 1;
  }
  int sfd = signalfd(-1, &signals, SFD_CLOEXEC);
  if (sfd < 0) {
    SayError(fmt::format("signalfd: {}", std::strerror(errno)));
    return 1;
  }
  auto process = sluice::app::ServeProcess::Start(config, options);
  if (!process.ok()) {
    // A setting is exit status 2; anything else that failed while starting, 1.
    const bool setting = process.status().code() == sluice::StatusCode::kInvalidArgument;
    SayError(setting ? process.status().message() : process.status().ToString());
    ::close(sfd);
    return setting ? 2 : 1;
  }
  Notify(fmt::format("READY=1\nSTATUS=serving Kafka on port {}\nMAINPID={}",
                     (*process)->kafka_port(), ::getpid()));

  signalfd_siginfo info{};
  ssize_t n;
  while (true) {
    do {
      n = ::read(sfd, &info, sizeof(info));
    } while (n < 0 && errno == EINTR);
    if (n != sizeof(info) || info.ssi_signo != SIGHUP) break;
    // MONOTONIC_USEC: CLOCK_MONOTONIC, as systemd reads it.
    Notify(fmt::format("RELOADING=1\nMONOTONIC_USEC={}", sluice::MonotonicNanos() / 1000));
    Reload(f, config, **process);
    Notify(fmt::format("READY=1\nSTATUS=serving Kafka on port {}", (*process)->kafka_port()));
  }
  ::close(sfd);
  Notify("STOPPING=1\nSTATUS=stopping");
  Say(fmt::format("{}, stopping", n == sizeof(info) ? strsignal(static_cast<int>(info.ssi_signo))
                                                    : "signalfd failed"));
  if (sluice::Status st = (*process)->Stop(); !st.ok()) {
    SayError(fmt::format("closing logs: {}", st.ToString()));
    return 1;
  }
  Say("stopped");
  return n == sizeof(info) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "sluice: a Kafka-compatible broker, SQL pipelines and SQL over lake tables, in one binary"};
  // 0 or 1 here, checked after parsing: with exactly 1 required, CLI11 reports an
  // unknown subcommand as "a subcommand is required", which misleads.
  app.require_subcommand(0, 1);
  std::string log_level = "info";
  CLI::Option* log_level_flag =
      app.add_option("--log-level", log_level,
                     "debug, info, warn, error or off (overrides serve's log.level)")
          ->capture_default_str();
  app.add_flag_callback(
      "--version",
      [] {
        const sluice::cli::BuildInfo& b = sluice::cli::GetBuildInfo();
        fmt::print("sluice {} ({})\n", b.version, b.commit);
        std::exit(0);
      },
      "print sluice's version and commit, and exit");
  std::string log_format = "text";
  CLI::Option* log_format_flag =
      app.add_option("--log-format", log_format,
                     "text, or json: one JSON object per line (overrides serve's log.format)")
          ->check(CLI::IsMember({"text", "json"}))
          ->capture_default_str();

  auto* version = app.add_subcommand("version", "print versions of sluice and its libraries");

  sluice::bench::KafkaBenchOptions demo_opts;
  auto* demo = app.add_subcommand(
      "demo",
      "run sluice's main job end to end: start the broker, produce to it and consume "
      "back with a Kafka client (sluice bench kafka --quick), stop it");
  demo->add_option("--data-dir", demo_opts.data_dir,
                   "the broker's data goes in DIR/run-<pid>, removed at the end (default: a new "
                   "directory under $TMPDIR or /tmp)");

  ServeFlags serve_flags;
  auto* serve = app.add_subcommand(
      "serve",
      "run the Kafka-compatible broker until SIGTERM or SIGINT (settings: docs/config.md)");
  serve->add_option("--config", serve_flags.config_file, "YAML config file; flags override it");
  serve->add_option("--kafka-addr", serve_flags.kafka_addr,
                    "listen address HOST:PORT (default 127.0.0.1:9092; port 0: any free port)");
  serve->add_option("--advertised-addr", serve_flags.advertised_addr,
                    "HOST:PORT clients are told to connect to (default: the listen address)");
  serve->add_option("--data-dir", serve_flags.data_dir,
                    "directory of the topics and logs (default ./sluice-data)");
  serve->add_option("--flush-policy", serve_flags.flush_policy,
                    "interval (fdatasync every --flush-ms; the default) or durable (fdatasync "
                    "after every write group; consumers see only durable data). acks=all is "
                    "answered after the fdatasync that covers the batch under both");
  serve
      ->add_option("--flush-ms", serve_flags.flush_ms,
                   "fdatasync interval of the interval policy (default 100)")
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}));
  serve->add_option("--shards", serve_flags.shards, "event loop threads (default: one per core)")
      ->check(CLI::Range(1, 256));

  serve->add_option(
      "--pipelines", serve_flags.pipelines_dir,
      "run every pipeline file (*.yml, *.yaml) in DIR beside the broker; the console writes "
      "the pipelines it makes there (default DATA_DIR/pipelines; off: none; docs/pipelines.md)");
  serve
      ->add_option(
          "--pipelines-memory-budget", serve_flags.pipelines_budget_mib,
          "MiB the pipelines' duckdb.memory_limit may add up to (default: half the memory)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  serve->add_option(
      "--http-addr", serve_flags.http_addr,
      "HOST:PORT of the HTTP port: /metrics (Prometheus), /healthz and, with --warehouse, the "
      "Iceberg REST catalog at /v1 (default 127.0.0.1:8181; port 0: any free port; off: none)");
  serve->add_option(
      "--warehouse", serve_flags.warehouse,
      "serve the Iceberg tables of DIR or s3://bucket/prefix (the iceberg sink's warehouse) "
      "as an Iceberg REST catalog on the HTTP port (default DATA_DIR/warehouse while the HTTP "
      "port is on and no catalog.uri is set; off: none; docs/design/0009, 0024)");
  serve->add_option(
      "--pg-addr", serve_flags.pg_addr,
      "HOST:PORT of the query server's Postgres wire protocol port (default 127.0.0.1:5433; "
      "port 0: any free port; off: none; docs/design/0010-query-server.md)");
  serve->add_option(
      "--schema-registry-addr", serve_flags.schema_registry_addr,
      "HOST:PORT of the Schema Registry (Confluent's REST API; default 127.0.0.1:8081; port 0: "
      "any free port; off: none; docs/design/0022-schemas.md)");

  serve->add_flag("--check-config", serve_flags.check_config,
                  "check the settings (config file, flags, pipeline files) as serve would, say "
                  "what would run, and exit: 0 when they are good, 2 with what is wrong; "
                  "nothing is made or listened on");
  serve->add_option("--node-id", serve_flags.node_id,
                    "this broker's id in a cluster (0 or more; with --etcd)");
  serve->add_option("--etcd", serve_flags.etcd,
                    "etcd endpoints http://HOST:PORT[,...]: run as one broker of a cluster whose "
                    "metadata lives there (docs/design/0018-cluster.md; default: a single broker)");
  serve->add_option("--inter-broker-addr", serve_flags.inter_broker_addr,
                    "HOST:PORT other brokers reach this one at (replica fetches; default: the "
                    "advertised address)");

  auto* pipeline_cmd =
      app.add_subcommand("pipeline", "SQL pipelines: sqlflow-format files (docs/pipelines.md)");
  pipeline_cmd->require_subcommand(0, 1);
  sluice::cli::PipelineRunFlags run_flags;
  auto* pipeline_run = pipeline_cmd->add_subcommand(
      "run", "run one pipeline in the foreground until SIGTERM or SIGINT");
  pipeline_run->add_option("file", run_flags.file, "pipeline file")->required();
  pipeline_run->add_option(
      "--http-addr", run_flags.http_addr,
      "HOST:PORT of the HTTP port: /metrics and /healthz (default and off: none)");
  pipeline_run->add_flag("!--no-progress", run_flags.progress, "no progress line on the terminal");
  std::string validate_file;
  auto* pipeline_validate =
      pipeline_cmd->add_subcommand("validate", "check a pipeline file without running it");
  pipeline_validate->add_option("file", validate_file, "pipeline file")->required();
  std::string invoke_file, invoke_fixture;
  auto* pipeline_invoke =
      pipeline_cmd->add_subcommand("invoke",
                                   "run the handler over a file of JSON messages (one per line), "
                                   "no broker; print the rows as JSON lines");
  pipeline_invoke->add_option("file", invoke_file, "pipeline file")->required();
  pipeline_invoke->add_option("fixture", invoke_fixture, "JSON lines file")->required();

  sluice::cli::SqlFlags sql_flags;
  auto* sql = app.add_subcommand("sql",
                                 "run SQL on an in-memory DuckDB (read_parquet, read_json, ...) "
                                 "and print the last statement's rows");
  sql->add_option("query", sql_flags.sql,
                  "the SQL (several statements: each runs; '-' or none: read standard input)");
  sql->add_flag("--json", sql_flags.json, "one JSON object per row instead of a table");
  sql->add_option(
      "--warehouse", sql_flags.warehouse,
      "answer lake.<ns>.<table> from this warehouse's Iceberg tables (default $SLUICE_WAREHOUSE)");
  sql->add_option("--catalog-uri", sql_flags.catalog_uri,
                  "answer lake.<ns>.<table> from this Iceberg REST catalog instead (http(s)://"
                  "host:port; login from $SLUICE_CATALOG_CREDENTIAL id:secret or "
                  "$SLUICE_CATALOG_TOKEN)")
      ->excludes("--warehouse");
  sql->add_option("--catalog-warehouse", sql_flags.catalog_warehouse,
                  "the REST catalog's warehouse name (sent to /v1/config)");
  sql->add_option("--bootstrap", sql_flags.bootstrap, "a Kafka broker HOST:PORT for topic('name')");
  sql->add_option("--memory-limit", sql_flags.memory_limit_mib, "DuckDB memory limit in MiB")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 30));

  auto* bench = app.add_subcommand("bench", "benchmarks; each prints a table and what it ran on");
  bench->require_subcommand(0, 1);
  sluice::bench::DiskBenchOptions disk_opts;
  auto* disk =
      bench->add_subcommand("disk", "storage engine append rate beside the raw disk write rate");
  AddDiskBenchOptions(disk, &disk_opts);
  sluice::bench::CompactionBenchOptions compaction_opts;
  auto* compaction = bench->add_subcommand(
      "compaction",
      "the log cleaner: input MB/s cleaned beside reading the same segments, and its peak "
      "memory beside its buffer");
  AddCompactionBenchOptions(compaction, &compaction_opts);
  sluice::bench::KafkaBenchOptions kafka_opts;
  auto* kafka = bench->add_subcommand(
      "kafka",
      "broker produce and consume rates and produce latency through librdkafka, beside "
      "loopback TCP (iperf3)");
  AddKafkaBenchOptions(kafka, &kafka_opts);
  sluice::bench::PipelineBenchOptions pipeline_bench_opts;
  auto* pipeline_bench = bench->add_subcommand(
      "pipeline",
      "SQL pipeline rate, peak RSS and working set per handler and batch size (sqlflow's "
      "benchmark), beside plain DuckDB; --window: windowed, without and with durable state");
  AddPipelineBenchOptions(pipeline_bench, &pipeline_bench_opts);
  sluice::bench::ConsoleBenchOptions console_bench_opts;
  auto* console_bench = bench->add_subcommand(
      "console",
      "the web console: its API's list calls and its pages in chromium (load, long tasks, "
      "following a topic at 10K msgs/s) beside 1,000 topics, against issue 28's targets");
  AddConsoleBenchOptions(console_bench, &console_bench_opts);
  sluice::bench::QueryBenchOptions query_bench_opts;
  auto* query_bench = bench->add_subcommand(
      "query",
      "the four queries a data engineer writes every week (filter, join aggregate, latest row per "
      "customer, group-by) on a generated star schema, per engine and memory setting, each run a "
      "fresh "
      "process killed above an RSS cap; answers checked against DuckDB's");
  AddQueryBenchOptions(query_bench, &query_bench_opts);
  // The duckdb engine's child process: hidden, started by `bench query` only.
  sluice::bench::QueryChildOptions query_child_opts;
  auto* query_child =
      bench->add_subcommand("query-child", "one query of `bench query` on DuckDB (internal)");
  query_child->group("");
  query_child->add_option("--query", query_child_opts.query)->required();
  query_child->add_option("--sales", query_child_opts.sales_glob);
  query_child->add_option("--products", query_child_opts.products_glob);
  query_child->add_option("--warehouse", query_child_opts.warehouse);  // the lake child
  query_child->add_option("--repeat", query_child_opts.repeat)->check(CLI::Range(1, 100));
  query_child->add_option("--s3-cache-dir", query_child_opts.s3_cache_dir);
  query_child->add_option("--threads", query_child_opts.threads)->check(CLI::Range(1, 1024));
  query_child->add_option("--memory-limit-bytes", query_child_opts.memory_limit_bytes);
  query_child->add_option("--temp-dir", query_child_opts.temp_dir);

  // How `sluice user`, `sluice quota` and `sluice acl` reach a running broker.
  auto add_connection_options = [](CLI::App* c, sluice::cli::AdminConnectionFlags* f) {
    c->add_option("--bootstrap", f->bootstrap,
                  "the broker HOST:PORT (default $SLUICE_KAFKA_ADDR, else 127.0.0.1:9092)");
    c->add_option("--security-protocol", f->security_protocol,
                  "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (default PLAINTEXT, or "
                  "SASL_PLAINTEXT with --sasl-user)");
    c->add_option("--ca-file", f->ca_file, "SSL: the CA the broker's certificate chains to");
    c->add_option("--cert-file", f->cert_file, "SSL: this client's certificate");
    c->add_option("--key-file", f->key_file, "SSL: this client's key");
    c->add_option("--sasl-mechanism", f->sasl_mechanism,
                  "SASL: PLAIN, SCRAM-SHA-256 (default) or SCRAM-SHA-512");
    c->add_option("--sasl-user", f->sasl_user,
                  "SASL: log in as this user, with the password in $SLUICE_SASL_PASSWORD");
  };
  sluice::cli::UserFlags user_flags;
  auto* user_cmd = app.add_subcommand(
      "user",
      "the users of a running broker (Kafka SASL, the query server, the HTTP port): add, passwd, "
      "remove, list, token");
  user_cmd->require_subcommand(0, 1);
  auto add_user = [&](const char* name, const char* what, bool needs_name, bool sets_password) {
    auto* c = user_cmd->add_subcommand(name, what);
    if (needs_name) c->add_option("name", user_flags.name, "the user")->required();
    add_connection_options(c, &user_flags.connection);
    if (sets_password) {
      c->add_option("--mechanism", user_flags.mechanism,
                    "SCRAM-SHA-256, SCRAM-SHA-512 or all (default all)");
      c->add_option("--iterations", user_flags.iterations, "SCRAM iterations (4096 to 16384)");
      c->add_flag("--password-stdin", user_flags.password_stdin,
                  "read the password from stdin instead of asking on the terminal");
    }
    return c;
  };
  auto* user_add =
      add_user("add", "add a user (its password asked, or --password-stdin)", true, true);
  auto* user_passwd = add_user("passwd", "change a user's password", true, true);
  auto* user_remove = add_user("remove", "remove a user and every credential it has", true, false);
  auto* user_list = add_user("list", "the users and their SCRAM credentials", false, false);
  // token asks the HTTP port, not the Kafka listener.
  auto* user_token = user_cmd->add_subcommand(
      "token",
      "print a bearer token for the HTTP port and the Iceberg REST catalog (the user's password "
      "asked, or --password-stdin; POST /v1/oauth/tokens)");
  user_token->add_option("name", user_flags.name, "the user")->required();
  user_token->add_option("--ttl", user_flags.ttl,
                         "the token's lifetime (30m, 12h, 7d; default the server's "
                         "http.token_ttl, at most its http.token_max_ttl)");
  user_token->add_option("--http-addr", user_flags.http_addr,
                         "the HTTP port: HOST:PORT or an http(s):// URL (default 127.0.0.1:8181)");
  user_token->add_option("--cacert", user_flags.cacert,
                         "HTTPS: the CA the port's certificate chains to (implies https)");
  user_token->add_flag("--password-stdin", user_flags.password_stdin,
                       "read the password from stdin instead of asking on the terminal");

  sluice::cli::QuotaFlags quota_flags;
  auto* quota_cmd = app.add_subcommand(
      "quota", "the client quotas of a running broker (per user and client id): set, remove, list");
  quota_cmd->require_subcommand(0, 1);
  auto add_quota = [&](const char* name, const char* what, const char* settings) {
    auto* c = quota_cmd->add_subcommand(name, what);
    add_connection_options(c, &quota_flags.connection);
    c->add_option("--user", quota_flags.user,
                  "the user (its SASL name; ANONYMOUS unauthenticated)");
    c->add_flag("--default-user", quota_flags.default_user, "every user without its own quota");
    c->add_option("--client-id", quota_flags.client_id, "the client id");
    c->add_flag("--default-client-id", quota_flags.default_client_id,
                "every client id without its own quota");
    if (settings != nullptr) {
      auto* o = c->add_option("settings", quota_flags.settings, settings);
      if (std::string_view(name) == "set") o->required();
    }
    return c;
  };
  auto* quota_set =
      add_quota("set", "set quotas of an entity",
                "KEY=VALUE: producer_byte_rate, consumer_byte_rate (bytes/s), request_percentage");
  auto* quota_remove =
      add_quota("remove", "remove quotas of an entity", "the keys to remove (none: every one)");
  auto* quota_list = add_quota("list", "the quotas set (of the entity given, else all)", nullptr);

  sluice::cli::TableFlags table_flags;
  auto* table_cmd = app.add_subcommand(
      "table",
      "the Iceberg tables of a warehouse: list, describe, history, files, compact, expire");
  table_cmd->require_subcommand(0, 1);
  auto add_table = [&](const char* name, const char* what, bool needs_table) {
    auto* c = table_cmd->add_subcommand(name, what);
    auto* warehouse = c->add_option("--warehouse", table_flags.warehouse,
                                    "the warehouse directory (default: $SLUICE_WAREHOUSE)");
    c->add_option("--catalog-uri", table_flags.catalog_uri,
                  "the tables of this Iceberg REST catalog instead (login from "
                  "$SLUICE_CATALOG_CREDENTIAL id:secret or $SLUICE_CATALOG_TOKEN)")
        ->excludes(warehouse);
    c->add_option("--catalog-warehouse", table_flags.catalog_warehouse,
                  "the REST catalog's warehouse name (sent to /v1/config)");
    if (needs_table) {
      c->add_option("table", table_flags.table, "namespace.table")->required();
    } else {
      c->add_option("namespace", table_flags.table, "only the tables of this namespace");
    }
    return c;
  };
  auto* table_list = add_table("list", "the tables of the warehouse", false);
  auto* table_describe =
      add_table("describe", "a table's schema, partitioning, current snapshot, properties", true);
  table_describe->add_flag("--json", table_flags.json, "the current metadata JSON");
  auto* table_history =
      add_table("history", "a table's snapshots, with the Kafka offsets each recorded", true);
  auto* table_files = add_table("files", "the live data files of a table's current snapshot", true);
  auto* table_compact = add_table("compact",
                                  "rewrite a table's small data files into target-sized ones in "
                                  "one snapshot (safe beside pipelines)",
                                  true);
  table_compact->add_option(
      "--target-file-size", table_flags.target_file_size_bytes,
      "bytes per rewritten file; files below 3/4 of it are rewritten (default 134217728)");
  auto* table_expire = add_table("expire",
                                 "remove old snapshots, the files only they used and failed "
                                 "commits' leftovers (safe beside pipelines)",
                                 true);
  table_expire
      ->add_option("--older-than", table_flags.older_than,
                   "snapshots replaced, and unreferenced files written, longer ago than this: 30s, "
                   "5m, 1h, 7d")
      ->required();
  table_expire->add_option(
      "--orphan-min-age", table_flags.orphan_min_age,
      "unreferenced data files and manifests (failed commits) must also be this old, since a "
      "writer's files are unreferenced until it commits (default 1h; 0s for none)");

  sluice::cli::AclFlags acl_flags;
  auto* acl_cmd = app.add_subcommand(
      "acl", "the Kafka ACLs of a running broker (as kafka-acls.sh): add, remove, list");
  acl_cmd->require_subcommand(0, 1);
  auto add_acl = [&](const char* name, const char* what, bool list) {
    auto* c = acl_cmd->add_subcommand(name, what);
    add_connection_options(c, &acl_flags.connection);
    if (list) {
      c->add_option("--principal", acl_flags.principal, "only this principal's (User:alice)");
    } else {
      c->add_option("--allow-principal", acl_flags.allow_principals,
                    "who is allowed: User:NAME, or User:* for everyone (repeatable)");
      c->add_option("--deny-principal", acl_flags.deny_principals,
                    "who is denied (repeatable); a DENY wins over any ALLOW");
      c->add_option("--allow-host", acl_flags.allow_hosts,
                    "the --allow-principal's client address (default *)");
      c->add_option("--deny-host", acl_flags.deny_hosts,
                    "the --deny-principal's client address (default *)");
      c->add_option("--operation", acl_flags.operations,
                    "READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, "
                    "DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE or ALL (repeatable)");
      c->add_flag("--producer", acl_flags.producer,
                  "WRITE, DESCRIBE and CREATE on --topic (and WRITE, DESCRIBE on "
                  "--transactional-id)");
      c->add_flag("--consumer", acl_flags.consumer,
                  "READ and DESCRIBE on --topic, READ on --group");
    }
    c->add_option("--topic", acl_flags.topic, "a topic (or, with prefixed, a topic name prefix)");
    c->add_option("--group", acl_flags.group, "a consumer group");
    c->add_option("--transactional-id", acl_flags.transactional_id, "a transactional id");
    c->add_flag("--cluster", acl_flags.cluster, "the cluster (admin and inter-broker APIs)");
    c->add_option("--resource-pattern-type", acl_flags.pattern_type,
                  list ? "literal, prefixed, any (default) or match (every ACL that applies)"
                       : "literal (default) or prefixed; remove also takes any or match");
    return c;
  };
  auto* acl_add = add_acl("add", "add ACLs (every principal x host x operation x resource)", false);
  auto* acl_remove = add_acl("remove",
                             "remove the ACLs that match (without --operation: of every "
                             "operation; a principal's host is * unless given)",
                             false);
  auto* acl_list =
      add_acl("list", "the ACLs (of the resource and principal given, else all)", true);

  // `sluice topic|group|cluster`: any Kafka cluster over the admin API, rpk's conventions.
  sluice::cli::KafkaCmdFlags kafka_flags;
  auto kafka_common = [&](CLI::App* c) {
    c->add_option("--brokers", kafka_flags.brokers,
                  "HOST:PORT[,...] (default: $SLUICE_BROKERS, else 127.0.0.1:9092)");
    c->add_option("-X", kafka_flags.props,
                  "a librdkafka property KEY=VALUE (repeatable): security.protocol, sasl.*, "
                  "ssl.ca.location, ...");
    c->add_flag("--json", kafka_flags.json, "one JSON document instead of a table");
    c->add_option("--timeout-ms", kafka_flags.timeout_ms, "what a request may take")
        ->check(CLI::Range(int64_t{100}, int64_t{3'600'000}))
        ->capture_default_str();
    return c;
  };
  auto* topic_cmd = app.add_subcommand(
      "topic",
      "topics of any Kafka cluster: list, create, delete, describe, alter-config, "
      "add-partitions, produce, consume");
  topic_cmd->require_subcommand(0, 1);
  auto* topic_list = kafka_common(topic_cmd->add_subcommand("list", "every topic"));
  topic_list->alias("ls");
  topic_list->add_flag("-i,--internal", kafka_flags.internal, "the __ topics too");
  auto* topic_create = kafka_common(topic_cmd->add_subcommand("create", "create topics"));
  topic_create->add_option("topics", kafka_flags.topics, "names")->required();
  topic_create->add_option("-p,--partitions", kafka_flags.partitions,
                           "partitions (default: the broker's)");
  topic_create->add_option("-r,--replicas", kafka_flags.replicas,
                           "replication factor (default: the broker's)");
  topic_create->add_option("-c,--topic-config", kafka_flags.configs, "KEY=VALUE (repeatable)");
  auto* topic_delete = kafka_common(topic_cmd->add_subcommand("delete", "delete topics"));
  topic_delete->add_option("topics", kafka_flags.topics, "names")->required();
  auto* topic_describe = kafka_common(
      topic_cmd->add_subcommand("describe", "a topic's summary, configs and partitions"));
  topic_describe->add_option("topics", kafka_flags.topics, "names")->required();
  auto* topic_alter = kafka_common(
      topic_cmd->add_subcommand("alter-config", "set or remove topic configs (others kept)"));
  topic_alter->add_option("topics", kafka_flags.topics, "names")->required();
  topic_alter->add_option("-s,--set", kafka_flags.configs, "KEY=VALUE (repeatable)");
  topic_alter->add_option("-d,--delete", kafka_flags.remove,
                          "KEY: back to the default (repeatable)");
  auto* topic_add_partitions =
      kafka_common(topic_cmd->add_subcommand("add-partitions", "raise a topic's partition count"));
  topic_add_partitions->add_option("topics", kafka_flags.topics, "names")->required();
  topic_add_partitions
      ->add_option("-n,--num", kafka_flags.add_partitions_total, "the new partition count")
      ->required();
  auto* topic_produce = kafka_common(topic_cmd->add_subcommand(
      "produce", "each line of stdin as a record (acks=all); where each went on stdout"));
  topic_produce->add_option("topics", kafka_flags.topics, "the topic")->required();
  topic_produce->add_option("-k,--key", kafka_flags.key, "every record's key");
  topic_produce->add_option("-K,--key-separator", kafka_flags.key_separator,
                            "each line is KEY<SEP>VALUE");
  topic_produce->add_option("-H,--header", kafka_flags.headers, "a header KEY=VALUE (repeatable)");
  topic_produce->add_option("-p,--partition", kafka_flags.partition,
                            "the partition (default: by key, or spread)");
  auto* topic_consume = kafka_common(topic_cmd->add_subcommand(
      "consume", "print records (one JSON line each, or -f); follows until stopped"));
  topic_consume->add_option("topics", kafka_flags.topics, "the topic(s)")->required();
  topic_consume
      ->add_option("-o,--offset", kafka_flags.offset,
                   "start, end, N, -N (N before the end), +N (N after the start) or @TIME")
      ->capture_default_str();
  topic_consume->add_option("--from-time", kafka_flags.from_time,
                            "start at this time (RFC 3339, YYYY-MM-DD, or ms since 1970)");
  topic_consume->add_option("-n,--num", kafka_flags.count, "stop after this many records");
  topic_consume->add_flag("-e,--exit-at-end", kafka_flags.exit_at_end,
                          "stop at the end of each partition (as it was when reading began)");
  topic_consume->add_option("-p,--partition", kafka_flags.partition, "one partition only");
  topic_consume->add_option("-g,--group", kafka_flags.group,
                            "read as a member of this group (committing as it goes)");
  topic_consume->add_option(
      "-f,--format", kafka_flags.format,
      "%t topic, %p partition, %o offset, %d timestamp, %k key, %v value, %h headers, \\n");
  auto* group_cmd = app.add_subcommand(
      "group", "consumer groups of any Kafka cluster: list, describe, reset-offsets, delete");
  group_cmd->require_subcommand(0, 1);
  auto* group_list = kafka_common(group_cmd->add_subcommand("list", "every group"));
  group_list->alias("ls");
  auto* group_describe =
      kafka_common(group_cmd->add_subcommand("describe", "a group's members, offsets and lag"));
  group_describe->add_option("groups", kafka_flags.topics, "group ids")->required();
  auto* group_reset = kafka_common(group_cmd->add_subcommand(
      "reset-offsets",
      "move a group's committed offsets (a preview without --execute); the "
      "group must have no members"));
  group_reset->add_option("group", kafka_flags.topics, "the group id")->required();
  group_reset->add_option("--topic", kafka_flags.reset_topics, "TOPIC or TOPIC:P,P (repeatable)")
      ->required();
  auto* to_earliest = group_reset->add_flag_callback(
      "--to-earliest", [&] { kafka_flags.reset_to = "earliest"; }, "the log start");
  auto* to_latest = group_reset->add_flag_callback(
      "--to-latest", [&] { kafka_flags.reset_to = "latest"; }, "the log end");
  auto* to_offset = group_reset->add_option_function<int64_t>(
      "--to-offset",
      [&](const int64_t& v) {
        kafka_flags.reset_to = "offset";
        kafka_flags.reset_offset = v;
      },
      "this offset (clamped to the log)");
  auto* to_datetime = group_reset->add_option_function<std::string>(
      "--to-datetime",
      [&](const std::string& v) {
        kafka_flags.reset_to = "datetime";
        kafka_flags.reset_datetime = v;
      },
      "the first record at or after this time (RFC 3339, YYYY-MM-DD or ms)");
  to_earliest->excludes(to_latest)->excludes(to_offset)->excludes(to_datetime);
  to_latest->excludes(to_offset)->excludes(to_datetime);
  to_offset->excludes(to_datetime);
  group_reset->add_flag("--execute", kafka_flags.execute, "change them (else only show)");
  auto* group_delete = kafka_common(group_cmd->add_subcommand("delete", "delete empty groups"));
  group_delete->add_option("groups", kafka_flags.topics, "group ids")->required();
  auto* cluster_cmd = app.add_subcommand("cluster", "a Kafka cluster: info");
  cluster_cmd->require_subcommand(0, 1);
  auto* cluster_info =
      kafka_common(cluster_cmd->add_subcommand("info", "the cluster id, controller and brokers"));
  cluster_info->alias("metadata");

  CLI11_PARSE(app, argc, argv);
  if (acl_cmd->parsed() && acl_cmd->get_subcommands().empty()) {
    std::fputs(acl_cmd->help().c_str(), stderr);
    return 2;
  }
  if (table_cmd->parsed() && table_cmd->get_subcommands().empty()) {
    std::fputs(table_cmd->help().c_str(), stderr);
    return 2;
  }
  if (user_cmd->parsed() && user_cmd->get_subcommands().empty()) {
    std::fputs(user_cmd->help().c_str(), stderr);
    return 2;
  }
  for (CLI::App* parent : {topic_cmd, group_cmd, cluster_cmd}) {
    if (parent->parsed() && parent->get_subcommands().empty()) {
      std::fputs(parent->help().c_str(), stderr);
      return 2;
    }
  }
  if (quota_cmd->parsed() && quota_cmd->get_subcommands().empty()) {
    std::fputs(quota_cmd->help().c_str(), stderr);
    return 2;
  }
  if (app.get_subcommands().empty() || (bench->parsed() && bench->get_subcommands().empty()) ||
      (pipeline_cmd->parsed() && pipeline_cmd->get_subcommands().empty())) {
    std::fputs((bench->parsed()          ? bench->help()
                : pipeline_cmd->parsed() ? pipeline_cmd->help()
                                         : app.help())
                   .c_str(),
               stderr);
    return 2;
  }

  auto level = sluice::ParseLogLevel(log_level);
  if (!level.ok()) {
    std::fprintf(stderr, "sluice: %s\n", level.status().message().c_str());
    return 2;
  }
  sluice::SetLogLevel(*level);
  if (log_format_flag->count() > 0) {
    sluice::SetLogFormat(log_format == "json" ? sluice::LogFormat::kJson
                                              : sluice::LogFormat::kText);
  }
  // /metrics of serve and of pipeline run: what this binary is.
  if (serve->parsed() || pipeline_run->parsed()) RegisterBuildInfo();

  if (version->parsed()) {
    const sluice::cli::BuildInfo& b = sluice::cli::GetBuildInfo();
    fmt::print("sluice {}\ncommit {}\nbuild {} ({})\nduckdb {}\nlibrdkafka {}\ncrc32c {}\n",
               b.version, b.commit, b.build_type, b.compiler, sluice::duck::LibraryVersion(),
               sluice::kafka::client::LibraryVersion(),
               sluice::crc32c::HardwareAccelerated() ? "sse4.2" : "portable");
    return 0;
  }
  if (demo->parsed()) return sluice::bench::RunKafkaDemo(demo_opts);
  if (serve->parsed()) {
    serve_flags.log_level_given = log_level_flag->count() > 0;
    serve_flags.log_format_given = log_format_flag->count() > 0;
    return RunServe(serve_flags);
  }
  if (sql->parsed()) return sluice::cli::RunSql(sql_flags);
  if (user_add->parsed()) return sluice::cli::RunUserAdd(user_flags);
  if (user_passwd->parsed()) return sluice::cli::RunUserPasswd(user_flags);
  if (user_remove->parsed()) return sluice::cli::RunUserRemove(user_flags);
  if (user_list->parsed()) return sluice::cli::RunUserList(user_flags);
  if (user_token->parsed()) return sluice::cli::RunUserToken(user_flags);
  if (acl_add->parsed()) return sluice::cli::RunAclAdd(acl_flags);
  if (acl_remove->parsed()) return sluice::cli::RunAclRemove(acl_flags);
  if (acl_list->parsed()) return sluice::cli::RunAclList(acl_flags);
  if (topic_list->parsed()) return sluice::cli::RunTopicList(kafka_flags);
  if (topic_create->parsed()) return sluice::cli::RunTopicCreate(kafka_flags);
  if (topic_delete->parsed()) return sluice::cli::RunTopicDelete(kafka_flags);
  if (topic_describe->parsed()) return sluice::cli::RunTopicDescribe(kafka_flags);
  if (topic_alter->parsed()) return sluice::cli::RunTopicAlterConfig(kafka_flags);
  if (topic_add_partitions->parsed()) return sluice::cli::RunTopicAddPartitions(kafka_flags);
  if (topic_produce->parsed()) return sluice::cli::RunTopicProduce(kafka_flags);
  if (topic_consume->parsed()) return sluice::cli::RunTopicConsume(kafka_flags);
  if (group_list->parsed()) return sluice::cli::RunGroupList(kafka_flags);
  if (group_describe->parsed()) return sluice::cli::RunGroupDescribe(kafka_flags);
  if (group_reset->parsed()) return sluice::cli::RunGroupResetOffsets(kafka_flags);
  if (group_delete->parsed()) return sluice::cli::RunGroupDelete(kafka_flags);
  if (cluster_info->parsed()) return sluice::cli::RunClusterInfo(kafka_flags);
  if (quota_set->parsed()) return sluice::cli::RunQuotaSet(quota_flags);
  if (quota_remove->parsed()) return sluice::cli::RunQuotaRemove(quota_flags);
  if (quota_list->parsed()) return sluice::cli::RunQuotaList(quota_flags);
  if (table_list->parsed()) return sluice::cli::RunTableList(table_flags);
  if (table_describe->parsed()) return sluice::cli::RunTableDescribe(table_flags);
  if (table_history->parsed()) return sluice::cli::RunTableHistory(table_flags);
  if (table_files->parsed()) return sluice::cli::RunTableFiles(table_flags);
  if (table_compact->parsed()) return sluice::cli::RunTableCompact(table_flags);
  if (table_expire->parsed()) return sluice::cli::RunTableExpire(table_flags);
  if (pipeline_run->parsed()) return sluice::cli::RunPipelineRun(run_flags);
  if (pipeline_validate->parsed()) return sluice::cli::RunPipelineValidate(validate_file);
  if (pipeline_invoke->parsed()) return sluice::cli::RunPipelineInvoke(invoke_file, invoke_fixture);
  if (disk->parsed()) return sluice::bench::RunDiskBench(disk_opts);
  if (compaction->parsed()) return sluice::bench::RunCompactionBench(compaction_opts);
  if (kafka->parsed()) return sluice::bench::RunKafkaBench(kafka_opts);
  if (pipeline_bench->parsed()) return sluice::bench::RunPipelineBench(pipeline_bench_opts);
  if (console_bench->parsed()) return sluice::bench::RunConsoleBench(console_bench_opts);
  if (query_bench->parsed()) return sluice::bench::RunQueryBench(query_bench_opts);
  if (query_child->parsed()) return sluice::bench::RunQueryChild(query_child_opts);
  return 0;
}
