// Who may use the HTTP port (docs/design/0019-security.md phase D, and
// docs/design/0021-http-tokens-and-browser-safety.md): the user store's users, with HTTP
// Basic (`http.auth: basic`) or a bearer token (`basic` and `token`), and the OAuth2 token
// endpoint of the Iceberg REST spec that hands tokens out (`POST /v1/oauth/tokens`, client
// credentials only).
//
// Basic: `Authorization: Basic base64(user:password)`, the password checked against the
// user's SCRAM credential (PBKDF2 again, as SASL PLAIN is). A verified pair is remembered
// (as a hash, with the credentials it matched) so that a client sending the same header on
// every request costs one derivation, until its credentials change. The token endpoint
// shares that memory.
// Bearer: `Authorization: Bearer sluice.v1.…` (auth/tokens.h), refused once expired, once its
// user is gone or has another password.
// Failed passwords: at most kMaxFailuresPerMinute a minute from one address, then 429
// without deriving anything until the minute is over; logged at most 5 lines per 10 s.
// A refusal is 401 with `WWW-Authenticate` for Bearer (with RFC 6750's error="invalid_token"
// when a token was refused) and for Basic, in the Iceberg REST error shape.
//
// Threads: an HttpAuth is shared by the HTTP server's threads; every method may be called
// at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "auth/scram.h"
#include "auth/tokens.h"
#include "auth/user_store.h"
#include "base/http_server.h"

namespace sluice::auth {

inline constexpr std::string_view kTokenPath = "/v1/oauth/tokens";
inline constexpr int kMaxFailuresPerMinute = 20;

struct HttpAuthOptions {
  std::shared_ptr<UserStore> users;
  bool accept_basic = true;  // false (`http.auth: token`): bearer tokens only
  int64_t token_ttl_seconds = 3600;
  // The longest lifetime a client may ask for (the non-standard form field expires_in).
  int64_t token_max_ttl_seconds = 30 * 86400;
  // Seconds since the epoch; null: the system clock (tests set their own).
  std::function<int64_t()> now;
};

class HttpAuth {
 public:
  explicit HttpAuth(HttpAuthOptions options);

  // The hook HttpServer runs before every route that needs a login.
  HttpAuthResult Authenticate(const HttpRequest& req);
  // POST /v1/oauth/tokens: a form with grant_type=client_credentials and the user as
  // client_id/client_secret (or in a Basic header), optional expires_in (seconds, capped by
  // token_max_ttl_seconds). Answers the spec's OAuthTokenResponse or OAuthError.
  HttpResponse IssueToken(const HttpRequest& req);
  // A token for `user` without checking a password (tests; `ttl_seconds` as asked).
  Result<std::string> TokenFor(const std::string& user, int64_t ttl_seconds);
  // The signing secret, made on first need. In a cluster two brokers may make one at once:
  // the loser waits (up to ~3 s) for the winner's to arrive through the store's watch.
  Result<std::string> EnsureSecret();

  // Routes for HttpServer::Start: the token endpoint (no login needed; a form POST).
  static HttpRoute TokenRoute(std::shared_ptr<HttpAuth> auth);
  // The hook for HttpServerOptions::authenticate.
  static HttpAuthenticator Hook(std::shared_ptr<HttpAuth> auth);

 private:
  struct Failures {
    int64_t window_start = 0;  // seconds
    int count = 0;
  };
  int64_t Now() const;
  // Whether `user`:`password` is right (remembered or derived); counts failures by address.
  bool CheckPassword(const std::string& user, std::string_view password,
                     const std::string& remote_addr);
  // Seconds `remote_addr` must wait before another password is checked, 0 when none.
  int64_t Throttled(const std::string& remote_addr);
  void Failed(const std::string& remote_addr, const std::string& user, std::string_view how);
  std::string CredentialTag(const TokenSigner& signer, const std::string& user) const;

  const HttpAuthOptions options_;
  std::mutex mu_;
  // A hash of each verified user:password, with the credentials it matched; guarded by mu_.
  std::map<std::string, std::vector<std::optional<ScramCredential>>> verified_;
  std::map<std::string, Failures> failures_;  // by client address; guarded by mu_
  int64_t log_window_ = 0;                    // guarded by mu_
  int logged_ = 0;                            // lines in log_window_; guarded by mu_
  int unlogged_ = 0;                          // failures left out of the log; guarded by mu_
};

}  // namespace sluice::auth
