// InferredDecoder: a batch's schema inferred from its messages (infer.h), the table or view
// made for it, then the rows (json_decoder.h).
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <optional>

#include "duck/chunk_view.h"
#include "duck/data_chunk.h"
#include "json/chunk_builder.h"
#include "json/filler.h"
#include "json/infer.h"
#include "json/json_decoder.h"
#include "json/reader.h"

namespace sluice::json {

namespace od = simdjson::ondemand;
using duck::Vector;
using kafka::client::Message;

namespace {

constexpr std::string_view kKafkaColumns[] = {"kafka_topic", "kafka_partition", "kafka_offset",
                                              "kafka_timestamp", "kafka_key"};

InferLimits LimitsOf(const InferredOptions& o) {
  return {.max_columns = o.max_columns,
          .max_struct_fields = o.max_struct_fields,
          .max_struct_depth = o.max_struct_depth,
          .drop_extra_columns = false,
          .reserved = kKafkaColumns,
          .types = InferredTypes::kNested};
}

}  // namespace

struct InferredDecoder::Impl {
  duck::Connection* conn;
  InferredOptions options;
  JsonReader reader;
  Filler filler{true};
  Inferrer inferrer;
  std::string schema_sql;
  std::string built_for;  // schema_sql the builder was made for
  std::unique_ptr<ChunkBuilder> builder;
  size_t json_columns = 0;
  // In memory (options.in_memory): the batch's chunks and their view.
  std::unique_ptr<ChunkPool> pool;
  std::unique_ptr<duck::ChunkView> view;

