// How the console writes a query's rows (docs/design/0026-console.md, the /api/v1/sql
// rows): JSON values for the page's NDJSON stream, CSV lines for a download. Postgres's
// text form comes in (query::LocalSession); nothing here runs a query.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::console {

// Appends a JSON string of `s` (valid UTF-8 assumed: the query server sends it) to `out`.
void AppendJsonString(std::string& out, std::string_view s);

// How a column's values are written in JSON.
enum class JsonNumbers {
  kNever,   // strings: not a number type
  kExact,   // integers and decimals: a number when a double holds it exactly (integers
            // within ±2^53, at most 15 significant digits), else a string
  kFloats,  // float4/float8: the server's text is already the shortest form that reads
            // back as the same double, so every finite value is a number
};

// Appends one value: null for NULL; a JSON number where `numbers` allows and the text is
// one JSON can carry (never NaN or Infinity, which stay strings); otherwise a string.
void AppendJsonValue(std::string& out, const std::optional<std::string_view>& v,
                     JsonNumbers numbers);

// Appends one CSV line (RFC 4180: a field with a comma, quote, CR or LF quoted, quotes
// doubled; NULL an empty field) ending in "\n".
void AppendCsvLine(std::string& out, const std::vector<std::optional<std::string_view>>& values);

}  // namespace sluice::console
