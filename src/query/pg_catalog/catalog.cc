// The catalog emulation is SQL: TEMP views shaped like Postgres 15's catalog relations
// (the columns psql 15 and the common drivers read, with Postgres's types where DuckDB
// has them), over DuckDB's duckdb_*() functions, and TEMP macros for the catalog
// functions. Objects are owned by role 10 (CatalogOptions::user); sluice's oids are
// DuckDB's catalog oids, and types use Postgres's own oids (pg_types.h).
#include "query/pg_catalog/catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "duck/appender.h"
#include "duck/data_chunk.h"
#include "query/pg_catalog/pg_types.h"

namespace sluice::query::pg_catalog {
namespace {

// "15.4" -> "150004", as Postgres 10+ numbers its versions.
std::string ServerVersionNum(std::string_view version) {
  int major = 0, minor = 0;
  std::sscanf(std::string(version).c_str(), "%d.%d", &major, &minor);
  return fmt::format("{}", major * 10000 + minor);
}

// The DuckDB spellings PgTypeForDuckDB() maps, as a table, so that pg_attribute can join it.
std::string TypeMapValues() {
  static constexpr const char* kDuck[] = {"BOOLEAN",
                                          "TINYINT",
                                          "SMALLINT",
                                          "INTEGER",
                                          "BIGINT",
                                          "UTINYINT",
                                          "USMALLINT",
                                          "UINTEGER",
                                          "UBIGINT",
                                          "HUGEINT",
                                          "UHUGEINT",
                                          "FLOAT",
                                          "DOUBLE",
                                          "DECIMAL",
                                          "VARCHAR",
                                          "BLOB",
                                          "DATE",
                                          "TIME",
                                          "TIMESTAMP",
                                          "TIMESTAMP_S",
                                          "TIMESTAMP_MS",
                                          "TIMESTAMP_NS",
                                          "TIMESTAMP WITH TIME ZONE",
                                          "TIME WITH TIME ZONE",
                                          "INTERVAL",
                                          "UUID",
                                          "JSON",
                                          "BIT",
                                          "BIGNUM"};
  std::string out;
  for (const char* d : kDuck) {
    for (const char* suffix : {"", "[]"}) {
      const std::string duck = std::string(d) + suffix;
      const PgTypeRef ref = PgTypeForDuckDB(duck);
      if (!out.empty()) out += ", ";
      out += fmt::format("('{}', {})", duck, ref.oid);
    }
  }
  return out;
}

std::string PgTypeValues() {
  std::string out;
  for (const PgType& t : PgTypes()) {
    if (!out.empty()) out += ",\n  ";
    out += fmt::format("({}, '{}', {}, '{}', {}, {}, {})", t.oid, t.name, t.length,
                       std::string(1, t.category), t.element, t.array,
                       duck::QuoteLiteral(t.format_name));
  }
  return out;
}

// format_type(oid, typmod): a CASE over the type table, numeric's typmod spelled out.
std::string FormatTypeCase() {
  std::string out =
      "CASE WHEN type_oid IS NULL THEN NULL "
      "WHEN type_oid IN (1700, 1231) AND typemod >= 4 THEN 'numeric(' || "
      "((typemod - 4) >> 16) || ',' || ((typemod - 4) & 65535) || ')' || "
      "CASE WHEN type_oid = 1231 THEN '[]' ELSE '' END ";
  for (const PgType& t : PgTypes()) {
    out += fmt::format("WHEN type_oid = {} THEN {} ", t.oid, duck::QuoteLiteral(t.format_name));
  }
  out += "ELSE '\x3f\x3f\x3f' END";  // '???', spelled so that it is not a trigraph
  return out;
}

constexpr const char* kSql = R"SQL(
CREATE OR REPLACE TEMP VIEW sluice_pg_type_map AS
SELECT * FROM (VALUES {type_map}) v(duck, oid);

CREATE OR REPLACE TEMP VIEW sluice_pg_types AS
SELECT * FROM (VALUES
  {pg_types}) v(oid, typname, typlen, typcategory, typelem, typarray, format_name);

-- Relations the server answers for that DuckDB's catalog does not hold (Iceberg tables):
-- filled by SetExternalRelations().
CREATE TEMP TABLE IF NOT EXISTS sluice_pg_ext_relations(
  oid BIGINT, nspoid BIGINT, nspname VARCHAR, relname VARCHAR, relkind VARCHAR, comment VARCHAR,
  acl VARCHAR[]);
CREATE TEMP TABLE IF NOT EXISTS sluice_pg_ext_columns(
  relid BIGINT, attname VARCHAR, attnum INTEGER, data_type VARCHAR, numeric_precision INTEGER,
  numeric_scale INTEGER, not_null BOOLEAN, comment VARCHAR);

-- Relations of the user's databases (not DuckDB's system catalog, not temp objects, which
-- include this emulation), and the external ones.
CREATE OR REPLACE TEMP VIEW sluice_pg_relations AS
SELECT table_oid AS oid, table_name AS relname, schema_oid AS relnamespace, 'r' AS relkind,
       column_count::SMALLINT AS relnatts, estimated_size::FLOAT AS reltuples,
       index_count > 0 AS relhasindex, check_constraint_count::SMALLINT AS relchecks,
       database_name, schema_name, comment, 2::BIGINT AS relam, NULL::VARCHAR[] AS relacl
FROM duckdb_tables() WHERE NOT internal AND NOT temporary
UNION ALL
SELECT view_oid, view_name, schema_oid, 'v', column_count, 0, false, 0, database_name,
       schema_name, comment, 0, NULL
FROM duckdb_views() WHERE NOT internal AND NOT temporary
UNION ALL
SELECT sequence_oid, sequence_name, schema_oid, 'S', 3, 1, false, 0, database_name,
       schema_name, comment, 0, NULL
FROM duckdb_sequences() WHERE NOT temporary
UNION ALL
SELECT index_oid, index_name, schema_oid, 'i', 1, 0, false, 0, database_name, schema_name,
       comment, 403, NULL
FROM duckdb_indexes() WHERE database_name NOT IN ('system', 'temp')
UNION ALL
SELECT r.oid, r.relname, r.nspoid, r.relkind,
       (SELECT count(*) FROM sluice_pg_ext_columns c WHERE c.relid = r.oid), 0, false, 0,
       NULL, r.nspname, r.comment, CASE WHEN r.relkind = 'r' THEN 2 ELSE 0 END, r.acl
FROM sluice_pg_ext_relations r;

-- Columns of those relations.
CREATE OR REPLACE TEMP VIEW sluice_pg_columns AS
SELECT table_oid, column_name, column_index, data_type, numeric_precision, numeric_scale,
       is_nullable, column_default, comment
FROM duckdb_columns() WHERE NOT internal AND database_name NOT IN ('system', 'temp')
UNION ALL
SELECT relid, attname, attnum, data_type, numeric_precision, numeric_scale, NOT not_null, NULL,
       comment
FROM sluice_pg_ext_columns;

-- Visible: in the current database and in current_schema() or DuckDB's search_path.
CREATE OR REPLACE TEMP VIEW sluice_pg_visible AS
SELECT oid FROM sluice_pg_relations
WHERE database_name = system.main.current_database()
  AND (schema_name = current_schema()
       OR list_contains(string_split(coalesce((SELECT value FROM duckdb_settings()
                                                WHERE name = 'search_path'), ''), ','),
                        schema_name));

CREATE OR REPLACE TEMP VIEW pg_namespace AS
SELECT oid, CASE WHEN database_name = system.main.current_database() THEN schema_name
                 ELSE database_name || '.' || schema_name END AS nspname,
       10::BIGINT AS nspowner, NULL::VARCHAR[] AS nspacl
FROM duckdb_schemas() WHERE database_name NOT IN ('system', 'temp')
UNION ALL
SELECT oid, schema_name, 10, NULL FROM duckdb_schemas()
WHERE database_name = 'system' AND schema_name IN ('pg_catalog', 'information_schema')
UNION ALL
SELECT DISTINCT nspoid, nspname, 10, NULL FROM sluice_pg_ext_relations;

CREATE OR REPLACE TEMP VIEW pg_class AS
SELECT oid, relname, relnamespace, 0::BIGINT AS reltype, 0::BIGINT AS reloftype,
       10::BIGINT AS relowner, relam, 0::BIGINT AS relfilenode, 0::BIGINT AS reltablespace,
       0::INTEGER AS relpages, reltuples, 0::INTEGER AS relallvisible,
       0::BIGINT AS reltoastrelid, relhasindex, false AS relisshared, 'p' AS relpersistence,
       relkind, relnatts, relchecks, false AS relhasoids, false AS relhasrules,
       false AS relhastriggers, false AS relhassubclass, false AS relrowsecurity,
       false AS relforcerowsecurity, true AS relispopulated, 'd' AS relreplident,
       false AS relispartition, 0::BIGINT AS relrewrite, 0::BIGINT AS relfrozenxid,
       0::BIGINT AS relminmxid, relacl, NULL::VARCHAR[] AS reloptions,
       NULL::VARCHAR AS relpartbound
FROM sluice_pg_relations;

CREATE OR REPLACE TEMP VIEW pg_type AS
SELECT oid::BIGINT AS oid, typname,
       (SELECT oid FROM duckdb_schemas() WHERE database_name = 'system'
        AND schema_name = 'pg_catalog') AS typnamespace,
       10::BIGINT AS typowner, typlen::SMALLINT AS typlen, typlen BETWEEN 1 AND 8 AS typbyval,
       'b' AS typtype, typcategory, false AS typispreferred, true AS typisdefined,
       ',' AS typdelim, 0::BIGINT AS typrelid, 0::BIGINT AS typsubscript,
       typelem::BIGINT AS typelem, typarray::BIGINT AS typarray,
       CASE WHEN typelem <> 0 THEN 'array_in' ELSE typname || 'in' END AS typinput,
       CASE WHEN typelem <> 0 THEN 'array_out' ELSE typname || 'out' END AS typoutput,
       CASE WHEN typelem <> 0 THEN 'array_recv' ELSE typname || 'recv' END AS typreceive,
       CASE WHEN typelem <> 0 THEN 'array_send' ELSE typname || 'send' END AS typsend,
       '-' AS typmodin, '-' AS typmodout, '-' AS typanalyze,
       CASE typlen WHEN 8 THEN 'd' WHEN 2 THEN 's' WHEN 1 THEN 'c' ELSE 'i' END AS typalign,
       CASE WHEN typlen = -1 THEN 'x' ELSE 'p' END AS typstorage, false AS typnotnull,
       0::BIGINT AS typbasetype, -1::INTEGER AS typtypmod, 0::INTEGER AS typndims,
       CASE WHEN typcategory = 'S' AND typname <> 'name' THEN 100 ELSE 0 END::BIGINT AS typcollation,
       NULL::VARCHAR AS typdefaultbin, NULL::VARCHAR AS typdefault, NULL::VARCHAR[] AS typacl
FROM sluice_pg_types;

CREATE OR REPLACE TEMP VIEW pg_attribute AS
SELECT c.table_oid AS attrelid, c.column_name AS attname,
       coalesce(m.oid, 25)::BIGINT AS atttypid, -1::INTEGER AS attstattarget,
       coalesce(t.typlen, -1)::SMALLINT AS attlen, c.column_index::SMALLINT AS attnum,
       (CASE WHEN t.typelem <> 0 THEN 1 ELSE 0 END)::INTEGER AS attndims,
       -1::INTEGER AS attcacheoff,
       coalesce(CASE WHEN c.data_type LIKE 'DECIMAL(%' THEN
                  ((c.numeric_precision << 16) | c.numeric_scale) + 4 END, -1)::INTEGER AS atttypmod,
       coalesce(t.typlen BETWEEN 1 AND 8, false) AS attbyval,
       CASE WHEN coalesce(t.typlen, -1) = -1 THEN 'x' ELSE 'p' END AS attstorage,
       CASE coalesce(t.typlen, -1) WHEN 8 THEN 'd' WHEN 2 THEN 's' WHEN 1 THEN 'c' ELSE 'i' END AS attalign,
       NOT c.is_nullable AS attnotnull, c.column_default IS NOT NULL AS atthasdef,
       false AS atthasmissing, '' AS attidentity, '' AS attgenerated, false AS attisdropped,
       true AS attislocal, 0::INTEGER AS attinhcount,
       (CASE WHEN coalesce(m.oid, 25) IN (25, 1043, 1042) THEN 100 ELSE 0 END)::BIGINT AS attcollation,
       '' AS attcompression, NULL::VARCHAR[] AS attacl, NULL::VARCHAR[] AS attoptions,
       NULL::VARCHAR[] AS attfdwoptions, NULL::VARCHAR AS attmissingval
FROM sluice_pg_columns c
LEFT JOIN sluice_pg_type_map m
       ON m.duck = regexp_replace(upper(c.data_type), '\([^)]*\)', '', 'g')
LEFT JOIN sluice_pg_types t ON t.oid = coalesce(m.oid, 25);

CREATE OR REPLACE TEMP VIEW pg_attrdef AS
SELECT table_oid * 10000 + column_index AS oid, table_oid AS adrelid,
       column_index::SMALLINT AS adnum, column_default AS adbin
FROM sluice_pg_columns WHERE column_default IS NOT NULL;

CREATE OR REPLACE TEMP VIEW pg_constraint AS
SELECT table_oid * 1000000 + constraint_index AS oid, constraint_name AS conname,
       schema_oid AS connamespace,
       CASE constraint_type WHEN 'PRIMARY KEY' THEN 'p' WHEN 'UNIQUE' THEN 'u'
                            WHEN 'CHECK' THEN 'c' WHEN 'FOREIGN KEY' THEN 'f' END AS contype,
       false AS condeferrable, false AS condeferred, true AS convalidated,
       table_oid AS conrelid, 0::BIGINT AS contypid, 0::BIGINT AS conindid,
       0::BIGINT AS conparentid, 0::BIGINT AS confrelid, 'a' AS confupdtype,
       'a' AS confdeltype, 's' AS confmatchtype, true AS conislocal, 0::INTEGER AS coninhcount,
       false AS connoinherit,
       list_transform(constraint_column_indexes, x -> (x + 1)::SMALLINT) AS conkey,
       NULL::SMALLINT[] AS confkey, expression AS conbin, constraint_text AS condef
FROM duckdb_constraints()
WHERE constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'CHECK', 'FOREIGN KEY')
  AND database_name NOT IN ('system', 'temp');

