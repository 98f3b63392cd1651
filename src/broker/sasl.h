// SASL authentication for the broker: the server side of PLAIN (RFC 4616) and
// SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677, as Kafka implements them in KIP-84),
// independent of the wire. The broker feeds each SaslAuthenticate request's auth_bytes to
// a SaslSession and sends back the Step's response bytes, or SASL_AUTHENTICATION_FAILED
// with its error.
//
// Credentials come from the user store (auth/user_store.h; docs/design/0019-security.md,
// phase D): SCRAM's salt, StoredKey and ServerKey per mechanism, never a password. A SCRAM
// step runs no PBKDF2; a PLAIN login runs it once per user and password (then a keyed
// digest of the password is remembered). Decisions: docs/design/0004-sasl.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice {
class Config;
}
namespace sluice::auth {
class UserStore;
}

namespace sluice::broker {

// The mechanism names, as sent in SaslHandshake.
inline constexpr std::string_view kSaslPlain = "PLAIN";
inline constexpr std::string_view kSaslScramSha256 = "SCRAM-SHA-256";
inline constexpr std::string_view kSaslScramSha512 = "SCRAM-SHA-512";

// A client message longer than this fails the exchange (the real ones are < 1 KiB).
inline constexpr size_t kMaxSaslMessageBytes = 64 * 1024;

struct SaslUser {
  std::string name;
  std::string password;
};

// The user name of the process's own Kafka clients; no user of the store may have it, or
// begin with it and '/'.
inline constexpr std::string_view kInternalUser = "__sluice";
// The principal a SASL user name logs in as: `name` itself, or for kInternalUser/<p>, p.
// Whether `name` is reserved for the process's own clients.
bool IsInternalUserName(std::string_view name);

struct SaslConfig {
  bool enabled = false;
  std::vector<std::string> mechanisms = {"PLAIN", "SCRAM-SHA-256"};
  std::vector<SaslUser> users;
  int scram_iterations = 4096;  // [4096, 16384], Kafka's bounds for SCRAM-SHA-256
};

// The config keys SaslConfigFromYaml reads, for Config::CheckKnown.
inline constexpr std::string_view kSaslConfigKeys[] = {"sasl.enabled", "sasl.mechanisms",
                                                       "sasl.users", "sasl.scram_iterations"};

// Reads the `sasl:` section of the config:
//
//   sasl:
//     enabled: true
//     mechanisms: [PLAIN, SCRAM-SHA-256]   # the default; order = SaslHandshake's list
//     users: ["alice:alice-secret", "bob:b0b"]   # name:password, split at the first ':'
//     scram_iterations: 4096
//
// Users are "name:password" strings because a Config value is a scalar or a list of
// scalars (a list of {name, password} maps is refused by Config::Parse). Errors are
// InvalidArgument naming the key and its origin: an unknown or repeated mechanism, a
// user without a password, a user listed twice, iterations out of range, enabled with no
// users or no mechanisms. Error messages never contain a password.
Result<SaslConfig> SaslConfigFromYaml(const Config& config);

// One authentication exchange on one connection: Start() makes it, each client message
// goes to Next() in order, and the exchange ends at the first Step that is not
// kInProgress. Owned by the connection's thread; not thread-safe.
class SaslSession {
 public:
  enum class State { kInProgress, kSucceeded, kFailed };
  struct Step {
    State state = State::kFailed;
    std::vector<uint8_t> response;  // auth_bytes to send back (also on kSucceeded)
    std::string error;              // kFailed: the message for SASL_AUTHENTICATION_FAILED
  };

  virtual ~SaslSession() = default;

  // The next step for `client_bytes`. Never throws; malformed or oversized input, and
  // any call after the exchange ended, is kFailed with a message saying what was wrong.
  virtual Step Next(std::span<const uint8_t> client_bytes) = 0;
  // The authenticated user's name after kSucceeded; "" before.
  virtual const std::string& principal() const = 0;
};

class SaslCredentialStore;  // the derived credentials; sasl.cc

// The users and mechanisms, built once at startup. Immutable after Create and shared by
// every connection: the const methods may be called from any thread. It must outlive the
// sessions it starts.
class SaslAuthenticator {
 public:
  // The mechanisms of `config`, the users of `users` (which the config's users seeded;
  // it must outlive nothing: shared). InvalidArgument for a config SaslConfigFromYaml
  // would refuse.
  // `internal_secret` (non-empty) is the password of the process's own clients (topic(),
  // pipelines under serve): user kInternalUser logs in as itself, a super user, and
  // "kInternalUser/<name>" as User:<name> (docs/design/0020-data-authorization.md).
  static Result<std::unique_ptr<SaslAuthenticator>> Create(
      const SaslConfig& config, std::shared_ptr<const auth::UserStore> users,
      std::string internal_secret = "");
  // The config's users alone, in a store of their own (tests, tools).
  static Result<std::unique_ptr<SaslAuthenticator>> Create(const SaslConfig& config);

  // Deterministic randomness, for known-answer tests only (RFC 7677's vector). A set
  // hook replaces the CSPRNG: `server_nonce` gives each SCRAM exchange's server nonce
  // (printable ASCII without ','), `salt` a user's SCRAM salt at Create.
  struct TestHooks {
    std::function<std::string()> server_nonce;
    std::function<std::vector<uint8_t>(std::string_view user)> salt;
  };
  static Result<std::unique_ptr<SaslAuthenticator>> CreateForTesting(const SaslConfig& config,
                                                                     TestHooks hooks);

  ~SaslAuthenticator();

  bool Supports(std::string_view mechanism) const;
  // The enabled mechanisms in the config's order, for SaslHandshake's response.
  const std::vector<std::string>& mechanisms() const { return mechanisms_; }

  // A new exchange for `mechanism`, or nullptr if it is not enabled.
  std::unique_ptr<SaslSession> Start(std::string_view mechanism) const;

 private:
  SaslAuthenticator(std::vector<std::string> mechanisms,
                    std::unique_ptr<const SaslCredentialStore> store);

  std::vector<std::string> mechanisms_;
  std::unique_ptr<const SaslCredentialStore> store_;
};

// The client side, for this broker's own connections to the others (an inter-broker
// listener with SASL; docs/design/0019-security.md): PLAIN or SCRAM-SHA-256. First() is the
// first message to send; Next() takes each server message and gives the next one to send,
// or nullopt once the exchange is over on this side (SCRAM checks the server's signature:
// a server that does not know the password is refused). Errors say what was wrong with
// the server's message, never the password. One connection's thread.
class SaslClient {
 public:
  // InvalidArgument for a mechanism other than PLAIN and SCRAM-SHA-256, or a user name
  // that is not UTF-8 without NUL.
  static Result<std::unique_ptr<SaslClient>> Start(std::string_view mechanism, std::string user,
                                                   std::string password);
  virtual ~SaslClient() = default;
  virtual std::vector<uint8_t> First() = 0;
  virtual Result<std::optional<std::vector<uint8_t>>> Next(std::span<const uint8_t> server) = 0;
  // A SCRAM client's nonce (tests: RFC 7677's vector).
  virtual void SetNonceForTesting(std::string) {}
};

}  // namespace sluice::broker