  explicit Impl(InferredOptions o) : options(std::move(o)), inferrer(LimitsOf(options), &filler) {}
};

InferredDecoder::InferredDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
InferredDecoder::~InferredDecoder() = default;
const std::string& InferredDecoder::schema_sql() const { return impl_->schema_sql; }

Result<std::unique_ptr<InferredDecoder>> InferredDecoder::Create(duck::Connection& conn,
                                                                 InferredOptions options) {
  if (options.table.empty()) return InvalidArgumentError("an inferred batch needs a table name");
  auto impl = std::make_unique<Impl>(std::move(options));
  impl->conn = &conn;
  return std::unique_ptr<InferredDecoder>(new InferredDecoder(std::move(impl)));
}

Result<size_t> InferredDecoder::Decode(std::span<const Message> messages,
                                       std::vector<DecodeError>* errors) {
  Impl& d = *impl_;
  errors->clear();
  // Pass 1: the schema, and which messages are valid.
  d.inferrer.Reset();
  std::vector<uint8_t> good(messages.size(), 0);
  od::document doc;
  od::object obj;
  std::string reason;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!OpenObject(d.reader, messages[i].value, &doc, &obj, &reason)) {
      errors->push_back({i, std::move(reason)});
      continue;
    }
    d.filler.set_document(&doc);
    if (!d.inferrer.ObserveMessage(obj, &reason)) {
      errors->push_back({i, std::move(reason)});
      continue;
    }
    if (!CloseDocument(&doc, &reason)) {
      d.inferrer.Undo();
      errors->push_back({i, std::move(reason)});
      continue;
    }
    good[i] = 1;
  }
  // The table.
  const InferNode& root = d.inferrer.root();
  std::string cols;
  for (size_t i = 0; i < root.names.size(); ++i) {
    cols += fmt::format("{} {}, ", duck::QuoteIdentifier(root.names[i]),
                        root.fields[i]->Sql(InferredTypes::kNested));
  }
  cols +=
      "\"kafka_topic\" VARCHAR, \"kafka_partition\" INTEGER, \"kafka_offset\" BIGINT, "
      "\"kafka_timestamp\" TIMESTAMPTZ, \"kafka_key\" BLOB";
  d.schema_sql = cols;
  std::optional<duck::Appender> app;
  std::vector<duck::LogicalType> types;
  const bool rebuild = !d.builder || d.built_for != d.schema_sql;
  if (d.options.in_memory) {
    // The previous batch's chunks are about to be reused or freed: the view lets go first.
    if (d.view) d.view->SetChunks({});
    if (rebuild) {
      std::vector<std::string> names = root.names;
      for (size_t i = 0; i < root.names.size(); ++i)
        types.push_back(root.fields[i]->Type(InferredTypes::kNested));
      for (std::string_view k : kKafkaColumns) names.emplace_back(k);
      types.push_back(duck::LogicalType::Varchar());
      types.push_back(duck::LogicalType::Integer());
      types.push_back(duck::LogicalType::BigInt());
      types.push_back(duck::LogicalType::TimestampTz());
      types.push_back(duck::LogicalType::Blob());
      if (d.view) {
        RETURN_IF_ERROR(d.view->SetColumns(names, types));
      } else {
        ASSIGN_OR_RETURN(d.view, duck::ChunkView::Create(*d.conn, d.options.table, names, types));
      }
      std::vector<duck::LogicalType> copies;
      for (const duck::LogicalType& t : types) copies.push_back(t.Copy());
      d.pool = std::make_unique<ChunkPool>(std::move(copies));
    } else {
      d.pool->Recycle();
    }
  } else {
    RETURN_IF_ERROR(d.conn->Execute(fmt::format("CREATE OR REPLACE TABLE {} ({})",
                                                duck::QuoteIdentifier(d.options.table), cols)));
    ASSIGN_OR_RETURN(app, duck::Appender::Open(*d.conn, d.options.table));
    if (rebuild) types = app->ColumnTypes();
  }
  if (rebuild) {
    std::vector<Slot> slots;
    for (size_t i = 0; i < root.names.size(); ++i) {
      slots.push_back(BuildSlot(types[i], root.names[i], types[i].ToSql()));
    }
    ASSIGN_OR_RETURN(duck::DataChunk chunk, duck::DataChunk::Create(types));
    d.builder.reset();
    d.builder = std::make_unique<ChunkBuilder>(std::move(chunk), std::move(slots));
    d.built_for = d.schema_sql;
    d.json_columns = root.names.size();
  }
  // Pass 2: the rows.
  ChunkBuilder& b = *d.builder;
  const size_t k = d.json_columns;
  size_t appended = 0;
  // The kafka_ columns of the chunk being built, bound again whenever the chunk changes.
  struct {
    Vector topic, key;
    int32_t* partition;
    int64_t *offset, *timestamp;
    uint64_t *timestamp_valid, *key_valid;
  } kc;
  auto bind = [&] {
    duck::DataChunk& chunk = b.chunk();
    kc.topic = chunk.column(k);
    kc.partition = chunk.column(k + 1).data<int32_t>();
    kc.offset = chunk.column(k + 2).data<int64_t>();
    kc.timestamp = chunk.column(k + 3).data<int64_t>();
    kc.timestamp_valid = chunk.column(k + 3).validity();
    kc.key = chunk.column(k + 4);
    kc.key_valid = kc.key.validity();
  };
  bind();
  auto flush = [&]() -> Status {
    appended += b.rows();
    if (!app) {
      RETURN_IF_ERROR(d.pool->Hold(b));
    } else {
      RETURN_IF_ERROR(b.Finish());
      RETURN_IF_ERROR(app->Append(b.chunk()));
      b.Reset();
    }
    bind();
    return Status::OK();
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!good[i]) continue;
    const Message& m = messages[i];
    if (!OpenObject(d.reader, m.value, &doc, &obj, &reason)) {
      errors->push_back({i, std::move(reason)});
      continue;
    }
    d.filler.set_document(&doc);
    d.filler.error().Clear();
    b.MarkRow();
    if (!d.filler.FillObject(obj, b.slots(), b.sorted(), b.rows(), 0)) {
      errors->push_back({i, d.filler.error().Reason()});
      b.RollbackRow();
      continue;
    }
    const uint64_t row = b.rows();
    kc.topic.AssignString(row, m.topic);
    kc.partition[row] = m.partition;
    kc.offset[row] = m.offset;
    if (m.timestamp_ms == -1) {
      Vector::SetInvalid(kc.timestamp_valid, row);
    } else {
      kc.timestamp[row] = m.timestamp_ms * 1000;
      Vector::SetValid(kc.timestamp_valid, row);
    }
    if (m.key.data() == nullptr) {
      Vector::SetInvalid(kc.key_valid, row);
    } else {
      kc.key.AssignString(row, m.key);
      Vector::SetValid(kc.key_valid, row);
    }
    b.CommitRow();
    if (b.full()) RETURN_IF_ERROR(flush());
  }
  if (b.rows() > 0) RETURN_IF_ERROR(flush());
  if (app) {
    RETURN_IF_ERROR(app->Flush());
  } else {
    d.pool->Trim();
    d.view->SetChunks(d.pool->batch());
  }
  d.reader.Shrink();
  std::sort(errors->begin(), errors->end(),
            [](const DecodeError& a, const DecodeError& b) { return a.index < b.index; });
  return appended;
}

}  // namespace sluice::json
