// Planner rewrites where DuckDB falls short (docs/design/0013-query-rewrites.md):
// "latest row per key" (ROW_NUMBER() OVER (PARTITION BY k ORDER BY x...) = 1) and group-bys
// with very many groups, turned into a sequence of statements that each fit the memory
// budget: the input is hash-partitioned on the key into N parts run in turn into a TEMP
// table, and the query's remaining part runs over that table.
//
//   ASSIGN_OR_RETURN(std::optional<Plan> plan, PlanRewrite(conn, sql, options));
//   if (!plan) { run sql as it is; }
//   else { ASSIGN_OR_RETURN(std::string final_select, RunSteps(conn, *plan));
//          stream final_select; RunCleanup(conn, *plan); }   // cleanup also after errors
//
// Detection reads DuckDB's own parse tree (query/sql_tree: the statement's tree as the
// engine's earlier stages left it, or parsed here from text) and renders SQL with
// json_deserialize_sql; anything not provably the same passes through (nullopt).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/database.h"
#include "query/sql_tree/sql_tree.h"

namespace sluice::query::rewrite {

// The user's functions as read once, for RewriteOptions::user_functions: one per
// database whose connections all have the same ones. Thread-safe.
struct UserFunctionCache;
std::shared_ptr<UserFunctionCache> MakeUserFunctionCache();

struct RewriteOptions {
  // The database's memory_limit (required, > 0): N is chosen so that one part's aggregate
  // uses at most `part_memory_fraction` of it.
  int64_t memory_limit_bytes = 0;
  int threads = 1;
  // Inputs DuckDB estimates below this many rows pass through unchanged.
  int64_t min_rows_to_rewrite = 1'000'000;
  // Rows the caller knows the query's inputs hold (the lake planner's record counts from
  // the manifests): DuckDB's estimate is raised to it (read_parquet with an explicit
  // schema estimates from the file count, not the footers).
  int64_t known_input_rows = 0;
  double part_memory_fraction = 0.5;
  int max_parts = 256;
  // Tests and measurements: use exactly this many parts (0 = choose from the estimate).
  int force_parts = 0;
  // Set when the caller knows that every connection it plans on has the user functions
  // (macros) read into this cache at its first plan: no statement that could create,
  // replace or drop one has run, so each connection has only what the caller installed
  // itself. They are then read once (~15 ms a read). Null reads them at every plan (D16).
  UserFunctionCache* user_functions = nullptr;
  // What the first `probe_rows` input rows show may be assumed of every row where checking
  // it would cost a pass over the input (D25): that a DOUBLE or FLOAT tie-breaking column
  // packs exactly in hundredths, with several parts over Parquet files. Each row's guard
  // checks it; a part where it fails stops with an error AssumptionFailed() recognises, and
  // the caller plans again with `assume = false`.
  bool assume = true;
  int64_t probe_rows = 1'000'000;
  // Parts by ranges of an integer key where its footers bound it (D26); false: by hash.
  bool range_parts = true;
};

enum class RewriteKind { kLatestRow, kGroupBy };
std::string_view RewriteKindName(RewriteKind kind);

// What the server runs, in turn, on the session's connection.
struct Plan {
  RewriteKind kind = RewriteKind::kLatestRow;
  int parts = 1;
  // Run in order, results dropped: CREATE TEMP TABLE ... AS <part 0>, INSERT INTO ... <part i>.
  std::vector<std::string> steps;
  // The answer: the original query with the rewritten subquery replaced by the temp table.
  std::string final_select;
  // Always run after the steps and the final SELECT, also after an error or an interrupt.
  std::vector<std::string> cleanup;
  // One line for logs and EXPLAIN: what was rewritten and why N.
  std::string explanation;
  // Made with an assumption (RewriteOptions::assume): a step may fail with AssumptionFailed.
  bool assumed = false;
};

// The error of a step whose input broke the plan's assumption: plan again without it.
inline constexpr const char* kAssumptionFailed =
    "sluice rewrite: a value broke the plan's assumption about its column";
bool AssumptionFailed(const Status& st);

// A Plan when `sql` (one SELECT statement) has a rewrite that applies, nullopt when it
// passes through unchanged (also for SQL DuckDB cannot parse: DuckDB reports that when the
// caller runs it). Runs small planning queries on `conn` (json_serialize_sql, DESCRIBE,
// EXPLAIN, one statistics scan of the input): an interrupt of those is Aborted, out of
// memory ResourceExhausted; any other failure of a planning query passes through.
// `why_not`, when given, receives the reason a query passes through (for logs and EXPLAIN).
Result<std::optional<Plan>> PlanRewrite(duck::Connection& conn, std::string_view sql,
                                        const RewriteOptions& options,
                                        std::string* why_not = nullptr);
// The same on a statement already parsed: `tree` (left unchanged; its splices are put
// back into every SQL text the plan holds) and `sql`, its text as the tree prints
// (tree.Render). A tree that is not ok(), has an EXPLAIN prefix or holds more than one
// statement passes through.
Result<std::optional<Plan>> PlanRewrite(duck::Connection& conn, const sql_tree::SqlTree& tree,
                                        std::string_view sql, const RewriteOptions& options,
                                        std::string* why_not = nullptr);

// Whether `sql` may hold a shape the rewrites change: each needs a window (the word OVER),
// a GROUP BY (the word GROUP) or a DISTINCT ON (the words DISTINCT ON), as words in any case
// outside nothing else (a comment or a string that holds one only costs the parse). False proves no
// rewrite applies: the caller need not parse the statement for them (a `SELECT 1` then costs no
// planning query).
bool MayRewrite(std::string_view sql);

// What planning reads once per process (the built-in functions), read now, and DuckDB's
// parse-tree serializer warmed: for a server's start, so that its first query does not
// pay for them (~35 ms).
Status WarmUp(duck::Connection& conn);
// The user functions (the session's macros) read into `cache` when it has none yet: a
// session start does it, so that a fresh server's first query does not (~15 ms).
Status WarmUpSession(duck::Connection& conn, UserFunctionCache* cache);

// Runs the plan's steps in turn and returns the final SELECT for the caller to run or
// stream. On an error it runs the cleanup itself and returns the error; otherwise the caller
// runs RunCleanup after the final SELECT.
Result<std::string> RunSteps(duck::Connection& conn, const Plan& plan);
// Runs every cleanup statement (each even when one before it failed); the first error.
Status RunCleanup(duck::Connection& conn, const Plan& plan);
// Steps, final SELECT materialized, cleanup: for callers that just want the answer.
Result<duck::QueryResult> RunPlan(duck::Connection& conn, const Plan& plan);

}  // namespace sluice::query::rewrite
