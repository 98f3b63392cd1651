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
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <future>
#include <optional>
#include <string_view>
#include <utility>

#include "app/loggers.h"
#include "base/http_server.h"
#include "base/logging.h"
#include "broker/event_loop.h"
#include "net/transport.h"

namespace sluice::app {
namespace {

// Response bytes buffered per connection; the server's side is not read while it is full.
constexpr size_t kBufferBytes = 256 * 1024;
// A request head longer than this is refused (431).
constexpr size_t kMaxHeadBytes = 64 * 1024;
// A chunk-size or trailer line longer than this is refused (400).
constexpr size_t kMaxLineBytes = 4096;
// Bytes per read or write call.
constexpr size_t kChunkBytes = 64 * 1024;
// Pump rounds per event before yielding to the other connections of the loop.
constexpr int kRoundsPerEvent = 64;
constexpr int kAcceptsPerEvent = 64;
// How often deadlines are checked.
constexpr int64_t kSweepMs = 250;
// Log lines about refused or timed-out connections: at most this many per sweep period
// beyond which they are counted and summed up (an attack must not flood the log).
constexpr int kLogLinesPerSweep = 5;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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

// The value of header `name` (lower case) in `head` (a request's lines), all of them
// joined by ","; nullopt when absent.
std::optional<std::string> HeaderValue(std::string_view head, std::string_view name) {
  std::optional<std::string> out;
  size_t at = head.find('\n');  // past the request line
  while (at != std::string_view::npos && at + 1 < head.size()) {
    const size_t begin = at + 1;
    const size_t end = head.find('\n', begin);
    std::string_view line =
        head.substr(begin, end == std::string_view::npos ? head.size() - begin : end - begin);
    at = end;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < colon && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(line[i])) == name[i];
    }
    if (!same) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (out.has_value()) {
      *out += ",";
      *out += value;
    } else {
      out = std::string(value);
    }
  }
  return out;
}

}  // namespace

void HttpPeers::Set(int local_port, std::string addr) {
  std::lock_guard lock(mu_);
  by_port_[local_port] = std::move(addr);
}

void HttpPeers::Erase(int local_port) {
  std::lock_guard lock(mu_);
  by_port_.erase(local_port);
}

std::string HttpPeers::Get(const std::string& addr, int port) const {
  if (addr != "127.0.0.1") return {};
  std::lock_guard lock(mu_);
  auto it = by_port_.find(port);
  return it == by_port_.end() ? std::string() : it->second;
}

struct HttpFrontDoor::Conn {
  enum class Block { kNone, kRead, kWrite };  // what a blocked TLS call waits for
  // Where the gate is in the request it reads: its head, a Content-Length body, a chunked
  // body's size line or data, the trailer after the last chunk.
  enum class Gate { kHead, kBody, kChunkSize, kChunkData, kTrailer };

  int fd = -1;
  int backend = -1;
  int backend_key = 0;  // the backend connection's local port (HttpPeers)
  std::string peer;
  std::unique_ptr<net::Transport> transport;
  ByteQueue up;        // client → server: [release bytes that may go][bytes still gated]
  ByteQueue down;      // server → client
  size_t release = 0;  // bytes at the front of `up` that are whole requests
  size_t scan = 0;     // where the gate reads on (an offset in `up`, >= release)
  size_t need = 0;     // kBody / kChunkData: bytes still to come
  Gate gate = Gate::kHead;
  bool request_open = true;      // a request has begun (the first one: at accept)
  int64_t request_deadline = 0;  // steady ms by which the open request must be whole
  int64_t write_progress = 0;    // steady ms of the last byte written to the client
  int requests = 0;              // whole requests passed on
  bool refused = false;          // a refusal is queued: close once it is out
  bool connecting = false;
  bool connected = false;
  bool client_eof = false;
  bool backend_eof = false;
  bool backend_watched = false;
  bool closed = false;
  Block client_read_block = Block::kNone;
  Block client_write_block = Block::kNone;
  uint32_t client_interest = 0;
  uint32_t backend_interest = 0;

