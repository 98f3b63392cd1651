// `sluice table list|describe|history|files|compact|expire`: the Iceberg tables of a
// warehouse directory (docs/design/0009), for people: what tables there are, a table's
// schema and partitioning, its snapshots (with the Kafka offsets each recorded) and its live
// data files; and its maintenance (lake/maintenance.h), safe beside writing pipelines.
#pragma once

#include <cstdint>
#include <string>

namespace sluice::cli {

struct TableFlags {
  std::string warehouse;  // "" = $SLUICE_WAREHOUSE
  // Instead: an Iceberg REST catalog (list, describe, history, files); the login from
  // $SLUICE_CATALOG_CREDENTIAL or $SLUICE_CATALOG_TOKEN.
  std::string catalog_uri;
  std::string catalog_warehouse;
  std::string table;  // namespace.table (list: a namespace prefix, or "")
  bool json = false;
  int64_t target_file_size_bytes = int64_t{128} << 20;  // compact
  std::string older_than;                               // expire: 30s, 5m, 1h, 7d
  std::string orphan_min_age = "1h";  // expire: unreferenced files younger are kept
};

int RunTableList(const TableFlags& flags);
int RunTableDescribe(const TableFlags& flags);
int RunTableHistory(const TableFlags& flags);
int RunTableFiles(const TableFlags& flags);
int RunTableCompact(const TableFlags& flags);
int RunTableExpire(const TableFlags& flags);

}  // namespace sluice::cli
