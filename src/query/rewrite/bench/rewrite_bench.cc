// rewrite_bench: a measurement, not a test (ctest never runs it). One query, one way, in a
// fresh process, so that VmHWM is that run's peak:
//
//   rewrite_bench --generate --rows 30000000 --data /tmp/sales.parquet
//   rewrite_bench --data /tmp/sales.parquet --query q3 --mode plain|rewrite --memory 1GB --threads
//   2
//
// It prints one JSON line: mode, query, memory, threads, seconds, peak_rss_mib, answer,
// parts and the plan's explanation. The data and queries are `sluice bench query`'s
// (bench/query_bench.cc): sales with rows/10 customers, q3 latest row per customer, q4
// group-by per customer, each reduced to one row of integers.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "duck/database.h"
#include "query/rewrite/rewrite.h"

namespace {

using namespace sluice;

constexpr const char* kQ3 =
    "WITH ranked AS (SELECT *, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY ts DESC, "
    "order_id DESC) AS rn "
    "FROM sales) "
    "SELECT count(*)::BIGINT AS customers, sum(order_id)::BIGINT AS order_ids, "
    "sum(quantity)::BIGINT AS quantity, "
    "sum(round(amount * 100)::BIGINT)::BIGINT AS cents FROM ranked WHERE rn = 1";
// q3 written with DISTINCT ON (D24).
constexpr const char* kQ3DistinctOn =
    "SELECT count(*)::BIGINT AS customers, sum(order_id)::BIGINT AS order_ids, "
    "sum(quantity)::BIGINT AS quantity, sum(round(amount * 100)::BIGINT)::BIGINT AS cents "
    "FROM (SELECT DISTINCT ON (customer_id) * FROM sales "
    "ORDER BY customer_id, ts DESC, order_id DESC) AS latest";
constexpr const char* kQ4 =
    "WITH g AS (SELECT customer_id, count(*) AS n, sum(quantity) AS q, sum(round(amount * "
    "100)::BIGINT) AS cents, "
    "max(ts) AS last_ts FROM sales GROUP BY customer_id) "
    "SELECT count(*)::BIGINT AS groups, sum(n)::BIGINT AS rows, sum(q)::BIGINT AS quantity, "
    "sum(cents)::BIGINT AS "
    "cents, sum(n * n)::BIGINT AS n_squared, sum(epoch_us(last_ts) // 1000000)::BIGINT AS "
    "last_ts_seconds FROM g";

std::string SalesSql(int64_t rows) {
  int64_t customers = std::max<int64_t>(1, rows / 10);
  return fmt::format(
      "SELECT i + 1 AS order_id, 1 + (hash(i, 42::UBIGINT, 1) % {c})::BIGINT AS customer_id, "
      "(1 + (hash(i, 42::UBIGINT, 2) % 50000))::INTEGER AS product_id, "
      "make_timestamp((1704067200 + (i * 31536000) // {n} + (hash(i, 42::UBIGINT, 3) % "
      "86400)::BIGINT) * 1000000) AS ts, "
      "(1 + (hash(i, 42::UBIGINT, 4) % 10))::INTEGER AS quantity, "
      "(1 + (hash(i, 42::UBIGINT, 5) % 50000)::BIGINT)::DOUBLE / 100 AS amount, "
      "CASE WHEN hash(i, 42::UBIGINT, 6) % 100 < 88 THEN 'completed' WHEN hash(i, 42::UBIGINT, 6) "
      "% 100 < 95 THEN "
      "'returned' ELSE 'cancelled' END AS status, "
      "(['web', 'store', 'mobile', 'partner'])[1 + (hash(i, 42::UBIGINT, 7) % 4)::INTEGER] AS "
      "channel "
      "FROM range(0, {n}) t(i)",
      fmt::arg("c", customers), fmt::arg("n", rows));
}

int64_t ParseBytes(const std::string& s) {
  double v = std::atof(s.c_str());
  if (s.find("GB") != std::string::npos) return static_cast<int64_t>(v * 1e9);
  if (s.find("MB") != std::string::npos) return static_cast<int64_t>(v * 1e6);
  return static_cast<int64_t>(v);
}

long PeakRssKib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

int Fail(const Status& st) {
  std::fprintf(stderr, "rewrite_bench: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = "/tmp/sluice-rewrite-bench/sales.parquet";
  std::string query = "q3";
  std::string own_sql;  // --sql: any statement over `sales` instead of a named query
  std::string setup;    // --exec: a statement run first (COPY a sorted copy, say), timed apart
  std::string mode = "rewrite";
  std::string memory = "1GB";
  std::string spill;
  int threads = 2;
  int64_t rows = 30'000'000;
  int force_parts = 0;
  bool generate = false;
  bool assume = true;
  bool range_parts = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--data")
      data = next();
    else if (a == "--query")
      query = next();
    else if (a == "--sql")
      own_sql = next();
    else if (a == "--exec")
      setup = next();
    else if (a == "--mode")
      mode = next();
    else if (a == "--memory")
      memory = next();
    else if (a == "--threads")
      threads = std::atoi(next().c_str());
    else if (a == "--rows")
      rows = std::atoll(next().c_str());
    else if (a == "--parts")
      force_parts = std::atoi(next().c_str());
    else if (a == "--spill")
      spill = next();
    else if (a == "--no-ranges")
      range_parts = false;
    else if (a == "--no-assume")
      assume = false;
    else if (a == "--generate")
      generate = true;
    else {
      std::fprintf(
          stderr,
          "usage: rewrite_bench [--generate --rows N] --data FILE.parquet --query q3|q3d|q4 "
          "[--sql STATEMENT] [--exec STATEMENT] [--no-assume] [--no-ranges] "
          "--mode plain|rewrite "
          "--memory 1GB --threads 2 [--parts N] [--spill DIR]\n");
      return 2;
    }
  }
  if (spill.empty()) spill = std::filesystem::path(data).parent_path() / "spill";
  std::filesystem::create_directories(spill);
  int64_t limit = ParseBytes(memory);
  auto db = duck::Database::Open(
      {.memory_limit_bytes = limit, .threads = threads, .temp_directory = spill});
  if (!db.ok()) return Fail(db.status());
  auto conn = duck::Connection::Open(**db);
  if (!conn.ok()) return Fail(conn.status());
  duck::Connection& c = **conn;
  if (Status st = c.Execute("SET preserve_insertion_order = false"); !st.ok()) return Fail(st);
  if (generate) {
    std::filesystem::create_directories(std::filesystem::path(data).parent_path());
    Status st = c.Execute(
        fmt::format("COPY ({}) TO {} (FORMAT parquet)", SalesSql(rows), duck::QuoteLiteral(data)));
    if (!st.ok()) return Fail(st);
    std::printf("{\"generated\": %s, \"rows\": %lld}\n", duck::QuoteLiteral(data).c_str(),
                static_cast<long long>(rows));
    return 0;
  }
  if (Status st = c.Execute(fmt::format("CREATE VIEW sales AS SELECT * FROM read_parquet({})",
                                        duck::QuoteLiteral(data)));
      !st.ok()) {
    return Fail(st);
  }
  if (!setup.empty()) {
    if (Status st = c.Execute(setup); !st.ok()) return Fail(st);
    if (own_sql.empty()) return 0;
  }
  std::string sql = !own_sql.empty() ? own_sql
                    : query == "q3"  ? kQ3
                    : query == "q3d" ? kQ3DistinctOn
                                     : kQ4;
  if (!own_sql.empty()) query = "sql";
  auto start = std::chrono::steady_clock::now();
  std::string answer;
  int parts = 0;
  std::string how;
  auto collect = [&](Result<std::vector<std::vector<std::optional<std::string>>>> r) -> Status {
    if (!r.ok()) return r.status();
    for (auto& row : *r) {
      for (auto& v : row) answer += (answer.empty() ? "" : ",") + v.value_or("NULL");
    }
    return Status::OK();
  };
  Status st;
  if (mode == "plain") {
    st = collect(c.QueryText(sql));
  } else {
    query::rewrite::RewriteOptions o{
        .memory_limit_bytes = limit, .threads = threads, .force_parts = force_parts};
    o.assume = assume;
    o.range_parts = range_parts;
    // As the server: a plan whose assumption a row breaks is made again without it (D25).
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto plan_start = std::chrono::steady_clock::now();
      auto plan = query::rewrite::PlanRewrite(c, sql, o);
      std::fprintf(
          stderr, "plan: %.2fs\n",
          std::chrono::duration<double>(std::chrono::steady_clock::now() - plan_start).count());
      if (!plan.ok()) return Fail(plan.status());
      if (!plan->has_value()) {
        how = "no rewrite";
        st = collect(c.QueryText(sql));
        break;
      }
      parts = (*plan)->parts;
      how = (*plan)->explanation;
      for (const std::string& step : (*plan)->steps)
        std::fprintf(stderr, "step: %s\n", step.c_str());
      std::fprintf(stderr, "final: %s\n", (*plan)->final_select.c_str());
      auto steps_start = std::chrono::steady_clock::now();
      auto final_select = query::rewrite::RunSteps(c, **plan);
      std::fprintf(
          stderr, "steps: %.2fs\n",
          std::chrono::duration<double>(std::chrono::steady_clock::now() - steps_start).count());
      if ((*plan)->assumed && query::rewrite::AssumptionFailed(final_select.status())) {
        std::fprintf(stderr, "assumption failed: planning again\n");
        o.assume = false;
        continue;
      }
      if (!final_select.ok()) {
        st = final_select.status();
      } else {
        st = collect(c.QueryText(*final_select));
        (void)query::rewrite::RunCleanup(c, **plan);
      }
      break;
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string error = st.ok() ? "" : st.ToString().substr(0, 200);
  for (char& ch : error) {
    if (ch == '"' || ch == '\n') ch = ' ';
  }
  for (char& ch : how) {
    if (ch == '"') ch = '\'';
  }
  std::printf(
      "{\"mode\": \"%s\", \"query\": \"%s\", \"memory\": \"%s\", \"threads\": %d, \"seconds\": "
      "%.2f, "
      "\"peak_rss_mib\": %ld, \"ok\": %s, \"answer\": \"%s\", \"parts\": %d, \"plan\": \"%s\", "
      "\"error\": \"%s\"}\n",
      mode.c_str(), query.c_str(), memory.c_str(), threads, seconds, PeakRssKib() / 1024,
      st.ok() ? "true" : "false", answer.c_str(), parts, how.c_str(), error.c_str());
  return st.ok() ? 0 : 1;
}
