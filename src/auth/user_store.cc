#include "auth/user_store.h"

#include <mutex>
#include <nlohmann/json.hpp>

#include "auth/tokens.h"
#include "base/base64.h"
#include "base/utf8.h"

namespace sluice::auth {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxUsers = 100'000;
constexpr size_t kMaxNameBytes = 1024;

bool ValidName(std::string_view s) {
  return !s.empty() && s.size() <= kMaxNameBytes && s.find('\0') == std::string_view::npos &&
         IsValidUtf8(s);
}

Result<std::string> Bytes(const Json& j, const char* field, std::string_view user,
                          std::string_view mechanism, size_t min, size_t max) {
  auto it = j.find(field);
  if (it == j.end() || !it->is_string()) {
    return InvalidArgumentError("users: {} of '{}' has no \"{}\" string", mechanism, user, field);
  }
  Result<std::string> bytes = Base64Decode(it->get<std::string>());
  if (!bytes.ok() || bytes->size() < min || bytes->size() > max) {
    return InvalidArgumentError("users: \"{}\" of {} of '{}' is not base64 of {} to {} bytes",
                                field, mechanism, user, min, max);
  }
  return bytes;
}

}  // namespace

Result<UserStore::Contents> UserStore::Parse(std::string_view text) {
  Contents contents;
  Users& users = contents.users;
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return contents;
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgumentError("users: not a JSON object");
  auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != 1) {
    return InvalidArgumentError("users: \"version\" is not 1");
  }
  auto all = j.find("users");
  if (all == j.end() || !all->is_object()) {
    return InvalidArgumentError("users: no \"users\" object");
  }
  if (all->size() > kMaxUsers) return InvalidArgumentError("users: more than {} users", kMaxUsers);
  if (auto secret = j.find("token_secret"); secret != j.end()) {
    Result<std::string> bytes =
        secret->is_string() ? Base64Decode(secret->get<std::string>()) : Result<std::string>("");
    if (!bytes.ok() || bytes->size() != kTokenSecretBytes) {
      return InvalidArgumentError("users: \"token_secret\" is not base64 of {} bytes",
                                  kTokenSecretBytes);
    }
    contents.token_secret = std::move(*bytes);
  }
  for (const auto& [name, mechanisms] : all->items()) {
    if (!ValidName(name)) {
      return InvalidArgumentError("users: a user name is empty, too long or not UTF-8");
    }
    if (!mechanisms.is_object() || mechanisms.empty()) {
      return InvalidArgumentError("users: '{}' has no credentials object", name);
    }
    auto& creds = users[name];
    for (const auto& [mname, c] : mechanisms.items()) {
      std::optional<ScramMechanism> m = MechanismFromName(mname);
      if (!m.has_value()) {
        return InvalidArgumentError("users: '{}' has an unknown mechanism '{}'", name,
                                    mname.substr(0, 32));
      }
      if (!c.is_object())
        return InvalidArgumentError("users: {} of '{}' is not an object", mname, name);
      ScramCredential cred;
      auto it = c.find("iterations");
      if (it == c.end() || !it->is_number_integer() || it->get<int64_t>() < kMinIterations ||
          it->get<int64_t>() > kMaxIterations) {
        return InvalidArgumentError("users: {} of '{}' has no \"iterations\" from {} to {}", mname,
                                    name, kMinIterations, kMaxIterations);
      }
      cred.iterations = it->get<int>();
      const size_t digest = DigestSize(*m);
      ASSIGN_OR_RETURN(cred.salt, Bytes(c, "salt", name, mname, 1, 1024));
      ASSIGN_OR_RETURN(cred.stored_key, Bytes(c, "stored_key", name, mname, digest, digest));
      ASSIGN_OR_RETURN(cred.server_key, Bytes(c, "server_key", name, mname, digest, digest));
      creds[*m] = std::move(cred);
    }
  }
  return contents;
}

std::string UserStore::Serialize(const Users& users, const std::string& token_secret) {
  Json all = Json::object();
  for (const auto& [name, creds] : users) {
    Json mechanisms = Json::object();
    for (const auto& [m, c] : creds) {
      mechanisms[std::string(MechanismName(m))] = Json{{"salt", Base64Encode(c.salt)},
                                                       {"iterations", c.iterations},
                                                       {"stored_key", Base64Encode(c.stored_key)},
                                                       {"server_key", Base64Encode(c.server_key)}};
    }
    all[name] = std::move(mechanisms);
  }
  Json j{{"version", 1}, {"users", std::move(all)}};
  if (!token_secret.empty()) j["token_secret"] = Base64Encode(token_secret);
  return j.dump(1) + "\n";
}

Result<std::unique_ptr<UserStore>> UserStore::Load(std::string_view json, Persist persist) {
  ASSIGN_OR_RETURN(Contents contents, Parse(json));
  return std::unique_ptr<UserStore>(new UserStore(std::move(contents), std::move(persist)));
}

std::optional<ScramCredential> UserStore::Find(std::string_view user, ScramMechanism m) const {
  std::shared_lock lock(mu_);
  auto u = users_.find(user);
  if (u == users_.end()) return std::nullopt;
  auto c = u->second.find(m);
  if (c == u->second.end()) return std::nullopt;
  return c->second;
}

