#include "duck/appender.h"

#include <duckdb.h>

#include <utility>

namespace sluice::duck {

Result<Appender> Appender::Open(Connection& conn, std::string_view table, std::string_view schema,
                                std::string_view catalog) {
  std::string t(table), s(schema), c(catalog);
  duckdb_appender app = nullptr;
  if (duckdb_appender_create_ext(conn.handle(), c.empty() ? nullptr : c.c_str(),
                                 s.empty() ? nullptr : s.c_str(), t.c_str(), &app) == DuckDBError) {
    std::string msg = "unknown error";
    if (app != nullptr) {
      duckdb_error_data err = duckdb_appender_error_data(app);
      if (duckdb_error_data_has_error(err)) msg = duckdb_error_data_message(err);
      duckdb_destroy_error_data(&err);
      duckdb_appender_destroy(&app);
    }
    return InvalidArgumentError("DuckDB: cannot append to table '{}': {}", table, msg);
  }
  return Appender(app);
}

Appender& Appender::operator=(Appender&& other) noexcept {
  if (this != &other) {
    if (app_ != nullptr) duckdb_appender_destroy(&app_);
    app_ = std::exchange(other.app_, nullptr);
  }
  return *this;
}

Appender::~Appender() {
  if (app_ != nullptr) duckdb_appender_destroy(&app_);
}

size_t Appender::column_count() const { return duckdb_appender_column_count(app_); }

LogicalType Appender::ColumnType(size_t i) const {
  return LogicalType::Adopt(duckdb_appender_column_type(app_, i));
}

std::vector<LogicalType> Appender::ColumnTypes() const {
  std::vector<LogicalType> types;
  for (size_t i = 0; i < column_count(); ++i) types.push_back(ColumnType(i));
  return types;
}

Status Appender::LastError(std::string_view what) const {
  duckdb_error_data err = duckdb_appender_error_data(app_);
  std::string msg =
      duckdb_error_data_has_error(err) ? duckdb_error_data_message(err) : "unknown error";
  duckdb_error_type type = duckdb_error_data_error_type(err);
  duckdb_destroy_error_data(&err);
  if (type == DUCKDB_ERROR_OUT_OF_MEMORY)
    return ResourceExhaustedError("DuckDB: {}: {}", what, msg);
  return InvalidArgumentError("DuckDB: {}: {}", what, msg);
}

Status Appender::Append(const DataChunk& chunk) {
  if (duckdb_append_data_chunk(app_, chunk.handle()) == DuckDBError) {
    return LastError("appending a data chunk");
  }
  return Status::OK();
}

Status Appender::Flush() {
  if (duckdb_appender_flush(app_) == DuckDBError) return LastError("flushing an appender");
  return Status::OK();
}

Result<std::vector<TableColumn>> DescribeTable(Connection& conn, std::string_view table) {
  // Names and type text from DESCRIBE; logical types from an appender (same order: the
  // table's physical columns).
  ASSIGN_OR_RETURN(auto rows, conn.QueryText("DESCRIBE " + QuoteIdentifier(table)));
  ASSIGN_OR_RETURN(Appender app, Appender::Open(conn, table));
  if (rows.size() != app.column_count()) {
    return UnimplementedError("table '{}' has generated columns, which sluice cannot fill", table);
  }
  std::vector<TableColumn> columns;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].size() < 2 || !rows[i][0] || !rows[i][1]) {
      return InternalError("DESCRIBE {} returned an unexpected row", table);
    }
    columns.push_back({*rows[i][0], *rows[i][1], app.ColumnType(i)});
  }
  return columns;
}

}  // namespace sluice::duck
