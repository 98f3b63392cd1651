#include "broker/sasl.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "auth/scram.h"
#include "auth/user_store.h"
#include "base/base64.h"
#include "base/config.h"
#include "base/utf8.h"

namespace sluice::broker {
namespace {

using Digest = std::array<uint8_t, 32>;  // SHA-256

constexpr int kMinScramIterations = auth::kMinIterations;  // Kafka's bounds (KIP-554)
constexpr int kMaxScramIterations = auth::kMaxIterations;
constexpr size_t kSaltBytes = auth::kSaltBytes;
constexpr size_t kServerNonceBytes = 24;  // 32 base64 characters, 192 bits

constexpr std::string_view kKnownMechanisms[] = {kSaslPlain, kSaslScramSha256, kSaslScramSha512};

// Kafka's texts for a failed authentication, so clients and their users see the same.
constexpr std::string_view kPlainFailed = "Authentication failed: Invalid username or password";
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

bool RandomBytes(std::span<uint8_t> out) {
  return RAND_bytes(out.data(), static_cast<int>(out.size())) == 1;
}

// The config checks Create makes (SaslConfigFromYaml makes them with the key's origin).
Status Validate(const SaslConfig& config) {
  std::set<std::string_view> mechanisms;
  for (const std::string& m : config.mechanisms) {
    if (!KnownMechanism(m)) {
      return InvalidArgumentError(
          "unknown SASL mechanism '{}' (sluice supports PLAIN, SCRAM-SHA-256 and "
          "SCRAM-SHA-512)",
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

// The authenticator's view of the user store (auth::UserStore): credentials by user and
// mechanism, stand-ins for users that do not exist, and server nonces. Read by every
// connection's thread.
class SaslCredentialStore {
 public:
  SaslCredentialStore(std::shared_ptr<const auth::UserStore> users, int iterations,
                      std::function<std::string()> nonce_hook, std::string internal_secret = "")
      : users_(std::move(users)),
        iterations_(iterations),
        nonce_hook_(std::move(nonce_hook)),
        internal_secret_(std::move(internal_secret)) {
    if (!RandomBytes(fake_key_) || !RandomBytes(plain_key_)) std::abort();  // no randomness
  }

  // Who `name` logs in as: the process's own clients (kInternalUser, kInternalUser/<p>)
  // when there is an internal secret, else `name`.
  std::string PrincipalOf(std::string_view name) const {
    if (internal_secret_.empty() || !IsInternalUserName(name)) return std::string(name);
    if (name.size() > kInternalUser.size())
      return std::string(name.substr(kInternalUser.size() + 1));
    return std::string(name);
  }

  std::optional<auth::ScramCredential> Find(std::string_view name, auth::ScramMechanism m) const {
    if (IsInternalUserName(name)) return InternalScram(name, m);
    return users_->Find(name, m);
  }
  // PLAIN: PBKDF2 against the stored credential (a millisecond or two, on the connection's
  // event loop), remembered per user as a keyed digest of the password once it passed, so
  // a client that logs in again and again costs an HMAC. A change to the store forgets.
  bool VerifyPassword(std::string_view name, std::string_view password) const {
    if (IsInternalUserName(name)) {
      return !internal_secret_.empty() && name != std::string(kInternalUser) + "/" &&
             auth::ConstantTimeEquals(password, internal_secret_);
    }
    const std::string_view key(reinterpret_cast<const char*>(plain_key_.data()), plain_key_.size());
    const std::string digest = auth::Hmac(auth::ScramMechanism::kSha256, key, password);
    const uint64_t version = users_->version();
    {
      std::lock_guard lock(mu_);
      auto it = verified_.find(name);
      if (it != verified_.end() && it->second.first == version &&
          auth::ConstantTimeEquals(it->second.second, digest)) {
        return true;
      }
    }
    if (!users_->VerifyPassword(name, password)) return false;
    std::lock_guard lock(mu_);
    if (verified_.size() >= 10'000) verified_.clear();
    verified_[std::string(name)] = {version, digest};
    return true;
  }

  // A stand-in for a user that does not exist, so that SCRAM's first step answers as it
  // would for a real one: the same salt for the same name (asking twice tells nothing)
  // and the configured iterations. Its keys never verify: sessions also check known.
  auth::ScramCredential FakeScram(std::string_view name, auth::ScramMechanism m) const {
    const std::string_view key(reinterpret_cast<const char*>(fake_key_.data()), fake_key_.size());
    auth::ScramCredential c;
    c.salt = auth::Hmac(m, key, fmt::format("salt\n{}", name)).substr(0, kSaltBytes);
    c.iterations = iterations_;
    c.stored_key = auth::Hmac(m, key, fmt::format("key\n{}", name));
    c.server_key = c.stored_key;
    return c;
  }

  // The SCRAM credential of an internal user name: from the secret, derived once per name
  // and mechanism (a salt of its own per name and process).
  std::optional<auth::ScramCredential> InternalScram(std::string_view name,
                                                     auth::ScramMechanism m) const {
    if (internal_secret_.empty() || name == std::string(kInternalUser) + "/") return std::nullopt;
    const std::string key = fmt::format("{}\n{}", static_cast<int>(m), name);
    {
      std::lock_guard lock(mu_);
      auto it = internal_.find(key);
      if (it != internal_.end()) return it->second;
    }
    const std::string_view fk(reinterpret_cast<const char*>(fake_key_.data()), fake_key_.size());
    std::string salt = auth::Hmac(m, fk, "internal\n" + key).substr(0, kSaltBytes);
    auth::ScramCredential c =
        auth::CredentialFromPassword(m, internal_secret_, kInternalIterations, std::move(salt));
    std::lock_guard lock(mu_);
    if (internal_.size() >= 10'000) internal_.clear();
    internal_[key] = c;
    return c;
  }

  // A fresh server nonce: printable, without ','.
  std::optional<std::string> ServerNonce() const {
    if (nonce_hook_) return nonce_hook_();
    std::array<uint8_t, kServerNonceBytes> raw;
    if (!RandomBytes(raw)) return std::nullopt;
    return Base64Encode(raw);
  }

 private:
  const std::shared_ptr<const auth::UserStore> users_;
  const int iterations_;
  const std::function<std::string()> nonce_hook_;  // tests only
  const std::string internal_secret_;              // "" : no internal clients
  static constexpr int kInternalIterations = 4096;
  Digest fake_key_{};   // random per process: unknown users' salts
  Digest plain_key_{};  // random per process: keys verified_
  mutable std::mutex mu_;
  // user -> (store version, HMAC(plain_key_, password)) of its last PLAIN login that passed.
  mutable std::map<std::string, std::pair<uint64_t, std::string>, std::less<>> verified_;
  // "mechanism\nname" -> the internal credential derived for it.
  mutable std::map<std::string, auth::ScramCredential> internal_;
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

    // The same work for a known and an unknown user (UserStore::VerifyPassword derives a
    // credential either way), so neither which users exist nor the password leaks by
    // timing.
    if (!store_.VerifyPassword(user, password)) return Fail(std::string(kPlainFailed));
    principal_ = store_.PrincipalOf(user);
    return Step{State::kSucceeded, {}, ""};
  }

  const SaslCredentialStore& store_;
  bool done_ = false;
  std::string principal_;
};

// SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802): client-first -> server-first, client-final ->
// server-final.
class ScramSession final : public SaslSession {
 public:
  ScramSession(const SaslCredentialStore& store, auth::ScramMechanism mechanism)
      : store_(store), mechanism_(mechanism) {}

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
    return Fail(fmt::format("Authentication failed: the SASL/{} exchange has already ended",
                            auth::MechanismName(mechanism_)));
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
      return BadFirst(
          "channel binding ('p=') is not supported; use SCRAM-SHA-256 or -512, not -PLUS");
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
    credential_ = store_.FakeScram(*user, mechanism_);
    if (std::optional<auth::ScramCredential> c = store_.Find(*user, mechanism_)) {
      credential_ = std::move(*c);
      known_ = true;
    }
    std::optional<std::string> server_nonce = store_.ServerNonce();
    if (!server_nonce) return Fail("Authentication failed: the server has no random bytes");

    user_ = std::move(*user);
    gs2_header_ = std::string(msg.substr(0, c2 + 1));
    client_first_bare_ = std::string(bare);
    client_nonce_ = std::string(client_nonce);
    nonce_ = fmt::format("{}{}", client_nonce, *server_nonce);
    server_first_ = fmt::format("r={},s={},i={}", nonce_, ::sluice::Base64Encode(credential_.salt),
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
    const size_t digest = auth::DigestSize(mechanism_);
    if (!proof || proof->size() != digest) {
      return BadFinal(fmt::format("the proof is not a base64 {}-byte digest", digest));
    }

    // AuthMessage = client-first-message-bare "," server-first-message ","
    //               client-final-message-without-proof, each as sent.
    std::string_view without_proof = msg.substr(0, msg.size() - attrs.back().size() - 1);
    std::string auth_message =
        fmt::format("{},{},{}", client_first_bare_, server_first_, without_proof);
    // ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); it is right when
    // H(ClientKey) = StoredKey.
    std::string client_key = auth::Hmac(mechanism_, credential_.stored_key, auth_message);
    for (size_t i = 0; i < client_key.size(); ++i) {
      client_key[i] = static_cast<char>(client_key[i] ^ (*proof)[i]);
    }
    const bool match =
        auth::ConstantTimeEquals(auth::Hash(mechanism_, client_key), credential_.stored_key);
    OPENSSL_cleanse(client_key.data(), client_key.size());
    if (!match || !known_) return Fail(ScramFailed());
    const std::string server_signature =
        auth::Hmac(mechanism_, credential_.server_key, auth_message);
    principal_ = store_.PrincipalOf(user_);
    return Step{State::kSucceeded, ToVector("v=" + ::sluice::Base64Encode(server_signature)), ""};
  }

  // Kafka's text for a failed SCRAM login, with this exchange's mechanism.
  std::string ScramFailed() const {
    return fmt::format(
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism {}",
        auth::MechanismName(mechanism_));
  }

  const SaslCredentialStore& store_;
  const auth::ScramMechanism mechanism_;
  Phase phase_ = Phase::kClientFirst;
  // From the first step, for the final one.
  auth::ScramCredential credential_;
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

bool IsInternalUserName(std::string_view name) {
  return name.substr(0, kInternalUser.size()) == kInternalUser &&
         (name.size() == kInternalUser.size() || name[kInternalUser.size()] == '/');
}

Result<std::unique_ptr<SaslAuthenticator>> SaslAuthenticator::Create(
    const SaslConfig& config, std::shared_ptr<const auth::UserStore> users,
    std::string internal_secret) {
  RETURN_IF_ERROR(Validate(config));
  auto store = std::make_unique<const SaslCredentialStore>(
      std::move(users), config.scram_iterations, nullptr, std::move(internal_secret));
  return std::unique_ptr<SaslAuthenticator>(
      new SaslAuthenticator(config.mechanisms, std::move(store)));
}

Result<std::unique_ptr<SaslAuthenticator>> SaslAuthenticator::Create(const SaslConfig& config) {
  return CreateForTesting(config, TestHooks{});
}

Result<std::unique_ptr<SaslAuthenticator>> SaslAuthenticator::CreateForTesting(
    const SaslConfig& config, TestHooks hooks) {
  RETURN_IF_ERROR(Validate(config));
  // The config's users in a store of their own (kept in memory).
  ASSIGN_OR_RETURN(std::unique_ptr<auth::UserStore> users, auth::UserStore::Load("", nullptr));
  for (const SaslUser& u : config.users) {
    std::vector<auth::UserChange> changes;
    for (auth::ScramMechanism m : auth::kScramMechanisms) {
      std::string salt;
      if (hooks.salt) {
        std::vector<uint8_t> bytes = hooks.salt(u.name);
        salt.assign(bytes.begin(), bytes.end());
      }
      changes.push_back(
          {u.name, m,
           auth::CredentialFromPassword(m, u.password, config.scram_iterations, std::move(salt))});
    }
    RETURN_IF_ERROR(users->Apply(changes));
  }
  auto store = std::make_unique<const SaslCredentialStore>(
      std::move(users), config.scram_iterations, std::move(hooks.server_nonce));
  return std::unique_ptr<SaslAuthenticator>(
      new SaslAuthenticator(config.mechanisms, std::move(store)));
}

bool SaslAuthenticator::Supports(std::string_view mechanism) const {
  return std::ranges::find(mechanisms_, mechanism) != mechanisms_.end();
}

std::unique_ptr<SaslSession> SaslAuthenticator::Start(std::string_view mechanism) const {
  if (!Supports(mechanism)) return nullptr;
  if (mechanism == kSaslPlain) return std::make_unique<PlainSession>(*store_);
  if (mechanism == kSaslScramSha256) {
    return std::make_unique<ScramSession>(*store_, auth::ScramMechanism::kSha256);
  }
  if (mechanism == kSaslScramSha512) {
    return std::make_unique<ScramSession>(*store_, auth::ScramMechanism::kSha512);
  }
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

// RFC 5802 with SHA-256 or SHA-512, no channel binding ("n,,"), as Kafka's clients run it.
class ScramClient final : public SaslClient {
 public:
  ScramClient(auth::ScramMechanism m, std::string user, std::string password)
      : m_(m), user_(std::move(user)), password_(std::move(password)) {
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
    salted_ = auth::SaltedPassword(m_, password_, AsText(*salt), iterations);
    std::string client_key = auth::Hmac(m_, salted_, "Client Key");
    const std::string signature = auth::Hmac(m_, auth::Hash(m_, client_key), auth_message_);
    std::string proof = client_key;
    for (size_t i = 0; i < proof.size(); ++i) proof[i] = static_cast<char>(proof[i] ^ signature[i]);
    OPENSSL_cleanse(client_key.data(), client_key.size());
    step_ = 2;
    return std::optional<std::vector<uint8_t>>(
        ToVector(without_proof + ",p=" + ::sluice::Base64Encode(proof)));
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
    const std::string expected =
        auth::Hmac(m_, auth::Hmac(m_, salted_, "Server Key"), auth_message_);
    if (!got.has_value() || !auth::ConstantTimeEquals(AsText(*got), expected)) {
      return InvalidArgumentError(
          "SCRAM: the server's signature is wrong (it does not know this user's password)");
    }
    return std::optional<std::vector<uint8_t>>();
  }

  const auth::ScramMechanism m_;
  std::string user_, password_, nonce_;
  std::string first_bare_, auth_message_;
  std::string salted_;
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
  if (std::optional<auth::ScramMechanism> m = auth::MechanismFromName(mechanism)) {
    return std::unique_ptr<SaslClient>(
        std::make_unique<ScramClient>(*m, std::move(user), std::move(password)));
  }
  return InvalidArgumentError(
      "SASL: no client for mechanism '{}' (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)",
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
