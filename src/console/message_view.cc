#include "console/message_view.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "base/utf8.h"

namespace sluice::console {

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xf];
  }
  return out;
}

ShownBytes ShowBytes(std::string_view bytes, BinaryAs binary, size_t whole_size) {
  ShownBytes out;
  std::string_view shown = bytes;
  if (shown.size() > kMaxShownBytes || whole_size > shown.size()) {
    shown = shown.substr(0, kMaxShownBytes);
    out.truncated = true;
  }
  if (out.truncated) {
    // Back to the start of a code point: a cut sequence would make UTF-8 text look binary.
    size_t end = shown.size();
    for (size_t back = 0;
         back < 3 && end > 0 && (static_cast<unsigned char>(shown[end - 1]) & 0xC0) == 0x80;
         ++back) {
      --end;
    }
    if (end > 0 && static_cast<unsigned char>(shown[end - 1]) >= 0xC0) --end;
    if (IsValidUtf8(shown.substr(0, end))) shown = shown.substr(0, end);
  }
  // Text is UTF-8 without control characters but tab and line breaks: a NUL or an escape is
  // valid UTF-8, but bytes holding them are binary (a Schema Registry's framing starts
  // with a NUL), better read as hex.
  const bool control = std::any_of(shown.begin(), shown.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t' && c != '\n' && c != '\r') || u == 0x7f;
  });
  if (!control && IsValidUtf8(shown)) {
    out.text = std::string(shown);
    out.encoding =
        !out.truncated && !shown.empty() && nlohmann::json::accept(shown) ? "json" : "text";
    return out;
  }
  if (binary == BinaryAs::kBase64) {
    out.text = Base64Encode(shown);
    out.encoding = "base64";
  } else {
    out.text = Hex(shown);
    out.encoding = "hex";
  }
  return out;
}

}  // namespace sluice::console
