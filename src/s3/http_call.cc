#include "s3/http_call.h"

#include <curl/curl.h>

#include <limits>
#include <memory>
#include <mutex>
#include <optional>

#include "base/strings.h"

namespace sluice::s3 {
namespace {

constexpr size_t kMaxHeaders = 1000;
constexpr long kGetBufferBytes = 1L << 20;  // CURLOPT_BUFFERSIZE of GETs

// curl_global_init is not thread-safe and must run once before any handle is made.
void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct BodySink {
  std::string* body;
  size_t limit;
  CURL* handle;
  const std::function<Status(long, std::string_view)>* on_body;
  long status = 0;
  bool too_large = false;
  std::optional<bool> streaming;  // decided at the first byte: a 2xx reply with on_body
  Status failed;                  // on_body's error
};

size_t AppendBody(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  if (!sink->streaming) {
    curl_easy_getinfo(sink->handle, CURLINFO_RESPONSE_CODE, &sink->status);
    sink->streaming = *sink->on_body && sink->status / 100 == 2;
  }
  if (*sink->streaming) {
    sink->failed = (*sink->on_body)(sink->status, std::string_view(data, size * count));
    return sink->failed.ok() ? size * count : 0;
  }
  if (sink->body->size() + size * count > sink->limit) {
    sink->too_large = true;
    return 0;  // curl stops with a write error
  }
  if (sink->body->empty()) {
    // The whole body at once: growing it by doubling copied each GET's bytes about twice
    // (memmove was a fifth of a cold S3 query's fetch).
    curl_off_t length = -1;
    if (curl_easy_getinfo(sink->handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK &&
        length > 0 && static_cast<uint64_t>(length) <= sink->limit &&
        static_cast<uint64_t>(length) <= (uint64_t{1} << 30)) {
      sink->body->reserve(static_cast<size_t>(length));
    }
  }
  sink->body->append(data, size * count);
  return size * count;
}

using Headers = std::vector<std::pair<std::string, std::string>>;

size_t AppendHeader(char* data, size_t size, size_t count, void* user) {
  auto* headers = static_cast<Headers*>(user);
  if (headers->size() >= kMaxHeaders) return 0;  // curl stops with a write error
  std::string_view line(data, size * count);
  // A new status line (after a 100 Continue, say) starts a new set of headers.
  if (line.starts_with("HTTP/")) {
    headers->clear();
  } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    headers->emplace_back(AsciiLower(Trim(line.substr(0, colon))),
                          std::string(Trim(line.substr(colon + 1))));
  }
  return size * count;
}

struct CurlDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

// Failures a retry may cure: the server was not reached, or the connection broke.
bool IsTransientCurlError(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string_view HttpReply::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (n == name) return v;
  }
  return {};
}

Result<HttpReply> HttpCall(const HttpCallRequest& request) {
  InitCurlOnce();
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) return InternalError("{}: curl_easy_init failed", request.what);
  curl_slist* list = nullptr;
  for (const std::string& line : request.headers) {
    curl_slist* next = curl_slist_append(list, line.c_str());
    if (next == nullptr) {
      curl_slist_free_all(list);
      return InternalError("{}: curl_slist_append failed", request.what);
    }
    list = next;
  }
  std::unique_ptr<curl_slist, SlistDeleter> header_list(list);

  HttpReply reply;
  const size_t limit =
      request.max_reply_bytes == 0 ? std::numeric_limits<size_t>::max() : request.max_reply_bytes;
  CURL* c = curl.get();
  BodySink sink{&reply.body, limit, c, &request.on_body};
  char error_buffer[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(request.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, AppendHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &reply.headers);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  if (request.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (request.method == "GET") {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    // Bodies of megabytes (segments, Parquet files): 1 MiB per read instead of curl's
    // 16 KiB, a sixty-fourth of the recv, poll and write calls per byte.
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, kGetBufferBytes);
  } else {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    if (request.method != "DELETE") {
      // The body is sent as it is, with a Content-Length.
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
    }
  }

  CURLcode code = curl_easy_perform(c);
  if (!sink.failed.ok()) return sink.failed;
  if (sink.too_large || reply.headers.size() >= kMaxHeaders) {
    return CorruptionError("{}: the reply is larger than sluice takes ({} bytes, {} headers)",
                           request.what, limit, kMaxHeaders);
  }
  if (code != CURLE_OK) {
    std::string detail = error_buffer[0] != 0 ? error_buffer : curl_easy_strerror(code);
    std::string message = fmt::format("{}: {} ({})", request.what, detail, static_cast<int>(code));
    if (IsTransientCurlError(code)) return Status(StatusCode::kIOError, std::move(message));
    return Status(StatusCode::kInternal, std::move(message));
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
  return reply;
}

}  // namespace sluice::s3
