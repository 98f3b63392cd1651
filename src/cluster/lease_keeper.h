// LeaseKeeper: one etcd lease kept alive from a thread of its own (a broker's liveness: its
// registration key is attached to the lease, and vanishes when the broker stops renewing).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "base/status.h"
#include "cluster/etcd_client.h"

namespace sluice::cluster {

// Lifecycle: Start grants the lease (blocking) and starts the renewing thread; Stop (or the
// destructor) joins it and revokes the lease. The thread renews every TTL/3 (the gateway
// renews once per POST); after a failed renewal it retries sooner. The lease counts as
// lost, reported once through `on_lost` on the keeper's thread, when etcd answers that it
// is gone (expired, revoked) or when no renewal succeeded for a whole TTL by the local
// clock; the keeper then stops renewing (the owner grants a new lease if it wants one).
// It uses a client of its own, made from the given client's options, whose calls give up
// within TTL/3, so that a hung member cannot hold a renewal past the lease.
class LeaseKeeper {
 public:
  using LostFn = std::function<void(int64_t lease_id, const Status& why)>;

  static Result<std::unique_ptr<LeaseKeeper>> Start(EtcdClient& client, int64_t ttl_s,
                                                    LostFn on_lost);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Stops renewing and revokes the lease unless it is already lost. Not from on_lost.
  Status Stop();
  // Stops renewing and leaves the lease to expire (a broker that dies, in tests).
  void Abandon();

  int64_t lease_id() const { return lease_id_; }
  int64_t granted_ttl_s() const { return granted_ttl_s_; }
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  int64_t renewals() const { return renewals_.load(std::memory_order_acquire); }

 private:
  LeaseKeeper(std::unique_ptr<EtcdClient> client, int64_t lease_id, int64_t ttl_s, LostFn on_lost);
  void Run();
  void Join();

  const std::unique_ptr<EtcdClient> client_;
  const int64_t lease_id_;
  const int64_t granted_ttl_s_;
  const LostFn on_lost_;
  std::atomic<bool> lost_{false};
  std::atomic<int64_t> renewals_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace sluice::cluster
