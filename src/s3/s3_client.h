// A small S3 client over libcurl, signed with SigV4 (sigv4.h): objects put, read, listed
// and deleted, conditional create (If-None-Match: *), and multipart uploads. Bodies are
// buffered in memory and signed with their real SHA-256; no aws-chunked streaming.
//
// An S3Client holds only its options: each call makes its own curl handle, so one client
// may be used from any number of threads at once. Calls block, retrying 5xx, 429 and
// connection failures with exponential backoff. Secrets never reach a log line or a
// Status message.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "s3/s3_xml.h"
#include "s3/sigv4.h"

namespace sluice::s3 {

// Where the requests go: "http://127.0.0.1:7480" -> {http, 127.0.0.1, 7480}.
struct Endpoint {
  std::string scheme;  // "http" or "https"
  std::string host;    // without brackets for IPv6
  uint16_t port = 0;   // 0: the scheme's default
  // True for "localhost", IPv4 and IPv6 literals: hosts that cannot carry a bucket name
  // in front of them (virtual-hosted style).
  bool host_is_local_or_ip = false;

  // The Host header: host, and ":port" when the port is not the scheme's default.
  std::string HostHeader() const;
};

// InvalidArgument for anything but http(s)://host[:port][/]: no user info, no path, no
// query, a port in 1..65535.
Result<Endpoint> ParseEndpoint(std::string_view url);

struct S3Options {
  std::string endpoint;  // empty: https://s3.<region>.amazonaws.com
  std::string region = "us-east-1";
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  // Path-style ("/bucket/key") or virtual-hosted ("bucket.host/key"). Unset: path-style
  // when the endpoint host is localhost or an IP address, virtual-hosted otherwise.
  std::optional<bool> path_style;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{60000};
  int max_retries = 3;                              // attempts after the first
  std::chrono::milliseconds retry_base_delay{100};  // doubled per retry, capped at 5 s

  // From AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (else
  // AWS_DEFAULT_REGION) and AWS_ENDPOINT_URL_S3 (else AWS_ENDPOINT_URL).
  // InvalidArgument when either key is missing or the endpoint does not parse.
  static Result<S3Options> FromEnvironment();
  // The same over `lookup` (a getenv returning nullptr for unset names), for tests.
  static Result<S3Options> FromEnvironment(const std::function<const char*(const char*)>& lookup);
};

struct PutOptions {
  // Create only: the put fails with AlreadyExists (HTTP 412) when the key exists.
  bool if_none_match_star = false;
  std::string content_type;  // empty: not sent
};

// Bytes [offset, offset + length) of an object; no length: to the end.
struct ByteRange {
  uint64_t offset = 0;
  std::optional<uint64_t> length;
};

struct ObjectInfo {
  uint64_t size = 0;
  std::string etag;  // as S3 sends it, quotes included
};

struct CompletedPart {
  int part_number = 0;
  std::string etag;
};

// Error statuses name the operation, bucket and key, the HTTP status and S3's <Code>:
// "S3 PUT b/k: HTTP 403 AccessDenied: ...". Codes: 404 NotFound, 412 AlreadyExists (for
// If-None-Match puts; FailedPrecondition otherwise), 409 Aborted, 416 OutOfRange,
// 400 InvalidArgument, 401/403 FailedPrecondition, 429/503 SlowDown ResourceExhausted,
// other failures IOError.
class S3Client {
 public:
  // InvalidArgument when the endpoint does not parse or a key is missing.
  static Result<S3Client> Create(S3Options options);

  // The ETag of the new object. Note: a retried create whose first attempt did succeed
  // (the reply was lost) comes back AlreadyExists; a caller that must tell "mine" from
  // "someone else's" compares the object with what it wrote.
  Result<std::string> PutObject(std::string_view bucket, std::string_view key,
                                std::string_view body, const PutOptions& options = {}) const;
  Result<std::string> GetObject(std::string_view bucket, std::string_view key,
                                std::optional<ByteRange> range = std::nullopt) const;
  // The object's bytes (or the range's) written into `fd` from `file_offset` on (pwrite)
  // as they arrive, never held in memory; returns how many. A retried attempt writes the
  // same bytes again over the first's. The errors of GetObject; a failed write is Internal.
  Result<uint64_t> GetObjectToFile(std::string_view bucket, std::string_view key,
                                   std::optional<ByteRange> range, int fd,
                                   uint64_t file_offset) const;
  Result<ObjectInfo> HeadObject(std::string_view bucket, std::string_view key) const;
  // OK when the key does not exist (S3 answers 204 either way).
  Status DeleteObject(std::string_view bucket, std::string_view key) const;
  // One page of keys under `prefix`, from `continuation_token` (empty: the first page).
  Result<ListObjectsPage> ListObjectsV2(std::string_view bucket, std::string_view prefix,
                                        std::string_view continuation_token = {},
                                        std::string_view delimiter = {}) const;

  // Returns the upload id.
  Result<std::string> CreateMultipartUpload(std::string_view bucket, std::string_view key) const;
  // Part numbers 1..10000; returns the part's ETag.
  Result<std::string> UploadPart(std::string_view bucket, std::string_view key,
                                 std::string_view upload_id, int part_number,
                                 std::string_view body) const;
  // Returns the object's ETag.
  Result<std::string> CompleteMultipartUpload(std::string_view bucket, std::string_view key,
                                              std::string_view upload_id,
                                              const std::vector<CompletedPart>& parts) const;
  Status AbortMultipartUpload(std::string_view bucket, std::string_view key,
                              std::string_view upload_id) const;

  const S3Options& options() const { return options_; }

 private:
  struct Request;
  struct Response;

  S3Client(S3Options options, Endpoint endpoint, bool path_style)
      : options_(std::move(options)), endpoint_(std::move(endpoint)), path_style_(path_style) {}

  // Signs and sends `request`, retrying; a response is returned whatever its HTTP status.
  Result<Response> Send(const Request& request) const;
  Result<Response> SendOnce(const Request& request) const;
  // The error Status for a non-2xx response.
  Status HttpError(const Request& request, const Response& response) const;
  // A GetObject request, with the Range header of `range` (a length of 0 is the caller's).
  static Request GetRequest(std::string_view bucket, std::string_view key,
                            std::optional<ByteRange> range);

  S3Options options_;
  Endpoint endpoint_;
  bool path_style_;
};

// Whether the store honours a conditional create (`If-None-Match: *`), which a table
// commit rests on (two writers must never both create the next metadata file): creates a
// probe object under `prefix` twice, the second must come back AlreadyExists, then removes
// it. FailedPrecondition naming the store when the second create succeeds; the store's
// own errors as they come.
Status ProbeConditionalCreate(const S3Client& client, std::string_view bucket,
                              std::string_view prefix);

}  // namespace sluice::s3
