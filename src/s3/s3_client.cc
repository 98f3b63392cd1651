// The S3 client over libcurl (see s3_client.h).
#include "s3/s3_client.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "base/logging.h"
#include "base/strings.h"
#include "s3/http_call.h"

namespace sluice::s3 {
namespace {

const Logger kLog("s3");

constexpr std::chrono::milliseconds kMaxRetryDelay{5000};
// The bound on a reply that is not an object's bytes.
constexpr size_t kMaxReplyBytes = 16u << 20;

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool IsRetryableHttp(long status) { return status == 429 || status >= 500; }

std::string ObjectName(std::string_view bucket, std::string_view key) {
  return key.empty() ? std::string(bucket) : fmt::format("{}/{}", bucket, key);
}

}  // namespace

struct S3Client::Request {
  std::string op;  // "PutObject", for messages
  std::string method;
  std::string bucket;
  std::string key;
  NameValues query;
  NameValues headers;  // besides host, x-amz-date, x-amz-content-sha256
  std::string_view body;
  bool if_none_match = false;
  // The reply is the object's bytes (GetObject): bounded by the object, not capped.
  bool object_reply = false;
  // GetObjectToFile: called before each attempt, and with a 2xx reply's body as it comes.
  std::function<void()> on_attempt;
  std::function<Status(long status, std::string_view bytes)> on_body;
};

struct S3Client::Response : HttpReply {};

std::string Endpoint::HostHeader() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  bool default_port =
      port == 0 || (scheme == "http" && port == 80) || (scheme == "https" && port == 443);
  if (!default_port) h += fmt::format(":{}", port);
  return h;
}

Result<Endpoint> ParseEndpoint(std::string_view url) {
  Endpoint endpoint;
  size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return InvalidArgumentError("S3 endpoint '{}': no scheme (want http:// or https://)", url);
  }
  endpoint.scheme = AsciiLower(url.substr(0, sep));
  if (endpoint.scheme != "http" && endpoint.scheme != "https") {
    return InvalidArgumentError("S3 endpoint '{}': scheme must be http or https", url);
  }
  std::string_view rest = url.substr(sep + 3);
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find_first_of("/?#@ \t\r\n") != std::string_view::npos) {
    return InvalidArgumentError(
        "S3 endpoint '{}': only scheme://host[:port] is accepted (no path, query or user)", url);
  }
  std::string_view host = rest;
  std::string_view port;
  if (rest.starts_with('[')) {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgumentError("S3 endpoint '{}': unclosed '[' in the host", url);
    }
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return InvalidArgumentError("S3 endpoint '{}': junk after ']'", url);
      port = after.substr(1);
      if (port.empty()) return InvalidArgumentError("S3 endpoint '{}': empty port", url);
    }
  } else if (size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (port.empty()) return InvalidArgumentError("S3 endpoint '{}': empty port", url);
  }
  if (host.empty()) return InvalidArgumentError("S3 endpoint '{}': no host", url);
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return InvalidArgumentError("S3 endpoint '{}': bad port '{}'", url, port);
    }
    endpoint.port = static_cast<uint16_t>(value);
  }
  endpoint.host = AsciiLower(host);
  if (endpoint.host.find(':') != std::string::npos && !IsIpLiteral(endpoint.host)) {
    return InvalidArgumentError("S3 endpoint '{}': bad host", url);
  }
  endpoint.host_is_local_or_ip = endpoint.host == "localhost" || IsIpLiteral(endpoint.host);
  return endpoint;
}

Result<S3Options> S3Options::FromEnvironment() {
  return FromEnvironment([](const char* name) { return std::getenv(name); });
}

