// The seam between the schema formats (Avro: schema/avro, Protobuf: schema/protobuf) and
// the code that moves messages in and out of DuckDB (the pipeline's FramedDecoder, topic(),
// the kafka sink). A format compiles, once per schema id, a RowDecoder that writes a
// message's payload (the bytes after the Confluent framing) straight into DuckDB vectors,
// and a RowEncoder that writes a DuckDB row as a payload. No generic message object sits
// in between. docs/design/0022-schemas.md has the type mapping.
//
//   ASSIGN_OR_RETURN(auto dec, avro::MakeRowDecoder(writer, &reader, columns));
//   dec->Bind(chunk, 0);
//   for (...) if (!dec->Decode(payload, row, &reason)) { /* row left NULL */ } else ++row;
//   RETURN_IF_ERROR(dec->Finish(rows));   // list sizes for DuckDB, then Appender::Append
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/data_chunk.h"
#include "duck/logical_type.h"

namespace sluice::schema {

// One DuckDB column a decoder writes or an encoder reads: a top-level field of a record
// (Avro) or message (Protobuf).
struct Column {
  std::string name;
  duck::LogicalType type;
};

// Decodes payloads of one writer schema into a fixed list of columns, in order, at
// columns [first, first + columns.size()) of a chunk. Owned by one thread.
class RowDecoder {
 public:
  virtual ~RowDecoder() = default;
  // Points at `chunk`'s vectors: after the chunk is created or Reset, before its row 0.
  void Bind(const duck::DataChunk& chunk, size_t first_column) {
    std::vector<duck::Vector> columns;
    columns.reserve(column_count());
    for (size_t i = 0; i < column_count(); ++i) columns.push_back(chunk.column(first_column + i));
    BindVectors(columns);
  }
  // Points at one vector per column, as Bind (e.g. a STRUCT vector's fields: a framed key
  // decoded into one column).
  virtual void BindVectors(std::span<const duck::Vector> columns) = 0;
  virtual size_t column_count() const = 0;
  // Decodes `payload` into `row` (rows are used in order, each once per Bind). On
  // failure returns false with `*reason` saying where and what ("field 'price': truncated
  // varint at byte 12"); the row's cells are then left NULL and any list children it added
  // are given back, so the caller may reuse the row for the next message.
  virtual bool Decode(std::string_view payload, uint64_t row, std::string* reason) = 0;
  // Before the chunk is read (Appender::Append or a scan): sets the sizes of list
  // children DuckDB reads. `rows` is how many rows were kept.
  virtual Status Finish(uint64_t rows) = 0;
};

// Encodes row `row` of a chunk's columns [first, first + columns.size()) as a payload
// (without the framing), appended to `*out`. Owned by one thread.
class RowEncoder {
 public:
  virtual ~RowEncoder() = default;
  virtual Status Encode(const duck::DataChunk& chunk, size_t first_column, uint64_t row,
                        std::string* out) = 0;
};

}  // namespace sluice::schema
