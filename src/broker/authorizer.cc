#include "broker/authorizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/logging.h"
#include "broker/connection.h"
#include "broker/sasl.h"

namespace sluice::broker {

using auth::AclOperation;
using auth::ResourceType;

Access::Access(std::string principal, std::string host, std::shared_ptr<const auth::AclSet> acls,
               bool allow_if_no_acl)
    : principal_(std::move(principal)),
      host_(std::move(host)),
      acls_(std::move(acls)),
      allow_if_no_acl_(allow_if_no_acl) {}

Access Access::None() {
  Access a;
  a.none_ = true;
  return a;
}

bool Access::Allows(ResourceType type, std::string_view name, AclOperation op) const {
  if (none_) return false;
  if (acls_ == nullptr) return true;
  auth::AclRequest r;
  r.principal = principal_;
  r.host = host_;
  r.resource_type = type;
  r.resource_name = std::string(name);
  r.operation = op;
  return acls_->Authorize(r, allow_if_no_acl_);
}

namespace {

const Logger kAuthLog("authorizer");

// Denials logged recently: key → (when last logged, denials since).
class DenialLog {
 public:
  void Denied(const std::string& principal, const std::string& host, ResourceType type,
              std::string_view name, AclOperation op) {
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    std::string key = fmt::format("{}\n{}\n{}\n{}\n{}", principal, host, static_cast<int>(type),
                                  name, static_cast<int>(op));
    int64_t since = 0;
    {
      std::lock_guard lock(mu_);
      if (last_.size() > kMaxKeys) last_.clear();  // a flood of distinct keys: start over
      auto [it, fresh] = last_.try_emplace(std::move(key), Entry{now, 0});
      if (!fresh) {
        if (now - it->second.logged_ms < kQuietMs) {
          ++it->second.suppressed;
          return;
        }
        since = it->second.suppressed;
        it->second = Entry{now, 0};
      }
    }
    SLUICE_LOG(
        kAuthLog, kInfo, "{} from {} denied {} on {} {}{}", principal, host.empty() ? "?" : host,
        auth::Name(op), auth::Name(type), name,
        since > 0 ? fmt::format(" ({} more times in the last {} s)", since, kQuietMs / 1000) : "");
  }

 private:
  struct Entry {
    int64_t logged_ms;
    int64_t suppressed;
  };
  static constexpr int64_t kQuietMs = 10'000;
  static constexpr size_t kMaxKeys = 10'000;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> last_;
};

DenialLog& Denials() {
  static DenialLog* log = new DenialLog();  // never destroyed: loops may log at exit
  return *log;
}

}  // namespace

bool Access::Check(ResourceType type, std::string_view name, AclOperation op) const {
  if (Allows(type, name, op)) return true;
  Denials().Denied(none_ ? std::string("(a certificate no mapping rule took)") : principal_, host_,
                   type, name, op);
  return false;
}

bool Access::AllowsAny(ResourceType type, AclOperation op) const {
  if (none_) return false;
  if (acls_ == nullptr) return true;
  // Kafka's authorizeByResourceType first asks for a name nobody names ("hardcode"): a
  // wildcard ALLOW, or allow.everyone.if.no.acl.found with no ACL applying to it, allows.
  if (Allows(type, "hardcode", op)) return true;
  return acls_->AuthorizeAny(principal_, host_, type, op);
}

int32_t Access::Operations(ResourceType type, std::string_view name) const {
  int32_t bits = 0;
  for (AclOperation op : auth::SupportedOperations(type)) {
    if (Allows(type, name, op)) bits |= int32_t{1} << static_cast<int>(op);
  }
  return bits;
}

Authorizer::Authorizer(AuthorizationOptions options, std::shared_ptr<auth::AclStore> acls)
    : options_(std::move(options)), acls_(std::move(acls)) {}

bool Authorizer::IsSuperUser(std::string_view principal) const {
  // The process's own clients (topic(), pipelines under serve), which no user can be.
  if (principal.size() == 5 + kInternalUser.size() && principal.substr(0, 5) == "User:" &&
      principal.substr(5) == kInternalUser) {
    return true;
  }
  return std::find(options_.super_users.begin(), options_.super_users.end(), principal) !=
         options_.super_users.end();
}

Access Authorizer::For(std::string principal, std::string host) const {
  if (!options_.enabled || IsSuperUser(principal)) return Access();
  return Access(std::move(principal), std::move(host), acls_->Current(),
                options_.allow_everyone_if_no_acl_found);
}

Access Authorizer::For(Connection& conn) const {
  if (!options_.enabled) return Access();
  Result<std::string> principal = conn.Principal();
  if (!principal.ok()) return Access::None();
  return For(std::move(*principal), conn.peer_host());
}

}  // namespace sluice::broker
