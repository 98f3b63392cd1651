// ErrorPhase: where in a pipeline a message (or a result row) failed, for on_error, the
// `phase` label of sluice_pipeline_errors_total, the dead letters' `phase` field and the
// log lines. Name() gives the spelling users see ("decode", "handler", ...).
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace sluice::pipeline {

enum class ErrorPhase {
  kDecode,   // a message that is not JSON or does not fit the table
  kHandler,  // the handler's SQL failed over the batch
  kSink,     // the sink refused a row, or its write or flush failed
  kSource,   // the source reported an error (counted, not dead-lettered)
  kCommit,   // an offset commit failed (counted; the next one covers it)
  kWindow,   // a window could not take a row, or closing windows failed
  kLate,     // a row for a window closed longer than allowed_lateness ago
};

inline constexpr size_t kErrorPhaseCount = 7;

// Every phase, in the order of the enum.
inline constexpr std::array<ErrorPhase, kErrorPhaseCount> kErrorPhases = {
    ErrorPhase::kDecode, ErrorPhase::kHandler, ErrorPhase::kSink, ErrorPhase::kSource,
    ErrorPhase::kCommit, ErrorPhase::kWindow,  ErrorPhase::kLate};

// "decode", "handler", "sink", "source", "commit", "window", "late".
std::string_view Name(ErrorPhase phase);

}  // namespace sluice::pipeline
