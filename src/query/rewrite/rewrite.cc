// Planner rewrites: detection over DuckDB's parse tree, the parts, the final SELECT.
// The rules and their reasons: docs/design/0013-query-rewrites.md (D1..D12 below).
#include "query/rewrite/rewrite.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/logging.h"

namespace sluice::query::rewrite {
namespace {

using Json = nlohmann::json;

const Logger kLog("rewrite");

// "Does not apply": the query passes through unchanged. Internal only.
template <typename... Args>
Status NotApplicable(fmt::format_string<Args...> f, Args&&... args) {
  return UnimplementedError(f, std::forward<Args>(args)...);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IEquals(std::string_view a, std::string_view b) { return Lower(a) == Lower(b); }

std::string Str(const Json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool IsNullOrMissing(const Json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null();
}

bool IsTableRef(const Json& j) { return j.is_object() && !j.contains("class") && j.contains("alias") && j.contains("type"); }

std::string Int128ToString(__int128 v) {
  if (v == 0) return "0";
  bool neg = v < 0;
  unsigned __int128 u = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string s;
  while (u > 0) {
    s.push_back(static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  if (neg) s.push_back('-');
  std::reverse(s.begin(), s.end());
  return s;
}

// ---------------------------------------------------------------------------------------
// DuckDB round trips.

// A planning query's failure: an interrupt or out of memory is the caller's business (the
// user cancelled, or the server is short of memory); anything else means "does not apply".
Status PlanningError(const Status& st, std::string_view what) {
  if (st.code() == StatusCode::kAborted || st.code() == StatusCode::kResourceExhausted) return st;
  return NotApplicable("{} failed: {}", what, st.message());
}

Result<std::vector<std::vector<std::optional<std::string>>>> Ask(duck::Connection& conn, const std::string& sql,
                                                                  std::string_view what) {
  auto rows = conn.QueryText(sql);
  if (!rows.ok()) return PlanningError(rows.status(), what);
  return std::move(rows).value();
}

// A statement that cannot be a subquery (DESCRIBE, EXPLAIN): its VARCHAR columns as text.
Result<std::vector<std::vector<std::optional<std::string>>>> AskStatement(duck::Connection& conn, const std::string& sql,
                                                                           std::string_view what) {
  auto result = conn.Query(sql);
  if (!result.ok()) return PlanningError(result.status(), what);
  std::vector<std::vector<std::optional<std::string>>> rows;
  for (size_t i = 0; i < result->chunk_count(); ++i) {
    duck::ResultChunk c = result->chunk(i);
    for (size_t r = 0; r < c.size(); ++r) {
      auto& row = rows.emplace_back();
      for (size_t col = 0; col < result->column_count(); ++col) {
        if (result->column_type(col) != duck::ColumnType::kVarchar || c.IsNull(col, r)) {
          row.emplace_back(std::nullopt);
        } else {
          row.emplace_back(std::string(c.GetString(col, r)));
        }
      }
    }
  }
  return rows;
}

// DuckDB's parse tree of `sql`; NotApplicable when it does not parse or is not one SELECT.
Result<Json> Parse(duck::Connection& conn, std::string_view sql) {
  ASSIGN_OR_RETURN(auto rows, Ask(conn, "SELECT json_serialize_sql(" + duck::QuoteLiteral(sql) + ")", "json_serialize_sql"));
  if (rows.size() != 1 || rows[0].size() != 1 || !rows[0][0]) return NotApplicable("json_serialize_sql returned no row");
  Json j = Json::parse(*rows[0][0], nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return NotApplicable("json_serialize_sql returned invalid JSON");
  if (j.value("error", true)) return NotApplicable("not a SELECT DuckDB parses: {}", Str(j, "error_message"));
  if (!j.contains("statements") || j["statements"].size() != 1) return NotApplicable("not exactly one statement");
  return j;
}

// SQL text of a query node (json_deserialize_sql).
Result<std::string> Render(duck::Connection& conn, const Json& node) {
  Json doc = {{"error", false}, {"statements", Json::array({{{"node", node}, {"named_param_map", Json::array()}}})}};
  ASSIGN_OR_RETURN(auto rows, Ask(conn, "SELECT json_deserialize_sql(" + duck::QuoteLiteral(doc.dump()) + "::JSON)",
                                  "json_deserialize_sql"));
  if (rows.size() != 1 || !rows[0][0]) return NotApplicable("json_deserialize_sql returned no row");
  std::string sql = *rows[0][0];
  while (!sql.empty() && (sql.back() == ';' || std::isspace(static_cast<unsigned char>(sql.back())))) sql.pop_back();
  return sql;
}

// The parse tree of one expression (a template filled in by the caller).
Result<Json> ParseExpr(duck::Connection& conn, std::string_view expr) {
  ASSIGN_OR_RETURN(Json j, Parse(conn, fmt::format("SELECT {}", expr)));
  return j["statements"][0]["node"]["select_list"][0];
}

struct Column {
  std::string name;
  std::string type;
};

Result<std::vector<Column>> Describe(duck::Connection& conn, const std::string& select) {
  ASSIGN_OR_RETURN(auto rows, AskStatement(conn, "DESCRIBE " + select, "DESCRIBE"));
  std::vector<Column> out;
  for (auto& r : rows) {
    if (r.size() < 2 || !r[0] || !r[1]) return NotApplicable("DESCRIBE returned an incomplete row");
    out.push_back({*r[0], *r[1]});
  }
  return out;
}

// DuckDB's estimate of the rows `select` reads: the largest "Estimated Cardinality" of any
// operator of its plan (a Parquet scan's is exact, from the file footers).
// DuckDB's cardinality estimates of a query's plan: the root's (its output) and the
// largest of any operator (its input, for a scan under filters and aggregates).
struct Estimates {
  int64_t output = -1;
  int64_t largest = -1;
};
Result<Estimates> EstimatePlan(duck::Connection& conn, const std::string& select) {
  ASSIGN_OR_RETURN(auto rows, AskStatement(conn, "EXPLAIN (FORMAT JSON) " + select, "EXPLAIN"));
  Estimates out;
  for (auto& r : rows) {
    if (r.size() < 2 || !r[1]) continue;
    Json plan = Json::parse(*r[1], nullptr, false);
    if (plan.is_discarded()) continue;
    std::vector<const Json*> queue{&plan};  // breadth first: the root's estimate first
    for (size_t i = 0; i < queue.size(); ++i) {
      const Json* j = queue[i];
      if (j->is_object()) {
        auto it = j->find("Estimated Cardinality");
        if (it != j->end() && it->is_string()) {
          int64_t e = std::atoll(it->get<std::string>().c_str());
          if (out.output < 0) out.output = e;
          out.largest = std::max(out.largest, e);
        }
      }
      if (j->is_structured()) {
        for (const Json& c : *j) queue.push_back(&c);
      }
    }
  }
  if (out.output < 0) return NotApplicable("EXPLAIN gave no cardinality estimate");
  return out;
}
Result<int64_t> EstimateRows(duck::Connection& conn, const std::string& select) {
  ASSIGN_OR_RETURN(Estimates e, EstimatePlan(conn, select));
  return e.largest;
}

// The distinct-key estimate of the statistics scan (D7): the exact number of distinct key
// hashes among the keys whose hash is 0 modulo M, times M. Sampling keys (not rows) keeps
// every sampled key's rows, so the estimate is unbiased; the aggregate holds ~1/M of the
// keys (at most ~1M); it is cheaper per row than approx_count_distinct's HyperLogLog.
std::string DistinctKeysExpr(const std::string& key_list, int64_t est_rows) {
  int64_t m = std::max<int64_t>(64, est_rows >> 20);
  return fmt::format("count(DISTINCT hash({0})) FILTER (WHERE hash({0}) % {1} = 0) * {1}", key_list, m);
}

// ---------------------------------------------------------------------------------------
// DuckDB's function catalogue: which names are aggregates, and which are CONSISTENT (the
// same value for the same input in every statement: D4).

struct FunctionInfo {
  bool aggregate = false;
  bool consistent = false;
};

using Catalogue = std::map<std::string, FunctionInfo>;

}  // namespace

struct UserFunctionCache {
  std::mutex mu;
  std::optional<Catalogue> user;  // guarded by mu
};

std::shared_ptr<UserFunctionCache> MakeUserFunctionCache() { return std::make_shared<UserFunctionCache>(); }

namespace {

Result<Catalogue> AskCatalogue(duck::Connection& conn, std::string_view which) {
  ASSIGN_OR_RETURN(auto rows, Ask(conn,
                                  fmt::format("SELECT lower(function_name), bool_or(function_type = 'aggregate'), "
                                              "bool_and(coalesce(stability, '') = 'CONSISTENT' AND function_type IN "
                                              "('scalar', 'aggregate')) FROM duckdb_functions() WHERE {} GROUP BY 1",
                                              which),
                                  "duckdb_functions()"));
  Catalogue out;
  for (auto& r : rows) {
    if (r.size() != 3 || !r[0] || !r[1] || !r[2]) continue;
    out[*r[0]] = {*r[1] == "true", *r[2] == "true"};
  }
  return out;
}

// The built-in functions are read once per process (all of duckdb_functions() costs ~30 ms,
// more than planning a small query), the user's (macros) at every plan. A name both is an
// aggregate if either is and CONSISTENT only if both are. A built-in that an extension
// loaded later adds is unknown here, and so not rewritten (D16).
// With a `cache` (RewriteOptions::user_functions), the user functions are read once into it.
Result<Catalogue> LoadCatalogue(duck::Connection& conn, UserFunctionCache* cache = nullptr, bool builtin_only = false) {
  static std::mutex mu;
  static std::optional<Catalogue> builtin;
  Catalogue out;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!builtin) {
      ASSIGN_OR_RETURN(Catalogue c, AskCatalogue(conn, "internal"));
      builtin = std::move(c);
    }
    out = *builtin;
  }
  if (builtin_only) return out;
  std::optional<Catalogue> cached_user;
  if (cache != nullptr) {
    std::lock_guard<std::mutex> lock(cache->mu);
    cached_user = cache->user;
  }
  if (!cached_user) {
    ASSIGN_OR_RETURN(Catalogue c, AskCatalogue(conn, "NOT internal"));
    if (cache != nullptr) {
      std::lock_guard<std::mutex> lock(cache->mu);
      cache->user = c;
    }
    cached_user = std::move(c);
  }
  const Catalogue& user = *cached_user;
  for (auto& [name, info] : user) {
    auto [it, inserted] = out.emplace(name, info);
    if (!inserted) it->second = {it->second.aggregate || info.aggregate, it->second.consistent && info.consistent};
  }
  return out;
}

// Aggregates whose value does not depend on the order rows arrive in: the only ones allowed
// in a subquery nested inside the rewritten one, whose input every part scans again (D4).
bool OrderInsensitiveAggregate(std::string_view name) {
  static const std::set<std::string, std::less<>> kNames = {"count", "count_star", "min", "max", "bool_and", "bool_or"};
  return kNames.count(Lower(name)) > 0;
}

// Table functions that read the same rows every time they run (D4).
bool StableTableFunction(std::string_view name) {
  static const std::set<std::string, std::less<>> kNames = {
      "read_parquet", "parquet_scan", "read_csv", "read_csv_auto", "read_json", "read_json_auto",
      "read_ndjson", "read_ndjson_auto", "range", "generate_series", "unnest"};
  return kNames.count(Lower(name)) > 0;
}

// ---------------------------------------------------------------------------------------
// Checks over a subtree.

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

  Status Visit(const Json& j, const Json* current_node) const {
    if (j.is_object()) {
      std::string cls = Str(j, "class");
      std::string type = Str(j, "type");
      if (type == "SELECT_NODE" || type == "SET_OPERATION_NODE" || type == "RECURSIVE_CTE_NODE" || type == "CTE_NODE") {
        if (type == "RECURSIVE_CTE_NODE") return NotApplicable("a recursive CTE");
        current_node = &j;
      }
      if (!cls.empty()) {
        if (cls == "WINDOW" && &j != allowed_window) return NotApplicable("another window function");
        if (cls == "PARAMETER") return NotApplicable("a prepared-statement parameter");
        if (cls == "COLLATE") return NotApplicable("a COLLATE expression");
        if (cls == "FUNCTION") {
          std::string name = Lower(Str(j, "function_name"));
          // DuckDB's parser writes list, struct and map literals ([..], {..}, MAP {..}: the
          // lake planner's read_parquet file list and schema) as functions of schema `main`.
          std::string schema = Str(j, "schema");
          if ((!schema.empty() && schema != "main") || !Str(j, "catalog").empty()) {
            return NotApplicable("a schema-qualified function");
          }
          auto it = cat.find(name);
          if (it == cat.end()) return NotApplicable("unknown function {}", name);
          if (!it->second.consistent) return NotApplicable("function {} is not CONSISTENT (volatile)", name);
          if (it->second.aggregate && !OrderInsensitiveAggregate(name) && !(own_aggregates_ok && current_node == own)) {
            return NotApplicable("aggregate {} inside the rewritten input", name);
          }
        }
      } else {
        if (!IsNullOrMissing(j, "sample")) return NotApplicable("a SAMPLE clause");
        if (type == "LIMIT_MODIFIER" || type == "LIMIT_PERCENT_MODIFIER") return NotApplicable("a LIMIT inside");
        if (type == "DISTINCT_MODIFIER" && j.contains("distinct_on_targets") && !j["distinct_on_targets"].empty()) {
          return NotApplicable("DISTINCT ON inside");
        }
        if (type == "TABLE_FUNCTION" && IsTableRef(j)) {
          const Json& f = j["function"];
          if (!StableTableFunction(Str(f, "function_name"))) {
            return NotApplicable("table function {} (its rows may change between parts)", Str(f, "function_name"));
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
};

// Table names referenced anywhere under `j` (lower case).
void CollectTableNames(const Json& j, std::set<std::string>& out) {
  if (j.is_object() && Str(j, "type") == "BASE_TABLE" && IsTableRef(j)) out.insert(Lower(Str(j, "table_name")));
  if (j.is_structured()) {
    for (const Json& c : j) CollectTableNames(c, out);
  }
}

// ---------------------------------------------------------------------------------------
// Where a node sits: the root, or a table ref (a subquery, or a reference to a CTE).

struct CteEntry {
  std::string name;
  Json* entry;  // {"key": ..., "value": {...}}
};

struct Candidate {
  Json* node = nullptr;       // the query node to rewrite
  Json* slot = nullptr;       // the table ref replaced by the temp table; null for the root
  Json* consumer = nullptr;   // the SELECT_NODE whose FROM is `slot`, if any
  std::string ref_alias;      // how the consumer names it
  std::string cte_name;       // set when `slot` references a CTE
  std::vector<CteEntry> scope;  // CTEs visible at the slot, outer first
};

// `in_from`: `j` is the FROM of `enclosing_select`, or reached from it through INNER joins
// only, so a filter in that SELECT's WHERE on `j`'s columns may be applied to `j` first.
void FindCandidates(Json& j, std::vector<CteEntry>& scope, Json* enclosing_select, bool in_from,
                    std::vector<Candidate>& out) {
  if (!j.is_structured()) return;
  size_t pushed = 0;
  if (j.is_object() && j.contains("cte_map") && j["cte_map"].contains("map")) {
    for (Json& e : j["cte_map"]["map"]) {
      scope.push_back({Lower(Str(e, "key")), &e});
      ++pushed;
    }
  }
  bool table_ref = j.is_object() && IsTableRef(j);
  if (table_ref) {
    std::string type = Str(j, "type");
    Json* consumer = in_from ? enclosing_select : nullptr;
    if (type == "SUBQUERY" && j.contains("subquery")) {
      out.push_back({&j["subquery"]["node"], &j, consumer, Str(j, "alias"), "", scope});
    } else if (type == "BASE_TABLE" && Str(j, "schema_name").empty() && Str(j, "catalog_name").empty()) {
      std::string name = Lower(Str(j, "table_name"));
      for (auto it = scope.rbegin(); it != scope.rend(); ++it) {
        if (it->name != name) continue;
        Json& value = (*it->entry)["value"];
        if (value.contains("aliases") && !value["aliases"].empty()) break;  // WITH r(a, b): not handled
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
    for (auto& [key, c] : j.items()) {
      bool child_in_from = (is_select && key == "from_table") || (in_from && inner_join && (key == "left" || key == "right"));
      FindCandidates(c, scope, select, child_in_from, out);
    }
  } else {
    for (Json& c : j) FindCandidates(c, scope, select, false, out);
  }
  scope.resize(scope.size() - pushed);
}

// The CTE definitions `node` needs (transitively), outer first; NotApplicable on a name
// defined twice in scope.
Result<Json> NeededCtes(const Json& node, const std::vector<CteEntry>& scope) {
  std::set<std::string> seen_names;
  for (const CteEntry& e : scope) {
    if (!seen_names.insert(e.name).second) return NotApplicable("CTE {} defined twice in scope", e.name);
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
    if (included.count(e.name) && &(*e.entry)["value"]["query"]["node"] != &node) map.push_back(*e.entry);
  }
  return map;
}

// `node` as a standalone query: the CTEs it needs from the enclosing scopes go into its own WITH.
Result<Json> Standalone(const Json& node, const std::vector<CteEntry>& scope) {
  ASSIGN_OR_RETURN(Json ctes, NeededCtes(node, scope));
  Json out = node;
  if (!out.contains("cte_map") || !out["cte_map"].contains("map")) out["cte_map"] = {{"map", Json::array()}};
  Json merged = ctes;
  for (const Json& e : out["cte_map"]["map"]) merged.push_back(e);
  out["cte_map"]["map"] = merged;
  return out;
}

// Column names the rest of the query may read from the rewritten node's output: every name
// part of every column reference outside it; nullopt means "all of them" (D6).
std::optional<std::set<std::string>> ReferencedNames(const Json& j, const Json* skip, const std::string& ref_alias) {
  std::set<std::string> names;
  bool all = false;
  auto visit = [&](auto&& self, const Json& v) -> void {
    if (&v == skip || all) return;
    if (v.is_object()) {
      std::string cls = Str(v, "class");
      if (cls == "STAR" || cls == "POSITIONAL_REFERENCE") all = true;
      if (cls == "COLUMN_REF" && v.contains("column_names")) {
        const Json& parts = v["column_names"];
        if (parts.size() == 1 && IEquals(parts[0].get<std::string>(), ref_alias)) all = true;  // the row as a struct
        for (const Json& p : parts) names.insert(Lower(p.get<std::string>()));
      }
      if (Str(v, "type") == "JOIN" && (Str(v, "ref_type") != "REGULAR" ||
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

// ---------------------------------------------------------------------------------------
// Types.

// Bytes a value of `type` takes in an aggregate's state (a rough figure for N, D7).
int64_t TypeWidth(const std::string& type) {
  std::string t = type;
  if (t == "BOOLEAN" || t == "TINYINT" || t == "UTINYINT") return 1;
  if (t == "SMALLINT" || t == "USMALLINT") return 2;
  if (t == "INTEGER" || t == "UINTEGER" || t == "DATE" || t == "FLOAT") return 4;
  if (t == "HUGEINT" || t == "UHUGEINT" || t == "UUID" || t == "INTERVAL") return 16;
  if (t.rfind("DECIMAL", 0) == 0) return 16;
  if (t == "VARCHAR" || t == "BLOB") return 32;
  if (t.find('[') != std::string::npos || t.rfind("STRUCT", 0) == 0 || t.rfind("MAP", 0) == 0) return 64;
  return 8;
}

// Types whose hash() agrees with GROUP BY / PARTITION BY equality (D5). VARCHAR only when no
// collation can apply (checked separately).
bool HashableKeyType(const std::string& t) {
  static const std::set<std::string, std::less<>> kTypes = {
      "BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
      "UBIGINT", "UHUGEINT", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_S", "TIMESTAMP_MS",
      "TIMESTAMP_NS", "VARCHAR", "BLOB", "UUID", "DOUBLE", "FLOAT"};
  return kTypes.count(t) > 0 || t.rfind("DECIMAL", 0) == 0;
}

// Collations make GROUP BY equal values whose hashes differ: a VARCHAR key is only used when
// no collation can apply (D5).
Status CheckNoCollation(duck::Connection& conn) {
  ASSIGN_OR_RETURN(auto rows, Ask(conn,
                                  "SELECT current_setting('default_collation'), "
                                  "(SELECT count(*) FROM duckdb_tables() WHERE sql ILIKE '%COLLATE%')",
                                  "collation check"));
  if (rows.size() != 1 || !rows[0][0] || !rows[0][1]) return NotApplicable("collation check returned nothing");
  if (!rows[0][0]->empty() || *rows[0][1] != "0") return NotApplicable("a collation may apply to a VARCHAR key");
  return Status::OK();
}

Status CheckKeyTypes(duck::Connection& conn, const std::vector<Column>& keys) {
  bool varchar = false;
  for (const Column& k : keys) {
    if (!HashableKeyType(k.type)) return NotApplicable("key type {} not partitionable by hash()", k.type);
    varchar |= k.type == "VARCHAR";
  }
  if (varchar) RETURN_IF_ERROR(CheckNoCollation(conn));
  return Status::OK();
}

// An ORDER BY key's value as an integer that orders the same (D8), or "" when the type has
// none. `e` names the column.
std::string OrdinalExpr(const std::string& type, const std::string& e) {
  if (type == "BOOLEAN" || type == "TINYINT" || type == "SMALLINT" || type == "INTEGER" || type == "BIGINT" ||
      type == "UTINYINT" || type == "USMALLINT" || type == "UINTEGER") {
    return fmt::format("{}::BIGINT", e);
  }
  if (type == "DATE") return fmt::format("({} - DATE '1970-01-01')::BIGINT", e);
  if (type == "TIMESTAMP" || type == "TIMESTAMP WITH TIME ZONE" || type == "TIMESTAMP_S" || type == "TIMESTAMP_MS") {
    return fmt::format("epoch_us({})", e);
  }
  if (type == "TIMESTAMP_NS") return fmt::format("epoch_ns({})", e);
  return "";
}

// ---------------------------------------------------------------------------------------
// Expressions.

bool IsIntConstant(const Json& e, int64_t v) {
  if (Str(e, "class") != "CONSTANT" || !e.contains("value")) return false;
  const Json& val = e["value"];
  if (val.value("is_null", true)) return false;
  std::string id = val.contains("type") ? Str(val["type"], "id") : "";
  static const std::set<std::string, std::less<>> kInts = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
                                                           "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"};
  if (!kInts.count(id)) return false;
  return val.contains("value") && val["value"].is_number_integer() && val["value"].get<int64_t>() == v;
}

// `e` is "the row number is 1": = 1, <= 1, < 2, either way round (D2). `is_ref` says
// whether an operand is the row number.
template <typename IsRef>
bool IsFirstRowFilter(const Json& e, const IsRef& is_ref) {
  if (Str(e, "class") != "COMPARISON") return false;
  const Json& l = e["left"];
  const Json& r = e["right"];
  std::string t = Str(e, "type");
  if (t == "COMPARE_EQUAL") return (is_ref(l) && IsIntConstant(r, 1)) || (is_ref(r) && IsIntConstant(l, 1));
  if (t == "COMPARE_LESSTHANOREQUALTO") return is_ref(l) && IsIntConstant(r, 1);
  if (t == "COMPARE_GREATERTHANOREQUALTO") return is_ref(r) && IsIntConstant(l, 1);
  if (t == "COMPARE_LESSTHAN") return is_ref(l) && IsIntConstant(r, 2);
  if (t == "COMPARE_GREATERTHAN") return is_ref(r) && IsIntConstant(l, 2);
  return false;
}

std::vector<const Json*> Conjuncts(const Json& e) {
  if (e.is_null()) return {};
  if (Str(e, "class") == "CONJUNCTION" && Str(e, "type") == "CONJUNCTION_AND") {
    std::vector<const Json*> out;
    for (const Json& c : e["children"]) {
      auto sub = Conjuncts(c);
      out.insert(out.end(), sub.begin(), sub.end());
    }
    return out;
  }
  return {&e};
}

// The fewest hash bits that break ties in a packed key (D3): two tied rows that differ in the
// kept columns collide with probability 2^-48.
constexpr int kMinTieHashBits = 48;

std::string Quote(std::string_view name) { return duck::QuoteIdentifier(name); }

std::string TempTableName() {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("__sluice_rewrite_{}_{}", static_cast<long>(getpid()), counter.fetch_add(1));
}

// The session's defaults for ORDER BY without ASC/DESC or NULLS FIRST/LAST (D9).
struct OrderDefaults {
  bool descending = false;
  std::string null_order = "NULLS_LAST";
};

Result<OrderDefaults> LoadOrderDefaults(duck::Connection& conn) {
  ASSIGN_OR_RETURN(auto rows, Ask(conn, "SELECT upper(current_setting('default_order')), "
                                        "upper(current_setting('default_null_order'))", "order settings"));
  if (rows.size() != 1 || !rows[0][0] || !rows[0][1]) return NotApplicable("order settings returned nothing");
  OrderDefaults d;
  d.descending = rows[0][0]->rfind("DESC", 0) == 0;
  d.null_order = *rows[0][1];
  std::replace(d.null_order.begin(), d.null_order.end(), ' ', '_');
  return d;
}

struct OrderKey {
  bool descending = false;
  bool nulls_first = false;
};

Result<OrderKey> ResolveOrder(const Json& order, const OrderDefaults& d) {
  OrderKey k;
  std::string type = Str(order, "type");
  if (type == "ASCENDING") k.descending = false;
  else if (type == "DESCENDING") k.descending = true;
  else if (type == "ORDER_DEFAULT") k.descending = d.descending;
  else return NotApplicable("order type {}", type);
  std::string nulls = Str(order, "null_order");
  std::replace(nulls.begin(), nulls.end(), ' ', '_');
  if (nulls == "ORDER_DEFAULT") nulls = d.null_order;
  if (nulls == "NULLS_FIRST") k.nulls_first = true;
  else if (nulls == "NULLS_LAST") k.nulls_first = false;
  else if (nulls == "NULLS_FIRST_ON_ASC_LAST_ON_DESC") k.nulls_first = !k.descending;
  else if (nulls == "NULLS_LAST_ON_ASC_FIRST_ON_DESC") k.nulls_first = k.descending;
  else return NotApplicable("null order {}", nulls);
  return k;
}

// ---------------------------------------------------------------------------------------
// Packed ordering keys (D8, D14).

// An ordinal (OrdinalExpr) back as a value of `type`, or "" when the type has no exact way back.
std::string DecodeOrdinal(const std::string& type, const std::string& e) {
  if (type == "BOOLEAN" || type == "TINYINT" || type == "SMALLINT" || type == "INTEGER" || type == "BIGINT" ||
      type == "UTINYINT" || type == "USMALLINT" || type == "UINTEGER") {
    return fmt::format("CAST(CAST({} AS BIGINT) AS {})", e, type);
  }
  if (type == "DATE") return fmt::format("CAST(DATE '1970-01-01' + CAST({} AS INTEGER) AS DATE)", e);
  if (type == "TIMESTAMP") return fmt::format("make_timestamp(CAST({} AS BIGINT))", e);
  if (type == "TIMESTAMP_S" || type == "TIMESTAMP_MS") {
    return fmt::format("CAST(make_timestamp(CAST({} AS BIGINT)) AS {})", e, type);
  }
  if (type == "TIMESTAMP WITH TIME ZONE") {
    return fmt::format("(TIMESTAMPTZ '1970-01-01 00:00:00+00' + to_microseconds(CAST({} AS BIGINT)))", e);
  }
  return "";
}

// A DOUBLE tie-breaking column is packed as its value in hundredths (money, two decimals)
// when that is exact. One scale: each costs a third of the statistics scan's time.
constexpr const char* kDoubleScale = "100";

// One field of a packed key: a non-negative code below 2^width, placed at `shift`. The key
// is computed only where every field's guard holds (one CASE per row, not one per field:
// the guards are what catch an input that changed after the statistics scan).
struct PackedField {
  std::string guard;  // SQL over the part's input: the value lies within the scanned bounds
  std::string code;   // SQL: the code, BIGINT arithmetic when width <= 63
  int width = 0;
  int shift = 0;
  // The column's value from its code (SQL over the code); empty when it has no way back.
  std::function<std::string(const std::string& code)> decode;
};

// A field of codes 0..hi-lo (+1 for NULL) ordering as the ordinal `ord` of column `col`
// does, descending or not, NULLs first or last.
PackedField OrdinalField(const std::string& col, const std::string& ord, const std::string& type, __int128 lo,
                         __int128 hi, bool has_null, bool descending, bool nulls_first) {
  __int128 range = hi - lo;
  __int128 max_code = range + (has_null ? 1 : 0);
  PackedField f;
  while (f.width < 127 && (static_cast<__int128>(1) << f.width) <= max_code) ++f.width;
  std::string wide = f.width > 63 ? "::HUGEINT" : "";
  std::string value = descending ? fmt::format("({}{} - {})", Int128ToString(hi), wide, ord)
                                 : fmt::format("({}{} - {})", ord, wide, Int128ToString(lo));
  bool shifted = has_null && nulls_first;
  std::string in_bounds = fmt::format("{} BETWEEN {} AND {}", ord, Int128ToString(lo), Int128ToString(hi));
  f.guard = has_null ? fmt::format("({} IS NULL OR {})", col, in_bounds) : in_bounds;
  f.code = !has_null   ? value
           : shifted ? fmt::format("coalesce({} + 1, 0)", value)
                     : fmt::format("coalesce({}, {})", value, Int128ToString(range + 1));
  if (DecodeOrdinal(type, "0").empty()) return f;
  f.decode = [=](const std::string& code) {
    std::string c = shifted ? fmt::format("({} - 1)", code) : code;
    std::string v = DecodeOrdinal(type, descending ? fmt::format("({} - {})", Int128ToString(hi), c)
                                                   : fmt::format("({} + {})", Int128ToString(lo), c));
    if (!has_null) return v;
    return fmt::format("CASE WHEN {} = {} THEN NULL ELSE {} END", code, nulls_first ? "0" : Int128ToString(range + 1), v);
  };
  return f;
}

// A field for a column that is NULL in every row: width 0, decoded as NULL.
PackedField AllNullField(const std::string& col, const std::string& type) {
  PackedField f;
  f.guard = fmt::format("{} IS NULL", col);
  f.code = "0";
  f.decode = [type](const std::string&) { return fmt::format("CAST(NULL AS {})", type); };
  return f;
}

std::optional<int64_t> IntegralDouble(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || !std::isfinite(d) || d != std::floor(d) || std::fabs(d) >= 9007199254740992.0) {
    return std::nullopt;
  }
  return static_cast<int64_t>(d);
}

// A tie-breaking column packed exactly (D14), from its statistics starting at `at`, or
// nullopt. Integer-like columns by their ordinal; a DOUBLE by its value in hundredths when
// every value comes back exactly from that integer (and none is -0.0, NaN or infinite).
std::optional<PackedField> ExactField(const Column& col, const std::vector<std::optional<std::string>>& s, size_t at,
                                      int64_t rows) {
  std::string q = Quote(col.name);
  if (col.type != "DOUBLE") {
    if (!s[at + 2] || !s[at + 3]) return std::nullopt;
    int64_t non_null = std::atoll(s[at + 2]->c_str());
    if (non_null == 0) return AllNullField(q, col.type);
    if (non_null != std::atoll(s[at + 3]->c_str()) || !s[at] || !s[at + 1]) return std::nullopt;
    return OrdinalField(q, OrdinalExpr(col.type, q), col.type, std::atoll(s[at]->c_str()), std::atoll(s[at + 1]->c_str()),
                        non_null < rows, false, false);
  }
  if (!s[at]) return std::nullopt;
  int64_t non_null = std::atoll(s[at]->c_str());
  if (non_null == 0) return AllNullField(q, col.type);
  if (s[at + 1] && std::strtod(s[at + 1]->c_str(), nullptr) < 0) return std::nullopt;  // -0.0 would come back as 0.0
  std::optional<int64_t> lo = IntegralDouble(s[at + 2]);
  std::optional<int64_t> hi = IntegralDouble(s[at + 3]);
  if (!lo || !hi || !s[at + 4] || std::atoll(s[at + 4]->c_str()) != non_null) return std::nullopt;
  std::string p = kDoubleScale;
  std::string scaled = fmt::format("round({} * {})", q, p);
  bool has_null = non_null < rows;
  PackedField f;
  __int128 range = static_cast<__int128>(*hi) - *lo;
  while ((static_cast<__int128>(1) << f.width) <= range + (has_null ? 1 : 0)) ++f.width;
  std::string exact =
      fmt::format("{1} BETWEEN {2} AND {3} AND {1} / {4} = {0} AND ({0} <> 0 OR atan2({0}, -1) > 0)", q, scaled, *lo, *hi, p);
  f.guard = has_null ? fmt::format("({} IS NULL OR ({}))", q, exact) : fmt::format("({})", exact);
  std::string value = fmt::format("(CAST({} AS BIGINT) - {})", scaled, *lo);
  f.code = has_null ? fmt::format("coalesce({}, {})", value, Int128ToString(range + 1)) : value;
  int64_t low = *lo;
  f.decode = [=](const std::string& code) {
    std::string v = fmt::format("(CAST({} + {} AS DOUBLE) / {})", low, code, p);
    if (!has_null) return v;
    return fmt::format("CASE WHEN {} = {} THEN NULL ELSE {} END", code, Int128ToString(range + 1), v);
  };
  return f;
}

// The key over packed fields (most significant first) and `hash_bits` low bits of `hash`:
// fields are summed in BIGINT words of up to 63 bits, the words joined in one HUGEINT (a
// BIGINT key when all fit in 63 bits), and the sum is taken only where every guard holds.
// Sets each field's shift.
std::string PackedKey(std::vector<PackedField*>& fields, const std::string& hash, int hash_bits,
                      const std::string& changed) {
  PackedField hash_field;
  if (hash_bits > 0) {
    hash_field.code = fmt::format("({} >> {})::BIGINT", hash, 64 - hash_bits);
    hash_field.width = hash_bits;
  }
  std::vector<PackedField*> all = fields;
  if (hash_bits > 0) all.push_back(&hash_field);
  int total = 0;
  for (PackedField* f : all) total += f->width;
  int shift = total;
  for (PackedField* f : all) {
    shift -= f->width;
    f->shift = shift;
  }
  // Words: runs of fields of up to 63 bits together, each a BIGINT sum.
  struct Word {
    std::vector<PackedField*> fields;
    int bits = 0;
    int shift = 0;  // of its least significant field
  };
  std::vector<Word> words;
  for (PackedField* f : all) {
    if (f->width == 0) continue;
    if (words.empty() || words.back().bits + f->width > 63 || f->width > 63 || words.back().bits > 63) {
      words.push_back({});
    }
    words.back().fields.push_back(f);
    words.back().bits += f->width;
    words.back().shift = f->shift;
  }
  std::vector<std::string> word_sql;
  for (const Word& w : words) {
    std::vector<std::string> terms;
    for (PackedField* f : w.fields) {
      int s = f->shift - w.shift;
      terms.push_back(s == 0 ? f->code : fmt::format("{} * {}", f->code, Int128ToString(static_cast<__int128>(1) << s)));
    }
    word_sql.push_back(fmt::format("({})", fmt::join(terms, " + ")));
  }
  std::string key;
  if (word_sql.empty()) {
    key = "0::BIGINT";
  } else if (total <= 63) {
    key = fmt::format("{}::BIGINT", word_sql[0]);
  } else {
    std::vector<std::string> terms;
    for (size_t i = 0; i < words.size(); ++i) {
      terms.push_back(words[i].shift == 0 ? fmt::format("{}::HUGEINT", word_sql[i])
                                          : fmt::format("{}::HUGEINT * {}::HUGEINT", word_sql[i],
                                                        Int128ToString(static_cast<__int128>(1) << words[i].shift)));
    }
    key = fmt::format("{}", fmt::join(terms, " + "));
  }
  std::vector<std::string> guards;
  for (PackedField* f : fields) {
    if (!f->guard.empty()) guards.push_back(f->guard);
  }
  if (guards.empty()) return key;
  return fmt::format("CASE WHEN {} THEN {} ELSE {} END", fmt::join(guards, " AND "), key, changed);
}

// ---------------------------------------------------------------------------------------
// The planner.

class Planner {
 public:
  Planner(duck::Connection& conn, const RewriteOptions& options) : conn_(conn), options_(options) {}

  Result<Plan> Run(std::string_view sql) {
    if (options_.memory_limit_bytes <= 0) return NotApplicable("no memory limit given");
    ASSIGN_OR_RETURN(root_doc_, Parse(conn_, sql));
    Json& root = root_doc_["statements"][0]["node"];
    std::vector<Candidate> candidates;
    candidates.push_back({&root, nullptr, nullptr, "", "", {}});
    std::vector<CteEntry> scope;
    FindCandidates(root, scope, nullptr, false, candidates);
    Status last = NotApplicable("no latest-row or group-by shape");
    for (Candidate& c : candidates) {
      if (Str(*c.node, "type") != "SELECT_NODE") continue;
      auto plan = TryLatestRow(c);
      if (plan.ok()) return plan;
      if (plan.status().code() != StatusCode::kUnimplemented) return plan.status();
      if (IsLatestRowShape(c)) last = plan.status();
      auto g = TryGroupBy(c);
      if (g.ok()) return g;
      if (g.status().code() != StatusCode::kUnimplemented) return g.status();
      if (c.node->contains("group_expressions") && !(*c.node)["group_expressions"].empty()) last = g.status();
    }
    return last;
  }

 private:
  // ---- latest row per key

  // The ROW_NUMBER of a latest-row node: its select item (with an alias) or its QUALIFY.
  struct WindowMatch {
    const Json* window = nullptr;
    int item = -1;  // index in the select list, -1 when only in QUALIFY
    std::string alias;
  };

  static bool IsRowNumber(const Json& e) { return Str(e, "class") == "WINDOW" && Str(e, "type") == "WINDOW_ROW_NUMBER"; }

  bool IsLatestRowShape(const Candidate& c) const {
    const Json& n = *c.node;
    if (!n.contains("select_list")) return false;
    for (const Json& item : n["select_list"]) {
      if (IsRowNumber(item)) return true;
    }
    return n.contains("qualify") && !n["qualify"].is_null();
  }

  Result<WindowMatch> MatchWindow(const Candidate& c) const {
    const Json& n = *c.node;
    WindowMatch m;
    const Json& items = n["select_list"];
    for (size_t i = 0; i < items.size(); ++i) {
      if (IsRowNumber(items[i])) {
        if (m.window) return NotApplicable("two ROW_NUMBER columns");
        m.window = &items[i];
        m.item = static_cast<int>(i);
        m.alias = Str(items[i], "alias");
        if (m.alias.empty()) return NotApplicable("ROW_NUMBER without an alias");
      }
    }
    // The "= 1" filter: in QUALIFY, or in the consumer's WHERE.
    bool filtered = false;
    if (!IsNullOrMissing(n, "qualify")) {
      const Json& q = n["qualify"];
      bool ok = IsFirstRowFilter(q, [&](const Json& e) {
        if (IsRowNumber(e) && !m.window) {
          m.window = &e;
          return true;
        }
        if (IsRowNumber(e) && m.window == &e) return true;
        if (Str(e, "class") == "COLUMN_REF" && !m.alias.empty() && e["column_names"].size() == 1 &&
            IEquals(e["column_names"][0].get<std::string>(), m.alias)) {
          return true;
        }
        return false;
      });
      if (!ok) return NotApplicable("QUALIFY other than the row number = 1");
      filtered = true;
    }
    if (!m.window) return NotApplicable("no ROW_NUMBER");
    if (!filtered && c.consumer && !IsNullOrMissing(*c.consumer, "where_clause")) {
      for (const Json* conj : Conjuncts((*c.consumer)["where_clause"])) {
        if (IsFirstRowFilter(*conj, [&](const Json& e) {
              if (Str(e, "class") != "COLUMN_REF") return false;
              const Json& parts = e["column_names"];
              if (parts.empty() || !IEquals(parts.back().get<std::string>(), m.alias)) return false;
              return parts.size() == 1 || (parts.size() == 2 && IEquals(parts[0].get<std::string>(), c.ref_alias));
            })) {
          filtered = true;
        }
      }
    }
    if (!filtered) return NotApplicable("no row number = 1 filter");
    const Json& w = *m.window;
    if (!w["children"].empty() || w.value("ignore_nulls", false) || !IsNullOrMissing(w, "filter_expr") ||
        w.value("distinct", false) || (w.contains("arg_orders") && !w["arg_orders"].empty())) {
      return NotApplicable("ROW_NUMBER with arguments, FILTER, DISTINCT or IGNORE NULLS");
    }
    if (w["partitions"].empty()) return NotApplicable("ROW_NUMBER without PARTITION BY");
    return m;
  }

  Result<Plan> TryLatestRow(Candidate& c) {
    Json& n = *c.node;
    if (!n.contains("select_list")) return NotApplicable("not a SELECT");
    ASSIGN_OR_RETURN(WindowMatch m, MatchWindow(c));
    if (!n["modifiers"].empty()) return NotApplicable("ORDER BY, LIMIT or DISTINCT on the window query");
    if (!n["group_expressions"].empty() || !IsNullOrMissing(n, "having") ||
        Str(n, "aggregate_handling") != "STANDARD_HANDLING") {
      return NotApplicable("GROUP BY or HAVING on the window query");
    }
    RETURN_IF_ERROR(LoadCatalogueOnce());
    // No aggregate at the window query's own level (it would make one row of everything).
    Status own_ok;
    ForEachOwnExpression(n["select_list"], [&](const Json& e) {
      if (Str(e, "class") == "FUNCTION" && cat_[Lower(Str(e, "function_name"))].aggregate) {
        own_ok = NotApplicable("an aggregate beside ROW_NUMBER");
      }
    });
    RETURN_IF_ERROR(own_ok);
    DeterminismCheck check{cat_, c.node, false, m.window};
    RETURN_IF_ERROR(check.Visit(n, nullptr));
    ASSIGN_OR_RETURN(OrderDefaults defaults, LoadOrderDefaults(conn_));

    const Json& w = *m.window;
    size_t nkeys = w["partitions"].size();
    size_t norders = w["orders"].size();
    std::vector<OrderKey> orders;
    for (const Json& o : w["orders"]) {
      ASSIGN_OR_RETURN(OrderKey k, ResolveOrder(o, defaults));
      orders.push_back(k);
    }

    // The input: the window query's columns (ROW_NUMBER as the constant 1), its partition
    // keys and its order keys, from its FROM and WHERE.
    Json input = n;
    input["qualify"] = nullptr;
    Json items = Json::array();
    for (size_t i = 0; i < n["select_list"].size(); ++i) {
      if (static_cast<int>(i) == m.item) {
        ASSIGN_OR_RETURN(Json one, ParseExpr(conn_, "1::BIGINT"));
        one["alias"] = m.alias;
        items.push_back(one);
      } else {
        items.push_back(n["select_list"][i]);
      }
    }
    for (size_t i = 0; i < nkeys; ++i) {
      Json k = w["partitions"][i];
      k["alias"] = fmt::format("__sluice_k{}", i);
      items.push_back(k);
    }
    for (size_t j = 0; j < norders; ++j) {
      Json o = w["orders"][j]["expression"];
      o["alias"] = fmt::format("__sluice_o{}", j);
      items.push_back(o);
    }
    input["select_list"] = items;
    ASSIGN_OR_RETURN(Json standalone, Standalone(input, c.scope));
    ASSIGN_OR_RETURN(std::string input_sql, Render(conn_, standalone));
    ASSIGN_OR_RETURN(std::vector<Column> cols, Describe(conn_, input_sql));
    if (cols.size() < nkeys + norders) return NotApplicable("DESCRIBE returned too few columns");
    std::vector<Column> out_cols(cols.begin(), cols.end() - static_cast<long>(nkeys + norders));
    std::vector<Column> key_cols(cols.end() - static_cast<long>(nkeys + norders), cols.end() - static_cast<long>(norders));
    std::vector<Column> order_cols(cols.end() - static_cast<long>(norders), cols.end());
    std::set<std::string> seen;
    for (const Column& col : out_cols) {
      if (!seen.insert(Lower(col.name)).second) return NotApplicable("duplicate output column {}", col.name);
      if (Lower(col.name).rfind("__sluice_", 0) == 0) return NotApplicable("a column named {}", col.name);
    }
    RETURN_IF_ERROR(CheckKeyTypes(conn_, key_cols));

    ASSIGN_OR_RETURN(int64_t est_rows, EstimateRows(conn_, input_sql));
    est_rows = std::max(est_rows, options_.known_input_rows);
    if (est_rows < options_.min_rows_to_rewrite) return NotApplicable("estimated {} rows: too few to rewrite", est_rows);

    // Which output columns the rest of the query reads (D6), and which of those equal a key
    // (and so are equal across full ties: D3).
    std::optional<std::set<std::string>> referenced;
    bool has_col_aliases = c.slot && c.slot->contains("column_name_alias") && !(*c.slot)["column_name_alias"].empty();
    if (c.slot && !has_col_aliases) referenced = ReferencedNames(root_doc_, c.cte_name.empty() ? c.slot : c.node, c.ref_alias);
    // A plain `*` or `t.*` passes its columns under their own names.
    bool plain_star = false;
    std::string star_relation;  // "t" for `t.*`
    for (const Json& item : n["select_list"]) {
      if (Str(item, "class") == "STAR" && !item.value("columns", false) && item["exclude_list"].empty() &&
          item["replace_list"].empty() && (!item.contains("rename_list") || item["rename_list"].empty()) &&
          IsNullOrMissing(item, "expr")) {
        plain_star = true;
        star_relation = Lower(Str(item, "relation_name"));
      }
    }
    // Kept columns that are a partition key (read from the GROUP BY) or an order key (decoded
    // from the packed key) are equal across full ties (D3, D14). Only the very column counts:
    // `SELECT b.ts ... ORDER BY a.ts` is no match.
    auto output_name = [&](const Json& e) -> std::optional<std::string> {
      if (Str(e, "class") != "COLUMN_REF") return std::nullopt;
      const Json& parts = e["column_names"];
      std::string name = Lower(parts.back().get<std::string>());
      for (const Json& item : n["select_list"]) {
        if (Str(item, "class") != "COLUMN_REF") continue;
        const Json& ip = item["column_names"];
        if (Lower(ip.back().get<std::string>()) != name) continue;
        if (!Str(item, "alias").empty() && !IEquals(Str(item, "alias"), name)) continue;
        if (parts.size() == 1 || ip.size() == 1) return name;
        if (parts.size() != ip.size()) return std::nullopt;
        for (size_t i = 0; i < parts.size(); ++i) {
          if (!IEquals(parts[i].get<std::string>(), ip[i].get<std::string>())) return std::nullopt;
        }
        return name;
      }
      if (plain_star && (star_relation.empty() || parts.size() == 1 ||
                         (parts.size() == 2 && Lower(parts[0].get<std::string>()) == star_relation))) {
        return name;
      }
      return std::nullopt;
    };
    std::map<std::string, size_t> partition_of;  // output column -> partition key index
    std::map<std::string, size_t> order_of;      // output column -> order key index
    for (size_t i = 0; i < nkeys; ++i) {
      if (auto name = output_name(w["partitions"][i])) partition_of.emplace(*name, i);
    }
    for (size_t j = 0; j < norders; ++j) {
      if (auto name = output_name(w["orders"][j]["expression"])) order_of.emplace(*name, j);
    }

    std::vector<Column> kept;      // carried through the aggregate
    std::vector<Column> tiebreak;  // kept columns that may differ across full ties
    for (const Column& col : out_cols) {
      if (IEquals(col.name, m.alias)) continue;  // the constant 1
      if (referenced && !referenced->count(Lower(col.name))) continue;
      kept.push_back(col);
      if (!partition_of.count(Lower(col.name)) && !order_of.count(Lower(col.name))) tiebreak.push_back(col);
    }

    // One statistics scan: rows, distinct keys, each order key's bounds, and the bounds of
    // the tie-breaking columns that could be packed exactly (D14).
    std::vector<std::string> keys;
    for (size_t i = 0; i < nkeys; ++i) keys.push_back(fmt::format("__sluice_k{}", i));
    std::string key_list = fmt::format("{}", fmt::join(keys, ", "));
    std::vector<std::string> ordinals;
    bool packable = norders > 0;
    for (size_t j = 0; j < norders; ++j) {
      ordinals.push_back(OrdinalExpr(order_cols[j].type, fmt::format("__sluice_o{}", j)));
      packable &= !ordinals.back().empty();
    }
    std::vector<std::string> stat_exprs = {"count(*)", DistinctKeysExpr(key_list, est_rows)};
    std::vector<size_t> order_at;  // where order key j's four statistics start
    if (packable) {
      for (size_t j = 0; j < norders; ++j) {
        order_at.push_back(stat_exprs.size());
        for (const char* f : {"min({0})", "max({0})", "count(__sluice_o{1})", "count({0})"}) {
          stat_exprs.push_back(fmt::format(fmt::runtime(f), ordinals[j], j));
        }
      }
    }
    // Tie-breaking columns: integer-like ones by their ordinal, DOUBLEs by their value scaled
    // to 2 or 4 decimals when every value survives that exactly.
    std::vector<size_t> exact_at(tiebreak.size(), 0);  // 0: not a candidate
    for (size_t t = 0; packable && t < tiebreak.size(); ++t) {
      const Column& col = tiebreak[t];
      std::string q = Quote(col.name);
      std::string ord = OrdinalExpr(col.type, q);
      if (!ord.empty() && !DecodeOrdinal(col.type, "0").empty()) {
        exact_at[t] = stat_exprs.size();
        for (const char* f : {"min({0})", "max({0})", "count({1})", "count({0})"}) {
          stat_exprs.push_back(fmt::format(fmt::runtime(f), ord, q));
        }
      } else if (col.type == "DOUBLE") {
        exact_at[t] = stat_exprs.size();
        stat_exprs.push_back(fmt::format("count({})", q));
        // atan2(-0.0, -1) is -pi: a negative minimum says some zero is -0.0.
        stat_exprs.push_back(fmt::format("min(CASE WHEN {0} = 0 THEN atan2({0}, -1) END)", q));
        std::string scaled = fmt::format("round({} * {})", q, kDoubleScale);
        stat_exprs.push_back(fmt::format("min({})", scaled));
        stat_exprs.push_back(fmt::format("max({})", scaled));
        stat_exprs.push_back(fmt::format("count(*) FILTER (WHERE {} / {} = {})", scaled, kDoubleScale, q));
      }
    }
    std::string stats_sql =
        fmt::format("SELECT {} FROM ({}) AS __sluice_in", fmt::join(stat_exprs, ", "), input_sql);
    ASSIGN_OR_RETURN(auto stats, Ask(conn_, stats_sql, "statistics scan"));
    if (stats.size() != 1 || !stats[0][0] || !stats[0][1]) return NotApplicable("statistics scan returned nothing");
    const auto& s = stats[0];
    int64_t rows = std::atoll(s[0]->c_str());
    int64_t groups = std::atoll(s[1]->c_str());

    // The ordering key (D8): the order keys packed into one HUGEINT when their ranges fit in
    // 126 bits, then the tie-breaking columns packed exactly (D14) or a hash of them (D3);
    // else DuckDB's create_sort_key.
    constexpr const char* kChanged = "error('sluice rewrite: the input changed between the statistics scan and a part')";
    std::vector<PackedField> order_fields;
    for (size_t j = 0; j < norders && packable; ++j) {
      size_t at = order_at[j];
      std::string o = fmt::format("__sluice_o{}", j);
      if (!s[at] || !s[at + 1] || !s[at + 2] || !s[at + 3]) {  // all NULL: one code
        order_fields.push_back(AllNullField(o, order_cols[j].type));
        continue;
      }
      if (*s[at + 2] != *s[at + 3]) {  // values without an ordinal (infinite timestamps)
        packable = false;
        break;
      }
      __int128 lo = std::atoll(s[at]->c_str());
      __int128 hi = std::atoll(s[at + 1]->c_str());
      bool has_null = std::atoll(s[at + 2]->c_str()) < rows;
      order_fields.push_back(
          OrdinalField(o, ordinals[j], order_cols[j].type, lo, hi, has_null, orders[j].descending, orders[j].nulls_first));
    }
    int order_bits = 0;
    for (const PackedField& f : order_fields) order_bits += f.width;
    std::vector<std::optional<PackedField>> candidates(tiebreak.size());
    int candidate_bits = 0;
    bool all_exact = true;
    for (size_t t = 0; t < tiebreak.size(); ++t) {
      if (packable && exact_at[t] != 0) candidates[t] = ExactField(tiebreak[t], s, exact_at[t], rows);
      all_exact &= candidates[t].has_value();
      candidate_bits += candidates[t] ? candidates[t]->width : 0;
    }
    // Every tie-breaking column exact when they all fit; else, in column order, those that
    // fit beside the order keys and a hash of the rest.
    int budget = all_exact && order_bits + candidate_bits <= 126 ? 126 : 126 - kMinTieHashBits;
    std::vector<PackedField> exact_fields;  // per tie-breaking column packed exactly
    std::vector<size_t> exact_cols;         // their indexes in `tiebreak`
    std::vector<Column> hashed;             // the tie-breaking columns not packed exactly
    int exact_bits = 0;
    for (size_t t = 0; t < tiebreak.size(); ++t) {
      if (candidates[t] && order_bits + exact_bits + candidates[t]->width <= budget) {
        exact_bits += candidates[t]->width;
        exact_fields.push_back(std::move(*candidates[t]));
        exact_cols.push_back(t);
      } else {
        hashed.push_back(tiebreak[t]);
      }
    }
    int hash_bits = hashed.empty() ? 0 : std::min(63, 126 - order_bits - exact_bits);
    packable &= order_bits + exact_bits <= 126 && (hashed.empty() || hash_bits >= kMinTieHashBits);

    std::string key_expr;
    // How each kept column comes out of a part's aggregate: from the GROUP BY, decoded from
    // min(key), or by arg_min_null over the key.
    std::vector<std::string> extract(kept.size());
    std::vector<std::string> aggs;
    bool sort_key = !packable;
    if (packable) {
      std::vector<PackedField*> fields;
      for (PackedField& f : order_fields) fields.push_back(&f);
      for (PackedField& f : exact_fields) fields.push_back(&f);
      std::vector<std::string> tb;
      for (const Column& col : hashed) tb.push_back(Quote(col.name));
      key_expr = PackedKey(fields, fmt::format("hash({})", fmt::join(tb, ", ")), hash_bits, kChanged);
      bool uses_min = false;
      auto from_key = [&](const PackedField& f) {
        uses_min = true;
        // Shift and mask: HUGEINT division is a bit-serial loop in DuckDB, ~30 times slower.
        std::string mask = Int128ToString((static_cast<__int128>(1) << f.width) - 1);
        std::string code = f.width == 0   ? "0"
                           : f.shift == 0 ? fmt::format("(__sluice_m & {})", mask)
                                          : fmt::format("((__sluice_m >> {}) & {})", f.shift, mask);
        return f.decode(code);
      };
      for (size_t i = 0; i < kept.size(); ++i) {
        std::string l = Lower(kept[i].name);
        if (auto it = partition_of.find(l); it != partition_of.end()) {
          extract[i] = fmt::format("__sluice_k{}", it->second);
        } else if (auto ot = order_of.find(l); ot != order_of.end() && order_fields[ot->second].decode) {
          extract[i] = from_key(order_fields[ot->second]);
        } else if (auto et = std::find_if(exact_cols.begin(), exact_cols.end(),
                                          [&](size_t t) { return IEquals(tiebreak[t].name, kept[i].name); });
                   et != exact_cols.end()) {
          extract[i] = from_key(exact_fields[static_cast<size_t>(et - exact_cols.begin())]);
        } else {
          aggs.push_back(fmt::format("arg_min_null({}, __sluice_key) AS __sluice_r{}", Quote(kept[i].name), i));
          extract[i] = fmt::format("__sluice_r{}", i);
        }
      }
      if (uses_min) aggs.push_back("min(__sluice_key) AS __sluice_m");
    } else {
      // create_sort_key over the order keys, then the kept columns that may differ across
      // full ties (ASC NULLS LAST): the least such row wins, for any N.
      std::vector<std::string> args;
      for (size_t j = 0; j < norders; ++j) {
        args.push_back(fmt::format("__sluice_o{}, '{} {}'", j, orders[j].descending ? "DESC" : "ASC",
                                   orders[j].nulls_first ? "NULLS FIRST" : "NULLS LAST"));
      }
      for (const Column& col : tiebreak) args.push_back(fmt::format("{}, 'ASC NULLS LAST'", Quote(col.name)));
      key_expr = args.empty() ? "0" : fmt::format("create_sort_key({})", fmt::join(args, ", "));
      // One arg_min_null of a struct of the columns not in the GROUP BY (one blob comparison
      // per row instead of one per column), or of the column itself when there is one.
      std::vector<size_t> carried;
      for (size_t i = 0; i < kept.size(); ++i) {
        if (auto it = partition_of.find(Lower(kept[i].name)); it != partition_of.end()) {
          extract[i] = fmt::format("__sluice_k{}", it->second);
        } else {
          carried.push_back(i);
        }
      }
      if (carried.size() == 1) {
        aggs.push_back(fmt::format("arg_min_null({}, __sluice_key) AS __sluice_r", Quote(kept[carried[0]].name)));
        extract[carried[0]] = "__sluice_r";
      } else if (!carried.empty()) {
        std::vector<std::string> fields;
        for (size_t i : carried) {
          fields.push_back(fmt::format("{0} := {0}", Quote(kept[i].name)));
          extract[i] = fmt::format("struct_extract(__sluice_r, {})", duck::QuoteLiteral(kept[i].name));
        }
        aggs.push_back(fmt::format("arg_min_null(struct_pack({}), __sluice_key) AS __sluice_r", fmt::join(fields, ", ")));
      }
    }
    if (aggs.empty()) aggs.push_back("count(*) AS __sluice_n");  // only the keys matter

    // N (D7): one part's groups must fit in part_memory_fraction of the memory limit.
    int64_t key_width = sort_key ? 48 : 16;
    int64_t per_group = 96;
    for (const Column& k : key_cols) per_group += 2 * TypeWidth(k.type);
    for (const std::string& a : aggs) {
      per_group += key_width + 8;
      if (a.rfind("arg_min_null(", 0) == 0) {
        for (const Column& col : kept) per_group += a.find(Quote(col.name)) != std::string::npos ? 2 * TypeWidth(col.type) : 0;
      }
    }
    int parts = PartsFor(groups, per_group);

    std::vector<std::string> select_cols;
    size_t kept_i = 0;
    for (const Column& col : out_cols) {
      if (IEquals(col.name, m.alias)) {
        select_cols.push_back(fmt::format("1::BIGINT AS {}", Quote(col.name)));
      } else if (kept_i < kept.size() && kept[kept_i].name == col.name) {
        select_cols.push_back(fmt::format("{} AS {}", extract[kept_i], Quote(col.name)));
        ++kept_i;
      }
    }
    if (select_cols.empty()) select_cols.push_back("1 AS __sluice_one");  // nothing read: only the row count
    auto part_sql = [&](int i) {
      std::string where = parts > 1 ? fmt::format(" WHERE hash({}) % {} = {}", key_list, parts, i) : "";
      return fmt::format(
          "SELECT {} FROM (SELECT {}, {} FROM (SELECT *, {} AS __sluice_key FROM ({}) AS __sluice_in{}) GROUP BY {}) "
          "AS __sluice_p",
          fmt::join(select_cols, ", "), key_list, fmt::join(aggs, ", "), key_expr, input_sql, where, key_list);
    };
    int decoded = 0;
    for (const std::string& e : extract) decoded += e.find("__sluice_m") != std::string::npos ? 1 : 0;
    std::string how = fmt::format(
        "latest row per key: {} rows (estimate {}), ~{} keys, {} B/key -> {} part(s); key {}; {} of {} kept "
        "column(s) decoded from the key; {}",
        rows, est_rows, groups, per_group, parts,
        sort_key ? "create_sort_key" : fmt::format("packed {} bits", order_bits + exact_bits + hash_bits), decoded,
        kept.size(),
        tiebreak.empty() ? "no kept column differs across full ties"
        : sort_key       ? "ties broken by the least kept columns"
        : hashed.empty() ? "ties broken by the least kept columns, packed exactly"
                         : fmt::format("ties broken by a {}-bit hash of {} kept column(s)", hash_bits, hashed.size()));
    return Finish(c, RewriteKind::kLatestRow, parts, part_sql, how);
  }

  // ---- group-by with very many groups

  Result<Plan> TryGroupBy(Candidate& c) {
    Json& n = *c.node;
    if (!n.contains("group_expressions") || n["group_expressions"].empty()) return NotApplicable("no GROUP BY");
    size_t ng = n["group_expressions"].size();
    if (n["group_sets"].size() != 1 || n["group_sets"][0].size() != ng) {
      return NotApplicable("GROUPING SETS, ROLLUP or CUBE");
    }
    if (Str(n, "aggregate_handling") != "STANDARD_HANDLING") return NotApplicable("GROUP BY ALL");
    if (!n["modifiers"].empty()) return NotApplicable("ORDER BY, LIMIT or DISTINCT on the group-by");
    if (!IsNullOrMissing(n, "qualify")) return NotApplicable("QUALIFY on the group-by");
    RETURN_IF_ERROR(LoadCatalogueOnce());
    DeterminismCheck check{cat_, c.node, true, nullptr};
    RETURN_IF_ERROR(check.Visit(n, nullptr));

    // The keys as expressions over the input (GROUP BY 2 is the second select item).
    std::vector<Json> keys;
    for (const Json& g : n["group_expressions"]) {
      if (Str(g, "class") == "CONSTANT") {
        const Json& v = g["value"];
        if (!v.contains("value") || !v["value"].is_number_integer()) return NotApplicable("GROUP BY a constant");
        int64_t pos = v["value"].get<int64_t>();
        if (pos < 1 || pos > static_cast<int64_t>(n["select_list"].size())) return NotApplicable("GROUP BY position");
        Json k = n["select_list"][pos - 1];
        k["alias"] = "";
        keys.push_back(k);
      } else {
        keys.push_back(g);
      }
    }
    int aggregates = 0;
    ForEachOwnExpression(n["select_list"], [&](const Json& e) {
      if (Str(e, "class") == "FUNCTION" && cat_[Lower(Str(e, "function_name"))].aggregate) ++aggregates;
    });
    if (aggregates == 0) aggregates = 1;

    Json key_node = n;
    key_node["group_expressions"] = Json::array();
    key_node["group_sets"] = Json::array();
    key_node["having"] = nullptr;
    Json items = Json::array();
    for (size_t i = 0; i < keys.size(); ++i) {
      Json k = keys[i];
      k["alias"] = fmt::format("__sluice_k{}", i);
      items.push_back(k);
    }
    key_node["select_list"] = items;
    ASSIGN_OR_RETURN(Json key_standalone, Standalone(key_node, c.scope));
    ASSIGN_OR_RETURN(std::string key_sql, Render(conn_, key_standalone));
    ASSIGN_OR_RETURN(std::vector<Column> key_cols, Describe(conn_, key_sql));
    RETURN_IF_ERROR(CheckKeyTypes(conn_, key_cols));
    std::vector<std::string> key_names;
    for (size_t i = 0; i < keys.size(); ++i) key_names.push_back(fmt::format("__sluice_k{}", i));
    std::string key_list = fmt::format("{}", fmt::join(key_names, ", "));
    // One EXPLAIN of the keys' group-by: its input's rows and its groups.
    ASSIGN_OR_RETURN(Estimates estimates,
                     EstimatePlan(conn_, fmt::format("SELECT {0} FROM ({1}) AS __sluice_in GROUP BY {0}", key_list, key_sql)));
    int64_t duckdb_rows = estimates.largest;
    int64_t est_rows = std::max(duckdb_rows, options_.known_input_rows);
    if (est_rows < options_.min_rows_to_rewrite) return NotApplicable("estimated {} rows: too few to rewrite", est_rows);

    int64_t per_group = 96 + 24 * aggregates;
    for (const Column& k : key_cols) per_group += 2 * TypeWidth(k.type);
    // No scan when even one group per row would fit: DuckDB's own plan is that.
    if (options_.force_parts == 0 && PartsFor(est_rows, per_group) <= 1) {
      return NotApplicable("at most {} groups fit in memory: DuckDB's own plan", est_rows);
    }
    std::optional<int64_t> key_bound;  // from the footers (D18)
    bool probed = false;
    std::optional<int64_t> probe_groups;
    // Before scanning the whole input for its distinct keys: when DuckDB's own estimate of
    // the groups fits, leave the query to DuckDB (a join with a small dimension's key, say).
    // Only a cost decision: the answer is the same either way.
    if (options_.force_parts == 0) {
      int64_t est_groups = estimates.output;
      // DuckDB estimates read_parquet with an explicit schema (lake tables) at 1,000 rows a
      // file and knows no distinct counts there, so its group estimate is bounded by that
      // and says nothing; elsewhere it often overestimates (10M groups for q4's 1.5M).
      // Before paying a full statistics scan, the first million input rows are probed and
      // the groups estimated from them (GEE: sqrt(N/n) times the keys seen once, plus those
      // seen more often), and a query whose estimate fits is left to DuckDB (D13).
      // An estimate decides only between DuckDB's plan and a scan: groups that fit in three
      // quarters of the memory limit are DuckDB's to aggregate in memory (a part gets half,
      // for the scans beside it: an estimate a little high must not cost a full scan, and
      // GEE's underestimate of a key near the limit must not skip one).
      auto fits_whole = [&](int64_t g) {
        return 1.1 * static_cast<double>(g) * static_cast<double>(per_group) <=
               0.75 * static_cast<double>(options_.memory_limit_bytes);
      };
      // (An estimate of no rows or no groups at all, below the rows known to be there, is
      // as blind.)
      bool estimate_blind = options_.known_input_rows > duckdb_rows &&
                            (duckdb_rows <= 0 || est_groups <= 0 || est_groups * 10 >= duckdb_rows);
      if (estimate_blind || !fits_whole(est_groups)) {
        // A failed footer read only means no bound; an interrupt is the user's.
        Result<std::optional<int64_t>> bound = KeyBound(n, keys, key_cols);
        if (!bound.ok()) {
          StatusCode code = bound.status().code();
          if (code == StatusCode::kAborted || code == StatusCode::kResourceExhausted) return bound.status();
          bound = std::optional<int64_t>();
        }
        if (*bound && fits_whole(**bound)) {
          return NotApplicable("at most {} groups (the keys' tables' rows and ranges): they fit in memory", **bound);
        }
        key_bound = *bound;
      }
      if (estimate_blind || !fits_whole(est_groups)) {
        constexpr int64_t kProbeRows = 1'000'000;
        ASSIGN_OR_RETURN(auto probe,
                         Ask(conn_,
                             fmt::format("SELECT sum(c)::BIGINT, count(*), count(*) FILTER (WHERE c = 1) FROM (SELECT "
                                         "hash({0}) AS h, count(*) AS c FROM (SELECT {0} FROM ({1}) AS __sluice_in "
                                         "LIMIT {2}) AS __sluice_probe GROUP BY h)",
                                         key_list, key_sql, kProbeRows),
                             "group probe"));
        if (probe.size() == 1 && probe[0][0] && probe[0][1] && probe[0][2]) {
          probed = true;
          double n = std::atof(probe[0][0]->c_str());
          double distinct = std::atof(probe[0][1]->c_str());
          double once = std::atof(probe[0][2]->c_str());
          double total = static_cast<double>(est_rows);
          double estimate = n <= 0 || n >= total ? distinct : std::sqrt(total / n) * once + (distinct - once);
          est_groups = static_cast<int64_t>(std::min(estimate, std::max(total, distinct)));
          probe_groups = est_groups;
        }
      }
      if (fits_whole(est_groups)) {
        return NotApplicable("{} {} groups: they fit in memory",
                             probed ? "a probe of the first rows gives" : "DuckDB estimates", est_groups);
      }
    }
    // The groups: the footers' upper bound when the probe's estimate is close below it
    // (within 1.5x: the parts it gives are at most that many more than needed, and never
    // too few), else a statistics scan of the whole input (D20).
    int64_t rows = est_rows, groups = 0;
    std::string counted_by = "a statistics scan";
    if (key_bound && probe_groups && static_cast<double>(*key_bound) <= 1.5 * static_cast<double>(*probe_groups)) {
      groups = *key_bound;
      counted_by = "the footers' bound";
    } else {
      ASSIGN_OR_RETURN(auto stats, Ask(conn_,
                                       fmt::format("SELECT count(*), {} FROM ({}) AS __sluice_in",
                                                   DistinctKeysExpr(key_list, est_rows), key_sql),
                                       "statistics scan"));
      if (stats.size() != 1 || !stats[0][0] || !stats[0][1]) return NotApplicable("statistics scan returned nothing");
      rows = std::atoll(stats[0][0]->c_str());
      groups = std::atoll(stats[0][1]->c_str());
    }
    int parts = PartsFor(groups, per_group);
    if (parts <= 1 && options_.force_parts == 0) return NotApplicable("~{} groups fit in memory: DuckDB's own plan", groups);

    // Each part: the group-by with "hash(keys) % N = i" added to its WHERE.
    ASSIGN_OR_RETURN(Json cond, ParseExpr(conn_, "hash(1) % 2 = 3"));
    Json& hash_call = cond["left"]["children"][0];
    hash_call["children"] = Json::array();
    for (const Json& k : keys) {
      Json kk = k;
      kk["alias"] = "";
      hash_call["children"].push_back(kk);
    }
    cond["left"]["children"][1]["value"]["value"] = parts;
    ASSIGN_OR_RETURN(Json and_template, ParseExpr(conn_, "true AND true"));
    std::vector<std::string> part_sqls;
    for (int i = 0; i < parts; ++i) {
      Json part = n;
      Json ci = cond;
      ci["right"]["value"]["value"] = i;
      if (IsNullOrMissing(part, "where_clause")) {
        part["where_clause"] = ci;
      } else {
        Json a = and_template;
        a["children"] = Json::array({part["where_clause"], ci});
        part["where_clause"] = a;
      }
      ASSIGN_OR_RETURN(Json standalone, Standalone(part, c.scope));
      ASSIGN_OR_RETURN(std::string sql, Render(conn_, standalone));
      part_sqls.push_back(sql);
    }
    std::string how = fmt::format("group-by: {} rows (estimate {}), ~{} groups by {}, {} B/group -> {} parts", rows,
                                  est_rows, groups, counted_by, per_group, parts);
    return Finish(c, RewriteKind::kGroupBy, parts, [&](int i) { return part_sqls[i]; }, how);
  }

  // An upper bound on a group-by's groups from where its keys come from, or nullopt (D18).
  // Every column a key reads must belong to a table ref of the node's own FROM that reads
  // Parquet files (read_parquet, directly or as the lake planner's projection of it). Each
  // such ref bounds the keys reading it by its rows (counted from the footers), and a key
  // that is one of its integer columns by that column's range in the footers' statistics
  // (max - min + 1, and one for NULL); the groups are at most the product over the refs.
  // Each key is a function of one row of the refs it reads (keys are CONSISTENT:
  // DeterminismCheck), so an inner join or a filter only removes combinations; an outer
  // join can add one NULL-extended row per ref, counted as one more row. q2's p.category
  // is bounded by the 50,000 products, q4's customer_id by its range.
  static constexpr int64_t kMaxBoundFiles = 256;
  Result<std::optional<int64_t>> KeyBound(const Json& n, const std::vector<Json>& keys,
                                          const std::vector<Column>& key_cols) {
    const std::optional<int64_t> none;
    std::vector<const Json*> refs;
    bool simple_from = true;
    std::function<void(const Json&)> collect = [&](const Json& r) {
      std::string type = Str(r, "type");
      if (type == "JOIN") {
        collect(r["left"]);
        collect(r["right"]);
      } else if (type == "TABLE_FUNCTION" || type == "SUBQUERY" || type == "BASE_TABLE") {
        // `AS t(a, b)` renames the columns by position: not followed here.
        if (r.contains("column_name_alias") && r["column_name_alias"].is_array() && !r["column_name_alias"].empty()) {
          simple_from = false;
        }
        refs.push_back(&r);
      } else {
        simple_from = false;
      }
    };
    if (!n.contains("from_table")) return none;
    collect(n["from_table"]);
    if (!simple_from || refs.empty()) return none;
    // Per ref: the keys reading it, and whether each is a bare column of it (its name).
    std::map<const Json*, std::vector<std::optional<std::string>>> used;
    for (size_t i = 0; i < keys.size(); ++i) {
      bool bounded = true;
      std::set<const Json*> reads;
      std::string bare;
      std::function<void(const Json&)> visit = [&](const Json& e) {
        if (!bounded) return;
        if (e.is_object() && Str(e, "class") == "SUBQUERY") {
          bounded = false;
          return;
        }
        if (e.is_object() && Str(e, "class") == "COLUMN_REF") {
          const Json& names = e["column_names"];
          const Json* ref = nullptr;
          if (names.size() == 1 && refs.size() == 1) {
            ref = refs[0];
          } else if (names.size() == 2) {
            for (const Json* r : refs) {
              if (IEquals(Str(*r, "alias"), names[0].get<std::string>())) ref = r;
            }
          }
          if (ref == nullptr) {
            bounded = false;
          } else {
            reads.insert(ref);
            if (&e == &keys[i]) bare = names.back().get<std::string>();
          }
          return;
        }
        if (e.is_structured()) {
          for (const Json& c : e) visit(c);
        }
      };
      visit(keys[i]);
      if (!bounded) return none;
      bool integer = i < key_cols.size() && OrdinalExpr(key_cols[i].type, "x") == "x::BIGINT" &&
                     key_cols[i].type != "BOOLEAN";
      for (const Json* r : reads) {
        used[r].push_back(!bare.empty() && integer ? std::optional<std::string>(bare) : std::nullopt);
      }
    }
    int64_t bound = 1;
    auto times = [](int64_t a, int64_t b) {
      return b > 0 && a > std::numeric_limits<int64_t>::max() / b ? std::numeric_limits<int64_t>::max()
                                                                   : a * std::max<int64_t>(b, 1);
    };
    for (const auto& [r, ref_keys] : used) {
      // The read_parquet call: the ref itself, or the only FROM of a plain projection.
      const Json* scan = r;
      const Json* projection = nullptr;
      if (Str(*r, "type") == "SUBQUERY") {
        const Json& q = (*r)["subquery"]["node"];
        if (Str(q, "type") != "SELECT_NODE" || !IsNullOrMissing(q, "where_clause") || !q["modifiers"].empty() ||
            !q["group_expressions"].empty() || !IsNullOrMissing(q, "having") || !IsNullOrMissing(q, "qualify") ||
            !q.contains("from_table")) {
          return none;
        }
        for (const Json& item : q["select_list"]) {
          if (Str(item, "class") != "COLUMN_REF" || item["column_names"].size() != 1) return none;
        }
        projection = &q["select_list"];
        scan = &q["from_table"];
      }
      if (Str(*scan, "type") != "TABLE_FUNCTION") return none;
      const Json& call = (*scan)["function"];
      std::string fn = Lower(Str(call, "function_name"));
      if (fn != "read_parquet" && fn != "parquet_scan") return none;
      if (call["children"].empty() || Str(call["children"][0], "class") == "COMPARISON") return none;
      // Footers are read file by file: past a few hundred files the probe's fixed million
      // rows costs less than reading them all (a lake of 10,000 files would pay seconds).
      const Json& file_arg = call["children"][0];
      if (Str(file_arg, "class") == "FUNCTION" && Str(file_arg, "function_name") == "list_value" &&
          file_arg["children"].size() > kMaxBoundFiles) {
        return none;
      }
      ASSIGN_OR_RETURN(std::string files, RenderExpr(file_arg));
      if (Str(file_arg, "class") == "CONSTANT") {  // a glob: how many files it names
        ASSIGN_OR_RETURN(auto globbed, Ask(conn_, fmt::format("SELECT count(*) FROM glob({})", files), "glob"));
        if (globbed.size() != 1 || !globbed[0][0] || std::atoll(globbed[0][0]->c_str()) > kMaxBoundFiles) return none;
      }
      std::string schema_map;  // the lake's field-id schema, when given
      bool hive_off = false;      // hive_partitioning = false
      for (const Json& arg : call["children"]) {
        if (Str(arg, "class") != "COMPARISON" || arg["left"]["column_names"].size() != 1) continue;
        std::string name = arg["left"]["column_names"][0].get<std::string>();
        if (IEquals(name, "schema")) {
          ASSIGN_OR_RETURN(schema_map, RenderExpr(arg["right"]));
        } else if (IEquals(name, "hive_partitioning")) {
          ASSIGN_OR_RETURN(std::string v, RenderExpr(arg["right"]));
          hive_off = Lower(v).find("false") != std::string::npos || Lower(v).find("'f'") != std::string::npos;
        } else if (IEquals(name, "union_by_name") || IEquals(name, "filename") || IEquals(name, "file_row_number")) {
          return none;  // columns that are not the files' own
        }
      }
      ASSIGN_OR_RETURN(auto counted, Ask(conn_, fmt::format("SELECT sum(num_rows)::BIGINT, count(*), "
                                                            "bool_or(regexp_matches(file_name, '/[^/]+=[^/]*/')) "
                                                            "FROM parquet_file_metadata({})",
                                                            files),
                                        "row count of a key's table"));
      if (counted.size() != 1 || !counted[0][0] || !counted[0][1]) return none;
      // One more than the rows: an outer join's side may add a NULL key.
      int64_t ref_rows = std::atoll(counted[0][0]->c_str()) + 1;
      int64_t file_count = std::atoll(counted[0][1]->c_str());
      // A hive path's value replaces a file column of its name: the footers do not hold it.
      bool hive_paths = counted[0][2] && *counted[0][2] == "true" && !hive_off;
      // The range product of its keys when every one is a bare integer column.
      std::optional<int64_t> range = 1;
      if (hive_paths) range.reset();
      for (const std::optional<std::string>& key : ref_keys) {
        if (!key || !range) {
          range.reset();
          break;
        }
        std::string column = *key;
        if (projection != nullptr) {  // the projection's output name is its column's name
          bool found = false;
          for (const Json& item : *projection) {
            std::string out = Str(item, "alias").empty() ? item["column_names"][0].get<std::string>() : Str(item, "alias");
            if (IEquals(out, column)) {
              column = item["column_names"][0].get<std::string>();
              found = true;
            }
          }
          if (!found) return none;
        }
        std::string which = schema_map.empty()
                                ? fmt::format("name = {}", duck::QuoteLiteral(column))
                                : fmt::format("field_id = (SELECT k FROM (SELECT unnest(map_keys(m)) AS k, "
                                              "unnest(map_values(m)) AS v FROM (SELECT {} AS m)) WHERE v.name = {})",
                                              schema_map, duck::QuoteLiteral(column));
        // Every row group of every file must have both statistics of the column.
        ASSIGN_OR_RETURN(auto stats,
                         Ask(conn_,
                             fmt::format("WITH s AS (SELECT file_name, name FROM parquet_schema({0}) WHERE {1}) "
                                         "SELECT (max(TRY_CAST(m.stats_max_value AS HUGEINT)) - "
                                         "min(TRY_CAST(m.stats_min_value AS HUGEINT)) + 2)::VARCHAR, "
                                         "count(DISTINCT m.file_name), count(*) FILTER (WHERE "
                                         "TRY_CAST(m.stats_min_value AS HUGEINT) IS NULL OR "
                                         "TRY_CAST(m.stats_max_value AS HUGEINT) IS NULL) "
                                         "FROM parquet_metadata({0}) m JOIN s ON m.file_name = s.file_name AND "
                                         "m.path_in_schema = s.name",
                                         files, which),
                             "statistics of a key's column"));
        if (stats.size() != 1 || !stats[0][0] || !stats[0][1] || !stats[0][2] ||
            std::atoll(stats[0][1]->c_str()) != file_count || std::atoll(stats[0][2]->c_str()) != 0) {
          range.reset();
          break;
        }
        // Beyond int64 (HUGEINT text longer than 18 digits): no bound from it.
        const std::string& width = *stats[0][0];
        if (width.size() > 18 || width.empty() || width[0] == '-') {
          range.reset();
          break;
        }
        range = times(*range, std::atoll(width.c_str()));
      }
      bound = times(bound, range ? std::min(*range, ref_rows) : ref_rows);
    }
    return std::optional<int64_t>(bound);
  }

  // Text of one expression of a parse tree.
  Result<std::string> RenderExpr(const Json& e) {
    if (select_template_.is_null()) {
      ASSIGN_OR_RETURN(Json parsed, Parse(conn_, "SELECT 1"));
      select_template_ = parsed["statements"][0]["node"];
    }
    Json node = select_template_;
    node["select_list"] = Json::array({e});
    node["select_list"][0]["alias"] = "";
    ASSIGN_OR_RETURN(std::string sql, Render(conn_, node));
    if (sql.rfind("SELECT ", 0) != 0) return NotApplicable("unexpected rendering of an expression: {}", sql);
    return sql.substr(7);
  }

  // ---- shared

  int PartsFor(int64_t groups, int64_t per_group) const {
    if (options_.force_parts > 0) return options_.force_parts;
    double budget = options_.part_memory_fraction * static_cast<double>(options_.memory_limit_bytes);
    double need = 1.1 * static_cast<double>(groups) * static_cast<double>(per_group);
    int parts = static_cast<int>(std::ceil(need / std::max(budget, 1.0)));
    return std::clamp(parts, 1, options_.max_parts);
  }

  Status LoadCatalogueOnce() {
    if (!cat_loaded_) {
      ASSIGN_OR_RETURN(cat_, LoadCatalogue(conn_, options_.user_functions));
      cat_loaded_ = true;
    }
    return Status::OK();
  }

  // The steps into a temp table and the final SELECT: the query with the rewritten node's
  // table ref (or the whole query) replaced by the temp table.
  template <typename PartSql>
  Result<Plan> Finish(Candidate& c, RewriteKind kind, int parts, const PartSql& part_sql, const std::string& how) {
    Plan plan;
    plan.kind = kind;
    plan.parts = parts;
    plan.explanation = how;
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
      ASSIGN_OR_RETURN(Json part, Parse(conn_, part_sql(0)));
      ref = {{"type", "SUBQUERY"},
             {"alias", c.ref_alias},
             {"sample", nullptr},
             {"subquery", part["statements"][0]},
             {"column_name_alias", column_aliases}};
    } else {
      // The consumer's count/sum/min/max per part, summed up after (D17).
      ASSIGN_OR_RETURN(std::optional<Plan> partial, TryPartialConsumer(c, plan, parts, part_sql));
      if (partial) return std::move(*partial);
      std::string name = TempTableName();
      std::string qualified = "temp.main." + Quote(name);
      for (int i = 0; i < parts; ++i) {
        plan.steps.push_back(i == 0 ? fmt::format("CREATE TEMP TABLE {} AS {}", Quote(name), part_sql(i))
                                    : fmt::format("INSERT INTO {} {}", qualified, part_sql(i)));
      }
      plan.cleanup.push_back("DROP TABLE IF EXISTS " + qualified);
      if (!c.slot) {
        plan.final_select = "SELECT * FROM " + qualified;
        return plan;
      }
      ref = {{"type", "BASE_TABLE"},   {"alias", c.ref_alias},  {"sample", nullptr},
             {"schema_name", "main"},  {"table_name", name},    {"column_name_alias", column_aliases},
             {"catalog_name", "temp"}, {"at_clause", nullptr}};
    }
    *c.slot = ref;
    if (!c.cte_name.empty()) {
      // Drop the CTE when nothing else references it.
      std::set<std::string> names;
      CollectTableNames(root_doc_, names);
      if (!names.count(c.cte_name)) RemoveCte(root_doc_, c.cte_name);
    }
    ASSIGN_OR_RETURN(plan.final_select, Render(conn_, root_doc_["statements"][0]["node"]));
    return plan;
  }

  // D17: when the rewritten node is the whole FROM of an ungrouped consumer whose select
  // list is built of count, sum (of exact types), min and max (`SELECT count(*), sum(n) FROM
  // g WHERE ...`), each part runs the consumer's aggregates over its own rows into a TEMP
  // table of one row per part, and the final query combines them (counts and sums summed,
  // min of mins, max of maxes): the parts' rows are never stored. nullopt when the consumer
  // is any other shape.
  template <typename PartSql>
  Result<std::optional<Plan>> TryPartialConsumer(Candidate& c, const Plan& base, int parts, const PartSql& part_sql) {
    if (c.consumer == nullptr || c.slot == nullptr || !c.consumer->contains("from_table") ||
        &(*c.consumer)["from_table"] != c.slot) {
      return std::optional<Plan>();
    }
    Json& consumer = *c.consumer;
    if (!consumer["group_expressions"].empty() || !IsNullOrMissing(consumer, "having") ||
        !IsNullOrMissing(consumer, "qualify") || !consumer["modifiers"].empty() || !IsNullOrMissing(consumer, "sample") ||
        Str(consumer, "aggregate_handling") != "STANDARD_HANDLING") {
      return std::optional<Plan>();
    }
    // No subquery or window anywhere in the consumer's WHERE or select list.
    bool plain = true;
    std::function<void(const Json&)> scan = [&](const Json& j) {
      if (!j.is_structured() || !plain) return;
      if (j.is_object()) {
        std::string cls = Str(j, "class");
        if (cls == "SUBQUERY" || cls == "WINDOW" || cls == "STAR" || cls == "PARAMETER") plain = false;
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
        std::string name = Lower(Str(j, "function_name"));
        auto it = cat_.find(name);
        if (it != cat_.end() && it->second.aggregate) {
          bool simple = (name == "count_star" || name == "count" || name == "sum" || name == "min" || name == "max") &&
                        !j.value("distinct", false) && !j.value("export_state", false) &&
                        (!j.contains("order_bys") || j["order_bys"]["orders"].empty()) && Str(j, "schema").empty() &&
                        Str(j, "catalog").empty();
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
        for (auto& [k, v] : j.items()) replace(v, inside_aggregate);
      } else {
        for (Json& v : j) replace(v, inside_aggregate);
      }
    };
    replace(combined, false);
    if (!ok || partials.empty()) return std::optional<Plan>();

    Json column_aliases = (*c.slot)["column_name_alias"];
    if (column_aliases.is_null()) column_aliases = Json::array();
    auto partial_sql = [&](int i) -> Result<std::string> {
      ASSIGN_OR_RETURN(Json part, Parse(conn_, part_sql(i)));
      Json node = consumer;
      node["select_list"] = partials;
      node["from_table"] = {{"type", "SUBQUERY"},
                            {"alias", c.ref_alias},
                            {"sample", nullptr},
                            {"subquery", part["statements"][0]},
                            {"column_name_alias", column_aliases}};
      node["cte_map"] = {{"map", Json::array()}};
      return Render(conn_, node);
    };
    // Sums must be exact to be summed again in another order: integers and decimals.
    ASSIGN_OR_RETURN(std::string first, partial_sql(0));
    ASSIGN_OR_RETURN(std::vector<Column> types, Describe(conn_, first));
    for (size_t k = 0; k < types.size() && k < partials.size(); ++k) {
      std::string name = Lower(Str(partials[k], "function_name"));
      const std::string& t = types[k].type;
      bool exact = t == "HUGEINT" || t == "BIGINT" || t == "INTEGER" || t == "UBIGINT" || t == "UHUGEINT" ||
                   t.rfind("DECIMAL", 0) == 0;
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
    consumer["from_table"] = {{"type", "BASE_TABLE"},  {"alias", ""},          {"sample", nullptr},
                              {"schema_name", "main"}, {"table_name", name},   {"column_name_alias", Json::array()},
                              {"catalog_name", "temp"}, {"at_clause", nullptr}};
    if (!c.cte_name.empty()) {
      std::set<std::string> names;
      CollectTableNames(root_doc_, names);
      if (!names.count(c.cte_name)) RemoveCte(root_doc_, c.cte_name);
    }
    ASSIGN_OR_RETURN(plan.final_select, Render(conn_, root_doc_["statements"][0]["node"]));
    plan.explanation += "; the consumer's aggregates per part";
    return std::optional<Plan>(std::move(plan));
  }

  static void RemoveCte(Json& j, const std::string& name) {
    if (!j.is_structured()) return;
    if (j.is_object() && j.contains("cte_map") && j["cte_map"].contains("map")) {
      Json& map = j["cte_map"]["map"];
      for (size_t i = 0; i < map.size(); ++i) {
        if (Lower(Str(map[i], "key")) == name) {
          map.erase(i);
          break;
        }
      }
    }
    for (Json& c : j) RemoveCte(c, name);
  }

  duck::Connection& conn_;
  const RewriteOptions& options_;
  Json root_doc_;
  Catalogue cat_;
  bool cat_loaded_ = false;
  Json select_template_;  // SELECT 1, for RenderExpr
};

}  // namespace

std::string_view RewriteKindName(RewriteKind kind) {
  switch (kind) {
    case RewriteKind::kLatestRow: return "latest-row";
    case RewriteKind::kGroupBy: return "group-by";
  }
  return "?";
}

Result<std::optional<Plan>> PlanRewrite(duck::Connection& conn, std::string_view sql, const RewriteOptions& options,
                                        std::string* why_not) {
  auto start = std::chrono::steady_clock::now();
  auto ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  Planner planner(conn, options);
  auto plan = planner.Run(sql);
  if (plan.ok()) {
    // The answer's columns keep the query's names: the parts' aggregates are renamed
    // (`count(*)` becomes `CAST(sum(__sluice_a0) AS BIGINT)`), and a client reading
    // columns by name must not see them change with the data's size. Positional aliases
    // keep the order of an ORDER BY inside. Names repeated in the query (DuckDB would
    // suffix them here) are left as they come.
    auto columns = Describe(conn, std::string(sql));
    if (!columns.ok()) {
      StatusCode code = columns.status().code();
      if (code == StatusCode::kAborted || code == StatusCode::kResourceExhausted) return columns.status();
      if (why_not) *why_not = columns.status().message();
      return std::optional<Plan>();
    }
    std::set<std::string> seen;
    std::vector<std::string> names;
    for (const Column& col : *columns) {
      if (!seen.insert(Lower(col.name)).second) break;
      names.push_back(Quote(col.name));
    }
    if (!names.empty() && names.size() == columns->size()) {
      plan->final_select =
          fmt::format("SELECT * FROM ({}\n) AS __sluice_out({})", plan->final_select, fmt::join(names, ", "));
    }
    SLUICE_LOG(kLog, kDebug, "rewrite planned in {:.1f} ms: {}", ms(), plan->explanation);
    return std::optional<Plan>(std::move(plan).value());
  }
  if (plan.status().code() == StatusCode::kAborted || plan.status().code() == StatusCode::kResourceExhausted) {
    return plan.status();
  }
  SLUICE_LOG(kLog, kDebug, "no rewrite ({:.1f} ms): {}", ms(), plan.status().message());
  if (why_not) *why_not = plan.status().message();
  return std::optional<Plan>();
}

Status WarmUp(duck::Connection& conn) {
  RETURN_IF_ERROR(LoadCatalogue(conn, nullptr, /*builtin_only=*/true).status());
  return Parse(conn, "SELECT 1").status();
}

Status RunCleanup(duck::Connection& conn, const Plan& plan) {
  Status first;
  for (const std::string& s : plan.cleanup) {
    Status st = conn.Execute(s);
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

Result<std::string> RunSteps(duck::Connection& conn, const Plan& plan) {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    Status st = conn.Execute(plan.steps[i]);
    if (!st.ok()) {
      (void)RunCleanup(conn, plan);
      return st.WithContext(fmt::format("{} rewrite, part {} of {}", RewriteKindName(plan.kind), i + 1, plan.steps.size()));
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