CREATE OR REPLACE TEMP VIEW pg_index AS
SELECT index_oid AS indexrelid, table_oid AS indrelid, 1::SMALLINT AS indnatts,
       1::SMALLINT AS indnkeyatts, is_unique AS indisunique, false AS indnullsnotdistinct,
       is_primary AS indisprimary, false AS indisexclusion, true AS indimmediate,
       false AS indisclustered, true AS indisvalid, false AS indcheckxmin, true AS indisready,
       true AS indislive, false AS indisreplident, NULL::SMALLINT[] AS indkey,
       NULL::BIGINT[] AS indcollation, NULL::BIGINT[] AS indclass, NULL::SMALLINT[] AS indoption,
       expressions AS indexprs, NULL::VARCHAR AS indpred
FROM duckdb_indexes() WHERE database_name NOT IN ('system', 'temp');

CREATE OR REPLACE TEMP VIEW pg_description AS
SELECT oid AS objoid, 1259::BIGINT AS classoid, 0::INTEGER AS objsubid, comment AS description
FROM sluice_pg_relations WHERE comment IS NOT NULL
UNION ALL
SELECT table_oid, 1259, column_index, comment FROM sluice_pg_columns WHERE comment IS NOT NULL
UNION ALL
SELECT oid, 2615, 0, comment FROM duckdb_schemas()
WHERE comment IS NOT NULL AND database_name NOT IN ('system', 'temp');

