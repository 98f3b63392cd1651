#include "broker/sasl.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <atomic>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "auth/user_store.h"
#include "base/config.h"

namespace sluice::broker {
namespace {

using State = SaslSession::State;
using Step = SaslSession::Step;

constexpr std::string_view kPlainFailed = "Authentication failed: Invalid username or password";
constexpr std::string_view kScramFailed =
    "Authentication failed during authentication due to invalid credentials with SASL "
    "mechanism SCRAM-SHA-256";

std::vector<uint8_t> Bytes(std::string_view s) { return {s.begin(), s.end()}; }
std::string Text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

Step Send(SaslSession& session, std::string_view message) {
  std::vector<uint8_t> bytes = Bytes(message);
  return session.Next(bytes);
}

bool Contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

// ------------------------------------------------------------------ a SCRAM client

// Base64 through OpenSSL, independent of sasl.cc's own codec.
std::string B64(std::span<const uint8_t> in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), in.data(),
                          static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}
std::string B64(std::string_view in) { return B64(Bytes(in)); }

std::vector<uint8_t> UnB64(std::string_view in) {
  std::vector<uint8_t> out(in.size() / 4 * 3 + 3);
  int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  EXPECT_GE(n, 0) << in;
  size_t pad = in.ends_with("==") ? 2 : in.ends_with("=") ? 1 : 0;
  out.resize(static_cast<size_t>(std::max(n, 0)) - pad);
  return out;
}

using Digest = std::array<uint8_t, 32>;

Digest Hmac(std::span<const uint8_t> key, std::string_view data) {
  Digest out;
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(), &len);
  return out;
}

Digest Sha(std::span<const uint8_t> data) {
  Digest out;
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr);
  return out;
}

std::string RandomNonce() {
  uint8_t raw[18];
  EXPECT_EQ(RAND_bytes(raw, sizeof(raw)), 1);
  return B64(std::span<const uint8_t>(raw));
}

// The client side of RFC 5802 with SHA-256, written from the RFC.
struct ScramClient {
  std::string saslname;  // the user name as sent (already escaped)
  std::string password;
  std::string nonce = RandomNonce();
  std::string gs2 = "n,,";
  std::string final_extensions;  // e.g. ",ext=1", put between r= and p=
  std::string first_extensions;  // e.g. ",tokenauth=false", put after r=
  // What goes before the full nonce in the final message: "" as RFC 5802 says, or the
  // client nonce again, as librdkafka before 2.6.1 sends it.
  std::string final_nonce_prefix;

  std::string first_bare;
  std::string expected_server_final;

  std::string First() {
    first_bare = "n=" + saslname + ",r=" + nonce + first_extensions;
    return gs2 + first_bare;
  }

  std::string Final(std::string_view server_first) {
    std::vector<std::string> attrs;
    for (size_t start = 0;;) {
      size_t comma = server_first.find(',', start);
      attrs.emplace_back(server_first.substr(start, comma - start));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    EXPECT_EQ(attrs.size(), 3u) << server_first;
    if (attrs.size() != 3) return "";
    std::string full_nonce = attrs[0].substr(2);
    std::vector<uint8_t> salt = UnB64(attrs[1].substr(2));
    int iterations = std::stoi(attrs[2].substr(2));
    EXPECT_TRUE(full_nonce.starts_with(nonce));

    std::string without_proof =
        "c=" + B64(gs2) + ",r=" + final_nonce_prefix + full_nonce + final_extensions;
    std::string auth_message = first_bare + "," + std::string(server_first) + "," + without_proof;
    Digest salted;
    PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()), salt.data(),
                      static_cast<int>(salt.size()), iterations, EVP_sha256(), 32, salted.data());
    Digest client_key = Hmac(salted, "Client Key");
    Digest stored_key = Sha(client_key);
    Digest signature = Hmac(stored_key, auth_message);
    Digest proof;
    for (size_t i = 0; i < proof.size(); ++i) proof[i] = client_key[i] ^ signature[i];
    expected_server_final = "v=" + B64(Hmac(Hmac(salted, "Server Key"), auth_message));
    return without_proof + ",p=" + B64(proof);
  }
};

SaslConfig TestConfig() {
  SaslConfig config;
  config.enabled = true;
  config.users = {{"alice", "alice-secret"}, {"bob", "b0b"}, {"a,b=c", "escaped"}};
  return config;
}

std::unique_ptr<SaslAuthenticator> MakeAuthenticator(const SaslConfig& config = TestConfig()) {
  auto auth = SaslAuthenticator::Create(config);
  EXPECT_TRUE(auth.ok()) << auth.status().ToString();
  return auth.ok() ? std::move(auth).value() : nullptr;
}

// A full SCRAM exchange; returns the final step.
Step ScramExchange(const SaslAuthenticator& auth, ScramClient& client,
                   std::string* principal = nullptr) {
  auto session = auth.Start("SCRAM-SHA-256");
  EXPECT_NE(session, nullptr);
  Step first = Send(*session, client.First());
  if (first.state != State::kInProgress) return first;
  Step final = Send(*session, client.Final(Text(first.response)));
  if (principal != nullptr) *principal = session->principal();
  return final;
}

// ------------------------------------------------------------------ authenticator

TEST(SaslAuthenticatorTest, AdvertisesTheConfiguredMechanismsInOrder) {
  SaslConfig config = TestConfig();
  config.mechanisms = {"SCRAM-SHA-256", "PLAIN"};
  auto auth = MakeAuthenticator(config);
  ASSERT_NE(auth, nullptr);
  EXPECT_EQ(auth->mechanisms(), (std::vector<std::string>{"SCRAM-SHA-256", "PLAIN"}));
  EXPECT_TRUE(auth->Supports("PLAIN"));
  EXPECT_TRUE(auth->Supports("SCRAM-SHA-256"));
  EXPECT_FALSE(auth->Supports("SCRAM-SHA-512"));
  EXPECT_FALSE(auth->Supports("plain"));
  EXPECT_EQ(auth->Start("GSSAPI"), nullptr);
  EXPECT_NE(auth->Start("PLAIN"), nullptr);
}

