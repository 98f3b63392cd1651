// SCRAM credentials (RFC 5802, RFC 7677; SHA-512 as Kafka runs it): what a server keeps of
// a password (the salt, the iteration count, StoredKey and ServerKey) and the derivations
// both sides need. Kafka's SCRAM-SHA-256 and Postgres's SCRAM-SHA-256 derive the same
// credential from the same password and salt, so one credential serves both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace sluice::auth {

// Kafka's numbering (AlterUserScramCredentials' mechanism field).
enum class ScramMechanism : int8_t { kSha256 = 1, kSha512 = 2 };
inline constexpr ScramMechanism kScramMechanisms[] = {ScramMechanism::kSha256,
                                                      ScramMechanism::kSha512};

std::string_view MechanismName(ScramMechanism m);  // "SCRAM-SHA-256"
std::optional<ScramMechanism> MechanismFromName(std::string_view name);
std::optional<ScramMechanism> MechanismFromKafka(int8_t code);
size_t DigestSize(ScramMechanism m);  // 32 or 64

// Kafka's bounds for SCRAM iterations (KIP-554: 4096 to 16384).
inline constexpr int kMinIterations = 4096;
inline constexpr int kMaxIterations = 16384;
inline constexpr size_t kSaltBytes = 16;

struct ScramCredential {
  std::string salt;  // raw bytes
  int iterations = 0;
  std::string stored_key;  // H(HMAC(SaltedPassword, "Client Key"))
  std::string server_key;  // HMAC(SaltedPassword, "Server Key")
  bool operator==(const ScramCredential&) const = default;
};

// Hi(password, salt, iterations): PBKDF2 with HMAC of the mechanism's hash.
std::string SaltedPassword(ScramMechanism m, std::string_view password, std::string_view salt,
                           int iterations);
// A credential from a salted password (what AlterUserScramCredentials carries).
ScramCredential CredentialFromSalted(ScramMechanism m, std::string salt, int iterations,
                                     std::string_view salted_password);
// A credential for `password` with a fresh random salt (or `salt` when not empty).
ScramCredential CredentialFromPassword(ScramMechanism m, std::string_view password, int iterations,
                                       std::string salt = {});
// Whether `password` is the one `c` was made from (PBKDF2 again; constant-time compare).
bool PasswordMatches(ScramMechanism m, const ScramCredential& c, std::string_view password);

// HMAC and hash of the mechanism's digest.
std::string Hmac(ScramMechanism m, std::string_view key, std::string_view data);
std::string Hash(ScramMechanism m, std::string_view data);
std::string RandomBytes(size_t n);
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace sluice::auth
