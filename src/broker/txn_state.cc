// Kafka's transaction states: names, ids and legal transitions (TransactionMetadata.scala).
#include "broker/txn_state.h"

#include <array>

namespace sluice::broker {
namespace {

constexpr std::array<std::string_view, 8> kNames = {
    "Empty",          "Ongoing",       "PrepareCommit", "PrepareAbort",
    "CompleteCommit", "CompleteAbort", "Dead",          "PrepareEpochFence"};

}  // namespace

std::string_view TxnStateName(TxnState s) { return kNames.at(static_cast<size_t>(s)); }

std::optional<TxnState> TxnStateFromName(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<TxnState>(i);
  }
  return std::nullopt;
}

std::optional<TxnState> TxnStateFromId(int8_t id) {
  if (id < 0 || id >= static_cast<int8_t>(kNames.size())) return std::nullopt;
  return static_cast<TxnState>(id);
}

bool IsValidTxnTransition(TxnState from, TxnState to) {
  using S = TxnState;
  switch (to) {
    case S::kEmpty:
      return from == S::kEmpty || from == S::kCompleteCommit || from == S::kCompleteAbort;
    case S::kOngoing:
      return from == S::kOngoing || from == S::kEmpty || from == S::kCompleteCommit ||
             from == S::kCompleteAbort;
    case S::kPrepareCommit:
      return from == S::kOngoing;
    case S::kPrepareAbort:
      return from == S::kOngoing || from == S::kPrepareEpochFence;
    case S::kCompleteCommit:
      return from == S::kPrepareCommit;
    case S::kCompleteAbort:
      return from == S::kPrepareAbort;
    case S::kDead:
      return from == S::kEmpty || from == S::kCompleteCommit || from == S::kCompleteAbort;
    case S::kPrepareEpochFence:
      return from == S::kOngoing;
  }
  return false;
}

bool TxnExpirationAllowed(TxnState s) {
  return s == TxnState::kEmpty || s == TxnState::kCompleteCommit || s == TxnState::kCompleteAbort;
}

}  // namespace sluice::broker
