// The engines of `sluice bench query` (bench/query_bench.h) and the process-tree watchdog
// they run under. An engine is three things: how to start a fresh process tree for one
// run (Launch, which returns once the tree can take the query), how to submit the query
// and read its answer (EngineRun::Execute), and how to end the tree (EngineRun::Stop).
// The runner samples the RSS of the tree under EngineRun::root_pid() every 50 ms while
// Execute runs and kills the whole tree above the cap.
//
// Engines now: `duckdb` (the sluice binary itself as a child, `sluice bench query-child`,
// the same libduckdb with SET memory_limit and threads over the Parquet files) and
// `polars` (node + nodejs-polars' lazy API over the Parquet files; threads only). Both are
// one-shot children (OneShotChildRun): the child runs the query, prints one JSON line and
// exits. sluice's query server (`sluice-iceberg`, `sluice-parquet`) is a server tree
// instead: Launch starts `sluice serve` and waits for its Postgres port, Execute sends the
// query over the Postgres protocol (libpq) and times it, Stop sends SIGTERM. MakeEngine is
// the one place that lists engines.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::bench {

// Where the generated data is: the same data as Parquet files and as Iceberg tables (the
// Iceberg tables' data files are the Parquet files).
struct QueryDataset {
  int64_t rows = 0;
  uint64_t seed = 0;
  std::string dir;             // the cache directory of this rows + seed
  std::string sales_glob;      // <dir>/warehouse/bench/sales/data/*.parquet
  std::string products_glob;   // <dir>/warehouse/bench/products/data/*.parquet
  std::string warehouse;       // <dir>/warehouse: namespace `bench`, tables `sales`, `products`
  std::string sales_table;     // bench.sales
  std::string products_table;  // bench.products
};

// One run of one query on one engine.
struct EngineRunSpec {
  const QueryDataset* data = nullptr;
  std::string query;  // "q1".."q4"
  // The query as DuckDB SQL with {sales} and {products} where the tables go, returning one
  // row of integers. A SQL engine binds the tables as it serves them (BindTables):
  // sluice-iceberg `lake.bench.sales`, sluice-parquet `read_parquet('<sales_glob>')`.
  std::string sql_template;
  std::string sql;  // the template bound to tables (views) named `sales` and `products`
  int threads = 1;
  std::string memory_setting;  // as given: "3GB"
  int64_t memory_bytes = 0;
  std::string work_dir;  // a new directory for this run: the child's logs, its spill files
  std::string sluice_binary;
  std::string node;           // polars: the node interpreter
  std::string node_modules;   // polars: NODE_PATH
  std::string polars_script;  // polars: the script's path (written into the work directory)
  // The lake child (`--storage s3`, MakeLakeChildEngine): the warehouse its query names
  // lake.bench.* in (the local one or the S3 copy), how many times it runs the query in
  // its process, and where an S3 warehouse's object cache goes.
  std::string lake_warehouse;
  int repeat = 1;
  std::string s3_cache_dir;
};

// What a finished run answered: the query's time as the engine's client saw it (for a
// one-shot child, measured inside it around the query; for a server, from sending the
// query to the last row) and the checksum row, each value the text of an integer.
struct EngineAnswer {
  double seconds = 0;
  // The server's planning of the query (lake planner, rewrites' planning; the parts not
  // included), from its log; < 0 when the engine does not say (issue 29: kept under 5%).
  double planning_seconds = -1;
  std::vector<std::string> columns;
  std::vector<std::string> values;
  std::string line;  // a one-shot child's whole answer line (JSON)
};

