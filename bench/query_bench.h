// `sluice bench query`: the four queries a data engineer writes every week, in the
// manner of the published "150M rows under a 4.5 GiB cap" comparison. A seeded generator
// writes a star schema (a sales fact table in Parquet files and a 50,000-row products
// dimension), the same files also made Iceberg tables with sluice's lake library; then,
// per memory setting, query and engine, each run is a fresh process tree with the same
// thread count and memory setting, its RSS sampled every 50 ms and the tree killed above
// the cap; the median of the runs that finished, the peak RSS, and every answer checked
// against DuckDB's. Engines are pluggable (bench/query_engine.h): `duckdb` (the same
// libduckdb sluice links, with its memory_limit), `polars` (nodejs-polars, lazy API), and
// sluice's query server over the Iceberg tables (`sluice-iceberg`) and over the same
// Parquet files (`sluice-parquet`). What it measures and how: docs/benchmarks.md, "Queries"; the
// chart: docs/design/0011-query-bench.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace sluice::bench {

struct QueryBenchOptions {
  int64_t rows = 15'000'000;  // sales rows; the full comparison is 150,000,000
  uint64_t seed = 42;
  int files = 30;  // Parquet files of the sales table
  // Generated data is kept in <data_dir>/rows-<rows>-seed-<seed>-<generator version>/ and
  // reused; empty: $XDG_CACHE_HOME/sluice/bench-query, else /tmp/sluice-bench-query.
  std::string data_dir;
  std::vector<std::string> queries = {"q1", "q2", "q3", "q4"};
  // Every engine by default: the comparison is sluice's engines beside DuckDB and Polars.
  std::vector<std::string> engines = {"duckdb", "polars", "sluice-iceberg", "sluice-parquet"};
  int threads = 2;
  // Memory settings, each run in turn: "3GB", "1GB", "512MiB" (KB/MB/GB are powers of
  // 1000 and KiB/MiB/GiB of 1024, as DuckDB reads them).
  std::vector<std::string> memory_settings = {"3GB", "1GB"};
  double cap_gib = 4.5;     // the watchdog kills a run's process tree above this RSS
  int runs = 3;             // per cell; the median of those that finished is reported
  double timeout_s = 3600;  // a run still going after this is killed (and not finished)
  std::string sluice_binary = "/proc/self/exe";  // the duckdb engine's child
  std::string node = "node";                     // the polars engine's interpreter (PATH)
  // Where nodejs-polars is installed (its node_modules); empty: the source tree's.
  std::string node_modules;
  std::string chart;       // a PNG of time and peak RSS per engine and query; empty: none
  bool json = false;       // one JSON object per engine × query × setting on stdout
  std::string json_file;   // the same JSON lines appended to this file (beside the table)
  bool keep_work = false;  // keep the runs' logs and spill directories
  // Where the tables are read from: "local" (the generated warehouse, every engine), or
  // "s3": the same tables copied to S3 and queried cold and warm through the query server's
  // engine beside the local tables through the same engine, with the S3 GET bandwidth
  // measured in the same run (bench/query_lake.h). S3 comes from the AWS_* variables.
  std::string storage = "local";
  // --storage s3: the S3 prefix the copy goes under (s3://bucket/prefix); empty:
  // s3://$SLUICE_S3_BUCKET/sluice-bench-query.
  std::string s3_warehouse;
  // Instead of the four queries: the statements a second of `clients` sessions sending
  // small statements back to back for `statement_seconds` each (bench/query_small.h).
  bool small_statements = false;
  int clients = 16;
  double statement_seconds = 10;
};

// Checks the options (every error names the option and what is wrong). Run by
// RunQueryBench first; exposed for tests.
Status ValidateQueryBenchOptions(const QueryBenchOptions& options);

// Bytes of a memory setting ("3GB" -> 3e9, "1.5GiB" -> 1610612736), or an error naming it.
Result<int64_t> ParseMemorySetting(const std::string& text);

// Generates the data when it is not cached, runs every cell and prints the table (or JSON
// lines) on stdout, progress on stderr. Returns 0 when every cell ran (killed, failing or
// timed-out runs are results, not errors) and every answer matched; 2 for bad options; 1
// on another error (data that cannot be generated, an engine that is not installed, a
// chart that cannot be drawn); 3 when an answer differed from DuckDB's.
int RunQueryBench(const QueryBenchOptions& options);

// The duckdb engine's child (`sluice bench query-child`, hidden): opens a DuckDB database
// with `threads`, `memory_limit_bytes` and `temp_dir`, views `sales` and `products` over
// the Parquet globs, runs benchmark query `query` and prints one JSON line on stdout:
// {"elapsed_s": ..., "columns": [...], "answer": ["<int>", ...]}. Returns 0, or 1 with the
// error on stderr.
//
// With `warehouse` set it is the lake child of --storage s3 instead (RunLakeQueryChild):
// the query over lake.bench.sales and lake.bench.products in that warehouse through the
// query server's engine, `repeat` times; the globs are not used.
struct QueryChildOptions {
  std::string query;
  std::string sales_glob;
  std::string products_glob;
  std::string warehouse;
  int repeat = 1;
  std::string s3_cache_dir;
  int threads = 1;
  int64_t memory_limit_bytes = 0;
  std::string temp_dir;
};
int RunQueryChild(const QueryChildOptions& options);

}  // namespace sluice::bench
