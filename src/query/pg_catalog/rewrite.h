// pg_catalog: rewrites the Postgres-only syntax that Postgres clients send in their catalog
// queries (psql's \d family, drivers' metadata calls) into SQL DuckDB parses, so that the
// objects InstallCatalog() creates answer them.
//
//   ASSIGN_OR_RETURN(std::string duck_sql, RewriteForDuckDB(client_sql));
//
// What is rewritten (docs/design/0015-query-server-catalog.md):
//   - OPERATOR(pg_catalog.~), !~, ~*, !~* (and the unqualified OPERATOR(~) forms) into
//     regexp_matches(a, b[, 'i']), which has Postgres's unanchored meaning; other
//     OPERATOR(pg_catalog.op) forms into the bare operator;
//   - COLLATE pg_catalog.<any>, COLLATE "C" / "POSIX" / "default" / "ucs_basic" dropped;
//   - x::regclass, ::regtype, ::regnamespace, ::regproc, ::regrole (pg_catalog-qualified
//     or not): a string literal or $n parameter becomes the object's oid, anything else
//     the object's name;
//   - ::pg_catalog.T becomes ::T, and the Postgres types DuckDB lacks (name, xid, cid,
//     aclitem, pg_node_tree, int2vector, oidvector ...) become VARCHAR or BIGINT;
//   - pg_catalog.<name> becomes <name>, so that the session's temp objects of the same name
//     (InstallCatalog) shadow DuckDB's system pg_catalog; a name qualified further
//     (system.pg_catalog.x) is left alone;
//   - information_schema.tables / columns / schemata / views become the session's
//     sluice_information_schema_* views: DuckDB's, without InstallCatalog's TEMP objects;
//   - pg_catalog.generate_series(...) s / pg_catalog.unnest(...) s in a FROM clause get the
//     column alias s(s), which is what the alias means in Postgres.
//
// The rewritten SQL names objects InstallCatalog() creates (sluice_regclass_oid(),
// sluice_information_schema_tables ...): run it on a connection where that ran.
//
// Text inside string literals, quoted identifiers, comments and dollar quotes is never
// changed, and SQL with none of these forms comes back byte for byte. Rewritten text always
// lexes (a space keeps joined tokens apart; failing that, the input is returned as it was).
// Stateless and thread-safe; linear in the input.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace sluice::query::pg_catalog {

// `sql` rewritten for DuckDB, or InvalidArgument (with the byte offset) for an unterminated
// string literal, quoted identifier, block comment or dollar quote.
Result<std::string> RewriteForDuckDB(std::string_view sql);

}  // namespace sluice::query::pg_catalog
