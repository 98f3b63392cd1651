#include "kafka/protocol/wire.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace sluice::kafka {

std::string Uuid::ToString() const {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  uint8_t b[16];
  for (int i = 0; i < 8; ++i) {
    b[i] = static_cast<uint8_t>(hi >> (56 - 8 * i));
    b[8 + i] = static_cast<uint8_t>(lo >> (56 - 8 * i));
  }
  std::string out;
  int i = 0;
  for (; i + 3 <= 16; i += 3) {
    uint32_t v = uint32_t{b[i]} << 16 | uint32_t{b[i + 1]} << 8 | b[i + 2];
    for (int k = 18; k >= 0; k -= 6) out.push_back(kAlphabet[(v >> k) & 63]);
  }
  uint32_t v = uint32_t{b[15]} << 16;  // one byte left
  out.push_back(kAlphabet[(v >> 18) & 63]);
  out.push_back(kAlphabet[(v >> 12) & 63]);
  return out;
}

Status Reader::status() const {
  if (ok()) return Status::OK();
  return Status(StatusCode::kInvalidArgument, fmt::format("at byte {}: {}", error_pos_, error_));
}

void Reader::Fail(const char* field, std::string_view why) {
  if (!ok()) return;
  error_ = fmt::format("{}: {}", field, why);
  error_pos_ = position();
  p_ = end_;
}

bool Reader::Need(size_t n, const char* field) {
  if (!ok()) return false;
  if (remaining() < n) {
    Fail(field, fmt::format("needs {} bytes, {} left", n, remaining()));
    return false;
  }
  return true;
}

#define SLUICE_READ_BE(type, utype, n)                                \
  if (!Need(n, field)) return 0;                                      \
  utype v = 0;                                                        \
  for (int i = 0; i < n; ++i) v = static_cast<utype>(v << 8 | p_[i]); \
  p_ += n;                                                            \
  return static_cast<type>(v)

int8_t Reader::Int8(const char* field) { SLUICE_READ_BE(int8_t, uint8_t, 1); }
int16_t Reader::Int16(const char* field) { SLUICE_READ_BE(int16_t, uint16_t, 2); }
int32_t Reader::Int32(const char* field) { SLUICE_READ_BE(int32_t, uint32_t, 4); }
int64_t Reader::Int64(const char* field) { SLUICE_READ_BE(int64_t, uint64_t, 8); }
uint16_t Reader::Uint16(const char* field) { SLUICE_READ_BE(uint16_t, uint16_t, 2); }
uint32_t Reader::Uint32(const char* field) { SLUICE_READ_BE(uint32_t, uint32_t, 4); }
#undef SLUICE_READ_BE

double Reader::Float64(const char* field) {
  uint64_t bits = static_cast<uint64_t>(Int64(field));
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

bool Reader::Bool(const char* field) { return Int8(field) != 0; }

uint32_t Reader::UnsignedVarint(const char* field) {
  uint32_t v = 0;
  for (int shift = 0; shift <= 28; shift += 7) {
    if (!Need(1, field)) return 0;
    uint8_t b = *p_++;
    if (shift == 28 && (b & 0xf0) != 0) {
      Fail(field, "varint does not fit in 32 bits");
      return 0;
    }
    v |= uint32_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return v;
  }
  Fail(field, "varint longer than 5 bytes");
  return 0;
}

int32_t Reader::Varint(const char* field) {
  uint32_t z = UnsignedVarint(field);
  return static_cast<int32_t>(z >> 1) ^ -static_cast<int32_t>(z & 1);
}

int64_t Reader::Varlong(const char* field) {
  uint64_t v = 0;
  for (int shift = 0; shift <= 63; shift += 7) {
    if (!Need(1, field)) return 0;
    uint8_t b = *p_++;
    if (shift == 63 && (b & 0xfe) != 0) {
      Fail(field, "varlong does not fit in 64 bits");
      return 0;
    }
    v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
  }
  Fail(field, "varlong longer than 10 bytes");
  return 0;
}

Uuid Reader::ReadUuid(const char* field) {
  Uuid u;
  u.hi = static_cast<uint64_t>(Int64(field));
  u.lo = static_cast<uint64_t>(Int64(field));
  return u;
}

std::optional<std::string> Reader::NullableString(bool flexible, const char* field) {
  int64_t len;
  if (flexible) {
    len = static_cast<int64_t>(UnsignedVarint(field)) - 1;
  } else {
    len = Int16(field);
  }
  if (!ok()) return std::nullopt;
  if (len < 0) {
    if (len < -1) Fail(field, fmt::format("negative string length {}", len));
    return std::nullopt;
  }
  if (!Need(static_cast<size_t>(len), field)) return std::nullopt;
  std::string s(reinterpret_cast<const char*>(p_), static_cast<size_t>(len));
  p_ += len;
  return s;
}

std::string Reader::String(bool flexible, const char* field) {
  auto s = NullableString(flexible, field);
  if (!s && ok()) Fail(field, "null where a string is required");
  return s.value_or(std::string());
}

std::optional<std::span<const uint8_t>> Reader::NullableBytesView(bool flexible,
                                                                  const char* field) {
  int64_t len;
  if (flexible) {
    len = static_cast<int64_t>(UnsignedVarint(field)) - 1;
  } else {
    len = Int32(field);
  }
  if (!ok()) return std::nullopt;
  if (len < 0) {
    if (len < -1) Fail(field, fmt::format("negative bytes length {}", len));
    return std::nullopt;
  }
  if (!Need(static_cast<size_t>(len), field)) return std::nullopt;
  std::span<const uint8_t> view(p_, static_cast<size_t>(len));
  p_ += len;
  return view;
}

std::optional<std::vector<uint8_t>> Reader::NullableBytes(bool flexible, const char* field) {
  auto v = NullableBytesView(flexible, field);
  if (!v) return std::nullopt;
  return std::vector<uint8_t>(v->begin(), v->end());
}

std::vector<uint8_t> Reader::Bytes(bool flexible, const char* field) {
  auto v = NullableBytes(flexible, field);
  if (!v && ok()) Fail(field, "null where bytes are required");
  return v.value_or(std::vector<uint8_t>());
}

int32_t Reader::ArrayLength(bool flexible, const char* field, size_t min_element_bytes) {
  int64_t n;
  if (flexible) {
    n = static_cast<int64_t>(UnsignedVarint(field)) - 1;
  } else {
    n = Int32(field);
  }
  if (!ok()) return -1;
  if (n < -1) {
    Fail(field, fmt::format("negative array length {}", n));
    return -1;
  }
  if (n > 0 && static_cast<uint64_t>(n) * std::max<size_t>(min_element_bytes, 1) > remaining()) {
    Fail(field,
         fmt::format("array of {} elements cannot fit in the {} bytes left", n, remaining()));
    return -1;
  }
  return static_cast<int32_t>(n);
}

void Writer::Int16(int16_t v) {
  uint16_t u = static_cast<uint16_t>(v);
  out_->push_back(static_cast<uint8_t>(u >> 8));
  out_->push_back(static_cast<uint8_t>(u));
}

void Writer::Int32(int32_t v) {
  uint32_t u = static_cast<uint32_t>(v);
  for (int s = 24; s >= 0; s -= 8) out_->push_back(static_cast<uint8_t>(u >> s));
}

void Writer::Int64(int64_t v) {
  uint64_t u = static_cast<uint64_t>(v);
  for (int s = 56; s >= 0; s -= 8) out_->push_back(static_cast<uint8_t>(u >> s));
}

void Writer::Float64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  Int64(static_cast<int64_t>(bits));
}

