// Connection: framing, muting and the output queue. See connection.h.
#include "broker/connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>

#include "base/logging.h"
#include "broker/loggers.h"

namespace sluice::broker {
namespace {

// What one readiness event may read before yielding to the other fds of the loop: a byte
// budget, and a cap on reads. A TLS read returns one record's bytes, and a client may send
// one small record per Kafka record (librdkafka: a 256-byte value is a TLS record): a
// budget of 64 reads then yielded every ~9 KB, a trip through the loop each time.
constexpr size_t kBytesPerEvent = 1 << 20;
constexpr int kReadsPerEvent = 4096;
// iovecs per sendmsg (well under IOV_MAX).
constexpr size_t kMaxIov = 64;
// Bytes per sendfile call (Linux sends at most about 2 GiB anyway).
constexpr size_t kMaxSendfile = size_t{1} << 30;

}  // namespace

Connection::Connection(EventLoop* loop, int fd, ConnectionOptions options, RequestHandler* handler,
                       CloseCallback on_close)
    : loop_(loop),
      fd_(fd),
      transport_(options.tls != nullptr ? options.tls->MakeServer(fd) : net::MakePlaintext(fd)),
      options_(options),
      handler_(handler),
      on_close_(std::move(on_close)) {}

Connection::~Connection() {
  // Only reached without Close() when the owner tears down after its loop stopped.
  transport_.reset();  // before its socket (a TLS session's close_notify)
  if (fd_ >= 0) ::close(fd_);
}

Status Connection::Start() {
  if (transport_ == nullptr) return InternalError("connection fd {}: no TLS session", fd_);
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
      addr.sin_family == AF_INET) {
    char text[INET_ADDRSTRLEN] = {};
    if (::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text)) != nullptr) peer_host_ = text;
  }
  interest_ = EPOLLIN;
  RETURN_IF_ERROR(loop_->Add(fd_, interest_, [this](uint32_t events) { HandleEvents(events); }));
  if (options_.tls != nullptr && options_.tls_handshake_timeout_ms > 0) {
    loop_->RunAfter(options_.tls_handshake_timeout_ms, [weak = weak_from_this()] {
      std::shared_ptr<Connection> self = weak.lock();
      if (self == nullptr || self->closed() || net::SessionOf(*self->transport_).has_value()) {
        return;
      }
      SLUICE_LOG(kLog, kInfo, "connection from {}: no TLS handshake within {} ms; closing",
                 self->peer_host_.empty() ? "?" : self->peer_host_,
                 self->options_.tls_handshake_timeout_ms);
      self->Close();
    });
  }
  return Status::OK();
}

void Connection::HandleEvents(uint32_t events) {
  auto self = shared_from_this();  // a callback may drop the owner's reference
  if (events & (EPOLLERR | EPOLLHUP)) {
    // Both directions are gone (or reset): nothing can be read or sent.
    Close();
    return;
  }
  if ((events & EPOLLOUT) && want_write_) FlushOutput();
  if ((events & EPOLLOUT) && read_wants_write_ && !closed()) {
    read_wants_write_ = false;
    UpdateInterest();
    ReadFrames();
  }
  if (!closed() && (events & EPOLLIN)) ReadFrames();
}

void Connection::MaybeReadBuffered() {
  if (closed() || paused() || read_posted_ || !transport_->HasBufferedInput()) return;
  read_posted_ = true;
  loop_->Post([weak = weak_from_this()] {
    auto self = weak.lock();
    if (self == nullptr) return;
    self->read_posted_ = false;
    if (!self->closed() && !self->paused()) self->ReadFrames();
  });
}

bool Connection::ReadOk(const net::IoResult& r) {
  using State = net::IoResult::State;
  if (r.state == State::kDone) return true;
  if (r.state == State::kWantRead) return false;
  if (r.state == State::kWantWrite) {  // a TLS handshake's reply waits for room
    read_wants_write_ = true;
    UpdateInterest();
    return false;
  }
  if (r.state == State::kError) {
    const std::string detail = transport_->last_error();
    if (!detail.empty()) {
      // A TLS failure: the client's fault or its configuration's, worth a line.
      SLUICE_LOG(kLog, kInfo, "connection from {}: {}: {}", peer_host_.empty() ? "?" : peer_host_,
                 transport_->name(), detail);
    } else {
      SLUICE_LOG(kLog, kDebug, "connection fd {}: {} read: {}", fd_, transport_->name(),
                 ErrnoError("recv", "", r.err).message());
    }
  }
  Close();  // end of stream or error
  return false;
}

