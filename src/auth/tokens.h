// Bearer tokens for the HTTP port (docs/design/0021-http-tokens-and-browser-safety.md):
// what /v1/oauth/tokens and `sluice user token` hand out, and what an `Authorization:
// Bearer` header is checked against.
//
//   sluice.v1.<base64url(payload)>.<base64url(HMAC-SHA256(key, "sluice.v1." payload))>
//   payload: {"sub":"alice","iat":1700000000,"exp":1700003600,"jti":"…","cred":"…"}
//
// The key is derived from the user store's token secret (32 random bytes kept with the
// users, so every broker of a cluster verifies every broker's tokens, and a restart keeps
// them). `cred` binds a token to the credentials its user had when it was made: a new
// password (or a removed user) ends every token made before. A token is a reader of outside
// bytes: Verify refuses anything but the exact form above, compares the MAC in constant
// time, and reads the payload only once the MAC matched.
//
// Threads: a TokenSigner is immutable; any thread may use it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace sluice::auth {

struct TokenClaims {
  std::string subject;     // the user name
  int64_t issued_at = 0;   // seconds since the epoch
  int64_t expires_at = 0;  // seconds since the epoch; the token is refused from then on
  std::string id;          // random, for logs and (later) revocation lists
  std::string credential;  // CredentialTag of the user's credentials when issued
};

// Why Verify refused a token: its form (kMalformed, a tampered MAC or another secret's
// token is kBadSignature), or its time.
enum class TokenError { kMalformed, kBadSignature, kExpired, kNotYetValid };

struct TokenVerdict {
  bool ok = false;
  TokenClaims claims;  // when ok
  TokenError error = TokenError::kMalformed;
  std::string why;  // one line for the WWW-Authenticate error_description; names no secret
};

// The longest token Verify reads (a user name is at most 1 KiB).
inline constexpr size_t kMaxTokenBytes = 4096;
inline constexpr size_t kTokenSecretBytes = 32;
// How far in the future an issue time may be (another broker's clock).
inline constexpr int64_t kTokenClockSkewSeconds = 60;

class TokenSigner {
 public:
  // `secret` must be kTokenSecretBytes long.
  explicit TokenSigner(std::string_view secret);

  std::string Sign(const TokenClaims& claims) const;
  // Checks the form and the MAC, then the times against `now` (seconds since the epoch).
  TokenVerdict Verify(std::string_view token, int64_t now) const;
  // A short tag of a user's credentials (their salts and stored keys, concatenated by the
  // caller): different for every password, useless for guessing one.
  std::string CredentialTag(std::string_view credentials) const;
  // A fresh token id.
  static std::string NewId();

 private:
  std::string sign_key_;
  std::string tag_key_;
};

// RFC 4648 section 5 without padding; Decode is strict (no padding, no other characters,
// the unused low bits zero) so that each text has one meaning.
std::string Base64UrlEncode(std::string_view bytes);
Result<std::string> Base64UrlDecode(std::string_view text);

}  // namespace sluice::auth
