// MakeRowEncoder: a DuckDB row as an Avro binary payload, for the kafka sink. The plan
// (which column feeds which field, how each value converts) is built once per schema and
// column list; Encode walks it over the chunk's vectors.
#include <duckdb.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "base/utf8.h"
#include "lake/avro.h"
#include "schema/avro/avro_format.h"
#include "schema/avro/avro_types.h"

namespace sluice::schema::avro {

using duck::LogicalType;
using duck::TypeId;
using duck::Vector;
using lake::avro::Field;

namespace {

// Appends the zig-zag varint of `v`.
void WriteLong(int64_t v, std::string* out) {
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  while (z >= 0x80) {
    out->push_back(static_cast<char>((z & 0x7F) | 0x80));
    z >>= 7;
  }
  out->push_back(static_cast<char>(z));
}

struct HugeintWords {
  uint64_t lower;
  int64_t upper;
};
struct IntervalParts {
  int32_t months;
  int32_t days;
  int64_t micros;
};

__int128 FromHugeint(HugeintWords h) {
  return static_cast<__int128>(
      (static_cast<unsigned __int128>(static_cast<uint64_t>(h.upper)) << 64) | h.lower);
}

std::string Int128Text(__int128 v) {
  bool neg = v < 0;
  auto u = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string d;
  do {
    d.push_back(static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  } while (u != 0);
  if (neg) d.push_back('-');
  std::reverse(d.begin(), d.end());
  return d;
}

// How a column value is read from its vector.
enum class Src : uint8_t {
  kBool,
  kI8,
  kI16,
  kI32,
  kI64,
  kU8,
  kU16,
  kU32,
  kU64,
  kI128,
  kU128,
  kFloat,
  kDouble,
  kVarchar,
  kBlob,
  kDecimal16,
  kDecimal32,
  kDecimal64,
  kDecimal128,
  kDate,
  kTime,
  kTimestamp,
  kUuid,
  kInterval,
  kEnum8,
  kEnum16,
  kEnum32,
  kStruct,
  kList,
  kMap,
  kOther,
};

Src SourceOf(const LogicalType& t) {
  switch (t.id()) {
    case TypeId::kBoolean:
      return Src::kBool;
    case TypeId::kTinyInt:
      return Src::kI8;
    case TypeId::kSmallInt:
      return Src::kI16;
    case TypeId::kInteger:
      return Src::kI32;
    case TypeId::kBigInt:
      return Src::kI64;
    case TypeId::kUTinyInt:
      return Src::kU8;
    case TypeId::kUSmallInt:
      return Src::kU16;
    case TypeId::kUInteger:
      return Src::kU32;
    case TypeId::kUBigInt:
      return Src::kU64;
    case TypeId::kHugeInt:
      return Src::kI128;
    case TypeId::kUHugeInt:
      return Src::kU128;
    case TypeId::kFloat:
      return Src::kFloat;
    case TypeId::kDouble:
      return Src::kDouble;
    case TypeId::kVarchar:
      return Src::kVarchar;
    case TypeId::kBlob:
      return Src::kBlob;
    case TypeId::kDecimal:
      switch (t.DecimalInternalType()) {
        case TypeId::kSmallInt:
          return Src::kDecimal16;
        case TypeId::kInteger:
          return Src::kDecimal32;
        case TypeId::kBigInt:
          return Src::kDecimal64;
        default:
          return Src::kDecimal128;
      }
    case TypeId::kDate:
      return Src::kDate;
    case TypeId::kTime:
      return Src::kTime;
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
    case TypeId::kTimestampS:
    case TypeId::kTimestampMs:
    case TypeId::kTimestampNs:
      return Src::kTimestamp;
    case TypeId::kUuid:
      return Src::kUuid;
    case TypeId::kInterval:
      return Src::kInterval;
    case TypeId::kEnum:
      switch (t.EnumInternalType()) {
        case TypeId::kUTinyInt:
          return Src::kEnum8;
        case TypeId::kUSmallInt:
          return Src::kEnum16;
        default:
          return Src::kEnum32;
      }
    case TypeId::kStruct:
      return Src::kStruct;
    case TypeId::kList:
      return Src::kList;
    case TypeId::kMap:
      return Src::kMap;
    default:
      return Src::kOther;
  }
}

int64_t UnitsOf(const LogicalType& t) {
  switch (t.id()) {
    case TypeId::kTimestampS:
      return 1;
    case TypeId::kTimestampMs:
      return 1000;
    case TypeId::kTimestampNs:
      return 1000000000;
    default:
      return 1000000;
  }
}

bool IsIntegerSrc(Src s) {
  return s == Src::kI8 || s == Src::kI16 || s == Src::kI32 || s == Src::kI64 || s == Src::kU8 ||
         s == Src::kU16 || s == Src::kU32 || s == Src::kU64;
}

bool IsDecimalSrc(Src s) {
  return s == Src::kDecimal16 || s == Src::kDecimal32 || s == Src::kDecimal64 ||
         s == Src::kDecimal128;
}

struct EncStep {
  const Node* node = nullptr;  // the Avro type written (for unions: the branch)
  Src src = Src::kOther;
  Logical logical = Logical::kNone;
  int64_t mul = 1, div = 1;  // time units
  int column_scale = 0;      // DECIMAL source
  int avro_scale = 0;        // decimal target
  int null_branch = -1;      // a union written: its null branch, and the value's branch
  int value_branch = -1;
  std::vector<std::string> enum_values;  // ENUM source: its dictionary
  std::vector<EncStep> children;         // record fields, array item, map value
  std::vector<int> child_field;          // record: the STRUCT field of each Avro field, -1 default
  std::vector<std::string> defaults;     // record: encoded defaults of fields without a field
  std::string name;                      // for messages
};

class Planner {
 public:
  Result<EncStep> Plan(const Node& n, const LogicalType& t, const std::string& path, int depth) {
    if (depth > kMaxTypeDepth + 8)
      return InvalidArgumentError("field '{}': nested too deeply", path);
    EncStep s;
    s.name = path;
    if (n.type == Type::kUnion) {
      // Nullable: NULL as the null branch, a value as the first branch that takes it.
      for (size_t i = 0; i < n.branches.size(); ++i) {
        const Node& b = *n.branches[i];
        if (b.type == Type::kNull) {
          if (s.null_branch < 0) s.null_branch = static_cast<int>(i);
          continue;
        }
        if (s.value_branch >= 0) continue;
        auto planned = Plan(b, t, path, depth + 1);
        if (!planned.ok()) continue;
        int null_branch = s.null_branch;
        s = std::move(*planned);
        s.null_branch = null_branch;
        s.value_branch = static_cast<int>(i);
      }
      if (s.value_branch < 0) {
        return InvalidArgumentError("field '{}': no branch of Avro {} takes a {} column", path,
                                    Describe(n), TypeSql(t));
      }
      // A null branch after the value's branch still counts.
      for (size_t i = 0; i < n.branches.size() && s.null_branch < 0; ++i) {
        if (n.branches[i]->type == Type::kNull) s.null_branch = static_cast<int>(i);
      }
      return s;
    }
    s.node = &n;
    s.src = SourceOf(t);
    LogicalInfo l = LogicalOf(n);
    s.logical = l.kind;
    const Src src = s.src;
    auto mismatch = [&]() {
      return InvalidArgumentError("field '{}': a {} column cannot be written as Avro {}", path,
                                  TypeSql(t), Describe(n));
    };
    auto units = [&](int64_t from, int64_t to) {
      if (from <= to) {
        s.mul = to / from;
      } else {
        s.div = from / to;
      }
    };
    switch (n.type) {
      case Type::kNull:
        return s;
      case Type::kBoolean:
        if (src == Src::kBool) return s;
        break;
      case Type::kInt:
      case Type::kLong:
        if (l.kind == Logical::kDate) {
          if (src == Src::kDate) return s;
          break;
        }
        if (UnitsPerSecond(l.kind) != 0) {
          if (src == Src::kTime &&
              (l.kind == Logical::kTimeMillis || l.kind == Logical::kTimeMicros)) {
            units(1000000, UnitsPerSecond(l.kind));
            return s;
          }
          if (src == Src::kTimestamp && l.kind != Logical::kTimeMillis &&
              l.kind != Logical::kTimeMicros) {
            units(UnitsOf(t), UnitsPerSecond(l.kind));
            return s;
          }
          break;
        }
        if (IsIntegerSrc(src)) return s;
        break;
      case Type::kFloat:
      case Type::kDouble:
        if (src == Src::kFloat || src == Src::kDouble || IsIntegerSrc(src)) return s;
        break;
      case Type::kString:
        if (src == Src::kVarchar || src == Src::kUuid || src == Src::kI128 || src == Src::kU128 ||
            src == Src::kEnum8 || src == Src::kEnum16 || src == Src::kEnum32) {
          if (t.id() == TypeId::kEnum) {
            for (uint64_t i = 0; i < t.EnumSize(); ++i) s.enum_values.push_back(t.EnumValue(i));
          }
          return s;
        }
        break;
      case Type::kBytes:
      case Type::kFixed:
        if (l.kind == Logical::kDecimal) {
          if (!IsDecimalSrc(src) || t.DecimalScale() > l.scale) break;
          s.column_scale = t.DecimalScale();
          s.avro_scale = l.scale;
          return s;
        }
        if (l.kind == Logical::kDuration && src == Src::kInterval) return s;
        if (l.kind == Logical::kUuid && src == Src::kUuid) return s;
        if (src == Src::kBlob || (n.type == Type::kBytes && src == Src::kVarchar)) return s;
        break;
      case Type::kEnum:
        if (src == Src::kVarchar || src == Src::kEnum8 || src == Src::kEnum16 ||
            src == Src::kEnum32) {
          if (t.id() == TypeId::kEnum) {
            for (uint64_t i = 0; i < t.EnumSize(); ++i) s.enum_values.push_back(t.EnumValue(i));
          }
          return s;
        }
        break;
      case Type::kRecord: {
        if (src != Src::kStruct) break;
        std::vector<std::string> names;
        for (size_t i = 0; i < t.StructFieldCount(); ++i) names.push_back(t.StructFieldName(i));
        for (const Field& f : n.fields) {
          int k = MatchColumn(names, f.name);
          std::string sub = path + "." + f.name;
          if (k < 0) {
            if (!f.default_value.has_value()) {
              return InvalidArgumentError("field '{}': no STRUCT field and no default", sub);
            }
            std::string bytes;
            RETURN_IF_ERROR(lake::avro::Encode(*f.type, *f.default_value, &bytes));
            s.defaults.push_back(std::move(bytes));
            s.children.emplace_back();
            s.child_field.push_back(-1);
            continue;
          }
          ASSIGN_OR_RETURN(
              EncStep c, Plan(*f.type, t.StructFieldType(static_cast<size_t>(k)), sub, depth + 1));
          s.children.push_back(std::move(c));
          s.child_field.push_back(k);
          s.defaults.emplace_back();
        }
        return s;
      }
      case Type::kArray:
        if (src != Src::kList) break;
        {
          ASSIGN_OR_RETURN(EncStep c, Plan(*n.items, t.ListChild(), path + "[]", depth + 1));
          s.children.push_back(std::move(c));
        }
        return s;
      case Type::kMap:
        if (src != Src::kMap || t.MapKey().id() != TypeId::kVarchar) break;
        {
          ASSIGN_OR_RETURN(EncStep c, Plan(*n.values, t.MapValue(), path + "{}", depth + 1));
          s.children.push_back(std::move(c));
        }
        return s;
      default:
        break;
    }
    return mismatch();
  }

  // The column (or STRUCT field) for Avro field `name`: exact, ignoring ASCII case, or the
  // column whose AvroName is `name` (SchemaForColumns' renaming).
  static int MatchColumn(const std::vector<std::string>& names, std::string_view name) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return static_cast<int>(i);
    }
    for (size_t i = 0; i < names.size(); ++i) {
      if (EqualsIgnoreCase(names[i], name)) return static_cast<int>(i);
    }
    for (size_t i = 0; i < names.size(); ++i) {
      if (AvroName(names[i]) == name) return static_cast<int>(i);
    }
    return -1;
  }
};

class AvroRowEncoder final : public RowEncoder {
 public:
  AvroRowEncoder(EncStep top, bool record) : top_(std::move(top)), record_(record) {}

