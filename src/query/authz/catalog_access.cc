#include "query/authz/catalog_access.h"

#include <algorithm>

namespace sluice::query::authz {
namespace {

// The user a principal names: "User:alice" (HTTP Basic) or "alice".
std::string UserOf(const std::string& principal) {
  return principal.rfind("User:", 0) == 0 ? principal.substr(5) : principal;
}

class Access final : public lake::CatalogAccess {
 public:
  Access(std::shared_ptr<GrantStore> grants, std::vector<std::string> super_users)
      : grants_(std::move(grants)), super_users_(std::move(super_users)) {}

  bool Everything(const std::string& principal) const override {
    return !principal.empty() && std::find(super_users_.begin(), super_users_.end(),
                                           "User:" + UserOf(principal)) != super_users_.end();
  }
  bool SeeNamespace(const std::string& principal,
                    const std::vector<std::string>& ns) const override {
    return !principal.empty() && grants_->Current()->CanSeeNamespace(UserOf(principal), ns);
  }
  bool ReadTable(const std::string& principal, const std::vector<std::string>& ns,
                 const std::string& table) const override {
    return !principal.empty() && grants_->Current()->CanSelectTable(UserOf(principal), ns, table);
  }
  bool WriteTable(const std::string& principal, const std::vector<std::string>& ns,
                  const std::string& table) const override {
    return !principal.empty() &&
           grants_->Current()->CanOnTable(UserOf(principal), ns, table, Privilege::kInsert);
  }
  bool CreateIn(const std::string& principal, const std::vector<std::string>& ns) const override {
    return !principal.empty() && grants_->Current()->CanCreateIn(UserOf(principal), ns);
  }

 private:
  const std::shared_ptr<GrantStore> grants_;
  const std::vector<std::string> super_users_;
};

}  // namespace

std::shared_ptr<const lake::CatalogAccess> GrantCatalogAccess(
    std::shared_ptr<GrantStore> grants, std::vector<std::string> super_users) {
  return std::make_shared<Access>(std::move(grants), std::move(super_users));
}

}  // namespace sluice::query::authz
