#include "broker/sasl.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <optional>
#include <set>

#include "base/base64.h"
#include "base/config.h"
#include "base/utf8.h"

namespace sluice::broker {
namespace {

using Digest = std::array<uint8_t, 32>;  // SHA-256

constexpr int kMinScramIterations = 4096;   // Kafka's minimum for SCRAM-SHA-256
constexpr int kMaxScramIterations = 16384;  // Kafka's maximum (KIP-554)
constexpr size_t kSaltBytes = 16;
constexpr size_t kServerNonceBytes = 24;  // 32 base64 characters, 192 bits

constexpr std::string_view kKnownMechanisms[] = {kSaslPlain, kSaslScramSha256};

// Kafka's texts for a failed authentication, so clients and their users see the same.
constexpr std::string_view kPlainFailed = "Authentication failed: Invalid username or password";
constexpr std::string_view kScramFailed =
    "Authentication failed during authentication due to invalid credentials with SASL "
    "mechanism SCRAM-SHA-256";
constexpr std::string_view kAuthzidDiffers =
    "Authentication failed: Client requested an authorization id that is different from "
    "username";

bool KnownMechanism(std::string_view m) {
  return std::ranges::find(kKnownMechanisms, m) != std::end(kKnownMechanisms);
}

std::string_view AsText(std::span<const uint8_t> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

std::span<const uint8_t> AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::vector<uint8_t> ToVector(std::string_view s) {
  auto b = AsBytes(s);
  return {b.begin(), b.end()};
}

// UTF-8 without NUL: what a user name must be (PLAIN's and SCRAM's names both exclude it).
bool ValidName(std::string_view s) {
  return !s.empty() && s.find('\0') == std::string_view::npos && IsValidUtf8(s);
}

// ------------------------------------------------------------------ base64 (base/base64.h)

std::string Base64Encode(std::span<const uint8_t> in) { return ::sluice::Base64Encode(AsText(in)); }

// Strict (base/base64.h): padded, no whitespace, canonical, so a proof cannot be re-spelt.
std::optional<std::vector<uint8_t>> Base64Decode(std::string_view s) {
  Result<std::string> bytes = ::sluice::Base64Decode(s);
  if (!bytes.ok()) return std::nullopt;
  return std::vector<uint8_t>(bytes->begin(), bytes->end());
}

// ------------------------------------------------------------------ OpenSSL

// Each returns false only if OpenSSL fails (out of memory); callers fail the operation.
bool Sha256(std::span<const uint8_t> data, Digest* out) {
  unsigned int len = 0;
  return EVP_Digest(data.data(), data.size(), out->data(), &len, EVP_sha256(), nullptr) == 1 &&
         len == out->size();
}

bool HmacSha256(std::span<const uint8_t> key, std::span<const uint8_t> data, Digest* out) {
  unsigned int len = 0;
  // `out` is never null: HMAC() with a null output uses a static buffer (not thread-safe).
  return HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(),
              out->data(), &len) != nullptr &&
         len == out->size();
}

bool RandomBytes(std::span<uint8_t> out) {
  return RAND_bytes(out.data(), static_cast<int>(out.size())) == 1;
}

bool DigestsEqual(const Digest& a, const Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// The config checks Create makes (SaslConfigFromYaml makes them with the key's origin).
Status Validate(const SaslConfig& config) {
  std::set<std::string_view> mechanisms;
  for (const std::string& m : config.mechanisms) {
    if (!KnownMechanism(m)) {
      return InvalidArgumentError(
          "unknown SASL mechanism '{}' (sluice supports PLAIN and "
          "SCRAM-SHA-256)",
          m);
    }
    if (!mechanisms.insert(m).second) {
      return InvalidArgumentError("SASL mechanism '{}' is listed twice", m);
    }
  }
  std::set<std::string_view> names;
  for (const SaslUser& u : config.users) {
    if (!ValidName(u.name)) {
      return InvalidArgumentError("a SASL user name must be non-empty UTF-8 without NUL");
    }
    if (u.password.empty()) return InvalidArgumentError("SASL user '{}' has no password", u.name);
    if (!names.insert(u.name).second) {
      return InvalidArgumentError("SASL user '{}' is listed twice", u.name);
    }
  }
  if (config.scram_iterations < kMinScramIterations ||
      config.scram_iterations > kMaxScramIterations) {
    return InvalidArgumentError("SCRAM iterations {} is out of range [{}, {}]",
                                config.scram_iterations, kMinScramIterations, kMaxScramIterations);
  }
  if (config.enabled && config.mechanisms.empty()) {
    return InvalidArgumentError("SASL is enabled with no mechanisms");
  }
  if (config.enabled && config.users.empty()) {
    return InvalidArgumentError("SASL is enabled with no users");
  }
  return Status::OK();
}

}  // namespace

// ------------------------------------------------------------------ credentials

// What the authenticator knows of its users: never the passwords. Immutable after Build;
// read by every connection's thread.
class SaslCredentialStore {
 public:
  struct ScramCredential {
    std::vector<uint8_t> salt;
    int iterations = 0;
    Digest stored_key{};  // H(HMAC(SaltedPassword, "Client Key"))
    Digest server_key{};  // HMAC(SaltedPassword, "Server Key")
  };
  struct User {
    Digest plain_digest{};  // HMAC(plain_key_, password)
    ScramCredential scram;
  };