  Status Encode(const duck::DataChunk& chunk, size_t first_column, uint64_t row,
                std::string* out) override {
    const size_t mark = out->size();
    Status st;
    if (record_) {
      for (size_t i = 0; i < top_.children.size() && st.ok(); ++i) {
        int c = top_.child_field[i];
        if (c < 0) {
          *out += top_.defaults[i];
          continue;
        }
        st = Write(top_.children[i], chunk.column(first_column + static_cast<size_t>(c)), row, out);
      }
    } else {
      st = Write(top_.children[0],
                 chunk.column(first_column + static_cast<size_t>(top_.child_field[0])), row, out);
    }
    if (!st.ok()) out->resize(mark);
    return st;
  }

 private:
  static Status Fail(const EncStep& s, std::string_view what) {
    return InvalidArgumentError("field '{}': {}", s.name, what);
  }

  // An integer column value (any width), for int/long/float/double.
  static bool ReadInteger(const EncStep& s, const Vector& v, uint64_t row, int64_t* out) {
    switch (s.src) {
      case Src::kI8:
        *out = v.data<int8_t>()[row];
        return true;
      case Src::kI16:
        *out = v.data<int16_t>()[row];
        return true;
      case Src::kI32:
      case Src::kDate:
        *out = v.data<int32_t>()[row];
        return true;
      case Src::kI64:
      case Src::kTime:
      case Src::kTimestamp:
        *out = v.data<int64_t>()[row];
        return true;
      case Src::kU8:
        *out = v.data<uint8_t>()[row];
        return true;
      case Src::kU16:
        *out = v.data<uint16_t>()[row];
        return true;
      case Src::kU32:
        *out = v.data<uint32_t>()[row];
        return true;
      case Src::kU64: {
        uint64_t u = v.data<uint64_t>()[row];
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
        *out = static_cast<int64_t>(u);
        return true;
      }
      default:
        return false;
    }
  }

