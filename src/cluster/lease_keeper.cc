// LeaseKeeper: renews one etcd lease every TTL/3; see lease_keeper.h.
#include "cluster/lease_keeper.h"

#include <algorithm>

#include "base/logging.h"

namespace sluice::cluster {
namespace {

const Logger kLog("cluster");

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kRetryAfterFailure(200);

}  // namespace

Result<std::unique_ptr<LeaseKeeper>> LeaseKeeper::Start(EtcdClient& client, int64_t ttl_s,
                                                        LostFn on_lost) {
  if (ttl_s <= 0) return InvalidArgumentError("etcd lease: TTL {} is not positive", ttl_s);
  EtcdOptions options = client.options();
  const int third_ms = static_cast<int>(std::min<int64_t>(ttl_s * 1000 / 3, 1 << 30));
  options.call_timeout_ms = std::max(1, std::min(options.call_timeout_ms, third_ms));
  options.request_timeout_ms = std::min(options.request_timeout_ms, options.call_timeout_ms);
  options.connect_timeout_ms = std::min(options.connect_timeout_ms, options.request_timeout_ms);
  ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> own, EtcdClient::Create(std::move(options)));
  // The grant itself may take the caller's whole call timeout.
  ASSIGN_OR_RETURN(LeaseGrantResponse granted, client.Grant(ttl_s));
  std::unique_ptr<LeaseKeeper> k(
      new LeaseKeeper(std::move(own), granted.id, granted.ttl, std::move(on_lost)));
  k->thread_ = std::thread([p = k.get()] { p->Run(); });
  return k;
}

LeaseKeeper::LeaseKeeper(std::unique_ptr<EtcdClient> client, int64_t lease_id, int64_t ttl_s,
                         LostFn on_lost)
    : client_(std::move(client)),
      lease_id_(lease_id),
      granted_ttl_s_(ttl_s),
      on_lost_(std::move(on_lost)) {}

LeaseKeeper::~LeaseKeeper() { (void)Stop(); }

void LeaseKeeper::Join() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable() && std::this_thread::get_id() != thread_.get_id()) thread_.join();
}

void LeaseKeeper::Abandon() { Join(); }

Status LeaseKeeper::Stop() {
  bool first;
  {
    std::lock_guard lock(mu_);
    first = !stopping_;
  }
  Join();
  if (!first || lost()) return Status::OK();
  auto r = client_->Revoke(lease_id_);
  return r.ok() ? Status::OK() : r.status();
}

void LeaseKeeper::Run() {
  const milliseconds ttl(granted_ttl_s_ * 1000);
  const milliseconds interval = std::max(ttl / 3, milliseconds(100));
  auto last_renewed = Clock::now();  // the grant counts as one
  milliseconds wait = interval;
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, wait, [&] { return stopping_; })) return;
    }
    auto r = client_->KeepAliveOnce(lease_id_);
    Status why;
    if (r.ok() && r->ttl > 0) {
      last_renewed = Clock::now();
      renewals_.fetch_add(1, std::memory_order_acq_rel);
      wait = interval;
      continue;
    }
    if (r.ok()) {
      why = NotFoundError("etcd lease {:x} expired or was revoked", lease_id_);
    } else if (Clock::now() - last_renewed >= ttl) {
      why = r.status().WithContext(fmt::format("etcd lease {:x} not renewed for its TTL of {} s",
                                               lease_id_, granted_ttl_s_));
    } else {
      SLUICE_LOG(kLog, kWarn, "etcd lease {:x}: renewal failed, retrying: {}", lease_id_,
                 r.status().ToString());
      wait = kRetryAfterFailure;
      continue;
    }
    SLUICE_LOG(kLog, kWarn, "{}", why.ToString());
    lost_.store(true, std::memory_order_release);
    if (on_lost_) on_lost_(lease_id_, why);
    return;
  }
}

}  // namespace sluice::cluster