bool UserStore::Exists(std::string_view user) const {
  std::shared_lock lock(mu_);
  return users_.find(user) != users_.end();
}

bool UserStore::empty() const {
  std::shared_lock lock(mu_);
  return users_.empty();
}

bool UserStore::VerifyPassword(std::string_view user, std::string_view password) const {
  std::optional<ScramCredential> c = Find(user, ScramMechanism::kSha256);
  ScramMechanism m = ScramMechanism::kSha256;
  if (!c.has_value()) {
    c = Find(user, ScramMechanism::kSha512);
    m = ScramMechanism::kSha512;
  }
  if (!c.has_value()) {
    // The same work as for a real user, then a failure.
    static const ScramCredential kNobody = [] {
      ScramCredential n;
      n.salt = RandomBytes(kSaltBytes);
      n.iterations = kMinIterations;
      n.stored_key = RandomBytes(32);
      return n;
    }();
    (void)PasswordMatches(ScramMechanism::kSha256, kNobody, password);
    return false;
  }
  return PasswordMatches(m, *c, password);
}

std::vector<UserInfo> UserStore::List() const {
  std::shared_lock lock(mu_);
  std::vector<UserInfo> out;
  for (const auto& [name, creds] : users_) {
    UserInfo info{name, {}};
    for (const auto& [m, c] : creds) info.credentials.emplace_back(m, c.iterations);
    out.push_back(std::move(info));
  }
  return out;
}

Status UserStore::Apply(const std::vector<UserChange>& changes) {
  std::lock_guard write(write_mu_);
  Users next;
  std::string secret;
  {
    std::shared_lock lock(mu_);
    next = users_;
    secret = token_secret_;
  }
  for (const UserChange& ch : changes) {
    if (!ValidName(ch.user)) {
      return InvalidArgumentError("a user name must be 1 to {} bytes of UTF-8 without NUL",
                                  kMaxNameBytes);
    }
    if (ch.credential.has_value()) {
      const ScramCredential& c = *ch.credential;
      if (c.iterations < kMinIterations || c.iterations > kMaxIterations) {
        return InvalidArgumentError("{} iterations {} for '{}' are outside {} to {}",
                                    MechanismName(ch.mechanism), c.iterations, ch.user,
                                    kMinIterations, kMaxIterations);
      }
      if (c.salt.empty() || c.stored_key.size() != DigestSize(ch.mechanism) ||
          c.server_key.size() != DigestSize(ch.mechanism)) {
        return InvalidArgumentError("a malformed {} credential for '{}'",
                                    MechanismName(ch.mechanism), ch.user);
      }
      if (next.size() >= kMaxUsers && next.find(ch.user) == next.end()) {
        return ResourceExhaustedError("the user store holds {} users already", kMaxUsers);
      }
      next[ch.user][ch.mechanism] = c;
    } else {
      auto u = next.find(ch.user);
      if (u == next.end() || u->second.erase(ch.mechanism) == 0) {
        return NotFoundError("user '{}' has no {} credential", ch.user,
                             MechanismName(ch.mechanism));
      }
      if (u->second.empty()) next.erase(u);
    }
  }
  if (persist_) RETURN_IF_ERROR(persist_(Serialize(next, secret)));
  std::unique_lock lock(mu_);
  users_ = std::move(next);
  ++version_;
  return Status::OK();
}

Result<bool> UserStore::Seed(std::string_view user, std::string_view password, int iterations) {
  if (Exists(user)) return false;
  std::vector<UserChange> changes;
  for (ScramMechanism m : kScramMechanisms) {
    changes.push_back({std::string(user), m, CredentialFromPassword(m, password, iterations)});
  }
  RETURN_IF_ERROR(Apply(changes));
  return true;
}

Status UserStore::Replace(std::string_view json) {
  ASSIGN_OR_RETURN(Contents contents, Parse(json));
  std::lock_guard write(write_mu_);
  std::unique_lock lock(mu_);
  users_ = std::move(contents.users);
  token_secret_ = std::move(contents.token_secret);
  ++version_;
  return Status::OK();
}

std::optional<std::string> UserStore::FindTokenSecret() const {
  std::shared_lock lock(mu_);
  if (token_secret_.empty()) return std::nullopt;
  return token_secret_;
}

Result<std::string> UserStore::TokenSecret() {
  if (std::optional<std::string> s = FindTokenSecret()) return std::move(*s);
  std::lock_guard write(write_mu_);
  Users users;
  {
    std::shared_lock lock(mu_);
    if (!token_secret_.empty()) return token_secret_;  // made while this call waited
    users = users_;
  }
  std::string secret = RandomBytes(kTokenSecretBytes);
  if (secret.size() != kTokenSecretBytes) return InternalError("no randomness for a token secret");
  if (persist_) RETURN_IF_ERROR(persist_(Serialize(users, secret)));
  std::unique_lock lock(mu_);
  token_secret_ = secret;
  ++version_;
  return secret;
}

std::string UserStore::ToJson() const {
  std::shared_lock lock(mu_);
  return Serialize(users_, token_secret_);
}

uint64_t UserStore::version() const {
  std::shared_lock lock(mu_);
  return version_;
}

}  // namespace sluice::auth
