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
// is gone (expired, revoked) or when no renewal *sent* in the last TTL succeeded, by the
// local monotonic clock; the keeper then stops renewing (the owner grants a new lease if it
// wants one). It uses a client of its own, made from the given client's options, whose
// calls give up within TTL/3, so that a hung member cannot hold a renewal past the lease.
//
// Validity (0018 review item 5): etcd restarts a lease's TTL when it handles a renewal,
// which is after the renewal was sent, so the lease surely lives until
// send time + TTL. The keeper publishes `send time of the last successful renewal (or of
// the grant) + TTL - margin` (MonotonicNanos) as the lease's local deadline, in an atomic
// of its own and, when given, in `deadline_out` (which outlives the keeper: an owner that
// replaces its keeper keeps one place to read). Readers on any thread compare it with the
// clock, so a leader stops acting at the deadline without waiting for any thread. A lease
// found gone sets it to 0 at once.
class LeaseKeeper {
 public:
  using LostFn = std::function<void(int64_t lease_id, const Status& why)>;

  static Result<std::unique_ptr<LeaseKeeper>> Start(EtcdClient& client, int64_t ttl_s,
                                                    LostFn on_lost,
                                                    std::atomic<int64_t>* deadline_out = nullptr);
  // The margin kept before send time + TTL: TTL/10, at least 100 ms (clock rates of this
  // host and etcd's leader may differ a little; etcd's own checks run every 500 ms).
  static int64_t MarginNanos(int64_t ttl_s);
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
  // The local deadline (MonotonicNanos) before which the lease is surely alive in etcd.
  int64_t valid_until_ns() const { return valid_until_ns_.load(std::memory_order_acquire); }
  bool valid() const;

 private:
  LeaseKeeper(std::unique_ptr<EtcdClient> client, int64_t lease_id, int64_t ttl_s, LostFn on_lost,
              std::atomic<int64_t>* deadline_out);
  void Run(int64_t granted_sent_ns);
  // Moves the deadline to `sent_ns` + TTL - margin (never back while valid); 0 when lost.
  void PublishDeadline(int64_t ns);
  void Join();

  const std::unique_ptr<EtcdClient> client_;
  const int64_t lease_id_;
  const int64_t granted_ttl_s_;
  const LostFn on_lost_;
  std::atomic<bool> lost_{false};
  std::atomic<int64_t> renewals_{0};
  std::atomic<int64_t> valid_until_ns_{0};
  std::atomic<int64_t>* const deadline_out_;  // may be null

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace sluice::cluster