  // Bytes `up` may still take: whole requests waiting for the server plus the one being
  // read, up to the largest request.
  size_t ReadRoom(size_t max_request) const {
    const size_t cap = max_request + kMaxHeadBytes;
    return up.size() >= cap ? 0 : cap - up.size();
  }
  void Consumed(size_t n) {
    up.Consume(n);
    release -= n;
    scan -= n;
  }
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
  d->loop_->RunAfter(kSweepMs, [self = d.get()] { self->Sweep(); });
  d->thread_ = std::thread([loop = d->loop_.get()] { loop->Run(); });
  return d;
}

HttpFrontDoor::~HttpFrontDoor() {
  Stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);  // Start() failed after the socket was made
}

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
      SLUICE_LOG(kHttpLog, kWarn, "{}", ErrnoError("accept", options_.listen_addr, err).message());
      // Out of descriptors: the pending connection stays readable and a level-triggered
      // loop would spin. Stop listening for a second.
      (void)loop_->Modify(listen_fd_, 0);
      loop_->RunAfter(1000, [this] {
        if (listen_fd_ >= 0) (void)loop_->Modify(listen_fd_, EPOLLIN);
      });
      return;
    }
    if (static_cast<int>(conns_.size()) >= options_.max_connections) {
      if (++refused_at_limit_ <= kLogLinesPerSweep) {
        SLUICE_LOG(kHttpLog, kWarn, "connection from {} closed: {} connections are open already",
                   AddressText(addr), conns_.size());
      }
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
    SLUICE_LOG(kHttpLog, kWarn, "connection from {}: no TLS session", c->peer);
    ::close(fd);
    return;
  }
  std::weak_ptr<Conn> weak = c;
  c->client_interest = EPOLLIN;
  if (Status st = loop_->Add(fd, EPOLLIN,
                             [this, weak](uint32_t events) {
                               std::shared_ptr<Conn> k = weak.lock();
                               if (k == nullptr || k->closed) return;
                               if (events & (EPOLLERR | EPOLLHUP)) {  // both directions gone
                                 Close(*k, nullptr);
                                 return;
                               }
                               Pump(k);
                             });
      !st.ok()) {
    SLUICE_LOG(kHttpLog, kWarn, "connection from {}: {}", c->peer, st.message());
    c->transport.reset();
    ::close(fd);
    return;
  }
  const int64_t now = NowMs();
  c->request_deadline = now + options_.head_timeout_ms;
  c->write_progress = now;
  conns_.emplace(fd, c);
  Pump(c);  // a TLS server transport may have nothing to do until the ClientHello: cheap
}

bool HttpFrontDoor::ConnectBackend(Conn& c) {
  c.backend = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c.backend < 0) {
    SLUICE_LOG(kHttpLog, kWarn, "{}", ErrnoError("socket", "the HTTP server", errno).message());
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
        kHttpLog, kWarn, "{}",
        ErrnoError("connect", fmt::format("127.0.0.1:{}", options_.backend_port), errno).message());
    return false;
  }
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  if (::getsockname(c.backend, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    c.backend_key = ntohs(local.sin_port);
    options_.peers->Set(c.backend_key, c.peer);
  }
  WatchBackend(c, c.connecting ? uint32_t{EPOLLOUT} : 0);
  return true;
}

void HttpFrontDoor::WatchBackend(Conn& c, uint32_t events) {
  c.backend_interest = events;
  if (events == 0) {
    // Unwatched rather than watched for nothing: a socket shut both ways reports EPOLLHUP
    // whatever it is asked, and a full `down` would make that a busy loop.
    if (c.backend_watched) loop_->Remove(c.backend);
    c.backend_watched = false;
    return;
  }
  if (c.backend_watched) {
    (void)loop_->Modify(c.backend, events);
    return;
  }
  std::weak_ptr<Conn> weak = conns_.at(c.fd);
  Status st = loop_->Add(c.backend, events, [this, weak](uint32_t ready) {
    std::shared_ptr<Conn> k = weak.lock();
    if (k == nullptr || k->closed) return;
    if (k->connecting) {
      int err = 0;
      socklen_t n = sizeof(err);
      if (::getsockopt(k->backend, SOL_SOCKET, SO_ERROR, &err, &n) != 0) err = errno;
      if (err != 0) {
        SLUICE_LOG(kHttpLog, kWarn, "connection from {}: the HTTP server behind: {}", k->peer,
                   std::strerror(err));
        Close(*k, nullptr);
        return;
      }
      if (!(ready & EPOLLOUT)) return;
      k->connecting = false;
      k->connected = true;
    }
    Pump(k);  // errors and the end show in recv/send
  });
  if (!st.ok()) {
    SLUICE_LOG(kHttpLog, kWarn, "connection from {}: {}", c.peer, st.message());
    return;
  }
  c.backend_watched = true;
}

