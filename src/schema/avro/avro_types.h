// Internal to schema/avro: what the parser, the column mapping, the decoder and the
// encoder share: logical types as the mapping reads them, union member names, DuckDB types
// the C API wrapper does not build (DECIMAL, MAP, UNION) and their SQL text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "duck/logical_type.h"
#include "lake/avro_schema.h"

namespace sluice::schema::avro {

using lake::avro::Node;
using lake::avro::Type;

enum class Logical : uint8_t {
  kNone,
  kDecimal,
  kDate,
  kTimeMillis,
  kTimeMicros,
  kTimestampMillis,
  kTimestampMicros,
  kTimestampNanos,
  kLocalTimestampMillis,
  kLocalTimestampMicros,
  kLocalTimestampNanos,
  kUuid,
  kDuration,
};

struct LogicalInfo {
  Logical kind = Logical::kNone;
  int precision = 0;  // decimal
  int scale = 0;      // decimal
};

// The logical type of `n` when it is valid for its underlying type; an invalid one (decimal
// without a precision, date on a long, ...) is ignored, as the Avro specification says.
LogicalInfo LogicalOf(const Node& n);

// Units per second of a time or timestamp logical type (1000 for millis), else 0.
int64_t UnitsPerSecond(Logical l);

// The branches of a union that are not null.
std::vector<const Node*> NonNullBranches(const Node& u);
// The member names of a DuckDB UNION for `branches` (not null): a named type's simple
// name (its full name when two branches share it), else the Avro type name.
std::vector<std::string> UnionTags(const std::vector<const Node*>& branches);

// "long (timestamp-millis)", "record com.acme.Order", "union [null, string]": for messages.
std::string Describe(const Node& n);

bool EqualsIgnoreCase(std::string_view a, std::string_view b);
// The simple name of a named type (its full name after the last dot).
std::string_view SimpleName(const Node& n);
// The namespace of a named type ("" when none).
std::string_view NamespaceOf(const Node& n);

duck::LogicalType DecimalType(int width, int scale);
duck::LogicalType MapType(const duck::LogicalType& key, const duck::LogicalType& value);
duck::LogicalType UnionType(const std::vector<std::string>& names,
                            const std::vector<duck::LogicalType>& members);
size_t UnionMemberCount(const duck::LogicalType& t);
std::string UnionMemberName(const duck::LogicalType& t, size_t i);
duck::LogicalType UnionMemberType(const duck::LogicalType& t, size_t i);

// A deep copy of any type, DECIMAL, ENUM, MAP, UNION and ARRAY included (which
// duck::LogicalType::Copy does not rebuild).
duck::LogicalType CopyType(const duck::LogicalType& t);

// DuckDB's SQL text for a type, parameters included: DECIMAL(10,2), MAP(VARCHAR, BIGINT),
// UNION("a" INTEGER, "b" VARCHAR), STRUCT(...), T[].
std::string TypeSql(const duck::LogicalType& t);

// An Avro name for a DuckDB column or field name: letters, digits and '_' kept, anything
// else '_', a leading digit prefixed by '_'.
std::string AvroName(std::string_view column);

// `s` as a JSON string literal, quotes included.
void AppendJsonString(std::string_view s, std::string* out);

}  // namespace sluice::schema::avro
