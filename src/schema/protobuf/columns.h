// Internal to src/schema/protobuf: the DuckDB types of Protobuf fields (ColumnsOf's mapping),
// shared by the decoder and the encoder.
#pragma once

#include "duck/logical_type.h"
#include "schema/protobuf/protobuf_format.h"

namespace sluice::schema::protobuf::internal {

// A recursive message is cut (its field becomes a BLOB of the message's bytes) when it
// would enter itself a kMaxRecursion-th time on a path, or past kMaxStructDepth STRUCTs.
constexpr int kMaxRecursion = 2;
constexpr int kMaxStructDepth = 24;

duck::LogicalType MapType(const duck::LogicalType& key, const duck::LogicalType& value);
duck::LogicalType ScalarColumnType(FieldType t);
// LogicalType::Copy, MAP included (at any depth).
duck::LogicalType CopyType(const duck::LogicalType& t);
// Whether a message has fields a STRUCT can hold (else it maps as Empty: BOOLEAN).
bool HasColumns(const MessageType& m);

}  // namespace sluice::schema::protobuf::internal
