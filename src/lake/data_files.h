// Parquet data files of an Iceberg table, written by DuckDB: the schema's field ids on
// every column (FIELD_IDS), zstd, fsynced; and the DataFile a manifest lists for each,
// with the column statistics readers prune with (value, null and NaN counts, column
// sizes, lower/upper bounds of the top-level primitive columns; strings' bounds truncated
// to 16 characters as Iceberg's default metrics do).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "duck/database.h"
#include "lake/iceberg_schema.h"
#include "lake/manifest.h"

namespace sluice::lake {

// Writes the rows of `select_sql` (columns named and typed as the schema's, in its order)
// to `path`, fsyncs it, and describes it as `location` (the path as the table's metadata
// names it: file://...). The partition tuple is left empty for the caller.
Result<DataFile> WriteDataFile(duck::Connection& conn, std::string_view select_sql,
                               const Schema& schema, const std::string& path,
                               const std::string& location);

// The smallest string above every string that starts with `prefix` (UTF-8): its last
// code point raised by one, maximal ones dropped (Iceberg's truncateStringMax, for string
// upper bounds cut to 16 characters); nullopt when none exists.
std::optional<std::string> UpperOfPrefix(std::string_view prefix);

}  // namespace sluice::lake
