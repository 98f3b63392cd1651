// Bearer tokens (auth/tokens.h): made and verified, refused when expired, tampered with,
// signed with another secret, or malformed in every way a reader of outside bytes meets.
#include "auth/tokens.h"

#include <gtest/gtest.h>

#include <string>

#include "auth/scram.h"

namespace sluice::auth {
namespace {

const std::string kSecret(32, 'k');
constexpr int64_t kNow = 1'800'000'000;

TokenClaims Claims() {
  TokenClaims c;
  c.subject = "alice";
  c.issued_at = kNow;
  c.expires_at = kNow + 3600;
  c.id = TokenSigner::NewId();
  c.credential = "tag";
  return c;
}

// A token whose payload is `payload` (raw JSON), properly signed with kSecret: what a
// holder of the secret could make, to test the checks after the MAC.
std::string SignedPayload(std::string_view payload) {
  const std::string key = Hmac(ScramMechanism::kSha256, kSecret, "sluice http token signing v1");
  std::string part = "sluice.v1." + Base64UrlEncode(payload);
  return part + "." + Base64UrlEncode(Hmac(ScramMechanism::kSha256, key, part));
}

TEST(TokensTest, ASignedTokenVerifiesWithItsClaims) {
  TokenSigner signer(kSecret);
  const TokenClaims c = Claims();
  const std::string token = signer.Sign(c);
  EXPECT_TRUE(token.starts_with("sluice.v1."));
  EXPECT_EQ(token.find_first_of("+/= "), std::string::npos) << token;
  TokenVerdict v = signer.Verify(token, kNow + 10);
  ASSERT_TRUE(v.ok) << v.why;
  EXPECT_EQ(v.claims.subject, "alice");
  EXPECT_EQ(v.claims.issued_at, kNow);
  EXPECT_EQ(v.claims.expires_at, kNow + 3600);
  EXPECT_EQ(v.claims.id, c.id);
  EXPECT_EQ(v.claims.credential, "tag");
  EXPECT_NE(TokenSigner::NewId(), TokenSigner::NewId());
}

TEST(TokensTest, ExpiredAndFutureTokensAreRefused) {
  TokenSigner signer(kSecret);
  const std::string token = signer.Sign(Claims());
  EXPECT_TRUE(signer.Verify(token, kNow + 3599).ok);
  TokenVerdict at_exp = signer.Verify(token, kNow + 3600);
  EXPECT_FALSE(at_exp.ok);
  EXPECT_EQ(at_exp.error, TokenError::kExpired);
  EXPECT_EQ(at_exp.why, "the token expired");
  EXPECT_EQ(signer.Verify(token, kNow + 86400).error, TokenError::kExpired);
  // Another broker's clock a little behind is fine; far behind is not.
  EXPECT_TRUE(signer.Verify(token, kNow - kTokenClockSkewSeconds).ok);
  EXPECT_EQ(signer.Verify(token, kNow - kTokenClockSkewSeconds - 1).error,
            TokenError::kNotYetValid);
}

TEST(TokensTest, TamperedTokensAndOtherSecretsAreRefused) {
  TokenSigner signer(kSecret);
  const std::string token = signer.Sign(Claims());
  // Every single-character change anywhere is caught.
  for (size_t i = 0; i < token.size(); ++i) {
    std::string t = token;
    t[i] = t[i] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(signer.Verify(t, kNow).ok) << "changed at " << i;
  }
  // A payload made for bob under alice's signature.
  TokenClaims bob = Claims();
  bob.subject = "bob";
  const std::string bobs = signer.Sign(bob);
  const std::string spliced = bobs.substr(0, bobs.rfind('.')) + token.substr(token.rfind('.'));
  TokenVerdict v = signer.Verify(spliced, kNow);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.error, TokenError::kBadSignature);
  // Another cluster's secret.
  TokenSigner other(std::string(32, 'x'));
  EXPECT_EQ(other.Verify(token, kNow).error, TokenError::kBadSignature);
  EXPECT_NE(other.CredentialTag("c"), signer.CredentialTag("c"));
  EXPECT_NE(signer.CredentialTag("c1"), signer.CredentialTag("c2"));
}

TEST(TokensTest, MalformedTokensAreRefusedWithoutReadingThem) {
  TokenSigner signer(kSecret);
  const std::string token = signer.Sign(Claims());
  const std::string mac = token.substr(token.rfind('.') + 1);
  const std::string body = token.substr(0, token.rfind('.'));
  for (const std::string& bad : {
           std::string(),
           std::string("sluice.v1."),
           std::string("sluice.v1.."),
           std::string("sluice.v2.") + token.substr(10),  // another version
           std::string("Sluice.v1.") + token.substr(10),
           body,                                      // no signature
           body + ".",                                // an empty signature
           body + "." + mac.substr(0, 42),            // a truncated signature
           body + "." + mac + "A",                    // a long one
           body + "." + mac + "AAAA",                 // 35 bytes
           body + "." + mac.substr(0, 42) + "=",      // padding
           body + "." + mac.substr(0, 42) + "+",      // the standard alphabet
           "sluice.v1." + mac,                        // no payload
           "sluice.v1.." + mac,                       // an empty payload
           token + "." + mac,                         // a part too many
           " " + token,                               // a space
           token + std::string(kMaxTokenBytes, 'A'),  // oversized
           std::string(kMaxTokenBytes + 1, 'a'),
           std::string("sluice.v1.\0abc.def", 18),
       }) {
    TokenVerdict v = signer.Verify(bad, kNow);
    EXPECT_FALSE(v.ok) << bad;
    EXPECT_NE(v.error, TokenError::kExpired) << bad;
    EXPECT_FALSE(v.why.empty());
  }
}

TEST(TokensTest, SignedButMalformedPayloadsAreRefused) {
  TokenSigner signer(kSecret);
  EXPECT_TRUE(signer
                  .Verify(SignedPayload(R"({"sub":"a","iat":1,"exp":)" + std::to_string(kNow + 5) +
                                        R"(,"jti":"j","cred":"c"})"),
                          kNow)
                  .ok);
  for (std::string_view payload : {
           "",
           "null",
           "[]",
           "{",
           R"({"sub":"a","iat":1,"exp":2})",                                  // no jti, cred
           R"({"sub":"","iat":1,"exp":9999999999,"jti":"j","cred":"c"})",     // empty subject
           R"({"sub":7,"iat":1,"exp":9999999999,"jti":"j","cred":"c"})",      // not a string
           R"({"sub":"a","iat":"1","exp":9999999999,"jti":"j","cred":"c"})",  // a string time
           R"({"sub":"a","iat":1.5,"exp":9999999999,"jti":"j","cred":"c"})",  // fractional
           R"({"sub":"a","iat":5,"exp":5,"jti":"j","cred":"c"})",             // exp not after iat
           R"({"sub":"a","iat":1,"exp":9999999999,"jti":"j","cred":"c")",     // truncated
           "{\"sub\":\"\xff\",\"iat\":1,\"exp\":9999999999,\"jti\":\"j\",\"cred\":\"c\"}",
       }) {
    TokenVerdict v = signer.Verify(SignedPayload(payload), kNow);
    EXPECT_FALSE(v.ok) << payload;
    EXPECT_EQ(v.error, TokenError::kMalformed) << payload;
  }
  const std::string long_sub(2000, 'a');
  EXPECT_FALSE(signer
                   .Verify(SignedPayload(R"({"sub":")" + long_sub +
                                         R"(","iat":1,"exp":9999999999,"jti":"j","cred":"c"})"),
                           kNow)
                   .ok);
}

TEST(TokensTest, Base64UrlIsStrict) {
  for (std::string_view bytes : {"", "f", "fo", "foo", "foob", "fooba", "foobar", "\xff\xfe\xfd"}) {
    Result<std::string> back = Base64UrlDecode(Base64UrlEncode(bytes));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, bytes);
  }
  EXPECT_EQ(Base64UrlEncode("\xfb\xff"), "-_8");
  for (std::string_view bad : {"A", "Zm9v=", "Zm9v+", "Zm9/", "Zh", "Zm9=", "Z m9"}) {
    EXPECT_FALSE(Base64UrlDecode(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace sluice::auth
