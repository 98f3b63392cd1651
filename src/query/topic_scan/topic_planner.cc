#include "query/topic_scan/topic_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "base/logging.h"
#include "base/strings.h"

namespace sluice::query {
namespace {

using sql_tree::Json;
using sql_tree::SqlTree;
using sql_tree::StringField;

const Logger kLog("topic_scan");

constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

// ---- expressions -------------------------------------------------------------------------

// A non-NULL integer literal that fits BIGINT (`5`, `-3`; DuckDB parses the sign into it).
std::optional<int64_t> IntConstant(const Json& e) {
  if (!e.is_object() || StringField(e, "class") != "CONSTANT" || !e.contains("value"))
    return std::nullopt;
  const Json& v = e["value"];
  if (v.value("is_null", true) || !v.contains("value") || !v.contains("type")) return std::nullopt;
  static constexpr std::string_view kInts[] = {"TINYINT",  "SMALLINT",  "INTEGER",  "BIGINT",
                                               "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"};
  const std::string id = StringField(v["type"], "id");
  if (std::find(std::begin(kInts), std::end(kInts), id) == std::end(kInts)) return std::nullopt;
  const Json& n = v["value"];
  if (n.is_number_unsigned()) {
    if (n.get<uint64_t>() > static_cast<uint64_t>(kMaxInt)) return std::nullopt;
    return static_cast<int64_t>(n.get<uint64_t>());
  }
  if (n.is_number_integer()) return n.get<int64_t>();
  return std::nullopt;
}

// A constant time: a string literal, or a string literal cast to TIMESTAMP, TIMESTAMPTZ or
// DATE (`TIMESTAMPTZ '2024-05-01 12:00:00+00'` parses as such a cast). DuckDB compares the
// TIMESTAMPTZ column with it by casting it to TIMESTAMPTZ; the pushed bound is that cast.
bool IsTimeConstant(const Json& e) {
  if (!e.is_object()) return false;
  auto is_string_literal = [](const Json& c) {
    return c.is_object() && StringField(c, "class") == "CONSTANT" && c.contains("value") &&
           !c["value"].value("is_null", true) && c["value"].contains("type") &&
           StringField(c["value"]["type"], "id") == "VARCHAR" && c["value"].contains("value") &&
           c["value"]["value"].is_string();
  };
  if (is_string_literal(e)) return true;
  if (StringField(e, "class") != "CAST" || e.value("try_cast", true) || !e.contains("cast_type") ||
      !e.contains("child")) {
    return false;
  }
  const std::string to = StringField(e["cast_type"], "id");
  return (to == "TIMESTAMP" || to == "TIMESTAMP WITH TIME ZONE" || to == "DATE") &&
         is_string_literal(e["child"]);
}

// Whether an expression refers to no column, subquery or parameter (a named parameter the
// user gave may be combined with a pushed bound only then).
bool IsClosed(const Json& e) {
  if (e.is_object()) {
    const std::string cls = StringField(e, "class");
    if (cls == "PARAMETER" || cls == "COLUMN_REF" || cls == "SUBQUERY" || cls == "LAMBDA_REF")
      return false;
    for (const auto& [k, v] : e.items()) {
      if (!IsClosed(v)) return false;
    }
  } else if (e.is_array()) {
    for (const Json& v : e) {
      if (!IsClosed(v)) return false;
    }
  }
  return true;
}

Json BigintConstant(int64_t v) {
  return Json{
      {"class", "CONSTANT"},
      {"type", "VALUE_CONSTANT"},
      {"alias", ""},
      {"query_location", 0},
      {"value",
       {{"type", {{"id", "BIGINT"}, {"type_info", nullptr}}}, {"is_null", false}, {"value", v}}}};
}

Json Cast(Json child, const char* type) {
  child["alias"] = "";
  return Json{{"class", "CAST"},
              {"type", "OPERATOR_CAST"},
              {"alias", ""},
              {"query_location", 0},
              {"child", std::move(child)},
              {"cast_type", {{"id", type}, {"type_info", nullptr}}},
              {"try_cast", false}};
}

Json Function(const char* name, Json children) {
  return Json{{"class", "FUNCTION"},
              {"type", "FUNCTION"},
              {"alias", ""},
              {"query_location", 0},
              {"function_name", name},
              {"schema", ""},
              {"children", std::move(children)},
              {"filter", nullptr},
              {"order_bys", {{"type", "ORDER_MODIFIER"}, {"orders", Json::array()}}},
              {"distinct", false},
              {"is_operator", false},
              {"export_state", false},
              {"catalog", ""}};
}

// A topic named as a table: kafka.<topic> (schema `kafka`, as the catalog emulation lists
// topics) becomes topic('<topic>') AS <topic>. True when one was replaced.
bool ReplaceTopicTables(Json& node, const std::string& function_name) {
  bool changed = false;
  if (node.is_object()) {
    if (StringField(node, "type") == "BASE_TABLE" && node.contains("table_name") &&
        EqualsIgnoreCase(StringField(node, "schema_name"), kTopicSchema) &&
        StringField(node, "catalog_name").empty() &&
        (!node.contains("at_clause") || node["at_clause"].is_null())) {
      const std::string topic = StringField(node, "table_name");
      std::string alias = StringField(node, "alias");
      Json name{{"class", "CONSTANT"},
                {"type", "VALUE_CONSTANT"},
                {"alias", ""},
                {"query_location", 0},
                {"value",
                 {{"type", {{"id", "VARCHAR"}, {"type_info", nullptr}}},
                  {"is_null", false},
                  {"value", topic}}}};
      Json call = Function(function_name.c_str(), Json::array({std::move(name)}));
      Json ref{
          {"type", "TABLE_FUNCTION"},
          {"alias", alias.empty() ? topic : alias},
          {"sample", node.contains("sample") ? node["sample"] : Json(nullptr)},
          {"query_location", node.contains("query_location") ? node["query_location"] : Json(0)},
          {"function", std::move(call)},
          {"column_name_alias",
           node.contains("column_name_alias") ? node["column_name_alias"] : Json::array()},
          {"with_ordinality", "WITHOUT_ORDINALITY"}};
      node = std::move(ref);
      return true;
    }
    for (auto& [k, v] : node.items()) changed |= ReplaceTopicTables(v, function_name);
  } else if (node.is_array()) {
    for (Json& v : node) changed |= ReplaceTopicTables(v, function_name);
  }
  return changed;
}

// ---- references and bounds ---------------------------------------------------------------

enum class Col { kNone, kPartition, kOffset, kTimestamp };

// One topic() call in a FROM clause, and what the WHERE of that SELECT says about it.
struct TopicRef {
  Json* node = nullptr;   // the TABLE_FUNCTION table ref
  std::string qualifier;  // its alias, or the function's name without one
  std::array<std::string, 3> names = {"partition", "offset",
                                      "timestamp"};  // after `AS t(p, o, ts)`
  bool unqualified = false;  // the only table of its FROM: bare column names are its own