Result<S3Options> S3Options::FromEnvironment(
    const std::function<const char*(const char*)>& lookup) {
  auto get = [&](const char* name) -> std::string {
    const char* value = lookup(name);
    return value == nullptr ? std::string() : std::string(value);
  };
  S3Options options;
  options.access_key_id = get("AWS_ACCESS_KEY_ID");
  options.secret_access_key = get("AWS_SECRET_ACCESS_KEY");
  options.session_token = get("AWS_SESSION_TOKEN");
  if (options.access_key_id.empty()) {
    return InvalidArgumentError("S3: AWS_ACCESS_KEY_ID is not set");
  }
  if (options.secret_access_key.empty()) {
    return InvalidArgumentError("S3: AWS_SECRET_ACCESS_KEY is not set");
  }
  std::string region = get("AWS_REGION");
  if (region.empty()) region = get("AWS_DEFAULT_REGION");
  if (!region.empty()) options.region = region;
  options.endpoint = get("AWS_ENDPOINT_URL_S3");
  if (options.endpoint.empty()) options.endpoint = get("AWS_ENDPOINT_URL");
  if (!options.endpoint.empty()) {
    RETURN_IF_ERROR(ParseEndpoint(options.endpoint).status());
  }
  return options;
}

Result<S3Client> S3Client::Create(S3Options options) {
  if (options.access_key_id.empty() || options.secret_access_key.empty()) {
    return InvalidArgumentError("S3: the access key id and the secret access key are required");
  }
  if (options.region.empty()) return InvalidArgumentError("S3: the region is empty");
  if (options.max_retries < 0) return InvalidArgumentError("S3: max_retries is negative");
  std::string url = options.endpoint.empty()
                        ? fmt::format("https://s3.{}.amazonaws.com", options.region)
                        : options.endpoint;
  ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(url));
  bool path_style = options.path_style.value_or(endpoint.host_is_local_or_ip);
  return S3Client(std::move(options), std::move(endpoint), path_style);
}

Result<S3Client::Response> S3Client::Send(const Request& request) const {
  std::minstd_rand random(std::random_device{}());
  for (int attempt = 0;; ++attempt) {
    Result<Response> response = SendOnce(request);
    bool transient = !response.ok() ? response.status().code() == StatusCode::kIOError
                                    : IsRetryableHttp(response->status);
    if (!transient || attempt >= options_.max_retries) return response;
    // Full jitter: a random wait up to base * 2^attempt, so clients that failed together
    // do not come back together.
    auto cap = std::min<std::chrono::milliseconds>(options_.retry_base_delay * (1LL << attempt),
                                                   kMaxRetryDelay);
    auto delay = std::chrono::milliseconds(
        std::uniform_int_distribution<int64_t>(cap.count() / 2, cap.count())(random));
    SLUICE_LOG(
        kLog, kInfo, "{} {}: retry {} of {} in {} ms after {}", request.op,
        ObjectName(request.bucket, request.key), attempt + 1, options_.max_retries, delay.count(),
        response.ok() ? fmt::format("HTTP {}", response->status) : response.status().message());
    std::this_thread::sleep_for(delay);
  }
}

Result<S3Client::Response> S3Client::SendOnce(const Request& request) const {
  std::string host = endpoint_.HostHeader();
  std::string path;
  if (path_style_) {
    path = "/" + UriEncode(request.bucket, false);
    if (!request.key.empty()) path += "/" + UriEncode(request.key, true);
  } else {
    host = request.bucket + "." + host;
    path = "/" + UriEncode(request.key, true);
  }

  SigningRequest signing;
  signing.method = request.method;
  signing.encoded_path = path;
  signing.query = request.query;
  signing.payload_hash = Sha256Hex(request.body);
  signing.headers = request.headers;
  signing.headers.emplace_back("host", host);
  signing.headers.emplace_back("x-amz-date", FormatAmzDate(std::chrono::system_clock::now()));
  signing.headers.emplace_back("x-amz-content-sha256", signing.payload_hash);
  Credentials credentials{options_.access_key_id, options_.secret_access_key,
                          options_.session_token};
  ASSIGN_OR_RETURN(SigningResult signed_request,
                   SignRequest(signing, credentials, options_.region, "s3"));

  std::string url =
      fmt::format("{}://{}{}", endpoint_.scheme, path_style_ ? endpoint_.HostHeader() : host, path);
  std::string query = CanonicalQueryString(request.query);
  if (!query.empty()) url += "?" + query;

  HttpCallRequest call;
  call.method = request.method;
  call.url = std::move(url);
  for (const auto& [name, value] : signed_request.headers)
    call.headers.push_back(name + ": " + value);
  call.headers.push_back("authorization: " + signed_request.authorization);
  // Curl would otherwise add these: "Expect: 100-continue" costs a round trip per put,
  // and a form Content-Type would mislabel the object.
  call.headers.push_back("Expect:");
  if (std::none_of(request.headers.begin(), request.headers.end(),
                   [](const auto& h) { return EqualsIgnoreCase(h.first, "content-type"); })) {
    call.headers.push_back("Content-Type:");
  }
  call.body = request.body;
  call.connect_timeout = options_.connect_timeout;
  call.timeout = options_.request_timeout;
  // A reply that is not an object's bytes (XML: a list page, an error, a multipart
  // answer) is bounded: a server's bytes must not grow memory without bound.
  call.max_reply_bytes = request.object_reply ? 0 : kMaxReplyBytes;
  call.what = fmt::format("S3 {} {}", request.op, ObjectName(request.bucket, request.key));
  call.on_body = request.on_body;
  if (request.on_attempt) request.on_attempt();
  ASSIGN_OR_RETURN(HttpReply reply, HttpCall(call));
  Response response;
  static_cast<HttpReply&>(response) = std::move(reply);
  return response;
}