  static Result<std::unique_ptr<const SaslCredentialStore>> Build(
      const SaslConfig& config, SaslAuthenticator::TestHooks hooks) {
    std::unique_ptr<SaslCredentialStore> store(new SaslCredentialStore);
    if (!RandomBytes(store->plain_key_) || !RandomBytes(store->fake_key_) ||
        !RandomBytes(store->unknown_plain_digest_)) {
      return InternalError("SASL: the random number generator failed");
    }
    store->iterations_ = config.scram_iterations;
    store->nonce_hook_ = std::move(hooks.server_nonce);
    const bool scram =
        std::ranges::find(config.mechanisms, kSaslScramSha256) != config.mechanisms.end();
    for (const SaslUser& u : config.users) {
      User user;
      if (!store->PlainDigest(u.password, &user.plain_digest)) {
        return InternalError("SASL: HMAC-SHA-256 failed");
      }
      if (scram) {
        std::vector<uint8_t> salt(kSaltBytes);
        if (hooks.salt) {
          salt = hooks.salt(u.name);
        } else if (!RandomBytes(salt)) {
          return InternalError("SASL: the random number generator failed");
        }
        RETURN_IF_ERROR(
            DeriveScram(u.password, std::move(salt), config.scram_iterations, &user.scram));
      }
      store->users_.emplace(u.name, std::move(user));
    }
    return std::unique_ptr<const SaslCredentialStore>(std::move(store));
  }

  const User* Find(std::string_view name) const {
    auto it = users_.find(name);
    return it == users_.end() ? nullptr : &it->second;
  }

  bool PlainDigest(std::string_view password, Digest* out) const {
    return HmacSha256(plain_key_, AsBytes(password), out);
  }

  // A stand-in for a user that does not exist, so that SCRAM's first step answers as it
  // would for a real one: the same salt for the same name (asking twice tells nothing)
  // and the configured iterations. Its keys never verify: sessions also check known.
  bool FakeScram(std::string_view name, ScramCredential* out) const {
    std::string input = fmt::format("salt\n{}", name);
    Digest d;
    if (!HmacSha256(fake_key_, AsBytes(input), &d)) return false;
    out->salt.assign(d.begin(), d.begin() + kSaltBytes);
    out->iterations = iterations_;
    input = fmt::format("key\n{}", name);
    if (!HmacSha256(fake_key_, AsBytes(input), &out->stored_key)) return false;
    out->server_key = out->stored_key;
    return true;
  }

  // What an unknown user's PLAIN digest is compared with: random, matched by nothing.
  const Digest& fake_plain_digest() const { return unknown_plain_digest_; }

  // A fresh server nonce: printable, without ','.
  std::optional<std::string> ServerNonce() const {
    if (nonce_hook_) return nonce_hook_();
    std::array<uint8_t, kServerNonceBytes> raw;
    if (!RandomBytes(raw)) return std::nullopt;
    return Base64Encode(raw);
  }

 private:
  SaslCredentialStore() = default;

