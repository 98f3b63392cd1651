// The rewrites' planner: the candidates tried in turn, and a chosen rewrite's parts turned
// into steps and a final SELECT (D15, D17).
#include "query/rewrite/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "query/rewrite/key_packing.h"

namespace sluice::query::rewrite {

Result<Plan> Planner::Run() {
  if (options_.memory_limit_bytes <= 0) return NotApplicable("no memory limit given");
  if (!tree_.ok()) return NotApplicable("{}", tree_.error());
  if (!tree_.prefix().empty())
    return NotApplicable("not a SELECT DuckDB parses: {}", tree_.prefix());
  if (tree_.statement_count() != 1) return NotApplicable("not exactly one statement");
  root_doc_ = tree_.doc();
  const Json& statement = root_doc_["statements"][0];
  if (!statement.is_object() || !statement.contains("node") || !statement["node"].is_object()) {
    return NotApplicable("a statement without a query node");
  }
  Result<Plan> plan = TryCandidates(nullptr);
  if (plan.ok() || plan.status().code() != StatusCode::kUnimplemented) return plan;
  // D24: DISTINCT ON ... ORDER BY written as the latest-row window, on a fresh copy; only
  // a latest-row plan of a converted node is taken from it (elsewhere the query stays as
  // it was written).
  root_doc_ = tree_.doc();
  ASSIGN_OR_RETURN(int converted, ConvertDistinctOn(root_doc_["statements"][0]["node"]));
  if (converted == 0) return plan;
  std::vector<const Json*> inners;
  FindConvertedInners(root_doc_["statements"][0]["node"], inners);
  return TryCandidates(&inners);
}

Result<Plan> Planner::TryCandidates(const std::vector<const Json*>* only) {
  Json& root = root_doc_["statements"][0]["node"];
  std::vector<Candidate> candidates;
  candidates.push_back({&root, nullptr, nullptr, "", "", {}});
  std::vector<CteEntry> scope;
  FindCandidates(root, scope, nullptr, false, candidates);
  Status last = NotApplicable("no latest-row or group-by shape");
  for (Candidate& c : candidates) {
    if (Str(*c.node, "type") != "SELECT_NODE") continue;
    if (only && std::find(only->begin(), only->end(), c.node) == only->end()) continue;
    if (only) {
      // D24: the converted node's consumer only passes its columns on (`* EXCLUDE` the
      // row number and the keys, ordered by the keys): what the rest of the query reads of
      // that consumer is what it reads of this node, with the consumer's own names.
      for (const Candidate& outer : candidates) {
        if (outer.node != c.consumer) continue;
        const bool aliased = outer.slot && outer.slot->contains("column_name_alias") &&
                             !(*outer.slot)["column_name_alias"].empty();
        if (outer.slot && !aliased) {
          c.referenced = ReferencedNames(
              tree_, root_doc_, outer.cte_name.empty() ? outer.slot : outer.node, outer.ref_alias);
          if (c.referenced) {
            for (const Json& item : (*c.node)["select_list"]) {
              const std::string alias = AsciiLower(Str(item, "alias"));
              if (alias.rfind("__sdo_", 0) == 0) c.referenced->insert(alias);
            }
          }
          c.referenced_known = true;
        }
      }
    }
    auto plan = TryLatestRow(c);
    if (plan.ok()) return plan;
    if (plan.status().code() != StatusCode::kUnimplemented) return plan.status();
    if (IsLatestRowShape(c)) last = plan.status();
    if (only) continue;
    auto g = TryGroupBy(c);
    if (g.ok()) return g;
    if (g.status().code() != StatusCode::kUnimplemented) return g.status();
    if (c.node->contains("group_expressions") && !(*c.node)["group_expressions"].empty())
      last = g.status();
  }
  return last;
}

Result<std::string> Planner::Render(const Json& node) {
  Result<std::string> sql = tree_.RenderNode(conn_, node);
  if (!sql.ok()) return PlanningError(sql.status(), "json_deserialize_sql");
  return sql;
}

Result<std::string> Planner::RenderFinal(const Candidate& c) {
  if (!c.cte_name.empty()) {
    // Drop the CTE when nothing else references it.
    std::set<std::string> names;
    CollectTableNames(root_doc_, names);
    if (!names.count(c.cte_name)) RemoveCte(root_doc_, c.cte_name);
  }
  return Render(root_doc_["statements"][0]["node"]);
}

int Planner::PartsFor(int64_t groups, int64_t per_group) const {
  if (options_.force_parts > 0) return options_.force_parts;
  double budget = options_.part_memory_fraction * static_cast<double>(options_.memory_limit_bytes);
  double need = 1.1 * static_cast<double>(groups) * static_cast<double>(per_group);
  int parts = static_cast<int>(std::ceil(need / std::max(budget, 1.0)));
  return std::clamp(parts, 1, options_.max_parts);
}

std::optional<KeyRange> Planner::RangeParts(const std::optional<KeyRange>& range, int parts,
                                            int64_t per_key) const {
  if (!options_.range_parts || !range || parts <= 1 || range->hi < range->lo) return std::nullopt;
  const __int128 width = static_cast<__int128>(range->hi) - range->lo + 1;
  if (width > std::numeric_limits<int64_t>::max()) return std::nullopt;
  // PartsFor is capped at max_parts: at the cap it no longer says the range fits.
  if (options_.force_parts == 0 &&
      (parts >= options_.max_parts || PartsFor(static_cast<int64_t>(width), per_key) > parts))
    return std::nullopt;
  return range;
}

std::string PartCondition(const std::string& key, const std::optional<KeyRange>& range, int parts,
                          int i) {
  if (!range) return fmt::format("hash({}) % {} = {}", key, parts, i);
  // Equal ranges of the footers' bounds; the first takes NULL and everything below, the
  // last everything above (a file written after planning still lands in one part).
  const __int128 width = static_cast<__int128>(range->hi) - range->lo + 1;
  const __int128 step = (width + parts - 1) / parts;
  auto bound = [&](int j) { return Int128ToString(range->lo + (j + 1) * step - 1); };
  if (i == 0) return fmt::format("({0} IS NULL OR {0} <= {1})", key, bound(0));
  if (i == parts - 1) return fmt::format("{} > {}", key, bound(parts - 2));
  return fmt::format("({0} > {1} AND {0} <= {2})", key, bound(i - 1), bound(i));
}

Status Planner::LoadCatalogueOnce() {
  if (!cat_loaded_) {
    ASSIGN_OR_RETURN(cat_, LoadCatalogue(conn_, options_.user_functions));
    cat_loaded_ = true;
  }
  return Status::OK();
}

Result<Plan> Planner::Finish(Candidate& c, RewriteKind kind, int parts, const PartSql& part_sql,
                             const std::string& how) {
  Plan plan;
  plan.kind = kind;
  plan.parts = parts;
  plan.explanation = how;
  plan.assumed = assumed_;
  Json column_aliases = c.slot ? (*c.slot)["column_name_alias"] : Json::array();
  if (column_aliases.is_null()) column_aliases = Json::array();
  Json ref;
  if (parts == 1) {
    // One part needs no table between it and the rest of the query: it becomes a
    // subquery in the rewritten slot (D15).
    if (!c.slot) {
      plan.final_select = part_sql(0);
      return plan;
    }
    ASSIGN_OR_RETURN(Json part, ParseStatement(conn_, part_sql(0)));
    ref = {{"type", "SUBQUERY"},
           {"alias", c.ref_alias},
           {"sample", nullptr},
           {"subquery", std::move(part)},
           {"column_name_alias", column_aliases}};
  } else {
    // The consumer's count/sum/min/max per part, summed up after (D17).
    ASSIGN_OR_RETURN(std::optional<Plan> partial, TryPartialConsumer(c, plan, parts, part_sql));
    if (partial) return std::move(*partial);
    std::string name = TempTableName();
    std::string qualified = "temp.main." + Quote(name);
    for (int i = 0; i < parts; ++i) {
      plan.steps.push_back(i == 0
                               ? fmt::format("CREATE TEMP TABLE {} AS {}", Quote(name), part_sql(i))
                               : fmt::format("INSERT INTO {} {}", qualified, part_sql(i)));
    }
    plan.cleanup.push_back("DROP TABLE IF EXISTS " + qualified);
    if (!c.slot) {
      plan.final_select = "SELECT * FROM " + qualified;
      return plan;
    }
    ref = TempTableRef(name, c.ref_alias, column_aliases);
  }
  *c.slot = ref;
  ASSIGN_OR_RETURN(plan.final_select, RenderFinal(c));
  return plan;
}

// D17: when the rewritten node is the whole FROM of an ungrouped consumer whose select
// list is built of count, sum (of exact types), min and max (`SELECT count(*), sum(n) FROM
// g WHERE ...`), each part runs the consumer's aggregates over its own rows into a TEMP
// table of one row per part, and the final query combines them (counts and sums summed,
// min of mins, max of maxes): the parts' rows are never stored. nullopt when the consumer
// is any other shape.
Result<std::optional<Plan>> Planner::TryPartialConsumer(Candidate& c, const Plan& base, int parts,
                                                        const PartSql& part_sql) {
  if (c.consumer == nullptr || c.slot == nullptr || !c.consumer->contains("from_table") ||
      &(*c.consumer)["from_table"] != c.slot) {
    return std::optional<Plan>();
  }
  Json& consumer = *c.consumer;
  if (!consumer["group_expressions"].empty() || !IsNullOrMissing(consumer, "having") ||
      !IsNullOrMissing(consumer, "qualify") || !consumer["modifiers"].empty() ||
      !IsNullOrMissing(consumer, "sample") ||
      Str(consumer, "aggregate_handling") != "STANDARD_HANDLING") {
    return std::optional<Plan>();
  }
  // No subquery or window anywhere in the consumer's WHERE or select list.
  bool plain = true;
  std::function<void(const Json&)> scan = [&](const Json& j) {
    if (!j.is_structured() || !plain) return;
    if (j.is_object()) {
      std::string cls = Str(j, "class");
      if (cls == "SUBQUERY" || cls == "WINDOW" || cls == "STAR" || cls == "PARAMETER")
        plain = false;
      for (const auto& [k, v] : j.items()) scan(v);
    } else {
      for (const Json& v : j) scan(v);
    }
  };
  scan(consumer["select_list"]);
  scan(consumer["where_clause"]);
  if (!plain) return std::optional<Plan>();
  // Each aggregate becomes a partial (the aggregate itself, aliased) and a combination.
  Json combined = consumer["select_list"];
  Json partials = Json::array();
  bool ok = true;
  std::function<void(Json&, bool)> replace = [&](Json& j, bool inside_aggregate) {
    if (!j.is_structured() || !ok) return;
    if (j.is_object() && Str(j, "class") == "FUNCTION" && !inside_aggregate) {
      std::string name = AsciiLower(Str(j, "function_name"));
      auto it = cat_.find(name);
      if (it != cat_.end() && it->second.aggregate) {
        bool simple = (name == "count_star" || name == "count" || name == "sum" || name == "min" ||
                       name == "max") &&
                      !j.value("distinct", false) && !j.value("export_state", false) &&
                      (!j.contains("order_bys") || j["order_bys"]["orders"].empty()) &&
                      Str(j, "schema").empty() && Str(j, "catalog").empty();
        if (!simple) {
          ok = false;
          return;
        }
        std::string alias = fmt::format("__sluice_a{}", partials.size());
        Json partial = j;
        partial["alias"] = alias;
        partials.push_back(partial);
        std::string outer = name == "min" || name == "max" ? name : "sum";
        std::string expr = fmt::format("{}({})", outer, alias);
        if (name == "count" || name == "count_star") expr = fmt::format("CAST({} AS BIGINT)", expr);
        Result<Json> e = ParseExpr(conn_, expr);
        if (!e.ok()) {
          ok = false;
          return;
        }
        std::string keep_alias = Str(j, "alias");
        j = *e;
        j["alias"] = keep_alias;
        return;
      }
    }
    if (j.is_object() && Str(j, "class") == "COLUMN_REF" && !inside_aggregate) {
      ok = false;  // a column outside any aggregate: not an ungrouped aggregate query
      return;
    }
    if (j.is_object()) {
      // Members in the order of their names, as the partials have always been numbered.
      std::vector<std::pair<std::string_view, Json*>> members;
      for (auto& [k, v] : j.items()) members.emplace_back(k, &v);
      std::sort(members.begin(), members.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      for (auto& [k, v] : members) replace(*v, inside_aggregate);
    } else {
      for (Json& v : j) replace(v, inside_aggregate);
    }
  };
  replace(combined, false);
  if (!ok || partials.empty()) return std::optional<Plan>();

  Json column_aliases = (*c.slot)["column_name_alias"];
  if (column_aliases.is_null()) column_aliases = Json::array();
  auto partial_sql = [&](int i) -> Result<std::string> {
    ASSIGN_OR_RETURN(Json part, ParseStatement(conn_, part_sql(i)));
    Json node = consumer;
    node["select_list"] = partials;
    node["from_table"] = {{"type", "SUBQUERY"},
                          {"alias", c.ref_alias},
                          {"sample", nullptr},
                          {"subquery", std::move(part)},
                          {"column_name_alias", column_aliases}};
    node["cte_map"] = {{"map", Json::array()}};
    return Render(node);
  };
  // Sums must be exact to be summed again in another order: integers and decimals.
  ASSIGN_OR_RETURN(std::string first, partial_sql(0));
  ASSIGN_OR_RETURN(std::vector<Column> types, Describe(conn_, first));
  for (size_t k = 0; k < types.size() && k < partials.size(); ++k) {
    std::string name = AsciiLower(Str(partials[k], "function_name"));
    const std::string& t = types[k].type;
    bool exact = t == "HUGEINT" || t == "BIGINT" || t == "INTEGER" || t == "UBIGINT" ||
                 t == "UHUGEINT" || t.rfind("DECIMAL", 0) == 0;
    if (name == "sum" && !exact) return std::optional<Plan>();
  }
  Plan plan = base;
  std::string name = TempTableName();
  std::string qualified = "temp.main." + Quote(name);
  for (int i = 0; i < parts; ++i) {
    std::string sql = first;
    if (i > 0) {
      ASSIGN_OR_RETURN(sql, partial_sql(i));
    }
    plan.steps.push_back(i == 0 ? fmt::format("CREATE TEMP TABLE {} AS {}", Quote(name), sql)
                                : fmt::format("INSERT INTO {} {}", qualified, sql));
  }
  plan.cleanup.push_back("DROP TABLE IF EXISTS " + qualified);
  consumer["select_list"] = combined;
  consumer["where_clause"] = nullptr;
  consumer["from_table"] = TempTableRef(name, "", Json::array());
  ASSIGN_OR_RETURN(plan.final_select, RenderFinal(c));
  plan.explanation += "; the consumer's aggregates per part";
  return std::optional<Plan>(std::move(plan));
}

}  // namespace sluice::query::rewrite
