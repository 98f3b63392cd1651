// What the rewrites read off a query's tree before choosing one: where a node that could
// be rewritten sits (the root, a subquery, a CTE), the CTEs it needs to stand alone, which
// of its columns the rest of the query reads, and whether its input is the same on every
// scan (D4, D6).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "query/rewrite/common.h"
#include "query/rewrite/probes.h"

namespace sluice::query::rewrite {

// Every expression and table ref of a query node's own level (not inside subqueries).
template <typename F>
void ForEachOwnExpression(const Json& j, const F& f) {
  if (j.is_object()) {
    if (Str(j, "class") == "SUBQUERY") return;  // its own scope
    if (j.contains("class")) f(j);
  }
  if (j.is_structured()) {
    for (const Json& c : j) ForEachOwnExpression(c, f);
  }
}

// The input of the rewritten node must be the same on every scan, and the node's own level
// must not see the partitioning (D4). `own` is the rewritten node: its own aggregates are
// allowed when `own_aggregates_ok` (the group-by rewrite); `allowed_window` is the one
// ROW_NUMBER the latest-row rewrite replaces.
struct DeterminismCheck {
  const Catalogue& cat;
  const Json* own = nullptr;
  bool own_aggregates_ok = false;
  const Json* allowed_window = nullptr;

  Status Visit(const Json& j, const Json* current_node) const;
};

// Table names referenced anywhere under `j` (lower case).
void CollectTableNames(const Json& j, std::set<std::string>& out);

// Where a node sits: the root, or a table ref (a subquery, or a reference to a CTE).
struct CteEntry {
  std::string name;
  Json* entry;  // {"key": ..., "value": {...}}
};

struct Candidate {
  Json* node = nullptr;         // the query node to rewrite
  Json* slot = nullptr;         // the table ref replaced by the temp table; null for the root
  Json* consumer = nullptr;     // the SELECT_NODE whose FROM is `slot`, if any
  std::string ref_alias;        // how the consumer names it
  std::string cte_name;         // set when `slot` references a CTE
  std::vector<CteEntry> scope;  // CTEs visible at the slot, outer first
  // Set when the planner knows which output columns the rest of the query reads better
  // than ReferencedNames at the slot would (D24: through a DISTINCT ON's projection);
  // nullopt inside means all of them.
  bool referenced_known = false;
  std::optional<std::set<std::string>> referenced;
};

// The nodes under `j` that could be rewritten, in the order they are tried: a depth-first
// walk that takes an object's members in the order of their names. `in_from`: `j` is the
// FROM of `enclosing_select`, or reached from it through INNER joins only, so a filter in
// that SELECT's WHERE on `j`'s columns may be applied to `j` first.
void FindCandidates(Json& j, std::vector<CteEntry>& scope, Json* enclosing_select, bool in_from,
                    std::vector<Candidate>& out);

// `node` as a standalone query: the CTEs it needs from the enclosing scopes go into its own
// WITH. NotApplicable on a name defined twice in scope.
Result<Json> Standalone(const Json& node, const std::vector<CteEntry>& scope);

// Column names the rest of the query may read from the rewritten node's output: every name
// part of every column reference outside it (`skip`), and the columns a spliced scan of
// `tree` reads; nullopt means "all of them" (D6).
std::optional<std::set<std::string>> ReferencedNames(const sql_tree::SqlTree& tree, const Json& j,
                                                     const Json* skip,
                                                     const std::string& ref_alias);

// Removes the CTE `name` (lower case) from every WITH under `j`.
void RemoveCte(Json& j, const std::string& name);

// A fresh name for a rewrite's TEMP table.
std::string TempTableName();
// A table reference to the TEMP table `name` (temp.main.name), as the tree writes one.
Json TempTableRef(const std::string& name, const std::string& alias, Json column_aliases);

}  // namespace sluice::query::rewrite
