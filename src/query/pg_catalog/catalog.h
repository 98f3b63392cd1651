// pg_catalog: the Postgres catalog a query-server session shows its clients, built over
// DuckDB's own catalog functions (duckdb_tables(), duckdb_columns() ...).
//
//   RETURN_IF_ERROR(InstallCatalog(*conn, {.user = "alice"}));     // once per session
//   ASSIGN_OR_RETURN(std::string sql, RewriteForDuckDB(client_sql));  // every statement
//   conn->Query(sql) ...
//
// InstallCatalog creates TEMP macros and views on the session's connection: temp objects
// belong to that connection alone, go away with it, and are found before DuckDB's system
// pg_catalog for an unqualified name (RewriteForDuckDB turns pg_catalog.x into x). They
// are live views: a table created later shows up in pg_class at once.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "duck/database.h"

namespace sluice::query::pg_catalog {

struct CatalogOptions {
  // The role every object is owned by: pg_get_userbyid(), pg_roles, current_user.
  std::string user = "sluice";
  // What version() and current_setting('server_version') say; keep it equal to the
  // server_version ParameterStatus the server sends (psql shapes its queries by it).
  std::string server_version = "15.0";
};

// Creates (or replaces) the catalog emulation on `conn`. Run it on each session's
// connection before the session's first query, and before configuration is locked. A
// DuckDB error is returned as is (Internal: it means the SQL below no longer fits DuckDB).
Status InstallCatalog(duck::Connection& conn, const CatalogOptions& options = {});

// The SQL InstallCatalog runs (for tests and for reading).
std::string CatalogSql(const CatalogOptions& options);

// The names of the TEMP views InstallCatalog creates, so that a caller listing a
// session's own temp objects can leave them out.
const std::vector<std::string>& CatalogViewNames();

}  // namespace sluice::query::pg_catalog
