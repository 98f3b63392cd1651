// The broker's authorizer (docs/design/0019-security.md, phase E): Kafka's ACLs decided for
// one request's principal and host, with authorization.enabled, authorization.super_users
// and authorization.allow_everyone_if_no_acl_found as Kafka's authorizer.class.name,
// super.users and allow.everyone.if.no.acl.found.
//
// A handler takes an Access for its call (Authorizer::For) and asks it, once per resource;
// the Access holds the ACLs as they were when the request arrived, so one request is
// decided on one set. With authorization off every question is answered yes.
//
// Threads: Authorizer is immutable after construction but for its store (thread-safe);
// an Access belongs to one handler call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "auth/acl.h"
#include "auth/acl_store.h"

namespace sluice::broker {

class Connection;

struct AuthorizationOptions {
  bool enabled = false;                  // authorization.enabled
  std::vector<std::string> super_users;  // authorization.super_users: "User:admin"
  // authorization.allow_everyone_if_no_acl_found: a resource no ACL names is open.
  bool allow_everyone_if_no_acl_found = false;
};

// The answers for one request.
class Access {
 public:
  // Everything allowed (authorization off, a super user).
  Access() = default;
  // Nothing allowed.
  static Access None();
  Access(std::string principal, std::string host, std::shared_ptr<const auth::AclSet> acls,
         bool allow_if_no_acl);

  // Whether the principal may do `op` on the resource. Quiet: for filtering (the topics
  // Metadata lists, authorized operations) and for a first try with a fallback.
  bool Allows(auth::ResourceType type, std::string_view name, auth::AclOperation op) const;
  bool AllowsCluster(auth::AclOperation op) const {
    return Allows(auth::ResourceType::kCluster, auth::kClusterName, op);
  }
  // The same, for a decision the client is refused on: a denial is logged as Kafka's
  // kafka.authorizer.logger does ("User:alice from 10.0.0.5 denied WRITE on TOPIC
  // orders"), at most once per 10 s for one principal, host, operation and resource (then
  // with the number of denials in between).
  bool Check(auth::ResourceType type, std::string_view name, auth::AclOperation op) const;
  bool CheckCluster(auth::AclOperation op) const {
    return Check(auth::ResourceType::kCluster, auth::kClusterName, op);
  }
  // Whether it may do `op` on some resource of the type (Kafka's authorizeByResourceType).
  bool AllowsAny(auth::ResourceType type, auth::AclOperation op) const;
  // Kafka's authorized-operations bit field for the resource (bit i: AclOperation i), as
  // DescribeGroups, Metadata and DescribeCluster answer when asked.
  int32_t Operations(auth::ResourceType type, std::string_view name) const;

  const std::string& principal() const { return principal_; }
  bool everything() const { return acls_ == nullptr && !none_; }

 private:
  bool none_ = false;
  std::string principal_;
  std::string host_;
  std::shared_ptr<const auth::AclSet> acls_;  // null: everything allowed
  bool allow_if_no_acl_ = false;
};

class Authorizer {
 public:
  // `acls` must not be null.
  Authorizer(AuthorizationOptions options, std::shared_ptr<auth::AclStore> acls);

  bool enabled() const { return options_.enabled; }
  const AuthorizationOptions& options() const { return options_; }
  auth::AclStore& acls() const { return *acls_; }

  // The Access for a request on `conn` (its loop's thread). A connection whose principal
  // cannot be known (no ssl.principal.mapping.rules rule took its certificate's subject)
  // is refused everything.
  Access For(Connection& conn) const;
  // For a principal and host named directly (tests, the HTTP port).
  Access For(std::string principal, std::string host) const;

  bool IsSuperUser(std::string_view principal) const;

 private:
  const AuthorizationOptions options_;
  const std::shared_ptr<auth::AclStore> acls_;
};

}  // namespace sluice::broker
