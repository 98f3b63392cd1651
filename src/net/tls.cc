// TLS transports over OpenSSL. See tls.h.
#include "net/tls.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/logging.h"

namespace sluice::net {
namespace {

const Logger kLog("tls");

// Bytes one SSL_write takes at most (sixteen full records).
constexpr size_t kMaxWrite = 16 * 16384;
// The socket read buffer of a TLS connection (AttachSocket): a few records' worth.
constexpr int kReadBufferBytes = 32 * 1024;

// OpenSSL's error queue, oldest first, emptied.
std::string SslErrors() {
  std::string out;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    // "error:0A000086:SSL routines::certificate verify failed": the reason is enough.
    const char* reason = ERR_reason_error_string(e);
    out += reason != nullptr ? reason : buf;
  }
  return out.empty() ? "unknown TLS error" : out;
}

std::string NameText(X509_NAME* name) {
  if (name == nullptr) return {};
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string out(data != nullptr && len > 0 ? std::string(data, static_cast<size_t>(len)) : "");
  BIO_free(bio);
  return out;
}

Status CheckKeyFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return ErrnoError("key file", path, errno);
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return FailedPreconditionError(
        "tls key file {} may be read by group or others (mode {:04o}): make it readable by "
        "its owner alone (chmod 600 {})",
        path, st.st_mode & 07777, path);
  }
  return Status::OK();
}

Result<int> ParseMinVersion(const std::string& text) {
  if (text == "1.2") return TLS1_2_VERSION;
  if (text == "1.3") return TLS1_3_VERSION;
  return InvalidArgumentError("tls min_version '{}': must be 1.2 or 1.3", text);
}

struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

// Sets up `c` as a server context from `o`; its certificate's subject in `*subject`.
Status ConfigureServerCtx(SSL_CTX* c, const TlsOptions& o, std::string* subject) {
  if (o.cert_file.empty()) return InvalidArgumentError("tls: cert_file is not set");
  if (o.key_file.empty()) return InvalidArgumentError("tls: key_file is not set");
  if (o.client_auth != ClientAuth::kNone && o.ca_file.empty()) {
    return InvalidArgumentError(
        "tls: client_auth {} needs ca_file (the CAs client certificates "
        "must chain to)",
        ClientAuthName(o.client_auth));
  }
  ASSIGN_OR_RETURN(int min_version, ParseMinVersion(o.min_version));
  RETURN_IF_ERROR(CheckKeyFile(o.key_file));
  ERR_clear_error();
  if (SSL_CTX_set_min_proto_version(c, min_version) != 1) {
    return InternalError("tls: min_version {}: {}", o.min_version, SslErrors());
  }
  if (SSL_CTX_set_cipher_list(c, o.ciphers.c_str()) != 1) {
    return InvalidArgumentError("tls ciphers '{}': {}", o.ciphers, SslErrors());
  }
  if (!o.ciphersuites.empty() && SSL_CTX_set_ciphersuites(c, o.ciphersuites.c_str()) != 1) {
    return InvalidArgumentError("tls ciphersuites '{}': {}", o.ciphersuites, SslErrors());
  }
  if (SSL_CTX_use_certificate_chain_file(c, o.cert_file.c_str()) != 1) {
    return InvalidArgumentError("tls cert_file {}: {}", o.cert_file, SslErrors());
  }
  if (SSL_CTX_use_PrivateKey_file(c, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return InvalidArgumentError("tls key_file {}: {} (it must be the PEM private key of {})",
                                o.key_file, SslErrors(), o.cert_file);
  }
  if (SSL_CTX_check_private_key(c) != 1) {
    return InvalidArgumentError("tls key_file {} does not match cert_file {}: {}", o.key_file,
                                o.cert_file, SslErrors());
  }
  if (o.client_auth != ClientAuth::kNone) {
    if (SSL_CTX_load_verify_locations(c, o.ca_file.c_str(), nullptr) != 1) {
      return InvalidArgumentError("tls ca_file {}: {}", o.ca_file, SslErrors());
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.ca_file.c_str());
    if (names == nullptr) {
      return InvalidArgumentError("tls ca_file {}: no certificate in it: {}", o.ca_file,
                                  SslErrors());
    }
    SSL_CTX_set_client_CA_list(c, names);  // takes ownership
    int mode = SSL_VERIFY_PEER;
    if (o.client_auth == ClientAuth::kRequired) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(c, mode, nullptr);
  }
  static const unsigned char kSessionContext[] = "sluice";
  SSL_CTX_set_session_id_context(c, kSessionContext, sizeof(kSessionContext) - 1);
  uint64_t options = SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                     SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_COMPRESSION;
  if (o.ktls) options |= SSL_OP_ENABLE_KTLS;
  SSL_CTX_set_options(c, options);
  SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                          SSL_MODE_RELEASE_BUFFERS);
  *subject = NameText(X509_get_subject_name(SSL_CTX_get0_certificate(c)));
  return Status::OK();
}

