// Client quotas: DescribeClientQuotas (from the quota set, on the shard) and
// AlterClientQuotas (on the controller's thread: a change is persisted before it is
// answered). docs/design/0019-security.md, phase F; Kafka's messages and checks
// (DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster).
#include <string>
#include <utility>
#include <vector>

#include "broker/client_quotas.h"
#include "broker/handlers/handlers.h"

namespace sluice::broker::handlers {
namespace {

using kafka::ErrorCode;

ErrorCode ErrorOf(const Status& st) {
  return st.code() == StatusCode::kInvalidArgument ? ErrorCode::kInvalidRequest
                                                   : ErrorCode::kUnknownServerError;
}

}  // namespace

void HandleDescribeClientQuotas(Context& ctx, const Call& call,
                                const kafka::DescribeClientQuotasRequest& req) {
  kafka::DescribeClientQuotasResponse resp;
  if (!AccessOf(ctx, call).CheckCluster(auth::AclOperation::kDescribeConfigs)) {
    resp.error_code = ErrorCode::kClusterAuthorizationFailed;
    resp.error_message = kClusterDenied;
    resp.entries = std::nullopt;
    return Reply(call.conn, call.header, resp);
  }
  std::vector<QuotaFilterComponent> components;
  for (const auto& c : req.components) components.push_back({c.entity_type, c.match_type, c.match});
  auto found = ctx.quotas->store().Current()->Describe(components, req.strict);
  if (!found.ok()) {
    resp.error_code = ErrorCode::kInvalidRequest;
    resp.error_message = std::string(found.status().message());
    resp.entries = std::nullopt;
    return Reply(call.conn, call.header, resp);
  }
  resp.entries.emplace();
  for (const auto& [entity, values] : *found) {
    kafka::DescribeClientQuotasResponse::Entry e;
    for (auto& [type, name] : QuotaEntityParts(entity)) e.entity.push_back({type, name, {}});
    for (const auto& [key, value] : values) e.values.push_back({key, value, {}});
    resp.entries->push_back(std::move(e));
  }
  Reply(call.conn, call.header, resp);
}

void HandleAlterClientQuotas(Context& ctx, const Call& call,
                             const kafka::AlterClientQuotasRequest& req) {
  // Per entry: its entity as sent (echoed back), and the alteration or why not.
  struct Entry {
    std::vector<kafka::AlterClientQuotasResponse::Entity> echo;
    Status refused;
    QuotaAlteration alteration;
  };
  std::vector<Entry> entries;
  for (const auto& e : req.entries) {
    Entry out;
    std::vector<std::pair<std::string, std::optional<std::string>>> parts;
    for (const auto& part : e.entity) {
      out.echo.push_back({part.entity_type, part.entity_name, {}});
      parts.emplace_back(part.entity_type, part.entity_name);
    }
    Result<QuotaEntity> entity = QuotaEntityFrom(parts);
    if (!entity.ok()) {
      out.refused = entity.status();
    } else {
      out.alteration.entity = *entity;
      for (const auto& op : e.ops) out.alteration.ops.push_back({op.key, op.value, op.remove});
    }
    entries.push_back(std::move(out));
  }
  if (!AccessOf(ctx, call).CheckCluster(auth::AclOperation::kAlterConfigs)) {
    kafka::AlterClientQuotasResponse resp;
    for (Entry& e : entries) {
      resp.entries.push_back(
          {ErrorCode::kClusterAuthorizationFailed, kClusterDenied, std::move(e.echo), {}});
    }
    return Reply(call.conn, call.header, resp);
  }
  ToController(ctx, call, [&ctx, entries = std::move(entries), validate_only = req.validate_only] {
    std::vector<QuotaAlteration> valid;
    for (const Entry& e : entries) {
      if (e.refused.ok()) valid.push_back(e.alteration);
    }
    const std::vector<Status> results =
        Retried(ctx, [&] { return ctx.quotas->store().Alter(valid, validate_only); });
    kafka::AlterClientQuotasResponse resp;
    size_t next = 0;
    for (const Entry& e : entries) {
      const Status st = e.refused.ok() ? results[next++] : e.refused;
      kafka::AlterClientQuotasResponse::Entry out;
      out.entity = e.echo;
      if (!st.ok()) {
        out.error_code = ErrorOf(st);
        out.error_message = std::string(st.message());
      }
      resp.entries.push_back(std::move(out));
    }
    return resp;
  });
}

}  // namespace sluice::broker::handlers
