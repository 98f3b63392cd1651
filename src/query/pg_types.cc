#include "query/pg_types.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "query/pg_protocol.h"

namespace sluice::query {

using duck::TypeId;

namespace oid {
namespace {
constexpr std::pair<uint32_t, uint32_t> kArrays[] = {
    {kBool, kBoolArray},
    {kBytea, kByteaArray},
    {kInt2, kInt2Array},
    {kInt4, kInt4Array},
    {kText, kTextArray},
    {kVarchar, kVarcharArray},
    {kInt8, kInt8Array},
    {kFloat4, kFloat4Array},
    {kFloat8, kFloat8Array},
    {kTimestamp, kTimestampArray},
    {kDate, kDateArray},
    {kTime, kTimeArray},
    {kTimestampTz, kTimestampTzArray},
    {kInterval, kIntervalArray},
    {kNumeric, kNumericArray},
    {kUuid, kUuidArray},
    {kJson, kJsonArray},
};
}  // namespace
uint32_t ArrayOf(uint32_t elem) {
  for (auto [e, a] : kArrays) {
    if (e == elem) return a;
  }
  return 0;
}
uint32_t ElementOf(uint32_t array) {
  for (auto [e, a] : kArrays) {
    if (a == array) return e;
  }
  return 0;
}
}  // namespace oid

// How one DuckDB type is sent. Lists and arrays of scalars become Postgres arrays;
// structs, maps and lists of those become text in DuckDB's own notation.
struct TypeInfo {
  TypeId id = TypeId::kInvalid;
  PgType pg{oid::kText, -1, -1};
  enum class Kind { kScalar, kPgArray, kDuckText } kind = Kind::kScalar;
  int scale = 0;                         // DECIMAL
  TypeId physical = TypeId::kInvalid;    // DECIMAL and ENUM: the values' physical type
  std::vector<std::string> enum_values;  // ENUM
  uint64_t array_size = 0;               // ARRAY
  std::vector<std::string> field_names;  // STRUCT
  std::vector<TypeInfo> children;        // LIST/ARRAY: 1; MAP: key, value; STRUCT: fields
};

namespace {

constexpr int64_t kMicrosPerDay = 86'400'000'000;
constexpr int32_t kPgEpochDays = 10957;                  // 2000-01-01 in days since 1970
constexpr int64_t kPgEpochMicros = 946'684'800'000'000;  // 2000-01-01 in micros since 1970
constexpr int32_t kDateInfinity = std::numeric_limits<int32_t>::max();
constexpr int64_t kTimestampInfinity = std::numeric_limits<int64_t>::max();

// ---- scalar mapping --------------------------------------------------------------

bool ScalarPgType(const duck::LogicalType& t, TypeInfo& info) {
  auto set = [&](uint32_t o, int16_t size) {
    info.pg = {o, size, -1};
    return true;
  };
  switch (t.id()) {
    case TypeId::kBoolean:
      return set(oid::kBool, 1);
    case TypeId::kTinyInt:
    case TypeId::kSmallInt:
    case TypeId::kUTinyInt:
      return set(oid::kInt2, 2);
    case TypeId::kInteger:
    case TypeId::kUSmallInt:
      return set(oid::kInt4, 4);
    case TypeId::kBigInt:
    case TypeId::kUInteger:
      return set(oid::kInt8, 8);
    case TypeId::kUBigInt:
    case TypeId::kHugeInt:
    case TypeId::kUHugeInt:
      return set(oid::kNumeric, -1);
    case TypeId::kFloat:
      return set(oid::kFloat4, 4);
    case TypeId::kDouble:
      return set(oid::kFloat8, 8);
    case TypeId::kDecimal:
      info.scale = t.DecimalScale();
      info.physical = t.DecimalInternalType();
      info.pg = {oid::kNumeric, -1, ((t.DecimalWidth() << 16) | t.DecimalScale()) + 4};
      return true;
    case TypeId::kVarchar:
      return set(t.alias() == "JSON" ? oid::kJson : oid::kVarchar, -1);
    case TypeId::kBlob:
      return set(oid::kBytea, -1);
    case TypeId::kDate:
      return set(oid::kDate, 4);
    case TypeId::kTime:
      return set(oid::kTime, 8);
    case TypeId::kTimestamp:
    case TypeId::kTimestampS:
    case TypeId::kTimestampMs:
    case TypeId::kTimestampNs:
      return set(oid::kTimestamp, 8);
    case TypeId::kTimestampTz:
      return set(oid::kTimestampTz, 8);
    case TypeId::kInterval:
      return set(oid::kInterval, 16);
    case TypeId::kUuid:
      return set(oid::kUuid, 16);
    case TypeId::kEnum: {
      info.physical = t.EnumInternalType();
      uint64_t n = t.EnumSize();
      for (uint64_t i = 0; i < n; ++i) info.enum_values.push_back(t.EnumValue(i));
      return set(oid::kText, -1);
    }
    default:
      return false;
  }
}

Result<TypeInfo> MakeInfo(const duck::LogicalType& t) {
  TypeInfo info;
  info.id = t.id();
  if (ScalarPgType(t, info)) return info;
  switch (t.id()) {
    case TypeId::kList:
    case TypeId::kArray: {
      duck::LogicalType child = t.id() == TypeId::kList ? t.ListChild() : t.ArrayChild();
      if (t.id() == TypeId::kArray) info.array_size = t.ArraySize();
      ASSIGN_OR_RETURN(TypeInfo c, MakeInfo(child));
      bool scalar_child = c.kind == TypeInfo::Kind::kScalar && oid::ArrayOf(c.pg.oid) != 0;
      if (scalar_child) {
        info.kind = TypeInfo::Kind::kPgArray;
        info.pg = {oid::ArrayOf(c.pg.oid), -1, -1};
      } else {
        info.kind = TypeInfo::Kind::kDuckText;
        info.pg = {oid::kText, -1, -1};
      }
      info.children.push_back(std::move(c));
      return info;
    }
    case TypeId::kStruct: {
      info.kind = TypeInfo::Kind::kDuckText;
      for (size_t i = 0; i < t.StructFieldCount(); ++i) {
        info.field_names.push_back(t.StructFieldName(i));
        ASSIGN_OR_RETURN(TypeInfo c, MakeInfo(t.StructFieldType(i)));
        info.children.push_back(std::move(c));
      }
      return info;
    }
    case TypeId::kMap: {
      info.kind = TypeInfo::Kind::kDuckText;
      ASSIGN_OR_RETURN(TypeInfo k, MakeInfo(t.MapKey()));
      ASSIGN_OR_RETURN(TypeInfo v, MakeInfo(t.MapValue()));
      info.children.push_back(std::move(k));
      info.children.push_back(std::move(v));
      return info;
    }
    case TypeId::kSqlNull:
    case TypeId::kInvalid:  // a prepared statement's column whose type waits for its parameters
    case TypeId::kAny:
      info.pg = {oid::kText, -1, -1};
      return info;
    default:
      return UnimplementedError(
          "the query server cannot send values of type {}; cast the column (to VARCHAR, for "
          "example)",
          duck::TypeIdName(t.id()));
  }
}

// ---- text forms ------------------------------------------------------------------

void CivilFromDays(int64_t z, int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
}

void AppendDate(std::string& out, int64_t days, bool* bc) {
  int64_t y;
  unsigned m, d;
  CivilFromDays(days, y, m, d);
  *bc = y <= 0;
  if (*bc) y = 1 - y;
  fmt::format_to(std::back_inserter(out), "{:04}-{:02}-{:02}", y, m, d);
}

// HH:MM:SS and the fraction without trailing zeros, as Postgres prints seconds.
void AppendClock(std::string& out, uint64_t micros_of_day) {
  uint64_t secs = micros_of_day / 1'000'000;
  uint64_t frac = micros_of_day % 1'000'000;
  fmt::format_to(std::back_inserter(out), "{:02}:{:02}:{:02}", secs / 3600, (secs / 60) % 60,
                 secs % 60);
  if (frac != 0) {
    std::string f = fmt::format("{:06}", frac);
    while (!f.empty() && f.back() == '0') f.pop_back();
    out += '.';
    out += f;
  }
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::string HugeIntDigits(unsigned __int128 v) {
  if (v == 0) return "0";
  char buf[48];
  int i = 48;
  while (v > 0) {
    buf[--i] = static_cast<char>('0' + static_cast<int>(v % 10));
    v /= 10;
  }
  return std::string(buf + i, 48 - i);
}

template <typename T>
T Load(const duck::Vector& v, uint64_t row) {
  T x;
  std::memcpy(&x, static_cast<const char*>(v.RawData()) + row * sizeof(T), sizeof(T));
  return x;
}

__int128 LoadHugeInt(const duck::Vector& v, uint64_t row) {
  uint64_t lower = Load<uint64_t>(v, row * 2);
  int64_t upper = Load<int64_t>(v, row * 2 + 1);
  return static_cast<__int128>(
      (static_cast<unsigned __int128>(static_cast<uint64_t>(upper)) << 64) | lower);
}

__int128 LoadIntegral(const duck::Vector& v, uint64_t row, TypeId physical) {
  switch (physical) {
    case TypeId::kSmallInt:
      return Load<int16_t>(v, row);
    case TypeId::kInteger:
      return Load<int32_t>(v, row);
    case TypeId::kBigInt:
      return Load<int64_t>(v, row);
    default:
      return LoadHugeInt(v, row);
  }
}

int64_t TimestampMicros(TypeId id, int64_t raw) {
  switch (id) {
    case TypeId::kTimestampS:
      return raw * 1'000'000;
    case TypeId::kTimestampMs:
      return raw * 1000;
    case TypeId::kTimestampNs:
      return FloorDiv(raw, 1000);
    default:
      return raw;
  }
}

std::string UuidText(__int128 stored) {
  // DuckDB stores a UUID with the top bit flipped, so that signed order is byte order.
  auto u = static_cast<unsigned __int128>(stored) ^ (static_cast<unsigned __int128>(1) << 127);
  auto hi = static_cast<uint64_t>(u >> 64);
  auto lo = static_cast<uint64_t>(u);
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xffff,
                     hi & 0xffff, lo >> 48, lo & 0xffffffffffffULL);
}

void AppendHex(std::string& out, std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
}

// The text of a scalar value (not NULL).
void ScalarText(const TypeInfo& t, const duck::Vector& v, uint64_t row, std::string& out) {
  auto out_it = std::back_inserter(out);
  switch (t.id) {
    case TypeId::kBoolean:
      out += Load<bool>(v, row) ? 't' : 'f';
      return;
    case TypeId::kTinyInt:
      fmt::format_to(out_it, "{}", Load<int8_t>(v, row));
      return;
    case TypeId::kSmallInt:
      fmt::format_to(out_it, "{}", Load<int16_t>(v, row));
      return;
    case TypeId::kInteger:
      fmt::format_to(out_it, "{}", Load<int32_t>(v, row));
      return;
    case TypeId::kBigInt:
      fmt::format_to(out_it, "{}", Load<int64_t>(v, row));
      return;
    case TypeId::kUTinyInt:
      fmt::format_to(out_it, "{}", Load<uint8_t>(v, row));
      return;
    case TypeId::kUSmallInt:
      fmt::format_to(out_it, "{}", Load<uint16_t>(v, row));
      return;
    case TypeId::kUInteger:
      fmt::format_to(out_it, "{}", Load<uint32_t>(v, row));
      return;
    case TypeId::kUBigInt:
      fmt::format_to(out_it, "{}", Load<uint64_t>(v, row));
      return;
    case TypeId::kHugeInt:
      out += FormatHugeInt(LoadHugeInt(v, row), 0);
      return;
    case TypeId::kUHugeInt: {
      auto u = static_cast<unsigned __int128>(LoadHugeInt(v, row));
      out += HugeIntDigits(u);
      return;
    }
    case TypeId::kFloat:
      out += FormatFloat(Load<float>(v, row), true);
      return;
    case TypeId::kDouble:
      out += FormatFloat(Load<double>(v, row), false);
      return;
    case TypeId::kDecimal:
      out += FormatHugeInt(LoadIntegral(v, row, t.physical), t.scale);
      return;
    case TypeId::kVarchar:
      out += v.GetString(row);
      return;
    case TypeId::kBlob:
      out += "\\x";
      AppendHex(out, v.GetString(row));
      return;
    case TypeId::kDate:
      out += FormatDate(Load<int32_t>(v, row));
      return;
    case TypeId::kTime:
      out += FormatTime(Load<int64_t>(v, row));
      return;
    case TypeId::kTimestamp:
    case TypeId::kTimestampS:
    case TypeId::kTimestampMs:
    case TypeId::kTimestampNs: {
      int64_t raw = Load<int64_t>(v, row);
      if (raw == kTimestampInfinity || raw == -kTimestampInfinity) {
        out += raw > 0 ? "infinity" : "-infinity";
        return;
      }
      out += FormatTimestamp(TimestampMicros(t.id, raw), false);
      return;
    }
    case TypeId::kTimestampTz:
      out += FormatTimestamp(Load<int64_t>(v, row), true);
      return;
    case TypeId::kInterval: {
      int32_t months = Load<int32_t>(v, row * 4);
      int32_t days = Load<int32_t>(v, row * 4 + 1);
      int64_t micros = Load<int64_t>(v, row * 2 + 1);
      out += FormatInterval(months, days, micros);
      return;
    }
    case TypeId::kUuid:
      out += UuidText(LoadHugeInt(v, row));
      return;
    case TypeId::kEnum: {
      uint64_t idx = t.physical == TypeId::kUTinyInt    ? Load<uint8_t>(v, row)
                     : t.physical == TypeId::kUSmallInt ? Load<uint16_t>(v, row)
                                                        : Load<uint32_t>(v, row);
      if (idx < t.enum_values.size()) out += t.enum_values[idx];
      return;
    }
    default:
      return;  // SQLNULL: every value is NULL
  }
}

// Postgres array element quoting.
void AppendArrayElement(std::string& out, std::string_view e) {
  bool quote =
      e.empty() || (e.size() == 4 && (e[0] == 'N' || e[0] == 'n') && (e[1] == 'U' || e[1] == 'u') &&
                    (e[2] == 'L' || e[2] == 'l') && (e[3] == 'L' || e[3] == 'l'));
  for (char c : e) {
    if (c == '{' || c == '}' || c == ',' || c == '"' || c == '\\' || c == ' ' || c == '\t' ||
        c == '\n' || c == '\r' || c == '\v' || c == '\f') {
      quote = true;
    }
  }
  if (!quote) {
    out += e;
    return;
  }
  out += '"';
  for (char c : e) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

// Child rows [offset, offset + length) of a LIST or ARRAY row.
void ChildRange(const TypeInfo& t, const duck::Vector& v, uint64_t row, uint64_t& offset,
                uint64_t& length) {
  if (t.id == TypeId::kArray) {
    offset = row * t.array_size;
    length = t.array_size;
  } else {
    duck::ListEntry e = Load<duck::ListEntry>(v, row);
    offset = e.offset;
    length = e.length;
  }
}

duck::Vector ChildVector(const TypeInfo& t, const duck::Vector& v) {
  return t.id == TypeId::kArray ? v.ArrayChild() : v.ListChild();
}

void DuckText(const TypeInfo& t, const duck::Vector& v, uint64_t row, std::string& out,
              bool nested);

void DuckTextOrNull(const TypeInfo& t, const duck::Vector& v, uint64_t row, std::string& out) {
  if (!v.IsValid(row)) {
    out += "NULL";
    return;
  }
  DuckText(t, v, row, out, true);
}

// DuckDB's notation for nested values: [1, 2], {'a': 1}, {k=v}; strings quoted inside.
void DuckText(const TypeInfo& t, const duck::Vector& v, uint64_t row, std::string& out,
              bool nested) {
  switch (t.id) {
    case TypeId::kList:
    case TypeId::kArray: {
      uint64_t off, len;
      ChildRange(t, v, row, off, len);
      duck::Vector child = ChildVector(t, v);
      out += '[';
      for (uint64_t i = 0; i < len; ++i) {
        if (i > 0) out += ", ";
        DuckTextOrNull(t.children[0], child, off + i, out);
      }
      out += ']';
      return;
    }
    case TypeId::kStruct:
      out += '{';
      for (size_t i = 0; i < t.children.size(); ++i) {
        if (i > 0) out += ", ";
        out += '\'';
        out += t.field_names[i];
        out += "': ";
        DuckTextOrNull(t.children[i], v.StructField(i), row, out);
      }
      out += '}';
      return;
    case TypeId::kMap: {
      duck::ListEntry e = Load<duck::ListEntry>(v, row);
      duck::Vector entries = v.ListChild();
      out += '{';
      for (uint64_t i = 0; i < e.length; ++i) {
        if (i > 0) out += ", ";
        DuckTextOrNull(t.children[0], entries.StructField(0), e.offset + i, out);
        out += '=';
        DuckTextOrNull(t.children[1], entries.StructField(1), e.offset + i, out);
      }
      out += '}';
      return;
    }
    default: {
      bool quoted = nested && (t.pg.oid == oid::kVarchar || t.pg.oid == oid::kText ||
                               t.pg.oid == oid::kJson || t.id == TypeId::kDate ||
                               t.id == TypeId::kTimestamp || t.id == TypeId::kUuid);
      if (quoted) out += '\'';
      ScalarText(t, v, row, out);
      if (quoted) out += '\'';
      return;
    }
  }
}

void AppendInt16(std::string& out, int16_t x) {
  auto u = static_cast<uint16_t>(x);
  out += static_cast<char>(u >> 8);
  out += static_cast<char>(u);
}
void AppendInt32(std::string& out, int32_t x) {
  auto u = static_cast<uint32_t>(x);
  char b[4] = {static_cast<char>(u >> 24), static_cast<char>(u >> 16), static_cast<char>(u >> 8),
               static_cast<char>(u)};
  out.append(b, 4);
}
void AppendInt64(std::string& out, int64_t x) {
  AppendInt32(out, static_cast<int32_t>(static_cast<uint64_t>(x) >> 32));
  AppendInt32(out, static_cast<int32_t>(static_cast<uint64_t>(x)));
}

// The binary form of a scalar value (not NULL), without its length.
void ScalarBinary(const TypeInfo& t, const duck::Vector& v, uint64_t row, std::string& out) {
  switch (t.id) {
    case TypeId::kBoolean:
      out += Load<bool>(v, row) ? '\1' : '\0';
      return;
    case TypeId::kTinyInt:
      AppendInt16(out, Load<int8_t>(v, row));
      return;
    case TypeId::kSmallInt:
      AppendInt16(out, Load<int16_t>(v, row));
      return;
    case TypeId::kUTinyInt:
      AppendInt16(out, Load<uint8_t>(v, row));
      return;
    case TypeId::kInteger:
      AppendInt32(out, Load<int32_t>(v, row));
      return;
    case TypeId::kUSmallInt:
      AppendInt32(out, Load<uint16_t>(v, row));
      return;
    case TypeId::kBigInt:
      AppendInt64(out, Load<int64_t>(v, row));
      return;
    case TypeId::kUInteger:
      AppendInt64(out, Load<uint32_t>(v, row));
      return;
    case TypeId::kFloat: {
      float f = Load<float>(v, row);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      AppendInt32(out, static_cast<int32_t>(bits));
      return;
    }
    case TypeId::kDouble: {
      double d = Load<double>(v, row);
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      AppendInt64(out, static_cast<int64_t>(bits));
      return;
    }
    case TypeId::kUBigInt:
    case TypeId::kHugeInt:
    case TypeId::kUHugeInt:
    case TypeId::kDecimal: {
      std::string text;
      ScalarText(t, v, row, text);
      auto bin = NumericBinaryFromText(text);
      out += bin.ok() ? *bin : std::string(8, '\0');
      return;
    }
    case TypeId::kVarchar:
    case TypeId::kBlob:
      out += v.GetString(row);
      return;
    case TypeId::kDate: {
      int32_t d = Load<int32_t>(v, row);
      if (d == kDateInfinity || d == -kDateInfinity) {
        AppendInt32(
            out, d > 0 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min());
      } else {
        AppendInt32(out, d - kPgEpochDays);
      }
      return;
    }
    case TypeId::kTime:
      AppendInt64(out, Load<int64_t>(v, row));
      return;
    case TypeId::kTimestamp:
    case TypeId::kTimestampS:
    case TypeId::kTimestampMs:
    case TypeId::kTimestampNs:
    case TypeId::kTimestampTz: {
      int64_t raw = Load<int64_t>(v, row);
      if (raw == kTimestampInfinity || raw == -kTimestampInfinity) {
        AppendInt64(out, raw > 0 ? std::numeric_limits<int64_t>::max()
                                 : std::numeric_limits<int64_t>::min());
      } else {
        AppendInt64(out, TimestampMicros(t.id, raw) - kPgEpochMicros);
      }
      return;
    }
    case TypeId::kInterval:
      AppendInt64(out, Load<int64_t>(v, row * 2 + 1));
      AppendInt32(out, Load<int32_t>(v, row * 4 + 1));
      AppendInt32(out, Load<int32_t>(v, row * 4));
      return;
    case TypeId::kUuid: {
      auto u = static_cast<unsigned __int128>(LoadHugeInt(v, row)) ^
               (static_cast<unsigned __int128>(1) << 127);
      AppendInt64(out, static_cast<int64_t>(static_cast<uint64_t>(u >> 64)));
      AppendInt64(out, static_cast<int64_t>(static_cast<uint64_t>(u)));
      return;
    }
    default:
      ScalarText(t, v, row, out);
      return;  // ENUM, SQLNULL: sent as text
  }
}

void AppendField(const TypeInfo& t, const duck::Vector& v, uint64_t row, bool binary,
                 std::string& out) {
  size_t len_pos = out.size();
  out.append(4, '\0');
  switch (t.kind) {
    case TypeInfo::Kind::kScalar:
      if (binary) {
        ScalarBinary(t, v, row, out);
      } else {
        ScalarText(t, v, row, out);
      }
      break;
    case TypeInfo::Kind::kDuckText:
      DuckText(t, v, row, out, false);
      break;
    case TypeInfo::Kind::kPgArray: {
      uint64_t off, len;
      ChildRange(t, v, row, off, len);
      duck::Vector child = ChildVector(t, v);
      const TypeInfo& e = t.children[0];
      if (binary) {
        bool has_null = false;
        for (uint64_t i = 0; i < len; ++i) has_null |= !child.IsValid(off + i);
        AppendInt32(out, len == 0 ? 0 : 1);
        AppendInt32(out, has_null ? 1 : 0);
        AppendInt32(out, static_cast<int32_t>(e.pg.oid));
        if (len > 0) {
          AppendInt32(out, static_cast<int32_t>(len));
          AppendInt32(out, 1);
        }
        for (uint64_t i = 0; i < len; ++i) {
          if (!child.IsValid(off + i)) {
            AppendInt32(out, -1);
          } else {
            AppendField(e, child, off + i, true, out);
          }
        }
      } else {
        out += '{';
        std::string elem;
        for (uint64_t i = 0; i < len; ++i) {
          if (i > 0) out += ',';
          if (!child.IsValid(off + i)) {
            out += "NULL";
            continue;
          }
          elem.clear();
          ScalarText(e, child, off + i, elem);
          AppendArrayElement(out, elem);
        }
        out += '}';
      }
      break;
    }
  }
  auto n = static_cast<uint32_t>(out.size() - len_pos - 4);
  out[len_pos] = static_cast<char>(n >> 24);
  out[len_pos + 1] = static_cast<char>(n >> 16);
  out[len_pos + 2] = static_cast<char>(n >> 8);
  out[len_pos + 3] = static_cast<char>(n);
}

}  // namespace

// ---- public ----------------------------------------------------------------------

Result<ColumnEncoder> ColumnEncoder::Make(const duck::LogicalType& type) {
  ASSIGN_OR_RETURN(TypeInfo info, MakeInfo(type));
  return ColumnEncoder(std::make_shared<const TypeInfo>(std::move(info)));
}

const PgType& ColumnEncoder::pg_type() const { return info_->pg; }

void ColumnEncoder::Append(const duck::Vector& v, uint64_t row, bool binary,
                           std::string& out) const {
  if (!v.IsValid(row)) {
    out.append("\xff\xff\xff\xff", 4);
    return;
  }
  AppendField(*info_, v, row, binary, out);
}

uint32_t ParamOid(const std::optional<duck::LogicalType>& type) {
  if (!type) return oid::kText;
  TypeInfo info;
  if (ScalarPgType(*type, info)) return info.id == TypeId::kEnum ? oid::kText : info.pg.oid;
  if (type->id() == TypeId::kList) {
    TypeInfo child;
    if (ScalarPgType(type->ListChild(), child) && oid::ArrayOf(child.pg.oid) != 0)
      return oid::ArrayOf(child.pg.oid);
  }
  return oid::kText;
}

std::string FormatDate(int32_t days) {
  if (days == kDateInfinity) return "infinity";
  if (days == -kDateInfinity) return "-infinity";
  std::string out;
  bool bc;
  AppendDate(out, days, &bc);
  if (bc) out += " BC";
  return out;
}

std::string FormatTime(int64_t micros) {
  std::string out;
  AppendClock(out, static_cast<uint64_t>(micros < 0 ? 0 : micros));
  return out;
}

std::string FormatTimestamp(int64_t micros, bool with_time_zone) {
  if (micros == kTimestampInfinity) return "infinity";
  if (micros == -kTimestampInfinity) return "-infinity";
  int64_t days = FloorDiv(micros, kMicrosPerDay);
  std::string out;
  bool bc;
  AppendDate(out, days, &bc);
  out += ' ';
  AppendClock(out, static_cast<uint64_t>(micros - days * kMicrosPerDay));
  if (with_time_zone) out += "+00";
  if (bc) out += " BC";
  return out;
}

std::string FormatInterval(int32_t months, int32_t days, int64_t micros) {
  // Postgres's EncodeInterval, IntervalStyle postgres.
  std::string out;
  bool is_zero = true, is_before = false;
  auto part = [&](int64_t value, std::string_view unit) {
    if (value == 0) return;
    fmt::format_to(std::back_inserter(out), "{}{}{} {}{}", is_zero ? "" : " ",
                   is_before && value > 0 ? "+" : "", value, unit, value != 1 ? "s" : "");
    is_before = value < 0;
    is_zero = false;
  };
  part(months / 12, "year");
  part(months % 12, "mon");
  part(days, "day");
  if (is_zero || micros != 0) {
    bool minus = micros < 0;
    uint64_t m = minus ? static_cast<uint64_t>(-(micros + 1)) + 1 : static_cast<uint64_t>(micros);
    out += is_zero ? "" : " ";
    out += minus ? "-" : (is_before ? "+" : "");
    uint64_t secs = m / 1'000'000;
    uint64_t frac = m % 1'000'000;
    fmt::format_to(std::back_inserter(out), "{:02}:{:02}:{:02}", secs / 3600, (secs / 60) % 60,
                   secs % 60);
    if (frac != 0) {
      std::string f = fmt::format("{:06}", frac);
      while (f.back() == '0') f.pop_back();
      out += '.';
      out += f;
    }
  }
  return out;
}

std::string FormatFloat(double v, bool single) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return std::signbit(v) ? "-0" : "0";
  // The shortest digits that read back exactly (Postgres 12+ with extra_float_digits 1),
  // fixed notation for decimal exponents from -4 below the type's digits (6 or 15).
  char buf[64];
  auto res = single ? std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v),
                                    std::chars_format::scientific)
                    : std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view s(buf, res.ptr - buf);
  bool neg = s[0] == '-';
  if (neg) s.remove_prefix(1);
  size_t e = s.find('e');
  std::string digits;
  for (char c : s.substr(0, e)) {
    if (c != '.') digits += c;
  }
  int exp = 0;
  std::from_chars(s.data() + e + 1 + (s[e + 1] == '+' ? 1 : 0), s.data() + s.size(), exp);
  std::string out = neg ? "-" : "";
  int limit = single ? 6 : 15;
  if (exp < -4 || exp >= limit) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    fmt::format_to(std::back_inserter(out), "e{}{:02}", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  } else if (exp < 0) {
    out += "0.";
    out.append(static_cast<size_t>(-exp - 1), '0');
    out += digits;
  } else {
    auto int_len = static_cast<size_t>(exp + 1);
    if (digits.size() <= int_len) {
      out += digits;
      out.append(int_len - digits.size(), '0');
    } else {
      out += digits.substr(0, int_len);
      out += '.';
      out += digits.substr(int_len);
    }
  }
  return out;
}

