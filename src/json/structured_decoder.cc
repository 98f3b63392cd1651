// StructuredDecoder: messages into a declared table's columns (json_decoder.h), directly
// into chunks, or through a staging table DuckDB casts from for rare types.
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>

#include "base/fork_join.h"
#include "duck/chunk_view.h"
#include "duck/data_chunk.h"
#include "json/chunk_builder.h"
#include "json/filler.h"
#include "json/json_decoder.h"
#include "json/reader.h"

namespace sluice::json {

namespace od = simdjson::ondemand;
using kafka::client::Message;

namespace {

// What decodes one part of an in-memory batch: its own parser, filler, chunk under
// construction and finished chunks, so that parts run on threads of their own.
struct Part {
  explicit Part(bool ci) : filler(ci) {}
  JsonReader reader;
  Filler filler;
  std::unique_ptr<ChunkBuilder> builder;
  std::unique_ptr<ChunkPool> pool;
  std::vector<DecodeError> errors;
  size_t rows = 0;
  Status status;
};

// A parse's reused state.
struct Scratch {
  od::document doc;
  od::object obj;
  std::string reason;
};

// Fills the builder's next row from message `i`'s `value` (CommitRow is the caller's); a
// message that does not decode is rolled back and goes to `errors`.
bool FillRow(JsonReader& reader, Filler& filler, ChunkBuilder& b, std::string_view value, size_t i,
             Scratch& s, std::vector<DecodeError>* errors) {
  if (!OpenObject(reader, value, &s.doc, &s.obj, &s.reason)) {
    errors->push_back({i, std::move(s.reason)});
    return false;
  }
  filler.set_document(&s.doc);
  filler.error().Clear();
  b.MarkRow();
  if (!filler.FillObject(s.obj, b.slots(), b.sorted(), b.rows(), 0)) {
    errors->push_back({i, filler.error().Reason()});
    b.RollbackRow();
    return false;
  }
  if (!CloseDocument(&s.doc, &s.reason)) {
    errors->push_back({i, std::move(s.reason)});
    b.RollbackRow();
    return false;
  }
  return true;
}

// Decodes messages[begin, end) into `b`, holding each full chunk (and the last) in `pool`;
// the messages it cannot decode go to `errors` (by their index in `messages`).
Status DecodeRange(JsonReader& reader, Filler& filler, ChunkBuilder& b, ChunkPool& pool,
                   std::span<const Message> messages, size_t begin, size_t end,
                   std::vector<DecodeError>* errors, size_t* rows) {
  Scratch scratch;
  for (size_t i = begin; i < end; ++i) {
    if (!FillRow(reader, filler, b, messages[i].value, i, scratch, errors)) continue;
    b.CommitRow();
    ++*rows;
    if (b.full()) RETURN_IF_ERROR(pool.Hold(b));
  }
  if (b.rows() > 0) RETURN_IF_ERROR(pool.Hold(b));
  pool.Trim();
  reader.Shrink();
  return Status::OK();
}

// A builder over `columns` (direct types only), as the decoder's own.
Result<std::unique_ptr<ChunkBuilder>> NewBuilder(const std::vector<duck::TableColumn>& columns) {
  std::vector<Slot> slots;
  std::vector<duck::LogicalType> types;
  for (const duck::TableColumn& c : columns) {
    slots.push_back(BuildSlot(c.type, c.name, fmt::format("column {} {}", c.name, c.type_sql)));
    types.push_back(c.type.Copy());
  }
  ASSIGN_OR_RETURN(duck::DataChunk chunk, duck::DataChunk::Create(types));
  return std::make_unique<ChunkBuilder>(std::move(chunk), std::move(slots));
}

}  // namespace

struct StructuredDecoder::Impl {
  duck::Connection* conn;
  std::string table;
  std::vector<duck::TableColumn> columns;
  StructuredOptions options;
  bool staged = false;
  std::string stage_table;  // temp table for the staged path
  std::string insert_sql;   // INSERT INTO table SELECT ... FROM stage
  // Each Decode replaces the previous batch. DuckDB keeps deleted rows of an in-memory or
  // temporary table until a checkpoint (never, for temporary ones), so a table emptied
  // with DELETE would grow by every batch: the table is dropped and created again from
  // its own DDL (duckdb_tables().sql; prepared statements on it are rebound), and only a
  // table that cannot be recreated so (indexes, another database) falls back to DELETE.
  std::string clear_sql;
  std::string create_stage_sql;  // the stage, dropped and created again the same way
  // In memory (options.in_memory, direct types only): the batch's chunks and their view.
  std::unique_ptr<ChunkPool> pool;
  std::unique_ptr<duck::ChunkView> view;
  JsonReader reader;
  Filler filler;
  std::unique_ptr<ChunkBuilder> builder;
  // options.threads > 1, in memory: the batch's parts past the first (which the members
  // above decode, on the caller's thread) and the helpers that run them.
  std::vector<std::unique_ptr<Part>> parts;
  std::unique_ptr<ForkJoin> helpers;