CREATE OR REPLACE TEMP VIEW pg_am AS
SELECT * FROM (VALUES (2::BIGINT, 'heap', 'heap_tableam_handler', 't'),
                      (403::BIGINT, 'btree', 'bthandler', 'i')) v(oid, amname, amhandler, amtype);

CREATE OR REPLACE TEMP VIEW pg_collation AS
SELECT oid, collname,
       (SELECT oid FROM duckdb_schemas() WHERE database_name = 'system'
        AND schema_name = 'pg_catalog') AS collnamespace,
       10::BIGINT AS collowner, collprovider, true AS collisdeterministic,
       -1::INTEGER AS collencoding, collcollate, collcollate AS collctype,
       NULL::VARCHAR AS colliculocale, NULL::VARCHAR AS collversion
FROM (VALUES (100::BIGINT, 'default', 'd', NULL), (950::BIGINT, 'C', 'c', 'C'),
             (951::BIGINT, 'POSIX', 'c', 'POSIX')) v(oid, collname, collprovider, collcollate);

CREATE OR REPLACE TEMP VIEW pg_roles AS
SELECT 10::BIGINT AS oid, {user} AS rolname, true AS rolsuper, true AS rolinherit,
       false AS rolcreaterole, false AS rolcreatedb, true AS rolcanlogin,
       false AS rolreplication, -1::INTEGER AS rolconnlimit, '********' AS rolpassword,
       NULL::TIMESTAMPTZ AS rolvaliduntil, false AS rolbypassrls, NULL::VARCHAR[] AS rolconfig;

