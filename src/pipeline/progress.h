// ProgressReporter: what a running pipeline reports about once a second — the consumer
// lag gauge per partition, every 10 s DuckDB's memory by tag and glibc's heap (and a
// flush of DuckDB's allocators), and the progress line on a terminal:
//   "\r<name>: <in> in, <rate> msg/s, lag <lag>, <out> out, <errors> errors   "
//
// Lifecycle: made by PipelineRunner::Run, used on its thread; the connection must
// outlive it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "duck/database.h"
#include "kafka/client/consumer.h"
#include "pipeline/source.h"

namespace sluice::pipeline {

struct RunnerStats;

class ProgressReporter {
 public:
  // `memory_limit_bytes`: the pipeline's DuckDB limit (0: DuckDB's default, read from it).
  // `progress`: where the progress line goes; null for none.
  ProgressReporter(MetricsRegistry& registry, std::string pipeline, duck::Connection& conn,
                   int64_t memory_limit_bytes, std::FILE* progress);

  // Once a second: `lags` with positions at what the pipeline processed (not read ahead).
  void Report(SteadyTime now, const std::vector<kafka::client::PartitionLag>& lags,
              const RunnerStats& stats);
  // At the end of Run: ends the progress line.
  void Finish();

 private:
  void ReportMemory();

  MetricsRegistry& registry_;
  const std::string pipeline_;
  duck::Connection& conn_;
  std::FILE* progress_;
  std::string memory_limit_;  // DuckDB's, as `SET memory_limit` takes it; "" to not flush
  SteadyTime next_memory_;
  uint64_t last_in_ = 0;
};

}  // namespace sluice::pipeline
