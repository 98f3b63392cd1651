// RunnerMetrics::Register (runner_metrics.h): the names and help texts of a pipeline's
// metrics.
#include "pipeline/runner_metrics.h"

namespace sluice::pipeline {
namespace {

// The causes of sinks::Sink::TransactionLost, in txn_aborts_by_cause's order.
constexpr std::string_view kLossCauses[] = {"rebalance", "timeout", "abortable"};

}  // namespace

Counter& RunnerMetrics::txn_aborts(std::string_view cause) const {
  for (size_t i = 0; i < std::size(kLossCauses); ++i) {
    if (kLossCauses[i] == cause) return *txn_aborts_by_cause[i];
  }
  return *txn_aborts_by_cause.back();
}

RunnerMetrics RunnerMetrics::Register(MetricsRegistry& m, const std::string& name) {
  RunnerMetrics r;
  r.registry = &m;
  MetricLabels labels = {{"pipeline", name}};
  r.messages_in =
      &m.GetCounter("sluice_pipeline_messages_in_total", "Messages read from the source", labels);
  r.bytes_in = &m.GetCounter("sluice_pipeline_bytes_in_total",
                             "Message value bytes read from the source", labels);
  r.rows_out = &m.GetCounter("sluice_pipeline_rows_out_total", "Rows written to the sink", labels);
  r.commits =
      &m.GetCounter("sluice_pipeline_commits_total", "Offset commits after a sink flush", labels);
  r.read_ahead_full =
      &m.GetCounter("sluice_pipeline_read_ahead_full_total",
                    "Times the read-ahead reached its bound (prefetch x max_bytes)", labels);
  r.read_ahead = &m.GetGauge("sluice_pipeline_read_ahead_bytes",
                             "Message bytes fetched and not yet in a batch", labels);
  for (ErrorPhase phase : kErrorPhases) {
    r.errors_by_phase[static_cast<size_t>(phase)] =
        &m.GetCounter("sluice_pipeline_errors_total", "Errors by phase",
                      {{"pipeline", name}, {"phase", std::string(Name(phase))}});
  }
  r.batch_seconds =
      &m.GetHistogram("sluice_pipeline_batch_seconds",
                      "Time to decode, run the handler on and flush one batch", labels);
  r.flush_seconds =
      &m.GetHistogram("sluice_pipeline_sink_flush_seconds", "Sink flush time", labels);
  r.commit_seconds =
      &m.GetHistogram("sluice_pipeline_sink_commit_seconds",
                      "Commit time of a sink durable at its own commit (iceberg)", labels);
  r.commit_max_seconds =
      &m.GetGauge("sluice_pipeline_sink_commit_max_seconds",
                  "The longest commit of a sink durable at its own commit", labels);
  for (size_t i = 0; i < std::size(kLossCauses); ++i) {
    r.txn_aborts_by_cause[i] = &m.GetCounter(
        "sluice_pipeline_txn_aborts_total",
        "Exactly-once transactions lost and aborted, by cause (rebalance: the group refused a "
        "member no longer in its generation; timeout: the broker aborted it at "
        "transaction.timeout.ms; abortable: another abortable error); each one re-read from "
        "the group's committed offsets",
        {{"pipeline", name}, {"cause", std::string(kLossCauses[i])}});
  }
  r.rewinds = &m.GetCounter("sluice_pipeline_source_rewinds_total",
                            "Times the source was rewound to the group's committed offsets "
                            "after a lost transaction",
                            labels);
  return r;
}

}  // namespace sluice::pipeline
