// The kafka sink's side: SchemaForColumns (a proto3 schema for a DuckDB result) and
// MakeRowEncoder (a DuckDB row as a Protobuf payload). README.md, "Encoding", has the
// mapping. A plan per column is compiled once; Encode walks the chunk's vectors.
#include <duckdb.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <set>

#include "schema/protobuf/columns.h"
#include "schema/protobuf/internal.h"

namespace sluice::schema::protobuf {

namespace {

using duck::LogicalType;
using duck::TypeId;
using duck::Vector;
using internal::WellKnown;

// ---- SchemaForColumns ----

std::string CamelCase(std::string_view s) {
  std::string out;
  bool up = true;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) {
      up = true;
      continue;
    }
    out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "M" + out;
  return out;
}

bool ValidFieldName(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

class SchemaWriter {
 public:
  // The .proto type of `t` (declaring nested messages into `nested`), or an error.
  Result<std::string> TypeOf(const LogicalType& t, const std::string& hint, std::string* nested,
                             int indent, bool* repeated_ok) {
    switch (t.id()) {
      case TypeId::kBoolean:
        return std::string("bool");
      case TypeId::kTinyInt:
      case TypeId::kSmallInt:
      case TypeId::kInteger:
        return std::string("int32");
      case TypeId::kBigInt:
        return std::string("int64");
      case TypeId::kUTinyInt:
      case TypeId::kUSmallInt:
      case TypeId::kUInteger:
        return std::string("uint32");
      case TypeId::kUBigInt:
        return std::string("uint64");
      case TypeId::kFloat:
        return std::string("float");
      case TypeId::kDouble:
        return std::string("double");
      case TypeId::kVarchar:
      case TypeId::kDecimal:
      case TypeId::kUuid:
      case TypeId::kHugeInt:
      case TypeId::kUHugeInt:
        return std::string("string");
      case TypeId::kBlob:
        return std::string("bytes");
      case TypeId::kDate:
        return std::string("int32");  // days since 1970-01-01
      case TypeId::kTime:
        return std::string("int64");  // microseconds since midnight
      case TypeId::kTimestamp:
      case TypeId::kTimestampTz:
      case TypeId::kTimestampS:
      case TypeId::kTimestampMs:
      case TypeId::kTimestampNs:
        imports_.insert("google/protobuf/timestamp.proto");
        return std::string("google.protobuf.Timestamp");
      case TypeId::kInterval:
        imports_.insert("google/protobuf/duration.proto");
        return std::string("google.protobuf.Duration");
      case TypeId::kStruct: {
        if (t.StructFieldCount() == 0) return InvalidArgumentError("an empty STRUCT");
        std::string name = Unique(CamelCase(hint));
        std::vector<std::string> names;
        std::vector<LogicalType> types;
        for (size_t i = 0; i < t.StructFieldCount(); ++i) {
          names.push_back(t.StructFieldName(i));
          types.push_back(t.StructFieldType(i));
        }
        RETURN_IF_ERROR(Message(name, names, types, nested, indent));
        return name;
      }
      case TypeId::kList:
      case TypeId::kMap: {
        if (repeated_ok != nullptr) {
          *repeated_ok = false;  // tells the caller to wrap it
          return std::string();
        }
        // A list inside a list or a map value: a wrapper message of one repeated field.
        std::string name = Unique(CamelCase(hint) + "List");
        std::vector<std::string> names = {"values"};
        std::vector<LogicalType> types;
        types.push_back(internal::CopyType(t));
        RETURN_IF_ERROR(Message(name, names, types, nested, indent));
        return name;
      }
      default:
        return InvalidArgumentError("type {} has no Protobuf form", duck::TypeIdName(t.id()));
    }
  }

  Status Message(const std::string& name, const std::vector<std::string>& names,
                 const std::vector<LogicalType>& types, std::string* out, int indent) {
    std::string pad(static_cast<size_t>(indent) * 2, ' ');
    std::string body, nested;
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string& n = names[i];
      if (!ValidFieldName(n))
        return InvalidArgumentError("column '{}': not a Protobuf field name", n);
      const LogicalType& t = types[i];
      std::string line;
      if (t.id() == TypeId::kList) {
        LogicalType child = t.ListChild();
        bool direct = true;
        ASSIGN_OR_RETURN(std::string ct, TypeOf(child, n + "_item", &nested, indent + 1, &direct));
        if (!direct) {
          ASSIGN_OR_RETURN(ct, TypeOf(child, n + "_item", &nested, indent + 1, nullptr));
        }
        line = fmt::format("repeated {} {} = {};", ct, n, i + 1);
      } else if (t.id() == TypeId::kMap) {
        LogicalType k = t.MapKey();
        std::string kt;
        switch (k.id()) {
          case TypeId::kVarchar:
            kt = "string";
            break;
          case TypeId::kBoolean:
            kt = "bool";
            break;
          case TypeId::kTinyInt:
          case TypeId::kSmallInt:
          case TypeId::kInteger:
            kt = "int32";
            break;
          case TypeId::kBigInt:
            kt = "int64";
            break;
          case TypeId::kUTinyInt:
          case TypeId::kUSmallInt:
          case TypeId::kUInteger:
            kt = "uint32";
            break;
          case TypeId::kUBigInt:
            kt = "uint64";
            break;
          default:
            return InvalidArgumentError("column '{}': MAP keys of type {} have no Protobuf form", n,
                                        duck::TypeIdName(k.id()));
        }
        ASSIGN_OR_RETURN(std::string vt,
                         TypeOf(t.MapValue(), n + "_value", &nested, indent + 1, nullptr));
        line = fmt::format("map<{}, {}> {} = {};", kt, vt, n, i + 1);
      } else {
        ASSIGN_OR_RETURN(std::string ft, TypeOf(t, n, &nested, indent + 1, nullptr));
        bool message = t.id() == TypeId::kStruct || ft.rfind("google.", 0) == 0;
        line = fmt::format("{}{} {} = {};", message ? "" : "optional ", ft, n, i + 1);
      }
      body += pad + "  " + line + "\n";
    }
    *out += pad + "message " + name + " {\n" + body + nested + pad + "}\n";
    return Status::OK();
  }

  std::string Unique(std::string name) {
    std::string n = name;
    for (int k = 2; !names_.insert(n).second; ++k) n = name + std::to_string(k);
    return n;
  }

  std::set<std::string> imports_;
  std::set<std::string> names_;
};

}  // namespace

