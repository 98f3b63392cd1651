// DuckDB's parse tree of a statement, parsed once and printed once, for the query planners
// (the lake planner, topic() bounds, the partitioned rewrites): one tree transformed in
// stages, as DuckDB's own planner does.
//
//   ASSIGN_OR_RETURN(SqlTree tree, SqlTree::Parse(conn, sql));   // one json_serialize_sql
//   if (tree.ok()) { ...stages change tree.doc() and call tree.MarkChanged()... }
//   ASSIGN_OR_RETURN(std::string out, tree.Render(conn));        // one json_deserialize_sql
//
// The tree is DuckDB's JSON (nlohmann::ordered_json, keys in DuckDB's order). A stage may
// put a placeholder table in it and register the SQL text that replaces the placeholder's
// name once the tree is SQL again (a Splice): the lake planner's scans, whose file lists
// would cost a json_serialize_sql of every path if they went into the tree.
// Nothing here throws: a tree of another shape than expected gives a Status or "not found".
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/database.h"

namespace sluice::query::sql_tree {

using Json = nlohmann::ordered_json;

// Text in place of a placeholder table: `marker` (the placeholder's table name, a fresh
// identifier no statement holds) becomes `sql` when the tree is printed.
struct Splice {
  std::string marker;
  std::string sql;  // "(SELECT ... FROM read_parquet(...))"
  // The column names the spliced SELECT reads by name (its select list's plain column
  // references), for the rewrites' "which columns does the rest of the query read".
  std::vector<std::string> columns;
};

// One statement's parse tree. Lifecycle: Parse, stages mutate doc(), Render. Not
// thread-safe; owned by the planning call (a session's thread).
class SqlTree {
 public:
  // Parses `sql` with one json_serialize_sql query on `conn`, which also reads the
  // session's default_collation. A leading EXPLAIN [ANALYZE] is kept aside and put back by
  // Render. An error Status means the query itself failed (interrupted, out of memory);
  // SQL DuckDB does not parse as SELECT statements gives a tree with ok() false and why.
  static Result<SqlTree> Parse(duck::Connection& conn, std::string_view sql);
  // A tree from JSON text as json_serialize_sql writes it (tests; malformed trees).
  static SqlTree FromJson(std::string_view sql, std::string_view json);

  // DuckDB parsed the statement (after the prefix) as SELECT statements.
  bool ok() const { return error_.empty(); }
  // Why not ok(): DuckDB's error message, or what was wrong with its answer.
  const std::string& error() const { return error_; }
  const std::string& text() const { return text_; }  // as given, prefix included
  std::string_view prefix() const { return std::string_view(text_).substr(0, prefix_length_); }
  const std::string& collation() const { return collation_; }  // "" unless Parse read one

  Json& doc() { return doc_; }
  const Json& doc() const { return doc_; }
  size_t statement_count() const;
  // The query node of statement `i` ({"type": "SELECT_NODE", ...}); InvalidArgument when the
  // tree has no such statement or it has no node.
  Result<Json*> Node(size_t i = 0);

  // A stage changed the tree: Render prints it (until then Render gives text()). False:
  // a stage put back the tree it was given.
  void MarkChanged(bool changed = true) { changed_ = changed; }
  bool changed() const { return changed_; }

  void AddSplice(Splice s) { splices_.push_back(std::move(s)); }
  const std::vector<Splice>& splices() const { return splices_; }
  // The splice whose marker is `table_name`, or null.
  const Splice* FindSplice(std::string_view table_name) const;

  // The statement as SQL: text() when nothing changed, else the prefix and the tree
  // through one json_deserialize_sql, each splice's marker (printed exactly once) replaced.
  Result<std::string> Render(duck::Connection& conn) const;
  // One query node (a part of this tree, or built from it) as SQL, without the prefix,
  // with the markers it holds replaced; trailing semicolons and spaces removed.
  Result<std::string> RenderNode(duck::Connection& conn, const Json& node) const;

 private:
  Result<std::string> Spliced(std::string sql, bool exactly_once) const;

  std::string text_;
  size_t prefix_length_ = 0;
  std::string error_;
  std::string collation_;
  Json doc_;
  bool changed_ = false;
  std::vector<Splice> splices_;
};

// ---- walkers -------------------------------------------------------------------------
// They take any JSON: where the tree is not what DuckDB writes they find nothing.

// `j[key]` when it is a string, else "".
std::string StringField(const Json& j, std::string_view key);
// A table reference: a FROM item (BASE_TABLE, SUBQUERY, JOIN, TABLE_FUNCTION, ...).
bool IsTableRef(const Json& j);
// Every table reference under `j` in document order: FROM clauses at any depth, both sides
// of joins, subqueries in FROM and in expressions, CTE bodies, both sides of set
// operations. `visit` returns whether to look inside the reference it was given.
void ForEachTableRef(Json& j, const std::function<bool(Json& ref)>& visit);
// Every SELECT_NODE under `j`, outer before inner.
void ForEachSelect(Json& j, const std::function<void(Json& select)>& visit);

// One WITH entry of a query node.
struct Cte {
  std::string name;  // as written
  Json* entry;       // {"key": name, "value": {"query": {"node": ...}, "aliases": ...}}
  Json* query_node;  // entry->value.query.node, null when missing
};
// The CTEs a query node defines (its cte_map), in order.
std::vector<Cte> Ctes(Json& node);

// The AND-ed parts of a WHERE clause (nothing under OR or NOT is one); none for null.
std::vector<const Json*> Conjuncts(const Json& where);

// ---- expressions -----------------------------------------------------------------------

// The SQL of the commonest constants, as json_deserialize_sql prints them, without asking
// it: integer, string and boolean literals and their casts to plain types (`TIMESTAMP
// '2024-07-01'` is a cast of a string). nullopt for anything else.
std::optional<std::string> SimpleConstantSql(const Json& e);
// The text of expression `e` through one json_deserialize_sql (of a `SELECT 1` template
// parsed once per process).
Result<std::string> ExpressionSql(duck::Connection& conn, const Json& e);
// The texts of `exprs`: SimpleConstantSql's where it knows them, the rest in one
// json_deserialize_sql (an IN list of a thousand values is one call, not a thousand);
// nullopt where that call failed.
std::vector<std::optional<std::string>> ExpressionsSql(duck::Connection& conn,
                                                       const std::vector<const Json*>& exprs);
// The tree of expression `text` (`SELECT <text>`'s one select item): parsed once per
// process per text, for the fixed templates the planners fill in (at most a few hundred
// texts are kept). InvalidArgument when it does not parse as one expression.
Result<Json> ParseExpression(duck::Connection& conn, std::string_view text);

// ---- counting ----------------------------------------------------------------------------

// The json_serialize_sql and json_deserialize_sql queries run by this module since the
// process started (all threads): how tests see that a statement is parsed and printed once.
struct RoundTrips {
  uint64_t parses = 0;
  uint64_t renders = 0;
};
RoundTrips CountRoundTrips();

}  // namespace sluice::query::sql_tree