void HttpFrontDoor::Refuse(Conn& c, int status, const char* reason) {
  if (++refusals_ <= kLogLinesPerSweep) {
    SLUICE_LOG(kHttpLog, kInfo, "connection from {}: refused with {} {}", c.peer, status, reason);
  }
  c.refused = true;
  // Said only when nothing was passed on: otherwise the server's answers are under way on
  // this connection and the refusal would land inside one of them.
  if (c.requests == 0) {
    c.down.bytes += fmt::format(
        "HTTP/1.1 {} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: "
        "close\r\n\r\n{}\n",
        status, reason, std::strlen(reason) + 1, reason);
  }
}

bool HttpFrontDoor::Frame(Conn& c, int64_t now_ms) {
  for (;;) {
    const std::string_view bytes(c.up.data(), c.up.size());
    switch (c.gate) {
      case Conn::Gate::kHead: {
        if (c.scan == bytes.size()) return true;  // nothing new
        if (!c.request_open) {
          c.request_open = true;
          c.request_deadline = now_ms + options_.head_timeout_ms;
        }
        // A head ends with an empty line: "\r\n\r\n" ("\n\n" from a lenient client).
        const size_t from = c.scan >= c.release + 3 ? c.scan - 3 : c.release;
        size_t end = bytes.find("\r\n\r\n", from);
        size_t end_bare = bytes.find("\n\n", from);
        if (end != std::string_view::npos) end += 4;
        if (end_bare != std::string_view::npos &&
            (end == std::string_view::npos || end_bare + 2 < end)) {
          end = end_bare + 2;
        }
        if (end == std::string_view::npos) {
          c.scan = bytes.size();
          if (c.scan - c.release > kMaxHeadBytes) {
            Refuse(c, 431, "Request Header Fields Too Large");
            return false;
          }
          return true;
        }
        if (end - c.release > kMaxHeadBytes) {
          Refuse(c, 431, "Request Header Fields Too Large");
          return false;
        }
        const std::string_view head = bytes.substr(c.release, end - c.release);
        std::optional<std::string> te = HeaderValue(head, "transfer-encoding");
        std::optional<std::string> cl = HeaderValue(head, "content-length");
        c.scan = end;
        if (te.has_value()) {
          // Only chunked is framed; "gzip, chunked" is chunked last.
          std::string lower;
          for (char ch : *te)
            lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          if (lower.size() < 7 || lower.compare(lower.size() - 7, 7, "chunked") != 0) {
            Refuse(c, 400, "Bad Request");
            return false;
          }
          c.gate = Conn::Gate::kChunkSize;
          break;
        }
        uint64_t length = 0;
        if (cl.has_value()) {
          // One value (a repeated header must repeat it), digits only.
          std::string_view v = *cl;
          if (size_t comma = v.find(','); comma != std::string_view::npos) {
            std::string_view first = v.substr(0, comma);
            for (size_t at = 0; at != std::string_view::npos;) {
              size_t next = v.find(',', at);
              std::string_view part =
                  v.substr(at, next == std::string_view::npos ? v.npos : next - at);
              while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
              if (part != first) {
                Refuse(c, 400, "Bad Request");
                return false;
              }
              at = next == std::string_view::npos ? next : next + 1;
            }
            v = first;
          }
          auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), length);
          if (v.empty() || ec != std::errc() || p != v.data() + v.size()) {
            Refuse(c, 400, "Bad Request");
            return false;
          }
        }
        if (length > options_.max_request_bytes) {
          Refuse(c, 413, "Payload Too Large");
          return false;
        }
        c.request_deadline += static_cast<int64_t>(length / 65536) * 1000;
        c.need = length;
        c.gate = Conn::Gate::kBody;
        break;
      }
      case Conn::Gate::kBody: {
        if (bytes.size() - c.scan < c.need) return true;
        c.scan += c.need;
        c.need = 0;
        // Whole: it may go.
        c.release = c.scan;
        c.gate = Conn::Gate::kHead;
        c.request_open = false;
        ++c.requests;
        if (c.backend < 0 && !c.connected && !ConnectBackend(c)) return false;
        break;
      }
      case Conn::Gate::kChunkSize:
      case Conn::Gate::kTrailer: {
        const size_t eol = bytes.find("\r\n", c.scan);
        if (eol == std::string_view::npos) {
          if (bytes.size() - c.scan > kMaxLineBytes) {
            Refuse(c, 400, "Bad Request");
            return false;
          }
          return true;
        }
        const std::string_view line = bytes.substr(c.scan, eol - c.scan);
        c.scan = eol + 2;
        if (c.gate == Conn::Gate::kTrailer) {
          if (line.empty()) {  // the end of the chunked body
            c.gate = Conn::Gate::kBody;
            c.need = 0;
          }
          break;
        }
        std::string_view hex = line.substr(0, line.find(';'));
        while (!hex.empty() && (hex.back() == ' ' || hex.back() == '\t')) hex.remove_suffix(1);
        uint64_t size = 0;
        auto [p, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), size, 16);
        if (hex.empty() || ec != std::errc() || p != hex.data() + hex.size()) {
          Refuse(c, 400, "Bad Request");
          return false;
        }
        if (size > options_.max_request_bytes ||
            c.scan - c.release + size > options_.max_request_bytes) {
          Refuse(c, 413, "Payload Too Large");
          return false;
        }
        if (size == 0) {
          c.gate = Conn::Gate::kTrailer;
        } else {
          c.need = size + 2;  // the data and its CRLF
          c.gate = Conn::Gate::kChunkData;
        }
        break;
      }
      case Conn::Gate::kChunkData: {
        if (bytes.size() - c.scan < c.need) return true;
        c.scan += c.need;
        c.need = 0;
        c.gate = Conn::Gate::kChunkSize;
        break;
      }
    }
  }
}

