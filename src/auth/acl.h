// Kafka's ACLs (docs/design/0019-security.md, phase E), as Kafka's StandardAuthorizer
// defines them: bindings of a resource pattern (type, name, LITERAL or PREFIXED) to an
// entry (principal, host, operation, ALLOW or DENY); filters that select bindings
// (DescribeAcls, DeleteAcls: ANY and MATCH); and the decision for one request:
//
//   - a super user may do anything;
//   - a DENY binding that matches the principal ("User:alice" or "User:*"), the host (or
//     "*") and the operation (or ALL) on the resource wins;
//   - else an ALLOW binding that matches allows; DESCRIBE is also allowed by READ, WRITE,
//     DELETE and ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS;
//   - a resource no binding names at all is allowed only with
//     allow.everyone.if.no.acl.found.
//
// A binding's resource matches literally (its name, or "*" for every name) or by prefix.
// Thread-safety: AclSet is immutable; AclStore (acl_store.h) swaps sets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::auth {

// Kafka's codes (org.apache.kafka.common.resource / acl).
enum class ResourceType : int8_t {
  kUnknown = 0,
  kAny = 1,
  kTopic = 2,
  kGroup = 3,
  kCluster = 4,
  kTransactionalId = 5,
  kDelegationToken = 6,
  kUser = 7,
};
enum class PatternType : int8_t { kUnknown = 0, kAny = 1, kMatch = 2, kLiteral = 3, kPrefixed = 4 };
enum class AclOperation : int8_t {
  kUnknown = 0,
  kAny = 1,
  kAll = 2,
  kRead = 3,
  kWrite = 4,
  kCreate = 5,
  kDelete = 6,
  kAlter = 7,
  kDescribe = 8,
  kClusterAction = 9,
  kDescribeConfigs = 10,
  kAlterConfigs = 11,
  kIdempotentWrite = 12,
  kCreateTokens = 13,
  kDescribeTokens = 14,
};
enum class AclPermission : int8_t { kUnknown = 0, kAny = 1, kDeny = 2, kAllow = 3 };

inline constexpr std::string_view kWildcard = "*";
inline constexpr std::string_view kClusterName = "kafka-cluster";

std::string_view Name(ResourceType t);  // "TOPIC"
std::string_view Name(PatternType t);
std::string_view Name(AclOperation o);
std::string_view Name(AclPermission p);

// The operations a resource type takes besides ALL (Kafka's AclEntry.supportedOperations).
std::vector<AclOperation> SupportedOperations(ResourceType t);

struct AclBinding {
  ResourceType resource_type = ResourceType::kTopic;
  std::string resource_name;
  PatternType pattern_type = PatternType::kLiteral;
  std::string principal;  // "User:alice", "User:*"
  std::string host = "*";
  AclOperation operation = AclOperation::kRead;
  AclPermission permission = AclPermission::kAllow;
  bool operator==(const AclBinding&) const = default;
  auto operator<=>(const AclBinding&) const = default;
};

// What CreateAcls accepts, with Kafka's messages: no ANY/UNKNOWN/MATCH values, a principal
// "Type:name", a non-empty resource name ("kafka-cluster" for the cluster), a host.
Status ValidateBinding(const AclBinding& b);

// DescribeAcls / DeleteAcls: nullopt strings match anything; ANY matches any value;
// PatternType MATCH selects the bindings that would apply to the resource named (literal
// equal or "*", prefixed ones that prefix it).
struct AclFilter {
  ResourceType resource_type = ResourceType::kAny;
  std::optional<std::string> resource_name;
  PatternType pattern_type = PatternType::kAny;
  std::optional<std::string> principal;
  std::optional<std::string> host;
  AclOperation operation = AclOperation::kAny;
  AclPermission permission = AclPermission::kAny;

  bool Matches(const AclBinding& b) const;
  // InvalidArgument when a field holds UNKNOWN (Kafka refuses such filters).
  Status Validate() const;
};

// One request to decide.
struct AclRequest {
  std::string principal;  // "User:alice"; "User:ANONYMOUS" when unauthenticated
  std::string host;       // the client's address
  ResourceType resource_type = ResourceType::kTopic;
  std::string resource_name;
  AclOperation operation = AclOperation::kRead;
};

class AclSet {
 public:
  AclSet() = default;
  explicit AclSet(std::vector<AclBinding> bindings);

  const std::vector<AclBinding>& bindings() const { return bindings_; }
  // The decision for `r` as the class comment says (super users are the caller's).
  bool Authorize(const AclRequest& r, bool allow_if_no_acl) const;
  // Whether the principal may do `op` on some resource of the type (Kafka's
  // authorizeByResourceType: an ALLOW binding for it not cancelled by a DENY of the same
  // pattern or of "*"), e.g. IDEMPOTENT_WRITE from WRITE on any topic.
  bool AuthorizeAny(const std::string& principal, const std::string& host, ResourceType type,
                    AclOperation op) const;

  // The JSON kept on disk or in etcd, and back (errors name the binding and the field).
  std::string ToJson() const;
  static Result<AclSet> FromJson(std::string_view json);

 private:
  std::vector<AclBinding> bindings_;  // sorted, no duplicates
};

}  // namespace sluice::auth
