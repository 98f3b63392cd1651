// COPY's binary format (PostgreSQL's documentation of COPY, "Binary Format"): the
// postgres sink's rows as PostgreSQL reads them without parsing text. A stream is the
// header, then per row a field count and each field as a 32-bit length (-1: NULL) and its
// bytes in the type's binary "send" format, then the trailer; every integer big-endian.
//
//   std::string out;
//   pgcopy::AppendHeader(&out);
//   pgcopy::AppendFieldCount(&out, 2);
//   pgcopy::AppendInt8(&out, 42);
//   pgcopy::AppendNull(&out);
//   pgcopy::AppendTrailer(&out);
//
// Each Append* of a value writes its length prefix too. Dates and timestamps take
// DuckDB's epoch (1970-01-01) and are shifted to PostgreSQL's (2000-01-01); DuckDB's
// ±infinity become PostgreSQL's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::sinks::pgcopy {

void AppendHeader(std::string* out);
void AppendTrailer(std::string* out);
void AppendFieldCount(std::string* out, int16_t fields);

void AppendNull(std::string* out);
void AppendBool(std::string* out, bool v);
void AppendInt2(std::string* out, int16_t v);
void AppendInt4(std::string* out, int32_t v);
void AppendInt8(std::string* out, int64_t v);
void AppendFloat4(std::string* out, float v);
void AppendFloat8(std::string* out, double v);
// `days` since 1970-01-01; ±INT32_MAX (DuckDB's ±infinity) are PostgreSQL's ±infinity.
void AppendDate(std::string* out, int32_t days);
// `micros` since 1970-01-01 (UTC for timestamptz); ±INT64_MAX are ±infinity.
void AppendTimestamp(std::string* out, int64_t micros);
void AppendUuid(std::string* out, const uint8_t bytes[16]);
// text, varchar, char(n), bytea and json: the bytes as they are.
void AppendBytes(std::string* out, std::string_view bytes);
// jsonb: format version 1, then the JSON text.
void AppendJsonb(std::string* out, std::string_view json);
// numeric from a plain decimal's text as DuckDB prints a DECIMAL: an optional '-', digits,
// and optionally '.' and more digits ("-123.4500", "0.05", "7"). False, with nothing
// appended, for any other text (an exponent, NaN, a sign without digits, a space).
bool AppendNumeric(std::string* out, std::string_view decimal);

}  // namespace sluice::sinks::pgcopy