Status S3Client::HttpError(const Request& request, const Response& response) const {
  std::string s3_code;
  std::string s3_message;
  if (!response.body.empty()) {
    if (Result<S3ErrorBody> error = ParseErrorBody(response.body); error.ok()) {
      s3_code = error->code;
      s3_message = error->message;
    }
  }
  std::string message = fmt::format("S3 {} {}: HTTP {}", request.op,
                                    ObjectName(request.bucket, request.key), response.status);
  if (!s3_code.empty()) message += " " + s3_code;
  if (!s3_message.empty()) message += ": " + s3_message;

  StatusCode code = StatusCode::kIOError;
  switch (response.status) {
    case 400:
      code = StatusCode::kInvalidArgument;
      break;
    case 401:
    case 403:
      code = StatusCode::kFailedPrecondition;
      break;
    case 404:
      code = StatusCode::kNotFound;
      break;
    case 409:
      code = StatusCode::kAborted;
      break;
    case 412:
      code = request.if_none_match ? StatusCode::kAlreadyExists : StatusCode::kFailedPrecondition;
      break;
    case 416:
      code = StatusCode::kOutOfRange;
      break;
    case 429:
      code = StatusCode::kResourceExhausted;
      break;
    case 503:
      if (s3_code == "SlowDown") code = StatusCode::kResourceExhausted;
      break;
    default:
      break;
  }
  return Status(code, std::move(message));
}

Result<std::string> S3Client::PutObject(std::string_view bucket, std::string_view key,
                                        std::string_view body, const PutOptions& options) const {
  Request request{.op = "PutObject",
                  .method = "PUT",
                  .bucket = std::string(bucket),
                  .key = std::string(key),
                  .body = body,
                  .if_none_match = options.if_none_match_star};
  if (options.if_none_match_star) request.headers.emplace_back("if-none-match", "*");
  if (!options.content_type.empty()) {
    request.headers.emplace_back("content-type", options.content_type);
  }
  ASSIGN_OR_RETURN(Response response, Send(request));
  if (response.status / 100 != 2) return HttpError(request, response);
  return std::string(response.Header("etag"));
}

S3Client::Request S3Client::GetRequest(std::string_view bucket, std::string_view key,
                                       std::optional<ByteRange> range) {
  Request request{.op = "GetObject",
                  .method = "GET",
                  .bucket = std::string(bucket),
                  .key = std::string(key),
                  .object_reply = true};
  if (range) {
    request.headers.emplace_back(
        "range", range->length
                     ? fmt::format("bytes={}-{}", range->offset, range->offset + *range->length - 1)
                     : fmt::format("bytes={}-", range->offset));
  }
  return request;
}

