// Connection: one Kafka client's TCP connection, on one shard's loop for its whole life.
// It reads size-prefixed request frames, hands each to a RequestHandler, and writes
// responses, with record data spliced from segment files by sendfile(2)
// (docs/design/0002-broker-plan.md, decisions 3 and 10).
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "auth/principal.h"
#include "base/status.h"
#include "broker/event_loop.h"
#include "kafka/protocol/wire.h"
#include "net/tls.h"
#include "net/transport.h"
#include "storage/log.h"

namespace sluice::broker {

class Connection;

// Serves the requests of every connection. OnRequest runs on the connection's loop with
// one whole frame (without its 4-byte size). Exactly one of conn->Send() or
// conn->FinishRequest() must follow, on that loop, now or later (from a posted task or a
// timer); until then the connection reads nothing more, unless the handler lets the next
// request in with conn->Detach() (a produce whose appends are queued) and answers this one
// later with Send(response, id). Keep `conn` (a shared_ptr) to answer later: once the
// connection is closed those calls do nothing.
class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  virtual void OnRequest(const std::shared_ptr<Connection>& conn, std::vector<uint8_t> frame) = 0;
  // The server's loops, one per shard (index = shard), before their threads start and
  // before any request; called once, on the thread starting the server.
  virtual void OnServerStart(const std::vector<EventLoop*>& loops) { (void)loops; }
  // After the loops' threads stopped and before the loops are destroyed: post nothing
  // more to them. On the thread stopping the server.
  virtual void OnServerStop() {}
};

struct ConnectionOptions {
  // socket.request.max.bytes: a larger (or negative) declared size closes the connection.
  int32_t max_request_bytes = 100 * 1024 * 1024;
  // When > 0 (SASL on), the limit until SetAuthenticated(): SASL messages are small, and
  // an unauthenticated client must not make the broker buffer 100 MiB (Kafka: 512 KiB).
  int32_t max_unauthenticated_request_bytes = 0;
  // The listener's TLS (docs/design/0019-security.md): every connection is a TLS server
  // transport from it; null: plaintext.
  std::shared_ptr<const net::TlsContext> tls;
  // A TLS connection whose handshake has not finished by then is closed: a client that
  // connects and sends nothing (or stalls mid-handshake) holds no socket for long.
  int64_t tls_handshake_timeout_ms = 10'000;
  std::string listener = "PLAINTEXT";  // the listener's name, for Metadata's addresses
  bool sasl = false;                   // the listener wants SASL before other requests
  // ssl.principal.mapping.rules (auth/principal.h): a client certificate's subject to a
  // user name; null: DEFAULT (the subject as it is).
  std::shared_ptr<const auth::SslPrincipalMapper> ssl_principal_mapper;
};

// One response frame: `buffer` is the frame without its 4-byte size (Send adds it);
// `splices` (from kafka::Writer::splices()) place file bytes in it, and each splice's
// token indexes `files`: the splice sends the first splice.size bytes of that slice.
struct Response {
  std::vector<uint8_t> buffer;
  std::vector<kafka::Writer::Splice> splices;
  std::vector<storage::FileSlice> files;
};

// A request read from a connection, by arrival (Connection::Detach).
using RequestId = uint64_t;

