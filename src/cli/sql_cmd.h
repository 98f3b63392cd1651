// `sluice sql "QUERY"`: one SQL statement on an in-memory DuckDB (Parquet, CSV and JSON
// files through DuckDB's readers), the rows printed as an aligned table or JSON lines.
#pragma once

#include <string>

namespace sluice::cli {

struct SqlFlags {
  std::string sql;
  bool json = false;
  int64_t memory_limit_mib = 1024;
};

int RunSql(const SqlFlags& flags);

}  // namespace sluice::cli
