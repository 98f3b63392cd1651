// Request and response headers.
//
//   request header v1: api_key int16, api_version int16, correlation_id int32,
//                      client_id nullable string (int16 length, never compact)
//   request header v2: v1 + tagged fields
//   response header v0: correlation_id int32;  v1: v0 + tagged fields
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"
#include "kafka/protocol/api.h"
#include "kafka/protocol/wire.h"

namespace sluice::kafka {

struct RequestHeader {
  int16_t api_key = 0;  // raw: may name an API sluice does not serve
  int16_t api_version = 0;
  int32_t correlation_id = 0;
  std::optional<std::string> client_id;
  int header_version = 1;  // 1 or 2, from the API and version

  bool operator==(const RequestHeader&) const = default;
};

// Reads the header at the start of a request (the frame without its 4-byte size). The
// header version follows from the API and version; for an API or version sluice does not
// serve it is read as v1 (what Kafka does to answer ApiVersions with UNSUPPORTED_VERSION).
// On return `r` is positioned at the request body.
Result<RequestHeader> DecodeRequestHeader(Reader& r);
void EncodeRequestHeader(Writer& w, const RequestHeader& h);

void EncodeResponseHeader(Writer& w, ApiKey key, int16_t version, int32_t correlation_id);
// Reads a response header (clients and tests).
Result<int32_t> DecodeResponseHeader(Reader& r, ApiKey key, int16_t version);

}  // namespace sluice::kafka
