// HttpFrontDoor: see http_front_door.h.
#include "app/http_front_door.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <string_view>
#include <utility>

#include "base/http_server.h"
#include "base/logging.h"
#include "broker/event_loop.h"
#include "net/transport.h"

namespace sluice::app {
namespace {

const Logger kLog("http");

// Bytes buffered each way per connection; a side whose buffer is full is not read.
constexpr size_t kBufferBytes = 256 * 1024;
// A first request head longer than this goes to the server as it is (which refuses it).
constexpr size_t kMaxHeadBytes = 64 * 1024;
// Bytes per read or write call.
constexpr size_t kChunkBytes = 64 * 1024;
// Pump rounds per event before yielding to the other connections of the loop.
constexpr int kRoundsPerEvent = 64;
constexpr int kAcceptsPerEvent = 64;

std::string AddressText(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) return text;
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text)) != nullptr) return text;
  }
  return "?";
}

// A byte queue: appended at the back, consumed from the front.
struct ByteQueue {
  std::string bytes;
  size_t off = 0;

  size_t size() const { return bytes.size() - off; }
  bool empty() const { return size() == 0; }
  const char* data() const { return bytes.data() + off; }
  void Consume(size_t n) {
    off += n;
    if (off == bytes.size()) {
      bytes.clear();
      off = 0;
    } else if (off >= kChunkBytes && off * 2 >= bytes.size()) {
      bytes.erase(0, off);
      off = 0;
    }
  }
};

}  // namespace

struct HttpFrontDoor::Conn {
  enum class Block { kNone, kRead, kWrite };  // what a blocked TLS call waits for

  int fd = -1;
  int backend = -1;
  int backend_key = 0;  // the backend connection's local port (HttpPeers)
  std::string peer;
  std::unique_ptr<net::Transport> transport;
  ByteQueue up;          // client → server
  ByteQueue down;        // server → client
  size_t head_scan = 0;  // where the search for the head's end resumes (in `up`)
  bool head_done = false;
  bool connecting = false;
  bool connected = false;
  bool client_eof = false;
  bool backend_eof = false;
  bool backend_shut = false;
  bool closed = false;
  Block client_read_block = Block::kNone;
  Block client_write_block = Block::kNone;
  uint32_t client_interest = 0;
  uint32_t backend_interest = 0;
  broker::EventLoop::TimerId timer = 0;
};

