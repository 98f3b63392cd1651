// Reading one message's JSON (internal to src/json): a reused padded buffer and simdjson
// on-demand parser, and the checks every decoder makes on a message as a whole (a value is
// present, it is one JSON object, nothing follows it).
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

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

  simdjson::error_code Iterate(std::string_view json, simdjson::ondemand::document* doc);

  // Releases what a very large message made the buffers grow to.
  void Shrink();

 private:
  // The depth limit is set here; iterate() grows the capacity as messages need.
  void Allocate();
  size_t parser_depth_;
  simdjson::ondemand::parser parser_;
  std::vector<char> buf_;
};

// Parses `value` (data() == nullptr: the message has none) as a JSON object; on error
// returns false with the reason in *reason.
bool OpenObject(JsonReader& reader, std::string_view value, simdjson::ondemand::document* doc,
                simdjson::ondemand::object* obj, std::string* reason);

// After the object has been read: false (and why) when anything but whitespace follows it.
bool CloseDocument(simdjson::ondemand::document* doc, std::string* reason);

}  // namespace sluice::json