  std::optional<int64_t> from, to;  // offsets, half-open
  std::vector<Json> from_ts;        // lower time bounds (constant expressions)
  std::vector<Json> to_ts_append;   // upper ones, exclusive, for LogAppendTime topics only
  std::optional<std::set<int64_t>> partitions;
  bool nothing = false;  // the conjuncts contradict: no row can match

  Col ColumnOf(const Json& e) const {
    if (!e.is_object() || StringField(e, "class") != "COLUMN_REF" || !e.contains("column_names"))
      return Col::kNone;
    const Json& n = e["column_names"];
    std::string column;
    if (n.size() == 1 && unqualified && n[0].is_string()) {
      column = n[0].get<std::string>();
    } else if (n.size() == 2 && n[0].is_string() && n[1].is_string() &&
               EqualsIgnoreCase(n[0].get<std::string>(), qualifier)) {
      column = n[1].get<std::string>();
    } else {
      return Col::kNone;
    }
    if (EqualsIgnoreCase(column, names[0])) return Col::kPartition;
    if (EqualsIgnoreCase(column, names[1])) return Col::kOffset;
    if (EqualsIgnoreCase(column, names[2])) return Col::kTimestamp;
    return Col::kNone;
  }

  void Lower(int64_t v) { from = std::max(from.value_or(0), std::max<int64_t>(v, 0)); }
  void Upper(int64_t v) { to = std::min(to.value_or(kMaxInt), std::max<int64_t>(v, 0)); }
  void UpperInclusive(int64_t v) {
    if (v < kMaxInt) Upper(v + 1);
  }
  void LowerExclusive(int64_t v) {
    if (v == kMaxInt) {
      nothing = true;
    } else {
      Lower(v + 1);
    }
  }
  void Partitions(std::set<int64_t> s) {
    if (partitions) {
      std::set<int64_t> both;
      std::set_intersection(partitions->begin(), partitions->end(), s.begin(), s.end(),
                            std::inserter(both, both.begin()));
      s = std::move(both);
    }
    if (s.empty()) nothing = true;
    partitions = std::move(s);
  }

