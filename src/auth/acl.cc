#include "auth/acl.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

namespace sluice::auth {
namespace {

using Json = nlohmann::json;

constexpr std::array<std::string_view, 8> kResourceNames = {
    "UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"};
constexpr std::array<std::string_view, 5> kPatternNames = {"UNKNOWN", "ANY", "MATCH", "LITERAL",
                                                           "PREFIXED"};
constexpr std::array<std::string_view, 15> kOperationNames = {"UNKNOWN",
                                                              "ANY",
                                                              "ALL",
                                                              "READ",
                                                              "WRITE",
                                                              "CREATE",
                                                              "DELETE",
                                                              "ALTER",
                                                              "DESCRIBE",
                                                              "CLUSTER_ACTION",
                                                              "DESCRIBE_CONFIGS",
                                                              "ALTER_CONFIGS",
                                                              "IDEMPOTENT_WRITE",
                                                              "CREATE_TOKENS",
                                                              "DESCRIBE_TOKENS"};
constexpr std::array<std::string_view, 4> kPermissionNames = {"UNKNOWN", "ANY", "DENY", "ALLOW"};

template <size_t N>
std::string_view NameOf(const std::array<std::string_view, N>& names, int8_t v) {
  return v >= 0 && static_cast<size_t>(v) < N ? names[static_cast<size_t>(v)] : "UNKNOWN";
}

template <typename E, size_t N>
std::optional<E> FromName(const std::array<std::string_view, N>& names, std::string_view s) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == s) return static_cast<E>(i);
  }
  return std::nullopt;
}

}  // namespace

std::vector<AclOperation> SupportedOperations(ResourceType t) {
  using O = AclOperation;
  switch (t) {
    case ResourceType::kTopic:
      return {O::kRead,   O::kWrite, O::kCreate,          O::kDescribe,
              O::kDelete, O::kAlter, O::kDescribeConfigs, O::kAlterConfigs};
    case ResourceType::kGroup:
      return {O::kRead, O::kDescribe, O::kDelete};
    case ResourceType::kCluster:
      return {O::kCreate,          O::kClusterAction, O::kDescribeConfigs, O::kAlterConfigs,
              O::kIdempotentWrite, O::kAlter,         O::kDescribe};
    case ResourceType::kTransactionalId:
      return {O::kDescribe, O::kWrite};
    case ResourceType::kDelegationToken:
      return {O::kDescribe};
    case ResourceType::kUser:
      return {O::kCreateTokens, O::kDescribeTokens};
    default:
      return {};
  }
}

namespace {

bool PrincipalMatches(const std::string& acl, const std::string& principal) {
  return acl == principal || acl == "User:*";
}

bool HostMatches(const std::string& acl, const std::string& host) {
  return acl == kWildcard || acl == host;
}

// Whether binding `b`'s pattern applies to resource (type, name).
bool Applies(const AclBinding& b, ResourceType type, std::string_view name) {
  if (b.resource_type != type) return false;
  if (b.pattern_type == PatternType::kLiteral) {
    return b.resource_name == name || b.resource_name == kWildcard;
  }
  return b.pattern_type == PatternType::kPrefixed && name.starts_with(b.resource_name);
}

// Whether an ALLOW binding of operation `acl` grants `op`.
bool Grants(AclOperation acl, AclOperation op) {
  using O = AclOperation;
  if (acl == O::kAll || acl == op) return true;
  if (op == O::kDescribe) {
    return acl == O::kRead || acl == O::kWrite || acl == O::kDelete || acl == O::kAlter;
  }
  return op == O::kDescribeConfigs && acl == O::kAlterConfigs;
}

}  // namespace

std::string_view Name(ResourceType t) { return NameOf(kResourceNames, static_cast<int8_t>(t)); }
std::string_view Name(PatternType t) { return NameOf(kPatternNames, static_cast<int8_t>(t)); }
std::string_view Name(AclOperation o) { return NameOf(kOperationNames, static_cast<int8_t>(o)); }
std::string_view Name(AclPermission p) { return NameOf(kPermissionNames, static_cast<int8_t>(p)); }