TEST(SaslAuthenticatorTest, StartsOnlyEnabledMechanisms) {
  SaslConfig config = TestConfig();
  config.mechanisms = {"PLAIN"};
  auto auth = MakeAuthenticator(config);
  ASSERT_NE(auth, nullptr);
  EXPECT_FALSE(auth->Supports("SCRAM-SHA-256"));
  EXPECT_EQ(auth->Start("SCRAM-SHA-256"), nullptr);
  EXPECT_NE(auth->Start("PLAIN"), nullptr);
}

TEST(SaslAuthenticatorTest, CreateRefusesABadConfig) {
  SaslConfig config = TestConfig();
  config.mechanisms = {"PLAIN", "SCRAM-SHA-1"};
  EXPECT_FALSE(SaslAuthenticator::Create(config).ok());

  config = TestConfig();
  config.users.push_back({"alice", "again"});
  auto dup = SaslAuthenticator::Create(config);
  ASSERT_FALSE(dup.ok());
  EXPECT_TRUE(Contains(dup.status().message(), "'alice' is listed twice"))
      << dup.status().ToString();

  config = TestConfig();
  config.users.push_back({"carol", ""});
  EXPECT_FALSE(SaslAuthenticator::Create(config).ok());

  config = TestConfig();
  config.users.push_back({"", "pw"});
  EXPECT_FALSE(SaslAuthenticator::Create(config).ok());

  config = TestConfig();
  config.scram_iterations = 1000;
  EXPECT_FALSE(SaslAuthenticator::Create(config).ok());

  config = TestConfig();
  config.users.clear();
  EXPECT_FALSE(SaslAuthenticator::Create(config).ok());
  config.enabled = false;  // a disabled section may be empty
  EXPECT_TRUE(SaslAuthenticator::Create(config).ok());
}

// ------------------------------------------------------------------ PLAIN

Step Plain(const SaslAuthenticator& auth, std::string_view message,
           std::string* principal = nullptr) {
  auto session = auth.Start("PLAIN");
  EXPECT_NE(session, nullptr);
  Step step = Send(*session, message);
  if (principal != nullptr) *principal = session->principal();
  return step;
}

TEST(SaslPlainTest, RightPasswordSucceeds) {
  auto auth = MakeAuthenticator();
  std::string principal;
  Step step = Plain(*auth, std::string_view("\0alice\0alice-secret", 19), &principal);
  EXPECT_EQ(step.state, State::kSucceeded) << step.error;
  EXPECT_TRUE(step.response.empty());
  EXPECT_EQ(principal, "alice");

  // An authzid equal to the user name is allowed.
  step = Plain(*auth, std::string_view("bob\0bob\0b0b", 11), &principal);
  EXPECT_EQ(step.state, State::kSucceeded) << step.error;
  EXPECT_EQ(principal, "bob");

  // PLAIN names are not escaped.
  step = Plain(*auth, std::string_view("\0a,b=c\0escaped", 14), &principal);
  EXPECT_EQ(step.state, State::kSucceeded) << step.error;
  EXPECT_EQ(principal, "a,b=c");
}

TEST(SaslPlainTest, WrongPasswordAndUnknownUserFailAlike) {
  auto auth = MakeAuthenticator();
  std::string principal = "unset";
  for (std::string_view message :
       {std::string_view("\0alice\0wrong", 12), std::string_view("\0alice\0alice-secretX", 20),
        std::string_view("\0alice\0alice-secre", 18), std::string_view("\0alice\0b0b", 10),
        std::string_view("\0mallory\0alice-secret", 21)}) {
    Step step = Plain(*auth, message, &principal);
    EXPECT_EQ(step.state, State::kFailed);
    EXPECT_EQ(step.error, kPlainFailed);
    EXPECT_EQ(principal, "");
  }
}

TEST(SaslPlainTest, AuthzidOtherThanTheUserFails) {
  auto auth = MakeAuthenticator();
  Step step = Plain(*auth, std::string_view("bob\0alice\0alice-secret", 22));
  EXPECT_EQ(step.state, State::kFailed);
  EXPECT_TRUE(Contains(step.error, "authorization id that is different from username"))
      << step.error;
}

TEST(SaslPlainTest, MalformedMessagesFail) {
  auto auth = MakeAuthenticator();
  struct Case {
    std::string message;
    std::string_view error_part;
  };
  std::vector<Case> cases = {
      {"", "empty"},
      {"alice", "expected 3 tokens, got 1"},
      {std::string("alice\0alice-secret", 18), "expected 3 tokens, got 2"},
      {std::string("\0alice\0alice-secret\0", 20), "expected 3 tokens, got 4"},
      {std::string("\0\0alice-secret", 14), "username not specified"},
      {std::string("\0alice\0", 7), "password not specified"},
      {std::string("\0al\xffice\0alice-secret", 20), "not UTF-8"},
      {std::string("\0alice\0\xc0\xaf", 9), "not UTF-8"},       // overlong '/'
      {std::string("\0alice\0\xed\xa0\x80", 10), "not UTF-8"},  // a surrogate
      {std::string("\0alice\0\xe2\x82", 9), "not UTF-8"},       // truncated
      {std::string("\0alice\0", 7) + std::string(kMaxSaslMessageBytes, 'x'), "over the limit"},
  };
  for (const Case& c : cases) {
    Step step = Plain(*auth, c.message);
    EXPECT_EQ(step.state, State::kFailed) << c.error_part;
    EXPECT_TRUE(Contains(step.error, c.error_part)) << c.error_part << ": " << step.error;
    EXPECT_TRUE(step.response.empty());
  }
  // A message exactly at the limit is read (and fails on the password, not its size).
  std::string at_limit = std::string("\0alice\0", 7);
  at_limit += std::string(kMaxSaslMessageBytes - at_limit.size(), 'x');
  EXPECT_EQ(Plain(*auth, at_limit).error, kPlainFailed);
  // Non-ASCII UTF-8 is fine.
  EXPECT_EQ(Plain(*auth, std::string("\0alice\0\xc3\xa9t\xc3\xa9", 12)).error, kPlainFailed);
}

