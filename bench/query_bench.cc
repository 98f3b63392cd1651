#include "bench/query_bench.h"

#include <fmt/format.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "bench/bench_util.h"
#include "bench/child_process.h"
#include "bench/machine_info.h"
#include "bench/polars_query_js.h"
#include "bench/query_engine.h"
#include "bench/query_lake.h"
#include "bench/query_small.h"
#include "duck/database.h"
#include "lake/data_files.h"
#include "lake/duck_types.h"
#include "lake/storage.h"
#include "lake/table.h"
#include "lake/table_files.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Changes whenever the generator's SQL does: the cache directory names it.
constexpr std::string_view kGeneratorVersion = "g1";
constexpr int64_t kProducts = 50'000;
constexpr std::string_view kNamespace = "bench";

// ---------------------------------------------------------------------------------------
// The data. Every value is a function of the row number and the seed through DuckDB's
// hash(), so a rows + seed pair always gives the same tables (with the same DuckDB).

// Sales rows [lo, hi) of `rows`: order ids 1..rows in file order; rows/10 customers; 50,000
// products; a timestamp through 2024 that grows with the order id, plus up to a day of
// jitter (so files are roughly in time order, as appended data is); 1-10 items; an amount
// of 0.01-500.00 in cents; a status and a channel.
std::string SalesSql(int64_t lo, int64_t hi, int64_t rows, uint64_t seed) {
  int64_t customers = std::max<int64_t>(1, rows / 10);
  return fmt::format(
      "SELECT i + 1 AS order_id, "
      "1 + (hash(i, {s}::UBIGINT, 1) % {c})::BIGINT AS customer_id, "
      "(1 + (hash(i, {s}::UBIGINT, 2) % {p}))::INTEGER AS product_id, "
      "make_timestamp((1704067200 + (i * 31536000) // {n} "
      "+ (hash(i, {s}::UBIGINT, 3) % 86400)::BIGINT) * 1000000) AS ts, "
      "(1 + (hash(i, {s}::UBIGINT, 4) % 10))::INTEGER AS quantity, "
      "(1 + (hash(i, {s}::UBIGINT, 5) % 50000)::BIGINT)::DOUBLE / 100 AS amount, "
      "CASE WHEN hash(i, {s}::UBIGINT, 6) % 100 < 88 THEN 'completed' "
      "WHEN hash(i, {s}::UBIGINT, 6) % 100 < 95 THEN 'returned' ELSE 'cancelled' END AS status, "
      "(['web', 'store', 'mobile', 'partner'])[1 + (hash(i, {s}::UBIGINT, 7) % 4)::INTEGER] "
      "AS channel "
      "FROM range({lo}, {hi}) t(i)",
      fmt::arg("s", seed), fmt::arg("c", customers), fmt::arg("p", kProducts), fmt::arg("n", rows),
      fmt::arg("lo", lo), fmt::arg("hi", hi));
}

// The products dimension: 50,000 rows, 20 categories, 500 brands, a list price.
std::string ProductsSql(uint64_t seed) {
  return fmt::format(
      "SELECT p::INTEGER AS product_id, 'product-' || lpad(p::VARCHAR, 5, '0') AS name, "
      "'category-' || lpad((hash(p, {s}::UBIGINT, 11) % 20)::VARCHAR, 2, '0') AS category, "
      "'brand-' || lpad((hash(p, {s}::UBIGINT, 12) % 500)::VARCHAR, 3, '0') AS brand, "
      "(100 + (hash(p, {s}::UBIGINT, 13) % 100000)::BIGINT)::DOUBLE / 100 AS list_price "
      "FROM range(1, {n} + 1) t(p)",
      fmt::arg("s", seed), fmt::arg("n", kProducts));
}

// ---------------------------------------------------------------------------------------
// The queries, as DuckDB SQL templates over {sales} and {products} (BindTables); each
// reduced to one row of integers that every engine computes exactly (money summed as whole
// cents, never as a float). bench/query/polars_query.js has the same four with Polars' lazy
// API.

struct QueryDef {
  std::string_view name;
  std::string_view what;
  std::string_view sql;
};

constexpr QueryDef kQueries[] = {
    {"q1", "filter",
     "SELECT count(*)::BIGINT AS rows, sum(quantity)::BIGINT AS quantity, "
     "sum(round(amount * 100)::BIGINT)::BIGINT AS cents, sum(order_id)::BIGINT AS order_ids "
     "FROM {sales} WHERE ts >= TIMESTAMP '2024-07-01' AND channel = 'web' AND amount >= 100"},
    {"q2", "join aggregate",
     "WITH g AS (SELECT p.category, count(*) AS n, sum(s.quantity) AS q, "
     "sum(round(s.amount * 100)::BIGINT) AS cents, "
     "sum(round(p.list_price * 100)::BIGINT * s.quantity) AS list_cents "
     "FROM {sales} s JOIN {products} p ON s.product_id = p.product_id GROUP BY p.category) "
     "SELECT count(*)::BIGINT AS groups, sum(n)::BIGINT AS rows, sum(q)::BIGINT AS quantity, "
     "sum(cents)::BIGINT AS cents, sum(list_cents)::BIGINT AS list_cents, "
     "sum(n * n)::BIGINT AS n_squared FROM g"},
    {"q3", "latest row per customer",
     "WITH ranked AS (SELECT *, "
     "ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY ts DESC, order_id DESC) AS rn "
     "FROM {sales}) "
     "SELECT count(*)::BIGINT AS customers, sum(order_id)::BIGINT AS order_ids, "
     "sum(quantity)::BIGINT AS quantity, sum(round(amount * 100)::BIGINT)::BIGINT AS cents "
     "FROM ranked WHERE rn = 1"},
    {"q4", "group-by per customer",
     "WITH g AS (SELECT customer_id, count(*) AS n, sum(quantity) AS q, "
     "sum(round(amount * 100)::BIGINT) AS cents, max(ts) AS last_ts "
     "FROM {sales} GROUP BY customer_id) "
     "SELECT count(*)::BIGINT AS groups, sum(n)::BIGINT AS rows, sum(q)::BIGINT AS quantity, "
     "sum(cents)::BIGINT AS cents, sum(n * n)::BIGINT AS n_squared, "
     "sum(epoch_us(last_ts) // 1000000)::BIGINT AS last_ts_seconds FROM g"},
};

