// `sluice user add|passwd|remove|list`: the users of a running broker's user store
// (docs/design/0019-security.md, phase D), over the Kafka protocol as Kafka's
// kafka-configs.sh --entity-type users does it (DescribeUserScramCredentials,
// AlterUserScramCredentials): the salted password is computed here, the password never
// leaves this process. The connection speaks any listener's protocol.
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
};

int RunUserList(const UserFlags& flags);
int RunUserAdd(const UserFlags& flags);
int RunUserPasswd(const UserFlags& flags);
int RunUserRemove(const UserFlags& flags);

}  // namespace sluice::cli
