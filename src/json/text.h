// Small text rules the JSON decoders share (internal to src/json): ASCII case folding for
// key matching, JSON's number grammar, excerpts for error messages, and ISO-8601 dates and
// timestamps as DuckDB reads them.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::json {

inline char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  }
  return true;
}

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

struct ParsedTime {
  int64_t days = 0;            // the date as written
  int64_t micros_of_day = 0;   // the time as written
  int32_t nanos = 0;           // digits past microseconds (0..999)
  int32_t offset_seconds = 0;  // the UTC offset written (Z = 0), 0 when none
};

// YYYY-MM-DD[(T|t| )HH:MM[:SS[.fraction]][Z|z|(+|-)HH[[:]MM]]]; months and days may have one
// digit, as DuckDB accepts. Returns false on anything else.
bool ParseIsoTimestamp(std::string_view s, ParsedTime* out);

}  // namespace sluice::json