  static __int128 ReadDecimal(const EncStep& s, const Vector& v, uint64_t row) {
    switch (s.src) {
      case Src::kDecimal16:
        return v.data<int16_t>()[row];
      case Src::kDecimal32:
        return v.data<int32_t>()[row];
      case Src::kDecimal64:
        return v.data<int64_t>()[row];
      default:
        return FromHugeint(v.data<HugeintWords>()[row]);
    }
  }

  static std::string_view EnumText(const EncStep& s, const Vector& v, uint64_t row) {
    uint64_t i = s.src == Src::kEnum8    ? v.data<uint8_t>()[row]
                 : s.src == Src::kEnum16 ? v.data<uint16_t>()[row]
                                         : v.data<uint32_t>()[row];
    return i < s.enum_values.size() ? std::string_view(s.enum_values[i]) : std::string_view();
  }

  static void WriteBytes(std::string_view b, std::string* out) {
    WriteLong(static_cast<int64_t>(b.size()), out);
    out->append(b);
  }

  Status Write(const EncStep& s, const Vector& v, uint64_t row, std::string* out) {
    if (!v.IsValid(row)) {
      if (s.null_branch < 0) return Fail(s, "NULL for a field that is not nullable");
      WriteLong(s.null_branch, out);
      return Status::OK();
    }
    if (s.value_branch >= 0) WriteLong(s.value_branch, out);
    const Node& n = *s.node;
    switch (n.type) {
      case Type::kNull:
        return Status::OK();
      case Type::kBoolean:
        out->push_back(v.data<bool>()[row] ? 1 : 0);
        return Status::OK();
      case Type::kInt:
      case Type::kLong: {
        int64_t x;
        if (!ReadInteger(s, v, row, &x)) return Fail(s, "value out of range for long");
        if (s.mul != 1) {
          if (__builtin_mul_overflow(x, s.mul, &x)) return Fail(s, "time out of range");
        } else if (s.div != 1) {
          int64_t q = x / s.div;
          if (x % s.div != 0 && x < 0) --q;
          x = q;
        }
        if (n.type == Type::kInt &&
            (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())) {
          return Fail(s, fmt::format("{} out of range for int", x));
        }
        WriteLong(x, out);
        return Status::OK();
      }
      case Type::kFloat:
      case Type::kDouble: {
        double d;
        int64_t x;
        if (s.src == Src::kFloat) {
          d = v.data<float>()[row];
        } else if (s.src == Src::kDouble) {
          d = v.data<double>()[row];
        } else if (ReadInteger(s, v, row, &x)) {
          d = static_cast<double>(x);
        } else {
          d = static_cast<double>(v.data<uint64_t>()[row]);
        }
        if (n.type == Type::kFloat) {
          float f = static_cast<float>(d);
          char b[4];
          std::memcpy(b, &f, 4);
          out->append(b, 4);
        } else {
          char b[8];
          std::memcpy(b, &d, 8);
          out->append(b, 8);
        }
        return Status::OK();
      }
      case Type::kString:
        switch (s.src) {
          case Src::kVarchar:
            WriteBytes(v.GetString(row), out);
            return Status::OK();
          case Src::kI128:
            WriteBytes(Int128Text(FromHugeint(v.data<HugeintWords>()[row])), out);
            return Status::OK();
          case Src::kU128: {
            HugeintWords h = v.data<HugeintWords>()[row];
            auto u =
                (static_cast<unsigned __int128>(static_cast<uint64_t>(h.upper)) << 64) | h.lower;
            std::string d;
            do {
              d.push_back(static_cast<char>('0' + static_cast<int>(u % 10)));
              u /= 10;
            } while (u != 0);
            std::reverse(d.begin(), d.end());
            WriteBytes(d, out);
            return Status::OK();
          }
          case Src::kUuid:
            WriteBytes(UuidText(v.data<HugeintWords>()[row]), out);
            return Status::OK();
          default:
            WriteBytes(EnumText(s, v, row), out);
            return Status::OK();
        }
      case Type::kBytes:
      case Type::kFixed: {
        if (s.logical == Logical::kDecimal) {
          __int128 x = ReadDecimal(s, v, row);
          for (int i = s.column_scale; i < s.avro_scale; ++i) {
            if (__builtin_mul_overflow(x, static_cast<__int128>(10), &x)) {
              return Fail(s, "decimal out of range");
            }
          }
          return WriteDecimal(s, x, out);
        }
        if (s.logical == Logical::kDuration) {
          IntervalParts iv = v.data<IntervalParts>()[row];
          if (iv.months < 0 || iv.days < 0 || iv.micros < 0 || iv.micros % 1000 != 0 ||
              iv.micros / 1000 > std::numeric_limits<uint32_t>::max()) {
            return Fail(s, "INTERVAL has no Avro duration (negative or below a millisecond)");
          }
          auto put = [&](uint32_t x) {
            for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((x >> (8 * i)) & 0xFF));
          };
          put(static_cast<uint32_t>(iv.months));
          put(static_cast<uint32_t>(iv.days));
          put(static_cast<uint32_t>(iv.micros / 1000));
          return Status::OK();
        }
        if (s.logical == Logical::kUuid) {
          HugeintWords h = v.data<HugeintWords>()[row];
          uint64_t hi = static_cast<uint64_t>(h.upper) ^ (uint64_t{1} << 63);
          for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((hi >> (8 * i)) & 0xFF));
          for (int i = 7; i >= 0; --i)
            out->push_back(static_cast<char>((h.lower >> (8 * i)) & 0xFF));
          return Status::OK();
        }
        std::string_view b = v.GetString(row);
        if (n.type == Type::kFixed) {
          if (static_cast<int64_t>(b.size()) != n.size) {
            return Fail(s, fmt::format("{} bytes for a fixed of {}", b.size(), n.size));
          }
          out->append(b);
        } else {
          WriteBytes(b, out);
        }
        return Status::OK();
      }
      case Type::kEnum: {
        std::string_view sym = s.src == Src::kVarchar ? v.GetString(row) : EnumText(s, v, row);
        auto it = std::find(n.symbols.begin(), n.symbols.end(), sym);
        if (it == n.symbols.end()) {
          if (n.enum_default.empty())
            return Fail(s, fmt::format("'{}' is not a symbol of {}", sym, n.full_name));
          it = std::find(n.symbols.begin(), n.symbols.end(), n.enum_default);
        }
        WriteLong(it - n.symbols.begin(), out);
        return Status::OK();
      }
      case Type::kRecord:
        for (size_t i = 0; i < s.children.size(); ++i) {
          if (s.child_field[i] < 0) {
            *out += s.defaults[i];
            continue;
          }
          RETURN_IF_ERROR(
              Write(s.children[i], v.StructField(static_cast<size_t>(s.child_field[i])), row, out));
        }
        return Status::OK();
      case Type::kArray:
      case Type::kMap: {
        duck::ListEntry e = v.data<duck::ListEntry>()[row];
        if (e.length > 0) {
          WriteLong(static_cast<int64_t>(e.length), out);
          Vector child = v.ListChild();
          Vector keys, values;
          if (n.type == Type::kMap) {
            keys = child.StructField(0);
            values = child.StructField(1);
          }
          for (uint64_t k = e.offset; k < e.offset + e.length; ++k) {
            if (n.type == Type::kMap) {
              WriteBytes(keys.GetString(k), out);
              RETURN_IF_ERROR(Write(s.children[0], values, k, out));
            } else {
              RETURN_IF_ERROR(Write(s.children[0], child, k, out));
            }
          }
        }
        WriteLong(0, out);
        return Status::OK();
      }
      default:
        return Fail(s, "cannot write a union here");
    }
  }

  static Status WriteDecimal(const EncStep& s, __int128 x, std::string* out) {
    // Big-endian two's complement: the fewest bytes for bytes, exactly `size` for fixed.
    unsigned char b[16];
    auto u = static_cast<unsigned __int128>(x);
    for (int i = 15; i >= 0; --i) {
      b[i] = static_cast<unsigned char>(u & 0xFF);
      u >>= 8;
    }
    const unsigned char sign = x < 0 ? 0xFF : 0x00;
    int start = 0;
    while (start < 15 && b[start] == sign && ((b[start + 1] & 0x80) != 0) == (x < 0)) ++start;
    const int len = 16 - start;
    if (s.node->type == Type::kFixed) {
      if (len > s.node->size) return Fail(s, "decimal wider than its fixed");
      out->append(static_cast<size_t>(s.node->size - len), static_cast<char>(sign));
      out->append(reinterpret_cast<const char*>(b + start), static_cast<size_t>(len));
      return Status::OK();
    }
    WriteLong(len, out);
    out->append(reinterpret_cast<const char*>(b + start), static_cast<size_t>(len));
    return Status::OK();
  }

  static std::string UuidText(HugeintWords h) {
    static constexpr char kHex[] = "0123456789abcdef";
    uint64_t hi = static_cast<uint64_t>(h.upper) ^ (uint64_t{1} << 63);
    unsigned char b[16];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(hi >> (56 - 8 * i));
    for (int i = 0; i < 8; ++i) b[8 + i] = static_cast<unsigned char>(h.lower >> (56 - 8 * i));
    std::string out;
    for (int i = 0; i < 16; ++i) {
      if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
      out.push_back(kHex[b[i] >> 4]);
      out.push_back(kHex[b[i] & 15]);
    }
    return out;
  }

  EncStep top_;
  bool record_;
};

}  // namespace