const QueryDef* FindQuery(std::string_view name) {
  for (const QueryDef& q : kQueries) {
    if (q.name == name) return &q;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------
// Small helpers.

Status WriteText(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.close();
    if (!out) return IOError("cannot write {}", tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return IOError("cannot rename {} to {}: {}", tmp, path, ec.message());
  return Status::OK();
}

std::string DefaultDataDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/sluice/bench-query";
  return "/tmp/sluice-bench-query";
}

std::string Join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

// ---------------------------------------------------------------------------------------
// Generating the data (or finding it cached).

QueryDataset DatasetPaths(const std::string& data_dir, int64_t rows, uint64_t seed) {
  QueryDataset d;
  d.rows = rows;
  d.seed = seed;
  d.dir = fmt::format("{}/rows-{}-seed-{}-{}", fs::absolute(data_dir).lexically_normal().string(),
                      rows, seed, kGeneratorVersion);
  d.warehouse = d.dir + "/warehouse";
  d.sales_table = fmt::format("{}.sales", kNamespace);
  d.products_table = fmt::format("{}.products", kNamespace);
  d.sales_glob = fmt::format("{}/{}/sales/data/*.parquet", d.warehouse, kNamespace);
  d.products_glob = fmt::format("{}/{}/products/data/*.parquet", d.warehouse, kNamespace);
  return d;
}

// Creates the Iceberg table at `root` with the columns of `select_sql`, writes each of
// `parts` (a SELECT each) as one of its Parquet data files (data/part-NNNNN.parquet, with
// the table's field ids and column statistics) and appends them in one snapshot.
Status WriteTable(duck::Connection& conn, const std::string& root,
                  const std::string& select_sql_for_schema, const std::vector<std::string>& parts,
                  const std::string& what) {
  ASSIGN_OR_RETURN(duck::QueryResult r,
                   conn.Query(fmt::format("SELECT * FROM ({}) LIMIT 0", select_sql_for_schema)));
  std::vector<std::string> names;
  for (size_t i = 0; i < r.column_count(); ++i) names.push_back(r.column_name(i));
  ASSIGN_OR_RETURN(lake::Schema schema, lake::SchemaOfColumns(names, r.column_logical_types()));
  std::error_code ec;
  fs::create_directories(root + "/data", ec);
  if (ec) return IOError("cannot create {}/data: {}", root, ec.message());
  ASSIGN_OR_RETURN(lake::Table table, lake::Table::Create(root, schema, lake::PartitionSpec{},
                                                          {{"write.format.default", "parquet"}}));
  const lake::Schema* table_schema = table.metadata().CurrentSchema();
  std::vector<lake::DataFile> files;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string path = fmt::format("{}/data/part-{:05}.parquet", root, i);
    auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(lake::DataFile f,
                     lake::WriteDataFile(conn, parts[i], *table_schema, path, lake::FileUri(path)));
    files.push_back(std::move(f));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(stderr, "  {} file {}/{}: {} rows, {} in {:.1f} s\n", what, i + 1, parts.size(),
               Grouped(static_cast<uint64_t>(files.back().record_count)),
               FormatBinaryBytes(static_cast<uint64_t>(files.back().file_size_in_bytes)), s);
  }
  auto appended = table.Append(files, [](const lake::TableMetadata&) {
    return Result<std::map<std::string, std::string>>(std::map<std::string, std::string>{});
  });
  if (!appended.ok()) return appended.status();
  return Status::OK();
}

struct DatasetInfo {
  bool generated = false;  // in this run (else: found cached)
  double generate_s = 0;
  uint64_t sales_bytes = 0;  // the Parquet files
  int sales_files = 0;
};

Result<DatasetInfo> EnsureDataset(const QueryDataset& d, const QueryBenchOptions& o) {
  DatasetInfo info;
  std::string marker = d.dir + "/complete.json";
  std::error_code ec;
  if (!fs::exists(marker)) {
    if (fs::exists(d.dir)) {
      fmt::print(
          stderr,
          "sluice bench query: {} is incomplete (an interrupted generation); generating it again\n",
          d.dir);
      fs::remove_all(d.dir, ec);
      if (ec) return IOError("cannot remove {}: {}", d.dir, ec.message());
    }
    fs::create_directories(d.dir + "/tmp", ec);
    if (ec) return IOError("cannot create {}: {}", d.dir, ec.message());
    fmt::print(stderr,
               "sluice bench query: generating {} sales rows (seed {}) in {} files and {} products "
               "into {}\n",
               Grouped(static_cast<uint64_t>(d.rows)), d.seed, o.files, Grouped(kProducts), d.dir);
    auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(auto db, duck::Database::Open({.memory_limit_bytes = int64_t{2} << 30,
                                                    .threads = o.threads,
                                                    .temp_directory = d.dir + "/tmp"}));
    ASSIGN_OR_RETURN(auto conn, duck::Connection::Open(*db));
    std::vector<std::string> parts;
    for (int f = 0; f < o.files; ++f) {
      int64_t lo = d.rows * f / o.files, hi = d.rows * (f + 1) / o.files;
      parts.push_back(SalesSql(lo, hi, d.rows, d.seed));
    }
    RETURN_IF_ERROR(WriteTable(*conn, fmt::format("{}/{}/sales", d.warehouse, kNamespace), parts[0],
                               parts, "sales"));
    RETURN_IF_ERROR(WriteTable(*conn, fmt::format("{}/{}/products", d.warehouse, kNamespace),
                               ProductsSql(d.seed), {ProductsSql(d.seed)}, "products"));
    conn.reset();
    db.reset();
    fs::remove_all(d.dir + "/tmp", ec);
    info.generated = true;
    info.generate_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Json m = {{"rows", d.rows},
              {"seed", d.seed},
              {"files", o.files},
              {"products", kProducts},
              {"generator", std::string(kGeneratorVersion)},
              {"duckdb", std::string(duck::LibraryVersion())},
              {"generate_s", Round(info.generate_s, 1)}};
    RETURN_IF_ERROR(WriteText(marker, m.dump() + "\n"));
  }
  for (const auto& e :
       fs::directory_iterator(fmt::format("{}/{}/sales/data", d.warehouse, kNamespace), ec)) {
    if (e.path().extension() == ".parquet") {
      info.sales_bytes += e.file_size();
      ++info.sales_files;
    }
  }
  if (info.sales_files == 0) return NotFoundError("{}: no sales data files", d.dir);
  return info;
}

// ---------------------------------------------------------------------------------------
// Reference answers: DuckDB's, kept beside the data (answers.json) once a DuckDB run has
// answered, so later runs of other engines alone are checked too.

class References {
 public:
  explicit References(std::string path) : path_(std::move(path)) {
    auto j = nlohmann::json::parse(ReadFile(path_), nullptr, false);
    if (j.is_object()) {
      for (auto& [q, v] : j.items()) {
        if (v.is_object() && v.contains("answer") && v["answer"].is_array()) {
          std::vector<std::string> values;
          for (const auto& x : v["answer"])
            values.push_back(x.is_string() ? x.get<std::string>() : x.dump());
          answers_[q] = values;
        }
      }
    }
  }
  const std::vector<std::string>* Find(const std::string& query) const {
    auto it = answers_.find(query);
    return it == answers_.end() ? nullptr : &it->second;
  }
  Status Add(const std::string& query, const std::vector<std::string>& values) {
    answers_[query] = values;
    Json j = Json::object();
    for (const auto& [q, v] : answers_) j[q] = {{"answer", v}};
    return WriteText(path_, j.dump(1) + "\n");
  }

 private:
  std::string path_;
  std::map<std::string, std::vector<std::string>> answers_;
};

// ---------------------------------------------------------------------------------------
// Runs and cells.

enum class Outcome { kFinished, kOverCap, kTimedOut, kFailed };

std::string_view OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kFinished:
      return "finished";
    case Outcome::kOverCap:
      return "killed over cap";
    case Outcome::kTimedOut:
      return "timed out";
    case Outcome::kFailed:
      return "failed";
  }
  return "?";
}

struct RunResult {
  Outcome outcome = Outcome::kFailed;
  double seconds = 0;      // the engine's query time (finished runs)
  double wall_s = 0;       // launch to end, process start included
  int64_t peak_bytes = 0;  // tree RSS, sampled, or the root's ru_maxrss when higher
  std::vector<std::string> answer;
  std::vector<std::string> columns;
  std::string error;       // kFailed: what happened
  std::string line;        // a one-shot child's answer line (the lake child's repeats)
  double cpu_s = -1;       // the root process's CPU seconds, when known
  double planning_s = -1;  // the server's planning of the query, when it says
};

struct Cell {
  std::string engine, query, setting;
  int64_t memory_bytes = 0;
  bool memory_applied = true;
  std::vector<RunResult> runs;
  std::optional<bool> answer_ok;  // nullopt: nothing to check (no finished run or no reference)
  std::vector<std::string> reference;

  int finished() const {
    return static_cast<int>(std::count_if(runs.begin(), runs.end(), [](const RunResult& r) {
      return r.outcome == Outcome::kFinished;
    }));
  }
  std::optional<double> median_s() const {
    std::vector<double> v;
    for (const RunResult& r : runs) {
      if (r.outcome == Outcome::kFinished) v.push_back(r.seconds);
    }
    if (v.empty()) return std::nullopt;
    return Median(v);
  }
  // The median planning time of the finished runs whose engine reports it.
  std::optional<double> median_planning_s() const {
    std::vector<double> v;
    for (const RunResult& r : runs) {
      if (r.outcome == Outcome::kFinished && r.planning_s >= 0) v.push_back(r.planning_s);
    }
    if (v.empty()) return std::nullopt;
    return Median(v);
  }
  int64_t peak_bytes() const {
    int64_t p = 0;
    for (const RunResult& r : runs) p = std::max(p, r.peak_bytes);
    return p;
  }
  // "2 killed over cap, 1 failed: <first error>"; "" when all finished.
  std::string Note() const {
    std::map<std::string_view, int> counts;
    std::string first_error;
    for (const RunResult& r : runs) {
      if (r.outcome == Outcome::kFinished) continue;
      ++counts[OutcomeName(r.outcome)];
      if (r.outcome == Outcome::kFailed && first_error.empty()) first_error = r.error;
    }
    std::string out;
    for (const auto& [name, n] : counts)
      out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, name);
    if (!first_error.empty()) {
      std::string e = first_error.substr(0, first_error.find('\n'));
      out += ": " + e.substr(0, 100);
    }
    return out;
  }
};

RunResult RunOnce(Engine& engine, const EngineRunSpec& spec, int64_t cap_bytes, double timeout_s) {
  RunResult r;
  auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<EngineRun>> launched = engine.Launch(spec);
  if (!launched.ok()) {
    r.error = launched.status().ToString();
    return r;
  }
  std::unique_ptr<EngineRun> run = std::move(launched).value();
  TreeWatchdog watchdog(run->root_pid(), cap_bytes, timeout_s);
  Result<EngineAnswer> answer = run->Execute();
  watchdog.Finish();
  int64_t root_peak = run->Stop();
  r.cpu_s = run->cpu_seconds();
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.peak_bytes = std::max(watchdog.peak_bytes(), root_peak);
  if (watchdog.killed_over_cap()) {
    r.outcome = Outcome::kOverCap;
  } else if (watchdog.timed_out()) {
    r.outcome = Outcome::kTimedOut;
  } else if (!answer.ok()) {
    r.outcome = Outcome::kFailed;
    r.error = answer.status().message();
  } else {
    r.outcome = Outcome::kFinished;
    r.seconds = answer->seconds;
    r.planning_s = answer->planning_seconds;
    r.answer = answer->values;
    r.columns = answer->columns;
    r.line = answer->line;
  }
  return r;
}

struct Context {
  MachineInfo machine;
  std::string load_start;
  std::string commit;
  QueryDataset data;
  DatasetInfo data_info;
  std::string node_modules;
};

