// Strict reading of Iceberg's JSON documents (table metadata, REST requests): typed
// accessors over one JSON object that name the JSON path of whatever is wrong
// ("$.snapshots[1].summary: missing required field \"operation\"").
//
// Objects are kept in insertion order (nlohmann::ordered_json) so that what we write reads
// like what Java writes: "format-version" first, then the fields in the spec's order.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::lake {

using Json = nlohmann::ordered_json;

// Parses `text` as one JSON document; a syntax error names the byte offset.
Result<Json> ParseJson(std::string_view text, std::string_view what);

// "$.a" + "b" -> "$.a.b"; "$.a" + 3 -> "$.a[3]".
std::string JsonPath(std::string_view parent, std::string_view key);
std::string JsonPath(std::string_view parent, size_t index);

// "an object", "a string", ... for error messages.
std::string_view JsonKindName(const Json& j);

// A view of one JSON object at `path`. The JSON must outlive the view. A field present
// with JSON null counts as absent (Java and the REST spec write null for "none").
class JsonObject {
 public:
  static Result<JsonObject> Of(const Json& json, std::string path);

  const std::string& path() const { return path_; }
  std::string PathOf(std::string_view key) const { return JsonPath(path_, key); }
  bool Has(std::string_view key) const;
  // The raw member, or nullptr when absent or null.
  const Json* Get(std::string_view key) const;
  // The raw member; an error naming the path when absent or null.
  Result<const Json*> Require(std::string_view key) const;

  Result<int32_t> Int(std::string_view key) const;
  Result<int64_t> Long(std::string_view key) const;
  Result<bool> Bool(std::string_view key) const;
  Result<std::string> String(std::string_view key) const;
  Result<std::optional<int32_t>> OptInt(std::string_view key) const;
  Result<std::optional<int64_t>> OptLong(std::string_view key) const;
  Result<std::optional<bool>> OptBool(std::string_view key) const;
  Result<std::optional<std::string>> OptString(std::string_view key) const;
  // A JSON array (required); its path is PathOf(key).
  Result<const Json*> Array(std::string_view key) const;
  Result<const Json*> OptArray(std::string_view key) const;  // nullptr when absent
  // A JSON object whose values are all strings (absent = empty).
  Result<std::map<std::string, std::string>> OptStringMap(std::string_view key) const;

 private:
  JsonObject(const Json* json, std::string path) : json_(json), path_(std::move(path)) {}
  const Json* json_;
  std::string path_;
};

// Typed reads of a value that is not an object member (array elements).
Result<int32_t> JsonToInt(const Json& j, std::string_view path);
Result<int64_t> JsonToLong(const Json& j, std::string_view path);
Result<std::string> JsonToString(const Json& j, std::string_view path);
Result<std::vector<int32_t>> JsonToIntList(const Json& j, std::string_view path);

}  // namespace sluice::lake
