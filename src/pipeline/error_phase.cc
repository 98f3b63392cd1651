// The spellings of ErrorPhase (error_phase.h).
#include "pipeline/error_phase.h"

namespace sluice::pipeline {

std::string_view Name(ErrorPhase phase) {
  switch (phase) {
    case ErrorPhase::kDecode:
      return "decode";
    case ErrorPhase::kHandler:
      return "handler";
    case ErrorPhase::kSink:
      return "sink";
    case ErrorPhase::kSource:
      return "source";
    case ErrorPhase::kCommit:
      return "commit";
    case ErrorPhase::kWindow:
      return "window";
    case ErrorPhase::kLate:
      return "late";
  }
  return "unknown";
}

}  // namespace sluice::pipeline