Json CellJson(const Context& ctx, const QueryBenchOptions& o, const Cell& c,
              const std::optional<double>& duckdb_median) {
  Json j;
  j["engine"] = c.engine;
  j["query"] = c.query;
  j["rows"] = o.rows;
  j["threads"] = o.threads;
  j["memory_setting"] = c.setting;
  j["memory_bytes"] = c.memory_bytes;
  j["memory_applied"] = c.memory_applied;
  std::optional<double> median = c.median_s();
  j["median_s"] = median ? Json(Round(*median, 3)) : Json(nullptr);
  j["duckdb_median_s"] = duckdb_median ? Json(Round(*duckdb_median, 3)) : Json(nullptr);
  j["ratio_to_duckdb"] = median && duckdb_median && *duckdb_median > 0
                             ? Json(Round(*median / *duckdb_median, 3))
                             : Json(nullptr);
  j["peak_rss_gib"] = Round(static_cast<double>(c.peak_bytes()) / kGiB, 3);
  j["cap_gib"] = o.cap_gib;
  j["finished_runs"] = c.finished();
  j["runs"] = static_cast<int>(c.runs.size());
  j["answer_ok"] = c.answer_ok ? Json(*c.answer_ok) : Json(nullptr);
  Json times = Json::array(), walls = Json::array(), peaks = Json::array(),
       outcomes = Json::array();
  for (const RunResult& r : c.runs) {
    times.push_back(r.outcome == Outcome::kFinished ? Json(Round(r.seconds, 3)) : Json(nullptr));
    walls.push_back(Round(r.wall_s, 3));
    peaks.push_back(Round(static_cast<double>(r.peak_bytes) / kGiB, 3));
    outcomes.push_back(r.outcome == Outcome::kFailed
                           ? fmt::format("failed: {}", r.error.substr(0, 300))
                           : std::string(OutcomeName(r.outcome)));
  }
  j["times_s"] = times;
  std::optional<double> planning = c.median_planning_s();
  j["planning_ms"] = planning ? Json(Round(*planning * 1000, 1)) : Json(nullptr);
  j["planning_share"] =
      planning && median && *median > 0 ? Json(Round(*planning / *median, 4)) : Json(nullptr);
  j["process_s"] = walls;
  j["peaks_gib"] = peaks;
  j["outcomes"] = outcomes;
  const RunResult* answered = nullptr;
  for (const RunResult& r : c.runs) {
    if (r.outcome == Outcome::kFinished) {
      answered = &r;
      break;
    }
  }
  j["answer"] = answered ? Json(answered->answer) : Json(nullptr);
  j["reference"] = c.reference.empty() ? Json(nullptr) : Json(c.reference);
  j["seed"] = o.seed;
  j["files"] = ctx.data_info.sales_files;
  j["sales_parquet_bytes"] = ctx.data_info.sales_bytes;
  j["cpu"] = ctx.machine.cpu_model;
  j["cores"] = ctx.machine.cores;
  j["memory_total_bytes"] = ctx.machine.memory_bytes;
  j["kernel"] = ctx.machine.kernel;
  j["load_start"] = ctx.load_start;
  j["load_now"] = LoadAverages();
  j["commit"] = ctx.commit;
  j["duckdb"] = std::string(duck::LibraryVersion());
  return j;
}

void PrintHeader(const Context& ctx, const QueryBenchOptions& o,
                 const std::vector<std::unique_ptr<Engine>>& engines, const EngineRunSpec& sample) {
  const MachineInfo& m = ctx.machine;
  fmt::print(
      "sluice bench query: {} sales rows ({} customers) and {} products, {} run(s) per cell "
      "(median of the "
      "finished), {} thread(s), memory settings {}, cap {} GiB RSS per process tree\n",
      Grouped(static_cast<uint64_t>(o.rows)),
      Grouped(static_cast<uint64_t>(std::max<int64_t>(1, o.rows / 10))), Grouped(kProducts), o.runs,
      o.threads, Join(o.memory_settings, ", "), o.cap_gib);
  fmt::print("  machine   {}, {} cores, {} memory, {}; load average {} (1/5/15 min) at start\n",
             m.cpu_model, m.cores, FormatBinaryBytes(m.memory_bytes), m.kernel, ctx.load_start);
  fmt::print("  sluice    {}, duckdb {}\n",
             ctx.commit.empty() ? "commit unknown" : "commit " + ctx.commit,
             duck::LibraryVersion());
  fmt::print(
      "  data      {} ({}: {} Parquet files, {}; seed {}); the same files are the Iceberg tables "
      "{} and {} "
      "in warehouse {}\n",
      ctx.data.dir,
      ctx.data_info.generated ? fmt::format("generated in {:.0f} s", ctx.data_info.generate_s)
                              : "cached",
      ctx.data_info.sales_files, FormatBinaryBytes(ctx.data_info.sales_bytes), o.seed,
      ctx.data.sales_table, ctx.data.products_table, ctx.data.warehouse);
  for (const auto& e : engines) fmt::print("  {:<9} {}\n", e->name(), e->Describe(sample));
  fmt::print(
      "  runs      each a fresh process tree, the engines taking turns (run 1 of each, then run "
      "2...); its RSS (all descendants) sampled every 50 ms, "
      "killed above the "
      "cap; median s = the query's time inside the engine (process start excluded); peak = the "
      "highest tree "
      "RSS sampled, or the root's ru_maxrss when higher; answers checked against DuckDB's\n");
  for (const QueryDef& q : kQueries) {
    if (std::find(o.queries.begin(), o.queries.end(), q.name) == o.queries.end()) continue;
    fmt::print("  {}        {}: {}\n", q.name, q.what,
               BindTables(std::string(q.sql), "sales", "products"));
  }
  fmt::print("\n{:<8} {:<6} {:<14} {:>10} {:>9} {:>9} {:>9} {:>7}  {}\n", "setting", "query",
             "engine", "median s", "vs duckdb", "peak GiB", "finished", "answer", "note");
  std::fflush(stdout);
}

void PrintRow(const Cell& c, const std::optional<double>& duckdb_median) {
  std::optional<double> median = c.median_s();
  std::string ratio = median && duckdb_median && *duckdb_median > 0
                          ? fmt::format("{:.2f}", *median / *duckdb_median)
                          : "-";
  std::string answer = !c.answer_ok ? "-" : *c.answer_ok ? "ok" : "WRONG";
  std::string note = c.Note();
  if (!c.memory_applied) note = note.empty() ? "no memory setting" : "no memory setting; " + note;
  if (std::optional<double> planning = c.median_planning_s(); planning && median && *median > 0) {
    std::string planned =
        fmt::format("planned in {:.0f} ms ({:.1f}%)", *planning * 1000, 100 * *planning / *median);
    note = note.empty() ? planned : planned + "; " + note;
  }
  fmt::print("{:<8} {:<6} {:<14} {:>10} {:>9} {:>9.2f} {:>9} {:>7}  {}\n", c.setting, c.query,
             c.engine, median ? fmt::format("{:.2f}", *median) : "-", ratio,
             static_cast<double>(c.peak_bytes()) / kGiB,
             fmt::format("{}/{}", c.finished(), c.runs.size()), answer, note);
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------
// The chart (docs/design/0011-query-bench.md): gnuplot, installed with apt-get when missing.

Status EnsureGnuplot() {
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) return Status::OK();
  fmt::print(
      stderr,
      "sluice bench query: gnuplot is missing; installing gnuplot-nox with apt-get for --chart\n");
  const char* install =
      "(DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox || "
      "(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox)) "
      ">&2";
  if (std::system(install) != 0 || std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return NotFoundError(
        "--chart needs gnuplot, and `apt-get install gnuplot-nox` failed; install it and run again "
        "(the data and script are kept beside the chart)");
  }
  return Status::OK();
}

Status WriteChart(const std::string& png, const QueryBenchOptions& o,
                  const std::vector<Cell>& cells, const std::vector<std::string>& engines,
                  const Context& ctx) {
  // One data file per setting: a row per query, per engine its median and peak ("?" for
  // none finished).
  std::string base =
      png.size() > 4 && png.substr(png.size() - 4) == ".png" ? png.substr(0, png.size() - 4) : png;
  std::vector<std::string> data_files;
  for (const std::string& setting : o.memory_settings) {
    std::string text = "# query";
    for (const std::string& e : engines) text += fmt::format(" {}_s {}_gib", e, e);
    text += "\n";
    for (const std::string& q : o.queries) {
      text += q;
      for (const std::string& e : engines) {
        const Cell* cell = nullptr;
        for (const Cell& c : cells) {
          if (c.engine == e && c.query == q && c.setting == setting) cell = &c;
        }
        std::optional<double> m = cell ? cell->median_s() : std::nullopt;
        text += m ? fmt::format(" {:.3f}", *m) : " ?";
        text +=
            cell ? fmt::format(" {:.3f}", static_cast<double>(cell->peak_bytes()) / kGiB) : " ?";
      }
      text += "\n";
    }
    std::string path = fmt::format("{}-{}.dat", base, setting);
    RETURN_IF_ERROR(WriteText(path, text));
    data_files.push_back(path);
  }
  size_t n = o.memory_settings.size();
  std::string gp = fmt::format(
      "set terminal pngcairo size {},{} font 'sans,10'\n"
      "set output '{}'\n"
      "set style data histogram\nset style histogram cluster gap 1\nset style fill solid 0.8 "
      "border -1\n"
      "set boxwidth 0.9\nset grid ytics\nset key top left horizontal\nset datafile missing '?'\n"
      "set multiplot layout 2,{} title \"sluice bench query: {} rows, {} threads, cap {} GiB ({}; "
      "commit {}; {}). "
      "No bar: no run finished.\"\n",
      520 * n + 80, 760, png, n, Grouped(static_cast<uint64_t>(o.rows)), o.threads, o.cap_gib,
      ctx.machine.cpu_model, ctx.commit.empty() ? "unknown" : ctx.commit,
      ctx.load_start.empty() ? "" : "load " + ctx.load_start);
  auto plot = [&](size_t s, bool memory) {
    std::string cmd = fmt::format(
        "set title 'median query time, memory setting {}'\nset ylabel 'seconds'\n"
        "unset arrow\nunset label 1\nset yrange [0:*]\n",
        o.memory_settings[s]);
    if (memory) {
      cmd = fmt::format(
          "set title 'peak RSS of the process tree, memory setting {}'\nset ylabel 'GiB'\n"
          "set yrange [0:{}]\nset arrow from graph 0, first {} to graph 1, first {} nohead dt 2 lw "
          "2 "
          "lc rgb 'red'\nset label 1 'cap' at graph 0.98, first {} right offset 0,0.6 tc rgb "
          "'red'\n",
          o.memory_settings[s], o.cap_gib * 1.3, o.cap_gib, o.cap_gib, o.cap_gib);
    }
    cmd += "plot ";
    for (size_t e = 0; e < engines.size(); ++e) {
      cmd += fmt::format("{}'{}' using {}:xtic(1) title '{}'", e == 0 ? "" : ", ", data_files[s],
                         2 + 2 * e + (memory ? 1 : 0), engines[e]);
    }
    return cmd + "\n";
  };
  for (size_t s = 0; s < n; ++s) gp += plot(s, false);
  for (size_t s = 0; s < n; ++s) gp += plot(s, true);
  gp += "unset multiplot\n";
  std::string script = base + ".gp";
  RETURN_IF_ERROR(WriteText(script, gp));
  RETURN_IF_ERROR(EnsureGnuplot());
  std::string cmd = fmt::format("gnuplot '{}' 2>&1 >&2", script);
  if (std::system(cmd.c_str()) != 0) return InternalError("gnuplot {} failed (see above)", script);
  return Status::OK();
}

