// BatchHandler: the pipeline's handler over one batch — the decoder that loads the
// messages into DuckDB (StructuredBatch into the declared table, shown as a view;
// InferredMemBatch as a view `batch`; InferredDiskBatch into a table `batch`), then the
// handler's SQL, prepared once (docs/design/0006 #3) and run over it, its result shown
// to the sinks and the window as the view `sluice_handler_result` over the result's
// chunks (no table is made per batch).
//
// Lifecycle: made by the runner's Create, used on its thread; the connection must
// outlive it. A rolled-back transaction may have taken what it made: Forget.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/chunk_view.h"
#include "duck/database.h"
#include "kafka/client/consumer.h"
#include "pipeline/json_decoder.h"
#include "pipeline/pipeline_config.h"
#include "schema/framed_decoder.h"

namespace sluice::pipeline {

class BatchHandler {
 public:
  // The view the result is shown as.
  static constexpr std::string_view kResultTable = "sluice_handler_result";

  // The decoder of `config.handler` on `conn` and its SQL (not prepared yet: the batch's
  // table exists from the first batch on).
  // `schemas`: where source.kafka.format avro, protobuf and json_schema get their schemas
  // (unused for json).
  static Result<std::unique_ptr<BatchHandler>> Create(
      duck::Connection& conn, const PipelineConfig& config,
      std::shared_ptr<schema::SchemaSource> schemas = nullptr);
  ~BatchHandler();
  BatchHandler(const BatchHandler&) = delete;
  BatchHandler& operator=(const BatchHandler&) = delete;

  // Loads `messages` as the batch; the ones it cannot decode go to `errors`.
  Result<size_t> Decode(std::span<const kafka::client::Message> messages,
                        std::vector<DecodeError>* errors);
  // An inferred handler over framed messages none of which has decoded yet: the batch has
  // no columns, so there is nothing to run the SQL on.
  bool NoColumnsYet() const { return framed_inferred_ && framed_->schema_sql().empty(); }
  // Runs the SQL over the batch; its result becomes kResultTable. Returns its rows.
  Result<uint64_t> Run();
  // After a rolled-back transaction: what it may have created is gone.
  void Forget();
  // A table the SQL reads is about to be replaced: prepare the statement again.
  void Unprepare() { handler_.reset(); }

  // The decoded batch's table or view.
  std::string_view batch_table() const { return batch_table_; }
  // Change when the result's (or the batch's) columns may have.
  uint64_t result_generation() const { return result_generation_; }
  uint64_t batch_generation() const { return batch_generation_; }

 private:
  explicit BatchHandler(duck::Connection& conn) : conn_(conn) {}

  duck::Connection& conn_;
  std::unique_ptr<StructuredDecoder> structured_;
  std::unique_ptr<InferredDecoder> inferred_;
  std::unique_ptr<schema::FramedDecoder> framed_;  // source.kafka.format other than json
  bool framed_inferred_ = false;                   // framed_ with an inferred handler
  bool inferred_in_memory_ = false;
  std::string batch_table_;
  std::string sql_;
  std::string prepared_schema_;  // the inferred batch schema the statement was prepared over
  // The chunks may point into the result: declared after it, so destroyed first.
  std::unique_ptr<duck::PreparedStatement> handler_;
  std::optional<duck::QueryResult> result_;
  std::vector<duck::DataChunk> result_chunks_;
  std::vector<std::string> result_names_;
  std::vector<duck::LogicalType> result_types_;
  std::unique_ptr<duck::ChunkView> result_view_;
  uint64_t result_generation_ = 0;
  uint64_t batch_generation_ = 0;
};

}  // namespace sluice::pipeline