std::string FormatHugeInt(__int128 v, int scale) {
  bool neg = v < 0;
  unsigned __int128 u =
      neg ? static_cast<unsigned __int128>(-(v + 1)) + 1 : static_cast<unsigned __int128>(v);
  std::string digits = HugeIntDigits(u);
  std::string out = neg ? "-" : "";
  if (scale <= 0) return out + digits;
  auto s = static_cast<size_t>(scale);
  if (digits.size() <= s) digits.insert(0, s + 1 - digits.size(), '0');
  out += digits.substr(0, digits.size() - s);
  out += '.';
  out += digits.substr(digits.size() - s);
  return out;
}

Result<std::string> NumericBinaryFromText(std::string_view text) {
  std::string out;
  if (text == "NaN") {
    AppendInt16(out, 0);
    AppendInt16(out, 0);
    AppendInt16(out, static_cast<int16_t>(0xC000));
    AppendInt16(out, 0);
    return out;
  }
  bool neg = !text.empty() && text[0] == '-';
  if (neg || (!text.empty() && text[0] == '+')) text.remove_prefix(1);
  size_t dot = text.find('.');
  std::string_view int_part = text.substr(0, dot);
  std::string_view frac_part =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if (int_part.empty() && frac_part.empty())
    return InvalidArgumentError("'{}' is not a number", text);
  for (char c : int_part) {
    if (c < '0' || c > '9') return InvalidArgumentError("'{}' is not a number", text);
  }
  for (char c : frac_part) {
    if (c < '0' || c > '9') return InvalidArgumentError("'{}' is not a number", text);
  }
  while (!int_part.empty() && int_part[0] == '0') int_part.remove_prefix(1);
  auto dscale = static_cast<int16_t>(frac_part.size());
  // Base-10000 digits: the integer part padded on the left, the fraction on the right.
  std::string ip(int_part);
  ip.insert(0, (4 - ip.size() % 4) % 4, '0');
  std::string fp(frac_part);
  fp.append((4 - fp.size() % 4) % 4, '0');
  std::vector<int16_t> digits;
  for (size_t i = 0; i < ip.size(); i += 4)
    digits.push_back(static_cast<int16_t>(std::stoi(ip.substr(i, 4))));
  for (size_t i = 0; i < fp.size(); i += 4)
    digits.push_back(static_cast<int16_t>(std::stoi(fp.substr(i, 4))));
  int weight = static_cast<int>(ip.size() / 4) - 1;
  size_t first = 0;
  while (first < digits.size() && digits[first] == 0) {
    ++first;
    --weight;
  }
  size_t last = digits.size();
  while (last > first && digits[last - 1] == 0) --last;
  if (first == last) {
    weight = 0;
    neg = false;
  }
  AppendInt16(out, static_cast<int16_t>(last - first));
  AppendInt16(out, static_cast<int16_t>(weight));
  AppendInt16(out, neg ? 0x4000 : 0);
  AppendInt16(out, dscale);
  for (size_t i = first; i < last; ++i) AppendInt16(out, digits[i]);
  return out;
}

