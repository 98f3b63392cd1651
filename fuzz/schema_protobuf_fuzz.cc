// Fuzz target for schema/protobuf: the first byte picks what the rest is.
//   0: .proto text (or base64 descriptor) -> Parse, Canonical and Normalized (which must
//      parse again to the same text), Incompatibilities against itself (must be empty),
//      and ColumnsOf + MakeRowDecoder for each top-level message.
//   1: a raw FileDescriptorProto (base64-encoded here), as 0.
//   2: a framed payload (message indexes, then message bytes) decoded against a schema
//      with every type: must not crash, every message a row or a reason.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "duck/data_chunk.h"
#include "schema/protobuf/protobuf_format.h"

using namespace sluice;
using namespace sluice::schema;

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

constexpr const char* kAll = R"(syntax = "proto3";
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
message All {
  double d = 1; float f = 2; int32 i32 = 3; int64 i64 = 4; uint32 u32 = 5; uint64 u64 = 6;
  sint32 s32 = 7; sint64 s64 = 8; fixed32 fx32 = 9; fixed64 fx64 = 10; sfixed32 sf32 = 11;
  sfixed64 sf64 = 12; bool b = 13; string s = 14; bytes by = 15; Color color = 16;
  Inner inner = 17; repeated int64 nums = 18; map<string, int32> counts = 19;
  google.protobuf.Timestamp ts = 20; google.protobuf.Duration dur = 21;
  google.protobuf.Int32Value wi = 22; google.protobuf.Struct st = 23;
  oneof choice { string name = 24; int32 code = 25; }
  repeated Inner inners = 26; map<int64, Inner> by_id = 27; All next = 28;
  google.protobuf.Value v = 29;
}
message Inner { string label = 1; repeated string tags = 2; repeated double xs = 3; }
enum Color { RED = 0; GREEN = 1; }
)";

std::string Base64(std::string_view in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += k[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += k[(acc << (6 - bits)) & 63];
  while (out.size() % 4) out += '=';
  return out;
}

void DecodeWith(const protobuf::Parsed& p, std::span<const int> idx,
                const std::vector<std::string_view>& payloads) {
  auto cols = protobuf::ColumnsOf(p, idx);
  if (!cols.ok()) return;
  auto dec = protobuf::MakeRowDecoder(p, idx, *cols);
  Check(dec.ok());
  std::vector<duck::LogicalType> types;
  // Built again: LogicalType::Copy does not copy MAP types.
  auto again = protobuf::ColumnsOf(p, idx);
  for (Column& c : *again) types.push_back(std::move(c.type));
  auto chunk = duck::DataChunk::Create(types);
  Check(chunk.ok());
  (*dec)->Bind(*chunk, 0);
  uint64_t row = 0;
  std::string reason;
  for (std::string_view payload : payloads) {
    if ((*dec)->Decode(payload, row, &reason)) ++row;
  }
  Check((*dec)->Finish(row).ok());
  chunk->SetSize(row);
}

void SchemaText(std::string_view text) {
  auto p = protobuf::Parse(text, {});
  if (!p.ok()) {
    Check(p.status().code() == StatusCode::kInvalidArgument);
    return;
  }
  std::string c = protobuf::Canonical(*p);
  auto again = protobuf::Parse(c, {});
  Check(again.ok());
  Check(protobuf::Canonical(*again) == c);
  std::string n = protobuf::Normalized(*p);
  auto nagain = protobuf::Parse(n, {});
  Check(nagain.ok());
  Check(protobuf::Normalized(*nagain) == n);
  Check(protobuf::Incompatibilities(*p, *again).empty());
  for (size_t i = 0; i < p->file->messages.size() && i < 4; ++i) {
    std::vector<int> idx = {static_cast<int>(i)};
    DecodeWith(*p, idx, {std::string_view(), text});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      SchemaText(rest);
      break;
    case 1:
      SchemaText(Base64(rest));
      break;
    default: {
      static const protobuf::Parsed* all = [] {
        auto p = protobuf::Parse(kAll, {});
        Check(p.ok());
        return new protobuf::Parsed(std::move(p).value());
      }();
      std::vector<int> idx;
      size_t used = 0;
      std::string reason;
      std::vector<std::string_view> payloads = {rest};
      if (protobuf::ReadMessageIndexes(rest, &idx, &used, &reason)) {
        std::vector<int> out_idx;
        std::string written;
        protobuf::WriteMessageIndexes(idx, &written);
        payloads.push_back(rest.substr(used));
        if (protobuf::FindMessage(*all, idx).ok()) {
          DecodeWith(*all, idx, payloads);
          return 0;
        }
      }
      DecodeWith(*all, std::vector<int>{0}, payloads);
    }
  }
  return 0;
}
