// ColumnsOf (an Avro schema's DuckDB columns) and SchemaForColumns (the Avro schema of
// DuckDB columns). The mapping is in README.md.
#include <fmt/format.h>

#include <algorithm>

#include "schema/avro/avro_format.h"
#include "schema/avro/avro_types.h"

namespace sluice::schema::avro {

using duck::LogicalType;
using duck::TypeId;

namespace {

class TypeMapper {
 public:
  Result<LogicalType> Map(const Node& n, const std::string& path, int depth) {
    if (depth > kMaxTypeDepth) {
      return InvalidArgumentError("{}: nested deeper than {} levels", path, kMaxTypeDepth);
    }
    LogicalInfo l = LogicalOf(n);
    switch (l.kind) {
      case Logical::kDecimal:
        if (l.precision > 38) return LogicalType::Varchar();
        return DecimalType(l.precision, l.scale);
      case Logical::kDate:
        return LogicalType::Date();
      case Logical::kTimeMillis:
      case Logical::kTimeMicros:
        return LogicalType::Of(TypeId::kTime);
      case Logical::kTimestampMillis:
      case Logical::kTimestampMicros:
        return LogicalType::TimestampTz();
      case Logical::kTimestampNanos:
      case Logical::kLocalTimestampNanos:
        return LogicalType::Of(TypeId::kTimestampNs);
      case Logical::kLocalTimestampMillis:
      case Logical::kLocalTimestampMicros:
        return LogicalType::Timestamp();
      case Logical::kUuid:
        return LogicalType::Of(TypeId::kUuid);
      case Logical::kDuration:
        return LogicalType::Of(TypeId::kInterval);
      case Logical::kNone:
        break;
    }
    switch (n.type) {
      case Type::kNull:
        return LogicalType::Varchar();  // always NULL
      case Type::kBoolean:
        return LogicalType::Boolean();
      case Type::kInt:
        return LogicalType::Integer();
      case Type::kLong:
        return LogicalType::BigInt();
      case Type::kFloat:
        return LogicalType::Of(TypeId::kFloat);
      case Type::kDouble:
        return LogicalType::Double();
      case Type::kString:
      case Type::kEnum:
        return LogicalType::Varchar();
      case Type::kBytes:
      case Type::kFixed:
        return LogicalType::Blob();
      case Type::kArray: {
        ASSIGN_OR_RETURN(LogicalType item, Map(*n.items, path + "[]", depth + 1));
        return LogicalType::List(item);
      }
      case Type::kMap: {
        ASSIGN_OR_RETURN(LogicalType value, Map(*n.values, path + "{}", depth + 1));
        return MapType(LogicalType::Varchar(), value);
      }
      case Type::kRecord: {
        if (std::find(stack_.begin(), stack_.end(), &n) != stack_.end()) {
          return InvalidArgumentError(
              "{}: record {} contains itself; a recursive record has no DuckDB type", path,
              n.full_name);
        }
        stack_.push_back(&n);
        std::vector<std::string> names;
        std::vector<LogicalType> types;
        for (const lake::avro::Field& f : n.fields) {
          ASSIGN_OR_RETURN(LogicalType t, Map(*f.type, path + "." + f.name, depth + 1));
          names.push_back(f.name);
          types.push_back(std::move(t));
        }
        stack_.pop_back();
        if (names.empty()) {
          return InvalidArgumentError("{}: record {} has no fields; DuckDB has no empty STRUCT",
                                      path, n.full_name);
        }
        return LogicalType::Struct(names, types);
      }
      case Type::kUnion: {
        std::vector<const Node*> branches = NonNullBranches(n);
        if (branches.empty()) return LogicalType::Varchar();  // always NULL
        if (branches.size() == 1) return Map(*branches[0], path, depth);
        if (branches.size() > 255) {
          return InvalidArgumentError("{}: a union of {} branches; DuckDB's UNION holds 255", path,
                                      branches.size());
        }
        std::vector<std::string> tags = UnionTags(branches);
        std::vector<LogicalType> members;
        for (size_t i = 0; i < branches.size(); ++i) {
          ASSIGN_OR_RETURN(LogicalType t, Map(*branches[i], path + "." + tags[i], depth + 1));
          members.push_back(std::move(t));
        }
        return UnionType(tags, members);
      }
    }
    return InternalError("{}: unknown Avro type", path);
  }