// ---------------------------------------------------------------------------------------
// --storage s3 (issue 26): the same tables on S3, each query cold (an empty object cache: a
// fresh child process) and warm (the same query again in that process), beside the local
// tables through the same engine in the same way (bench/query_lake.h).

constexpr int kS3Repeats = 2;  // per lake child: the first query, then the same again
constexpr int kProbeStreams = 8;
constexpr int kProbeRepeats = 3;
constexpr double kWarmTarget = 1.1;  // issue 26: warm <= 1.1 x local

struct S3Context {
  std::string root;      // --s3-warehouse (or from SLUICE_S3_BUCKET)
  std::string endpoint;  // as the client reaches it
  ObjectStore store;     // FindObjectStore
  S3Copy copy;
  S3Bandwidth bandwidth;
};

// One repeat of a lake child run, from its answer line.
struct Repeat {
  double elapsed_s = 0, plan_s = 0, run_s = 0;
  int64_t downloads = 0, hits = 0;
  uint64_t downloaded_bytes = 0;
};

std::vector<Repeat> RepeatsOf(const RunResult& r) {
  std::vector<Repeat> out;
  if (r.outcome != Outcome::kFinished) return out;
  auto j = nlohmann::json::parse(r.line, nullptr, false);
  if (j.is_discarded() || !j.contains("repeats") || !j["repeats"].is_array()) return out;
  for (const auto& x : j["repeats"]) {
    Repeat p;
    p.elapsed_s = x.value("elapsed_s", 0.0);
    p.plan_s = x.value("plan_s", 0.0);
    p.run_s = x.value("run_s", 0.0);
    p.downloads = x.value("downloads", int64_t{0});
    p.hits = x.value("hits", int64_t{0});
    p.downloaded_bytes = x.value("downloaded_bytes", uint64_t{0});
    out.push_back(p);
  }
  return out;
}

// The runs of one storage for one query and setting, and what their repeats measured.
struct StorageRuns {
  std::vector<RunResult> runs;
  std::vector<CpuSplit> cpu;     // per run: the child, the store, the rest of the machine
  std::vector<double> mb_per_s;  // s3, per run: the S3 bandwidth measured just before it
  // Repeat `i` (0: the first query of the process, 1: the same again) of every finished run.
  std::vector<Repeat> Of(int i) const {
    std::vector<Repeat> out;
    for (const RunResult& r : runs) {
      std::vector<Repeat> rep = RepeatsOf(r);
      if (static_cast<int>(rep.size()) > i) out.push_back(rep[static_cast<size_t>(i)]);
    }
    return out;
  }
  template <typename F>
  std::optional<double> MedianOf(int i, F field) const {
    std::vector<double> v;
    for (const Repeat& p : Of(i)) v.push_back(static_cast<double>(field(p)));
    if (v.empty()) return std::nullopt;
    return Median(v);
  }
  std::optional<double> Elapsed(int i) const {
    return MedianOf(i, [](const Repeat& p) { return p.elapsed_s; });
  }
  std::optional<double> Plan(int i) const {
    return MedianOf(i, [](const Repeat& p) { return p.plan_s; });
  }
  std::optional<double> Run(int i) const {
    return MedianOf(i, [](const Repeat& p) { return p.run_s; });
  }
  std::optional<double> Bytes(int i) const {
    return MedianOf(i, [](const Repeat& p) { return p.downloaded_bytes; });
  }
  int finished() const { return static_cast<int>(Of(0).size()); }
  int64_t peak_bytes() const {
    int64_t p = 0;
    for (const RunResult& r : runs) p = std::max(p, r.peak_bytes);
    return p;
  }
};

struct S3Cell {
  std::string query, setting;
  int64_t memory_bytes = 0;
  StorageRuns local, s3;
  std::optional<bool> answer_ok;       // every answer, both storages, against the reference
  std::vector<std::string> reference;  // DuckDB's when known, else the first local answer
  std::string reference_from;          // "duckdb" or "local"

  // The turns in which the local and the S3 run both finished, paired: the targets compare
  // each S3 run with the local run just before it, so that a machine's drift during the
  // minutes of a cell weighs on both.
  struct Pair {
    Repeat local_first, local_warm, cold, warm;
    double mb_per_s = 0;  // measured just before the S3 run
    double transfer_s() const {
      return static_cast<double>(cold.downloaded_bytes) / 1e6 / mb_per_s;
    }
    // The cold bound: the local first query (also a fresh process's first) + the bytes
    // fetched at the measured bandwidth.
    double bound_s() const { return local_first.elapsed_s + transfer_s(); }
    double cold_ratio() const { return cold.elapsed_s / bound_s(); }
    double warm_ratio() const { return warm.elapsed_s / local_warm.elapsed_s; }
  };
  std::vector<Pair> Pairs() const {
    std::vector<Pair> out;
    for (size_t k = 0; k < local.runs.size() && k < s3.runs.size(); ++k) {
      std::vector<Repeat> l = RepeatsOf(local.runs[k]), r = RepeatsOf(s3.runs[k]);
      double mbps = k < s3.mb_per_s.size() ? s3.mb_per_s[k] : 0;
      if (l.size() < 2 || r.size() < 2 || !(mbps > 0) || !(l[1].elapsed_s > 0)) continue;
      out.push_back({l[0], l[1], r[0], r[1], mbps});
    }
    return out;
  }
  template <typename F>
  std::optional<double> MedianOfPairs(F f) const {
    std::vector<double> v;
    for (const Pair& p : Pairs()) v.push_back(f(p));
    if (v.empty()) return std::nullopt;
    return Median(v);
  }
  std::optional<double> BoundS() const {
    return MedianOfPairs([](const Pair& p) { return p.bound_s(); });
  }
  std::optional<double> ColdRatio() const {
    return MedianOfPairs([](const Pair& p) { return p.cold_ratio(); });
  }
  std::optional<double> WarmRatio() const {
    return MedianOfPairs([](const Pair& p) { return p.warm_ratio(); });
  }
};

Json OptionalJson(const std::optional<double>& v, int digits) {
  return v ? Json(Round(*v, digits)) : Json(nullptr);
}

Json CpuJson(const CpuSplit& x) {
  auto v = [](double s) { return s < 0 ? Json(nullptr) : Json(Round(s, 2)); };
  return {{"wall_s", Round(x.wall_s, 2)}, {"child_s", v(x.child_s)},
          {"bench_s", v(x.self_s)},       {"store_s", v(x.store_s)},
          {"other_s", v(x.other_s())},    {"machine_s", v(x.machine_s)}};
}

Json TimesJson(const std::vector<Repeat>& v, double Repeat::*field) {
  Json out = Json::array();
  for (const Repeat& p : v) out.push_back(Round(p.*field, 3));
  return out;
}

