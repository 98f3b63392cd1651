// MakeSink: the sink a pipeline file's sink section describes (pipeline.sink,
// window.sink, a table manager's sink, on_error.dlq), made from src/sinks.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>

#include "base/status.h"
#include "pipeline/pipeline_config.h"
#include "sinks/sink.h"

namespace sluice::pipeline {

// `console`: the console sink's stream. `source`: the pipeline's, for a sink that records
// the offsets it holds (iceberg); `memory_limit_bytes`: its DuckDB's, for a sink that
// stages rows there (iceberg). An iceberg sink without a warehouse takes
// $SLUICE_WAREHOUSE.
Result<std::unique_ptr<sinks::Sink>> MakeSink(const SinkConfig& config, std::FILE* console,
                                              const KafkaSourceConfig* source = nullptr,
                                              int64_t memory_limit_bytes = 0);

}  // namespace sluice::pipeline
