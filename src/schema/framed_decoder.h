// FramedDecoder: Kafka messages in the Confluent framing (magic byte 0, the schema id as
// 4 bytes big-endian, for Protobuf the message indexes, then the payload) decoded by
// their schema id straight into DuckDB vectors, as the JSON decoders do for JSON
// (docs/design/0022-schemas.md). It serves the pipeline's handlers:
//
//   StructuredBatch: into the declared table's columns, the batch shown through a view
//   named like the table; a writer field maps to the column of its name.
//   InferredMemBatch / InferredDiskBatch: the columns of the subject's latest schema when
//   the first message comes (`<topic>-value`; the first message's own schema when the
//   subject has none), plus the kafka_ columns, as a view (or a table) `batch`. A message
//   written with another version is resolved by Avro's rules (a field the writer lacks
//   takes the reader's default); Protobuf fields map by name.
//
// Framed keys (FramedOptions::key_format) are decoded into kafka_key the same way
// (schema/key_column.h).
//
// Format json_schema: the payload is JSON, decoded by the JSON decoders after the framing
// (its schema id must exist).
//
// A message that is not framed, names an unknown schema id, has a schema that does not
// fit the columns, or a payload that does not decode, becomes a DecodeError with the
// reason; the rest of the batch goes in. Lifecycle and threads as json::StructuredDecoder.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/database.h"
#include "json/json_decoder.h"
#include "kafka/client/consumer.h"
#include "schema/decoder_plans.h"
#include "schema/schema_source.h"

namespace sluice::schema {

struct FramedOptions {
  PayloadFormat format = PayloadFormat::kAvro;
  // StructuredBatch: the declared table; "" for the inferred handlers.
  std::string table;
  // Inferred: the subject whose latest version is the reader schema.
  std::string subject;
  // Inferred: the view's (or table's) name.
  std::string inferred_table = "batch";
  // Show the batch through a view over the decoded chunks (else a table, recreated for
  // each batch: InferredDiskBatch).
  bool in_memory = true;
  // Keys: kAvro or kProtobuf decodes framed keys into kafka_key (the inferred handlers'
  // column, typed by `key_subject`'s latest schema, else by the first key's own schema; or
  // the declared table's column of that name); kJson leaves them bytes. A key that does not
  // decode makes its message a DecodeError; a null key is NULL.
  PayloadFormat key_format = PayloadFormat::kJson;
  std::string key_subject;
};

class FramedDecoder {
 public:
  static Result<std::unique_ptr<FramedDecoder>> Create(duck::Connection& conn,
                                                       std::shared_ptr<SchemaSource> source,
                                                       FramedOptions options);
  ~FramedDecoder();
  FramedDecoder(const FramedDecoder&) = delete;
  FramedDecoder& operator=(const FramedDecoder&) = delete;

  // As json::StructuredDecoder::Decode. A non-OK Status is for DuckDB failing, or the
  // registry being unreachable (the batch is then not decoded at all: a decode error of
  // the whole batch, under on_error).
  Result<size_t> Decode(std::span<const kafka::client::Message> messages,
                        std::vector<json::DecodeError>* errors);

  // Inferred: the batch's column list as in CREATE TABLE ("" before the first message).
  const std::string& schema_sql() const;

 private:
  struct Impl;
  explicit FramedDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::schema
