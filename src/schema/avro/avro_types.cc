// Logical types, union member names, DuckDB types and their SQL text (avro_types.h).
#include "schema/avro/avro_types.h"

#include <duckdb.h>
#include <fmt/format.h>

#include <cmath>

namespace sluice::schema::avro {

namespace {

// The most decimal digits a fixed of `size` bytes holds (two's complement).
int MaxFixedPrecision(int64_t size) {
  if (size <= 0) return 0;
  if (size > 64) return 1000;  // past anything a schema declares in practice
  return static_cast<int>(std::floor(std::log10(2.0) * (8.0 * static_cast<double>(size) - 1)));
}

}  // namespace

LogicalInfo LogicalOf(const Node& n) {
  std::optional<std::string> name = lake::avro::StringAttribute(n.attributes, "logicalType");
  if (!name) return {};
  const std::string& l = *name;
  if (l == "decimal") {
    if (n.type != Type::kBytes && n.type != Type::kFixed) return {};
    std::optional<int64_t> precision = lake::avro::IntAttribute(n.attributes, "precision");
    std::optional<int64_t> scale = lake::avro::IntAttribute(n.attributes, "scale");
    if (!precision || *precision <= 0 || *precision > 100000) return {};
    int64_t s = scale.value_or(0);
    if (s < 0 || s > *precision) return {};
    if (n.type == Type::kFixed && *precision > MaxFixedPrecision(n.size)) return {};
    return {Logical::kDecimal, static_cast<int>(*precision), static_cast<int>(s)};
  }
  auto on = [&](Type t, Logical kind) { return n.type == t ? LogicalInfo{kind} : LogicalInfo{}; };
  if (l == "date") return on(Type::kInt, Logical::kDate);
  if (l == "time-millis") return on(Type::kInt, Logical::kTimeMillis);
  if (l == "time-micros") return on(Type::kLong, Logical::kTimeMicros);
  if (l == "timestamp-millis") return on(Type::kLong, Logical::kTimestampMillis);
  if (l == "timestamp-micros") return on(Type::kLong, Logical::kTimestampMicros);
  if (l == "timestamp-nanos") return on(Type::kLong, Logical::kTimestampNanos);
  if (l == "local-timestamp-millis") return on(Type::kLong, Logical::kLocalTimestampMillis);
  if (l == "local-timestamp-micros") return on(Type::kLong, Logical::kLocalTimestampMicros);
  if (l == "local-timestamp-nanos") return on(Type::kLong, Logical::kLocalTimestampNanos);
  if (l == "uuid") {
    if (n.type == Type::kString || (n.type == Type::kFixed && n.size == 16)) {
      return {Logical::kUuid};
    }
    return {};
  }
  if (l == "duration") {
    return n.type == Type::kFixed && n.size == 12 ? LogicalInfo{Logical::kDuration} : LogicalInfo{};
  }
  return {};
}

int64_t UnitsPerSecond(Logical l) {
  switch (l) {
    case Logical::kTimeMillis:
    case Logical::kTimestampMillis:
    case Logical::kLocalTimestampMillis:
      return 1000;
    case Logical::kTimeMicros:
    case Logical::kTimestampMicros:
    case Logical::kLocalTimestampMicros:
      return 1000000;
    case Logical::kTimestampNanos:
    case Logical::kLocalTimestampNanos:
      return 1000000000;
    default:
      return 0;
  }
}

std::vector<const Node*> NonNullBranches(const Node& u) {
  std::vector<const Node*> out;
  for (const Node* b : u.branches) {
    if (b->type != Type::kNull) out.push_back(b);
  }
  return out;
}

std::vector<std::string> UnionTags(const std::vector<const Node*>& branches) {
  std::vector<std::string> tags;
  for (const Node* b : branches) {
    if (!b->is_named()) {
      tags.emplace_back(lake::avro::TypeName(b->type));
      continue;
    }
    bool shared = false;
    for (const Node* o : branches) {
      shared |= o != b && o->is_named() && SimpleName(*o) == SimpleName(*b);
    }
    tags.emplace_back(shared ? b->full_name : std::string(SimpleName(*b)));
  }
  return tags;
}

std::string Describe(const Node& n) {
  std::string out(lake::avro::TypeName(n.type));
  if (n.is_named()) out += " " + n.full_name;
  if (n.type == Type::kUnion) {
    out += " [";
    for (size_t i = 0; i < n.branches.size(); ++i) {
      if (i > 0) out += ", ";
      out += n.branches[i]->is_named() ? n.branches[i]->full_name
                                       : std::string(lake::avro::TypeName(n.branches[i]->type));
    }
    out += "]";
  }
  if (std::optional<std::string> l = lake::avro::StringAttribute(n.attributes, "logicalType")) {
    out += " (" + *l + ")";
  }
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view SimpleName(const Node& n) {
  std::string_view f = n.full_name;
  size_t dot = f.rfind('.');
  return dot == std::string_view::npos ? f : f.substr(dot + 1);
}

std::string_view NamespaceOf(const Node& n) {
  std::string_view f = n.full_name;
  size_t dot = f.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : f.substr(0, dot);
}

duck::LogicalType DecimalType(int width, int scale) {
  return duck::LogicalType::Adopt(
      duckdb_create_decimal_type(static_cast<uint8_t>(width), static_cast<uint8_t>(scale)));
}

duck::LogicalType MapType(const duck::LogicalType& key, const duck::LogicalType& value) {
  return duck::LogicalType::Adopt(duckdb_create_map_type(key.handle(), value.handle()));
}

duck::LogicalType UnionType(const std::vector<std::string>& names,
                            const std::vector<duck::LogicalType>& members) {
  std::vector<const char*> name_ptrs;
  std::vector<duckdb_logical_type> types;
  for (size_t i = 0; i < names.size(); ++i) {
    name_ptrs.push_back(names[i].c_str());
    types.push_back(members[i].handle());
  }
  return duck::LogicalType::Adopt(
      duckdb_create_union_type(types.data(), name_ptrs.data(), names.size()));
}

size_t UnionMemberCount(const duck::LogicalType& t) {
  return duckdb_union_type_member_count(t.handle());
}

std::string UnionMemberName(const duck::LogicalType& t, size_t i) {
  char* n = duckdb_union_type_member_name(t.handle(), i);
  std::string out = n != nullptr ? n : "";
  duckdb_free(n);
  return out;
}

duck::LogicalType UnionMemberType(const duck::LogicalType& t, size_t i) {
  return duck::LogicalType::Adopt(duckdb_union_type_member_type(t.handle(), i));
}

duck::LogicalType CopyType(const duck::LogicalType& t) {
  switch (t.id()) {
    case duck::TypeId::kDecimal:
      return DecimalType(t.DecimalWidth(), t.DecimalScale());
    case duck::TypeId::kList:
      return duck::LogicalType::List(CopyType(t.ListChild()));
    case duck::TypeId::kArray:
      return duck::LogicalType::Adopt(
          duckdb_create_array_type(CopyType(t.ArrayChild()).handle(), t.ArraySize()));
    case duck::TypeId::kMap:
      return MapType(CopyType(t.MapKey()), CopyType(t.MapValue()));
    case duck::TypeId::kStruct:
    case duck::TypeId::kUnion: {
      bool is_union = t.id() == duck::TypeId::kUnion;
      size_t n = is_union ? UnionMemberCount(t) : t.StructFieldCount();
      std::vector<std::string> names;
      std::vector<duck::LogicalType> types;
      for (size_t i = 0; i < n; ++i) {
        names.push_back(is_union ? UnionMemberName(t, i) : t.StructFieldName(i));
        types.push_back(CopyType(is_union ? UnionMemberType(t, i) : t.StructFieldType(i)));
      }
      return is_union ? UnionType(names, types) : duck::LogicalType::Struct(names, types);
    }
    case duck::TypeId::kEnum: {
      std::vector<std::string> values;
      for (uint64_t i = 0; i < t.EnumSize(); ++i) values.push_back(t.EnumValue(i));
      std::vector<const char*> ptrs;
      for (const std::string& v : values) ptrs.push_back(v.c_str());
      return duck::LogicalType::Adopt(duckdb_create_enum_type(ptrs.data(), ptrs.size()));
    }
    default:
      return t.Copy();
  }
}

namespace {

std::string Quote(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string TypeSql(const duck::LogicalType& t) {
  switch (t.id()) {
    case duck::TypeId::kDecimal:
      return fmt::format("DECIMAL({},{})", t.DecimalWidth(), t.DecimalScale());
    case duck::TypeId::kList:
      return TypeSql(t.ListChild()) + "[]";
    case duck::TypeId::kMap:
      return fmt::format("MAP({}, {})", TypeSql(t.MapKey()), TypeSql(t.MapValue()));
    case duck::TypeId::kStruct:
    case duck::TypeId::kUnion: {
      bool is_union = t.id() == duck::TypeId::kUnion;
      std::string out = is_union ? "UNION(" : "STRUCT(";
      size_t n = is_union ? UnionMemberCount(t) : t.StructFieldCount();
      for (size_t i = 0; i < n; ++i) {
        if (i > 0) out += ", ";
        out += Quote(is_union ? UnionMemberName(t, i) : t.StructFieldName(i));
        out += ' ';
        out += TypeSql(is_union ? UnionMemberType(t, i) : t.StructFieldType(i));
      }
      return out + ")";
    }
    case duck::TypeId::kEnum: {
      std::string out = "ENUM(";
      for (uint64_t i = 0; i < t.EnumSize(); ++i) {
        if (i > 0) out += ", ";
        out += "'";
        for (char c : t.EnumValue(i)) {
          if (c == '\'') out += '\'';
          out += c;
        }
        out += "'";
      }
      return out + ")";
    }
    default: {
      std::string a = t.alias();
      return a.empty() ? std::string(duck::TypeIdName(t.id())) : a;
    }
  }
}

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (u < 0x20) {
          *out += fmt::format("\\u{:04x}", u);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

}  // namespace sluice::schema::avro