Result<std::string> SchemaForColumns(std::span<const Column> columns,
                                     std::string_view message_name) {
  if (columns.empty()) return InvalidArgumentError("no columns to make a message of");
  if (!ValidFieldName(message_name))
    return InvalidArgumentError("bad message name '{}'", message_name);
  SchemaWriter w;
  w.names_.insert(std::string(message_name));
  std::vector<std::string> names;
  std::vector<LogicalType> types;
  std::set<std::string> seen;
  for (const Column& c : columns) {
    if (!seen.insert(c.name).second)
      return InvalidArgumentError("column '{}' appears twice", c.name);
    names.push_back(c.name);
    types.push_back(internal::CopyType(c.type));
  }
  std::string body;
  RETURN_IF_ERROR(w.Message(std::string(message_name), names, types, &body, 0));
  std::string out = "syntax = \"proto3\";\n";
  if (!w.imports_.empty()) {
    out += "\n";
    for (const std::string& i : w.imports_) out += fmt::format("import \"{}\";\n", i);
  }
  return out + "\n" + body;
}

namespace {

// ---- MakeRowEncoder ----

enum class In : uint8_t {
  kBool,
  kI8,
  kI16,
  kI32,
  kI64,
  kU8,
  kU16,
  kU32,
  kU64,
  kFloat,
  kDouble,
  kString,
  kDate,
  kTime,
  kTimestamp,
  kTimestampS,
  kTimestampMs,
  kTimestampNs,
  kInterval,
  kDecimal,
  kUuid,
  kHugeInt,
  kStruct,
  kList,
  kMap,
};

struct EncField;

struct EncMessage {
  std::vector<EncField> fields;
};

struct EncField {
  int32_t number = 0;
  std::string name;
  In in = In::kString;
  FieldType type = FieldType::kString;
  WellKnown wk = WellKnown::kNone;
  bool repeated = false;
  bool packed = false;
  bool presence = false;  // write defaults too (optional, oneof, proto2)
  int decimal_scale = 0;
  TypeId decimal_internal = TypeId::kBigInt;
  const EnumType* enumeration = nullptr;
  std::unique_ptr<EncMessage> message;   // STRUCT -> message; map entry
  std::unique_ptr<EncField> element;     // LIST/MAP: the element (map: the entry message)
  std::unique_ptr<EncField> key, value;  // MAP entry fields
};

Result<In> InOf(const LogicalType& t) {
  switch (t.id()) {
    case TypeId::kBoolean:
      return In::kBool;
    case TypeId::kTinyInt:
      return In::kI8;
    case TypeId::kSmallInt:
      return In::kI16;
    case TypeId::kInteger:
      return In::kI32;
    case TypeId::kBigInt:
      return In::kI64;
    case TypeId::kUTinyInt:
      return In::kU8;
    case TypeId::kUSmallInt:
      return In::kU16;
    case TypeId::kUInteger:
      return In::kU32;
    case TypeId::kUBigInt:
      return In::kU64;
    case TypeId::kFloat:
      return In::kFloat;
    case TypeId::kDouble:
      return In::kDouble;
    case TypeId::kVarchar:
    case TypeId::kBlob:
      return In::kString;
    case TypeId::kDate:
      return In::kDate;
    case TypeId::kTime:
      return In::kTime;
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      return In::kTimestamp;
    case TypeId::kTimestampS:
      return In::kTimestampS;
    case TypeId::kTimestampMs:
      return In::kTimestampMs;
    case TypeId::kTimestampNs:
      return In::kTimestampNs;
    case TypeId::kInterval:
      return In::kInterval;
    case TypeId::kDecimal:
      return In::kDecimal;
    case TypeId::kUuid:
      return In::kUuid;
    case TypeId::kHugeInt:
      return In::kHugeInt;
    case TypeId::kStruct:
      return In::kStruct;
    case TypeId::kList:
      return In::kList;
    case TypeId::kMap:
      return In::kMap;
    default:
      return InvalidArgumentError("type {} cannot be encoded", duck::TypeIdName(t.id()));
  }
}

bool IsIntIn(In in) { return in <= In::kU64 && in != In::kBool; }

class EncBuilder {
 public:
  // `f` (a message field, or an element when `element`) from a column of type `t`.
  Status Build(const Field& f, bool element, const LogicalType& t, const std::string& path,
               bool proto3, EncField* e) {
    e->number = f.number;
    e->name = path;
    e->type = f.type;
    e->enumeration = f.enumeration;
    ASSIGN_OR_RETURN(e->in, InOf(t));
    auto bad = [&]() {
      return InvalidArgumentError("column '{}' ({}) cannot be written as field '{}' ({})", path,
                                  duck::TypeIdName(t.id()), f.name,
                                  f.is_map                   ? "map"
                                  : f.full_type_name.empty() ? std::string(ScalarName(f.type))
                                                             : f.full_type_name);
    };
    if (!element && f.is_map) {
      if (e->in != In::kMap) return bad();
      e->repeated = true;
      Field k;
      k.name = "key";
      k.number = 1;
      k.type = f.map_key;
      Field v = f;
      v.name = "value";
      v.number = 2;
      v.is_map = false;
      v.label = Label::kNone;
      e->key = std::make_unique<EncField>();
      e->value = std::make_unique<EncField>();
      RETURN_IF_ERROR(Build(k, false, t.MapKey(), path + ".key", proto3, e->key.get()));
      RETURN_IF_ERROR(Build(v, false, t.MapValue(), path + ".value", proto3, e->value.get()));
      e->key->presence = e->value->presence = true;  // entries carry both, as protoc writes
      return Status::OK();
    }
    if (!element && f.label == Label::kRepeated) {
      if (e->in != In::kList) return bad();
      e->repeated = true;
      e->element = std::make_unique<EncField>();
      RETURN_IF_ERROR(Build(f, true, t.ListChild(), path + "[]", proto3, e->element.get()));
      bool scalar = f.type != FieldType::kString && f.type != FieldType::kBytes &&
                    f.type != FieldType::kMessage && f.type != FieldType::kGroup;
      bool packed_opt = false, unpacked_opt = false;
      for (const Option& o : f.options) {
        if (o.name == "packed") (o.value == "true" ? packed_opt : unpacked_opt) = true;
      }
      e->packed = scalar && (packed_opt || (proto3 && !unpacked_opt));
      return Status::OK();
    }
    e->presence = f.label == Label::kOptional || f.label == Label::kRequired || f.oneof >= 0 ||
                  f.proto3_optional || !proto3 || element;
    if (f.type == FieldType::kMessage) {
      e->wk = internal::WellKnownOf(f.message);
      switch (e->wk) {
        case WellKnown::kTimestamp:
          if (e->in < In::kTimestamp || e->in > In::kTimestampNs) return bad();
          return Status::OK();
        case WellKnown::kDuration:
          if (e->in != In::kInterval) return bad();
          return Status::OK();
        case WellKnown::kNone:
          break;
        case WellKnown::kEmpty:
        case WellKnown::kStruct:
        case WellKnown::kValue:
        case WellKnown::kListValue:
          return bad();
        default: {  // wrappers: the scalar as field 1
          e->message = std::make_unique<EncMessage>();
          EncField& inner = e->message->fields.emplace_back();
          RETURN_IF_ERROR(Build(f.message->fields[0], true, t, path, true, &inner));
          inner.presence = true;
          return Status::OK();
        }
      }
      if (e->in != In::kStruct) return bad();
      e->message = std::make_unique<EncMessage>();
      bool p3 = owner_->count(f.message) ? owner_->at(f.message)->syntax == "proto3" : proto3;
      std::vector<std::string> names;
      std::vector<LogicalType> types;
      for (size_t i = 0; i < t.StructFieldCount(); ++i) {
        names.push_back(t.StructFieldName(i));
        types.push_back(t.StructFieldType(i));
      }
      return Fields(*f.message, names, types, path, p3, e->message.get());
    }
    switch (f.type) {
      case FieldType::kString:
      case FieldType::kBytes:
        if (e->in != In::kString && e->in != In::kDecimal && e->in != In::kUuid &&
            e->in != In::kHugeInt)
          return bad();
        if (e->in == In::kDecimal) {
          e->decimal_scale = t.DecimalScale();
          e->decimal_internal = t.DecimalInternalType();
        }
        return Status::OK();
      case FieldType::kBool:
        return e->in == In::kBool ? Status::OK() : bad();
      case FieldType::kFloat:
      case FieldType::kDouble:
        return e->in == In::kFloat || e->in == In::kDouble || IsIntIn(e->in) ? Status::OK() : bad();
      case FieldType::kEnum:
        return e->in == In::kString || IsIntIn(e->in) ? Status::OK() : bad();
      default:  // integers
        return IsIntIn(e->in) || e->in == In::kBool || e->in == In::kDate || e->in == In::kTime ||
                       (e->in == In::kTimestamp &&
                        (f.type == FieldType::kInt64 || f.type == FieldType::kSint64 ||
                         f.type == FieldType::kSfixed64))
                   ? Status::OK()
                   : bad();
    }
  }

