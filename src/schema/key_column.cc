// KeyColumn (key_column.h): a DecoderPlans over the key schema's columns, bound to a STRUCT
// vector's fields (a record) or to the column itself (any other Avro schema).
#include "schema/key_column.h"

#include <fmt/format.h>

#include <vector>

namespace sluice::schema {

void SetNullCell(const duck::Vector& v, const duck::LogicalType& type, uint64_t row) {
  v.SetNull(row);
  switch (type.id()) {
    case duck::TypeId::kStruct:
    case duck::TypeId::kUnion:
      for (size_t i = 0; i < type.StructFieldCount(); ++i) {
        SetNullCell(v.StructField(i), type.StructFieldType(i), row);
      }
      break;
    case duck::TypeId::kList:
    case duck::TypeId::kMap:
      v.data<duck::ListEntry>()[row] = {0, 0};
      break;
    default:
      break;
  }
}

KeyColumn::KeyColumn(std::shared_ptr<SchemaSource> source, PayloadFormat format,
                     std::vector<Column> fields, std::shared_ptr<const avro::Parsed> avro,
                     bool record, duck::LogicalType type)
    : source_(source),
      plans_(std::move(source), format, std::move(fields), std::move(avro)),
      record_(record),
      type_(std::move(type)) {}

Result<std::unique_ptr<KeyColumn>> KeyColumn::FromReader(std::shared_ptr<SchemaSource> source,
                                                         PayloadFormat format, ReaderShape reader) {
  duck::LogicalType type = duck::LogicalType::Blob();
  if (reader.record) {
    if (reader.columns.empty()) {
      return InvalidArgumentError("the key schema is a record without fields");
    }
    std::vector<std::string> names;
    std::vector<duck::LogicalType> types;
    for (const Column& c : reader.columns) {
      names.push_back(c.name);
      types.push_back(c.type.Copy());
    }
    type = duck::LogicalType::Struct(names, types);
  } else {
    type = reader.columns.at(0).type.Copy();
    reader.columns.at(0).name = "kafka_key";  // errors name the key, not `value`
  }
  return std::unique_ptr<KeyColumn>(new KeyColumn(std::move(source), format,
                                                  std::move(reader.columns), std::move(reader.avro),
                                                  reader.record, std::move(type)));
}

Result<std::unique_ptr<KeyColumn>> KeyColumn::FromType(std::shared_ptr<SchemaSource> source,
                                                       PayloadFormat format,
                                                       const duck::LogicalType& type) {
  std::vector<Column> fields;
  const bool record = type.id() == duck::TypeId::kStruct;
  if (record) {
    for (size_t i = 0; i < type.StructFieldCount(); ++i) {
      fields.push_back({type.StructFieldName(i), type.StructFieldType(i)});
    }
  } else if (format == PayloadFormat::kProtobuf) {
    return InvalidArgumentError(
        "a Protobuf key is a message: its column must be a STRUCT of the message's fields, "
        "not {}",
        type.ToSql());
  } else {
    fields.push_back({"kafka_key", type.Copy()});
  }
  return std::unique_ptr<KeyColumn>(
      new KeyColumn(std::move(source), format, std::move(fields), nullptr, record, type.Copy()));
}

Result<RowDecoder*> KeyColumn::For(std::string_view key, std::string_view* payload,
                                   std::string* reason) {
  ASSIGN_OR_RETURN(RowDecoder * dec, plans_.For(key, payload, reason));
  if (dec == nullptr) {
    *reason = "key: " + *reason;
    return dec;
  }
  // A record key goes into a STRUCT, any other into a column of its type: the decoders
  // would otherwise fill a one-column target by position.
  int32_t id = 0;
  std::string_view rest;
  ReadFraming(key, &id, &rest, reason);
  if (id == last_fitting_id_) return dec;  // most keys name the schema the last one did
  auto it = records_.find(id);
  if (it == records_.end()) {
    ASSIGN_OR_RETURN(std::shared_ptr<const SchemaRecord> rec, source_->ById(id));
    ASSIGN_OR_RETURN(ReaderShape shape, ReaderOf(*rec, {}));
    it = records_.emplace(id, shape.record).first;
  }
  if (it->second != record_) {
    *reason = it->second ? fmt::format(
                               "key: schema id {} is a record; the key column is {} (a "
                               "record key needs a STRUCT)",
                               id, type_.ToSql())
                         : fmt::format(
                               "key: schema id {} is not a record; the key column is {} "
                               "(a STRUCT takes a record key)",
                               id, type_.ToSql());
    return nullptr;
  }
  last_fitting_id_ = id;
  return dec;
}

void KeyColumn::Bind(RowDecoder* dec, const duck::Vector& column) const {
  if (!record_) {
    dec->BindVectors({&column, 1});
    return;
  }
  std::vector<duck::Vector> fields;
  fields.reserve(plans_.columns().size());
  for (size_t i = 0; i < plans_.columns().size(); ++i) fields.push_back(column.StructField(i));
  dec->BindVectors(fields);
}

bool KeyColumn::Decode(RowDecoder* dec, std::string_view payload, const duck::Vector& column,
                       uint64_t row, std::string* reason) const {
  if (dec->Decode(payload, row, reason)) {
    // A chunk's rows are reused: a struct NULL before is valid now (the decoder sets the
    // validity of what it writes, a nullable union's NULL included).
    if (record_) duck::Vector::SetValid(column.validity(), row);
    return true;
  }
  *reason = "key: " + *reason;
  SetNullCell(column, type_, row);
  return false;
}

}  // namespace sluice::schema