  explicit Impl(bool ci) : filler(ci) {}
  ~Impl() {
    if (staged)
      (void)conn->Execute("DROP TABLE IF EXISTS temp.main." + duck::QuoteIdentifier(stage_table));
  }

  Result<size_t> DecodeInMemory(std::span<const Message> messages,
                                std::vector<DecodeError>* errors);
  Result<size_t> InsertStaged(const std::vector<size_t>& indices, std::vector<DecodeError>* errors);
  Status InsertRange(const std::vector<size_t>& indices, size_t lo, size_t hi, size_t* rows,
                     std::vector<DecodeError>* errors);
};

StructuredDecoder::StructuredDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StructuredDecoder::~StructuredDecoder() = default;

const std::vector<duck::TableColumn>& StructuredDecoder::columns() const { return impl_->columns; }
bool StructuredDecoder::staged() const { return impl_->staged; }

Result<std::unique_ptr<StructuredDecoder>> StructuredDecoder::Create(duck::Connection& conn,
                                                                     std::string_view table,
                                                                     StructuredOptions options) {
  auto impl = std::make_unique<Impl>(options.case_insensitive_keys);
  impl->conn = &conn;
  impl->table = std::string(table);
  impl->options = options;
  impl->clear_sql = "DELETE FROM " + duck::QuoteIdentifier(table);
  if (table.find_first_of(".\"") == std::string_view::npos) {
    // Not for tables with indexes or foreign keys pointing at them (a DROP would fail).
    auto ddl = conn.QueryText(fmt::format(
        "SELECT sql FROM duckdb_tables() t WHERE table_name = {0} AND "
        "database_name IN (current_database(), 'temp') AND NOT EXISTS (SELECT 1 FROM "
        "duckdb_indexes() i WHERE "
        "i.table_name = {0} AND i.schema_name = t.schema_name AND i.database_name = "
        "t.database_name) AND NOT "
        "EXISTS (SELECT 1 FROM duckdb_constraints() c WHERE c.constraint_type = 'FOREIGN KEY' AND "
        "c.referenced_table = {0})",
        duck::QuoteLiteral(table)));
    // One statement, so a failure leaves the table as it was: CREATE OR REPLACE.
    if (ddl.ok() && ddl->size() == 1 && (*ddl)[0][0] && (*ddl)[0][0]->starts_with("CREATE ")) {
      impl->clear_sql = "CREATE OR REPLACE " + (*ddl)[0][0]->substr(7);
    }
  }
  ASSIGN_OR_RETURN(impl->columns, duck::DescribeTable(conn, table));
  if (impl->columns.empty()) return InvalidArgumentError("table '{}' has no columns", table);
  std::vector<Slot> slots;
  std::vector<duck::LogicalType> types;
  for (const duck::TableColumn& c : impl->columns) {
    Slot s = BuildSlot(c.type, c.name, fmt::format("column {} {}", c.name, c.type_sql));
    if (s.kind == Kind::kStaged) {
      impl->staged = true;
      types.push_back(duck::LogicalType::Varchar());
    } else {
      types.push_back(c.type.Copy());
    }
    slots.push_back(std::move(s));
  }
  if (impl->staged) {
    // Rare types: rows go to a temporary table first (those columns as JSON text, plus the
    // message index) and DuckDB casts them into the table with INSERT ... SELECT.
    impl->stage_table = "__sluice_stage_" + impl->table;
    std::string cols, select;
    for (const duck::TableColumn& c : impl->columns) {
      bool direct = IsDirect(c.type);
      cols += fmt::format("{} {}, ", duck::QuoteIdentifier(c.name), direct ? c.type_sql : "JSON");
      if (!select.empty()) select += ", ";
      select += duck::QuoteIdentifier(c.name);
    }
    impl->create_stage_sql =
        fmt::format("CREATE OR REPLACE TEMP TABLE {} ({}\"__sluice_index\" BIGINT)",
                    duck::QuoteIdentifier(impl->stage_table), cols);
    RETURN_IF_ERROR(conn.Execute(impl->create_stage_sql));
    impl->insert_sql = fmt::format("INSERT INTO {} SELECT {} FROM temp.main.{}",
                                   duck::QuoteIdentifier(impl->table), select,
                                   duck::QuoteIdentifier(impl->stage_table));
    types.push_back(duck::LogicalType::BigInt());
  }
  if (options.in_memory && !impl->staged) {
    std::vector<std::string> names;
    for (const duck::TableColumn& c : impl->columns) names.push_back(c.name);
    ASSIGN_OR_RETURN(impl->view, duck::ChunkView::Create(conn, table, names, types));
    impl->pool = ChunkPool::Of(types);
    for (size_t i = 1; i < options.threads; ++i) {
      auto part = std::make_unique<Part>(options.case_insensitive_keys);
      ASSIGN_OR_RETURN(part->builder, NewBuilder(impl->columns));
      part->pool = ChunkPool::Of(types);
      impl->parts.push_back(std::move(part));
    }
    if (!impl->parts.empty()) {
      impl->helpers = std::make_unique<ForkJoin>(impl->parts.size(), "sluice-decode");
    }
  }
  ASSIGN_OR_RETURN(duck::DataChunk chunk, duck::DataChunk::Create(types));
  impl->builder = std::make_unique<ChunkBuilder>(std::move(chunk), std::move(slots));
  return std::unique_ptr<StructuredDecoder>(new StructuredDecoder(std::move(impl)));
}

Result<size_t> StructuredDecoder::Decode(std::span<const Message> messages,
                                         std::vector<DecodeError>* errors) {
  Impl& d = *impl_;
  errors->clear();
  if (d.view) return d.DecodeInMemory(messages, errors);
  // The table holds one batch: the previous one goes first (sqlflow empties it each batch).
  RETURN_IF_ERROR(d.conn->Execute(d.clear_sql));
  ASSIGN_OR_RETURN(duck::Appender app,
                   d.staged ? duck::Appender::Open(*d.conn, d.stage_table, "main", "temp")
                            : duck::Appender::Open(*d.conn, d.table));
  if (app.column_count() != d.builder->chunk().column_count()) {
    return FailedPreconditionError("table '{}' changed since the decoder was created", d.table);
  }
  ChunkBuilder& b = *d.builder;
  const size_t ncols = d.columns.size();
  std::vector<size_t> indices;  // staged path: the message index of each row
  size_t appended = 0;
  Scratch scratch;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!FillRow(d.reader, d.filler, b, messages[i].value, i, scratch, errors)) continue;
    if (d.staged) {
      b.chunk().column(ncols).data<int64_t>()[b.rows()] = static_cast<int64_t>(i);
      indices.push_back(i);
    }
    b.CommitRow();
    if (b.full()) {
      RETURN_IF_ERROR(b.Finish());
      RETURN_IF_ERROR(app.Append(b.chunk()));
      appended += b.rows();
      b.Reset();
    }
  }
  if (b.rows() > 0) {
    RETURN_IF_ERROR(b.Finish());
    RETURN_IF_ERROR(app.Append(b.chunk()));
    appended += b.rows();
    b.Reset();
  }
  RETURN_IF_ERROR(app.Flush());
  d.reader.Shrink();
  if (!d.staged) return appended;
  return d.InsertStaged(indices, errors);
}

