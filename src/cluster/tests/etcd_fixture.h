// Real etcd for the tests: EtcdCluster starts one or three /usr/bin/etcd members on
// 127.0.0.1 with free ports and their data directories on tmpfs (/dev/shm: etcd 3.4 cannot
// skip fsync), waits until they are healthy, kills / stops / restarts members on demand and
// removes everything when destroyed. tests/integration/etcd_util.py is the Python twin.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace sluice::cluster::testing {

struct EtcdClusterOptions {
  int members = 1;
  std::string binary = "/usr/bin/etcd";
  // etcd's --experimental-watch-progress-notify-interval; 0 leaves etcd's (10 minutes).
  int progress_notify_interval_ms = 0;
  // Raft timing: short, so that a killed leader is replaced quickly.
  int heartbeat_interval_ms = 50;
  int election_timeout_ms = 500;
  std::chrono::milliseconds start_timeout{30000};
};

// Owned by one test (or one test suite); not thread-safe.
class EtcdCluster {
 public:
  // "" when /usr/bin/etcd is missing (tests then GTEST_SKIP with this reason) or the
  // reason it is unusable.
  static std::string Unavailable(const std::string& binary = "/usr/bin/etcd");

  static Result<std::unique_ptr<EtcdCluster>> Start(EtcdClusterOptions options = {});
  ~EtcdCluster();  // kills every member and removes the data directories

  int size() const { return static_cast<int>(members_.size()); }
  // "http://127.0.0.1:PORT" of member i's client port; all of them.
  std::string endpoint(int i) const;
  std::vector<std::string> endpoints() const;
  int client_port(int i) const { return members_[i].client_port; }
  bool running(int i) const { return members_[i].pid > 0; }

  Status Kill(int i);         // SIGKILL, reaped
  Status Stop(int i);         // SIGTERM, waits for the exit
  Status Restart(int i);      // starts a stopped or killed member on its data directory
  Status Pause(int i);        // SIGSTOP: it keeps its sockets and answers nothing
  Status Resume(int i);       // SIGCONT
  Status WaitHealthy(int i);  // its /health says true (it has a leader)
  Status WaitAllRunningHealthy();
  // The tail of member i's log (for failure messages).
  std::string LogTail(int i, size_t bytes = 3000) const;

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::string data_dir;
    std::string log_path;
    pid_t pid = 0;
    bool started_once = false;
  };

  explicit EtcdCluster(EtcdClusterOptions options) : options_(std::move(options)) {}
  Status Spawn(int i);
  std::string InitialCluster() const;

  EtcdClusterOptions options_;
  std::string base_dir_;
  std::string token_;
  std::vector<Member> members_;
};

// Loopback ports free right now, all distinct (held open together while picked).
std::vector<int> FreeLoopbackPorts(int n);

}  // namespace sluice::cluster::testing
