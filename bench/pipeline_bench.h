// `sluice bench pipeline`: SQL pipelines in the manner of the published sqlflow benchmark.
// Publishes JSON events (sqlflow's fixture event plus an amount; event i stamped at
// 2025-01-01 + i ms) to a one-partition topic, then, for each handler and batch size, runs
// `sluice pipeline run` as a child process under a fresh consumer group with an aggregate
// SQL and a noop sink, and measures its rate from the first message to the last, its peak
// RSS and its working set. The reference, measured in the same run (docs/benchmarks.md:
// every figure beside its same-run reference), is the DuckDB-only ceiling: the same SQL over the
// same events already decoded into DuckDB, batch by batch. By default the bench starts its own
// `sluice serve`;
// --bootstrap points it at a running broker.
// --window (docs/design/0007-windows-and-state.md, decision 9) runs windowed pipelines
// instead: the handler pre-aggregates each batch to one-second buckets per city, the rows
// go into a `pipeline.window` (tumbling 1m; hopping 5m sliding 1m) whose emit_sql sums the
// closed windows into a noop sink, each without and with `pipeline.state` (a file in the
// work directory, removed after each run), per batch size. Beside each stateful cell: the
// state's cost (1 - rate with state / rate without, same window and batch) against
// sqlflow's published 47% / 29% / 15% at batch 500 / 2000 / 5000 (target: under half).
// What it measures and how: docs/benchmarks.md, "SQL pipelines".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::bench {

struct PipelineBenchOptions {
  std::string bootstrap;  // HOST:PORT of a running broker; empty: start `sluice serve`
  // Work files (the broker's data, pipeline files, child logs) go in <data_dir>/run-<pid>,
  // removed at the end; empty: a new directory under $TMPDIR (or /tmp).
  std::string data_dir;
  std::string sluice_binary = "/proc/self/exe";  // what the broker and pipelines run
  int64_t messages = 0;  // events published and consumed per run; 0: 10,000,000 (200,000 quick)
  int runs = 0;          // runs per cell, the median reported; 0: 3 (1 quick)
  // "StructuredBatch" and/or "InferredMemBatch" (a "handlers." prefix is accepted); empty:
  // both, or StructuredBatch alone with `window`.
  std::vector<std::string> handlers;
  std::vector<int64_t> batch_sizes = {500, 2000, 5000};
  std::string compression = "none";  // the producer's compression.codec
  // Extra librdkafka consumer properties, "name=value", written into the pipeline files as
  // source.kafka.properties (none by default: the pipelines run with sluice's settings).
  std::vector<std::string> consumer_config;
  // source.kafka.fetch.max_bytes / max_partition_bytes of the pipeline files; 0 leaves
  // sluice's defaults (4 MiB / 1 MiB).
  int64_t fetch_max_bytes = 0;
  int64_t fetch_max_partition_bytes = 0;
  // Backlog check: the peak RSS of a drain of all `messages` against a run over a tenth
  // of them (1M of the default 10M), per handler at the largest batch size; within 10%.
  bool backlog = false;
  // Paced check: `paced_rate` events/s for `paced_minutes`; the working set over the last
  // minute within 10% of minute `paced_reference`'s (minute two by default), per handler.
  bool paced = false;
  int paced_minutes = 10;
  int64_t paced_rate = 1000;
  int paced_reference = 2;
  // Windowed cells instead of the plain ones: {tumbling 1m, hopping 5m/1m} × {no state,
  // pipeline.state} × batch_sizes, per handler. Not with backlog; with paced, the paced check runs
  // each window in memory and with its state on file.
  bool window = false;
  // Iceberg cells instead (docs/design/0009-iceberg-tables.md): StructuredBatch passing every event
  // through to an Iceberg table and to a noop sink, at each batch size; commits every
  // `iceberg_commit_seconds`; the commits' latency.
  bool iceberg = false;
  int64_t iceberg_commit_seconds = 5;
  // --storage s3 (with --iceberg): each batch size's Iceberg cell also into a table on S3
  // (the AWS_* variables; under --s3-warehouse, default s3://$SLUICE_S3_BUCKET/
  // sluice-bench-pipeline), beside the local-directory cell of the same turn.
  std::string storage = "local";
  std::string s3_warehouse;
  // --sink noop|iceberg|postgres: the plain cells into a noop sink (the default), the
  // Iceberg cells (as --iceberg), or the postgres cells: StructuredBatch passing every event
  // through to a table of a PostgreSQL server the bench starts (Debian's postgresql), beside
  // the noop sink and, as the reference, a plain `COPY ... FROM` a file of the same rows
  // run by that server after each run.
  std::string sink = "noop";
  // --sink postgres: the sink's commit_interval_ms (0: a commit per batch).
  int64_t postgres_commit_interval_ms = 1000;
  // --format (docs/design/0022-schemas.md): the message formats to run the plain cells
  // with, "json", "avro", "protobuf"; json is always run first as the same-run reference of
  // the others (Avro and Protobuf payloads of the same fields in the Confluent framing, the
  // schema registered with the bench's broker). Empty: json alone.
  std::vector<std::string> formats;
  // --in-process (docs/design/0023-native-path.md): each plain cell runs twice, its source
  // reading over Kafka (`sluice pipeline run`, librdkafka) and in-process (the pipeline
  // inside the bench's own `sluice serve --pipelines`, restarted for the run); JSON lines
  // say which in `source` ("kafka", "in_process"). Needs the bench's own broker.
  bool in_process = false;
  bool quick = false;  // small sizes for smoke tests
  bool json = false;   // one JSON object per cell on stdout instead of a table
};

// Runs the cells (and the checks asked for) and prints the table or JSON lines on stdout;
// progress and errors go to stderr. Returns 0; 1 after an error (bad options, a broker or
// pipeline that fails, a pipeline that reports errors or stalls); 3 when every cell ran
// but a backlog or paced check failed. --window's state-cost target is printed (PASS or
// MISS per row) but is no check: it leaves the exit status alone.
int RunPipelineBench(const PipelineBenchOptions& options);

}  // namespace sluice::bench
