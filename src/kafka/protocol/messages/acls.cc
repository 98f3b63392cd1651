// Codecs of the ACL APIs; field order and versions follow Kafka's JSON definitions
// (acls.h). Pattern type fields exist from v1; flexible versions from v2.
#include "kafka/protocol/messages/acls.h"

#include "kafka/protocol/messages/codec_util.h"

namespace sluice::kafka {
namespace {

using namespace codec;

constexpr ApiSpec kDescribeAcls{"DescribeAcls", 3, 2};
constexpr ApiSpec kCreateAcls{"CreateAcls", 3, 2};
constexpr ApiSpec kDeleteAcls{"DeleteAcls", 3, 2};

// The first version with a pattern type field, in all three APIs.
constexpr int16_t kPatternTypeFrom = 1;

// The bytes a pattern type takes in `version`.
constexpr size_t PatternBytes(int16_t version) { return version >= kPatternTypeFrom ? 1 : 0; }

}  // namespace

// ---------------------------------------------------------------- DescribeAcls

Status DescribeAclsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeAcls, "Request", version));
  *this = {};
  const bool f = version >= kDescribeAcls.flexible_from;
  resource_type_filter = r.Int8("resource type filter");
  resource_name_filter = r.NullableString(f, "resource name filter");
  if (version >= kPatternTypeFrom) pattern_type_filter = r.Int8("pattern type filter");
  principal_filter = r.NullableString(f, "principal filter");
  host_filter = r.NullableString(f, "host filter");
  operation = r.Int8("operation");
  permission_type = r.Int8("permission type");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeAcls, "Request", version);
}

void DescribeAclsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeAcls.flexible_from;
  w.Int8(resource_type_filter);
  w.NullableString(f, resource_name_filter);
  if (version >= kPatternTypeFrom) w.Int8(pattern_type_filter);  // Kafka refuses != 3 at v0
  w.NullableString(f, principal_filter);
  w.NullableString(f, host_filter);
  w.Int8(operation);
  w.Int8(permission_type);
  WriteTags(w, f, unknown_tags);
}

