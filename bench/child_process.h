// Helpers the benchmarks share: child processes (a broker, iperf3, pipelines) started
// with their output in files, waited for and described; files read whole or by their
// tail; CPU seconds of a process; grouped numbers for tables.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::bench {

// Starts `args` (args[0] an absolute path) with stdin from /dev/null and stdout and
// stderr appended to the given files. The child gets SIGTERM if the calling thread dies,
// so a crashed bench leaves no broker behind.
Result<pid_t> Spawn(const std::vector<std::string>& args, const std::string& out_path,
                    const std::string& err_path);

// The absolute path of `program`: as given when it has a slash, else found on $PATH.
Result<std::string> FindProgram(const std::string& program);

// Waits up to `timeout` for `pid` to exit; its wait status (-1 when it cannot be waited
// for), or nullopt if it is still running.
std::optional<int> WaitFor(pid_t pid, std::chrono::milliseconds timeout);

// "exited with status 1", "was killed by Killed", ...
std::string DescribeWaitStatus(int status);

// The whole file, or "" when unreadable.
std::string ReadFile(const std::string& path);

// The last `lines` lines of a file, indented, for error messages.
std::string Tail(const std::string& path, int lines);

// CPU seconds (user + system) of a process from /proc/<pid>/stat, or -1 when unreadable.
double ProcessCpuSeconds(pid_t pid);

// 1234567 -> "1,234,567".
std::string Grouped(uint64_t v);

// A child `sluice` process (a broker, a pipeline) that prints a line with its address once
// it listens. Lifecycle: Start (waits for the line), Stop (SIGTERM, wait, exit status 0 =
// OK); the destructor kills one that was not stopped. Owned by one thread.
class ListeningChild {
 public:
  // `what` names it in errors ("sluice serve"); its output goes to <log_prefix>.out and
  // .err; `marker` starts the line (on stderr with `marker_on_stderr`) and the address
  // follows it up to a space, '/' or newline.
  static Result<std::unique_ptr<ListeningChild>> Start(
      std::string what, std::vector<std::string> args, const std::string& log_prefix,
      std::string_view marker, bool marker_on_stderr, std::chrono::seconds start_timeout,
      std::chrono::seconds stop_timeout);
  ~ListeningChild();
  ListeningChild(const ListeningChild&) = delete;
  ListeningChild& operator=(const ListeningChild&) = delete;

  // SIGTERM, then waits; OK only for exit status 0. Kills it after the stop timeout.
  Status Stop();
  // Exchanges the two children (a broker restarted with other flags takes the old one's
  // place).
  void Swap(ListeningChild& other) noexcept;
  // Dead already? Then an error with its output; else OK.
  Status CheckAlive();

  double CpuSeconds() const { return pid_ > 0 ? ProcessCpuSeconds(pid_) : -1; }
  const std::string& address() const { return address_; }
  int port() const;
  pid_t pid() const { return pid_; }
  const std::string& err_path() const { return err_path_; }
  const std::vector<std::string>& args() const { return args_; }

 private:
  ListeningChild() = default;
  pid_t pid_ = -1;
  std::chrono::seconds stop_timeout_{60};
  std::string what_, out_path_, err_path_, address_;
  std::vector<std::string> args_;
};

}  // namespace sluice::bench
