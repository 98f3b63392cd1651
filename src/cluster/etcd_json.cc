// Request bodies and response parsers of etcd v3's JSON gateway; see etcd_json.h.
#include "cluster/etcd_json.h"

#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/base64.h"

namespace sluice::cluster {
namespace {

using Json = nlohmann::json;

std::string Int(int64_t v) { return std::to_string(v); }

// ---------------------------------------------------------------- encoding

Json RangeJson(const RangeRequest& r) {
  Json j = {{"key", Base64Encode(r.key)}};
  if (!r.range_end.empty()) j["range_end"] = Base64Encode(r.range_end);
  if (r.limit != 0) j["limit"] = Int(r.limit);
  if (r.revision != 0) j["revision"] = Int(r.revision);
  if (r.keys_only) j["keys_only"] = true;
  if (r.count_only) j["count_only"] = true;
  if (r.newest_first) {
    j["sort_order"] = "DESCEND";
    j["sort_target"] = "MOD";
  }
  return j;
}

Json PutJson(const PutRequest& r) {
  Json j = {{"key", Base64Encode(r.key)}, {"value", Base64Encode(r.value)}};
  if (r.lease != 0) j["lease"] = Int(r.lease);
  if (r.prev_kv) j["prev_kv"] = true;
  return j;
}

Json DeleteJson(const DeleteRequest& r) {
  Json j = {{"key", Base64Encode(r.key)}};
  if (!r.range_end.empty()) j["range_end"] = Base64Encode(r.range_end);
  if (r.prev_kv) j["prev_kv"] = true;
  return j;
}

const char* CompareResultName(CompareResult r) {
  switch (r) {
    case CompareResult::kEqual:
      return "EQUAL";
    case CompareResult::kGreater:
      return "GREATER";
    case CompareResult::kLess:
      return "LESS";
    case CompareResult::kNotEqual:
      return "NOT_EQUAL";
  }
  return "EQUAL";
}

Json CompareJson(const Compare& c) {
  Json j = {{"key", Base64Encode(c.key)}, {"result", CompareResultName(c.result)}};
  if (!c.range_end.empty()) j["range_end"] = Base64Encode(c.range_end);
  switch (c.target) {
    case CompareTarget::kVersion:
      j["target"] = "VERSION";
      j["version"] = Int(c.number);
      break;
    case CompareTarget::kCreate:
      j["target"] = "CREATE";
      j["create_revision"] = Int(c.number);
      break;
    case CompareTarget::kMod:
      j["target"] = "MOD";
      j["mod_revision"] = Int(c.number);
      break;
    case CompareTarget::kValue:
      j["target"] = "VALUE";
      j["value"] = Base64Encode(c.value);
      break;
    case CompareTarget::kLease:
      j["target"] = "LEASE";
      j["lease"] = Int(c.number);
      break;
  }
  return j;
}

Json OpJson(const TxnOp& op) {
  if (auto* r = std::get_if<RangeRequest>(&op.request)) return {{"request_range", RangeJson(*r)}};
  if (auto* p = std::get_if<PutRequest>(&op.request)) return {{"request_put", PutJson(*p)}};
  return {{"request_delete_range", DeleteJson(std::get<DeleteRequest>(op.request))}};
}

// ---------------------------------------------------------------- decoding

// A parse error: InvalidArgument naming the response and the field.
template <typename... Args>
Status Bad(std::string_view what, fmt::format_string<Args...> f, Args&&... args) {
  return InvalidArgumentError("etcd {} response: {}", what,
                              fmt::format(f, std::forward<Args>(args)...));
}

// int64 or uint64 from a JSON string of digits (the gateway's form) or a JSON integer.
template <typename T>
Result<T> Integer(const Json& obj, const char* name, std::string_view what) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return T{0};
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    T v{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
      return Bad(what, "field '{}': \"{:.40}\" is not a {}-bit integer", name, s,
                 std::is_signed_v<T> ? "signed 64" : "unsigned 64");
    }
    return v;
  }
  if (it->is_number_unsigned()) {
    uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      return Bad(what, "field '{}': {} is out of range", name, u);
    }
    return static_cast<T>(u);
  }
  if (it->is_number_integer()) {
    int64_t i = it->get<int64_t>();
    if (std::is_unsigned_v<T> && i < 0) return Bad(what, "field '{}': {} is negative", name, i);
    return static_cast<T>(i);
  }
  return Bad(what, "field '{}' is a {}, not an integer", name, it->type_name());
}

