// MakeSink: the sink a pipeline file's sink section describes (pipeline.sink,
// window.sink, a table manager's sink, on_error.dlq), made from src/sinks.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string_view>

#include "base/status.h"
#include "pipeline/pipeline_config.h"
#include "schema/schema_source.h"
#include "sinks/sink.h"

namespace sluice::pipeline {

// `console`: the console sink's stream. `source`: the pipeline's, for a sink that records
// the offsets it holds (iceberg); `memory_limit_bytes`: its DuckDB's, for a sink that
// stages rows there (iceberg). An iceberg sink without a warehouse takes
// $SLUICE_WAREHOUSE.
// `pipeline`: its name (an exactly-once kafka sink's transactional.id). `transaction`: the
// pipeline's sink, when this is its dead-letter sink: a kafka DLQ on the same brokers as
// an exactly-once kafka sink writes into that sink's transactions. `schemas`: the
// registry of this process, for a kafka sink writing avro or protobuf (pipeline/schemas.h).
Result<std::unique_ptr<sinks::Sink>> MakeSink(
    const SinkConfig& config, std::FILE* console, const KafkaSourceConfig* source = nullptr,
    int64_t memory_limit_bytes = 0, std::string_view pipeline = {},
    sinks::Sink* transaction = nullptr, std::shared_ptr<schema::SchemaSource> schemas = nullptr);

}  // namespace sluice::pipeline
