// How deep a JSON text nests, found before a parser builds anything for it: a recursive
// reader of the parsed value (or a page rendering it) must not meet a value a hostile
// writer nested ten thousand levels deep.
#pragma once

#include <cstddef>
#include <string_view>

namespace sluice {

// Where `text` nests deeper than `max_depth` arrays and objects (brackets and braces outside
// strings), or npos. Not a validator: it only counts, so it costs one pass and nothing else.
inline size_t JsonTooDeep(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

}  // namespace sluice