  // `column op constant` (op already flipped when the constant was on the left).
  void Compare(Col col, const std::string& op, const Json& constant) {
    if (col == Col::kOffset || col == Col::kPartition) {
      std::optional<int64_t> v = IntConstant(constant);
      if (!v) return;
      if (col == Col::kPartition) {
        if (op == "COMPARE_EQUAL") Partitions({*v});
        return;
      }
      if (op == "COMPARE_EQUAL") {
        Lower(*v);
        UpperInclusive(*v);
      } else if (op == "COMPARE_GREATERTHANOREQUALTO") {
        Lower(*v);
      } else if (op == "COMPARE_GREATERTHAN") {
        LowerExclusive(*v);
      } else if (op == "COMPARE_LESSTHAN") {
        Upper(*v);
      } else if (op == "COMPARE_LESSTHANOREQUALTO") {
        UpperInclusive(*v);
      }
    } else if (col == Col::kTimestamp) {
      // Lower bounds always; upper ones only where timestamps grow with offsets, which the
      // function knows at bind (a LogAppendTime topic): decision 22 and 31. An upper bound
      // goes one millisecond later (Kafka's timestamps are milliseconds; the WHERE stays).
      if (!IsTimeConstant(constant)) return;
      if (op == "COMPARE_EQUAL" || op == "COMPARE_GREATERTHANOREQUALTO" ||
          op == "COMPARE_GREATERTHAN") {
        from_ts.push_back(Cast(constant, "TIMESTAMP WITH TIME ZONE"));
      }
      if (op == "COMPARE_EQUAL" || op == "COMPARE_LESSTHANOREQUALTO" || op == "COMPARE_LESSTHAN") {
        to_ts_append.push_back(
            Function("date_add",
                     Json::array({Cast(constant, "TIMESTAMP WITH TIME ZONE"),
                                  Function("to_milliseconds", Json::array({BigintConstant(1)}))})));
      }
    }
  }

  void Conjunct(const Json& e) {
    const std::string cls = StringField(e, "class");
    const std::string type = StringField(e, "type");
    if (cls == "COMPARISON" && e.contains("left") && e.contains("right")) {
      static const std::map<std::string, std::string> kFlip = {
          {"COMPARE_EQUAL", "COMPARE_EQUAL"},
          {"COMPARE_LESSTHAN", "COMPARE_GREATERTHAN"},
          {"COMPARE_GREATERTHAN", "COMPARE_LESSTHAN"},
          {"COMPARE_LESSTHANOREQUALTO", "COMPARE_GREATERTHANOREQUALTO"},
          {"COMPARE_GREATERTHANOREQUALTO", "COMPARE_LESSTHANOREQUALTO"}};
      auto flip = kFlip.find(type);
      if (flip == kFlip.end()) return;
      if (Col c = ColumnOf(e["left"]); c != Col::kNone) return Compare(c, type, e["right"]);
      if (Col c = ColumnOf(e["right"]); c != Col::kNone) return Compare(c, flip->second, e["left"]);
      return;
    }
    if (cls == "BETWEEN" && type == "COMPARE_BETWEEN" && e.contains("input") &&
        e.contains("lower") && e.contains("upper")) {
      Col c = ColumnOf(e["input"]);
      if (c == Col::kOffset || c == Col::kTimestamp) {
        Compare(c, "COMPARE_GREATERTHANOREQUALTO", e["lower"]);
        Compare(c, "COMPARE_LESSTHANOREQUALTO", e["upper"]);
      }
      return;
    }
    if (cls == "OPERATOR" && type == "COMPARE_IN" && e.contains("children") &&
        e["children"].size() >= 2) {
      Col c = ColumnOf(e["children"][0]);
      if (c != Col::kPartition && c != Col::kOffset) return;
      std::set<int64_t> values;
      for (size_t i = 1; i < e["children"].size(); ++i) {
        std::optional<int64_t> v = IntConstant(e["children"][i]);
        if (!v) return;  // a NULL or an expression in the list: nothing from this conjunct
        values.insert(*v);
      }
      if (c == Col::kPartition) {
        Partitions(std::move(values));
      } else {
        Lower(*values.begin());
        UpperInclusive(*values.rbegin());
      }
    }
  }