  Status Fields(const MessageType& m, const std::vector<std::string>& names,
                const std::vector<LogicalType>& types, const std::string& path, bool proto3,
                EncMessage* out) {
    for (size_t i = 0; i < names.size(); ++i) {
      const Field* f = nullptr;
      for (const Field& x : m.fields) {
        if (x.name == names[i]) f = &x;
      }
      if (f == nullptr) {
        for (const Field& x : m.fields) {
          if (x.name.size() == names[i].size() &&
              std::equal(x.name.begin(), x.name.end(), names[i].begin(), [](char a, char b) {
                return std::tolower(static_cast<unsigned char>(a)) ==
                       std::tolower(static_cast<unsigned char>(b));
              }))
            f = &x;
        }
      }
      std::string cpath = path.empty() ? names[i] : path + "." + names[i];
      if (f == nullptr || f->type == FieldType::kGroup)
        return InvalidArgumentError("column '{}': message '{}' has no such field", cpath,
                                    m.full_name);
      RETURN_IF_ERROR(Build(*f, false, types[i], cpath, proto3, &out->fields.emplace_back()));
    }
    return Status::OK();
  }

  const std::unordered_map<const void*, const File*>* owner_ = nullptr;
};

using internal::WriteVarint;

void Tag(int32_t number, int wire, std::string* out) {
  WriteVarint((static_cast<uint64_t>(number) << 3) | static_cast<uint64_t>(wire), out);
}

class Encoder final : public RowEncoder {
 public:
  explicit Encoder(EncMessage root) : root_(std::move(root)) {}

