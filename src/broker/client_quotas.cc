#include "broker/client_quotas.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace sluice::broker {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kUser = "user";
constexpr std::string_view kClientId = "client-id";

bool IsByteRate(std::string_view key) {
  return key == kProducerByteRate || key == kConsumerByteRate;
}

// An entity part as the wire and the JSON name it: the name, or null for <default>.
Json PartJson(const std::optional<std::string>& name) {
  return name.has_value() ? Json(*name) : Json(nullptr);
}

}  // namespace

Result<QuotaEntity> QuotaEntityFrom(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& parts) {
  QuotaEntity e;
  if (parts.empty()) return InvalidArgumentError("Invalid empty client quota entity");
  for (const auto& [type, name] : parts) {
    std::optional<std::optional<std::string>>* slot = nullptr;
    if (type == kUser) {
      slot = &e.user;
    } else if (type == kClientId) {
      slot = &e.client_id;
    } else if (type == "ip") {
      return InvalidArgumentError(
          "ip quotas (connection_creation_rate) are not supported: quotas are per user and "
          "client id");
    } else {
      return InvalidArgumentError("Unhandled client quota entity type: {}", type.substr(0, 64));
    }
    if (slot->has_value()) {
      return InvalidArgumentError("Duplicate {} entity type in client quota entity", type);
    }
    if (name.has_value() && name->empty()) {
      return InvalidArgumentError("Empty {} name in client quota entity (null is the default)",
                                  type);
    }
    *slot = name;
  }
  return e;
}

std::vector<std::pair<std::string, std::optional<std::string>>> QuotaEntityParts(
    const QuotaEntity& e) {
  std::vector<std::pair<std::string, std::optional<std::string>>> out;
  if (e.user.has_value()) out.emplace_back(std::string(kUser), *e.user);
  if (e.client_id.has_value()) out.emplace_back(std::string(kClientId), *e.client_id);
  return out;
}

Status ValidateQuotaKey(std::string_view key) {
  if (key != kProducerByteRate && key != kConsumerByteRate && key != kRequestPercentage) {
    if (key == "controller_mutation_rate") {
      return InvalidArgumentError(
          "controller_mutation_rate is not supported: sluice throttles produce and fetch bytes "
          "and request time");
    }
    return InvalidArgumentError("Invalid configuration key {}", key.substr(0, 128));
  }
  return Status::OK();
}

Status ValidateQuota(std::string_view key, double value) {
  RETURN_IF_ERROR(ValidateQuotaKey(key));
  if (!std::isfinite(value) || value <= 0) {
    return InvalidArgumentError("Invalid value {} for {}: it must be above zero", value, key);
  }
  if (IsByteRate(key) && (value != std::floor(value) || value > 9.2e18)) {
    return InvalidArgumentError("Invalid value {} for {}: it must be a whole number", value, key);
  }
  return Status::OK();
}

Result<std::vector<std::pair<QuotaEntity, QuotaValues>>> QuotaSet::Describe(
    const std::vector<QuotaFilterComponent>& components, bool strict) const {
  std::set<std::string> types;
  for (const QuotaFilterComponent& c : components) {
    if (c.entity_type != kUser && c.entity_type != kClientId && c.entity_type != "ip") {
      return InvalidArgumentError("Custom entity type '{}' not supported",
                                  c.entity_type.substr(0, 64));
    }
    if (!types.insert(c.entity_type).second) {
      return InvalidArgumentError("Entity type {} cannot appear more than once in the filter",
                                  c.entity_type);
    }
    if (c.match_type < 0 || c.match_type > 2) {
      return InvalidArgumentError("Unknown match type {}", c.match_type);
    }
    if (c.match_type == 0 && !c.match.has_value()) {
      return InvalidArgumentError("An exact match for {} needs a name", c.entity_type);
    }
    if (c.match_type != 0 && c.match.has_value()) {
      return InvalidArgumentError(
          "Request specified MATCH_TYPE_{}, but also specified a match string",
          c.match_type == 1 ? "DEFAULT" : "SPECIFIED");
    }
  }
  if (types.count("ip") != 0 && types.size() > 1) {
    return InvalidArgumentError("Invalid entity filter component combination: ip and {}",
                                types.count(std::string(kUser)) != 0 ? kUser : kClientId);
  }
  std::vector<std::pair<QuotaEntity, QuotaValues>> out;
  for (const auto& [entity, values] : entries_) {
    bool keep = true;
    for (const QuotaFilterComponent& c : components) {
      const auto& part = c.entity_type == kUser       ? entity.user
                         : c.entity_type == kClientId ? entity.client_id
                                                      : std::optional<std::optional<std::string>>();
      if (!part.has_value()) {
        keep = false;
      } else if (c.match_type == 0) {
        keep = *part == c.match;
      } else if (c.match_type == 1) {
        keep = !part->has_value();
      }
      if (!keep) break;
    }
    if (keep && strict) {
      keep = (!entity.user.has_value() || types.count(std::string(kUser)) != 0) &&
             (!entity.client_id.has_value() || types.count(std::string(kClientId)) != 0);
    }
    if (keep) out.emplace_back(entity, values);
  }
  return out;
}

