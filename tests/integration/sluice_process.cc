#include "sluice_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

extern char** environ;

namespace sluice::integration {
namespace {

std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

SluiceProcess::SluiceProcess(std::string sluice, std::string config_yaml)
    : sluice_(std::move(sluice)), config_yaml_(std::move(config_yaml)) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/sluice-it-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) != nullptr) dir_ = buf.data();
}

SluiceProcess::SluiceProcess(std::string sluice, std::string config_yaml, std::string kafka_addr,
                             std::vector<std::string> extra_args)
    : SluiceProcess(std::move(sluice), std::move(config_yaml)) {
  kafka_addr_ = std::move(kafka_addr);
  extra_args_ = std::move(extra_args);
}

SluiceProcess::~SluiceProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string SluiceProcess::Start(std::chrono::milliseconds timeout) {
  if (dir_.empty()) return "mkdtemp failed";
  if (pid_ > 0) return "already started";
  std::vector<std::string> args = {sluice_,
                                   "serve",
                                   "--kafka-addr",
                                   kafka_addr_,
                                   "--data-dir",
                                   (dir_ / "data").string(),
                                   "--shards",
                                   "2",
                                   "--http-addr",
                                   "127.0.0.1:0",
                                   "--pg-addr",
                                   "127.0.0.1:0",
                                   "--schema-registry-addr",
                                   "off"};
  if (!config_yaml_.empty()) {
    std::ofstream(dir_ / "sluice.yaml") << config_yaml_;
    args.push_back("--config");
    args.push_back((dir_ / "sluice.yaml").string());
  }
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  std::string out = (dir_ / "out").string();
  std::string err = (dir_ / "err").string();
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int rc = posix_spawn(&pid_, sluice_.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    pid_ = -1;
    return "posix_spawn " + sluice_ + ": " + std::strerror(rc);
  }

  // Port 0: the kernel picks a free port, which sluice prints once it listens.
  static const std::regex kServing(R"(sluice: serving Kafka on (127\.0\.0\.1:[0-9]+) )");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch m;
    std::string text = ReadWholeFile(out);
    if (std::regex_search(text, m, kServing)) {
      bootstrap_ = m[1];
      return "";
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return "sluice serve exited before listening: " + ReadWholeFile(err);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "sluice serve did not print its listening line in time";
}

std::string SluiceProcess::WaitForOutput(const std::string& regex,
                                         std::chrono::milliseconds timeout) const {
  const std::regex re(regex);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch m;
    std::string text = ReadWholeFile(dir_ / "out");
    if (std::regex_search(text, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
    if (pid_ <= 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

int SluiceProcess::Stop(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (true) {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (r < 0 && errno != EINTR) {
      pid_ = -1;
      return -1;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr, "sluice serve did not exit within %lld ms of SIGTERM; killing it\n",
                   static_cast<long long>(timeout.count()));
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void SluiceProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void SluiceProcess::DumpLogs(int lines) const {
  for (const char* name : {"out", "err"}) {
    std::ifstream in(dir_ / name);
    std::deque<std::string> tail;
    for (std::string line; std::getline(in, line);) {
      tail.push_back(line);
      if (static_cast<int>(tail.size()) > lines) tail.pop_front();
    }
    std::fprintf(stderr, "--- sluice serve %s (last %zu lines):\n", name, tail.size());
    for (const std::string& line : tail) std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace sluice::integration