CREATE OR REPLACE TEMP VIEW pg_user AS
SELECT {user} AS usename, 10::BIGINT AS usesysid, false AS usecreatedb, true AS usesuper,
       false AS userepl, false AS usebypassrls, '********' AS passwd,
       NULL::TIMESTAMPTZ AS valuntil, NULL::VARCHAR[] AS useconfig;

CREATE OR REPLACE TEMP VIEW pg_database AS
SELECT database_oid AS oid,
       CASE WHEN database_name = system.main.current_database() THEN current_database() ELSE database_name END
         AS datname, 10::BIGINT AS datdba,
       6::INTEGER AS encoding, 'c' AS datlocprovider, false AS datistemplate,
       true AS datallowconn, -1::INTEGER AS datconnlimit, 0::BIGINT AS datfrozenxid,
       0::BIGINT AS datminmxid, 1663::BIGINT AS dattablespace, 'C' AS datcollate,
       'C' AS datctype, NULL::VARCHAR AS daticulocale, NULL::VARCHAR AS datcollversion,
       NULL::VARCHAR[] AS datacl
FROM duckdb_databases() WHERE NOT internal;

-- Postgres's two built-in tablespaces (psql's \l+ joins pg_database to them).
CREATE OR REPLACE TEMP VIEW pg_tablespace AS
SELECT * FROM (VALUES (1663::BIGINT, 'pg_default', 10::BIGINT, NULL::VARCHAR[], NULL::VARCHAR[]),
                      (1664::BIGINT, 'pg_global', 10::BIGINT, NULL::VARCHAR[], NULL::VARCHAR[]))
  AS t(oid, spcname, spcowner, spcacl, spcoptions);

-- Relations DuckDB has no counterpart for: empty, with the columns clients read.
CREATE OR REPLACE TEMP VIEW pg_policy AS
SELECT NULL::BIGINT AS oid, NULL::VARCHAR AS polname, NULL::BIGINT AS polrelid,
       NULL::VARCHAR AS polcmd, NULL::BOOLEAN AS polpermissive, NULL::BIGINT[] AS polroles,
       NULL::VARCHAR AS polqual, NULL::VARCHAR AS polwithcheck WHERE false;
CREATE OR REPLACE TEMP VIEW pg_statistic_ext AS
SELECT NULL::BIGINT AS oid, NULL::BIGINT AS stxrelid, NULL::VARCHAR AS stxname,
       NULL::BIGINT AS stxnamespace, NULL::BIGINT AS stxowner, NULL::INTEGER AS stxstattarget,
       NULL::SMALLINT[] AS stxkeys, NULL::VARCHAR[] AS stxkind, NULL::VARCHAR AS stxexprs
WHERE false;
CREATE OR REPLACE TEMP VIEW pg_publication AS
SELECT NULL::BIGINT AS oid, NULL::VARCHAR AS pubname, NULL::BIGINT AS pubowner,
       NULL::BOOLEAN AS puballtables, NULL::BOOLEAN AS pubinsert, NULL::BOOLEAN AS pubupdate,
       NULL::BOOLEAN AS pubdelete, NULL::BOOLEAN AS pubtruncate, NULL::BOOLEAN AS pubviaroot
WHERE false;
CREATE OR REPLACE TEMP VIEW pg_publication_namespace AS
SELECT NULL::BIGINT AS oid, NULL::BIGINT AS pnpubid, NULL::BIGINT AS pnnspid WHERE false;
CREATE OR REPLACE TEMP VIEW pg_publication_rel AS
SELECT NULL::BIGINT AS oid, NULL::BIGINT AS prpubid, NULL::BIGINT AS prrelid,
       NULL::VARCHAR AS prqual, NULL::SMALLINT[] AS prattrs WHERE false;
CREATE OR REPLACE TEMP VIEW pg_inherits AS
SELECT NULL::BIGINT AS inhrelid, NULL::BIGINT AS inhparent, NULL::INTEGER AS inhseqno,
       NULL::BOOLEAN AS inhdetachpending WHERE false;
CREATE OR REPLACE TEMP VIEW pg_rewrite AS
SELECT NULL::BIGINT AS oid, NULL::VARCHAR AS rulename, NULL::BIGINT AS ev_class,
       NULL::VARCHAR AS ev_type, NULL::VARCHAR AS ev_enabled, NULL::BOOLEAN AS is_instead,
       NULL::VARCHAR AS ev_qual, NULL::VARCHAR AS ev_action WHERE false;
CREATE OR REPLACE TEMP VIEW pg_trigger AS
SELECT NULL::BIGINT AS oid, NULL::BIGINT AS tgrelid, NULL::BIGINT AS tgparentid,
       NULL::VARCHAR AS tgname, NULL::BIGINT AS tgfoid, NULL::SMALLINT AS tgtype,
       NULL::VARCHAR AS tgenabled, NULL::BOOLEAN AS tgisinternal, NULL::BIGINT AS tgconstrrelid,
       NULL::BIGINT AS tgconstrindid, NULL::BIGINT AS tgconstraint, NULL::BOOLEAN AS tgdeferrable,
       NULL::BOOLEAN AS tginitdeferred, NULL::SMALLINT AS tgnargs, NULL::SMALLINT[] AS tgattr,
       NULL::BLOB AS tgargs, NULL::VARCHAR AS tgqual, NULL::VARCHAR AS tgoldtable,
       NULL::VARCHAR AS tgnewtable WHERE false;
