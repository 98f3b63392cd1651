// Helpers the sinks share for reading a batch out of DuckDB: the batch's columns and
// types, and each row rendered as one JSON object by DuckDB itself (to_json), which
// handles every DuckDB type, nested ones included. Internal to the sinks module.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/database.h"

namespace sluice::sinks {

// `table` (one identifier, as the pipeline names it) quoted for SQL.
std::string TableRef(std::string_view table);

// One column of a batch: its name and DuckDB's full type ("DECIMAL(18,3)",
// "STRUCT(a INTEGER, b VARCHAR[])").
struct DuckColumn {
  std::string name;
  std::string type;
};

// The columns of `table`, in order (DuckDB's DESCRIBE).
Result<std::vector<DuckColumn>> DescribeColumns(duck::Connection& conn, std::string_view table);

// SQL that selects one VARCHAR column, each row of `table` as a JSON object, in the
// table's order. DuckDB writes NaN and Infinity for such doubles (as Python's json module
// does, and so sqlflow): not strict JSON.
std::string RowsAsJsonSql(std::string_view table);

// Runs RowsAsJsonSql. The result's column 0 is VARCHAR.
Result<duck::QueryResult> RowsAsJson(duck::Connection& conn, std::string_view table);

}  // namespace sluice::sinks