TEST(SaslPlainTest, AStepAfterTheExchangeEndedFails) {
  auto auth = MakeAuthenticator();
  auto session = auth->Start("PLAIN");
  EXPECT_EQ(Send(*session, std::string_view("\0alice\0alice-secret", 19)).state, State::kSucceeded);
  Step again = Send(*session, std::string_view("\0alice\0alice-secret", 19));
  EXPECT_EQ(again.state, State::kFailed);
  EXPECT_TRUE(Contains(again.error, "already ended")) << again.error;
  EXPECT_EQ(session->principal(), "alice");  // the exchange that ended still stands

  session = auth->Start("PLAIN");
  EXPECT_EQ(Send(*session, std::string_view("\0alice\0nope", 11)).state, State::kFailed);
  EXPECT_EQ(Send(*session, std::string_view("\0alice\0alice-secret", 19)).state, State::kFailed);
  EXPECT_EQ(session->principal(), "");
}

// ------------------------------------------------------------------ SCRAM

// RFC 7677 section 3.
// The process's own clients: kInternalUser with the internal secret is itself (a super
// user, by name), kInternalUser/<p> is p; nothing else gets in with those names.
TEST(SaslInternalUserTest, TheSecretLogsInAsTheProcessOrAsAPrincipal) {
  using namespace std::literals;
  auto store = auth::UserStore::Load("", nullptr);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Seed("alice", "alice-secret", 4096).ok());
  auto auth = SaslAuthenticator::Create(TestConfig(), std::move(*store), "s3cret");
  ASSERT_TRUE(auth.ok()) << auth.status().ToString();
  std::string principal;
  Step step = Plain(**auth, "\0__sluice\0s3cret"sv, &principal);
  EXPECT_EQ(step.state, State::kSucceeded) << step.error;
  EXPECT_EQ(principal, "__sluice");
  step = Plain(**auth, "\0__sluice/alice\0s3cret"sv, &principal);
  EXPECT_EQ(step.state, State::kSucceeded) << step.error;
  EXPECT_EQ(principal, "alice");
  for (std::string_view bad :
       {"\0__sluice\0s3cre"sv, "\0__sluice/\0s3cret"sv, "\0__sluice/alice\0alice-secret"sv}) {
    EXPECT_EQ(Plain(**auth, bad, &principal).state, State::kFailed);
  }
  ScramClient client{.saslname = "__sluice/alice", .password = "s3cret"};
  EXPECT_EQ(ScramExchange(**auth, client, &principal).state, State::kSucceeded);
  EXPECT_EQ(principal, "alice");
  ScramClient wrong{.saslname = "__sluice", .password = "nope"};
  EXPECT_EQ(ScramExchange(**auth, wrong, &principal).state, State::kFailed);

  // Without a secret the names are nobody's.
  auto none = MakeAuthenticator();
  EXPECT_EQ(Plain(*none, "\0__sluice\0"sv).state, State::kFailed);
  EXPECT_TRUE(IsInternalUserName("__sluice/x"));
  EXPECT_FALSE(IsInternalUserName("__sluicex"));
}

constexpr std::string_view kRfcClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
constexpr std::string_view kRfcServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
constexpr std::string_view kRfcSalt = "W22ZaJ0SNY7soEsUEjb6gQ==";
constexpr std::string_view kRfcServerFirst =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
constexpr std::string_view kRfcClientFinal =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
constexpr std::string_view kRfcServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

std::unique_ptr<SaslAuthenticator> RfcAuthenticator() {
  SaslConfig config;
  config.enabled = true;
  config.users = {{"user", "pencil"}};
  SaslAuthenticator::TestHooks hooks;
  hooks.server_nonce = [] { return std::string(kRfcServerNonce); };
  hooks.salt = [](std::string_view user) {
    EXPECT_EQ(user, "user");
    return UnB64(kRfcSalt);
  };
  auto auth = SaslAuthenticator::CreateForTesting(config, std::move(hooks));
  EXPECT_TRUE(auth.ok()) << auth.status().ToString();
  return std::move(auth).value();
}

TEST(SaslScramTest, Rfc7677TestVector) {
  auto auth = RfcAuthenticator();
  auto session = auth->Start("SCRAM-SHA-256");
  ASSERT_NE(session, nullptr);
  Step first = Send(*session, kRfcClientFirst);
  ASSERT_EQ(first.state, State::kInProgress) << first.error;
  EXPECT_EQ(Text(first.response), kRfcServerFirst);
  EXPECT_EQ(session->principal(), "");
  Step final = Send(*session, kRfcClientFinal);
  ASSERT_EQ(final.state, State::kSucceeded) << final.error;
  EXPECT_EQ(Text(final.response), kRfcServerFinal);
  EXPECT_EQ(session->principal(), "user");
}

TEST(SaslScramTest, TestClientReproducesTheRfcVector) {
  // Checks the test's own client, which the other tests rely on.
  ScramClient client{.saslname = "user", .password = "pencil", .nonce = "rOprNGfwEbeRWgbNEkqO"};
  EXPECT_EQ(client.First(), kRfcClientFirst);
  EXPECT_EQ(client.Final(kRfcServerFirst), kRfcClientFinal);
  EXPECT_EQ(client.expected_server_final, kRfcServerFinal);
}

TEST(SaslScramTest, FullExchangesWithRandomNonces) {
  auto auth = MakeAuthenticator();
  for (auto [saslname, password, principal] :
       {std::tuple{"alice", "alice-secret", "alice"}, std::tuple{"bob", "b0b", "bob"},
        std::tuple{"a=2Cb=3Dc", "escaped", "a,b=c"}}) {
    ScramClient client{.saslname = saslname, .password = password};
    std::string got;
    Step final = ScramExchange(*auth, client, &got);
    ASSERT_EQ(final.state, State::kSucceeded) << saslname << ": " << final.error;
    EXPECT_EQ(Text(final.response), client.expected_server_final);
    EXPECT_EQ(got, principal);
  }
}

