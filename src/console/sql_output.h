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

// Appends one value: null for NULL; for a numeric column a JSON number when the text is
// one JSON can carry and a double holds exactly enough (integers within ±2^53, decimals of
// at most 15 significant digits, finite floats), else a string (NaN, Infinity, a 20-digit
// integer); a string for every other column.
void AppendJsonValue(std::string& out, const std::optional<std::string_view>& v, bool numeric);

// Appends one CSV line (RFC 4180: a field with a comma, quote, CR or LF quoted, quotes
// doubled; NULL an empty field) ending in "\n".
void AppendCsvLine(std::string& out, const std::vector<std::optional<std::string_view>>& values);

}  // namespace sluice::console
