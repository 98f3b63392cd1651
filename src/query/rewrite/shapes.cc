// Where a rewritable node sits, what it needs to stand alone, what the rest of the query
// reads from it, and whether its input is deterministic (D4, D6).
#include "query/rewrite/shapes.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string_view>
#include <utility>

namespace sluice::query::rewrite {
namespace {

// Aggregates whose value does not depend on the order rows arrive in: the only ones allowed
// in a subquery nested inside the rewritten one, whose input every part scans again (D4).
bool OrderInsensitiveAggregate(std::string_view name) {
  static const std::set<std::string, std::less<>> kNames = {"count", "count_star", "min",
                                                            "max",   "bool_and",   "bool_or"};
  return kNames.count(AsciiLower(name)) > 0;
}

// Table functions that read the same rows every time they run (D4).
bool StableTableFunction(std::string_view name) {
  static const std::set<std::string, std::less<>> kNames = {
      "read_parquet", "parquet_scan",    "read_csv",    "read_csv_auto",
      "read_json",    "read_json_auto",  "read_ndjson", "read_ndjson_auto",
      "range",        "generate_series", "unnest"};
  return kNames.count(AsciiLower(name)) > 0;
}

}  // namespace

Status DeterminismCheck::Visit(const Json& j, const Json* current_node) const {
  if (j.is_object()) {
    std::string cls = Str(j, "class");
    std::string type = Str(j, "type");
    if (type == "SELECT_NODE" || type == "SET_OPERATION_NODE" || type == "RECURSIVE_CTE_NODE" ||
        type == "CTE_NODE") {
      if (type == "RECURSIVE_CTE_NODE") return NotApplicable("a recursive CTE");
      current_node = &j;
    }
    if (!cls.empty()) {
      if (cls == "WINDOW" && &j != allowed_window) return NotApplicable("another window function");
      if (cls == "PARAMETER") return NotApplicable("a prepared-statement parameter");
      if (cls == "COLLATE") return NotApplicable("a COLLATE expression");
      if (cls == "FUNCTION") {
        std::string name = AsciiLower(Str(j, "function_name"));
        // DuckDB's parser writes list, struct and map literals ([..], {..}, MAP {..}: the
        // lake planner's read_parquet file list and schema) as functions of schema `main`.
        std::string schema = Str(j, "schema");
        if ((!schema.empty() && schema != "main") || !Str(j, "catalog").empty()) {
          return NotApplicable("a schema-qualified function");
        }
        auto it = cat.find(name);
        if (it == cat.end()) return NotApplicable("unknown function {}", name);
        if (!it->second.consistent)
          return NotApplicable("function {} is not CONSISTENT (volatile)", name);
        if (it->second.aggregate && !OrderInsensitiveAggregate(name) &&
            !(own_aggregates_ok && current_node == own)) {
          return NotApplicable("aggregate {} inside the rewritten input", name);
        }
      }
    } else {
      if (!IsNullOrMissing(j, "sample")) return NotApplicable("a SAMPLE clause");
      if (type == "LIMIT_MODIFIER" || type == "LIMIT_PERCENT_MODIFIER")
        return NotApplicable("a LIMIT inside");
      if (type == "DISTINCT_MODIFIER" && j.contains("distinct_on_targets") &&
          !j["distinct_on_targets"].empty()) {
        return NotApplicable("DISTINCT ON inside");
      }
      if (type == "TABLE_FUNCTION" && IsTableRef(j)) {
        const Json& f = j["function"];
        if (!StableTableFunction(Str(f, "function_name"))) {
          return NotApplicable("table function {} (its rows may change between parts)",
                               Str(f, "function_name"));
        }
        if (f.contains("children")) {
          for (const Json& c : f["children"]) RETURN_IF_ERROR(Visit(c, current_node));
        }
        return Status::OK();
      }
    }
  }
  if (j.is_structured()) {
    for (const Json& c : j) RETURN_IF_ERROR(Visit(c, current_node));
  }
  return Status::OK();
}

void CollectTableNames(const Json& j, std::set<std::string>& out) {
  if (j.is_object() && Str(j, "type") == "BASE_TABLE" && IsTableRef(j))
    out.insert(AsciiLower(Str(j, "table_name")));
  if (j.is_structured()) {
    for (const Json& c : j) CollectTableNames(c, out);
  }
}

void FindCandidates(Json& j, std::vector<CteEntry>& scope, Json* enclosing_select, bool in_from,
                    std::vector<Candidate>& out) {
  if (!j.is_structured()) return;
  size_t pushed = 0;
  for (const sql_tree::Cte& cte : sql_tree::Ctes(j)) {
    scope.push_back({AsciiLower(cte.name), cte.entry});
    ++pushed;
  }

  bool table_ref = j.is_object() && sql_tree::IsTableRef(j);
  if (table_ref) {
    std::string type = Str(j, "type");
    Json* consumer = in_from ? enclosing_select : nullptr;
    if (type == "SUBQUERY" && j.contains("subquery")) {
      out.push_back({&j["subquery"]["node"], &j, consumer, Str(j, "alias"), "", scope});
    } else if (type == "BASE_TABLE" && Str(j, "schema_name").empty() &&
               Str(j, "catalog_name").empty()) {
      std::string name = AsciiLower(Str(j, "table_name"));
      for (auto it = scope.rbegin(); it != scope.rend(); ++it) {
        if (it->name != name) continue;
        Json& value = (*it->entry)["value"];
        if (value.contains("aliases") && !value["aliases"].empty())
          break;  // WITH r(a, b): not handled
        std::string alias = Str(j, "alias").empty() ? Str(j, "table_name") : Str(j, "alias");
        out.push_back({&value["query"]["node"], &j, consumer, alias, name, scope});
        break;
      }
    }
  }
  bool is_select = j.is_object() && Str(j, "type") == "SELECT_NODE" && j.contains("select_list");
  Json* select = is_select ? &j : enclosing_select;
  bool inner_join = table_ref && Str(j, "type") == "JOIN" && Str(j, "join_type") == "INNER" &&
                    Str(j, "ref_type") == "REGULAR";
  if (j.is_object()) {
    // Members in the order of their names (the order the candidates have always been
    // tried in), not DuckDB's.
    std::vector<std::pair<std::string_view, Json*>> members;
    for (auto& [key, c] : j.items()) members.emplace_back(key, &c);
    std::sort(members.begin(), members.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [key, c] : members) {
      bool child_in_from = (is_select && key == "from_table") ||
                           (in_from && inner_join && (key == "left" || key == "right"));
      FindCandidates(*c, scope, select, child_in_from, out);
    }
  } else {
    for (Json& c : j) FindCandidates(c, scope, select, false, out);
  }
  scope.resize(scope.size() - pushed);
}

namespace {

// The CTE definitions `node` needs (transitively), outer first; NotApplicable on a name
// defined twice in scope.
Result<Json> NeededCtes(const Json& node, const std::vector<CteEntry>& scope) {
  std::set<std::string> seen_names;
  for (const CteEntry& e : scope) {
    if (!seen_names.insert(e.name).second)
      return NotApplicable("CTE {} defined twice in scope", e.name);
  }
  std::set<std::string> needed;
  CollectTableNames(node, needed);
  bool grew = true;
  std::set<std::string> included;
  while (grew) {
    grew = false;
    for (const CteEntry& e : scope) {
      const Json& body = (*e.entry)["value"]["query"]["node"];
      if (&body == &node) continue;  // the rewritten node itself
      if (needed.count(e.name) && !included.count(e.name)) {
        included.insert(e.name);
        CollectTableNames(body, needed);
        grew = true;
      }
    }
  }
  Json map = Json::array();
  for (const CteEntry& e : scope) {
    if (included.count(e.name) && &(*e.entry)["value"]["query"]["node"] != &node)
      map.push_back(*e.entry);
  }
  return map;
}

}  // namespace

Result<Json> Standalone(const Json& node, const std::vector<CteEntry>& scope) {
  ASSIGN_OR_RETURN(Json ctes, NeededCtes(node, scope));
  Json out = node;
  if (!out.contains("cte_map") || !out["cte_map"].contains("map"))
    out["cte_map"] = {{"map", Json::array()}};
  Json merged = ctes;
  for (const Json& e : out["cte_map"]["map"]) merged.push_back(e);
  out["cte_map"]["map"] = merged;
  return out;
}

std::optional<std::set<std::string>> ReferencedNames(const sql_tree::SqlTree& tree, const Json& j,
                                                     const Json* skip,
                                                     const std::string& ref_alias) {
  std::set<std::string> names;
  bool all = false;
  auto visit = [&](auto&& self, const Json& v) -> void {
    if (&v == skip || all) return;
    if (v.is_object()) {
      std::string cls = Str(v, "class");
      if (cls == "STAR" || cls == "POSITIONAL_REFERENCE") all = true;
      if (cls == "COLUMN_REF" && v.contains("column_names")) {
        const Json& parts = v["column_names"];
        if (parts.size() == 1 && EqualsIgnoreCase(parts[0].get<std::string>(), ref_alias))
          all = true;  // the row as a struct
        for (const Json& p : parts) names.insert(AsciiLower(p.get<std::string>()));
      }
      if (Str(v, "type") == "BASE_TABLE" && sql_tree::IsTableRef(v)) {
        if (const sql_tree::Splice* s = tree.FindSplice(Str(v, "table_name"))) {
          for (const std::string& c : s->columns) names.insert(AsciiLower(c));
        }
      }
      if (Str(v, "type") == "JOIN" &&
          (Str(v, "ref_type") != "REGULAR" ||
           (v.contains("using_columns") && !v["using_columns"].empty()))) {
        all = true;  // NATURAL / USING join on names
      }
    }
    if (v.is_structured()) {
      for (const Json& c : v) self(self, c);
    }
  };
  visit(visit, j);
  if (all) return std::nullopt;
  return names;
}

void RemoveCte(Json& j, const std::string& name) {
  if (!j.is_structured()) return;
  if (j.is_object() && j.contains("cte_map") && j["cte_map"].contains("map")) {
    Json& map = j["cte_map"]["map"];
    for (size_t i = 0; i < map.size(); ++i) {
      if (AsciiLower(Str(map[i], "key")) == name) {
        map.erase(i);
        break;
      }
    }
  }
  for (Json& c : j) RemoveCte(c, name);
}

std::string TempTableName() {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("__sluice_rewrite_{}_{}", static_cast<long>(getpid()), counter.fetch_add(1));
}

Json TempTableRef(const std::string& name, const std::string& alias, Json column_aliases) {
  return {{"type", "BASE_TABLE"},   {"alias", alias},
          {"sample", nullptr},      {"schema_name", "main"},
          {"table_name", name},     {"column_name_alias", std::move(column_aliases)},
          {"catalog_name", "temp"}, {"at_clause", nullptr}};
}

}  // namespace sluice::query::rewrite
