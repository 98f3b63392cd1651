// How long PlanLakeQuery takes: the first plan in a fresh process (a new DuckDB database
// and catalog, as `sluice sql` and a freshly started server see it) and the median of
// repeated plans of the same query on the same connection and catalog (a long-lived query
// server). Not a test: it asserts nothing.
//
//   lake_planner_benchmark <warehouse> "<sql naming lake.<ns>.<table>>" [repeats]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "duck/database.h"
#include "query/lake_planner/lake_planner.h"

int main(int argc, char** argv) {
  using namespace sluice;
  if (argc < 3) {
    fmt::print(stderr, "usage: {} <warehouse> <sql> [repeats]\n", argv[0]);
    return 2;
  }
  const int repeats = argc > 3 ? std::max(1, std::atoi(argv[3])) : 20;
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  auto start = Clock::now();
  auto db = duck::Database::Open({.threads = 2});
  if (!db.ok()) return fmt::print(stderr, "{}\n", db.status().message()), 1;
  auto conn = duck::Connection::Open(**db);
  if (!conn.ok()) return fmt::print(stderr, "{}\n", conn.status().message()), 1;
  const double open_ms = ms(Clock::now() - start);
  query::WarehouseCatalog catalog(argv[1]);
  std::vector<double> times;
  query::PlannedQuery last;
  for (int i = 0; i <= repeats; ++i) {
    auto t0 = Clock::now();
    auto plan = query::PlanLakeQuery(**conn, argv[2], catalog);
    times.push_back(ms(Clock::now() - t0));
    if (!plan.ok()) return fmt::print(stderr, "{}\n", plan.status().message()), 1;
    last = std::move(*plan);
  }
  const double first = times[0];
  times.erase(times.begin());
  std::sort(times.begin(), times.end());
  fmt::print(
      "open database {:.2f} ms; first plan {:.2f} ms; then median {:.2f} ms (min {:.2f}, max "
      "{:.2f}) over {} plans\n",
      open_ms, first, times[times.size() / 2], times.front(), times.back(), times.size());
  for (const query::LakeTableScan& t : last.tables) {
    fmt::print("{}: manifests {}/{} read, files {}/{} kept, {} records\n", t.table,
               t.stats.manifests_read, t.stats.manifests_total, t.stats.files_kept,
               t.stats.files_total, t.stats.records_kept);
  }
  if (std::getenv("SLUICE_PRINT_SQL") != nullptr) fmt::print("{}\n", last.sql);
  return 0;
}