Result<bool> Bool(const Json& obj, const char* name, std::string_view what) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return false;
  if (!it->is_boolean())
    return Bad(what, "field '{}' is a {}, not a boolean", name, it->type_name());
  return it->get<bool>();
}

Result<std::string> Text(const Json& obj, const char* name, std::string_view what) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Bad(what, "field '{}' is a {}, not a string", name, it->type_name());
  return it->get<std::string>();
}

Result<std::string> Bytes(const Json& obj, const char* name, std::string_view what) {
  ASSIGN_OR_RETURN(std::string text, Text(obj, name, what));
  auto bytes = Base64Decode(text);
  if (!bytes.ok()) return Bad(what, "field '{}': {}", name, bytes.status().message());
  return std::move(bytes).value();
}

// The member `name` if it is an object, nullptr if absent; an error for any other type.
Result<const Json*> Object(const Json& obj, const char* name, std::string_view what) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return static_cast<const Json*>(nullptr);
  if (!it->is_object())
    return Bad(what, "field '{}' is a {}, not an object", name, it->type_name());
  return &*it;
}

Result<const Json*> Array(const Json& obj, const char* name, std::string_view what) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return static_cast<const Json*>(nullptr);
  if (!it->is_array()) return Bad(what, "field '{}' is a {}, not an array", name, it->type_name());
  return &*it;
}

Result<ResponseHeader> Header(const Json& obj, std::string_view what) {
  ResponseHeader h;
  ASSIGN_OR_RETURN(const Json* j, Object(obj, "header", what));
  if (j == nullptr) return h;
  ASSIGN_OR_RETURN(h.cluster_id, Integer<uint64_t>(*j, "cluster_id", what));
  ASSIGN_OR_RETURN(h.member_id, Integer<uint64_t>(*j, "member_id", what));
  ASSIGN_OR_RETURN(h.revision, Integer<int64_t>(*j, "revision", what));
  ASSIGN_OR_RETURN(h.raft_term, Integer<uint64_t>(*j, "raft_term", what));
  return h;
}

Result<KeyValue> KeyValueOf(const Json& j, std::string_view what) {
  if (!j.is_object()) return Bad(what, "a key-value is a {}, not an object", j.type_name());
  KeyValue kv;
  ASSIGN_OR_RETURN(kv.key, Bytes(j, "key", what));
  ASSIGN_OR_RETURN(kv.value, Bytes(j, "value", what));
  ASSIGN_OR_RETURN(kv.create_revision, Integer<int64_t>(j, "create_revision", what));
  ASSIGN_OR_RETURN(kv.mod_revision, Integer<int64_t>(j, "mod_revision", what));
  ASSIGN_OR_RETURN(kv.version, Integer<int64_t>(j, "version", what));
  ASSIGN_OR_RETURN(kv.lease, Integer<int64_t>(j, "lease", what));
  return kv;
}

Result<std::optional<KeyValue>> OptionalKeyValue(const Json& obj, const char* name,
                                                 std::string_view what) {
  ASSIGN_OR_RETURN(const Json* j, Object(obj, name, what));
  if (j == nullptr) return std::optional<KeyValue>();
  ASSIGN_OR_RETURN(KeyValue kv, KeyValueOf(*j, what));
  return std::optional<KeyValue>(std::move(kv));
}

Result<std::vector<KeyValue>> KeyValues(const Json& obj, const char* name, std::string_view what) {
  std::vector<KeyValue> out;
  ASSIGN_OR_RETURN(const Json* arr, Array(obj, name, what));
  if (arr == nullptr) return out;
  out.reserve(arr->size());
  for (const Json& j : *arr) {
    ASSIGN_OR_RETURN(KeyValue kv, KeyValueOf(j, what));
    out.push_back(std::move(kv));
  }
  return out;
}