std::optional<double> QuotaSet::Resolve(std::string_view key, const std::string& user,
                                        const std::string& client_id, QuotaEntity* bucket) const {
  if (entries_.empty()) return std::nullopt;
  using Part = std::optional<std::optional<std::string>>;
  const std::optional<std::string> kDefault;
  // Kafka's order (ClientQuotaManager's quota precedence).
  const std::pair<Part, Part> order[] = {
      {Part(user), Part(client_id)},     {Part(user), Part(kDefault)},     {Part(user), Part()},
      {Part(kDefault), Part(client_id)}, {Part(kDefault), Part(kDefault)}, {Part(kDefault), Part()},
      {Part(), Part(client_id)},         {Part(), Part(kDefault)},
  };
  for (const auto& [u, c] : order) {
    QuotaEntity e{u, c};
    auto found = entries_.find(e);
    if (found == entries_.end()) continue;
    auto value = found->second.find(key);
    if (value == found->second.end()) continue;
    // The bucket: the same entity with the actual names (a default is per user or client).
    if (bucket != nullptr) {
      bucket->user = u.has_value() ? Part(user) : Part();
      bucket->client_id = c.has_value() ? Part(client_id) : Part();
    }
    return value->second;
  }
  return std::nullopt;
}

std::string QuotaSet::ToJson() const {
  Json quotas = Json::array();
  for (const auto& [entity, values] : entries_) {
    Json entry = Json::object();
    if (entity.user.has_value()) entry["user"] = PartJson(*entity.user);
    if (entity.client_id.has_value()) entry["client-id"] = PartJson(*entity.client_id);
    Json v = Json::object();
    for (const auto& [k, x] : values) v[k] = x;
    entry["values"] = std::move(v);
    quotas.push_back(std::move(entry));
  }
  return Json{{"version", 1}, {"quotas", std::move(quotas)}}.dump(1) + "\n";
}

Result<QuotaSet> QuotaSet::FromJson(std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return QuotaSet();
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgumentError("quotas: not a JSON object");
  auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != 1) {
    return InvalidArgumentError("quotas: \"version\" is not 1");
  }
  auto all = j.find("quotas");
  if (all == j.end() || !all->is_array()) {
    return InvalidArgumentError("quotas: no \"quotas\" array");
  }
  std::map<QuotaEntity, QuotaValues> entries;
  for (size_t i = 0; i < all->size(); ++i) {
    const Json& e = (*all)[i];
    if (!e.is_object()) return InvalidArgumentError("quotas: entry {} is not an object", i);
    std::vector<std::pair<std::string, std::optional<std::string>>> parts;
    for (std::string_view type : {kUser, kClientId}) {
      auto it = e.find(std::string(type));
      if (it == e.end()) continue;
      if (!it->is_null() && !it->is_string()) {
        return InvalidArgumentError("quotas: entry {}: \"{}\" is not a string or null", i, type);
      }
      parts.emplace_back(std::string(type),
                         it->is_null() ? std::optional<std::string>() : it->get<std::string>());
    }
    auto entity = QuotaEntityFrom(parts);
    if (!entity.ok()) {
      return InvalidArgumentError("quotas: entry {}: {}", i, entity.status().message());
    }
    auto values = e.find("values");
    if (values == e.end() || !values->is_object() || values->empty()) {
      return InvalidArgumentError("quotas: entry {} has no \"values\"", i);
    }
    QuotaValues v;
    for (auto it = values->begin(); it != values->end(); ++it) {
      if (!it.value().is_number()) {
        return InvalidArgumentError("quotas: entry {}: \"{}\" is not a number", i, it.key());
      }
      const double x = it.value().get<double>();
      if (Status st = ValidateQuota(it.key(), x); !st.ok()) {
        return InvalidArgumentError("quotas: entry {}: {}", i, st.message());
      }
      v[it.key()] = x;
    }
    if (!entries.emplace(*entity, std::move(v)).second) {
      return InvalidArgumentError("quotas: entry {} repeats an entity", i);
    }
  }
  return QuotaSet(std::move(entries));
}

QuotaStore::QuotaStore(std::shared_ptr<const QuotaSet> set, Persist persist)
    : persist_(std::move(persist)) {
  Set(std::move(set));
}

Result<std::unique_ptr<QuotaStore>> QuotaStore::Load(std::string_view json, Persist persist) {
  ASSIGN_OR_RETURN(QuotaSet set, QuotaSet::FromJson(json));
  return std::unique_ptr<QuotaStore>(
      new QuotaStore(std::make_shared<const QuotaSet>(std::move(set)), std::move(persist)));
}

