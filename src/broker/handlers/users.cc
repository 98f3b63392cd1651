// Users: DescribeUserScramCredentials (from the user store, on the shard) and
// AlterUserScramCredentials (on the controller's thread: a change is written durably
// before it is answered). docs/design/0019-security.md, phase D; Kafka's behaviour and
// messages (ScramControlManager).
#include <fmt/format.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "auth/scram.h"
#include "auth/user_store.h"
#include "broker/handlers/handlers.h"
#include "broker/sasl.h"

namespace sluice::broker::handlers {
namespace {

using kafka::ErrorCode;

}  // namespace

void HandleDescribeUserScramCredentials(Context& ctx, const Call& call,
                                        const kafka::DescribeUserScramCredentialsRequest& req) {
  const auth::UserStore& store = *ctx.users;
  kafka::DescribeUserScramCredentialsResponse resp;
  if (!AccessOf(ctx, call).CheckCluster(auth::AclOperation::kDescribe)) {
    resp.error_code = ErrorCode::kClusterAuthorizationFailed;
    resp.error_message = kClusterDenied;
    return Reply(call.conn, call.header, resp);
  }
  auto describe = [&](const std::string& name) {
    kafka::DescribeUserScramCredentialsResponse::Result r;
    r.user = name;
    for (auth::ScramMechanism m : auth::kScramMechanisms) {
      if (std::optional<auth::ScramCredential> c = store.Find(name, m)) {
        r.credential_infos.push_back({static_cast<int8_t>(m), c->iterations});
      }
    }
    if (r.credential_infos.empty()) {
      r.error_code = ErrorCode::kResourceNotFound;
      r.error_message = "Attempt to describe a user credential that does not exist";
    }
    return r;
  };
  if (!req.users.has_value() || req.users->empty()) {
    for (const auth::UserInfo& u : store.List()) resp.results.push_back(describe(u.name));
  } else {
    std::map<std::string, int> seen;
    for (const auto& u : *req.users) ++seen[u.name];
    std::set<std::string> answered;
    for (const auto& u : *req.users) {
      if (!answered.insert(u.name).second) continue;
      if (seen[u.name] > 1) {
        kafka::DescribeUserScramCredentialsResponse::Result r;
        r.user = u.name;
        r.error_code = ErrorCode::kDuplicateResource;
        r.error_message =
            "Cannot describe SCRAM credentials for the same user twice in a single "
            "request";
        resp.results.push_back(std::move(r));
      } else {
        resp.results.push_back(describe(u.name));
      }
    }
  }
  Reply(call.conn, call.header, resp);
}

void HandleAlterUserScramCredentials(Context& ctx, const Call& call,
                                     const kafka::AlterUserScramCredentialsRequest& req) {
  if (!AccessOf(ctx, call).CheckCluster(auth::AclOperation::kAlter)) {
    // Kafka: every user named, once, refused.
    kafka::AlterUserScramCredentialsResponse resp;
    std::set<std::string> named;
    for (const auto& d : req.deletions) named.insert(d.name);
    for (const auto& u : req.upsertions) named.insert(u.name);
    for (const std::string& n : named) {
      resp.results.push_back({n, ErrorCode::kClusterAuthorizationFailed, kClusterDenied, {}});
    }
    return Reply(call.conn, call.header, resp);
  }
  ToController(ctx, call, [&ctx, req] {
    auth::UserStore& store = *ctx.users;
    // Per user: its first error, else its changes.
    struct Outcome {
      ErrorCode error = ErrorCode::kNone;
      std::string message;
      std::vector<auth::UserChange> changes;
    };
    std::map<std::string, Outcome> outcomes;
    std::vector<std::string> order;
    auto fail = [](Outcome& o, ErrorCode e, std::string message) {
      if (o.error != ErrorCode::kNone) return;
      o.error = e;
      o.message = std::move(message);
    };
    auto outcome = [&](const std::string& name) -> Outcome& {
      auto [it, added] = outcomes.try_emplace(name);
      if (added) order.push_back(name);
      return it->second;
    };
    // A credential named twice in one request, as deletion or upsertion, is refused for its
    // user before anything else (Kafka checks the whole request first).
    std::map<std::pair<std::string, int8_t>, int> mentions;
    for (const auto& d : req.deletions) ++mentions[{d.name, d.mechanism}];
    for (const auto& u : req.upsertions) ++mentions[{u.name, u.mechanism}];
    auto check_common = [&](Outcome& o, const std::string& name,
                            int8_t code) -> std::optional<auth::ScramMechanism> {
      if (mentions[{name, code}] > 1) {
        fail(o, ErrorCode::kDuplicateResource,
             "A user credential cannot be altered twice in the same request");
      }
      if (name.empty()) fail(o, ErrorCode::kUnacceptableCredential, "Username must not be empty");
      if (IsInternalUserName(name)) {
        fail(o, ErrorCode::kUnacceptableCredential,
             fmt::format("Username {} is reserved for sluice's own clients", kInternalUser));
      }
      std::optional<auth::ScramMechanism> m = auth::MechanismFromKafka(code);
      if (!m.has_value()) fail(o, ErrorCode::kUnsupportedSaslMechanism, "Unknown SCRAM mechanism");
      return m;
    };
    for (const auto& d : req.deletions) {
      Outcome& o = outcome(d.name);
      std::optional<auth::ScramMechanism> m = check_common(o, d.name, d.mechanism);
      if (!m.has_value()) continue;
      if (!store.Find(d.name, *m).has_value()) {
        fail(o, ErrorCode::kResourceNotFound,
             "Attempt to delete a user credential that does not exist");
        continue;
      }
      o.changes.push_back({d.name, *m, std::nullopt});
    }
    for (const auto& u : req.upsertions) {
      Outcome& o = outcome(u.name);
      std::optional<auth::ScramMechanism> m = check_common(o, u.name, u.mechanism);
      if (!m.has_value()) continue;
      if (u.iterations < auth::kMinIterations) {
        fail(o, ErrorCode::kUnacceptableCredential, "Too few iterations");
      } else if (u.iterations > auth::kMaxIterations) {
        fail(o, ErrorCode::kUnacceptableCredential, "Too many iterations");
      } else if (u.salt.empty() || u.salt.size() > 1024) {
        fail(o, ErrorCode::kUnacceptableCredential, "The salt must be 1 to 1024 bytes");
      } else if (u.salted_password.size() != auth::DigestSize(*m)) {
        fail(o, ErrorCode::kUnacceptableCredential,
             fmt::format("A {} salted password is {} bytes", auth::MechanismName(*m),
                         auth::DigestSize(*m)));
      } else {
        const std::string_view salted(reinterpret_cast<const char*>(u.salted_password.data()),
                                      u.salted_password.size());
        o.changes.push_back(
            {u.name, *m,
             auth::CredentialFromSalted(*m, std::string(u.salt.begin(), u.salt.end()), u.iterations,
                                        salted)});
      }
    }
    // Every user without an error, in one durable write.
    std::vector<auth::UserChange> all;
    for (const std::string& name : order) {
      const Outcome& o = outcomes[name];
      if (o.error == ErrorCode::kNone) all.insert(all.end(), o.changes.begin(), o.changes.end());
    }
    Status applied = all.empty() ? Status::OK() : store.Apply(all);
    kafka::AlterUserScramCredentialsResponse resp;
    for (const std::string& name : order) {
      const Outcome& o = outcomes[name];
      kafka::AlterUserScramCredentialsResponse::Result r;
      r.user = name;
      if (o.error != ErrorCode::kNone) {
        r.error_code = o.error;
        r.error_message = o.message;
      } else if (!applied.ok()) {
        r.error_code = applied.code() == StatusCode::kInvalidArgument
                           ? ErrorCode::kUnacceptableCredential
                           : ErrorCode::kUnknownServerError;
        r.error_message = applied.message();
      }
      resp.results.push_back(std::move(r));
    }
    return resp;
  });
}

}  // namespace sluice::broker::handlers
