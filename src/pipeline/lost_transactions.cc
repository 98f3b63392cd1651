// LostTransactions (lost_transactions.h): the count, the rewind and the back-off after an
// exactly-once sink lost its transaction.
#include "pipeline/lost_transactions.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/logging.h"
#include "pipeline/loggers.h"

namespace sluice::pipeline {
std::chrono::milliseconds LostTransactions::Backoff(int n, const LostTransactionPolicy& policy) {
  if (n <= 1) return std::chrono::milliseconds(0);
  std::chrono::milliseconds wait = policy.first_backoff;
  for (int i = 2; i < n && wait < policy.max_backoff; ++i) wait *= 2;
  return std::min(wait, policy.max_backoff);
}

Result<std::chrono::milliseconds> LostTransactions::Recover(const Status& error,
                                                            std::string_view cause,
                                                            Source& source) {
  metrics_->txn_aborts(cause).Inc();
  ++in_a_row_;
  if (in_a_row_ > policy_.max_in_a_row) {
    return Status(error.code(),
                  fmt::format("pipeline {}: {} transactions in a row were aborted ({}), "
                              "without a batch committed between them; the last: {}",
                              pipeline_, in_a_row_, cause, error.message()));
  }
  const std::chrono::milliseconds wait = Backoff(in_a_row_, policy_);
  SLUICE_LOG(kLog, kWarn,
             "pipeline {}: the transaction was aborted ({}): {}; re-reading from the group's "
             "committed offsets{} ({} of {} in a row)",
             pipeline_, cause, error.message(),
             wait.count() > 0 ? fmt::format(" in {} ms", wait.count()) : std::string(), in_a_row_,
             policy_.max_in_a_row);
  if (Status st = source.Rewind(policy_.rewind_timeout); !st.ok()) {
    return Status(st.code(), fmt::format("pipeline {}: after an aborted transaction ({}), the "
                                         "source could not rewind to the group's committed "
                                         "offsets: {}",
                                         pipeline_, cause, st.message()));
  }
  metrics_->rewinds->Inc();
  return wait;
}

}  // namespace sluice::pipeline
