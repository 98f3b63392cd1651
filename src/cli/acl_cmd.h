// `sluice acl add|remove|list`: the Kafka ACLs of a running broker
// (docs/design/0019-security.md, phase E), over the Kafka protocol (CreateAcls, DeleteAcls,
// DescribeAcls at v1) with kafka-acls.sh's flags: --allow-principal / --deny-principal,
// --allow-host / --deny-host, --operation, --topic / --group / --transactional-id /
// --cluster, --resource-pattern-type, and the --producer / --consumer shorthands.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/admin_connection.h"

namespace sluice::cli {

struct AclFlags {
  AdminConnectionFlags connection;
  std::vector<std::string> allow_principals;  // "User:alice"
  std::vector<std::string> deny_principals;
  std::vector<std::string> allow_hosts;  // none given: "*"
  std::vector<std::string> deny_hosts;
  std::vector<std::string> operations;  // READ, write, describe-configs, ...
  std::optional<std::string> topic;
  std::optional<std::string> group;
  std::optional<std::string> transactional_id;
  bool cluster = false;
  // add: literal (default) or prefixed; remove: also any or match (default literal, as
  // Kafka); list: also any or match (default any).
  std::string pattern_type;
  bool producer = false;  // WRITE, DESCRIBE, CREATE on the topic (and the transactional id)
  bool consumer = false;  // READ, DESCRIBE on the topic, READ on the group
  std::string principal;  // list: only bindings of this principal
};

int RunAclAdd(const AclFlags& flags);
int RunAclRemove(const AclFlags& flags);
int RunAclList(const AclFlags& flags);

}  // namespace sluice::cli
