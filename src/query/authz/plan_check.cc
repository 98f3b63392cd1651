#include "query/authz/plan_check.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "base/strings.h"
#include "query/lake_planner/lake_catalog.h"
#include "query/pg_catalog/lexer.h"
#include "query/sql_text.h"
#include "query/sql_tree/sql_tree.h"

namespace sluice::query::authz {
namespace {

using pg_catalog::TokenKind;
using sql_tree::Json;

constexpr int kMaxDepth = 16;        // views in views in macros...
constexpr int kMaxExpansions = 256;  // definitions read for one statement

// Table functions that read files: every positional argument is a path (or a list of them).
bool IsFileFunction(std::string_view name) {
  static const std::set<std::string, std::less<>> kNames = {"read_parquet",
                                                            "parquet_scan",
                                                            "read_csv",
                                                            "read_csv_auto",
                                                            "sniff_csv",
                                                            "read_json",
                                                            "read_json_auto",
                                                            "read_ndjson",
                                                            "read_ndjson_auto",
                                                            "read_json_objects",
                                                            "read_json_objects_auto",
                                                            "read_ndjson_objects",
                                                            "read_text",
                                                            "read_blob",
                                                            "glob",
                                                            "parquet_metadata",
                                                            "parquet_schema",
                                                            "parquet_file_metadata",
                                                            "parquet_kv_metadata",
                                                            "parquet_bloom_probe",
                                                            "read_xlsx",
                                                            "iceberg_scan",
                                                            "iceberg_metadata",
                                                            "iceberg_snapshots",
                                                            "delta_scan",
                                                            "read_avro",
                                                            "read_duckdb",
                                                            "parquet_full_metadata"};
  return kNames.count(name) > 0;
}

// The table functions a user who is not a superuser may call besides the file functions
// and topic() (each checked): generators and the catalog's own listings. Every other
// table function of DuckDB is refused: some run SQL from a string
// (json_execute_serialized_sql), change the whole database (enable_logging, checkpoint)
// or show what other sessions did (duckdb_logs, duckdb_external_file_cache), and a DuckDB
// upgrade may add more.
bool AllowedTableFunction(std::string_view name) {
  static const std::set<std::string, std::less<>> kNames = {"range",
                                                            "generate_series",
                                                            "unnest",
                                                            "json_each",
                                                            "json_tree",
                                                            "repeat",
                                                            "repeat_row",
                                                            "duckdb_columns",
                                                            "duckdb_constraints",
                                                            "duckdb_databases",
                                                            "duckdb_dependencies",
                                                            "duckdb_functions",
                                                            "duckdb_indexes",
                                                            "duckdb_keywords",
                                                            "duckdb_schemas",
                                                            "duckdb_sequences",
                                                            "duckdb_tables",
                                                            "duckdb_types",
                                                            "duckdb_views",
                                                            "duckdb_settings",
                                                            "pragma_table_info",
                                                            "pragma_show",
                                                            "pragma_version",
                                                            "pragma_collations",
                                                            "pragma_database_size",
                                                            "pragma_storage_info",
                                                            "test_all_types"};
  return kNames.count(name) > 0;
}

// Functions that run SQL given as a string: nothing can be checked ahead.
bool RunsSqlText(std::string_view name) { return name == "query" || name == "query_table"; }

// The words of a SET/RESET statement up to its setting's name, upper-cased, quoted names
// unquoted ("SET", "SESSION", "FILE_SEARCH_PATH"); at most `n`.
std::vector<std::string> SettingWords(std::string_view sql, size_t n) {
  std::vector<std::string> out;
  auto tokens = pg_catalog::Lex(sql);
  if (!tokens.ok()) return out;
  for (const pg_catalog::Token& t : *tokens) {
    if (out.size() == n) break;
    if (t.kind == TokenKind::kSpace || t.kind == TokenKind::kComment) continue;
    if (t.kind != TokenKind::kIdentifier && t.kind != TokenKind::kQuoted) break;
    std::string w =
        t.kind == TokenKind::kQuoted ? pg_catalog::UnquoteIdentifier(t.text) : std::string(t.text);
    for (char& c : w) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    out.push_back(std::move(w));
  }
  return out;
}

// Statements only superusers run (by their first words): what they are, or "".
std::string SuperuserStatement(std::string_view sql) {
  const std::vector<std::string> words = LeadingWords(sql, 5);
  if (words.empty()) return "";
  const std::string& w = words[0];
  if (w == "PRAGMA" || w == "CALL" || w == "EXPORT" || w == "IMPORT" || w == "LOAD" ||
      w == "INSTALL" || w == "FORCE" || w == "ATTACH" || w == "DETACH" ||
      w == "UPDATE_EXTENSIONS") {
    return w + " statements";
  }
  // SQL-level PREPARE/EXECUTE: DuckDB binds the statement again when the catalog changed,
  // after the check (the protocol's prepared statements are checked when they run).
  if (w == "PREPARE" || w == "EXECUTE") {
    return w + " statements (use the protocol's prepared statements)";
  }
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i] == "SECRET" && (w == "CREATE" || w == "DROP")) return "secrets";
  }
  // Settings that change where a relative path or ~ leads, and global ones (the name
  // quoted or not).
  if (w == "SET" || w == "RESET") {
    const std::vector<std::string> s = SettingWords(sql, 3);
    if (s.size() > 1 && s[1] == "GLOBAL") return "global settings";
    const size_t k = s.size() > 1 && (s[1] == "SESSION" || s[1] == "LOCAL") ? 2 : 1;
    if (k < s.size() && (s[k] == "FILE_SEARCH_PATH" || s[k] == "HOME_DIRECTORY")) {
      return AsciiLower(s[k]);
    }
  }
  return "";
}

