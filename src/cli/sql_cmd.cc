#include "cli/sql_cmd.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "duck/database.h"
#include "query/engine.h"

namespace sluice::cli {

int RunSql(const SqlFlags& flags) {
  auto db = duck::Database::Open({.memory_limit_bytes = flags.memory_limit_mib << 20, .threads = 2});
  if (!db.ok()) {
    fmt::print(stderr, "sluice sql: {}\n", db.status().message());
    return 1;
  }
  auto conn = duck::Connection::Open(**db);
  if (!conn.ok()) {
    fmt::print(stderr, "sluice sql: {}\n", conn.status().message());
    return 1;
  }
  std::string sql = flags.sql;
  while (!sql.empty() && (sql.back() == ';' || std::isspace(static_cast<unsigned char>(sql.back())))) sql.pop_back();
  std::string warehouse = flags.warehouse;
  if (warehouse.empty()) {
    const char* env = std::getenv("SLUICE_WAREHOUSE");
    warehouse = env != nullptr ? env : "";
  }
  query::QueryEngine engine({.warehouse = warehouse,
                             .kafka_bootstrap = flags.bootstrap,
                             .memory_limit_bytes = flags.memory_limit_mib << 20,
                             .threads = 2});
  if (Status st = engine.OpenDatabase(**conn); !st.ok()) {
    fmt::print(stderr, "sluice sql: {}\n", st.message());
    return 1;
  }
  auto planned = engine.Plan(**conn, sql, /*allow_steps=*/true);
  if (!planned.ok()) {
    fmt::print(stderr, "sluice sql: {}\n", planned.status().message());
    return 1;
  }
  sql = planned->sql;
  struct Cleanup {
    query::PlannedStatement& p;
    duck::Connection& conn;
    ~Cleanup() {
      if (p.cleanup) p.cleanup(conn);
    }
  } cleanup{*planned, **conn};
  if (flags.json) {
    auto rows = (*conn)->Query(fmt::format("SELECT to_json(t)::VARCHAR FROM ({}) t", sql));
    if (!rows.ok()) {
      fmt::print(stderr, "sluice sql: {}\n", rows.status().message());
      return 1;
    }
    for (size_t i = 0; i < rows->chunk_count(); ++i) {
      duck::ResultChunk c = rows->chunk(i);
      for (size_t r = 0; r < c.size(); ++r) fmt::print("{}\n", c.GetString(0, r));
    }
    return 0;
  }
  // Column names from a described query, values as DuckDB's text.
  auto names = (*conn)->Query(fmt::format("SELECT * FROM ({}) LIMIT 0", sql));
  if (!names.ok()) {
    // Report the error of the query as written, not of the wrapper (its positions differ).
    Status st = (*conn)->Execute(sql);
    fmt::print(stderr, "sluice sql: {}\n", st.ok() ? names.status().message() : st.message());
    return 1;
  }
  auto rows = (*conn)->QueryText(sql);
  if (!rows.ok()) {
    fmt::print(stderr, "sluice sql: {}\n", rows.status().message());
    return 1;
  }
  std::vector<size_t> width(names->column_count());
  for (size_t c = 0; c < width.size(); ++c) width[c] = names->column_name(c).size();
  for (const auto& row : *rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c] ? row[c]->size() : 4);
  }
  auto line = [&](auto cell) {
    std::string out;
    for (size_t c = 0; c < width.size(); ++c) out += fmt::format("{}{:<{}}", c ? " | " : "", cell(c), width[c]);
    while (!out.empty() && out.back() == ' ') out.pop_back();
    fmt::print("{}\n", out);
  };
  line([&](size_t c) { return names->column_name(c); });
  line([&](size_t c) { return std::string(width[c], '-'); });
  for (const auto& row : *rows) line([&](size_t c) { return row[c] ? *row[c] : std::string("NULL"); });
  fmt::print("({} row{})\n", rows->size(), rows->size() == 1 ? "" : "s");
  return 0;
}

}  // namespace sluice::cli