HttpFrontDoor::HttpFrontDoor(HttpFrontDoorOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<HttpFrontDoor>> HttpFrontDoor::Start(HttpFrontDoorOptions options) {
  ASSIGN_OR_RETURN(auto host_port, SplitHostPort(options.listen_addr, "http.addr"));
  if (options.peers == nullptr) options.peers = std::make_shared<HttpPeers>();
  std::unique_ptr<HttpFrontDoor> d(new HttpFrontDoor(std::move(options)));
  d->host_ = host_port.first;
  ASSIGN_OR_RETURN(d->loop_, broker::EventLoop::Create());

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(host_port.second);
  int gai = ::getaddrinfo(d->host_.empty() ? nullptr : d->host_.c_str(), port_text.c_str(), &hints,
                          &found);
  if (gai != 0 || found == nullptr) {
    return InvalidArgumentError("http.addr: cannot resolve '{}': {}", d->host_,
                                ::gai_strerror(gai));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  const std::string& where = d->options_.listen_addr;
  d->listen_fd_ = ::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                           found->ai_protocol);
  if (d->listen_fd_ < 0) return ErrnoError("socket", where, errno);
  int one = 1;
  (void)::setsockopt(d->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(d->listen_fd_, found->ai_addr, found->ai_addrlen) != 0) {
    return IOError("--http-addr: cannot listen on {}: {}", where, std::strerror(errno));
  }
  if (::listen(d->listen_fd_, 1024) != 0) return ErrnoError("listen", where, errno);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (::getsockname(d->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return ErrnoError("getsockname", where, errno);
  }
  d->port_ =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  RETURN_IF_ERROR(
      d->loop_->Add(d->listen_fd_, EPOLLIN, [self = d.get()](uint32_t) { self->OnAcceptable(); }));
  d->thread_ = std::thread([loop = d->loop_.get()] { loop->Run(); });
  return d;
}

HttpFrontDoor::~HttpFrontDoor() { Stop(); }

void HttpFrontDoor::Stop() {
  if (!thread_.joinable()) return;
  std::promise<void> done;
  loop_->Post([this, &done] {
    std::vector<std::shared_ptr<Conn>> open;
    for (auto& [fd, c] : conns_) open.push_back(c);
    for (auto& c : open) Close(*c, nullptr);
    loop_->Remove(listen_fd_);
    ::close(listen_fd_);
    listen_fd_ = -1;
    done.set_value();
  });
  done.get_future().wait();
  loop_->Stop();
  thread_.join();
}

void HttpPeers::Set(int local_port, std::string addr) {
  std::lock_guard lock(mu_);
  by_port_[local_port] = std::move(addr);
}

void HttpPeers::Erase(int local_port) {
  std::lock_guard lock(mu_);
  by_port_.erase(local_port);
}

std::string HttpPeers::Get(int local_port) const {
  std::lock_guard lock(mu_);
  auto it = by_port_.find(local_port);
  return it == by_port_.end() ? std::string() : it->second;
}

void HttpFrontDoor::OnAcceptable() {
  for (int i = 0; i < kAcceptsPerEvent; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      SLUICE_LOG(kLog, kWarn, "{}", ErrnoError("accept", options_.listen_addr, err).message());
      // Out of descriptors: the pending connection stays readable and a level-triggered
      // loop would spin. Stop listening for a second.
      loop_->Modify(listen_fd_, 0);
      loop_->RunAfter(1000, [this] {
        if (listen_fd_ >= 0) (void)loop_->Modify(listen_fd_, EPOLLIN);
      });
      return;
    }
    if (static_cast<int>(conns_.size()) >= options_.max_connections) {
      SLUICE_LOG(kLog, kWarn, "connection from {} closed: {} connections are open already",
                 AddressText(addr), conns_.size());
      ::close(fd);
      continue;
    }
    Admit(fd, AddressText(addr));
  }
}

void HttpFrontDoor::Admit(int fd, std::string peer) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto c = std::make_shared<Conn>();
  c->fd = fd;
  c->peer = std::move(peer);
  c->transport = options_.tls != nullptr ? options_.tls->MakeServer(fd) : net::MakePlaintext(fd);
  if (c->transport == nullptr) {
    SLUICE_LOG(kLog, kWarn, "connection from {}: no TLS session", c->peer);
    ::close(fd);
    return;
  }
  std::weak_ptr<Conn> weak = c;
  c->client_interest = EPOLLIN;
  if (Status st = loop_->Add(fd, EPOLLIN,
                             [this, weak](uint32_t events) {
                               std::shared_ptr<Conn> k = weak.lock();
                               if (k == nullptr || k->closed) return;
                               if (events & EPOLLERR) {
                                 Close(*k, nullptr);
                                 return;
                               }
                               if (events & EPOLLHUP) {  // both directions gone
                                 Close(*k, nullptr);
                                 return;
                               }
                               Pump(k);
                             });
      !st.ok()) {
    SLUICE_LOG(kLog, kWarn, "connection from {}: {}", c->peer, st.message());
    c->transport.reset();
    ::close(fd);
    return;
  }
  c->timer = loop_->RunAfter(options_.head_timeout_ms, [this, weak] {
    std::shared_ptr<Conn> k = weak.lock();
    if (k == nullptr || k->closed || k->head_done) return;
    k->timer = 0;
    SLUICE_LOG(kLog, kInfo, "connection from {}: no {}request within {} ms; closing", k->peer,
               options_.tls != nullptr && !net::SessionOf(*k->transport).has_value()
                   ? "TLS handshake and "
                   : "",
               options_.head_timeout_ms);
    Close(*k, nullptr);
  });
  conns_.emplace(fd, c);
  Pump(c);  // a TLS server transport may have nothing to do until the ClientHello: cheap
}

