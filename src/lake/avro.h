// Avro for Iceberg manifests: the binary encoding of a Datum against a Schema, and object
// container files (OCF: magic "Obj\x01", metadata, sync marker, blocks of objects), both
// written and read. The byte layout and the decisions are in src/lake/README.md.
//
//   FileWriter w(schema, {.codec = Codec::kDeflate, .metadata = {{"format-version", "2"}}});
//   RETURN_IF_ERROR(w.Append(entry));
//   std::string bytes = w.Finish();
//
//   ASSIGN_OR_RETURN(File f, ReadFile(bytes));  // errors say "at byte N: ..."
//   for (const Datum& entry : f.objects) { ... }
//
// The reader is strict and safe against any bytes: every length and count is checked
// against the bytes left, nesting is limited, a deflate block cannot grow past a limit.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "lake/avro_datum.h"
#include "lake/avro_schema.h"

namespace sluice::lake::avro {

// Deepest nesting of values (records, arrays, maps, unions) the encoder and decoder accept.
inline constexpr int kMaxDepth = 64;

// Appends the binary encoding of `datum` to `*out`. The datum is checked against the
// schema; an error names the path ("data_file.record_count: expected long, got string")
// and `*out` is left as it was.
Status Encode(const Node& schema, const Datum& datum, std::string* out);

struct DecodeOptions {
  // Values that take no bytes (nulls, empty records) each count against this, so that a
  // few bytes cannot declare billions of them.
  int64_t max_zero_size_values = 1 << 20;
};

// Decodes exactly one value of `schema` from all of `bytes`; trailing bytes are an error.
Result<Datum> Decode(const Node& schema, std::string_view bytes, const DecodeOptions& options = {});

enum class Codec : uint8_t { kNull, kDeflate };

struct WriterOptions {
  Codec codec = Codec::kNull;
  int deflate_level = 6;
  // A block is closed when its encoded objects reach this many bytes.
  size_t block_bytes = 64 << 10;
  // User metadata (Iceberg's "schema", "partition-spec", "format-version", ...), written
  // in this order after avro.schema and avro.codec. "avro." keys are reserved.
  std::vector<std::pair<std::string, std::string>> metadata;
  // The sync marker; random when not given (tests fix it).
  std::optional<std::array<uint8_t, 16>> sync;
};

// Builds an object container file in memory. Lifecycle: construct, Append() objects,
// Finish() once. `schema` must outlive the writer. Not thread-safe.
class FileWriter {
 public:
  FileWriter(const Schema& schema, WriterOptions options);

  // Encodes `datum` into the current block; a datum that does not match the schema is an
  // error and leaves the file as it was. An error from the constructor's options (a
  // reserved metadata key) is returned by every call.
  Status Append(const Datum& datum);
  // The whole file. The writer is spent after this.
  Result<std::string> Finish();

  int64_t object_count() const { return object_count_; }

 private:
  Status FlushBlock();

  const Schema& schema_;
  WriterOptions options_;
  Status status_;
  std::string out_;
  std::string block_;
  int64_t block_objects_ = 0;
  int64_t object_count_ = 0;
  std::array<uint8_t, 16> sync_{};
};

struct ReadOptions {
  // A block larger than this after decompression is an error (a deflate bomb).
  int64_t max_block_bytes = 64 << 20;
  DecodeOptions decode;
};

// A whole object container file, decoded.
struct File {
  Schema schema;               // from avro.schema
  Codec codec = Codec::kNull;  // from avro.codec
  // Every metadata entry, avro.* included, in file order.
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<Datum> objects;

  // The metadata value for `key`, or nullptr.
  const std::string* FindMetadata(std::string_view key) const;
};

// Parses and decodes a whole OCF. Any malformation is an error that names what was wrong
// and the byte offset in `bytes` (inside a deflate block: the block's offset and the
// offset in its decompressed data). The caller adds the file name.
Result<File> ReadFile(std::string_view bytes, const ReadOptions& options = {});

}  // namespace sluice::lake::avro
