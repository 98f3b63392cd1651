// FramedDecoder (framed_decoder.h): the batch's chunks filled by the DecoderPlans of its
// columns, shown through a view (or appended to a table).
#include "schema/framed_decoder.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/logging.h"
#include "duck/appender.h"
#include "duck/chunk_view.h"
#include "duck/data_chunk.h"
#include "schema/key_column.h"
#include "schema/protobuf/protobuf_format.h"

namespace sluice::schema {

using json::DecodeError;
using kafka::client::Message;

namespace {
const Logger kLog("schema");
}  // namespace

struct FramedDecoder::Impl {
  duck::Connection* conn = nullptr;
  std::shared_ptr<SchemaSource> source;
  FramedOptions options;
  bool inferred = false;

  // The decoded columns' plans; for the inferred handlers the kafka_ columns follow them.
  std::unique_ptr<DecoderPlans> plans;
  std::vector<std::string> names;
  std::vector<duck::LogicalType> types;
  std::string schema_sql;
  // The chunk column of each of the plans' columns.
  std::vector<size_t> value_index;
  // Decoded keys (key_format): the decoder and its chunk column (kafka_key).
  std::unique_ptr<KeyColumn> key;
  size_t key_index = 0;

  // The batch: chunks held for the view (or appended to the table), spares to reuse.
  std::vector<duck::DataChunk> held, spare;
  std::unique_ptr<duck::ChunkView> view;

  // json_schema: the JSON decoders over the payloads.
  std::unique_ptr<json::StructuredDecoder> json_structured;
  std::unique_ptr<json::InferredDecoder> json_inferred;
  std::vector<Message> stripped;
  std::vector<size_t> stripped_index;

