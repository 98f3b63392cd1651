// DISTINCT ON as the latest-row window (D24). `SELECT DISTINCT ON (k) ... ORDER BY k, x
// DESC` keeps, per k, the first row by the rest of the ORDER BY: the same rows as
// `ROW_NUMBER() OVER (PARTITION BY k ORDER BY x DESC) = 1`, in the order of k. The node
// is written in that form, so that the latest-row rewrite (latest_row.cc) plans it. Reads
// of the tree use at(): a tree of another shape throws, which PlanRewrite turns into
// "passes through".
//
//   SELECT * EXCLUDE (__sdo_rn, __sdo_k0, ...) FROM (
//     SELECT <the node's items>,
//            row_number() OVER (PARTITION BY k... ORDER BY x...) AS __sdo_rn,
//            k0 AS __sdo_k0, ...
//     FROM ... WHERE ...) AS __sdo
//   WHERE __sdo_rn = 1
//   ORDER BY __sdo_k0 <as the node ordered k0>, ...
#include <fmt/format.h>

#include <set>
#include <vector>

#include "query/rewrite/planner.h"

namespace sluice::query::rewrite {
namespace {

constexpr const char* kRowNumber = "__sdo_rn";
constexpr const char* kRelation = "__sdo";

// `j` without its query locations (where the parser found it), to compare two expressions.
Json WithoutLocations(const Json& j) {
  if (j.is_object()) {
    Json out = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() != "query_location") out[it.key()] = WithoutLocations(it.value());
    }
    return out;
  }
  if (j.is_array()) {
    Json out = Json::array();
    for (const Json& e : j) out.push_back(WithoutLocations(e));
    return out;
  }
  return j;
}

// Whether `e` could mean something else in a window than in the node's ORDER BY: a
// position (`ORDER BY 1`) or a name that is an alias of the select list (an ORDER BY may
// name the output, a window only the input).
bool NamesTheOutput(const Json& e, const std::set<std::string>& aliases) {
  if (Str(e, "class") == "CONSTANT") return true;
  bool found = false;
  std::vector<const Json*> stack{&e};
  while (!stack.empty()) {
    const Json* j = stack.back();
    stack.pop_back();
    if (j->is_object() && Str(*j, "class") == "COLUMN_REF" && (*j).at("column_names").size() == 1 &&
        aliases.count(AsciiLower((*j).at("column_names")[0].get<std::string>()))) {
      found = true;
    }
    if (j->is_structured()) {
      for (const Json& c : *j) stack.push_back(&c);
    }
  }
  return found;
}

// The node's DISTINCT ON targets and ORDER BY when it is the shape D24 converts: those two
// modifiers (and a LIMIT after them), the ORDER BY starting with the targets (in any order)
// and going on (without more order keys the row kept is any), no GROUP BY, HAVING or
// QUALIFY.
struct DistinctOnShape {
  const Json* targets = nullptr;
  const Json* orders = nullptr;
  const Json* limit = nullptr;    // a LIMIT (and OFFSET) after them, applied to the outer query
  std::vector<size_t> target_of;  // for each of the first targets.size() orders
};

std::optional<DistinctOnShape> MatchShape(const Json& n) {
  if (Str(n, "type") != "SELECT_NODE" || !n.contains("modifiers") || !n.contains("select_list"))
    return std::nullopt;
  const Json& mods = n.at("modifiers");
  if (mods.size() < 2 || mods.size() > 3 || Str(mods[0], "type") != "DISTINCT_MODIFIER" ||
      Str(mods[1], "type") != "ORDER_MODIFIER" ||
      (mods.size() == 3 && Str(mods[2], "type") != "LIMIT_MODIFIER")) {
    return std::nullopt;
  }
  if (!n.at("group_expressions").empty() || !IsNullOrMissing(n, "having") ||
      !IsNullOrMissing(n, "qualify") || Str(n, "aggregate_handling") != "STANDARD_HANDLING") {
    return std::nullopt;
  }
  DistinctOnShape s;
  s.targets = &mods[0].at("distinct_on_targets");
  s.orders = &mods[1].at("orders");
  if (mods.size() == 3) s.limit = &mods[2];
  const size_t nt = s.targets->size();
  if (nt == 0 || s.orders->size() <= nt) return std::nullopt;
  std::set<std::string> aliases;
  for (const Json& item : n.at("select_list")) {
    const std::string alias = AsciiLower(Str(item, "alias"));
    if (alias.empty()) continue;
    // `k AS k` names the input column too.
    if (Str(item, "class") == "COLUMN_REF" && !item.at("column_names").empty() &&
        AsciiLower(item.at("column_names").back().get<std::string>()) == alias) {
      continue;
    }
    aliases.insert(alias);
  }
  std::vector<Json> targets;
  for (const Json& t : *s.targets) {
    if (NamesTheOutput(t, aliases)) return std::nullopt;
    targets.push_back(WithoutLocations(t));
  }
  std::vector<bool> used(nt, false);
  for (size_t i = 0; i < s.orders->size(); ++i) {
    const Json& e = (*s.orders)[i].at("expression");
    if (NamesTheOutput(e, aliases)) return std::nullopt;
    if (i >= nt) continue;
    const Json plain = WithoutLocations(e);
    size_t found = nt;
    for (size_t t = 0; t < nt; ++t) {
      if (!used[t] && targets[t] == plain) found = t;
    }
    if (found == nt) return std::nullopt;
    used[found] = true;
    s.target_of.push_back(found);
  }
  return s;
}

