// LeaseKeeper: renews one etcd lease every TTL/3; see lease_keeper.h.
#include "cluster/lease_keeper.h"

#include <algorithm>

#include "base/clock.h"
#include "base/logging.h"
#include "cluster/loggers.h"

namespace sluice::cluster {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kRetryAfterFailure(200);

}  // namespace

int64_t LeaseKeeper::MarginNanos(int64_t ttl_s) {
  return std::max<int64_t>(ttl_s * 100'000'000, 100'000'000);  // TTL/10, >= 100 ms
}

Result<std::unique_ptr<LeaseKeeper>> LeaseKeeper::Start(EtcdClient& client, int64_t ttl_s,
                                                        LostFn on_lost,
                                                        std::atomic<int64_t>* deadline_out) {
  if (ttl_s <= 0) return InvalidArgumentError("etcd lease: TTL {} is not positive", ttl_s);
  EtcdOptions options = client.options();
  const int third_ms = static_cast<int>(std::min<int64_t>(ttl_s * 1000 / 3, 1 << 30));
  options.call_timeout_ms = std::max(1, std::min(options.call_timeout_ms, third_ms));
  // Half the call per member: a member that holds the keepalive without answering (cut off
  // silently, or hung) leaves the other half for the next one, within the same renewal.
  const int half_ms = std::max(1, options.call_timeout_ms / 2);
  options.request_timeout_ms =
      std::min(options.request_timeout_ms,
               client.endpoints().size() > 1 ? half_ms : options.call_timeout_ms);
  options.connect_timeout_ms = std::min(options.connect_timeout_ms, options.request_timeout_ms);
  ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> own, EtcdClient::Create(std::move(options)));
  // The grant itself may take the caller's whole call timeout; the lease lives at least
  // TTL from the request.
  const int64_t sent_ns = MonotonicNanos();
  ASSIGN_OR_RETURN(LeaseGrantResponse granted, client.Grant(ttl_s));
  std::unique_ptr<LeaseKeeper> k(
      new LeaseKeeper(std::move(own), granted.id, granted.ttl, std::move(on_lost), deadline_out));
  k->PublishDeadline(sent_ns + std::min(granted.ttl, ttl_s) * 1'000'000'000 - MarginNanos(ttl_s));
  k->thread_ = std::thread([p = k.get(), sent_ns] { p->Run(sent_ns); });
  return k;
}

LeaseKeeper::LeaseKeeper(std::unique_ptr<EtcdClient> client, int64_t lease_id, int64_t ttl_s,
                         LostFn on_lost, std::atomic<int64_t>* deadline_out)
    : client_(std::move(client)),
      lease_id_(lease_id),
      granted_ttl_s_(ttl_s),
      on_lost_(std::move(on_lost)),
      deadline_out_(deadline_out) {}

bool LeaseKeeper::valid() const { return MonotonicNanos() < valid_until_ns(); }

void LeaseKeeper::PublishDeadline(int64_t ns) {
  valid_until_ns_.store(ns, std::memory_order_release);
  if (deadline_out_ != nullptr) deadline_out_->store(ns, std::memory_order_release);
}

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

void LeaseKeeper::Run(int64_t granted_sent_ns) {
  const milliseconds ttl(granted_ttl_s_ * 1000);
  const int64_t ttl_ns = granted_ttl_s_ * 1'000'000'000;
  const milliseconds interval = std::max(ttl / 3, milliseconds(100));
  int64_t last_renewal_sent_ns = granted_sent_ns;  // the grant counts as one
  milliseconds wait = interval;
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, wait, [&] { return stopping_; })) return;
    }
    const int64_t sent_ns = MonotonicNanos();
    auto r = client_->KeepAliveOnce(lease_id_);
    Status why;
    if (r.ok() && r->ttl > 0) {
      // etcd restarted the TTL after this request left: measured from the send.
      last_renewal_sent_ns = sent_ns;
      PublishDeadline(sent_ns + std::min(r->ttl, granted_ttl_s_) * 1'000'000'000 -
                      MarginNanos(granted_ttl_s_));
      renewals_.fetch_add(1, std::memory_order_acq_rel);
      wait = interval;
      continue;
    }
    if (r.ok()) {
      why = NotFoundError("etcd lease {:x} expired or was revoked", lease_id_);
    } else if (MonotonicNanos() - last_renewal_sent_ns >= ttl_ns) {
      why = r.status().WithContext(fmt::format("etcd lease {:x} not renewed for its TTL of {} s",
                                               lease_id_, granted_ttl_s_));
    } else {
      SLUICE_LOG(kLog, kWarn, "etcd lease {:x}: renewal failed, retrying: {}", lease_id_,
                 r.status().ToString());
      wait = kRetryAfterFailure;
      continue;
    }
    SLUICE_LOG(kLog, kWarn, "{}", why.ToString());
    PublishDeadline(0);
    lost_.store(true, std::memory_order_release);
    if (on_lost_) on_lost_(lease_id_, why);
    return;
  }
}

}  // namespace sluice::cluster