Result<std::unique_ptr<RowEncoder>> MakeRowEncoder(const Parsed& schema,
                                                   std::span<const Column> columns) {
  const Node& root = schema.root();
  std::vector<std::string> names;
  for (const Column& c : columns) names.push_back(c.name);
  Planner planner;
  EncStep top;
  if (root.type == Type::kRecord) {
    for (const Field& f : root.fields) {
      int k = Planner::MatchColumn(names, f.name);
      if (k < 0) {
        if (!f.default_value.has_value()) {
          return InvalidArgumentError("field '{}': no column and no default", f.name);
        }
        std::string bytes;
        RETURN_IF_ERROR(lake::avro::Encode(*f.type, *f.default_value, &bytes));
        top.defaults.push_back(std::move(bytes));
        top.children.emplace_back();
        top.child_field.push_back(-1);
        continue;
      }
      ASSIGN_OR_RETURN(EncStep c,
                       planner.Plan(*f.type, columns[static_cast<size_t>(k)].type, f.name, 1));
      top.children.push_back(std::move(c));
      top.child_field.push_back(k);
      top.defaults.emplace_back();
    }
    return std::unique_ptr<RowEncoder>(new AvroRowEncoder(std::move(top), true));
  }
  int k = Planner::MatchColumn(names, "value");
  if (k < 0 && columns.size() == 1) k = 0;
  if (k < 0) return InvalidArgumentError("a {} schema needs a column 'value'", Describe(root));
  ASSIGN_OR_RETURN(EncStep c, planner.Plan(root, columns[static_cast<size_t>(k)].type, "value", 1));
  top.children.push_back(std::move(c));
  top.child_field.push_back(k);
  return std::unique_ptr<RowEncoder>(new AvroRowEncoder(std::move(top), false));
}

}  // namespace sluice::schema::avro
