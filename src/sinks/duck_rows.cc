#include "sinks/duck_rows.h"

#include <fmt/format.h>

namespace sluice::sinks {

// The alias the whole row goes by in to_json(...): a name no batch column is expected to
// have (a column of the same name would shadow the row).
constexpr std::string_view kRowAlias = "__sluice_row";

std::string TableRef(std::string_view table) { return duck::QuoteIdentifier(table); }

Result<std::vector<DuckColumn>> DescribeColumns(duck::Connection& conn, std::string_view table) {
  ASSIGN_OR_RETURN(duck::QueryResult r,
                   conn.Query(fmt::format("DESCRIBE SELECT * FROM {}", TableRef(table))));
  // DESCRIBE: column_name, column_type, null, key, default, extra (all VARCHAR).
  if (r.column_count() < 2 || r.column_type(0) != duck::ColumnType::kVarchar ||
      r.column_type(1) != duck::ColumnType::kVarchar) {
    return InternalError("DESCRIBE of {} did not return names and types", table);
  }
  std::vector<DuckColumn> columns;
  for (size_t i = 0; i < r.chunk_count(); ++i) {
    duck::ResultChunk c = r.chunk(i);
    for (size_t row = 0; row < c.size(); ++row) {
      columns.push_back({std::string(c.GetString(0, row)), std::string(c.GetString(1, row))});
    }
  }
  return columns;
}

std::string RowsAsJsonSql(std::string_view table) {
  return fmt::format("SELECT to_json({0})::VARCHAR FROM {1} AS {0}", kRowAlias, TableRef(table));
}

Result<duck::QueryResult> RowsAsJson(duck::Connection& conn, std::string_view table) {
  ASSIGN_OR_RETURN(duck::QueryResult r, conn.Query(RowsAsJsonSql(table)));
  if (r.column_count() != 1 || r.column_type(0) != duck::ColumnType::kVarchar) {
    return InternalError("rows of {} as JSON: unexpected result shape", table);
  }
  return r;
}

}  // namespace sluice::sinks