// Lifecycle: made by make_shared on its loop's thread, then Start(); lives while its
// owner (the Server's shard) or a handler holds it. Close() (idempotent) unregisters and
// closes the socket and calls `on_close`, so the owner can drop it. Every method runs on
// the loop's thread.
//
// One request at a time, as Kafka mutes a channel: after a frame is handed to the
// handler the socket is not read until the handler answers it (Send or FinishRequest),
// so a client cannot queue unbounded work. A handler may let the next request in before
// it answers (Detach: a produce whose appends are queued waits for their acks, as Redpanda
// pipelines them), up to kMaxPipelined requests unanswered; responses go out in the order
// of the requests whatever order they are ready in, and a client that does not read its
// responses (the socket is full) stops being read.
//
// Memory: an idle connection holds its fd and a few hundred bytes, no buffers. A frame's
// buffer grows as its bytes arrive, by kReadChunk at most per read (vector growth may
// double the capacity), never from the declared size alone; it is handed to the handler
// whole. The output queue holds one response (its buffer and file references).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using CloseCallback = std::function<void(Connection*)>;

  // Bytes read ahead of a frame's arrived bytes per recv.
  static constexpr size_t kReadChunk = 64 * 1024;
  // Requests read and not yet answered, at most (the Java producer's default in flight).
  static constexpr size_t kMaxPipelined = 5;

  // Takes `fd`: a connected, non-blocking socket.
  Connection(EventLoop* loop, int fd, ConnectionOptions options, RequestHandler* handler,
             CloseCallback on_close);
  ~Connection();  // closes the fd if Close() was not called (the loop must be gone then)
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Registers with the loop and starts reading.
  Status Start();

  // Answers the request with the handler now (`id` 0) or detached request `id`. Written
  // once the requests before it are answered, at once as far as the socket takes, the
  // rest when it becomes writable. Splices must be in buffer order and fit their slices.
  void Send(Response response, RequestId id = 0) { Answer(id, std::move(response), false); }
  // Ends the current request without a response (acks=0 produce).
  void FinishRequest();
  // The request with the handler lets the next one be read before it is answered; returns
  // its id for Send. 0 when the connection is closed.
  RequestId Detach();
  // Like Send, then closes the connection once the response is written (a failed SASL
  // authentication: the client must see why before the connection goes).
  void SendAndClose(Response response) { Answer(0, std::move(response), /*close_after=*/true); }

  // Whatever the handler keeps per connection (its SASL progress); created and used only
  // on the loop's thread, destroyed with the connection.
  struct HandlerState {
    virtual ~HandlerState() = default;
  };
  std::unique_ptr<HandlerState>& handler_state() { return handler_state_; }
  // The produce handler's (ProduceRefusals), beside the SASL one.
  std::unique_ptr<HandlerState>& produce_state() { return produce_state_; }
  // Lifts max_unauthenticated_request_bytes.
  void SetAuthenticated() { authenticated_ = true; }
  // Who sends this connection's requests, as Kafka names principals: "User:<name>" once
  // SASL authenticated it; on an SSL listener the client certificate's subject mapped by
  // ssl.principal.mapping.rules ("User:ANONYMOUS" without a certificate); otherwise
  // "User:ANONYMOUS". NotFound when no mapping rule applies to the subject (Kafka fails
  // such a connection). The loop's thread.
  Result<std::string> Principal();
  void SetPrincipal(std::string principal) { principal_ = std::move(principal); }
  // Client quotas (docs/design/0019-security.md, phase F): nothing more is read until `ms`
  // from now (the latest asked for counts), and not before this request's response is
  // written (or the request finished without one): the time a request spends in flight
  // (a long poll, acks=all) is credited against its throttle. The loop's thread.
  void ThrottleAfterResponse(int64_t ms);
  // What is left of the throttle now (0: none), for the response's throttle_time_ms.
  int64_t pending_throttle_ms() const;
  void Close();

  bool closed() const { return fd_ < 0; }
  // The client's IPv4 address ("" when unknown), for DescribeGroups.
  const std::string& peer_host() const { return peer_host_; }
  // The listener it came in on, and whether that listener wants SASL first.
  const std::string& listener() const { return options_.listener; }
  bool sasl_listener() const { return options_.sasl; }
  // A request is with the handler or not yet answered, or a response is being written.
  bool busy() const { return !unanswered_.empty() && !closed(); }
  EventLoop* loop() const { return loop_; }

 private:
  // A piece of the output: memory (`data`, `len`) or a file range (`file` set).
  struct Piece {
    const uint8_t* data = nullptr;
    size_t len = 0;
    std::shared_ptr<storage::File> file;
    uint64_t pos = 0;
  };

  void HandleEvents(uint32_t events);
  // Send and SendAndClose.
  void Answer(RequestId id, Response response, bool close_after);
  void ReadFrames();
  // Reads again from a posted task when the transport holds input the socket will not
  // announce (0019 decision 5).
  void MaybeReadBuffered();
  // True when bytes were read; closes on the end of the stream or an error.
  bool ReadOk(const net::IoResult& r);
  void FlushOutput();
  void UpdateInterest();
  // Starts writing the oldest unanswered request's response when it is ready (dropping
  // the requests before it that end without one).
  void WriteNext();
  // Sets up out_ for `response`.
  void StartResponse(Response response);
  // A request is done (its response written, or finished without one): after a throttle
  // if one was asked for, reading resumes.
  void EndRequest();
  bool paused() const {
    return with_handler_ || throttled_ || want_write_ || close_after_send_ ||
           unanswered_.size() >= kMaxPipelined;
  }

  EventLoop* const loop_;
  int fd_;
  // The connection's bytes, over fd_ (plaintext or TLS). File slices of a response go
  // out with sendfile when it can (plaintext, kernel TLS), else as copies.
  std::unique_ptr<net::Transport> transport_;
  const ConnectionOptions options_;
  RequestHandler* const handler_;
  CloseCallback on_close_;
  uint32_t interest_ = 0;  // events registered with the loop

  // Input: the size prefix, then the frame.
  uint8_t size_bytes_[4] = {};
  size_t size_got_ = 0;
  size_t frame_size_ = 0;
  size_t frame_got_ = 0;
  std::vector<uint8_t> frame_;
  // Requests read and not yet answered in full, oldest first: the response once the
  // handler gave it (or none, finished without one).
  struct Unanswered {
    RequestId id = 0;
    bool answered = false;
    bool has_response = false;
    bool close_after = false;  // SendAndClose
    Response response;
  };
  std::deque<Unanswered> unanswered_;
  RequestId next_id_ = 1;
  bool with_handler_ = false;  // the newest request is with the handler, not detached
  bool writing_ = false;       // out_ holds the oldest request's response
  bool throttled_ = false;     // over a quota: not reading until its timer
  // Steady-clock ms until which nothing is read after the current request (0: none).
  int64_t throttle_until_ms_ = 0;

  // Output: one response, the oldest unanswered request's.
  uint8_t out_size_[4] = {};
  Response response_;                         // owns the memory pieces point into
  std::vector<std::vector<uint8_t>> copies_;  // slices of files without an fd, read in
  std::vector<Piece> out_;
  size_t out_next_ = 0;  // first piece not fully written
  bool want_write_ = false;
  bool read_wants_write_ = false;  // a read (a TLS handshake) waits for the socket's room
  bool read_posted_ = false;       // a MaybeReadBuffered task is queued
  bool close_after_send_ = false;
  bool authenticated_ = false;
  std::string principal_;  // "" until known
  std::string peer_host_;

  std::unique_ptr<HandlerState> handler_state_;
  std::unique_ptr<HandlerState> produce_state_;
};

}  // namespace sluice::broker
