#include "auth/scram.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

namespace sluice::auth {
namespace {

const EVP_MD* Md(ScramMechanism m) {
  return m == ScramMechanism::kSha512 ? EVP_sha512() : EVP_sha256();
}

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

}  // namespace

std::string_view MechanismName(ScramMechanism m) {
  return m == ScramMechanism::kSha512 ? "SCRAM-SHA-512" : "SCRAM-SHA-256";
}

std::optional<ScramMechanism> MechanismFromName(std::string_view name) {
  if (name == "SCRAM-SHA-256") return ScramMechanism::kSha256;
  if (name == "SCRAM-SHA-512") return ScramMechanism::kSha512;
  return std::nullopt;
}

std::optional<ScramMechanism> MechanismFromKafka(int8_t code) {
  if (code == 1) return ScramMechanism::kSha256;
  if (code == 2) return ScramMechanism::kSha512;
  return std::nullopt;
}

size_t DigestSize(ScramMechanism m) { return m == ScramMechanism::kSha512 ? 64 : 32; }

std::string Hmac(ScramMechanism m, std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // `out` is never null: HMAC() with a null output uses a static buffer (not thread-safe).
  if (HMAC(Md(m), key.data(), static_cast<int>(key.size()), Bytes(data), data.size(), out, &len) ==
      nullptr) {
    std::abort();  // only out of memory
  }
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string Hash(ScramMechanism m, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out, &len, Md(m), nullptr) != 1) std::abort();
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    std::abort();  // no randomness: nothing here can be made safely
  }
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string SaltedPassword(ScramMechanism m, std::string_view password, std::string_view salt,
                           int iterations) {
  std::string out(DigestSize(m), '\0');
  if (PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()), Bytes(salt),
                        static_cast<int>(salt.size()), iterations, Md(m),
                        static_cast<int>(out.size()),
                        reinterpret_cast<unsigned char*>(out.data())) != 1) {
    std::abort();
  }
  return out;
}

ScramCredential CredentialFromSalted(ScramMechanism m, std::string salt, int iterations,
                                     std::string_view salted_password) {
  ScramCredential c;
  c.salt = std::move(salt);
  c.iterations = iterations;
  std::string client_key = Hmac(m, salted_password, "Client Key");
  c.stored_key = Hash(m, client_key);
  c.server_key = Hmac(m, salted_password, "Server Key");
  OPENSSL_cleanse(client_key.data(), client_key.size());
  return c;
}

ScramCredential CredentialFromPassword(ScramMechanism m, std::string_view password, int iterations,
                                       std::string salt) {
  if (salt.empty()) salt = RandomBytes(kSaltBytes);
  std::string salted = SaltedPassword(m, password, salt, iterations);
  ScramCredential c = CredentialFromSalted(m, std::move(salt), iterations, salted);
  OPENSSL_cleanse(salted.data(), salted.size());
  return c;
}

bool PasswordMatches(ScramMechanism m, const ScramCredential& c, std::string_view password) {
  std::string salted = SaltedPassword(m, password, c.salt, c.iterations);
  std::string client_key = Hmac(m, salted, "Client Key");
  const bool match = ConstantTimeEquals(Hash(m, client_key), c.stored_key);
  OPENSSL_cleanse(salted.data(), salted.size());
  OPENSSL_cleanse(client_key.data(), client_key.size());
  return match;
}

}  // namespace sluice::auth
