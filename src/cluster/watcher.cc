// Watcher: an etcd watch on its own thread, resumed across reconnections; see watcher.h.
#include "cluster/watcher.h"

#include <httplib.h>

#include <algorithm>

#include "base/clock.h"
#include "base/logging.h"
#include "cluster/etcd_json.h"
#include "cluster/loggers.h"

namespace sluice::cluster {
namespace {

using std::chrono::milliseconds;

// How long a stream without an idle timeout may wait for a byte: Cancel shuts the socket
// down, so this only bounds a read nobody will ever cancel.
constexpr milliseconds kNoIdleTimeout = std::chrono::hours(24);

}  // namespace

Result<std::unique_ptr<Watcher>> Watcher::Start(const EtcdClient& client, WatchOptions options,
                                                WatchHandlers handlers) {
  if (options.start_revision < 0) {
    return InvalidArgumentError("etcd watch: start revision {} is negative",
                                options.start_revision);
  }
  if (options.idle_timeout_ms < 0 || options.probe_interval_ms < 0 ||
      options.reconnect_backoff_ms <= 0 ||
      options.max_reconnect_backoff_ms < options.reconnect_backoff_ms) {
    return InvalidArgumentError("etcd watch: bad timeouts");
  }
  std::unique_ptr<Watcher> w(new Watcher(client.endpoints(), HttpOptionsOf(client.options()),
                                         client.preferred_endpoint(), std::move(options),
                                         std::move(handlers)));
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  if (w->options_.probe_interval_ms > 0) w->prober_ = std::thread([p = w.get()] { p->Probe(); });
  return w;
}

Watcher::Watcher(std::vector<EtcdEndpoint> endpoints, EtcdHttpOptions http, size_t first_endpoint,
                 WatchOptions options, WatchHandlers handlers)
    : endpoints_(std::move(endpoints)),
      http_(http),
      options_(std::move(options)),
      handlers_(std::move(handlers)),
      endpoint_(first_endpoint % endpoints_.size()),
      next_revision_(options_.start_revision) {}

Watcher::~Watcher() { Cancel(); }

void Watcher::Cancel() {
  std::unique_lock lock(mu_);
  stopping_ = true;
  cv_.notify_all();
  if (std::this_thread::get_id() == thread_.get_id()) return;  // from a handler: it will stop
  if (prober_.joinable()) {
    if (probe_ != nullptr) probe_->stop();
    lock.unlock();
    prober_.join();
    lock.lock();
  }
  if (!thread_.joinable()) return;
  // Shut the stream's socket down until the thread has left it: a stream can be between
  // registering its connection and opening the socket when the first stop() comes.
  while (!exited_) {
    if (connection_ != nullptr) connection_->stop();
    cv_.wait_for(lock, milliseconds(20));
  }
  lock.unlock();
  thread_.join();
}

bool Watcher::Sleep(milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return stopping_; });
}

void Watcher::Run() {
  milliseconds backoff(options_.reconnect_backoff_ms);
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
    }
    int64_t compacted_at = 0;
    int64_t messages_before = messages_;
    Status ended = Stream(endpoint_, &compacted_at);
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
    }
    if (compacted_at > 0) {
      int64_t resume = handlers_.on_compacted ? handlers_.on_compacted(compacted_at) : 0;
      SLUICE_LOG(kLog, kInfo, "etcd watch of '{}': revision compacted at {}; {}", options_.key,
                 compacted_at, resume > 0 ? fmt::format("resuming at {}", resume) : "stopping");
      if (resume <= 0) {
        stopped_.store(true, std::memory_order_release);
        break;
      }
      next_revision_.store(resume, std::memory_order_release);
      backoff = milliseconds(options_.reconnect_backoff_ms);
      continue;
    }
    SLUICE_LOG(kLog, kInfo, "etcd watch of '{}' on {} ended ({}); resuming at revision {}",
               options_.key, endpoints_[endpoint_].url, ended.ToString(), next_revision());
    endpoint_ = (endpoint_ + 1) % endpoints_.size();
    // A stream etcd answered resets the backoff; repeated failures grow it.
    if (messages_ > messages_before) {
      backoff = milliseconds(options_.reconnect_backoff_ms);
    }
    if (!Sleep(backoff)) break;
    backoff = std::min(backoff * 2, milliseconds(options_.max_reconnect_backoff_ms));
  }
  std::lock_guard lock(mu_);
  exited_ = true;
  cv_.notify_all();
}

void Watcher::Probe() {
  const milliseconds interval(options_.probe_interval_ms);
  const int64_t interval_ns = int64_t{options_.probe_interval_ms} * 1'000'000;
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval, [&] { return stopping_; })) {
    if (stream_endpoint_ < 0 || connection_ == nullptr) continue;
    if (MonotonicNanos() - last_byte_ns_.load(std::memory_order_acquire) < interval_ns) continue;
    const auto endpoint = static_cast<size_t>(stream_endpoint_);
    httplib::Client* stream = connection_;
    lock.unlock();
    const bool answered = ProbeAnswered(endpoint);
    lock.lock();
    if (answered || stopping_ || connection_ != stream) continue;
    // The member holds the stream without answering anything: stop it (Stream returns,
    // Run resumes on the next member from the revision after the last delivered).
    probe_failed_ = true;
    connection_->stop();
  }
}

