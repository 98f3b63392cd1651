#include "duck/logical_type.h"

#include <duckdb.h>

#include "base/status.h"
#include "duck/database.h"

namespace sluice::duck {

static_assert(static_cast<int>(TypeId::kBoolean) == DUCKDB_TYPE_BOOLEAN);
static_assert(static_cast<int>(TypeId::kUBigInt) == DUCKDB_TYPE_UBIGINT);
static_assert(static_cast<int>(TypeId::kTimestamp) == DUCKDB_TYPE_TIMESTAMP);
static_assert(static_cast<int>(TypeId::kVarchar) == DUCKDB_TYPE_VARCHAR);
static_assert(static_cast<int>(TypeId::kTimestampNs) == DUCKDB_TYPE_TIMESTAMP_NS);
static_assert(static_cast<int>(TypeId::kStruct) == DUCKDB_TYPE_STRUCT);
static_assert(static_cast<int>(TypeId::kTimestampTz) == DUCKDB_TYPE_TIMESTAMP_TZ);
static_assert(static_cast<int>(TypeId::kUHugeInt) == DUCKDB_TYPE_UHUGEINT);
static_assert(static_cast<int>(TypeId::kArray) == DUCKDB_TYPE_ARRAY);
static_assert(static_cast<int>(TypeId::kSqlNull) == DUCKDB_TYPE_SQLNULL);

LogicalType LogicalType::Of(TypeId id) {
  return LogicalType(duckdb_create_logical_type(static_cast<duckdb_type>(id)));
}

LogicalType LogicalType::List(const LogicalType& child) {
  return LogicalType(duckdb_create_list_type(child.handle_));
}

LogicalType LogicalType::Struct(const std::vector<std::string>& names,
                                const std::vector<LogicalType>& children) {
  SLUICE_ASSERT(names.size() == children.size());
  std::vector<const char*> name_ptrs;
  std::vector<duckdb_logical_type> types;
  for (size_t i = 0; i < names.size(); ++i) {
    name_ptrs.push_back(names[i].c_str());
    types.push_back(children[i].handle_);
  }
  return LogicalType(duckdb_create_struct_type(types.data(), name_ptrs.data(), names.size()));
}

LogicalType& LogicalType::operator=(LogicalType&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) duckdb_destroy_logical_type(&handle_);
    handle_ = other.handle_;
    other.handle_ = nullptr;
  }
  return *this;
}

LogicalType::~LogicalType() {
  if (handle_ != nullptr) duckdb_destroy_logical_type(&handle_);
}

LogicalType LogicalType::Copy() const {
  // DuckDB's constructors copy the child types they are given, so one level is enough.
  duckdb_logical_type t = handle_;
  switch (id()) {
    case TypeId::kList:
      return List(ListChild());
    case TypeId::kStruct: {
      std::vector<std::string> names;
      std::vector<LogicalType> children;
      for (size_t i = 0; i < StructFieldCount(); ++i) {
        names.push_back(StructFieldName(i));
        children.push_back(StructFieldType(i));
      }
      return Struct(names, children);
    }
    case TypeId::kDecimal:
      return LogicalType(
          duckdb_create_decimal_type(duckdb_decimal_width(t), duckdb_decimal_scale(t)));
    case TypeId::kMap: {
      LogicalType key(duckdb_map_type_key_type(t));
      LogicalType value(duckdb_map_type_value_type(t));
      return LogicalType(duckdb_create_map_type(key.handle_, value.handle_));
    }
    case TypeId::kArray: {
      LogicalType child(duckdb_array_type_child_type(t));
      return LogicalType(duckdb_create_array_type(child.handle_, duckdb_array_type_array_size(t)));
    }
    case TypeId::kUnion: {
      const idx_t n = duckdb_union_type_member_count(t);
      std::vector<LogicalType> members;
      std::vector<duckdb_logical_type> handles;
      std::vector<std::string> names;
      std::vector<const char*> name_ptrs;
      for (idx_t i = 0; i < n; ++i) {
        members.push_back(LogicalType(duckdb_union_type_member_type(t, i)));
        char* name = duckdb_union_type_member_name(t, i);
        names.emplace_back(name != nullptr ? name : "");
        duckdb_free(name);
      }
      for (idx_t i = 0; i < n; ++i) {
        handles.push_back(members[i].handle_);
        name_ptrs.push_back(names[i].c_str());
      }
      return LogicalType(duckdb_create_union_type(handles.data(), name_ptrs.data(), n));
    }
    case TypeId::kEnum: {
      const uint32_t n = duckdb_enum_dictionary_size(t);
      std::vector<std::string> values;
      std::vector<const char*> ptrs;
      for (uint32_t i = 0; i < n; ++i) {
        char* v = duckdb_enum_dictionary_value(t, i);
        values.emplace_back(v != nullptr ? v : "");
        duckdb_free(v);
      }
      for (const std::string& v : values) ptrs.push_back(v.c_str());
      return LogicalType(duckdb_create_enum_type(ptrs.data(), ptrs.size()));
    }
    default:
      break;
  }
  LogicalType out = Of(id());
  return out;
}

