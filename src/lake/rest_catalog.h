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
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/http_server.h"
#include "base/status.h"
#include "base/strings.h"  // PercentDecode

namespace sluice::lake {

// Who may do what to the catalog's namespaces and tables (docs/design/0020): asked with
// the principal the HTTP port's login gave the request ("" without one). Thread-safe.
class CatalogAccess {
 public:
  virtual ~CatalogAccess() = default;
  // The principal may do everything (a superuser); the other questions are not asked.
  virtual bool Everything(const std::string& principal) const = 0;
  // Listed and loaded: it holds, or lies under, something the principal may use.
  virtual bool SeeNamespace(const std::string& principal,
                            const std::vector<std::string>& ns) const = 0;
  virtual bool ReadTable(const std::string& principal, const std::vector<std::string>& ns,
                         const std::string& table) const = 0;
  // Commits (table updates).
  virtual bool WriteTable(const std::string& principal, const std::vector<std::string>& ns,
                          const std::string& table) const = 0;
  // Creating, dropping, registering and renaming tables and namespaces in `ns`, and
  // setting its properties.
  virtual bool CreateIn(const std::string& principal, const std::vector<std::string>& ns) const = 0;
};

class WarehouseFs;  // rest_catalog.cc

class RestCatalog {
 public:
  struct Options {
    // A local directory (or file:// URI), created if missing; or s3://bucket/prefix.
    std::string warehouse;
    std::function<int64_t()> now_ms;  // default: the system clock
    // Tests: runs in a commit between reading the base version and linking the next one
    // (where a concurrent writer can win the race).
    std::function<void()> before_commit;
    // Null: everyone may do everything. Refusals are 403 ForbiddenException (401
    // NotAuthorizedException for a request without a principal).
    std::shared_ptr<const CatalogAccess> access;
    // Credentials handed to clients that ask for them (X-Iceberg-Access-Delegation:
    // vended-credentials) in a LoadTableResult's config, for tables on S3: Iceberg's
    // S3FileIO keys (s3.access-key-id, ...). Null: never vended (the default).
    std::function<std::map<std::string, std::string>()> vended_credentials;
  };

  static Result<std::unique_ptr<RestCatalog>> Open(Options options);
  ~RestCatalog();

  // One request of the REST API; `path` starts with "/v1/". Never throws; every failure
  // is an ErrorModel body ({"error": {"message", "type", "code"}}) with its status.
  HttpResponse Handle(const HttpRequest& request) const;

  const std::string& warehouse() const { return warehouse_; }
  // Options::access, set once before the first request (what decides it may open later).
  void SetAccess(std::shared_ptr<const CatalogAccess> access) {
    options_.access = std::move(access);
  }

 private:
  RestCatalog(Options options, std::string warehouse);

  Options options_;
  std::string warehouse_;  // absolute, without a trailing '/'
  // Guards the read-modify-write of a namespace's .namespace.json (properties updates and
  // create); tables need no lock (their commits are exclusive creates).
  mutable std::mutex namespace_mu_;
  std::unique_ptr<WarehouseFs> fs_;
};

// "a%1Fb" -> {"a", "b"} after percent-decoding; InvalidArgument for bad escapes.
Result<std::vector<std::string>> DecodeNamespace(std::string_view encoded);

}  // namespace sluice::lake