// The select list's items that carry __sdo_rn as the ROW_NUMBER this file wrote.
bool IsConvertedInner(const Json& n) {
  if (Str(n, "type") != "SELECT_NODE" || !n.contains("select_list")) return false;
  for (const Json& item : n.at("select_list")) {
    if (Str(item, "class") == "WINDOW" && Str(item, "alias") == kRowNumber) return true;
  }
  return false;
}

}  // namespace

Result<int> Planner::ConvertDistinctOn(Json& j) {
  int converted = 0;
  // Inner nodes first: a DISTINCT ON in another's FROM is converted, then copied whole.
  if (j.is_structured()) {
    for (Json& c : j) {
      ASSIGN_OR_RETURN(int n, ConvertDistinctOn(c));
      converted += n;
    }
  }
  if (!j.is_object()) return converted;
  std::optional<DistinctOnShape> shape = MatchShape(j);
  if (!shape) return converted;
  const size_t nt = shape->targets->size();

  Json inner = j;
  inner["modifiers"] = Json::array();
  ASSIGN_OR_RETURN(Json window, ParseExpr(conn_, "row_number() OVER (PARTITION BY 1 ORDER BY 1)"));
  window["alias"] = kRowNumber;
  window["partitions"] = *shape->targets;
  Json rest = Json::array();
  for (size_t i = nt; i < shape->orders->size(); ++i) rest.push_back((*shape->orders)[i]);
  window["orders"] = rest;
  inner["select_list"].push_back(window);
  std::vector<std::string> hidden = {kRowNumber};
  std::vector<std::string> outer_orders;
  for (size_t t = 0; t < nt; ++t) {
    Json key = (*shape->targets)[t];
    key["alias"] = fmt::format("__sdo_k{}", t);
    inner["select_list"].push_back(key);
    hidden.push_back(fmt::format("__sdo_k{}", t));
  }
  for (size_t i = 0; i < nt; ++i) outer_orders.push_back(hidden[1 + shape->target_of[i]]);

  ASSIGN_OR_RETURN(
      Json outer_statement,
      ParseStatement(conn_, fmt::format("SELECT * EXCLUDE ({}) FROM (SELECT 1) AS {} WHERE {} = 1 "
                                        "ORDER BY {}",
                                        fmt::join(hidden, ", "), kRelation, kRowNumber,
                                        fmt::join(outer_orders, ", "))));
  Json outer = std::move(outer_statement["node"]);
  Json& outer_orders_json = outer["modifiers"][0]["orders"];
  if (outer_orders_json.size() != nt) return NotApplicable("DISTINCT ON: unexpected template");
  for (size_t i = 0; i < nt; ++i) {
    outer_orders_json[i]["type"] = (*shape->orders)[i].at("type");
    outer_orders_json[i]["null_order"] = (*shape->orders)[i].at("null_order");
  }
  if (shape->limit) outer["modifiers"].push_back(*shape->limit);  // after the ORDER BY
  outer["from_table"]["subquery"]["node"] = std::move(inner);
  j = std::move(outer);
  return converted + 1;
}

void Planner::FindConvertedInners(Json& j, std::vector<const Json*>& out) {
  if (j.is_object() && IsConvertedInner(j)) out.push_back(&j);
  if (j.is_structured()) {
    for (Json& c : j) FindConvertedInners(c, out);
  }
}

}  // namespace sluice::query::rewrite
