#include "query/lake_planner/lake_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include "base/strings.h"
#include "lake/iceberg_json.h"
#include "lake/parquet_read.h"
#include "lake/storage.h"
#include "lake/table_files.h"
#include "lake/table_metadata.h"

namespace sluice::query {
namespace {

using sql_tree::Json;
using sql_tree::SqlTree;
using sql_tree::StringField;

constexpr std::string_view kLakeCatalog = "lake";
// iceberg_scan('<metadata file or table directory>'): a table by its metadata path.
constexpr std::string_view kIcebergScan = "iceberg_scan";

}  // namespace

// `lake` (any case, maybe quoted) followed by a dot, with spaces and comments allowed
// between. Conservative: every reference DuckDB would parse as catalog `lake` is found (it
// cannot be written without those letters), and a false hit only costs the parse. SQL that
// merely contains the word (a column lake_id, a path .../lakes/...) is not parsed at all.
bool MayNameLakeTable(std::string_view sql) {
  if (ContainsIgnoreCase(sql, kIcebergScan)) return true;
  for (size_t i = 0; i + kLakeCatalog.size() <= sql.size(); ++i) {
    if (!EqualsIgnoreCase(sql.substr(i, kLakeCatalog.size()), kLakeCatalog)) continue;
    size_t j = i + kLakeCatalog.size();
    if (j < sql.size() && sql[j] == '"') ++j;
    while (j < sql.size()) {
      if (std::isspace(static_cast<unsigned char>(sql[j]))) {
        ++j;
      } else if (sql.substr(j, 2) == "--") {
        j = sql.find('\n', j);
        if (j == std::string_view::npos) return false;
      } else if (sql.substr(j, 2) == "/*") {  // block comments nest
        int depth = 0;
        do {
          if (sql.substr(j, 2) == "/*") {
            ++depth;
            j += 2;
          } else if (sql.substr(j, 2) == "*/") {
            --depth;
            j += 2;
          } else {
            ++j;
          }
        } while (depth > 0 && j < sql.size());
      } else {
        break;
      }
    }
    if (j < sql.size() && sql[j] == '.') return true;
  }
  return false;
}

namespace {

bool IsLakeRef(const Json& j) {
  return j.is_object() && StringField(j, "type") == "BASE_TABLE" &&
         EqualsIgnoreCase(StringField(j, "catalog_name"), kLakeCatalog);
}

bool IsIcebergScan(const Json& j) {
  return j.is_object() && StringField(j, "type") == "TABLE_FUNCTION" && j.contains("function") &&
         j["function"].is_object() &&
         EqualsIgnoreCase(StringField(j["function"], "function_name"), kIcebergScan) &&
         StringField(j["function"], "schema").empty();
}

// Functions a constant may call: pure ones, whose value at planning equals their value when
// the query runs (now(), random() and the like are not here).
bool PureFunction(std::string_view name) {
  static constexpr std::string_view kPure[] = {"+",
                                               "-",
                                               "*",
                                               "/",
                                               "//",
                                               "%",
                                               "trunc",
                                               "round",
                                               "floor",
                                               "ceil",
                                               "abs",
                                               "lower",
                                               "upper",
                                               "concat",
                                               "||",
                                               "to_years",
                                               "to_months",
                                               "to_weeks",
                                               "to_days",
                                               "to_hours",
                                               "to_minutes",
                                               "to_seconds",
                                               "to_milliseconds",
                                               "to_microseconds",
                                               "make_date",
                                               "make_time",
                                               "make_timestamp",
                                               "to_timestamp",
                                               "epoch_ms",
                                               "strptime",
                                               "date_trunc",
                                               "list_value"};
  for (std::string_view p : kPure) {
    if (EqualsIgnoreCase(name, p)) return true;
  }
  return false;
}

// Parameter values known at planning: identifier ("1" for $1 or the first ?) -> the
// value's expression tree.
using Parameters = std::map<std::string, Json>;

// An expression pruning may evaluate once at planning: constants, casts and pure functions
// of constants, and parameters whose values were given.
bool IsConstant(const Json& e, const Parameters& params) {
  if (!e.is_object()) return false;
  const std::string cls = StringField(e, "class");
  if (cls == "CONSTANT") return true;
  if (cls == "PARAMETER") return params.contains(StringField(e, "identifier"));
  if (cls == "CAST") return e.contains("child") && IsConstant(e["child"], params);
  if (cls == "FUNCTION") {
    if (!PureFunction(StringField(e, "function_name"))) return false;
    if (!StringField(e, "schema").empty() && StringField(e, "schema") != "main") return false;
    if (e.contains("filter") && !e["filter"].is_null()) return false;
    if (e.value("distinct", false)) return false;
    if (e.contains("order_bys") && e["order_bys"].is_object() &&
        !e["order_bys"].value("orders", Json::array()).empty()) {
      return false;
    }
    if (!e.contains("children") || !e["children"].is_array()) return false;
    for (const Json& c : e["children"]) {
      if (!IsConstant(c, params)) return false;
    }
    return true;
  }
  return false;
}

// Whether an expression (an AT clause's) refers to no column, subquery or unknown parameter.
bool IsClosed(const Json& e, const Parameters& params) {
  if (e.is_object()) {
    const std::string cls = StringField(e, "class");
    if (cls == "PARAMETER") return params.contains(StringField(e, "identifier"));
    if (cls == "COLUMN_REF" || cls == "SUBQUERY" || cls == "LAMBDA_REF") return false;
    for (const auto& [k, v] : e.items()) {
      if (!IsClosed(v, params)) return false;
    }
  } else if (e.is_array()) {
    for (const Json& v : e) {
      if (!IsClosed(v, params)) return false;
    }
  }
  return true;
}

// `e` with every known parameter replaced by its value.
Json Substitute(const Json& e, const Parameters& params) {
  if (params.empty()) return e;
  if (e.is_object()) {
    if (StringField(e, "class") == "PARAMETER") {
      auto it = params.find(StringField(e, "identifier"));
      return it == params.end() ? e : it->second;
    }
    Json out = Json::object();
    for (const auto& [k, v] : e.items()) out[k] = Substitute(v, params);
    return out;
  }
  if (e.is_array()) {
    Json out = Json::array();
    for (const Json& v : e) out.push_back(Substitute(v, params));
    return out;
  }
  return e;
}

// A lake table reference and the WHERE conjuncts of the SELECT whose FROM holds it where
// filtering its rows is safe (inner joins, the preserved side of outer joins).
struct RefSite {
  Json* node = nullptr;
  std::vector<const Json*> conjuncts;
  bool by_path = false;  // iceberg_scan('...'), not lake.<ns>.<table>
};

// A local file the planner itself reads for an iceberg_scan (its metadata, manifest list
// and manifests; DuckDB reads the data and delete files and checks them itself) must be
// one DuckDB would let the session read: with external access off, inside
// allowed_directories (the query server's sandbox, query.allowed_directories).
class PathSandbox {
 public:
  explicit PathSandbox(duck::Connection& conn) : conn_(conn) {}