Json S3CellJson(const Context& ctx, const S3Context& s3, const QueryBenchOptions& o,
                const S3Cell& c, bool on_s3, bool warm) {
  const StorageRuns& st = on_s3 ? c.s3 : c.local;
  const int i = warm ? 1 : 0;
  Json j;
  j["storage"] = on_s3 ? "s3" : "local";
  j["cache"] = warm ? "warm" : "cold";
  j["engine"] = "sluice-sql";
  j["query"] = c.query;
  j["rows"] = o.rows;
  j["threads"] = o.threads;
  j["memory_setting"] = c.setting;
  j["memory_bytes"] = c.memory_bytes;
  j["median_s"] = OptionalJson(st.Elapsed(i), 3);
  j["plan_s"] = OptionalJson(st.Plan(i), 3);
  j["run_s"] = OptionalJson(st.Run(i), 3);
  j["times_s"] = TimesJson(st.Of(i), &Repeat::elapsed_s);
  j["plan_times_s"] = TimesJson(st.Of(i), &Repeat::plan_s);
  if (!on_s3) {
    // The local line is the warm reference; its first query in a fresh process is the cold
    // run's reference (both start a process and plan the tables for the first time).
    j["first_query_median_s"] = OptionalJson(st.Elapsed(0), 3);
    j["first_query_plan_s"] = OptionalJson(st.Plan(0), 3);
    j["first_query_times_s"] = TimesJson(st.Of(0), &Repeat::elapsed_s);
  } else {
    std::optional<double> bytes = st.Bytes(i);
    j["downloaded_bytes"] = bytes ? Json(static_cast<uint64_t>(*bytes)) : Json(nullptr);
    Json downloads = Json::array();
    for (const Repeat& p : st.Of(i)) downloads.push_back(p.downloads);
    j["downloads"] = downloads;
    std::vector<S3Cell::Pair> pairs = c.Pairs();
    auto list = [&](auto f) {
      Json out = Json::array();
      for (const S3Cell::Pair& p : pairs) out.push_back(Round(f(p), 3));
      return out;
    };
    if (!warm) {
      j["s3_mb_per_s"] =
          OptionalJson(c.MedianOfPairs([](const S3Cell::Pair& p) { return p.mb_per_s; }), 1);
      j["run_s3_mb_per_s"] = list([](const S3Cell::Pair& p) { return p.mb_per_s; });
      j["local_s"] = OptionalJson(c.local.Elapsed(0), 3);
      j["transfer_s"] =
          OptionalJson(c.MedianOfPairs([](const S3Cell::Pair& p) { return p.transfer_s(); }), 3);
      j["bound_s"] = OptionalJson(c.BoundS(), 3);
      std::optional<double> ratio = c.ColdRatio();
      j["ratio_to_bound"] = OptionalJson(ratio, 3);
      j["run_ratios_to_bound"] = list([](const S3Cell::Pair& p) { return p.cold_ratio(); });
      j["target_met"] = ratio ? Json(*ratio <= 1.0) : Json(nullptr);
      // Where the cold run's extra time went: the planning (the metadata requests and the
      // fetch) beside the local first query's, and DuckDB beside the local first query's.
      j["extra_plan_s"] = OptionalJson(c.MedianOfPairs([](const S3Cell::Pair& p) {
        return p.cold.plan_s - p.local_first.plan_s;
      }),
                                       3);
      j["fetch_mb_per_s"] = OptionalJson(c.MedianOfPairs([](const S3Cell::Pair& p) {
        double s = p.cold.plan_s - p.local_first.plan_s;
        return s > 0 ? static_cast<double>(p.cold.downloaded_bytes) / 1e6 / s : 0.0;
      }),
                                         1);
      j["extra_run_s"] = OptionalJson(
          c.MedianOfPairs([](const S3Cell::Pair& p) { return p.cold.run_s - p.local_first.run_s; }),
          3);
    } else {
      j["local_s"] = OptionalJson(c.local.Elapsed(1), 3);
      std::optional<double> ratio = c.WarmRatio();
      j["ratio_to_local"] = OptionalJson(ratio, 3);
      j["run_ratios_to_local"] = list([](const S3Cell::Pair& p) { return p.warm_ratio(); });
      j["target_ratio"] = kWarmTarget;
      j["target_met"] = ratio ? Json(*ratio <= kWarmTarget) : Json(nullptr);
      j["extra_plan_s"] = OptionalJson(c.MedianOfPairs([](const S3Cell::Pair& p) {
        return p.warm.plan_s - p.local_warm.plan_s;
      }),
                                       3);
    }
  }
  j["peak_rss_gib"] = Round(static_cast<double>(st.peak_bytes()) / kGiB, 3);
  j["cap_gib"] = o.cap_gib;
  j["finished_runs"] = st.finished();
  j["runs"] = static_cast<int>(st.runs.size());
  Json outcomes = Json::array();
  for (const RunResult& r : st.runs) {
    outcomes.push_back(r.outcome == Outcome::kFailed
                           ? fmt::format("failed: {}", r.error.substr(0, 300))
                           : std::string(OutcomeName(r.outcome)));
  }
  j["outcomes"] = outcomes;
  // Per run (both queries of the child): where the machine's CPU went while it ran.
  Json cpu = Json::array();
  for (const CpuSplit& x : st.cpu) cpu.push_back(CpuJson(x));
  j["run_cpu"] = cpu;
  j["answer_ok"] = c.answer_ok ? Json(*c.answer_ok) : Json(nullptr);
  const RunResult* answered = nullptr;
  for (const RunResult& r : st.runs) {
    if (r.outcome == Outcome::kFinished) {
      answered = &r;
      break;
    }
  }
  j["answer"] = answered ? Json(answered->answer) : Json(nullptr);
  j["reference"] = c.reference.empty() ? Json(nullptr) : Json(c.reference);
  j["reference_from"] = c.reference_from.empty() ? Json(nullptr) : Json(c.reference_from);
  j["warehouse"] = on_s3 ? s3.copy.warehouse : ctx.data.warehouse;
  j["endpoint"] = s3.endpoint;
  j["object_store"] = s3.store.description;
  j["s3_get_mb_per_s"] = Round(s3.bandwidth.single_median(), 1);
  j["s3_get_parallel_mb_per_s"] = Round(s3.bandwidth.parallel_median(), 1);
  j["s3_get_streams"] = s3.bandwidth.streams;
  j["s3_get_cpu"] = CpuJson(s3.bandwidth.single_cpu);
  j["s3_get_parallel_cpu"] = CpuJson(s3.bandwidth.parallel_cpu);
  j["s3_probe_bytes"] = s3.bandwidth.object_bytes;
  j["seed"] = o.seed;
  j["files"] = ctx.data_info.sales_files;
  j["sales_parquet_bytes"] = ctx.data_info.sales_bytes;
  j["cpu"] = ctx.machine.cpu_model;
  j["cores"] = ctx.machine.cores;
  j["memory_total_bytes"] = ctx.machine.memory_bytes;
  j["kernel"] = ctx.machine.kernel;
  j["load_start"] = ctx.load_start;
  j["load_now"] = LoadAverages();
  j["commit"] = ctx.commit;
  j["duckdb"] = std::string(duck::LibraryVersion());
  return j;
}

std::string Samples(const std::vector<double>& v) {
  std::string out;
  for (double x : v) out += fmt::format("{}{:.0f}", out.empty() ? "" : ", ", x);
  return out;
}

void PrintS3Header(const Context& ctx, const S3Context& s3, const QueryBenchOptions& o,
                   const Engine& engine, const EngineRunSpec& sample) {
  const MachineInfo& m = ctx.machine;
  fmt::print(
      "sluice bench query --storage s3: {} sales rows ({} customers) and {} products on S3 beside "
      "the same tables on local disk, {} run(s) per cell, {} thread(s), memory settings {}, cap "
      "{} GiB RSS per process tree\n",
      Grouped(static_cast<uint64_t>(o.rows)),
      Grouped(static_cast<uint64_t>(std::max<int64_t>(1, o.rows / 10))), Grouped(kProducts), o.runs,
      o.threads, Join(o.memory_settings, ", "), o.cap_gib);
  fmt::print("  machine   {}, {} cores, {} memory, {}; load average {} (1/5/15 min) at start\n",
             m.cpu_model, m.cores, FormatBinaryBytes(m.memory_bytes), m.kernel, ctx.load_start);
  fmt::print("  sluice    {}, duckdb {}\n",
             ctx.commit.empty() ? "commit unknown" : "commit " + ctx.commit,
             duck::LibraryVersion());
  std::string disk;
  if (Result<FsInfo> fs_info = GetFsInfo(ctx.data.dir); fs_info.ok()) {
    disk = fmt::format(" on {} ({})", fs_info->device, fs_info->fs_type);
  }
  fmt::print(
      "  local     warehouse {}{} ({}: {} Parquet files, {}; seed {})\n", ctx.data.warehouse, disk,
      ctx.data_info.generated ? fmt::format("generated in {:.0f} s", ctx.data_info.generate_s)
                              : "cached",
      ctx.data_info.sales_files, FormatBinaryBytes(ctx.data_info.sales_bytes), o.seed);
  fmt::print("  s3        endpoint {}; object store: {}\n", s3.endpoint, s3.store.description);
  fmt::print(
      "  s3 copy   warehouse {} ({}: {} data files, {}, the local files byte for byte, "
      "committed by lake::Table with the local manifests' entries)\n",
      s3.copy.warehouse,
      s3.copy.uploaded ? fmt::format("uploaded in {:.1f} s", s3.copy.upload_s) : "found complete",
      s3.copy.files, FormatBinaryBytes(s3.copy.bytes));
  const S3Bandwidth& b = s3.bandwidth;
  fmt::print(
      "  s3 GET    a {} object through the lake's client in 32 MiB ranged GETs: one stream "
      "{:.0f} MB/s (median of {}), {} streams {:.0f} MB/s (median of {}), MB = 10^6 B; "
      "upload {:.0f} MB/s; read again before each s3 run for its bound\n",
      FormatBinaryBytes(b.object_bytes), b.single_median(), Samples(b.single_mb_per_s), b.streams,
      b.parallel_median(), Samples(b.parallel_mb_per_s), b.upload_mb_per_s);
  auto per_gb = [](const CpuSplit& x, uint64_t bytes) {
    double gb = static_cast<double>(bytes) / 1e9;
    auto f = [&](double s) { return s < 0 ? std::string("?") : fmt::format("{:.2f}", s / gb); };
    return fmt::format(
        "client {} s, store {} s, other {} s per GB (the machine {:.1f} of {} cores busy)",
        f(x.self_s), f(x.store_s), f(x.other_s()),
        x.wall_s > 0 && x.machine_s >= 0 ? x.machine_s / x.wall_s : 0.0,
        std::thread::hardware_concurrency());
  };
  fmt::print("  s3 CPU    one stream: {}; {} streams: {}\n",
             per_gb(b.single_cpu, b.object_bytes * b.single_mb_per_s.size()), b.streams,
             per_gb(b.parallel_cpu, b.object_bytes * b.parallel_mb_per_s.size()));
  fmt::print("  engine    {}\n", engine.Describe(sample));
  fmt::print(
      "  runs      per query, runs taking turns (local, then s3); each a fresh process running "
      "the query twice: on s3 the first with an empty object cache (cold), the second with every "
      "file cached (warm); local s = the second query on the local tables (warm page cache), 1st "
      "= the first query of its process; plan = QueryEngine::Plan (metadata, pruning, on s3 the "
      "fetch, and a rewrite's steps: q3), run = DuckDB running the planned statement; medians "
      "of the finished runs; bound = local 1st + fetched / the S3 bandwidth measured just before "
      "the s3 run (the faster of one read of the object by one stream and by 8), cold/bound and "
      "warm/local = medians of the ratios of each s3 run to the local run of its turn\n");
  for (const QueryDef& q : kQueries) {
    if (std::find(o.queries.begin(), o.queries.end(), q.name) == o.queries.end()) continue;
    fmt::print("  {}        {}: {}\n", q.name, q.what,
               BindTables(std::string(q.sql), "lake.bench.sales", "lake.bench.products"));
  }
  fmt::print(
      "\n{:<8} {:<5} {:>8} {:>9} {:>10} {:>7} {:>7} {:>8} {:>8} {:>10} {:>10} {:>10} {:>6}\n",
      "setting", "query", "local s", "local 1st", "s3 cold s", "plan s", "run s", "MB got",
      "bound s", "cold/bound", "s3 warm s", "warm/local", "answer");
  std::fflush(stdout);
}