  // Writes the bounds into the call's named parameters; false when nothing changed.
  bool Apply() {
    Json& children = (*node)["function"]["children"];
    auto find = [&](const char* name) -> Json* {
      for (Json& c : children) {
        if (c.is_object() && EqualsIgnoreCase(StringField(c, "alias"), name)) return &c;
      }
      return nullptr;
    };
    bool changed = false;
    // name => combine(given, pushed...), or name => pushed when not given. A given value that
    // is not a closed expression (a parameter) is left as it is.
    auto set = [&](const char* name, const char* combine, const char* type,
                   std::vector<Json> pushed) {
      if (pushed.empty()) return;
      Json* given = find(name);
      if (given != nullptr && !IsClosed(*given)) return;
      Json value;
      if (given == nullptr && pushed.size() == 1) {
        value = std::move(pushed[0]);
      } else {
        Json args = Json::array();
        if (given != nullptr) args.push_back(Cast(*given, type));
        for (Json& p : pushed) args.push_back(std::move(p));
        value = Function(combine, std::move(args));
      }
      value["alias"] = name;
      if (given != nullptr) {
        *given = std::move(value);
      } else {
        children.push_back(std::move(value));
      }
      changed = true;
    };
    if (nothing) {
      set("to_offset", "least", "BIGINT", {BigintConstant(0)});
      return changed;
    }
    if (from) set("from_offset", "greatest", "BIGINT", {BigintConstant(*from)});
    if (to) set("to_offset", "least", "BIGINT", {BigintConstant(*to)});
    set("from_ts", "greatest", "TIMESTAMP WITH TIME ZONE", std::move(from_ts));
    set("to_ts_log_append", "least", "TIMESTAMP WITH TIME ZONE", std::move(to_ts_append));
    if (partitions && find("partitions") == nullptr) {
      Json list = Json::array();
      for (int64_t p : *partitions) list.push_back(BigintConstant(p));
      Json value = Function("list_value", std::move(list));
      value["alias"] = "partitions";
      children.push_back(std::move(value));
      changed = true;
    }
    return changed;
  }
};

class Planner {
 public:
  explicit Planner(const TopicPlanOptions& options) : options_(options) {}

  // Fills bounds into every topic() call of the tree; true when something changed.
  bool Walk(Json& root) {
    bool changed = ReplaceTopicTables(root, options_.function_name);
    sql_tree::ForEachSelect(root, [&](Json& select) { changed |= PlanSelect(select); });
    return changed;
  }

 private:
  bool IsTopicCall(const Json& ref) const {
    if (StringField(ref, "type") != "TABLE_FUNCTION" || !ref.contains("function")) return false;
    const Json& f = ref["function"];
    const std::string schema = StringField(f, "schema");
    return StringField(f, "class") == "FUNCTION" &&
           EqualsIgnoreCase(StringField(f, "function_name"), options_.function_name) &&
           (schema.empty() || EqualsIgnoreCase(schema, "main")) && f.contains("children") &&
           f["children"].is_array();
  }

