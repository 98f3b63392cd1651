// DuckDB types <-> Iceberg types, for the tables pipelines write: a table's schema from a
// result's columns, the DuckDB type a staged column is cast to, and the FIELD_IDS option
// of DuckDB's Parquet writer that puts the schema's field ids on every column.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/logical_type.h"
#include "lake/iceberg_schema.h"

namespace sluice::lake {

// The Iceberg type of a DuckDB type; ids are numbered from *next_id (NewTable assigns the
// table's own). TINYINT..INTEGER and unsigned up to USMALLINT are int, UINTEGER and BIGINT
// long, TIMESTAMP_S/MS/NS timestamp (microseconds), ENUM string, ARRAY list. HUGEINT,
// UBIGINT, INTERVAL, UNION, BIT, TIME WITH TIME ZONE and the like have no Iceberg type: an
// error naming `column` and what to cast it to.
Result<Type> IcebergTypeOf(const duck::LogicalType& type, std::string_view column,
                           int32_t* next_id);

// A schema of the given columns (optional fields, ids from 1).
Result<Schema> SchemaOfColumns(const std::vector<std::string>& names,
                               const std::vector<duck::LogicalType>& types);

// The DuckDB SQL type of an Iceberg type: "BIGINT", "STRUCT(\"a\" INTEGER)[]", ...
std::string DuckTypeOf(const Type& type);

// Whether values of `from` fit `to` without loss (the same type, int -> long, float ->
// double, a decimal of the same scale and no smaller precision): what a later batch may
// bring for an existing column.
bool IsSafePromotion(const Type& from, const Type& to);

// COPY ... (FORMAT parquet, FIELD_IDS <this>): every column and nested field with its id.
std::string FieldIdsOption(const Schema& schema);

// A SQL identifier in double quotes.
std::string QuoteId(std::string_view name);

}  // namespace sluice::lake