// The direct path without the table: rows stay in the pool's chunks, which the view shows.
Result<size_t> StructuredDecoder::Impl::DecodeInMemory(std::span<const Message> messages,
                                                       std::vector<DecodeError>* errors) {
  view->SetChunks({});
  pool->Recycle();
  for (auto& part : this->parts) part->pool->Recycle();
  const size_t parts = PartsFor(messages.size(), this->parts.size());
  if (parts == 1) {
    size_t rows = 0;
    RETURN_IF_ERROR(
        DecodeRange(reader, filler, *builder, *pool, messages, 0, messages.size(), errors, &rows));
    view->SetChunks(pool->batch());
    return rows;
  }
  size_t rows = 0;
  Status first;
  helpers->Run(parts, [&](size_t p) {
    const size_t begin = messages.size() * p / parts;
    const size_t end = messages.size() * (p + 1) / parts;
    if (p == 0) {
      first = DecodeRange(reader, filler, *builder, *pool, messages, begin, end, errors, &rows);
      return;
    }
    Part& part = *this->parts[p - 1];
    part.errors.clear();
    part.rows = 0;
    part.status = DecodeRange(part.reader, part.filler, *part.builder, *part.pool, messages, begin,
                              end, &part.errors, &part.rows);
  });
  RETURN_IF_ERROR(first);
  std::vector<const duck::DataChunk*> chunks = pool->batch();
  for (size_t p = 1; p < parts; ++p) {
    Part& part = *this->parts[p - 1];
    RETURN_IF_ERROR(part.status);
    rows += part.rows;
    // The parts are consecutive ranges: their errors stay in message order.
    for (DecodeError& e : part.errors) errors->push_back(std::move(e));
    for (const duck::DataChunk* c : part.pool->batch()) chunks.push_back(c);
  }
  view->SetChunks(std::move(chunks));
  return rows;
}

