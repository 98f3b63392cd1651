// One HTTP exchange over libcurl: the transport under the S3 client and the Iceberg REST
// catalog client (lake/rest_client.h). No retries here (each caller knows which of its
// requests may be repeated); replies are bounded.
//
//   ASSIGN_OR_RETURN(HttpReply r, HttpCall({.method = "GET", .url =
//   "http://127.0.0.1:8181/v1/config",
//                                           .what = "REST GET /v1/config"}));
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace sluice::s3 {

struct HttpCallRequest {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string url;
  std::vector<std::string> headers;  // "name: value" lines, sent as they are
  std::string_view body;             // sent with a Content-Length (not for GET/HEAD/DELETE)
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds timeout{60000};
  // Replies longer than this are refused (Corruption); 0: no bound (an object's bytes).
  size_t max_reply_bytes = 16u << 20;
  std::string what;  // "S3 GetObject b/k": the start of every error message
  // When set, a 2xx reply's body is handed here (with the status) as it arrives instead of
  // being kept in HttpReply::body (an error reply's body is still kept). An error it
  // returns stops the exchange and is returned.
  std::function<Status(long status, std::string_view bytes)> on_body;
};

struct HttpReply {
  long status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // lowercase names, trimmed values

  std::string_view Header(std::string_view name) const;
};

// Performs the request. A reply is returned whatever its HTTP status. Errors: IOError when
// the exchange failed in a way a retry may cure (not reached, timed out, the connection
// broke: the server may or may not have acted), Internal for other transport failures,
// Corruption for a reply past the bounds (or more than 1,000 header lines).
Result<HttpReply> HttpCall(const HttpCallRequest& request);

}  // namespace sluice::s3
