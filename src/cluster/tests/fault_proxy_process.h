// FaultProxyProcess: tests/tools/fault_proxy.py run from C++ tests, to put a
// fault-injecting TCP proxy between a client and a server (etcd, another broker) and break
// the path at run time: pass, cut, blackhole or delay, both directions or one.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace sluice::cluster::testing {

// Owned by one test; not thread-safe. The proxy process stops when this object is
// destroyed, and by itself if the test process dies (it watches its stdin).
class FaultProxyProcess {
 public:
  static Result<std::unique_ptr<FaultProxyProcess>> Start(const std::string& target_host,
                                                          int target_port);
  ~FaultProxyProcess();

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // mode: pass, cut, blackhole, delay; direction: up (client to target), down, both.
  Status SetMode(std::string_view mode, std::string_view direction = "both", int delay_ms = 0);
  Status Pass() { return SetMode("pass"); }
  Status Cut() { return SetMode("cut"); }
  Status Blackhole(std::string_view direction = "both") { return SetMode("blackhole", direction); }
  Status Delay(int delay_ms, std::string_view direction = "both") {
    return SetMode("delay", direction, delay_ms);
  }
  // The proxy's counters as JSON (accepted, refused, active, bytes_up, dropped_down, ...).
  Result<std::string> Stats();

 private:
  FaultProxyProcess() = default;

  pid_t pid_ = 0;
  int stdin_fd_ = -1;  // closing it stops the proxy
  int port_ = 0;
  int control_port_ = 0;
};

}  // namespace sluice::cluster::testing
