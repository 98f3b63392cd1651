// Small ASCII string helpers every module needs: case folding, case-insensitive
// comparison and trimming. ASCII only, on purpose: SQL keywords, config values, HTTP and
// Kafka names are ASCII, and the locale must never change what a name means.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace sluice {

// `s` with 'A'-'Z' mapped to 'a'-'z' (other bytes unchanged).
std::string AsciiLower(std::string_view s);
// `s` with 'a'-'z' mapped to 'A'-'Z' (other bytes unchanged).
std::string AsciiUpper(std::string_view s);
// Equal when ASCII letters are compared without case. Inline: the JSON decoders match
// every key of every message with it.
inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}
// Whether `text` holds `word` with ASCII letters compared without case: anywhere, or as a
// whole word (no letter, digit or '_' touching it on either side).
bool ContainsIgnoreCase(std::string_view text, std::string_view word);
bool ContainsWordIgnoreCase(std::string_view text, std::string_view word);
// `s` without the ASCII whitespace (space, \t, \n, \v, \f, \r) at either end / its end.
std::string_view Trim(std::string_view s);
std::string_view TrimRight(std::string_view s);

// Percent-decoding of one URL path segment ('+' stays '+'): InvalidArgument for a
// truncated or non-hex escape.
Result<std::string> PercentDecode(std::string_view text);

}  // namespace sluice