void Writer::UnsignedVarint(uint32_t v) {
  while (v >= 0x80) {
    out_->push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out_->push_back(static_cast<uint8_t>(v));
}

void Writer::Varint(int32_t v) {
  UnsignedVarint((static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31));
}

void Writer::Varlong(int64_t v) {
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  while (z >= 0x80) {
    out_->push_back(static_cast<uint8_t>(z | 0x80));
    z >>= 7;
  }
  out_->push_back(static_cast<uint8_t>(z));
}

void Writer::WriteUuid(const Uuid& u) {
  Int64(static_cast<int64_t>(u.hi));
  Int64(static_cast<int64_t>(u.lo));
}

void Writer::String(bool flexible, std::string_view s) {
  // A non-compact string has an int16 length: a longer one (a huge config value) is cut
  // rather than written as a corrupt frame.
  if (!flexible && s.size() > INT16_MAX) s = s.substr(0, INT16_MAX);
  if (flexible) {
    UnsignedVarint(static_cast<uint32_t>(s.size() + 1));
  } else {
    Int16(static_cast<int16_t>(s.size()));
  }
  out_->insert(out_->end(), s.begin(), s.end());
}

void Writer::NullableString(bool flexible, const std::optional<std::string>& s) {
  if (!s) {
    if (flexible) {
      UnsignedVarint(0);
    } else {
      Int16(-1);
    }
    return;
  }
  String(flexible, *s);
}

void Writer::Bytes(bool flexible, std::span<const uint8_t> b) {
  if (flexible) {
    UnsignedVarint(static_cast<uint32_t>(b.size() + 1));
  } else {
    Int32(static_cast<int32_t>(b.size()));
  }
  out_->insert(out_->end(), b.begin(), b.end());
}

void Writer::NullableBytes(bool flexible, const std::optional<std::vector<uint8_t>>& b) {
  if (!b) {
    NullableBytesView(flexible, std::nullopt);
    return;
  }
  Bytes(flexible, *b);
}

void Writer::NullableBytesView(bool flexible, std::optional<std::span<const uint8_t>> b) {
  if (!b) {
    if (flexible) {
      UnsignedVarint(0);
    } else {
      Int32(-1);
    }
    return;
  }
  Bytes(flexible, *b);
}

void Writer::ArrayLength(bool flexible, int32_t n) {
  if (flexible) {
    UnsignedVarint(static_cast<uint32_t>(n + 1));
  } else {
    Int32(n);
  }
}

void Writer::TaggedFieldHeader(uint32_t tag, uint32_t size) {
  UnsignedVarint(tag);
  UnsignedVarint(size);
}

uint64_t Writer::total_size() const {
  uint64_t n = out_->size();
  for (const Splice& s : splices_) n += s.size;
  return n;
}

}  // namespace sluice::kafka
