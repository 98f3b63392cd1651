// topic(): a Kafka topic's messages as a table, for the query server and `sluice sql`
// A DuckDB table function (duck/table_function.h) registered on a connection:
//
//   SELECT partition, offset, timestamp, key, value FROM topic('events', from_offset => 100)
//
// Columns: partition INTEGER, offset BIGINT, timestamp TIMESTAMPTZ (NULL when the record
// has none), key VARCHAR and value VARCHAR (NULL when absent, not UTF-8 or holding a NUL
// byte, which Postgres text cannot carry), key_bytes
// BLOB and value_bytes BLOB (the bytes as they are). Projection is pushed down.
//
// Bounds, all optional: `partition => p` (one partition; an error when the topic has no
// such partition), `partitions => [p, q]` (those the topic has; both may be given),
// `from_offset => a` and `to_offset => b` (a <= offset < b, per partition), `from_ts => t0`
// and `to_ts => t1` (TIMESTAMPTZ; offsets found with ListOffsets by time, then rows with
// t0 <= timestamp < t1). Without an upper bound the scan stops at each partition's high
// watermark as it was when the query was bound: a query over a live topic ends. The
// planner (topic_planner.h) fills these from a query's WHERE clause.
//
// Value columns, after those above: `columns => 'user_id BIGINT, city VARCHAR'` declares
// them; `format => 'json'` alone infers them from the first messages in range
// (`sample_size => n`, default 1000). Each is decoded from the message's JSON value by the
// shared JSON decoder, lenient: NULL where it does not fit (value_schema.h,
// json/lenient_decoder.h); only the columns a query reads are decoded.
//
// Registered schemas (docs/design/0022-schemas.md): without `columns`, a topic whose
// `<topic>-value` subject's latest schema is Avro or Protobuf (or with `format => 'avro'`
// or 'protobuf') gets that schema's columns (STRUCT, LIST, MAP... as the pipelines'
// decoders make them), each message decoded by its own schema id from the Confluent
// framing; a value that is not framed, names an unknown id or does not decode gives NULLs
// (the raw columns still hold it). A decoded column named like one of the columns above is
// prefixed with `value_`. Keys the same way: when the `<topic>-key` subject's latest schema
// is Avro or Protobuf (`key_format => 'auto'`, the default; 'avro' or 'protobuf' insist on
// it, 'bytes' never decodes), `key` is the decoded key (a record as a STRUCT, another Avro
// schema as its type; NULL when absent or not decodable) instead of its text.
//
// The messages are read with a Kafka consumer (librdkafka, no group) from the broker
// given at registration: sluice's own when it serves, any Kafka cluster otherwise.
// Decisions and what is left: docs/design/0010-query-server.md, 19 and 22-24.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/database.h"
#include "schema/row_codec.h"
#include "schema/schema_source.h"

namespace sluice::query {

struct TopicFunctionOptions {
  std::string bootstrap_servers;  // "127.0.0.1:9092"
  // More librdkafka properties for every client the function makes (security.protocol,
  // sasl.*: serve's own credential, docs/design/0020-data-authorization.md).
  std::map<std::string, std::string> client_properties;
  std::chrono::milliseconds timeout{10'000};  // per metadata call, and without progress
  std::string function_name = "topic";
  // The Schema Registry: a topic whose `<topic>-value` subject has an Avro or Protobuf
  // schema gets that schema's columns, decoded from the framed values (null: none;
  // docs/design/0022-schemas.md).
  std::shared_ptr<schema::SchemaSource> schemas;
};

// The columns topic('<topic>') has when called with no parameters but the name (its own,
// then a registered value schema's; `key` decoded when a key schema is registered), without
// asking the broker: for the catalog emulation's relations of schema `kafka`.
Result<std::vector<schema::Column>> TopicColumns(const TopicFunctionOptions& options,
                                                 std::string_view topic);

// Registers the function on `conn` (DuckDB registers it for the whole database).
Status RegisterTopicFunction(duck::Connection& conn, const TopicFunctionOptions& options);

}  // namespace sluice::query