TEST(SaslScramTest, ServerFirstCarriesAFreshNonceASaltAndTheIterations) {
  SaslConfig config = TestConfig();
  config.scram_iterations = 8192;
  auto auth = MakeAuthenticator(config);
  std::set<std::string> server_nonces;
  for (int i = 0; i < 3; ++i) {
    ScramClient client{.saslname = "alice", .password = "alice-secret", .nonce = "fixed"};
    auto session = auth->Start("SCRAM-SHA-256");
    std::string first = Text(Send(*session, client.First()).response);
    ASSERT_TRUE(first.starts_with("r=fixed")) << first;
    size_t salt_at = first.find(",s=");
    ASSERT_NE(salt_at, std::string::npos);
    server_nonces.insert(first.substr(7, salt_at - 7));
    EXPECT_GE(first.size() - 7, 32u);
    EXPECT_TRUE(first.ends_with(",i=8192")) << first;
    std::string salt = first.substr(salt_at + 3, first.find(",i=") - salt_at - 3);
    EXPECT_EQ(UnB64(salt).size(), 16u) << salt;
    // And the exchange completes with 8192 iterations.
    EXPECT_EQ(Send(*session, client.Final(first)).state, State::kSucceeded);
  }
  EXPECT_EQ(server_nonces.size(), 3u);
}

TEST(SaslScramTest, WrongPasswordFailsAtTheFinalStep) {
  auto auth = MakeAuthenticator();
  ScramClient client{.saslname = "alice", .password = "b0b"};
  std::string principal = "unset";
  Step final = ScramExchange(*auth, client, &principal);
  EXPECT_EQ(final.state, State::kFailed);
  EXPECT_EQ(final.error, kScramFailed);
  EXPECT_TRUE(final.response.empty());
  EXPECT_EQ(principal, "");
}

TEST(SaslScramTest, UnknownUserGetsAStandInSaltAndFailsLikeAWrongPassword) {
  auto auth = MakeAuthenticator();
  auto first_of = [&](std::string_view user, std::string* server_first) {
    ScramClient client{.saslname = std::string(user), .password = "whatever", .nonce = "n0nce"};
    auto session = auth->Start("SCRAM-SHA-256");
    Step first = Send(*session, client.First());
    EXPECT_EQ(first.state, State::kInProgress) << first.error;
    *server_first = Text(first.response);
    Step final = Send(*session, client.Final(*server_first));
    EXPECT_EQ(final.state, State::kFailed);
    EXPECT_EQ(final.error, kScramFailed);
    EXPECT_EQ(session->principal(), "");
  };
  auto salt_and_iterations = [](const std::string& server_first) {
    return server_first.substr(server_first.find(",s="));
  };
  std::string a1, a2, b, known;
  first_of("mallory", &a1);
  first_of("mallory", &a2);
  first_of("trudy", &b);
  EXPECT_EQ(salt_and_iterations(a1), salt_and_iterations(a2));  // stable per name
  EXPECT_NE(salt_and_iterations(a1), salt_and_iterations(b));
  EXPECT_TRUE(a1.ends_with(",i=4096")) << a1;
  // Shaped like a real user's answer: the same lengths.
  ScramClient real{.saslname = "alice", .password = "alice-secret", .nonce = "n0nce"};
  auto session = auth->Start("SCRAM-SHA-256");
  known = Text(Send(*session, real.First()).response);
  EXPECT_EQ(known.size(), a1.size());
}

TEST(SaslScramTest, EscapedUserNames) {
  SaslConfig config = TestConfig();
  config.users.push_back({"=2C", "literal"});  // a name that looks like an escape
  auto auth = MakeAuthenticator(config);
  ScramClient escaped{.saslname = "=3D2C", .password = "literal"};
  std::string principal;
  EXPECT_EQ(ScramExchange(*auth, escaped, &principal).state, State::kSucceeded);
  EXPECT_EQ(principal, "=2C");
  // Unescaped, "a,b=c" cannot be sent; "=2C" alone decodes to ",": an unknown user.
  ScramClient comma{.saslname = "=2C", .password = "literal"};
  EXPECT_EQ(ScramExchange(*auth, comma).error, kScramFailed);
  // A bad escape is malformed.
  ScramClient bad{.saslname = "a=2Xb", .password = "x"};
  Step step = ScramExchange(*auth, bad);
  EXPECT_EQ(step.state, State::kFailed);
  EXPECT_TRUE(Contains(step.error, "not a valid saslname")) << step.error;
}

TEST(SaslScramTest, AuthzidMustBeTheUser) {
  auto auth = MakeAuthenticator();
  ScramClient same{.saslname = "a=2Cb=3Dc", .password = "escaped", .gs2 = "n,a=a=2Cb=3Dc,"};
  std::string principal;
  Step ok = ScramExchange(*auth, same, &principal);
  EXPECT_EQ(ok.state, State::kSucceeded) << ok.error;
  EXPECT_EQ(principal, "a,b=c");

  ScramClient other{.saslname = "alice", .password = "alice-secret", .gs2 = "n,a=bob,"};
  Step step = ScramExchange(*auth, other);
  EXPECT_EQ(step.state, State::kFailed);
  EXPECT_TRUE(Contains(step.error, "authorization id that is different from username"));
}

TEST(SaslScramTest, ChannelBindingFlagYIsAcceptedAndPIsRefused) {
  auto auth = MakeAuthenticator();
  ScramClient y{.saslname = "alice", .password = "alice-secret", .gs2 = "y,,"};
  Step step = ScramExchange(*auth, y);
  EXPECT_EQ(step.state, State::kSucceeded) << step.error;

  ScramClient p{.saslname = "alice", .password = "alice-secret", .gs2 = "p=tls-unique,,"};
  step = ScramExchange(*auth, p);
  EXPECT_EQ(step.state, State::kFailed);
  EXPECT_TRUE(Contains(step.error, "channel binding")) << step.error;
}

