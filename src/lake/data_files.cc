#include "lake/data_files.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <charconv>
#include <cstdlib>

#include "base/utf8.h"
#include "lake/duck_types.h"
#include "lake/single_value.h"
#include "lake/table_files.h"

namespace sluice::lake {
namespace {

constexpr size_t kStringBoundChars = 16;  // Iceberg's default metrics mode: truncate(16)

// The SQL giving a bound of column `c` as text parsed by BoundValue; "" when the type
// has no bounds here.
std::string BoundExpr(const Type& t, std::string_view agg, const std::string& c) {
  std::string filtered = fmt::format("{}({})", agg, c);
  switch (t.id) {
    case TypeId::kBoolean:
      return fmt::format("{}({}::INTEGER)::VARCHAR", agg, c);
    case TypeId::kInt:
    case TypeId::kLong:
      return fmt::format("{}::BIGINT::VARCHAR", filtered);
    case TypeId::kFloat:
    case TypeId::kDouble:
      return fmt::format("{}({}) FILTER (WHERE NOT isnan({}))::DOUBLE::VARCHAR", agg, c, c);
    case TypeId::kDecimal:
      return fmt::format("{}::VARCHAR", filtered);
    case TypeId::kDate:
      return fmt::format("({} - DATE '1970-01-01')::VARCHAR", filtered);
    case TypeId::kTime:
      return fmt::format("epoch_us(DATE '1970-01-01' + {})::VARCHAR", filtered);
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      return fmt::format("epoch_us({})::VARCHAR", filtered);
    case TypeId::kString:
      return fmt::format("left({}, {})", filtered, kStringBoundChars + 1);
    default:
      return "";
  }
}

// Decimal text ("-12.30") -> unscaled integer at `scale`.
Result<__int128> Unscaled(std::string_view text, int32_t scale) {
  bool neg = !text.empty() && text[0] == '-';
  if (neg) text.remove_prefix(1);
  __int128 v = 0;
  int32_t frac = -1;
  for (char ch : text) {
    if (ch == '.') {
      frac = 0;
      continue;
    }
    if (ch < '0' || ch > '9') return InvalidArgumentError("decimal {} is not a number", text);
    v = v * 10 + (ch - '0');
    if (frac >= 0) ++frac;
  }
  for (int32_t f = std::max(frac, 0); f < scale; ++f) v *= 10;
  return neg ? -v : v;
}

// The first `n` code points of UTF-8 text; `*cut` when there were more.
std::string_view Utf8Prefix(std::string_view s, size_t n, bool* cut) {
  size_t i = 0, chars = 0;
  while (i < s.size() && chars < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    i += c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    ++chars;
  }
  i = std::min(i, s.size());
  *cut = i < s.size();
  return s.substr(0, i);
}

Result<std::optional<std::string>> Bound(const Type& t, const std::optional<std::string>& text,
                                         bool upper) {
  if (!text) return std::optional<std::string>();
  Value v;
  switch (t.id) {
    case TypeId::kBoolean:
      v = Value::Boolean(*text == "1");
      break;
    case TypeId::kInt:
      v = Value::Int(static_cast<int32_t>(std::strtoll(text->c_str(), nullptr, 10)));
      break;
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      v = Value::Long(std::strtoll(text->c_str(), nullptr, 10));
      break;
    case TypeId::kDate:
      v = Value::Int(static_cast<int32_t>(std::strtoll(text->c_str(), nullptr, 10)));
      break;
    // Zero: -0.0 as the lower bound, +0.0 as the upper (DuckDB's min/max take either, and
    // Iceberg orders -0.0 before 0.0, as Parquet's rule for statistics says).
    case TypeId::kFloat: {
      float x = std::strtof(text->c_str(), nullptr);
      v = Value::Float(x == 0 ? (upper ? 0.0f : -0.0f) : x);
      break;
    }
    case TypeId::kDouble: {
      double x = std::strtod(text->c_str(), nullptr);
      v = Value::Double(x == 0 ? (upper ? 0.0 : -0.0) : x);
      break;
    }
    case TypeId::kDecimal: {
      ASSIGN_OR_RETURN(__int128 u, Unscaled(*text, t.scale));
      v = Value::Decimal(u);
      break;
    }
    case TypeId::kString: {
      bool cut = false;
      std::string_view prefix = Utf8Prefix(*text, kStringBoundChars, &cut);
      if (!cut) {
        v = Value::String(std::string(prefix));
      } else if (!upper) {
        v = Value::String(std::string(prefix));
      } else {
        std::optional<std::string> up = UpperOfPrefix(prefix);
        if (!up) return std::optional<std::string>();
        v = Value::String(std::move(*up));
      }
      break;
    }
    default:
      return std::optional<std::string>();
  }
  ASSIGN_OR_RETURN(Bytes b, ToSingleValueBinary(t, v));
  return std::optional<std::string>(std::string(b.begin(), b.end()));
}

}  // namespace

std::optional<std::string> UpperOfPrefix(std::string_view prefix) {
  std::u32string cps;
  for (size_t i = 0; i < prefix.size();) {
    unsigned char c = static_cast<unsigned char>(prefix[i]);
    int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < len && i + k < prefix.size(); ++k) cp = (cp << 6) | (prefix[i + k] & 0x3F);
    cps.push_back(cp);
    i += len;
  }
  while (!cps.empty()) {
    char32_t next = cps.back() + 1;
    if (next == 0xD800) next = 0xE000;  // skip the surrogates
    if (next <= 0x10FFFF) {
      cps.back() = next;
      std::string out;
      for (char32_t cp : cps) {
        AppendUtf8(out, cp);
      }
      return out;
    }
    cps.pop_back();
  }
  return std::nullopt;
}

