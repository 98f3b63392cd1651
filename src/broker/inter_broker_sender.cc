// InterBrokerChannel and InterBrokerSender: see inter_broker_sender.h.
#include "broker/inter_broker_sender.h"

#include <fmt/format.h>

#include <span>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "broker/loggers.h"

namespace sluice::broker {
InterBrokerSender::InterBrokerSender(const InterBrokerChannelOptions& options, int32_t destination,
                                     std::string host, int32_t port)
    : options_(options),
      destination_(destination),
      host_(std::move(host)),
      port_(port),
      client_id_(fmt::format("sluice-{}-{}", options.name, options.node_id)),
      conn_(
          std::make_unique<InterBrokerConnection>(host_, port_, options.clock, options.security)) {
  thread_ = std::thread([this] { Run(); });
}

InterBrokerSender::~InterBrokerSender() { Stop(); }

void InterBrokerSender::Enqueue(InterBrokerRequest request) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.push_back(std::move(request));
      cv_.notify_all();
      return;
    }
  }
  (void)request.handle(
      AbortedError("the {} sender to broker {} is stopped", options_.name, destination_), nullptr);
}

std::deque<InterBrokerRequest> InterBrokerSender::Retire() {
  std::deque<InterBrokerRequest> left;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    left.swap(queue_);
    cv_.notify_all();
  }
  conn_->Shutdown();  // the request under way fails on the sender's thread
  return left;
}

void InterBrokerSender::Stop() {
  std::deque<InterBrokerRequest> left;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  conn_->Shutdown();  // ends a connect, send or read in progress
  if (thread_.joinable()) thread_.join();
  conn_->Close();
  {
    std::lock_guard lock(mu_);
    left.swap(queue_);
  }
  FailAll(std::move(left),
          AbortedError("the {} sender to broker {} is stopped", options_.name, destination_));
}

void InterBrokerSender::FailAll(std::deque<InterBrokerRequest> items, const Status& why) {
  for (auto& item : items) (void)item.handle(why, nullptr);
}

void InterBrokerSender::Run() {
  for (;;) {
    InterBrokerRequest item;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;  // Stop fails what is left
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!conn_->connected()) {
      if (Status st = conn_->Connect(options_.connect_timeout_ms); !st.ok()) {
        if (conn_->WarnAbout(st)) {
          SLUICE_LOG(kLog, kWarn, "{}: broker {}: {}", options_.name, destination_, st.ToString());
        } else {
          SLUICE_LOG(kLog, kDebug, "{}: broker {}: {}", options_.name, destination_, st.ToString());
        }
        // The destination is unreachable now: everything queued for it fails, and its
        // callers ask again (with a newer leader, when it moved).
        std::deque<InterBrokerRequest> failed;
        {
          std::lock_guard lock(mu_);
          failed.swap(queue_);
        }
        failed.push_front(std::move(item));
        FailAll(std::move(failed), st);
        continue;
      }
    }
    size_t body_at = 0;
    Result<std::vector<uint8_t>> answer =
        conn_->RoundTrip(item.api, item.version, client_id_, item.encode,
                         options_.request_timeout_ms, options_.max_response_bytes, &body_at);
    if (!answer.ok()) {
      SLUICE_LOG(kLog, kInfo, "{}: broker {}: {}", options_.name, destination_,
                 answer.status().ToString());
      conn_->Close();
      (void)item.handle(answer.status(), nullptr);
      continue;
    }
    kafka::Reader r(std::span<const uint8_t>(*answer).subspan(body_at));
    if (Status decoded = item.handle(Status::OK(), &r); !decoded.ok()) {
      SLUICE_LOG(kLog, kWarn, "{}: broker {}: a {} answer that does not decode: {}", options_.name,
                 destination_, kafka::ApiName(item.api), decoded.ToString());
      conn_->Close();
    }
  }
}

InterBrokerChannel::InterBrokerChannel(InterBrokerChannelOptions options)
    : options_(std::move(options)) {}

InterBrokerChannel::~InterBrokerChannel() { Stop(); }

void InterBrokerChannel::Send(int32_t node, const std::string& host, int32_t port,
                              InterBrokerRequest request) {
  std::deque<InterBrokerRequest> orphaned;
  InterBrokerSender* sender = nullptr;
  {
    std::lock_guard lock(mu_);
    if (!stopped_) {
      auto& slot = senders_[node];
      if (slot != nullptr && (slot->host() != host || slot->port() != port)) {
        orphaned = slot->Retire();
        retired_.push_back(std::move(slot));  // joined by Stop, destroyed after it
      }
      if (slot == nullptr) slot = std::make_unique<InterBrokerSender>(options_, node, host, port);
      sender = slot.get();
      // Enqueued under the lock: Stop cannot destroy the sender in between.
      sender->Enqueue(std::move(request));
    }
  }
  // Outside the lock: their callbacks may send again.
  InterBrokerSender::FailAll(std::move(orphaned),
                             AbortedError("the {} sender to broker {} was replaced at a new "
                                          "address",
                                          options_.name, node));
  if (sender == nullptr) {
    (void)request.handle(AbortedError("the {} channel is stopped", options_.name), nullptr);
  }
}

void InterBrokerChannel::Stop() {
  std::map<int32_t, std::unique_ptr<InterBrokerSender>> senders;
  std::vector<std::unique_ptr<InterBrokerSender>> retired;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    senders.swap(senders_);
    retired.swap(retired_);
  }
  for (auto& [node, sender] : senders) sender->Stop();
  for (auto& sender : retired) sender->Stop();
}

}  // namespace sluice::broker