  Status Encode(const duck::DataChunk& chunk, size_t first_column, uint64_t row,
                std::string* out) override {
    for (size_t i = 0; i < root_.fields.size(); ++i) {
      RETURN_IF_ERROR(Value(root_.fields[i], chunk.column(first_column + i), row, out, 0));
    }
    return Status::OK();
  }

 private:
  static constexpr int kMaxDepth = 64;

  template <typename T>
  static T At(const Vector& v, uint64_t row) {
    return v.data<T>()[row];
  }

  // An integer view of a numeric cell.
  static Result<int64_t> Int(const EncField& f, const Vector& v, uint64_t row) {
    switch (f.in) {
      case In::kBool:
        return At<bool>(v, row) ? 1 : 0;
      case In::kI8:
        return At<int8_t>(v, row);
      case In::kI16:
        return At<int16_t>(v, row);
      case In::kI32:
        return At<int32_t>(v, row);
      case In::kI64:
        return At<int64_t>(v, row);
      case In::kU8:
        return At<uint8_t>(v, row);
      case In::kU16:
        return At<uint16_t>(v, row);
      case In::kU32:
        return At<uint32_t>(v, row);
      case In::kU64:
        return static_cast<int64_t>(At<uint64_t>(v, row));
      case In::kDate:
        return At<int32_t>(v, row);
      case In::kTime:
      case In::kTimestamp:
        return At<int64_t>(v, row);
      default:
        return InternalError("not an integer");
    }
  }