// One fresh process tree. Owned by the runner's thread; root_pid() is read by the watchdog
// thread too (it does not change after Launch).
class EngineRun {
 public:
  virtual ~EngineRun() = default;
  // The root of the tree the watchdog samples and kills (the tree is the root and all its
  // descendants).
  virtual pid_t root_pid() const = 0;
  // Submits the query and blocks until the answer, or until the tree ends (the watchdog
  // killed it, or it failed: an error naming how it ended and the tail of its stderr).
  virtual Result<EngineAnswer> Execute() = 0;
  // Ends the tree and reaps it (idempotent; also after the watchdog killed it). The peak
  // RSS of the root process as the kernel counted it (wait4's ru_maxrss), 0 if unknown.
  virtual int64_t Stop() = 0;
  // CPU seconds (user + system) the root process used, once Stop reaped it; -1 if unknown.
  virtual double cpu_seconds() const { return -1; }
  // The Postgres port of a run that serves one (the sluice engines), else 0.
  virtual int pg_port() const { return 0; }
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string_view name() const = 0;
  // Whether the memory setting reaches the engine (Polars has none: threads and cap only).
  virtual bool applies_memory_setting() const = 0;
  // What it needs is there (node and nodejs-polars, ...); an error says what is missing.
  virtual Status Check(const EngineRunSpec& spec) const = 0;
  // One line for the header: what a run starts, with the settings.
  virtual std::string Describe(const EngineRunSpec& spec) const = 0;
  // Starts a fresh process tree for `spec`; returns once it can take the query.
  virtual Result<std::unique_ptr<EngineRun>> Launch(const EngineRunSpec& spec) = 0;
};

// `sql_template` with every {sales} and {products} replaced by the given table references.
std::string BindTables(const std::string& sql_template, std::string_view sales,
                       std::string_view products);

// The engines `--engines` accepts, in the order runs go (duckdb first: its answers are the
// reference).
std::vector<std::string> KnownEngines();
// NotFound naming the known engines when `name` is none of them.
Result<std::unique_ptr<Engine>> MakeEngine(std::string_view name);

// The lake child of `--storage s3` (bench/query_lake.h, RunLakeQueryChild): `sluice bench
// query-child --warehouse W --repeat N` per run, the query server's engine in one
// process over spec.lake_warehouse. Not one of KnownEngines: it runs only for --storage s3.
std::unique_ptr<Engine> MakeLakeChildEngine();

// A child that runs the query by itself and prints one JSON line on stdout
// ({"elapsed_s", "columns", "answer"}), then exits 0. stdout and stderr go to files in
// the work directory; `env` entries ("NAME=value") are added to the environment.
Result<std::unique_ptr<EngineRun>> LaunchOneShotChild(const std::vector<std::string>& args,
                                                      const std::vector<std::string>& env,
                                                      const std::string& work_dir);

// ---- the process tree ----

// `root` and every descendant alive now (from /proc/<pid>/task/<tid>/children, else a scan
// of /proc for parent pids), root first; empty when root is gone.
std::vector<pid_t> ProcessTree(pid_t root);
// The summed RSS of those processes (/proc/<pid>/statm), bytes.
int64_t TreeRssBytes(const std::vector<pid_t>& tree);
// SIGKILL to every process of the tree (root first, so it starts no more).
void KillTree(pid_t root);

// Samples a tree's RSS every `interval_ms` on its own thread from construction until
// Finish(), and kills the tree once it is above `cap_bytes` or `timeout_s` has passed.
// Owned by the runner's thread.
class TreeWatchdog {
 public:
  TreeWatchdog(pid_t root, int64_t cap_bytes, double timeout_s, int interval_ms = 50);
  ~TreeWatchdog();
  TreeWatchdog(const TreeWatchdog&) = delete;
  TreeWatchdog& operator=(const TreeWatchdog&) = delete;

  // Stops sampling (joins the thread).
  void Finish();
  int64_t peak_bytes() const { return peak_.load(); }
  bool killed_over_cap() const { return over_cap_.load(); }
  bool timed_out() const { return timed_out_.load(); }
  int64_t samples() const { return samples_.load(); }

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::atomic<int64_t> peak_{0};
  std::atomic<bool> over_cap_{false};
  std::atomic<bool> timed_out_{false};
  std::atomic<int64_t> samples_{0};
};

}  // namespace sluice::bench