bool Watcher::ProbeAnswered(size_t endpoint) {
  const milliseconds timeout(options_.probe_interval_ms);
  auto client =
      MakeHttpClient(endpoints_[endpoint], std::min(http_.connect_timeout, timeout), timeout);
  client->set_keep_alive(false);
  {
    std::lock_guard lock(mu_);
    if (stopping_) return true;
    probe_ = client.get();
  }
  auto res = client->Post("/v3/maintenance/status", "{}", "application/json");
  std::lock_guard lock(mu_);
  probe_ = nullptr;
  return res && res->status == 200;
}

Status Watcher::Stream(size_t endpoint, int64_t* compacted_at) {
  const EtcdEndpoint& e = endpoints_[endpoint];
  milliseconds idle =
      options_.idle_timeout_ms > 0 ? milliseconds(options_.idle_timeout_ms) : kNoIdleTimeout;
  auto client = MakeHttpClient(e, http_.connect_timeout, idle);
  client->set_keep_alive(false);
  {
    std::lock_guard lock(mu_);
    if (stopping_) return AbortedError("cancelled");
    connection_ = client.get();
    stream_endpoint_ = static_cast<int64_t>(endpoint);
    probe_failed_ = false;
  }
  last_byte_ns_.store(MonotonicNanos(), std::memory_order_release);
  WatchCreate create{.key = options_.key,
                     .range_end = options_.range_end,
                     .start_revision = next_revision(),
                     .prev_kv = options_.prev_kv,
                     .progress_notify = options_.progress_notify};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v3/watch";
  req.body = EncodeWatchCreateRequest(create);
  req.set_header("Content-Type", "application/json");
  // gRPC metadata "hasleader" (etcd's require-leader, passed on by the gateway from a
  // Grpc-Metadata- header): a member that loses its leader ends the stream with "no leader"
  // instead of keeping it open, silent and stale, while the majority goes on without it.
  req.set_header("Grpc-Metadata-Hasleader", "true");
  JsonObjectSplitter splitter(options_.max_message_bytes);
  std::vector<std::string> messages;
  Status ended = IOError("etcd {}: watch stream closed", e.url);
  bool stream_error = false;
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    last_byte_ns_.store(MonotonicNanos(), std::memory_order_release);
    Status s = splitter.Feed(std::string_view(data, len), &messages);
    for (const std::string& m : messages) {
      if (!s.ok()) break;
      auto r = ParseWatchResponse(m);
      s = r.ok() ? Handle(std::move(r).value(), compacted_at) : r.status();
      if (*compacted_at > 0) s = AbortedError("compacted");
    }
    messages.clear();
    if (!s.ok()) {
      ended = s;
      stream_error = true;
      return false;
    }
    std::lock_guard lock(mu_);
    return !stopping_;
  };
  connections_.fetch_add(1, std::memory_order_acq_rel);
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  bool ok = client->send(req, res, err);
  bool probe_failed = false;
  {
    std::lock_guard lock(mu_);
    connection_ = nullptr;
    stream_endpoint_ = -1;
    probe_failed = probe_failed_;
  }
  if (probe_failed) {
    return IOError(
        "etcd {}: watch stream silent for {} ms and the member did not answer a "
        "status probe",
        e.url, options_.probe_interval_ms);
  }
  if (stream_error) return ended;
  if (!ok) return IOError("etcd {}: watch stream: {}", e.url, httplib::to_string(err));
  if (res.status != 200) return IOError("etcd {}: watch stream: HTTP {}", e.url, res.status);
  return ended;
}

Status Watcher::Handle(WatchResponse r, int64_t* compacted_at) {
  ++messages_;
  if (r.canceled) {
    if (r.compact_revision > 0) {
      *compacted_at = r.compact_revision;
      return Status::OK();
    }
    return AbortedError("etcd cancelled the watch: {}",
                        r.cancel_reason.empty() ? "no reason given" : r.cancel_reason);
  }
  if (r.created) {
    // A watch from "now" has seen everything up to the revision current at its creation.
    if (next_revision() == 0) next_revision_.store(r.header.revision + 1);
    return Status::OK();
  }
  if (r.events.empty()) {  // a progress notification
    if (r.header.revision + 1 > next_revision()) next_revision_.store(r.header.revision + 1);
    if (handlers_.on_progress) handlers_.on_progress(r.header.revision);
    return Status::OK();
  }
  // Events of revisions already delivered (which a well-behaved server never repeats) are
  // dropped: delivery never goes backwards.
  int64_t from = next_revision();
  std::erase_if(r.events, [&](const WatchEvent& ev) { return ev.kv.mod_revision < from; });
  if (r.events.empty()) return Status::OK();
  int64_t last = r.events.back().kv.mod_revision;
  if (handlers_.on_events) handlers_.on_events(WatchBatch{r.header, std::move(r.events)});
  next_revision_.store(last + 1, std::memory_order_release);
  return Status::OK();
}

}  // namespace sluice::cluster
