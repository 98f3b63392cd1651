#include "cli/quota_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/bytes.h"
#include "kafka/protocol/messages/quotas.h"

namespace sluice::cli {
namespace {

using kafka::ErrorCode;

const std::string kQuotaClientId = "sluice-quota";

int QuotaFail(const std::string& message) {
  std::fprintf(stderr, "sluice quota: %s\n", message.c_str());
  return 1;
}

// The entity the flags name, as the wire's (type, name or null) pairs.
Result<std::vector<std::pair<std::string, std::optional<std::string>>>> EntityOf(
    const QuotaFlags& f, bool needed) {
  if (f.user.has_value() && f.default_user) {
    return InvalidArgumentError("give --user or --default-user, not both");
  }
  if (f.client_id.has_value() && f.default_client_id) {
    return InvalidArgumentError("give --client-id or --default-client-id, not both");
  }
  if (f.user.has_value() && f.user->starts_with("User:")) {
    return InvalidArgumentError(
        "--user takes the user's name ('{}'), not its principal '{}' (quotas name users as "
        "Kafka's kafka-configs --entity-name does)",
        f.user->substr(5), *f.user);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> parts;
  if (f.user.has_value() || f.default_user) parts.emplace_back("user", f.user);
  if (f.client_id.has_value() || f.default_client_id) parts.emplace_back("client-id", f.client_id);
  if (needed && parts.empty()) {
    return InvalidArgumentError(
        "name the entity: --user NAME or --default-user, and/or --client-id ID or "
        "--default-client-id");
  }
  return parts;
}

std::string EntityText(const std::vector<std::pair<std::string, std::optional<std::string>>>& e) {
  std::string out;
  for (const auto& [type, name] : e) {
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", type, name.value_or("<default>"));
  }
  return out;
}

// The quotas set on exactly `entity` (key -> value).
Result<std::map<std::string, double>> SetOn(
    broker::InterBrokerConnection& conn,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& entity) {
  kafka::DescribeClientQuotasRequest req;
  for (const auto& [type, name] : entity) {
    req.components.push_back({type, static_cast<int8_t>(name.has_value() ? 0 : 1), name, {}});
  }
  req.strict = true;
  ASSIGN_OR_RETURN(auto resp,
                   (Ask<kafka::DescribeClientQuotasResponse>(
                       conn, kafka::ApiKey::kDescribeClientQuotas, req, kQuotaClientId)));
  if (resp.error_code != ErrorCode::kNone) {
    return FailedPreconditionError("{} (error {})", resp.error_message.value_or("refused"),
                                   static_cast<int>(resp.error_code));
  }
  std::map<std::string, double> out;
  for (const auto& e :
       resp.entries.value_or(std::vector<kafka::DescribeClientQuotasResponse::Entry>{})) {
    for (const auto& v : e.values) out[v.key] = v.value;
  }
  return out;
}

int Alter(const QuotaFlags& f, bool remove) {
  auto entity = EntityOf(f, true);
  if (!entity.ok()) return QuotaFail(entity.status().message());
  if (f.settings.empty() && !remove) {
    return QuotaFail("give the quotas to set as KEY=VALUE (producer_byte_rate=1048576, ...)");
  }
  auto conn = ConnectAdmin(f.connection);
  if (!conn.ok()) return QuotaFail(conn.status().message());
  std::vector<std::string> settings = f.settings;
  if (remove) {
    // Only what is set can be removed; no key named: all of them.
    auto set = SetOn(**conn, *entity);
    if (!set.ok()) return QuotaFail(set.status().message());
    for (const std::string& k : settings) {
      if (k.find('=') == std::string::npos && set->count(k) == 0) {
        return QuotaFail(fmt::format("{} has no {} quota", EntityText(*entity), k));
      }
    }
    if (settings.empty()) {
      if (set->empty()) return QuotaFail(fmt::format("{} has no quota", EntityText(*entity)));
      for (const auto& kv : *set) settings.push_back(kv.first);
    }
  }
  kafka::AlterClientQuotasRequest req;
  kafka::AlterClientQuotasRequest::Entry entry;
  for (const auto& [type, name] : *entity) entry.entity.push_back({type, name, {}});
  for (const std::string& s : settings) {
    kafka::AlterClientQuotasRequest::Op op;
    op.remove = remove;
    const size_t eq = s.find('=');
    if (remove) {
      if (eq != std::string::npos) return QuotaFail(fmt::format("'{}': remove takes keys only", s));
      op.key = s;
    } else {
      if (eq == std::string::npos || eq == 0)
        return QuotaFail(fmt::format("'{}' is not KEY=VALUE", s));
      op.key = s.substr(0, eq);
      const std::string value = s.substr(eq + 1);
      size_t used = 0;
      try {
        op.value = std::stod(value, &used);
      } catch (...) {
        used = 0;
      }
      if ((used == 0 || used != value.size()) && op.key.ends_with("_byte_rate")) {
        // A rate as people write it: 1MiB, 512KiB/s.
        std::string_view rate = value;
        if (rate.ends_with("/s")) rate.remove_suffix(2);
        Result<int64_t> bytes = ParseBytes(rate);
        if (!bytes.ok()) {
          return QuotaFail(
              fmt::format("'{}': the value '{}' {}", s, value, bytes.status().message()));
        }
        op.value = static_cast<double>(*bytes);
        used = value.size();
      }
      if (used == 0 || used != value.size()) {
        return QuotaFail(fmt::format("'{}': the value '{}' is not a number", s, value));
      }
    }
    entry.ops.push_back(std::move(op));
  }
  req.entries.push_back(std::move(entry));
  auto resp = Ask<kafka::AlterClientQuotasResponse>(**conn, kafka::ApiKey::kAlterClientQuotas, req,
                                                    kQuotaClientId);
  if (!resp.ok()) return QuotaFail(resp.status().message());
  for (const auto& e : resp->entries) {
    if (e.error_code != ErrorCode::kNone) {
      return QuotaFail(fmt::format("{} (error {})", e.error_message.value_or("refused"),
                                   static_cast<int>(e.error_code)));
    }
  }
  std::printf("%s %s for %s\n", remove ? "removed" : "set",
              fmt::format("{}", fmt::join(settings, ", ")).c_str(), EntityText(*entity).c_str());
  return 0;
}

}  // namespace

int RunQuotaSet(const QuotaFlags& flags) { return Alter(flags, false); }
int RunQuotaRemove(const QuotaFlags& flags) { return Alter(flags, true); }

int RunQuotaList(const QuotaFlags& f) {
  auto entity = EntityOf(f, false);
  if (!entity.ok()) return QuotaFail(entity.status().message());
  kafka::DescribeClientQuotasRequest req;
  for (const auto& [type, name] : *entity) {
    // Match type 0: exactly `name`; 1: the <default>.
    req.components.push_back({type, static_cast<int8_t>(name.has_value() ? 0 : 1), name, {}});
  }
  auto conn = ConnectAdmin(f.connection);
  if (!conn.ok()) return QuotaFail(conn.status().message());
  auto resp = Ask<kafka::DescribeClientQuotasResponse>(**conn, kafka::ApiKey::kDescribeClientQuotas,
                                                       req, kQuotaClientId);
  if (!resp.ok()) return QuotaFail(resp.status().message());
  if (resp->error_code != ErrorCode::kNone) {
    return QuotaFail(fmt::format("{} (error {})", resp->error_message.value_or("refused"),
                                 static_cast<int>(resp->error_code)));
  }
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& e :
       resp->entries.value_or(std::vector<kafka::DescribeClientQuotasResponse::Entry>{})) {
    std::vector<std::pair<std::string, std::optional<std::string>>> parts;
    for (const auto& p : e.entity) parts.emplace_back(p.entity_type, p.entity_name);
    std::string values;
    for (const auto& v : e.values) {
      values += fmt::format("{}{}={}", values.empty() ? "" : ", ", v.key, v.value);
    }
    rows.emplace_back(EntityText(parts), values);
  }
  std::sort(rows.begin(), rows.end());
  size_t width = 6;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  std::printf("%-*s  %s\n", static_cast<int>(width), "ENTITY", "QUOTAS");
  for (const auto& [e, v] : rows) {
    std::printf("%-*s  %s\n", static_cast<int>(width), e.c_str(), v.c_str());
  }
  return 0;
}

}  // namespace sluice::cli
