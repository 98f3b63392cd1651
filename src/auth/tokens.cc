#include "auth/tokens.h"

#include <array>
#include <nlohmann/json.hpp>
#include <optional>

#include "auth/scram.h"
#include "base/utf8.h"

namespace sluice::auth {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kPrefix = "sluice.v1.";
constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr size_t kMacBytes = 32;
constexpr size_t kTagBytes = 12;
constexpr size_t kMaxSubjectBytes = 1024;
constexpr size_t kMaxFieldBytes = 64;

TokenVerdict Refused(TokenError error, std::string why) {
  TokenVerdict v;
  v.error = error;
  v.why = std::move(why);
  return v;
}

}  // namespace

std::string Base64UrlEncode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = (uint32_t{static_cast<uint8_t>(bytes[i])} << 16) |
                       (uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8) |
                       uint32_t{static_cast<uint8_t>(bytes[i + 2])};
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest == 1) {
    const uint32_t v = uint32_t{static_cast<uint8_t>(bytes[i])} << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
  } else if (rest == 2) {
    const uint32_t v = (uint32_t{static_cast<uint8_t>(bytes[i])} << 16) |
                       (uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
  }
  return out;
}

Result<std::string> Base64UrlDecode(std::string_view text) {
  static const std::array<int8_t, 256> kValue = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    for (size_t i = 0; i < kAlphabet.size(); ++i) t[static_cast<uint8_t>(kAlphabet[i])] = int8_t(i);
    return t;
  }();
  if (text.size() % 4 == 1) {
    return InvalidArgumentError("base64url of {} characters is truncated", text.size());
  }
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const int8_t v = kValue[static_cast<uint8_t>(text[i])];
    if (v < 0) return InvalidArgumentError("base64url: a bad character at {}", i);
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if ((acc & ((1u << bits) - 1)) != 0) {
    return InvalidArgumentError("base64url: the unused bits of the last character are not zero");
  }
  return out;
}

TokenSigner::TokenSigner(std::string_view secret)
    : sign_key_(Hmac(ScramMechanism::kSha256, secret, "sluice http token signing v1")),
      tag_key_(Hmac(ScramMechanism::kSha256, secret, "sluice http token credential v1")) {}

std::string TokenSigner::NewId() { return Base64UrlEncode(RandomBytes(16)); }

std::string TokenSigner::CredentialTag(std::string_view credentials) const {
  return Base64UrlEncode(Hmac(ScramMechanism::kSha256, tag_key_, credentials).substr(0, kTagBytes));
}

std::string TokenSigner::Sign(const TokenClaims& c) const {
  const Json payload{{"sub", c.subject},
                     {"iat", c.issued_at},
                     {"exp", c.expires_at},
                     {"jti", c.id},
                     {"cred", c.credential}};
  std::string signed_part = std::string(kPrefix) + Base64UrlEncode(payload.dump());
  const std::string mac = Hmac(ScramMechanism::kSha256, sign_key_, signed_part);
  return signed_part + "." + Base64UrlEncode(mac);
}

TokenVerdict TokenSigner::Verify(std::string_view token, int64_t now) const {
  if (token.size() > kMaxTokenBytes) {
    return Refused(TokenError::kMalformed, "the token is too long");
  }
  if (!token.starts_with(kPrefix)) {
    return Refused(TokenError::kMalformed, "not a sluice token (sluice.v1.…)");
  }
  const size_t dot = token.rfind('.');
  if (dot < kPrefix.size()) return Refused(TokenError::kMalformed, "the token has no signature");
  const std::string_view signed_part = token.substr(0, dot);
  const std::string_view payload_text = signed_part.substr(kPrefix.size());
  Result<std::string> mac = Base64UrlDecode(token.substr(dot + 1));
  if (payload_text.empty() || !mac.ok() || mac->size() != kMacBytes) {
    return Refused(TokenError::kMalformed, "the token is malformed");
  }
  // Before anything of the payload is read: only bytes this secret signed go further.
  if (!ConstantTimeEquals(*mac, Hmac(ScramMechanism::kSha256, sign_key_, signed_part))) {
    return Refused(TokenError::kBadSignature, "the token's signature does not match");
  }
  // Signed by us, so well formed unless the secret leaked; checked all the same.
  Result<std::string> payload = Base64UrlDecode(payload_text);
  if (!payload.ok()) return Refused(TokenError::kMalformed, "the token's payload is malformed");
  Json j = Json::parse(*payload, nullptr, /*allow_exceptions=*/false);
  auto string_field = [&](const char* name, size_t max) -> const std::string* {
    auto it = j.find(name);
    if (it == j.end() || !it->is_string()) return nullptr;
    const std::string& s = it->get_ref<const std::string&>();
    return s.size() <= max && IsValidUtf8(s) ? &s : nullptr;
  };
  auto int_field = [&](const char* name) -> std::optional<int64_t> {
    auto it = j.find(name);
    if (it == j.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int64_t>();
  };
  if (j.is_discarded() || !j.is_object()) {
    return Refused(TokenError::kMalformed, "the token's payload is malformed");
  }
  const std::string* sub = string_field("sub", kMaxSubjectBytes);
  const std::string* jti = string_field("jti", kMaxFieldBytes);
  const std::string* cred = string_field("cred", kMaxFieldBytes);
  const std::optional<int64_t> iat = int_field("iat");
  const std::optional<int64_t> exp = int_field("exp");
  if (sub == nullptr || sub->empty() || jti == nullptr || cred == nullptr || !iat || !exp ||
      *exp <= *iat) {
    return Refused(TokenError::kMalformed, "the token's payload is malformed");
  }
  if (now >= *exp) return Refused(TokenError::kExpired, "the token expired");
  if (*iat > now + kTokenClockSkewSeconds) {
    return Refused(TokenError::kNotYetValid, "the token was issued in the future");
  }
  TokenVerdict v;
  v.ok = true;
  v.claims = {*sub, *iat, *exp, *jti, *cred};
  return v;
}

}  // namespace sluice::auth
