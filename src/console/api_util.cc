#include "console/api_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "kafka/client/admin.h"

namespace sluice::console::api_util {

Json SeriesJson(const std::vector<double>& values) {
  Json out = Json::array();
  for (double v : values) out.push_back(std::isfinite(v) ? Json(v) : Json(nullptr));
  return out;
}

HttpResponse JsonResponse(int status, const Json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, Json::error_handler_t::replace);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

HttpResponse ErrorResponse(int status, std::string_view code, std::string_view message) {
  return JsonResponse(status, Json{{"error", {{"code", code}, {"message", message}}}});
}

HttpResponse NoContent() {
  HttpResponse r;
  r.status = 204;
  return r;
}

HttpResponse FromStatus(const Status& st) {
  std::string code(kafka::client::KafkaErrorName(st));
  if (code.starts_with("_")) {
    // librdkafka's own: _TIMED_OUT, _TRANSPORT, _UNKNOWN_TOPIC, ...
    code = code.substr(1);
  }
  int status = 500;
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
      status = 400;
      if (code.empty()) code = "INVALID_REQUEST";
      break;
    case StatusCode::kNotFound:
      status = 404;
      if (code.empty()) code = "NOT_FOUND";
      break;
    case StatusCode::kAlreadyExists:
      status = 409;
      if (code.empty()) code = "ALREADY_EXISTS";
      break;
    case StatusCode::kFailedPrecondition:
      status = 409;
      if (code.empty()) code = "FAILED_PRECONDITION";
      break;
    case StatusCode::kAborted:
      status = 504;
      if (code.empty()) code = "TIMED_OUT";
      break;
    case StatusCode::kIOError:
      // The broker or the network (librdkafka's errors end in their name), else this
      // machine's files.
      status = code.empty() ? 500 : 502;
      if (code.empty()) code = "IO_ERROR";
      break;
    default:
      status = 502;
      if (code.empty()) code = "KAFKA_ERROR";
      break;
  }
  if (code.ends_with("_AUTHORIZATION_FAILED")) status = 403;
  if (code == "UNKNOWN_TOPIC_OR_PART" || code == "UNKNOWN_TOPIC" || code == "GROUP_ID_NOT_FOUND")
    status = 404;
  if (code == "TOPIC_ALREADY_EXISTS") status = 409;
  if (code == "NON_EMPTY_GROUP" || code == "UNKNOWN_MEMBER_ID") {
    status = 409;
    code = "NON_EMPTY_GROUP";
  }
  if (code.starts_with("INVALID_") || code == "POLICY_VIOLATION" ||
      code == "UNSUPPORTED_COMPRESSION_TYPE") {
    status = 400;
  }
  if (code == "TIMED_OUT" || code == "REQUEST_TIMED_OUT") status = 504;
  return ErrorResponse(status, code, st.message());
}

HttpResponse BadRequest(std::string_view message) {
  return ErrorResponse(400, "INVALID_REQUEST", message);
}

HttpResponse MethodNotAllowed(const HttpRequest& req) {
  HttpResponse r = ErrorResponse(405, "METHOD_NOT_ALLOWED",
                                 fmt::format("{} is not allowed on {}", req.method, req.path));
  return r;
}

Result<Json> ParseBody(const HttpRequest& req, std::initializer_list<std::string_view> allowed) {
  if (req.body.empty()) return InvalidArgumentError("the request needs a JSON object as its body");
  Json body = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return InvalidArgumentError("the body is not JSON");
  if (!body.is_object()) return InvalidArgumentError("the body must be a JSON object");
  for (const auto& [k, v] : body.items()) {
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      return InvalidArgumentError("unknown field '{}'", k);
    }
  }
  return body;
}

Result<int64_t> IntField(const Json& body, std::string_view name, int64_t fallback) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) return InvalidArgumentError("'{}' must be an integer", name);
  return it->get<int64_t>();
}

Result<std::optional<std::string>> OptionalString(const Json& body, std::string_view name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return InvalidArgumentError("'{}' must be a string or null", name);
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::map<std::string, std::string>> StringMap(const Json& body, std::string_view name) {
  std::map<std::string, std::string> out;
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return out;
  if (!it->is_object()) return InvalidArgumentError("'{}' must be an object of strings", name);
  for (const auto& [k, v] : it->items()) {
    if (v.is_string()) {
      out[k] = v.get<std::string>();
    } else if (v.is_number() || v.is_boolean()) {
      out[k] = v.dump();  // "retention.ms": 1000 as a client would mean it
    } else {
      return InvalidArgumentError("'{}.{}' must be a string", name, k);
    }
  }
  return out;
}

Result<int64_t> QueryInt(const HttpRequest& req, const std::string& name, int64_t fallback) {
  auto it = req.query.find(name);
  if (it == req.query.end() || it->second.empty()) return fallback;
  int64_t v = 0;
  const char* end = it->second.data() + it->second.size();
  auto [p, ec] = std::from_chars(it->second.data(), end, v);
  if (ec != std::errc() || p != end) {
    return InvalidArgumentError("query parameter {}: '{}' is not an integer", name, it->second);
  }
  return v;
}

std::string QueryString(const HttpRequest& req, const std::string& name) {
  auto it = req.query.find(name);
  return it == req.query.end() ? "" : it->second;
}

}  // namespace sluice::console::api_util
