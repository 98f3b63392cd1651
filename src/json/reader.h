// Reading one message's JSON (internal to src/json): a reused padded buffer and simdjson
// on-demand parser, and the checks every decoder makes on a message as a whole (a value is
// present, it is one JSON object, nothing follows it).
#pragma once

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "json/text.h"

namespace sluice::json {

// JSON nested deeper than this is refused (it also bounds the decoders' recursion): the
// pipeline's limit. topic() reads up to simdjson's DOM default instead (kLenientMaxDepth).
constexpr size_t kMaxJsonDepth = 256;
constexpr size_t kLenientMaxDepth = 1024;

// simdjson needs SIMDJSON_PADDING readable bytes after the text; librdkafka's buffers have
// none, so each message is copied into a reused padded buffer first. Owned by one decoder.
class JsonReader {
 public:
  // `max_depth`: the decoder's own limit; the parser's is a little higher, so that the
  // decoder's check is the one that fires (simdjson's on-demand API only checks its limit
  // with development checks: debug builds, by assert).
  explicit JsonReader(size_t max_depth = kMaxJsonDepth) : parser_depth_(max_depth + 16) {
    Allocate();
  }

  simdjson::error_code Iterate(std::string_view json, simdjson::ondemand::document* doc) {
    size_t need = json.size() + simdjson::SIMDJSON_PADDING;
    if (buf_.size() < need) buf_.resize(std::max(need, 2 * buf_.size()));
    std::memcpy(buf_.data(), json.data(), json.size());
    std::memset(buf_.data() + json.size(), 0, simdjson::SIMDJSON_PADDING);
    return parser_.iterate(buf_.data(), json.size(), buf_.size()).get(*doc);
  }

  // Releases what a very large message made the buffers grow to.
  void Shrink();

 private:
  // The depth limit is set here; iterate() grows the capacity as messages need.
  void Allocate();
  size_t parser_depth_;
  simdjson::ondemand::parser parser_;
  std::vector<char> buf_;
};

// Why `value` cannot be a JSON object at all, or "".
inline std::string_view MessageProblem(std::string_view value) {
  if (value.data() == nullptr) return "message has no value (null)";
  if (value.empty()) return "empty message: expected a JSON object";
  return "";
}

// Parses `value` (data() == nullptr: the message has none) as a JSON object; on error
// returns false with the reason in *reason.
inline bool OpenObject(JsonReader& reader, std::string_view value,
                       simdjson::ondemand::document* doc, simdjson::ondemand::object* obj,
                       std::string* reason) {
  if (std::string_view p = MessageProblem(value); !p.empty()) {
    *reason = std::string(p);
    return false;
  }
  if (auto e = reader.Iterate(value, doc); e) {
    *reason = fmt::format("invalid JSON: {}", simdjson::error_message(e));
    return false;
  }
  simdjson::ondemand::json_type t;
  if (auto e = doc->type().get(t); e) {
    *reason = fmt::format("invalid JSON: {}", simdjson::error_message(e));
    return false;
  }
  if (t != simdjson::ondemand::json_type::object) {
    // The first byte decides the type: text starting with n, t or f may not be JSON at all.
    bool atom_ok = true;
    if (t == simdjson::ondemand::json_type::null) {
      bool is_null = false;
      atom_ok = !doc->is_null().get(is_null) && is_null;
    } else if (t == simdjson::ondemand::json_type::boolean) {
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

// After the object has been read: false (and why) when anything but whitespace follows it.
bool CloseDocument(simdjson::ondemand::document* doc, std::string* reason);

}  // namespace sluice::json
