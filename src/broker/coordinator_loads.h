// CoordinatorLoads: the callers' side of a coordinator's partitions in a cluster
// (docs/design/0018-cluster.md, "coordmove") — the leader epoch each partition was last
// asked to load in, and the thread loading it (the only one reading its log), shared by
// the group and transaction coordinators.
//
// Threads: Begin/Start/End from one caller thread at a time (the cluster controller's);
// Close from the coordinator's owner. After Close nothing starts.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace sluice::broker {

class CoordinatorLoads {
 public:
  CoordinatorLoads() = default;
  ~CoordinatorLoads() { Close(); }
  CoordinatorLoads(const CoordinatorLoads&) = delete;
  CoordinatorLoads& operator=(const CoordinatorLoads&) = delete;

  // A new load of `p` in `epoch`: its id (> 0), after the previous load's thread ended;
  // 0 when `p` was asked in this epoch already (roles are issued again on ISR changes) or
  // after Close.
  uint64_t Begin(int32_t p, int32_t epoch);
  // Runs `work` on p's loading thread (nothing after Close).
  void Start(int32_t p, std::function<void()> work);
  // `p` is no longer led: false when it was not loaded; true once its loading thread
  // ended.
  bool End(int32_t p);
  // Waits for every loading thread; nothing starts afterwards. Idempotent.
  void Close();

 private:
  struct Load {
    int32_t epoch = -1;
    uint64_t id = 0;
    std::thread thread;
  };
  std::mutex mu_;
  std::map<int32_t, Load> loads_;  // guarded by mu_
  uint64_t next_id_ = 1;           // guarded by mu_
  bool closed_ = false;            // guarded by mu_
};

}  // namespace sluice::broker
