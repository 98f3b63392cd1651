// `sluice table list|describe|history|files`: the Iceberg tables of a warehouse directory
// (docs/design/0009), for people: what tables there are, a table's schema and partitioning,
// its snapshots (with the Kafka offsets each recorded) and its live data files.
#pragma once

#include <string>

namespace sluice::cli {

struct TableFlags {
  std::string warehouse;  // "" = $SLUICE_WAREHOUSE
  std::string table;      // namespace.table (list: a namespace prefix, or "")
  bool json = false;
};

int RunTableList(const TableFlags& flags);
int RunTableDescribe(const TableFlags& flags);
int RunTableHistory(const TableFlags& flags);
int RunTableFiles(const TableFlags& flags);

}  // namespace sluice::cli
