// etcd v3's JSON gateway (grpc-gateway in front of the gRPC API): the request bodies the
// client sends and the parsers of every response, kept apart from the HTTP code so that
// each parser is a plain function of bytes, tested with malformed input and fuzzed
// (fuzz/etcd_json_fuzz.cc).
//
// The gateway's traits, each handled here:
// - keys and values are base64 (standard alphabet, padded); a field that does not decode
//   is an error, never passed on as text;
// - 64-bit integers are JSON strings ("revision":"42"); numbers are accepted too, anything
//   outside int64 (uint64 for cluster and member ids) is an error;
// - proto3 leaves out fields that hold their default: a missing `succeeded` is false,
//   `kvs` empty, `count` 0, an event without `type` a PUT, a missing `TTL` 0 (a lease gone);
// - errors are an object `{"error": "...", "message": "...", "code": N}` (N a gRPC code),
//   or `{"error": {"grpc_code": N, "message": "..."}}` inside a stream; a streamed message
//   is wrapped as `{"result": {...}}`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cluster/etcd_types.h"

namespace sluice::cluster {

// ---- request bodies (every int64 as a JSON string, as the gateway prints them)

std::string EncodeRangeRequest(const RangeRequest& r);
std::string EncodePutRequest(const PutRequest& r);
std::string EncodeDeleteRequest(const DeleteRequest& r);
std::string EncodeTxnRequest(const TxnRequest& r);
std::string EncodeLeaseGrantRequest(int64_t ttl_s);
// /v3/lease/keepalive and /v3/lease/revoke: {"ID": "<id>"}.
std::string EncodeLeaseIdRequest(int64_t lease_id);
std::string EncodeCompactionRequest(int64_t revision, bool physical);

struct WatchCreate {
  std::string key;
  std::string range_end;       // as RangeRequest's
  int64_t start_revision = 0;  // 0: from the revision after the current one
  bool prev_kv = false;
  bool progress_notify = false;  // ask etcd for empty responses while nothing changes
};
std::string EncodeWatchCreateRequest(const WatchCreate& w);

// ---- responses. An etcd error object becomes its Status (EtcdErrorStatus); anything
// that is not what the gateway sends is InvalidArgument naming the field.

Result<RangeResponse> ParseRangeResponse(std::string_view body);
Result<PutResponse> ParsePutResponse(std::string_view body);
Result<DeleteResponse> ParseDeleteResponse(std::string_view body);
Result<TxnResponse> ParseTxnResponse(std::string_view body);
Result<LeaseGrantResponse> ParseLeaseGrantResponse(std::string_view body);
Result<LeaseKeepAliveResponse> ParseLeaseKeepAliveResponse(std::string_view body);
Result<LeaseRevokeResponse> ParseLeaseRevokeResponse(std::string_view body);
Result<StatusResponse> ParseStatusResponse(std::string_view body);
// Any response that is only a header (compaction, and the error check of the others).
Result<ResponseHeader> ParseHeaderResponse(std::string_view body);
// One message of /v3/watch's stream.
Result<WatchResponse> ParseWatchResponse(std::string_view body);

// The Status for an etcd error: the gRPC code mapped to a StatusCode (NotFound for
// "lease not found", OutOfRange for a compacted revision, IOError for Unavailable and
// DeadlineExceeded, ...), the message prefixed with "etcd: " and ended with the code.
Status EtcdErrorStatus(int grpc_code, std::string_view message);

// gRPC codes the client looks at.
inline constexpr int kGrpcInvalidArgument = 3;
inline constexpr int kGrpcDeadlineExceeded = 4;
inline constexpr int kGrpcNotFound = 5;
inline constexpr int kGrpcFailedPrecondition = 9;
inline constexpr int kGrpcOutOfRange = 11;
inline constexpr int kGrpcUnavailable = 14;

// Cuts a byte stream of concatenated JSON objects (the watch stream: one per line, but
// chunk boundaries fall anywhere) into whole objects, by tracking bracket depth outside
// strings; the objects themselves are parsed later. Not thread-safe: owned by the reader of
// one stream.
class JsonObjectSplitter {
 public:
  explicit JsonObjectSplitter(size_t max_object_bytes) : max_object_bytes_(max_object_bytes) {}

  // Appends `bytes` and moves every object now complete to `objects`. Bytes between
  // objects other than whitespace, or an object longer than the limit, are an error, after
  // which the splitter stays failed.
  Status Feed(std::string_view bytes, std::vector<std::string>* objects);
  // Bytes held of an object not yet complete.
  size_t pending() const { return buffer_.size(); }

 private:
  size_t max_object_bytes_;
  std::string buffer_;  // from the start of the incomplete object (or whitespace before it)
  size_t scanned_ = 0;  // buffer_[0, scanned_) has been scanned
  size_t object_start_ = 0;
  int depth_ = 0;  // 0: between objects
  bool in_string_ = false;
  bool escaped_ = false;
  Status failed_;
};

}  // namespace sluice::cluster