// A server SSL_CTX from `o`, and its certificate's subject.
Result<std::shared_ptr<SSL_CTX>> BuildServerCtx(const TlsOptions& o, std::string* subject) {
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), CtxFree());
  if (ctx == nullptr) return InternalError("tls: SSL_CTX_new: {}", SslErrors());
  RETURN_IF_ERROR(ConfigureServerCtx(ctx.get(), o, subject));
  return ctx;
}

class TlsTransport final : public Transport {
 public:
  TlsTransport(SSL* ssl, std::shared_ptr<SSL_CTX> ctx) : ssl_(ssl), ctx_(std::move(ctx)) {}
  ~TlsTransport() override {
    // A close_notify when the handshake finished (best effort: the socket is
    // non-blocking and about to close).
    if (SSL_is_init_finished(ssl_)) SSL_shutdown(ssl_);
    SSL_free(ssl_);
  }

  IoResult Read(void* buf, size_t len) override {
    if (IoResult h = Handshake(); !h.done()) return h;
    if (len == 0) return {IoResult::State::kDone, 0, 0};
    ERR_clear_error();
    size_t n = 0;
    int ret = SSL_read_ex(ssl_, buf, len, &n);
    if (ret == 1) return {IoResult::State::kDone, n, 0};
    return Failed(ret);
  }

  IoResult Writev(const iovec* iov, int count) override {
    if (IoResult h = Handshake(); !h.done()) return h;
    size_t total = 0;
    for (int i = 0; i < count; ++i) total += iov[i].iov_len;
    if (total == 0) return {IoResult::State::kDone, 0, 0};
    // After a want, OpenSSL needs the same bytes again, at least as many: the caller
    // still holds them at the front (nothing was consumed), so take that many.
    size_t want = pending_ > 0 ? std::min(pending_, total) : std::min(total, kMaxWrite);
    const void* data;
    if (iov[0].iov_len >= want) {
      data = iov[0].iov_base;
    } else {
      scratch_.resize(want);
      size_t at = 0;
      for (int i = 0; i < count && at < want; ++i) {
        size_t take = std::min(iov[i].iov_len, want - at);
        std::memcpy(scratch_.data() + at, iov[i].iov_base, take);
        at += take;
      }
      data = scratch_.data();
    }
    ERR_clear_error();
    size_t n = 0;
    int ret = SSL_write_ex(ssl_, data, want, &n);
    if (ret == 1) {
      pending_ = 0;
      return {IoResult::State::kDone, n, 0};
    }
    IoResult r = Failed(ret);
    if (r.state == IoResult::State::kWantRead || r.state == IoResult::State::kWantWrite) {
      pending_ = want;
    }
    return r;
  }

  bool CanSendFile() const override { return ktls_send_; }

  IoResult SendFile(int file_fd, int64_t offset, size_t len) override {
    if (!ktls_send_) return {IoResult::State::kError, 0, EOPNOTSUPP};
    ERR_clear_error();
    ossl_ssize_t n = SSL_sendfile(ssl_, file_fd, offset, len, 0);
    if (n >= 0) return {IoResult::State::kDone, static_cast<size_t>(n), 0};
    return Failed(static_cast<int>(n));
  }

  std::string_view name() const override { return ktls_send_ ? "ktls" : "tls"; }

