// Transport: how a connection's bytes cross the wire, for the Kafka connections and the
// query server's sessions alike. Plaintext today; TLS and kernel TLS are transports too,
// added here once for every listener. A transport that can move file bytes without a copy
// (plaintext, kernel TLS) says so, and the Kafka connection then serves fetches with
// sendfile; one that cannot (TLS in user space) gets the bytes through Writev.
//
// A transport does not own its socket: the connection that made it closes the socket after
// destroying it. It works on blocking and non-blocking sockets alike (kWantRead /
// kWantWrite come only from non-blocking ones, or from a receive timeout). One thread at a
// time.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace sluice::net {

struct IoResult {
  enum class State {
    kDone,       // `bytes` (> 0) moved
    kWantRead,   // nothing moved: call again once the socket is readable
    kWantWrite,  // nothing moved: call again once the socket is writable
    kClosed,     // the peer closed its side (a read at the end of the stream)
    kError,      // `err` (errno); the connection is unusable
  };
  State state = State::kDone;
  size_t bytes = 0;
  int err = 0;

  bool done() const { return state == State::kDone; }
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Reads up to `len` bytes into `buf`.
  virtual IoResult Read(void* buf, size_t len) = 0;
  // Writes from `count` buffers, in order; a short write is kDone with fewer bytes.
  virtual IoResult Writev(const iovec* iov, int count) = 0;
  IoResult Write(const void* buf, size_t len) {
    iovec one{const_cast<void*>(buf), len};
    return Writev(&one, 1);
  }
  // Whether SendFile may be used.
  virtual bool CanSendFile() const = 0;
  // Sends up to `len` bytes of `file_fd` from `offset` without copying them through user
  // space. A file that ends before `offset` + 1 is kDone with 0 bytes.
  virtual IoResult SendFile(int file_fd, int64_t offset, size_t len) = 0;
  // "plaintext", "tls", "ktls": for logs and metrics.
  virtual std::string_view name() const = 0;
  // Whether bytes already taken from the socket wait inside the transport (a TLS record
  // decrypted past what Read returned): the socket will not become readable for them, so
  // a reader that stopped early must call Read again without waiting for it.
  virtual bool HasBufferedInput() const { return false; }
  // What went wrong in the last kError beyond errno (a TLS alert, a certificate the peer
  // refused); empty when errno says it all.
  virtual std::string last_error() const { return {}; }
};

// Bytes as they are, with recv/sendmsg/sendfile on `fd` (not owned).
std::unique_ptr<Transport> MakePlaintext(int fd);

}  // namespace sluice::net
