// Base64 codec (RFC 4648 section 4); see base64.h.
#include "base/base64.h"

#include <array>
#include <cstdint>

namespace sluice {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr uint8_t kNotBase64 = 0xff;

// 0..63 for an alphabet character, kNotBase64 for anything else (including '=').
constexpr std::array<uint8_t, 256> MakeDecodeTable() {
  std::array<uint8_t, 256> table{};
  for (auto& v : table) v = kNotBase64;
  for (size_t i = 0; i < kAlphabet.size(); ++i) {
    table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<uint8_t>(i);
  }
  return table;
}
constexpr std::array<uint8_t, 256> kDecode = MakeDecodeTable();

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])); };
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t group = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(group >> shift) & 63];
  }
  size_t left = bytes.size() - i;
  if (left == 0) return out;
  uint32_t group = byte(i) << 16 | (left == 2 ? byte(i + 1) << 8 : 0);
  out += kAlphabet[(group >> 18) & 63];
  out += kAlphabet[(group >> 12) & 63];
  out += left == 2 ? kAlphabet[(group >> 6) & 63] : '=';
  out += '=';
  return out;
}

Result<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return InvalidArgumentError("base64: length {} is not a multiple of 4", text.size());
  }
  size_t padding = 0;
  if (!text.empty() && text.back() == '=') padding = text[text.size() - 2] == '=' ? 2 : 1;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  const size_t data_chars = text.size() - padding;
  uint32_t group = 0;
  int bits = 0;
  for (size_t i = 0; i < data_chars; ++i) {
    uint8_t v = kDecode[static_cast<unsigned char>(text[i])];
    if (v == kNotBase64) return InvalidArgumentError("base64: bad character at offset {}", i);
    group = (group << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((group >> bits) & 0xff);
    }
  }
  // What is left over are the unused low bits of the last group: 2 (one '=') or 4 (two).
  if ((group & ((1u << bits) - 1)) != 0) {
    return InvalidArgumentError("base64: non-zero padding bits at offset {}", data_chars - 1);
  }
  return out;
}

}  // namespace sluice
