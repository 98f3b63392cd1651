// Server: listening, accepting, handing connections to shards. See server.h.
#include "broker/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <future>
#include <mutex>

#include "base/logging.h"
#include "broker/loggers.h"

namespace sluice::broker {
namespace {

// Connections accepted per readiness event before yielding to other fds.
constexpr int kAcceptsPerEvent = 64;
// After running out of descriptors, accepting resumes after this long.
constexpr int64_t kAcceptRetryMs = 100;

// Closes a descriptor unless released: an accepted socket travelling to its shard in a
// posted task is closed if the task is dropped at Stop().
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

Server::Server(ServerOptions options, RequestHandler* handler)
    : options_(std::move(options)), handler_(handler) {}

Server::~Server() { Stop(); }

Status Server::Start() {
  SLUICE_ASSERT(!started_ && options_.shards >= 1);
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { ::signal(SIGPIPE, SIG_IGN); });

  std::vector<std::unique_ptr<Shard>> shards;
  for (int i = 0; i < options_.shards; ++i) {
    auto shard = std::make_unique<Shard>();
    ASSIGN_OR_RETURN(shard->loop, EventLoop::Create());
    shards.push_back(std::move(shard));
  }
  shards_ = std::move(shards);

  std::vector<ListenerOptions> wanted = options_.listeners;
  if (wanted.empty()) {
    ListenerOptions one;
    one.name = options_.connection.listener;
    one.host = options_.host;
    one.port = options_.port;
    one.tls = options_.connection.tls;
    one.sasl = options_.connection.sasl;
    wanted.push_back(std::move(one));
  }
  listeners_.resize(wanted.size());
  for (size_t i = 0; i < wanted.size(); ++i) {
    Listening& l = listeners_[i];
    l.options = wanted[i];
    l.connection = options_.connection;
    l.connection.listener = l.options.name;
    l.connection.tls = l.options.tls;
    l.connection.sasl = l.options.sasl;
    if (Status st = Listen(l); !st.ok()) {
      CloseListeners();
      shards_.clear();
      return st;
    }
  }

  started_ = true;
  std::vector<EventLoop*> loops;
  for (auto& shard : shards_) loops.push_back(shard->loop.get());
  handler_->OnServerStart(loops);
  for (auto& shard : shards_) {
    EventLoop* loop = shard->loop.get();
    shard->thread = std::thread([loop] { loop->Run(); });
  }
  for (const Listening& l : listeners_) {
    SLUICE_LOG(kLog, kInfo, "listening on {}:{} ({}{}{}) with {} shard(s)", l.options.host, l.port,
               l.options.name, l.options.tls != nullptr ? ", TLS" : "",
               l.options.sasl ? ", SASL" : "", shards_.size());
  }
  return Status::OK();
}

Status Server::Listen(Listening& l) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(l.options.port);
  if (::inet_pton(AF_INET, l.options.host.c_str(), &addr.sin_addr) != 1) {
    return InvalidArgumentError("listen host '{}' is not an IPv4 address", l.options.host);
  }
  std::string where = fmt::format("{}:{}", l.options.host, l.options.port);
  l.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (l.fd < 0) return ErrnoError("socket", where, errno);
  if (::setsockopt(l.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return ErrnoError("setsockopt(SO_REUSEADDR)", where, errno);
  }
  if (::bind(l.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoError("bind", where, errno);
  }
  if (::listen(l.fd, options_.backlog) != 0) return ErrnoError("listen", where, errno);
  socklen_t len = sizeof(addr);
  if (::getsockname(l.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ErrnoError("getsockname", where, errno);
  }
  l.port = ntohs(addr.sin_port);
  return shards_[0]->loop->Add(l.fd, EPOLLIN, [this, &l](uint32_t) { OnAcceptable(l); });
}

void Server::CloseListeners() {
  for (Listening& l : listeners_) {
    if (l.fd < 0) continue;
    if (!shards_.empty()) shards_[0]->loop->Remove(l.fd);
    ::close(l.fd);
    l.fd = -1;
  }
}

uint16_t Server::port(std::string_view name) const {
  for (const Listening& l : listeners_) {
    if (l.options.name == name) return l.port;
  }
  return 0;
}

void Server::Stop() {
  if (!started_) return;
  started_ = false;
  for (auto& shard : shards_) shard->loop->Stop();
  for (auto& shard : shards_) shard->thread.join();
  handler_->OnServerStop();
  // The loops are stopped: this thread now owns everything they owned.
  CloseListeners();
  for (auto& shard : shards_) {
    auto connections = std::move(shard->connections);
    for (auto& [ptr, conn] : connections) conn->Close();
  }
  // Destroys queued tasks (and the connections and sockets they hold).
  shards_.clear();
  connection_count_.store(0);
  SLUICE_LOG(kLog, kInfo, "stopped");
}

void Server::OnAcceptable(Listening& l) {
  for (int i = 0; i < kAcceptsPerEvent; ++i) {
    int fd = ::accept4(l.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      SLUICE_LOG(kLog, kWarn, "{}",
                 ErrnoError("accept", fmt::format("port {}", l.port), err).message());
      // Out of descriptors or memory: the pending connection stays readable, so a
      // level-triggered loop would spin. Stop listening for a while instead.
      PauseAccepting(l);
      return;
    }
    int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // as Kafka does
    Shard& shard = *shards_[next_shard_];
    next_shard_ = (next_shard_ + 1) % shards_.size();
    auto owned = std::make_shared<ScopedFd>(fd);
    shard.loop->Post([this, &shard, &l, owned] { AddConnection(shard, l, owned->Release()); });
  }
}

void Server::StopAccepting() {
  if (!started_) return;
  std::promise<void> done;
  shards_[0]->loop->Post([this, &done] {
    accepting_ = false;
    CloseListeners();
    done.set_value();
  });
  done.get_future().wait();
}

int Server::BusyConnectionCount() {
  if (!started_) return 0;
  std::vector<std::promise<int>> counts(shards_.size());
  for (size_t i = 0; i < shards_.size(); ++i) {
    Shard* shard = shards_[i].get();
    std::promise<int>* count = &counts[i];
    shard->loop->Post([shard, count] {
      int busy = 0;
      for (const auto& [ptr, conn] : shard->connections) busy += conn->busy() ? 1 : 0;
      count->set_value(busy);
    });
  }
  int total = 0;
  for (auto& c : counts) total += c.get_future().get();
  return total;
}

void Server::PauseAccepting(Listening& l) {
  EventLoop& loop = *shards_[0]->loop;
  if (!loop.Modify(l.fd, 0).ok()) return;
  loop.RunAfter(kAcceptRetryMs, [this, &l] {
    if (!accepting_ || l.fd < 0) return;
    Status st = shards_[0]->loop->Modify(l.fd, EPOLLIN);
    if (!st.ok()) SLUICE_LOG(kLog, kError, "cannot resume accepting: {}", st.ToString());
  });
}

void Server::AddConnection(Shard& shard, const Listening& l, int fd) {
  auto conn = std::make_shared<Connection>(shard.loop.get(), fd, l.connection, handler_,
                                           [this, &shard](Connection* c) {
                                             if (shard.connections.erase(c) != 0)
                                               --connection_count_;
                                           });
  shard.connections.emplace(conn.get(), conn);
  ++connection_count_;
  Status st = conn->Start();
  if (!st.ok()) {
    SLUICE_LOG(kLog, kWarn, "cannot register a new connection: {}", st.ToString());
    conn->Close();
  }
}

}  // namespace sluice::broker