  static Status DeriveScram(std::string_view password, std::vector<uint8_t> salt, int iterations,
                            ScramCredential* out) {
    Digest salted, client_key;
    bool ok = PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()), salt.data(),
                                static_cast<int>(salt.size()), iterations, EVP_sha256(),
                                static_cast<int>(salted.size()), salted.data()) == 1 &&
              HmacSha256(salted, AsBytes("Client Key"), &client_key) &&
              Sha256(client_key, &out->stored_key) &&
              HmacSha256(salted, AsBytes("Server Key"), &out->server_key);
    OPENSSL_cleanse(salted.data(), salted.size());
    OPENSSL_cleanse(client_key.data(), client_key.size());
    if (!ok) return InternalError("SASL: PBKDF2 / HMAC-SHA-256 failed");
    out->salt = std::move(salt);
    out->iterations = iterations;
    return Status::OK();
  }

  std::map<std::string, User, std::less<>> users_;
  Digest plain_key_{};  // random per process: keys the PLAIN digests
  Digest fake_key_{};   // random per process: unknown users' salts
  Digest unknown_plain_digest_{};
  int iterations_ = kMinScramIterations;
  std::function<std::string()> nonce_hook_;  // tests only
};

// ------------------------------------------------------------------ sessions

namespace {

using State = SaslSession::State;
using Step = SaslSession::Step;

Step Fail(std::string error) { return Step{State::kFailed, {}, std::move(error)}; }

// The checks every client message passes first. `what` names the message in errors.
// PLAIN separates its fields with NUL; SCRAM's attributes exclude it.
std::optional<std::string> CheckMessage(std::span<const uint8_t> bytes, std::string_view what,
                                        bool allow_nul) {
  if (bytes.empty()) return fmt::format("Authentication failed: invalid {}: empty", what);
  if (bytes.size() > kMaxSaslMessageBytes) {
    return fmt::format("Authentication failed: invalid {}: {} bytes is over the limit of {}", what,
                       bytes.size(), kMaxSaslMessageBytes);
  }
  if (!IsValidUtf8(AsText(bytes))) {
    return fmt::format("Authentication failed: invalid {}: not UTF-8", what);
  }
  if (!allow_nul && AsText(bytes).find('\0') != std::string_view::npos) {
    return fmt::format("Authentication failed: invalid {}: contains NUL", what);
  }
  return std::nullopt;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    size_t pos = s.find(sep);
    parts.push_back(s.substr(0, pos));
    if (pos == std::string_view::npos) return parts;
    s.remove_prefix(pos + 1);
  }
}

// PLAIN (RFC 4616): one message, [authzid] NUL authcid NUL passwd; an empty response.
class PlainSession final : public SaslSession {
 public:
  explicit PlainSession(const SaslCredentialStore& store) : store_(store) {}

  Step Next(std::span<const uint8_t> client_bytes) override {
    if (done_) return Fail("Authentication failed: the SASL/PLAIN exchange has already ended");
    done_ = true;
    return Authenticate(client_bytes);
  }

  const std::string& principal() const override { return principal_; }

 private:
  Step Authenticate(std::span<const uint8_t> client_bytes) {
    if (auto bad = CheckMessage(client_bytes, "SASL/PLAIN response", true)) return Fail(*bad);
    std::vector<std::string_view> tokens = Split(AsText(client_bytes), '\0');
    if (tokens.size() != 3) {
      return Fail(
          fmt::format("Invalid SASL/PLAIN response: expected 3 tokens, got {}", tokens.size()));
    }
    std::string_view authzid = tokens[0], user = tokens[1], password = tokens[2];
    if (user.empty()) return Fail("Authentication failed: username not specified");
    if (password.empty()) return Fail("Authentication failed: password not specified");
    if (!authzid.empty() && authzid != user) return Fail(std::string(kAuthzidDiffers));

    // The same work for a known and an unknown user; digests of one size compared in
    // constant time, so neither the password's length nor its content leaks by timing.
    const SaslCredentialStore::User* known = store_.Find(user);
    Digest digest;
    if (!store_.PlainDigest(password, &digest)) return Fail(std::string(kPlainFailed));
    const Digest& expected = known != nullptr ? known->plain_digest : store_.fake_plain_digest();
    const bool match = DigestsEqual(digest, expected);
    OPENSSL_cleanse(digest.data(), digest.size());
    if (!match || known == nullptr) return Fail(std::string(kPlainFailed));
    principal_ = std::string(user);
    return Step{State::kSucceeded, {}, ""};
  }

  const SaslCredentialStore& store_;
  bool done_ = false;
  std::string principal_;
};

