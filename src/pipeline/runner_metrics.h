// RunnerMetrics: a pipeline's metrics (sluice_pipeline_*, labelled pipeline=<name>),
// registered once at Create; the counters the hot path bumps are plain pointers.
// ProgressReporter (progress.h) keeps the per-second gauges.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "base/metrics.h"
#include "pipeline/error_phase.h"

namespace sluice::pipeline {

struct RunnerMetrics {
  // Registers every metric of pipeline `name` in `registry` (which must outlive them).
  static RunnerMetrics Register(MetricsRegistry& registry, const std::string& name);

  // sluice_pipeline_errors_total{phase}.
  Counter& errors(ErrorPhase phase) const { return *errors_by_phase[static_cast<size_t>(phase)]; }
  // sluice_pipeline_txn_aborts_total{cause}: exactly-once transactions lost (a cause of
  // sinks::Sink::TransactionLost: rebalance, timeout, abortable; anything else counts as
  // abortable).
  Counter& txn_aborts(std::string_view cause) const;

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
  std::array<Counter*, 3> txn_aborts_by_cause{};  // rebalance, timeout, abortable
  Counter* rewinds = nullptr;                     // the source rewound after a lost transaction
};

}  // namespace sluice::pipeline
