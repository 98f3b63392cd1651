// UTF-8 checks shared by every reader of outside text (SASL names, Avro strings, catalog
// names, Postgres messages).
#pragma once

#include <string>
#include <string_view>

namespace sluice {

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
bool IsValidUtf8(std::string_view s);

// The code points of `s` (its bytes that do not continue a sequence): Postgres's
// character positions, a terminal's columns for most text.
size_t CountCodePoints(std::string_view s);

// Appends code point `cp` (at most U+10FFFF, not a surrogate: the caller checks) as UTF-8.
void AppendUtf8(std::string& out, char32_t cp);

}  // namespace sluice
