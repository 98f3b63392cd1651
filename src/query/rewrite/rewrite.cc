// The rewrites' entry points: planning on a statement's tree (planner.h), and running a
// plan's steps, final SELECT and cleanup. The rules and their reasons:
// docs/design/0013-query-rewrites.md (D1..D20 in the comments).
#include "query/rewrite/rewrite.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <chrono>
#include <set>

#include "base/logging.h"
#include "base/strings.h"
#include "query/rewrite/planner.h"

namespace sluice::query::rewrite {
namespace {

const Logger kLog("rewrite");

}  // namespace

std::string_view RewriteKindName(RewriteKind kind) {
  switch (kind) {
    case RewriteKind::kLatestRow:
      return "latest-row";
    case RewriteKind::kGroupBy:
      return "group-by";
  }
  return "?";
}

namespace {

// Whether `sql` has the word DISTINCT followed, after blanks, by the word ON (D24).
bool HasDistinctOn(std::string_view sql) {
  auto word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  };
  for (size_t at = 0; at + 8 <= sql.size(); ++at) {
    if (!EqualsIgnoreCase(sql.substr(at, 8), "distinct")) continue;
    if (at > 0 && word_char(sql[at - 1])) continue;
    size_t i = at + 8;
    if (i < sql.size() && word_char(sql[i])) continue;
    while (i < sql.size() && std::isspace(static_cast<unsigned char>(sql[i]))) ++i;
    if (i + 2 <= sql.size() && EqualsIgnoreCase(sql.substr(i, 2), "on") &&
        (i + 2 == sql.size() || !word_char(sql[i + 2]))) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool MayRewrite(std::string_view sql) {
  return ContainsWordIgnoreCase(sql, "over") || ContainsWordIgnoreCase(sql, "group") ||
         HasDistinctOn(sql);
}

Result<std::optional<Plan>> PlanRewrite(duck::Connection& conn, const sql_tree::SqlTree& tree,
                                        std::string_view sql, const RewriteOptions& options,
                                        std::string* why_not) {
  auto start = std::chrono::steady_clock::now();
  auto ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  Planner planner(conn, options, tree);
  Result<Plan> plan = NotApplicable("no plan");
  // nlohmann-json throws on a tree of another shape than DuckDB writes: the query then
  // passes through.
  try {
    plan = planner.Run();
  } catch (const std::exception& e) {
    plan =
        NotApplicable("unexpected parse tree from DuckDB {}: {}", duck::LibraryVersion(), e.what());
  }
  // An assumption (D25) is only for steps, where a failure lets the caller plan again; a
  // plan that ended as one inline part (the keys counted fewer than the footers' bound)
  // would fail in the answer's own query instead: planned again without it.
  if (plan.ok() && plan->assumed && plan->steps.empty()) {
    RewriteOptions again = options;
    again.assume = false;
    return PlanRewrite(conn, tree, sql, again, why_not);
  }
  if (plan.ok()) {
    // The answer's columns keep the query's names: the parts' aggregates are renamed
    // (`count(*)` becomes `CAST(sum(__sluice_a0) AS BIGINT)`), and a client reading
    // columns by name must not see them change with the data's size. Positional aliases
    // keep the order of an ORDER BY inside. Names repeated in the query (DuckDB would
    // suffix them here) are left as they come.
    auto columns = Describe(conn, std::string(sql));
    if (!columns.ok()) {
      StatusCode code = columns.status().code();
      if (code == StatusCode::kAborted || code == StatusCode::kResourceExhausted)
        return columns.status();
      if (why_not) *why_not = columns.status().message();
      return std::optional<Plan>();
    }
    std::set<std::string> seen;
    std::vector<std::string> names;
    for (const Column& col : *columns) {
      if (!seen.insert(AsciiLower(col.name)).second) break;
      names.push_back(Quote(col.name));
    }
    if (!names.empty() && names.size() == columns->size()) {
      plan->final_select = fmt::format("SELECT * FROM ({}\n) AS __sluice_out({})",
                                       plan->final_select, fmt::join(names, ", "));
    }
    SLUICE_LOG(kLog, kDebug, "rewrite planned in {:.1f} ms: {}", ms(), plan->explanation);
    return std::optional<Plan>(std::move(plan).value());
  }
  if (plan.status().code() == StatusCode::kAborted ||
      plan.status().code() == StatusCode::kResourceExhausted) {
    return plan.status();
  }
  SLUICE_LOG(kLog, kDebug, "no rewrite ({:.1f} ms): {}", ms(), plan.status().message());
  if (why_not) *why_not = plan.status().message();
  return std::optional<Plan>();
}

Result<std::optional<Plan>> PlanRewrite(duck::Connection& conn, std::string_view sql,
                                        const RewriteOptions& options, std::string* why_not) {
  Result<sql_tree::SqlTree> tree = sql_tree::SqlTree::Parse(conn, sql);
  if (!tree.ok()) {
    Status st = PlanningError(tree.status(), "json_serialize_sql");
    if (st.code() != StatusCode::kUnimplemented) return st;
    SLUICE_LOG(kLog, kDebug, "no rewrite: {}", st.message());
    if (why_not) *why_not = st.message();
    return std::optional<Plan>();
  }
  return PlanRewrite(conn, *tree, sql, options, why_not);
}

Status WarmUp(duck::Connection& conn) {
  RETURN_IF_ERROR(LoadCatalogue(conn, nullptr, /*builtin_only=*/true).status());
  // The expressions the rewrites fill in, parsed once per process (and the parse tree's
  // serializer warmed).
  for (const char* e : {"1::BIGINT", "hash(1) % 2 = 3", "true AND true"})
    RETURN_IF_ERROR(ParseExpr(conn, e).status());
  return Status::OK();
}

Status WarmUpSession(duck::Connection& conn, UserFunctionCache* cache) {
  if (cache == nullptr || UserFunctionsCached(*cache)) return Status::OK();
  return LoadCatalogue(conn, cache).status();
}

Status RunCleanup(duck::Connection& conn, const Plan& plan) {
  Status first;
  for (const std::string& s : plan.cleanup) {
    Status st = conn.Execute(s);
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

bool AssumptionFailed(const Status& st) {
  return !st.ok() && st.message().find(kAssumptionFailed) != std::string_view::npos;
}

Result<std::string> RunSteps(duck::Connection& conn, const Plan& plan) {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    Status st = conn.Execute(plan.steps[i]);
    if (!st.ok()) {
      (void)RunCleanup(conn, plan);
      return st.WithContext(fmt::format("{} rewrite, part {} of {}", RewriteKindName(plan.kind),
                                        i + 1, plan.steps.size()));
    }
  }
  return plan.final_select;
}

Result<duck::QueryResult> RunPlan(duck::Connection& conn, const Plan& plan) {
  ASSIGN_OR_RETURN(std::string final_select, RunSteps(conn, plan));
  auto result = conn.Query(final_select);
  Status cleaned = RunCleanup(conn, plan);
  if (!result.ok()) return result.status();
  if (!cleaned.ok()) return cleaned;
  return result;
}

}  // namespace sluice::query::rewrite
