#include "cli/acl_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "auth/acl.h"
#include "base/strings.h"
#include "kafka/protocol/messages/acls.h"

namespace sluice::cli {
namespace {

using auth::AclBinding;
using auth::AclOperation;
using auth::AclPermission;
using auth::PatternType;
using auth::ResourceType;
using kafka::ErrorCode;

const std::string kClientId = "sluice-acl";
// v1: pattern types (PREFIXED); the last version before the flexible encoding.
constexpr int16_t kVersion = 1;

int Fail(const std::string& message) {
  std::fprintf(stderr, "sluice acl: %s\n", message.c_str());
  return 1;
}

// "describe-configs", "DescribeConfigs", "describe_configs", "DESCRIBE_CONFIGS" → the
// canonical "DESCRIBE_CONFIGS".
std::string Canonical(std::string_view text) {
  bool lower = false, upper = false, separated = false;
  for (char c : text) {
    lower |= std::islower(static_cast<unsigned char>(c)) != 0;
    upper |= std::isupper(static_cast<unsigned char>(c)) != 0;
    separated |= c == '-' || c == '_';
  }
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (lower && upper && !separated && i > 0 && std::isupper(static_cast<unsigned char>(c))) {
      out += '_';  // CamelCase, as Kafka's tools print the names
    }
    out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out;
}

Result<AclOperation> ParseOperation(const std::string& text) {
  const std::string want = Canonical(text);
  for (int8_t v = static_cast<int8_t>(AclOperation::kAll);
       v <= static_cast<int8_t>(AclOperation::kDescribeTokens); ++v) {
    if (auth::Name(static_cast<AclOperation>(v)) == want) return static_cast<AclOperation>(v);
  }
  return InvalidArgumentError(
      "--operation '{}' is not one of ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, "
      "CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE",
      text);
}

Result<PatternType> ParsePattern(const std::string& text, PatternType otherwise, bool filter) {
  if (text.empty()) return otherwise;
  const std::string want = Canonical(text);
  if (want == "LITERAL") return PatternType::kLiteral;
  if (want == "PREFIXED") return PatternType::kPrefixed;
  if (filter && want == "ANY") return PatternType::kAny;
  if (filter && want == "MATCH") return PatternType::kMatch;
  return InvalidArgumentError("--resource-pattern-type '{}' is not {}", text,
                              filter ? "literal, prefixed, any or match" : "literal or prefixed");
}

// Kafka's principals are "Type:name" and the type is case-sensitive: "user:alice" would
// be stored and never match anyone.
Status CheckPrincipal(const std::string& p) {
  const size_t colon = p.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == p.size()) {
    return InvalidArgumentError("principal '{}' is not TYPE:NAME (User:alice, or User:* for all)",
                                p);
  }
  const std::string type = p.substr(0, colon);
  if (type != "User" && AsciiLower(type) == "user") {
    return InvalidArgumentError(
        "principal '{}': the type is case-sensitive, write User:{} (no client is '{}')", p,
        p.substr(colon + 1), p);
  }
  if (type != "User") {
    return InvalidArgumentError(
        "principal '{}': sluice's clients are all User: principals (SASL users, certificate "
        "names, User:ANONYMOUS)",
        p);
  }
  return Status::OK();
}

struct Resource {
  ResourceType type;
  std::string name;
};

std::vector<Resource> ResourcesOf(const AclFlags& f) {
  std::vector<Resource> out;
  if (f.topic.has_value()) out.push_back({ResourceType::kTopic, *f.topic});
  if (f.group.has_value()) out.push_back({ResourceType::kGroup, *f.group});
  if (f.transactional_id.has_value()) {
    out.push_back({ResourceType::kTransactionalId, *f.transactional_id});
  }
  if (f.cluster) out.push_back({ResourceType::kCluster, std::string(auth::kClusterName)});
  return out;
}

// The (resource, operation) pairs the flags name: --operation on every resource, or the
// --producer / --consumer sets.
Result<std::vector<std::pair<Resource, AclOperation>>> Grants(const AclFlags& f,
                                                              bool operations_needed) {
  std::vector<Resource> resources = ResourcesOf(f);
  std::vector<std::pair<Resource, AclOperation>> out;
  if (f.producer || f.consumer) {
    if (!f.operations.empty()) {
      return InvalidArgumentError("give --operation, or --producer / --consumer, not both");
    }
    if (!f.deny_principals.empty()) {
      return InvalidArgumentError("--producer and --consumer grant: use --allow-principal");
    }
    if (!f.topic.has_value()) return InvalidArgumentError("--producer and --consumer need --topic");
    if (f.cluster) return InvalidArgumentError("--producer and --consumer take no --cluster");
    const Resource topic{ResourceType::kTopic, *f.topic};
    if (f.producer) {
      for (AclOperation op :
           {AclOperation::kWrite, AclOperation::kDescribe, AclOperation::kCreate}) {
        out.emplace_back(topic, op);
      }
      if (f.transactional_id.has_value()) {
        const Resource txn{ResourceType::kTransactionalId, *f.transactional_id};
        out.emplace_back(txn, AclOperation::kWrite);
        out.emplace_back(txn, AclOperation::kDescribe);
      }
    }
    if (f.consumer) {
      if (!f.group.has_value()) return InvalidArgumentError("--consumer needs --group");
      out.emplace_back(topic, AclOperation::kRead);
      out.emplace_back(topic, AclOperation::kDescribe);
      out.emplace_back(Resource{ResourceType::kGroup, *f.group}, AclOperation::kRead);
    } else if (f.group.has_value()) {
      return InvalidArgumentError("--group goes with --consumer (or --operation)");
    }
    if (!f.producer && f.transactional_id.has_value()) {
      return InvalidArgumentError("--transactional-id goes with --producer (or --operation)");
    }
    return out;
  }
  if (f.operations.empty()) {
    if (operations_needed) {
      return InvalidArgumentError(
          "name what is allowed or denied: --operation (READ, WRITE, ...), or --producer / "
          "--consumer");
    }
    for (const Resource& r : resources) out.emplace_back(r, AclOperation::kAny);
    return out;
  }
  for (const std::string& text : f.operations) {
    ASSIGN_OR_RETURN(AclOperation op, ParseOperation(text));
    for (const Resource& r : resources) {
      std::vector<AclOperation> takes = auth::SupportedOperations(r.type);
      if (op != AclOperation::kAll && std::find(takes.begin(), takes.end(), op) == takes.end()) {
        std::vector<std::string> names;
        for (AclOperation t : takes) names.emplace_back(auth::Name(t));
        return InvalidArgumentError("{} {} takes ALL, {}; not {}", auth::Name(r.type), r.name,
                                    fmt::join(names, ", "), auth::Name(op));
      }
      out.emplace_back(r, op);
    }
  }
  return out;
}

// Who: (principal, host, permission) for each --allow-/--deny-principal and host.
struct Who {
  std::string principal;
  std::string host;
  AclPermission permission;
};

// A principal without --allow-host / --deny-host is "*", for add and remove alike (as
// kafka-acls.sh): remove does not take the bindings of other hosts unless asked.
Result<std::vector<Who>> WhoOf(const AclFlags& f) {
  std::vector<Who> out;
  auto add = [&](const std::vector<std::string>& principals, const std::vector<std::string>& hosts,
                 AclPermission permission) -> Status {
    for (const std::string& p : principals) {
      RETURN_IF_ERROR(CheckPrincipal(p));
      if (hosts.empty()) {
        out.push_back({p, "*", permission});
      }
      for (const std::string& h : hosts) {
        if (h.empty()) return InvalidArgumentError("an empty host (use * for every host)");
        if (h.find('/') != std::string::npos) {
          return InvalidArgumentError(
              "host '{}': Kafka's ACL hosts are single addresses or *, not networks", h);
        }
        out.push_back({p, h, permission});
      }
    }
    return Status::OK();
  };
  if (f.allow_principals.empty() && !f.allow_hosts.empty()) {
    return InvalidArgumentError("--allow-host goes with --allow-principal");
  }
  if (f.deny_principals.empty() && !f.deny_hosts.empty()) {
    return InvalidArgumentError("--deny-host goes with --deny-principal");
  }
  RETURN_IF_ERROR(add(f.allow_principals, f.allow_hosts, AclPermission::kAllow));
  RETURN_IF_ERROR(add(f.deny_principals, f.deny_hosts, AclPermission::kDeny));
  return out;
}

std::string Describe(ResourceType type, const std::string& name, PatternType pattern,
                     const std::string& principal, const std::string& host, AclOperation op,
                     AclPermission permission) {
  return fmt::format("{} {} from {} {} on {} {}{}", auth::Name(permission), principal, host,
                     auth::Name(op), auth::Name(type), name,
                     pattern == PatternType::kPrefixed ? " (prefixed)" : "");
}

std::string ErrorText(ErrorCode code, const std::optional<std::string>& message) {
  return fmt::format("{} (error {})", message.value_or("refused"), static_cast<int>(code));
}

}  // namespace