// SCRAM-SHA-256 (RFC 5802): client-first -> server-first, client-final -> server-final.
class ScramSession final : public SaslSession {
 public:
  explicit ScramSession(const SaslCredentialStore& store) : store_(store) {}

  Step Next(std::span<const uint8_t> client_bytes) override {
    Phase phase = phase_;
    phase_ = Phase::kEnded;  // a failed step ends the exchange
    switch (phase) {
      case Phase::kClientFirst: {
        if (auto bad = CheckMessage(client_bytes, "SCRAM client-first message", false))
          return Fail(*bad);
        Step step = ClientFirst(AsText(client_bytes));
        if (step.state == State::kInProgress) phase_ = Phase::kClientFinal;
        return step;
      }
      case Phase::kClientFinal:
        if (auto bad = CheckMessage(client_bytes, "SCRAM client-final message", false))
          return Fail(*bad);
        return ClientFinal(AsText(client_bytes));
      case Phase::kEnded:
        break;
    }
    return Fail("Authentication failed: the SASL/SCRAM-SHA-256 exchange has already ended");
  }

  const std::string& principal() const override { return principal_; }

 private:
  enum class Phase { kClientFirst, kClientFinal, kEnded };

  static Step BadFirst(std::string_view why) {
    return Fail(fmt::format("Authentication failed: invalid SCRAM client-first message: {}", why));
  }
  static Step BadFinal(std::string_view why) {
    return Fail(fmt::format("Authentication failed: invalid SCRAM client-final message: {}", why));
  }

