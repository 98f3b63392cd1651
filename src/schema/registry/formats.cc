// The three formats for the registry (formats.h): Avro and Protobuf from their modules,
// JSON Schema here.
#include "schema/registry/formats.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "schema/avro/avro_format.h"
#include "schema/protobuf/protobuf_format.h"

namespace sluice::schema::registry {

using nlohmann::json;

namespace {

template <typename R>
std::vector<R> As(const std::vector<Reference>& refs) {
  std::vector<R> out;
  for (const Reference& r : refs) out.push_back({r.name, r.schema_text});
  return out;
}

// Deeper JSON is refused: writing it back (the canonical text) recurses per level.
constexpr int kMaxJsonSchemaDepth = 64;

Result<json> ParseJsonSchema(std::string_view text) {
  bool too_deep = false;
  json::parser_callback_t limit = [&too_deep](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonSchemaDepth) too_deep = true;
    return !too_deep;
  };
  json j = json::parse(text, limit, false);
  if (too_deep) {
    return InvalidArgumentError("the JSON schema nests deeper than {} levels", kMaxJsonSchemaDepth);
  }
  if (j.is_discarded()) return InvalidArgumentError("the JSON schema is not JSON");
  if (!j.is_object() && !j.is_boolean()) {
    return InvalidArgumentError("a JSON schema is an object or a boolean");
  }
  return j;
}

std::string TypeOf(const json& s) {
  if (!s.is_object()) return "";
  auto t = s.find("type");
  if (t == s.end()) return "";
  return t->is_string() ? t->get<std::string>() : t->dump();
}

bool Closed(const json& s) {
  auto a = s.find("additionalProperties");
  return a != s.end() && a->is_boolean() && !a->get<bool>();
}

std::set<std::string> Strings(const json& s, const char* key) {
  std::set<std::string> out;
  if (!s.is_object()) return out;
  auto it = s.find(key);
  if (it == s.end() || !it->is_array()) return out;
  for (const json& v : *it) out.insert(v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

// Backward: can a reader validating with `reader` take everything `writer` allowed? The
// differences Confluent's JSON Schema checker finds most often; not its whole list.
void CompareJson(const json& reader, const json& writer, const std::string& path,
                 std::vector<std::string>* out, int depth) {
  if (depth > 64 || !reader.is_object() || !writer.is_object()) return;
  const std::string rt = TypeOf(reader), wt = TypeOf(writer);
  if (rt != wt && !rt.empty() && !(rt == "number" && wt == "integer")) {
    out->push_back(fmt::format("TYPE_CHANGED at {}: {} to {}", path.empty() ? "#/" : path,
                               wt.empty() ? "any" : wt, rt));
    return;
  }
  const std::set<std::string> wr = Strings(writer, "required");
  for (const std::string& r : Strings(reader, "required")) {
    if (!wr.contains(r))
      out->push_back(fmt::format("REQUIRED_PROPERTY_ADDED at {}/required/{}", path, r));
  }
  const std::set<std::string> we = Strings(writer, "enum"), re = Strings(reader, "enum");
  if (reader.contains("enum")) {
    for (const std::string& v : we) {
      if (!re.contains(v))
        out->push_back(fmt::format("ENUM_ARRAY_NARROWED at {}/enum: {}", path, v));
    }
  }
  const json empty = json::object();
  const json& rp = reader.contains("properties") && reader["properties"].is_object()
                       ? reader["properties"]
                       : empty;
  const json& wp = writer.contains("properties") && writer["properties"].is_object()
                       ? writer["properties"]
                       : empty;
  for (auto it = wp.begin(); it != wp.end(); ++it) {
    const std::string p = fmt::format("{}/properties/{}", path, it.key());
    if (rp.contains(it.key())) {
      CompareJson(rp[it.key()], it.value(), p, out, depth + 1);
    } else if (Closed(reader)) {
      out->push_back(fmt::format("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at {}", p));
    }
  }
  for (auto it = rp.begin(); it != rp.end(); ++it) {
    if (!wp.contains(it.key()) && !Closed(writer)) {
      out->push_back(
          fmt::format("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at {}/properties/{}", path, it.key()));
    }
  }
  if (reader.contains("items") && writer.contains("items")) {
    CompareJson(reader["items"], writer["items"], path + "/items", out, depth + 1);
  }
}

}  // namespace

Result<std::string> CanonicalText(SchemaType type, std::string_view text,
                                  const std::vector<Reference>& refs, bool normalize) {
  switch (type) {
    case SchemaType::kAvro: {
      ASSIGN_OR_RETURN(avro::Parsed p, avro::Parse(text, As<avro::Reference>(refs)));
      return normalize ? avro::Normalized(p) : avro::Canonical(p);
    }
    case SchemaType::kProtobuf: {
      ASSIGN_OR_RETURN(protobuf::Parsed p, protobuf::Parse(text, As<protobuf::Reference>(refs)));
      return normalize ? protobuf::Normalized(p) : protobuf::Canonical(p);
    }
    case SchemaType::kJson: {
      ASSIGN_OR_RETURN(json j, ParseJsonSchema(text));
      return j.dump();
    }
  }
  return InvalidArgumentError("unknown schema type");
}

Result<std::vector<std::string>> Incompatibilities(SchemaType type, SchemaText reader,
                                                   SchemaText writer) {
  switch (type) {
    case SchemaType::kAvro: {
      ASSIGN_OR_RETURN(avro::Parsed r, avro::Parse(reader.text, As<avro::Reference>(*reader.refs)));
      ASSIGN_OR_RETURN(avro::Parsed w, avro::Parse(writer.text, As<avro::Reference>(*writer.refs)));
      return avro::Incompatibilities(r, w);
    }
    case SchemaType::kProtobuf: {
      ASSIGN_OR_RETURN(protobuf::Parsed r,
                       protobuf::Parse(reader.text, As<protobuf::Reference>(*reader.refs)));
      ASSIGN_OR_RETURN(protobuf::Parsed w,
                       protobuf::Parse(writer.text, As<protobuf::Reference>(*writer.refs)));
      return protobuf::Incompatibilities(r, w);
    }
    case SchemaType::kJson: {
      ASSIGN_OR_RETURN(json r, ParseJsonSchema(reader.text));
      ASSIGN_OR_RETURN(json w, ParseJsonSchema(writer.text));
      std::vector<std::string> out;
      CompareJson(r, w, "#", &out, 0);
      return out;
    }
  }
  return InvalidArgumentError("unknown schema type");
}

}  // namespace sluice::schema::registry
