#include "lake/iceberg_json.h"

#include <limits>

namespace sluice::lake {

Result<Json> ParseJson(std::string_view text, std::string_view what) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return InvalidArgumentError("{}: not valid JSON (byte {}): {}", what, e.byte, e.what());
  } catch (const std::exception& e) {
    return InvalidArgumentError("{}: not valid JSON: {}", what, e.what());
  }
}

std::string JsonPath(std::string_view parent, std::string_view key) {
  return fmt::format("{}.{}", parent, key);
}

std::string JsonPath(std::string_view parent, size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

std::string_view JsonKindName(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a non-integer number";
    default:
      return "a binary value";
  }
}

namespace {

Status WrongKind(std::string_view path, std::string_view want, const Json& got) {
  return InvalidArgumentError("{}: expected {}, got {}", path, want, JsonKindName(got));
}

}  // namespace

Result<int64_t> JsonToLong(const Json& j, std::string_view path) {
  if (j.is_number_unsigned()) {
    uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgumentError("{}: {} does not fit in a long", path, v);
    }
    return static_cast<int64_t>(v);
  }
  if (j.is_number_integer()) return j.get<int64_t>();
  return WrongKind(path, "an integer", j);
}

Result<int32_t> JsonToInt(const Json& j, std::string_view path) {
  ASSIGN_OR_RETURN(int64_t v, JsonToLong(j, path));
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("{}: {} does not fit in an int", path, v);
  }
  return static_cast<int32_t>(v);
}

Result<std::string> JsonToString(const Json& j, std::string_view path) {
  if (!j.is_string()) return WrongKind(path, "a string", j);
  return j.get<std::string>();
}

Result<std::vector<int32_t>> JsonToIntList(const Json& j, std::string_view path) {
  if (!j.is_array()) return WrongKind(path, "an array of integers", j);
  std::vector<int32_t> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    ASSIGN_OR_RETURN(int32_t v, JsonToInt(j[i], JsonPath(path, i)));
    out.push_back(v);
  }
  return out;
}

Result<JsonObject> JsonObject::Of(const Json& json, std::string path) {
  if (!json.is_object()) return WrongKind(path, "an object", json);
  return JsonObject(&json, std::move(path));
}

const Json* JsonObject::Get(std::string_view key) const {
  auto it = json_->find(key);
  if (it == json_->end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonObject::Has(std::string_view key) const { return Get(key) != nullptr; }

Result<const Json*> JsonObject::Require(std::string_view key) const {
  const Json* j = Get(key);
  if (j == nullptr) return InvalidArgumentError("{}: missing required field \"{}\"", path_, key);
  return j;
}

Result<int32_t> JsonObject::Int(std::string_view key) const {
  ASSIGN_OR_RETURN(const Json* j, Require(key));
  return JsonToInt(*j, PathOf(key));
}

Result<int64_t> JsonObject::Long(std::string_view key) const {
  ASSIGN_OR_RETURN(const Json* j, Require(key));
  return JsonToLong(*j, PathOf(key));
}

Result<bool> JsonObject::Bool(std::string_view key) const {
  ASSIGN_OR_RETURN(const Json* j, Require(key));
  if (!j->is_boolean()) return WrongKind(PathOf(key), "a boolean", *j);
  return j->get<bool>();
}

Result<std::string> JsonObject::String(std::string_view key) const {
  ASSIGN_OR_RETURN(const Json* j, Require(key));
  return JsonToString(*j, PathOf(key));
}

Result<std::optional<int32_t>> JsonObject::OptInt(std::string_view key) const {
  if (!Has(key)) return std::optional<int32_t>();
  ASSIGN_OR_RETURN(int32_t v, Int(key));
  return std::optional<int32_t>(v);
}

Result<std::optional<int64_t>> JsonObject::OptLong(std::string_view key) const {
  if (!Has(key)) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t v, Long(key));
  return std::optional<int64_t>(v);
}

Result<std::optional<bool>> JsonObject::OptBool(std::string_view key) const {
  if (!Has(key)) return std::optional<bool>();
  ASSIGN_OR_RETURN(bool v, Bool(key));
  return std::optional<bool>(v);
}

Result<std::optional<std::string>> JsonObject::OptString(std::string_view key) const {
  if (!Has(key)) return std::optional<std::string>();
  ASSIGN_OR_RETURN(std::string v, String(key));
  return std::optional<std::string>(std::move(v));
}

Result<const Json*> JsonObject::Array(std::string_view key) const {
  ASSIGN_OR_RETURN(const Json* j, Require(key));
  if (!j->is_array()) return WrongKind(PathOf(key), "an array", *j);
  return j;
}

Result<const Json*> JsonObject::OptArray(std::string_view key) const {
  if (!Has(key)) return static_cast<const Json*>(nullptr);
  return Array(key);
}

Result<std::map<std::string, std::string>> JsonObject::OptStringMap(std::string_view key) const {
  std::map<std::string, std::string> out;
  const Json* j = Get(key);
  if (j == nullptr) return out;
  if (!j->is_object()) return WrongKind(PathOf(key), "an object of strings", *j);
  for (auto it = j->begin(); it != j->end(); ++it) {
    std::string path = JsonPath(PathOf(key), it.key());
    ASSIGN_OR_RETURN(std::string v, JsonToString(it.value(), path));
    out.emplace(it.key(), std::move(v));
  }
  return out;
}

}  // namespace sluice::lake