void Connection::ReadFrames() {
  // Kafka reads the same way: the 4 size bytes, then exactly the frame, so nothing past
  // the current request is ever taken from the socket while the connection is muted.
  size_t bytes = 0;
  for (int reads = 0; reads < kReadsPerEvent && bytes < kBytesPerEvent && !closed() && !paused();
       ++reads) {
    if (size_got_ < sizeof(size_bytes_)) {
      net::IoResult r = transport_->Read(size_bytes_ + size_got_, sizeof(size_bytes_) - size_got_);
      if (!ReadOk(r)) return;
      size_got_ += r.bytes;
      if (size_got_ < sizeof(size_bytes_)) continue;
      int32_t size =
          static_cast<int32_t>(uint32_t{size_bytes_[0]} << 24 | uint32_t{size_bytes_[1]} << 16 |
                               uint32_t{size_bytes_[2]} << 8 | uint32_t{size_bytes_[3]});
      // Only a SASL listener's connections authenticate: elsewhere every request may be
      // as large as any (a PLAINTEXT listener beside a SASL one is not capped at 512 KiB).
      const int32_t limit =
          authenticated_ || !options_.sasl || options_.max_unauthenticated_request_bytes <= 0
              ? options_.max_request_bytes
              : options_.max_unauthenticated_request_bytes;
      if (size < 0 || size > limit) {
        SLUICE_LOG(kLog, kWarn, "connection fd {}: request size {} is {}; closing", fd_, size,
                   size < 0 ? "negative"
                            : fmt::format("over the limit of {} bytes{}", limit,
                                          authenticated_ ? "" : " before authentication"));
        Close();
        return;
      }
      frame_size_ = static_cast<size_t>(size);
      frame_got_ = 0;
    } else {
      size_t want = std::min(frame_size_ - frame_got_, kReadChunk);
      if (frame_.size() < frame_got_ + want) frame_.resize(frame_got_ + want);
      net::IoResult r = transport_->Read(frame_.data() + frame_got_, want);
      if (!ReadOk(r)) return;
      frame_got_ += r.bytes;
      bytes += r.bytes;
    }
    if (frame_got_ < frame_size_) continue;

    // A whole frame: mute, then hand it over.
    std::vector<uint8_t> frame = std::move(frame_);
    frame.resize(frame_size_);
    frame_ = {};
    size_got_ = 0;
    frame_size_ = frame_got_ = 0;
    unanswered_.push_back({.id = next_id_++});
    with_handler_ = true;
    UpdateInterest();
    if (closed()) return;
    handler_->OnRequest(shared_from_this(), std::move(frame));
  }
  // The budget spent with decrypted bytes left in the transport: the socket will not
  // say so, so come back for them.
  MaybeReadBuffered();
}

Result<std::string> Connection::Principal() {
  if (!principal_.empty()) return principal_;
  if (options_.tls == nullptr || options_.sasl) {
    return std::string(auth::kAnonymous);  // not remembered: SASL may still set one
  }
  // Closed before its certificate was looked at: no principal rather than ANONYMOUS.
  if (transport_ == nullptr) return FailedPreconditionError("the connection is closed");
  // An SSL listener: the certificate decides, once (a request arrived: the handshake is
  // done).
  std::optional<net::TlsSession> session = net::SessionOf(*transport_);
  if (!session.has_value()) return std::string(auth::kAnonymous);
  if (session->peer_subject.empty()) {
    principal_ = std::string(auth::kAnonymous);
  } else if (options_.ssl_principal_mapper == nullptr) {
    principal_ = "User:" + session->peer_subject;
  } else {
    ASSIGN_OR_RETURN(std::string user, options_.ssl_principal_mapper->Apply(session->peer_subject));
    principal_ = "User:" + user;
  }
  return principal_;
}

