#include "cli/sql_cmd.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/utf8.h"
#include "duck/data_chunk.h"
#include "duck/database.h"
#include "lake/rest_client.h"
#include "query/engine.h"
#include "query/pg_types.h"
#include "query/sql_text.h"

namespace sluice::cli {
namespace {

using Row = std::vector<std::optional<std::string>>;

int Fail(std::string_view message) {
  fmt::print(stderr, "sluice sql: {}\n", message);
  return 1;
}

// An error that comes from a flag left out: the flag named.
int FailWithHint(std::string_view message, const SqlFlags& flags, const std::string& warehouse) {
  std::string hint;
  if (warehouse.empty() && flags.catalog_uri.empty() &&
      message.find("Catalog \"lake\" does not exist") != std::string_view::npos) {
    hint = "\n(lake.<namespace>.<table> needs --warehouse DIR, $SLUICE_WAREHOUSE or --catalog-uri)";
  } else if (flags.bootstrap.empty() &&
             message.find("Function with name topic does not exist") != std::string_view::npos) {
    hint = "\n(topic() needs --bootstrap HOST:PORT of the broker)";
  }
  return Fail(std::string(message) + hint);
}

// The next chunk of a streamed result. `sluice sql` never interrupts DuckDB, but DuckDB 1.5
// raises its interrupt flag itself when one of its worker threads fails, and a streamed
// fetch can see the flag before the worker's error (docs/design/0010 decision 7, as the
// query server says it): "Interrupted!" alone would read as a cancel nobody made.
Result<std::optional<duck::DataChunk>> FetchChunk(duck::StreamResult& stream) {
  duck::ErrorType type = duck::ErrorType::kInvalid;
  Result<std::optional<duck::DataChunk>> chunk = stream.Fetch(&type);
  if (!chunk.ok() && type == duck::ErrorType::kInterrupt) {
    return InternalError(
        "the statement failed in one of DuckDB's worker threads and DuckDB reported an "
        "interrupt in place of that error; running it again should show it");
  }
  return chunk;
}

// Every row of a result, each value in Postgres's text form (what psql shows for it).
Result<Row> ReadRows(duck::StreamResult& stream, std::vector<Row>* rows) {
  Row names;
  std::vector<query::ColumnEncoder> encoders;
  for (size_t c = 0; c < stream.column_count(); ++c) {
    names.emplace_back(stream.column_name(c));
    auto enc = query::ColumnEncoder::Make(stream.column_type(c));
    if (!enc.ok())
      return enc.status().WithContext(fmt::format("column \"{}\"", stream.column_name(c)));
    encoders.push_back(std::move(*enc));
  }
  std::string field;
  while (true) {
    ASSIGN_OR_RETURN(std::optional<duck::DataChunk> chunk, FetchChunk(stream));
    if (!chunk) break;
    for (uint64_t r = 0; r < chunk->size(); ++r) {
      Row& row = rows->emplace_back();
      for (size_t c = 0; c < encoders.size(); ++c) {
        // A DataRow field: Int32 length (-1 for NULL), then the bytes.
        field.clear();
        encoders[c].Append(chunk->column(c), r, /*binary=*/false, field);
        if (field == std::string_view("\xff\xff\xff\xff", 4)) {
          row.emplace_back(std::nullopt);
        } else {
          row.emplace_back(field.substr(4));
        }
      }
    }
  }
  return names;
}

// An aligned table; a value of several lines (EXPLAIN's plan) takes several lines.
void PrintTable(const Row& names, const std::vector<Row>& rows) {
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
  auto display_width = [](std::string_view s) { return CountCodePoints(s); };  // as fmt pads
  std::vector<size_t> width(names.size());
  for (size_t c = 0; c < width.size(); ++c) width[c] = display_width(*names[c]);
  for (const Row& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      for (const std::string& l : lines_of(row[c])) width[c] = std::max(width[c], display_width(l));
    }
  }
  auto line = [&](auto cell) {
    std::string out;
    for (size_t c = 0; c < width.size(); ++c)
      out += fmt::format("{}{:<{}}", c ? " | " : "", cell(c), width[c]);
    while (!out.empty() && out.back() == ' ') out.pop_back();
    fmt::print("{}\n", out);
  };
  line([&](size_t c) { return *names[c]; });
  line([&](size_t c) { return std::string(width[c], '-'); });
  for (const Row& row : rows) {
    std::vector<std::vector<std::string>> cells;
    size_t height = 1;
    for (const auto& v : row) height = std::max(height, cells.emplace_back(lines_of(v)).size());
    for (size_t i = 0; i < height; ++i) {
      line([&](size_t c) { return i < cells[c].size() ? cells[c][i] : std::string(); });
    }
  }
  fmt::print("({} row{})\n", rows.size(), rows.size() == 1 ? "" : "s");
}

// The last statement: its rows printed. A SELECT's JSON is DuckDB's to_json of each row
// (nested values stay nested); another statement's (EXPLAIN, SHOW...) has its text forms.
Status PrintLast(duck::Connection& conn, const std::string& sql, bool json) {
  ASSIGN_OR_RETURN(auto prepared, duck::PreparedStatement::Prepare(conn, sql));
  if (json && prepared->type() == duck::StatementType::kSelect) {
    // Streamed: a large answer is printed as DuckDB produces it. The row's alias is one no
    // column takes: a column named like it would be what to_json() read instead.
    ASSIGN_OR_RETURN(auto wrapped, duck::PreparedStatement::Prepare(
                                       conn, fmt::format("SELECT to_json(\"sluice row\")::VARCHAR "
                                                         "FROM ({}\n) \"sluice row\"",
                                                         sql)));
    ASSIGN_OR_RETURN(duck::StreamResult lines, wrapped->ExecuteStreaming());
    while (true) {
      ASSIGN_OR_RETURN(std::optional<duck::DataChunk> chunk, FetchChunk(lines));
      if (!chunk) break;
      duck::Vector v = chunk->column(0);
      std::string out;
      for (uint64_t r = 0; r < chunk->size(); ++r) {
        out.append(v.GetString(r));
        out.push_back('\n');
      }
      fmt::print("{}", out);
    }
    return Status::OK();
  }
  ASSIGN_OR_RETURN(duck::StreamResult stream, prepared->ExecuteStreaming());
  if (stream.return_type() == duck::ReturnType::kNothing) return Status::OK();  // CREATE, SET...
  std::vector<Row> rows;
  ASSIGN_OR_RETURN(Row names, ReadRows(stream, &rows));
  if (!json) {
    PrintTable(names, rows);
    return Status::OK();
  }
  for (const Row& row : rows) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (size_t c = 0; c < row.size(); ++c)
      out[*names[c]] = row[c] ? nlohmann::ordered_json(*row[c]) : nullptr;
    fmt::print("{}\n", out.dump());
  }
  return Status::OK();
}

}  // namespace

