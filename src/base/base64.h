// Base64 (RFC 4648 section 4: the standard alphabet, padded with '='): how JSON APIs carry
// bytes. etcd's v3 JSON gateway sends every key and value this way.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace sluice {

std::string Base64Encode(std::string_view bytes);

// Strict: the length is a multiple of 4, '=' only as the last one or two characters, no
// whitespace, and the unused low bits of the last group are zero (so every text decodes
// from exactly one encoding). InvalidArgument naming the first bad position otherwise.
Result<std::string> Base64Decode(std::string_view text);

}  // namespace sluice
