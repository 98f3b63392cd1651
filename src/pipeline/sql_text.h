// SQL text helpers the runner's pieces share.
#pragma once

#include <cctype>
#include <string>

namespace sluice::pipeline {

// `sql` without the semicolons and spaces it ends with (the handler's SQL, a manager's
// collect SQL are wrapped in other statements).
inline std::string StripTrailingSemicolons(std::string sql) {
  while (!sql.empty() &&
         (std::isspace(static_cast<unsigned char>(sql.back())) || sql.back() == ';')) {
    sql.pop_back();
  }
  return sql;
}

}  // namespace sluice::pipeline