TEST(SaslScramTest, ChannelBindingMustEncodeTheGs2Header) {
  auto auth = MakeAuthenticator();
  ScramClient client{.saslname = "alice", .password = "alice-secret"};
  auto session = auth->Start("SCRAM-SHA-256");
  std::string first = Text(Send(*session, client.First()).response);
  // The client says "y,," in the final message though it sent "n,,".
  client.gs2 = "y,,";
  Step step = Send(*session, client.Final(first));
  EXPECT_EQ(step.state, State::kFailed);
  EXPECT_TRUE(Contains(step.error, "gs2 header")) << step.error;
}

TEST(SaslScramTest, NonceMismatchFails) {
  auto auth = MakeAuthenticator();
  ScramClient client{.saslname = "alice", .password = "alice-secret"};
  auto session = auth->Start("SCRAM-SHA-256");
  std::string first = Text(Send(*session, client.First()).response);
  std::string final = client.Final(first);
  // Change the last character of the server's part of the nonce.
  size_t r_end = final.find(",p=");
  final[r_end - 1] = final[r_end - 1] == 'A' ? 'B' : 'A';
  Step step = Send(*session, final);
  EXPECT_EQ(step.state, State::kFailed);
  EXPECT_TRUE(Contains(step.error, "nonce")) << step.error;

  // Only the client's nonce, without the server's.
  ScramClient c2{.saslname = "alice", .password = "alice-secret", .nonce = "abc"};
  session = auth->Start("SCRAM-SHA-256");
  Send(*session, c2.First());
  step = Send(*session, "c=biws,r=abc,p=" + B64(std::string(32, 'x')));
  EXPECT_EQ(step.state, State::kFailed);
  EXPECT_TRUE(Contains(step.error, "nonce")) << step.error;
}

TEST(SaslScramTest, AcceptsTheDoubledClientNonceOfOldLibrdkafka) {
  // librdkafka before 2.6.1 (Debian's 2.0.2, kcat) sends r=<client><client><server>.
  auto auth = MakeAuthenticator();
  ScramClient client{.saslname = "alice", .password = "alice-secret"};
  client.final_nonce_prefix = client.nonce;
  Step step = ScramExchange(*auth, client);
  EXPECT_EQ(step.state, State::kSucceeded) << step.error;
  EXPECT_EQ(Text(step.response), client.expected_server_final);

  // Any other prefix is refused, even one of the same length.
  for (std::string prefix : {std::string("x"), std::string(client.nonce.size(), 'x'),
                             client.nonce + client.nonce, client.nonce.substr(1)}) {
    ScramClient c{.saslname = "alice", .password = "alice-secret", .nonce = client.nonce};
    c.final_nonce_prefix = prefix;
    Step bad = ScramExchange(*auth, c);
    EXPECT_EQ(bad.state, State::kFailed) << prefix;
    EXPECT_TRUE(Contains(bad.error, "nonce")) << bad.error;
  }
}

TEST(SaslScramTest, ExtensionsAreAcceptedAndCoveredByTheProof) {
  auto auth = MakeAuthenticator();
  // Kafka's client puts extensions after the nonce (tokenauth=true for delegation tokens).
  ScramClient client{.saslname = "alice", .password = "alice-secret"};
  client.first_extensions = ",tokenauth=false";
  client.final_extensions = ",ext=1";
  Step step = ScramExchange(*auth, client);
  EXPECT_EQ(step.state, State::kSucceeded) << step.error;
}

TEST(SaslScramTest, MalformedClientFirstMessagesFail) {
  auto auth = MakeAuthenticator();
  const std::string_view cases[] = {
      "",
      "n",
      "n,",
      "n,,",
      "x,,n=alice,r=abc",
      "nn,,n=alice,r=abc",
      ",,n=alice,r=abc",
      "n,a,n=alice,r=abc",
      "n,a=,n=alice,r=abc",
      "n,a=x=y,n=alice,r=abc",
      "n,,r=abc",
      "n,,r=abc,n=alice",
      "n,,n=alice",
      "n,,n=alice,",
      "n,,n=alice,r=",
      "n,,n=alice,r=a b",
      "n,,n=alice,r=ab\x7f",
      "n,,n=alice,x=abc",
      "n,,n=,r=abc",
      "n,,n=al=ice,r=abc",
      "n,,n=alice=2,r=abc",
      "n,,m=ext,n=alice,r=abc",
      "n,,n=alice,r=abc,",
      "n,,n=alice,r=abc,=x",
      "n,,n=alice,r=abc,1=x",
      "n,,n=alice,r=abc,ext",
      "n,,n=alice,r=abc,ext=",
      "n,,n=alice,r=abc,,ext=1",
      "n,,N=alice,r=abc",
      "n,,n=al\xffice,r=abc",  // '\xff' then "ice"
      std::string_view("n,,n=al\0ice,r=abc", 17),
      "p=tls-server-end-point,,n=alice,r=abc",
  };
  for (std::string_view message : cases) {
    auto session = auth->Start("SCRAM-SHA-256");
    Step step = Send(*session, message);
    EXPECT_EQ(step.state, State::kFailed) << "'" << message << "'";
    EXPECT_TRUE(step.error.starts_with("Authentication failed")) << step.error;
    EXPECT_TRUE(step.response.empty());
    // The failed exchange is over.
    Step again = Send(*session, "n,,n=alice,r=abc");
    EXPECT_EQ(again.state, State::kFailed);
    EXPECT_TRUE(Contains(again.error, "already ended")) << again.error;
  }
  auto session = auth->Start("SCRAM-SHA-256");
  std::string huge = "n,,n=alice,r=" + std::string(kMaxSaslMessageBytes, 'x');
  Step step = Send(*session, huge);
  EXPECT_EQ(step.state, State::kFailed);
  EXPECT_TRUE(Contains(step.error, "over the limit")) << step.error;
}