Status ValidateBinding(const AclBinding& b) {
  if (b.pattern_type != PatternType::kLiteral && b.pattern_type != PatternType::kPrefixed) {
    return InvalidArgumentError("Invalid patternType {}", Name(b.pattern_type));
  }
  if (b.resource_type == ResourceType::kUnknown || b.resource_type == ResourceType::kAny) {
    return InvalidArgumentError("Invalid resourceType {}", Name(b.resource_type));
  }
  if (b.operation == AclOperation::kUnknown || b.operation == AclOperation::kAny) {
    return InvalidArgumentError("Invalid operation {}", Name(b.operation));
  }
  if (b.permission != AclPermission::kAllow && b.permission != AclPermission::kDeny) {
    return InvalidArgumentError("Invalid permissionType {}", Name(b.permission));
  }
  if (b.resource_name.empty()) return InvalidArgumentError("Resource name should not be empty");
  if (b.resource_type == ResourceType::kCluster && b.resource_name != kClusterName) {
    return InvalidArgumentError("The only valid name for the CLUSTER resource is {}", kClusterName);
  }
  const size_t colon = b.principal.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == b.principal.size()) {
    return InvalidArgumentError(
        "Could not parse principal from `{}` (no colon is present separating the principal "
        "type from the principal name)",
        b.principal.substr(0, 256));
  }
  if (b.host.empty()) return InvalidArgumentError("Host should not be empty (* for every host)");
  if (b.operation != AclOperation::kAll) {
    const std::vector<AclOperation> ops = SupportedOperations(b.resource_type);
    if (std::find(ops.begin(), ops.end(), b.operation) == ops.end()) {
      std::string names;
      for (AclOperation o : ops) names += fmt::format("{}{}", names.empty() ? "" : ", ", Name(o));
      return InvalidArgumentError("ResourceType {} only supports operations {}",
                                  Name(b.resource_type), names);
    }
  }
  return Status::OK();
}

bool AclFilter::Matches(const AclBinding& b) const {
  if (resource_type != ResourceType::kAny && resource_type != b.resource_type) return false;
  if (pattern_type == PatternType::kMatch) {
    if (resource_name.has_value() && !Applies(b, b.resource_type, *resource_name)) return false;
  } else {
    if (pattern_type != PatternType::kAny && pattern_type != b.pattern_type) return false;
    if (resource_name.has_value() && *resource_name != b.resource_name) return false;
  }
  if (principal.has_value() && *principal != b.principal) return false;
  if (host.has_value() && *host != b.host) return false;
  if (operation != AclOperation::kAny && operation != b.operation) return false;
  return permission == AclPermission::kAny || permission == b.permission;
}

Status AclFilter::Validate() const {
  if (resource_type == ResourceType::kUnknown)
    return InvalidArgumentError("Invalid resourceType UNKNOWN");
  if (pattern_type == PatternType::kUnknown)
    return InvalidArgumentError("Invalid patternType UNKNOWN");
  if (operation == AclOperation::kUnknown) return InvalidArgumentError("Invalid operation UNKNOWN");
  if (permission == AclPermission::kUnknown) {
    return InvalidArgumentError("Invalid permissionType UNKNOWN");
  }
  return Status::OK();
}

AclSet::AclSet(std::vector<AclBinding> bindings) : bindings_(std::move(bindings)) {
  std::sort(bindings_.begin(), bindings_.end());
  bindings_.erase(std::unique(bindings_.begin(), bindings_.end()), bindings_.end());
}

bool AclSet::Authorize(const AclRequest& r, bool allow_if_no_acl) const {
  bool named = false, allowed = false;
  for (const AclBinding& b : bindings_) {
    if (!Applies(b, r.resource_type, r.resource_name)) continue;
    named = true;
    if (!PrincipalMatches(b.principal, r.principal) || !HostMatches(b.host, r.host)) continue;
    if (b.permission == AclPermission::kDeny) {
      if (b.operation == AclOperation::kAll || b.operation == r.operation) return false;
    } else if (Grants(b.operation, r.operation)) {
      allowed = true;
    }
  }
  return allowed || (!named && allow_if_no_acl);
}