Result<std::string> S3Client::GetObject(std::string_view bucket, std::string_view key,
                                        std::optional<ByteRange> range) const {
  if (range && range->length == 0u) return std::string();
  Request request = GetRequest(bucket, key, range);
  ASSIGN_OR_RETURN(Response response, Send(request));
  if (response.status / 100 != 2) return HttpError(request, response);
  // A server that ignores Range answers 200 with the whole object: cut it here.
  if (range && response.status == 200) {
    if (range->offset >= response.body.size()) return std::string();
    std::string part = response.body.substr(range->offset);
    if (range->length && *range->length < part.size()) part.resize(*range->length);
    return part;
  }
  return std::move(response.body);
}

Result<uint64_t> S3Client::GetObjectToFile(std::string_view bucket, std::string_view key,
                                           std::optional<ByteRange> range, int fd,
                                           uint64_t file_offset) const {
  if (range && range->length == 0u) return uint64_t{0};
  Request request = GetRequest(bucket, key, range);
  uint64_t seen = 0;     // bytes of this attempt's body
  uint64_t written = 0;  // of them, written (of a 200 to a range: the range's only)
  request.on_attempt = [&] { seen = written = 0; };
  request.on_body = [&](long status, std::string_view bytes) -> Status {
    // A server that ignores Range answers 200 with the whole object: skip to the range,
    // cut after it.
    if (range && status == 200) {
      const uint64_t skip =
          std::min<uint64_t>(range->offset - std::min(range->offset, seen), bytes.size());
      seen += bytes.size();
      bytes.remove_prefix(skip);
      if (range->length) {
        bytes = bytes.substr(
            0,
            std::min<uint64_t>(bytes.size(), *range->length - std::min(*range->length, written)));
      }
    }
    while (!bytes.empty()) {
      ssize_t n =
          ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(file_offset + written));
      if (n < 0) {
        if (errno == EINTR) continue;
        return InternalError("S3 GetObject {}: writing the object to a file: {}",
                             ObjectName(bucket, key), std::strerror(errno));
      }
      bytes.remove_prefix(static_cast<size_t>(n));
      written += static_cast<uint64_t>(n);
    }
    return Status::OK();
  };
  ASSIGN_OR_RETURN(Response response, Send(request));
  if (response.status / 100 != 2) return HttpError(request, response);
  return written;
}

Result<ObjectInfo> S3Client::HeadObject(std::string_view bucket, std::string_view key) const {
  Request request{
      .op = "HeadObject", .method = "HEAD", .bucket = std::string(bucket), .key = std::string(key)};
  ASSIGN_OR_RETURN(Response response, Send(request));
  if (response.status / 100 != 2) return HttpError(request, response);
  ObjectInfo info;
  info.etag = std::string(response.Header("etag"));
  std::string_view length = response.Header("content-length");
  auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), info.size);
  if (length.empty() || ec != std::errc() || end != length.data() + length.size()) {
    return CorruptionError("S3 HeadObject {}: bad Content-Length '{}'", ObjectName(bucket, key),
                           length);
  }
  return info;
}

Status S3Client::DeleteObject(std::string_view bucket, std::string_view key) const {
  Request request{.op = "DeleteObject",
                  .method = "DELETE",
                  .bucket = std::string(bucket),
                  .key = std::string(key)};
  ASSIGN_OR_RETURN(Response response, Send(request));
  if (response.status / 100 != 2) return HttpError(request, response);
  return Status::OK();
}

Result<ListObjectsPage> S3Client::ListObjectsV2(std::string_view bucket, std::string_view prefix,
                                                std::string_view continuation_token,
                                                std::string_view delimiter) const {
  Request request{.op = "ListObjectsV2", .method = "GET", .bucket = std::string(bucket)};
  request.query.emplace_back("list-type", "2");
  request.query.emplace_back("prefix", std::string(prefix));
  if (!continuation_token.empty()) {
    request.query.emplace_back("continuation-token", std::string(continuation_token));
  }
  if (!delimiter.empty()) request.query.emplace_back("delimiter", std::string(delimiter));
  ASSIGN_OR_RETURN(Response response, Send(request));
  if (response.status / 100 != 2) return HttpError(request, response);
  Result<ListObjectsPage> page = ParseListObjectsV2(response.body);
  if (!page.ok()) return page.status().WithContext(fmt::format("S3 ListObjectsV2 {}", bucket));
  return page;
}

