#include "bench/child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace sluice::bench {

Result<pid_t> Spawn(const std::vector<std::string>& args, const std::string& out_path,
                    const std::string& err_path) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork", args[0], errno);
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0 || err < 0) ::_exit(126);
    ::dup2(in, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

Result<std::string> FindProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    if (::access(program.c_str(), X_OK) != 0)
      return NotFoundError("{} is not an executable file", program);
    return std::filesystem::absolute(program).string();
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return NotFoundError("{} is not on PATH", program);
}

std::optional<int> WaitFor(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string DescribeWaitStatus(int status) {
  if (status == -1) return "could not be waited for";
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by {}", strsignal(WTERMSIG(status)));
  return fmt::format("ended with wait status {}", status);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string Tail(const std::string& path, int lines) {
  std::string text = ReadFile(path);
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (int i = 0; i < lines && pos != std::string::npos && pos > 0; ++i) {
    pos = text.rfind('\n', pos - 1);
  }
  std::string tail = text.substr(pos == std::string::npos ? 0 : pos + (pos > 0 ? 1 : 0));
  std::string out;
  std::istringstream in(tail);
  for (std::string line; std::getline(in, line);) out += "    " + line + "\n";
  return out;
}

double ProcessCpuSeconds(pid_t pid) {
  std::string stat = ReadFile(fmt::format("/proc/{}/stat", pid));
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 > stat.size()) return -1;
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  // After the command: state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string Grouped(uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  int n = static_cast<int>(digits.size());
  for (int i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[static_cast<size_t>(i)]);
  }
  return out;
}

Result<std::unique_ptr<ListeningChild>> ListeningChild::Start(
    std::string what, std::vector<std::string> args, const std::string& log_prefix,
    std::string_view marker, bool marker_on_stderr, std::chrono::seconds start_timeout,
    std::chrono::seconds stop_timeout) {
  std::unique_ptr<ListeningChild> c(new ListeningChild());
  c->what_ = std::move(what);
  c->out_path_ = log_prefix + ".out";
  c->err_path_ = log_prefix + ".err";
  c->stop_timeout_ = stop_timeout;
  c->args_ = std::move(args);
  ASSIGN_OR_RETURN(c->pid_, Spawn(c->args_, c->out_path_, c->err_path_));
  const std::string& watch = marker_on_stderr ? c->err_path_ : c->out_path_;
  auto deadline = std::chrono::steady_clock::now() + start_timeout;
  while (true) {
    std::string out = ReadFile(watch);
    size_t at = out.find(marker);
    if (at != std::string::npos) {
      size_t begin = at + marker.size();
      size_t end = out.find_first_of(" /\n", begin);
      if (end != std::string::npos) {
        c->address_ = out.substr(begin, end - begin);
        return c;
      }
    }
    if (std::optional<int> st = WaitFor(c->pid_, std::chrono::milliseconds(0))) {
      c->pid_ = -1;
      return IOError("{} {} before listening; its output:\n{}{}", c->what_, DescribeWaitStatus(*st),
                     Tail(c->out_path_, 10), Tail(c->err_path_, 20));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return IOError("{} did not report listening within {} s; its output:\n{}{}", c->what_,
                     start_timeout.count(), Tail(c->out_path_, 10), Tail(c->err_path_, 20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void ListeningChild::Swap(ListeningChild& other) noexcept {
  std::swap(pid_, other.pid_);
  std::swap(stop_timeout_, other.stop_timeout_);
  std::swap(what_, other.what_);
  std::swap(out_path_, other.out_path_);
  std::swap(err_path_, other.err_path_);
  std::swap(address_, other.address_);
  std::swap(args_, other.args_);
}

ListeningChild::~ListeningChild() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    WaitFor(pid_, std::chrono::seconds(5));
  }
}

Status ListeningChild::Stop() {
  if (pid_ <= 0) return FailedPreconditionError("{} is not running", what_);
  pid_t pid = std::exchange(pid_, -1);
  ::kill(pid, SIGTERM);
  std::optional<int> st = WaitFor(pid, stop_timeout_);
  if (!st) {
    ::kill(pid, SIGKILL);
    WaitFor(pid, std::chrono::seconds(5));
    return IOError("{} did not stop within {} s of SIGTERM (killed); its log:\n{}", what_,
                   stop_timeout_.count(), Tail(err_path_, 20));
  }
  if (!WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
    return IOError("{} {} after SIGTERM; its output:\n{}{}", what_, DescribeWaitStatus(*st),
                   Tail(out_path_, 5), Tail(err_path_, 20));
  }
  return Status::OK();
}

Status ListeningChild::CheckAlive() {
  if (pid_ <= 0) return Status::OK();
  if (std::optional<int> st = WaitFor(pid_, std::chrono::milliseconds(0))) {
    pid_ = -1;
    return IOError("{} {}; its output:\n{}{}", what_, DescribeWaitStatus(*st), Tail(out_path_, 5),
                   Tail(err_path_, 20));
  }
  return Status::OK();
}

int ListeningChild::port() const {
  size_t colon = address_.rfind(':');
  return colon == std::string::npos ? -1 : std::atoi(address_.c_str() + colon + 1);
}

}  // namespace sluice::bench
