// EtcdClient: sluice's client of etcd's v3 API through its JSON gateway (HTTP/1.1 POSTs
// to /v3/kv/..., /v3/lease/..., /v3/maintenance/status). Blocking calls returning Result;
// each response keeps etcd's header (cluster id, member id, revision, raft term). Watches
// and lease renewal run on threads of their own: watcher.h, lease_keeper.h.
//
//   ASSIGN_OR_RETURN(auto etcd, EtcdClient::Create({.endpoints = {"http://127.0.0.1:2379"}}));
//   ASSIGN_OR_RETURN(TxnResponse r, etcd->Txn({
//       .compares = {Compare::Version("/sluice/controller", CompareResult::kEqual, 0)},
//       .success = {TxnOp::Put("/sluice/controller", "1", lease)}}));
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cluster/etcd_http.h"
#include "cluster/etcd_types.h"

namespace sluice::cluster {

struct EtcdOptions {
  std::vector<std::string> endpoints;  // "http://host:port", members of one cluster
  // One HTTP exchange with one member.
  int request_timeout_ms = 2000;
  int connect_timeout_ms = 500;
  // A whole call, failing over between members until it runs out.
  int call_timeout_ms = 10000;
  int retry_backoff_ms = 100;
};

struct GetResponse {
  ResponseHeader header;
  std::optional<KeyValue> kv;  // empty: no such key
};

// Thread-safe; lives as long as its owner (the broker's cluster layer), which may call it
// from any thread. Watcher and LeaseKeeper borrow it and must not outlive it.
//
// Failover: a call starts with the member that answered last; a connection failure or a
// 5xx moves it to the next member, round after round, until call_timeout_ms. Reads and
// lease calls are retried after any failure; writes (Put, Delete, Txn) only after one that
// proves etcd did not apply them (refused connection, "no leader"), otherwise the call
// fails with an IOError saying the outcome is unknown, and the caller re-reads.
class EtcdClient {
 public:
  static Result<std::unique_ptr<EtcdClient>> Create(EtcdOptions options);

  Result<GetResponse> Get(std::string_view key);
  Result<RangeResponse> Range(const RangeRequest& request);
  // Every key starting with `prefix`, sorted by key.
  Result<RangeResponse> RangePrefix(std::string_view prefix, int64_t limit = 0,
                                    int64_t revision = 0);

  Result<PutResponse> Put(const PutRequest& request);
  Result<PutResponse> Put(std::string_view key, std::string_view value, int64_t lease = 0);

  Result<DeleteResponse> Delete(const DeleteRequest& request);
  Result<DeleteResponse> Delete(std::string_view key);
  Result<DeleteResponse> DeletePrefix(std::string_view prefix);

  // The compares are checked and one branch runs, atomically. The responses are checked
  // against the branch that ran (one per operation, of its kind).
  Result<TxnResponse> Txn(const TxnRequest& request);

  // A lease of at least `ttl_s` seconds (etcd raises anything below its minimum).
  Result<LeaseGrantResponse> Grant(int64_t ttl_s);
  // One renewal (the gateway renews once per POST). ttl <= 0 in the answer: the lease is
  // gone (expired or revoked).
  Result<LeaseKeepAliveResponse> KeepAliveOnce(int64_t lease_id);
  // Revoking a lease that is already gone is not an error (NotFound becomes OK).
  Result<LeaseRevokeResponse> Revoke(int64_t lease_id);

  // /v3/maintenance/status of the member that answers (with failover), or of one member.
  Result<StatusResponse> Status();
  Result<StatusResponse> StatusOf(size_t endpoint);

  // Drops history before `revision` (watches from before it then report compaction).
  Result<ResponseHeader> Compact(int64_t revision, bool physical = false);

  const EtcdOptions& options() const { return options_; }
  // The etcd cluster id of the first answer (0 before any): every later answer must carry
  // the same, or the call fails with FailedPrecondition (endpoints of two clusters).
  uint64_t cluster_id() const { return cluster_id_.load(std::memory_order_relaxed); }

  const std::vector<EtcdEndpoint>& endpoints() const { return http_.endpoints(); }
  // The member the next call starts with (the one that answered last).
  size_t preferred_endpoint() const { return http_.preferred(); }

 private:
  EtcdClient(EtcdOptions options, std::vector<EtcdEndpoint> endpoints);
  ::sluice::Status CheckCluster(const ResponseHeader& h);
  template <typename T>
  Result<T> Checked(Result<T> r) {
    if (r.ok()) RETURN_IF_ERROR(CheckCluster(r->header));
    return r;
  }

  const EtcdOptions options_;
  EtcdHttp http_;
  std::atomic<uint64_t> cluster_id_{0};
};

// The HTTP timeouts of `options` (also what Watcher uses per connection).
EtcdHttpOptions HttpOptionsOf(const EtcdOptions& options);

}  // namespace sluice::cluster