  bool HasBufferedInput() const override {
    // Decrypted bytes, a record not yet processed, or socket bytes in the read buffer: the
    // socket will not announce any of them again.
    return SSL_is_init_finished(ssl_) && (SSL_pending(ssl_) > 0 || SSL_has_pending(ssl_) == 1 ||
                                          BIO_ctrl_pending(SSL_get_rbio(ssl_)) > 0);
  }

  std::string last_error() const override { return last_error_; }

  std::optional<TlsSession> Session() const {
    if (!SSL_is_init_finished(ssl_)) return std::nullopt;
    TlsSession s;
    s.version = SSL_get_version(ssl_);
    s.cipher = SSL_get_cipher_name(ssl_);
    X509* peer = SSL_get1_peer_certificate(ssl_);
    if (peer != nullptr) {
      s.peer_subject = NameText(X509_get_subject_name(peer));
      X509_free(peer);
    }
    return s;
  }

 private:
  IoResult Handshake() {
    if (handshaken_) return {IoResult::State::kDone, 0, 0};
    ERR_clear_error();
    int ret = SSL_do_handshake(ssl_);
    if (ret != 1) return Failed(ret);
    handshaken_ = true;
    ktls_send_ = BIO_get_ktls_send(SSL_get_wbio(ssl_)) == 1;
    return {IoResult::State::kDone, 0, 0};
  }

  IoResult Failed(int ret) {
    const int e = SSL_get_error(ssl_, ret);
    switch (e) {
      case SSL_ERROR_WANT_READ:
        return {IoResult::State::kWantRead, 0, 0};
      case SSL_ERROR_WANT_WRITE:
        return {IoResult::State::kWantWrite, 0, 0};
      case SSL_ERROR_ZERO_RETURN:
        return {IoResult::State::kClosed, 0, 0};
      case SSL_ERROR_SYSCALL: {
        const int err = errno;
        if (ERR_peek_error() == 0 && err == 0) return {IoResult::State::kClosed, 0, 0};
        last_error_ = ERR_peek_error() != 0 ? SslErrors() : std::string(std::strerror(err));
        return {IoResult::State::kError, 0, err != 0 ? err : EPROTO};
      }
      default:
        last_error_ = SslErrors();
        if (!handshaken_) last_error_ = "handshake: " + last_error_;
        return {IoResult::State::kError, 0, EPROTO};
    }
  }

  SSL* const ssl_;
  const std::shared_ptr<SSL_CTX> ctx_;  // the context this session was made with
  bool handshaken_ = false;
  bool ktls_send_ = false;
  size_t pending_ = 0;  // bytes a wanting SSL_write must be given again
  std::vector<uint8_t> scratch_;
  std::string last_error_;
};

// Connects `ssl` to socket `fd`: writes straight to the socket (kernel TLS can take it
// over), reads through a buffer. A client that writes each small piece as its own TLS
// record (librdkafka sends a 256-byte record value as one) would otherwise cost two
// read(2)s per record, its 5-byte header and then its body; through the buffer one read
// brings many records. OpenSSL's own read-ahead does the same but moves what is left to
// the front of its buffer for every record (measured in session 18: no gain).
bool AttachSocket(SSL* ssl, int fd) {
  BIO* wbio = BIO_new_socket(fd, BIO_NOCLOSE);
  BIO* sock = BIO_new_socket(fd, BIO_NOCLOSE);
  BIO* buffer = BIO_new(BIO_f_buffer());
  if (wbio == nullptr || sock == nullptr || buffer == nullptr ||
      BIO_set_read_buffer_size(buffer, kReadBufferBytes) != 1) {
    BIO_free(wbio);
    BIO_free(sock);
    BIO_free(buffer);
    return false;
  }
  BIO_push(buffer, sock);
  SSL_set_bio(ssl, buffer, wbio);  // owns both from here
  return true;
}

