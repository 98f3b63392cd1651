// Text helpers of the JSON decoders: excerpts, the number grammar, JSON type names.
#include "json/text.h"

#include <fmt/format.h>

namespace sluice::json {

namespace od = simdjson::ondemand;

// A value for an error message: at most 64 bytes of it, quoted.
std::string Excerpt(std::string_view s) {
  if (s.size() <= 64) return fmt::format("\"{}\"", s);
  return fmt::format("\"{}...\"", s.substr(0, 61));
}

// JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool IsJsonNumber(std::string_view s) {
  size_t i = 0, n = s.size();
  auto digits = [&] {
    size_t start = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start;
  };
  if (i < n && s[i] == '-') ++i;
  if (i < n && s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < n && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == n;
}

std::string_view JsonTypeName(od::json_type t) {
  switch (t) {
    case od::json_type::array:
      return "an array";
    case od::json_type::object:
      return "an object";
    case od::json_type::number:
      return "a number";
    case od::json_type::string:
      return "a string";
    case od::json_type::boolean:
      return "a boolean";
    case od::json_type::null:
      return "null";
  }
  return "a value";
}

}  // namespace sluice::json
