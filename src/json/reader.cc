// Reading one message: the padded buffer, and a value checked to be one JSON object.
#include "json/reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "json/text.h"

namespace sluice::json {

namespace od = simdjson::ondemand;

namespace {

// Buffers grown past this by a large message are released after the batch.
constexpr size_t kKeepBufferBytes = size_t{4} << 20;

std::string_view MessageProblem(std::string_view value) {
  if (value.data() == nullptr) return "message has no value (null)";
  if (value.empty()) return "empty message: expected a JSON object";
  return "";
}

}  // namespace

simdjson::error_code JsonReader::Iterate(std::string_view json, od::document* doc) {
  size_t need = json.size() + simdjson::SIMDJSON_PADDING;
  if (buf_.size() < need) buf_.resize(std::max(need, 2 * buf_.size()));
  std::memcpy(buf_.data(), json.data(), json.size());
  std::memset(buf_.data() + json.size(), 0, simdjson::SIMDJSON_PADDING);
  return parser_.iterate(buf_.data(), json.size(), buf_.size()).get(*doc);
}

void JsonReader::Shrink() {
  if (buf_.size() > kKeepBufferBytes) std::vector<char>().swap(buf_);
  if (parser_.capacity() > kKeepBufferBytes) {
    parser_ = od::parser();
    Allocate();
  }
}

void JsonReader::Allocate() {
  if (parser_.allocate(64 << 10, parser_depth_) != simdjson::SUCCESS) parser_ = od::parser();
}

bool OpenObject(JsonReader& reader, std::string_view value, od::document* doc, od::object* obj,
                std::string* reason) {
  if (std::string_view p = MessageProblem(value); !p.empty()) {
    *reason = std::string(p);
    return false;
  }
  if (auto e = reader.Iterate(value, doc); e) {
    *reason = fmt::format("invalid JSON: {}", simdjson::error_message(e));
    return false;
  }
  od::json_type t;
  if (auto e = doc->type().get(t); e) {
    *reason = fmt::format("invalid JSON: {}", simdjson::error_message(e));
    return false;
  }
  if (t != od::json_type::object) {
    // The first byte decides the type: text starting with n, t or f may not be JSON at all.
    bool atom_ok = true;
    if (t == od::json_type::null) {
      bool is_null = false;
      atom_ok = !doc->is_null().get(is_null) && is_null;
    } else if (t == od::json_type::boolean) {
      bool b = false;
      atom_ok = !doc->get_bool().get(b);
    }
    *reason = atom_ok ? fmt::format("expected a JSON object, got {}", JsonTypeName(t))
                      : std::string("invalid JSON: not a JSON value");
    return false;
  }
  if (auto e = doc->get_object().get(*obj); e) {
    *reason = fmt::format("invalid JSON: {}", simdjson::error_message(e));
    return false;
  }
  return true;
}

bool CloseDocument(od::document* doc, std::string* reason) {
  // Past the object, only the end of the text may remain.
  const char* rest = nullptr;
  if (doc->current_location().get(rest) == simdjson::SUCCESS) {
    *reason = "invalid JSON: content after the object";
    return false;
  }
  return true;
}
}  // namespace sluice::json
