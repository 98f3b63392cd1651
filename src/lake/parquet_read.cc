#include "lake/parquet_read.h"

#include <fmt/format.h>

#include <cctype>
#include <limits>
#include <nlohmann/json.hpp>

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

std::string ReadParquetCall(const std::vector<std::string>& paths, const Schema& schema,
                            std::optional<int64_t> rows) {
  std::vector<std::string> quoted;
  quoted.reserve(paths.size());
  for (const std::string& p : paths) quoted.push_back(duck::QuoteLiteral(p));
  std::string cardinality =
      rows && *rows >= 0 ? fmt::format(", explicit_cardinality = {}", *rows) : "";
  return fmt::format("read_parquet([{}], hive_partitioning = false{}, {})", fmt::join(quoted, ", "),
                     cardinality, ParquetSchemaOption(schema));
}

std::string ParquetScanSql(const std::vector<std::string>& paths, const Schema& schema,
                           std::optional<int64_t> rows) {
  std::vector<std::string> columns;
  for (const NestedField& f : schema.fields) columns.push_back(QuoteId(f.name));
  if (!paths.empty()) {
    return fmt::format("SELECT {} FROM {}", fmt::join(columns, ", "),
                       ReadParquetCall(paths, schema, rows));
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
    if (f.name == "filename" || f.name == "file_row_number" || f.name == "__sluice_location") {
      return InvalidArgumentError(
          "column {} has the name of read_parquet's own column; a table with delete files "
          "cannot be read with it yet",
          f.name);
    }
    columns.push_back("d." + QuoteId(f.name));
  }
  if (scan.data_paths.empty() || scan.data_paths.size() != scan.data_locations.size())
    return InvalidArgumentError("a delete scan needs its data files and their locations");
  auto quoted_list = [](const std::vector<std::string>& paths) {
    std::vector<std::string> q;
    for (const std::string& p : paths) q.push_back(duck::QuoteLiteral(p));
    return fmt::format("[{}]", fmt::join(q, ", "));
  };
  // Each local file's location, for position deletes' file_path and the lookups.
  std::vector<std::string> cases;
  for (size_t i = 0; i < scan.data_paths.size(); ++i) {
    cases.push_back(fmt::format("WHEN {} THEN {}", duck::QuoteLiteral(scan.data_paths[i]),
                                duck::QuoteLiteral(scan.data_locations[i])));
  }
  std::string data = fmt::format(
      "SELECT *, CASE filename {} END AS __sluice_location FROM read_parquet({}, "
      "hive_partitioning = false, filename = true, file_row_number = true, {})",
      fmt::join(cases, " "), quoted_list(scan.data_paths), ParquetSchemaOption(schema));
  // Delete files by kind (positions, or one equality field set), with the (delete file,
  // data location) pairs each applies to.
  struct Kind {
    std::vector<std::string> paths;
    std::vector<std::string> pairs;
  };
  Kind positions;
  std::map<std::vector<int32_t>, Kind> equalities;
  for (const DeleteScan::File& d : scan.deletes) {
    if (d.applies_to.empty()) continue;
    if (d.content == 2 && d.field_ids.empty())
      return InvalidArgumentError("equality delete file {} has no fields", d.path);
    Kind& kind = d.content == 1 ? positions : equalities[d.field_ids];
    kind.paths.push_back(d.path);
    for (size_t i : d.applies_to) {
      if (i >= scan.data_locations.size())
        return InvalidArgumentError("delete file {} applies to no such data file", d.path);
      kind.pairs.push_back(fmt::format("({}, {})", duck::QuoteLiteral(d.path),
                                       duck::QuoteLiteral(scan.data_locations[i])));
    }
  }
  std::vector<std::string> conditions;
  if (!positions.paths.empty()) {
    Schema rows;
    rows.fields.push_back(NestedField{
        kDeleteFilePathFieldId, "file_path", true, Type::Primitive(TypeId::kString), {}});
    rows.fields.push_back(
        NestedField{kDeletePosFieldId, "pos", true, Type::Primitive(TypeId::kLong), {}});
    conditions.push_back(fmt::format(
        "NOT EXISTS (SELECT 1 FROM read_parquet({}, hive_partitioning = false, filename = "
        "true, {}) AS p JOIN (VALUES {}) AS a(f, loc) ON p.filename = a.f AND p.file_path = "
        "a.loc WHERE p.file_path = d.__sluice_location AND p.pos = d.file_row_number)",
        quoted_list(positions.paths), ParquetSchemaOption(rows), fmt::join(positions.pairs, ", ")));
  }
  for (const auto& [ids, kind] : equalities) {
    Schema keys;
    std::vector<std::string> same;
    for (int32_t id : ids) {
      const NestedField* f = schema.FindField(id);
      if (f == nullptr) {
        return InvalidArgumentError(
            "equality delete file {} names field {}, which the schema read does not have",
            kind.paths.front(), id);
      }
      keys.fields.push_back(*f);
      same.push_back(fmt::format("e.{0} IS NOT DISTINCT FROM d.{0}", QuoteId(f->name)));
    }
    conditions.push_back(fmt::format(
        "NOT EXISTS (SELECT 1 FROM read_parquet({}, hive_partitioning = false, filename = "
        "true, {}) AS e JOIN (VALUES {}) AS a(f, loc) ON e.filename = a.f WHERE a.loc = "
        "d.__sluice_location AND {})",
        quoted_list(kind.paths), ParquetSchemaOption(keys), fmt::join(kind.pairs, ", "),
        fmt::join(same, " AND ")));
  }
  return fmt::format("SELECT {} FROM ({}) AS d{}{}", fmt::join(columns, ", "), data,
                     conditions.empty() ? "" : " WHERE ", fmt::join(conditions, " AND "));
}