std::unique_ptr<Transport> NewServerTransport(int fd, std::shared_ptr<SSL_CTX> ctx) {
  SSL* ssl = SSL_new(ctx.get());
  if (ssl == nullptr) return nullptr;
  if (!AttachSocket(ssl, fd)) {
    SSL_free(ssl);
    return nullptr;
  }
  SSL_set_accept_state(ssl);
  return std::make_unique<TlsTransport>(ssl, std::move(ctx));
}

}  // namespace

Result<ClientAuth> ParseClientAuth(std::string_view text) {
  if (text == "none") return ClientAuth::kNone;
  if (text == "requested") return ClientAuth::kRequested;
  if (text == "required") return ClientAuth::kRequired;
  return InvalidArgumentError("tls client_auth '{}': must be none, requested or required", text);
}

std::string_view ClientAuthName(ClientAuth auth) {
  switch (auth) {
    case ClientAuth::kNone:
      return "none";
    case ClientAuth::kRequested:
      return "requested";
    case ClientAuth::kRequired:
      return "required";
  }
  return "?";
}

Result<std::shared_ptr<TlsContext>> TlsContext::Create(const TlsOptions& options) {
  std::string subject;
  ASSIGN_OR_RETURN(std::shared_ptr<SSL_CTX> ctx, BuildServerCtx(options, &subject));
  std::shared_ptr<TlsContext> t(new TlsContext(options));
  t->ctx_ = std::move(ctx);
  t->subject_ = std::move(subject);
  return t;
}

TlsContext::~TlsContext() = default;

Status TlsContext::Reload() {
  std::string subject;
  Result<std::shared_ptr<SSL_CTX>> ctx = BuildServerCtx(options_, &subject);
  if (!ctx.ok()) {
    SLUICE_LOG(kLog, kError, "reloading the TLS certificate and key: {}; still using {}",
               ctx.status().message(), this->subject());
    return ctx.status();
  }
  std::lock_guard lock(mu_);
  ctx_ = std::move(*ctx);
  subject_ = std::move(subject);
  SLUICE_LOG(kLog, kInfo, "TLS certificate and key reloaded: {}", subject_);
  return Status::OK();
}

std::unique_ptr<Transport> TlsContext::MakeServer(int fd) const {
  std::shared_ptr<SSL_CTX> ctx;
  {
    std::lock_guard lock(mu_);
    ctx = ctx_;
  }
  return NewServerTransport(fd, std::move(ctx));
}

std::string TlsContext::subject() const {
  std::lock_guard lock(mu_);
  return subject_;
}

Result<std::unique_ptr<Transport>> MakeTlsClient(int fd, const TlsClientOptions& o) {
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), CtxFree());
  if (ctx == nullptr) return InternalError("tls: SSL_CTX_new: {}", SslErrors());
  SSL_CTX* c = ctx.get();
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  SSL_CTX_set_options(c, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (!o.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(c, o.ca_file.c_str(), nullptr) != 1) {
      return InvalidArgumentError("tls ca_file {}: {}", o.ca_file, SslErrors());
    }
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
  }
  if (!o.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(c, o.cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(c, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return InvalidArgumentError("tls client certificate {} / key {}: {}", o.cert_file, o.key_file,
                                  SslErrors());
    }
  }
  SSL* ssl = SSL_new(c);
  if (ssl == nullptr) return InternalError("tls: SSL_new: {}", SslErrors());
  if (!o.server_name.empty()) {
    SSL_set_tlsext_host_name(ssl, o.server_name.c_str());
    if (SSL_set1_host(ssl, o.server_name.c_str()) != 1) {
      SSL_free(ssl);
      return InvalidArgumentError("tls server name '{}': {}", o.server_name, SslErrors());
    }
  }
  if (!AttachSocket(ssl, fd)) {
    SSL_free(ssl);
    return InternalError("tls: the socket's BIOs: {}", SslErrors());
  }
  SSL_set_connect_state(ssl);
  return std::unique_ptr<Transport>(std::make_unique<TlsTransport>(ssl, std::move(ctx)));
}

std::optional<TlsSession> SessionOf(const Transport& transport) {
  auto* tls = dynamic_cast<const TlsTransport*>(&transport);
  if (tls == nullptr) return std::nullopt;
  return tls->Session();
}

}  // namespace sluice::net
