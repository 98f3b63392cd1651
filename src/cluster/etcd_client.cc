// EtcdClient: unary calls of etcd's v3 JSON gateway; see etcd_client.h.
#include "cluster/etcd_client.h"

#include "cluster/etcd_json.h"

namespace sluice::cluster {
namespace {

using Retry = EtcdHttp::Retry;

// The branch's responses must match its operations one for one.
Status CheckTxnResponses(const std::vector<TxnOp>& ops, const TxnResponse& r) {
  if (r.responses.size() != ops.size()) {
    return InvalidArgumentError("etcd txn response: {} responses to {} operations",
                                r.responses.size(), ops.size());
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].request.index() != r.responses[i].index()) {
      return InvalidArgumentError("etcd txn response: response {} is not of its operation's kind",
                                  i);
    }
  }
  return Status::OK();
}

}  // namespace

EtcdHttpOptions HttpOptionsOf(const EtcdOptions& o) {
  using std::chrono::milliseconds;
  return EtcdHttpOptions{.request_timeout = milliseconds(o.request_timeout_ms),
                         .connect_timeout = milliseconds(o.connect_timeout_ms),
                         .call_timeout = milliseconds(o.call_timeout_ms),
                         .retry_backoff = milliseconds(o.retry_backoff_ms)};
}

Result<std::unique_ptr<EtcdClient>> EtcdClient::Create(EtcdOptions options) {
  if (options.endpoints.empty()) return InvalidArgumentError("etcd: no endpoints");
  if (options.request_timeout_ms <= 0 || options.connect_timeout_ms <= 0 ||
      options.call_timeout_ms <= 0 || options.retry_backoff_ms < 0) {
    return InvalidArgumentError("etcd: timeouts must be positive");
  }
  std::vector<EtcdEndpoint> endpoints;
  for (const std::string& url : options.endpoints) {
    ASSIGN_OR_RETURN(EtcdEndpoint e, ParseEtcdEndpoint(url));
    endpoints.push_back(std::move(e));
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(options), std::move(endpoints)));
}

EtcdClient::EtcdClient(EtcdOptions options, std::vector<EtcdEndpoint> endpoints)
    : options_(std::move(options)), http_(std::move(endpoints), HttpOptionsOf(options_)) {}

Result<GetResponse> EtcdClient::Get(std::string_view key) {
  ASSIGN_OR_RETURN(RangeResponse r, Range(RangeRequest{.key = std::string(key)}));
  if (r.kvs.size() > 1) {
    return InvalidArgumentError("etcd range response: {} keys for one key", r.kvs.size());
  }
  GetResponse g{r.header, std::nullopt};
  if (!r.kvs.empty()) g.kv = std::move(r.kvs.front());
  return g;
}

Result<RangeResponse> EtcdClient::Range(const RangeRequest& request) {
  ASSIGN_OR_RETURN(std::string body,
                   http_.Post("/v3/kv/range", EncodeRangeRequest(request), Retry::kAlways));
  return Checked(ParseRangeResponse(body));
}

Result<RangeResponse> EtcdClient::RangePrefix(std::string_view prefix, int64_t limit,
                                              int64_t revision) {
  return Range(RangeRequest{.key = std::string(prefix),
                            .range_end = PrefixRangeEnd(prefix),
                            .limit = limit,
                            .revision = revision});
}

Result<PutResponse> EtcdClient::Put(const PutRequest& request) {
  ASSIGN_OR_RETURN(std::string body,
                   http_.Post("/v3/kv/put", EncodePutRequest(request), Retry::kIfNotSent));
  return Checked(ParsePutResponse(body));
}

Result<PutResponse> EtcdClient::Put(std::string_view key, std::string_view value, int64_t lease) {
  return Put(PutRequest{.key = std::string(key), .value = std::string(value), .lease = lease});
}

Result<DeleteResponse> EtcdClient::Delete(const DeleteRequest& request) {
  ASSIGN_OR_RETURN(std::string body, http_.Post("/v3/kv/deleterange", EncodeDeleteRequest(request),
                                                Retry::kIfNotSent));
  return Checked(ParseDeleteResponse(body));
}

