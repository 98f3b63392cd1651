// Helpers the benchmarks share: child processes (a broker, iperf3, pipelines) started
// with their output in files, waited for and described; files read whole or by their
// tail; CPU seconds of a process; grouped numbers for tables.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace sluice::bench {

// Starts `args` (args[0] an absolute path) with stdin from /dev/null and stdout and
// stderr appended to the given files. The child gets SIGTERM if the calling thread dies,
// so a crashed bench leaves no broker behind.
Result<pid_t> Spawn(const std::vector<std::string>& args, const std::string& out_path,
                    const std::string& err_path);

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

}  // namespace sluice::bench