  Status Check(const std::string& location) {
    if (lake::IsS3Location(location)) return Status::OK();
    ASSIGN_OR_RETURN(std::string path, lake::LocalPath(location));
    if (!loaded_) {
      ASSIGN_OR_RETURN(
          auto open,
          conn_.QueryText("SELECT system.main.current_setting('enable_external_access')::VARCHAR"));
      open_ = open.size() == 1 && open[0].size() == 1 && open[0][0] == "true";
      if (!open_) {
        ASSIGN_OR_RETURN(auto dirs, conn_.QueryText("SELECT unnest(system.main.current_setting("
                                                    "'allowed_directories'))::VARCHAR"));
        for (const auto& row : dirs) {
          if (!row.empty() && row[0] && !row[0]->empty()) allowed_.push_back(Canonical(*row[0]));
        }
      }
      loaded_ = true;
    }
    if (open_) return Status::OK();
    const std::string canonical = Canonical(path);
    for (const std::string& dir : allowed_) {
      if (canonical == dir || canonical.starts_with(dir.back() == '/' ? dir : dir + "/"))
        return Status::OK();
    }
    return InvalidArgumentError(
        "{} is outside the directories this server reads (query.allowed_directories)", location);
  }

 private:
  // Symbolic links and `..` resolved, so a link inside cannot lead outside.
  static std::string Canonical(const std::string& path) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
    return ec ? std::filesystem::path(path).lexically_normal().string() : p.string();
  }

  duck::Connection& conn_;
  bool loaded_ = false;
  bool open_ = false;
  std::vector<std::string> allowed_;
};

// The catalog's manifest reader, for an iceberg_scan: each local file checked first.
class SandboxedManifests : public ManifestReader {
 public:
  SandboxedManifests(const ManifestReader& base, PathSandbox& sandbox)
      : base_(base), sandbox_(sandbox) {}
  Result<std::shared_ptr<const std::vector<lake::ManifestFile>>> ManifestList(
      const lake::Snapshot& snapshot) const override {
    RETURN_IF_ERROR(sandbox_.Check(snapshot.manifest_list));
    return base_.ManifestList(snapshot);
  }
  Result<std::shared_ptr<const std::vector<lake::ManifestEntry>>> Entries(
      const lake::ManifestFile& m) const override {
    RETURN_IF_ERROR(sandbox_.Check(m.manifest_path));
    return base_.Entries(m);
  }

 private:
  const ManifestReader& base_;
  PathSandbox& sandbox_;
};

class Planner {
 public:
  Planner(duck::Connection& conn, const LakeCatalog& catalog)
      : conn_(conn), catalog_(catalog), sandbox_(conn) {}
  Result<std::vector<LakeTableScan>> Plan(SqlTree& tree, const LakePlanOptions& options);

 private:
  void Walk(Json& root, std::map<Json*, std::vector<const Json*>>* where_of);
  static void Prunable(Json& from, std::vector<Json*>* out);

  // The SQL text of expression `e`, its parameters substituted (through json_deserialize_sql).
  Result<std::string> ExprSql(const Json& e);
  // The texts of every constant expression under `roots`, converted in one
  // json_deserialize_sql (an IN list of a thousand values is one call, not a thousand).
  void PrepareConstants(const std::vector<const Json*>& roots);

