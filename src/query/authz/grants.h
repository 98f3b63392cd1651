// SQL grants (docs/design/0020-data-authorization.md): roles, role membership, privileges on
// lake namespaces and tables, topics and directories, and per-user limits, for the query
// server, the REST catalog and the pipelines.
//
// A GrantSet is an immutable snapshot; GrantStore keeps the current one as the user store
// and the ACL set are kept (auth/user_store.h): each change hands the whole set's JSON to
// `persist` before it is visible (meta/grants.json on one node, etcd in a cluster), and a set
// changed elsewhere comes in with Replace.
//
//   ASSIGN_OR_RETURN(auto store, GrantStore::Load(json, persist));
//   RETURN_IF_ERROR(store->Apply([](GrantSet& s) { return s.CreateRole("analysts"); }));
//   if (store->Current()->CanSelectTable("alice", {"sales"}, "orders")) ...
//
// Threads: any; changes are serialized.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::query::authz {

// What a privilege is on.
struct GrantObject {
  enum class Kind { kNamespace, kTable, kTopic, kDirectory };
  Kind kind = Kind::kTable;
  // kNamespace: its levels; kTable: the namespace's levels then the table's name; kTopic:
  // the topic's name; kDirectory: the absolute, normalized path.
  std::vector<std::string> name;

  // How SQL names it: "lake.sales", "lake.sales.orders", "TOPIC orders",
  // "DIRECTORY '/data/x'".
  std::string Sql() const;
  std::string_view KindName() const;  // "namespace", "table", "topic", "directory"
  auto operator<=>(const GrantObject&) const = default;
};

// SELECT: read a lake table or a topic. INSERT: commit to a lake table (the REST catalog's
// table updates, a pipeline's Iceberg sink). CREATE: create, drop and rename the tables and
// namespaces of a lake namespace (and set its properties). READ, WRITE: files of a
// directory.
enum class Privilege { kSelect, kRead, kWrite, kInsert, kCreate };
std::string_view PrivilegeName(Privilege p);  // "SELECT", "READ", "WRITE", "INSERT", "CREATE"
// Whether `p` can be granted on objects of kind `k`.
bool PrivilegeApplies(Privilege p, GrantObject::Kind k);

struct Grant {
  std::string grantee;  // a user or a role
  Privilege privilege = Privilege::kSelect;
  GrantObject object;
  auto operator<=>(const Grant&) const = default;
};

// Per user (or role: a user takes the lowest of its own and its roles'), 0 for none.
struct UserLimits {
  int max_statements = 0;  // statements running at once
  int memory_percent = 0;  // share of query.memory_limit, 1-100
  bool operator==(const UserLimits&) const = default;
};

class GrantSet {
 public:
  static Result<GrantSet> FromJson(std::string_view json);  // "" : empty
  std::string ToJson() const;

  // Changes (on a copy, before it is stored). Errors carry their SQLSTATE as a prefix
  // ("42704: role \"x\" does not exist").
  Status CreateRole(const std::string& role);
  // Drops the role, its memberships and its grants; NotFound unless `if_exists`.
  Status DropRole(const std::string& role, bool if_exists);
  // `member` (a user or another role) gets `role`'s privileges; a cycle is refused.
  Status GrantRole(const std::string& role, const std::string& member);
  Status RevokeRole(const std::string& role, const std::string& member);
  // Whether anything changed (granting twice is not an error, as in Postgres).
  bool AddGrant(const Grant& g);
  bool RemoveGrant(const Grant& g);
  void SetLimits(const std::string& grantee, const UserLimits& limits);

  bool IsRole(std::string_view name) const { return roles_.count(name) > 0; }
  const std::set<std::string, std::less<>>& roles() const { return roles_; }
  const std::map<std::string, std::set<std::string>, std::less<>>& members() const {
    return members_;
  }
  const std::set<Grant>& grants() const { return grants_; }
  const std::map<std::string, UserLimits, std::less<>>& limits() const { return limits_; }

  // `user` and every role it holds, directly or through other roles.
  std::set<std::string> Holders(std::string_view user) const;

  // The checks, for `user` with its roles. A namespace grant covers its tables and the
  // tables of the namespaces under it, present and future; a directory grant the
  // directory and everything under it (`path` absolute and normalized).
  bool CanSelectTable(std::string_view user, const std::vector<std::string>& ns,
                      const std::string& table) const {
    return CanOnTable(user, ns, table, Privilege::kSelect);
  }
  // `p` (SELECT or INSERT) on the table, or on a namespace above it.
  bool CanOnTable(std::string_view user, const std::vector<std::string>& ns,
                  const std::string& table, Privilege p) const;
  // CREATE on `ns` or a namespace above it: tables and namespaces may be made, dropped and
  // renamed in it. The root (no levels) is nobody's but the superusers'.
  bool CanCreateIn(std::string_view user, const std::vector<std::string>& ns) const;
  // Whether some table of `ns` or under it may be selected (the namespace is listed).
  bool CanSeeNamespace(std::string_view user, const std::vector<std::string>& ns) const;
  bool CanSelectTopic(std::string_view user, std::string_view topic) const;
  bool CanAccessPath(std::string_view user, std::string_view path, Privilege p) const;
  UserLimits LimitsOf(std::string_view user) const;

  // The grants `user` has, directly or through a role: (grant, the role it came through or
  // "").
  std::vector<std::pair<Grant, std::string>> GrantsOf(std::string_view user) const;

 private:
  std::set<std::string, std::less<>> roles_;
  std::map<std::string, std::set<std::string>, std::less<>> members_;  // member -> roles
  std::set<Grant> grants_;
  std::map<std::string, UserLimits, std::less<>> limits_;
};

class GrantStore {
 public:
  using Persist = std::function<Status(const std::string& json)>;

  // From the JSON `persist` wrote ("" : none). `persist` null: kept in memory.
  static Result<std::unique_ptr<GrantStore>> Load(std::string_view json, Persist persist);

  std::shared_ptr<const GrantSet> Current() const;
  // Runs `change` on a copy of the current set; when it succeeds, the copy is persisted and
  // becomes current. Returns `change`'s error, or the persist's.
  Status Apply(const std::function<Status(GrantSet&)>& change);
  // A set changed elsewhere (another broker, through etcd), not persisted again.
  Status Replace(std::string_view json);
  // Bumped by every change; readers that cache can compare.
  uint64_t version() const;

 private:
  GrantStore(std::shared_ptr<const GrantSet> set, Persist persist)
      : set_(std::move(set)), persist_(std::move(persist)) {}

  mutable std::mutex mu_;
  std::shared_ptr<const GrantSet> set_;  // guarded by mu_
  uint64_t version_ = 1;                 // guarded by mu_
  std::mutex write_mu_;                  // one change at a time, persist included
  const Persist persist_;
};

// `path` made absolute (relative to the process's working directory, `~` as $HOME) and
// normalized, with symbolic links of its existing part resolved.
std::string NormalizePath(std::string_view path);

}  // namespace sluice::query::authz
