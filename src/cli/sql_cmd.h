// `sluice sql "SQL"` (or the SQL on stdin): statements on an in-memory DuckDB (Parquet, CSV and
// JSON files through DuckDB's readers), the rows printed as an aligned table or JSON lines. With a
// warehouse it also answers lake.<ns>.<table> (docs/queries.md), with a broker topic('name'), and
// it runs the query server's partitioned rewrites.
#pragma once

#include <string>

namespace sluice::cli {

struct SqlFlags {
  std::string sql;
  bool json = false;
  int64_t memory_limit_mib = 1024;
  std::string warehouse;  // default $SLUICE_WAREHOUSE; "" : no lake tables
  std::string bootstrap;  // HOST:PORT of a Kafka broker for topic(); "" : none
  // Lake tables from an Iceberg REST catalog instead of a warehouse; the login from
  // $SLUICE_CATALOG_CREDENTIAL or $SLUICE_CATALOG_TOKEN (never a flag: ps shows flags).
  std::string catalog_uri;
  std::string catalog_warehouse;
};

int RunSql(const SqlFlags& flags);

}  // namespace sluice::cli
