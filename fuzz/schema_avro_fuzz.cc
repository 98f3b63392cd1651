// Fuzz target for schema/avro: the first byte picks the mode. Mode 0: the rest is schema
// text (parsed, written canonical and normalized, mapped to columns, checked for
// compatibility against itself and a fixed schema, and a decoder and an encoder made for
// it). Modes 1..: the rest is a payload decoded against one of a few fixed schemas (byte %
// kSchemas), several payloads per chunk so that list children and failed rows mix. Whatever
// the bytes, nothing may crash, and a decoded row must leave DuckDB's chunk consistent.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include "schema/avro/avro_format.h"
#include "schema/avro/avro_types.h"

using namespace sluice;
using namespace sluice::schema::avro;
using sluice::schema::Column;
using sluice::schema::RowDecoder;

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

constexpr const char* kSchemas[] = {
    // flat, with logical types
    R"({"type":"record","name":"R","fields":[{"name":"s","type":"string"},{"name":"l","type":"long"},
      {"name":"d","type":"double"},{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
      {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
      {"name":"u","type":{"type":"string","logicalType":"uuid"}},{"name":"b","type":"boolean"}]})",
    // nested: arrays, maps, unions, records, enums, fixed
    R"({"type":"record","name":"N","fields":[
      {"name":"a","type":{"type":"array","items":{"type":"map","values":["null","int","string"]}}},
      {"name":"r","type":["null",{"type":"record","name":"In","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
         {"name":"f","type":{"type":"fixed","name":"F","size":3}},{"name":"xs","type":{"type":"array","items":"In2"}}]}]},
      {"name":"g","type":{"type":"array","items":{"type":"array","items":"float"}}},
      {"name":"z","type":{"type":"array","items":"null"}},
      {"name":"dur","type":{"type":"fixed","name":"D","size":12,"logicalType":"duration"}}]})",
    // recursive: walked, not stored
    R"({"type":"record","name":"L","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","L"]}]})",
};
constexpr const char* kIn2 =
    R"({"type":"record","name":"In2","fields":[{"name":"q","type":"long"}]})";
constexpr size_t kCount = sizeof(kSchemas) / sizeof(kSchemas[0]);

struct Target {
  std::unique_ptr<Parsed> schema;
  std::unique_ptr<RowDecoder> decoder;
  std::unique_ptr<duck::DataChunk> chunk;
  uint64_t row = 0;
};

struct State {
  std::vector<Target> targets;
};

State Make() {
  State st;
  for (size_t i = 0; i < kCount; ++i) {
    Target t;
    std::vector<Reference> refs;
    if (i == 1) refs.push_back({"in2", kIn2});
    auto p = Parse(kSchemas[i], refs);
    Check(p.ok());
    t.schema = std::make_unique<Parsed>(std::move(*p));
    std::vector<Column> columns;
    if (i == 2) {
      columns.push_back({"v", duck::LogicalType::Integer()});
    } else {
      auto cols = ColumnsOf(*t.schema);
      Check(cols.ok());
      columns = std::move(*cols);
    }
    std::vector<duck::LogicalType> types;
    for (const Column& c : columns) types.push_back(CopyType(c.type));
    auto chunk = duck::DataChunk::Create(types);
    Check(chunk.ok());
    t.chunk = std::make_unique<duck::DataChunk>(std::move(*chunk));
    auto dec = MakeRowDecoder(*t.schema, nullptr, columns);
    Check(dec.ok());
    t.decoder = std::move(*dec);
    t.decoder->Bind(*t.chunk, 0);
    st.targets.push_back(std::move(t));
  }
  return st;
}

void FuzzSchema(std::string_view text) {
  auto p = Parse(text);
  if (!p.ok()) return;
  std::string canonical = Canonical(*p);
  auto again = Parse(canonical);
  Check(again.ok());
  Check(Canonical(*again) == canonical);
  Check(Normalized(*again) == Normalized(*p));
  (void)Incompatibilities(*p, *p);
  auto fixed = Parse(kSchemas[0]);
  Check(fixed.ok());
  (void)Incompatibilities(*p, *fixed);
  (void)Incompatibilities(*fixed, *p);
  auto cols = ColumnsOf(*p);
  if (!cols.ok()) return;
  auto dec = MakeRowDecoder(*p, p.ok() ? &*p : nullptr, *cols);
  Check(dec.ok());
  auto schema = SchemaForColumns(*cols, "Row");
  if (schema.ok()) {
    auto parsed = Parse(*schema);
    Check(parsed.ok());
    (void)MakeRowEncoder(*parsed, *cols);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static State st = Make();
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] == 0) {
    FuzzSchema(rest);
    return 0;
  }
  Target& t = st.targets[data[0] % kCount];
  std::string reason;
  if (t.decoder->Decode(rest, t.row, &reason)) ++t.row;
  if (t.row == duck::DataChunk::Capacity() || (data[0] & 0x80) != 0) {
    Check(t.decoder->Finish(t.row).ok());
    t.chunk->SetSize(t.row);
    t.chunk->Reset();
    t.decoder->Bind(*t.chunk, 0);
    t.row = 0;
  }
  return 0;
}
