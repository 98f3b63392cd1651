// Appender: DuckDB's fastest way into a table, one filled DataChunk at a time (RAII over
// duckdb_appender, errors as Status). And DescribeTable: a table's columns (names, SQL type
// text, logical types), to build chunks that match it.
//
//   ASSIGN_OR_RETURN(Appender app, Appender::Open(conn, "events"));
//   ASSIGN_OR_RETURN(DataChunk chunk, DataChunk::Create(app.ColumnTypes()));
//   ... fill chunk ...
//   RETURN_IF_ERROR(app.Append(chunk));
//   RETURN_IF_ERROR(app.Flush());  // the rows are in the table
//
// An Appender is move-only and used on its connection's thread. Rows appended but not yet
// flushed are flushed when it is destroyed (errors then are lost: call Flush).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/data_chunk.h"
#include "duck/database.h"
#include "duck/logical_type.h"

struct _duckdb_appender;

namespace sluice::duck {

class Appender {
 public:
  // An appender into `table` (unquoted name) of `schema` ("" for the default schema) of
  // `catalog` ("" for the default; "temp" for temporary tables).
  static Result<Appender> Open(Connection& conn, std::string_view table,
                               std::string_view schema = "", std::string_view catalog = "");
  Appender(Appender&& other) noexcept : app_(other.app_) { other.app_ = nullptr; }
  Appender& operator=(Appender&& other) noexcept;
  ~Appender();
  Appender(const Appender&) = delete;
  Appender& operator=(const Appender&) = delete;

  size_t column_count() const;
  LogicalType ColumnType(size_t i) const;
  std::vector<LogicalType> ColumnTypes() const;

  // Copies the chunk's rows into the appender (DuckDB casts columns whose types differ
  // from the table's). The chunk can be reset and reused afterwards.
  Status Append(const DataChunk& chunk);
  // Writes every appended row into the table. After an error the appender is unusable.
  Status Flush();

 private:
  explicit Appender(_duckdb_appender* app) : app_(app) {}
  Status LastError(std::string_view what) const;
  _duckdb_appender* app_;
};

struct TableColumn {
  std::string name;
  std::string type_sql;  // DuckDB's text of the type, e.g. "DECIMAL(10,2)"
  LogicalType type;
};

// The columns of `table` (an unquoted name in the default schema) in order.
Result<std::vector<TableColumn>> DescribeTable(Connection& conn, std::string_view table);

}  // namespace sluice::duck
