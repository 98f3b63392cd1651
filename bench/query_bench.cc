#include "bench/query_bench.h"

#include <fmt/format.h>
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

#include "bench/bench_util.h"
#include "bench/child_process.h"
#include "bench/machine_info.h"
#include "bench/polars_query_js.h"
#include "bench/query_engine.h"
#include "duck/database.h"
#include "lake/data_files.h"
#include "lake/duck_types.h"
#include "lake/table.h"
#include "lake/table_files.h"

#ifndef SLUICE_SOURCE_DIR
#define SLUICE_SOURCE_DIR ""
#endif

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

std::string DefaultNodeModules() {
  std::string dir = SLUICE_SOURCE_DIR;
  return dir.empty() ? "node_modules" : dir + "/node_modules";
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
  std::string error;  // kFailed: what happened
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
    r.answer = answer->values;
    r.columns = answer->columns;
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
  return Status::OK();
}

int RunQueryBench(const QueryBenchOptions& options) {
  QueryBenchOptions o = options;
  if (Status st = ValidateQueryBenchOptions(o); !st.ok()) {
    std::fprintf(stderr, "sluice bench query: %s\n", st.message().c_str());
    return 2;
  }
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
  ctx.node_modules = o.node_modules.empty() ? DefaultNodeModules() : o.node_modules;
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