CREATE OR REPLACE TEMP VIEW pg_foreign_table AS
SELECT NULL::BIGINT AS ftrelid, NULL::BIGINT AS ftserver, NULL::VARCHAR[] AS ftoptions WHERE false;
CREATE OR REPLACE TEMP VIEW pg_partitioned_table AS
SELECT NULL::BIGINT AS partrelid, NULL::VARCHAR AS partstrat, NULL::SMALLINT AS partnatts,
       NULL::BIGINT AS partdefid, NULL::SMALLINT[] AS partattrs, NULL::BIGINT[] AS partclass,
       NULL::BIGINT[] AS partcollation, NULL::VARCHAR AS partexprs WHERE false;
CREATE OR REPLACE TEMP VIEW pg_auth_members AS
SELECT NULL::BIGINT AS oid, NULL::BIGINT AS roleid, NULL::BIGINT AS member,
       NULL::BIGINT AS grantor, NULL::BOOLEAN AS admin_option WHERE false;
CREATE OR REPLACE TEMP VIEW pg_extension AS
SELECT NULL::BIGINT AS oid, NULL::VARCHAR AS extname, NULL::BIGINT AS extowner,
       NULL::BIGINT AS extnamespace, NULL::BOOLEAN AS extrelocatable, NULL::VARCHAR AS extversion,
       NULL::BIGINT[] AS extconfig, NULL::VARCHAR[] AS extcondition WHERE false;

-- DuckDB's information_schema without this emulation's TEMP objects (RewriteForDuckDB
-- sends information_schema.tables and the like here).
CREATE OR REPLACE TEMP VIEW sluice_information_schema_tables AS
SELECT * FROM information_schema.tables WHERE table_catalog <> 'temp' OR table_name NOT IN ({own})
UNION ALL BY NAME
SELECT current_database() AS table_catalog, nspname AS table_schema, relname AS table_name,
       CASE relkind WHEN 'v' THEN 'VIEW' ELSE 'BASE TABLE' END AS table_type,
       'NO' AS is_insertable_into, 'NO' AS is_typed, comment AS TABLE_COMMENT
FROM sluice_pg_ext_relations;
CREATE OR REPLACE TEMP VIEW sluice_information_schema_columns AS
SELECT * FROM information_schema.columns WHERE table_catalog <> 'temp' OR table_name NOT IN ({own})
UNION ALL BY NAME
SELECT current_database() AS table_catalog, r.nspname AS table_schema, r.relname AS table_name,
       c.attname AS column_name, c.attnum AS ordinal_position,
       CASE WHEN c.not_null THEN 'NO' ELSE 'YES' END AS is_nullable, c.data_type AS data_type,
       c.numeric_precision AS numeric_precision, c.numeric_scale AS numeric_scale,
       c.comment AS COLUMN_COMMENT
FROM sluice_pg_ext_columns c JOIN sluice_pg_ext_relations r ON r.oid = c.relid;
CREATE OR REPLACE TEMP VIEW sluice_information_schema_views AS
SELECT * FROM information_schema.views WHERE table_catalog <> 'temp' OR table_name NOT IN ({own});
CREATE OR REPLACE TEMP VIEW sluice_information_schema_schemata AS
SELECT * FROM information_schema.schemata;

-- Functions. A TEMP macro is found before DuckDB's own of the same name.
CREATE OR REPLACE TEMP MACRO version() AS {version};
CREATE OR REPLACE TEMP MACRO current_user() AS {user};
-- The database the client named; DuckDB's own is system.main.current_database().
CREATE OR REPLACE TEMP MACRO current_database() AS {database};
CREATE OR REPLACE TEMP MACRO session_user() AS {user};
CREATE OR REPLACE TEMP MACRO pg_get_userbyid(role_oid) AS
  CASE WHEN role_oid = 10 THEN {user} ELSE 'unknown (OID=' || role_oid || ')' END;
CREATE OR REPLACE TEMP MACRO pg_table_is_visible(rel) AS
  rel IN (SELECT oid FROM sluice_pg_visible);
