// UTF-8 checks shared by every reader of outside text (SASL names, Avro strings, catalog
// names, Postgres messages).
#pragma once

#include <string_view>

namespace sluice {

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
bool IsValidUtf8(std::string_view s);

}  // namespace sluice
