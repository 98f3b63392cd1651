// What every request handler works with: the Context (the broker's parts a handler may
// use), the Call (one request being served) and the helpers that answer it, now or from
// the metadata controller's thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "broker/authorizer.h"
#include "broker/broker_options.h"
#include "broker/client_quotas.h"
#include "broker/connection.h"
#include "broker/controller.h"
#include "broker/group_coordinator.h"
#include "broker/remote_reader.h"
#include "broker/sasl.h"
#include "broker/shards.h"
#include "broker/txn_markers.h"
#include "kafka/protocol/requests.h"

namespace sluice::auth {
class UserStore;
}  // namespace sluice::auth
namespace sluice::broker {
class TxnCoordinator;
}  // namespace sluice::broker

namespace sluice::broker::handlers {

// Made by the Broker at Open and alive as long as it; shared by every thread. Each
// handler runs on its connection's shard and reaches partitions only through `shards`
// (on their owners) and topics only through `controller` (on its thread).
struct Context {
  const BrokerOptions& options;
  const std::string& cluster_id;
  Shards& shards;
  Controller& controller;
  GroupCoordinator* groups = nullptr;  // thread-safe (posts to its own thread); null once closed
  SaslAuthenticator* sasl = nullptr;   // null when SASL is off; immutable
  auth::UserStore* users = nullptr;    // the user store (thread-safe); never null once open
  // Kafka's ACLs (immutable but for its thread-safe store); never null once open. Disabled
  // (authorization.enabled false), it allows everything.
  const Authorizer* authorizer = nullptr;
  // Client quotas (thread-safe); never null once open.
  ClientQuotas* quotas = nullptr;
  // Reads a cluster's ACLs and quotas again after a change lost to another broker's; null
  // on a single node.
  std::function<Status()> refresh_stores;
  // The transaction coordinator as the produce path sees it (thread-safe); null while
  // none runs: transactional batches are then refused.
  TxnVerifier* txn_verifier = nullptr;
  // The transaction coordinator (thread-safe: posts to its own thread); null while none
  // runs: its requests answer COORDINATOR_NOT_AVAILABLE.
  TxnCoordinator* txns = nullptr;
  // Reads of offsets only tiered storage holds (thread-safe); null without tiered storage.
  RemoteReader* remote_reader = nullptr;
  // A graceful stop began: fetches stop waiting (Broker::Drain).
  std::atomic<bool> draining{false};
};

// One request on its connection's shard. The references live until the handler returns:
// a handler that answers later copies what it keeps.
struct Call {
  const std::shared_ptr<Connection>& conn;
  // The whole frame: produce records are views into it, read on their owner shards.
  const std::shared_ptr<const std::vector<uint8_t>>& frame;
  const kafka::RequestHeader& header;
};

// Kafka's messages for the authorization errors (Errors.java's defaults).
inline constexpr const char* kTopicDenied = "Topic authorization failed.";
inline constexpr const char* kGroupDenied = "Group authorization failed.";
inline constexpr const char* kClusterDenied = "Cluster authorization failed.";
inline constexpr const char* kTxnIdDenied = "Transactional Id authorization failed.";

// What the call's principal may do (docs/design/0019-security.md, phase E).
inline Access AccessOf(Context& ctx, const Call& call) { return ctx.authorizer->For(*call.conn); }

// The user a connection's requests count against in client quotas: its principal's name
// ("alice" for User:alice; "ANONYMOUS" unauthenticated), as Kafka's quota entities.
inline std::string QuotaUser(Connection& conn) {
  Result<std::string> p = conn.Principal();
  if (!p.ok()) return std::string();
  const size_t colon = p->find(':');
  return colon == std::string::npos ? *p : p->substr(colon + 1);
}

template <typename Body>
void SendBody(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
              const Body& body, RequestId id = 0) {
  Response resp;
  kafka::Writer w(&resp.buffer);
  kafka::EncodeResponseHeader(w, static_cast<kafka::ApiKey>(h.api_key), h.api_version,
                              h.correlation_id);
  body.Encode(w, h.api_version);
  conn->Send(std::move(resp), id);
}

// Answers `h` on `conn` with `body` (the connection's loop): the request with the handler
// now, or the detached request `id`. A connection over a quota
// (Connection::ThrottleAfterResponse) tells the client how long in throttle_time_ms.
template <typename Body>
void Reply(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h, const Body& body,
           RequestId id = 0) {
  if constexpr (requires { body.throttle_time_ms; }) {
    const int64_t throttle = conn->pending_throttle_ms();
    if (throttle > 0 && body.throttle_time_ms < throttle) {
      Body throttled = body;
      throttled.throttle_time_ms = static_cast<int32_t>(throttle);
      return SendBody(conn, h, throttled, id);
    }
  }
  SendBody(conn, h, body, id);
}

// Runs a change to a cluster-wide store (`fn`, returning one Status, or one result with a
// `status`, per item) again while it was lost to another broker's concurrent change
// (FailedPrecondition from etcd's compare-and-swap), on the newer state.
template <typename Fn>
auto Retried(Context& ctx, Fn fn) {
  constexpr int kAttempts = 20;
  auto lost = [](const Status& st) { return st.code() == StatusCode::kFailedPrecondition; };
  for (int attempt = 1;; ++attempt) {
    auto out = fn();
    bool any_lost = false;
    for (const auto& r : out) {
      if constexpr (std::is_same_v<std::decay_t<decltype(r)>, Status>) {
        any_lost |= lost(r);
      } else {
        any_lost |= lost(r.status);
      }
    }
    if (!any_lost || attempt >= kAttempts || !ctx.refresh_stores) return out;
    if (Status st = ctx.refresh_stores(); !st.ok()) return out;
  }
}

// Runs `fn` (returning a response body) on the controller's thread and answers the call
// with it on the connection's loop.
template <typename Fn>
void ToController(Context& ctx, const Call& call, Fn fn) {
  ctx.controller.Post([&ctx, conn = call.conn, h = call.header, fn = std::move(fn)]() mutable {
    auto body = std::make_shared<decltype(fn())>(fn());
    ctx.shards.PostGated(conn->loop(), [conn, h, body] { Reply(conn, h, *body); });
  });
}

}  // namespace sluice::broker::handlers