// A name DuckDB may read as a file (a replacement scan: FROM 'x.parquet', FROM "dir/x.csv").
bool LooksLikeFile(std::string_view name) {
  return name.find_first_of("/.*?~") != std::string_view::npos;
}

std::string Describe(const std::vector<std::string>& through) {
  std::string out;
  for (auto it = through.rbegin(); it != through.rend(); ++it) out += " (through " + *it + ")";
  return out;
}

class Checker {
 public:
  Checker(duck::Connection& conn, const AccessContext& ctx) : conn_(conn), ctx_(ctx) {}

  Status Text(std::string_view sql, int depth) {
    if (depth > kMaxDepth) return Denied("views and macros nested more than {} deep", kMaxDepth);
    std::vector<std::string> words = LeadingWords(sql, 5);
    if (std::string what = SuperuserStatement(sql); !what.empty()) {
      return Denied("{}: only superusers", what);
    }
    if (!words.empty() && words[0] == "COPY") return Copy(sql, depth);
    // The query inside CREATE TABLE AS / INSERT / CREATE VIEW is a SELECT.
    std::string_view query = sql;
    size_t embedded = EmbeddedQueryStart(sql);
    if (embedded != std::string_view::npos) {
      query = sql.substr(embedded);
    } else if (size_t view = ViewQueryStart(sql); view != std::string_view::npos) {
      query = sql.substr(view);
    }
    ASSIGN_OR_RETURN(sql_tree::SqlTree tree, sql_tree::SqlTree::Parse(conn_, query));
    if (tree.ok()) {
      RETURN_IF_ERROR(Tree(tree.doc(), depth));
      // The statement around the query (INSERT's VALUES have none; a CREATE's name) holds
      // nothing to check; the tokens of the whole catch what the tree could not see.
      if (query.data() == sql.data()) return Status::OK();
      return Tokens(sql.substr(0, static_cast<size_t>(query.data() - sql.data())), depth);
    }
    return Tokens(sql, depth);
  }

  std::vector<std::string> through_;

 private:
  template <typename... Args>
  Status Denied(fmt::format_string<Args...> f, Args&&... args) {
    return FailedPreconditionError("42501: permission denied: {}{}",
                                   fmt::format(f, std::forward<Args>(args)...), Describe(through_));
  }
  template <typename... Args>
  Status DeniedFor(fmt::format_string<Args...> f, Args&&... args) {
    return FailedPreconditionError("42501: permission denied for {}{}",
                                   fmt::format(f, std::forward<Args>(args)...), Describe(through_));
  }

