// Packed ordering keys (D8, D14) and the types' facts (D5, D7).
#include "query/rewrite/key_packing.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace sluice::query::rewrite {

std::string Int128ToString(__int128 v) {
  if (v == 0) return "0";
  bool neg = v < 0;
  unsigned __int128 u =
      neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string s;
  while (u > 0) {
    s.push_back(static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  if (neg) s.push_back('-');
  std::reverse(s.begin(), s.end());
  return s;
}

int64_t TypeWidth(const std::string& type) {
  std::string t = type;
  if (t == "BOOLEAN" || t == "TINYINT" || t == "UTINYINT") return 1;
  if (t == "SMALLINT" || t == "USMALLINT") return 2;
  if (t == "INTEGER" || t == "UINTEGER" || t == "DATE" || t == "FLOAT") return 4;
  if (t == "HUGEINT" || t == "UHUGEINT" || t == "UUID" || t == "INTERVAL") return 16;
  if (t.rfind("DECIMAL", 0) == 0) return 16;
  if (t == "VARCHAR" || t == "BLOB") return 32;
  if (t.find('[') != std::string::npos || t.rfind("STRUCT", 0) == 0 || t.rfind("MAP", 0) == 0)
    return 64;
  return 8;
}

bool HashableKeyType(const std::string& t) {
  static const std::set<std::string, std::less<>> kTypes = {
      "BOOLEAN",     "TINYINT",      "SMALLINT",     "INTEGER",   "BIGINT",
      "HUGEINT",     "UTINYINT",     "USMALLINT",    "UINTEGER",  "UBIGINT",
      "UHUGEINT",    "DATE",         "TIME",         "TIMESTAMP", "TIMESTAMP WITH TIME ZONE",
      "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "VARCHAR",   "BLOB",
      "UUID",        "DOUBLE",       "FLOAT"};
  return kTypes.count(t) > 0 || t.rfind("DECIMAL", 0) == 0;
}

namespace {

// DECIMAL(p,s) with p <= 18 (an int64 inside): its scale, or -1 for any other type.
int SmallDecimalScale(const std::string& type) {
  int p = 0, s = 0;
  if (std::sscanf(type.c_str(), "DECIMAL(%d,%d)", &p, &s) != 2) return -1;
  if (p < 1 || p > 18 || s < 0 || s > p) return -1;
  return s;
}

std::string PowerOfTen(int s) { return "1" + std::string(static_cast<size_t>(s), '0'); }

}  // namespace

std::string OrdinalExpr(const std::string& type, const std::string& e) {
  // A small DECIMAL: its unscaled integer (exact: the product is an integer of at most 18
  // digits, computed at width 38 so it cannot overflow).
  if (const int s = SmallDecimalScale(type); s >= 0) {
    return fmt::format("CAST(CAST({} AS DECIMAL(38,{})) * {} AS BIGINT)", e, s, PowerOfTen(s));
  }
  if (type == "BOOLEAN" || type == "TINYINT" || type == "SMALLINT" || type == "INTEGER" ||
      type == "BIGINT" || type == "UTINYINT" || type == "USMALLINT" || type == "UINTEGER") {
    return fmt::format("{}::BIGINT", e);
  }
  if (type == "DATE") return fmt::format("({} - DATE '1970-01-01')::BIGINT", e);
  if (type == "TIMESTAMP" || type == "TIMESTAMP WITH TIME ZONE" || type == "TIMESTAMP_S" ||
      type == "TIMESTAMP_MS") {
    return fmt::format("epoch_us({})", e);
  }
  if (type == "TIMESTAMP_NS") return fmt::format("epoch_ns({})", e);
  return "";
}

std::string DecodeOrdinal(const std::string& type, const std::string& e) {
  if (const int s = SmallDecimalScale(type); s >= 0) {
    // Decimal multiplication is exact (division would be DOUBLE).
    if (s == 0) return fmt::format("CAST(CAST({} AS BIGINT) AS {})", e, type);
    return fmt::format("CAST(CAST({} AS DECIMAL(18,0)) * CAST('0.{}1' AS DECIMAL({},{})) AS {})", e,
                       std::string(static_cast<size_t>(s - 1), '0'), s + 1, s, type);
  }
  if (type == "TIMESTAMP_NS") return fmt::format("make_timestamp_ns(CAST({} AS BIGINT))", e);
  if (type == "BOOLEAN" || type == "TINYINT" || type == "SMALLINT" || type == "INTEGER" ||
      type == "BIGINT" || type == "UTINYINT" || type == "USMALLINT" || type == "UINTEGER") {
    return fmt::format("CAST(CAST({} AS BIGINT) AS {})", e, type);
  }
  if (type == "DATE")
    return fmt::format("CAST(DATE '1970-01-01' + CAST({} AS INTEGER) AS DATE)", e);
  if (type == "TIMESTAMP") return fmt::format("make_timestamp(CAST({} AS BIGINT))", e);
  if (type == "TIMESTAMP_S" || type == "TIMESTAMP_MS") {
    return fmt::format("CAST(make_timestamp(CAST({} AS BIGINT)) AS {})", e, type);
  }
  if (type == "TIMESTAMP WITH TIME ZONE") {
    return fmt::format(
        "(TIMESTAMPTZ '1970-01-01 00:00:00+00' + to_microseconds(CAST({} AS BIGINT)))", e);
  }
  return "";
}

PackedField OrdinalField(const std::string& col, const std::string& ord, const std::string& type,
                         __int128 lo, __int128 hi, bool has_null, bool descending,
                         bool nulls_first) {
  __int128 range = hi - lo;
  __int128 max_code = range + (has_null ? 1 : 0);
  PackedField f;
  while (f.width < 127 && (static_cast<__int128>(1) << f.width) <= max_code) ++f.width;
  std::string wide = f.width > 63 ? "::HUGEINT" : "";
  std::string value = descending ? fmt::format("({}{} - {})", Int128ToString(hi), wide, ord)
                                 : fmt::format("({}{} - {})", ord, wide, Int128ToString(lo));
  bool shifted = has_null && nulls_first;
  std::string in_bounds =
      fmt::format("{} BETWEEN {} AND {}", ord, Int128ToString(lo), Int128ToString(hi));
  f.guard = has_null ? fmt::format("({} IS NULL OR {})", col, in_bounds) : in_bounds;
  f.code = !has_null ? value
           : shifted ? fmt::format("coalesce({} + 1, 0)", value)
                     : fmt::format("coalesce({}, {})", value, Int128ToString(range + 1));
  if (DecodeOrdinal(type, "0").empty()) return f;
  f.decode = [=](const std::string& code) {
    std::string c = shifted ? fmt::format("({} - 1)", code) : code;
    std::string v =
        DecodeOrdinal(type, descending ? fmt::format("({} - {})", Int128ToString(hi), c)
                                       : fmt::format("({} + {})", Int128ToString(lo), c));
    if (!has_null) return v;
    return fmt::format("CASE WHEN {} = {} THEN NULL ELSE {} END", code,
                       nulls_first ? "0" : Int128ToString(range + 1), v);
  };
  return f;
}

PackedField AllNullField(const std::string& col, const std::string& type) {
  PackedField f;
  f.guard = fmt::format("{} IS NULL", col);
  f.code = "0";
  f.decode = [type](const std::string&) { return fmt::format("CAST(NULL AS {})", type); };
  return f;
}

bool IsScaledFloat(const std::string& type) { return type == "DOUBLE" || type == "FLOAT"; }

std::string Scaled(const std::string& type, const std::string& q) {
  // A FLOAT is widened first: FLOAT * 100 would round in single precision.
  if (type == "FLOAT") return fmt::format("round(CAST({} AS DOUBLE) * {})", q, kDoubleScale);
  return fmt::format("round({} * {})", q, kDoubleScale);
}

std::string ScaledBack(const std::string& type, const std::string& scaled) {
  if (type == "FLOAT") return fmt::format("CAST({} / {} AS FLOAT)", scaled, kDoubleScale);
  return fmt::format("({} / {})", scaled, kDoubleScale);
}

namespace {

std::optional<int64_t> IntegralDouble(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || !std::isfinite(d) || d != std::floor(d) ||
      std::fabs(d) >= 9007199254740992.0) {
    return std::nullopt;
  }
  return static_cast<int64_t>(d);
}

}  // namespace

std::optional<PackedField> ExactField(const Column& col,
                                      const std::vector<std::optional<std::string>>& s, size_t at,
                                      int64_t rows) {
  std::string q = Quote(col.name);
  if (!IsScaledFloat(col.type)) {
    if (!s[at + 2] || !s[at + 3]) return std::nullopt;
    int64_t non_null = std::atoll(s[at + 2]->c_str());
    if (non_null == 0) return AllNullField(q, col.type);
    if (non_null != std::atoll(s[at + 3]->c_str()) || !s[at] || !s[at + 1]) return std::nullopt;
    return OrdinalField(q, OrdinalExpr(col.type, q), col.type, std::atoll(s[at]->c_str()),
                        std::atoll(s[at + 1]->c_str()), non_null < rows, false, false);
  }
  if (!s[at]) return std::nullopt;
  int64_t non_null = std::atoll(s[at]->c_str());
  if (non_null == 0) return AllNullField(q, col.type);
  if (s[at + 1] && std::strtod(s[at + 1]->c_str(), nullptr) < 0)
    return std::nullopt;  // -0.0 would come back as 0.0
  std::optional<int64_t> lo = IntegralDouble(s[at + 2]);
  std::optional<int64_t> hi = IntegralDouble(s[at + 3]);
  if (!lo || !hi || !s[at + 4] || std::atoll(s[at + 4]->c_str()) != non_null) return std::nullopt;
  std::string scaled = Scaled(col.type, q);
  bool has_null = non_null < rows;
  PackedField f;
  __int128 range = static_cast<__int128>(*hi) - *lo;
  while ((static_cast<__int128>(1) << f.width) <= range + (has_null ? 1 : 0)) ++f.width;
  std::string exact =
      fmt::format("{1} BETWEEN {2} AND {3} AND {4} = {0} AND ({0} <> 0 OR atan2({0}, -1) > 0)", q,
                  scaled, *lo, *hi, ScaledBack(col.type, scaled));
  f.guard = has_null ? fmt::format("({} IS NULL OR ({}))", q, exact) : fmt::format("({})", exact);
  std::string value = fmt::format("(CAST({} AS BIGINT) - {})", scaled, *lo);
  f.code = has_null ? fmt::format("coalesce({}, {})", value, Int128ToString(range + 1)) : value;
  int64_t low = *lo;
  std::string type = col.type;
  f.decode = [=](const std::string& code) {
    std::string v = ScaledBack(type, fmt::format("CAST({} + {} AS DOUBLE)", low, code));
    if (!has_null) return v;
    return fmt::format("CASE WHEN {} = {} THEN NULL ELSE {} END", code, Int128ToString(range + 1),
                       v);
  };
  return f;
}

std::string PackedKey(std::vector<PackedField*>& fields, const std::string& hash, int hash_bits,
                      const std::string& changed) {
  PackedField hash_field;
  if (hash_bits > 0) {
    hash_field.code = fmt::format("({} >> {})::BIGINT", hash, 64 - hash_bits);
    hash_field.width = hash_bits;
  }
  std::vector<PackedField*> all = fields;
  if (hash_bits > 0) all.push_back(&hash_field);
  int total = 0;
  for (PackedField* f : all) total += f->width;
  int shift = total;
  for (PackedField* f : all) {
    shift -= f->width;
    f->shift = shift;
  }
  // Words: runs of fields of up to 63 bits together, each a BIGINT sum.
  struct Word {
    std::vector<PackedField*> fields;
    int bits = 0;
    int shift = 0;  // of its least significant field
  };
  std::vector<Word> words;
  for (PackedField* f : all) {
    if (f->width == 0) continue;
    if (words.empty() || words.back().bits + f->width > 63 || f->width > 63 ||
        words.back().bits > 63) {
      words.push_back({});
    }
    words.back().fields.push_back(f);
    words.back().bits += f->width;
    words.back().shift = f->shift;
  }
  std::vector<std::string> word_sql;
  for (const Word& w : words) {
    std::vector<std::string> terms;
    for (PackedField* f : w.fields) {
      int s = f->shift - w.shift;
      terms.push_back(
          s == 0 ? f->code
                 : fmt::format("{} * {}", f->code, Int128ToString(static_cast<__int128>(1) << s)));
    }
    word_sql.push_back(fmt::format("({})", fmt::join(terms, " + ")));
  }
  std::string key;
  if (word_sql.empty()) {
    key = "0::BIGINT";
  } else if (total <= 63) {
    key = fmt::format("{}::BIGINT", word_sql[0]);
  } else {
    std::vector<std::string> terms;
    for (size_t i = 0; i < words.size(); ++i) {
      terms.push_back(words[i].shift == 0 ? fmt::format("{}::HUGEINT", word_sql[i])
                                          : fmt::format("{}::HUGEINT * {}::HUGEINT", word_sql[i],
                                                        Int128ToString(static_cast<__int128>(1)
                                                                       << words[i].shift)));
    }
    key = fmt::format("{}", fmt::join(terms, " + "));
  }
  std::vector<std::string> guards;
  for (PackedField* f : fields) {
    if (!f->guard.empty()) guards.push_back(f->guard);
  }
  if (guards.empty()) return key;
  return fmt::format("CASE WHEN {} THEN {} ELSE {} END", fmt::join(guards, " AND "), key, changed);
}

}  // namespace sluice::query::rewrite