int RunSql(const SqlFlags& flags_in) {
  SqlFlags flags = flags_in;
  if (flags.sql.empty() || flags.sql == "-") {
    // The SQL from standard input (a file or a pipe; a terminal would wait unseen).
    if (flags.sql.empty() && ::isatty(STDIN_FILENO))
      return Fail("no query: give one, or '-' to read it from stdin");
    flags.sql.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  auto db =
      duck::Database::Open({.memory_limit_bytes = flags.memory_limit_mib << 20, .threads = 2});
  if (!db.ok()) return Fail(db.status().message());
  auto conn = duck::Connection::Open(**db);
  if (!conn.ok()) return Fail(conn.status().message());
  std::string warehouse = flags.warehouse;
  std::optional<lake::RestCatalogConfig> catalog;
  if (!flags.catalog_uri.empty()) {
    lake::RestCatalogConfig c;
    c.uri = flags.catalog_uri;
    c.warehouse = flags.catalog_warehouse;
    if (const char* e = std::getenv("SLUICE_CATALOG_CREDENTIAL")) c.credential = e;
    if (const char* e = std::getenv("SLUICE_CATALOG_TOKEN")) c.token = e;
    // Connected now, so that a wrong uri or login is said once, plainly.
    if (auto client = lake::RestCatalogClient::Connect(c); !client.ok())
      return Fail(client.status().message());
    catalog = std::move(c);
  } else if (warehouse.empty()) {
    const char* env = std::getenv("SLUICE_WAREHOUSE");
    warehouse = env != nullptr ? env : "";
  }
  query::QueryEngine engine({.warehouse = warehouse,
                             .catalog = catalog,
                             .kafka_bootstrap = flags.bootstrap,
                             .memory_limit_bytes = flags.memory_limit_mib << 20,
                             .threads = 2});
  if (Status st = engine.OpenDatabase(**conn); !st.ok()) return Fail(st.message());
  // Each statement planned and run in turn, as the server does (a lake table or topic()
  // may appear in any of them); the last one's rows are printed. All are parsed first:
  // a syntax error anywhere runs nothing, as in DuckDB.
  std::vector<std::string_view> statements;
  for (std::string_view piece : query::SplitStatements(flags.sql)) {
    auto parsed = duck::ExtractedStatements::Extract(**conn, piece);
    if (!parsed.ok()) return Fail(parsed.status().message());
    if (parsed->size() > 0) statements.push_back(piece);
  }
  for (size_t i = 0; i < statements.size(); ++i) {
    auto planned = engine.Plan(**conn, statements[i], /*allow_steps=*/true);
    if (!planned.ok()) return FailWithHint(planned.status().message(), flags, warehouse);
    struct Cleanup {
      query::PlannedStatement& p;
      duck::Connection& conn;
      ~Cleanup() {
        if (p.cleanup) p.cleanup(conn);
      }
    } cleanup{*planned, **conn};
    Status st = i + 1 < statements.size() ? (*conn)->Execute(planned->sql)
                                          : PrintLast(**conn, planned->sql, flags.json);
    if (!st.ok()) return FailWithHint(st.message(), flags, warehouse);
  }
  return 0;
}

}  // namespace sluice::cli
