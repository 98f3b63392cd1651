// FaultProxyProcess: runs tests/tools/fault_proxy.py; see fault_proxy_process.h.
#include "cluster/tests/fault_proxy_process.h"

#include <fcntl.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace sluice::cluster::testing {
namespace {

// The first line the child writes, within `limit`.
Result<std::string> ReadLine(int fd, std::chrono::milliseconds limit) {
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (line.empty() || line.back() != '\n') {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return IOError("fault proxy: no ports line");
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char c;
    ssize_t n = ::read(fd, &c, 1);
    if (n <= 0) return IOError("fault proxy exited before printing its ports");
    line += c;
  }
  return line;
}

}  // namespace

Result<std::unique_ptr<FaultProxyProcess>> FaultProxyProcess::Start(const std::string& target_host,
                                                                    int target_port) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return ErrnoError("pipe", "fault proxy", errno);
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return ErrnoError("pipe", "fault proxy", errno);
  }
  std::vector<std::string> argv = {"/usr/bin/python3", SLUICE_FAULT_PROXY, "--target",
                                   target_host + ":" + std::to_string(target_port),
                                   "--exit-on-stdin-eof"};
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork", "fault proxy", errno);
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  std::unique_ptr<FaultProxyProcess> p(new FaultProxyProcess());
  p->pid_ = pid;
  p->stdin_fd_ = in[1];
  auto line = ReadLine(out[0], std::chrono::seconds(30));
  ::close(out[0]);
  if (!line.ok()) return line.status();
  if (std::sscanf(line->c_str(), "{\"port\": %d, \"control_port\": %d}", &p->port_,
                  &p->control_port_) != 2) {
    return IOError("fault proxy: unexpected first line '{}'", *line);
  }
  return p;
}

FaultProxyProcess::~FaultProxyProcess() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  if (pid_ <= 0) return;
  for (int i = 0; i < 500; ++i) {  // up to 5 s to stop by itself
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

Status FaultProxyProcess::SetMode(std::string_view mode, std::string_view direction, int delay_ms) {
  httplib::Client c("127.0.0.1", control_port_);
  c.set_read_timeout(std::chrono::seconds(10));
  auto res =
      c.Get(fmt::format("/mode?mode={}&direction={}&delay_ms={}", mode, direction, delay_ms));
  if (!res) return IOError("fault proxy control: {}", httplib::to_string(res.error()));
  if (res->status != 200) return InvalidArgumentError("fault proxy: {}", res->body);
  return Status::OK();
}

Result<std::string> FaultProxyProcess::Stats() {
  httplib::Client c("127.0.0.1", control_port_);
  c.set_read_timeout(std::chrono::seconds(10));
  auto res = c.Get("/stats");
  if (!res) return IOError("fault proxy control: {}", httplib::to_string(res.error()));
  return res->body;
}

}  // namespace sluice::cluster::testing
