// ColumnsOf: the DuckDB type of each field of a message (README.md, "Type mapping").
#include "schema/protobuf/columns.h"

#include <duckdb.h>
#include <fmt/format.h>

#include <map>

#include "duck/json_type.h"
#include "schema/protobuf/internal.h"

namespace sluice::schema::protobuf::internal {

using duck::LogicalType;
using duck::TypeId;

LogicalType MapType(const LogicalType& key, const LogicalType& value) {
  return LogicalType::Adopt(duckdb_create_map_type(key.handle(), value.handle()));
}

LogicalType CopyType(const LogicalType& t) {
  switch (t.id()) {
    case TypeId::kMap:
      return MapType(CopyType(t.MapKey()), CopyType(t.MapValue()));
    case TypeId::kList:
      return LogicalType::List(CopyType(t.ListChild()));
    case TypeId::kStruct: {
      std::vector<std::string> names;
      std::vector<LogicalType> children;
      for (size_t i = 0; i < t.StructFieldCount(); ++i) {
        names.push_back(t.StructFieldName(i));
        children.push_back(CopyType(t.StructFieldType(i)));
      }
      return LogicalType::Struct(names, children);
    }
    case TypeId::kDecimal:
      return LogicalType::Adopt(duckdb_create_decimal_type(static_cast<uint8_t>(t.DecimalWidth()),
                                                           static_cast<uint8_t>(t.DecimalScale())));
    default:
      return t.Copy();
  }
}

LogicalType ScalarColumnType(FieldType t) {
  switch (t) {
    case FieldType::kDouble:
      return LogicalType::Of(TypeId::kDouble);
    case FieldType::kFloat:
      return LogicalType::Of(TypeId::kFloat);
    case FieldType::kInt32:
    case FieldType::kSint32:
    case FieldType::kSfixed32:
      return LogicalType::Of(TypeId::kInteger);
    case FieldType::kInt64:
    case FieldType::kSint64:
    case FieldType::kSfixed64:
      return LogicalType::Of(TypeId::kBigInt);
    case FieldType::kUint32:
    case FieldType::kFixed32:
      return LogicalType::Of(TypeId::kUInteger);
    case FieldType::kUint64:
    case FieldType::kFixed64:
      return LogicalType::Of(TypeId::kUBigInt);
    case FieldType::kBool:
      return LogicalType::Of(TypeId::kBoolean);
    case FieldType::kBytes:
      return LogicalType::Of(TypeId::kBlob);
    default:
      return LogicalType::Of(TypeId::kVarchar);  // string, enum
  }
}

bool HasColumns(const MessageType& m) {
  for (const Field& f : m.fields) {
    if (f.type != FieldType::kGroup) return true;
  }
  return false;
}

namespace {

class Mapper {
 public:
  LogicalType Value(const Field& f) {
    if (f.type != FieldType::kMessage) return ScalarColumnType(f.type);
    const MessageType* m = f.message;
    switch (WellKnownOf(m)) {
      case WellKnown::kTimestamp:
        return LogicalType::Of(TypeId::kTimestampTz);
      case WellKnown::kDuration:
        return LogicalType::Of(TypeId::kInterval);
      case WellKnown::kDoubleValue:
        return ScalarColumnType(FieldType::kDouble);
      case WellKnown::kFloatValue:
        return ScalarColumnType(FieldType::kFloat);
      case WellKnown::kInt64Value:
        return ScalarColumnType(FieldType::kInt64);
      case WellKnown::kUInt64Value:
        return ScalarColumnType(FieldType::kUint64);
      case WellKnown::kInt32Value:
        return ScalarColumnType(FieldType::kInt32);
      case WellKnown::kUInt32Value:
        return ScalarColumnType(FieldType::kUint32);
      case WellKnown::kBoolValue:
        return ScalarColumnType(FieldType::kBool);
      case WellKnown::kStringValue:
        return ScalarColumnType(FieldType::kString);
      case WellKnown::kBytesValue:
        return ScalarColumnType(FieldType::kBytes);
      case WellKnown::kEmpty:
        return LogicalType::Of(TypeId::kBoolean);
      case WellKnown::kStruct:
      case WellKnown::kValue:
      case WellKnown::kListValue:
        return duck::JsonType();
      case WellKnown::kNone:
        break;
    }
    if (!HasColumns(*m)) return LogicalType::Of(TypeId::kBoolean);  // as Empty
    int& seen = on_path_[m];
    if (seen >= kMaxRecursion || depth_ >= kMaxStructDepth) return LogicalType::Of(TypeId::kBlob);
    ++seen;
    ++depth_;
    std::vector<std::string> names;
    std::vector<LogicalType> types;
    for (const Field& c : m->fields) {
      if (c.type == FieldType::kGroup) continue;
      names.push_back(c.name);
      types.push_back(Of(c));
    }
    --depth_;
    --seen;
    return LogicalType::Struct(names, types);
  }

  LogicalType Of(const Field& f) {
    if (f.is_map) return MapType(ScalarColumnType(f.map_key), Value(f));
    if (f.label == Label::kRepeated) return LogicalType::List(Value(f));
    return Value(f);
  }

 private:
  std::map<const MessageType*, int> on_path_;
  int depth_ = 0;
};

}  // namespace

}  // namespace sluice::schema::protobuf::internal

namespace sluice::schema::protobuf {

Result<std::vector<Column>> ColumnsOf(const Parsed& schema, std::span<const int> message_indexes) {
  ASSIGN_OR_RETURN(const MessageType* m, FindMessage(schema, message_indexes));
  internal::Mapper mapper;
  std::vector<Column> out;
  for (const Field& f : m->fields) {
    if (f.type == FieldType::kGroup) continue;
    out.push_back({f.name, mapper.Of(f)});
  }
  if (out.empty())
    return InvalidArgumentError("message '{}' has no fields to make columns of", m->full_name);
  return out;
}

}  // namespace sluice::schema::protobuf