  // saslname (RFC 5802): ',' and '=' written as =2C and =3D; nothing else after '='.
  static std::optional<std::string> DecodeSaslName(std::string_view s) {
    if (s.empty()) return std::nullopt;
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '=') {
        out += s[i];
      } else if (s.substr(i, 3) == "=2C") {
        out += ',', i += 2;
      } else if (s.substr(i, 3) == "=3D") {
        out += '=', i += 2;
      } else {
        return std::nullopt;
      }
    }
    return out;
  }

  // printable = %x21-2B / %x2D-7E (the split removed every ',').
  static bool ValidNonce(std::string_view s) {
    return !s.empty() && std::ranges::all_of(s, [](char c) { return c >= 0x21 && c <= 0x7E; });
  }

  // An extension attribute: a name of letters (Kafka's are words, e.g. tokenauth), '=', a
  // non-empty value. Accepted and ignored.
  static bool ValidExtension(std::string_view a) {
    size_t eq = a.find('=');
    if (eq == 0 || eq == std::string_view::npos || eq + 1 == a.size()) return false;
    return std::ranges::all_of(
        a.substr(0, eq), [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); });
  }

  // gs2-header [reserved-mext ","] username "," nonce ["," extensions]
  Step ClientFirst(std::string_view msg) {
    size_t c1 = msg.find(',');
    if (c1 == std::string_view::npos) return BadFirst("no gs2 header");
    std::string_view flag = msg.substr(0, c1);
    if (flag.starts_with("p=")) {
      return BadFirst("channel binding ('p=') is not supported; use SCRAM-SHA-256, not -PLUS");
    }
    if (flag != "n" && flag != "y") return BadFirst("the gs2 header must start with 'n' or 'y'");
    size_t c2 = msg.find(',', c1 + 1);
    if (c2 == std::string_view::npos) return BadFirst("the gs2 header does not end with ','");
    std::string_view authz = msg.substr(c1 + 1, c2 - c1 - 1);
    std::optional<std::string> authzid;
    if (!authz.empty()) {
      if (!authz.starts_with("a=")) return BadFirst("the authzid must be 'a=<name>' or empty");
      authzid = DecodeSaslName(authz.substr(2));
      if (!authzid) return BadFirst("the authzid is not a valid saslname");
    }

    std::string_view bare = msg.substr(c2 + 1);
    std::vector<std::string_view> attrs = Split(bare, ',');
    if (attrs[0].starts_with("m="))
      return BadFirst("mandatory extensions ('m=') are not supported");
    if (!attrs[0].starts_with("n=")) return BadFirst("expected the user name 'n=' first");
    std::optional<std::string> user = DecodeSaslName(attrs[0].substr(2));
    if (!user) return BadFirst("the user name is not a valid saslname");
    if (attrs.size() < 2 || !attrs[1].starts_with("r=")) {
      return BadFirst("expected the nonce 'r=' after the user name");
    }
    std::string_view client_nonce = attrs[1].substr(2);
    if (!ValidNonce(client_nonce)) return BadFirst("the nonce must be printable ASCII");
    for (size_t i = 2; i < attrs.size(); ++i) {
      if (!ValidExtension(attrs[i])) return BadFirst("malformed extension attribute");
    }
    if (authzid && *authzid != *user) return Fail(std::string(kAuthzidDiffers));

    // An unknown user gets a stand-in salt and fails only at the final step, with the
    // same message as a wrong password. The stand-in is derived for every user, so that
    // a known one takes no less work.
    if (!store_.FakeScram(*user, &credential_)) return Fail(std::string(kScramFailed));
    if (const SaslCredentialStore::User* u = store_.Find(*user)) {
      credential_ = u->scram;
      known_ = true;
    }
    std::optional<std::string> server_nonce = store_.ServerNonce();
    if (!server_nonce) return Fail("Authentication failed: the server has no random bytes");

    user_ = std::move(*user);
    gs2_header_ = std::string(msg.substr(0, c2 + 1));
    client_first_bare_ = std::string(bare);
    client_nonce_ = std::string(client_nonce);
    nonce_ = fmt::format("{}{}", client_nonce, *server_nonce);
    server_first_ = fmt::format("r={},s={},i={}", nonce_, Base64Encode(credential_.salt),
                                credential_.iterations);
    return Step{State::kInProgress, ToVector(server_first_), ""};
  }

  // channel-binding "," nonce ["," extensions] "," proof
  Step ClientFinal(std::string_view msg) {
    std::vector<std::string_view> attrs = Split(msg, ',');
    if (!attrs[0].starts_with("c=")) return BadFinal("expected the channel binding 'c=' first");
    if (attrs.size() < 2 || !attrs[1].starts_with("r=")) {
      return BadFinal("expected the nonce 'r=' second");
    }
    if (attrs.size() < 3 || !attrs.back().starts_with("p=")) {
      return BadFinal("expected the proof 'p=' last");
    }
    for (size_t i = 2; i + 1 < attrs.size(); ++i) {
      if (!ValidExtension(attrs[i])) return BadFinal("malformed extension attribute");
    }
    std::optional<std::vector<uint8_t>> binding = Base64Decode(attrs[0].substr(2));
    if (!binding) return BadFinal("the channel binding is not base64");
    if (AsText(*binding) != gs2_header_) {
      return BadFinal("the channel binding does not match the client-first message's gs2 header");
    }
    // The nonce of the server-first message; or, as librdkafka before 2.6.1 sends it
    // (confluentinc/librdkafka#4895), the client nonce followed by that nonce, which
    // Kafka 3.8.1 to 3.9 accept too. The server nonce is still there and the proof
    // covers it, so a replayed final message still fails. Nothing else passes.
    std::string_view nonce = attrs[1].substr(2);
    const bool legacy_nonce = nonce.size() == client_nonce_.size() + nonce_.size() &&
                              nonce.starts_with(client_nonce_) && nonce.ends_with(nonce_);
    if (nonce != nonce_ && !legacy_nonce) {
      return BadFinal("the nonce is not the one of the server-first message");
    }
    std::optional<std::vector<uint8_t>> proof = Base64Decode(attrs.back().substr(2));
    if (!proof || proof->size() != Digest().size()) {
      return BadFinal("the proof is not a base64 SHA-256 digest");
    }

    // AuthMessage = client-first-message-bare "," server-first-message ","
    //               client-final-message-without-proof, each as sent.
    std::string_view without_proof = msg.substr(0, msg.size() - attrs.back().size() - 1);
    std::string auth_message =
        fmt::format("{},{},{}", client_first_bare_, server_first_, without_proof);
    // ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); it is right when
    // H(ClientKey) = StoredKey.
    Digest client_key, computed_stored_key;
    if (!HmacSha256(credential_.stored_key, AsBytes(auth_message), &client_key)) {
      return Fail(std::string(kScramFailed));
    }
    for (size_t i = 0; i < client_key.size(); ++i) client_key[i] ^= (*proof)[i];
    const bool hashed = Sha256(client_key, &computed_stored_key);
    OPENSSL_cleanse(client_key.data(), client_key.size());
    if (!hashed || !DigestsEqual(computed_stored_key, credential_.stored_key) || !known_) {
      return Fail(std::string(kScramFailed));
    }
    Digest server_signature;
    if (!HmacSha256(credential_.server_key, AsBytes(auth_message), &server_signature)) {
      return Fail(std::string(kScramFailed));
    }
    principal_ = user_;
    return Step{State::kSucceeded, ToVector("v=" + Base64Encode(server_signature)), ""};
  }

  const SaslCredentialStore& store_;
  Phase phase_ = Phase::kClientFirst;
  // From the first step, for the final one.
  SaslCredentialStore::ScramCredential credential_;
  bool known_ = false;
  std::string user_;
  std::string gs2_header_;         // e.g. "n,,": what c= must encode
  std::string client_first_bare_;  // as sent
  std::string server_first_;
  std::string client_nonce_;
  std::string nonce_;  // client nonce + server nonce
  std::string principal_;
};

}  // namespace