void Connection::Answer(RequestId id, Response response, bool close_after) {
  if (closed()) return;
  SLUICE_ASSERT(loop_->InLoopThread());
  auto self = shared_from_this();
  Unanswered* u = nullptr;
  if (id == 0) {
    SLUICE_ASSERT(with_handler_ && !unanswered_.empty());
    with_handler_ = false;
    u = &unanswered_.back();
  } else {
    for (Unanswered& x : unanswered_) {
      if (x.id == id) u = &x;
    }
    SLUICE_ASSERT(u != nullptr && (u != &unanswered_.back() || !with_handler_));
  }
  SLUICE_ASSERT(!u->answered);
  u->answered = true;
  u->has_response = true;
  u->close_after = close_after;
  u->response = std::move(response);
  WriteNext();
  UpdateInterest();
  MaybeReadBuffered();
}

void Connection::WriteNext() {
  while (!closed() && !writing_ && !unanswered_.empty() && unanswered_.front().answered) {
    Unanswered& u = unanswered_.front();
    if (!u.has_response) {
      unanswered_.pop_front();
      EndRequest();
      continue;
    }
    writing_ = true;
    close_after_send_ = u.close_after;
    StartResponse(std::move(u.response));
  }
}

void Connection::StartResponse(Response response) {
  SLUICE_ASSERT(out_.empty());

  uint64_t total = response.buffer.size();
  size_t pos = 0;
  for (const auto& s : response.splices) {
    SLUICE_ASSERT(s.buffer_pos >= pos && s.buffer_pos <= response.buffer.size());
    SLUICE_ASSERT(s.token < response.files.size() && s.size <= response.files[s.token].size);
    SLUICE_ASSERT(s.size == 0 || response.files[s.token].file != nullptr);
    total += s.size;
    pos = s.buffer_pos;
  }
  SLUICE_ASSERT(total <= INT32_MAX);  // a Kafka frame's size is an int32
  out_size_[0] = static_cast<uint8_t>(total >> 24);
  out_size_[1] = static_cast<uint8_t>(total >> 16);
  out_size_[2] = static_cast<uint8_t>(total >> 8);
  out_size_[3] = static_cast<uint8_t>(total);

  response_ = std::move(response);
  const std::vector<uint8_t>& buf = response_.buffer;
  out_.push_back({out_size_, sizeof(out_size_), nullptr, 0});
  pos = 0;
  for (const auto& s : response_.splices) {
    if (s.buffer_pos > pos) out_.push_back({buf.data() + pos, s.buffer_pos - pos, nullptr, 0});
    pos = s.buffer_pos;
    if (s.size == 0) continue;
    const storage::FileSlice& slice = response_.files[s.token];
    if (slice.file->fd() >= 0 && transport_->CanSendFile()) {
      out_.push_back({nullptr, s.size, slice.file, slice.position});
      continue;
    }
    // A file without a descriptor (a test Env), or a transport without sendfile: a copy.
    storage::FileSlice part{slice.file, slice.position, s.size};
    Status st = storage::PartitionLog::ReadSlice(part, &copies_.emplace_back());
    if (!st.ok()) {
      SLUICE_LOG(kLog, kWarn, "connection fd {}: reading a response slice: {}; closing", fd_,
                 st.ToString());
      Close();
      return;
    }
    out_.push_back({copies_.back().data(), copies_.back().size(), nullptr, 0});
  }
  if (buf.size() > pos) out_.push_back({buf.data() + pos, buf.size() - pos, nullptr, 0});
  FlushOutput();
}

void Connection::FinishRequest() {
  if (closed()) return;
  SLUICE_ASSERT(loop_->InLoopThread());
  SLUICE_ASSERT(with_handler_ && !unanswered_.empty());
  with_handler_ = false;
  unanswered_.back().answered = true;  // without a response
  auto self = shared_from_this();
  WriteNext();
  UpdateInterest();
  MaybeReadBuffered();
}

RequestId Connection::Detach() {
  if (closed()) return 0;
  SLUICE_ASSERT(loop_->InLoopThread());
  SLUICE_ASSERT(with_handler_ && !unanswered_.empty());
  with_handler_ = false;
  UpdateInterest();
  MaybeReadBuffered();
  return unanswered_.back().id;
}