  Status PlanRef(RefSite& site, SqlTree& tree, std::vector<LakeTableScan>* out);
  Result<std::shared_ptr<const lake::TableMetadata>> Load(const std::string& schema_name,
                                                          const std::string& table,
                                                          std::string* name);
  // An iceberg_scan call's table: its location (the first argument, a constant string)
  // and the snapshot it asks for (snapshot_from_id => id, snapshot_from_timestamp => ts)
  // as an AT clause.
  Result<std::shared_ptr<const lake::TableMetadata>> LoadByPath(const Json& function,
                                                                std::string* name, Json* at);
  Result<const lake::Snapshot*> Snapshot(const lake::TableMetadata& m, const Json& at,
                                         const std::string& name);

  // A WHERE conjunct as a predicate over the table: `binding` is the name the query uses
  // for it, ns/table its qualified name (usable when it has no alias).
  struct Binding {
    std::string alias;  // "" when none
    std::string ns, table;
    // The names the query sees, in the table's column order (`AS e(a, b)` renames the
    // first ones), with their field ids.
    std::vector<std::pair<std::string, int32_t>> columns;
  };
  Predicate ToPredicate(const Json& e, const Binding& b);
  std::optional<int32_t> ColumnOf(const Json& e, const Binding& b) const;
  Predicate Compare(const Json& column_side, CompareOp op, const Json& constant, const Binding& b);