TEST(SaslScramTest, MalformedClientFinalMessagesFail) {
  auto auth = MakeAuthenticator();
  ScramClient client{.saslname = "alice", .password = "alice-secret"};
  auto session = auth->Start("SCRAM-SHA-256");
  const std::string server_first = Text(Send(*session, client.First()).response);
  const std::string good = client.Final(server_first);
  const std::string r = "r=" + server_first.substr(2, server_first.find(',') - 2);
  const std::string p = good.substr(good.find(",p="));  // ",p=..."
  const std::string proof_b64 = p.substr(3);
  ASSERT_EQ(Text(Send(*session, good).response), client.expected_server_final);

  const std::vector<std::string> cases = {
      "",
      "c=biws",
      "c=biws," + r,
      "c=biws," + r + ",",
      "c=biws," + r + ",p=",
      r + ",c=biws" + p,
      "c=biws" + p,
      "c=biws" + p + "," + r,
      "c=biws," + r + p + ",x=y",
      "c=biws," + r + ",1=2" + p,
      "c=biws," + r + ",=2" + p,
      "c=biws," + r + ",,x=1" + p,
      "c=," + r + p,
      "c=biw," + r + p,
      "c=bi=s," + r + p,
      "c=b!ws," + r + p,
      "c=biws=," + r + p,
      "c=biws," + r + ",p=" + proof_b64.substr(4),
      "c=biws," + r + ",p=" + proof_b64.substr(0, proof_b64.size() - 1),
      "c=biws," + r + ",p=*" + proof_b64.substr(1),
      "c=biws," + r + ",p=" + B64(std::string(31, 'x')),
      "c=biws," + r + ",p=" + B64(std::string(33, 'x')),
      "c=biws," + r + "x" + p,
      "c=biws,r=" + p,
      "C=biws," + r + p,
      "c=biws," + r + p + "\xff",
      std::string("c=biws,\0", 8) + r + p,
      "c=biws," + r + p + std::string(kMaxSaslMessageBytes, 'x'),
  };
  for (const std::string& message : cases) {
    ScramClient c{.saslname = "alice", .password = "alice-secret", .nonce = client.nonce};
    auto s = auth->Start("SCRAM-SHA-256");
    Step first = Send(*s, c.First());
    ASSERT_EQ(first.state, State::kInProgress);
    // The server nonce differs per exchange: put this one's in.
    std::string m = message;
    std::string this_r = "r=" + Text(first.response).substr(2, Text(first.response).find(',') - 2);
    for (size_t at = m.find(r); at != std::string::npos; at = m.find(r, at + this_r.size())) {
      m.replace(at, r.size(), this_r);
    }
    Step step = Send(*s, m);
    EXPECT_EQ(step.state, State::kFailed) << "'" << m << "'";
    EXPECT_TRUE(step.error.starts_with("Authentication failed")) << step.error;
    EXPECT_TRUE(step.response.empty());
    EXPECT_EQ(s->principal(), "");
  }
}

TEST(SaslScramTest, AStepAfterTheExchangeEndedFails) {
  auto auth = MakeAuthenticator();
  ScramClient client{.saslname = "alice", .password = "alice-secret"};
  auto session = auth->Start("SCRAM-SHA-256");
  std::string first = Text(Send(*session, client.First()).response);
  std::string final = client.Final(first);
  EXPECT_EQ(Send(*session, final).state, State::kSucceeded);
  Step again = Send(*session, final);
  EXPECT_EQ(again.state, State::kFailed);
  EXPECT_TRUE(Contains(again.error, "already ended")) << again.error;
  EXPECT_TRUE(again.response.empty());
  EXPECT_EQ(session->principal(), "alice");
  // A second client-first is not a restart either.
  EXPECT_EQ(Send(*session, client.First()).state, State::kFailed);
}

TEST(SaslScramTest, ReplayingAFinalMessageInANewExchangeFails) {
  auto auth = MakeAuthenticator();
  ScramClient client{.saslname = "alice", .password = "alice-secret", .nonce = "same"};
  auto s1 = auth->Start("SCRAM-SHA-256");
  std::string final = client.Final(Text(Send(*s1, client.First()).response));
  EXPECT_EQ(Send(*s1, final).state, State::kSucceeded);
  // Same client nonce, new server nonce: the old final message no longer matches.
  auto s2 = auth->Start("SCRAM-SHA-256");
  EXPECT_EQ(Send(*s2, client.First()).state, State::kInProgress);
  EXPECT_EQ(Send(*s2, final).state, State::kFailed);
}

// Random damage to valid messages: never a crash (run under ASan), never a success.
TEST(SaslScramTest, MutatedMessagesNeverCrashOrSucceed) {
  auto auth = MakeAuthenticator();
  std::mt19937 rng(42);
  auto mutate = [&rng](std::string s) {
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0:
          s[at] = static_cast<char>(rng() % 256);
          break;
        case 1:
          s.erase(at, 1 + rng() % 4);
          break;
        case 2:
          s.insert(at, 1, static_cast<char>(rng() % 256));
          break;
        case 3:
          s.resize(at);
          break;
      }
    }
    return s;
  };
  ScramClient client{.saslname = "alice", .password = "alice-secret"};
  const std::string client_first = client.First();
  int first_failed = 0, final_failed = 0;
  for (int i = 0; i < 2000; ++i) {
    auto session = auth->Start("SCRAM-SHA-256");
    std::string m = mutate(client_first);
    Step first = Send(*session, m);
    if (first.state == State::kFailed) {
      ++first_failed;
      EXPECT_FALSE(first.error.empty());
      continue;
    }
    ASSERT_EQ(first.state, State::kInProgress);
    // The right answer to this server-first, then damaged.
    ScramClient c = client;
    c.nonce = "";  // the mutation may have changed it
    c.first_bare = m.substr(m.find(",,") + 2);
    std::string good = c.Final(Text(first.response));
    std::string bad = mutate(good);
    if (bad == good) continue;
    Step final = Send(*session, bad);
    EXPECT_EQ(final.state, State::kFailed) << bad;
    EXPECT_FALSE(final.error.empty());
    ++final_failed;
  }
  EXPECT_GT(first_failed, 0);
  EXPECT_GT(final_failed, 0);
  for (int i = 0; i < 2000; ++i) {
    auto session = auth->Start("PLAIN");
    std::string m = mutate(std::string("\0alice\0alice-secret", 19));
    Step step = Send(*session, m);
    if (step.state == State::kSucceeded) {
      EXPECT_EQ(session->principal(), "alice");
    } else {
      EXPECT_FALSE(step.error.empty());
    }
  }
}

