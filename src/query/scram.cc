#include "query/scram.h"

#include <vector>

#include "auth/scram.h"

namespace sluice::query {

namespace {

using auth::ConstantTimeEquals;
using auth::RandomBytes;

std::string Hmac(std::string_view key, std::string_view data) {
  return auth::Hmac(auth::ScramMechanism::kSha256, key, data);
}

std::string Sha256(std::string_view data) {
  return auth::Hash(auth::ScramMechanism::kSha256, data);
}

// The value of attribute `name` ("r" in "r=abc") among comma-separated attributes.
std::string_view Attribute(std::string_view message, char name) {
  size_t i = 0;
  while (i < message.size()) {
    size_t end = message.find(',', i);
    if (end == std::string_view::npos) end = message.size();
    std::string_view a = message.substr(i, end - i);
    if (a.size() >= 2 && a[0] == name && a[1] == '=') return a.substr(2);
    i = end + 1;
  }
  return {};
}

}  // namespace

ScramVerifier ScramVerifier::FromPassword(std::string_view password, int iterations) {
  auth::ScramCredential c =
      auth::CredentialFromPassword(auth::ScramMechanism::kSha256, password, iterations);
  return ScramVerifier{std::move(c.salt), c.iterations, std::move(c.stored_key),
                       std::move(c.server_key)};
}

ScramVerifier ScramVerifier::Impossible() {
  ScramVerifier v;
  v.salt = RandomBytes(16);
  v.stored_key = RandomBytes(32);
  v.server_key = RandomBytes(32);
  return v;
}

Result<std::string> ScramExchange::ClientFirst(std::string_view message) {
  // gs2-header: "n,," or "y,," (the client could bind the channel but thinks we cannot),
  // optionally with an authzid; "p=" asks for channel binding, which needs TLS.
  if (message.empty() || (message[0] != 'n' && message[0] != 'y')) {
    return InvalidArgumentError(
        "SCRAM: channel binding is not supported (client-first-message '{}')",
        message.substr(0, 1));
  }
  size_t first = message.find(',');
  size_t second = first == std::string_view::npos ? first : message.find(',', first + 1);
  if (second == std::string_view::npos)
    return InvalidArgumentError("SCRAM: malformed client-first-message");
  gs2_header_ = message.substr(0, second + 1);
  client_first_bare_ = message.substr(second + 1);
  if (client_first_bare_.starts_with("m="))
    return InvalidArgumentError("SCRAM: extensions are not supported");
  std::string_view client_nonce = Attribute(client_first_bare_, 'r');
  if (client_nonce.empty()) return InvalidArgumentError("SCRAM: client-first-message has no nonce");
  for (char c : client_nonce) {
    if (c < 0x21 || c > 0x7e || c == ',') return InvalidArgumentError("SCRAM: invalid nonce");
  }
  nonce_ = std::string(client_nonce) + Base64Encode(RandomBytes(18));
  server_first_ = "r=" + nonce_ + ",s=" + Base64Encode(verifier_->salt) +
                  ",i=" + std::to_string(verifier_->iterations);
  return server_first_;
}

Result<std::string> ScramExchange::ClientFinal(std::string_view message) {
  if (server_first_.empty())
    return FailedPreconditionError("SCRAM: client-final-message before client-first");
  size_t p = message.rfind(",p=");
  if (p == std::string_view::npos)
    return InvalidArgumentError("SCRAM: client-final-message has no proof");
  std::string_view without_proof = message.substr(0, p);
  if (Attribute(without_proof, 'c') != Base64Encode(gs2_header_)) {
    return InvalidArgumentError("SCRAM: channel binding attribute does not match");
  }
  if (Attribute(without_proof, 'r') != nonce_)
    return InvalidArgumentError("SCRAM: nonce does not match");
  ASSIGN_OR_RETURN(std::string proof, Base64Decode(message.substr(p + 3)));
  if (proof.size() != 32) return InvalidArgumentError("SCRAM: malformed proof");
  std::string auth_message =
      client_first_bare_ + "," + server_first_ + "," + std::string(without_proof);
  std::string client_signature = Hmac(verifier_->stored_key, auth_message);
  std::string client_key(32, '\0');
  for (size_t i = 0; i < 32; ++i) client_key[i] = static_cast<char>(proof[i] ^ client_signature[i]);
  if (!ConstantTimeEquals(Sha256(client_key), verifier_->stored_key)) {
    return InvalidArgumentError("SCRAM: wrong password");
  }
  return "v=" + Base64Encode(Hmac(verifier_->server_key, auth_message));
}

}  // namespace sluice::query