// ------------------------------------------------------------------ authenticator

SaslAuthenticator::SaslAuthenticator(std::vector<std::string> mechanisms,
                                     std::unique_ptr<const SaslCredentialStore> store)
    : mechanisms_(std::move(mechanisms)), store_(std::move(store)) {}

SaslAuthenticator::~SaslAuthenticator() = default;

Result<std::unique_ptr<SaslAuthenticator>> SaslAuthenticator::Create(const SaslConfig& config) {
  return CreateForTesting(config, TestHooks{});
}

Result<std::unique_ptr<SaslAuthenticator>> SaslAuthenticator::CreateForTesting(
    const SaslConfig& config, TestHooks hooks) {
  RETURN_IF_ERROR(Validate(config));
  ASSIGN_OR_RETURN(std::unique_ptr<const SaslCredentialStore> store,
                   SaslCredentialStore::Build(config, std::move(hooks)));
  return std::unique_ptr<SaslAuthenticator>(
      new SaslAuthenticator(config.mechanisms, std::move(store)));
}

bool SaslAuthenticator::Supports(std::string_view mechanism) const {
  return std::ranges::find(mechanisms_, mechanism) != mechanisms_.end();
}

std::unique_ptr<SaslSession> SaslAuthenticator::Start(std::string_view mechanism) const {
  if (!Supports(mechanism)) return nullptr;
  if (mechanism == kSaslPlain) return std::make_unique<PlainSession>(*store_);
  if (mechanism == kSaslScramSha256) return std::make_unique<ScramSession>(*store_);
  return nullptr;
}

// ------------------------------------------------------------------ client

namespace {

class PlainClient final : public SaslClient {
 public:
  PlainClient(std::string user, std::string password)
      : user_(std::move(user)), password_(std::move(password)) {}
  ~PlainClient() override { OPENSSL_cleanse(password_.data(), password_.size()); }
  std::vector<uint8_t> First() override {
    std::string m;
    m.push_back('\0');
    m += user_;
    m.push_back('\0');
    m += password_;
    std::vector<uint8_t> out = ToVector(m);
    OPENSSL_cleanse(m.data(), m.size());
    return out;
  }
  Result<std::optional<std::vector<uint8_t>>> Next(std::span<const uint8_t>) override {
    return std::optional<std::vector<uint8_t>>();  // the server's (empty) answer ends it
  }

 private:
  std::string user_, password_;
};

// RFC 5802 with SHA-256, no channel binding ("n,,"), as Kafka's clients run it.
class ScramClient final : public SaslClient {
 public:
  ScramClient(std::string user, std::string password)
      : user_(std::move(user)), password_(std::move(password)) {
    std::array<uint8_t, kServerNonceBytes> raw;
    if (RandomBytes(raw)) nonce_ = Base64Encode(raw);
  }
  ~ScramClient() override {
    OPENSSL_cleanse(password_.data(), password_.size());
    OPENSSL_cleanse(salted_.data(), salted_.size());
  }
  void SetNonceForTesting(std::string nonce) override { nonce_ = std::move(nonce); }

  std::vector<uint8_t> First() override {
    std::string name;
    for (char c : user_) {
      if (c == ',') {
        name += "=2C";
      } else if (c == '=') {
        name += "=3D";
      } else {
        name.push_back(c);
      }
    }
    first_bare_ = "n=" + name + ",r=" + nonce_;
    step_ = 1;
    return ToVector("n,," + first_bare_);
  }

