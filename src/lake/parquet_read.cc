#include "lake/parquet_read.h"

#include <fmt/format.h>

#include "duck/database.h"
#include "lake/deletes.h"
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

Result<std::string> ScanWithDeletesSql(const DeleteScan& scan, const Schema& schema) {
  std::vector<std::string> columns;
  for (const NestedField& f : schema.fields) {
    if (f.name == "filename" || f.name == "file_row_number") {
      return InvalidArgumentError(
          "column {} has the name of read_parquet's own column; a table with delete files "
          "cannot be read with it yet",
          f.name);
    }
    columns.push_back("d." + QuoteId(f.name));
  }
  if (scan.data_paths.empty() || scan.data_paths.size() != scan.data_locations.size())
    return InvalidArgumentError("a delete scan needs its data files and their locations");
  // Each local file's location, for position deletes' file_path.
  std::vector<std::string> cases;
  for (size_t i = 0; i < scan.data_paths.size(); ++i) {
    cases.push_back(fmt::format("WHEN {} THEN {}", duck::QuoteLiteral(scan.data_paths[i]),
                                duck::QuoteLiteral(scan.data_locations[i])));
  }
  std::vector<std::string> quoted;
  for (const std::string& p : scan.data_paths) quoted.push_back(duck::QuoteLiteral(p));
  std::string data = fmt::format(
      "SELECT *, CASE filename {} END AS __sluice_location FROM read_parquet([{}], "
      "hive_partitioning = false, filename = true, file_row_number = true, {})",
      fmt::join(cases, " "), fmt::join(quoted, ", "), ParquetSchemaOption(schema));
  std::vector<std::string> conditions;
  if (!scan.position_paths.empty()) {
    Schema positions;
    positions.fields.push_back(NestedField{
        kDeleteFilePathFieldId, "file_path", true, Type::Primitive(TypeId::kString), {}});
    positions.fields.push_back(
        NestedField{kDeletePosFieldId, "pos", true, Type::Primitive(TypeId::kLong), {}});
    conditions.push_back(
        fmt::format("NOT EXISTS (SELECT 1 FROM {} AS p WHERE p.file_path = d.__sluice_location AND "
                    "p.pos = d.file_row_number)",
                    ReadParquetCall(scan.position_paths, positions)));
  }
  for (const DeleteScan::Equality& e : scan.equality) {
    Schema keys;
    std::vector<std::string> same;
    for (int32_t id : e.field_ids) {
      const NestedField* f = schema.FindField(id);
      if (f == nullptr) {
        return InvalidArgumentError(
            "equality delete file {} names field {}, which the schema read does not have", e.path,
            id);
      }
      keys.fields.push_back(*f);
      same.push_back(fmt::format("e.{0} IS NOT DISTINCT FROM d.{0}", QuoteId(f->name)));
    }
    if (same.empty()) return InvalidArgumentError("equality delete file {} has no fields", e.path);
    conditions.push_back(fmt::format("NOT EXISTS (SELECT 1 FROM {} AS e WHERE {})",
                                     ReadParquetCall({e.path}, keys), fmt::join(same, " AND ")));
  }
  return fmt::format("SELECT {} FROM ({}) AS d{}{}", fmt::join(columns, ", "), data,
                     conditions.empty() ? "" : " WHERE ", fmt::join(conditions, " AND "));
}

}  // namespace sluice::lake
