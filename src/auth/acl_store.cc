#include "auth/acl_store.h"

#include <algorithm>

namespace sluice::auth {

Result<std::unique_ptr<AclStore>> AclStore::Load(std::string_view json, Persist persist) {
  ASSIGN_OR_RETURN(AclSet set, AclSet::FromJson(json));
  return std::unique_ptr<AclStore>(
      new AclStore(std::make_shared<const AclSet>(std::move(set)), std::move(persist)));
}

std::shared_ptr<const AclSet> AclStore::Current() const {
  std::lock_guard lock(mu_);
  return set_;
}

std::vector<Status> AclStore::Create(const std::vector<AclBinding>& bindings) {
  std::lock_guard write(write_mu_);
  std::vector<Status> out;
  std::vector<AclBinding> next = Current()->bindings();
  bool any = false;
  for (const AclBinding& b : bindings) {
    out.push_back(ValidateBinding(b));
    if (out.back().ok()) {
      next.push_back(b);
      any = true;
    }
  }
  if (!any) return out;
  auto set = std::make_shared<const AclSet>(std::move(next));
  if (persist_) {
    if (Status st = persist_(set->ToJson()); !st.ok()) {
      for (Status& s : out) {
        if (s.ok()) s = st;
      }
      return out;
    }
  }
  std::lock_guard lock(mu_);
  set_ = std::move(set);
  return out;
}

std::vector<AclStore::Deleted> AclStore::Delete(const std::vector<AclFilter>& filters) {
  std::lock_guard write(write_mu_);
  const std::shared_ptr<const AclSet> current = Current();
  std::vector<Deleted> out(filters.size());
  std::vector<bool> gone(current->bindings().size(), false);
  bool any = false;
  for (size_t f = 0; f < filters.size(); ++f) {
    out[f].status = filters[f].Validate();
    if (!out[f].status.ok()) continue;
    for (size_t i = 0; i < current->bindings().size(); ++i) {
      if (filters[f].Matches(current->bindings()[i])) {
        out[f].bindings.push_back(current->bindings()[i]);
        gone[i] = true;
        any = true;
      }
    }
  }
  if (!any) return out;
  std::vector<AclBinding> next;
  for (size_t i = 0; i < gone.size(); ++i) {
    if (!gone[i]) next.push_back(current->bindings()[i]);
  }
  auto set = std::make_shared<const AclSet>(std::move(next));
  if (persist_) {
    if (Status st = persist_(set->ToJson()); !st.ok()) {
      for (Deleted& d : out) {
        if (d.status.ok()) {
          d.status = st;
          d.bindings.clear();
        }
      }
      return out;
    }
  }
  std::lock_guard lock(mu_);
  set_ = std::move(set);
  return out;
}

Status AclStore::Replace(std::string_view json) {
  ASSIGN_OR_RETURN(AclSet set, AclSet::FromJson(json));
  std::lock_guard write(write_mu_);
  std::lock_guard lock(mu_);
  set_ = std::make_shared<const AclSet>(std::move(set));
  return Status::OK();
}

}  // namespace sluice::auth