bool AclSet::AuthorizeAny(const std::string& principal, const std::string& host, ResourceType type,
                          AclOperation op) const {
  auto matches = [&](const AclBinding& b, AclPermission p) {
    return b.resource_type == type && b.permission == p &&
           PrincipalMatches(b.principal, principal) && HostMatches(b.host, host) &&
           (p == AclPermission::kAllow ? Grants(b.operation, op)
                                       : b.operation == AclOperation::kAll || b.operation == op);
  };
  for (const AclBinding& allow : bindings_) {
    if (!matches(allow, AclPermission::kAllow)) continue;
    bool cancelled = false;
    for (const AclBinding& deny : bindings_) {
      if (!matches(deny, AclPermission::kDeny)) continue;
      const bool everything =
          deny.pattern_type == PatternType::kLiteral && deny.resource_name == kWildcard;
      const bool same =
          deny.pattern_type == allow.pattern_type && deny.resource_name == allow.resource_name;
      const bool wider = deny.pattern_type == PatternType::kPrefixed &&
                         allow.resource_name.starts_with(deny.resource_name);
      if (everything || same || wider) {
        cancelled = true;
        break;
      }
    }
    if (!cancelled) return true;
  }
  return false;
}

std::string AclSet::ToJson() const {
  Json acls = Json::array();
  for (const AclBinding& b : bindings_) {
    acls.push_back(Json{{"resource_type", Name(b.resource_type)},
                        {"resource_name", b.resource_name},
                        {"pattern_type", Name(b.pattern_type)},
                        {"principal", b.principal},
                        {"host", b.host},
                        {"operation", Name(b.operation)},
                        {"permission", Name(b.permission)}});
  }
  return Json{{"version", 1}, {"acls", std::move(acls)}}.dump(1) + "\n";
}

Result<AclSet> AclSet::FromJson(std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return AclSet();
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgumentError("acls: not a JSON object");
  auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != 1) {
    return InvalidArgumentError("acls: \"version\" is not 1");
  }
  auto all = j.find("acls");
  if (all == j.end() || !all->is_array()) return InvalidArgumentError("acls: no \"acls\" array");
  if (all->size() > 1'000'000) return InvalidArgumentError("acls: more than 1000000 bindings");
  std::vector<AclBinding> out;
  for (size_t i = 0; i < all->size(); ++i) {
    const Json& e = (*all)[i];
    if (!e.is_object()) return InvalidArgumentError("acls: binding {} is not an object", i);
    auto field = [&](const char* name) -> Result<std::string> {
      auto it = e.find(name);
      if (it == e.end() || !it->is_string()) {
        return InvalidArgumentError("acls: binding {} has no \"{}\" string", i, name);
      }
      return it->get<std::string>();
    };
    AclBinding b;
    ASSIGN_OR_RETURN(std::string type, field("resource_type"));
    ASSIGN_OR_RETURN(b.resource_name, field("resource_name"));
    ASSIGN_OR_RETURN(std::string pattern, field("pattern_type"));
    ASSIGN_OR_RETURN(b.principal, field("principal"));
    ASSIGN_OR_RETURN(b.host, field("host"));
    ASSIGN_OR_RETURN(std::string op, field("operation"));
    ASSIGN_OR_RETURN(std::string permission, field("permission"));
    auto t = FromName<ResourceType>(kResourceNames, type);
    auto p = FromName<PatternType>(kPatternNames, pattern);
    auto o = FromName<AclOperation>(kOperationNames, op);
    auto m = FromName<AclPermission>(kPermissionNames, permission);
    if (!t || !p || !o || !m) {
      return InvalidArgumentError(
          "acls: binding {} has an unknown type, pattern, operation or "
          "permission name",
          i);
    }
    b.resource_type = *t;
    b.pattern_type = *p;
    b.operation = *o;
    b.permission = *m;
    if (Status st = ValidateBinding(b); !st.ok()) {
      return InvalidArgumentError("acls: binding {}: {}", i, st.message());
    }
    out.push_back(std::move(b));
  }
  return AclSet(std::move(out));
}

}  // namespace sluice::auth