  // The topic() calls of a FROM clause whose rows a WHERE conjunct may narrow, and how many
  // tables the FROM has. Inner and outer joins qualify (see decision 22 for outer joins);
  // ASOF, POSITIONAL and LATERAL joins pair rows by what else is there, SEMI and ANTI hide a
  // side, and a sample is drawn before WHERE: their calls are counted, not collected.
  void Collect(Json& from, bool collect, std::vector<Json*>* refs, int* tables) const {
    if (!from.is_object()) return;
    const std::string type = StringField(from, "type");
    if (type == "JOIN") {
      const std::string ref = StringField(from, "ref_type");
      const std::string join = StringField(from, "join_type");
      bool ok = collect && (ref == "REGULAR" || ref == "CROSS" || ref == "NATURAL") &&
                (join == "INNER" || join == "LEFT" || join == "RIGHT" || join == "OUTER" ||
                 join == "FULL");
      Collect(from["left"], ok, refs, tables);
      Collect(from["right"], ok, refs, tables);
      return;
    }
    if (type == "EMPTY_FROM" || type == "EMPTY") return;
    ++*tables;
    if (collect && IsTopicCall(from) && (!from.contains("sample") || from["sample"].is_null()))
      refs->push_back(&from);
  }

  bool PlanSelect(Json& select) {
    if (!select.contains("from_table") || !select.contains("where_clause") ||
        select["where_clause"].is_null()) {
      return false;
    }
    if (select.contains("sample") && !select["sample"].is_null()) return false;  // USING SAMPLE
    std::vector<Json*> nodes;
    int tables = 0;
    Collect(select["from_table"], true, &nodes, &tables);
    if (nodes.empty()) return false;
    std::vector<const Json*> conjuncts = sql_tree::Conjuncts(select["where_clause"]);
    bool changed = false;
    for (Json* node : nodes) {
      TopicRef ref;
      ref.node = node;
      ref.qualifier = StringField(*node, "alias");
      if (ref.qualifier.empty()) ref.qualifier = StringField((*node)["function"], "function_name");
      ref.unqualified = tables == 1;
      if (node->contains("column_name_alias") && (*node)["column_name_alias"].is_array()) {
        const Json& renamed = (*node)["column_name_alias"];
        for (size_t i = 0; i < renamed.size() && i < ref.names.size(); ++i) {
          if (!renamed[i].is_string()) return changed;
          ref.names[i] = renamed[i].get<std::string>();
        }
      }
      for (const Json* c : conjuncts) ref.Conjunct(*c);
      changed |= ref.Apply();
    }
    return changed;
  }

  const TopicPlanOptions& options_;
};

}  // namespace

bool MayCallTopic(std::string_view sql, const TopicPlanOptions& options) {
  return !options.function_name.empty() &&
         (ContainsIgnoreCase(sql, options.function_name) ||
          ContainsIgnoreCase(sql, kTopicSchema)) &&
         sql.find('\0') == std::string_view::npos;
}

Result<bool> PlanTopicTree(sql_tree::SqlTree& tree, const TopicPlanOptions& options) {
  // Not parsed, or not a SELECT: DuckDB reports it when the query runs.
  if (!tree.ok() || !MayCallTopic(tree.text(), options)) return false;
  // nlohmann-json throws on a tree of another shape than DuckDB writes.
  try {
    Planner planner(options);
    if (!planner.Walk(tree.doc())) return false;
  } catch (const std::exception& e) {
    return InternalError("unexpected parse tree from DuckDB {}: {}", duck::LibraryVersion(),
                         e.what());
  }
  tree.MarkChanged();
  return true;
}

Result<std::string> PlanTopicBounds(duck::Connection& conn, std::string_view sql,
                                    const TopicPlanOptions& options) {
  std::string out(sql);
  if (!MayCallTopic(sql, options)) return out;
  ASSIGN_OR_RETURN(SqlTree tree, SqlTree::Parse(conn, sql));
  Result<bool> changed = PlanTopicTree(tree, options);
  if (!changed.ok()) {
    // The query then runs as written, without pushed bounds.
    SLUICE_LOG(kLog, kWarn, "topic bounds not applied: {}", changed.status().message());
    return out;
  }
  if (!*changed) return out;
  Result<std::string> text = tree.Render(conn);
  if (!text.ok()) {
    // A tree DuckDB cannot print back: the bounds are an optimization, the query runs as
    // written.
    SLUICE_LOG(kLog, kWarn, "topic bounds not applied: json_deserialize_sql failed: {}",
               text.status().message());
    return out;
  }
  return std::move(*text);
}

}  // namespace sluice::query
