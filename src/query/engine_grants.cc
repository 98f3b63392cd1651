// QueryEngine's grant statements (docs/design/0020-data-authorization.md): GRANT, REVOKE,
// CREATE/DROP ROLE and ALTER ROLE ... SET run by a superuser against the grant store, and
// SHOW GRANTS as a query.
#include <array>
#include <filesystem>

#include "base/strings.h"
#include "query/authz/grant_sql.h"
#include "query/authz/grants.h"
#include "query/engine.h"
#include "query/lake_planner/lake_catalog.h"
#include "query/sql_text.h"

namespace sluice::query {
namespace {

using authz::GrantObject;
using authz::GrantStatement;

// `parts` split further at the dots inside them (lake."a.b".t is the levels a, b).
std::vector<std::string> Levels(const std::vector<std::string>& parts) {
  std::vector<std::string> out;
  for (const std::string& p : parts) {
    size_t start = 0;
    for (size_t dot; (dot = p.find('.', start)) != std::string::npos; start = dot + 1) {
      out.push_back(p.substr(start, dot - start));
    }
    out.push_back(p.substr(start));
  }
  return out;
}

std::string Quote(std::string_view s) { return duck::QuoteLiteral(s); }

}  // namespace

bool QueryEngine::IsCommand(std::string_view statement) {
  if (!authz::IsGrantStatement(statement)) return false;
  std::vector<std::string> w = LeadingWords(statement, 2);
  return !(w.size() == 2 && w[0] == "SHOW");  // SHOW GRANTS is a query (Plan)
}

int QueryEngine::MaxStatementsOf(std::string_view user) const {
  if (!options_.authorization.enabled || options_.authorization.grants == nullptr) return 0;
  return options_.authorization.grants->Current()->LimitsOf(user).max_statements;
}

Result<std::string> QueryEngine::RunCommand(duck::Connection& conn,
                                            std::string_view statement) const {
  ASSIGN_OR_RETURN(std::optional<GrantStatement> parsed, authz::ParseGrantStatement(statement));
  if (!parsed) return InvalidArgumentError("42601: not a grant statement");
  const GrantStatement& s = *parsed;
  const DataAuthorization& az = options_.authorization;
  if (!az.enabled || az.grants == nullptr) {
    return FailedPreconditionError(
        "0A000: grants take effect with authorization on (authorization.enabled: true in the "
        "serve config); with it off everyone may read everything");
  }
  const SessionAuth auth = AuthOf(conn);
  if (!auth.superuser) {
    return FailedPreconditionError(
        "42501: permission denied to {}: only superusers (authorization.super_users) manage "
        "roles and grants",
        GrantCommandTag(s) == "ALTER ROLE" ? "alter role" : AsciiLower(GrantCommandTag(s)));
  }
  const std::shared_ptr<const authz::GrantSet> now = az.grants->Current();
  // A grantee is a role or a user of the user store.
  auto known = [&](const std::string& name) -> Status {
    if (now->IsRole(name) || (az.user_exists && az.user_exists(name))) return Status::OK();
    return NotFoundError("42704: role \"{}\" does not exist (neither a role nor a user)", name);
  };

  switch (s.kind) {
    case GrantStatement::Kind::kCreateRole:
      if (az.user_exists && az.user_exists(s.roles[0])) {
        return AlreadyExistsError("42710: role \"{}\" already exists as a user", s.roles[0]);
      }
      RETURN_IF_ERROR(
          az.grants->Apply([&](authz::GrantSet& g) { return g.CreateRole(s.roles[0]); }));
      break;
    case GrantStatement::Kind::kDropRole:
      RETURN_IF_ERROR(az.grants->Apply([&](authz::GrantSet& g) -> Status {
        for (const std::string& r : s.roles) RETURN_IF_ERROR(g.DropRole(r, s.if_exists));
        return Status::OK();
      }));
      break;
    case GrantStatement::Kind::kGrantRole:
    case GrantStatement::Kind::kRevokeRole:
      for (const std::string& g : s.grantees) RETURN_IF_ERROR(known(g));
      RETURN_IF_ERROR(az.grants->Apply([&](authz::GrantSet& g) -> Status {
        for (const std::string& r : s.roles) {
          for (const std::string& member : s.grantees) {
            RETURN_IF_ERROR(s.kind == GrantStatement::Kind::kGrantRole ? g.GrantRole(r, member)
                                                                       : g.RevokeRole(r, member));
          }
        }
        return Status::OK();
      }));
      break;
    case GrantStatement::Kind::kGrant:
    case GrantStatement::Kind::kRevoke: {
      if (s.kind == GrantStatement::Kind::kGrant) {
        for (const std::string& g : s.grantees) RETURN_IF_ERROR(known(g));
      }
      GrantObject object{s.object_kind, s.name};
      if (s.object_kind == GrantObject::Kind::kDirectory) {
        if (s.name[0].empty() || s.name[0][0] != '/') {
          return InvalidArgumentError("22023: DIRECTORY takes an absolute path, not '{}'",
                                      s.name[0]);
        }
        object.name = {authz::NormalizePath(s.name[0])};
      } else if (s.object_kind != GrantObject::Kind::kTopic) {
        ASSIGN_OR_RETURN(object, ResolveLakeObject(s));
      }
      std::vector<authz::Privilege> privileges = s.privileges;
      if (s.all_privileges) {
        // ALL: every privilege the object takes.
        for (authz::Privilege p :
             {authz::Privilege::kSelect, authz::Privilege::kInsert, authz::Privilege::kCreate,
              authz::Privilege::kRead, authz::Privilege::kWrite}) {
          if (authz::PrivilegeApplies(p, object.kind)) privileges.push_back(p);
        }
      }
      for (authz::Privilege p : privileges) {
        if (!authz::PrivilegeApplies(p, object.kind)) return authz::PrivilegeMisfit(p, object.kind);
      }
      RETURN_IF_ERROR(az.grants->Apply([&](authz::GrantSet& g) -> Status {
        for (const std::string& grantee : s.grantees) {
          for (authz::Privilege p : privileges) {
            authz::Grant grant{grantee, p, object};
            if (s.kind == GrantStatement::Kind::kGrant) {
              g.AddGrant(grant);
            } else {
              g.RemoveGrant(grant);  // revoking what was not granted does nothing, as in Postgres
            }
          }
        }
        return Status::OK();
      }));
      break;
    }
    case GrantStatement::Kind::kAlterLimits: {
      const std::string& who = s.grantees[0];
      RETURN_IF_ERROR(known(who));
      RETURN_IF_ERROR(az.grants->Apply([&](authz::GrantSet& g) {
        authz::UserLimits l;
        auto it = g.limits().find(who);
        if (it != g.limits().end()) l = it->second;
        if (s.max_statements) l.max_statements = std::max(0, *s.max_statements);
        if (s.memory_percent) l.memory_percent = std::max(0, *s.memory_percent);
        g.SetLimits(who, l);
        return Status::OK();
      }));
      break;
    }
    case GrantStatement::Kind::kShowGrants:
      return InvalidArgumentError("42601: SHOW GRANTS is a query");
  }
  return std::string(GrantCommandTag(s));
}

Result<authz::GrantObject> QueryEngine::ResolveLakeObject(const GrantStatement& s) const {
  // What the warehouse holds decides between a table and a namespace, and between a
  // one-level namespace named "a.b" and the levels a, b, as the lake planner decides.
  auto table_at = [&](const std::vector<std::string>& ns, const std::string& t) {
    return catalog_ != nullptr && catalog_->LoadMetadata(ns, t).ok();
  };
  auto namespace_at = [&](const std::vector<std::string>& ns) {
    return catalog_ != nullptr && catalog_->NamespaceExists(ns);
  };
  const std::vector<std::string>& parts = s.name;
  const std::vector<std::string> levels = Levels(parts);
  std::optional<GrantObject::Kind> kind = s.lake_kind;
  if (!kind || *kind == GrantObject::Kind::kTable) {
    if (parts.size() >= 2) {
      std::vector<std::string> ns(parts.begin(), parts.end() - 1);
      if (table_at(ns, parts.back())) {
        ns.push_back(parts.back());
        return GrantObject{GrantObject::Kind::kTable, ns};
      }
    }
    if (levels.size() >= 2 &&
        (kind || table_at({levels.begin(), levels.end() - 1}, levels.back()))) {
      return GrantObject{GrantObject::Kind::kTable, levels};
    }
  }
  if (!kind || *kind == GrantObject::Kind::kNamespace) {
    if (namespace_at(parts)) return GrantObject{GrantObject::Kind::kNamespace, parts};
    if (kind || namespace_at(levels)) return GrantObject{GrantObject::Kind::kNamespace, levels};
  }
  std::string name = "lake";
  for (const std::string& p : parts) name += "." + p;
  return NotFoundError(
      "42P01: {} is neither a lake table nor a namespace{}: write TABLE {} or SCHEMA {} to grant "
      "on one that does not exist yet",
      name, catalog_ == nullptr ? " (the server has no warehouse)" : "", name, name);
}

Result<std::string> QueryEngine::ShowGrantsSql(const SessionAuth& auth,
                                               const std::string& of) const {
  const DataAuthorization& az = options_.authorization;
  if (!az.enabled || az.grants == nullptr) {
    return FailedPreconditionError(
        "0A000: grants take effect with authorization on (authorization.enabled: true in the "
        "serve config)");
  }
  const std::shared_ptr<const authz::GrantSet> g = az.grants->Current();
  // A user who is not a superuser sees its own grants, and its roles'.
  std::string who = of;
  if (!auth.superuser) {
    if (who.empty()) who = auth.user;
    if (g->Holders(auth.user).count(who) == 0) {
      return FailedPreconditionError(
          "42501: permission denied: only superusers see the grants of other users");
    }
  }
  std::vector<std::array<std::string, 5>> rows;
  auto limit_rows = [&](const std::string& name, const authz::UserLimits& l,
                        const std::string& through) {
    if (l.max_statements > 0) {
      rows.push_back({name, "LIMIT", "max_statements", std::to_string(l.max_statements), through});
    }
    if (l.memory_percent > 0) {
      rows.push_back(
          {name, "LIMIT", "memory_share", std::to_string(l.memory_percent) + "%", through});
    }
  };
  if (who.empty()) {
    for (const authz::Grant& gr : g->grants()) {
      rows.push_back({gr.grantee, std::string(authz::PrivilegeName(gr.privilege)),
                      std::string(gr.object.KindName()), gr.object.Sql(), ""});
    }
    for (const auto& [member, roles] : g->members()) {
      for (const std::string& r : roles) rows.push_back({member, "MEMBER", "role", r, ""});
    }
    for (const std::string& r : g->roles()) {
      if (g->members().count(r) == 0) rows.push_back({r, "ROLE", "role", r, ""});
    }
    for (const auto& [name, l] : g->limits()) limit_rows(name, l, "");
  } else {
    for (const auto& [gr, through] : g->GrantsOf(who)) {
      rows.push_back({who, std::string(authz::PrivilegeName(gr.privilege)),
                      std::string(gr.object.KindName()), gr.object.Sql(), through});
    }
    for (const std::string& r : g->Holders(who)) {
      if (r != who) rows.push_back({who, "MEMBER", "role", r, ""});
    }
    for (const std::string& h : g->Holders(who)) {
      auto it = g->limits().find(h);
      if (it != g->limits().end()) limit_rows(who, it->second, h == who ? "" : h);
    }
  }
  const std::string columns = "grantee, privilege, object_type, object, granted_through";
  if (rows.empty()) {
    return std::string(
        "SELECT NULL::VARCHAR AS grantee, NULL::VARCHAR AS privilege, NULL::VARCHAR AS "
        "object_type, NULL::VARCHAR AS object, NULL::VARCHAR AS granted_through WHERE false");
  }
  std::string values;
  for (const auto& r : rows) {
    if (!values.empty()) values += ", ";
    values += "(" + Quote(r[0]) + ", " + Quote(r[1]) + ", " + Quote(r[2]) + ", " + Quote(r[3]) +
              ", " + Quote(r[4]) + ")";
  }
  return "SELECT * FROM (VALUES " + values + ") AS g(" + columns + ") ORDER BY 1, 3, 4, 2";
}

}  // namespace sluice::query