  // `CREATE [OR REPLACE] [TEMP|TEMPORARY] VIEW name [(columns)] AS <query>`: where the query
  // starts, else npos.
  static size_t ViewQueryStart(std::string_view sql) {
    std::vector<std::string> words = LeadingWords(sql, 5);
    bool view = false;
    for (const std::string& w : words) view |= w == "VIEW";
    if (words.empty() || words[0] != "CREATE" || !view) return std::string_view::npos;
    auto tokens = pg_catalog::Lex(sql);
    if (!tokens.ok()) return std::string_view::npos;
    int depth = 0;
    for (const pg_catalog::Token& t : *tokens) {
      if (t.text == "(") ++depth;
      if (t.text == ")") --depth;
      if (depth == 0 && t.kind == TokenKind::kIdentifier && IEquals(t.text, "AS")) {
        return t.offset + t.text.size();
      }
    }
    return std::string_view::npos;
  }

  Status Copy(std::string_view sql, int depth) {
    auto tokens = pg_catalog::Lex(sql);
    if (!tokens.ok()) return Status::OK();  // DuckDB refuses it
    std::vector<pg_catalog::Token> t;
    for (const pg_catalog::Token& k : *tokens) {
      if (k.kind != TokenKind::kSpace && k.kind != TokenKind::kComment) t.push_back(k);
    }
    int d = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i].text == "(") ++d;
      if (t[i].text == ")") --d;
      if (d != 0 || t[i].kind != TokenKind::kIdentifier ||
          !(IEquals(t[i].text, "TO") || IEquals(t[i].text, "FROM"))) {
        continue;
      }
      const Privilege p = IEquals(t[i].text, "TO") ? Privilege::kWrite : Privilege::kRead;
      if (i + 1 >= t.size()) break;
      const pg_catalog::Token& target = t[i + 1];
      if (target.kind == TokenKind::kString) {
        ASSIGN_OR_RETURN(std::string path, StringLiteral(target.text));
        RETURN_IF_ERROR(Path(path, p, "COPY"));
        break;
      }
      if (target.kind == TokenKind::kIdentifier &&
          (IEquals(target.text, "STDOUT") || IEquals(target.text, "STDIN"))) {
        break;
      }
      // DuckDB also takes a name, or a dotted one, as the file ("/data/y".csv).
      std::string name;
      for (size_t j = i + 1; j < t.size(); j += 2) {
        if (t[j].kind != TokenKind::kIdentifier && t[j].kind != TokenKind::kQuoted) break;
        if (!name.empty()) name += ".";
        name += t[j].kind == TokenKind::kQuoted ? pg_catalog::UnquoteIdentifier(t[j].text)
                                                : std::string(t[j].text);
        if (j + 1 >= t.size() || t[j + 1].text != ".") break;
      }
      if (name.empty()) return Denied("COPY to or from anything but a file name, STDIN or STDOUT");
      RETURN_IF_ERROR(Path(name, p, "COPY"));
      break;
    }
    auto copy = ParseCopyStatement(sql);
    if (copy.ok() && copy->has_value() && !(*copy)->query.empty()) {
      return Text((*copy)->query, depth);
    }
    return Tokens(sql, depth);
  }

  static Result<std::string> StringLiteral(std::string_view text) {
    if (text.empty() || text[0] != '\'') {
      return FailedPreconditionError(
          "42501: permission denied: a path must be a plain string literal ('...')");
    }
    std::string out;
    for (size_t k = 1; k + 1 < text.size(); ++k) {
      out += text[k];
      if (text[k] == '\'' && text[k + 1] == '\'') ++k;
    }
    return out;
  }

  Status Path(const std::string& path, Privilege p, std::string_view by) {
    if (path.find("://") != std::string::npos) {
      return DeniedFor("'{}' ({}): only superusers read URLs", path, by);
    }
    // A glob is checked at the directory before its first wildcard; what follows it may not
    // climb out again (`/open/**/../../secret/x`).
    std::string_view fixed = path;
    const size_t wild = fixed.find_first_of("*?[{");
    if (wild != std::string_view::npos) {
      const std::string_view rest = fixed.substr(wild);
      if (rest == ".." || rest.find("/..") != std::string_view::npos ||
          rest.find("../") != std::string_view::npos) {
        return DeniedFor("'{}' ({}): a pattern with '..' after a wildcard cannot be checked", path,
                         by);
      }
      const size_t slash = fixed.rfind('/', wild);
      fixed = slash == std::string_view::npos ? std::string_view(".") : fixed.substr(0, slash + 1);
    }
    const std::string normal = NormalizePath(fixed);
    if (!ctx_.grants->CanAccessPath(ctx_.user, normal, p)) {
      return DeniedFor("'{}' ({}): {} ON DIRECTORY covering {} is not granted", path, by,
                       PrivilegeName(p), normal);
    }
    if (wild != std::string_view::npos && p == Privilege::kRead) {
      // What the pattern matches may lead out through a symbolic link below the prefix:
      // each match, as DuckDB's own glob() finds it, is checked too.
      auto files = conn_.QueryText(
          fmt::format("SELECT file FROM glob({}) LIMIT 100001", duck::QuoteLiteral(path)));
      if (!files.ok()) return Status::OK();  // DuckDB reports the pattern when it runs
      if (files->size() > 100000) {
        return Denied("'{}' ({}) matches more than 100000 files to check", path, by);
      }
      for (const auto& row : *files) {
        if (row.empty() || !row[0]) continue;
        const std::string match = NormalizePath(*row[0]);
        if (!ctx_.grants->CanAccessPath(ctx_.user, match, p)) {
          return DeniedFor("'{}' ({}): it matches {} ({}), where {} ON DIRECTORY is not granted",
                           path, by, *row[0], match, PrivilegeName(p));
        }
      }
    }
    return Status::OK();
  }

  // ---- the parse tree ---------------------------------------------------------------------

  Status Tree(const Json& j, int depth) {
    if (j.is_array()) {
      for (const Json& e : j) RETURN_IF_ERROR(Tree(e, depth));
      return Status::OK();
    }
    if (!j.is_object()) return Status::OK();
    const std::string type = sql_tree::StringField(j, "type");
    const std::string cls = sql_tree::StringField(j, "class");
    if (type == "BASE_TABLE") RETURN_IF_ERROR(BaseTable(j, depth));
    if (cls == "FUNCTION") RETURN_IF_ERROR(Function(j, depth));
    if (type == "SHOW_REF" && !sql_tree::StringField(j, "table_name").empty()) {
      RETURN_IF_ERROR(Relation("", sql_tree::StringField(j, "schema_name"),
                               sql_tree::StringField(j, "table_name"), depth));
    }
    for (const auto& [key, value] : j.items()) {
      if (value.is_object() || value.is_array()) RETURN_IF_ERROR(Tree(value, depth));
    }
    return Status::OK();
  }

  Status BaseTable(const Json& j, int depth) {
    return Relation(sql_tree::StringField(j, "catalog_name"),
                    sql_tree::StringField(j, "schema_name"), sql_tree::StringField(j, "table_name"),
                    depth);
  }

  Status Relation(const std::string& catalog, const std::string& schema, const std::string& table,
                  int depth) {
    if (IEquals(catalog, "lake")) return Lake(schema, table);
    if (catalog.empty() && schema.size() > 5 && IEquals(schema.substr(0, 5), "lake.")) {
      return Lake(schema.substr(5), table);
    }
    if (catalog.empty() && IEquals(schema, "kafka")) {
      // kafka.<topic> is topic('<topic>') (topic_scan/topic_planner.h: kTopicSchema).
      if (ctx_.grants->CanSelectTopic(ctx_.user, table)) return Status::OK();
      return DeniedFor("topic {}", table);
    }
    RETURN_IF_ERROR(LoadRelations());
    bool known = false;
    auto view = views_.find(AsciiLower(table));
    if (view != views_.end()) {
      known = true;
      for (const std::string& sql : view->second) {
        if (Trusted(table, sql)) continue;
        RETURN_IF_ERROR(Expand("view " + table, sql, depth, /*is_view=*/true));
      }
    }
    if (catalog.empty() && schema.empty()) {
      // A file-like name is checked as a file even when a table, view or CTE has it:
      // DuckDB may resolve it elsewhere (the search path, a CTE out of scope, a table
      // dropped before a statement is bound again).
      if (LooksLikeFile(table)) return Path(table, Privilege::kRead, "a file as a table");
      return Status::OK();
    }
    // A qualified name that names no table or view: DuckDB reads the dotted name as a file
    // ("/data/x".parquet is /data/x.parquet).
    if (known || QualifiedObjectExists(catalog, schema, table)) return Status::OK();
    std::string joined = catalog.empty() ? schema : catalog + "." + schema;
    joined += "." + table;
    if (LooksLikeFile(joined)) return Path(joined, Privilege::kRead, "a file as a table");
    return Status::OK();
  }

  // Whether catalog.schema.table (catalog maybe empty; schema may be a database's name,
  // meaning its main schema) is a table or view of the database.
  bool QualifiedObjectExists(const std::string& catalog, const std::string& schema,
                             const std::string& table) const {
    const std::string c = AsciiLower(catalog), s = AsciiLower(schema), t = AsciiLower(table);
    for (const auto& [db, sch, name] : objects_) {
      if (name != t) continue;
      if (c.empty() ? (sch == s || (db == s && sch == "main")) : (db == c && sch == s)) {
        return true;
      }
    }
    return false;
  }

  Status Lake(const std::string& schema, const std::string& table) {
    std::vector<std::string> ns = {schema};
    bool single = schema.find('.') == std::string::npos;
    if (!single && ctx_.catalog != nullptr)
      single = ctx_.catalog->LoadMetadata({schema}, table).ok();
    if (!single) {
      ns.clear();
      size_t start = 0;
      for (size_t dot; (dot = schema.find('.', start)) != std::string::npos; start = dot + 1) {
        ns.push_back(schema.substr(start, dot - start));
      }
      ns.push_back(schema.substr(start));
    }
    if (ctx_.grants->CanSelectTable(ctx_.user, ns, table)) return Status::OK();
    return DeniedFor("lake table {}", LakeTableName(ns, table));
  }

  Status Function(const Json& j, int depth) {
    const std::string name = AsciiLower(sql_tree::StringField(j, "function_name"));
    const Json* children = j.contains("children") ? &j["children"] : nullptr;
    if (RunsSqlText(name)) {
      return DeniedFor("function {}: only superusers run SQL given as a string", name);
    }
    RETURN_IF_ERROR(TableFunction(name));
    if (name == "iceberg_scan") {
      // The metadata names data files anywhere the server may read: a grant on one path
      // would reach others. Tables by name are granted per table.
      return Denied(
          "iceberg_scan(): only superusers read a table by its metadata path; name it as "
          "lake.<namespace>.<table>, which is granted per table");
    }
    if (IsFileFunction(name) || name == "topic") {
      std::vector<std::string> args;
      if (children != nullptr && children->is_array()) {
        for (const Json& c : *children) {
          if (IsNamedParameter(c)) continue;
          if (!ConstantStrings(c, &args)) {
            return Denied("{}() needs constant paths or names (string literals) to be checked",
                          name);
          }
          if (name == "topic") break;
        }
      }
      if (args.empty()) return Denied("{}() without a constant argument cannot be checked", name);
      if (name == "topic") {
        if (ctx_.grants->CanSelectTopic(ctx_.user, args[0])) return Status::OK();
        return DeniedFor("topic {}", args[0]);
      }
      for (const std::string& path : args)
        RETURN_IF_ERROR(Path(path, Privilege::kRead, name + "()"));
      return Status::OK();
    }
    RETURN_IF_ERROR(LoadMacros());
    auto macro = macros_.find(name);
    if (macro != macros_.end()) {
      for (const auto& [table_macro, definition] : macro->second) {
        if (Trusted(name, definition)) continue;
        std::string sql = table_macro ? definition : "SELECT " + definition;
        RETURN_IF_ERROR(Expand("macro " + name, sql, depth, /*is_view=*/false));
      }
    }
    return Status::OK();
  }

  // A DuckDB table function of that name that is neither checked (files, topic) nor
  // allowed (AllowedTableFunction) nor a macro of the database is refused.
  Status TableFunction(const std::string& name) {
    if (IsFileFunction(name) || name == "topic" || AllowedTableFunction(name)) return Status::OK();
    ASSIGN_OR_RETURN(const std::set<std::string>* table_functions, TableFunctionNames());
    if (table_functions->count(name) == 0) return Status::OK();
    RETURN_IF_ERROR(LoadMacros());
    if (macros_.count(name) > 0) return Status::OK();
    return DeniedFor("table function {}: only superusers call it", name);
  }

  // `name := value` (an alias) / `name = value` in a table function's arguments.
  static bool IsNamedParameter(const Json& c) {
    if (!sql_tree::StringField(c, "alias").empty()) return true;  // name := value
    const std::string type = sql_tree::StringField(c, "type");
    if (type != "COMPARE_EQUAL") return false;
    const Json* left = c.contains("left") ? &c["left"] : nullptr;
    return left != nullptr && sql_tree::StringField(*left, "class") == "COLUMN_REF";
  }

  // A string constant, a cast of one, or a list of them.
  static bool ConstantStrings(const Json& c, std::vector<std::string>* out) {
    const std::string cls = sql_tree::StringField(c, "class");
    if (cls == "CONSTANT") {
      const Json& v = c.contains("value") ? c["value"] : Json();
      if (!v.is_object() || !v.contains("value") || !v["value"].is_string()) return false;
      out->push_back(v["value"].get<std::string>());
      return true;
    }
    if (cls == "CAST" && c.contains("child")) return ConstantStrings(c["child"], out);
    if (cls == "FUNCTION" && sql_tree::StringField(c, "function_name") == "list_value" &&
        c.contains("children")) {
      for (const Json& e : c["children"]) {
        if (!ConstantStrings(e, out)) return false;
      }
      return true;
    }
    return false;
  }

  Status Expand(const std::string& what, const std::string& sql, int depth, bool is_view) {
    if (++expansions_ > kMaxExpansions) return Denied("too many views and macros to check");
    through_.push_back(what);
    std::string query = sql;
    if (is_view) {
      size_t at = ViewQueryStart(sql);
      if (at != std::string::npos) query = sql.substr(at);
    }
    Status st = Text(query, depth + 1);
    through_.pop_back();
    return st;
  }

  bool Trusted(const std::string& name, const std::string& definition) const {
    return ctx_.trusted != nullptr && ctx_.trusted->count(AsciiLower(name) + "\n" + definition) > 0;
  }

  // The database's views and relations, read once per check when a name needs them.
  Status LoadRelations() {
    if (relations_loaded_) return Status::OK();
    relations_loaded_ = true;
    ASSIGN_OR_RETURN(
        auto views,
        conn_.QueryText("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal"));
    for (auto& row : views) {
      if (row.size() == 2 && row[0] && row[1]) views_[AsciiLower(*row[0])].push_back(*row[1]);
    }
    ASSIGN_OR_RETURN(auto objects,
                     conn_.QueryText("SELECT database_name, schema_name, table_name FROM "
                                     "duckdb_tables() WHERE NOT internal UNION ALL SELECT "
                                     "database_name, schema_name, view_name FROM duckdb_views() "
                                     "WHERE NOT internal"));
    for (auto& row : objects) {
      if (row.size() == 3 && row[0] && row[1] && row[2]) {
        objects_.emplace_back(AsciiLower(*row[0]), AsciiLower(*row[1]), AsciiLower(*row[2]));
      }
    }
    return Status::OK();
  }

  // The database's macros, when any may exist besides the catalog emulation's
  // (AccessContext::user_macros): duckdb_functions() lists every function, a cost no
  // statement should pay for nothing.
  Status LoadMacros() {
    if (macros_loaded_ || !ctx_.user_macros) return Status::OK();
    macros_loaded_ = true;
    ASSIGN_OR_RETURN(auto macros,
                     conn_.QueryText("SELECT function_name, function_type, macro_definition FROM "
                                     "duckdb_functions() WHERE function_type IN ('macro', "
                                     "'table_macro') AND NOT internal"));
    for (auto& row : macros) {
      if (row.size() == 3 && row[0] && row[1] && row[2]) {
        macros_[AsciiLower(*row[0])].emplace_back(*row[1] == "table_macro", *row[2]);
      }
    }
    return Status::OK();
  }

  // DuckDB's table functions, lower case: built in (SQL can add macros, not table
  // functions), so read once per process.
  Result<const std::set<std::string>*> TableFunctionNames() {
    static std::mutex mu;
    static std::set<std::string> names;
    static bool loaded = false;
    std::lock_guard lock(mu);
    if (!loaded) {
      ASSIGN_OR_RETURN(auto rows, conn_.QueryText("SELECT DISTINCT function_name FROM "
                                                  "duckdb_functions() WHERE function_type = "
                                                  "'table'"));
      for (auto& row : rows) {
        if (!row.empty() && row[0]) names.insert(AsciiLower(*row[0]));
      }
      loaded = true;
    }
    return &names;
  }

  // ---- tokens, for statements that are not SELECTs -----------------------------------------

  Status Tokens(std::string_view sql, int depth) {
    auto lexed = pg_catalog::Lex(sql);
    if (!lexed.ok()) return Status::OK();  // DuckDB cannot parse it either
    std::vector<pg_catalog::Token> t;
    for (const pg_catalog::Token& k : *lexed) {
      if (k.kind != TokenKind::kSpace && k.kind != TokenKind::kComment) t.push_back(k);
    }
    RETURN_IF_ERROR(LoadRelations());
    RETURN_IF_ERROR(LoadMacros());
    // Words after which a table (or a file as one) comes.
    static const std::set<std::string, std::less<>> kBeforeItem = {
        "from",        "join",         "using", "pivot",    "unpivot",
        "pivot_wider", "pivot_longer", "table", "describe", "summarize"};
    // Depths at which a FROM list is open (a ',' there starts another table).
    std::vector<bool> from_list(1, false);
    for (size_t i = 0; i < t.size(); ++i) {
      const pg_catalog::Token& k = t[i];
      if (k.text == "(") {
        from_list.push_back(false);
        continue;
      }
      if (k.text == ")") {
        if (from_list.size() > 1) from_list.pop_back();
        continue;
      }
      const bool word = k.kind == TokenKind::kIdentifier;
      const bool quoted = k.kind == TokenKind::kQuoted;
      if (word) {
        // ON belongs to a join inside the FROM list: a ',' after it starts another table.
        static const std::set<std::string, std::less<>> kEndsFrom = {
            "where",  "group", "order",  "having",    "limit",  "set",    "returning", "qualify",
            "window", "union", "except", "intersect", "offset", "values", "select"};
        std::string lower = AsciiLower(k.text);
        if (kBeforeItem.count(lower) > 0) from_list.back() = true;
        if (kEndsFrom.count(lower) > 0) from_list.back() = false;
      }
      // A call: name ( ... ).
      if ((word || quoted) && i + 1 < t.size() && t[i + 1].text == "(") {
        std::string name =
            AsciiLower(quoted ? pg_catalog::UnquoteIdentifier(k.text) : std::string(k.text));
        RETURN_IF_ERROR(Call(name, t, i + 1, depth));
      }
      if (word || quoted) {
        std::string name = quoted ? pg_catalog::UnquoteIdentifier(k.text) : std::string(k.text);
        auto view = views_.find(AsciiLower(name));
        if (view != views_.end()) {
          for (const std::string& v : view->second) {
            if (!Trusted(name, v)) RETURN_IF_ERROR(Expand("view " + name, v, depth, true));
          }
        }
      }
      // A file in a FROM list.
      const bool after_from_item = i > 0 && ((t[i - 1].kind == TokenKind::kIdentifier &&
                                              kBeforeItem.count(AsciiLower(t[i - 1].text)) > 0) ||
                                             (t[i - 1].text == "," && from_list.back()));
      if (after_from_item && (quoted || k.kind == TokenKind::kString)) {
        std::string name = quoted ? pg_catalog::UnquoteIdentifier(k.text) : std::string();
        if (!quoted) {
          auto lit = StringLiteral(k.text);
          if (!lit.ok()) return lit.status();
          name = *lit;
        }
        // A quoted name followed by .part is one dotted file name ("/data/x".csv); a
        // file-like name is a file even when a table has it (see Relation).
        for (size_t j = i + 1;
             quoted && j + 1 < t.size() && t[j].text == "." &&
             (t[j + 1].kind == TokenKind::kIdentifier || t[j + 1].kind == TokenKind::kQuoted);
             j += 2) {
          name += "." + (t[j + 1].kind == TokenKind::kQuoted
                             ? pg_catalog::UnquoteIdentifier(t[j + 1].text)
                             : std::string(t[j + 1].text));
        }
        if (LooksLikeFile(name)) RETURN_IF_ERROR(Path(name, Privilege::kRead, "a file as a table"));
      }
    }
    return Status::OK();
  }

  // The call of `name` whose '(' is t[open]: its positional arguments as the tree's rules
  // read them.
  Status Call(const std::string& name, const std::vector<pg_catalog::Token>& t, size_t open,
              int depth) {
    if (RunsSqlText(name)) {
      return DeniedFor("function {}: only superusers run SQL given as a string", name);
    }
    RETURN_IF_ERROR(TableFunction(name));
    if (IsFileFunction(name) || name == "topic") {
      // The arguments at depth 1, split at commas.
      std::vector<std::vector<const pg_catalog::Token*>> args(1);
      int d = 0;
      for (size_t i = open; i < t.size(); ++i) {
        if (t[i].text == "(" || t[i].text == "[") ++d;
        if (t[i].text == ")" || t[i].text == "]") --d;
        if (d == 0) break;
        if (i == open) continue;
        if (d == 1 && t[i].text == ",") {
          args.emplace_back();
          continue;
        }
        args.back().push_back(&t[i]);
      }
      std::vector<std::string> values;
      for (const auto& arg : args) {
        if (arg.size() >= 2 && arg[0]->kind == TokenKind::kIdentifier &&
            (arg[1]->text == ":=" || arg[1]->text == "=")) {
          continue;  // a named parameter
        }
        for (const pg_catalog::Token* a : arg) {
          if (a->text == "[" || a->text == "]" || a->text == ",") continue;
          if (a->kind != TokenKind::kString) {
            return Denied("{}() needs constant paths or names (string literals) to be checked",
                          name);
          }
          ASSIGN_OR_RETURN(std::string v, StringLiteral(a->text));
          values.push_back(std::move(v));
        }
        if (name == "topic" && !values.empty()) break;
      }
      if (values.empty()) return Denied("{}() without a constant argument cannot be checked", name);
      if (name == "topic") {
        if (ctx_.grants->CanSelectTopic(ctx_.user, values[0])) return Status::OK();
        return DeniedFor("topic {}", values[0]);
      }
      for (const std::string& path : values)
        RETURN_IF_ERROR(Path(path, Privilege::kRead, name + "()"));
      return Status::OK();
    }
    auto macro = macros_.find(name);
    if (macro != macros_.end()) {
      for (const auto& [table_macro, definition] : macro->second) {
        if (Trusted(name, definition)) continue;
        RETURN_IF_ERROR(Expand("macro " + name, table_macro ? definition : "SELECT " + definition,
                               depth, false));
      }
    }
    return Status::OK();
  }

  static bool IEquals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && AsciiLower(a) == AsciiLower(b);
  }

  duck::Connection& conn_;
  const AccessContext& ctx_;
  bool relations_loaded_ = false;
  bool macros_loaded_ = false;
  std::map<std::string, std::vector<std::string>> views_;  // lower-case name -> CREATE VIEW sql
  std::map<std::string, std::vector<std::pair<bool, std::string>>> macros_;  // table?, definition
  std::vector<std::tuple<std::string, std::string, std::string>> objects_;   // db, schema, name
  int expansions_ = 0;
};

}  // namespace