std::shared_ptr<const QuotaSet> QuotaStore::Current() const {
  std::lock_guard lock(mu_);
  return set_;
}

void QuotaStore::Set(std::shared_ptr<const QuotaSet> set) {
  std::lock_guard lock(mu_);
  any_.store(!set->empty(), std::memory_order_release);
  set_ = std::move(set);
}

std::vector<Status> QuotaStore::Alter(const std::vector<QuotaAlteration>& entries,
                                      bool validate_only) {
  std::lock_guard write(write_mu_);
  std::map<QuotaEntity, QuotaValues> next = Current()->entries();
  std::vector<Status> out;
  bool any = false;
  std::set<QuotaEntity> seen;
  for (const QuotaAlteration& a : entries) {
    Status st;
    if (!seen.insert(a.entity).second) {
      st = InvalidArgumentError("an entity appears more than once in the request");
    }
    std::set<std::string> keys;
    for (const QuotaAlteration::Op& op : a.ops) {
      if (!st.ok()) break;
      if (!keys.insert(op.key).second) {
        st = InvalidArgumentError("Duplicate quota key {}", op.key.substr(0, 128));
      } else if (op.remove) {
        st = ValidateQuotaKey(op.key);
      } else {
        st = ValidateQuota(op.key, op.value);
      }
    }
    out.push_back(st);
    if (!st.ok() || validate_only) continue;
    QuotaValues& values = next[a.entity];
    for (const QuotaAlteration::Op& op : a.ops) {
      if (op.remove) {
        values.erase(op.key);
      } else {
        values[op.key] = op.value;
      }
    }
    if (values.empty()) next.erase(a.entity);
    any = true;
  }
  if (!any) return out;
  auto set = std::make_shared<const QuotaSet>(std::move(next));
  if (persist_) {
    if (Status st = persist_(set->ToJson()); !st.ok()) {
      for (Status& s : out) {
        if (s.ok()) s = st;
      }
      return out;
    }
  }
  Set(std::move(set));
  return out;
}

Status QuotaStore::Replace(std::string_view json) {
  ASSIGN_OR_RETURN(QuotaSet set, QuotaSet::FromJson(json));
  std::lock_guard write(write_mu_);
  Set(std::make_shared<const QuotaSet>(std::move(set)));
  return Status::OK();
}

ClientQuotas::ClientQuotas(std::shared_ptr<QuotaStore> store, Clock* clock)
    : store_(std::move(store)), clock_(clock) {}

int64_t ClientQuotas::Record(Kind kind, const std::string& user, const std::string& client_id,
                             double amount) {
  return Take(kind, user, client_id, amount).throttle_ms;
}

ClientQuotas::Quote ClientQuotas::Check(Kind kind, const std::string& user,
                                        const std::string& client_id) {
  return Take(kind, user, client_id, 0);
}

ClientQuotas::Quote ClientQuotas::Take(Kind kind, const std::string& user,
                                       const std::string& client_id, double amount) {
  if (!store_->any()) return {};
  const std::string_view key = kind == Kind::kProduce ? kProducerByteRate
                               : kind == Kind::kFetch ? kConsumerByteRate
                                                      : kRequestPercentage;
  QuotaEntity entity;
  const std::optional<double> quota = store_->Current()->Resolve(key, user, client_id, &entity);
  if (!quota.has_value()) return {};
  // A request percentage is of one thread: 100 is one thread's whole second, in ms.
  const double rate = kind == Kind::kRequest ? *quota * 10.0 : *quota;
  const int64_t now = clock_->NowMillis();
  std::lock_guard lock(mu_);
  if (now - last_sweep_ms_ > 60'000) {
    // Buckets full again (whatever debt they had is paid) are as good as new: forget them.
    std::erase_if(buckets_, [&](const auto& b) {
      const Bucket& x = b.second;
      return x.tokens + static_cast<double>(now - x.last_ms) / 1000.0 * x.rate >= x.rate;
    });
    last_sweep_ms_ = now;
  }
  auto [it, fresh] = buckets_.try_emplace({kind, entity});
  Bucket& b = it->second;
  if (fresh) {
    b.tokens = rate;  // one second's worth
    b.last_ms = now;
  }
  b.rate = rate;
  const double elapsed_s = static_cast<double>(std::max<int64_t>(0, now - b.last_ms)) / 1000.0;
  b.tokens = std::min(rate, b.tokens + elapsed_s * rate);
  b.last_ms = now;
  b.tokens -= amount;
  Quote q;
  q.rate = *quota;
  if (b.tokens >= 0) return q;
  // Clamped before the cast: a tiny rate makes the wait overflow any integer.
  const double wait_ms = std::min(-b.tokens / rate * 1000.0, static_cast<double>(kMaxThrottleMs));
  q.throttle_ms = static_cast<int64_t>(std::ceil(wait_ms));
  return q;
}

}  // namespace sluice::broker
