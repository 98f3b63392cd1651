#include "lake/duck_types.h"

#include <fmt/format.h>

#include "duck/database.h"

namespace sluice::lake {
namespace {

using DT = duck::TypeId;

void FieldIdsOf(const Type& type, int32_t id, std::string* out) {
  if (type.is_primitive()) {
    *out += std::to_string(id);
    return;
  }
  *out += fmt::format("{{__duckdb_field_id: {}", id);
  for (const NestedField& f : type.fields) {
    *out += fmt::format(", {}: ", duck::QuoteLiteral(f.name));
    FieldIdsOf(f.type, f.id, out);
  }
  *out += "}";
}

}  // namespace

std::string QuoteId(std::string_view name) { return duck::QuoteIdentifier(name); }

Result<Type> IcebergTypeOf(const duck::LogicalType& type, std::string_view column,
                           int32_t* next_id) {
  switch (type.id()) {
    case DT::kBoolean:
      return Type::Primitive(lake::TypeId::kBoolean);
    case DT::kTinyInt:
    case DT::kSmallInt:
    case DT::kInteger:
    case DT::kUTinyInt:
    case DT::kUSmallInt:
      return Type::Primitive(lake::TypeId::kInt);
    case DT::kBigInt:
    case DT::kUInteger:
      return Type::Primitive(lake::TypeId::kLong);
    case DT::kFloat:
      return Type::Primitive(lake::TypeId::kFloat);
    case DT::kDouble:
      return Type::Primitive(lake::TypeId::kDouble);
    case DT::kDecimal:
      return Type::Decimal(type.DecimalWidth(), type.DecimalScale());
    case DT::kDate:
      return Type::Primitive(lake::TypeId::kDate);
    case DT::kTime:
      return Type::Primitive(lake::TypeId::kTime);
    case DT::kTimestamp:
    case DT::kTimestampS:
    case DT::kTimestampMs:
    case DT::kTimestampNs:
      return Type::Primitive(lake::TypeId::kTimestamp);
    case DT::kTimestampTz:
      return Type::Primitive(lake::TypeId::kTimestampTz);
    case DT::kVarchar:
    case DT::kEnum:
      return Type::Primitive(lake::TypeId::kString);
    case DT::kBlob:
      return Type::Primitive(lake::TypeId::kBinary);
    case DT::kUuid:
      return Type::Primitive(lake::TypeId::kUuid);
    case DT::kList:
    case DT::kArray: {
      int32_t id = (*next_id)++;
      duck::LogicalType child = type.id() == DT::kList ? type.ListChild() : type.ArrayChild();
      ASSIGN_OR_RETURN(Type element, IcebergTypeOf(child, fmt::format("{}[]", column), next_id));
      return Type::List(id, std::move(element), false);
    }
    case DT::kMap: {
      int32_t key_id = (*next_id)++;
      int32_t value_id = (*next_id)++;
      ASSIGN_OR_RETURN(Type key,
                       IcebergTypeOf(type.MapKey(), fmt::format("{}.key", column), next_id));
      ASSIGN_OR_RETURN(Type value,
                       IcebergTypeOf(type.MapValue(), fmt::format("{}.value", column), next_id));
      return Type::Map(key_id, std::move(key), value_id, std::move(value), false);
    }
    case DT::kStruct: {
      std::vector<NestedField> fields;
      std::vector<int32_t> ids;
      for (size_t i = 0; i < type.StructFieldCount(); ++i) ids.push_back((*next_id)++);
      for (size_t i = 0; i < type.StructFieldCount(); ++i) {
        std::string name = type.StructFieldName(i);
        ASSIGN_OR_RETURN(Type t, IcebergTypeOf(type.StructFieldType(i),
                                               fmt::format("{}.{}", column, name), next_id));
        fields.push_back(NestedField{ids[i], std::move(name), false, std::move(t), std::nullopt});
      }
      return Type::Struct(std::move(fields));
    }
    case DT::kHugeInt:
    case DT::kUHugeInt:
    case DT::kUBigInt:
      return InvalidArgumentError(
          "column {} is {}: Iceberg has no such integer; cast it to BIGINT or DECIMAL(38, 0)",
          column, duck::TypeIdName(type.id()));
    default:
      return InvalidArgumentError(
          "column {} is {}, which has no Iceberg type; cast it (to VARCHAR, say)", column,
          duck::TypeIdName(type.id()));
  }
}

Result<Schema> SchemaOfColumns(const std::vector<std::string>& names,
                               const std::vector<duck::LogicalType>& types) {
  Schema schema;
  int32_t next = static_cast<int32_t>(names.size()) + 1;
  for (size_t i = 0; i < names.size(); ++i) {
    ASSIGN_OR_RETURN(Type t, IcebergTypeOf(types[i], names[i], &next));
    schema.fields.push_back(
        NestedField{static_cast<int32_t>(i + 1), names[i], false, std::move(t), std::nullopt});
  }
  RETURN_IF_ERROR(schema.Validate());
  return schema;
}

std::string DuckTypeOf(const Type& type) {
  switch (type.id) {
    case lake::TypeId::kBoolean:
      return "BOOLEAN";
    case lake::TypeId::kInt:
      return "INTEGER";
    case lake::TypeId::kLong:
      return "BIGINT";
    case lake::TypeId::kFloat:
      return "FLOAT";
    case lake::TypeId::kDouble:
      return "DOUBLE";
    case lake::TypeId::kDecimal:
      return fmt::format("DECIMAL({}, {})", type.precision, type.scale);
    case lake::TypeId::kDate:
      return "DATE";
    case lake::TypeId::kTime:
      return "TIME";
    case lake::TypeId::kTimestamp:
      return "TIMESTAMP";
    case lake::TypeId::kTimestampTz:
      return "TIMESTAMPTZ";
    case lake::TypeId::kTimestampNs:
      return "TIMESTAMP_NS";
    case lake::TypeId::kTimestampTzNs:
      return "TIMESTAMPTZ";
    case lake::TypeId::kString:
      return "VARCHAR";
    case lake::TypeId::kUuid:
      return "UUID";
    case lake::TypeId::kFixed:
    case lake::TypeId::kBinary:
      return "BLOB";
    case lake::TypeId::kList:
      return DuckTypeOf(type.element().type) + "[]";
    case lake::TypeId::kMap:
      return fmt::format("MAP({}, {})", DuckTypeOf(type.key().type), DuckTypeOf(type.value().type));
    case lake::TypeId::kStruct: {
      std::string out = "STRUCT(";
      for (size_t i = 0; i < type.fields.size(); ++i) {
        if (i > 0) out += ", ";
        out += QuoteId(type.fields[i].name) + " " + DuckTypeOf(type.fields[i].type);
      }
      return out + ")";
    }
  }
  return "VARCHAR";
}

bool IsSafePromotion(const Type& from, const Type& to) {
  if (from == to) return true;
  if (from.id == lake::TypeId::kInt && to.id == lake::TypeId::kLong) return true;
  if (from.id == lake::TypeId::kFloat && to.id == lake::TypeId::kDouble) return true;
  if (from.id == lake::TypeId::kDecimal && to.id == lake::TypeId::kDecimal) {
    return from.scale == to.scale && from.precision <= to.precision;
  }
  if (from.id != to.id || from.is_primitive()) return false;
  // Nested: the same shape, each child safe (ids aside: they are the table's).
  if (from.fields.size() != to.fields.size()) return false;
  for (size_t i = 0; i < from.fields.size(); ++i) {
    if (from.id == lake::TypeId::kStruct && from.fields[i].name != to.fields[i].name) return false;
    if (!IsSafePromotion(from.fields[i].type, to.fields[i].type)) return false;
  }
  return true;
}

std::string FieldIdsOption(const Schema& schema) {
  std::string out = "{";
  for (size_t i = 0; i < schema.fields.size(); ++i) {
    if (i > 0) out += ", ";
    out += duck::QuoteLiteral(schema.fields[i].name) + ": ";
    FieldIdsOf(schema.fields[i].type, schema.fields[i].id, &out);
  }
  return out + "}";
}

}  // namespace sluice::lake
