#include "lake/parquet_read.h"

#include <fmt/format.h>

#include "duck/database.h"
#include "lake/duck_types.h"

namespace sluice::lake {

std::string ParquetSchemaOption(const Schema& schema) {
  std::vector<std::string> entries;
  entries.reserve(schema.fields.size());
  for (const NestedField& f : schema.fields) {
    entries.push_back(fmt::format("{}: {{name: {}, type: {}, default_value: NULL}}", f.id,
                                  duck::QuoteLiteral(f.name),
                                  duck::QuoteLiteral(DuckTypeOf(f.type))));
  }
  return fmt::format("schema = MAP {{{}}}", fmt::join(entries, ", "));
}

std::string ReadParquetCall(const std::vector<std::string>& paths, const Schema& schema) {
  std::vector<std::string> quoted;
  quoted.reserve(paths.size());
  for (const std::string& p : paths) quoted.push_back(duck::QuoteLiteral(p));
  return fmt::format("read_parquet([{}], hive_partitioning = false, {})", fmt::join(quoted, ", "),
                     ParquetSchemaOption(schema));
}

std::string ParquetScanSql(const std::vector<std::string>& paths, const Schema& schema) {
  std::vector<std::string> columns;
  for (const NestedField& f : schema.fields) columns.push_back(QuoteId(f.name));
  if (!paths.empty()) {
    return fmt::format("SELECT {} FROM {}", fmt::join(columns, ", "),
                       ReadParquetCall(paths, schema));
  }
  std::vector<std::string> typed;
  for (const NestedField& f : schema.fields) {
    typed.push_back(fmt::format("CAST(NULL AS {}) AS {}", DuckTypeOf(f.type), QuoteId(f.name)));
  }
  if (typed.empty()) return "SELECT WHERE false";  // a schema without columns
  return fmt::format("SELECT {} WHERE false", fmt::join(typed, ", "));
}

}  // namespace sluice::lake