int RunAclAdd(const AclFlags& f) {
  auto pattern = ParsePattern(f.pattern_type, PatternType::kLiteral, false);
  if (!pattern.ok()) return Fail(pattern.status().message());
  if (ResourcesOf(f).empty()) {
    return Fail("name the resource: --topic, --group, --transactional-id or --cluster");
  }
  auto who = WhoOf(f);
  if (!who.ok()) return Fail(who.status().message());
  if (who->empty()) return Fail("name who: --allow-principal User:NAME or --deny-principal");
  auto grants = Grants(f, true);
  if (!grants.ok()) return Fail(grants.status().message());
  kafka::CreateAclsRequest req;
  std::vector<std::string> lines;
  for (const auto& [resource, op] : *grants) {
    for (const Who& w : *who) {
      kafka::CreateAclsRequest::AclCreation c;
      c.resource_type = static_cast<int8_t>(resource.type);
      c.resource_name = resource.name;
      c.resource_pattern_type = static_cast<int8_t>(*pattern);
      c.principal = w.principal;
      c.host = w.host;
      c.operation = static_cast<int8_t>(op);
      c.permission_type = static_cast<int8_t>(w.permission);
      req.creations.push_back(std::move(c));
      lines.push_back(
          Describe(resource.type, resource.name, *pattern, w.principal, w.host, op, w.permission));
    }
  }
  auto conn = ConnectAdmin(f.connection);
  if (!conn.ok()) return Fail(conn.status().message());
  auto resp =
      Ask<kafka::CreateAclsResponse>(**conn, kafka::ApiKey::kCreateAcls, req, kClientId, kVersion);
  if (!resp.ok()) return Fail(resp.status().message());
  if (resp->results.size() != lines.size()) {
    return Fail(fmt::format("the broker answered {} results for {} ACLs", resp->results.size(),
                            lines.size()));
  }
  int rc = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& r = resp->results[i];
    if (r.error_code == ErrorCode::kNone) {
      std::printf("added: %s\n", lines[i].c_str());
    } else {
      std::fprintf(stderr, "sluice acl: not added: %s: %s\n", lines[i].c_str(),
                   ErrorText(r.error_code, r.error_message).c_str());
      rc = 1;
    }
  }
  return rc;
}

