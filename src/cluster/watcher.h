// Watcher: one etcd watch (a key, or a range such as a prefix) kept alive on a thread of its
// own, through /v3/watch's streamed response, delivering events in revision order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "cluster/etcd_client.h"
#include "cluster/etcd_types.h"

namespace httplib {
class Client;
}

namespace sluice::cluster {

struct WatchOptions {
  std::string key;
  std::string range_end;  // empty: `key` only; PrefixRangeEnd(key): every key under it
  // The first revision to deliver; 0: changes after the revision current when it starts.
  int64_t start_revision = 0;
  bool prev_kv = false;  // events carry the key's previous value
  // Ask etcd for empty responses while nothing changes (at etcd's
  // --experimental-watch-progress-notify-interval, 10 minutes by default): they move the
  // resume revision forward and reach WatchHandlers::on_progress.
  bool progress_notify = false;
  // No byte on the stream for this long and the connection is taken for dead (a member
  // cut off without a reset): the watch resumes on the next member. 0: never. Set it above
  // etcd's progress interval when progress_notify is on.
  int idle_timeout_ms = 0;
  // A stream silent for this long has its member probed (a unary Status on a connection of
  // its own, given as long again to answer); a member that does not answer is taken for
  // cut off or hung and the watch resumes on the next member. Catches a member that holds
  // the stream open and silent while etcd's progress notifications are minutes apart.
  // 0: never.
  int probe_interval_ms = 0;
  // Pause before reconnecting after a failure; doubles up to the max while failures repeat.
  int reconnect_backoff_ms = 100;
  int max_reconnect_backoff_ms = 2000;
  size_t max_message_bytes = 64u << 20;
};

// One response's events: every event of the revisions it covers, in revision order.
struct WatchBatch {
  ResponseHeader header;
  std::vector<WatchEvent> events;
};

// Called on the watcher's thread, one at a time. They may call the EtcdClient (to re-list);
// Cancel called from a handler only asks the watcher to stop (a thread cannot join itself).
struct WatchHandlers {
  std::function<void(const WatchBatch&)> on_events;
  // The revision to resume from was compacted away: events are lost, the owner must re-list
  // (a Range at the newest revision R) and return R + 1 to resume from; <= 0 stops the
  // watch. Unset: the watch stops.
  std::function<int64_t(int64_t compact_revision)> on_compacted;
  // A progress notification: every change up to `revision` has been delivered.
  std::function<void(int64_t revision)> on_progress;
};

// Lifecycle: Start runs the thread (and, with probe_interval_ms, a probing thread); Cancel (or the
// destructor) stops and joins it promptly, shutting down a connection blocked in a read; no handler
// runs after Cancel returns. `client` only lends its endpoint list and timeouts at Start.
//
// Delivery: at least once and in order across reconnections: after a lost connection the
// watch resumes, on the next member, from the revision after the last one delivered (or
// announced by a progress notification), so nothing is skipped; a revision is never
// delivered twice, since etcd sends every event of one revision in one response.
class Watcher {
 public:
  static Result<std::unique_ptr<Watcher>> Start(const EtcdClient& client, WatchOptions options,
                                                WatchHandlers handlers);
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  void Cancel();

  // The revision a reconnection would resume from (0 before etcd answered the first time).
  int64_t next_revision() const { return next_revision_.load(std::memory_order_acquire); }
  // Streams attempted so far (the first one included): a test's view of reconnections.
  int64_t connections() const { return connections_.load(std::memory_order_acquire); }
  // Whether the watch ended by itself (on_compacted said stop).
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }

 private:
  Watcher(std::vector<EtcdEndpoint> endpoints, EtcdHttpOptions http, size_t first_endpoint,
          WatchOptions options, WatchHandlers handlers);
  void Run();
  // The probing thread (probe_interval_ms): probes the member of a silent stream and stops
  // that stream when the member does not answer.
  void Probe();
  bool ProbeAnswered(size_t endpoint);
  // One stream against one member until it ends; the reason it ended.
  Status Stream(size_t endpoint, int64_t* compacted_at);
  Status Handle(WatchResponse r, int64_t* compacted_at);
  bool Sleep(std::chrono::milliseconds d);  // false: woken by Cancel

  const std::vector<EtcdEndpoint> endpoints_;
  const EtcdHttpOptions http_;
  const WatchOptions options_;
  const WatchHandlers handlers_;
  size_t endpoint_;       // watcher thread only
  int64_t messages_ = 0;  // watcher thread only: stream messages handled
  std::atomic<int64_t> next_revision_;
  std::atomic<int64_t> connections_{0};
  std::atomic<bool> stopped_{false};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                  // guarded by mu_
  bool exited_ = false;                    // guarded by mu_
  httplib::Client* connection_ = nullptr;  // guarded by mu_: the stream in flight, to stop
  httplib::Client* probe_ = nullptr;       // guarded by mu_: the probe in flight, to stop
  int64_t stream_endpoint_ = -1;           // guarded by mu_: the stream's member, -1: none
  bool probe_failed_ = false;              // guarded by mu_: the stream was stopped by Probe
  std::atomic<int64_t> last_byte_ns_{0};   // when the stream last received a byte (or began)
  std::thread thread_;
  std::thread prober_;
};

}  // namespace sluice::cluster
