// LostTransactions: what an exactly-once pipeline does when its sink's transaction was lost
// (sinks::Sink::TransactionLost: a rebalance the member missed, the broker's transaction
// timeout, another abortable error; docs/design/0006 #12), as Kafka Streams does on a
// TaskMigratedException: the transaction is already aborted, so count it, rewind the
// source to the group's committed offsets (dropping what was read after them) and go on,
// waiting a little longer each time it happens again before a batch commits. Past
// `max_in_a_row` losses without a commit between them the pipeline stops with the last
// one: a cause that does not go away (a member refused by the group for good, batches
// always slower than transaction.timeout.ms) is not retried for ever.
//
// Lifecycle: one per PipelineRunner::Run, used on the runner's thread.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"
#include "pipeline/runner_metrics.h"
#include "pipeline/source.h"

namespace sluice::pipeline {

struct LostTransactionPolicy {
  // Losses in a row (no batch committed between them) that are retried; one more stops.
  int max_in_a_row = 6;
  // The wait before the next batch after the 2nd loss in a row, doubled at each further
  // one up to `max_backoff`. (The 1st is retried at once: a rebalance the member missed
  // is the common cause, and the rejoin is the source's next NextBatch.)
  std::chrono::milliseconds first_backoff{500};
  std::chrono::milliseconds max_backoff{15000};
  // The longest the rewind's OffsetFetch and seek take.
  std::chrono::milliseconds rewind_timeout{30000};
};

class LostTransactions {
 public:
  // `metrics` must outlive this.
  LostTransactions(std::string pipeline, const RunnerMetrics* metrics,
                   LostTransactionPolicy policy = {})
      : pipeline_(std::move(pipeline)), metrics_(metrics), policy_(policy) {}

  // `error` failed a batch (or its commit) and `cause` is the sink's TransactionLost (not
  // empty): counts and logs the abort, rewinds `source`, and returns how long to wait
  // before the next batch. An error when the pipeline must stop instead: too many in a
  // row, or the rewind failed.
  Result<std::chrono::milliseconds> Recover(const Status& error, std::string_view cause,
                                            Source& source);
  // A batch with records committed: the next loss is the first in a row again.
  void Committed() { in_a_row_ = 0; }

  // The wait after the `n`th loss in a row (n >= 1).
  static std::chrono::milliseconds Backoff(int n, const LostTransactionPolicy& policy);

 private:
  const std::string pipeline_;
  const RunnerMetrics* metrics_;
  const LostTransactionPolicy policy_;
  int in_a_row_ = 0;
};

}  // namespace sluice::pipeline
