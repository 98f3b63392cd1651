// AWS Signature Version 4 for S3 requests, as a pure function of the request: no clock,
// no network. The client (s3_client.h) and the tests both sign through it, so a test can
// recompute what the client sent.
//
// Reference: https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace sluice::s3 {

// The payload hash S3 accepts in place of a body's SHA-256.
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty unless the keys are temporary (STS)
};

using NameValues = std::vector<std::pair<std::string, std::string>>;

struct SigningRequest {
  std::string method;        // "GET", "PUT", ...
  std::string encoded_path;  // already URI-encoded per segment ("/bucket/my%20key")
  NameValues query;          // raw (not encoded) names and values, in any order
  // Every header that is sent and signed, names in any case. Must hold `host` and
  // `x-amz-date` ("20130524T000000Z"); the signing time is read from the latter.
  NameValues headers;
  std::string payload_hash;  // lowercase hex SHA-256 of the body, or kUnsignedPayload
};

struct SigningResult {
  std::string authorization;  // the Authorization header's value
  // The headers to send beside Authorization: the request's, lowercase names, trimmed
  // values, sorted, with x-amz-security-token added when the credentials carry a token.
  NameValues headers;
  std::string canonical_request;
  std::string string_to_sign;
  std::string signed_headers;  // "host;range;x-amz-content-sha256;x-amz-date"
  std::string signature;       // lowercase hex
};

// Signs `request` for `region` and `service` ("s3"). InvalidArgument when a required
// header is missing, x-amz-date is malformed, or a header holds CR/LF.
Result<SigningResult> SignRequest(const SigningRequest& request, const Credentials& credentials,
                                  std::string_view region, std::string_view service);

// SigV4 URI encoding: A-Z a-z 0-9 - _ . ~ kept, every other byte as %XX (uppercase hex);
// '/' is kept only when `keep_slash` (object key paths), never in query strings.
std::string UriEncode(std::string_view s, bool keep_slash);

// "a=1&b=x%2Fy": names and values encoded, sorted by name then value. What is signed and
// what is sent on the URL are this same string.
std::string CanonicalQueryString(const NameValues& query);

// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

// "20130524T000000Z" for `time` in UTC.
std::string FormatAmzDate(std::chrono::system_clock::time_point time);

}  // namespace sluice::s3