  // Keys are decoded (key_format) unless no key schema could be found when the columns
  // were fixed (keys_as_bytes: kafka_key holds the bytes for the run).
  bool decode_keys() const { return options.key_format != PayloadFormat::kJson && !keys_as_bytes; }
  bool keys_as_bytes = false;
  Status UseColumns(ReaderShape reader);
  Status InitFromLatest();
  Status InitKeyFromLatest();
  Status InitFromBatch(std::span<const Message> messages, size_t i);
  Status InitValue(const Message& m);
  Result<std::unique_ptr<KeyColumn>> KeyFromFramed(std::string_view framed_key);
  Result<duck::DataChunk> NewChunk();
  void BindValues(RowDecoder* dec, const duck::DataChunk& chunk) const;
  Status Hold(duck::DataChunk chunk, RowDecoder* dec, RowDecoder* key_dec, uint64_t rows);
  void WriteKafkaColumns(duck::DataChunk& chunk, uint64_t row, const Message& m);
  Result<size_t> DecodeJsonSchema(std::span<const Message> messages,
                                  std::vector<DecodeError>* errors);
};

FramedDecoder::FramedDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FramedDecoder::~FramedDecoder() = default;

const std::string& FramedDecoder::schema_sql() const {
  if (impl_->json_inferred) return impl_->json_inferred->schema_sql();
  return impl_->schema_sql;
}

Result<std::unique_ptr<FramedDecoder>> FramedDecoder::Create(duck::Connection& conn,
                                                             std::shared_ptr<SchemaSource> source,
                                                             FramedOptions options) {
  if (options.format == PayloadFormat::kJson) {
    return InvalidArgumentError("FramedDecoder decodes framed formats, not plain json");
  }
  auto impl = std::make_unique<Impl>();
  Impl& d = *impl;
  d.conn = &conn;
  d.source = std::move(source);
  d.inferred = options.table.empty();
  d.options = std::move(options);
  if (d.options.format == PayloadFormat::kJsonSchema) {
    if (d.inferred) {
      ASSIGN_OR_RETURN(d.json_inferred,
                       json::InferredDecoder::Create(conn, {.table = d.options.inferred_table,
                                                            .in_memory = d.options.in_memory}));
    } else {
      ASSIGN_OR_RETURN(d.json_structured,
                       json::StructuredDecoder::Create(conn, d.options.table, {.in_memory = true}));
    }
  } else if (!d.inferred) {
    // The declared table's columns, shown through a view of its name.
    ASSIGN_OR_RETURN(std::vector<duck::TableColumn> table,
                     duck::DescribeTable(conn, d.options.table));
    if (table.empty()) return InvalidArgumentError("table '{}' has no columns", d.options.table);
    std::vector<Column> columns;
    bool key_column = false;
    for (duck::TableColumn& c : table) {
      d.names.push_back(c.name);
      d.types.push_back(c.type.Copy());
      if (d.decode_keys() && c.name == "kafka_key") {
        // The key, decoded by the column's type; the value's fields go to the others.
        ASSIGN_OR_RETURN(d.key, KeyColumn::FromType(d.source, d.options.key_format, c.type));
        d.key_index = d.names.size() - 1;
        key_column = true;
        continue;
      }
      d.value_index.push_back(d.names.size() - 1);
      columns.push_back({c.name, std::move(c.type)});
    }
    if (d.decode_keys() && !key_column) {
      return InvalidArgumentError(
          "key_format {} decodes each key into the column kafka_key, which table '{}' lacks",
          PayloadFormatName(d.options.key_format), d.options.table);
    }
    if (columns.empty()) {
      return InvalidArgumentError("table '{}' has no columns but kafka_key", d.options.table);
    }
    ASSIGN_OR_RETURN(d.view, duck::ChunkView::Create(conn, d.options.table, d.names, d.types));
    d.plans =
        std::make_unique<DecoderPlans>(d.source, d.options.format, std::move(columns), nullptr);
  } else {
    // The subject's latest schema now, when it has one: the handler's SQL binds to its
    // columns from the first batch on.
    if (d.decode_keys()) RETURN_IF_ERROR(d.InitKeyFromLatest());
    RETURN_IF_ERROR(d.InitFromLatest());
  }
  return std::unique_ptr<FramedDecoder>(new FramedDecoder(std::move(impl)));
}

// Inferred: the reader's columns and the kafka_ columns, the view over them.
Status FramedDecoder::Impl::UseColumns(ReaderShape reader) {
  for (const Column& c : reader.columns) {
    value_index.push_back(names.size());
    names.push_back(c.name);
    types.push_back(c.type.Copy());
    schema_sql += fmt::format("{}{} {}", schema_sql.empty() ? "" : ", ",
                              duck::QuoteIdentifier(c.name), c.type.ToSql());
  }
  key_index = names.size() + 4;
  const std::pair<const char*, duck::LogicalType> kafka[] = {
      {"kafka_topic", duck::LogicalType::Varchar()},
      {"kafka_partition", duck::LogicalType::Integer()},
      {"kafka_offset", duck::LogicalType::BigInt()},
      {"kafka_timestamp", duck::LogicalType::TimestampTz()},
      {"kafka_key", key ? key->type().Copy() : duck::LogicalType::Blob()}};
  for (const auto& [name, type] : kafka) {
    names.push_back(name);
    types.push_back(type.Copy());
    schema_sql += fmt::format(", {} {}", name, type.ToSql());
  }
  if (options.in_memory) {
    ASSIGN_OR_RETURN(view, duck::ChunkView::Create(*conn, options.inferred_table, names, types));
  }
  plans = std::make_unique<DecoderPlans>(source, options.format, std::move(reader.columns),
                                         std::move(reader.avro));
  return Status::OK();
}

namespace {

// The reader schema of `format` a subject's latest version gives; nullopt when the subject
// has none.
Result<std::optional<ReaderShape>> LatestReader(SchemaSource& source, std::string_view subject,
                                                PayloadFormat format) {
  Result<std::shared_ptr<const SchemaRecord>> latest = source.Latest(subject);
  if (!latest.ok()) {
    if (latest.status().code() == StatusCode::kNotFound) return std::optional<ReaderShape>();
    return latest.status();
  }
  const SchemaType want =
      format == PayloadFormat::kAvro ? SchemaType::kAvro : SchemaType::kProtobuf;
  if ((*latest)->type != want) {
    return InvalidArgumentError("subject '{}' holds {} schemas, not {}", subject,
                                registry::SchemaTypeName((*latest)->type),
                                registry::SchemaTypeName(want));
  }
  ASSIGN_OR_RETURN(ReaderShape reader, ReaderOf(**latest, {}));
  return std::optional<ReaderShape>(std::move(reader));
}

}  // namespace

Status FramedDecoder::Impl::InitFromLatest() {
  // Decoded keys need their reader too before the columns are fixed.
  if (options.subject.empty() || (decode_keys() && key == nullptr)) return Status::OK();
  ASSIGN_OR_RETURN(std::optional<ReaderShape> reader,
                   LatestReader(*source, options.subject, options.format));
  return reader ? UseColumns(std::move(*reader)) : Status::OK();
}

// Inferred, decoded keys: the key subject's latest schema is the kafka_key column's.
Status FramedDecoder::Impl::InitKeyFromLatest() {
  if (options.key_subject.empty()) return Status::OK();
  Result<std::optional<ReaderShape>> latest =
      LatestReader(*source, options.key_subject, options.key_format);
  if (!latest.ok()) {
    return Status(latest.status().code(),
                  fmt::format("key_format {}: {}", PayloadFormatName(options.key_format),
                              latest.status().message()));
  }
  std::optional<ReaderShape> reader = std::move(latest).value();
  if (!reader) return Status::OK();
  Result<std::unique_ptr<KeyColumn>> k =
      KeyColumn::FromReader(source, options.key_format, std::move(*reader));
  if (!k.ok()) {
    return InvalidArgumentError("key subject '{}': {}", options.key_subject, k.status().message());
  }
  key = std::move(k).value();
  return Status::OK();
}

// Inferred, no reader yet: the first framed message's own schemas are the readers (its
// key's when keys are decoded and the key subject had none).
// The key column a framed key's own schema gives; null when the key is not framed, names
// an unknown id or a schema of another format.
Result<std::unique_ptr<KeyColumn>> FramedDecoder::Impl::KeyFromFramed(std::string_view framed_key) {
  int32_t id = 0;
  std::string_view rest;
  std::string reason;
  if (!ReadFraming(framed_key, &id, &rest, &reason)) return std::unique_ptr<KeyColumn>();
  Result<std::shared_ptr<const SchemaRecord>> rec = source->ById(id);
  if (!rec.ok()) {
    if (rec.status().code() == StatusCode::kNotFound) return std::unique_ptr<KeyColumn>();
    return rec.status();
  }
  const SchemaType want =
      options.key_format == PayloadFormat::kAvro ? SchemaType::kAvro : SchemaType::kProtobuf;
  if ((*rec)->type != want) return std::unique_ptr<KeyColumn>();
  std::vector<int> indexes;
  size_t consumed = 0;
  if (want == SchemaType::kProtobuf &&
      !protobuf::ReadMessageIndexes(rest, &indexes, &consumed, &reason)) {
    return std::unique_ptr<KeyColumn>();
  }
  Result<ReaderShape> reader = ReaderOf(**rec, indexes);
  if (!reader.ok()) return std::unique_ptr<KeyColumn>();
  Result<std::unique_ptr<KeyColumn>> k =
      KeyColumn::FromReader(source, options.key_format, std::move(reader).value());
  if (!k.ok()) return std::unique_ptr<KeyColumn>();
  return k;
}

// Inferred, no reader yet: the value subject's latest schema, else message i's own; and
// for decoded keys the key subject's, else the first framed key of the batch from i on —
// else the keys stay bytes for the run (a topic whose keys are all null decodes).
Status FramedDecoder::Impl::InitFromBatch(std::span<const Message> messages, size_t i) {
  bool key_missing = false;
  if (decode_keys() && key == nullptr) {
    RETURN_IF_ERROR(InitKeyFromLatest());
    for (size_t j = i; key == nullptr && j < messages.size(); ++j) {
      ASSIGN_OR_RETURN(key, KeyFromFramed(messages[j].key));
    }
    // Bytes, if the value's columns are fixed now (else the next batch looks again).
    key_missing = key == nullptr;
    keys_as_bytes = key_missing;
  }
  Status st = InitValue(messages[i]);
  if (key_missing && plans == nullptr) {
    keys_as_bytes = false;
  } else if (key_missing) {
    SLUICE_LOG(kLog, kWarn,
               "key_format {}: the key subject '{}' has no schema and no key of the first "
               "batch names one: kafka_key holds the keys' bytes for this run",
               PayloadFormatName(options.key_format), options.key_subject);
  }
  return st;
}

// The value's reader: the value subject's latest schema (when the columns waited for the
// key's), else the message's own.
Status FramedDecoder::Impl::InitValue(const Message& m) {
  int32_t id = 0;
  std::string_view rest;
  std::string reason;
  if (options.key_format != PayloadFormat::kJson && !options.subject.empty()) {
    // The columns waited for the key's reader: the value subject's latest is the reader.
    Result<std::shared_ptr<const SchemaRecord>> latest = source->Latest(options.subject);
    if (latest.ok()) return InitFromLatest();
    if (latest.status().code() != StatusCode::kNotFound) return latest.status();
  }
  const std::string_view value = m.value;
  if (!ReadFraming(value, &id, &rest, &reason)) return Status::OK();
  Result<std::shared_ptr<const SchemaRecord>> rec = source->ById(id);
  if (!rec.ok()) return rec.status().code() == StatusCode::kNotFound ? Status::OK() : rec.status();
  const SchemaType want =
      options.format == PayloadFormat::kAvro ? SchemaType::kAvro : SchemaType::kProtobuf;
  if ((*rec)->type != want) return Status::OK();
  std::vector<int> indexes;
  if (want == SchemaType::kProtobuf) {
    size_t consumed = 0;
    indexes.clear();
    if (!protobuf::ReadMessageIndexes(rest, &indexes, &consumed, &reason)) return Status::OK();
  }
  Result<ReaderShape> reader = ReaderOf(**rec, indexes);
  if (!reader.ok()) return Status::OK();  // the message's own error says why
  return UseColumns(std::move(reader).value());
}

Result<duck::DataChunk> FramedDecoder::Impl::NewChunk() {
  if (!spare.empty()) {
    duck::DataChunk c = std::move(spare.back());
    spare.pop_back();
    c.Reset();
    return c;
  }
  return duck::DataChunk::Create(types);
}

void FramedDecoder::Impl::BindValues(RowDecoder* dec, const duck::DataChunk& chunk) const {
  std::vector<duck::Vector> columns;
  columns.reserve(value_index.size());
  for (size_t i : value_index) columns.push_back(chunk.column(i));
  dec->BindVectors(columns);
}

Status FramedDecoder::Impl::Hold(duck::DataChunk chunk, RowDecoder* dec, RowDecoder* key_dec,
                                 uint64_t rows) {
  if (dec != nullptr) RETURN_IF_ERROR(dec->Finish(rows));
  if (key_dec != nullptr) RETURN_IF_ERROR(key_dec->Finish(rows));
  chunk.SetSize(rows);
  held.push_back(std::move(chunk));
  return Status::OK();
}

void FramedDecoder::Impl::WriteKafkaColumns(duck::DataChunk& chunk, uint64_t row,
                                            const Message& m) {
  const size_t k = plans->columns().size();
  chunk.column(k).AssignString(row, m.topic);
  chunk.column(k + 1).data<int32_t>()[row] = m.partition;
  chunk.column(k + 2).data<int64_t>()[row] = m.offset;
  if (m.timestamp_ms >= 0) {
    chunk.column(k + 3).data<int64_t>()[row] = m.timestamp_ms * 1000;
  } else {
    chunk.column(k + 3).SetNull(row);
  }
  if (key != nullptr) return;  // decoded
  if (m.key.data() != nullptr) {
    chunk.column(k + 4).AssignString(row, m.key);
  } else {
    chunk.column(k + 4).SetNull(row);
  }
}

Result<size_t> FramedDecoder::Decode(std::span<const Message> messages,
                                     std::vector<DecodeError>* errors) {
  Impl& d = *impl_;
  errors->clear();
  if (d.options.format == PayloadFormat::kJsonSchema) return d.DecodeJsonSchema(messages, errors);
  if (d.view) d.view->SetChunks({});
  for (duck::DataChunk& c : d.held) d.spare.push_back(std::move(c));
  d.held.clear();
  std::optional<duck::DataChunk> chunk;
  RowDecoder* bound = nullptr;
  RowDecoder* key_bound = nullptr;
  uint64_t rows = 0;
  size_t total = 0;
  std::string reason;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    if (d.plans == nullptr) RETURN_IF_ERROR(d.InitFromBatch(messages, i));
    if (d.plans == nullptr) {
      // No schema to read with yet: this message's own problem says why.
      int32_t id = 0;
      std::string_view rest;
      if (ReadFraming(m.value, &id, &rest, &reason)) {
        reason = fmt::format("schema id {} is unknown to {} (or not {})", id, d.source->Describe(),
                             PayloadFormatName(d.options.format));
      }
      errors->push_back({i, std::move(reason)});
      continue;
    }
    std::string_view payload;
    ASSIGN_OR_RETURN(RowDecoder * dec, d.plans->For(m.value, &payload, &reason));
    if (dec == nullptr) {
      errors->push_back({i, std::move(reason)});
      continue;
    }
    RowDecoder* key_dec = nullptr;
    std::string_view key_payload;
    if (d.key != nullptr && m.key.data() != nullptr) {
      ASSIGN_OR_RETURN(key_dec, d.key->For(m.key, &key_payload, &reason));
      if (key_dec == nullptr) {
        errors->push_back({i, std::move(reason)});
        continue;
      }
    }
    if (!chunk) {
      ASSIGN_OR_RETURN(chunk, d.NewChunk());
      bound = nullptr;
      key_bound = nullptr;
      rows = 0;
    }
    if (bound != dec || (key_dec != nullptr && key_bound != nullptr && key_dec != key_bound)) {
      // Another writer schema: its decoder keeps its own list sizes, so it gets a chunk of
      // its own.
      if (rows > 0) {
        RETURN_IF_ERROR(d.Hold(std::move(*chunk), bound, key_bound, rows));
        ASSIGN_OR_RETURN(chunk, d.NewChunk());
        rows = 0;
      }
      key_bound = nullptr;
      bound = dec;
      d.BindValues(bound, *chunk);
    }
    if (key_dec != nullptr && key_bound == nullptr) {
      // The rows before had no key (NULL cells, no list entries): binding now is as before.
      key_bound = key_dec;
      d.key->Bind(key_bound, chunk->column(d.key_index));
    }
    if (d.key != nullptr) {
      const duck::Vector column = chunk->column(d.key_index);
      if (key_dec == nullptr) {
        SetNullCell(column, d.key->type(), rows);
      } else if (!d.key->Decode(key_dec, key_payload, column, rows, &reason)) {
        errors->push_back({i, std::move(reason)});
        continue;
      }
    }
    if (!bound->Decode(payload, rows, &reason)) {
      // The key's list entries at this row, if any, stay behind unused.
      errors->push_back({i, std::move(reason)});
      continue;
    }
    if (d.inferred) d.WriteKafkaColumns(*chunk, rows, m);
    ++rows;
    ++total;
    if (rows == duck::DataChunk::Capacity()) {
      RETURN_IF_ERROR(d.Hold(std::move(*chunk), bound, key_bound, rows));
      chunk.reset();
    }
  }
  if (chunk && rows > 0) {
    RETURN_IF_ERROR(d.Hold(std::move(*chunk), bound, key_bound, rows));
  } else if (chunk) {
    d.spare.push_back(std::move(*chunk));
  }
  while (d.spare.size() > 4) d.spare.pop_back();
  if (d.view) {
    std::vector<const duck::DataChunk*> chunks;
    for (const duck::DataChunk& c : d.held) chunks.push_back(&c);
    d.view->SetChunks(chunks);
    return total;
  }
  if (d.plans == nullptr) return size_t{0};
  // InferredDiskBatch: a table, recreated for each batch, the chunks appended.
  RETURN_IF_ERROR(
      d.conn->Execute(fmt::format("CREATE OR REPLACE TABLE {} ({})",
                                  duck::QuoteIdentifier(d.options.inferred_table), d.schema_sql)));
  ASSIGN_OR_RETURN(duck::Appender app, duck::Appender::Open(*d.conn, d.options.inferred_table));
  for (const duck::DataChunk& c : d.held) RETURN_IF_ERROR(app.Append(c));
  RETURN_IF_ERROR(app.Flush());
  return total;
}