int RunAclRemove(const AclFlags& f) {
  const bool named_resource = !ResourcesOf(f).empty();
  auto pattern = ParsePattern(f.pattern_type,
                              named_resource ? PatternType::kLiteral : PatternType::kAny, true);
  if (!pattern.ok()) return Fail(pattern.status().message());
  auto who = WhoOf(f);
  if (!who.ok()) return Fail(who.status().message());
  if (!named_resource && who->empty()) {
    return Fail(
        "name what to remove: a resource (--topic, --group, --transactional-id, --cluster) "
        "and/or a principal (--allow-principal, --deny-principal)");
  }
  std::vector<std::pair<Resource, AclOperation>> grants;
  if (named_resource) {
    auto g = Grants(f, false);
    if (!g.ok()) return Fail(g.status().message());
    grants = std::move(g).value();
  } else {
    if (f.producer || f.consumer) return Fail("--producer and --consumer need --topic");
    AclOperation op = AclOperation::kAny;
    if (f.operations.size() > 1) return Fail("without a resource, give one --operation at most");
    if (f.operations.size() == 1) {
      auto parsed = ParseOperation(f.operations[0]);
      if (!parsed.ok()) return Fail(parsed.status().message());
      op = *parsed;
    }
    grants.emplace_back(Resource{ResourceType::kAny, ""}, op);
  }
  kafka::DeleteAclsRequest req;
  auto add_filter = [&](const Resource& r, AclOperation op, const Who* w) {
    kafka::DeleteAclsRequest::DeleteAclsFilter filter;
    filter.resource_type_filter = static_cast<int8_t>(r.type);
    if (r.type != ResourceType::kAny) filter.resource_name_filter = r.name;
    filter.pattern_type_filter = static_cast<int8_t>(*pattern);
    filter.operation = static_cast<int8_t>(op);
    // --producer / --consumer only ever grant: their filters take ALLOW bindings alone,
    // never a DENY someone set on the same resource.
    const AclPermission any =
        f.producer || f.consumer ? AclPermission::kAllow : AclPermission::kAny;
    filter.permission_type = static_cast<int8_t>(w ? w->permission : any);
    if (w != nullptr) {
      filter.principal_filter = w->principal;
      filter.host_filter = w->host;
    }
    req.filters.push_back(std::move(filter));
  };
  for (const auto& [resource, op] : grants) {
    if (who->empty()) add_filter(resource, op, nullptr);
    for (const Who& w : *who) add_filter(resource, op, &w);
  }
  auto conn = ConnectAdmin(f.connection);
  if (!conn.ok()) return Fail(conn.status().message());
  auto resp =
      Ask<kafka::DeleteAclsResponse>(**conn, kafka::ApiKey::kDeleteAcls, req, kClientId, kVersion);
  if (!resp.ok()) return Fail(resp.status().message());
  int rc = 0;
  size_t removed = 0;
  for (const auto& result : resp->filter_results) {
    if (result.error_code != ErrorCode::kNone) {
      std::fprintf(stderr, "sluice acl: %s\n",
                   ErrorText(result.error_code, result.error_message).c_str());
      rc = 1;
      continue;
    }
    for (const auto& m : result.matching_acls) {
      const std::string line = Describe(static_cast<ResourceType>(m.resource_type), m.resource_name,
                                        static_cast<PatternType>(m.pattern_type), m.principal,
                                        m.host, static_cast<AclOperation>(m.operation),
                                        static_cast<AclPermission>(m.permission_type));
      if (m.error_code != ErrorCode::kNone) {
        std::fprintf(stderr, "sluice acl: not removed: %s: %s\n", line.c_str(),
                     ErrorText(m.error_code, m.error_message).c_str());
        rc = 1;
      } else {
        std::printf("removed: %s\n", line.c_str());
        ++removed;
      }
    }
  }
  if (rc == 0 && removed == 0) return Fail("no ACL matches (see sluice acl list)");
  return rc;
}

