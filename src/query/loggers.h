// The loggers of query's files, defined once: its sources may be compiled together
// (a unity build), where a logger of each file's own would be defined twice.
#pragma once

#include "base/logging.h"

namespace sluice::query {

inline const Logger kLog("query");

}  // namespace sluice::query