  duck::Connection& conn_;
  const LakeCatalog& catalog_;
  PathSandbox sandbox_;
  bool lake_names_ = true;                           // LakePlanOptions::lake_names
  Parameters params_;                                // LakePlanOptions::parameters, parsed
  std::map<const Json*, std::string> constant_sql_;  // PrepareConstants' results
  std::vector<RefSite> sites_;
  // The placeholders' table names: the prefix (a fresh random one, not in the query) and,
  // per planned reference, its marker and the scan that replaces it.
  std::string marker_prefix_;
  std::optional<std::string> collation_;  // read with the query's parse
  int scans_ = 0;                         // placeholders made so far
};

void Planner::Prunable(Json& from, std::vector<Json*>* out) {
  if (!from.is_object()) return;
  // A sample is drawn before WHERE filters: fewer rows in would change what it draws.
  if (from.contains("sample") && !from["sample"].is_null()) return;
  const std::string type = StringField(from, "type");
  if (type == "BASE_TABLE" || IsIcebergScan(from)) {
    out->push_back(&from);
    return;
  }
  if (type != "JOIN") return;
  const std::string ref = StringField(from, "ref_type");
  const std::string join = StringField(from, "join_type");
  if (ref != "REGULAR" && ref != "CROSS" && ref != "NATURAL")
    return;  // POSITIONAL, ASOF, DEPENDENT
  const bool using_columns =
      ref == "NATURAL" || (from.contains("using_columns") && !from["using_columns"].empty());
  if (join == "INNER") {
    Prunable(from["left"], out);
    Prunable(from["right"], out);
  } else if (join == "LEFT" && !using_columns) {
    Prunable(from["left"], out);
  } else if (join == "RIGHT" && !using_columns) {
    Prunable(from["right"], out);
  }
}

void Planner::Walk(Json& root, std::map<Json*, std::vector<const Json*>>* where_of) {
  // Each SELECT's WHERE conjuncts, for the lake references of its FROM that they may
  // filter. Read before the references below are named as lake ones.
  sql_tree::ForEachSelect(root, [&](Json& j) {
    if (j.contains("from_table") && j.contains("where_clause") && !j["where_clause"].is_null() &&
        (!j.contains("sample") || j["sample"].is_null())) {  // USING SAMPLE: as TABLESAMPLE
      std::vector<Json*> refs;
      Prunable(j["from_table"], &refs);
      std::vector<const Json*> conjuncts = sql_tree::Conjuncts(j["where_clause"]);
      for (Json* r : refs) {
        if (IsLakeRef(*r) || IsIcebergScan(*r)) (*where_of)[r] = conjuncts;
      }
    }
  });
  sql_tree::ForEachTableRef(root, [&](Json& j) {
    // The catalog emulation shows a lake table under schema "lake.<ns>": tools name it
    // "lake.ns".t, which means lake.ns.t ("lake.a.b".t: the two-level namespace a.b).
    if (StringField(j, "type") == "BASE_TABLE" && StringField(j, "catalog_name").empty()) {
      std::string schema = StringField(j, "schema_name");
      if (schema.size() > kLakeCatalog.size() + 1 &&
          EqualsIgnoreCase(schema.substr(0, kLakeCatalog.size()), kLakeCatalog) &&
          schema[kLakeCatalog.size()] == '.') {
        j["catalog_name"] = std::string(kLakeCatalog);
        j["schema_name"] = schema.substr(kLakeCatalog.size() + 1);
      }
    }
    if (lake_names_ && IsLakeRef(j)) {
      sites_.push_back(RefSite{&j, {}, false});
      return false;  // its AT clause is read when planning it
    }
    if (IsIcebergScan(j)) {
      sites_.push_back(RefSite{&j, {}, true});
      return false;  // its arguments are read when planning it
    }
    return true;
  });
}

Result<std::string> Planner::ExprSql(const Json& e) {
  return sql_tree::ExpressionSql(conn_, Substitute(e, params_));
}

void Planner::PrepareConstants(const std::vector<const Json*>& roots) {
  std::vector<const Json*> constants;
  std::function<void(const Json&)> collect = [&](const Json& j) {
    if (j.is_object()) {
      if (IsConstant(j, params_)) {
        if (!constant_sql_.contains(&j)) constants.push_back(&j);
        return;
      }
      for (const auto& [k, v] : j.items()) collect(v);
    } else if (j.is_array()) {
      for (const Json& v : j) collect(v);
    }
  };
  for (const Json* r : roots) collect(*r);
  if (constants.empty()) return;
  // The simple ones without asking, the rest in one json_deserialize_sql; those it fails
  // on are asked one by one (ExprSql) when a predicate needs them.
  std::vector<Json> substituted;
  substituted.reserve(constants.size());
  for (const Json* c : constants) substituted.push_back(Substitute(*c, params_));
  std::vector<const Json*> exprs;
  for (const Json& e : substituted) exprs.push_back(&e);
  std::vector<std::optional<std::string>> texts = sql_tree::ExpressionsSql(conn_, exprs);
  for (size_t i = 0; i < constants.size(); ++i) {
    if (texts[i]) constant_sql_[constants[i]] = std::move(*texts[i]);
  }
}

std::optional<int32_t> Planner::ColumnOf(const Json& e, const Binding& b) const {
  if (StringField(e, "class") != "COLUMN_REF" || !e.contains("column_names")) return std::nullopt;
  std::vector<std::string> names;
  for (const Json& n : e["column_names"]) {
    if (!n.is_string()) return std::nullopt;
    names.push_back(n.get<std::string>());
  }
  std::string column;
  const std::string& binding = b.alias.empty() ? b.table : b.alias;
  if (names.size() == 1) {
    column = names[0];
  } else if (names.size() == 2 && EqualsIgnoreCase(names[0], binding)) {
    column = names[1];
  } else if (names.size() == 3 && b.alias.empty() && EqualsIgnoreCase(names[0], b.ns) &&
             EqualsIgnoreCase(names[1], b.table)) {
    column = names[2];
  } else if (names.size() == 4 && b.alias.empty() && EqualsIgnoreCase(names[0], kLakeCatalog) &&
             EqualsIgnoreCase(names[1], b.ns) && EqualsIgnoreCase(names[2], b.table)) {
    column = names[3];
  } else {
    return std::nullopt;
  }
  // DuckDB binds names case-insensitively: two columns differing only in case are ambiguous.
  std::optional<int32_t> found;
  for (const auto& [name, id] : b.columns) {
    if (EqualsIgnoreCase(name, column)) {
      if (found) return std::nullopt;
      found = id;
    }
  }
  return found;
}

Predicate Planner::Compare(const Json& column_side, CompareOp op, const Json& constant,
                           const Binding& b) {
  std::optional<int32_t> id = ColumnOf(column_side, b);
  if (!id || !IsConstant(constant, params_)) return Predicate::Unknown();
  auto known = constant_sql_.find(&constant);
  Result<std::string> text =
      known != constant_sql_.end() ? Result<std::string>(known->second) : ExprSql(constant);
  if (!text.ok()) return Predicate::Unknown();
  Predicate p;
  p.kind = Predicate::Kind::kCompare;
  p.field_id = *id;
  p.op = op;
  p.constant = *text;
  // A parameter given as text is a string literal too: DuckDB casts a bound value to the
  // type it inferred for the parameter, the column's.
  const Json value = Substitute(constant, params_);
  p.constant_is_string_literal =
      StringField(value, "class") == "CONSTANT" && value.contains("value") &&
      value["value"].is_object() && !value["value"].value("is_null", false) &&
      value["value"].contains("type") && StringField(value["value"]["type"], "id") == "VARCHAR";
  return p;
}

Predicate Planner::ToPredicate(const Json& e, const Binding& b) {
  if (!e.is_object()) return Predicate::Unknown();
  const std::string cls = StringField(e, "class");
  const std::string type = StringField(e, "type");
  if (cls == "CONJUNCTION" && e.contains("children") && e["children"].is_array()) {
    Predicate p;
    p.kind = type == "CONJUNCTION_AND"  ? Predicate::Kind::kAnd
             : type == "CONJUNCTION_OR" ? Predicate::Kind::kOr
                                        : Predicate::Kind::kUnknown;
    if (p.kind == Predicate::Kind::kUnknown) return p;
    for (const Json& c : e["children"]) p.children.push_back(ToPredicate(c, b));
    return p;
  }
  if (cls == "COMPARISON" && e.contains("left") && e.contains("right")) {
    static const std::map<std::string, std::pair<CompareOp, CompareOp>> kOps = {
        {"COMPARE_EQUAL", {CompareOp::kEq, CompareOp::kEq}},
        {"COMPARE_NOTEQUAL", {CompareOp::kNe, CompareOp::kNe}},
        {"COMPARE_LESSTHAN", {CompareOp::kLt, CompareOp::kGt}},
        {"COMPARE_GREATERTHAN", {CompareOp::kGt, CompareOp::kLt}},
        {"COMPARE_LESSTHANOREQUALTO", {CompareOp::kLe, CompareOp::kGe}},
        {"COMPARE_GREATERTHANOREQUALTO", {CompareOp::kGe, CompareOp::kLe}},
        {"COMPARE_DISTINCT_FROM", {CompareOp::kDistinctFrom, CompareOp::kDistinctFrom}},
        {"COMPARE_NOT_DISTINCT_FROM", {CompareOp::kNotDistinctFrom, CompareOp::kNotDistinctFrom}},
    };
    auto op = kOps.find(type);
    if (op == kOps.end()) return Predicate::Unknown();
    if (ColumnOf(e["left"], b)) return Compare(e["left"], op->second.first, e["right"], b);
    if (ColumnOf(e["right"], b)) return Compare(e["right"], op->second.second, e["left"], b);
    return Predicate::Unknown();
  }
  if (cls == "BETWEEN" && type == "COMPARE_BETWEEN" && e.contains("input") && e.contains("lower") &&
      e.contains("upper")) {
    Predicate p;
    p.kind = Predicate::Kind::kAnd;
    p.children.push_back(Compare(e["input"], CompareOp::kGe, e["lower"], b));
    p.children.push_back(Compare(e["input"], CompareOp::kLe, e["upper"], b));
    return p;
  }
  if (cls == "OPERATOR" && e.contains("children") && e["children"].is_array() &&
      !e["children"].empty()) {
    const Json& first = e["children"][0];
    if (type == "COMPARE_IN" && e["children"].size() >= 2) {
      Predicate p;
      p.kind = Predicate::Kind::kOr;
      for (size_t i = 1; i < e["children"].size(); ++i) {
        p.children.push_back(Compare(first, CompareOp::kEq, e["children"][i], b));
      }
      return p;
    }
    if (type == "OPERATOR_IS_NULL" || type == "OPERATOR_IS_NOT_NULL") {
      std::optional<int32_t> id = ColumnOf(first, b);
      if (!id) return Predicate::Unknown();
      Predicate p;
      p.kind = type == "OPERATOR_IS_NULL" ? Predicate::Kind::kIsNull : Predicate::Kind::kIsNotNull;
      p.field_id = *id;
      return p;
    }
  }
  return Predicate::Unknown();
}

Result<std::shared_ptr<const lake::TableMetadata>> Planner::Load(const std::string& schema_name,
                                                                 const std::string& table,
                                                                 std::string* name) {
  // `lake.db.t`: namespace db. A multi-level namespace is written as one quoted name with
  // its levels joined by dots (`lake."a.b".t`), tried after a single level of that name.
  *name = LakeTableName({schema_name}, table);
  Result<std::shared_ptr<const lake::TableMetadata>> t =
      catalog_.LoadMetadata({schema_name}, table);
  if (t.ok() || t.status().code() != StatusCode::kNotFound ||
      schema_name.find('.') == std::string::npos)
    return t;
  std::vector<std::string> levels;
  size_t start = 0;
  for (size_t dot; (dot = schema_name.find('.', start)) != std::string::npos; start = dot + 1) {
    levels.push_back(schema_name.substr(start, dot - start));
  }
  levels.push_back(schema_name.substr(start));
  Result<std::shared_ptr<const lake::TableMetadata>> multi = catalog_.LoadMetadata(levels, table);
  if (multi.ok()) *name = LakeTableName(levels, table);
  return multi.ok() || multi.status().code() != StatusCode::kNotFound ? multi : t;
}

Result<std::shared_ptr<const lake::TableMetadata>> Planner::LoadByPath(const Json& function,
                                                                       std::string* name,
                                                                       Json* at) {
  const Json& args = function.contains("children") ? function["children"] : Json();
  std::optional<std::string> location;
  for (const Json& arg : args.is_array() ? args : Json::array()) {
    const std::string param = StringField(arg, "alias");
    if (param.empty() && !location) {
      if (!IsClosed(arg, params_)) {
        return InvalidArgumentError(
            "iceberg_scan: the table's location must be a constant (a metadata file or a "
            "table directory)");
      }
      ASSIGN_OR_RETURN(std::string expr, ExprSql(arg));
      ASSIGN_OR_RETURN(auto value, conn_.QueryText(fmt::format("SELECT ({})::VARCHAR", expr)));
      if (value.size() != 1 || value[0].empty() || !value[0][0] || value[0][0]->empty())
        return InvalidArgumentError("iceberg_scan: the table's location is NULL or empty");
      location = *value[0][0];
      continue;
    }
    std::string unit;
    if (EqualsIgnoreCase(param, "snapshot_from_id")) {
      unit = "VERSION";
    } else if (EqualsIgnoreCase(param, "snapshot_from_timestamp")) {
      unit = "TIMESTAMP";
    } else {
      return InvalidArgumentError(
          "iceberg_scan: {} is not supported (it takes the table's location, and "
          "snapshot_from_id => id or snapshot_from_timestamp => ts)",
          param.empty() ? "a second location" : "parameter " + param);
    }
    if (at->is_object()) {
      return InvalidArgumentError(
          "iceberg_scan: give one of snapshot_from_id and snapshot_from_timestamp");
    }
    Json expr = arg;
    expr["alias"] = "";
    *at = Json{{"unit", unit}, {"expr", std::move(expr)}};
  }
  if (!location) {
    return InvalidArgumentError(
        "iceberg_scan needs the table's location: a metadata file or a table directory");
  }
  // As DuckDB reads a relative path: from the process's working directory.
  std::string where = *location;
  if (!lake::IsS3Location(where) && !where.starts_with("file:") && !where.starts_with("/")) {
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(where, ec);
    if (!ec) where = abs.lexically_normal().string();
  }
  *name = fmt::format("iceberg_scan('{}')", *location);
  RETURN_IF_ERROR(sandbox_.Check(where).WithContext("iceberg_scan"));
  Result<std::shared_ptr<const lake::TableMetadata>> m = catalog_.LoadMetadataFile(where);
  if (!m.ok()) return m.status().WithContext("iceberg_scan");
  return m;
}

Result<const lake::Snapshot*> Planner::Snapshot(const lake::TableMetadata& m, const Json& at,
                                                const std::string& name) {
  if (!at.is_object()) return m.CurrentSnapshot();
  const std::string unit = StringField(at, "unit");
  if (!at.contains("expr") || !IsClosed(at["expr"], params_)) {
    return InvalidArgumentError("lake table {}: AT ({} => ...) must be a constant", name, unit);
  }
  ASSIGN_OR_RETURN(std::string expr, ExprSql(at["expr"]));
  ASSIGN_OR_RETURN(auto typed,
                   conn_.QueryText(fmt::format("SELECT typeof(({0})), ({0})::VARCHAR", expr)));
  if (typed.size() != 1 || !typed[0][0] || !typed[0][1]) {
    return InvalidArgumentError("lake table {}: AT ({} => {}) is NULL", name, unit, expr);
  }
  const std::string type = *typed[0][0];
  const std::string text = *typed[0][1];
  if (EqualsIgnoreCase(unit, "VERSION")) {
    if (type == "VARCHAR") {  // a branch or tag
      const lake::SnapshotRef* ref = m.FindRef(text);
      if (ref == nullptr)
        return NotFoundError("lake table {} has no branch or tag \"{}\"", name, text);
      const lake::Snapshot* s = m.FindSnapshot(ref->snapshot_id);
      if (s == nullptr)
        return NotFoundError("lake table {}: snapshot {} of \"{}\" does not exist", name,
                             ref->snapshot_id, text);
      return s;
    }
    char* end = nullptr;
    errno = 0;
    long long id = std::strtoll(text.c_str(), &end, 10);
    if (errno != 0 || end == text.c_str() || *end != '\0') {
      return InvalidArgumentError(
          "lake table {}: AT (VERSION => {}) must be a snapshot id or a branch or tag name", name,
          expr);
    }
    const lake::Snapshot* s = m.FindSnapshot(id);
    if (s == nullptr) return NotFoundError("lake table {} has no snapshot {}", name, id);
    return s;
  }
  if (!EqualsIgnoreCase(unit, "TIMESTAMP"))
    return InvalidArgumentError("lake table {}: AT ({} => ...) is not supported", name, unit);
  // A TIMESTAMP (or DATE) is UTC; a TIMESTAMPTZ is its instant; text is read as a
  // TIMESTAMPTZ (an offset in it counts, else the session's time zone).
  std::string ms_sql;
  if (type == "TIMESTAMP WITH TIME ZONE" || type == "VARCHAR") {
    ms_sql = fmt::format("epoch_ms(CAST(({}) AS TIMESTAMPTZ))", expr);
  } else if (type == "DATE" || type.starts_with("TIMESTAMP")) {
    ms_sql = fmt::format("epoch_ms(CAST(({}) AS TIMESTAMP))", expr);
  } else {
    return InvalidArgumentError("lake table {}: AT (TIMESTAMP => {}) must be a timestamp, not {}",
                                name, expr, type);
  }
  ASSIGN_OR_RETURN(auto ms_rows, conn_.QueryText(fmt::format("SELECT ({})::VARCHAR", ms_sql)));
  if (ms_rows.size() != 1 || !ms_rows[0][0])
    return InvalidArgumentError("lake table {}: AT (TIMESTAMP => {}) is NULL", name, expr);
  const int64_t ms = std::strtoll(ms_rows[0][0]->c_str(), nullptr, 10);
  // The snapshot current at that time: the last snapshot-log entry at or before it (the
  // spec's rule); without a log, the newest ancestor of the current snapshot.
  std::optional<int64_t> id;
  std::optional<int64_t> first_ms;
  if (!m.snapshot_log.empty()) {
    for (const lake::SnapshotLogEntry& e : m.snapshot_log) {
      if (!first_ms || e.timestamp_ms < *first_ms) first_ms = e.timestamp_ms;
      if (e.timestamp_ms <= ms) id = e.snapshot_id;
    }
  } else {
    for (const lake::Snapshot* s = m.CurrentSnapshot(); s != nullptr;
         s = s->parent_snapshot_id ? m.FindSnapshot(*s->parent_snapshot_id) : nullptr) {
      first_ms = s->timestamp_ms;
      if (!id && s->timestamp_ms <= ms) id = s->snapshot_id;
      if (id) break;
    }
  }
  if (!id) {
    if (!first_ms)
      return NotFoundError("lake table {} has no snapshots (AT TIMESTAMP => {})", name, expr);
    return NotFoundError(
        "lake table {} has no snapshot at or before {} ({} ms); its first is at {} ms", name, text,
        ms, *first_ms);
  }
  const lake::Snapshot* s = m.FindSnapshot(*id);
  if (s == nullptr) {
    return NotFoundError("lake table {}: snapshot {}, current at {}, has expired", name, *id, text);
  }
  return s;
}

Status Planner::PlanRef(RefSite& site, SqlTree& tree, std::vector<LakeTableScan>* out) {
  Json& ref = *site.node;
  const std::string schema_name = site.by_path ? "" : StringField(ref, "schema_name");
  const std::string table_name =
      site.by_path ? std::string(kIcebergScan) : StringField(ref, "table_name");
  const std::string alias = StringField(ref, "alias");
  std::string name;
  std::shared_ptr<const lake::TableMetadata> metadata;
  Json at;
  if (site.by_path) {
    ASSIGN_OR_RETURN(metadata, LoadByPath(ref["function"], &name, &at));
  } else {
    ASSIGN_OR_RETURN(metadata, Load(schema_name, table_name, &name));
    if (ref.contains("at_clause")) at = ref["at_clause"];
  }
  const lake::TableMetadata& m = *metadata;
  ASSIGN_OR_RETURN(const lake::Snapshot* snapshot, Snapshot(m, at, name));
  // The current schema for the current snapshot; a snapshot's own schema when travelling.
  const lake::Schema* schema = m.CurrentSchema();
  if (at.is_object() && snapshot != nullptr && snapshot->schema_id) {
    if (const lake::Schema* s = m.FindSchema(*snapshot->schema_id)) schema = s;
  }
  if (schema == nullptr)
    return CorruptionError("lake table {}: its current schema is missing", name);

  Binding b{alias, schema_name, table_name, {}};
  for (const lake::NestedField& f : schema->fields) b.columns.emplace_back(f.name, f.id);
  if (ref.contains("column_name_alias") && ref["column_name_alias"].is_array()) {
    const Json& renamed = ref["column_name_alias"];
    for (size_t i = 0; i < renamed.size() && i < b.columns.size(); ++i) {
      if (!renamed[i].is_string())
        return InvalidArgumentError("lake table {}: bad column alias", name);
      b.columns[i].first = renamed[i].get<std::string>();
    }
  }
  // Files imported without field ids are read by the table's name mapping.
  std::optional<std::map<int32_t, std::vector<std::string>>> mapping;
  if (auto it = m.properties.find("schema.name-mapping.default"); it != m.properties.end()) {
    Result<std::map<int32_t, std::vector<std::string>>> parsed = lake::ParseNameMapping(it->second);
    if (!parsed.ok()) return parsed.status().WithContext(fmt::format("lake table {}", name));
    mapping = std::move(*parsed);
  }
  std::vector<Predicate> conjuncts;
  PrepareConstants(site.conjuncts);
  for (const Json* c : site.conjuncts) conjuncts.push_back(ToPredicate(*c, b));
  const SandboxedManifests sandboxed(catalog_.manifests(), sandbox_);
  ASSIGN_OR_RETURN(ScanPlan plan,
                   PlanScan(conn_, m, snapshot, *schema, conjuncts, name,
                            site.by_path ? sandboxed : catalog_.manifests(), collation_));

  // The reference becomes a plain table named by a marker, keeping its alias (the table's
  // name when it has none), column aliases and sample; once the tree is SQL again, the
  // marker is replaced by the scan as a subquery. (Parsing the scan to put it into the tree
  // cost a json_serialize_sql of every file path per reference.)
  const std::string marker = fmt::format("{}{}_", marker_prefix_, scans_++);
  Json placeholder = Json::object();
  placeholder["type"] = "BASE_TABLE";
  placeholder["alias"] = alias.empty() ? table_name : alias;
  placeholder["sample"] = ref.contains("sample") ? ref["sample"] : Json();
  placeholder["query_location"] = ref.contains("query_location") ? ref["query_location"] : Json(0);
  placeholder["schema_name"] = "";
  placeholder["table_name"] = marker;
  placeholder["column_name_alias"] =
      ref.contains("column_name_alias") ? ref["column_name_alias"] : Json::array();
  placeholder["catalog_name"] = "";
  placeholder["at_clause"] = Json();
  // Files without deletes in one read_parquet, those with deletes in one read with them
  // applied (anti joins), the two put together with UNION ALL.
  std::vector<std::string> parts;
  if (mapping && plan.deletes) {
    return UnimplementedError(
        "lake table {} has a name mapping and delete files: reading both together is not "
        "supported yet",
        name);
  }
  if (mapping) {
    Result<std::string> part = lake::MappedParquetScanSql(conn_, plan.paths, *schema, *mapping);
    if (!part.ok()) return part.status().WithContext(fmt::format("lake table {}", name));
    parts.push_back(std::move(*part));
  } else if (!plan.paths.empty() || !plan.deletes) {
    // The kept files' rows for DuckDB's join order, when every kept file is in this read.
    std::optional<int64_t> rows;
    if (!plan.deletes) rows = plan.stats.records_kept;
    parts.push_back(lake::ParquetScanSql(plan.paths, *schema, rows));
  }
  if (plan.deletes) {
    Result<std::string> part = lake::ScanWithDeletesSql(*plan.deletes, *schema);
    if (!part.ok()) return part.status().WithContext(fmt::format("lake table {}", name));
    parts.push_back(std::move(*part));
  }
  sql_tree::Splice splice{
      marker, "(" + fmt::format("{}", fmt::join(parts, " UNION ALL ")) + ")", {}};
  if (!plan.paths.empty() || plan.deletes) {  // the schema's columns by name
    for (const lake::NestedField& f : schema->fields) splice.columns.push_back(f.name);
  }
  tree.AddSplice(std::move(splice));
  out->push_back(LakeTableScan{name, placeholder["alias"].get<std::string>(), std::move(plan.stats),
                               std::move(plan.holds)});
  ref = std::move(placeholder);
  return Status::OK();
}

// `lake.db.t.c` and `db.t.c` name a column of an unaliased lake table by its full name; the
// subquery that replaces the table is called `t`, so they become `t.c`.
void Requalify(Json& j, const std::vector<std::pair<std::string, std::string>>& unaliased) {
  if (j.is_object()) {
    if (StringField(j, "class") == "COLUMN_REF" && j.contains("column_names") &&
        j["column_names"].is_array()) {
      Json& names = j["column_names"];
      auto at = [&](size_t i) {
        return names.size() > i && names[i].is_string() ? names[i].get<std::string>() : "";
      };
      for (const auto& [ns, table] : unaliased) {
        if (names.size() >= 4 && EqualsIgnoreCase(at(0), kLakeCatalog) &&
            EqualsIgnoreCase(at(1), ns) && EqualsIgnoreCase(at(2), table)) {
          names.erase(names.begin(), names.begin() + 2);
          break;
        }
        if (names.size() >= 3 && EqualsIgnoreCase(at(0), ns) && EqualsIgnoreCase(at(1), table)) {
          names.erase(names.begin());
          break;
        }
      }
      return;
    }
    for (auto& [k, v] : j.items()) Requalify(v, unaliased);
  } else if (j.is_array()) {
    for (Json& v : j) Requalify(v, unaliased);
  }
}

Result<std::vector<LakeTableScan>> Planner::Plan(SqlTree& tree, const LakePlanOptions& options) {
  std::vector<LakeTableScan> out;
  // Not parsed, or not a SELECT: DuckDB reports it when the query runs.
  if (!tree.ok()) return out;
  collation_ = tree.collation();
  lake_names_ = options.lake_names;
  std::map<Json*, std::vector<const Json*>> where_of;
  Walk(tree.doc(), &where_of);
  if (sites_.empty()) return out;
  for (const auto& [id, value] : options.parameters) {
    // A value that does not parse as one constant expression is not used.
    Result<SqlTree> parsed = SqlTree::Parse(conn_, "SELECT " + value);
    if (!parsed.ok() || !parsed->ok() || parsed->statement_count() != 1) continue;
    Result<Json*> node = parsed->Node(0);
    if (!node.ok() || !(*node)->contains("select_list")) continue;
    const Json& list = (**node)["select_list"];
    if (!list.is_array() || list.size() != 1 || !IsConstant(list[0], {})) continue;
    Json v = list[0];
    v["alias"] = "";
    params_[id] = std::move(v);
  }
  std::vector<std::pair<std::string, std::string>> unaliased;
  for (RefSite& site : sites_) {
    if (auto it = where_of.find(site.node); it != where_of.end()) site.conjuncts = it->second;
    if (!site.by_path && StringField(*site.node, "alias").empty()) {
      unaliased.emplace_back(StringField(*site.node, "schema_name"),
                             StringField(*site.node, "table_name"));
    }
  }
  do {
    marker_prefix_ = "__sluice_scan_" + lake::NewUuid().substr(0, 8) + "_";
  } while (ContainsIgnoreCase(tree.text(), marker_prefix_));
  // Every predicate is read before any reference is replaced (conjuncts point into the tree).
  for (RefSite& site : sites_) RETURN_IF_ERROR(PlanRef(site, tree, &out));
  Requalify(tree.doc(), unaliased);
  tree.MarkChanged();
  return out;
}

}  // namespace