  static std::string DecimalText(int64_t lo, int64_t hi, int scale, bool wide) {
    // 128-bit magnitude as text, then the point placed.
    __int128 x = wide ? ((static_cast<__int128>(hi) << 64) | static_cast<uint64_t>(lo)) : lo;
    bool neg = x < 0;
    unsigned __int128 u =
        neg ? -static_cast<unsigned __int128>(x) : static_cast<unsigned __int128>(x);
    std::string digits;
    do {
      digits += static_cast<char>('0' + static_cast<int>(u % 10));
      u /= 10;
    } while (u != 0);
    while (static_cast<int>(digits.size()) <= scale) digits += '0';
    std::reverse(digits.begin(), digits.end());
    if (scale > 0) digits.insert(digits.size() - scale, ".");
    return neg ? "-" + digits : digits;
  }

  static std::string Text(const EncField& f, const Vector& v, uint64_t row) {
    switch (f.in) {
      case In::kString:
        return std::string(v.GetString(row));
      case In::kDecimal:
        switch (f.decimal_internal) {
          case TypeId::kSmallInt:
            return DecimalText(At<int16_t>(v, row), 0, f.decimal_scale, false);
          case TypeId::kInteger:
            return DecimalText(At<int32_t>(v, row), 0, f.decimal_scale, false);
          case TypeId::kBigInt:
            return DecimalText(At<int64_t>(v, row), 0, f.decimal_scale, false);
          default: {
            auto h = At<duckdb_hugeint>(v, row);
            return DecimalText(static_cast<int64_t>(h.lower), h.upper, f.decimal_scale, true);
          }
        }
      case In::kHugeInt: {
        auto h = At<duckdb_hugeint>(v, row);
        return DecimalText(static_cast<int64_t>(h.lower), h.upper, 0, true);
      }
      case In::kUuid: {
        auto h = At<duckdb_hugeint>(v, row);
        uint64_t upper = static_cast<uint64_t>(h.upper) ^ (uint64_t{1} << 63);
        std::string hex = fmt::format("{:016x}{:016x}", upper, h.lower);
        return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
               hex.substr(16, 4) + "-" + hex.substr(20);
      }
      default:
        return "";
    }
  }

  // Writes the field's value at `row` of `v` (NULL: nothing), with its tag.
  Status Value(const EncField& f, const Vector& v, uint64_t row, std::string* out, int depth) {
    if (depth > kMaxDepth) return InvalidArgumentError("column '{}': nested too deeply", f.name);
    if (!v.IsValid(row)) return Status::OK();
    if (f.repeated) return Repeated(f, v, row, out, depth);
    return One(f, v, row, out, depth, false);
  }