TEST(SaslScramTest, OneAuthenticatorServesManyThreads) {
  auto auth = MakeAuthenticator();
  std::vector<std::thread> threads;
  std::atomic<int> succeeded = 0;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        ScramClient client{.saslname = "bob", .password = "b0b"};
        if (ScramExchange(*auth, client).state == State::kSucceeded) ++succeeded;
        auto plain = auth->Start("PLAIN");
        if (Send(*plain, std::string_view("\0bob\0b0b", 8)).state == State::kSucceeded) ++succeeded;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(succeeded.load(), 80);
}

// ------------------------------------------------------------------ config

Result<SaslConfig> FromYaml(std::string_view yaml) {
  ASSIGN_OR_RETURN(Config config, Config::Parse(yaml, "sluice.yaml"));
  return SaslConfigFromYaml(config);
}

TEST(SaslConfigTest, ReadsTheSection) {
  auto config = FromYaml(R"(
sasl:
  enabled: true
  mechanisms: [SCRAM-SHA-256]
  users:
    - alice:alice-secret
    - "bob:pa:ss word"
  scram_iterations: 8192
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->enabled);
  EXPECT_EQ(config->mechanisms, (std::vector<std::string>{"SCRAM-SHA-256"}));
  ASSERT_EQ(config->users.size(), 2u);
  EXPECT_EQ(config->users[0].name, "alice");
  EXPECT_EQ(config->users[0].password, "alice-secret");
  EXPECT_EQ(config->users[1].name, "bob");
  EXPECT_EQ(config->users[1].password, "pa:ss word");  // split at the first ':'
  EXPECT_EQ(config->scram_iterations, 8192);
  EXPECT_TRUE(SaslAuthenticator::Create(*config).ok());
}

TEST(SaslConfigTest, DefaultsWithoutASection) {
  auto config = FromYaml("storage:\n  dir: /tmp/x\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_FALSE(config->enabled);
  EXPECT_EQ(config->mechanisms, (std::vector<std::string>{"PLAIN", "SCRAM-SHA-256"}));
  EXPECT_TRUE(config->users.empty());
  EXPECT_EQ(config->scram_iterations, 4096);
}

TEST(SaslConfigTest, UnknownMechanismNamesTheKey) {
  auto config = FromYaml(
      "sasl:\n  enabled: true\n  mechanisms: [PLAIN, SCRAM-SHA-1]\n"
      "  users: [a:b]\n");
  ASSERT_FALSE(config.ok());
  const std::string& m = config.status().message();
  EXPECT_TRUE(Contains(m, "sasl.mechanisms (from sluice.yaml:3)")) << m;
  EXPECT_TRUE(Contains(m, "unknown SASL mechanism 'SCRAM-SHA-1'")) << m;

  config = FromYaml("sasl:\n  mechanisms: [PLAIN, PLAIN]\n");
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(Contains(config.status().message(), "'PLAIN' is listed twice"));
  config = FromYaml("sasl:\n  mechanisms: PLAIN\n");
  EXPECT_FALSE(config.ok());  // a scalar is not a list
  config = FromYaml("sasl:\n  enabled: true\n  mechanisms: []\n  users: [a:b]\n");
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(Contains(config.status().message(), "sasl.mechanisms is empty"));
}

TEST(SaslConfigTest, MissingPasswordFailsWithoutEchoingTheItem) {
  auto config = FromYaml("sasl:\n  users:\n    - alice=secret\n");
  ASSERT_FALSE(config.ok());
  std::string m = config.status().message();
  EXPECT_TRUE(Contains(m, "sasl.users (from sluice.yaml:2)")) << m;
  EXPECT_TRUE(Contains(m, "item 1 has no ':'")) << m;
  EXPECT_FALSE(Contains(m, "secret")) << m;

  config = FromYaml("sasl:\n  users: [\"alice:\"]\n");
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(Contains(config.status().message(), "user 'alice' has no password"));

  config = FromYaml("sasl:\n  users: [\":pw\"]\n");
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(Contains(config.status().message(), "item 1 has no user name"));
}

TEST(SaslConfigTest, DuplicateUsersFail) {
  auto config = FromYaml("sasl:\n  users: [\"alice:one\", \"bob:x\", \"alice:two\"]\n");
  ASSERT_FALSE(config.ok());
  std::string m = config.status().message();
  EXPECT_TRUE(Contains(m, "user 'alice' is listed twice")) << m;
  EXPECT_FALSE(Contains(m, "one")) << m;
}

TEST(SaslConfigTest, OtherBadValues) {
  EXPECT_FALSE(FromYaml("sasl:\n  enabled: maybe\n").ok());
  auto config = FromYaml("sasl:\n  scram_iterations: 1000\n");
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(Contains(config.status().message(), "sasl.scram_iterations"))
      << config.status().message();
  EXPECT_FALSE(FromYaml("sasl:\n  scram_iterations: 20000\n").ok());
  config = FromYaml("sasl:\n  enabled: true\n");
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(Contains(config.status().message(), "no users")) << config.status().message();
  // A list of {name, password} maps is not a Config value: Config::Parse refuses it.
  EXPECT_FALSE(FromYaml("sasl:\n  users:\n    - name: alice\n      password: x\n").ok());
  // Known keys, for the broker's CheckKnown.
  auto parsed = Config::Parse(
      "sasl:\n  enabled: false\n  users: [a:b]\n  mechanisms: [PLAIN]\n"
      "  scram_iterations: 4096\n",
      "t");
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->CheckKnown(kSaslConfigKeys).ok());
}

}  // namespace
}  // namespace sluice::broker

