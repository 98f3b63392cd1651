// InProcessIsrStore: the IsrStore contract in memory. See replica_isr_store.h.
#include "broker/replica_isr_store.h"

#include <algorithm>

namespace sluice::broker {

const char* IsrErrorName(IsrError e) {
  switch (e) {
    case IsrError::kNone:
      return "none";
    case IsrError::kUnknownPartition:
      return "unknown partition";
    case IsrError::kFencedLeaderEpoch:
      return "fenced leader epoch";
    case IsrError::kInvalidVersion:
      return "invalid version";
    case IsrError::kInvalidIsr:
      return "invalid ISR";
    case IsrError::kUnavailable:
      return "unavailable";
  }
  return "?";
}

LeaderAndIsr InProcessIsrStore::Elect(const std::string& topic, int32_t partition, int32_t leader,
                                      std::vector<int32_t> replicas,
                                      std::optional<std::vector<int32_t>> isr) {
  std::lock_guard lock(mu_);
  LeaderAndIsr& s = partitions_[{topic, partition}];
  s.leader = leader;
  ++s.leader_epoch;
  s.replicas = std::move(replicas);
  if (isr.has_value()) {
    s.isr = std::move(*isr);
  } else {
    std::erase_if(s.isr, [&](int32_t n) {
      return std::find(s.replicas.begin(), s.replicas.end(), n) == s.replicas.end();
    });
    if (s.isr.empty()) s.isr = s.replicas;
  }
  ++s.version;
  return s;
}

std::optional<LeaderAndIsr> InProcessIsrStore::Get(const std::string& topic,
                                                   int32_t partition) const {
  std::lock_guard lock(mu_);
  auto it = partitions_.find({topic, partition});
  if (it == partitions_.end()) return std::nullopt;
  return it->second;
}

int InProcessIsrStore::changes() const {
  std::lock_guard lock(mu_);
  return changes_;
}

void InProcessIsrStore::AlterIsr(const std::string& topic, int32_t partition, int32_t leader,
                                 int32_t leader_epoch, std::vector<int32_t> new_isr,
                                 int64_t expected_version, BrokerEpochs /*broker_epochs*/,
                                 Done done) {
  IsrError error = IsrError::kNone;
  int64_t version = -1;
  {
    std::lock_guard lock(mu_);
    auto it = partitions_.find({topic, partition});
    if (it == partitions_.end()) {
      error = IsrError::kUnknownPartition;
    } else {
      LeaderAndIsr& s = it->second;
      auto known = [&](int32_t n) {
        return std::find(s.replicas.begin(), s.replicas.end(), n) != s.replicas.end();
      };
      std::vector<int32_t> sorted = new_isr;
      std::sort(sorted.begin(), sorted.end());
      if (s.leader != leader || s.leader_epoch != leader_epoch) {
        error = IsrError::kFencedLeaderEpoch;
      } else if (s.version != expected_version) {
        error = IsrError::kInvalidVersion;
      } else if (new_isr.empty() ||
                 std::find(new_isr.begin(), new_isr.end(), leader) == new_isr.end() ||
                 !std::all_of(new_isr.begin(), new_isr.end(), known) ||
                 std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
        error = IsrError::kInvalidIsr;
      } else {
        s.isr = std::move(new_isr);
        version = ++s.version;
        ++changes_;
      }
    }
  }
  done(error, version);  // outside the lock: it may call back into the store
}

}  // namespace sluice::broker
