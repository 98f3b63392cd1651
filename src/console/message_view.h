// How the console shows the bytes of a record's key, value or header (docs/design/0026 #4):
// JSON when they parse as JSON, text when they are UTF-8 without control characters (but
// tab and line breaks), else hex or base64; long ones cut.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sluice::console {

enum class BinaryAs { kHex, kBase64 };

struct ShownBytes {
  std::string text;
  std::string encoding;    // "json", "text", "hex" or "base64"
  bool truncated = false;  // only the first kMaxShownBytes were shown
};

inline constexpr size_t kMaxShownBytes = 64 * 1024;

// `bytes` for a page: the text as is when it is JSON ("json": the page pretty-prints it) or
// other UTF-8 ("text"), else `binary`'s form. Beyond kMaxShownBytes, the first
// kMaxShownBytes (cut at a UTF-8 boundary for text; JSON cut is shown as text).
// `whole_size`: the size of the bytes before a reader cut them (CutForShowing), when it
// did; `bytes.size()` otherwise.
ShownBytes ShowBytes(std::string_view bytes, BinaryAs binary, size_t whole_size);
inline ShownBytes ShowBytes(std::string_view bytes, BinaryAs binary) {
  return ShowBytes(bytes, binary, bytes.size());
}

// What a reader keeps of a record's bytes for showing: at most kMaxShownBytes (a page of
// 1 MB records holds 64 KiB of each).
inline std::string CutForShowing(std::string_view bytes) {
  return std::string(bytes.substr(0, kMaxShownBytes));
}

// Lower-case hex, two digits per byte.
std::string Hex(std::string_view bytes);

}  // namespace sluice::console
