// UserStore: the users every port authenticates against (docs/design/0019-security.md,
// phase D): Kafka SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), the query server (SCRAM-SHA-256
// or a cleartext password) and the HTTP port. It keeps SCRAM credentials, never passwords:
// a PLAIN or cleartext login is checked by deriving the credential again.
//
// Where it lives is the owner's: each change calls `persist` with the whole store as JSON
// (a file written durably on a single node, etcd in a cluster) before it is visible, and a
// store changed elsewhere (another broker, through etcd) is loaded with Replace.
//
//   ASSIGN_OR_RETURN(auto store, UserStore::Load(json_or_empty, persist));
//   store->Seed("alice", "secret", 4096);            // sasl.users / query.users at start
//   if (store->VerifyPassword("alice", pw)) ...       // PLAIN
//   auto c = store->Find("alice", ScramMechanism::kSha256);  // SCRAM
//
// It also keeps the secret the HTTP port's bearer tokens are signed with (auth/tokens.h):
// with the users, so that every broker of a cluster (one etcd document) and a restarted
// one verify the same tokens. The secret is never listed, logged or put in an error.
//
// Threads: every method may be called from any thread; reads take a shared lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "auth/scram.h"
#include "base/status.h"

namespace sluice::auth {

struct UserInfo {
  std::string name;
  std::vector<std::pair<ScramMechanism, int>> credentials;  // mechanism, iterations
};

// One change of AlterUserScramCredentials: a credential set, or (nullopt) removed.
struct UserChange {
  std::string user;
  ScramMechanism mechanism = ScramMechanism::kSha256;
  std::optional<ScramCredential> credential;
};

class UserStore {
 public:
  using Persist = std::function<Status(const std::string& json)>;

  // From the JSON `Persist` wrote ("" or whitespace: empty). Malformed JSON is an error
  // naming what is wrong (never a credential's bytes). `persist` null: kept in memory.
  static Result<std::unique_ptr<UserStore>> Load(std::string_view json, Persist persist);

  // The credential of `user` for `m`, if it has one.
  std::optional<ScramCredential> Find(std::string_view user, ScramMechanism m) const;
  bool Exists(std::string_view user) const;
  bool empty() const;
  // Whether `password` is `user`'s (checked against its SHA-256 credential, else its
  // SHA-512 one). An unknown user takes the same work and fails.
  bool VerifyPassword(std::string_view user, std::string_view password) const;
  std::vector<UserInfo> List() const;  // by name

  // Applies `changes` at once (all or none), persisted before they are visible. A removal
  // of a credential the user does not have is NotFound; a user whose last credential goes
  // is gone.
  Status Apply(const std::vector<UserChange>& changes);
  // Adds `user` with `password` (both mechanisms, `iterations`) unless it exists: the
  // config's users seed the store, they do not overwrite a password changed since.
  // Returns whether it was added.
  Result<bool> Seed(std::string_view user, std::string_view password, int iterations);
  // Replaces everything with `json` (a change made elsewhere), without persisting it.
  Status Replace(std::string_view json);
  // The secret tokens are signed with, if one was made (by any broker).
  std::optional<std::string> FindTokenSecret() const;
  // The secret tokens are signed with: 32 random bytes made and persisted on the first
  // call (a failed persist is returned, and nothing changes; in a cluster another broker
  // may have made one meanwhile: FailedPrecondition, and that one arrives with Replace).
  Result<std::string> TokenSecret();
  // The whole store as Persist gets it.
  std::string ToJson() const;
  // Bumped by every change; readers that cache can compare.
  uint64_t version() const;

 private:
  using Users = std::map<std::string, std::map<ScramMechanism, ScramCredential>, std::less<>>;
  struct Contents {
    Users users;
    std::string token_secret;  // empty: none yet
  };
  UserStore(Contents contents, Persist persist)
      : users_(std::move(contents.users)),
        token_secret_(std::move(contents.token_secret)),
        persist_(std::move(persist)) {}
  static Result<Contents> Parse(std::string_view json);
  static std::string Serialize(const Users& users, const std::string& token_secret);

  mutable std::shared_mutex mu_;
  Users users_;               // guarded by mu_
  std::string token_secret_;  // guarded by mu_
  uint64_t version_ = 1;
  std::mutex write_mu_;  // one change at a time, persist included
  const Persist persist_;
};

}  // namespace sluice::auth
