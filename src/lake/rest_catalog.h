// The Iceberg REST catalog of `sluice serve --warehouse DIR` (Iceberg's REST OpenAPI, the
// `/v1/...` routes): config, namespaces and tables over a warehouse directory that is
// itself the catalog store (docs/design/0009 #4, and its "REST catalog" section).
//
//   ASSIGN_OR_RETURN(auto catalog, RestCatalog::Open({.warehouse = "/lake"}));
//   HttpResponse r = catalog->Handle({.method = "GET", .path = "/v1/namespaces"});
//
// Requests and responses are plain values (no HTTP library types), so every route is
// unit-tested without a socket. `path` is the request target's path as sent, still
// percent-encoded: a multi-level namespace is its parts joined by %1F, and a part may
// itself contain an encoded '/'. Query values arrive decoded.
//
// Thread safety: Handle() may be called from many threads at once (the HTTP server's
// pool). Table commits are compare-and-swap on the file system (TableFiles::CommitVersion)
// and so are safe against other threads and other processes; namespace property updates
// are serialized by a mutex within this process only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/http_server.h"
#include "base/status.h"

namespace sluice::lake {

class RestCatalog {
 public:
  struct Options {
    std::string warehouse;            // a local directory (or file:// URI); created if missing
    std::function<int64_t()> now_ms;  // default: the system clock
    // Tests: runs in a commit between reading the base version and linking the next one
    // (where a concurrent writer can win the race).
    std::function<void()> before_commit;
  };

  static Result<std::unique_ptr<RestCatalog>> Open(Options options);

  // One request of the REST API; `path` starts with "/v1/". Never throws; every failure
  // is an ErrorModel body ({"error": {"message", "type", "code"}}) with its status.
  HttpResponse Handle(const HttpRequest& request) const;

  const std::string& warehouse() const { return warehouse_; }

 private:
  explicit RestCatalog(Options options, std::string warehouse)
      : options_(std::move(options)), warehouse_(std::move(warehouse)) {}

  Options options_;
  std::string warehouse_;  // absolute, without a trailing '/'
  // Guards the read-modify-write of a namespace's .namespace.json (properties updates and
  // create); tables need no lock (their commits are exclusive creates).
  mutable std::mutex namespace_mu_;
};

// "a%1Fb" -> {"a", "b"} after percent-decoding; InvalidArgument for bad escapes.
Result<std::vector<std::string>> DecodeNamespace(std::string_view encoded);
// Percent-decoding of one path segment ('+' stays '+').
Result<std::string> PercentDecode(std::string_view text);

}  // namespace sluice::lake
