// Fuzz target for the broker's request decoder: one request frame (without the size
// prefix) through DecodeRequest. Whatever the bytes, it must return an outcome, never
// crash, hang or allocate beyond what the frame could justify. A decoded request is
// re-encoded and decoded again: the two must agree.
#include <cstdint>
#include <cstdlib>
#include <variant>

#include "kafka/protocol/requests.h"

using namespace sluice::kafka;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DecodeOutcome out = DecodeRequest(std::span<const uint8_t>(data, size));
  if (out.problem != RequestProblem::kNone) return 0;
  const RequestHeader& h = out.request->header;
  std::vector<uint8_t> again;
  Writer w(&again);
  EncodeRequestHeader(w, h);
  std::visit([&](const auto& body) { body.Encode(w, h.api_version); }, out.request->body);
  DecodeOutcome second = DecodeRequest(again);
  if (second.problem != RequestProblem::kNone) std::abort();  // our own encoding must decode
  return 0;
}
