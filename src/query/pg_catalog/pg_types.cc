// The type table below is Postgres 15's pg_type.dat, reduced to the types DuckDB values
// are mapped to, plus the few that catalog queries name (oid, name, char, regclass ...).
#include "query/pg_catalog/pg_types.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>

#include "base/strings.h"

namespace sluice::query::pg_catalog {
namespace {

constexpr std::array<PgType, 52> kTypes = {{
    {16, "bool", "boolean", 1, 'B', 0, 1000},
    {17, "bytea", "bytea", -1, 'U', 0, 1001},
    {18, "char", "\"char\"", 1, 'Z', 0, 1002},
    {19, "name", "name", 64, 'S', 0, 1003},
    {20, "int8", "bigint", 8, 'N', 0, 1016},
    {21, "int2", "smallint", 2, 'N', 0, 1005},
    {23, "int4", "integer", 4, 'N', 0, 1007},
    {24, "regproc", "regproc", 4, 'N', 0, 1008},
    {25, "text", "text", -1, 'S', 0, 1009},
    {26, "oid", "oid", 4, 'N', 0, 1028},
    {114, "json", "json", -1, 'U', 0, 199},
    {199, "_json", "json[]", -1, 'A', 114, 0},
    {700, "float4", "real", 4, 'N', 0, 1021},
    {701, "float8", "double precision", 8, 'N', 0, 1022},
    {1000, "_bool", "boolean[]", -1, 'A', 16, 0},
    {1001, "_bytea", "bytea[]", -1, 'A', 17, 0},
    {1002, "_char", "\"char\"[]", -1, 'A', 18, 0},
    {1003, "_name", "name[]", -1, 'A', 19, 0},
    {1005, "_int2", "smallint[]", -1, 'A', 21, 0},
    {1007, "_int4", "integer[]", -1, 'A', 23, 0},
    {1008, "_regproc", "regproc[]", -1, 'A', 24, 0},
    {1009, "_text", "text[]", -1, 'A', 25, 0},
    {1014, "_bpchar", "character[]", -1, 'A', 1042, 0},
    {1015, "_varchar", "character varying[]", -1, 'A', 1043, 0},
    {1016, "_int8", "bigint[]", -1, 'A', 20, 0},
    {1021, "_float4", "real[]", -1, 'A', 700, 0},
    {1022, "_float8", "double precision[]", -1, 'A', 701, 0},
    {1028, "_oid", "oid[]", -1, 'A', 26, 0},
    {1042, "bpchar", "character", -1, 'S', 0, 1014},
    {1043, "varchar", "character varying", -1, 'S', 0, 1015},
    {1082, "date", "date", 4, 'D', 0, 1182},
    {1083, "time", "time without time zone", 8, 'D', 0, 1183},
    {1114, "timestamp", "timestamp without time zone", 8, 'D', 0, 1115},
    {1115, "_timestamp", "timestamp without time zone[]", -1, 'A', 1114, 0},
    {1182, "_date", "date[]", -1, 'A', 1082, 0},
    {1183, "_time", "time without time zone[]", -1, 'A', 1083, 0},
    {1184, "timestamptz", "timestamp with time zone", 8, 'D', 0, 1185},
    {1185, "_timestamptz", "timestamp with time zone[]", -1, 'A', 1184, 0},
    {1186, "interval", "interval", 16, 'T', 0, 1187},
    {1187, "_interval", "interval[]", -1, 'A', 1186, 0},
    {1231, "_numeric", "numeric[]", -1, 'A', 1700, 0},
    {1266, "timetz", "time with time zone", 12, 'D', 0, 1270},
    {1270, "_timetz", "time with time zone[]", -1, 'A', 1266, 0},
    {1560, "bit", "bit", -1, 'V', 0, 1561},
    {1561, "_bit", "bit[]", -1, 'A', 1560, 0},
    {1562, "varbit", "bit varying", -1, 'V', 0, 1563},
    {1563, "_varbit", "bit varying[]", -1, 'A', 1562, 0},
    {1700, "numeric", "numeric", -1, 'N', 0, 1231},
    {2205, "regclass", "regclass", 4, 'N', 0, 2210},
    {2210, "_regclass", "regclass[]", -1, 'A', 2205, 0},
    {2950, "uuid", "uuid", 16, 'U', 0, 2951},
    {2951, "_uuid", "uuid[]", -1, 'A', 2950, 0},
}};

// The oid of a scalar DuckDB type name (no parameters, upper case), or 0.
uint32_t ScalarOid(std::string_view t) {
  static constexpr std::array<std::pair<std::string_view, uint32_t>, 44> kMap = {{
      {"BOOLEAN", 16},
      {"TINYINT", 21},
      {"SMALLINT", 21},
      {"INTEGER", 23},
      {"BIGINT", 20},
      {"UTINYINT", 21},
      {"USMALLINT", 23},
      {"UINTEGER", 20},
      {"UBIGINT", 1700},
      {"HUGEINT", 1700},
      {"UHUGEINT", 1700},
      {"FLOAT", 700},
      {"DOUBLE", 701},
      {"DECIMAL", 1700},
      {"VARCHAR", 25},
      {"BLOB", 17},
      {"DATE", 1082},
      {"TIME", 1083},
      {"TIMESTAMP", 1114},
      {"TIMESTAMP_S", 1114},
      {"TIMESTAMP_MS", 1114},
      {"TIMESTAMP_NS", 1114},
      {"TIMESTAMP WITH TIME ZONE", 1184},
      {"TIME WITH TIME ZONE", 1266},
      {"INTERVAL", 1186},
      {"UUID", 2950},
      {"JSON", 114},
      {"BIT", 1562},
      {"BIGNUM", 1700},
      {"VARINT", 1700},
      {"TIME_NS", 1083},
      // DuckDB's other spellings (the lake's types are written TIMESTAMPTZ, for example).
      {"TIMESTAMPTZ", 1184},
      {"TIMETZ", 1266},
      {"TIMESTAMP_US", 1114},
      {"INT", 23},
      {"INT4", 23},
      {"INT8", 20},
      {"INT2", 21},
      {"INT1", 21},
      {"FLOAT4", 700},
      {"FLOAT8", 701},
      {"BOOL", 16},
      {"STRING", 25},
      {"TEXT", 25},
  }};
  for (const auto& [name, oid] : kMap) {
    if (name == t) return oid;
  }
  return 0;
}

}  // namespace

std::span<const PgType> PgTypes() { return kTypes; }

const PgType* FindPgType(uint32_t oid) {
  auto it = std::lower_bound(kTypes.begin(), kTypes.end(), oid,
                             [](const PgType& t, uint32_t o) { return t.oid < o; });
  return it != kTypes.end() && it->oid == oid ? &*it : nullptr;
}

PgTypeRef PgTypeForDuckDB(std::string_view duckdb_type) {
  std::string t = AsciiUpper(duckdb_type);
  while (!t.empty() && t.back() == ' ') t.pop_back();
  bool array = false;
  if (t.size() > 2 && t.ends_with("[]")) {
    t.resize(t.size() - 2);
    if (t.ends_with("]")) return {25, -1};  // nested lists: no Postgres array type
    array = true;
  } else if (t.ends_with("]")) {
    return {25, -1};  // fixed-size ARRAY: shown as text
  }
  int32_t typmod = -1;
  const size_t paren = t.find('(');
  if (paren != std::string::npos) {
    const std::string_view base = std::string_view(t).substr(0, paren);
    if (base == "DECIMAL" || base == "NUMERIC") {
      int precision = 0, scale = 0;
      if (std::sscanf(t.c_str() + paren, "(%d,%d)", &precision, &scale) == 2 ||
          std::sscanf(t.c_str() + paren, "(%d, %d)", &precision, &scale) == 2) {
        typmod = ((precision << 16) | scale) + 4;
      }
      t = "DECIMAL";
    } else {
      return {25, -1};  // STRUCT(...), MAP(...), UNION(...), ENUM(...)
    }
  }
  if (t == "NUMERIC") t = "DECIMAL";
  uint32_t oid = ScalarOid(t);
  if (oid == 0) return {25, -1};
  if (array) {
    const PgType* base = FindPgType(oid);
    if (base == nullptr || base->array == 0) return {25, -1};
    return {base->array, typmod};
  }
  return {oid, typmod};
}

std::string FormatPgType(uint32_t oid, int32_t typmod) {
  const PgType* t = FindPgType(oid);
  if (t == nullptr) return "???";
  const uint32_t base = t->element != 0 ? t->element : oid;
  if (base == 1700 && typmod >= 4) {
    const int32_t m = typmod - 4;
    return fmt::format("numeric({},{}){}", (m >> 16) & 0xffff, m & 0xffff,
                       t->element != 0 ? "[]" : "");
  }
  return std::string(t->format_name);
}

}  // namespace sluice::query::pg_catalog
