// TLS for every listener (issue 22, docs/design/0019-security.md): one `tls:` section
// makes a TlsContext (certificate, key, CA, client authentication, TLS 1.2 at least, a safe
// cipher list); each accepted socket a listener wants encrypted gets a transport from it
// (MakeTlsServer), which does the handshake inside its first reads and writes, so the
// connection code above a Transport does not change.
//
// Reload (SIGHUP) reads the certificate and key again into a new SSL_CTX; connections
// already open keep the context they were made with, new ones take the new one; a file
// that does not load leaves the old context in use and says why.
//
// Kernel TLS: with `ktls` on (the default) OpenSSL is asked to hand the session's keys to
// the kernel after the handshake (SSL_OP_ENABLE_KTLS). Where the kernel took them for
// sending, the transport can SendFile (SSL_sendfile: the file's bytes are encrypted in
// the kernel, never copied to user space) and name() is "ktls"; elsewhere it is "tls" and
// file bytes go through Writev.
//
// Threads: a TlsContext is safe to use from any thread; a transport, one thread at a time.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "net/transport.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace sluice::net {

enum class ClientAuth { kNone, kRequested, kRequired };
Result<ClientAuth> ParseClientAuth(std::string_view text);  // none | requested | required
std::string_view ClientAuthName(ClientAuth auth);

struct TlsOptions {
  std::string cert_file;  // PEM: the certificate, then any intermediates
  std::string key_file;   // PEM private key; refused when group or others may read it
  std::string ca_file;    // PEM CAs that client certificates must chain to (client_auth)
  ClientAuth client_auth = ClientAuth::kNone;
  std::string min_version = "1.2";  // "1.2" or "1.3"
  // OpenSSL cipher list for TLS 1.2 (TLS 1.3's suites are OpenSSL's defaults).
  std::string ciphers = kDefaultCiphers;
  // OpenSSL's TLS 1.3 suites ("TLS_AES_128_GCM_SHA256:..."); empty: OpenSSL's defaults.
  std::string ciphersuites;
  bool ktls = true;

  // Forward-secret AEAD suites only (Mozilla's "intermediate" list for TLS 1.2).
  static constexpr const char* kDefaultCiphers =
      "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
      "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
      "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
};

class TlsContext {
 public:
  // Loads and checks everything: the files exist and parse, the key matches the
  // certificate, the key file is not readable by group or others, client_auth other
  // than none has a CA file. The error names the file and what is wrong with it.
  static Result<std::shared_ptr<TlsContext>> Create(const TlsOptions& options);
  ~TlsContext();

  // Reads the certificate and key again (the same paths and settings). On success new
  // transports use them; on failure the context in use stays and the error says why.
  Status Reload();

  // A server-side transport over the accepted socket `fd` (not owned), with the current
  // certificate. The handshake runs inside its first Read/Writev calls.
  std::unique_ptr<Transport> MakeServer(int fd) const;

  const TlsOptions& options() const { return options_; }
  // The certificate's subject, for the log ("CN=broker1,O=example").
  std::string subject() const;

 private:
  explicit TlsContext(TlsOptions options) : options_(std::move(options)) {}

  const TlsOptions options_;
  mutable std::mutex mu_;
  std::shared_ptr<SSL_CTX> ctx_;  // guarded by mu_
  std::string subject_;           // guarded by mu_
};

// A client-side transport (tests, and later the inter-broker and sink connections):
// verifies the server against `ca_file` and, when `server_name` is not empty, its name.
// `cert_file`/`key_file` are the client's own certificate when not empty.
struct TlsClientOptions {
  std::string ca_file;
  std::string server_name;
  std::string cert_file;
  std::string key_file;
};
Result<std::unique_ptr<Transport>> MakeTlsClient(int fd, const TlsClientOptions& options);

// What a TLS transport knows once its handshake is done (nullopt before, or for
// plaintext): the protocol and cipher, and the client certificate's subject (empty when
// the client sent none). For logs and, with SSL principals, authorization.
struct TlsSession {
  std::string version;  // "TLSv1.3"
  std::string cipher;   // "TLS_AES_128_GCM_SHA256"
  std::string peer_subject;
};
std::optional<TlsSession> SessionOf(const Transport& transport);

}  // namespace sluice::net
