// The constants pruning compares in C++ (file_pruner_internal.h): a column type's native
// form, the SQL that gives a constant's native value and its reading, and the constants
// whose type and value are known from their text without asking DuckDB.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "query/lake_planner/file_pruner_internal.h"

namespace sluice::query::pruning {

// The native form of a column type (NativeForm), if it has one.
std::optional<NativeForm> FormOfColumn(const Type& column) {
  switch (column.id) {
    case TypeId::kInt:
      return NativeForm{Native::Kind::kInt, "INTEGER", "CAST({t} AS BIGINT)"};
    case TypeId::kLong:
      return NativeForm{Native::Kind::kInt, "BIGINT", "{t}"};
    case TypeId::kFloat:
      return NativeForm{Native::Kind::kDouble, "FLOAT", "CAST({t} AS DOUBLE)"};
    case TypeId::kDouble:
      return NativeForm{Native::Kind::kDouble, "DOUBLE", "{t}"};
    case TypeId::kDate:
      return NativeForm{Native::Kind::kInt, "DATE",
                        "CASE WHEN isfinite({t}) THEN {t} - DATE '1970-01-01' END"};
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      return NativeForm{Native::Kind::kInt,
                        column.id == TypeId::kTimestamp ? "TIMESTAMP" : "TIMESTAMPTZ",
                        "CASE WHEN isfinite({t}) THEN epoch_us({t}) END"};
    case TypeId::kString:
      return NativeForm{Native::Kind::kString, "VARCHAR", "{t}"};
    default:
      return std::nullopt;
  }
}

// Whether a comparison of a `column` with a constant of DuckDB type `constant` (typeof) may
// be evaluated natively (see NativeForm).
bool NativeAllowed(const Type& column, std::string_view constant, bool string_literal) {
  if (string_literal) return true;
  switch (column.id) {
    case TypeId::kInt:
    case TypeId::kLong:
      for (std::string_view n :
           {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"}) {
        if (constant == n) return true;
      }
      return false;
    case TypeId::kFloat:
    case TypeId::kDouble:
      return SameFamily(column, constant);
    case TypeId::kDate:
    case TypeId::kTimestamp:
      return constant == "DATE" || constant == "TIMESTAMP";
    case TypeId::kTimestampTz:
      return constant == "TIMESTAMP WITH TIME ZONE";
    case TypeId::kString:
      return constant == "VARCHAR";
    default:
      return false;
  }
}

std::string NativeKey(const std::string& constant, std::string_view duck_type, bool literal) {
  return fmt::format("{}\n{}\n{}", duck_type, literal ? 1 : 0, constant);
}

// The SQL of a native value's three columns: whether the constant is NULL, whether its cast
// to the column's type is exact (for a string literal: whether it casts, as the query casts
// it), the value.
std::vector<std::string> NativeColumnsSql(const std::string& constant, const NativeForm& form,
                                          bool literal) {
  const std::string t = fmt::format("TRY_CAST(({}) AS {})", constant, form.duck_type);
  return {fmt::format("({}) IS NULL", constant),
          literal ? fmt::format("{} IS NOT NULL", t)
                  : fmt::format("coalesce({} = ({}), false)", t, constant),
          fmt::format(fmt::runtime(form.value), fmt::arg("t", t))};
}

// Reads NativeColumnsSql's three columns at `col` of a one-row result; nullopt when the
// constant is not exactly a value of the column's type.
std::optional<Native> ReadNative(duck::QueryResult& result, duck::ResultChunk& row, size_t col,
                                 Native::Kind kind) {
  const duck::ColumnType want = kind == Native::Kind::kInt      ? duck::ColumnType::kInt64
                                : kind == Native::Kind::kDouble ? duck::ColumnType::kDouble
                                                                : duck::ColumnType::kVarchar;
  if (result.column_type(col) != duck::ColumnType::kBoolean ||
      result.column_type(col + 1) != duck::ColumnType::kBoolean ||
      result.column_type(col + 2) != want)
    return std::nullopt;
  Native n;
  n.kind = kind;
  n.is_null = !row.IsNull(col, 0) && row.GetBool(col, 0);
  if (n.is_null) return n;
  if (row.IsNull(col + 1, 0) || !row.GetBool(col + 1, 0) || row.IsNull(col + 2, 0))
    return std::nullopt;
  switch (kind) {
    case Native::Kind::kInt:
      n.i = row.GetInt64(col + 2, 0);
      break;
    case Native::Kind::kDouble:
      n.d = row.GetDouble(col + 2, 0);
      break;
    case Native::Kind::kString:
      n.s = std::string(row.GetString(col + 2, 0));
      break;
  }
  return n;
}

namespace {

// 'YYYY-MM-DD' -> days since 1970-01-01, for valid dates of years 1-9999.
std::optional<int64_t> ParseIsoDate(std::string_view t) {
  auto digits = [&](size_t at, size_t n) -> std::optional<int> {
    if (at + n > t.size()) return std::nullopt;
    int v = 0;
    for (size_t k = at; k < at + n; ++k) {
      if (t[k] < '0' || t[k] > '9') return std::nullopt;
      v = v * 10 + (t[k] - '0');
    }
    return v;
  };
  if (t.size() != 10 || t[4] != '-' || t[7] != '-') return std::nullopt;
  auto y = digits(0, 4), m = digits(5, 2), d = digits(8, 2);
  if (!y || !m || !d || *y < 1 || *m < 1 || *m > 12 || *d < 1) return std::nullopt;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (*y % 4 == 0 && *y % 100 != 0) || *y % 400 == 0;
  if (*d > kDays[*m - 1] + (*m == 2 && leap ? 1 : 0)) return std::nullopt;
  return lake::DaysFromCivil(*y, static_cast<unsigned>(*m), static_cast<unsigned>(*d));
}

// 'YYYY-MM-DD[ HH:MM:SS[.f{1,6}]]' -> microseconds since the epoch.
std::optional<int64_t> ParseIsoTimestamp(std::string_view t) {
  std::optional<int64_t> days = ParseIsoDate(t.substr(0, std::min<size_t>(t.size(), 10)));
  if (!days) return std::nullopt;
  int64_t micros = *days * kMicrosPerDay;
  if (t.size() == 10) return micros;
  if (t.size() < 19 || t[10] != ' ' || t[13] != ':' || t[16] != ':') return std::nullopt;
  int64_t fields[3] = {0, 0, 0};
  for (int k = 0; k < 3; ++k) {
    const char a = t[11 + 3 * k], b = t[12 + 3 * k];
    if (a < '0' || a > '9' || b < '0' || b > '9') return std::nullopt;
    fields[k] = (a - '0') * 10 + (b - '0');
  }
  if (fields[0] > 23 || fields[1] > 59 || fields[2] > 59) return std::nullopt;
  micros += fields[0] * kMicrosPerHour + fields[1] * 60'000'000LL + fields[2] * 1'000'000LL;
  if (t.size() == 19) return micros;
  if (t[19] != '.' || t.size() < 21 || t.size() > 26) return std::nullopt;
  int64_t frac = 0;
  for (size_t k = 20; k < 26; ++k) {
    if (k < t.size()) {
      if (t[k] < '0' || t[k] > '9') return std::nullopt;
      frac = frac * 10 + (t[k] - '0');
    } else {
      frac *= 10;
    }
  }
  return micros + frac;
}

// The text of a string literal ('it''s' -> it's), or nullopt.
std::optional<std::string> ParseStringLiteral(std::string_view t) {
  if (t.size() < 2 || t.front() != '\'' || t.back() != '\'') return std::nullopt;
  std::string out;
  for (size_t k = 1; k + 1 < t.size(); ++k) {
    if (t[k] == '\'') {
      if (k + 2 >= t.size() || t[k + 1] != '\'') return std::nullopt;
      ++k;
    }
    out += t[k];
  }
  return out;
}

}  // namespace

std::optional<KnownConstant> ParseKnownConstant(std::string_view t) {
  using K = KnownConstant::Kind;
  if (auto s = ParseStringLiteral(t)) return KnownConstant{K::kString, "VARCHAR", 0, std::move(*s)};
  for (auto [prefix, kind] : {std::pair<std::string_view, K>{"CAST('", K::kDate},
                              std::pair<std::string_view, K>{"CAST('", K::kTimestamp}}) {
    const std::string_view suffix = kind == K::kDate ? " AS DATE)" : " AS TIMESTAMP)";
    if (!t.starts_with(prefix) || !t.ends_with(suffix)) continue;
    std::optional<std::string> text = ParseStringLiteral(
        t.substr(prefix.size() - 1, t.size() - suffix.size() - prefix.size() + 1));
    if (!text) return std::nullopt;
    std::optional<int64_t> v = kind == K::kDate ? ParseIsoDate(*text) : ParseIsoTimestamp(*text);
    if (!v) return std::nullopt;
    return KnownConstant{kind, kind == K::kDate ? "DATE" : "TIMESTAMP", *v, {}};
  }
  // An integer literal: INTEGER when it fits, else BIGINT.
  const size_t start = !t.empty() && t[0] == '-' ? 1 : 0;
  if (t.size() == start || t.size() - start > 19 || (t.size() - start > 1 && t[start] == '0'))
    return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  const bool fits = v >= INT32_MIN && v <= INT32_MAX;
  return KnownConstant{K::kInteger, fits ? "INTEGER" : "BIGINT", v, {}};
}

// The native value of a known constant compared with a column of `column`'s form: the
// value, nullopt inside when it is not exactly a value of the column's type, nullopt
// outside when that is DuckDB's to say (casts of strings to numbers, floats, timestamptz).
std::optional<std::optional<Native>> NativeOfKnown(const KnownConstant& k, const Type& column,
                                                   bool string_literal) {
  using K = KnownConstant::Kind;
  auto of_int = [](int64_t i) { return Native{Native::Kind::kInt, false, i, 0, {}}; };
  switch (column.id) {
    case TypeId::kInt:
    case TypeId::kLong:
      if (k.kind != K::kInteger) return std::nullopt;
      if (column.id == TypeId::kInt && (k.i < INT32_MIN || k.i > INT32_MAX))
        return std::optional<Native>();
      return std::optional<Native>(of_int(k.i));
    case TypeId::kDouble:
      if (k.kind != K::kInteger) return std::nullopt;
      return std::optional<Native>(
          Native{Native::Kind::kDouble, false, 0, static_cast<double>(k.i), {}});
    case TypeId::kDate:
      if (k.kind == K::kDate) return std::optional<Native>(of_int(k.i));
      if (k.kind == K::kTimestamp) {
        if (k.i % kMicrosPerDay != 0) return std::optional<Native>();
        return std::optional<Native>(of_int(k.i / kMicrosPerDay));
      }
      if (k.kind == K::kString && string_literal) {
        if (std::optional<int64_t> d = ParseIsoDate(k.s)) return std::optional<Native>(of_int(*d));
      }
      return std::nullopt;
    case TypeId::kTimestamp:
      if (k.kind == K::kDate) return std::optional<Native>(of_int(k.i * kMicrosPerDay));
      if (k.kind == K::kTimestamp) return std::optional<Native>(of_int(k.i));
      if (k.kind == K::kString && string_literal) {
        if (std::optional<int64_t> us = ParseIsoTimestamp(k.s))
          return std::optional<Native>(of_int(*us));
      }
      return std::nullopt;
    case TypeId::kString:
      if (k.kind != K::kString) return std::nullopt;
      return std::optional<Native>(Native{Native::Kind::kString, false, 0, 0, k.s});
    default:
      return std::nullopt;
  }
}

}  // namespace sluice::query::pruning
