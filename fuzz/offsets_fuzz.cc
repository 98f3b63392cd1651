// Fuzz target for the __consumer_offsets record decoders (what the group coordinator
// replays from disk at every start): keys, offset values, group values and the control
// record keys of transaction markers. Whatever the bytes, decoding must return a value or
// an error; a decoded value re-encoded must decode to the same value.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "broker/offset_log.h"

using namespace sluice::broker;
using namespace sluice::broker::offsets_format;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  if (auto key = DecodeKey(bytes); key.ok()) {
    auto again = key->kind == Key::Kind::kOffset ? EncodeOffsetKey(key->group, key->tp)
                                                 : EncodeGroupKey(key->group);
    auto second = DecodeKey(again);
    if (!second.ok() || second->group != key->group) std::abort();
  }
  if (auto value = DecodeOffsetValue(bytes); value.ok()) {
    auto second = DecodeOffsetValue(EncodeOffsetValue(*value));
    if (!second.ok() || second->offset != value->offset) std::abort();
  }
  (void)DecodeGroupValue(bytes);
  if (auto commit = DecodeMarkerKey(bytes); commit.ok()) {
    auto second = DecodeMarkerKey(EncodeMarkerKey(*commit));
    if (!second.ok() || *second != *commit) std::abort();
  }
  if (auto epoch = DecodeMarkerValue(bytes); epoch.ok()) {
    auto second = DecodeMarkerValue(EncodeMarkerValue(*epoch));
    if (!second.ok() || *second != *epoch) std::abort();
  }
  return 0;
}
