// The etcd v3 API's messages as sluice sees them (etcdserverpb's KeyValue, RangeRequest,
// TxnRequest, WatchResponse, ...), decoupled from how they travel: etcd_json.h turns them
// into the JSON gateway's bodies and back. Keys and values are raw bytes here; the base64
// of the gateway never leaves etcd_json.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace sluice::cluster {

// Every etcd response carries one. cluster_id and member_id are uint64 in etcd (often
// above INT64_MAX); revision is the store's revision when the request was served.
struct ResponseHeader {
  uint64_t cluster_id = 0;
  uint64_t member_id = 0;
  int64_t revision = 0;
  uint64_t raft_term = 0;
  bool operator==(const ResponseHeader&) const = default;
};

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;  // 0 only for a deleted key (in a DELETE watch event)
  int64_t lease = 0;    // 0: no lease
  bool operator==(const KeyValue&) const = default;
};

// The range_end that makes [prefix, range_end) cover every key starting with `prefix`
// (etcd's GetPrefixRangeEnd): the prefix with its last byte below 0xff incremented and the
// rest dropped; "\0" (every key) when the prefix is empty or all 0xff.
std::string PrefixRangeEnd(std::string_view prefix);

struct RangeRequest {
  std::string key;
  std::string range_end;  // empty: the single key; "\0": every key >= key
  int64_t limit = 0;      // 0: no limit
  int64_t revision = 0;   // 0: the newest; otherwise a point-in-time read
  bool keys_only = false;
  bool count_only = false;
  bool newest_first = false;  // sorted by mod_revision, the newest change first
};

struct RangeResponse {
  ResponseHeader header;
  std::vector<KeyValue> kvs;
  bool more = false;  // a limit cut the answer short
  int64_t count = 0;  // keys in the range, whatever the limit
};

struct PutRequest {
  std::string key;
  std::string value;
  int64_t lease = 0;
  bool prev_kv = false;
};

struct PutResponse {
  ResponseHeader header;
  std::optional<KeyValue> prev_kv;  // when asked for and the key existed
};

struct DeleteRequest {
  std::string key;
  std::string range_end;  // as RangeRequest's
  bool prev_kv = false;
};

struct DeleteResponse {
  ResponseHeader header;
  int64_t deleted = 0;
  std::vector<KeyValue> prev_kvs;
};

enum class CompareTarget { kVersion, kCreate, kMod, kValue, kLease };
enum class CompareResult { kEqual, kGreater, kLess, kNotEqual };

// One condition of a transaction: `target(key) result operand`. A key that does not exist
// has version, create and mod revision 0 and lease 0 (so "does not exist" is Version == 0).
struct Compare {
  std::string key;
  std::string range_end;  // empty: the single key; otherwise every key of the range
  CompareTarget target = CompareTarget::kVersion;
  CompareResult result = CompareResult::kEqual;
  int64_t number = 0;  // for every target but kValue
  std::string value;   // for kValue

  static Compare Version(std::string key, CompareResult r, int64_t version);
  static Compare CreateRevision(std::string key, CompareResult r, int64_t revision);
  static Compare ModRevision(std::string key, CompareResult r, int64_t revision);
  static Compare Value(std::string key, CompareResult r, std::string value);
  static Compare Lease(std::string key, CompareResult r, int64_t lease);
};

// One operation of a transaction's success or failure branch.
struct TxnOp {
  std::variant<RangeRequest, PutRequest, DeleteRequest> request;

  static TxnOp Get(std::string key);
  static TxnOp Range(RangeRequest r);
  static TxnOp Put(std::string key, std::string value, int64_t lease = 0);
  static TxnOp Put(PutRequest r);
  static TxnOp Delete(std::string key);
  static TxnOp Delete(DeleteRequest r);
};

struct TxnRequest {
  std::vector<Compare> compares;
  std::vector<TxnOp> success;
  std::vector<TxnOp> failure;
};

// One per operation of the branch that ran, in order; the variant's alternative matches
// the operation's.
using TxnOpResponse = std::variant<RangeResponse, PutResponse, DeleteResponse>;

struct TxnResponse {
  ResponseHeader header;
  bool succeeded = false;  // every compare held: the success branch ran
  std::vector<TxnOpResponse> responses;
};

struct LeaseGrantResponse {
  ResponseHeader header;
  int64_t id = 0;
  int64_t ttl = 0;  // seconds, as granted (etcd raises a TTL below its minimum)
};

struct LeaseKeepAliveResponse {
  ResponseHeader header;
  int64_t id = 0;
  int64_t ttl = 0;  // seconds left after the renewal; <= 0: the lease is gone
};

struct LeaseRevokeResponse {
  ResponseHeader header;
};

// /v3/maintenance/status of the member that answered.
struct StatusResponse {
  ResponseHeader header;
  std::string version;
  int64_t db_size = 0;
  uint64_t leader = 0;  // member id of the raft leader; 0: none known
  int64_t raft_index = 0;
  uint64_t raft_term = 0;
  int64_t raft_applied_index = 0;
  std::vector<std::string> errors;
};

enum class EventType { kPut, kDelete };

struct WatchEvent {
  EventType type = EventType::kPut;
  KeyValue kv;                      // for kDelete: the key and the deletion's mod_revision
  std::optional<KeyValue> prev_kv;  // when the watch asked for it and the key existed
};

// One message of a watch stream.
struct WatchResponse {
  ResponseHeader header;
  int64_t watch_id = 0;
  bool created = false;
  bool canceled = false;
  int64_t compact_revision = 0;  // > 0: the start revision was compacted away
  std::string cancel_reason;
  bool fragment = false;
  std::vector<WatchEvent> events;
};

}  // namespace sluice::cluster