// ------------------------------------------------------------------ the broker's client

namespace sluice::broker {
namespace {

// A full exchange of the product's client against the authenticator.
Step ClientExchange(const SaslAuthenticator& auth, std::string_view mechanism,
                    const std::string& user, const std::string& password,
                    Status* client_status = nullptr) {
  auto client = SaslClient::Start(mechanism, user, password);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  auto session = auth.Start(mechanism);
  EXPECT_NE(session, nullptr);
  std::vector<uint8_t> out = (*client)->First();
  for (;;) {
    Step step = session->Next(out);
    if (step.state == State::kFailed) return step;
    auto next = (*client)->Next(step.response);
    if (client_status != nullptr) *client_status = next.status();
    if (!next.ok()) return Step{State::kFailed, {}, next.status().message()};
    if (!next->has_value()) return step;
    out = std::move(**next);
  }
}

TEST(SaslClientTest, ScramReproducesTheRfcVector) {
  auto client = SaslClient::Start("SCRAM-SHA-256", "user", "pencil");
  ASSERT_TRUE(client.ok());
  (*client)->SetNonceForTesting("rOprNGfwEbeRWgbNEkqO");
  EXPECT_EQ(Text((*client)->First()), kRfcClientFirst);
  auto final = (*client)->Next(Bytes(kRfcServerFirst));
  ASSERT_TRUE(final.ok()) << final.status().ToString();
  ASSERT_TRUE(final->has_value());
  EXPECT_EQ(Text(**final), kRfcClientFinal);
  auto done = (*client)->Next(Bytes(kRfcServerFinal));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_FALSE(done->has_value());
  // Anything after the end is refused.
  EXPECT_FALSE((*client)->Next(Bytes(kRfcServerFinal)).ok());
}

TEST(SaslClientTest, AuthenticatesAgainstTheBrokersOwnServer) {
  SaslConfig config = TestConfig();
  config.mechanisms = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"};
  auto auth = MakeAuthenticator(config);
  ASSERT_NE(auth, nullptr);
  for (const char* mechanism : {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}) {
    Step ok = ClientExchange(*auth, mechanism, "alice", "alice-secret");
    EXPECT_EQ(ok.state, State::kSucceeded) << mechanism << ": " << ok.error;
    Step escaped = ClientExchange(*auth, mechanism, "a,b=c", "escaped");
    EXPECT_EQ(escaped.state, State::kSucceeded) << mechanism << ": " << escaped.error;
    Step wrong = ClientExchange(*auth, mechanism, "alice", "b0b");
    EXPECT_EQ(wrong.state, State::kFailed) << mechanism;
  }
}

// A server that does not know the password cannot fake the final message: the client
// refuses its signature.
TEST(SaslClientTest, ScramRefusesAServerThatDoesNotKnowThePassword) {
  auto client = SaslClient::Start("SCRAM-SHA-256", "user", "pencil");
  ASSERT_TRUE(client.ok());
  (*client)->SetNonceForTesting("rOprNGfwEbeRWgbNEkqO");
  (*client)->First();
  ASSERT_TRUE((*client)->Next(Bytes(kRfcServerFirst)).ok());
  std::string forged(kRfcServerFinal);
  forged[5] = forged[5] == 'A' ? 'B' : 'A';
  auto r = (*client)->Next(Bytes(forged));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("signature is wrong"), std::string::npos);
}

TEST(SaslClientTest, ScramRefusesMalformedServerMessages) {
  const std::string nonce = "fixednonce";
  const std::string salt = "W22ZaJ0SNY7soEsUEjb6gQ==";
  for (auto [server_first, why] : {
           std::pair<std::string, std::string>{"", "has no r="},
           {"r=fixednonceX", "short"},
           {"r=fixednonceX,s=" + salt, "short"},
           {"r=othernonce,s=" + salt + ",i=4096", "does not extend"},
           {"r=fixednonce,s=" + salt + ",i=4096", "does not extend"},  // not extended
           {"r=fixednonceX,s=!!!,i=4096", "salt is not base64"},
           {"r=fixednonceX,s=,i=4096", "salt is not base64"},
           {"r=fixednonceX,s=" + salt + ",i=1", "outside 4096 to 16384"},
           {"r=fixednonceX,s=" + salt + ",i=99999999999", "outside"},
           {"r=fixednonceX,s=" + salt + ",i=4096x", "outside"},
           {"s=" + salt + ",r=fixednonceX,i=4096", "has no r="},
           {"e=unknown-user", "the server refused: unknown-user"},
           {std::string(5000, 'r'), "5000-byte"},
       }) {
    auto client = SaslClient::Start("SCRAM-SHA-256", "user", "pencil");
    ASSERT_TRUE(client.ok());
    (*client)->SetNonceForTesting(nonce);
    (*client)->First();
    auto r = (*client)->Next(Bytes(server_first));
    ASSERT_FALSE(r.ok()) << server_first;
    EXPECT_NE(r.status().message().find(why), std::string::npos)
        << server_first << " -> " << r.status().message();
    EXPECT_EQ(r.status().message().find("pencil"), std::string::npos);
  }
}

TEST(SaslClientTest, RefusesUnknownMechanismsAndBadNames) {
  EXPECT_FALSE(SaslClient::Start("GSSAPI", "u", "p").ok());
  EXPECT_FALSE(SaslClient::Start("SCRAM-SHA-1", "u", "p").ok());
  EXPECT_FALSE(SaslClient::Start("PLAIN", "", "p").ok());
  EXPECT_FALSE(SaslClient::Start("PLAIN", std::string("a\0b", 3), "p").ok());
  EXPECT_FALSE(SaslClient::Start("PLAIN", "\xff", "p").ok());
}

}  // namespace
}  // namespace sluice::broker
