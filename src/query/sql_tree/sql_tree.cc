// The parse tree's round trips through DuckDB, its walkers, and expression texts.
#include "query/sql_tree/sql_tree.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <iterator>
#include <map>
#include <mutex>
#include <random>

namespace sluice::query::sql_tree {
namespace {

std::atomic<uint64_t> g_parses{0};
std::atomic<uint64_t> g_renders{0};

// One json_deserialize_sql of `doc`'s text.
Result<std::string> Deserialize(duck::Connection& conn, const Json& doc) {
  std::string text;
  try {
    text = doc.dump();
  } catch (const std::exception& e) {  // a string that is not UTF-8
    return InternalError("sql_tree: the parse tree cannot be written as JSON: {}", e.what());
  }
  g_renders.fetch_add(1, std::memory_order_relaxed);
  ASSIGN_OR_RETURN(auto rows, conn.QueryText(fmt::format("SELECT json_deserialize_sql({})",
                                                         duck::QuoteLiteral(text))));
  if (rows.size() != 1 || rows[0].empty() || !rows[0][0]) {
    return InternalError("json_deserialize_sql returned no row");
  }
  return std::move(*rows[0][0]);
}

// `SELECT 1` serialized: the statement ExpressionSql fills. Parsed once per process (its
// shape is the DuckDB library's).
Result<Json> SelectTemplate(duck::Connection& conn) {
  static std::mutex mu;
  static std::optional<Json> parsed;  // guarded by mu
  std::lock_guard<std::mutex> lock(mu);
  if (!parsed) {
    ASSIGN_OR_RETURN(SqlTree t, SqlTree::Parse(conn, "SELECT 1"));
    if (!t.ok() || t.statement_count() != 1) {
      return InternalError("json_serialize_sql of SELECT 1: {}",
                           t.ok() ? "not one statement" : t.error());
    }
    parsed = std::move(t.doc());
  }
  return *parsed;
}

// Where the select list of statement 0 of a serialized document is; null when missing.
Json* SelectList(Json& doc) {
  auto statements = doc.find("statements");
  if (statements == doc.end() || !statements->is_array() || statements->empty()) return nullptr;
  Json& first = (*statements)[0];
  if (!first.is_object() || !first.contains("node") || !first["node"].is_object()) return nullptr;
  return &first["node"]["select_list"];
}

std::string RandomTag() {
  static std::mutex mu;
  static std::mt19937_64 gen{std::random_device{}()};  // guarded by mu
  std::lock_guard<std::mutex> lock(mu);
  return fmt::format("{:08x}", static_cast<uint32_t>(gen()));
}

}  // namespace

// ---- SqlTree -----------------------------------------------------------------------------

Result<SqlTree> SqlTree::Parse(duck::Connection& conn, std::string_view sql) {
  SqlTree t;
  t.text_ = std::string(sql);
  if (sql.find('\0') != std::string_view::npos) {
    t.error_ = "the statement holds a NUL byte";
    return t;
  }
  t.prefix_length_ = duck::ExplainPrefixLength(sql);
  g_parses.fetch_add(1, std::memory_order_relaxed);
  ASSIGN_OR_RETURN(auto rows,
                   conn.QueryText(fmt::format("SELECT json_serialize_sql({}), "
                                              "current_setting('default_collation')",
                                              duck::QuoteLiteral(sql.substr(t.prefix_length_)))));
  if (rows.size() != 1 || rows[0].empty() || !rows[0][0]) {
    t.error_ = "json_serialize_sql returned no row";
    return t;
  }
  SqlTree parsed = FromJson(sql, *rows[0][0]);
  if (rows[0].size() == 2) parsed.collation_ = rows[0][1].value_or("");
  return parsed;
}

SqlTree SqlTree::FromJson(std::string_view sql, std::string_view json) {
  SqlTree t;
  t.text_ = std::string(sql);
  t.prefix_length_ = sql.find('\0') == std::string_view::npos ? duck::ExplainPrefixLength(sql) : 0;
  t.doc_ = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (t.doc_.is_discarded() || !t.doc_.is_object()) {
    t.doc_ = Json();
    t.error_ = "json_serialize_sql returned invalid JSON";
    return t;
  }
  auto error = t.doc_.find("error");
  if (error == t.doc_.end() || !error->is_boolean() || error->get<bool>()) {
    std::string message = StringField(t.doc_, "error_message");
    t.error_ =
        "not a SELECT DuckDB parses: " + (message.empty() ? std::string("no error flag") : message);
    return t;
  }
  auto statements = t.doc_.find("statements");
  if (statements == t.doc_.end() || !statements->is_array())
    t.error_ = "the parse tree has no statements";
  return t;
}

size_t SqlTree::statement_count() const {
  auto it = doc_.is_object() ? doc_.find("statements") : doc_.end();
  return it != doc_.end() && it->is_array() ? it->size() : 0;
}

Result<Json*> SqlTree::Node(size_t i) {
  if (i >= statement_count()) return InvalidArgumentError("the parse tree has no statement {}", i);
  Json& statement = doc_["statements"][i];
  if (!statement.is_object() || !statement.contains("node") || !statement["node"].is_object()) {
    return InvalidArgumentError("statement {} of the parse tree has no query node", i);
  }
  return &statement["node"];
}

const Splice* SqlTree::FindSplice(std::string_view table_name) const {
  for (const Splice& s : splices_) {
    if (s.marker == table_name) return &s;
  }
  return nullptr;
}

Result<std::string> SqlTree::Spliced(std::string sql, bool exactly_once) const {
  for (const Splice& s : splices_) {
    size_t at = sql.find(s.marker);
    if (exactly_once &&
        (at == std::string::npos || sql.find(s.marker, at + 1) != std::string::npos)) {
      return InternalError("sql_tree: the placeholder {} was not printed once in {}", s.marker,
                           sql);
    }
    for (; at != std::string::npos; at = sql.find(s.marker, at + s.sql.size())) {
      sql.replace(at, s.marker.size(), s.sql);
    }
  }
  return sql;
}

Result<std::string> SqlTree::Render(duck::Connection& conn) const {
  if (!changed_) return text_;
  if (!ok()) return InternalError("sql_tree: cannot print a tree DuckDB did not parse: {}", error_);
  ASSIGN_OR_RETURN(std::string body, Deserialize(conn, doc_));
  ASSIGN_OR_RETURN(body, Spliced(std::move(body), /*exactly_once=*/true));
  return std::string(prefix()) + body;
}

Result<std::string> SqlTree::RenderNode(duck::Connection& conn, const Json& node) const {
  Json doc = {{"error", false},
              {"statements", Json::array({{{"node", node}, {"named_param_map", Json::array()}}})}};
  ASSIGN_OR_RETURN(std::string sql, Deserialize(conn, doc));
  while (!sql.empty() &&
         (sql.back() == ';' || std::isspace(static_cast<unsigned char>(sql.back()))))
    sql.pop_back();
  return Spliced(std::move(sql), /*exactly_once=*/false);
}

// ---- walkers -------------------------------------------------------------------------------

std::string StringField(const Json& j, std::string_view key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool IsTableRef(const Json& j) {
  return j.is_object() && !j.contains("class") && j.contains("alias") && j.contains("type");
}

void ForEachTableRef(Json& j, const std::function<bool(Json& ref)>& visit) {
  if (j.is_object()) {
    if (IsTableRef(j) && !visit(j)) return;
    for (auto& [key, value] : j.items()) ForEachTableRef(value, visit);
  } else if (j.is_array()) {
    for (Json& value : j) ForEachTableRef(value, visit);
  }
}

void ForEachSelect(Json& j, const std::function<void(Json& select)>& visit) {
  if (j.is_object()) {
    if (StringField(j, "type") == "SELECT_NODE") visit(j);
    for (auto& [key, value] : j.items()) ForEachSelect(value, visit);
  } else if (j.is_array()) {
    for (Json& value : j) ForEachSelect(value, visit);
  }
}

std::vector<Cte> Ctes(Json& node) {
  std::vector<Cte> out;
  if (!node.is_object() || !node.contains("cte_map") || !node["cte_map"].is_object()) return out;
  Json& map = node["cte_map"];
  if (!map.contains("map") || !map["map"].is_array()) return out;
  for (Json& entry : map["map"]) {
    if (!entry.is_object()) continue;
    Json* query_node = nullptr;
    if (entry.contains("value") && entry["value"].is_object() && entry["value"].contains("query") &&
        entry["value"]["query"].is_object() && entry["value"]["query"].contains("node")) {
      query_node = &entry["value"]["query"]["node"];
    }
    out.push_back({StringField(entry, "key"), &entry, query_node});
  }
  return out;
}

namespace {
void CollectConjuncts(const Json& e, std::vector<const Json*>* out) {
  if (!e.is_object()) return;
  if (StringField(e, "class") == "CONJUNCTION" && StringField(e, "type") == "CONJUNCTION_AND") {
    auto children = e.find("children");
    if (children == e.end() || !children->is_array()) return;
    for (const Json& c : *children) CollectConjuncts(c, out);
    return;
  }
  out->push_back(&e);
}
}  // namespace

std::vector<const Json*> Conjuncts(const Json& where) {
  std::vector<const Json*> out;
  CollectConjuncts(where, &out);
  return out;
}

// ---- expressions ------------------------------------------------------------------------

std::optional<std::string> SimpleConstantSql(const Json& e) {
  if (!e.is_object()) return std::nullopt;
  const std::string cls = StringField(e, "class");
  if (cls == "CONSTANT") {
    if (!e.contains("value") || !e["value"].is_object()) return std::nullopt;
    const Json& v = e["value"];
    auto is_null = v.find("is_null");
    if (is_null == v.end() || !is_null->is_boolean() || is_null->get<bool>() ||
        !v.contains("type") || !v["type"].is_object() || !v.contains("value")) {
      return std::nullopt;
    }
    if (v["type"].contains("type_info") && !v["type"]["type_info"].is_null()) return std::nullopt;
    const std::string id = StringField(v["type"], "id");
    const Json& value = v["value"];
    if ((id == "INTEGER" || id == "BIGINT") && value.is_number_integer()) return value.dump();
    if (id == "BOOLEAN" && value.is_boolean())
      return std::string(value.get<bool>() ? "true" : "false");
    if (id == "VARCHAR" && value.is_string()) {
      const std::string text = value.get<std::string>();
      if (text.find('\0') != std::string::npos) return std::nullopt;
      return duck::QuoteLiteral(text);
    }
    return std::nullopt;
  }
  if (cls == "CAST") {
    auto try_cast = e.find("try_cast");
    if (try_cast == e.end() || !try_cast->is_boolean() || try_cast->get<bool>() ||
        !e.contains("cast_type") || !e["cast_type"].is_object() || !e.contains("child")) {
      return std::nullopt;
    }
    const Json& type = e["cast_type"];
    if (type.contains("type_info") && !type["type_info"].is_null()) return std::nullopt;
    static constexpr std::string_view kPlain[] = {"TIMESTAMP", "DATE",     "TIME",   "INTEGER",
                                                  "BIGINT",    "DOUBLE",   "FLOAT",  "VARCHAR",
                                                  "BOOLEAN",   "SMALLINT", "TINYINT"};
    const std::string id = StringField(type, "id");
    if (std::find(std::begin(kPlain), std::end(kPlain), id) == std::end(kPlain))
      return std::nullopt;
    std::optional<std::string> child = SimpleConstantSql(e["child"]);
    if (!child) return std::nullopt;
    return fmt::format("CAST({} AS {})", *child, id);
  }
  return std::nullopt;
}

Result<std::string> ExpressionSql(duck::Connection& conn, const Json& e) {
  ASSIGN_OR_RETURN(Json stmt, SelectTemplate(conn));
  Json* list = SelectList(stmt);
  if (list == nullptr) return InternalError("sql_tree: SELECT 1 has no select list");
  Json item = e;
  if (!item.is_object())
    return InvalidArgumentError("sql_tree: an expression that is not an object");
  item["alias"] = "";
  *list = Json::array({std::move(item)});
  ASSIGN_OR_RETURN(std::string text, Deserialize(conn, stmt));
  if (!text.starts_with("SELECT "))
    return InternalError("json_deserialize_sql returned \"{}\"", text);
  return text.substr(7);
}

std::vector<std::optional<std::string>> ExpressionsSql(duck::Connection& conn,
                                                       const std::vector<const Json*>& exprs) {
  std::vector<std::optional<std::string>> out(exprs.size());
  std::vector<size_t> rest;  // the indexes SimpleConstantSql does not know
  for (size_t i = 0; i < exprs.size(); ++i) {
    out[i] = SimpleConstantSql(*exprs[i]);
    if (!out[i] && exprs[i]->is_object()) rest.push_back(i);
  }
  if (rest.empty()) return out;
  Result<Json> tmpl = SelectTemplate(conn);
  if (!tmpl.ok()) return out;
  Json* list = SelectList(*tmpl);
  if (list == nullptr) return out;
  // Each expression aliased with a marker no literal holds, to cut the text apart.
  const std::string marker = "__sluice_" + RandomTag() + "_";
  *list = Json::array();
  for (size_t i = 0; i < rest.size(); ++i) {
    Json e = *exprs[rest[i]];
    e["alias"] = marker + std::to_string(i);
    list->push_back(std::move(e));
  }
  Result<std::string> rendered = Deserialize(conn, *tmpl);
  if (!rendered.ok()) return out;
  std::string_view text = *rendered;
  if (!text.starts_with("SELECT ")) return out;
  size_t start = 7;
  for (size_t i = 0; i < rest.size(); ++i) {
    const std::string tag = " AS " + marker + std::to_string(i);
    size_t end = text.find(tag, start);
    if (end == std::string_view::npos) return out;
    size_t next = end + tag.size();
    if (next < text.size() && text[next] != ',') return out;  // the tag of a later index
    out[rest[i]] = std::string(text.substr(start, end - start));
    start = next + 2;  // ", "
  }
  return out;
}

Result<Json> ParseExpression(duck::Connection& conn, std::string_view text) {
  static constexpr size_t kMaxCached = 256;
  static std::mutex mu;
  static std::map<std::string, Json, std::less<>> cache;  // guarded by mu
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(text); it != cache.end()) return it->second;
  }
  ASSIGN_OR_RETURN(SqlTree t, SqlTree::Parse(conn, fmt::format("SELECT {}", text)));
  if (!t.ok() || t.statement_count() != 1) {
    return InvalidArgumentError("not one expression: {}: {}", text,
                                t.ok() ? "not one statement" : t.error());
  }
  Json* list = SelectList(t.doc());
  if (list == nullptr || !list->is_array() || list->size() != 1 || !(*list)[0].is_object()) {
    return InvalidArgumentError("not one expression: {}", text);
  }
  Json e = std::move((*list)[0]);
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() < kMaxCached) cache.emplace(std::string(text), e);
  return e;
}

RoundTrips CountRoundTrips() {
  return {g_parses.load(std::memory_order_relaxed), g_renders.load(std::memory_order_relaxed)};
}

}  // namespace sluice::query::sql_tree
