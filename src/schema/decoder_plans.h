// DecoderPlans: the RowDecoders of one set of target columns, one per writer schema id
// (and, for Protobuf, message indexes), compiled the first time a value names it. Shared by
// the pipeline's FramedDecoder and the query server's topic(). And ReaderOf: the target
// columns a registered schema gives (the inferred handlers, topic()).
//
// Owned by one thread.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "schema/row_codec.h"
#include "schema/schema_source.h"

namespace sluice::schema {

namespace avro {
class Parsed;
}

enum class PayloadFormat : uint8_t { kJson, kAvro, kProtobuf, kJsonSchema };
// "json", "avro", "protobuf", "json_schema".
std::string_view PayloadFormatName(PayloadFormat f);

// Reads the framing: the schema id and the rest; false with `reason` when `value` is not
// framed.
bool ReadFraming(std::string_view value, int32_t* id, std::string_view* rest, std::string* reason);
// Appends the framing of schema `id`.
void WriteFraming(int32_t id, std::string* out);

// The columns of a registered schema, and for Avro the parsed schema (a reader's defaults).
struct ReaderShape {
  std::vector<Column> columns;
  // False for an Avro schema that is not a record: one column `value` of its type.
  bool record = true;
  std::shared_ptr<const avro::Parsed> avro;
};
// Protobuf: the message at `indexes` (empty: the first).
Result<ReaderShape> ReaderOf(const SchemaRecord& record, std::span<const int> indexes);

class DecoderPlans {
 public:
  // `format`: kAvro or kProtobuf. `avro_reader`: the reader schema, for defaults (may be
  // null).
  DecoderPlans(std::shared_ptr<SchemaSource> source, PayloadFormat format,
               std::vector<Column> columns, std::shared_ptr<const avro::Parsed> avro_reader);
  ~DecoderPlans();

  // The decoder for the framed `value`, with `*payload` set to the bytes it decodes; null
  // with `*reason` when the value cannot be decoded (not framed, an unknown id, a schema of
  // another type or that does not fit the columns). A Status only when the registry could
  // not be asked.
  Result<RowDecoder*> For(std::string_view value, std::string_view* payload, std::string* reason);

  const std::vector<Column>& columns() const { return columns_; }

 private:
  struct Plan;
  Result<bool> Names(int32_t id, std::span<const int> indexes);
  std::shared_ptr<SchemaSource> source_;
  PayloadFormat format_;
  std::vector<Column> columns_;
  std::shared_ptr<const avro::Parsed> avro_reader_;
  std::map<std::string, std::unique_ptr<Plan>> plans_;
  std::vector<int> indexes_;  // reused
  int32_t last_id_ = -1;      // the id the last decodable value named, and its decoder
  RowDecoder* last_ = nullptr;
};

}  // namespace sluice::schema
