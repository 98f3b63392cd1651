// InterBrokerConnection: see inter_broker_connection.h.
#include "broker/inter_broker_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/ranges.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "broker/sasl.h"
#include "kafka/protocol/header.h"
#include "kafka/protocol/messages/admin.h"
#include "storage/batch_header.h"

namespace sluice::broker {

namespace {

// How long a peer may take no bytes before a send gives up (requests are small; a peer
// that reads nothing for this long is gone).
constexpr int kSendTimeoutMs = 30'000;
// The SASL messages' versions (SaslAuthenticate 1 carries session_lifetime_ms).
constexpr int16_t kSaslHandshakeVersion = 1;
constexpr int16_t kSaslAuthenticateVersion = 1;
constexpr uint32_t kMaxSaslAnswerBytes = 64 << 10;

}  // namespace

InterBrokerConnection::InterBrokerConnection(std::string host, int32_t port, Clock* clock,
                                             std::shared_ptr<const InterBrokerSecurity> security)
    : host_(std::move(host)), port_(port), clock_(clock), security_(std::move(security)) {}

InterBrokerConnection::~InterBrokerConnection() { Close(); }

void InterBrokerConnection::Shutdown() {
  std::lock_guard lock(mu_);
  shut_down_ = true;
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // wakes a blocked poll, read or send
}

void InterBrokerConnection::Close() {
  std::lock_guard lock(mu_);
  transport_.reset();  // before its socket
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool InterBrokerConnection::WarnAbout(const Status& st) {
  if (st.ok() || st.code() == StatusCode::kIOError || st.code() == StatusCode::kAborted) {
    return false;
  }
  const int64_t now = clock_->NowMillis();
  if (st.message() == last_warning_ && now - last_warning_ms_ < 60'000) return false;
  last_warning_ = st.message();
  last_warning_ms_ = now;
  return true;
}

Status InterBrokerConnection::Wait(net::IoResult::State want, int timeout_ms, const char* what) {
  for (;;) {
    pollfd p{fd_, static_cast<int16_t>(want == net::IoResult::State::kWantWrite ? POLLOUT : POLLIN),
             0};
    const int ready = ::poll(&p, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return IOError("{}:{}: no {} within {} ms", host_, port_, what, timeout_ms);
    if (ready < 0) return ErrnoError("poll", host_, errno);
    return Status::OK();
  }
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
  // Non-blocking from here on: every wait polls with its own timeout, and Shutdown's
  // shutdown() wakes it.
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (security_ != nullptr && security_->tls) {
    net::TlsClientOptions o = security_->tls_client;
    o.server_name = host_;  // the certificate must name the address the broker registered
    Result<std::unique_ptr<net::Transport>> tls = net::MakeTlsClient(fd, o);
    if (!tls.ok()) {
      Close();
      return tls.status();
    }
    transport_ = std::move(*tls);
  } else {
    transport_ = net::MakePlaintext(fd);
  }
  if (security_ != nullptr && !security_->sasl_mechanism.empty()) {
    // The TLS handshake happens inside the first request's write and read.
    if (Status st = Authenticate(static_cast<int>(timeout_ms)); !st.ok()) {
      Close();
      return st;
    }
  }
  return Status::OK();
}

Status InterBrokerConnection::Authenticate(int timeout_ms) {
  const std::string client_id = "sluice-inter-broker";
  size_t at = 0;
  kafka::SaslHandshakeRequest hello;
  hello.mechanism = security_->sasl_mechanism;
  ASSIGN_OR_RETURN(std::vector<uint8_t> answer,
                   RoundTrip(
                       kafka::ApiKey::kSaslHandshake, kSaslHandshakeVersion, client_id,
                       [&](kafka::Writer& w) { hello.Encode(w, kSaslHandshakeVersion); },
                       timeout_ms, kMaxSaslAnswerBytes, &at));
  kafka::SaslHandshakeResponse hs;
  {
    kafka::Reader r(std::span<const uint8_t>(answer).subspan(at));
    RETURN_IF_ERROR(hs.Decode(r, kSaslHandshakeVersion));
  }
  if (hs.error_code != kafka::ErrorCode::kNone) {
    return FailedPreconditionError(
        "{}:{}: the inter-broker listener does not take SASL mechanism {} (error {}; it takes "
        "{})",
        host_, port_, hello.mechanism, static_cast<int>(hs.error_code),
        fmt::join(hs.mechanisms, ", "));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<SaslClient> client,
      SaslClient::Start(security_->sasl_mechanism, security_->sasl_user, security_->sasl_password));
  std::vector<uint8_t> out = client->First();
  for (int round = 0; round < 4; ++round) {
    kafka::SaslAuthenticateRequest req;
    req.auth_bytes = std::move(out);
    ASSIGN_OR_RETURN(
        answer, RoundTrip(
                    kafka::ApiKey::kSaslAuthenticate, kSaslAuthenticateVersion, client_id,
                    [&](kafka::Writer& w) { req.Encode(w, kSaslAuthenticateVersion); }, timeout_ms,
                    kMaxSaslAnswerBytes, &at));
    kafka::SaslAuthenticateResponse resp;
    kafka::Reader r(std::span<const uint8_t>(answer).subspan(at));
    RETURN_IF_ERROR(resp.Decode(r, kSaslAuthenticateVersion));
    if (resp.error_code != kafka::ErrorCode::kNone) {
      return FailedPreconditionError("{}:{}: SASL {} as '{}' refused: {}", host_, port_,
                                     security_->sasl_mechanism, security_->sasl_user,
                                     resp.error_message.value_or("no reason given"));
    }
    Result<std::optional<std::vector<uint8_t>>> next = client->Next(resp.auth_bytes);
    if (!next.ok()) {
      return FailedPreconditionError("{}:{}: {}", host_, port_, next.status().message());
    }
    if (!next->has_value()) return Status::OK();
    out = std::move(**next);
  }
  return FailedPreconditionError("{}:{}: the SASL exchange did not end", host_, port_);
}

namespace {

// A TLS failure says what went wrong beyond errno (an unknown CA, a name mismatch).
Status TransportError(const net::Transport& t, const std::string& host, int32_t port,
                      const char* what, int err) {
  const std::string detail = t.last_error();
  if (!detail.empty()) {
    // TLS refused (a certificate, a protocol version): a configuration to fix.
    return FailedPreconditionError("{}:{}: {} ({}): {}", host, port, what, t.name(), detail);
  }
  return IOError("{}:{}: {}: {}", host, port, what, std::strerror(err != 0 ? err : EPIPE));
}

}  // namespace

Status InterBrokerConnection::SendAll(std::span<const uint8_t> bytes) {
  if (transport_ == nullptr) return FailedPreconditionError("{}:{}: not connected", host_, port_);
  size_t done = 0;
  while (done < bytes.size()) {
    net::IoResult r = transport_->Write(bytes.data() + done, bytes.size() - done);
    switch (r.state) {
      case net::IoResult::State::kDone:
        done += r.bytes;
        break;
      case net::IoResult::State::kWantRead:
      case net::IoResult::State::kWantWrite:
        RETURN_IF_ERROR(Wait(r.state, kSendTimeoutMs, "room to send"));
        break;
      case net::IoResult::State::kClosed:
      case net::IoResult::State::kError:
        return TransportError(*transport_, host_, port_, "send", r.err);
    }
  }
  return Status::OK();
}

Status InterBrokerConnection::ReadExactly(size_t n, std::vector<uint8_t>* out, int timeout_ms) {
  if (transport_ == nullptr) return FailedPreconditionError("{}:{}: not connected", host_, port_);
  out->resize(n);
  size_t got = 0;
  while (got < n) {
    net::IoResult r = transport_->Read(out->data() + got, n - got);
    switch (r.state) {
      case net::IoResult::State::kDone:
        got += r.bytes;
        break;
      case net::IoResult::State::kWantRead:
      case net::IoResult::State::kWantWrite:
        RETURN_IF_ERROR(Wait(r.state, timeout_ms, "answer"));
        break;
      case net::IoResult::State::kClosed:
        return IOError("{}:{}: connection closed after {} of {} bytes", host_, port_, got, n);
      case net::IoResult::State::kError:
        return TransportError(*transport_, host_, port_, "recv", r.err);
    }
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
