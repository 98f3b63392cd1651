#include "cli/sql_cmd.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "duck/data_chunk.h"
#include "duck/database.h"
#include "query/engine.h"
#include "query/pg_types.h"

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
  // Run once, streamed; each value in Postgres's text form (what psql shows for it).
  duck::ErrorType error_type = duck::ErrorType::kInvalid;
  // Several statements: all run, the last one's rows are printed.
  auto statements = duck::ExtractedStatements::Extract(**conn, sql, &error_type);
  if (!statements.ok()) {
    fmt::print(stderr, "sluice sql: {}\n", statements.status().message());
    return 1;
  }
  if (statements->size() == 0) return 0;
  std::unique_ptr<duck::PreparedStatement> last;
  for (size_t i = 0; i < statements->size(); ++i) {
    auto prepared = statements->Prepare(i, &error_type);
    Status st = prepared.status();
    if (prepared.ok() && i + 1 < statements->size()) st = (*prepared)->Execute().status();
    if (!st.ok()) {
      fmt::print(stderr, "sluice sql: {}\n", st.message());
      return 1;
    }
    last = std::move(*prepared);
  }
  auto stream = last->ExecuteStreaming(&error_type);
  if (!stream.ok()) {
    fmt::print(stderr, "sluice sql: {}\n", stream.status().message());
    return 1;
  }
  std::vector<std::string> names;
  std::vector<query::ColumnEncoder> encoders;
  for (size_t c = 0; c < stream->column_count(); ++c) {
    names.push_back(stream->column_name(c));
    auto enc = query::ColumnEncoder::Make(stream->column_type(c));
    if (!enc.ok()) {
      fmt::print(stderr, "sluice sql: column \"{}\": {}\n", names.back(), enc.status().message());
      return 1;
    }
    encoders.push_back(std::move(*enc));
  }
  std::vector<std::vector<std::optional<std::string>>> rows;
  std::string field;
  while (true) {
    auto next = stream->Fetch(&error_type);
    if (!next.ok()) {
      fmt::print(stderr, "sluice sql: {}\n", next.status().message());
      return 1;
    }
    if (!next->has_value()) break;
    duck::DataChunk& chunk = **next;
    for (uint64_t r = 0; r < chunk.size(); ++r) {
      auto& row = rows.emplace_back();
      for (size_t c = 0; c < encoders.size(); ++c) {
        // A DataRow field: Int32 length (-1 for NULL), then the bytes.
        field.clear();
        encoders[c].Append(chunk.column(c), r, /*binary=*/false, field);
        if (field.size() == 4 && field == std::string_view("\xff\xff\xff\xff", 4)) {
          row.emplace_back(std::nullopt);
        } else {
          row.emplace_back(field.substr(4));
        }
      }
    }
  }
  // An aligned table; a value of several lines (EXPLAIN's plan) takes several lines.
  auto lines_of = [](const std::optional<std::string>& v) {
    std::vector<std::string> out;
    std::string_view s = v ? std::string_view(*v) : std::string_view("NULL");
    size_t start = 0;
    for (size_t nl; (nl = s.find('\n', start)) != std::string_view::npos; start = nl + 1) {
      out.emplace_back(s.substr(start, nl - start));
    }
    out.emplace_back(s.substr(start));
    return out;
  };
  auto display_width = [](std::string_view s) {  // code points, as fmt pads
    return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char ch) { return (ch & 0xC0) != 0x80; }));
  };
  std::vector<size_t> width(names.size());
  for (size_t c = 0; c < width.size(); ++c) width[c] = display_width(names[c]);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      for (const std::string& l : lines_of(row[c])) width[c] = std::max(width[c], display_width(l));
    }
  }
  auto line = [&](auto cell) {
    std::string out;
    for (size_t c = 0; c < width.size(); ++c) out += fmt::format("{}{:<{}}", c ? " | " : "", cell(c), width[c]);
    while (!out.empty() && out.back() == ' ') out.pop_back();
    fmt::print("{}\n", out);
  };
  line([&](size_t c) { return names[c]; });
  line([&](size_t c) { return std::string(width[c], '-'); });
  for (const auto& row : rows) {
    std::vector<std::vector<std::string>> cells;
    size_t height = 1;
    for (const auto& v : row) height = std::max(height, cells.emplace_back(lines_of(v)).size());
    for (size_t i = 0; i < height; ++i) {
      line([&](size_t c) { return i < cells[c].size() ? cells[c][i] : std::string(); });
    }
  }
  fmt::print("({} row{})\n", rows.size(), rows.size() == 1 ? "" : "s");
  return 0;
}

}  // namespace sluice::cli
