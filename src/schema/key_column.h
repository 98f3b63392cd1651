// KeyColumn: framed Kafka keys (the Confluent framing, as values have it) decoded into one
// DuckDB column, for the pipeline's kafka_key and topic()'s key (docs/design/0022-schemas.md,
// "Keys"). The column's type is the key schema's: a record's (a Protobuf message's) fields as
// a STRUCT, any other Avro schema ("string", "long", an enum...) as its own type.
//
//   ASSIGN_OR_RETURN(auto key, KeyColumn::FromReader(source, PayloadFormat::kAvro, reader));
//   RowDecoder* dec = key->For(m.key, &payload, &reason);   // null: why in reason
//   if (dec != bound) { /* a new chunk */ key->Bind(dec, chunk.column(k)); }
//   if (!key->Decode(dec, payload, chunk.column(k), row, &reason)) { /* row left NULL */ }
//   dec->Finish(rows);
//
// Each writer schema has its own decoder, which keeps its own list sizes: rows whose keys
// name another decoder go into another chunk, as for values. Owned by one thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "duck/data_chunk.h"
#include "duck/logical_type.h"
#include "schema/decoder_plans.h"

namespace sluice::schema {

class KeyColumn {
 public:
  // Keys read with `reader` (ReaderOf the key subject's schema) as the reader schema.
  // InvalidArgument for a record without fields (DuckDB has no empty STRUCT).
  static Result<std::unique_ptr<KeyColumn>> FromReader(std::shared_ptr<SchemaSource> source,
                                                       PayloadFormat format, ReaderShape reader);
  // Keys read into a declared column of `type` (StructuredBatch's kafka_key): a STRUCT's
  // fields take the record's fields of their names; another type takes a key schema that is
  // not a record.
  static Result<std::unique_ptr<KeyColumn>> FromType(std::shared_ptr<SchemaSource> source,
                                                     PayloadFormat format,
                                                     const duck::LogicalType& type);

  const duck::LogicalType& type() const { return type_; }

  // The decoder for the framed `key`, with `*payload` the bytes it decodes; null with
  // `*reason` when the key cannot be decoded. A Status only when the registry could not be
  // asked. A key that is absent (a null key) is not given here: its cell is NULL.
  Result<RowDecoder*> For(std::string_view key, std::string_view* payload, std::string* reason);
  // Points `dec` at `column`: after the chunk is created or Reset, before its first row.
  void Bind(RowDecoder* dec, const duck::Vector& column) const;
  // Decodes into `row`; false with `*reason` and the cell NULL.
  bool Decode(RowDecoder* dec, std::string_view payload, const duck::Vector& column, uint64_t row,
              std::string* reason) const;

 private:
  KeyColumn(std::shared_ptr<SchemaSource> source, PayloadFormat format, std::vector<Column> fields,
            std::shared_ptr<const avro::Parsed> avro, bool record, duck::LogicalType type);
  std::shared_ptr<SchemaSource> source_;
  DecoderPlans plans_;
  std::map<int32_t, bool> records_;  // schema id -> whether it is a record
  int32_t last_fitting_id_ = -1;     // the last id whose kind fit the column
  bool record_;
  duck::LogicalType type_;
};

// NULL for `v` at `row`, and for its STRUCT (UNION) fields, which DuckDB reads even under a
// NULL struct; a LIST or MAP cell gets an empty entry.
void SetNullCell(const duck::Vector& v, const duck::LogicalType& type, uint64_t row);

}  // namespace sluice::schema
