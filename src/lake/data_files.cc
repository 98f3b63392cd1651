#include "lake/data_files.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <charconv>
#include <cstdlib>
#include <map>
#include <vector>

#include "base/utf8.h"
#include "duck/data_chunk.h"
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

namespace {

// COPY's RETURN_STATS column_statistics, MAP(VARCHAR, MAP(VARCHAR, VARCHAR)): per column
// path as DuckDB quotes it ("a", "s"."x"), its statistics ("min", "max", "null_count",
// "has_nan", "column_size_bytes", ...) as text.
using ColumnStats = std::map<std::string, std::map<std::string, std::string>>;

ColumnStats ReadColumnStats(const duck::Vector& map, uint64_t row) {
  ColumnStats out;
  if (!map.IsValid(row)) return out;
  const duck::ListEntry& e = map.data<duck::ListEntry>()[row];
  duck::Vector entries = map.ListChild();
  duck::Vector keys = entries.StructField(0), values = entries.StructField(1);
  for (uint64_t i = e.offset; i < e.offset + e.length; ++i) {
    if (!keys.IsValid(i) || !values.IsValid(i)) continue;
    std::map<std::string, std::string>& stats = out[std::string(keys.GetString(i))];
    const duck::ListEntry& inner = values.data<duck::ListEntry>()[i];
    duck::Vector pairs = values.ListChild();
    duck::Vector names = pairs.StructField(0), texts = pairs.StructField(1);
    for (uint64_t j = inner.offset; j < inner.offset + inner.length; ++j) {
      if (names.IsValid(j) && texts.IsValid(j))
        stats[std::string(names.GetString(j))] = std::string(texts.GetString(j));
    }
  }
  return out;
}

bool TemporalBound(TypeId id) {
  return id == TypeId::kDate || id == TypeId::kTime || id == TypeId::kTimestamp ||
         id == TypeId::kTimestampTz;
}

std::optional<std::string> Find(const std::map<std::string, std::string>& m, const char* key) {
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

}  // namespace

Result<DataFile> WriteDataFile(duck::Connection& conn, std::string_view select_sql,
                               const Schema& schema, const std::string& path,
                               const std::string& location) {
  // The writer's own statistics (RETURN_STATS): the file is not read back.
  ASSIGN_OR_RETURN(
      duck::QueryResult copied,
      conn.Query(fmt::format(
          "COPY ({}) TO {} (FORMAT parquet, COMPRESSION zstd, FIELD_IDS {}, RETURN_STATS true)",
          select_sql, duck::QuoteLiteral(path), FieldIdsOption(schema))));
  RETURN_IF_ERROR(SyncFile(path));
  size_t count_col = copied.column_count(), stats_col = copied.column_count();
  for (size_t i = 0; i < copied.column_count(); ++i) {
    if (copied.column_name(i) == "count") count_col = i;
    if (copied.column_name(i) == "column_statistics") stats_col = i;
  }
  if (count_col == copied.column_count() || stats_col == copied.column_count() ||
      (copied.column_type_name(count_col) != "UBIGINT" &&
       copied.column_type_name(count_col) != "BIGINT")) {
    std::vector<std::string> got;
    for (size_t i = 0; i < copied.column_count(); ++i)
      got.push_back(copied.column_name(i) + " " + copied.column_type_name(i));
    return InternalError("{}: COPY returned no statistics (its columns: {})", path,
                         fmt::join(got, ", "));
  }
  std::vector<duck::DataChunk> chunks = copied.TakeChunks();
  if (chunks.size() != 1 || chunks[0].size() != 1)
    return InternalError("{}: COPY returned statistics of {} files", path, chunks.size());
  DataFile f;
  f.file_path = location;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError("stat", path, errno);
  f.file_size_in_bytes = st.st_size;
  // UBIGINT or BIGINT: the same bits for any count a file holds.
  f.record_count = chunks[0].column(count_col).data<int64_t>()[0];
  const ColumnStats columns = ReadColumnStats(chunks[0].column(stats_col), 0);

  // Counts, sizes and bounds of the top-level primitive columns. Dates and times come as
  // DuckDB prints them: turned into days and microseconds by one query over the literals.
  // A float column with a NaN says only that: its NaNs are counted from the file.
  std::vector<std::string> temporal_exprs, nan_exprs;
  struct Pending {
    const NestedField* field;
    std::optional<std::string> lo, hi;
    size_t temporal = SIZE_MAX;  // index of lo's conversion in temporal_exprs
    size_t nan = SIZE_MAX;       // index in nan_exprs
  };
  std::vector<Pending> pending;
  for (const NestedField& field : schema.fields) {
    if (!field.type.is_primitive()) continue;
    const int32_t id = field.id;
    f.value_counts[id] = f.record_count;
    // Keyed by the column as RETURN_STATS names it: quoted.
    auto it = columns.find(duck::QuoteIdentifier(field.name));
    if (it == columns.end()) continue;  // DuckDB kept none: only the value count is known
    const std::map<std::string, std::string>& s = it->second;
    if (auto nulls = Find(s, "null_count")) {
      f.null_value_counts[id] = std::strtoll(nulls->c_str(), nullptr, 10);
    }
    if (auto size = Find(s, "column_size_bytes")) {
      f.column_sizes[id] = std::strtoll(size->c_str(), nullptr, 10);
    }
    Pending p{&field, Find(s, "min"), Find(s, "max")};
    if (field.type.id == TypeId::kFloat || field.type.id == TypeId::kDouble) {
      if (Find(s, "has_nan") == "true") {
        p.nan = nan_exprs.size();
        nan_exprs.push_back(
            fmt::format("count(*) FILTER (WHERE isnan({}))::VARCHAR", QuoteId(field.name)));
      } else {
        f.nan_value_counts[id] = 0;
      }
    }
    if (BoundExpr(field.type, "min", "x").empty()) {
      p.lo.reset();
      p.hi.reset();
    }
    if (p.lo && p.hi && TemporalBound(field.type.id)) {
      p.temporal = temporal_exprs.size();
      for (const std::string* text : {&*p.lo, &*p.hi}) {
        temporal_exprs.push_back(BoundExpr(
            field.type, "min",
            fmt::format("CAST({} AS {})", duck::QuoteLiteral(*text), DuckTypeOf(field.type))));
      }
    }
    pending.push_back(std::move(p));
  }
  std::vector<std::optional<std::string>> temporal, nans;
  if (!temporal_exprs.empty()) {
    ASSIGN_OR_RETURN(auto rows,
                     conn.QueryText(fmt::format("SELECT {}", fmt::join(temporal_exprs, ", "))));
    if (rows.size() != 1) return InternalError("{}: the bounds did not convert", path);
    temporal = std::move(rows[0]);
  }
  if (!nan_exprs.empty()) {
    ASSIGN_OR_RETURN(auto rows, conn.QueryText(fmt::format("SELECT {} FROM read_parquet({})",
                                                           fmt::join(nan_exprs, ", "),
                                                           duck::QuoteLiteral(path))));
    if (rows.size() != 1) return InternalError("{}: no NaN counts", path);
    nans = std::move(rows[0]);
  }
  for (Pending& p : pending) {
    const int32_t id = p.field->id;
    if (p.nan != SIZE_MAX && nans[p.nan]) {
      f.nan_value_counts[id] = std::strtoll(nans[p.nan]->c_str(), nullptr, 10);
    }
    if (!p.lo || !p.hi) continue;
    if (p.temporal != SIZE_MAX) {
      p.lo = temporal[p.temporal];
      p.hi = temporal[p.temporal + 1];
    }
    ASSIGN_OR_RETURN(std::optional<std::string> lo, Bound(p.field->type, p.lo, false));
    ASSIGN_OR_RETURN(std::optional<std::string> hi, Bound(p.field->type, p.hi, true));
    if (lo) f.lower_bounds[id] = std::move(*lo);
    if (hi) f.upper_bounds[id] = std::move(*hi);
  }
  return f;
}

}  // namespace sluice::lake