// The error object's Status, if `j` is one.
std::optional<Status> ErrorOf(const Json& j) {
  auto it = j.find("error");
  if (it == j.end() || it->is_null()) return std::nullopt;
  int code = 2;  // gRPC Unknown
  std::string message;
  if (it->is_object()) {  // a streamed error: {"error": {"grpc_code": N, "message": ...}}
    auto c = it->find("grpc_code");
    if (c != it->end() && c->is_number_integer()) code = static_cast<int>(c->get<int64_t>());
    auto m = it->find("message");
    if (m != it->end() && m->is_string()) message = m->get<std::string>();
  } else {
    if (it->is_string()) message = it->get<std::string>();
    auto m = j.find("message");
    if (message.empty() && m != j.end() && m->is_string()) message = m->get<std::string>();
    auto c = j.find("code");
    if (c != j.end() && c->is_number_integer()) code = static_cast<int>(c->get<int64_t>());
  }
  if (message.empty()) message = it->is_string() ? "(no message)" : it->dump();
  return EtcdErrorStatus(code, message);
}

// The body as an object: an error object becomes its Status, a streamed message is
// unwrapped from {"result": ...}.
Result<Json> Top(std::string_view body, std::string_view what) {
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Bad(what, "not JSON ({} bytes: \"{:.60}\")", body.size(), body);
  }
  if (!j.is_object()) return Bad(what, "a {}, not an object", j.type_name());
  if (auto error = ErrorOf(j)) return *error;
  auto result = j.find("result");
  if (result != j.end()) {
    if (!result->is_object())
      return Bad(what, "'result' is a {}, not an object", result->type_name());
    Json inner = std::move(*result);
    if (auto error = ErrorOf(inner)) return *error;
    return inner;
  }
  return j;
}

Result<RangeResponse> RangeOf(const Json& j, std::string_view what) {
  RangeResponse r;
  ASSIGN_OR_RETURN(r.header, Header(j, what));
  ASSIGN_OR_RETURN(r.kvs, KeyValues(j, "kvs", what));
  ASSIGN_OR_RETURN(r.more, Bool(j, "more", what));
  ASSIGN_OR_RETURN(r.count, Integer<int64_t>(j, "count", what));
  return r;
}

Result<PutResponse> PutOf(const Json& j, std::string_view what) {
  PutResponse r;
  ASSIGN_OR_RETURN(r.header, Header(j, what));
  ASSIGN_OR_RETURN(r.prev_kv, OptionalKeyValue(j, "prev_kv", what));
  return r;
}

Result<DeleteResponse> DeleteOf(const Json& j, std::string_view what) {
  DeleteResponse r;
  ASSIGN_OR_RETURN(r.header, Header(j, what));
  ASSIGN_OR_RETURN(r.deleted, Integer<int64_t>(j, "deleted", what));
  ASSIGN_OR_RETURN(r.prev_kvs, KeyValues(j, "prev_kvs", what));
  return r;
}

Result<WatchEvent> EventOf(const Json& j, std::string_view what) {
  if (!j.is_object()) return Bad(what, "an event is a {}, not an object", j.type_name());
  WatchEvent e;
  ASSIGN_OR_RETURN(std::string type, Text(j, "type", what));
  if (type == "DELETE") {
    e.type = EventType::kDelete;
  } else if (!type.empty() && type != "PUT") {
    return Bad(what, "event type \"{:.40}\" is neither PUT nor DELETE", type);
  }
  ASSIGN_OR_RETURN(const Json* kv, Object(j, "kv", what));
  if (kv == nullptr) return Bad(what, "an event has no 'kv'");
  ASSIGN_OR_RETURN(e.kv, KeyValueOf(*kv, what));
  ASSIGN_OR_RETURN(e.prev_kv, OptionalKeyValue(j, "prev_kv", what));
  return e;
}

}  // namespace

std::string PrefixRangeEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

