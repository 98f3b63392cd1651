// Small ASCII string helpers every module needs: case folding, case-insensitive
// comparison and trimming. ASCII only, on purpose: SQL keywords, config values, HTTP and
// Kafka names are ASCII, and the locale must never change what a name means.
#pragma once

#include <string>
#include <string_view>

namespace sluice {

// `s` with 'A'-'Z' mapped to 'a'-'z' (other bytes unchanged).
std::string AsciiLower(std::string_view s);
// `s` with 'a'-'z' mapped to 'A'-'Z' (other bytes unchanged).
std::string AsciiUpper(std::string_view s);
// Equal when ASCII letters are compared without case.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
// `s` without the ASCII whitespace (space, \t, \n, \v, \f, \r) at either end / its end.
std::string_view Trim(std::string_view s);
std::string_view TrimRight(std::string_view s);

}  // namespace sluice
