// Avro values written by hand, for tests that need exact bytes (edge cases an encoder would
// not write) in a Schema Registry's framing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "schema/decoder_plans.h"

namespace sluice::schema::testing {

// An Avro long (zig-zag varint).
inline std::string Zigzag(int64_t n) {
  uint64_t u = (static_cast<uint64_t>(n) << 1) ^ static_cast<uint64_t>(n >> 63);
  std::string out;
  while (u >= 0x80) {
    out.push_back(static_cast<char>((u & 0x7f) | 0x80));
    u >>= 7;
  }
  out.push_back(static_cast<char>(u));
  return out;
}

// An Avro string or bytes: its length, then it.
inline std::string Str(std::string_view s) {
  return Zigzag(static_cast<int64_t>(s.size())) + std::string(s);
}

// `body` behind the framing of schema `id`.
inline std::string Framed(int32_t id, std::string_view body) {
  std::string out;
  WriteFraming(id, &out);
  return out.append(body);
}

}  // namespace sluice::schema::testing