Compare Compare::Version(std::string key, CompareResult r, int64_t version) {
  return Compare{std::move(key), {}, CompareTarget::kVersion, r, version, {}};
}
Compare Compare::CreateRevision(std::string key, CompareResult r, int64_t revision) {
  return Compare{std::move(key), {}, CompareTarget::kCreate, r, revision, {}};
}
Compare Compare::ModRevision(std::string key, CompareResult r, int64_t revision) {
  return Compare{std::move(key), {}, CompareTarget::kMod, r, revision, {}};
}
Compare Compare::Value(std::string key, CompareResult r, std::string value) {
  return Compare{std::move(key), {}, CompareTarget::kValue, r, 0, std::move(value)};
}
Compare Compare::Lease(std::string key, CompareResult r, int64_t lease) {
  return Compare{std::move(key), {}, CompareTarget::kLease, r, lease, {}};
}

TxnOp TxnOp::Get(std::string key) { return TxnOp{RangeRequest{.key = std::move(key)}}; }
TxnOp TxnOp::Range(RangeRequest r) { return TxnOp{std::move(r)}; }
TxnOp TxnOp::Put(std::string key, std::string value, int64_t lease) {
  return TxnOp{PutRequest{.key = std::move(key), .value = std::move(value), .lease = lease}};
}
TxnOp TxnOp::Put(PutRequest r) { return TxnOp{std::move(r)}; }
TxnOp TxnOp::Delete(std::string key) { return TxnOp{DeleteRequest{.key = std::move(key)}}; }
TxnOp TxnOp::Delete(DeleteRequest r) { return TxnOp{std::move(r)}; }

std::string EncodeRangeRequest(const RangeRequest& r) { return RangeJson(r).dump(); }
std::string EncodePutRequest(const PutRequest& r) { return PutJson(r).dump(); }
std::string EncodeDeleteRequest(const DeleteRequest& r) { return DeleteJson(r).dump(); }

std::string EncodeTxnRequest(const TxnRequest& r) {
  Json compares = Json::array(), success = Json::array(), failure = Json::array();
  for (const Compare& c : r.compares) compares.push_back(CompareJson(c));
  for (const TxnOp& op : r.success) success.push_back(OpJson(op));
  for (const TxnOp& op : r.failure) failure.push_back(OpJson(op));
  return Json{{"compare", compares}, {"success", success}, {"failure", failure}}.dump();
}

std::string EncodeLeaseGrantRequest(int64_t ttl_s) { return Json{{"TTL", Int(ttl_s)}}.dump(); }
std::string EncodeLeaseIdRequest(int64_t lease_id) { return Json{{"ID", Int(lease_id)}}.dump(); }

std::string EncodeCompactionRequest(int64_t revision, bool physical) {
  return Json{{"revision", Int(revision)}, {"physical", physical}}.dump();
}

std::string EncodeWatchCreateRequest(const WatchCreate& w) {
  Json c = {{"key", Base64Encode(w.key)}};
  if (!w.range_end.empty()) c["range_end"] = Base64Encode(w.range_end);
  if (w.start_revision != 0) c["start_revision"] = Int(w.start_revision);
  if (w.prev_kv) c["prev_kv"] = true;
  if (w.progress_notify) c["progress_notify"] = true;
  return Json{{"create_request", c}}.dump();
}

Result<RangeResponse> ParseRangeResponse(std::string_view body) {
  ASSIGN_OR_RETURN(Json j, Top(body, "range"));
  return RangeOf(j, "range");
}

Result<PutResponse> ParsePutResponse(std::string_view body) {
  ASSIGN_OR_RETURN(Json j, Top(body, "put"));
  return PutOf(j, "put");
}

Result<DeleteResponse> ParseDeleteResponse(std::string_view body) {
  ASSIGN_OR_RETURN(Json j, Top(body, "deleterange"));
  return DeleteOf(j, "deleterange");
}

