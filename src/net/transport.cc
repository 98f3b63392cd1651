// The plaintext transport: the socket's own calls.
#include "net/transport.h"

#include <errno.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

namespace sluice::net {
namespace {

IoResult FromCall(ssize_t n, bool writing) {
  if (n > 0) return {IoResult::State::kDone, static_cast<size_t>(n), 0};
  if (n == 0) {
    return writing ? IoResult{IoResult::State::kDone, 0, 0}
                   : IoResult{IoResult::State::kClosed, 0, 0};
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    return {writing ? IoResult::State::kWantWrite : IoResult::State::kWantRead, 0, 0};
  }
  return {IoResult::State::kError, 0, errno};
}

class PlaintextTransport final : public Transport {
 public:
  explicit PlaintextTransport(int fd) : fd_(fd) {}

  IoResult Read(void* buf, size_t len) override {
    ssize_t n;
    do {
      n = ::recv(fd_, buf, len, 0);
    } while (n < 0 && errno == EINTR);
    return FromCall(n, false);
  }

  IoResult Writev(const iovec* iov, int count) override {
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n;
    do {
      n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return FromCall(n, true);
  }

  bool CanSendFile() const override { return true; }

  IoResult SendFile(int file_fd, int64_t offset, size_t len) override {
    off_t off = static_cast<off_t>(offset);
    ssize_t n;
    do {
      n = ::sendfile(fd_, file_fd, &off, len);
    } while (n < 0 && errno == EINTR);
    return FromCall(n, true);
  }

  std::string_view name() const override { return "plaintext"; }

 private:
  const int fd_;
};

}  // namespace

std::unique_ptr<Transport> MakePlaintext(int fd) {
  return std::make_unique<PlaintextTransport>(fd);
}

}  // namespace sluice::net
