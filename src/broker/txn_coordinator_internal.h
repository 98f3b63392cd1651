// What the transaction coordinator's source files share: the in-memory state of one
// transactional id. Private to txn_coordinator*.cc.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/logging.h"
#include "broker/loggers.h"
#include "broker/txn_coordinator.h"

namespace sluice::broker {

// One transactional id (Kafka's TransactionMetadata). Fields are the durable state;
// `pending` is the state a record being written will make it (Kafka's pendingState),
// during which other changes are refused with CONCURRENT_TRANSACTIONS.
struct TxnCoordinator::Txn {
  std::string id;
  int64_t producer_id = kNoProducerId;
  int64_t previous_producer_id = kNoProducerId;
  int16_t producer_epoch = kNoProducerEpoch;
  int16_t last_producer_epoch = kNoProducerEpoch;  // memory only, as in Kafka
  int32_t timeout_ms = 0;
  TxnState state = TxnState::kEmpty;
  std::set<TopicPartition> partitions;
  std::set<std::string> groups;
  int64_t start_ms = -1;
  int64_t last_update_ms = -1;
  std::optional<TxnState> pending;
  int16_t pending_last_epoch =
      kNoProducerEpoch;  // last_producer_epoch once an Empty write is durable
  bool failed_epoch_fence = false;
  // Markers of a Prepare state still to be made durable, those sent and not answered
  // yet, and whether the groups' call is under way.
  std::set<TopicPartition> markers_left;
  std::set<TopicPartition> markers_sent;
  std::set<std::string> groups_left;
  bool groups_sent = false;
  bool markers_fenced = false;  // TRANSACTION_COORDINATOR_FENCED: a newer coordinator's
  // The round of markers under way, unique in the coordinator's life (a reloaded id's
  // round is not its previous load's): answers of another round are dropped.
  uint64_t marker_round = 0;
  // Backoffs running: a leader's failed partitions, the groups, the Complete record.
  std::vector<uint64_t> retry_timers;
  int failed_rounds = 0;  // failed answers of this decision (one in 50 is logged)
  // AddPartitionsToTxn/AddOffsetsToTxn that arrived while the previous transaction was
  // completing or another change of the id was being written: run again once that is
  // done, or after add_wait_ms, instead of answering CONCURRENT_TRANSACTIONS at once.
  std::vector<std::function<void()>> waiting;
  uint64_t waiting_timer = 0;
};

}  // namespace sluice::broker
