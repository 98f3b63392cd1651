// ServerState: what the QueryServer's threads share (internal to the query module).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "duck/database.h"
#include "query/scram.h"
#include "query/server.h"
#include "query/session.h"

namespace sluice::query {

// A statement the RSS watchdog may interrupt: its session's user, since when it runs, the
// user's memory_share (percent, 0: none), and whether it was interrupted already.
struct RunningStatement {
  std::string user;
  int64_t since_ms = 0;
  int share_percent = 0;
  bool interrupted = false;
};
// Which one goes when memory runs short: the longest-running statement of a user whose
// part of the running statements is above its memory_share (when more than one user runs
// statements), else the longest-running; the bool says whether the first rule chose it.
// nullopt when none may be interrupted.
std::optional<std::pair<size_t, bool>> PickMemoryVictim(
    const std::vector<RunningStatement>& statements);

class ServerState {
 public:
  QueryServerOptions options;
  std::unique_ptr<duck::Database> db;
  ScramVerifier impossible = ScramVerifier::Impossible();
  int listen_fd = -1;
  int port = 0;
  std::atomic<bool> stopping{false};

  // A new session's slot with a fresh process id and key; nullptr when the server is
  // full (max_connections).
  std::shared_ptr<SessionSlot> Register(int fd);
  void Unregister(const std::shared_ptr<SessionSlot>& slot);
  // CancelRequest: interrupts the session's running query when the key matches.
  void Cancel(int32_t process_id, int32_t secret_key);
  // Sets/clears the session's connection under the lock (cancel and Stop use it).
  void SetConnection(const std::shared_ptr<SessionSlot>& slot, duck::Connection* conn,
                     const std::string& user = "");
  int SessionCount();

  void AcceptLoop();
  // QueryServer::ConnectLocal: the client's end of a socket pair whose other end a new
  // session serves as `user`.
  Result<int> ConnectLocal(const std::string& user);
  void WatchdogLoop();
  // Admission (options.max_running): waits for a turn up to options.queue_timeout_ms;
  // false when none came (or the server stops). Release gives it back.
  // With `user_limit` > 0, also waits while `user` runs that many (per-user limits of
  // docs/design/0020-data-authorization.md): the others go ahead meanwhile.
  // `cancelled` (the session's pending cancel) ends the wait too.
  bool Admit(const std::string& user = "", int user_limit = 0,
             const std::atomic<bool>* cancelled = nullptr);
  void Release(const std::string& user = "");
  std::atomic<uint64_t> turns{0};         // Admit's successes
  std::atomic<uint64_t> simple_steps{0};  // statements that ran planning steps
  std::atomic<uint64_t> extended_steps{0};
  // Tests: the RSS the watchdog reads instead of /proc/self/statm.
  std::function<int64_t()> rss_source;
  void StopAll();
  bool hooks_memory_share() const { return static_cast<bool>(options.hooks.memory_share_of); }

 private:
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
    int fd;
  };
  void ReapWorkers(bool all);

  std::mutex admit_mu_;
  std::condition_variable admit_cv_;
  int running_ = 0;                             // guarded by admit_mu_
  std::map<std::string, int> running_by_user_;  // guarded by admit_mu_
  std::mutex mu_;
  std::map<int32_t, std::shared_ptr<SessionSlot>> sessions_;  // guarded by mu_
  std::list<Worker> workers_;                                 // guarded by mu_
  std::condition_variable stop_cv_;

 public:
  std::thread acceptor;
  std::thread watchdog;
};

}  // namespace sluice::query
