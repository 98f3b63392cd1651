// FramedEncoder: the rows of a DuckDB table or view as Kafka message values in the
// Confluent framing, Avro or Protobuf (the kafka sink's format, docs/design/0022-schemas.md).
// The schema is derived from the rows' columns (avro/protobuf SchemaForColumns) and
// registered under the subject the first time (and again whenever the columns change);
// each row is then the magic byte, the schema id, for Protobuf the message index [0], and
// the payload written straight from the DuckDB vectors.
//
// Owned by one thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "duck/database.h"
#include "schema/framed_decoder.h"
#include "schema/schema_source.h"

namespace sluice::schema {

class FramedEncoder {
 public:
  // `format`: kAvro or kProtobuf. `subject`: where the schema is registered
  // (`<topic>-value`).
  static Result<std::unique_ptr<FramedEncoder>> Create(std::shared_ptr<SchemaSource> source,
                                                       PayloadFormat format, std::string subject);
  ~FramedEncoder();

  // Calls `emit` with each row of `table`, in order; stops at the first error `emit`
  // returns. The view passed to `emit` lives until it returns.
  Status Encode(duck::Connection& conn, std::string_view table,
                const std::function<Status(std::string_view value)>& emit);

  // The id of the schema the last rows were written with (0 before any).
  int32_t schema_id() const;

 private:
  struct Impl;
  explicit FramedEncoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::schema