namespace {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void Connection::ThrottleAfterResponse(int64_t ms) {
  if (ms <= 0) return;
  throttle_until_ms_ = std::max(throttle_until_ms_, SteadyMs() + ms);
}

int64_t Connection::pending_throttle_ms() const {
  return throttle_until_ms_ == 0 ? 0 : std::max<int64_t>(0, throttle_until_ms_ - SteadyMs());
}

void Connection::EndRequest() {
  const int64_t throttle_ms = pending_throttle_ms();
  throttle_until_ms_ = 0;
  if (throttle_ms > 0) {
    // Over a quota: nothing more is read for that long (Kafka's muted channel, KIP-219).
    throttled_ = true;
    loop_->RunAfter(throttle_ms, [weak = weak_from_this()] {
      auto self = weak.lock();
      if (self == nullptr || self->closed()) return;
      self->throttled_ = false;
      self->UpdateInterest();
      self->MaybeReadBuffered();
    });
  }
  UpdateInterest();
  MaybeReadBuffered();
}

void Connection::FlushOutput() {
  while (out_next_ < out_.size()) {
    Piece& p = out_[out_next_];
    net::IoResult r;
    if (p.file == nullptr) {
      iovec iov[kMaxIov];
      size_t count = 0;
      for (size_t i = out_next_; i < out_.size() && out_[i].file == nullptr && count < kMaxIov;
           ++i) {
        iov[count++] = {const_cast<uint8_t*>(out_[i].data), out_[i].len};
      }
      r = transport_->Writev(iov, static_cast<int>(count));
    } else {
      r = transport_->SendFile(p.file->fd(), static_cast<int64_t>(p.pos),
                               std::min(p.len, kMaxSendfile));
      if (r.done() && r.bytes == 0) {
        // The file is shorter than the slice: the frame cannot be completed.
        SLUICE_LOG(kLog, kWarn,
                   "connection fd {}: {} ended before byte {} of a response slice; closing", fd_,
                   p.file->path(), p.pos + p.len);
        Close();
        return;
      }
    }
    if (r.state == net::IoResult::State::kWantWrite || r.state == net::IoResult::State::kWantRead) {
      want_write_ = true;
      UpdateInterest();
      return;
    }
    if (!r.done()) {
      SLUICE_LOG(kLog, kDebug, "connection fd {}: {} write: {}", fd_, transport_->name(),
                 ErrnoError("send", "", r.err).message());
      Close();
      return;
    }
    // Advance past what was written.
    size_t left = r.bytes;
    while (left > 0) {
      Piece& q = out_[out_next_];
      size_t take = std::min(left, q.len);
      if (q.file == nullptr) q.data += take;
      q.pos += take;
      q.len -= take;
      left -= take;
      if (q.len == 0) ++out_next_;
    }
  }
  // The whole response is out: release it and unmute (or close, when asked to).
  if (close_after_send_) {
    Close();
    return;
  }
  out_.clear();
  out_next_ = 0;
  response_ = {};
  copies_.clear();
  want_write_ = false;
  writing_ = false;
  unanswered_.pop_front();
  EndRequest();
  WriteNext();
}

void Connection::UpdateInterest() {
  if (closed()) return;
  uint32_t want = (paused() ? 0u : uint32_t{EPOLLIN}) |
                  (want_write_ || read_wants_write_ ? uint32_t{EPOLLOUT} : 0u);
  if (want == interest_) return;
  Status st = loop_->Modify(fd_, want);
  if (!st.ok()) {
    SLUICE_LOG(kLog, kWarn, "connection fd {}: {}; closing", fd_, st.ToString());
    Close();
    return;
  }
  interest_ = want;
}

void Connection::Close() {
  if (closed()) return;
  auto self = shared_from_this();  // on_close may drop the owner's reference
  loop_->Remove(fd_);
  // The transport goes first: a TLS session writes its close_notify when it is freed, and
  // once the socket is closed its number may already be another connection's (opened on
  // any thread), which would get those bytes in the middle of its own handshake.
  transport_.reset();
  ::close(fd_);
  fd_ = -1;
  frame_ = {};
  out_.clear();
  response_ = {};
  copies_.clear();
  unanswered_.clear();
  if (on_close_) {
    CloseCallback cb = std::move(on_close_);
    on_close_ = nullptr;
    cb(this);
  }
}

}  // namespace sluice::broker