-- Sizes (psql's \dt+ and \l+): unknown, as for a foreign table; NULL prints as nothing.
CREATE OR REPLACE TEMP MACRO pg_table_size(rel) AS NULL::BIGINT;
CREATE OR REPLACE TEMP MACRO pg_total_relation_size(rel) AS NULL::BIGINT;
CREATE OR REPLACE TEMP MACRO pg_relation_size(rel) AS NULL::BIGINT, (rel, fork) AS NULL::BIGINT;
CREATE OR REPLACE TEMP MACRO pg_database_size(db) AS NULL::BIGINT;
CREATE OR REPLACE TEMP MACRO pg_size_pretty(bytes) AS format_bytes(bytes::BIGINT);
CREATE OR REPLACE TEMP MACRO pg_tablespace_location(spc) AS '';
CREATE OR REPLACE TEMP MACRO pg_tablespace_size(spc) AS NULL::BIGINT;
CREATE OR REPLACE TEMP MACRO format_type(type_oid, typemod) AS {format_type};
CREATE OR REPLACE TEMP MACRO pg_get_expr(expr, rel) AS expr, (expr, rel, pretty) AS expr;
CREATE OR REPLACE TEMP MACRO pg_get_indexdef(idx) AS
  (SELECT sql FROM duckdb_indexes() WHERE index_oid = idx),
  (idx, col, pretty) AS (SELECT sql FROM duckdb_indexes() WHERE index_oid = idx);
CREATE OR REPLACE TEMP MACRO pg_get_constraintdef(con) AS
  (SELECT condef FROM pg_constraint WHERE oid = con),
  (con, pretty) AS (SELECT condef FROM pg_constraint WHERE oid = con);
CREATE OR REPLACE TEMP MACRO pg_get_viewdef(vw) AS
  (SELECT regexp_extract(sql, '(?is)^CREATE\s.*?\bVIEW\s.*?\sAS\s(.*)$', 1)
   FROM duckdb_views() WHERE view_oid = vw),
  (vw, pretty) AS
  (SELECT regexp_extract(sql, '(?is)^CREATE\s.*?\bVIEW\s.*?\sAS\s(.*)$', 1)
   FROM duckdb_views() WHERE view_oid = vw);
CREATE OR REPLACE TEMP MACRO pg_get_function_result(fn) AS
  (SELECT min(return_type) FROM duckdb_functions() WHERE function_oid = fn);
CREATE OR REPLACE TEMP MACRO pg_get_function_arguments(fn) AS
  (SELECT min(array_to_string(parameters, ', ')) FROM duckdb_functions() WHERE function_oid = fn);
CREATE OR REPLACE TEMP MACRO pg_get_ruledef(rule_oid) AS NULL::VARCHAR,
  (rule_oid, pretty) AS NULL::VARCHAR;
CREATE OR REPLACE TEMP MACRO pg_get_statisticsobjdef_columns(stat_oid) AS NULL::VARCHAR;
CREATE OR REPLACE TEMP MACRO pg_get_partkeydef(rel) AS NULL::VARCHAR;
CREATE OR REPLACE TEMP MACRO pg_relation_is_publishable(rel) AS false;
CREATE OR REPLACE TEMP MACRO obj_description(obj) AS
  (SELECT description FROM pg_description WHERE objoid = obj AND objsubid = 0 LIMIT 1),
  (obj, catalog_name) AS
  (SELECT description FROM pg_description WHERE objoid = obj AND objsubid = 0
   AND classoid = CASE catalog_name WHEN 'pg_namespace' THEN 2615 ELSE 1259 END LIMIT 1);
CREATE OR REPLACE TEMP MACRO col_description(rel, col) AS
  (SELECT description FROM pg_description WHERE objoid = rel AND objsubid = col LIMIT 1);
CREATE OR REPLACE TEMP MACRO shobj_description(obj, catalog_name) AS NULL::VARCHAR;
CREATE OR REPLACE TEMP MACRO pg_encoding_to_char(enc) AS
  CASE enc WHEN 6 THEN 'UTF8' WHEN 0 THEN 'SQL_ASCII' ELSE '' END;
CREATE OR REPLACE TEMP MACRO array_upper(arr, dim) AS
  CASE WHEN dim = 1 AND len(arr) > 0 THEN len(arr) END;
CREATE OR REPLACE TEMP MACRO array_lower(arr, dim) AS
  CASE WHEN dim = 1 AND len(arr) > 0 THEN 1 END;
CREATE OR REPLACE TEMP MACRO current_schemas(include_implicit) AS
  CASE WHEN include_implicit THEN ['pg_catalog', current_schema()] ELSE [current_schema()] END;
CREATE OR REPLACE TEMP MACRO pg_is_in_recovery() AS false;
CREATE OR REPLACE TEMP MACRO set_config(setting_name, new_value, is_local) AS new_value;
CREATE OR REPLACE TEMP MACRO current_setting(setting_name) AS
  CASE lower(setting_name)
    {settings}
    ELSE (SELECT value FROM duckdb_settings() WHERE name = setting_name) END,
  (setting_name, missing_ok) AS
  CASE lower(setting_name)
    {settings}
    ELSE (SELECT value FROM duckdb_settings() WHERE name = setting_name) END;

-- The reg* casts (RewriteForDuckDB): a name to an oid, an oid to a name.
-- A name (schema-qualified, or visible) or, as in Postgres, an oid written as digits; a
-- parameter ($1::regclass) arrives here too, as text or as a number.
CREATE OR REPLACE TEMP MACRO sluice_regclass_oid(rel_name) AS
  CASE WHEN regexp_full_match(CAST(rel_name AS VARCHAR), '[0-9]+')
         THEN CAST(CAST(rel_name AS VARCHAR) AS BIGINT)
  ELSE CASE lower(replace(CAST(rel_name AS VARCHAR), '"', ''))
    {catalog_oids}
    ELSE (SELECT min(c.oid) FROM sluice_pg_relations c
          WHERE (c.schema_name || '.' || c.relname = replace(CAST(rel_name AS VARCHAR), '"', '')
                 AND coalesce(c.database_name, system.main.current_database()) = system.main.current_database())
             OR (c.relname = replace(CAST(rel_name AS VARCHAR), '"', '')
                 AND c.oid IN (SELECT oid FROM sluice_pg_visible))) END END;
CREATE OR REPLACE TEMP MACRO sluice_regclass_name(rel) AS
  coalesce((SELECT CASE WHEN c.oid IN (SELECT oid FROM sluice_pg_visible) THEN c.relname
                        ELSE n.nspname || '.' || c.relname END
            FROM sluice_pg_relations c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.oid = rel), CAST(rel AS VARCHAR));
CREATE OR REPLACE TEMP MACRO sluice_regtype_oid(type_name) AS
  (SELECT min(oid) FROM sluice_pg_types
   WHERE typname = lower(type_name) OR format_name = lower(type_name));
CREATE OR REPLACE TEMP MACRO sluice_regtype_name(type_oid) AS
  CASE WHEN type_oid = 0 THEN '-' ELSE format_type(type_oid, NULL) END;
CREATE OR REPLACE TEMP MACRO sluice_regnamespace_oid(nsp_name) AS
  (SELECT min(oid) FROM pg_namespace WHERE nspname = replace(nsp_name, '"', ''));
CREATE OR REPLACE TEMP MACRO sluice_regnamespace_name(nsp) AS
  coalesce((SELECT min(nspname) FROM pg_namespace WHERE oid = nsp), CAST(nsp AS VARCHAR));
CREATE OR REPLACE TEMP MACRO sluice_regproc_oid(proc_name) AS NULL::BIGINT;
CREATE OR REPLACE TEMP MACRO sluice_regproc_name(proc) AS CAST(proc AS VARCHAR);
CREATE OR REPLACE TEMP MACRO sluice_regrole_oid(role_name) AS
  CASE WHEN replace(role_name, '"', '') = {user} THEN 10::BIGINT END;
CREATE OR REPLACE TEMP MACRO sluice_regrole_name(role_oid) AS pg_get_userbyid(role_oid);
)SQL";

}  // namespace