void PrintS3Row(const S3Cell& c) {
  auto f = [](const std::optional<double>& v, int digits) {
    return v ? fmt::format("{:.{}f}", *v, digits) : std::string("-");
  };
  std::optional<double> bytes = c.s3.Bytes(0);
  std::optional<double> mb;
  if (bytes) mb = *bytes / 1e6;
  std::optional<double> bound = c.BoundS();
  std::string answer = !c.answer_ok ? "-" : *c.answer_ok ? "ok" : "WRONG";
  std::string note;
  int local_failed = static_cast<int>(c.local.runs.size()) - c.local.finished();
  int s3_failed = static_cast<int>(c.s3.runs.size()) - c.s3.finished();
  if (local_failed + s3_failed > 0) {
    note = fmt::format("  {} local / {} s3 run(s) did not finish", local_failed, s3_failed);
    for (const RunResult& r : c.s3.runs) {
      if (r.outcome == Outcome::kFailed) {
        note += ": " + r.error.substr(0, r.error.find('\n')).substr(0, 100);
        break;
      }
    }
  }
  fmt::print(
      "{:<8} {:<5} {:>8} {:>9} {:>10} {:>7} {:>7} {:>8} {:>8} {:>10} {:>10} {:>10} {:>6}{}\n",
      c.setting, c.query, f(c.local.Elapsed(1), 2), f(c.local.Elapsed(0), 2), f(c.s3.Elapsed(0), 2),
      f(c.s3.Plan(0), 2), f(c.s3.Run(0), 2), f(mb, 1), f(bound, 2), f(c.ColdRatio(), 2),
      f(c.s3.Elapsed(1), 2), f(c.WarmRatio(), 2), answer, note);
  std::fflush(stdout);
}

// The S3 location, its configuration and reachability, checked before any data is
// generated. An error message; the exit status in `code` (2: not configured, 1: not reached).
Result<S3Context> PrepareS3(const QueryBenchOptions& o, int* code) {
  S3Context s3;
  *code = 2;
  s3.root = o.s3_warehouse;
  if (s3.root.empty()) {
    const char* bucket = std::getenv("SLUICE_S3_BUCKET");
    if (bucket != nullptr && *bucket != '\0')
      s3.root = fmt::format("s3://{}/sluice-bench-query", bucket);
  }
  if (s3.root.empty()) {
    return InvalidArgumentError(
        "--storage s3: where should the tables go? Give --s3-warehouse s3://bucket/prefix (or "
        "set SLUICE_S3_BUCKET)");
  }
  s3.root = lake::NormalLocation(s3.root);
  Result<const lake::Storage*> storage = lake::StorageFor(s3.root);
  if (!storage.ok()) {
    return InvalidArgumentError("--storage s3: {}", storage.status().message());
  }
  Result<lake::S3Settings> settings = lake::CurrentS3Settings();
  if (!settings.ok()) return InvalidArgumentError("--storage s3: {}", settings.status().message());
  s3.endpoint = settings->options.endpoint.empty()
                    ? fmt::format("https://s3.{}.amazonaws.com", settings->options.region)
                    : settings->options.endpoint;
  *code = 1;
  // A listing of the prefix: the store answers, the keys are accepted, the bucket exists.
  if (Result<std::vector<lake::StoredObject>> listed = (*storage)->List(s3.root); !listed.ok()) {
    return IOError("--storage s3: cannot list {} at {}: {}", s3.root, s3.endpoint,
                   listed.status().message());
  }
  s3.store = FindObjectStore(s3.endpoint);
  return s3;
}

int RunS3Bench(const QueryBenchOptions& o, Context& ctx, S3Context& s3, const std::string& work,
               const std::string& binary) {
  // Both storages through the same engine, the same way.
  std::unique_ptr<Engine> engine = MakeLakeChildEngine();
  EngineRunSpec base;
  base.data = &ctx.data;
  base.threads = o.threads;
  base.sluice_binary = binary;
  base.repeat = kS3Repeats;
  if (Status st = engine->Check(base); !st.ok()) {
    std::fprintf(stderr, "sluice bench query: %s\n", st.message().c_str());
    return 1;
  }
  // Uploads and the probe's reads allocate buffers of 7 to 32 MiB on several threads; glibc
  // would keep them in its thread arenas, and every child forked afterwards would count
  // those pages in its peak RSS (ru_maxrss keeps the high-water mark from before exec).
  // Served by mmap, they go back to the system when freed.
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  Result<S3Copy> copy = EnsureS3Copy(ctx.data, s3.root);
  if (!copy.ok()) {
    std::fprintf(stderr, "sluice bench query: copying the tables to S3: %s\n",
                 copy.status().ToString().c_str());
    return 1;
  }
  s3.copy = *copy;
  // The probe object: as large as the sales table, within 16 to 256 MiB.
  uint64_t probe_bytes = std::clamp<uint64_t>(ctx.data_info.sales_bytes, 16ULL << 20, 256ULL << 20);
  fmt::print(stderr, "sluice bench query: measuring the S3 GET bandwidth ({} object) ...",
             FormatBinaryBytes(probe_bytes));
  std::fflush(stderr);
  Result<std::unique_ptr<S3Probe>> probe = S3Probe::Create(s3.root, probe_bytes, work, s3.store);
  if (!probe.ok()) {
    std::fprintf(stderr, "\nsluice bench query: uploading the bandwidth probe: %s\n",
                 probe.status().ToString().c_str());
    return 1;
  }
  Result<S3Bandwidth> bw = MeasureS3Bandwidth(**probe, kProbeRepeats, kProbeStreams);
  if (!bw.ok()) {
    std::fprintf(stderr, "\nsluice bench query: measuring the S3 bandwidth: %s\n",
                 bw.status().ToString().c_str());
    return 1;
  }
  s3.bandwidth = *bw;
  fmt::print(stderr, " {:.0f} MB/s one stream, {:.0f} MB/s {} streams\n", bw->single_median(),
             bw->parallel_median(), bw->streams);

  References refs(ctx.data.dir + "/answers.json");
  if (!o.json) PrintS3Header(ctx, s3, o, *engine, base);
  const int64_t cap_bytes = static_cast<int64_t>(o.cap_gib * kGiB);
  bool wrong = false;
  int run_number = 0, warm_met = 0, cold_met = 0, cells = 0;
  std::error_code ec;
  for (const std::string& setting : o.memory_settings) {
    int64_t bytes = ParseMemorySetting(setting).value();
    for (const std::string& q : o.queries) {
      const QueryDef* def = FindQuery(q);
      S3Cell cell;
      cell.query = q;
      cell.setting = setting;
      cell.memory_bytes = bytes;
      for (int i = 0; i < o.runs; ++i) {
        for (bool on_s3 : {false, true}) {
          EngineRunSpec spec = base;
          spec.query = q;
          spec.sql_template = std::string(def->sql);
          spec.sql = BindTables(spec.sql_template, "lake.bench.sales", "lake.bench.products");
          spec.memory_setting = setting;
          spec.memory_bytes = bytes;
          spec.lake_warehouse = on_s3 ? s3.copy.warehouse : ctx.data.warehouse;
          spec.work_dir = fmt::format("{}/run-{:03}-{}-{}-{}-{}", work, ++run_number, setting, q,
                                      on_s3 ? "s3" : "local", i + 1);
          if (on_s3) spec.s3_cache_dir = spec.work_dir + "/s3-cache";
          fs::create_directories(spec.work_dir + "/spill", ec);
          fmt::print(stderr, "sluice bench query: {} {} {} run {}/{} ...", setting, q,
                     on_s3 ? "s3" : "local", i + 1, o.runs);
          std::fflush(stderr);
          if (on_s3) {
            // The bandwidth of this moment (the machine's load drifts): one read by one
            // stream and one by 8; the faster is this run's.
            Result<double> one = (*probe)->Read(1, nullptr);
            Result<double> many = (*probe)->Read(kProbeStreams, nullptr);
            double mbps = std::max(one.ok() ? *one : 0.0, many.ok() ? *many : 0.0);
            cell.s3.mb_per_s.push_back(mbps);
            fmt::print(stderr, " [S3 {:.0f} MB/s]", mbps);
          }
          CpuSplit cpu;
          CpuMeter meter(s3.store);
          RunResult r = RunOnce(*engine, spec, cap_bytes, o.timeout_s);
          meter.AddTo(cpu);
          cpu.child_s = r.cpu_s;
          std::vector<Repeat> rep = RepeatsOf(r);
          if (r.outcome == Outcome::kFinished && static_cast<int>(rep.size()) != kS3Repeats) {
            r.outcome = Outcome::kFailed;
            r.error = fmt::format("the child printed {} repeats, not {}: {}", rep.size(),
                                  kS3Repeats, r.line.substr(0, 200));
          }
          if (r.outcome == Outcome::kFinished) {
            fmt::print(
                stderr, " {:.2f} s then {:.2f} s{} (peak {:.2f} GiB)\n", rep[0].elapsed_s,
                rep[1].elapsed_s,
                on_s3 ? fmt::format(", fetched {:.1f} MB", rep[0].downloaded_bytes / 1e6) : "",
                static_cast<double>(r.peak_bytes) / kGiB);
          } else {
            fmt::print(stderr, " {}\n", OutcomeName(r.outcome));
            if (r.outcome == Outcome::kFailed) fmt::print(stderr, "  {}\n", r.error);
          }
          if (!o.keep_work) fs::remove_all(spec.work_dir, ec);
          (on_s3 ? cell.s3 : cell.local).runs.push_back(std::move(r));
          (on_s3 ? cell.s3 : cell.local).cpu.push_back(cpu);
        }
      }
      // Every answer, local and S3, against DuckDB's (kept beside the data), else against
      // the first local answer.
      if (const std::vector<std::string>* ref = refs.Find(q); ref != nullptr) {
        cell.reference = *ref;
        cell.reference_from = "duckdb";
      } else {
        for (const RunResult& r : cell.local.runs) {
          if (r.outcome == Outcome::kFinished) {
            cell.reference = r.answer;
            cell.reference_from = "local";
            break;
          }
        }
      }
      for (const StorageRuns* st : {&cell.local, &cell.s3}) {
        for (const RunResult& r : st->runs) {
          if (r.outcome != Outcome::kFinished || cell.reference.empty()) continue;
          bool same = r.answer == cell.reference;
          cell.answer_ok = cell.answer_ok.value_or(true) && same;
          if (!same) {
            wrong = true;
            fmt::print(stderr, "sluice bench query: {} {} {}: answer [{}] differs from {}'s [{}]\n",
                       setting, q, st == &cell.s3 ? "s3" : "local", Join(r.answer, ", "),
                       cell.reference_from, Join(cell.reference, ", "));
          }
        }
      }
      std::optional<double> cold_ratio = cell.ColdRatio(), warm_ratio = cell.WarmRatio();
      ++cells;
      if (cold_ratio && *cold_ratio <= 1.0) ++cold_met;
      if (warm_ratio && *warm_ratio <= kWarmTarget) ++warm_met;
      for (auto [on_s3, warm_line] : {std::pair{false, true}, {true, false}, {true, true}}) {
        Json line = S3CellJson(ctx, s3, o, cell, on_s3, warm_line);
        if (!o.json_file.empty()) {
          std::ofstream out(o.json_file, std::ios::app);
          out << line.dump() << "\n";
          if (!out)
            fmt::print(stderr, "sluice bench query: cannot append to --json-file {}\n",
                       o.json_file);
        }
        if (o.json) fmt::print("{}\n", line.dump());
      }
      if (o.json) {
        std::fflush(stdout);
      } else {
        PrintS3Row(cell);
      }
    }
  }
  if (!o.json) {
    fmt::print(
        "\n  targets (issue 26), medians of the runs paired by turn: warm <= {:.1f} x local: met "
        "in "
        "{} of {} cells; cold <= local 1st + fetched / the S3 bandwidth measured before the run: "
        "met in {} of {}\n",
        kWarmTarget, warm_met, cells, cold_met, cells);
    fmt::print("  load average at the end: {}\n", LoadAverages());
  }
  return wrong ? 3 : 0;
}

}  // namespace

