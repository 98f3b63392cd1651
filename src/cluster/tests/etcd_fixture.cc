// EtcdCluster: real etcd members for tests; see etcd_fixture.h.
#include "cluster/tests/etcd_fixture.h"

#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace sluice::cluster::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

bool Exited(pid_t pid, milliseconds within) {
  auto deadline = Clock::now() + within;
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || r < 0) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
}

}  // namespace

std::vector<int> FreeLoopbackPorts(int n) {
  std::vector<int> fds, ports;
  for (int i = 0; i < n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      if (fd >= 0) ::close(fd);
      ports.push_back(0);
      continue;
    }
    fds.push_back(fd);
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

std::string EtcdCluster::Unavailable(const std::string& binary) {
  if (::access(binary.c_str(), X_OK) != 0)
    return binary + " is not installed (apt-get install etcd-server)";
  if (!fs::is_directory("/dev/shm")) return "/dev/shm (tmpfs for etcd's data) is missing";
  return "";
}

Result<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(EtcdClusterOptions options) {
  if (std::string why = Unavailable(options.binary); !why.empty())
    return FailedPreconditionError("{}", why);
  if (options.members < 1)
    return InvalidArgumentError("etcd cluster of {} members", options.members);
  std::unique_ptr<EtcdCluster> c(new EtcdCluster(options));
  std::string tmpl = "/dev/shm/sluice-etcd-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return ErrnoError("mkdtemp", tmpl, errno);
  c->base_dir_ = tmpl;
  c->token_ = "sluice-test-" + fs::path(tmpl).filename().string();
  std::vector<int> ports = FreeLoopbackPorts(2 * options.members);
  for (int i = 0; i < options.members; ++i) {
    Member m;
    m.name = "m" + std::to_string(i);
    m.client_port = ports[2 * i];
    m.peer_port = ports[2 * i + 1];
    m.data_dir = c->base_dir_ + "/" + m.name;
    m.log_path = c->base_dir_ + "/" + m.name + ".log";
    if (m.client_port == 0 || m.peer_port == 0) return IOError("no free loopback port");
    c->members_.push_back(m);
  }
  for (int i = 0; i < options.members; ++i) RETURN_IF_ERROR(c->Spawn(i));
  RETURN_IF_ERROR(c->WaitAllRunningHealthy());
  return c;
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < size(); ++i) (void)Kill(i);
  std::error_code ec;
  if (!base_dir_.empty() && std::getenv("SLUICE_KEEP_ETCD") == nullptr) {
    fs::remove_all(base_dir_, ec);
  }
}

std::string EtcdCluster::endpoint(int i) const {
  return "http://127.0.0.1:" + std::to_string(members_[i].client_port);
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (int i = 0; i < size(); ++i) out.push_back(endpoint(i));
  return out;
}

std::string EtcdCluster::InitialCluster() const {
  std::string out;
  for (const Member& m : members_) {
    if (!out.empty()) out += ",";
    out += m.name + "=http://127.0.0.1:" + std::to_string(m.peer_port);
  }
  return out;
}

Status EtcdCluster::Spawn(int i) {
  Member& m = members_[i];
  std::string client = "http://127.0.0.1:" + std::to_string(m.client_port);
  std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
  std::vector<std::string> argv = {
      options_.binary,
      "--name=" + m.name,
      "--data-dir=" + m.data_dir,
      "--listen-client-urls=" + client,
      "--advertise-client-urls=" + client,
      "--listen-peer-urls=" + peer,
      "--initial-advertise-peer-urls=" + peer,
      "--initial-cluster=" + InitialCluster(),
      "--initial-cluster-state=new",
      "--initial-cluster-token=" + token_,
      "--heartbeat-interval=" + std::to_string(options_.heartbeat_interval_ms),
      "--election-timeout=" + std::to_string(options_.election_timeout_ms),
      "--logger=zap",
      "--log-outputs=stderr",
      "--log-level=warn",
  };
  if (options_.progress_notify_interval_ms > 0) {
    argv.push_back("--experimental-watch-progress-notify-interval=" +
                   std::to_string(options_.progress_notify_interval_ms) + "ms");
  }
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork", options_.binary, errno);
  if (pid == 0) {
    int fd = ::open(m.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  m.pid = pid;
  m.started_once = true;
  return Status::OK();
}

Status EtcdCluster::Kill(int i) {
  Member& m = members_[i];
  if (m.pid <= 0) return Status::OK();
  ::kill(m.pid, SIGKILL);
  Exited(m.pid, milliseconds(10000));
  m.pid = 0;
  return Status::OK();
}

Status EtcdCluster::Stop(int i) {
  Member& m = members_[i];
  if (m.pid <= 0) return Status::OK();
  ::kill(m.pid, SIGTERM);
  ::kill(m.pid, SIGCONT);  // a paused member handles it too
  if (!Exited(m.pid, milliseconds(10000))) {
    ::kill(m.pid, SIGKILL);
    Exited(m.pid, milliseconds(10000));
  }
  m.pid = 0;
  return Status::OK();
}

Status EtcdCluster::Pause(int i) {
  if (members_[i].pid <= 0) return FailedPreconditionError("etcd member {} is not running", i);
  if (::kill(members_[i].pid, SIGSTOP) != 0) return ErrnoError("kill", "SIGSTOP", errno);
  return Status::OK();
}

Status EtcdCluster::Resume(int i) {
  if (members_[i].pid <= 0) return FailedPreconditionError("etcd member {} is not running", i);
  if (::kill(members_[i].pid, SIGCONT) != 0) return ErrnoError("kill", "SIGCONT", errno);
  return Status::OK();
}

Status EtcdCluster::Restart(int i) {
  RETURN_IF_ERROR(Kill(i));
  RETURN_IF_ERROR(Spawn(i));
  return WaitHealthy(i);
}

Status EtcdCluster::WaitHealthy(int i) {
  const Member& m = members_[i];
  auto deadline = Clock::now() + options_.start_timeout;
  httplib::Client client("127.0.0.1", m.client_port);
  client.set_connection_timeout(milliseconds(200));
  client.set_read_timeout(milliseconds(1000));
  std::string last = "no answer";
  while (Clock::now() < deadline) {
    int status = 0;
    if (m.pid > 0 && ::waitpid(m.pid, &status, WNOHANG) == m.pid) {
      members_[i].pid = 0;
      return IOError("etcd member {} exited at start: {}", m.name, LogTail(i));
    }
    if (auto res = client.Get("/health")) {
      if (res->status == 200 && res->body.find("\"true\"") != std::string::npos) {
        return Status::OK();
      }
      last = res->body;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  return IOError("etcd member {} not healthy ({}): {}", m.name, last, LogTail(i));
}

Status EtcdCluster::WaitAllRunningHealthy() {
  for (int i = 0; i < size(); ++i) {
    if (running(i)) RETURN_IF_ERROR(WaitHealthy(i));
  }
  return Status::OK();
}

std::string EtcdCluster::LogTail(int i, size_t bytes) const {
  std::ifstream in(members_[i].log_path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() <= bytes ? s : s.substr(s.size() - bytes);
}

}  // namespace sluice::cluster::testing
