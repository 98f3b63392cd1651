// The access check every statement of a user who is not a superuser passes before it runs
// (docs/design/0020-data-authorization.md): what it would read, at any depth, against the
// user's grants.
//
//   lake.<ns>.<table> (time travel too)         SELECT on the table or a namespace above it
//   topic('name')                                SELECT ON TOPIC name
//   read_parquet('path'), read_csv, read_json,   READ ON DIRECTORY covering the path
//     glob, parquet_metadata..., FROM 'x.csv'
//   COPY ... TO 'path' / FROM 'path'             WRITE / READ ON DIRECTORY
//   a view or a macro                            what its definition reads (the invoker's
//                                                privileges, at every use)
//   query('...'), query_table, PRAGMA, CALL,     superusers only
//     EXPORT/IMPORT DATABASE, secrets
//
// SELECT statements (and EXPLAIN, DESCRIBE, SUMMARIZE, the query inside CREATE TABLE AS,
// INSERT and CREATE VIEW) are checked on DuckDB's own parse tree; other statements
// (UPDATE, DELETE, SET VARIABLE, ...) on their tokens, conservatively: a call of a file
// function, topic() or a macro, a view's name, or a file name in a FROM list anywhere in
// the text counts. A path must be a constant: a computed one is refused.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "base/status.h"
#include "duck/database.h"
#include "query/authz/grants.h"

namespace sluice::query {
class LakeCatalog;
}

namespace sluice::query::authz {

struct AccessContext {
  std::string user;
  const GrantSet* grants = nullptr;
  // Resolves lake."a.b".t as the lake planner does (a one-level namespace "a.b" when it
  // holds the table, else the levels a, b); null: always the levels.
  const LakeCatalog* catalog = nullptr;
  // Views and macros the server itself defined (the catalog emulation), as "name\n
  // definition": trusted while their definition is unchanged, not expanded.
  const std::set<std::string>* trusted = nullptr;
  // Whether a macro other than the emulation's may exist (a statement that could create one
  // has been seen): false skips reading them, which costs more than the rest of a check.
  bool user_macros = true;
};

// OK, or "42501: permission denied for ..." naming the first object refused (and the view
// or macro it was reached through). Runs small queries on `conn` (the parse, the views and
// macros of the session).
Status CheckStatement(duck::Connection& conn, std::string_view statement, const AccessContext& ctx);

// The session's views and macros at this moment, as AccessContext::trusted holds them.
Result<std::set<std::string>> DefinedObjects(duck::Connection& conn);

}  // namespace sluice::query::authz