Result<int64_t> ParseMemorySetting(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  std::string number = text.substr(0, i), unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  char* end = nullptr;
  double v = number.empty() ? 0 : std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || !(v > 0)) {
    return InvalidArgumentError(
        "memory setting {:?}: expected a positive size such as 3GB, 1GB or 512MiB", text);
  }
  std::string u;
  for (char ch : unit) u += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  static const std::map<std::string, double> kUnits = {
      {"", 1},      {"B", 1},      {"KB", 1e3},      {"MB", 1e6},      {"GB", 1e9},
      {"TB", 1e12}, {"KIB", 1024}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1099511627776.0}};
  auto it = kUnits.find(u);
  if (it == kUnits.end()) {
    return InvalidArgumentError(
        "memory setting {:?}: unknown unit {:?} (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", text,
        unit);
  }
  double bytes = v * it->second;
  if (bytes < 16e6)
    return InvalidArgumentError("memory setting {:?}: below 16 MB, too small for any engine", text);
  if (bytes > 1e15) return InvalidArgumentError("memory setting {:?}: too large", text);
  return static_cast<int64_t>(bytes);
}

Status ValidateQueryBenchOptions(const QueryBenchOptions& o) {
  if (o.rows < 1) return InvalidArgumentError("--rows {}: must be at least 1", o.rows);
  if (o.files < 1 || o.files > 1000)
    return InvalidArgumentError("--files {}: must be 1 to 1000", o.files);
  if (o.files > o.rows)
    return InvalidArgumentError("--files {}: more files than --rows {}", o.files, o.rows);
  if (o.threads < 1 || o.threads > 1024)
    return InvalidArgumentError("--threads {}: must be 1 to 1024", o.threads);
  if (o.runs < 1 || o.runs > 100)
    return InvalidArgumentError("--runs {}: must be 1 to 100", o.runs);
  if (!(o.cap_gib > 0) || o.cap_gib > 1e6)
    return InvalidArgumentError("--cap-gib {}: must be a positive size", o.cap_gib);
  if (!(o.timeout_s > 0))
    return InvalidArgumentError("--timeout {}: must be positive", o.timeout_s);
  if (o.clients < 1 || o.clients > 1000)
    return InvalidArgumentError("--clients {}: must be 1 to 1000", o.clients);
  if (!(o.statement_seconds > 0) || o.statement_seconds > 3600)
    return InvalidArgumentError("--statement-seconds {}: must be above 0, at most 3600",
                                o.statement_seconds);
  if (o.small_statements && o.storage != "local")
    return InvalidArgumentError("--small-statements reads the local tables: not with --storage s3");
  if (o.queries.empty()) return InvalidArgumentError("--queries: none given (q1, q2, q3, q4)");
  std::set<std::string> seen;
  for (const std::string& q : o.queries) {
    if (FindQuery(q) == nullptr)
      return InvalidArgumentError("--queries: unknown query {:?} (q1, q2, q3, q4)", q);
    if (!seen.insert(q).second) return InvalidArgumentError("--queries: {} given twice", q);
  }
  if (o.engines.empty())
    return InvalidArgumentError("--engines: none given ({})", Join(KnownEngines(), ", "));
  seen.clear();
  for (const std::string& e : o.engines) {
    Result<std::unique_ptr<Engine>> made = MakeEngine(e);
    if (!made.ok()) return InvalidArgumentError("--engines: {}", made.status().message());
    if (!seen.insert(e).second) return InvalidArgumentError("--engines: {} given twice", e);
  }
  if (o.memory_settings.empty())
    return InvalidArgumentError("--memory-settings: none given (such as 3GB,1GB)");
  seen.clear();
  for (const std::string& m : o.memory_settings) {
    Result<int64_t> bytes = ParseMemorySetting(m);
    if (!bytes.ok()) return InvalidArgumentError("--memory-settings: {}", bytes.status().message());
    if (!seen.insert(m).second) return InvalidArgumentError("--memory-settings: {} given twice", m);
  }
  if (!o.chart.empty() && fs::path(o.chart).extension() != ".png") {
    return InvalidArgumentError("--chart {}: the chart is a PNG; name it *.png", o.chart);
  }
  if (o.storage != "local" && o.storage != "s3")
    return InvalidArgumentError("--storage {:?}: local or s3", o.storage);
  if (!o.s3_warehouse.empty() && o.storage != "s3")
    return InvalidArgumentError("--s3-warehouse: only with --storage s3");
  if (!o.s3_warehouse.empty() && !lake::IsS3Location(o.s3_warehouse)) {
    return InvalidArgumentError("--s3-warehouse {}: not an S3 location (s3://bucket/prefix)",
                                o.s3_warehouse);
  }
  if (o.storage == "s3") {
    if (o.engines != QueryBenchOptions{}.engines) {
      return InvalidArgumentError(
          "--engines: not with --storage s3, which reads the S3 and the local tables through the "
          "query server's engine only");
    }
    if (!o.chart.empty()) return InvalidArgumentError("--chart: not drawn with --storage s3");
  }
  return Status::OK();
}

