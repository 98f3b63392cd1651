// `sluice user add|passwd|remove|list`: the users of a running broker's user store
// (docs/design/0019-security.md, phase D), over the Kafka protocol as Kafka's
// kafka-configs.sh --entity-type users does it (DescribeUserScramCredentials,
// AlterUserScramCredentials): the salted password is computed here, the password never
// leaves this process. The connection speaks any listener's protocol.
//
// `sluice user token` asks the HTTP port instead: POST /v1/oauth/tokens with the user's
// password (the Iceberg REST spec's client credentials) and prints the bearer token alone,
// so that `TOKEN=$(sluice user token alice --password-stdin <pw)` works
// (docs/design/0021-http-tokens-and-browser-safety.md).
#pragma once

#include <string>

#include "cli/admin_connection.h"

namespace sluice::cli {

struct UserFlags {
  std::string name;
  AdminConnectionFlags connection;
  std::string mechanism = "all";  // SCRAM-SHA-256, SCRAM-SHA-512 or all
  int iterations = 4096;
  bool password_stdin = false;  // read the new password from stdin (one line)
  // token: the HTTP port ("HOST:PORT", or an http:// or https:// URL), the CA its
  // certificate chains to (HTTPS), and the lifetime asked for ("" the server's default).
  std::string http_addr = "127.0.0.1:8181";
  std::string cacert;
  std::string ttl;
};

int RunUserList(const UserFlags& flags);
int RunUserAdd(const UserFlags& flags);
int RunUserPasswd(const UserFlags& flags);
int RunUserRemove(const UserFlags& flags);
int RunUserToken(const UserFlags& flags);

}  // namespace sluice::cli
