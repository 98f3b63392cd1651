// AWS Signature Version 4 (see sigv4.h).
#include "s3/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <ctime>

#include "base/strings.h"

namespace sluice::s3 {
namespace {

constexpr char kHexLower[] = "0123456789abcdef";
constexpr char kHexUpper[] = "0123456789ABCDEF";

std::string ToHex(const unsigned char* data, size_t size) {
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kHexLower[data[i] >> 4]);
    out.push_back(kHexLower[data[i] & 0xf]);
  }
  return out;
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest, &size);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

// Trimmed, with each run of spaces and tabs inside folded to one space ("Trimall").
std::string CanonicalHeaderValue(std::string_view value) {
  std::string out;
  bool in_space = false;
  for (char c : Trim(value)) {
    if (c == ' ' || c == '\t') {
      in_space = true;
      continue;
    }
    if (in_space) out.push_back(' ');
    in_space = false;
    out.push_back(c);
  }
  return out;
}

bool IsAmzDate(std::string_view s) {
  if (s.size() != 16 || s[8] != 'T' || s[15] != 'Z') return false;
  for (size_t i = 0; i < 15; ++i) {
    if (i == 8) continue;
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

}  // namespace

std::string UriEncode(std::string_view s, bool keep_slash) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHexUpper[c >> 4]);
      out.push_back(kHexUpper[c & 0xf]);
    }
  }
  return out;
}

std::string CanonicalQueryString(const NameValues& query) {
  NameValues encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query) {
    encoded.emplace_back(UriEncode(name, false), UriEncode(value, false));
  }
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out.push_back('&');
    out += name;
    out.push_back('=');
    out += value;
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return ToHex(digest, sizeof(digest));
}

std::string FormatAmzDate(std::chrono::system_clock::time_point time) {
  std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

Result<SigningResult> SignRequest(const SigningRequest& request, const Credentials& credentials,
                                  std::string_view region, std::string_view service) {
  SigningResult result;
  // Lowercase names; a name given twice is signed once with its values joined by ','.
  NameValues& headers = result.headers;
  bool has_token_header = false;
  for (const auto& [name, value] : request.headers) {
    if (name.empty() || name.find_first_of("\r\n: ") != std::string::npos ||
        value.find_first_of("\r\n") != std::string::npos) {
      return InvalidArgumentError("sigv4: header '{}' has a bad name or a line break in its value",
                                  name);
    }
    std::string lower = AsciiLower(name);
    if (lower == "x-amz-security-token") has_token_header = true;
    headers.emplace_back(std::move(lower), CanonicalHeaderValue(value));
  }
  if (!credentials.session_token.empty() && !has_token_header) {
    if (credentials.session_token.find_first_of("\r\n") != std::string::npos) {
      return InvalidArgumentError("sigv4: the session token holds a line break");
    }
    headers.emplace_back("x-amz-security-token", CanonicalHeaderValue(credentials.session_token));
  }
  std::stable_sort(headers.begin(), headers.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < headers.size();) {
    if (headers[i].first == headers[i - 1].first) {
      headers[i - 1].second += "," + headers[i].second;
      headers.erase(headers.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }

  std::string amz_date;
  bool has_host = false;
  std::string canonical_headers;
  for (const auto& [name, value] : headers) {
    if (name == "host") has_host = true;
    if (name == "x-amz-date") amz_date = value;
    canonical_headers += name + ":" + value + "\n";
    if (!result.signed_headers.empty()) result.signed_headers.push_back(';');
    result.signed_headers += name;
  }
  if (!has_host) return InvalidArgumentError("sigv4: the request has no host header");
  if (!IsAmzDate(amz_date)) {
    return InvalidArgumentError("sigv4: x-amz-date '{}' is not YYYYMMDDTHHMMSSZ", amz_date);
  }
  if (request.payload_hash.empty()) {
    return InvalidArgumentError("sigv4: the payload hash is empty");
  }

  result.canonical_request = fmt::format("{}\n{}\n{}\n{}\n{}\n{}", request.method,
                                         request.encoded_path.empty() ? "/" : request.encoded_path,
                                         CanonicalQueryString(request.query), canonical_headers,
                                         result.signed_headers, request.payload_hash);

  std::string_view date = std::string_view(amz_date).substr(0, 8);
  std::string scope = fmt::format("{}/{}/{}/aws4_request", date, region, service);
  result.string_to_sign = fmt::format("AWS4-HMAC-SHA256\n{}\n{}\n{}", amz_date, scope,
                                      Sha256Hex(result.canonical_request));

  std::string key = HmacSha256("AWS4" + credentials.secret_access_key, date);
  key = HmacSha256(key, region);
  key = HmacSha256(key, service);
  key = HmacSha256(key, "aws4_request");
  std::string signature = HmacSha256(key, result.string_to_sign);
  result.signature =
      ToHex(reinterpret_cast<const unsigned char*>(signature.data()), signature.size());

  result.authorization =
      fmt::format("AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}",
                  credentials.access_key_id, scope, result.signed_headers, result.signature);
  return result;
}

}  // namespace sluice::s3