Result<std::vector<LakeTableScan>> PlanLakeTree(duck::Connection& conn, sql_tree::SqlTree& tree,
                                                const LakeCatalog& catalog,
                                                const LakePlanOptions& options) {
  Planner planner(conn, catalog);
  // nlohmann-json throws on a tree of another shape than DuckDB 1.5 writes; everything else
  // returns a Status.
  try {
    return planner.Plan(tree, options);
  } catch (const std::exception& e) {
    return InternalError("lake planner: unexpected parse tree from DuckDB {}: {}",
                         duck::LibraryVersion(), e.what());
  }
}

Result<PlannedQuery> PlanLakeQuery(duck::Connection& conn, std::string_view sql,
                                   const LakeCatalog& catalog, const LakePlanOptions& options) {
  PlannedQuery out;
  out.sql = std::string(sql);
  if (!MayNameLakeTable(sql)) return out;
  Result<SqlTree> tree = SqlTree::Parse(conn, sql);
  if (!tree.ok()) return out;  // DuckDB reports it when the query runs
  ASSIGN_OR_RETURN(out.tables, PlanLakeTree(conn, *tree, catalog, options));
  if (!tree->changed()) return out;
  ASSIGN_OR_RETURN(out.sql, tree->Render(conn));
  out.rewritten = true;
  return out;
}

}  // namespace sluice::query