bool HttpFrontDoor::ConnectBackend(Conn& c) {
  c.backend = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c.backend < 0) {
    SLUICE_LOG(kLog, kWarn, "{}", ErrnoError("socket", "the HTTP server", errno).message());
    return false;
  }
  int one = 1;
  (void)::setsockopt(c.backend, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(options_.backend_port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(c.backend, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0) {
    c.connected = true;
  } else if (errno == EINPROGRESS) {
    c.connecting = true;
  } else {
    SLUICE_LOG(
        kLog, kWarn, "{}",
        ErrnoError("connect", fmt::format("127.0.0.1:{}", options_.backend_port), errno).message());
    return false;
  }
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  if (::getsockname(c.backend, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    c.backend_key = ntohs(local.sin_port);
    options_.peers->Set(c.backend_key, c.peer);
  }
  c.backend_interest = c.connecting ? EPOLLOUT : 0;
  std::weak_ptr<Conn> weak = conns_.at(c.fd);
  Status st = loop_->Add(c.backend, c.backend_interest, [this, weak](uint32_t events) {
    std::shared_ptr<Conn> k = weak.lock();
    if (k == nullptr || k->closed) return;
    if (k->connecting) {
      int err = 0;
      socklen_t n = sizeof(err);
      if (::getsockopt(k->backend, SOL_SOCKET, SO_ERROR, &err, &n) != 0) err = errno;
      if (err != 0) {
        SLUICE_LOG(kLog, kWarn, "connection from {}: the HTTP server behind: {}", k->peer,
                   std::strerror(err));
        Close(*k, nullptr);
        return;
      }
      if (!(events & EPOLLOUT)) return;
      k->connecting = false;
      k->connected = true;
    } else if ((events & EPOLLERR) != 0) {
      Close(*k, nullptr);
      return;
    }
    Pump(k);
  });
  if (!st.ok()) {
    SLUICE_LOG(kLog, kWarn, "connection from {}: {}", c.peer, st.message());
    return false;
  }
  return true;
}

void HttpFrontDoor::Pump(std::shared_ptr<Conn> self) {
  Conn& c = *self;
  static thread_local std::string chunk(kChunkBytes, '\0');
  bool progress = true;
  for (int round = 0; progress && round < kRoundsPerEvent; ++round) {
    progress = false;
    // The client's bytes into `up`.
    if (!c.client_eof && c.up.size() < kBufferBytes) {
      net::IoResult r =
          c.transport->Read(chunk.data(), std::min(kChunkBytes, kBufferBytes - c.up.size()));
      switch (r.state) {
        case net::IoResult::State::kDone:
          c.up.bytes.append(chunk.data(), r.bytes);
          c.client_read_block = Conn::Block::kNone;
          progress = true;
          break;
        case net::IoResult::State::kWantRead:
          c.client_read_block = Conn::Block::kRead;
          break;
        case net::IoResult::State::kWantWrite:
          c.client_read_block = Conn::Block::kWrite;
          break;
        case net::IoResult::State::kClosed:
          c.client_eof = true;
          progress = true;
          break;
        case net::IoResult::State::kError: {
          std::string why = c.transport->last_error();
          if (why.empty()) why = std::strerror(r.err);
          if (!c.head_done && options_.tls != nullptr &&
              !net::SessionOf(*c.transport).has_value()) {
            SLUICE_LOG(kLog, kInfo, "connection from {}: TLS handshake failed: {}", c.peer, why);
          }
          Close(c, nullptr);
          return;
        }
      }
    }
    // Until the first request's head is whole, nothing goes to the server.
    if (!c.head_done) {
      std::string_view seen(c.up.data(), c.up.size());
      // A head ends with an empty line: "\r\n\r\n", or "\n\n" from a lenient client.
      size_t from = c.head_scan >= 2 ? c.head_scan - 2 : 0;
      if (seen.find("\n\r\n", from) != std::string_view::npos ||
          seen.find("\n\n", from) != std::string_view::npos || seen.size() >= kMaxHeadBytes) {
        c.head_done = true;
        if (c.timer != 0) loop_->Cancel(c.timer);
        c.timer = 0;
        if (!ConnectBackend(c)) {
          Close(c, nullptr);
          return;
        }
        progress = true;
      } else if (c.client_eof) {
        Close(c, nullptr);  // gone before asking anything
        return;
      } else {
        c.head_scan = seen.size();
      }
    }
    if (c.connected && c.backend >= 0) {
      // `up` to the server.
      if (!c.up.empty()) {
        ssize_t n =
            ::send(c.backend, c.up.data(), std::min(c.up.size(), kChunkBytes), MSG_NOSIGNAL);
        if (n > 0) {
          c.up.Consume(static_cast<size_t>(n));
          progress = true;
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          Close(c, nullptr);
          return;
        }
      }
      if (c.client_eof && c.up.empty() && !c.backend_shut && !c.backend_eof) {
        (void)::shutdown(c.backend, SHUT_WR);
        c.backend_shut = true;
      }
      // The server's bytes into `down`.
      if (!c.backend_eof && c.down.size() < kBufferBytes) {
        ssize_t n =
            ::recv(c.backend, chunk.data(), std::min(kChunkBytes, kBufferBytes - c.down.size()), 0);
        if (n > 0) {
          c.down.bytes.append(chunk.data(), static_cast<size_t>(n));
          progress = true;
        } else if (n == 0) {
          c.backend_eof = true;
          CloseBackend(c);  // a socket shut both ways would report EPOLLHUP for ever
          progress = true;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          Close(c, nullptr);
          return;
        }
      }
    }
    // `down` to the client.
    if (!c.down.empty()) {
      net::IoResult r = c.transport->Write(c.down.data(), std::min(c.down.size(), kChunkBytes));
      switch (r.state) {
        case net::IoResult::State::kDone:
          c.down.Consume(r.bytes);
          c.client_write_block = Conn::Block::kNone;
          progress = true;
          break;
        case net::IoResult::State::kWantRead:
          c.client_write_block = Conn::Block::kRead;
          break;
        case net::IoResult::State::kWantWrite:
          c.client_write_block = Conn::Block::kWrite;
          break;
        case net::IoResult::State::kClosed:
        case net::IoResult::State::kError:
          Close(c, nullptr);
          return;
      }
    }
    // The server has ended the connection and everything it said is out.
    if (c.backend_eof && c.down.empty()) {
      Close(c, nullptr);
      return;
    }
  }
  if (progress) {
    // Out of rounds with more to do (bytes a TLS transport holds would wake no epoll):
    // come back after the loop's other connections.
    std::weak_ptr<Conn> weak = self;
    loop_->Post([this, weak] {
      std::shared_ptr<Conn> k = weak.lock();
      if (k != nullptr && !k->closed) Pump(k);
    });
  }
  UpdateInterest(c);
}

void HttpFrontDoor::UpdateInterest(Conn& c) {
  uint32_t client = 0;
  if (!c.client_eof && c.up.size() < kBufferBytes) {
    client |= c.client_read_block == Conn::Block::kWrite ? EPOLLOUT : EPOLLIN;
  }
  if (!c.down.empty()) client |= c.client_write_block == Conn::Block::kRead ? EPOLLIN : EPOLLOUT;
  if (client != c.client_interest) {
    c.client_interest = client;
    (void)loop_->Modify(c.fd, client);
  }
  if (c.backend < 0) return;  // not yet connected, or closed after its end
  uint32_t backend = 0;
  if (c.connecting) {
    backend = EPOLLOUT;
  } else if (c.connected) {
    if (!c.backend_eof && c.down.size() < kBufferBytes) backend |= EPOLLIN;
    if (!c.up.empty()) backend |= EPOLLOUT;
  }
  if (backend != c.backend_interest) {
    c.backend_interest = backend;
    (void)loop_->Modify(c.backend, backend);
  }
}

void HttpFrontDoor::Close(Conn& c, const char* why) {
  if (c.closed) return;
  c.closed = true;
  if (why != nullptr) SLUICE_LOG(kLog, kInfo, "connection from {}: {}", c.peer, why);
  if (c.timer != 0) loop_->Cancel(c.timer);
  c.timer = 0;
  loop_->Remove(c.fd);
  c.transport.reset();
  ::close(c.fd);
  CloseBackend(c);
  conns_.erase(c.fd);  // may free `c`: the last statement
}

void HttpFrontDoor::CloseBackend(Conn& c) {
  if (c.backend < 0) return;
  loop_->Remove(c.backend);
  ::close(c.backend);
  c.backend = -1;
  if (c.backend_key != 0) options_.peers->Erase(c.backend_key);
}

}  // namespace sluice::app