Result<std::string> S3Client::CreateMultipartUpload(std::string_view bucket,
                                                    std::string_view key) const {
  Request request{.op = "CreateMultipartUpload",
                  .method = "POST",
                  .bucket = std::string(bucket),
                  .key = std::string(key)};
  request.query.emplace_back("uploads", "");
  ASSIGN_OR_RETURN(Response response, Send(request));
  if (response.status / 100 != 2) return HttpError(request, response);
  return ParseInitiateMultipartUpload(response.body);
}

Result<std::string> S3Client::UploadPart(std::string_view bucket, std::string_view key,
                                         std::string_view upload_id, int part_number,
                                         std::string_view body) const {
  if (part_number < 1 || part_number > 10000) {
    return InvalidArgumentError("S3 UploadPart {}: part number {} is outside 1..10000",
                                ObjectName(bucket, key), part_number);
  }
  Request request{.op = "UploadPart",
                  .method = "PUT",
                  .bucket = std::string(bucket),
                  .key = std::string(key),
                  .body = body};
  request.query.emplace_back("partNumber", std::to_string(part_number));
  request.query.emplace_back("uploadId", std::string(upload_id));
  ASSIGN_OR_RETURN(Response response, Send(request));
  if (response.status / 100 != 2) return HttpError(request, response);
  return std::string(response.Header("etag"));
}

Result<std::string> S3Client::CompleteMultipartUpload(
    std::string_view bucket, std::string_view key, std::string_view upload_id,
    const std::vector<CompletedPart>& parts) const {
  std::string body = "<CompleteMultipartUpload>";
  for (const CompletedPart& part : parts) {
    body += fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", part.part_number,
                        XmlEscape(part.etag));
  }
  body += "</CompleteMultipartUpload>";
  Request request{.op = "CompleteMultipartUpload",
                  .method = "POST",
                  .bucket = std::string(bucket),
                  .key = std::string(key),
                  .body = body};
  request.query.emplace_back("uploadId", std::string(upload_id));
  request.headers.emplace_back("content-type", "application/xml");
  ASSIGN_OR_RETURN(Response response, Send(request));
  if (response.status / 100 != 2) return HttpError(request, response);
  return ParseCompleteMultipartUpload(response.body);
}

Status S3Client::AbortMultipartUpload(std::string_view bucket, std::string_view key,
                                      std::string_view upload_id) const {
  Request request{.op = "AbortMultipartUpload",
                  .method = "DELETE",
                  .bucket = std::string(bucket),
                  .key = std::string(key)};
  request.query.emplace_back("uploadId", std::string(upload_id));
  ASSIGN_OR_RETURN(Response response, Send(request));
  if (response.status / 100 != 2) return HttpError(request, response);
  return Status::OK();
}

Status ProbeConditionalCreate(const S3Client& client, std::string_view bucket,
                              std::string_view prefix) {
  // A name of its own, so probes of two writers at once do not meet.
  std::random_device random;
  const std::string key = fmt::format("{}.sluice-probe-{:08x}{:08x}", prefix, random(), random());
  PutOptions create;
  create.if_none_match_star = true;
  // The key is this probe's own: a first create refused as existing is the probe's own
  // attempt, whose reply was lost and which the client retried.
  if (Result<std::string> first = client.PutObject(bucket, key, "first", create);
      !first.ok() && first.status().code() != StatusCode::kAlreadyExists) {
    return first.status();
  }
  Result<std::string> second = client.PutObject(bucket, key, "second", create);
  Status removed = client.DeleteObject(bucket, key);
  if (second.ok()) {
    return FailedPreconditionError(
        "the S3 store at {} does not honour conditional PUTs (If-None-Match: *): a second "
        "create of {}/{} succeeded, so two writers could both commit a table there",
        client.options().endpoint, bucket, key);
  }
  if (second.status().code() != StatusCode::kAlreadyExists) return second.status();
  return removed;
}

}  // namespace sluice::s3
