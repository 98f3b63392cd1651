// GroupCoordinator: the partitions of the offsets log it serves — one on a single node; in
// a cluster those this broker leads, loaded when it becomes their leader and dropped when
// it stops (docs/design/0018-cluster.md, "coordmove"). See group_coordinator.h.
#include <future>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "broker/coordinator_partitions.h"
#include "broker/event_loop.h"
#include "broker/group_coordinator.h"
#include "broker/group_state.h"
#include "broker/offset_log.h"

namespace sluice::broker {

int32_t GroupCoordinator::PartitionOf(const std::string& group) const {
  return options_.replicated ? CoordinatorPartitionFor(group, partition_count_) : 0;
}

ErrorCode GroupCoordinator::ServingError(const std::string& group) const {
  if (shutting_down_) return ErrorCode::kCoordinatorNotAvailable;
  auto it = partitions_.find(PartitionOf(group));
  if (it == partitions_.end()) return ErrorCode::kNotCoordinator;
  if (it->second.log == nullptr) return ErrorCode::kCoordinatorLoadInProgress;
  return ErrorCode::kNone;
}

OffsetLog* GroupCoordinator::OffsetsOf(const std::string& group) {
  auto it = partitions_.find(PartitionOf(group));
  return it == partitions_.end() ? nullptr : it->second.log.get();
}

void GroupCoordinator::LoadPartition(int32_t p, int32_t count, int32_t epoch,
                                     OffsetLogOptions log) {
  // Never waits for the coordinator's thread: the caller (the cluster controller's
  // thread) may be what that thread waits for.
  const uint64_t id = loads_.Begin(p, epoch);
  if (id == 0) return;  // loaded (or loading) in this epoch, or closed
  {
    std::lock_guard gate_lock(gate_->mu);
    if (gate_->loop == nullptr) return;  // closed
    gate_->loop->Post([this, p, count, epoch, id] {
      if (shutting_down_) return;
      DropPartition(p);  // an older epoch's, if any
      partition_count_ = count;
      OffsetsPartition& part = partitions_[p];
      part.epoch = epoch;
      part.load_id = id;
    });
  }
  loads_.Start(p, [this, p, id, log = std::move(log)]() mutable {
    if (options_.before_load) options_.before_load(p);
    auto shared =
        std::make_shared<Result<std::unique_ptr<OffsetLog>>>(OffsetLog::Open(std::move(log)));
    std::lock_guard gate_lock(gate_->mu);
    if (gate_->loop != nullptr) {
      gate_->loop->Post([this, p, id, shared] { InstallPartition(p, id, std::move(*shared)); });
    }
  });
}

void GroupCoordinator::InstallPartition(int32_t p, uint64_t load_id,
                                        Result<std::unique_ptr<OffsetLog>> loaded) {
  auto it = partitions_.find(p);
  if (options_.replicated && (it == partitions_.end() || it->second.load_id != load_id)) {
    return;  // unloaded (or loaded again) meanwhile: the log closes unused
  }
  if (!loaded.ok()) {
    SLUICE_LOG(kGroupsLog, kError, "loading partition {} of the offsets log: {}", p,
               loaded.status().ToString());
    partitions_.erase(p);  // NOT_COORDINATOR until the next leadership
    return;
  }
  OffsetsPartition& part = partitions_[p];
  part.log = std::move(*loaded);
  part.load_id = load_id;
  // Every group the log knows comes back Empty: members are not persisted (they rejoin),
  // the generation is, so it never goes backwards.
  size_t count = 0;
  for (const std::string& gid : part.log->GroupIds()) {
    if (PartitionOf(gid) != p) continue;  // not this partition's (written by a single node)
    Group& g = FindGroup(gid) != nullptr ? *FindGroup(gid) : CreateGroup(gid);
    if (const GroupRecord* rec = part.log->Group(gid)) {
      g.generation = rec->generation;
      if (!rec->protocol_type.empty()) g.protocol_type = rec->protocol_type;
    }
    ++count;
  }
  if (options_.replicated) {
    SLUICE_LOG(kGroupsLog, kInfo,
               "coordinating partition {} of the offsets log (epoch {}): {} groups", p, part.epoch,
               count);
  }
}

void GroupCoordinator::DropPartition(int32_t p) {
  auto it = partitions_.find(p);
  if (it == partitions_.end()) return;
  std::vector<std::string> gone;
  for (auto& [gid, g] : groups_) {
    if (PartitionOf(gid) == p) gone.push_back(gid);
  }
  for (const std::string& gid : gone) {
    Group* g = FindGroup(gid);
    AbandonGroup(*g, ErrorCode::kNotCoordinator);
    groups_.erase(gid);
  }
  if (it->second.log != nullptr) {
    // An attached log: nothing is closed; writes under way answer from the owner.
    Status st = it->second.log->Close();
    if (!st.ok()) SLUICE_LOG(kGroupsLog, kWarn, "offsets partition {}: {}", p, st.ToString());
  }
  partitions_.erase(it);
  SLUICE_LOG(kGroupsLog, kInfo,
             "no longer coordinating partition {} of the offsets log ({} groups)", p, gone.size());
}

void GroupCoordinator::UnloadPartition(int32_t p) {
  // The loading thread is the only one reading the log: once it ended, the log may close.
  // The coordinator's thread drops the partition's state when it gets to it (its writes
  // go to the partition's owner, which answers NOT_COORDINATOR once the log is gone).
  if (!loads_.End(p)) return;
  std::lock_guard gate_lock(gate_->mu);
  if (gate_->loop == nullptr) return;  // closed
  gate_->loop->Post([this, p] { DropPartition(p); });
}

std::map<int32_t, bool> GroupCoordinator::PartitionsForTesting() {
  std::promise<std::map<int32_t, bool>> out;
  auto f = out.get_future();
  loop_->Post([this, &out] {
    std::map<int32_t, bool> m;
    for (const auto& [p, part] : partitions_) m[p] = part.log != nullptr;
    out.set_value(std::move(m));
  });
  return f.get();
}

}  // namespace sluice::broker
