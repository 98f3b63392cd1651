// The ACL APIs: DescribeAcls (key 29), CreateAcls (30) and DeleteAcls (31), v0-3, flexible
// from v2. Written by hand from Kafka's JSON definitions, with the rules of the other
// message files: every field in order, unknown tagged fields kept, a decode error for any
// malformed input.
//
// Version differences: v0 has no pattern type (ResourcePatternType, PatternTypeFilter,
// PatternType are v1+); a v0 decode leaves them at the JSON's default, 3 (LITERAL), which
// is also what Kafka assumes for v0. Kafka refuses to encode a pattern type other than 3 at
// v0 (the fields are not ignorable); Encode here cannot fail and drops it, so whoever
// answers a v0 request must leave out bindings that are not LITERAL. v3 only adds the USER
// resource type (a value, not a field). The int8 codes (resource type, pattern type,
// operation, permission type) are kept as numbers: auth/acl.h gives them meaning.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kafka/protocol/api.h"
#include "kafka/protocol/wire.h"

namespace sluice::kafka {

// The JSON's default of every pattern type field: LITERAL.
inline constexpr int8_t kLiteralPatternType = 3;

struct DescribeAclsRequest {
  int8_t resource_type_filter = 0;
  std::optional<std::string> resource_name_filter;   // null: any name
  int8_t pattern_type_filter = kLiteralPatternType;  // v1+
  std::optional<std::string> principal_filter;       // null: any principal
  std::optional<std::string> host_filter;            // null: any host
  int8_t operation = 0;
  int8_t permission_type = 0;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeAclsRequest&) const = default;
};

struct DescribeAclsResponse {
  struct AclDescription {
    std::string principal;
    std::string host;
    int8_t operation = 0;
    int8_t permission_type = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const AclDescription&) const = default;
  };
  struct DescribeAclsResource {
    int8_t resource_type = 0;
    std::string resource_name;
    int8_t pattern_type = kLiteralPatternType;  // v1+
    std::vector<AclDescription> acls;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const DescribeAclsResource&) const = default;
  };
  int32_t throttle_time_ms = 0;
  ErrorCode error_code = ErrorCode::kNone;
  std::optional<std::string> error_message;
  std::vector<DescribeAclsResource> resources;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeAclsResponse&) const = default;
};

struct CreateAclsRequest {
  struct AclCreation {
    int8_t resource_type = 0;
    std::string resource_name;
    int8_t resource_pattern_type = kLiteralPatternType;  // v1+
    std::string principal;
    std::string host;
    int8_t operation = 0;
    int8_t permission_type = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const AclCreation&) const = default;
  };
  std::vector<AclCreation> creations;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const CreateAclsRequest&) const = default;
};

struct CreateAclsResponse {
  struct AclCreationResult {
    ErrorCode error_code = ErrorCode::kNone;
    std::optional<std::string> error_message;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const AclCreationResult&) const = default;
  };
  int32_t throttle_time_ms = 0;
  std::vector<AclCreationResult> results;  // one per creation, in order
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const CreateAclsResponse&) const = default;
};

struct DeleteAclsRequest {
  struct DeleteAclsFilter {
    int8_t resource_type_filter = 0;
    std::optional<std::string> resource_name_filter;   // null: any name
    int8_t pattern_type_filter = kLiteralPatternType;  // v1+
    std::optional<std::string> principal_filter;       // null: any principal
    std::optional<std::string> host_filter;            // null: any host
    int8_t operation = 0;
    int8_t permission_type = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const DeleteAclsFilter&) const = default;
  };
  std::vector<DeleteAclsFilter> filters;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DeleteAclsRequest&) const = default;
};

struct DeleteAclsResponse {
  struct DeleteAclsMatchingAcl {
    ErrorCode error_code = ErrorCode::kNone;
    std::optional<std::string> error_message;
    int8_t resource_type = 0;
    std::string resource_name;
    int8_t pattern_type = kLiteralPatternType;  // v1+
    std::string principal;
    std::string host;
    int8_t operation = 0;
    int8_t permission_type = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const DeleteAclsMatchingAcl&) const = default;
  };
  struct DeleteAclsFilterResult {
    ErrorCode error_code = ErrorCode::kNone;
    std::optional<std::string> error_message;
    std::vector<DeleteAclsMatchingAcl> matching_acls;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const DeleteAclsFilterResult&) const = default;
  };
  int32_t throttle_time_ms = 0;
  std::vector<DeleteAclsFilterResult> filter_results;  // one per filter, in order
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DeleteAclsResponse&) const = default;
};

}  // namespace sluice::kafka
