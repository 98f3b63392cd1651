// pg_catalog: how DuckDB's types are presented to Postgres clients — the type OIDs,
// typmods and names shared by the emulated pg_type / pg_attribute / format_type() and,
// so that both agree, by the wire server's RowDescription.
//
//   PgTypeRef t = PgTypeForDuckDB("DECIMAL(10,2)");  // {1700, (10 << 16 | 2) + 4}
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace sluice::query::pg_catalog {

// One row of the emulated pg_type: a Postgres built-in base type or its array type.
struct PgType {
  uint32_t oid;
  std::string_view name;         // typname: "int4"
  std::string_view format_name;  // format_type(): "integer"
  int16_t length;                // typlen: -1 for varlena
  char category;                 // typcategory: 'N' numeric, 'S' string, 'A' array ...
  uint32_t element;              // typelem: the element type of an array type, else 0
  uint32_t array;                // typarray: the array type of a base type, else 0
};

// Every type the emulation knows (base types and their arrays), ordered by oid.
std::span<const PgType> PgTypes();
// The entry for `oid`, or nullptr.
const PgType* FindPgType(uint32_t oid);

struct PgTypeRef {
  uint32_t oid;
  int32_t typmod;  // -1, or for numeric ((precision << 16) | scale) + 4
};

// The Postgres type a DuckDB type is shown as, from DuckDB's SQL spelling of the type
// (duckdb_columns().data_type, duck::LogicalType::ToSql()): "INTEGER" -> int4,
// "DECIMAL(10,2)" -> numeric(10,2), "VARCHAR[]" -> _text. Types with no Postgres
// counterpart (STRUCT, MAP, UNION, nested lists, ENUM ...) are text (25).
PgTypeRef PgTypeForDuckDB(std::string_view duckdb_type);

// format_type(oid, typmod) as Postgres prints it ("numeric(10,2)", "integer[]",
// "timestamp without time zone"); "???" for an unknown oid, like Postgres.
std::string FormatPgType(uint32_t oid, int32_t typmod);

}  // namespace sluice::query::pg_catalog