  Result<std::optional<std::vector<uint8_t>>> Next(std::span<const uint8_t> server) override {
    const std::string_view text = AsText(server);
    if (text.size() > 4096)
      return InvalidArgumentError("SCRAM: a {}-byte server message", text.size());
    if (step_ == 1) return ServerFirst(text);
    if (step_ == 2) return ServerFinal(text);
    return FailedPreconditionError("SCRAM: a server message after the exchange ended");
  }

 private:
  Result<std::optional<std::vector<uint8_t>>> ServerFirst(std::string_view text) {
    step_ = 3;  // any error ends the exchange
    // r=<nonce>,s=<salt>,i=<iterations>[,extensions]
    std::string_view nonce, salt_text, iter_text;
    size_t start = 0;
    for (int field = 0; field < 3; ++field) {
      const size_t comma = text.find(',', start);
      const std::string_view attr = text.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      static constexpr std::string_view kNames[] = {"r=", "s=", "i="};
      if (!attr.starts_with(kNames[field])) {
        if (attr.starts_with("e=")) {
          return InvalidArgumentError("SCRAM: the server refused: {}", attr.substr(2, 200));
        }
        return InvalidArgumentError("SCRAM: the server's first message has no {}", kNames[field]);
      }
      (field == 0 ? nonce : field == 1 ? salt_text : iter_text) = attr.substr(2);
      if (comma == std::string_view::npos) {
        if (field < 2) return InvalidArgumentError("SCRAM: the server's first message is short");
        break;
      }
      start = comma + 1;
    }
    if (nonce.size() <= nonce_.size() || !nonce.starts_with(nonce_) ||
        nonce.find_first_of(",") != std::string_view::npos) {
      return InvalidArgumentError("SCRAM: the server's nonce does not extend this client's");
    }
    std::optional<std::vector<uint8_t>> salt = Base64Decode(salt_text);
    if (!salt.has_value() || salt->empty()) {
      return InvalidArgumentError("SCRAM: the server's salt is not base64");
    }
    int iterations = 0;
    auto [end, ec] =
        std::from_chars(iter_text.data(), iter_text.data() + iter_text.size(), iterations);
    if (ec != std::errc() || end != iter_text.data() + iter_text.size() ||
        iterations < kMinScramIterations || iterations > kMaxScramIterations) {
      return InvalidArgumentError("SCRAM: the server's iteration count '{}' is outside {} to {}",
                                  iter_text.substr(0, 16), kMinScramIterations,
                                  kMaxScramIterations);
    }
    const std::string without_proof = "c=biws,r=" + std::string(nonce);  // biws: "n,,"
    auth_message_ = first_bare_ + "," + std::string(text) + "," + without_proof;
    Digest client_key, stored_key, signature, proof;
    const bool ok =
        PKCS5_PBKDF2_HMAC(password_.data(), static_cast<int>(password_.size()), salt->data(),
                          static_cast<int>(salt->size()), iterations, EVP_sha256(),
                          static_cast<int>(salted_.size()), salted_.data()) == 1 &&
        HmacSha256(salted_, AsBytes("Client Key"), &client_key) &&
        Sha256(client_key, &stored_key) &&
        HmacSha256(stored_key, AsBytes(auth_message_), &signature);
    if (!ok) return InternalError("SASL: PBKDF2 / HMAC-SHA-256 failed");
    for (size_t i = 0; i < proof.size(); ++i) proof[i] = client_key[i] ^ signature[i];
    OPENSSL_cleanse(client_key.data(), client_key.size());
    step_ = 2;
    return std::optional<std::vector<uint8_t>>(
        ToVector(without_proof + ",p=" + Base64Encode(proof)));
  }