Result<DeleteResponse> EtcdClient::Delete(std::string_view key) {
  return Delete(DeleteRequest{.key = std::string(key)});
}

Result<DeleteResponse> EtcdClient::DeletePrefix(std::string_view prefix) {
  return Delete(DeleteRequest{.key = std::string(prefix), .range_end = PrefixRangeEnd(prefix)});
}

Result<TxnResponse> EtcdClient::Txn(const TxnRequest& request) {
  ASSIGN_OR_RETURN(std::string body,
                   http_.Post("/v3/kv/txn", EncodeTxnRequest(request), Retry::kIfNotSent));
  ASSIGN_OR_RETURN(TxnResponse r, Checked(ParseTxnResponse(body)));
  RETURN_IF_ERROR(CheckTxnResponses(r.succeeded ? request.success : request.failure, r));
  return r;
}

Result<LeaseGrantResponse> EtcdClient::Grant(int64_t ttl_s) {
  if (ttl_s <= 0) return InvalidArgumentError("etcd: a lease TTL must be positive, not {}", ttl_s);
  // A grant repeated after a lost answer leaves a lease nobody renews: it expires.
  ASSIGN_OR_RETURN(std::string body,
                   http_.Post("/v3/lease/grant", EncodeLeaseGrantRequest(ttl_s), Retry::kAlways));
  return Checked(ParseLeaseGrantResponse(body));
}

Result<LeaseKeepAliveResponse> EtcdClient::KeepAliveOnce(int64_t lease_id) {
  ASSIGN_OR_RETURN(std::string body, http_.Post("/v3/lease/keepalive",
                                                EncodeLeaseIdRequest(lease_id), Retry::kAlways));
  ASSIGN_OR_RETURN(LeaseKeepAliveResponse r, Checked(ParseLeaseKeepAliveResponse(body)));
  if (r.id != 0 && r.id != lease_id) {
    return InvalidArgumentError("etcd lease keepalive response: lease {} for {}", r.id, lease_id);
  }
  return r;
}

Result<LeaseRevokeResponse> EtcdClient::Revoke(int64_t lease_id) {
  ASSIGN_OR_RETURN(std::string body,
                   http_.Post("/v3/lease/revoke", EncodeLeaseIdRequest(lease_id), Retry::kAlways));
  auto r = Checked(ParseLeaseRevokeResponse(body));
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) return LeaseRevokeResponse{};
  return r;
}

Result<StatusResponse> EtcdClient::Status() {
  ASSIGN_OR_RETURN(std::string body, http_.Post("/v3/maintenance/status", "{}", Retry::kAlways));
  return Checked(ParseStatusResponse(body));
}

Result<StatusResponse> EtcdClient::StatusOf(size_t endpoint) {
  ASSIGN_OR_RETURN(std::string body, http_.PostTo(endpoint, "/v3/maintenance/status", "{}"));
  return Checked(ParseStatusResponse(body));
}

Result<ResponseHeader> EtcdClient::Compact(int64_t revision, bool physical) {
  ASSIGN_OR_RETURN(
      std::string body,
      http_.Post("/v3/kv/compaction", EncodeCompactionRequest(revision, physical), Retry::kAlways));
  ASSIGN_OR_RETURN(ResponseHeader h, ParseHeaderResponse(body));
  RETURN_IF_ERROR(CheckCluster(h));
  return h;
}

::sluice::Status EtcdClient::CheckCluster(const ResponseHeader& h) {
  if (h.cluster_id == 0) return ::sluice::Status::OK();
  uint64_t expected = 0;
  if (cluster_id_.compare_exchange_strong(expected, h.cluster_id) || expected == h.cluster_id) {
    return ::sluice::Status::OK();
  }
  return FailedPreconditionError(
      "etcd member {:x} answered for cluster {:x}, but this client's members are of cluster {:x}: "
      "the endpoints name members of two clusters",
      h.member_id, h.cluster_id, expected);
}

}  // namespace sluice::cluster
