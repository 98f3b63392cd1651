// The REST catalog's questions (lake::CatalogAccess) answered by the SQL grants
// (docs/design/0020-data-authorization.md): superusers may do everything; others see the
// namespaces that hold or lie under something granted to them, load the tables they may
// SELECT, commit to those they may INSERT into, and create, drop and rename in the
// namespaces they have CREATE on.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lake/rest_catalog.h"
#include "query/authz/grants.h"

namespace sluice::query::authz {

// `super_users` as authorization.super_users ("User:admin"); the principal asked about is
// "User:<name>" or a bare user name.
std::shared_ptr<const lake::CatalogAccess> GrantCatalogAccess(std::shared_ptr<GrantStore> grants,
                                                              std::vector<std::string> super_users);

}  // namespace sluice::query::authz