 private:
  std::vector<const Node*> stack_;
};

}  // namespace

Result<std::vector<Column>> ColumnsOf(const Parsed& schema) {
  const Node& root = schema.root();
  TypeMapper mapper;
  std::vector<Column> out;
  if (root.type != Type::kRecord) {
    ASSIGN_OR_RETURN(LogicalType t, mapper.Map(root, "value", 1));
    out.push_back({"value", std::move(t)});
    return out;
  }
  for (const lake::avro::Field& f : root.fields) {
    ASSIGN_OR_RETURN(LogicalType t, mapper.Map(*f.type, f.name, 1));
    out.push_back({f.name, std::move(t)});
  }
  return out;
}

// ---- SchemaForColumns ----

// An Avro name for a DuckDB column name: letters, digits and '_', not starting with a
// digit. MakeRowEncoder matches fields to columns through the same function.
std::string AvroName(std::string_view column) {
  std::string out;
  for (char c : column) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    out += ok ? c : '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out = "_" + out;
  return out;
}

namespace {

Status AppendAvroType(const LogicalType& t, const std::string& name_path, std::string* out,
                      int depth);

// ["null", T] with T the Avro form of `t`.
Status AppendNullable(const LogicalType& t, const std::string& name_path, std::string* out,
                      int depth) {
  *out += "[\"null\",";
  RETURN_IF_ERROR(AppendAvroType(t, name_path, out, depth));
  *out += ']';
  return Status::OK();
}

Status AppendAvroType(const LogicalType& t, const std::string& name_path, std::string* out,
                      int depth) {
  if (depth > kMaxTypeDepth) {
    return InvalidArgumentError("column {}: nested deeper than {} levels", name_path,
                                kMaxTypeDepth);
  }
  switch (t.id()) {
    case TypeId::kBoolean:
      *out += "\"boolean\"";
      return Status::OK();
    case TypeId::kTinyInt:
    case TypeId::kSmallInt:
    case TypeId::kInteger:
    case TypeId::kUTinyInt:
    case TypeId::kUSmallInt:
      *out += "\"int\"";
      return Status::OK();
    case TypeId::kUInteger:
    case TypeId::kBigInt:
    case TypeId::kUBigInt:
      *out += "\"long\"";
      return Status::OK();
    case TypeId::kFloat:
      *out += "\"float\"";
      return Status::OK();
    case TypeId::kDouble:
      *out += "\"double\"";
      return Status::OK();
    case TypeId::kVarchar:
    case TypeId::kEnum:
    case TypeId::kHugeInt:
    case TypeId::kUHugeInt:
      *out += "\"string\"";
      return Status::OK();
    case TypeId::kBlob:
      *out += "\"bytes\"";
      return Status::OK();
    case TypeId::kDecimal:
      *out += fmt::format(R"({{"type":"bytes","logicalType":"decimal","precision":{},"scale":{}}})",
                          t.DecimalWidth(), t.DecimalScale());
      return Status::OK();
    case TypeId::kDate:
      *out += R"({"type":"int","logicalType":"date"})";
      return Status::OK();
    case TypeId::kTime:
      *out += R"({"type":"long","logicalType":"time-micros"})";
      return Status::OK();
    case TypeId::kTimestampTz:
      *out += R"({"type":"long","logicalType":"timestamp-micros"})";
      return Status::OK();
    case TypeId::kTimestamp:
    case TypeId::kTimestampS:
      *out += R"({"type":"long","logicalType":"local-timestamp-micros"})";
      return Status::OK();
    case TypeId::kTimestampMs:
      *out += R"({"type":"long","logicalType":"local-timestamp-millis"})";
      return Status::OK();
    case TypeId::kTimestampNs:
      *out += R"({"type":"long","logicalType":"local-timestamp-nanos"})";
      return Status::OK();
    case TypeId::kUuid:
      *out += R"({"type":"string","logicalType":"uuid"})";
      return Status::OK();
    case TypeId::kInterval:
      *out += R"({"type":"fixed","name":)";
      AppendJsonString(name_path, out);
      *out += R"(,"size":12,"logicalType":"duration"})";
      return Status::OK();
    case TypeId::kList:
      *out += R"({"type":"array","items":)";
      RETURN_IF_ERROR(AppendNullable(t.ListChild(), name_path + "_item", out, depth + 1));
      *out += '}';
      return Status::OK();
    case TypeId::kMap: {
      LogicalType key = t.MapKey();
      if (key.id() != TypeId::kVarchar) {
        return InvalidArgumentError(
            "column {}: a MAP with {} keys has no Avro form (keys are strings)", name_path,
            TypeSql(key));
      }
      *out += R"({"type":"map","values":)";
      RETURN_IF_ERROR(AppendNullable(t.MapValue(), name_path + "_value", out, depth + 1));
      *out += '}';
      return Status::OK();
    }
    case TypeId::kStruct: {
      *out += R"({"type":"record","name":)";
      AppendJsonString(name_path, out);
      *out += R"(,"fields":[)";
      for (size_t i = 0; i < t.StructFieldCount(); ++i) {
        if (i > 0) *out += ',';
        std::string field = AvroName(t.StructFieldName(i));
        *out += "{\"name\":";
        AppendJsonString(field, out);
        *out += ",\"type\":";
        RETURN_IF_ERROR(
            AppendNullable(t.StructFieldType(i), name_path + "_" + field, out, depth + 1));
        *out += ",\"default\":null}";
      }
      *out += "]}";
      return Status::OK();
    }
    default:
      return InvalidArgumentError("column {}: DuckDB type {} has no Avro form", name_path,
                                  TypeSql(t));
  }
}

}  // namespace

Result<std::string> SchemaForColumns(std::span<const Column> columns,
                                     std::string_view record_name) {
  std::string full(record_name);
  size_t dot = full.rfind('.');
  std::string simple = AvroName(dot == std::string::npos ? full : full.substr(dot + 1));
  std::string out = R"({"type":"record","name":)";
  AppendJsonString(dot == std::string::npos ? simple : full.substr(0, dot + 1) + simple, &out);
  out += R"(,"fields":[)";
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i > 0) out += ',';
    std::string field = AvroName(columns[i].name);
    out += "{\"name\":";
    AppendJsonString(field, &out);
    out += ",\"type\":";
    RETURN_IF_ERROR(AppendNullable(columns[i].type, simple + "_" + field, &out, 1));
    out += ",\"default\":null}";
  }
  out += "]}";
  // The result must be a schema Parse accepts (a record name that is not valid, ...).
  RETURN_IF_ERROR(Parse(out).status());
  return out;
}

}  // namespace sluice::schema::avro
