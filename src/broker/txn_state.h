// The transaction coordinator's view of one transactional id: its producer id and epoch,
// timeout, state and the partitions and groups of its ongoing transaction, with Kafka's
// state machine (TransactionMetadata.scala) and its legal transitions.
// docs/design/0016-transactions.md, "The coordinator".
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "broker/offset_log.h"  // TopicPartition
#include "kafka/protocol/api.h"

namespace sluice::broker {

// Kafka's TransactionState ids, as stored in TransactionLogValue.TransactionStatus.
// kPrepareEpochFence (7) is never written: it marks a fence in progress in memory.
enum class TxnState : int8_t {
  kEmpty = 0,
  kOngoing = 1,
  kPrepareCommit = 2,
  kPrepareAbort = 3,
  kCompleteCommit = 4,
  kCompleteAbort = 5,
  kDead = 6,
  kPrepareEpochFence = 7,
};

// Kafka's names ("Empty", "Ongoing", ..., "PrepareEpochFence"), as DescribeTransactions
// and ListTransactions show them.
std::string_view TxnStateName(TxnState s);
std::optional<TxnState> TxnStateFromName(std::string_view name);
std::optional<TxnState> TxnStateFromId(int8_t id);
// Whether Kafka allows `from` -> `to` (validPreviousStates).
bool IsValidTxnTransition(TxnState from, TxnState to);
// Empty, CompleteCommit, CompleteAbort: an id in one of these may expire.
bool TxnExpirationAllowed(TxnState s);

// The partition a group's offsets live in, listed among the transaction's partitions as
// Kafka lists it (AddOffsetsToTxn adds __consumer_offsets-<partitionFor(group)>).
inline const TopicPartition kOffsetsPartition{"__consumer_offsets", 0};

constexpr int16_t kNoProducerEpoch = -1;
constexpr int64_t kNoProducerId = -1;
// Epochs at or above this are not handed to clients: one more is kept for a fence.
constexpr int16_t kMaxClientEpoch = INT16_MAX - 1;

// What one TransactionLogValue holds (docs/formats/transaction-state.md), plus the
// groups of the transaction, which sluice keeps in a tagged field of its own.
struct TxnRecord {
  int64_t producer_id = kNoProducerId;
  int64_t previous_producer_id = kNoProducerId;  // tag 0
  int64_t next_producer_id = kNoProducerId;      // tag 1
  int16_t producer_epoch = kNoProducerEpoch;
  int32_t timeout_ms = 0;
  TxnState state = TxnState::kEmpty;
  std::set<TopicPartition> partitions;
  int64_t last_update_ms = -1;
  int64_t start_ms = -1;
  std::set<std::string> groups;  // sluice's tag 10000
  bool operator==(const TxnRecord&) const = default;
};

}  // namespace sluice::broker
