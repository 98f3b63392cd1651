// SCRAM credentials against published vectors: RFC 7677's SCRAM-SHA-256 exchange and
// PBKDF2-HMAC-SHA-512's known answer; passwords checked against credentials.
#include "auth/scram.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "base/base64.h"

namespace sluice::auth {
namespace {

std::string Xor(std::string a, const std::string& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<char>(a[i] ^ b[i]);
  return a;
}

TEST(ScramTest, Rfc7677Sha256) {
  auto salt = Base64Decode("W22ZaJ0SNY7soEsUEjb6gQ==");
  ASSERT_TRUE(salt.ok());
  ScramCredential c = CredentialFromPassword(ScramMechanism::kSha256, "pencil", 4096, *salt);
  const std::string auth_message =
      "n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
      "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)"
      "hNlF$k0";
  const std::string salted = SaltedPassword(ScramMechanism::kSha256, "pencil", *salt, 4096);
  const std::string client_key = Hmac(ScramMechanism::kSha256, salted, "Client Key");
  EXPECT_EQ(Hash(ScramMechanism::kSha256, client_key), c.stored_key);
  const std::string proof =
      Xor(client_key, Hmac(ScramMechanism::kSha256, c.stored_key, auth_message));
  EXPECT_EQ(Base64Encode(proof), "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
  EXPECT_EQ(Base64Encode(Hmac(ScramMechanism::kSha256, c.server_key, auth_message)),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
}

TEST(ScramTest, Pbkdf2Sha512KnownAnswer) {
  const std::string dk = SaltedPassword(ScramMechanism::kSha512, "password", "salt", 1);
  static const char kHex[] =
      "867f70cf1ade02cff3752599a3a53dc4af34c7a669815ae5d513554e1c8cf252c02d470a285a0501bad999bfe943"
      "c08f050235d7d68b1da55e63f73b60a57fce";
  std::string hex;
  for (unsigned char ch : dk) hex += fmt::format("{:02x}", ch);
  EXPECT_EQ(hex, kHex);
}

TEST(ScramTest, PasswordsMatchTheirCredentialsOnly) {
  for (ScramMechanism m : kScramMechanisms) {
    ScramCredential c = CredentialFromPassword(m, "s3cret", kMinIterations);
    EXPECT_EQ(c.salt.size(), kSaltBytes);
    EXPECT_EQ(c.stored_key.size(), DigestSize(m));
    EXPECT_EQ(c.server_key.size(), DigestSize(m));
    EXPECT_TRUE(PasswordMatches(m, c, "s3cret"));
    EXPECT_FALSE(PasswordMatches(m, c, "s3cret "));
    EXPECT_FALSE(PasswordMatches(m, c, ""));
    // From the salted password (AlterUserScramCredentials' form): the same credential.
    EXPECT_EQ(CredentialFromSalted(m, c.salt, c.iterations,
                                   SaltedPassword(m, "s3cret", c.salt, c.iterations)),
              c);
  }
  EXPECT_EQ(MechanismFromName("SCRAM-SHA-512"), ScramMechanism::kSha512);
  EXPECT_EQ(MechanismFromName("scram-sha-256"), std::nullopt);
  EXPECT_EQ(MechanismFromKafka(1), ScramMechanism::kSha256);
  EXPECT_EQ(MechanismFromKafka(0), std::nullopt);
  EXPECT_EQ(MechanismFromKafka(3), std::nullopt);
}

}  // namespace
}  // namespace sluice::auth