Result<std::map<int32_t, std::vector<std::string>>> ParseNameMapping(std::string_view json) {
  auto bad = [](std::string_view why) {
    return InvalidArgumentError("schema.name-mapping.default: {}", why);
  };
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded()) return bad("not JSON");
  if (!j.is_array()) return bad("not a list of fields");
  std::map<int32_t, std::vector<std::string>> out;
  for (const nlohmann::json& field : j) {
    if (!field.is_object()) return bad("a field that is not an object");
    std::vector<std::string> names;
    if (auto it = field.find("names"); it != field.end()) {
      if (!it->is_array()) return bad("names is not a list");
      for (const nlohmann::json& n : *it) {
        if (!n.is_string()) return bad("a name that is not a string");
        names.push_back(n.get<std::string>());
      }
    }
    auto id = field.find("field-id");
    if (id == field.end()) continue;  // names without an id: nothing to map them to
    if (!id->is_number_integer() || id->get<int64_t>() < 0 ||
        id->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return bad("a field-id that is not a non-negative integer");
    }
    if (!out.emplace(static_cast<int32_t>(id->get<int64_t>()), std::move(names)).second)
      return bad(fmt::format("field-id {} appears twice", id->get<int64_t>()));
  }
  return out;
}

Result<std::string> MappedParquetScanSql(
    duck::Connection& conn, const std::vector<std::string>& paths, const Schema& schema,
    const std::map<int32_t, std::vector<std::string>>& mapping) {
  std::vector<std::string> with_ids;
  std::vector<std::string> parts;
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(auto ids,
                     conn.QueryText(fmt::format("SELECT count(field_id) FROM parquet_schema({})",
                                                duck::QuoteLiteral(path))));
    if (!ids.empty() && ids[0][0] && *ids[0][0] != "0") {
      with_ids.push_back(path);
      continue;
    }
    // The file's own top-level column names (DuckDB matches names case-insensitively).
    ASSIGN_OR_RETURN(duck::QueryResult columns,
                     conn.Query(fmt::format("SELECT * FROM read_parquet({}) LIMIT 0",
                                            duck::QuoteLiteral(path))));
    std::map<std::string, std::string> have;  // lower-cased -> as written
    for (size_t i = 0; i < columns.column_count(); ++i) {
      std::string name = columns.column_name(i);
      std::string lower = name;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      have.emplace(lower, name);
    }
    std::vector<std::string> select;
    for (const NestedField& f : schema.fields) {
      std::string from;
      if (auto m = mapping.find(f.id); m != mapping.end()) {
        for (std::string n : m->second) {
          for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          if (auto h = have.find(n); h != have.end()) {
            from = QuoteId(h->second);
            break;
          }
        }
      }
      select.push_back(fmt::format("CAST({} AS {}) AS {}", from.empty() ? "NULL" : from,
                                   DuckTypeOf(f.type), QuoteId(f.name)));
    }
    parts.push_back(fmt::format("SELECT {} FROM read_parquet({}, hive_partitioning = false)",
                                fmt::join(select, ", "), duck::QuoteLiteral(path)));
  }
  if (!with_ids.empty() || parts.empty())
    parts.insert(parts.begin(), ParquetScanSql(with_ids, schema));
  return fmt::format("{}", fmt::join(parts, " UNION ALL "));
}

}  // namespace sluice::lake