std::string CatalogSql(const CatalogOptions& options) {
  const std::string user = duck::QuoteLiteral(options.user);
  const std::string settings = fmt::format(
      "WHEN 'server_version' THEN {} "
      "WHEN 'server_version_num' THEN {} "
      "WHEN 'server_encoding' THEN 'UTF8' WHEN 'client_encoding' THEN 'UTF8' "
      "WHEN 'datestyle' THEN 'ISO, MDY' WHEN 'intervalstyle' THEN 'postgres' "
      "WHEN 'standard_conforming_strings' THEN 'on' WHEN 'integer_datetimes' THEN 'on' "
      "WHEN 'max_identifier_length' THEN '63' WHEN 'lc_collate' THEN 'C' "
      "WHEN 'lc_ctype' THEN 'C' WHEN 'is_superuser' THEN 'on' "
      "WHEN 'default_transaction_isolation' THEN 'repeatable read' "
      "WHEN 'transaction_isolation' THEN 'repeatable read' "
      "WHEN 'default_transaction_read_only' THEN 'off' "
      "WHEN 'session_authorization' THEN {} WHEN 'application_name' THEN '' "
      "WHEN 'search_path' THEN current_schema() "
      "WHEN 'timezone' THEN (SELECT value FROM duckdb_settings() WHERE name = 'TimeZone') ",
      duck::QuoteLiteral(options.server_version),
      duck::QuoteLiteral(ServerVersionNum(options.server_version)), user);
  // Postgres's fixed oids for the catalog relations clients name in 'pg_class'::regclass.
  const std::string catalog_oids =
      "WHEN 'pg_class' THEN 1259 WHEN 'pg_catalog.pg_class' THEN 1259 "
      "WHEN 'pg_type' THEN 1247 WHEN 'pg_catalog.pg_type' THEN 1247 "
      "WHEN 'pg_attribute' THEN 1249 WHEN 'pg_catalog.pg_attribute' THEN 1249 "
      "WHEN 'pg_proc' THEN 1255 WHEN 'pg_catalog.pg_proc' THEN 1255 "
      "WHEN 'pg_namespace' THEN 2615 WHEN 'pg_catalog.pg_namespace' THEN 2615 "
      "WHEN 'pg_constraint' THEN 2606 WHEN 'pg_catalog.pg_constraint' THEN 2606 "
      "WHEN 'pg_description' THEN 2609 WHEN 'pg_catalog.pg_description' THEN 2609 "
      "WHEN 'pg_database' THEN 1262 WHEN 'pg_catalog.pg_database' THEN 1262 "
      "WHEN 'pg_extension' THEN 3079 WHEN 'pg_catalog.pg_extension' THEN 3079 "
      "WHEN 'pg_roles' THEN 1260 WHEN 'pg_catalog.pg_roles' THEN 1260 ";
  std::string own;
  for (const std::string& name : CatalogViewNames()) {
    own += (own.empty() ? "" : ", ") + duck::QuoteLiteral(name);
  }
  return fmt::format(fmt::runtime(kSql), fmt::arg("type_map", TypeMapValues()),
                     fmt::arg("pg_types", PgTypeValues()), fmt::arg("user", user),
                     fmt::arg("database", duck::QuoteLiteral(options.database)),
                     fmt::arg("version", duck::QuoteLiteral(fmt::format(
                                             "PostgreSQL {} (sluice, DuckDB {})",
                                             options.server_version, duck::LibraryVersion()))),
                     fmt::arg("format_type", FormatTypeCase()), fmt::arg("settings", settings),
                     fmt::arg("catalog_oids", catalog_oids), fmt::arg("own", own));
}

Status InstallCatalog(duck::Connection& conn, const CatalogOptions& options) {
  Status st = conn.Execute(CatalogSql(options));
  if (!st.ok()) return InternalError("installing the Postgres catalog emulation: {}", st.message());
  return Status::OK();
}

