#include "kafka/protocol/header.h"

namespace sluice::kafka {

Result<RequestHeader> DecodeRequestHeader(Reader& r) {
  RequestHeader h;
  h.api_key = r.Int16("request api key");
  h.api_version = r.Int16("request api version");
  h.correlation_id = r.Int32("correlation id");
  h.client_id = r.NullableString(/*flexible=*/false, "client id");
  auto api = FindApi(h.api_key);
  h.header_version = api && h.api_version >= api->min && h.api_version <= api->max &&
                             IsFlexible(*api, h.api_version)
                         ? 2
                         : 1;
  if (h.header_version == 2) r.TaggedFields([](uint32_t, Reader&) { return false; });
  if (!r.ok()) return r.status().WithContext("request header");
  return h;
}

void EncodeRequestHeader(Writer& w, const RequestHeader& h) {
  w.Int16(h.api_key);
  w.Int16(h.api_version);
  w.Int32(h.correlation_id);
  w.NullableString(false, h.client_id);
  if (h.header_version == 2) w.EmptyTaggedFields();
}

void EncodeResponseHeader(Writer& w, ApiKey key, int16_t version, int32_t correlation_id) {
  w.Int32(correlation_id);
  if (ResponseHeaderVersion(key, version) == 1) w.EmptyTaggedFields();
}

Result<int32_t> DecodeResponseHeader(Reader& r, ApiKey key, int16_t version) {
  int32_t id = r.Int32("correlation id");
  if (ResponseHeaderVersion(key, version) == 1)
    r.TaggedFields([](uint32_t, Reader&) { return false; });
  if (!r.ok()) return r.status().WithContext("response header");
  return id;
}

}  // namespace sluice::kafka
