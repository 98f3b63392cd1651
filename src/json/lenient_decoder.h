// The JSON decoder's lenient side, for queries over messages (topic()): columns inferred
// from a sample of message values, and a decoder that fills output vectors row by row
// where nothing is ever an error. Same parser, key matching, value conversions and
// inference as the pipeline's decoders (json_decoder.h), with these differences:
//
// - A value that is not JSON, not an object, or holds a number simdjson cannot read (an
//   integer past 64 bits, a double past its range) gives NULL in every column; a field
//   that does not fit its column gives NULL in that column. Nothing else is reported.
// - Only JSON kinds convert: strings are not read as numbers or booleans; an integer
//   column takes a number without a fraction (5.0 is 5, 5.5 is NULL). VARCHAR takes a
//   string as its text and anything else as its JSON text; JSON columns take the JSON
//   text. JSON text of objects and arrays is minified (whitespace outside strings removed).
//
//   std::vector<Column> columns = InferColumns(samples, {.reserved = kOwnColumns});
//   ASSIGN_OR_RETURN(auto decoder, LenientDecoder::Create(columns));
//   decoder->Bind(vectors);                 // per output chunk, one vector per column
//   decoder->Decode(row, message_value);    // per row
//   RETURN_IF_ERROR(decoder->Finish());     // before the chunk is handed on
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/data_chunk.h"
#include "duck/logical_type.h"

namespace sluice::json {

struct Column {
  std::string name;
  duck::LogicalType type;
};

// How inferred values become types. Both read the same keys the same way (first-seen
// order, one column per key ignoring case, empty and reserved keys left out) and agree on
// BOOLEAN, VARCHAR and DOUBLE; they differ where a value is an integer, nested or null:
enum class InferredTypes : uint8_t {
  // The pipeline's (InferredDecoder): numbers DOUBLE; objects STRUCT, arrays LIST of their
  // merged element (empty objects, all-null values and conflicting kinds VARCHAR).
  kNested,
  // topic()'s: numbers BIGINT when every one is an integer within BIGINT, else DOUBLE;
  // objects, arrays and only-null values JSON; conflicting kinds VARCHAR, or JSON when one
  // of them is an object or array.
  kFlat,
};

struct InferColumnsOptions {
  // Keys left out, compared ignoring ASCII case (the caller's own columns).
  std::span<const std::string_view> reserved;
  // Distinct keys kept; later new keys are left out.
  size_t max_columns = 1000;
  InferredTypes types = InferredTypes::kFlat;
};

// The columns a sample of message values suggests (data() == nullptr: no value; values
// that are not readable JSON objects are skipped, as wholly as the lenient decoder reads
// them as NULL).
std::vector<Column> InferColumns(std::span<const std::string> samples,
                                 const InferColumnsOptions& options);

// Fills columns from message values, one output chunk at a time. Lifecycle: Create once
// per scan with the columns the query reads; then per chunk Bind, Decode each row, Finish.
// Owned by the thread running the scan (DuckDB's, one at a time).
class LenientDecoder {
 public:
  // Columns of the types json_decoder.h decodes directly (no DECIMAL, MAP, UUID...).
  static Result<std::unique_ptr<LenientDecoder>> Create(std::span<const Column> columns);
  ~LenientDecoder();
  LenientDecoder(const LenientDecoder&) = delete;
  LenientDecoder& operator=(const LenientDecoder&) = delete;

  // The vectors of the next rows, one per column (in Create's order).
  void Bind(std::span<const duck::Vector> vectors);
  // Writes row `row` of every column from `value` (data() == nullptr: the message has no
  // value), NULL where it does not fit.
  void Decode(uint64_t row, std::string_view value);
  // Sets what DuckDB reads of list columns; call before the chunk is handed on.
  Status Finish();

 private:
  struct Impl;
  explicit LenientDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::json
