// RunnerMetrics: a pipeline's metrics (sluice_pipeline_*, labelled pipeline=<name>),
// registered once at Create; the counters the hot path bumps are plain pointers.
// ProgressReporter (progress.h) keeps the per-second gauges.
#pragma once

#include <array>
#include <string>

#include "base/metrics.h"
#include "pipeline/error_phase.h"

namespace sluice::pipeline {

struct RunnerMetrics {
  // Registers every metric of pipeline `name` in `registry` (which must outlive them).
  static RunnerMetrics Register(MetricsRegistry& registry, const std::string& name);

  // sluice_pipeline_errors_total{phase}.
  Counter& errors(ErrorPhase phase) const { return *errors_by_phase[static_cast<size_t>(phase)]; }

  MetricsRegistry* registry = nullptr;
  Counter* messages_in = nullptr;
  Counter* bytes_in = nullptr;
  Counter* rows_out = nullptr;
  Counter* commits = nullptr;
  Counter* read_ahead_full = nullptr;
  Gauge* read_ahead = nullptr;
  std::array<Counter*, kErrorPhaseCount> errors_by_phase{};
  Histogram* batch_seconds = nullptr;
  Histogram* flush_seconds = nullptr;
  Histogram* commit_seconds = nullptr;  // a deferring sink's commits
  Gauge* commit_max_seconds = nullptr;
};

}  // namespace sluice::pipeline
