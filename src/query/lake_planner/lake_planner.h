// The lake-table query planner (docs/design/0012): SQL naming `lake.<namespace>.<table>`
// (or a table by its metadata path, `iceberg_scan('.../00001-<uuid>.metadata.json')`)
// becomes SQL DuckDB runs over the Parquet files of the table's snapshot that can hold
// matching rows. On the statement's parse tree (query/sql_tree), every lake table reference
// is replaced by a placeholder that prints as a subquery over read_parquet of its kept
// files with the table's field-id mapping (alias kept).
//
//   WarehouseCatalog catalog(warehouse_dir);
//   ASSIGN_OR_RETURN(PlannedQuery q, PlanLakeQuery(conn, "SELECT * FROM lake.db.t", catalog));
//   ASSIGN_OR_RETURN(auto rows, conn.Query(q.sql));
//
// or, as one stage of the engine's planning on a tree parsed once:
//
//   ASSIGN_OR_RETURN(std::vector<LakeTableScan> scans, PlanLakeTree(conn, tree, catalog));
//
// SQL that names no lake table, that DuckDB cannot parse, or that is not a SELECT comes back
// unchanged (DuckDB then reports its own error). Planning runs small queries on `conn` (to
// parse, to type and evaluate constants, to compare bounds) and leaves no state on it.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/database.h"
#include "query/lake_planner/file_pruner.h"
#include "query/lake_planner/lake_catalog.h"
#include "query/sql_tree/sql_tree.h"

namespace sluice::query {

// One `lake.<namespace>.<table>` reference of the query, as planned.
struct LakeTableScan {
  std::string table;  // "db.events"
  std::string alias;  // the name the rewritten query gives its subquery
  ScanStats stats;
  // Local copies of the S3 data files the scan reads: keep until the query has run.
  std::vector<std::shared_ptr<const lake::CachedObject>> holds;
};

struct PlannedQuery {
  std::string sql;                    // the SQL to run
  bool rewritten = false;             // false: `sql` is the input, unchanged
  std::vector<LakeTableScan> tables;  // in the order the references appear in the parse tree
};

struct LakePlanOptions {
  // Values of the query's parameters, for pruning only: identifier ("1" for $1 or the first
  // `?`, "name" for $name) -> the value as one constant SQL expression ("CAST('42' AS
  // BIGINT)", "'oslo'"). The planned SQL keeps its parameters and is valid only when these
  // same values are bound (plan again at each Bind). Without them, filters on parameters
  // do not prune.
  std::map<std::string, std::string> parameters;
  // Whether `lake.<ns>.<table>` names are planned (false: the catalog has no tables by
  // name, and only iceberg_scan('<path>') calls are planned; DuckDB reports the names).
  bool lake_names = true;
};

// Errors: NotFound for an unknown table, snapshot id, branch or tag, or a time before the
// table's first snapshot; InvalidArgument for an AT clause that is not a constant;
// Corruption naming an unreadable manifest; delete files (Iceberg v2) are applied.
Result<PlannedQuery> PlanLakeQuery(duck::Connection& conn, std::string_view sql,
                                   const LakeCatalog& catalog, const LakePlanOptions& options = {});

// Whether `sql` may name a lake table or call iceberg_scan: a text check that costs no
// parse. False means planning would hand it back unchanged.
bool MayNameLakeTable(std::string_view sql);

// The same planning on a parsed tree: its lake references become placeholders with their
// scans as the tree's splices (tree.changed() then). A tree that is not ok() or names no
// lake table is left as it is. The scans in the order of the references; errors as above.
Result<std::vector<LakeTableScan>> PlanLakeTree(duck::Connection& conn, sql_tree::SqlTree& tree,
                                                const LakeCatalog& catalog,
                                                const LakePlanOptions& options = {});

}  // namespace sluice::query
