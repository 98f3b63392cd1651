// AclStore: the cluster's ACL bindings (docs/design/0019-security.md, phase E), kept as
// UserStore keeps users: each change hands the whole set's JSON to `persist` before it is
// visible (a file on a single node, etcd in a cluster), and a set changed elsewhere comes
// in with Replace. Readers take the current AclSet (an immutable snapshot) and decide on
// it without a lock.
//
// Threads: any; changes are serialized.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "auth/acl.h"
#include "base/status.h"

namespace sluice::auth {

class AclStore {
 public:
  using Persist = std::function<Status(const std::string& json)>;

  // From the JSON `persist` wrote ("" : none). `persist` null: kept in memory.
  static Result<std::unique_ptr<AclStore>> Load(std::string_view json, Persist persist);

  std::shared_ptr<const AclSet> Current() const;

  // CreateAcls: each binding checked (ValidateBinding; its error for that binding alone),
  // the valid ones added in one persisted change. One status per binding, in order; a
  // failed persist fails every valid one.
  std::vector<Status> Create(const std::vector<AclBinding>& bindings);
  // DeleteAcls: per filter, the bindings it matched (removed in one persisted change), or
  // its error (an invalid filter; a failed persist).
  struct Deleted {
    Status status;
    std::vector<AclBinding> bindings;
  };
  std::vector<Deleted> Delete(const std::vector<AclFilter>& filters);

  Status Replace(std::string_view json);

 private:
  AclStore(std::shared_ptr<const AclSet> set, Persist persist)
      : set_(std::move(set)), persist_(std::move(persist)) {}

  mutable std::mutex mu_;
  std::shared_ptr<const AclSet> set_;  // guarded by mu_ (the pointer; the set is immutable)
  std::mutex write_mu_;                // one change at a time, persist included
  const Persist persist_;
};

}  // namespace sluice::auth
