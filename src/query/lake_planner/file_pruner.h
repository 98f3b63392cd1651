// Which data files of one Iceberg snapshot can hold rows matching a query's filters
// (docs/design/0012): manifests skipped by the manifest list's partition summaries, then
// files dropped by their partition values (through the spec's transforms) and by their
// column statistics (lower/upper bounds, null and NaN counts).
//
//   ASSIGN_OR_RETURN(ScanPlan plan, PlanScan(conn, metadata, snapshot, schema, filters,
//   "db.events"));
//   // plan.paths: the kept files, read with lake::ParquetScanSql(plan.paths, schema)
//
// Conservative by construction: a file is dropped only when the evidence proves that no row
// of it satisfies some conjunct. A bound is compared with a constant exactly as the query
// compares a value with it: in C++ when the constant is exactly a value of the column's
// type and that type's order is plain (integers, dates, timestamps, floats with DuckDB's
// NaN, strings by bytes; NativeAllowed in file_pruner.cc), else by DuckDB on the same
// connection with the column's own type (KeepSql). Each phase costs no DuckDB query when
// every conjunct is native.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/database.h"
#include "lake/manifest.h"
#include "lake/object_cache.h"
#include "lake/parquet_read.h"
#include "lake/single_value.h"
#include "lake/table_metadata.h"

namespace sluice::query {

enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kDistinctFrom, kNotDistinctFrom };

// A filter over one table's columns as pruning sees it. Leaves compare a column (by field
// id) with a constant given as SQL text; anything pruning cannot use is kUnknown (true).
struct Predicate {
  enum class Kind { kUnknown, kAnd, kOr, kCompare, kIsNull, kIsNotNull };
  Kind kind = Kind::kUnknown;
  std::vector<Predicate> children;  // kAnd, kOr
  int32_t field_id = 0;             // kCompare, kIsNull, kIsNotNull
  CompareOp op = CompareOp::kEq;    // kCompare: `column op constant`
  std::string constant;             // kCompare: SQL text of a constant expression
  // The constant is a bare string literal ('2024-01-01'): DuckDB casts it to the column's type.
  bool constant_is_string_literal = false;

  static Predicate Unknown() { return Predicate{}; }
  // "(id#1 > 5 AND id#2 IS NULL)", for tests and logs.
  std::string ToString() const;
};

// What planning one table reference did.
struct ScanStats {
  std::optional<int64_t> snapshot_id;  // none: the table has no snapshot yet
  int32_t schema_id = 0;
  int64_t manifests_total = 0;  // data manifests of the snapshot
  int64_t manifests_read = 0;   // the rest were skipped by partition summaries
  int64_t files_total = 0;      // live data files of the snapshot
  int64_t files_kept = 0;
  int64_t pruned_by_partition = 0;  // in skipped manifests, or by their partition values
  int64_t pruned_by_stats = 0;      // by column bounds and counts
  int64_t records_kept = 0;
  uint64_t remote_bytes = 0;         // of S3 files kept (read through the object cache)
  int64_t delete_files = 0;          // delete files applying to the files kept
  std::vector<std::string> filters;  // the predicates pruning used (ToString)
};

// Where PlanScan reads a snapshot's manifest list and its manifests. This one reads the
// files each time; WarehouseCatalog's keeps them parsed (file_cache.h). Results are shared
// and immutable; errors name the file (Corruption for bytes that do not decode).
class ManifestReader {
 public:
  virtual ~ManifestReader() = default;
  virtual Result<std::shared_ptr<const std::vector<lake::ManifestFile>>> ManifestList(
      const lake::Snapshot& snapshot) const;
  // The entries of `m`, with the ids and sequence numbers they inherit from it.
  virtual Result<std::shared_ptr<const std::vector<lake::ManifestEntry>>> Entries(
      const lake::ManifestFile& m) const;
};

struct ScanPlan {
  // Local paths of the kept data files, in manifest order: S3 files' copies in the object
  // cache, held by `holds` (the plan's reader keeps them while its query runs).
  std::vector<std::string> paths;
  // Kept data files with row-level deletes applying to them, with those deletes.
  std::optional<lake::DeleteScan> deletes;
  ScanStats stats;
  std::vector<std::shared_ptr<const lake::CachedObject>> holds;
};

// Plans the scan of `snapshot` (nullptr: a table without snapshots, nothing to read) read
// with `schema`, keeping the files that may hold rows satisfying every predicate of
// `conjuncts`, with the delete files applying to them (Iceberg v2); manifest read errors
// name the file. `table` names the table in messages.
// `manifests` must outlive the call. `default_collation`: the session's
// current_setting('default_collation') when the caller has it (else it is asked).
Result<ScanPlan> PlanScan(duck::Connection& conn, const lake::TableMetadata& metadata,
                          const lake::Snapshot* snapshot, const lake::Schema& schema,
                          const std::vector<Predicate>& conjuncts, std::string_view table,
                          const ManifestReader& manifests = ManifestReader(),
                          std::optional<std::string> default_collation = std::nullopt);

// A literal of Iceberg type `type` holding `value`, in DuckDB SQL with that type exactly
// (CAST('1.5' AS FLOAT), DATE '1970-01-01' + 3, ...); nullopt for values pruning does not
// compare (NaN, uuid, nested types, invalid UTF-8).
std::optional<std::string> LiteralSql(const lake::Type& type, const lake::Value& value);

}  // namespace sluice::query