bool LogicalType::Equals(const LogicalType& other) const {
  duckdb_logical_type a = handle_;
  duckdb_logical_type b = other.handle_;
  if (duckdb_get_type_id(a) != duckdb_get_type_id(b) || alias() != other.alias()) return false;
  auto same_children = [](duckdb_logical_type x, duckdb_logical_type y) {
    LogicalType cx(x);
    LogicalType cy(y);
    return cx.Equals(cy);
  };
  auto name = [](char* n) {
    std::string out = n != nullptr ? n : "";
    duckdb_free(n);
    return out;
  };
  switch (id()) {
    case TypeId::kDecimal:
      return duckdb_decimal_width(a) == duckdb_decimal_width(b) &&
             duckdb_decimal_scale(a) == duckdb_decimal_scale(b);
    case TypeId::kEnum: {
      uint32_t n = duckdb_enum_dictionary_size(a);
      if (n != duckdb_enum_dictionary_size(b)) return false;
      for (uint32_t i = 0; i < n; ++i) {
        if (name(duckdb_enum_dictionary_value(a, i)) != name(duckdb_enum_dictionary_value(b, i)))
          return false;
      }
      return true;
    }
    case TypeId::kList:
      return same_children(duckdb_list_type_child_type(a), duckdb_list_type_child_type(b));
    case TypeId::kArray:
      return duckdb_array_type_array_size(a) == duckdb_array_type_array_size(b) &&
             same_children(duckdb_array_type_child_type(a), duckdb_array_type_child_type(b));
    case TypeId::kMap:
      return same_children(duckdb_map_type_key_type(a), duckdb_map_type_key_type(b)) &&
             same_children(duckdb_map_type_value_type(a), duckdb_map_type_value_type(b));
    case TypeId::kStruct: {
      idx_t n = duckdb_struct_type_child_count(a);
      if (n != duckdb_struct_type_child_count(b)) return false;
      for (idx_t i = 0; i < n; ++i) {
        if (name(duckdb_struct_type_child_name(a, i)) !=
                name(duckdb_struct_type_child_name(b, i)) ||
            !same_children(duckdb_struct_type_child_type(a, i),
                           duckdb_struct_type_child_type(b, i))) {
          return false;
        }
      }
      return true;
    }
    case TypeId::kUnion: {
      idx_t n = duckdb_union_type_member_count(a);
      if (n != duckdb_union_type_member_count(b)) return false;
      for (idx_t i = 0; i < n; ++i) {
        if (name(duckdb_union_type_member_name(a, i)) !=
                name(duckdb_union_type_member_name(b, i)) ||
            !same_children(duckdb_union_type_member_type(a, i),
                           duckdb_union_type_member_type(b, i))) {
          return false;
        }
      }
      return true;
    }
    default:
      return true;
  }
}

TypeId LogicalType::id() const { return static_cast<TypeId>(duckdb_get_type_id(handle_)); }

std::string LogicalType::alias() const {
  char* a = duckdb_logical_type_get_alias(handle_);
  if (a == nullptr) return "";
  std::string out(a);
  duckdb_free(a);
  return out;
}

LogicalType LogicalType::ListChild() const {
  return LogicalType(duckdb_list_type_child_type(handle_));
}

size_t LogicalType::StructFieldCount() const { return duckdb_struct_type_child_count(handle_); }

std::string LogicalType::StructFieldName(size_t i) const {
  char* n = duckdb_struct_type_child_name(handle_, i);
  std::string out = n != nullptr ? n : "";
  duckdb_free(n);
  return out;
}

LogicalType LogicalType::StructFieldType(size_t i) const {
  return LogicalType(duckdb_struct_type_child_type(handle_, i));
}

LogicalType LogicalType::MapKey() const { return LogicalType(duckdb_map_type_key_type(handle_)); }
LogicalType LogicalType::MapValue() const {
  return LogicalType(duckdb_map_type_value_type(handle_));
}
LogicalType LogicalType::ArrayChild() const {
  return LogicalType(duckdb_array_type_child_type(handle_));
}
TypeId LogicalType::DecimalInternalType() const {
  return static_cast<TypeId>(duckdb_decimal_internal_type(handle_));
}
uint64_t LogicalType::ArraySize() const { return duckdb_array_type_array_size(handle_); }
TypeId LogicalType::EnumInternalType() const {
  return static_cast<TypeId>(duckdb_enum_internal_type(handle_));
}
std::string LogicalType::EnumValue(uint64_t index) const {
  char* v = duckdb_enum_dictionary_value(handle_, index);
  std::string out = v != nullptr ? v : "";
  duckdb_free(v);
  return out;
}
uint64_t LogicalType::EnumSize() const { return duckdb_enum_dictionary_size(handle_); }
int LogicalType::DecimalWidth() const { return duckdb_decimal_width(handle_); }
int LogicalType::DecimalScale() const { return duckdb_decimal_scale(handle_); }