Result<TxnResponse> ParseTxnResponse(std::string_view body) {
  constexpr std::string_view kWhat = "txn";
  ASSIGN_OR_RETURN(Json j, Top(body, kWhat));
  TxnResponse r;
  ASSIGN_OR_RETURN(r.header, Header(j, kWhat));
  ASSIGN_OR_RETURN(r.succeeded, Bool(j, "succeeded", kWhat));
  ASSIGN_OR_RETURN(const Json* ops, Array(j, "responses", kWhat));
  if (ops == nullptr) return r;
  for (const Json& op : *ops) {
    if (!op.is_object()) return Bad(kWhat, "an operation's response is a {}", op.type_name());
    ASSIGN_OR_RETURN(const Json* range, Object(op, "response_range", kWhat));
    ASSIGN_OR_RETURN(const Json* put, Object(op, "response_put", kWhat));
    ASSIGN_OR_RETURN(const Json* del, Object(op, "response_delete_range", kWhat));
    if ((range != nullptr) + (put != nullptr) + (del != nullptr) != 1) {
      return Bad(kWhat, "an operation's response is not exactly one of range, put, delete");
    }
    if (range != nullptr) {
      ASSIGN_OR_RETURN(RangeResponse rr, RangeOf(*range, kWhat));
      r.responses.emplace_back(std::move(rr));
    } else if (put != nullptr) {
      ASSIGN_OR_RETURN(PutResponse pr, PutOf(*put, kWhat));
      r.responses.emplace_back(std::move(pr));
    } else {
      ASSIGN_OR_RETURN(DeleteResponse dr, DeleteOf(*del, kWhat));
      r.responses.emplace_back(std::move(dr));
    }
  }
  return r;
}

Result<LeaseGrantResponse> ParseLeaseGrantResponse(std::string_view body) {
  constexpr std::string_view kWhat = "lease grant";
  ASSIGN_OR_RETURN(Json j, Top(body, kWhat));
  LeaseGrantResponse r;
  ASSIGN_OR_RETURN(r.header, Header(j, kWhat));
  ASSIGN_OR_RETURN(r.id, Integer<int64_t>(j, "ID", kWhat));
  ASSIGN_OR_RETURN(r.ttl, Integer<int64_t>(j, "TTL", kWhat));
  if (r.id == 0) return Bad(kWhat, "no lease ID");
  return r;
}

Result<LeaseKeepAliveResponse> ParseLeaseKeepAliveResponse(std::string_view body) {
  constexpr std::string_view kWhat = "lease keepalive";
  ASSIGN_OR_RETURN(Json j, Top(body, kWhat));
  LeaseKeepAliveResponse r;
  ASSIGN_OR_RETURN(r.header, Header(j, kWhat));
  ASSIGN_OR_RETURN(r.id, Integer<int64_t>(j, "ID", kWhat));
  ASSIGN_OR_RETURN(r.ttl, Integer<int64_t>(j, "TTL", kWhat));
  return r;
}

Result<LeaseRevokeResponse> ParseLeaseRevokeResponse(std::string_view body) {
  ASSIGN_OR_RETURN(ResponseHeader h, ParseHeaderResponse(body));
  return LeaseRevokeResponse{h};
}

Result<ResponseHeader> ParseHeaderResponse(std::string_view body) {
  ASSIGN_OR_RETURN(Json j, Top(body, "etcd"));
  return Header(j, "etcd");
}

Result<StatusResponse> ParseStatusResponse(std::string_view body) {
  constexpr std::string_view kWhat = "maintenance status";
  ASSIGN_OR_RETURN(Json j, Top(body, kWhat));
  StatusResponse r;
  ASSIGN_OR_RETURN(r.header, Header(j, kWhat));
  ASSIGN_OR_RETURN(r.version, Text(j, "version", kWhat));
  ASSIGN_OR_RETURN(r.db_size, Integer<int64_t>(j, "dbSize", kWhat));
  ASSIGN_OR_RETURN(r.leader, Integer<uint64_t>(j, "leader", kWhat));
  ASSIGN_OR_RETURN(r.raft_index, Integer<int64_t>(j, "raftIndex", kWhat));
  ASSIGN_OR_RETURN(r.raft_term, Integer<uint64_t>(j, "raftTerm", kWhat));
  ASSIGN_OR_RETURN(r.raft_applied_index, Integer<int64_t>(j, "raftAppliedIndex", kWhat));
  ASSIGN_OR_RETURN(const Json* errors, Array(j, "errors", kWhat));
  if (errors != nullptr) {
    for (const Json& e : *errors) {
      if (!e.is_string()) return Bad(kWhat, "an entry of 'errors' is a {}", e.type_name());
      r.errors.push_back(e.get<std::string>());
    }
  }
  return r;
}