Result<std::string> NumericTextFromBinary(std::string_view bytes) {
  pg::MessageReader r(bytes);
  ASSIGN_OR_RETURN(int16_t ndigits, r.Int16());
  ASSIGN_OR_RETURN(int16_t weight, r.Int16());
  ASSIGN_OR_RETURN(int16_t sign, r.Int16());
  ASSIGN_OR_RETURN(int16_t dscale, r.Int16());
  if (static_cast<uint16_t>(sign) == 0xC000) return std::string("NaN");
  if (ndigits < 0 || dscale < 0 || (sign != 0 && sign != 0x4000)) {
    return InvalidArgumentError("invalid binary NUMERIC (ndigits {}, sign {:#x}, dscale {})",
                                ndigits, sign, dscale);
  }
  if (ndigits > 1000 || weight > 1000 || weight < -1000 || dscale > 1000) {
    return InvalidArgumentError("binary NUMERIC out of range (ndigits {}, weight {}, dscale {})",
                                ndigits, weight, dscale);
  }
  std::vector<int> d;
  for (int i = 0; i < ndigits; ++i) {
    ASSIGN_OR_RETURN(int16_t x, r.Int16());
    if (x < 0 || x > 9999) return InvalidArgumentError("invalid binary NUMERIC digit {}", x);
    d.push_back(x);
  }
  if (!r.done()) return InvalidArgumentError("binary NUMERIC has {} extra bytes", r.remaining());
  // Group i has weight `weight - i`: its value is d[i] * 10000^(weight - i).
  auto group = [&](int w) {
    int i = weight - w;
    return i >= 0 && i < ndigits ? d[i] : 0;
  };
  std::string int_part, frac_part;
  for (int w = weight; w >= 0; --w) int_part += fmt::format("{:04}", group(w));
  while (int_part.size() > 1 && int_part[0] == '0') int_part.erase(0, 1);
  if (int_part.empty()) int_part = "0";
  for (int w = -1; static_cast<int>(frac_part.size()) < dscale; --w)
    frac_part += fmt::format("{:04}", group(w));
  frac_part.resize(static_cast<size_t>(dscale));
  std::string out = sign == 0x4000 ? "-" : "";
  out += int_part;
  if (dscale > 0) out += "." + frac_part;
  return out;
}

