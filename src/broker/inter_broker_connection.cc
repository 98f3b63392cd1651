// InterBrokerConnection: see inter_broker_connection.h.
#include "broker/inter_broker_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kafka/protocol/header.h"
#include "storage/batch_header.h"

namespace sluice::broker {

InterBrokerConnection::InterBrokerConnection(std::string host, int32_t port, Clock* clock)
    : host_(std::move(host)), port_(port), clock_(clock) {}

InterBrokerConnection::~InterBrokerConnection() { Close(); }

void InterBrokerConnection::Shutdown() {
  std::lock_guard lock(mu_);
  shut_down_ = true;
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // wakes a blocked poll, read or send
}

void InterBrokerConnection::Close() {
  std::lock_guard lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status InterBrokerConnection::Connect(int64_t timeout_ms) {
  if (fd_ >= 0) return Status::OK();
  // A numeric address needs no resolver; a name is resolved (getaddrinfo, which Shutdown
  // cannot interrupt: a broker's inter-broker address is normally numeric).
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (::inet_pton(AF_INET, host_.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port_));
    addr_len = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, host_.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port_));
    addr_len = sizeof(sockaddr_in6);
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &res) != 0 ||
        res == nullptr || res->ai_addrlen > sizeof(addr)) {
      if (res != nullptr) ::freeaddrinfo(res);
      return IOError("cannot resolve {}", host_);
    }
    std::memcpy(&addr, res->ai_addr, res->ai_addrlen);
    addr_len = res->ai_addrlen;
    ::freeaddrinfo(res);
  }
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoError("socket", host_, errno);
  {
    // Published before connecting, so Shutdown's shutdown() ends a connect in progress.
    std::lock_guard lock(mu_);
    if (shut_down_) {
      ::close(fd);
      return AbortedError("{}:{}: stopped", host_, port_);
    }
    fd_ = fd;
  }
  const auto fail = [&](const char* what, int err) {
    Close();  // takes mu_: never called holding it
    return IOError("{}:{}: {}: {}", host_, port_, what, std::strerror(err));
  };
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), addr_len) != 0) {
    if (errno != EINPROGRESS) return fail("connect", errno);
    const int64_t deadline = clock_->NowMillis() + timeout_ms;
    for (;;) {
      bool stopping = false;
      {
        std::lock_guard lock(mu_);
        stopping = shut_down_;
      }
      if (stopping) return fail("connect", ECANCELED);
      const int64_t left = deadline - clock_->NowMillis();
      if (left <= 0) return fail("connect", ETIMEDOUT);
      pollfd p{fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (ready < 0 && errno != EINTR) return fail("poll", errno);
      if (ready > 0) break;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) return fail("connect", err);
    bool stopping = false;
    {
      std::lock_guard lock(mu_);
      stopping = shut_down_;
    }
    if (stopping) return fail("connect", ECANCELED);
  }
  // Blocking from here on: reads poll with their own timeouts, and Shutdown wakes a
  // blocked send.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return Status::OK();
}

Status InterBrokerConnection::SendAll(std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("send", host_, n < 0 ? errno : EPIPE);
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

Status InterBrokerConnection::ReadExactly(size_t n, std::vector<uint8_t>* out, int timeout_ms) {
  out->resize(n);
  size_t got = 0;
  while (got < n) {
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return IOError("{}:{}: no answer within {} ms", host_, port_, timeout_ms);
    if (ready < 0) return ErrnoError("poll", host_, errno);
    ssize_t r = ::recv(fd_, out->data() + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0)
      return IOError("{}:{}: connection closed after {} of {} bytes", host_, port_, got, n);
    if (r < 0) return ErrnoError("recv", host_, errno);
    got += static_cast<size_t>(r);
  }
  return Status::OK();
}

Result<std::vector<uint8_t>> InterBrokerConnection::RoundTrip(
    kafka::ApiKey api, int16_t version, const std::string& client_id,
    const std::function<void(kafka::Writer&)>& encode, int timeout_ms, uint32_t max_bytes,
    size_t* body_at) {
  std::vector<uint8_t> frame(4);
  kafka::Writer w(&frame);
  kafka::RequestHeader h;
  h.api_key = static_cast<int16_t>(api);
  h.api_version = version;
  h.correlation_id = ++correlation_id_;
  h.client_id = client_id;
  h.header_version = kafka::RequestHeaderVersion(api, version);
  kafka::EncodeRequestHeader(w, h);
  encode(w);
  storage::StoreBE32(frame.data(), static_cast<uint32_t>(frame.size() - 4));
  RETURN_IF_ERROR(SendAll(frame));

  std::vector<uint8_t> size;
  RETURN_IF_ERROR(ReadExactly(4, &size, timeout_ms));
  const uint32_t n = storage::LoadBE32(size.data());
  if (n > max_bytes) {
    return CorruptionError("{}:{}: a {}-byte answer to {} (at most {})", host_, port_, n,
                           kafka::ApiName(api), max_bytes);
  }
  std::vector<uint8_t> body;
  RETURN_IF_ERROR(ReadExactly(n, &body, timeout_ms));
  kafka::Reader r(body);
  Result<int32_t> id = kafka::DecodeResponseHeader(r, api, version);
  if (!id.ok()) return id.status();
  if (*id != h.correlation_id) {
    return CorruptionError("{}:{}: an answer to {} with correlation id {}, expected {}", host_,
                           port_, kafka::ApiName(api), *id, h.correlation_id);
  }
  *body_at = r.position();
  return body;
}

}  // namespace sluice::broker