Result<DataFile> WriteDataFile(duck::Connection& conn, std::string_view select_sql,
                               const Schema& schema, const std::string& path,
                               const std::string& location) {
  RETURN_IF_ERROR(
      conn.Execute(fmt::format("COPY ({}) TO {} (FORMAT parquet, COMPRESSION zstd, FIELD_IDS {})",
                               select_sql, duck::QuoteLiteral(path), FieldIdsOption(schema))));
  RETURN_IF_ERROR(SyncFile(path));
  DataFile f;
  f.file_path = location;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError("stat", path, errno);
  f.file_size_in_bytes = st.st_size;

  // Counts and bounds of the top-level primitive columns, from the file itself.
  std::string reader = fmt::format("read_parquet({})", duck::QuoteLiteral(path));
  std::vector<std::string> exprs = {"count(*)::VARCHAR"};
  struct Stat {
    const NestedField* field;
    size_t first;  // index of count(c) in exprs
    bool floating;
    bool bounded;
  };
  std::vector<Stat> stats;
  for (const NestedField& field : schema.fields) {
    if (!field.type.is_primitive()) continue;
    std::string c = QuoteId(field.name);
    Stat s{&field, exprs.size(),
           field.type.id == TypeId::kFloat || field.type.id == TypeId::kDouble, false};
    exprs.push_back(fmt::format("count({})::VARCHAR", c));
    if (s.floating) exprs.push_back(fmt::format("count(*) FILTER (WHERE isnan({}))::VARCHAR", c));
    std::string lo = BoundExpr(field.type, "min", c), hi = BoundExpr(field.type, "max", c);
    if (!lo.empty()) {
      s.bounded = true;
      exprs.push_back(lo);
      exprs.push_back(hi);
    }
    stats.push_back(s);
  }
  ASSIGN_OR_RETURN(
      auto rows, conn.QueryText(fmt::format("SELECT {} FROM {}", fmt::join(exprs, ", "), reader)));
  if (rows.size() != 1 || !rows[0][0]) return InternalError("{}: no statistics", path);
  const auto& row = rows[0];
  f.record_count = std::strtoll(row[0]->c_str(), nullptr, 10);
  for (const Stat& s : stats) {
    int32_t id = s.field->id;
    int64_t non_null = row[s.first] ? std::strtoll(row[s.first]->c_str(), nullptr, 10) : 0;
    f.value_counts[id] = f.record_count;
    f.null_value_counts[id] = f.record_count - non_null;
    size_t next = s.first + 1;
    if (s.floating) {
      f.nan_value_counts[id] = row[next] ? std::strtoll(row[next]->c_str(), nullptr, 10) : 0;
      ++next;
    }
    if (s.bounded) {
      ASSIGN_OR_RETURN(std::optional<std::string> lo, Bound(s.field->type, row[next], false));
      ASSIGN_OR_RETURN(std::optional<std::string> hi, Bound(s.field->type, row[next + 1], true));
      if (lo) f.lower_bounds[id] = std::move(*lo);
      if (hi) f.upper_bounds[id] = std::move(*hi);
    }
  }
  // Bytes on disk per top-level primitive column.
  ASSIGN_OR_RETURN(
      auto sizes,
      conn.QueryText(fmt::format(
          "SELECT path_in_schema, sum(total_compressed_size)::VARCHAR FROM parquet_metadata({}) "
          "GROUP BY ALL",
          duck::QuoteLiteral(path))));
  for (const auto& r : sizes) {
    if (!r[0] || !r[1]) continue;
    for (const Stat& s : stats) {
      if (s.field->name == *r[0])
        f.column_sizes[s.field->id] = std::strtoll(r[1]->c_str(), nullptr, 10);
    }
  }
  return f;
}

}  // namespace sluice::lake
