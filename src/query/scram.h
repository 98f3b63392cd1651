// SCRAM-SHA-256 (RFC 5802, RFC 7677) on the server side, as Postgres runs it over its
// SASL messages: no channel binding, the user name taken from the startup packet.
//
//   ScramVerifier v = ScramVerifier::FromPassword("secret", 4096);  // once, at start-up
//   ScramExchange x(&v);
//   ASSIGN_OR_RETURN(std::string server_first, x.ClientFirst(client_first));
//   ASSIGN_OR_RETURN(std::string server_final, x.ClientFinal(client_final));  // wrong proof: error
//
// A ScramExchange belongs to one connection's thread.
#pragma once

#include <string>
#include <string_view>

#include "base/base64.h"  // Base64Encode/Decode, used with SCRAM's messages
#include "base/status.h"

namespace sluice::query {

// What the server keeps of a password (RFC 5802's StoredKey and ServerKey with their salt).
struct ScramVerifier {
  std::string salt;  // raw bytes
  int iterations = 4096;
  std::string stored_key;
  std::string server_key;
  static ScramVerifier FromPassword(std::string_view password, int iterations);
  // A verifier no password matches, for users that do not exist (the exchange then
  // fails at the proof like a wrong password, telling nothing of which users exist).
  static ScramVerifier Impossible();
};

class ScramExchange {
 public:
  explicit ScramExchange(const ScramVerifier* verifier) : verifier_(verifier) {}
  // client-first-message -> server-first-message.
  Result<std::string> ClientFirst(std::string_view message);
  // client-final-message -> server-final-message; InvalidArgument when the proof is wrong.
  Result<std::string> ClientFinal(std::string_view message);

 private:
  const ScramVerifier* verifier_;
  std::string gs2_header_;
  std::string client_first_bare_;
  std::string server_first_;
  std::string nonce_;
};

}  // namespace sluice::query