Result<WatchResponse> ParseWatchResponse(std::string_view body) {
  constexpr std::string_view kWhat = "watch";
  ASSIGN_OR_RETURN(Json j, Top(body, kWhat));
  WatchResponse r;
  ASSIGN_OR_RETURN(r.header, Header(j, kWhat));
  ASSIGN_OR_RETURN(r.watch_id, Integer<int64_t>(j, "watch_id", kWhat));
  ASSIGN_OR_RETURN(r.created, Bool(j, "created", kWhat));
  ASSIGN_OR_RETURN(r.canceled, Bool(j, "canceled", kWhat));
  ASSIGN_OR_RETURN(r.compact_revision, Integer<int64_t>(j, "compact_revision", kWhat));
  ASSIGN_OR_RETURN(r.cancel_reason, Text(j, "cancel_reason", kWhat));
  ASSIGN_OR_RETURN(r.fragment, Bool(j, "fragment", kWhat));
  ASSIGN_OR_RETURN(const Json* events, Array(j, "events", kWhat));
  if (events != nullptr) {
    r.events.reserve(events->size());
    for (const Json& e : *events) {
      ASSIGN_OR_RETURN(WatchEvent event, EventOf(e, kWhat));
      r.events.push_back(std::move(event));
    }
  }
  return r;
}

Status EtcdErrorStatus(int grpc_code, std::string_view message) {
  StatusCode code = StatusCode::kInternal;
  switch (grpc_code) {
    case kGrpcInvalidArgument:
      code = StatusCode::kInvalidArgument;
      break;
    case kGrpcDeadlineExceeded:
      code = StatusCode::kIOError;
      break;
    case kGrpcNotFound:
      code = StatusCode::kNotFound;
      break;
    case 6:
      code = StatusCode::kAlreadyExists;
      break;
    case 8:
      code = StatusCode::kResourceExhausted;
      break;
    case kGrpcFailedPrecondition:
      code = StatusCode::kFailedPrecondition;
      break;
    case 10:
      code = StatusCode::kAborted;
      break;
    case kGrpcOutOfRange:
      code = StatusCode::kOutOfRange;
      break;
    case 12:
      code = StatusCode::kUnimplemented;
      break;
    case kGrpcUnavailable:
      code = StatusCode::kIOError;
      break;
    default:
      break;
  }
  return Status(code, fmt::format("etcd: {:.300} (gRPC code {})", message, grpc_code));
}

Status JsonObjectSplitter::Feed(std::string_view bytes, std::vector<std::string>* objects) {
  if (!failed_.ok()) return failed_;
  buffer_.append(bytes);
  size_t consumed = 0;  // buffer_[0, consumed) went out as objects or was whitespace
  for (size_t i = scanned_; i < buffer_.size(); ++i) {
    char c = buffer_[i];
    if (depth_ == 0) {
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        consumed = i + 1;
        continue;
      }
      if (c != '{') {
        failed_ = InvalidArgumentError("etcd stream: byte 0x{:02x} between objects",
                                       static_cast<unsigned char>(c));
        return failed_;
      }
      object_start_ = i;
      depth_ = 1;
      continue;
    }
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      if (--depth_ == 0) {
        if (i + 1 - object_start_ > max_object_bytes_) break;  // failed below
        objects->emplace_back(buffer_, object_start_, i + 1 - object_start_);
        consumed = i + 1;
      }
    }
  }
  buffer_.erase(0, consumed);
  scanned_ = buffer_.size();
  if (depth_ > 0) object_start_ -= consumed;
  if (buffer_.size() > max_object_bytes_) {
    failed_ =
        ResourceExhaustedError("etcd stream: an object longer than {} bytes", max_object_bytes_);
    return failed_;
  }
  return Status::OK();
}

}  // namespace sluice::cluster
