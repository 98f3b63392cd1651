// Golden bytes for codec tests, built field by field from Kafka's JSON message
// definitions. Deliberately independent of wire.h's Writer, so a test compares the codec
// against a second, simple transcription of the definitions.
//
//   auto bytes = Golden().i16(3).str("topic").carr(1).i32(0).tags().take();
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::kafka::testing {

class Golden {
 public:
  Golden& i8(int v) { return put(static_cast<uint64_t>(v), 1); }
  Golden& i16(int v) { return put(static_cast<uint64_t>(v), 2); }
  Golden& i32(int64_t v) { return put(static_cast<uint64_t>(v), 4); }
  Golden& i64(int64_t v) { return put(static_cast<uint64_t>(v), 8); }
  Golden& boolean(bool v) { return i8(v ? 1 : 0); }
  Golden& uvarint(uint64_t v) {
    while (v >= 0x80) {
      b_.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    b_.push_back(static_cast<uint8_t>(v));
    return *this;
  }
  Golden& varint(int64_t v) {
    return uvarint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  Golden& uuid(uint64_t hi, uint64_t lo) {
    return i64(static_cast<int64_t>(hi)).i64(static_cast<int64_t>(lo));
  }
  // STRING / NULLABLE_STRING (int16 length, -1 = null)
  Golden& str(const std::string& s) { return i16(static_cast<int>(s.size())).raw(s); }
  Golden& nullstr() { return i16(-1); }
  // COMPACT_STRING / COMPACT_NULLABLE_STRING (uvarint length + 1, 0 = null)
  Golden& cstr(const std::string& s) { return uvarint(s.size() + 1).raw(s); }
  Golden& cnullstr() { return uvarint(0); }
  // BYTES (int32 length) / COMPACT_BYTES
  Golden& bytes(const std::vector<uint8_t>& v) {
    return i32(static_cast<int64_t>(v.size())).raw(v);
  }
  Golden& nullbytes() { return i32(-1); }
  Golden& cbytes(const std::vector<uint8_t>& v) { return uvarint(v.size() + 1).raw(v); }
  // ARRAY (int32 count, -1 = null) / COMPACT_ARRAY (uvarint count + 1, 0 = null)
  Golden& arr(int64_t n) { return i32(n); }
  Golden& carr(int64_t n) { return uvarint(static_cast<uint64_t>(n + 1)); }
  // An empty tagged-field section.
  Golden& tags() { return uvarint(0); }
  Golden& raw(const std::string& s) {
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Golden& raw(const std::vector<uint8_t>& v) {
    b_.insert(b_.end(), v.begin(), v.end());
    return *this;
  }
  // Flexible or not, in one call: the common pattern in version loops.
  Golden& s(bool flexible, const std::string& v) { return flexible ? cstr(v) : str(v); }
  Golden& ns(bool flexible) { return flexible ? cnullstr() : nullstr(); }
  Golden& a(bool flexible, int64_t n) { return flexible ? carr(n) : arr(n); }
  Golden& t(bool flexible) { return flexible ? tags() : *this; }

  const std::vector<uint8_t>& data() const { return b_; }
  std::vector<uint8_t> take() { return std::move(b_); }

 private:
  Golden& put(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) b_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  std::vector<uint8_t> b_;
};

}  // namespace sluice::kafka::testing
