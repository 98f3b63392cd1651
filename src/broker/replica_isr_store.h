// IsrStore: where a leader commits ISR changes (docs/design/0018-cluster.md, decision 7) —
// the seam between the replication core and the cluster controller, which implements it
// with a compare-and-swap on partitions/<topic>/<p> in etcd. InProcessIsrStore is the
// same contract in memory, for tests and in-process clusters: it checks the leader, the
// leader epoch and the version as the etcd one will, so a stale leader's change fails.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sluice::broker {

enum class IsrError {
  kNone,
  kUnknownPartition,   // the store has no such partition
  kFencedLeaderEpoch,  // another leader or a newer epoch was elected
  kInvalidVersion,     // the ISR changed since the version the leader holds
  kInvalidIsr,         // empty, without the leader, or a node outside the replicas
  kUnavailable,        // the store cannot answer now (etcd unreachable)
};
const char* IsrErrorName(IsrError e);

// A partition's leadership as the store holds it.
struct LeaderAndIsr {
  int32_t leader = -1;
  int32_t leader_epoch = 0;
  std::vector<int32_t> replicas;
  std::vector<int32_t> isr;
  int64_t version = 0;  // bumped by every change (etcd: the key's mod_revision)
};

// Thread-safe. `done` runs once, on any thread (the etcd one answers from the cluster
// thread): callers post its answer to where it belongs.
class IsrStore {
 public:
  virtual ~IsrStore() = default;
  using BrokerEpochs = std::map<int32_t, int64_t>;
  using Done = std::function<void(IsrError error, int64_t new_version)>;
  // Broker epochs: node -> the registration create_revision it fetched with (KIP-903).
  // Replaces the ISR of `topic`-`partition` with `new_isr` if `leader` leads it in
  // `leader_epoch` and its version is `expected_version`. A member added must be in
  // `broker_epochs` with its current registration's create_revision: an incarnation that
  // restarted since the fetch that caught it up is refused (kInvalidIsr). The in-process
  // store has no registrations and does not check them.
  virtual void AlterIsr(const std::string& topic, int32_t partition, int32_t leader,
                        int32_t leader_epoch, std::vector<int32_t> new_isr,
                        int64_t expected_version, BrokerEpochs broker_epochs, Done done) = 0;
};

class InProcessIsrStore final : public IsrStore {
 public:
  // Makes `leader` the leader of a new epoch (the controller's election): epoch + 1, the
  // ISR given (or the current one without the nodes not in `replicas`), version + 1.
  // Returns the new state.
  LeaderAndIsr Elect(const std::string& topic, int32_t partition, int32_t leader,
                     std::vector<int32_t> replicas, std::optional<std::vector<int32_t>> isr);
  std::optional<LeaderAndIsr> Get(const std::string& topic, int32_t partition) const;
  // How many AlterIsr calls succeeded (tests).
  int changes() const;

  void AlterIsr(const std::string& topic, int32_t partition, int32_t leader, int32_t leader_epoch,
                std::vector<int32_t> new_isr, int64_t expected_version, BrokerEpochs broker_epochs,
                Done done) override;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int32_t>, LeaderAndIsr> partitions_;  // guarded by mu_
  int changes_ = 0;                                                     // guarded by mu_
};

}  // namespace sluice::broker