int RunQueryBench(const QueryBenchOptions& options) {
  QueryBenchOptions o = options;
  if (Status st = ValidateQueryBenchOptions(o); !st.ok()) {
    std::fprintf(stderr, "sluice bench query: %s\n", st.message().c_str());
    return 2;
  }
  // --storage s3: the S3 location checked before anything is generated.
  std::optional<S3Context> s3;
  if (o.storage == "s3") {
    int code = 0;
    Result<S3Context> prepared = PrepareS3(o, &code);
    if (!prepared.ok()) {
      std::fprintf(stderr, "sluice bench query: %s\n", prepared.status().message().c_str());
      return code;
    }
    s3 = std::move(*prepared);
    o.engines.clear();  // the lake child runs instead (RunS3Bench)
  }
  // --small-statements reads only the products table: the sales table is kept small.
  if (o.small_statements) o.rows = std::min<int64_t>(o.rows, 100'000);
  // Engines in the order they run: duckdb first (its answers are the reference), then as given.
  std::vector<std::string> engine_names;
  if (std::find(o.engines.begin(), o.engines.end(), "duckdb") != o.engines.end())
    engine_names.push_back("duckdb");
  for (const std::string& e : o.engines) {
    if (e != "duckdb") engine_names.push_back(e);
  }
  std::vector<std::unique_ptr<Engine>> engines;
  for (const std::string& e : engine_names) engines.push_back(std::move(MakeEngine(e)).value());

  Context ctx;
  ctx.machine = GetMachineInfo();
  ctx.load_start = LoadAverages();
  ctx.commit = SourceCommit();
  std::string data_dir = o.data_dir.empty() ? DefaultDataDir() : o.data_dir;
  ctx.data = DatasetPaths(data_dir, o.rows, o.seed);
  ctx.node_modules = o.node_modules.empty() ? SourceNodeModules() : o.node_modules;
  std::string binary = o.sluice_binary;
  if (binary == "/proc/self/exe") {
    std::error_code ec;
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) binary = self.string();
  }

  // The work directory of the runs: logs, spill files, the Polars script.
  std::error_code ec;
  fs::create_directories(data_dir, ec);
  if (ec) {
    std::fprintf(stderr, "sluice bench query: cannot create --data-dir %s: %s\n", data_dir.c_str(),
                 ec.message().c_str());
    return 1;
  }
  std::string work =
      fmt::format("{}/work-{}", fs::absolute(data_dir).lexically_normal().string(), ::getpid());
  fs::create_directories(work, ec);
  if (ec) {
    std::fprintf(stderr, "sluice bench query: cannot create %s: %s\n", work.c_str(),
                 ec.message().c_str());
    return 1;
  }
  struct Cleanup {
    std::string dir;
    bool keep;
    ~Cleanup() {
      std::error_code e;
      if (!keep) fs::remove_all(dir, e);
    }
  } cleanup{work, o.keep_work};
  std::string script = work + "/polars_query.js";
  if (Status st = WriteText(script, std::string(kPolarsQueryJs)); !st.ok()) {
    std::fprintf(stderr, "sluice bench query: %s\n", st.message().c_str());
    return 1;
  }

  EngineRunSpec base;
  base.data = &ctx.data;
  base.threads = o.threads;
  base.sluice_binary = binary;
  base.node = o.node;
  base.node_modules = ctx.node_modules;
  base.polars_script = script;
  for (const auto& e : engines) {
    if (Status st = e->Check(base); !st.ok()) {
      std::fprintf(stderr, "sluice bench query: %s\n", st.message().c_str());
      return 1;
    }
  }

  Result<DatasetInfo> info = EnsureDataset(ctx.data, o);
  if (!info.ok()) {
    std::fprintf(stderr, "sluice bench query: generating the data: %s\n",
                 info.status().ToString().c_str());
    return 1;
  }
  ctx.data_info = *info;
  if (s3) return RunS3Bench(o, ctx, *s3, work, binary);
  if (o.small_statements) return RunSmallStatementsBench(o, ctx.data, work, binary);
  References refs(ctx.data.dir + "/answers.json");

  if (!o.json) PrintHeader(ctx, o, engines, base);
  const int64_t cap_bytes = static_cast<int64_t>(o.cap_gib * kGiB);
  std::vector<Cell> cells;
  bool wrong = false;
  int run_number = 0;
  for (const std::string& setting : o.memory_settings) {
    int64_t bytes = ParseMemorySetting(setting).value();
    for (const std::string& q : o.queries) {
      const QueryDef* def = FindQuery(q);
      // The engines take turns (run 1 of each, then run 2...), so that a machine slowing
      // down or speeding up during a cell's minutes weighs on every engine alike.
      std::vector<Cell> row(engines.size());
      for (size_t e = 0; e < engines.size(); ++e) {
        row[e].engine = std::string(engines[e]->name());
        row[e].query = q;
        row[e].setting = setting;
        row[e].memory_bytes = bytes;
        row[e].memory_applied = engines[e]->applies_memory_setting();
      }
      for (int i = 0; i < o.runs; ++i) {
        for (size_t e = 0; e < engines.size(); ++e) {
          const auto& engine = engines[e];
          EngineRunSpec spec = base;
          spec.query = q;
          spec.sql_template = std::string(def->sql);
          spec.sql = BindTables(spec.sql_template, "sales", "products");
          spec.memory_setting = setting;
          spec.memory_bytes = bytes;
          spec.work_dir = fmt::format("{}/run-{:03}-{}-{}-{}-{}", work, ++run_number, setting, q,
                                      engine->name(), i + 1);
          fs::create_directories(spec.work_dir + "/spill", ec);
          fmt::print(stderr, "sluice bench query: {} {} {} run {}/{} ...", setting, q,
                     engine->name(), i + 1, o.runs);
          std::fflush(stderr);
          RunResult r = RunOnce(*engine, spec, cap_bytes, o.timeout_s);
          fmt::print(stderr, " {}{} (peak {:.2f} GiB)\n", OutcomeName(r.outcome),
                     r.outcome == Outcome::kFinished ? fmt::format(" in {:.2f} s", r.seconds) : "",
                     static_cast<double>(r.peak_bytes) / kGiB);
          if (r.outcome == Outcome::kFailed) fmt::print(stderr, "  {}\n", r.error);
          if (!o.keep_work) fs::remove_all(spec.work_dir, ec);
          row[e].runs.push_back(std::move(r));
        }
      }
      // DuckDB's cell first: its answer is the reference, its median the ratios' base.
      std::vector<size_t> order;
      for (size_t e = 0; e < row.size(); ++e) {
        if (row[e].engine == "duckdb")
          order.insert(order.begin(), e);
        else
          order.push_back(e);
      }
      std::optional<double> duckdb_median;
      for (size_t e : order) {
        Cell& cell = row[e];
        // The answers: every finished run's against DuckDB's.
        for (const RunResult& r : cell.runs) {
          if (r.outcome != Outcome::kFinished) continue;
          if (refs.Find(q) == nullptr && cell.engine == "duckdb") {
            if (Status st = refs.Add(q, r.answer); !st.ok()) {
              fmt::print(stderr, "sluice bench query: keeping the reference answer: {}\n",
                         st.message());
            }
          }
          const std::vector<std::string>* ref = refs.Find(q);
          if (ref == nullptr) continue;
          cell.reference = *ref;
          bool same = r.answer == *ref;
          cell.answer_ok = cell.answer_ok.value_or(true) && same;
          if (!same) {
            wrong = true;
            fmt::print(stderr,
                       "sluice bench query: {} {} {}: answer [{}] differs from DuckDB's [{}] "
                       "(columns {})\n",
                       setting, q, cell.engine, Join(r.answer, ", "), Join(*ref, ", "),
                       Join(r.columns, ", "));
          }
        }
        if (cell.engine == "duckdb") duckdb_median = cell.median_s();
      }
      for (Cell& cell : row) {
        if (!o.json_file.empty()) {
          std::ofstream out(o.json_file, std::ios::app);
          out << CellJson(ctx, o, cell, duckdb_median).dump() << "\n";
          if (!out)
            fmt::print(stderr, "sluice bench query: cannot append to --json-file {}\n",
                       o.json_file);
        }
        if (o.json) {
          fmt::print("{}\n", CellJson(ctx, o, cell, duckdb_median).dump());
          std::fflush(stdout);
        } else {
          PrintRow(cell, duckdb_median);
        }
        cells.push_back(std::move(cell));
      }
    }
  }
  if (!o.json) fmt::print("\n  load average at the end: {}\n", LoadAverages());
  if (!o.chart.empty()) {
    if (Status st = WriteChart(o.chart, o, cells, engine_names, ctx); !st.ok()) {
      std::fprintf(stderr, "sluice bench query: --chart: %s\n", st.message().c_str());
      return 1;
    }
    if (!o.json) fmt::print("  chart: {}\n", o.chart);
  }
  return wrong ? 3 : 0;
}

int RunQueryChild(const QueryChildOptions& o) {
  const QueryDef* def = FindQuery(o.query);
  if (def == nullptr) {
    std::fprintf(stderr, "sluice bench query-child: unknown query %s\n", o.query.c_str());
    return 2;
  }
  if (!o.warehouse.empty()) {
    return RunLakeQueryChild(
        {.query = o.query,
         .sql = BindTables(std::string(def->sql), "lake.bench.sales", "lake.bench.products"),
         .warehouse = o.warehouse,
         .s3_cache_dir = o.s3_cache_dir,
         .repeat = o.repeat,
         .threads = o.threads,
         .memory_limit_bytes = o.memory_limit_bytes,
         .temp_dir = o.temp_dir});
  }
  if (o.sales_glob.empty() || o.products_glob.empty()) {
    std::fprintf(stderr, "sluice bench query-child: --sales and --products (or --warehouse)\n");
    return 2;
  }
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "sluice bench query-child: %s\n", st.ToString().c_str());
    return 1;
  };
  Result<std::unique_ptr<duck::Database>> db =
      duck::Database::Open({.memory_limit_bytes = o.memory_limit_bytes,
                            .threads = o.threads,
                            .temp_directory = o.temp_dir});
  if (!db.ok()) return fail(db.status());
  Result<std::unique_ptr<duck::Connection>> conn = duck::Connection::Open(**db);
  if (!conn.ok()) return fail(conn.status());
  Status st = (*conn)->Execute(
      fmt::format("CREATE VIEW sales AS SELECT * FROM read_parquet({}); CREATE VIEW products AS "
                  "SELECT * FROM read_parquet({})",
                  duck::QuoteLiteral(o.sales_glob), duck::QuoteLiteral(o.products_glob)));
  if (!st.ok()) return fail(st);
  auto start = std::chrono::steady_clock::now();
  Result<duck::QueryResult> result =
      (*conn)->Query(BindTables(std::string(def->sql), "sales", "products"));
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!result.ok()) return fail(result.status());
  if (result->row_count() != 1 || result->chunk_count() < 1) {
    return fail(InternalError("{} returned {} rows, not 1", o.query, result->row_count()));
  }
  Json answer = Json::array(), columns = Json::array();
  duck::ResultChunk chunk = result->chunk(0);
  for (size_t c = 0; c < result->column_count(); ++c) {
    columns.push_back(result->column_name(c));
    if (result->column_type(c) != duck::ColumnType::kInt64) {
      return fail(InternalError("{}: column {} is {}, not BIGINT", o.query, result->column_name(c),
                                result->column_type_name(c)));
    }
    answer.push_back(chunk.IsNull(c, 0) ? std::string("NULL")
                                        : std::to_string(chunk.GetInt64(c, 0)));
  }
  Json out = {{"elapsed_s", elapsed}, {"columns", columns}, {"answer", answer}};
  fmt::print("{}\n", out.dump());
  return 0;
}

}  // namespace sluice::bench
