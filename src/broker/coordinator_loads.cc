// CoordinatorLoads: which coordinator partitions are asked to load, and their loading
// threads. See coordinator_loads.h.
#include "broker/coordinator_loads.h"

#include <utility>

namespace sluice::broker {

uint64_t CoordinatorLoads::Begin(int32_t p, int32_t epoch) {
  std::lock_guard lock(mu_);
  if (closed_) return 0;
  Load& load = loads_[p];
  if (load.id != 0 && load.epoch == epoch) return 0;
  if (load.thread.joinable()) load.thread.join();
  load.epoch = epoch;
  load.id = next_id_++;
  return load.id;
}

void CoordinatorLoads::Start(int32_t p, std::function<void()> work) {
  std::lock_guard lock(mu_);
  if (closed_) return;
  Load& load = loads_[p];
  if (load.thread.joinable()) load.thread.join();
  load.thread = std::thread(std::move(work));
}

bool CoordinatorLoads::End(int32_t p) {
  std::lock_guard lock(mu_);
  auto it = loads_.find(p);
  if (it == loads_.end()) return false;
  if (it->second.thread.joinable()) it->second.thread.join();
  loads_.erase(it);
  return true;
}

void CoordinatorLoads::Close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  for (auto& [p, load] : loads_) {
    if (load.thread.joinable()) load.thread.join();
  }
  loads_.clear();
}

}  // namespace sluice::broker