int RunAclList(const AclFlags& f) {
  auto pattern = ParsePattern(f.pattern_type, PatternType::kAny, true);
  if (!pattern.ok()) return Fail(pattern.status().message());
  if (!f.principal.empty()) {
    if (Status st = CheckPrincipal(f.principal); !st.ok()) return Fail(st.message());
  }
  std::vector<Resource> resources = ResourcesOf(f);
  if (resources.empty()) resources.push_back({ResourceType::kAny, ""});
  auto conn = ConnectAdmin(f.connection);
  if (!conn.ok()) return Fail(conn.status().message());
  using Row = std::tuple<std::string, std::string, std::string, std::string, std::string,
                         std::string, std::string>;
  std::vector<Row> rows;
  for (const Resource& r : resources) {
    kafka::DescribeAclsRequest req;
    req.resource_type_filter = static_cast<int8_t>(r.type);
    if (r.type != ResourceType::kAny) req.resource_name_filter = r.name;
    req.pattern_type_filter = static_cast<int8_t>(*pattern);
    if (!f.principal.empty()) req.principal_filter = f.principal;
    req.operation = static_cast<int8_t>(AclOperation::kAny);
    req.permission_type = static_cast<int8_t>(AclPermission::kAny);
    auto resp = Ask<kafka::DescribeAclsResponse>(**conn, kafka::ApiKey::kDescribeAcls, req,
                                                 kClientId, kVersion);
    if (!resp.ok()) return Fail(resp.status().message());
    if (resp->error_code != ErrorCode::kNone) {
      return Fail(ErrorText(resp->error_code, resp->error_message));
    }
    for (const auto& res : resp->resources) {
      for (const auto& a : res.acls) {
        rows.emplace_back(
            std::string(auth::Name(static_cast<ResourceType>(res.resource_type))),
            res.resource_name, std::string(auth::Name(static_cast<PatternType>(res.pattern_type))),
            a.principal, a.host, std::string(auth::Name(static_cast<AclOperation>(a.operation))),
            std::string(auth::Name(static_cast<AclPermission>(a.permission_type))));
      }
    }
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  const Row header{"RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"};
  std::vector<size_t> width(7, 0);
  auto measure = [&](const Row& r) {
    std::apply(
        [&](const auto&... cell) {
          size_t i = 0;
          ((width[i] = std::max(width[i], cell.size()), ++i), ...);
        },
        r);
  };
  measure(header);
  for (const Row& r : rows) measure(r);
  auto print = [&](const Row& r) {
    std::string line;
    std::apply(
        [&](const auto&... cell) {
          size_t i = 0;
          ((line += fmt::format("{:<{}}  ", cell, width[i]), ++i), ...);
        },
        r);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  };
  print(header);
  for (const Row& r : rows) print(r);
  return 0;
}

}  // namespace sluice::cli