Result<size_t> StructuredDecoder::Impl::InsertStaged(const std::vector<size_t>& indices,
                                                     std::vector<DecodeError>* errors) {
  std::string stage = "temp.main." + duck::QuoteIdentifier(stage_table);
  size_t rows = 0;
  Status st = InsertRange(indices, 0, indices.size(), &rows, errors);
  Status cleared = conn->Execute(create_stage_sql);
  RETURN_IF_ERROR(st);
  RETURN_IF_ERROR(cleared);
  std::sort(errors->begin(), errors->end(),
            [](const DecodeError& a, const DecodeError& b) { return a.index < b.index; });
  return rows;
}

// Inserts staged rows [lo, hi) (positions in `indices`); when DuckDB refuses them, halves
// the range until the refused rows are single messages, which become DecodeErrors.
Status StructuredDecoder::Impl::InsertRange(const std::vector<size_t>& indices, size_t lo,
                                            size_t hi, size_t* rows,
                                            std::vector<DecodeError>* errors) {
  if (lo >= hi) return Status::OK();
  std::string sql = fmt::format("{} WHERE \"__sluice_index\" BETWEEN {} AND {}", insert_sql,
                                indices[lo], indices[hi - 1]);
  auto result = conn->Query(sql);
  if (result.ok()) {
    *rows += result->rows_changed();
    return Status::OK();
  }
  if (result.status().code() != StatusCode::kInvalidArgument) return result.status();
  if (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    RETURN_IF_ERROR(InsertRange(indices, lo, mid, rows, errors));
    return InsertRange(indices, mid, hi, rows, errors);
  }
  // One message: name the first column DuckDB cannot cast.
  std::string stage = "temp.main." + duck::QuoteIdentifier(stage_table);
  for (const duck::TableColumn& c : columns) {
    if (IsDirect(c.type)) continue;
    auto probe =
        conn->Query(fmt::format("SELECT CAST({} AS {}) FROM {} WHERE \"__sluice_index\" = {}",
                                duck::QuoteIdentifier(c.name), c.type_sql, stage, indices[lo]));
    if (!probe.ok()) {
      errors->push_back({indices[lo], fmt::format("key '{}' (column {} {}): {}", c.name, c.name,
                                                  c.type_sql, probe.status().message())});
      return Status::OK();
    }
  }
  errors->push_back({indices[lo], fmt::format("row refused by table '{}': {}", table,
                                              result.status().message())});
  return Status::OK();
}

}  // namespace sluice::json
