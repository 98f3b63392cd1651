#include "query/scram.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

namespace sluice::query {
namespace {

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char out[32];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

// The client side of RFC 5802, written out independently of the server's code.
struct Client {
  std::string password;
  std::string first_bare = "n=,r=clientnonce123";
  std::string server_signature;

  Result<std::string> Final(std::string_view server_first) {
    std::string sf(server_first);
    auto attr = [&](char c) {
      size_t p = sf.find(std::string(1, c) + "=");
      size_t e = sf.find(',', p);
      return sf.substr(p + 2, e == std::string::npos ? std::string::npos : e - p - 2);
    };
    ASSIGN_OR_RETURN(std::string salt, Base64Decode(attr('s')));
    int iterations = std::stoi(attr('i'));
    unsigned char salted[32];
    PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                      reinterpret_cast<const unsigned char*>(salt.data()),
                      static_cast<int>(salt.size()), iterations, EVP_sha256(), 32, salted);
    std::string sp(reinterpret_cast<char*>(salted), 32);
    std::string client_key = Hmac(sp, "Client Key");
    unsigned char stored[32];
    SHA256(reinterpret_cast<const unsigned char*>(client_key.data()), 32, stored);
    std::string without_proof = "c=biws,r=" + attr('r');
    std::string auth = first_bare + "," + sf + "," + without_proof;
    std::string sig = Hmac(std::string(reinterpret_cast<char*>(stored), 32), auth);
    std::string proof(32, '\0');
    for (int i = 0; i < 32; ++i) proof[i] = static_cast<char>(client_key[i] ^ sig[i]);
    server_signature = Base64Encode(Hmac(Hmac(sp, "Server Key"), auth));
    return without_proof + ",p=" + Base64Encode(proof);
  }
};

TEST(ScramTest, RightPasswordIsAcceptedAndServerProvesItself) {
  ScramVerifier v = ScramVerifier::FromPassword("s3cret", 4096);
  ScramExchange x(&v);
  Client c{"s3cret"};
  auto server_first = x.ClientFirst("n,," + c.first_bare);
  ASSERT_TRUE(server_first.ok()) << server_first.status().ToString();
  EXPECT_TRUE(server_first->starts_with("r=clientnonce123"));
  auto client_final = c.Final(*server_first);
  ASSERT_TRUE(client_final.ok());
  auto server_final = x.ClientFinal(*client_final);
  ASSERT_TRUE(server_final.ok()) << server_final.status().ToString();
  EXPECT_EQ(*server_final, "v=" + c.server_signature);
}

TEST(ScramTest, WrongPasswordUnknownUserAndTamperingAreRefused) {
  ScramVerifier v = ScramVerifier::FromPassword("s3cret", 4096);
  {
    ScramExchange x(&v);
    Client c{"wrong"};
    auto sf = x.ClientFirst("n,," + c.first_bare);
    EXPECT_FALSE(x.ClientFinal(*c.Final(*sf)).ok());
  }
  {
    ScramVerifier impossible = ScramVerifier::Impossible();
    ScramExchange x(&impossible);
    Client c{"s3cret"};
    auto sf = x.ClientFirst("n,," + c.first_bare);
    ASSERT_TRUE(sf.ok());
    EXPECT_FALSE(x.ClientFinal(*c.Final(*sf)).ok());
  }
  {
    ScramExchange x(&v);
    Client c{"s3cret"};
    auto sf = x.ClientFirst("n,," + c.first_bare);
    std::string fin = *c.Final(*sf);
    fin.replace(fin.find("r=") + 2, 1, "X");  // another nonce
    EXPECT_FALSE(x.ClientFinal(fin).ok());
  }
  ScramExchange x(&v);
  EXPECT_FALSE(x.ClientFirst("p=tls-server-end-point,,n=,r=abc").ok());
  EXPECT_FALSE(x.ClientFirst("n,,n=").ok());
  EXPECT_FALSE(x.ClientFirst("garbage").ok());
  EXPECT_FALSE(x.ClientFinal("c=biws,r=x,p=AAAA").ok());  // before ClientFirst
}

TEST(ScramTest, Base64RoundTrips) {
  for (const std::string& s :
       std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    auto back = Base64Decode(Base64Encode(s));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, s);
  }
  EXPECT_FALSE(Base64Decode("abc").ok());
  EXPECT_FALSE(Base64Decode("ab!=").ok());
}

}  // namespace
}  // namespace sluice::query