Result<size_t> FramedDecoder::Impl::DecodeJsonSchema(std::span<const Message> messages,
                                                     std::vector<DecodeError>* errors) {
  stripped.clear();
  stripped_index.clear();
  std::string reason;
  for (size_t i = 0; i < messages.size(); ++i) {
    int32_t id = 0;
    std::string_view rest;
    if (!ReadFraming(messages[i].value, &id, &rest, &reason)) {
      errors->push_back({i, std::move(reason)});
      continue;
    }
    Result<std::shared_ptr<const SchemaRecord>> rec = source->ById(id);
    if (!rec.ok()) {
      if (rec.status().code() != StatusCode::kNotFound) return rec.status();
      errors->push_back({i, fmt::format("schema id {} is unknown to {}", id, source->Describe())});
      continue;
    }
    if ((*rec)->type != SchemaType::kJson) {
      errors->push_back({i, fmt::format("schema id {} is {}, not JSON", id,
                                        registry::SchemaTypeName((*rec)->type))});
      continue;
    }
    Message m = messages[i];
    m.value = rest;
    stripped.push_back(m);
    stripped_index.push_back(i);
  }
  std::vector<DecodeError> inner;
  Result<size_t> rows = json_structured ? json_structured->Decode(stripped, &inner)
                                        : json_inferred->Decode(stripped, &inner);
  if (!rows.ok()) return rows.status();
  for (DecodeError& e : inner) errors->push_back({stripped_index[e.index], std::move(e.reason)});
  std::sort(errors->begin(), errors->end(),
            [](const DecodeError& a, const DecodeError& b) { return a.index < b.index; });
  return *rows;
}

}  // namespace sluice::schema
