// The SQL that manages grants (docs/design/0020-data-authorization.md), read by the query
// server before DuckDB sees a statement, in Postgres's grammar where Postgres has one:
//
//   CREATE ROLE name
//   DROP ROLE [IF EXISTS] name [, ...]
//   GRANT role [, ...] TO grantee [, ...]            REVOKE role [, ...] FROM grantee [, ...]
//   GRANT privileges ON object TO grantee [, ...]     REVOKE privileges ON object FROM ...
//     privileges: SELECT | INSERT | CREATE | READ | WRITE | ALL [PRIVILEGES], or a list
//     object: [TABLE] lake.ns.table | {SCHEMA|NAMESPACE} lake.ns | ALL TABLES IN SCHEMA
//             lake.ns | lake.ns (resolved against the warehouse) | TOPIC name |
//             DIRECTORY 'path'
//   SHOW GRANTS [FOR grantee]
//   ALTER {ROLE|USER} name SET {max_statements|memory_share} {=|TO} value
//   ALTER {ROLE|USER} name RESET {max_statements|memory_share|ALL}
//
// Role and user names fold to lower case unless quoted, as in Postgres; lake and topic
// names are kept as written (the lake planner and Kafka compare them exactly).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "query/authz/grants.h"

namespace sluice::query::authz {

struct GrantStatement {
  enum class Kind {
    kCreateRole,
    kDropRole,
    kGrantRole,
    kRevokeRole,
    kGrant,
    kRevoke,
    kShowGrants,
    kAlterLimits,
  };
  Kind kind = Kind::kGrant;
  std::vector<std::string> roles;  // CREATE/DROP ROLE, GRANT/REVOKE role
  bool if_exists = false;          // DROP ROLE IF EXISTS
  // GRANT/REVOKE privileges: ALL is every privilege the object has.
  std::vector<Privilege> privileges;
  bool all_privileges = false;
  // The object as written. For lake objects `name` holds the parts after `lake`, and
  // `lake_kind` what the statement said it is (nullopt: the warehouse decides).
  GrantObject::Kind object_kind = GrantObject::Kind::kTable;
  std::optional<GrantObject::Kind> lake_kind;
  std::vector<std::string> name;
  std::vector<std::string> grantees;  // TO / FROM; SHOW GRANTS FOR (one, or none)
  // ALTER ... SET/RESET: the settings named, with their values (-1: RESET).
  std::optional<int> max_statements;
  std::optional<int> memory_percent;
};

// The statement's first words name one of these statements: it is one, well-formed or not.
bool IsGrantStatement(std::string_view sql);

// nullopt when `sql` is not one of these statements; an error prefixed with its SQLSTATE
// ("42601: ...") when it is one but malformed.
Result<std::optional<GrantStatement>> ParseGrantStatement(std::string_view sql);

// 0LP01 for privilege `p` on an object of kind `k`, which does not take it.
Status PrivilegeMisfit(Privilege p, GrantObject::Kind k);

// The CommandComplete tag Postgres sends for it ("GRANT", "CREATE ROLE", "ALTER ROLE"...).
std::string_view GrantCommandTag(const GrantStatement& s);

}  // namespace sluice::query::authz
