// Reading an Iceberg table's Parquet data files with DuckDB under one table schema: the
// read_parquet call that maps each column by its Parquet field id (not its name) to the
// schema's current name and type, so renamed columns keep their data, columns added after
// a file was written read as NULL and promoted types (int -> long, float -> double,
// wider decimals) are cast. For the query planner and for compaction.
//
//   std::string from = ParquetScanSql({"/w/db/t/data/a.parquet"}, *metadata.CurrentSchema());
//   conn.Query(fmt::format("SELECT count(*) FROM ({})", from));
//
// Nested fields inside a top-level struct, list or map are matched by name by DuckDB's
// reader (its schema parameter takes field ids for top-level columns only).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "duck/database.h"
#include "lake/iceberg_schema.h"

namespace sluice::lake {

// `schema = MAP {1: {name: 'id', type: 'BIGINT', default_value: NULL}, ...}`: the
// read_parquet parameter mapping field ids to `schema`'s top-level columns, in its order.
std::string ParquetSchemaOption(const Schema& schema);

// `read_parquet([...paths...], hive_partitioning = false, schema = ...)`: a table function
// call over local file paths (at least one). Hive partitioning is off: a table's data
// directories look like `city=oslo/` and must not add columns.
// `rows`, when known (the manifests' record counts), is passed as explicit_cardinality:
// with an explicit schema DuckDB otherwise estimates 1,000 rows a file, and a join of a
// lake table with anything else may build its hash table on the wrong side.
std::string ReadParquetCall(const std::vector<std::string>& paths, const Schema& schema,
                            std::optional<int64_t> rows = std::nullopt);

// A SELECT with exactly `schema`'s columns (names and DuckDB types, in order): every row of
// `paths` through ReadParquetCall, or no rows when `paths` is empty (read_parquet refuses
// an empty list).
std::string ParquetScanSql(const std::vector<std::string>& paths, const Schema& schema,
                           std::optional<int64_t> rows = std::nullopt);

// An Iceberg name mapping (the table property schema.name-mapping.default): for each
// top-level field id, the column names a file without field ids may give it. InvalidArgument
// naming the property for JSON that is not a list of {"field-id", "names"} objects.
Result<std::map<int32_t, std::vector<std::string>>> ParseNameMapping(std::string_view json);

// ParquetScanSql for tables with a name mapping: files with field ids are read by id;
// each file without them (imported into the table from plain Parquet) by the mapping's
// names, a field none of whose names the file has reading as NULL. Asks DuckDB (`conn`)
// for each file's field ids and column names.
Result<std::string> MappedParquetScanSql(
    duck::Connection& conn, const std::vector<std::string>& paths, const Schema& schema,
    const std::map<int32_t, std::vector<std::string>>& mapping);

// Data files read with the row-level deletes (Iceberg v2 delete files) that apply to them;
// which delete applies to which file is the caller's to decide (lake::DeleteApplies).
struct DeleteScan {
  std::vector<std::string> data_paths;      // local files DuckDB reads
  std::vector<std::string> data_locations;  // the same files as the manifests name them
  struct File {
    std::string path;                // local
    int32_t content = 1;             // 1: positions (file_path, pos); 2: equality
    std::vector<int32_t> field_ids;  // equality: the fields compared (NULL matches NULL)
    std::vector<size_t> applies_to;  // indexes into data_paths
  };
  std::vector<File> deletes;
};

// A SELECT with exactly `schema`'s columns: the rows of `scan.data_paths` that no delete
// applying to their file removes. One read of the data files, anti-joined with one read of
// all position deletes and one read per set of equality fields, each delete row kept only
// for the files its delete file applies to (a lookup of (delete file, data file) pairs):
// the plan's size does not grow with the number of distinct delete sets. InvalidArgument
// when an equality field is not in `schema`, or the schema has a column named filename,
// file_row_number or __sluice_location (the reader's own columns).
Result<std::string> ScanWithDeletesSql(const DeleteScan& scan, const Schema& schema);

}  // namespace sluice::lake
