// Client quotas (docs/design/0019-security.md, phase F), with Kafka's entities, keys and
// precedence: produce and fetch byte rates and the request percentage, per user, per
// client id, per (user, client id), each with a <default>.
//
// QuotaSet: the configured quotas (an immutable snapshot), kept as JSON in
// <data-dir>/meta/quotas.json or etcd's `quotas` key; QuotaStore: the set behind
// AlterClientQuotas, changed as the ACLs are (persisted before visible); ClientQuotas:
// what each request records against the quota that applies to it, answering how long its
// connection is throttled.
//
// Threads: QuotaSet immutable; QuotaStore and ClientQuotas thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace sluice::broker {

// Kafka's quota keys (QuotaConfigs).
inline constexpr std::string_view kProducerByteRate = "producer_byte_rate";
inline constexpr std::string_view kConsumerByteRate = "consumer_byte_rate";
inline constexpr std::string_view kRequestPercentage = "request_percentage";

// An entity: a user, a client id, or both; each either named or the <default> (nullopt
// inside). An absent outer optional: the entity has no such part.
struct QuotaEntity {
  std::optional<std::optional<std::string>> user;
  std::optional<std::optional<std::string>> client_id;
  auto operator<=>(const QuotaEntity&) const = default;
  bool operator==(const QuotaEntity&) const = default;
};

// From the wire's (entity type, name or null) pairs: "user" and "client-id", each at most
// once, alone or together (Kafka's combinations; "ip" entities are refused: sluice has no
// connection-rate quota). InvalidArgument with Kafka's words otherwise.
Result<QuotaEntity> QuotaEntityFrom(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& parts);
// The wire's pairs for an entity ("user" first).
std::vector<std::pair<std::string, std::optional<std::string>>> QuotaEntityParts(
    const QuotaEntity& e);

using QuotaValues = std::map<std::string, double, std::less<>>;

// One DescribeClientQuotas filter component. match_type: 0 the exact name `match`, 1 the
// <default>, 2 any name (named or default).
struct QuotaFilterComponent {
  std::string entity_type;
  int8_t match_type = 0;
  std::optional<std::string> match;
};

class QuotaSet {
 public:
  QuotaSet() = default;
  explicit QuotaSet(std::map<QuotaEntity, QuotaValues> entries) : entries_(std::move(entries)) {}

  const std::map<QuotaEntity, QuotaValues>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

  // The entries a DescribeClientQuotas filter selects (strict: the entity has no other
  // parts), or InvalidArgument for a malformed filter (Kafka's messages).
  Result<std::vector<std::pair<QuotaEntity, QuotaValues>>> Describe(
      const std::vector<QuotaFilterComponent>& components, bool strict) const;

  // The quota `key` that applies to (user, client id) by Kafka's precedence, most specific
  // first: user+client, user+<default> client, user, <default> user+client, <default>
  // user+<default> client, <default> user, client, <default> client. `bucket` gets the
  // entity the quota is shared by (the defaults replaced by the actual names).
  std::optional<double> Resolve(std::string_view key, const std::string& user,
                                const std::string& client_id, QuotaEntity* bucket) const;

  std::string ToJson() const;
  static Result<QuotaSet> FromJson(std::string_view json);

 private:
  std::map<QuotaEntity, QuotaValues> entries_;
};

// One AlterClientQuotas entry.
struct QuotaAlteration {
  QuotaEntity entity;
  struct Op {
    std::string key;
    double value = 0;
    bool remove = false;
  };
  std::vector<Op> ops;
};

// Whether `key` may be set to `value` on `entity` (Kafka's checks: a known key, byte rates
// whole numbers; and here every value above zero). InvalidArgument otherwise.
Status ValidateQuota(std::string_view key, double value);
// Whether `key` is a quota key (what a removal needs).
Status ValidateQuotaKey(std::string_view key);

class QuotaStore {
 public:
  using Persist = std::function<Status(const std::string& json)>;

  static Result<std::unique_ptr<QuotaStore>> Load(std::string_view json, Persist persist);

  std::shared_ptr<const QuotaSet> Current() const;
  // True when some quota is set (cheap: no lock).
  bool any() const { return any_.load(std::memory_order_acquire); }

  // AlterClientQuotas: each entry checked alone (its error for it alone); the valid ones
  // applied in one persisted change unless validate_only. One status per entry.
  std::vector<Status> Alter(const std::vector<QuotaAlteration>& entries, bool validate_only);

  Status Replace(std::string_view json);

 private:
  QuotaStore(std::shared_ptr<const QuotaSet> set, Persist persist);
  void Set(std::shared_ptr<const QuotaSet> set);

  mutable std::mutex mu_;
  std::shared_ptr<const QuotaSet> set_;  // guarded by mu_
  std::atomic<bool> any_{false};
  std::mutex write_mu_;  // one change at a time, persist included
  const Persist persist_;
};

// What requests record against their quotas. A quota is a token bucket: it fills at the
// quota's rate up to one second's worth, each request takes what it used (and may take it
// below zero); below zero, the connection waits until the bucket is back at zero. So over
// any period T a client gets at most rate × (T + 1 s) plus one request. (Kafka's sampled
// window lets a new client through with ten seconds' worth at once; a bucket does not.)
class ClientQuotas {
 public:
  enum class Kind { kProduce, kFetch, kRequest };
  // The longest one mute lasts (a deeper debt throttles the next requests too). Kafka
  // does not bound it; five minutes keeps a mistaken quota from holding a connection for
  // hours.
  static constexpr int64_t kMaxThrottleMs = 300'000;

  ClientQuotas(std::shared_ptr<QuotaStore> store, Clock* clock = Clock::Real());

  // Records `amount` (bytes; for kRequest, milliseconds of a thread's time) used by
  // (user, client id) and returns how long its connection waits before its next request
  // (0: within its quota, or no quota applies).
  int64_t Record(Kind kind, const std::string& user, const std::string& client_id, double amount);
  // The throttle the debt of (user, client id) calls for now, without recording, and the
  // quota's rate per second (0: no quota applies).
  struct Quote {
    int64_t throttle_ms = 0;
    double rate = 0;
  };
  Quote Check(Kind kind, const std::string& user, const std::string& client_id);
  bool active() const { return store_->any(); }
  QuotaStore& store() const { return *store_; }

 private:
  struct Bucket {
    double tokens = 0;
    double rate = 0;  // per second
    int64_t last_ms = 0;
  };
  // Takes `amount` from the bucket of (kind, user, client id); the quote after.
  Quote Take(Kind kind, const std::string& user, const std::string& client_id, double amount);
  const std::shared_ptr<QuotaStore> store_;
  Clock* const clock_;
  std::mutex mu_;
  std::map<std::tuple<Kind, QuotaEntity>, Bucket> buckets_;  // guarded by mu_
  int64_t last_sweep_ms_ = 0;                                // guarded by mu_
};

}  // namespace sluice::broker
