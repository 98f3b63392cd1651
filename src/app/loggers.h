// The loggers of app's files, defined once: its sources may be compiled together
// (a unity build), where a logger of each file's own would be defined twice.
#pragma once

#include "base/logging.h"

namespace sluice::app {

inline const Logger kHttpLog("http");
inline const Logger kLog("serve");

}  // namespace sluice::app