Status DescribeAclsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeAcls, "Response", version));
  *this = {};
  const bool f = version >= kDescribeAcls.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  error_code = ReadErrorCode(r, "error code");
  error_message = r.NullableString(f, "error message");
  const size_t resource_min = 1 + MinString(f) + PatternBytes(version) + MinArray(f) + MinTags(f);
  const size_t acl_min = 2 * MinString(f) + 1 + 1 + MinTags(f);
  ReadArray(r, f, "resources", resource_min, resources, [&](DescribeAclsResource& res) {
    res.resource_type = r.Int8("resource type");
    res.resource_name = r.String(f, "resource name");
    if (version >= kPatternTypeFrom) res.pattern_type = r.Int8("pattern type");
    ReadArray(r, f, "acls", acl_min, res.acls, [&](AclDescription& a) {
      a.principal = r.String(f, "principal");
      a.host = r.String(f, "host");
      a.operation = r.Int8("operation");
      a.permission_type = r.Int8("permission type");
      ReadTags(r, f, &a.unknown_tags);
    });
    ReadTags(r, f, &res.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeAcls, "Response", version);
}

void DescribeAclsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeAcls.flexible_from;
  w.Int32(throttle_time_ms);
  WriteErrorCode(w, error_code);
  w.NullableString(f, error_message);
  WriteArray(w, f, resources, [&](const DescribeAclsResource& res) {
    w.Int8(res.resource_type);
    w.String(f, res.resource_name);
    if (version >= kPatternTypeFrom) w.Int8(res.pattern_type);  // Kafka refuses != 3 at v0
    WriteArray(w, f, res.acls, [&](const AclDescription& a) {
      w.String(f, a.principal);
      w.String(f, a.host);
      w.Int8(a.operation);
      w.Int8(a.permission_type);
      WriteTags(w, f, a.unknown_tags);
    });
    WriteTags(w, f, res.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- CreateAcls

Status CreateAclsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kCreateAcls, "Request", version));
  *this = {};
  const bool f = version >= kCreateAcls.flexible_from;
  const size_t creation_min = 1 + 3 * MinString(f) + PatternBytes(version) + 1 + 1 + MinTags(f);
  ReadArray(r, f, "creations", creation_min, creations, [&](AclCreation& c) {
    c.resource_type = r.Int8("resource type");
    c.resource_name = r.String(f, "resource name");
    if (version >= kPatternTypeFrom) c.resource_pattern_type = r.Int8("resource pattern type");
    c.principal = r.String(f, "principal");
    c.host = r.String(f, "host");
    c.operation = r.Int8("operation");
    c.permission_type = r.Int8("permission type");
    ReadTags(r, f, &c.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kCreateAcls, "Request", version);
}

void CreateAclsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kCreateAcls.flexible_from;
  WriteArray(w, f, creations, [&](const AclCreation& c) {
    w.Int8(c.resource_type);
    w.String(f, c.resource_name);
    if (version >= kPatternTypeFrom) w.Int8(c.resource_pattern_type);  // Kafka refuses != 3 at v0
    w.String(f, c.principal);
    w.String(f, c.host);
    w.Int8(c.operation);
    w.Int8(c.permission_type);
    WriteTags(w, f, c.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

Status CreateAclsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kCreateAcls, "Response", version));
  *this = {};
  const bool f = version >= kCreateAcls.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  ReadArray(r, f, "results", 2 + MinString(f) + MinTags(f), results, [&](AclCreationResult& res) {
    res.error_code = ReadErrorCode(r, "error code");
    res.error_message = r.NullableString(f, "error message");
    ReadTags(r, f, &res.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kCreateAcls, "Response", version);
}

void CreateAclsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kCreateAcls.flexible_from;
  w.Int32(throttle_time_ms);
  WriteArray(w, f, results, [&](const AclCreationResult& res) {
    WriteErrorCode(w, res.error_code);
    w.NullableString(f, res.error_message);
    WriteTags(w, f, res.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- DeleteAcls

Status DeleteAclsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDeleteAcls, "Request", version));
  *this = {};
  const bool f = version >= kDeleteAcls.flexible_from;
  const size_t filter_min = 1 + 3 * MinString(f) + PatternBytes(version) + 1 + 1 + MinTags(f);
  ReadArray(r, f, "filters", filter_min, filters, [&](DeleteAclsFilter& d) {
    d.resource_type_filter = r.Int8("resource type filter");
    d.resource_name_filter = r.NullableString(f, "resource name filter");
    if (version >= kPatternTypeFrom) d.pattern_type_filter = r.Int8("pattern type filter");
    d.principal_filter = r.NullableString(f, "principal filter");
    d.host_filter = r.NullableString(f, "host filter");
    d.operation = r.Int8("operation");
    d.permission_type = r.Int8("permission type");
    ReadTags(r, f, &d.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDeleteAcls, "Request", version);
}

void DeleteAclsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDeleteAcls.flexible_from;
  WriteArray(w, f, filters, [&](const DeleteAclsFilter& d) {
    w.Int8(d.resource_type_filter);
    w.NullableString(f, d.resource_name_filter);
    if (version >= kPatternTypeFrom) w.Int8(d.pattern_type_filter);  // Kafka refuses != 3 at v0
    w.NullableString(f, d.principal_filter);
    w.NullableString(f, d.host_filter);
    w.Int8(d.operation);
    w.Int8(d.permission_type);
    WriteTags(w, f, d.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

Status DeleteAclsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDeleteAcls, "Response", version));
  *this = {};
  const bool f = version >= kDeleteAcls.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  const size_t result_min = 2 + MinString(f) + MinArray(f) + MinTags(f);
  const size_t matching_min =
      2 + MinString(f) + 1 + 3 * MinString(f) + PatternBytes(version) + 1 + 1 + MinTags(f);
  ReadArray(r, f, "filter results", result_min, filter_results, [&](DeleteAclsFilterResult& res) {
    res.error_code = ReadErrorCode(r, "filter error code");
    res.error_message = r.NullableString(f, "filter error message");
    ReadArray(r, f, "matching acls", matching_min, res.matching_acls,
              [&](DeleteAclsMatchingAcl& m) {
                m.error_code = ReadErrorCode(r, "acl error code");
                m.error_message = r.NullableString(f, "acl error message");
                m.resource_type = r.Int8("resource type");
                m.resource_name = r.String(f, "resource name");
                if (version >= kPatternTypeFrom) m.pattern_type = r.Int8("pattern type");
                m.principal = r.String(f, "principal");
                m.host = r.String(f, "host");
                m.operation = r.Int8("operation");
                m.permission_type = r.Int8("permission type");
                ReadTags(r, f, &m.unknown_tags);
              });
    ReadTags(r, f, &res.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDeleteAcls, "Response", version);
}

void DeleteAclsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDeleteAcls.flexible_from;
  w.Int32(throttle_time_ms);
  WriteArray(w, f, filter_results, [&](const DeleteAclsFilterResult& res) {
    WriteErrorCode(w, res.error_code);
    w.NullableString(f, res.error_message);
    WriteArray(w, f, res.matching_acls, [&](const DeleteAclsMatchingAcl& m) {
      WriteErrorCode(w, m.error_code);
      w.NullableString(f, m.error_message);
      w.Int8(m.resource_type);
      w.String(f, m.resource_name);
      if (version >= kPatternTypeFrom) w.Int8(m.pattern_type);  // Kafka refuses != 3 at v0
      w.String(f, m.principal);
      w.String(f, m.host);
      w.Int8(m.operation);
      w.Int8(m.permission_type);
      WriteTags(w, f, m.unknown_tags);
    });
    WriteTags(w, f, res.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

}  // namespace sluice::kafka