void HttpFrontDoor::Pump(std::shared_ptr<Conn> self) {
  Conn& c = *self;
  static thread_local std::string chunk(kChunkBytes, '\0');
  const int64_t now = NowMs();
  bool progress = true;
  for (int round = 0; progress && round < kRoundsPerEvent; ++round) {
    progress = false;
    // The client's bytes into `up`, while a request can still grow there.
    const size_t room = c.ReadRoom(options_.max_request_bytes);
    if (!c.client_eof && !c.refused && room > 0) {
      net::IoResult r = c.transport->Read(chunk.data(), std::min(kChunkBytes, room));
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
          if (c.requests == 0 && options_.tls != nullptr &&
              !net::SessionOf(*c.transport).has_value() && ++refusals_ <= kLogLinesPerSweep) {
            SLUICE_LOG(kHttpLog, kInfo, "connection from {}: TLS handshake failed: {}", c.peer,
                       why);
          }
          Close(c, nullptr);
          return;
        }
      }
    }
    // Only whole requests go to the server.
    if (!c.refused && !Frame(c, now)) {
      if (!c.refused || c.down.empty()) {
        Close(c, nullptr);
        return;
      }
      progress = true;  // the refusal goes out, then the connection ends
    }
    if (c.client_eof && c.requests == 0 && c.release == 0 && !c.refused) {
      Close(c, nullptr);  // gone before asking anything whole
      return;
    }
    if (c.connected && c.backend >= 0 && !c.refused) {
      // Whole requests to the server.
      if (c.release > 0) {
        ssize_t n = ::send(c.backend, c.up.data(), std::min(c.release, kChunkBytes), MSG_NOSIGNAL);
        if (n > 0) {
          c.Consumed(static_cast<size_t>(n));
          progress = true;
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          Close(c, nullptr);
          return;
        }
      }
      // The server's bytes into `down`. A client that is done writing (shutdown after its
      // request) still reads: the server's side stays open until the server ends it
      // (httplib would answer nothing to a request that arrives with the end of its stream).
      if (!c.backend_eof && c.down.size() < kBufferBytes) {
        ssize_t n =
            ::recv(c.backend, chunk.data(), std::min(kChunkBytes, kBufferBytes - c.down.size()), 0);
        if (n > 0) {
          if (c.down.empty()) c.write_progress = now;  // the stall clock starts now
          c.down.bytes.append(chunk.data(), static_cast<size_t>(n));
          progress = true;
        } else if (n == 0) {
          c.backend_eof = true;
          CloseBackend(c);
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
          c.write_progress = now;
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
    // Everything there was to say is out: the server ended the connection, or a refusal.
    if ((c.backend_eof || c.refused) && c.down.empty()) {
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
  if (!c.client_eof && !c.refused && c.ReadRoom(options_.max_request_bytes) > 0) {
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
  } else if (c.connected && !c.refused) {
    if (!c.backend_eof && c.down.size() < kBufferBytes) backend |= EPOLLIN;
    if (c.release > 0) backend |= EPOLLOUT;
  }
  if (backend != c.backend_interest || (backend != 0) != c.backend_watched)
    WatchBackend(c, backend);
}

void HttpFrontDoor::Sweep() {
  const int64_t now = NowMs();
  std::vector<std::shared_ptr<Conn>> late;
  int timed_out = 0, stalled = 0;
  for (auto& [fd, c] : conns_) {
    if (c->request_open && now > c->request_deadline) {
      if (++timed_out <= kLogLinesPerSweep) {
        SLUICE_LOG(kHttpLog, kInfo,
                   "connection from {}: no whole {}request within its deadline; closing", c->peer,
                   options_.tls != nullptr && !net::SessionOf(*c->transport).has_value()
                       ? "TLS handshake and "
                       : "");
      }
      late.push_back(c);
    } else if (!c->down.empty() && now - c->write_progress > options_.write_stall_ms) {
      if (++stalled <= kLogLinesPerSweep) {
        SLUICE_LOG(kHttpLog, kInfo, "connection from {}: its answer unread for {} ms; closing",
                   c->peer, options_.write_stall_ms);
      }
      late.push_back(c);
    }
  }
  if (timed_out > kLogLinesPerSweep || stalled > kLogLinesPerSweep) {
    SLUICE_LOG(kHttpLog, kInfo, "{} connections closed for no whole request, {} for answers unread",
               timed_out, stalled);
  }
  if (refused_at_limit_ > kLogLinesPerSweep) {
    SLUICE_LOG(kHttpLog, kWarn, "{} connections closed: {} connections were open",
               refused_at_limit_, options_.max_connections);
  }
  if (refusals_ > kLogLinesPerSweep) {
    SLUICE_LOG(kHttpLog, kInfo, "{} connections refused or failed their TLS handshake", refusals_);
  }
  refused_at_limit_ = 0;
  refusals_ = 0;
  for (auto& c : late) {
    // An abortive close: what the kernel still holds for this client is dropped, not
    // trickled out to a peer that stopped reading.
    linger abort{.l_onoff = 1, .l_linger = 0};
    (void)::setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
    Close(*c, nullptr);
  }
  loop_->RunAfter(kSweepMs, [this] { Sweep(); });
}

void HttpFrontDoor::Close(Conn& c, const char* why) {
  if (c.closed) return;
  c.closed = true;
  if (why != nullptr) SLUICE_LOG(kHttpLog, kInfo, "connection from {}: {}", c.peer, why);
  loop_->Remove(c.fd);
  c.transport.reset();
  ::close(c.fd);
  CloseBackend(c);
  conns_.erase(c.fd);  // may free `c`: the last statement
}

void HttpFrontDoor::CloseBackend(Conn& c) {
  if (c.backend < 0) return;
  if (c.backend_watched) loop_->Remove(c.backend);
  c.backend_watched = false;
  ::close(c.backend);
  c.backend = -1;
  if (c.backend_key != 0) options_.peers->Erase(c.backend_key);
}

}  // namespace sluice::app
