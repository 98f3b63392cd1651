// `sluice user add|passwd|remove|list`: the users of a running broker's user store
// (docs/design/0019-security.md, phase D), over the Kafka protocol as Kafka's
// kafka-configs.sh --entity-type users does it (DescribeUserScramCredentials,
// AlterUserScramCredentials): the salted password is computed here, the password never
// leaves this process. The connection speaks any listener's protocol.
#pragma once

#include <string>

namespace sluice::cli {

struct UserFlags {
  std::string name;
  std::string bootstrap;          // HOST:PORT; default $SLUICE_KAFKA_ADDR or 127.0.0.1:9092
  std::string mechanism = "all";  // SCRAM-SHA-256, SCRAM-SHA-512 or all
  int iterations = 4096;
  bool password_stdin = false;  // read the new password from stdin (one line)
  // The connection: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
  std::string security_protocol = "PLAINTEXT";
  std::string ca_file, cert_file, key_file;  // SSL
  std::string sasl_mechanism = "SCRAM-SHA-256";
  std::string sasl_user;  // its password from $SLUICE_SASL_PASSWORD
};

int RunUserList(const UserFlags& flags);
int RunUserAdd(const UserFlags& flags);
int RunUserPasswd(const UserFlags& flags);
int RunUserRemove(const UserFlags& flags);

}  // namespace sluice::cli
