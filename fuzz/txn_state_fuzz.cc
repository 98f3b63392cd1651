// Fuzz target for the __transaction_state record decoders (what the transaction
// coordinator replays from disk at every start): keys and values. Whatever the bytes,
// decoding must return a value or an error; a decoded value re-encoded must decode to
// the same value.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "broker/txn_log.h"

using namespace sluice::broker;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  if (auto key = txn_format::DecodeKey(bytes); key.ok()) {
    auto second = txn_format::DecodeKey(txn_format::EncodeKey(*key));
    if (!second.ok() || *second != *key) std::abort();
  }
  if (auto value = txn_format::DecodeValue(bytes); value.ok()) {
    auto second = txn_format::DecodeValue(txn_format::EncodeValue(*value));
    if (!second.ok() || !(*second == *value)) std::abort();
  }
  return 0;
}
