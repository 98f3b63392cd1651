// topic()'s typed value columns: a declared schema (`columns => 'user_id BIGINT, city
// VARCHAR'`) or one inferred from a sample of the messages (`format => 'json'`), and the
// decoder that fills those columns from each message's JSON value (simdjson, DOM API).
//
// A value that is not JSON, not an object, or a field that does not fit its column gives
// NULL in that column, never an error: the raw `value` column still holds the text. The
// rules are in src/query/topic_scan/README.md and docs/design/0010-query-server.md
// (decision 23).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duckdb.h"

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

// A new DuckDB type for `type` (JSON is VARCHAR with the alias JSON); the caller destroys it.
duckdb_logical_type CreateLogicalType(ValueType type);

// Parses `name TYPE, name TYPE, ...` (names plain or double-quoted; types case-insensitive:
// BOOLEAN, TINYINT, SMALLINT, INTEGER, BIGINT, FLOAT, DOUBLE, VARCHAR, JSON and their usual
// aliases). Errors (InvalidArgument) for an empty list, a missing or unknown type, a name
// given twice (ignoring case) or one of `reserved` (the function's own columns).
Result<std::vector<ValueColumn>> ParseValueColumns(std::string_view text,
                                                   std::span<const std::string_view> reserved);

// The columns a sample of message values suggests, in first-seen key order: booleans
// BOOLEAN, integers BIGINT, numbers DOUBLE, strings VARCHAR, objects and arrays JSON, only
// nulls JSON; a key seen with several of these kinds is VARCHAR, or JSON when one of them
// is an object or array. Keys differing only in case are one column (the first spelling);
// empty keys, keys named like one of `reserved` (ignoring case) and keys past
// `max_columns` are left out. Values that are not JSON objects are skipped.
std::vector<ValueColumn> InferValueColumns(std::span<const std::string> samples,
                                           std::span<const std::string_view> reserved,
                                           size_t max_columns = 1000);

// Fills value columns from message values, one output chunk at a time. Lifecycle: one per
// scan, owned by the thread running the scan (DuckDB's, one at a time).
class ValueDecoder {
 public:
  explicit ValueDecoder(std::vector<ValueColumn> columns);
  ~ValueDecoder();
  ValueDecoder(const ValueDecoder&) = delete;
  ValueDecoder& operator=(const ValueDecoder&) = delete;

  // Writes row `row` of `out` (one vector per value column, nullptr for a column the query
  // does not read) from `value` (data() == nullptr: the message has no value).
  void Decode(std::span<const duckdb_vector> out, idx_t row, std::string_view value);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::query
