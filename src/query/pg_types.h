// Postgres types for DuckDB values: the OID each DuckDB type is reported as, the text
// and binary encodings of result values, and the decoding of bound parameters.
// docs/design/0010-query-server.md lists the mapping; the encodings are Postgres 15's
// (text: DateStyle ISO, IntervalStyle postgres, TimeZone UTC; binary: the *send
// functions of the Postgres source).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/data_chunk.h"
#include "duck/database.h"
#include "duck/logical_type.h"

namespace sluice::query {

// Postgres type OIDs (pg_type.oid) the server reports.
namespace oid {
inline constexpr uint32_t kBool = 16, kBytea = 17, kName = 19, kInt8 = 20, kInt2 = 21, kInt4 = 23,
                          kText = 25, kOid = 26, kJson = 114, kFloat4 = 700, kFloat8 = 701,
                          kUnknown = 705, kBpchar = 1042, kVarchar = 1043, kDate = 1082,
                          kTime = 1083, kTimestamp = 1114, kTimestampTz = 1184, kInterval = 1186,
                          kNumeric = 1700, kUuid = 2950, kJsonb = 3802;
// Arrays of the above.
inline constexpr uint32_t kBoolArray = 1000, kByteaArray = 1001, kInt2Array = 1005,
                          kInt4Array = 1007, kTextArray = 1009, kVarcharArray = 1015,
                          kInt8Array = 1016, kFloat4Array = 1021, kFloat8Array = 1022,
                          kTimestampArray = 1115, kDateArray = 1182, kTimeArray = 1183,
                          kTimestampTzArray = 1185, kIntervalArray = 1187, kNumericArray = 1231,
                          kUuidArray = 2951, kJsonArray = 199;
// The array type of element type `elem`, or 0.
uint32_t ArrayOf(uint32_t elem);
// The element type of array type `array`, or 0.
uint32_t ElementOf(uint32_t array);
}  // namespace oid

struct PgType {
  uint32_t oid;
  int16_t size;      // pg_type.typlen: -1 for variable length
  int32_t modifier;  // atttypmod: NUMERIC's (precision << 16 | scale) + 4, else -1
};

struct TypeInfo;  // pg_types.cc

// Encodes the values of one result column of a DuckDB type. Immutable; any thread.
class ColumnEncoder {
 public:
  // Every DuckDB type the server can send; others (UNION, BIT, TIME WITH TIME ZONE...)
  // are Unimplemented, naming the type, so the client is told to cast the column.
  static Result<ColumnEncoder> Make(const duck::LogicalType& type);
  const PgType& pg_type() const;
  // Appends the value at `row` as a DataRow field: its Int32 length and bytes, or -1 for
  // NULL; in Postgres's binary format when `binary`.
  void Append(const duck::Vector& v, uint64_t row, bool binary, std::string& out) const;

 private:
  explicit ColumnEncoder(std::shared_ptr<const TypeInfo> info) : info_(std::move(info)) {}
  std::shared_ptr<const TypeInfo> info_;
};

// The OID a parameter is described with: the Postgres type of the type DuckDB inferred,
// or text when it inferred none (the value is then bound as text and cast by DuckDB).
uint32_t ParamOid(const std::optional<duck::LogicalType>& type);

// A bound parameter's bytes as a DuckDB value. `oid` is its type (from Parse, else
// ParamOid). Text values are bound as VARCHAR, which DuckDB casts to the parameter's
// type (bytea's hex form is decoded first); binary values are decoded by `oid`. Bad
// bytes are InvalidArgument naming the type; a binary type without a decoder is
// Unimplemented.
Result<duck::Value> DecodeParam(uint32_t oid, bool binary, std::string_view bytes);

// The text forms, exposed for tests.
std::string FormatDate(int32_t days_since_epoch);
std::string FormatTime(int64_t micros);
std::string FormatTimestamp(int64_t micros_since_epoch, bool with_time_zone);
std::string FormatInterval(int32_t months, int32_t days, int64_t micros);
std::string FormatFloat(double v, bool single);
std::string FormatHugeInt(__int128 v, int scale);
// NUMERIC's binary form of a decimal number in text ("-12.340"), and back.
Result<std::string> NumericBinaryFromText(std::string_view text);
Result<std::string> NumericTextFromBinary(std::string_view bytes);

}  // namespace sluice::query
