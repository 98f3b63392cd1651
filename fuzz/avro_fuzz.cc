// Fuzz target for the Avro reader (src/lake): the first byte picks the mode, the rest is
// the input. Even: the bytes are an object container file (header, metadata, schema,
// blocks, null or deflate). Odd: the bytes are one datum of a fixed Iceberg-like
// manifest-entry schema. Whatever the bytes, reading must not crash, and what reads back
// must encode again to something that reads back the same.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lake/avro.h"

using namespace sluice::lake::avro;

namespace {

constexpr std::string_view kManifestSchema = R"({
  "type": "record", "name": "manifest_entry", "fields": [
    {"name": "status", "type": "int", "field-id": 0},
    {"name": "snapshot_id", "type": ["null", "long"], "default": null, "field-id": 1},
    {"name": "data_file", "field-id": 2, "type": {"type": "record", "name": "r2", "fields": [
      {"name": "content", "type": {"type": "enum", "name": "c", "symbols": ["DATA", "POS", "EQ"]}},
      {"name": "file_path", "type": "string", "field-id": 100},
      {"name": "partition", "type": {"type": "record", "name": "r102", "fields": []}, "field-id": 102},
      {"name": "record_count", "type": "long", "field-id": 103},
      {"name": "column_sizes", "default": null, "field-id": 108, "type": ["null", {"type": "array",
        "logicalType": "map", "items": {"type": "record", "name": "k117_v118", "fields": [
          {"name": "key", "type": "int", "field-id": 117}, {"name": "value", "type": "long", "field-id": 118}]}}]},
      {"name": "lower_bounds", "type": {"type": "map", "values": "bytes"}},
      {"name": "key_metadata", "type": ["null", {"type": "fixed", "name": "f16", "size": 16}], "default": null},
      {"name": "ok", "type": "boolean"}, {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
      {"name": "nulls", "type": {"type": "array", "items": "null"}},
      {"name": "split_offsets", "type": ["null", {"type": "array", "items": "long", "element-id": 133}]}]}}]})";

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const Schema schema = [] {
    auto s = Schema::Parse(kManifestSchema);
    Check(s.ok());
    return std::move(s).value();
  }();
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  ReadOptions options{.max_block_bytes = 1 << 20, .decode = {.max_zero_size_values = 1 << 16}};
  if (data[0] % 2 == 0) {
    auto file = ReadFile(bytes, options);
    if (!file.ok()) return 0;
    // A file that reads writes again, and reads back the same.
    FileWriter w(file->schema, {.codec = file->codec});
    for (const Datum& d : file->objects) Check(w.Append(d).ok());
    auto again = w.Finish();
    Check(again.ok());
    auto back = ReadFile(*again, options);
    Check(back.ok() && back->objects == file->objects);
  } else {
    auto datum = Decode(schema.root(), bytes, options.decode);
    if (!datum.ok()) return 0;
    // Not the same bytes (overlong varints and sized blocks decode too), the same value.
    std::string out;
    Check(Encode(schema.root(), *datum, &out).ok());
    auto back = Decode(schema.root(), out, options.decode);
    Check(back.ok() && *back == *datum);
  }
  return 0;
}
