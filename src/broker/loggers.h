// The loggers of broker's files, defined once: its sources may be compiled together
// (a unity build), where a logger of each file's own would be defined twice.
#pragma once

#include "base/logging.h"

namespace sluice::broker {

inline const Logger kLog("broker");
inline const Logger kClusterLog("cluster");
inline const Logger kCoordinatorLog("coordinator");
inline const Logger kGroupsLog("groups");
inline const Logger kInProcessLog("in-process");
inline const Logger kInternalLogLog("internal-log");
inline const Logger kOffsetsLog("offsets");
inline const Logger kReplicaLog("replica");
inline const Logger kTieredLog("tiered");
inline const Logger kTxnLog("txn");

}  // namespace sluice::broker