  Result<std::optional<std::vector<uint8_t>>> ServerFinal(std::string_view text) {
    step_ = 3;
    if (text.starts_with("e=")) {
      return InvalidArgumentError("SCRAM: the server refused: {}", text.substr(2, 200));
    }
    const size_t comma = text.find(',');
    std::optional<std::vector<uint8_t>> got =
        text.starts_with("v=")
            ? Base64Decode(text.substr(
                  2, comma == std::string_view::npos ? std::string_view::npos : comma - 2))
            : std::nullopt;
    Digest server_key, expected;
    if (!HmacSha256(salted_, AsBytes("Server Key"), &server_key) ||
        !HmacSha256(server_key, AsBytes(auth_message_), &expected)) {
      return InternalError("SASL: HMAC-SHA-256 failed");
    }
    if (!got.has_value() || got->size() != expected.size() ||
        CRYPTO_memcmp(got->data(), expected.data(), expected.size()) != 0) {
      return InvalidArgumentError(
          "SCRAM: the server's signature is wrong (it does not know this user's password)");
    }
    return std::optional<std::vector<uint8_t>>();
  }

  std::string user_, password_, nonce_;
  std::string first_bare_, auth_message_;
  Digest salted_{};
  int step_ = 0;
};

}  // namespace

Result<std::unique_ptr<SaslClient>> SaslClient::Start(std::string_view mechanism, std::string user,
                                                      std::string password) {
  if (!ValidName(user)) {
    return InvalidArgumentError("SASL: a user name must be UTF-8 without NUL, and not empty");
  }
  if (mechanism == kSaslPlain) {
    return std::unique_ptr<SaslClient>(
        std::make_unique<PlainClient>(std::move(user), std::move(password)));
  }
  if (mechanism == kSaslScramSha256) {
    return std::unique_ptr<SaslClient>(
        std::make_unique<ScramClient>(std::move(user), std::move(password)));
  }
  return InvalidArgumentError("SASL: no client for mechanism '{}' (PLAIN or SCRAM-SHA-256)",
                              mechanism.substr(0, 64));
}

// ------------------------------------------------------------------ config

Result<SaslConfig> SaslConfigFromYaml(const Config& config) {
  auto bad = [&config](std::string_view key, std::string_view why) {
    return InvalidArgumentError("{} (from {}): {}", key, config.Origin(key), why);
  };
  SaslConfig out;
  ASSIGN_OR_RETURN(out.enabled, config.GetBool("sasl.enabled", false));

  if (config.Has("sasl.mechanisms")) {
    ASSIGN_OR_RETURN(out.mechanisms, config.GetList("sasl.mechanisms"));
    std::set<std::string_view> seen;
    for (const std::string& m : out.mechanisms) {
      if (!KnownMechanism(m)) {
        return bad("sasl.mechanisms",
                   fmt::format("unknown SASL mechanism '{}' (sluice supports PLAIN and "
                               "SCRAM-SHA-256)",
                               m));
      }
      if (!seen.insert(m).second) {
        return bad("sasl.mechanisms", fmt::format("'{}' is listed twice", m));
      }
    }
  }

  ASSIGN_OR_RETURN(std::vector<std::string> users, config.GetList("sasl.users"));
  std::set<std::string_view> names;
  for (size_t i = 0; i < users.size(); ++i) {
    // Never put the item in a message: it holds a password, or what may be one.
    const std::string& item = users[i];
    size_t colon = item.find(':');
    if (colon == std::string::npos) {
      return bad("sasl.users", fmt::format("item {} has no ':' before a password; write each "
                                           "user as \"name:password\"",
                                           i + 1));
    }
    std::string_view name = std::string_view(item).substr(0, colon);
    if (name.empty()) return bad("sasl.users", fmt::format("item {} has no user name", i + 1));
    if (!ValidName(name)) {
      return bad("sasl.users", fmt::format("item {}: the user name is not UTF-8 text", i + 1));
    }
    if (colon + 1 == item.size()) {
      return bad("sasl.users", fmt::format("user '{}' has no password", name));
    }
    if (!names.insert(name).second) {
      return bad("sasl.users", fmt::format("user '{}' is listed twice", name));
    }
    out.users.push_back(SaslUser{std::string(name), item.substr(colon + 1)});
  }

  ASSIGN_OR_RETURN(int64_t iterations, config.GetInt("sasl.scram_iterations", 4096,
                                                     kMinScramIterations, kMaxScramIterations));
  out.scram_iterations = static_cast<int>(iterations);

  if (out.enabled && out.mechanisms.empty()) {
    return bad("sasl.enabled", "SASL is enabled but sasl.mechanisms is empty");
  }
  if (out.enabled && out.users.empty()) {
    return bad("sasl.enabled", "SASL is enabled but sasl.users lists no users");
  }
  return out;
}

}  // namespace sluice::broker
