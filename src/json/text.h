// Small text rules the JSON decoders share (internal to src/json): JSON's whitespace, its
// number grammar, excerpts for error messages.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/strings.h"

namespace sluice::json {

// JSON's whitespace (space, tab, LF, CR) at the end of `s` removed.
inline std::string_view TrimRight(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// A value for an error message: at most 64 bytes of it, quoted.
std::string Excerpt(std::string_view s);

// JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool IsJsonNumber(std::string_view s);

// "an array", "a number", ... for error messages.
std::string_view JsonTypeName(simdjson::ondemand::json_type t);

}  // namespace sluice::json