  Status Repeated(const EncField& f, const Vector& v, uint64_t row, std::string* out, int depth) {
    duck::ListEntry e = v.data<duck::ListEntry>()[row];
    Vector child = v.ListChild();
    if (f.key) {  // map entries: messages of key = 1, value = 2
      Vector keys = child.StructField(0), values = child.StructField(1);
      for (uint64_t i = e.offset; i < e.offset + e.length; ++i) {
        std::string entry;
        RETURN_IF_ERROR(One(*f.key, keys, i, &entry, depth + 1, true));
        if (values.IsValid(i)) RETURN_IF_ERROR(One(*f.value, values, i, &entry, depth + 1, true));
        Tag(f.number, 2, out);
        WriteVarint(entry.size(), out);
        *out += entry;
      }
      return Status::OK();
    }
    const EncField& el = *f.element;
    if (f.packed) {
      std::string packed;
      for (uint64_t i = e.offset; i < e.offset + e.length; ++i) {
        if (!child.IsValid(i)) return InvalidArgumentError("column '{}': a NULL element", f.name);
        RETURN_IF_ERROR(Scalar(el, child, i, &packed, true, true));
      }
      if (!packed.empty()) {
        Tag(f.number, 2, out);
        WriteVarint(packed.size(), out);
        *out += packed;
      }
      return Status::OK();
    }
    for (uint64_t i = e.offset; i < e.offset + e.length; ++i) {
      if (!child.IsValid(i)) return InvalidArgumentError("column '{}': a NULL element", f.name);
      RETURN_IF_ERROR(One(el, child, i, out, depth + 1, true));
    }
    return Status::OK();
  }

  Status One(const EncField& f, const Vector& v, uint64_t row, std::string* out, int depth,
             bool force) {
    if (f.type == FieldType::kMessage) {
      std::string body;
      if (f.wk == WellKnown::kTimestamp || f.wk == WellKnown::kDuration) {
        int64_t seconds, nanos;
        if (f.wk == WellKnown::kDuration) {
          auto iv = At<duckdb_interval>(v, row);
          // Months as 30 days, as DuckDB's epoch() of an interval does.
          __int128 micros =
              (static_cast<__int128>(iv.months) * 30 + iv.days) * 86400000000LL + iv.micros;
          seconds = static_cast<int64_t>(micros / 1000000);
          nanos = static_cast<int64_t>(micros % 1000000) * 1000;
        } else {
          int64_t x = At<int64_t>(v, row);
          int64_t per_second = f.in == In::kTimestampS    ? 1
                               : f.in == In::kTimestampMs ? 1000
                               : f.in == In::kTimestampNs ? 1000000000
                                                          : 1000000;
          seconds = x / per_second;
          int64_t rest = x % per_second;
          if (rest < 0) {
            --seconds;
            rest += per_second;
          }
          nanos = rest * (1000000000 / per_second);
        }
        if (seconds != 0) {
          Tag(1, 0, &body);
          WriteVarint(static_cast<uint64_t>(seconds), &body);
        }
        if (nanos != 0) {
          Tag(2, 0, &body);
          WriteVarint(static_cast<uint64_t>(static_cast<int64_t>(nanos)), &body);
        }
      } else if (f.in == In::kStruct) {
        for (size_t i = 0; i < f.message->fields.size(); ++i)
          RETURN_IF_ERROR(Value(f.message->fields[i], v.StructField(i), row, &body, depth + 1));
      } else {  // a wrapper
        RETURN_IF_ERROR(One(f.message->fields[0], v, row, &body, depth + 1, true));
      }
      Tag(f.number, 2, out);
      WriteVarint(body.size(), out);
      *out += body;
      return Status::OK();
    }
    return Scalar(f, v, row, out, false, force || f.presence);
  }

