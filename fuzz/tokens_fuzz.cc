// Fuzz target for the HTTP port's bearer tokens (src/auth/tokens.h): any bytes given as a
// token must be refused or verified, never crash; a token verifies only as it was signed
// (the input is also appended to, and spliced into, a valid token, which must then fail
// unless nothing changed); Base64UrlDecode of what Base64UrlEncode made gives the bytes back.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "auth/tokens.h"

using namespace sluice::auth;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  static const TokenSigner signer(std::string(kTokenSecretBytes, 'k'));
  const int64_t now = 1'800'000'000;
  TokenVerdict v = signer.Verify(in, now);
  if (v.ok && v.claims.subject.empty()) std::abort();
  if (!v.ok && v.why.empty()) std::abort();

  const std::string good = signer.Sign({.subject = "alice",
                                        .issued_at = now - 10,
                                        .expires_at = now + 3600,
                                        .id = "x",
                                        .credential = "c"});
  if (!signer.Verify(good, now).ok) std::abort();
  const size_t at = size == 0 ? 0 : data[0] % (good.size() + 1);
  std::string spliced = good.substr(0, at) + std::string(in) + good.substr(at);
  if (spliced != good && signer.Verify(spliced, now).ok) std::abort();

  const std::string encoded = Base64UrlEncode(in);
  auto decoded = Base64UrlDecode(encoded);
  if (!decoded.ok() || *decoded != in) std::abort();
  (void)Base64UrlDecode(in);
  return 0;
}
