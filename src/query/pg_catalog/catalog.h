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

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "duck/database.h"

namespace sluice::query::pg_catalog {

struct CatalogOptions {
  // The role every object is owned by: pg_get_userbyid(), pg_roles, current_user.
  std::string user = "sluice";
  // The database the client asked for: current_database(), pg_database's name for
  // DuckDB's own, information_schema's table_catalog.
  std::string database = "sluice";
  // What version() and current_setting('server_version') say; keep it equal to the
  // server_version ParameterStatus the server sends (psql shapes its queries by it).
  std::string server_version = "15.0";
};

// Creates (or replaces) the catalog emulation on `conn`. Run it on each session's
// connection before the session's first query, and before configuration is locked. A
// DuckDB error is returned as is (Internal: it means the SQL below no longer fits DuckDB).
Status InstallCatalog(duck::Connection& conn, const CatalogOptions& options = {});

// A relation the server answers for that DuckDB's catalog does not hold (an Iceberg table
// sluice plans itself): shown like a table in pg_namespace, pg_class, pg_attribute,
// pg_description and information_schema.tables / columns.
struct ExternalColumn {
  std::string name;
  std::string duckdb_type;  // DuckDB's SQL spelling: "BIGINT", "DECIMAL(10,2)", "VARCHAR[]"
  bool nullable = true;
  std::string comment;  // "" for none
};
struct ExternalRelation {
  std::string schema;  // shown as nspname, e.g. "lake.sales"
  std::string name;
  std::vector<ExternalColumn> columns;
  bool is_view = false;
  std::string comment;  // "" for none
  // Its privileges as Postgres prints an aclitem ("alice=r/sluice"), for pg_class.relacl
  // and psql's \dp; none: NULL (the owner's defaults).
  std::vector<std::string> acl;
};

// External relations get oids from kExternalRelationOidBase (their schemas from
// kExternalNamespaceOidBase): far above DuckDB's catalog oids (a counter from about
// 20000), and below 2^31, so that clients reading an oid as a 32-bit integer (Postgres's
// Oid is uint32; JDBC often narrows to int) read it whole.
inline constexpr int64_t kExternalRelationOidBase = 2'000'000'000;
inline constexpr int64_t kExternalNamespaceOidBase = 1'999'000'000;

// Replaces the session's external relations with `relations` (after InstallCatalog, on the
// same connection; call again when the lake's tables change). Oids follow the order of
// `relations`.
Status SetExternalRelations(duck::Connection& conn, const std::vector<ExternalRelation>& relations);

// The SQL InstallCatalog runs (for tests and for reading).
std::string CatalogSql(const CatalogOptions& options);

// The names of the TEMP views InstallCatalog creates, so that a caller listing a
// session's own temp objects can leave them out.
const std::vector<std::string>& CatalogViewNames();

}  // namespace sluice::query::pg_catalog