  // A scalar (with its tag unless `bare`); implicit-presence defaults are left out.
  Status Scalar(const EncField& f, const Vector& v, uint64_t row, std::string* out, bool bare,
                bool presence) {
    auto tag = [&](int wire) {
      if (!bare) Tag(f.number, wire, out);
    };
    switch (f.type) {
      case FieldType::kString:
      case FieldType::kBytes: {
        std::string s = Text(f, v, row);
        if (s.empty() && !presence) return Status::OK();
        if (f.type == FieldType::kString && !internal::ValidUtf8(s))
          return InvalidArgumentError("column '{}': invalid UTF-8 for a string field", f.name);
        tag(2);
        WriteVarint(s.size(), out);
        *out += s;
        return Status::OK();
      }
      case FieldType::kFloat:
      case FieldType::kDouble: {
        double d;
        if (f.in == In::kFloat) {
          d = At<float>(v, row);
        } else if (f.in == In::kDouble) {
          d = At<double>(v, row);
        } else {
          ASSIGN_OR_RETURN(int64_t x, Int(f, v, row));
          d = static_cast<double>(x);
        }
        if (d == 0 && !std::signbit(d) && !presence) return Status::OK();
        tag(f.type == FieldType::kFloat ? 5 : 1);
        if (f.type == FieldType::kFloat) {
          float x = static_cast<float>(d);
          out->append(reinterpret_cast<const char*>(&x), 4);
        } else {
          out->append(reinterpret_cast<const char*>(&d), 8);
        }
        return Status::OK();
      }
      case FieldType::kEnum: {
        int64_t n = 0;
        if (f.in == In::kString) {
          std::string_view name = v.GetString(row);
          bool found = false;
          for (const EnumValue& ev : f.enumeration->values) {
            if (ev.name == name) {
              n = ev.number;
              found = true;
              break;
            }
          }
          if (!found) {
            auto r = std::from_chars(name.data(), name.data() + name.size(), n);
            if (r.ec != std::errc() || r.ptr != name.data() + name.size() || n < INT32_MIN ||
                n > INT32_MAX)
              return InvalidArgumentError("column '{}': '{}' is not a value of enum '{}'", f.name,
                                          name, f.enumeration->full_name);
          }
        } else {
          ASSIGN_OR_RETURN(n, Int(f, v, row));
        }
        if (n == 0 && !presence) return Status::OK();
        tag(0);
        WriteVarint(static_cast<uint64_t>(n), out);
        return Status::OK();
      }
      default:
        break;
    }
    // Integers.
    ASSIGN_OR_RETURN(int64_t x, Int(f, v, row));
    bool unsigned_in = f.in == In::kU64;
    uint64_t ux = static_cast<uint64_t>(x);
    auto range = [&](int64_t lo, int64_t hi) -> Status {
      if ((unsigned_in && ux > static_cast<uint64_t>(hi)) || (!unsigned_in && (x < lo || x > hi)))
        return InvalidArgumentError("column '{}': {} out of range for {}", f.name,
                                    unsigned_in ? std::to_string(ux) : std::to_string(x),
                                    ScalarName(f.type));
      return Status::OK();
    };
    switch (f.type) {
      case FieldType::kInt32:
      case FieldType::kSint32:
      case FieldType::kSfixed32:
        RETURN_IF_ERROR(range(INT32_MIN, INT32_MAX));
        break;
      case FieldType::kUint32:
      case FieldType::kFixed32:
        RETURN_IF_ERROR(range(0, UINT32_MAX));
        break;
      case FieldType::kUint64:
      case FieldType::kFixed64:
        if (!unsigned_in && x < 0) return range(0, INT64_MAX);
        break;
      case FieldType::kBool:
        RETURN_IF_ERROR(range(0, 1));
        break;
      default:
        if (unsigned_in && ux > static_cast<uint64_t>(INT64_MAX))
          return range(INT64_MIN, INT64_MAX);
        break;
    }
    if (x == 0 && !presence) return Status::OK();
    switch (f.type) {
      case FieldType::kSint32:
      case FieldType::kSint64:
        tag(0);
        WriteVarint(internal::ZigZag64(x), out);
        break;
      case FieldType::kFixed32:
      case FieldType::kSfixed32: {
        tag(5);
        uint32_t y = static_cast<uint32_t>(x);
        out->append(reinterpret_cast<const char*>(&y), 4);
        break;
      }
      case FieldType::kFixed64:
      case FieldType::kSfixed64:
        tag(1);
        out->append(reinterpret_cast<const char*>(&ux), 8);
        break;
      default:
        tag(0);
        WriteVarint(ux, out);
    }
    return Status::OK();
  }

  EncMessage root_;
};

}  // namespace

Result<std::unique_ptr<RowEncoder>> MakeRowEncoder(const Parsed& schema,
                                                   std::span<const int> message_indexes,
                                                   std::span<const Column> columns) {
  ASSIGN_OR_RETURN(const MessageType* m, FindMessage(schema, message_indexes));
  EncBuilder b;
  b.owner_ = &schema.owner;
  auto owner = schema.owner.find(m);
  bool proto3 = owner != schema.owner.end() && owner->second->syntax == "proto3";
  EncMessage root;
  std::vector<std::string> names;
  std::vector<LogicalType> types;
  for (const Column& c : columns) {
    names.push_back(c.name);
    types.push_back(internal::CopyType(c.type));
  }
  RETURN_IF_ERROR(b.Fields(*m, names, types, "", proto3, &root));
  return std::unique_ptr<RowEncoder>(std::make_unique<Encoder>(std::move(root)));
}

}  // namespace sluice::schema::protobuf
