// JSON decoding for the pipeline's handlers: Kafka message values (JSON objects) parsed by
// simdjson's on-demand API straight into DuckDB data chunks and appended to a table, with
// no intermediate rows and no per-row allocation. docs/design/0005-json-decoding.md has the
// type mapping, the timestamp rules and the error rules. The same decoder, lenient, serves
// queries over topics: lenient_decoder.h.
//
//   handlers.StructuredBatch (in_memory: the batch is served from memory, see the options):
//     ASSIGN_OR_RETURN(auto decoder, StructuredDecoder::Create(conn, "events", {.in_memory =
//     true})); std::vector<DecodeError> errors; ASSIGN_OR_RETURN(size_t rows,
//     decoder->Decode(messages, &errors));  // table = this batch
//
//   handlers.InferredMemBatch / InferredDiskBatch (table `batch`, recreated per batch):
//     ASSIGN_OR_RETURN(auto decoder, InferredDecoder::Create(conn));
//     ASSIGN_OR_RETURN(size_t rows, decoder->Decode(messages, &errors));
//
// A message that is not a JSON object, or whose values do not fit their columns, is not
// appended: it becomes a DecodeError (its index in the batch and why), and the rest of the
// batch still goes in. A non-OK Status is reserved for DuckDB failing (out of memory, a
// table changed under the decoder...).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/appender.h"
#include "duck/database.h"
#include "kafka/client/consumer.h"

namespace sluice::json {

// One message of a batch that was not appended.
struct DecodeError {
  size_t index;        // position in the batch given to Decode
  std::string reason;  // names the key/column and the problem
};

struct StructuredOptions {
  // A key with no column of exactly its name goes to the column whose name matches it
  // ignoring ASCII case (DuckDB's identifiers are case-insensitive), if there is one.
  bool case_insensitive_keys = true;
  // Keep each batch in memory instead of appending it to the table: the decoded chunks are
  // shown to SQL on this connection through a TEMP VIEW named like the table (DuckDB looks
  // in the temp schema first), so `SELECT ... FROM <table>` reads the batch with no copy,
  // several times faster than the table append (see the design note). The table itself is
  // left alone (hidden; `<database>.main.<table>`, e.g. memory.main.events, still names it;
  // `main.<table>` is the view too); the view is read-only, so INSERT,
  // UPDATE or DELETE on the table's name fail while the decoder lives. Ignored when a
  // column needs the staging path (rows then go into the table).
  bool in_memory = false;
  // In memory: a batch of at least 1,024 messages is decoded in up to this many parts at
  // once, the first on the caller's thread and each other on a helper thread the decoder
  // owns (threads - 1 of them); the rows keep the messages' order. 1: no helpers.
  size_t threads = 1;
};

// Decodes into a declared table (handlers.StructuredBatch). Lifecycle: Create binds to the
// table and learns its columns once; Decode appends batches. Owned by the pipeline's thread,
// with the Connection it was created on (which must outlive it). Columns of types without
// a direct path (DECIMAL, UUID, MAP, ENUM, INTERVAL, ...) make the whole table go through a
// slower staging path that DuckDB casts (see the design note).
class StructuredDecoder {
 public:
  static Result<std::unique_ptr<StructuredDecoder>> Create(duck::Connection& conn,
                                                           std::string_view table,
                                                           StructuredOptions options = {});
  ~StructuredDecoder();
  StructuredDecoder(const StructuredDecoder&) = delete;
  StructuredDecoder& operator=(const StructuredDecoder&) = delete;

  // Loads one row per decodable message and returns how many: when Decode returns OK, SQL
  // over the table's name on this connection sees exactly this batch's decodable rows
  // (sqlflow empties the handler table each batch; callers need not). Into the table, the
  // table is emptied first; in memory, the view shows this batch instead of the last one
  // (which is then gone). `errors` is cleared, then gets one entry per message left out.
  Result<size_t> Decode(std::span<const kafka::client::Message> messages,
                        std::vector<DecodeError>* errors);

  const std::vector<duck::TableColumn>& columns() const;
  // True when a column's type has no direct path and rows go through DuckDB casts.
  bool staged() const;

 private:
  struct Impl;
  explicit StructuredDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct InferredOptions {
  std::string table = "batch";
  // Limits on what one batch may infer; past them an object becomes a VARCHAR holding its
  // JSON text (too deep, too many fields) or a message is refused (too many columns).
  size_t max_columns = 1000;  // distinct top-level keys per batch
  size_t max_struct_fields = 1000;
  int max_struct_depth = 32;
  // Keep each batch in memory and show it to SQL through a TEMP VIEW `table` instead of
  // recreating and filling a table (as StructuredOptions::in_memory; read-only).
  bool in_memory = false;
  // A batch of at least 1,024 messages is read in up to this many parts at once, as
  // StructuredOptions::threads: its schema (each part's inferred, then merged in order:
  // the schema one pass gives) and, in memory, its rows.
  size_t threads = 1;
};

// Decodes with a schema inferred per batch (handlers.InferredMemBatch/InferredDiskBatch):
// each Decode recreates the table (CREATE OR REPLACE; in memory: the view, when the schema
// changed) from what the batch's JSON holds,
// plus kafka_topic VARCHAR, kafka_partition INTEGER, kafka_offset BIGINT,
// kafka_timestamp TIMESTAMPTZ and kafka_key BLOB. Lifecycle and threads as
// StructuredDecoder's.
class InferredDecoder {
 public:
  static Result<std::unique_ptr<InferredDecoder>> Create(duck::Connection& conn,
                                                         InferredOptions options = {});
  ~InferredDecoder();
  InferredDecoder(const InferredDecoder&) = delete;
  InferredDecoder& operator=(const InferredDecoder&) = delete;

  // Recreates the table (or view) for this batch and fills it; returns the rows loaded.
  // `errors` as StructuredDecoder::Decode. An empty batch gives a table with only the kafka_
  // columns.
  Result<size_t> Decode(std::span<const kafka::client::Message> messages,
                        std::vector<DecodeError>* errors);

  // The column list of the last table created, as in CREATE TABLE: `"event" VARCHAR, ...`.
  const std::string& schema_sql() const;

 private:
  struct Impl;
  explicit InferredDecoder(std::unique_ptr<Impl> impl);
  // After pass 1: the table or view for the inferred schema (`app` set when it is a table),
  // and the builders of its rows.
  Status SetUp(std::optional<duck::Appender>* app);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::json