namespace {

Result<int64_t> BigEndian(std::string_view bytes, size_t n, std::string_view type) {
  if (bytes.size() != n) {
    return InvalidArgumentError("binary {} parameter has {} bytes, {} expected", type, bytes.size(),
                                n);
  }
  uint64_t v = 0;
  for (unsigned char c : bytes) v = (v << 8) | c;
  if (n < 8 && (v >> (n * 8 - 1)) != 0) v |= ~uint64_t{0} << (n * 8);  // sign-extend
  return static_cast<int64_t>(v);
}

Result<duck::Value> DecodeBinaryParam(uint32_t o, std::string_view b, int depth);

TypeId ElementTypeId(uint32_t o) {
  switch (o) {
    case oid::kBool:
      return TypeId::kBoolean;
    case oid::kInt2:
      return TypeId::kSmallInt;
    case oid::kInt4:
      return TypeId::kInteger;
    case oid::kInt8:
      return TypeId::kBigInt;
    case oid::kFloat4:
      return TypeId::kFloat;
    case oid::kFloat8:
      return TypeId::kDouble;
    case oid::kBytea:
      return TypeId::kBlob;
    case oid::kDate:
      return TypeId::kDate;
    case oid::kTime:
      return TypeId::kTime;
    case oid::kTimestamp:
      return TypeId::kTimestamp;
    case oid::kTimestampTz:
      return TypeId::kTimestampTz;
    case oid::kInterval:
      return TypeId::kInterval;
    case oid::kUuid:
      return TypeId::kUuid;
    default:
      return TypeId::kVarchar;  // text, varchar, json, numeric (cast by DuckDB)
  }
}

Result<duck::Value> DecodeBinaryArray(uint32_t array_oid, std::string_view b, int depth) {
  if (depth > 0) return UnimplementedError("multi-dimensional array parameters are not supported");
  pg::MessageReader r(b);
  ASSIGN_OR_RETURN(int32_t ndim, r.Int32());
  ASSIGN_OR_RETURN(int32_t flags, r.Int32());
  ASSIGN_OR_RETURN(int32_t elem, r.Int32());
  (void)flags;
  uint32_t expected = oid::ElementOf(array_oid);
  if (static_cast<uint32_t>(elem) != expected) {
    return InvalidArgumentError("binary array parameter has element type {}, {} expected", elem,
                                expected);
  }
  if (ndim < 0 || ndim > 1)
    return UnimplementedError("array parameters of {} dimensions are not supported", ndim);
  int32_t count = 0;
  if (ndim == 1) {
    ASSIGN_OR_RETURN(count, r.Int32());
    ASSIGN_OR_RETURN(int32_t lbound, r.Int32());
    (void)lbound;
    if (count < 0 || static_cast<size_t>(count) > r.remaining() / 4) {
      return InvalidArgumentError("binary array parameter has an invalid length {}", count);
    }
  }
  std::vector<duck::Value> values;
  for (int32_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(int32_t len, r.Int32());
    if (len == -1) {
      values.push_back(duck::Value::Null());
      continue;
    }
    if (len < 0)
      return InvalidArgumentError("binary array element {} has an invalid length {}", i + 1, len);
    ASSIGN_OR_RETURN(std::string_view e, r.Bytes(static_cast<size_t>(len)));
    ASSIGN_OR_RETURN(duck::Value v, DecodeBinaryParam(expected, e, depth + 1));
    values.push_back(std::move(v));
  }
  if (!r.done())
    return InvalidArgumentError("binary array parameter has {} extra bytes", r.remaining());
  return duck::Value::List(duck::LogicalType::Of(ElementTypeId(expected)), std::move(values));
}

Result<duck::Value> DecodeBinaryParam(uint32_t o, std::string_view b, int depth) {
  switch (o) {
    case oid::kBool:
      if (b.size() != 1)
        return InvalidArgumentError("binary boolean parameter has {} bytes, 1 expected", b.size());
      return duck::Value::Boolean(b[0] != 0);
    case oid::kInt2: {
      ASSIGN_OR_RETURN(int64_t v, BigEndian(b, 2, "int2"));
      return duck::Value::Int16(static_cast<int16_t>(v));
    }
    case oid::kInt4: {
      ASSIGN_OR_RETURN(int64_t v, BigEndian(b, 4, "int4"));
      return duck::Value::Int32(static_cast<int32_t>(v));
    }
    case oid::kOid: {
      ASSIGN_OR_RETURN(int64_t v, BigEndian(b, 4, "oid"));
      return duck::Value::Int64(static_cast<uint32_t>(v));
    }
    case oid::kInt8: {
      ASSIGN_OR_RETURN(int64_t v, BigEndian(b, 8, "int8"));
      return duck::Value::Int64(v);
    }
    case oid::kFloat4: {
      ASSIGN_OR_RETURN(int64_t v, BigEndian(b, 4, "float4"));
      auto bits = static_cast<uint32_t>(v);
      float f;
      std::memcpy(&f, &bits, 4);
      return duck::Value::Float(f);
    }
    case oid::kFloat8: {
      ASSIGN_OR_RETURN(int64_t v, BigEndian(b, 8, "float8"));
      double d;
      std::memcpy(&d, &v, 8);
      return duck::Value::Double(d);
    }
    case oid::kText:
    case oid::kVarchar:
    case oid::kBpchar:
    case oid::kName:
    case oid::kJson:
    case oid::kUnknown:
      if (!pg::IsValidUtf8(b))
        return InvalidArgumentError("invalid byte sequence for encoding \"UTF8\"");
      return duck::Value::Varchar(b);
    case oid::kJsonb:
      if (b.empty() || b[0] != 1) return InvalidArgumentError("unsupported jsonb version number");
      if (!pg::IsValidUtf8(b.substr(1)))
        return InvalidArgumentError("invalid byte sequence for encoding \"UTF8\"");
      return duck::Value::Varchar(b.substr(1));
    case oid::kBytea:
      return duck::Value::Blob(b);
    case oid::kDate: {
      ASSIGN_OR_RETURN(int64_t v, BigEndian(b, 4, "date"));
      if (v == std::numeric_limits<int32_t>::max()) return duck::Value::Date(kDateInfinity);
      if (v == std::numeric_limits<int32_t>::min()) return duck::Value::Date(-kDateInfinity);
      return duck::Value::Date(static_cast<int32_t>(v + kPgEpochDays));
    }
    case oid::kTime: {
      ASSIGN_OR_RETURN(int64_t v, BigEndian(b, 8, "time"));
      if (v < 0 || v > kMicrosPerDay)
        return InvalidArgumentError("binary time parameter out of range: {}", v);
      return duck::Value::Time(v);
    }
    case oid::kTimestamp:
    case oid::kTimestampTz: {
      ASSIGN_OR_RETURN(int64_t v, BigEndian(b, 8, "timestamp"));
      int64_t micros;
      if (v == std::numeric_limits<int64_t>::max()) {
        micros = kTimestampInfinity;
      } else if (v == std::numeric_limits<int64_t>::min()) {
        micros = -kTimestampInfinity;
      } else if (__builtin_add_overflow(v, kPgEpochMicros, &micros) ||
                 micros == kTimestampInfinity) {
        return InvalidArgumentError("binary timestamp parameter out of range");
      }
      return o == oid::kTimestamp ? duck::Value::Timestamp(micros)
                                  : duck::Value::TimestampTz(micros);
    }
    case oid::kInterval: {
      if (b.size() != 16)
        return InvalidArgumentError("binary interval parameter has {} bytes, 16 expected",
                                    b.size());
      ASSIGN_OR_RETURN(int64_t micros, BigEndian(b.substr(0, 8), 8, "interval"));
      ASSIGN_OR_RETURN(int64_t days, BigEndian(b.substr(8, 4), 4, "interval"));
      ASSIGN_OR_RETURN(int64_t months, BigEndian(b.substr(12, 4), 4, "interval"));
      return duck::Value::Interval(static_cast<int32_t>(months), static_cast<int32_t>(days),
                                   micros);
    }
    case oid::kUuid: {
      if (b.size() != 16)
        return InvalidArgumentError("binary uuid parameter has {} bytes, 16 expected", b.size());
      ASSIGN_OR_RETURN(int64_t hi, BigEndian(b.substr(0, 8), 8, "uuid"));
      ASSIGN_OR_RETURN(int64_t lo, BigEndian(b.substr(8, 8), 8, "uuid"));
      return duck::Value::Uuid(static_cast<uint64_t>(hi), static_cast<uint64_t>(lo));
    }
    case oid::kNumeric: {
      ASSIGN_OR_RETURN(std::string text, NumericTextFromBinary(b));
      return duck::Value::Varchar(text);
    }
    default:
      if (oid::ElementOf(o) != 0) return DecodeBinaryArray(o, b, depth);
      return UnimplementedError(
          "binary parameters of type OID {} are not supported; send it as text", o);
  }
}

Result<std::string> DecodeByteaText(std::string_view t) {
  std::string out;
  if (t.starts_with("\\x")) {
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    t.remove_prefix(2);
    if (t.size() % 2 != 0)
      return InvalidArgumentError("invalid hexadecimal data: odd number of digits");
    for (size_t i = 0; i < t.size(); i += 2) {
      int hi = hex(t[i]), lo = hex(t[i + 1]);
      if (hi < 0 || lo < 0) return InvalidArgumentError("invalid hexadecimal digit in bytea");
      out += static_cast<char>(hi * 16 + lo);
    }
    return out;
  }
  // The escape format: \\ is a backslash, \ooo an octal byte.
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] != '\\') {
      out += t[i];
    } else if (i + 1 < t.size() && t[i + 1] == '\\') {
      out += '\\';
      ++i;
    } else if (i + 3 < t.size() + 0 && t[i + 1] >= '0' && t[i + 1] <= '3' && t[i + 2] >= '0' &&
               t[i + 2] <= '7' && t[i + 3] >= '0' && t[i + 3] <= '7') {
      out += static_cast<char>((t[i + 1] - '0') * 64 + (t[i + 2] - '0') * 8 + (t[i + 3] - '0'));
      i += 3;
    } else {
      return InvalidArgumentError("invalid input syntax for type bytea");
    }
  }
  return out;
}

