// The console API's answers and input checks, shared by its files (private to
// src/console): JSON answers with `Cache-Control: no-store`, errors as {"error": {"code",
// "message"}} with the HTTP status their meaning gives (docs/design/0026 #7), and a JSON
// body or query parameter read field by field.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/http_server.h"
#include "base/status.h"

namespace sluice::console::api_util {

using Json = nlohmann::ordered_json;

HttpResponse JsonResponse(int status, const Json& body);
// A chart's series: NaN (a gap) as null.
Json SeriesJson(const std::vector<double>& values);
HttpResponse ErrorResponse(int status, std::string_view code, std::string_view message);
HttpResponse NoContent();
// A Status from KafkaOps (or a pipeline): Kafka's error name as the code when it carries
// one, the HTTP status by what it means.
HttpResponse FromStatus(const Status& st);
HttpResponse BadRequest(std::string_view message);
HttpResponse MethodNotAllowed(const HttpRequest& req);

// The request's JSON body: an object, with only `allowed` fields.
Result<Json> ParseBody(const HttpRequest& req, std::initializer_list<std::string_view> allowed);
// Field `name` as an integer (`fallback` when absent or null).
Result<int64_t> IntField(const Json& body, std::string_view name, int64_t fallback);
// Field `name` as a string, or none when absent or null.
Result<std::optional<std::string>> OptionalString(const Json& body, std::string_view name);
// Field `name` as an object of strings (numbers and booleans taken as their JSON text).
Result<std::map<std::string, std::string>> StringMap(const Json& body, std::string_view name);
// Query parameter `name` as an integer (`fallback` when absent or empty).
Result<int64_t> QueryInt(const HttpRequest& req, const std::string& name, int64_t fallback);
std::string QueryString(const HttpRequest& req, const std::string& name);

}  // namespace sluice::console::api_util
