// topic()'s typed value columns: a declared schema (`columns => 'user_id BIGINT, city
// VARCHAR'`) parsed here, or one inferred from a sample of the messages (`format =>
// 'json'`) by the shared JSON decoder (json/lenient_decoder.h, kFlat types), which also
// fills the columns (lenient: a value that is not JSON, not an object, or a field that does
// not fit gives NULL, never an error; the raw `value` column still holds the text). The
// rules are in src/query/topic_scan/README.md.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/logical_type.h"

namespace sluice::query {

enum class ValueType {
  kBoolean,
  kTinyint,
  kSmallint,
  kInteger,
  kBigint,
  kFloat,
  kDouble,
  kVarchar,
  kJson
};

struct ValueColumn {
  std::string name;
  ValueType type;
  bool operator==(const ValueColumn&) const = default;
};

std::string_view TypeName(ValueType type);

// The DuckDB type of `type` (JSON is VARCHAR with the alias JSON).
duck::LogicalType ValueLogicalType(ValueType type);

// Parses `name TYPE, name TYPE, ...` (names plain or double-quoted; types case-insensitive:
// BOOLEAN, TINYINT, SMALLINT, INTEGER, BIGINT, FLOAT, DOUBLE, VARCHAR, JSON and their usual
// aliases). Errors (InvalidArgument) for an empty list, a missing or unknown type, a name
// given twice (ignoring case) or one of `reserved` (the function's own columns).
Result<std::vector<ValueColumn>> ParseValueColumns(std::string_view text,
                                                   std::span<const std::string_view> reserved);

// The columns a sample of message values suggests (json::InferColumns with its kFlat
// types), in first-seen key order: booleans BOOLEAN, integers BIGINT, numbers DOUBLE,
// strings VARCHAR, objects and arrays JSON, only nulls JSON; a key seen with several of
// these kinds is VARCHAR, or JSON when one of them is an object or array. Keys differing
// only in case are one column (the first spelling); empty keys, keys named like one of
// `reserved` (ignoring case) and keys past `max_columns` are left out. Values that are
// not readable JSON objects are skipped.
std::vector<ValueColumn> InferValueColumns(std::span<const std::string> samples,
                                           std::span<const std::string_view> reserved,
                                           size_t max_columns = 1000);

}  // namespace sluice::query
