// Reading one message: the padded buffer's upkeep, and the check after the object.
#include "json/reader.h"

namespace sluice::json {

namespace od = simdjson::ondemand;

namespace {

// Buffers grown past this by a large message are released after the batch.
constexpr size_t kKeepBufferBytes = size_t{4} << 20;

}  // namespace

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