std::string LogicalType::ToSql() const {
  switch (id()) {
    case TypeId::kList:
      return ListChild().ToSql() + "[]";
    case TypeId::kStruct: {
      std::string out = "STRUCT(";
      for (size_t i = 0; i < StructFieldCount(); ++i) {
        if (i > 0) out += ", ";
        out += QuoteIdentifier(StructFieldName(i));
        out += ' ';
        out += StructFieldType(i).ToSql();
      }
      return out + ")";
    }
    case TypeId::kDecimal:
      return "DECIMAL(" + std::to_string(duckdb_decimal_width(handle_)) + "," +
             std::to_string(duckdb_decimal_scale(handle_)) + ")";
    case TypeId::kMap: {
      LogicalType key(duckdb_map_type_key_type(handle_));
      LogicalType value(duckdb_map_type_value_type(handle_));
      return "MAP(" + key.ToSql() + ", " + value.ToSql() + ")";
    }
    case TypeId::kArray: {
      LogicalType child(duckdb_array_type_child_type(handle_));
      return child.ToSql() + "[" + std::to_string(duckdb_array_type_array_size(handle_)) + "]";
    }
    case TypeId::kUnion: {
      std::string out = "UNION(";
      for (idx_t i = 0; i < duckdb_union_type_member_count(handle_); ++i) {
        char* name = duckdb_union_type_member_name(handle_, i);
        LogicalType member(duckdb_union_type_member_type(handle_, i));
        if (i > 0) out += ", ";
        out += QuoteIdentifier(name != nullptr ? name : "");
        duckdb_free(name);
        out += ' ';
        out += member.ToSql();
      }
      return out + ")";
    }
    case TypeId::kEnum: {
      std::string out = "ENUM(";
      for (uint32_t i = 0; i < duckdb_enum_dictionary_size(handle_); ++i) {
        char* v = duckdb_enum_dictionary_value(handle_, i);
        if (i > 0) out += ", ";
        out += QuoteLiteral(v != nullptr ? v : "");
        duckdb_free(v);
      }
      return out + ")";
    }
    default: {
      std::string a = alias();
      return a.empty() ? std::string(TypeIdName(id())) : a;
    }
  }
}

std::string_view TypeIdName(TypeId id) {
  switch (id) {
    case TypeId::kBoolean:
      return "BOOLEAN";
    case TypeId::kTinyInt:
      return "TINYINT";
    case TypeId::kSmallInt:
      return "SMALLINT";
    case TypeId::kInteger:
      return "INTEGER";
    case TypeId::kBigInt:
      return "BIGINT";
    case TypeId::kUTinyInt:
      return "UTINYINT";
    case TypeId::kUSmallInt:
      return "USMALLINT";
    case TypeId::kUInteger:
      return "UINTEGER";
    case TypeId::kUBigInt:
      return "UBIGINT";
    case TypeId::kFloat:
      return "FLOAT";
    case TypeId::kDouble:
      return "DOUBLE";
    case TypeId::kTimestamp:
      return "TIMESTAMP";
    case TypeId::kDate:
      return "DATE";
    case TypeId::kTime:
      return "TIME";
    case TypeId::kInterval:
      return "INTERVAL";
    case TypeId::kHugeInt:
      return "HUGEINT";
    case TypeId::kUHugeInt:
      return "UHUGEINT";
    case TypeId::kVarchar:
      return "VARCHAR";
    case TypeId::kBlob:
      return "BLOB";
    case TypeId::kDecimal:
      return "DECIMAL";
    case TypeId::kTimestampS:
      return "TIMESTAMP_S";
    case TypeId::kTimestampMs:
      return "TIMESTAMP_MS";
    case TypeId::kTimestampNs:
      return "TIMESTAMP_NS";
    case TypeId::kEnum:
      return "ENUM";
    case TypeId::kList:
      return "LIST";
    case TypeId::kStruct:
      return "STRUCT";
    case TypeId::kMap:
      return "MAP";
    case TypeId::kUuid:
      return "UUID";
    case TypeId::kUnion:
      return "UNION";
    case TypeId::kBit:
      return "BIT";
    case TypeId::kTimeTz:
      return "TIME WITH TIME ZONE";
    case TypeId::kTimestampTz:
      return "TIMESTAMP WITH TIME ZONE";
    case TypeId::kArray:
      return "ARRAY";
    case TypeId::kBigNum:
      return "BIGNUM";
    case TypeId::kSqlNull:
      return "NULL";
    default:
      return "INVALID";
  }
}

}  // namespace sluice::duck