namespace {

// `rows` rows into the TEMP table `table` through DuckDB's appender, a chunk at a time:
// fill(chunk, i, row) writes row `row` at index i of the chunk.
template <typename Fill>
Status AppendRows(duck::Connection& conn, std::string_view table, size_t rows, Fill fill) {
  ASSIGN_OR_RETURN(duck::Appender app, duck::Appender::Open(conn, table, "main", "temp"));
  ASSIGN_OR_RETURN(duck::DataChunk chunk, duck::DataChunk::Create(app.ColumnTypes()));
  const size_t capacity = duck::DataChunk::Capacity();
  for (size_t from = 0; from < rows; from += capacity) {
    chunk.Reset();
    const size_t n = std::min(capacity, rows - from);
    for (size_t i = 0; i < n; ++i) RETURN_IF_ERROR(fill(chunk, i, from + i));
    chunk.SetSize(n);
    RETURN_IF_ERROR(app.Append(chunk));
  }
  return app.Flush();
}

// A VARCHAR cell: NULL for an empty text where the column means "none".
void TextOrNull(const duck::Vector& v, size_t i, std::string_view text) {
  if (text.empty()) {
    v.SetNull(i);
  } else {
    duck::Vector::SetValid(v.validity(), i);
    v.AssignString(i, text);
  }
}

Status FillExternalRelations(duck::Connection& conn,
                             const std::vector<ExternalRelation>& relations) {
  std::vector<std::string_view> schemas;
  RETURN_IF_ERROR(AppendRows(conn, "sluice_pg_ext_relations", relations.size(),
                             [&](const duck::DataChunk& chunk, size_t i, size_t row) -> Status {
                               const ExternalRelation& r = relations[row];
                               auto it = std::find(schemas.begin(), schemas.end(), r.schema);
                               const size_t schema_index = it - schemas.begin();
                               if (it == schemas.end()) schemas.push_back(r.schema);
                               chunk.column(0).data<int64_t>()[i] =
                                   kExternalRelationOidBase + static_cast<int64_t>(row);
                               chunk.column(1).data<int64_t>()[i] =
                                   kExternalNamespaceOidBase + static_cast<int64_t>(schema_index);
                               chunk.column(2).AssignString(i, r.schema);
                               chunk.column(3).AssignString(i, r.name);
                               chunk.column(4).AssignString(i, r.is_view ? "v" : "r");
                               TextOrNull(chunk.column(5), i, r.comment);
                               const duck::Vector acl = chunk.column(6);
                               if (r.acl.empty()) {
                                 acl.SetNull(i);
                                 acl.data<duck::ListEntry>()[i] = {acl.ListSize(), 0};
                                 return Status::OK();
                               }
                               duck::Vector::SetValid(acl.validity(), i);
                               const uint64_t at = acl.ListSize();
                               RETURN_IF_ERROR(acl.ListReserve(at + r.acl.size()));
                               const duck::Vector items = acl.ListChild();
                               for (size_t a = 0; a < r.acl.size(); ++a)
                                 items.AssignString(at + a, r.acl[a]);
                               RETURN_IF_ERROR(acl.ListSetSize(at + r.acl.size()));
                               acl.data<duck::ListEntry>()[i] = {at, r.acl.size()};
                               return Status::OK();
                             }));
  struct ColumnAt {
    size_t relation;
    size_t index;
  };
  std::vector<ColumnAt> columns;
  for (size_t r = 0; r < relations.size(); ++r) {
    for (size_t c = 0; c < relations[r].columns.size(); ++c) columns.push_back({r, c});
  }
  return AppendRows(
      conn, "sluice_pg_ext_columns", columns.size(),
      [&](const duck::DataChunk& chunk, size_t i, size_t row) -> Status {
        const ExternalColumn& col = relations[columns[row].relation].columns[columns[row].index];
        chunk.column(0).data<int64_t>()[i] =
            kExternalRelationOidBase + static_cast<int64_t>(columns[row].relation);
        chunk.column(1).AssignString(i, col.name);
        chunk.column(2).data<int32_t>()[i] = static_cast<int32_t>(columns[row].index + 1);
        chunk.column(3).AssignString(i, col.duckdb_type);
        const PgTypeRef type = PgTypeForDuckDB(col.duckdb_type);
        if (type.typmod >= 4) {
          duck::Vector::SetValid(chunk.column(4).validity(), i);
          duck::Vector::SetValid(chunk.column(5).validity(), i);
          chunk.column(4).data<int32_t>()[i] = ((type.typmod - 4) >> 16) & 0xffff;
          chunk.column(5).data<int32_t>()[i] = (type.typmod - 4) & 0xffff;
        } else {
          chunk.column(4).SetNull(i);
          chunk.column(5).SetNull(i);
        }
        chunk.column(6).data<bool>()[i] = !col.nullable;
        TextOrNull(chunk.column(7), i, col.comment);
        return Status::OK();
      });
}

}  // namespace

Status SetExternalRelations(duck::Connection& conn,
                            const std::vector<ExternalRelation>& relations) {
  // Through the appender: one INSERT of many VALUES rows cost DuckDB about 0.6 s to bind
  // for a thousand topics of seven columns, on every catalog read of a new session (the
  // console's SQL page asks at every load).
  Status st = conn.Execute(
      "BEGIN; DELETE FROM sluice_pg_ext_columns; DELETE FROM sluice_pg_ext_relations;");
  if (st.ok()) st = FillExternalRelations(conn, relations);
  if (st.ok()) st = conn.Execute("COMMIT");
  if (!st.ok()) {
    (void)conn.Execute("ROLLBACK");
    return st.WithContext("setting the catalog's external relations");
  }
  return Status::OK();
}

const std::vector<std::string>& CatalogViewNames() {
  static const std::vector<std::string> kNames = {"sluice_pg_type_map",
                                                  "sluice_pg_types",
                                                  "sluice_pg_ext_relations",
                                                  "sluice_pg_ext_columns",
                                                  "sluice_pg_relations",
                                                  "sluice_pg_columns",
                                                  "sluice_pg_visible",
                                                  "pg_namespace",
                                                  "pg_class",
                                                  "pg_type",
                                                  "pg_attribute",
                                                  "pg_attrdef",
                                                  "pg_constraint",
                                                  "pg_index",
                                                  "pg_description",
                                                  "pg_am",
                                                  "pg_collation",
                                                  "pg_roles",
                                                  "pg_user",
                                                  "pg_database",
                                                  "pg_tablespace",
                                                  "pg_policy",
                                                  "pg_statistic_ext",
                                                  "pg_publication",
                                                  "pg_publication_namespace",
                                                  "pg_publication_rel",
                                                  "pg_inherits",
                                                  "pg_rewrite",
                                                  "pg_trigger",
                                                  "pg_foreign_table",
                                                  "pg_partitioned_table",
                                                  "pg_auth_members",
                                                  "pg_extension",
                                                  "sluice_information_schema_tables",
                                                  "sluice_information_schema_columns",
                                                  "sluice_information_schema_views",
                                                  "sluice_information_schema_schemata"};
  return kNames;
}

}  // namespace sluice::query::pg_catalog