Status CheckStatement(duck::Connection& conn, std::string_view statement,
                      const AccessContext& ctx) {
  if (ctx.grants == nullptr) return InternalError("authorization: no grants to check against");
  Checker c(conn, ctx);
  return c.Text(statement, 0);
}

Result<std::set<std::string>> DefinedObjects(duck::Connection& conn) {
  std::set<std::string> out;
  // Only the session's own temporary objects: shared ones may be anybody's.
  ASSIGN_OR_RETURN(auto views, conn.QueryText("SELECT view_name, sql FROM duckdb_views() WHERE "
                                              "NOT internal AND temporary"));
  for (auto& row : views) {
    if (row.size() == 2 && row[0] && row[1]) out.insert(AsciiLower(*row[0]) + "\n" + *row[1]);
  }
  ASSIGN_OR_RETURN(auto macros, conn.QueryText("SELECT function_name, macro_definition FROM "
                                               "duckdb_functions() WHERE function_type IN "
                                               "('macro', 'table_macro') AND NOT internal AND "
                                               "database_name = 'temp'"));
  for (auto& row : macros) {
    if (row.size() == 2 && row[0] && row[1]) out.insert(AsciiLower(*row[0]) + "\n" + *row[1]);
  }
  return out;
}

}  // namespace sluice::query::authz
