// HTTP Basic authentication against the user store (docs/design/0019-security.md, phase D:
// one user store for Kafka SASL, the query server and the HTTP port). `http.auth: basic`.
//
// A request carries `Authorization: Basic base64(user:password)`; the password is checked
// against the user's SCRAM credential (PBKDF2 again, as SASL PLAIN is). A verified pair is
// remembered (as a hash, with the credential it matched) so that a client sending the same
// header on every request costs one derivation, until its credential changes. Anything
// else is 401 with `WWW-Authenticate: Basic realm="sluice"`, in the Iceberg REST error shape.
//
// Thread-safe: the HTTP server's threads call it at once.
#pragma once

#include <memory>

#include "auth/user_store.h"
#include "base/http_server.h"

namespace sluice::auth {

HttpAuthenticator BasicAuthenticator(std::shared_ptr<const UserStore> users);

}  // namespace sluice::auth
