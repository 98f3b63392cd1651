// BatchHandler (batch_handler.h): decoding a batch and running the handler's SQL over it.
#include "pipeline/batch_handler.h"

#include <fmt/format.h>

#include "pipeline/sql_text.h"

namespace sluice::pipeline {

Result<std::unique_ptr<BatchHandler>> BatchHandler::Create(
    duck::Connection& conn, const PipelineConfig& c,
    std::shared_ptr<schema::SchemaSource> schemas) {
  std::unique_ptr<BatchHandler> h(new BatchHandler(conn));
  if (c.source.format != MessageFormat::kJson) {
    // Framed messages decoded by their schema ids (docs/design/0022).
    if (schemas == nullptr) {
      return InvalidArgumentError("pipeline {}: source.kafka.format needs a schema registry",
                                  c.name);
    }
    schema::FramedOptions o;
    o.format = c.source.format == MessageFormat::kAvro       ? schema::PayloadFormat::kAvro
               : c.source.format == MessageFormat::kProtobuf ? schema::PayloadFormat::kProtobuf
                                                             : schema::PayloadFormat::kJsonSchema;
    if (c.source.key_format != KeyFormat::kBytes) {
      o.key_format = c.source.key_format == KeyFormat::kAvro ? schema::PayloadFormat::kAvro
                                                             : schema::PayloadFormat::kProtobuf;
      if (!c.source.topics.empty()) o.key_subject = c.source.topics[0] + "-key";
    }
    if (c.handler.type == HandlerType::kStructuredBatch) {
      o.table = c.handler.table;
      h->batch_table_ = c.handler.table;
    } else {
      // The reader schema: the latest version of the first topic's value subject
      // (TopicNameStrategy, the Confluent clients' default).
      if (!c.source.topics.empty()) o.subject = c.source.topics[0] + "-value";
      o.in_memory = c.handler.type == HandlerType::kInferredMemBatch;
      h->inferred_in_memory_ = o.in_memory;
      h->batch_table_ = "batch";
    }
    h->framed_inferred_ = o.table.empty();
    auto dec = schema::FramedDecoder::Create(conn, std::move(schemas), o);
    if (!dec.ok()) {
      return InvalidArgumentError("pipeline {}: source.kafka.format {}: {}", c.name,
                                  schema::PayloadFormatName(o.format), dec.status().message());
    }
    h->framed_ = std::move(dec).value();
  } else if (c.handler.type == HandlerType::kStructuredBatch) {
    // The batch stays in memory, shown to the SQL through a view (docs/design/0005).
    StructuredOptions decoder_options;
    decoder_options.in_memory = true;
    decoder_options.threads = DecodeThreads(c.handler);
    auto dec = StructuredDecoder::Create(conn, c.handler.table, decoder_options);
    if (!dec.ok()) {
      return InvalidArgumentError("pipeline {}: handler.table '{}': {}", c.name, c.handler.table,
                                  dec.status().message());
    }
    h->structured_ = std::move(dec).value();
    h->batch_table_ = c.handler.table;
  } else {
    // InferredDiskBatch keeps a real table, which DuckDB can spill; the in-memory batch
    // is a view over the decoded chunks.
    InferredOptions decoder_options;
    decoder_options.in_memory = c.handler.type == HandlerType::kInferredMemBatch;
    decoder_options.threads = DecodeThreads(c.handler);
    h->inferred_in_memory_ = decoder_options.in_memory;
    ASSIGN_OR_RETURN(h->inferred_, InferredDecoder::Create(conn, decoder_options));
    h->batch_table_ = "batch";
  }
  h->sql_ = StripTrailingSemicolons(c.handler.sql);
  return h;
}

BatchHandler::~BatchHandler() {
  result_view_.reset();
  result_chunks_.clear();
  result_.reset();
  handler_.reset();
  structured_.reset();
  inferred_.reset();
  framed_.reset();
}

Result<size_t> BatchHandler::Decode(std::span<const kafka::client::Message> messages,
                                    std::vector<DecodeError>* errors) {
  if (framed_) return framed_->Decode(messages, errors);
  return structured_ ? structured_->Decode(messages, errors) : inferred_->Decode(messages, errors);
}

Result<uint64_t> BatchHandler::Run() {
  if (result_view_) result_view_->SetChunks({});
  result_chunks_.clear();
  result_.reset();
  if (inferred_ || framed_inferred_) {
    const std::string& schema_sql = inferred_ ? inferred_->schema_sql() : framed_->schema_sql();
    // DuckDB does not notice that the batch's view (or table) was recreated with other
    // columns: a statement prepared over the old ones would read the new chunks with the
    // old types. Prepare again whenever the batch's schema changed, and every batch when
    // the batch is a table recreated each time (InferredDiskBatch).
    if (!inferred_in_memory_ || schema_sql != prepared_schema_) {
      handler_.reset();
      ++batch_generation_;
    }
    prepared_schema_ = schema_sql;
  }
  if (!handler_) {
    ASSIGN_OR_RETURN(handler_, duck::PreparedStatement::Prepare(conn_, sql_));
  }
  Result<duck::QueryResult> ran = handler_->Execute();
  const std::string& error = ran.ok() ? std::string() : ran.status().message();
  if (!ran.ok() && (error.find("Binder Error") != std::string::npos ||
                    error.find("Catalog Error") != std::string::npos)) {
    // Prepared over what an earlier batch looked like: prepare it again, once. (Not for
    // other errors: the handler would run twice over the same batch.)
    handler_.reset();
    ASSIGN_OR_RETURN(handler_, duck::PreparedStatement::Prepare(conn_, sql_));
    ran = handler_->Execute();
  }
  if (!ran.ok()) return ran.status();
  result_.emplace(std::move(ran).value());
  std::vector<std::string> names;
  for (size_t i = 0; i < result_->column_count(); ++i) names.push_back(result_->column_name(i));
  std::vector<duck::LogicalType> types = result_->column_logical_types();
  bool same =
      result_view_ != nullptr && names == result_names_ && types.size() == result_types_.size();
  for (size_t i = 0; same && i < types.size(); ++i) same = types[i].Equals(result_types_[i]);
  if (!same) {
    // A new schema (the first batch, or an inferred one that changed): a new view.
    if (!result_view_) {
      ASSIGN_OR_RETURN(result_view_, duck::ChunkView::Create(conn_, kResultTable, names,
                                                             result_->column_logical_types()));
    } else {
      RETURN_IF_ERROR(result_view_->SetColumns(names, result_->column_logical_types()));
    }
    result_names_ = std::move(names);
    result_types_ = std::move(types);
    ++result_generation_;
  }
  result_chunks_ = result_->TakeChunks();
  uint64_t rows = 0;
  std::vector<const duck::DataChunk*> chunks;
  for (const duck::DataChunk& c : result_chunks_) {
    rows += c.size();
    chunks.push_back(&c);
  }
  result_view_->SetChunks(chunks);
  return rows;
}

void BatchHandler::Forget() {
  if (result_view_) result_view_->SetChunks({});
  result_chunks_.clear();
  result_.reset();
  result_view_.reset();
  result_names_.clear();
  result_types_.clear();
  handler_.reset();
  ++result_generation_;
}

}  // namespace sluice::pipeline
