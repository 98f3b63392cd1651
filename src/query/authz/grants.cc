#include "query/authz/grants.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/strings.h"

namespace sluice::query::authz {
namespace {

using Json = nlohmann::json;

std::string QuoteIdent(const std::string& s) {
  bool plain = !s.empty() && (std::islower(static_cast<unsigned char>(s[0])) || s[0] == '_');
  for (char c : s) {
    plain = plain && (std::islower(static_cast<unsigned char>(c)) ||
                      std::isdigit(static_cast<unsigned char>(c)) || c == '_');
  }
  if (plain) return s;
  std::string out = "\"";
  for (char c : s) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

std::string QuoteLiteral(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

std::string_view KindKey(GrantObject::Kind k) {
  switch (k) {
    case GrantObject::Kind::kNamespace:
      return "namespace";
    case GrantObject::Kind::kTable:
      return "table";
    case GrantObject::Kind::kTopic:
      return "topic";
    case GrantObject::Kind::kDirectory:
      return "directory";
  }
  return "table";
}

Result<GrantObject::Kind> KindFromKey(std::string_view k) {
  for (auto kind : {GrantObject::Kind::kNamespace, GrantObject::Kind::kTable,
                    GrantObject::Kind::kTopic, GrantObject::Kind::kDirectory}) {
    if (KindKey(kind) == k) return kind;
  }
  return InvalidArgumentError("unknown object type '{}'", k);
}

Result<Privilege> PrivilegeFromName(std::string_view p) {
  for (auto priv : {Privilege::kSelect, Privilege::kRead, Privilege::kWrite, Privilege::kInsert,
                    Privilege::kCreate}) {
    if (PrivilegeName(priv) == p) return priv;
  }
  return InvalidArgumentError("unknown privilege '{}'", p);
}

// Whether `path` is `dir` or under it (both normalized, absolute).
bool PathUnder(std::string_view path, std::string_view dir) {
  if (dir == "/") return !path.empty() && path[0] == '/';
  if (path.size() < dir.size() || path.substr(0, dir.size()) != dir) return false;
  return path.size() == dir.size() || path[dir.size()] == '/';
}

bool IsPrefix(const std::vector<std::string>& prefix, const std::vector<std::string>& of) {
  return prefix.size() <= of.size() && std::equal(prefix.begin(), prefix.end(), of.begin());
}

}  // namespace

std::string_view PrivilegeName(Privilege p) {
  switch (p) {
    case Privilege::kSelect:
      return "SELECT";
    case Privilege::kRead:
      return "READ";
    case Privilege::kWrite:
      return "WRITE";
    case Privilege::kInsert:
      return "INSERT";
    case Privilege::kCreate:
      return "CREATE";
  }
  return "SELECT";
}

bool PrivilegeApplies(Privilege p, GrantObject::Kind k) {
  switch (k) {
    case GrantObject::Kind::kDirectory:
      return p == Privilege::kRead || p == Privilege::kWrite;
    case GrantObject::Kind::kTopic:
      return p == Privilege::kSelect;
    case GrantObject::Kind::kTable:
      return p == Privilege::kSelect || p == Privilege::kInsert;
    case GrantObject::Kind::kNamespace:
      return p == Privilege::kSelect || p == Privilege::kInsert || p == Privilege::kCreate;
  }
  return false;
}

std::string_view GrantObject::KindName() const { return KindKey(kind); }

std::string GrantObject::Sql() const {
  switch (kind) {
    case Kind::kNamespace:
    case Kind::kTable: {
      std::string out = "lake";
      for (const std::string& n : name) out += "." + QuoteIdent(n);
      return out;
    }
    case Kind::kTopic:
      return "TOPIC " + QuoteIdent(name.empty() ? std::string() : name[0]);
    case Kind::kDirectory:
      return "DIRECTORY " + QuoteLiteral(name.empty() ? std::string() : name[0]);
  }
  return "";
}

Result<GrantSet> GrantSet::FromJson(std::string_view json) {
  GrantSet s;
  if (Trim(json).empty()) return s;
  Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return CorruptionError("grants: not a JSON object");
  try {
    if (j.contains("roles")) {
      for (const Json& r : j.at("roles")) s.roles_.insert(r.get<std::string>());
    }
    if (j.contains("members")) {
      for (const auto& [member, roles] : j.at("members").items()) {
        for (const Json& r : roles) {
          std::string role = r.get<std::string>();
          if (s.roles_.count(role) == 0) {
            return CorruptionError("grants: member '{}' of unknown role '{}'", member, role);
          }
          s.members_[member].insert(std::move(role));
        }
      }
    }
    if (j.contains("grants")) {
      for (const Json& g : j.at("grants")) {
        Grant grant;
        grant.grantee = g.at("grantee").get<std::string>();
        ASSIGN_OR_RETURN(grant.privilege, PrivilegeFromName(g.at("privilege").get<std::string>()));
        ASSIGN_OR_RETURN(grant.object.kind, KindFromKey(g.at("type").get<std::string>()));
        grant.object.name = g.at("name").get<std::vector<std::string>>();
        if (grant.object.name.empty() || grant.grantee.empty()) {
          return CorruptionError("grants: a grant without a grantee or an object");
        }
        s.grants_.insert(std::move(grant));
      }
    }
    if (j.contains("limits")) {
      for (const auto& [who, l] : j.at("limits").items()) {
        UserLimits limits;
        limits.max_statements = l.value("max_statements", 0);
        limits.memory_percent = l.value("memory_percent", 0);
        if (limits.max_statements < 0 || limits.memory_percent < 0 || limits.memory_percent > 100) {
          return CorruptionError("grants: limits of '{}' out of range", who);
        }
        s.limits_[who] = limits;
      }
    }
  } catch (const Json::exception& e) {
    return CorruptionError("grants: {}", e.what());
  }
  return s;
}

std::string GrantSet::ToJson() const {
  Json j = Json::object();
  j["version"] = 1;
  j["roles"] = Json::array();
  for (const std::string& r : roles_) j["roles"].push_back(r);
  j["members"] = Json::object();
  for (const auto& [member, roles] : members_) {
    if (!roles.empty()) j["members"][member] = roles;
  }
  j["grants"] = Json::array();
  for (const Grant& g : grants_) {
    j["grants"].push_back({{"grantee", g.grantee},
                           {"privilege", PrivilegeName(g.privilege)},
                           {"type", KindKey(g.object.kind)},
                           {"name", g.object.name}});
  }
  j["limits"] = Json::object();
  for (const auto& [who, l] : limits_) {
    j["limits"][who] = {{"max_statements", l.max_statements}, {"memory_percent", l.memory_percent}};
  }
  return j.dump();
}

Status GrantSet::CreateRole(const std::string& role) {
  if (role.empty()) return InvalidArgumentError("42602: a role needs a name");
  if (roles_.count(role) > 0) {
    return AlreadyExistsError("42710: role \"{}\" already exists", role);
  }
  roles_.insert(role);
  return Status::OK();
}

Status GrantSet::DropRole(const std::string& role, bool if_exists) {
  if (roles_.count(role) == 0) {
    if (if_exists) return Status::OK();
    return NotFoundError("42704: role \"{}\" does not exist", role);
  }
  roles_.erase(role);
  members_.erase(role);
  for (auto it = members_.begin(); it != members_.end();) {
    it->second.erase(role);
    it = it->second.empty() ? members_.erase(it) : std::next(it);
  }
  for (auto it = grants_.begin(); it != grants_.end();) {
    it = it->grantee == role ? grants_.erase(it) : std::next(it);
  }
  limits_.erase(role);
  return Status::OK();
}

Status GrantSet::GrantRole(const std::string& role, const std::string& member) {
  if (roles_.count(role) == 0) return NotFoundError("42704: role \"{}\" does not exist", role);
  if (role == member || Holders(role).count(member) > 0) {
    return InvalidArgumentError("0LP01: role \"{}\" is a member of role \"{}\"", role, member);
  }
  members_[member].insert(role);
  return Status::OK();
}

Status GrantSet::RevokeRole(const std::string& role, const std::string& member) {
  if (roles_.count(role) == 0) return NotFoundError("42704: role \"{}\" does not exist", role);
  auto it = members_.find(member);
  if (it != members_.end()) {
    it->second.erase(role);
    if (it->second.empty()) members_.erase(it);
  }
  return Status::OK();
}

bool GrantSet::AddGrant(const Grant& g) { return grants_.insert(g).second; }

bool GrantSet::RemoveGrant(const Grant& g) { return grants_.erase(g) > 0; }

void GrantSet::SetLimits(const std::string& grantee, const UserLimits& limits) {
  if (limits == UserLimits{}) {
    limits_.erase(grantee);
  } else {
    limits_[grantee] = limits;
  }
}

std::set<std::string> GrantSet::Holders(std::string_view user) const {
  std::set<std::string> out{std::string(user)};
  std::deque<std::string> todo{std::string(user)};
  while (!todo.empty()) {
    auto it = members_.find(todo.front());
    todo.pop_front();
    if (it == members_.end()) continue;
    for (const std::string& r : it->second) {
      if (out.insert(r).second) todo.push_back(r);
    }
  }
  return out;
}

bool GrantSet::CanOnTable(std::string_view user, const std::vector<std::string>& ns,
                          const std::string& table, Privilege p) const {
  std::vector<std::string> full = ns;
  full.push_back(table);
  const std::set<std::string> holders = Holders(user);
  for (const Grant& g : grants_) {
    if (g.privilege != p || holders.count(g.grantee) == 0) continue;
    if (g.object.kind == GrantObject::Kind::kTable && g.object.name == full) return true;
    if (g.object.kind == GrantObject::Kind::kNamespace && IsPrefix(g.object.name, ns)) return true;
  }
  return false;
}

bool GrantSet::CanCreateIn(std::string_view user, const std::vector<std::string>& ns) const {
  if (ns.empty()) return false;
  const std::set<std::string> holders = Holders(user);
  for (const Grant& g : grants_) {
    if (g.privilege == Privilege::kCreate && g.object.kind == GrantObject::Kind::kNamespace &&
        holders.count(g.grantee) > 0 && IsPrefix(g.object.name, ns)) {
      return true;
    }
  }
  return false;
}

bool GrantSet::CanSeeNamespace(std::string_view user, const std::vector<std::string>& ns) const {
  const std::set<std::string> holders = Holders(user);
  for (const Grant& g : grants_) {
    if (holders.count(g.grantee) == 0) continue;
    if (g.object.kind != GrantObject::Kind::kTable &&
        g.object.kind != GrantObject::Kind::kNamespace)
      continue;
    // The namespace holds a granted table, or lies inside (or above) a granted namespace.
    if (IsPrefix(ns, g.object.name) || IsPrefix(g.object.name, ns)) return true;
  }
  return false;
}

bool GrantSet::CanSelectTopic(std::string_view user, std::string_view topic) const {
  const std::set<std::string> holders = Holders(user);
  for (const Grant& g : grants_) {
    if (g.privilege == Privilege::kSelect && g.object.kind == GrantObject::Kind::kTopic &&
        holders.count(g.grantee) > 0 && g.object.name.size() == 1 && g.object.name[0] == topic) {
      return true;
    }
  }
  return false;
}

bool GrantSet::CanAccessPath(std::string_view user, std::string_view path, Privilege p) const {
  const std::set<std::string> holders = Holders(user);
  for (const Grant& g : grants_) {
    if (g.privilege == p && g.object.kind == GrantObject::Kind::kDirectory &&
        holders.count(g.grantee) > 0 && g.object.name.size() == 1 &&
        PathUnder(path, g.object.name[0])) {
      return true;
    }
  }
  return false;
}

UserLimits GrantSet::LimitsOf(std::string_view user) const {
  UserLimits out;
  auto lower = [](int have, int limit) {
    if (limit <= 0) return have;
    return have <= 0 ? limit : std::min(have, limit);
  };
  for (const std::string& h : Holders(user)) {
    auto it = limits_.find(h);
    if (it == limits_.end()) continue;
    out.max_statements = lower(out.max_statements, it->second.max_statements);
    out.memory_percent = lower(out.memory_percent, it->second.memory_percent);
  }
  return out;
}

std::vector<std::pair<Grant, std::string>> GrantSet::GrantsOf(std::string_view user) const {
  std::vector<std::pair<Grant, std::string>> out;
  const std::set<std::string> holders = Holders(user);
  for (const Grant& g : grants_) {
    if (holders.count(g.grantee) == 0) continue;
    out.emplace_back(g, g.grantee == user ? std::string() : g.grantee);
  }
  return out;
}

Result<std::unique_ptr<GrantStore>> GrantStore::Load(std::string_view json, Persist persist) {
  ASSIGN_OR_RETURN(GrantSet set, GrantSet::FromJson(json));
  return std::unique_ptr<GrantStore>(
      new GrantStore(std::make_shared<const GrantSet>(std::move(set)), std::move(persist)));
}

std::shared_ptr<const GrantSet> GrantStore::Current() const {
  std::lock_guard lock(mu_);
  return set_;
}

uint64_t GrantStore::version() const {
  std::lock_guard lock(mu_);
  return version_;
}

Status GrantStore::Apply(const std::function<Status(GrantSet&)>& change) {
  std::lock_guard write(write_mu_);
  auto next = std::make_shared<GrantSet>(*Current());
  RETURN_IF_ERROR(change(*next));
  if (persist_) RETURN_IF_ERROR(persist_(next->ToJson()));
  std::lock_guard lock(mu_);
  set_ = std::move(next);
  ++version_;
  return Status::OK();
}

Status GrantStore::Replace(std::string_view json) {
  ASSIGN_OR_RETURN(GrantSet set, GrantSet::FromJson(json));
  std::lock_guard lock(mu_);
  set_ = std::make_shared<const GrantSet>(std::move(set));
  ++version_;
  return Status::OK();
}

std::string NormalizePath(std::string_view path) {
  std::string p(path);
  if (!p.empty() && p[0] == '~' && (p.size() == 1 || p[1] == '/')) {
    const char* home = std::getenv("HOME");
    p = std::string(home != nullptr ? home : "") + p.substr(1);
  }
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(p, ec);
  if (ec) abs = std::filesystem::path(p);
  std::filesystem::path canon = std::filesystem::weakly_canonical(abs, ec);
  std::string out = (ec ? abs.lexically_normal() : canon.lexically_normal()).string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace sluice::query::authz
