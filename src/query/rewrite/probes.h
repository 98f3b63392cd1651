// The rewrites' questions to DuckDB: planning queries and their failures, DESCRIBE,
// EXPLAIN's estimates, the function catalogue, the session's collation and order settings,
// and the Parquet footers' bound on a group-by's groups (footers.cc).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "query/rewrite/common.h"

namespace sluice::query::rewrite {

struct UserFunctionCache;  // rewrite.h

using Rows = std::vector<std::vector<std::optional<std::string>>>;

// A planning query's failure: an interrupt or out of memory is the caller's business (the
// user cancelled, or the server is short of memory); anything else means "does not apply".
Status PlanningError(const Status& st, std::string_view what);

// A planning query's rows as text.
Result<Rows> Ask(duck::Connection& conn, const std::string& sql, std::string_view what);
// A statement that cannot be a subquery (DESCRIBE, EXPLAIN): its VARCHAR columns as text.
Result<Rows> AskStatement(duck::Connection& conn, const std::string& sql, std::string_view what);

// DuckDB's parse tree of `sql`, which must be one SELECT: its statement ({"node": ...}).
Result<Json> ParseStatement(duck::Connection& conn, std::string_view sql);
// The parse tree of one expression (a template filled in by the caller).
Result<Json> ParseExpr(duck::Connection& conn, std::string_view expr);

Result<std::vector<Column>> Describe(duck::Connection& conn, const std::string& select);

// DuckDB's cardinality estimates of a query's plan: the root's (its output) and the
// largest of any operator (its input, for a scan under filters and aggregates; a Parquet
// scan's is exact, from the file footers).
struct Estimates {
  int64_t output = -1;
  int64_t largest = -1;
};
Result<Estimates> EstimatePlan(duck::Connection& conn, const std::string& select);
// DuckDB's estimate of the rows `select` reads: the largest of any operator of its plan.
Result<int64_t> EstimateRows(duck::Connection& conn, const std::string& select);

// The distinct-key estimate of the statistics scan (D7): the exact number of distinct key
// hashes among the keys whose hash is 0 modulo M, times M. Sampling keys (not rows) keeps
// every sampled key's rows, so the estimate is unbiased; the aggregate holds ~1/M of the
// keys (at most ~1M); it is cheaper per row than approx_count_distinct's HyperLogLog.
std::string DistinctKeysExpr(const std::string& key_list, int64_t est_rows);

// D13's probe: the keys among the first million rows of `input_sql` (which names them
// `key_list`), and the groups of `total_rows` rows estimated from them with GEE
// (sqrt(N/n) times the keys seen once, plus those seen more often); nullopt when the
// probe returned nothing.
Result<std::optional<int64_t>> ProbeGroups(duck::Connection& conn, const std::string& key_list,
                                           const std::string& input_sql, int64_t total_rows);

// DuckDB's function catalogue: which names are aggregates, and which are CONSISTENT (the
// same value for the same input in every statement: D4).
struct FunctionInfo {
  bool aggregate = false;
  bool consistent = false;
};
using Catalogue = std::map<std::string, FunctionInfo>;

// The built-in functions are read once per process (all of duckdb_functions() costs ~30 ms,
// more than planning a small query), the user's (macros) at every plan. A name both is an
// aggregate if either is and CONSISTENT only if both are. A built-in that an extension
// loaded later adds is unknown here, and so not rewritten (D16).
// With a `cache` (RewriteOptions::user_functions), the user functions are read once into it.
bool UserFunctionsCached(UserFunctionCache& cache);
Result<Catalogue> LoadCatalogue(duck::Connection& conn, UserFunctionCache* cache = nullptr,
                                bool builtin_only = false);

// Collations make GROUP BY equal values whose hashes differ: a VARCHAR key is only used when
// no collation can apply (D5).
Status CheckKeyTypes(duck::Connection& conn, const std::vector<Column>& keys);

// The session's defaults for ORDER BY without ASC/DESC or NULLS FIRST/LAST (D9).
struct OrderDefaults {
  bool descending = false;
  std::string null_order = "NULLS_LAST";
};
Result<OrderDefaults> LoadOrderDefaults(duck::Connection& conn);

// The Parquet files a table ref reads (footers.cc): the file list's SQL, the lake's
// field-id schema when given, and from the footers the rows and files.
struct ParquetRef {
  std::string files;
  std::string schema_map;
  const Json* projection = nullptr;  // a lake table's projection over the read, if any
  int64_t rows = 0;
  int64_t file_count = 0;
  bool hive_paths = false;  // hive paths (`/k=v/`) whose values replace file columns
  // The files' column that the ref's `column` is (through the projection), or nullopt.
  std::optional<std::string> FileColumn(const std::string& column) const;
  // A condition on parquet_schema() naming that file column (by field id under a schema).
  std::string ColumnMatch(const std::string& column) const;
};
Result<std::optional<ParquetRef>> ReadParquetRef(duck::Connection& conn,
                                                 const sql_tree::SqlTree& tree, const Json& r,
                                                 std::deque<Json>& spliced);

// A column's statistics from the Parquet footers (D21): the least and greatest value of
// its ordinal (key_packing.h's OrdinalExpr) over every row group (nullopt: every value is
// NULL), and its NULLs.
struct FooterColumn {
  std::optional<int64_t> lo, hi;
  int64_t nulls = 0;
};
struct FooterColumns {
  int64_t rows = 0;                                  // the files' rows
  std::vector<std::optional<FooterColumn>> columns;  // nullopt: the footers do not say
};
// For each expression that is a bare column of `n`'s only FROM ref reading Parquet files,
// its statistics in every row group's footer, read in one query; nullopt when `n`'s FROM
// is not such a ref.
Result<std::optional<FooterColumns>> FooterColumnStats(duck::Connection& conn,
                                                       const sql_tree::SqlTree& tree, const Json& n,
                                                       const std::vector<const Json*>& exprs,
                                                       const std::vector<Column>& types);

// The least and greatest value of an integer key in the footers.
struct KeyRange {
  int64_t lo = 0, hi = 0;
};
// An upper bound on a group-by's groups from where its keys come from, or nullopt (D18;
// footers.cc). `n` is the group-by's node in `tree`, `keys` its keys as expressions over
// its input and `key_cols` their types. With `range`, a single key that is a bare integer
// column of the only ref gets its bounds there (D26), else nullopt.
Result<std::optional<int64_t>> FooterKeyBound(duck::Connection& conn, const sql_tree::SqlTree& tree,
                                              const Json& n, const std::vector<Json>& keys,
                                              const std::vector<Column>& key_cols,
                                              std::optional<KeyRange>* range = nullptr);

}  // namespace sluice::query::rewrite