// A one-dimensional Postgres array literal ({a,"b c",NULL}) as a LIST of VARCHAR, which
// DuckDB casts to the parameter's list type (DuckDB's own list syntax is [a, b]).
Result<duck::Value> DecodeArrayText(std::string_view t) {
  auto bad = [&] {
    return InvalidArgumentError("malformed array literal: \"{}\"", t.substr(0, 64));
  };
  size_t i = 0;
  while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
  if (i == t.size() || t[i] != '{') return bad();
  ++i;
  std::vector<duck::Value> values;
  while (true) {
    while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
    if (i >= t.size()) return bad();
    if (t[i] == '}' && values.empty()) {
      ++i;
      break;
    }
    std::string elem;
    bool quoted = false;
    if (t[i] == '"') {
      quoted = true;
      ++i;
      while (i < t.size() && t[i] != '"') {
        if (t[i] == '\\' && i + 1 < t.size()) ++i;
        elem += t[i++];
      }
      if (i >= t.size()) return bad();
      ++i;
    } else {
      if (t[i] == '{')
        return UnimplementedError("multi-dimensional array parameters are not supported");
      while (i < t.size() && t[i] != ',' && t[i] != '}') {
        if (t[i] == '\\' && i + 1 < t.size()) ++i;
        elem += t[i++];
      }
      while (!elem.empty() && std::isspace(static_cast<unsigned char>(elem.back())))
        elem.pop_back();
    }
    if (!quoted && (elem == "NULL" || elem == "null" || elem == "Null")) {
      values.push_back(duck::Value::Null());
    } else {
      values.push_back(duck::Value::Varchar(elem));
    }
    while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
    if (i >= t.size()) return bad();
    if (t[i] == ',') {
      ++i;
      continue;
    }
    if (t[i] == '}') {
      ++i;
      break;
    }
    return bad();
  }
  while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
  if (i != t.size()) return bad();
  return duck::Value::List(duck::LogicalType::Varchar(), std::move(values));
}

}  // namespace

Result<duck::Value> DecodeParam(uint32_t o, bool binary, std::string_view bytes) {
  if (binary) return DecodeBinaryParam(o, bytes, 0);
  if (oid::ElementOf(o) != 0 && o != oid::kByteaArray) {
    if (!pg::IsValidUtf8(bytes))
      return InvalidArgumentError("invalid byte sequence for encoding \"UTF8\"");
    return DecodeArrayText(bytes);
  }
  if (o == oid::kBytea) {
    ASSIGN_OR_RETURN(std::string blob, DecodeByteaText(bytes));
    return duck::Value::Blob(blob);
  }
  if (!pg::IsValidUtf8(bytes))
    return InvalidArgumentError("invalid byte sequence for encoding \"UTF8\"");
  return duck::Value::Varchar(bytes);
}

}  // namespace sluice::query
