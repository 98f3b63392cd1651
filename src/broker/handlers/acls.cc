// ACLs: DescribeAcls, CreateAcls, DeleteAcls (docs/design/0019-security.md, phase E), as
// Kafka's AclControlManager answers them. Without authorization.enabled each answers as
// Kafka without an authorizer: SECURITY_DISABLED, "No Authorizer is configured.".
// DescribeAcls needs DESCRIBE on the cluster, the others ALTER; changes run on the
// controller's thread (each is persisted before it is answered: a file fsync, or an etcd
// compare-and-swap retried when another broker changed the set meanwhile).
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "auth/acl.h"
#include "auth/acl_store.h"
#include "broker/handlers/handlers.h"

namespace sluice::broker::handlers {
namespace {

using auth::AclOperation;
using kafka::ErrorCode;

constexpr const char* kNoAuthorizer = "No Authorizer is configured.";

// An int8 code as the enum, UNKNOWN when outside Kafka's values (a filter or binding with
// it is refused).
template <typename E>
E Code(int8_t v, int8_t max) {
  return v >= 0 && v <= max ? static_cast<E>(v) : static_cast<E>(0);
}

auth::AclFilter FilterOf(int8_t type, const std::optional<std::string>& name, int8_t pattern,
                         const std::optional<std::string>& principal,
                         const std::optional<std::string>& host, int8_t operation,
                         int8_t permission) {
  auth::AclFilter f;
  f.resource_type = Code<auth::ResourceType>(type, 7);
  f.resource_name = name;
  f.pattern_type = Code<auth::PatternType>(pattern, 4);
  f.principal = principal;
  f.host = host;
  f.operation = Code<AclOperation>(operation, 14);
  f.permission = Code<auth::AclPermission>(permission, 3);
  return f;
}

// CreateAcls and DeleteAcls without an authorizer (SECURITY_DISABLED) or without ALTER on
// the cluster: answers each of the `n` items with the error and returns true.
template <typename Resp, typename Items>
bool RefusedChange(Context& ctx, const Call& call, size_t n, Items Resp::*items) {
  const bool enabled = ctx.authorizer->enabled();
  if (enabled && AccessOf(ctx, call).CheckCluster(AclOperation::kAlter)) return false;
  Resp resp;
  for (size_t i = 0; i < n; ++i) {
    typename Items::value_type r;
    r.error_code = enabled ? ErrorCode::kClusterAuthorizationFailed : ErrorCode::kSecurityDisabled;
    r.error_message = enabled ? kClusterDenied : kNoAuthorizer;
    (resp.*items).push_back(std::move(r));
  }
  Reply(call.conn, call.header, resp);
  return true;
}

}  // namespace

void HandleDescribeAcls(Context& ctx, const Call& call, const kafka::DescribeAclsRequest& req) {
  kafka::DescribeAclsResponse resp;
  if (!ctx.authorizer->enabled()) {
    resp.error_code = ErrorCode::kSecurityDisabled;
    resp.error_message = kNoAuthorizer;
    return Reply(call.conn, call.header, resp);
  }
  if (!AccessOf(ctx, call).CheckCluster(AclOperation::kDescribe)) {
    resp.error_code = ErrorCode::kClusterAuthorizationFailed;
    resp.error_message = kClusterDenied;
    return Reply(call.conn, call.header, resp);
  }
  const auth::AclFilter filter =
      FilterOf(req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter,
               req.principal_filter, req.host_filter, req.operation, req.permission_type);
  if (Status st = filter.Validate(); !st.ok()) {
    resp.error_code = ErrorCode::kInvalidRequest;
    resp.error_message = std::string(st.message());
    return Reply(call.conn, call.header, resp);
  }
  // Grouped by resource pattern, as Kafka answers.
  std::map<std::tuple<int8_t, std::string, int8_t>, std::vector<const auth::AclBinding*>> by;
  const std::shared_ptr<const auth::AclSet> set = ctx.authorizer->acls().Current();
  for (const auth::AclBinding& b : set->bindings()) {
    if (!filter.Matches(b)) continue;
    // v0 cannot carry a pattern type: only LITERAL bindings go out.
    if (call.header.api_version == 0 && b.pattern_type != auth::PatternType::kLiteral) continue;
    by[{static_cast<int8_t>(b.resource_type), b.resource_name, static_cast<int8_t>(b.pattern_type)}]
        .push_back(&b);
  }
  for (const auto& [key, bindings] : by) {
    kafka::DescribeAclsResponse::DescribeAclsResource r;
    std::tie(r.resource_type, r.resource_name, r.pattern_type) = key;
    for (const auth::AclBinding* b : bindings) {
      kafka::DescribeAclsResponse::AclDescription d;
      d.principal = b->principal;
      d.host = b->host;
      d.operation = static_cast<int8_t>(b->operation);
      d.permission_type = static_cast<int8_t>(b->permission);
      r.acls.push_back(std::move(d));
    }
    resp.resources.push_back(std::move(r));
  }
  Reply(call.conn, call.header, resp);
}

void HandleCreateAcls(Context& ctx, const Call& call, const kafka::CreateAclsRequest& req) {
  if (RefusedChange<kafka::CreateAclsResponse>(ctx, call, req.creations.size(),
                                               &kafka::CreateAclsResponse::results)) {
    return;
  }
  std::vector<auth::AclBinding> bindings;
  for (const auto& c : req.creations) {
    auth::AclBinding b;
    b.resource_type = Code<auth::ResourceType>(c.resource_type, 7);
    b.resource_name = c.resource_name;
    b.pattern_type = Code<auth::PatternType>(c.resource_pattern_type, 4);
    b.principal = c.principal;
    b.host = c.host;
    b.operation = Code<AclOperation>(c.operation, 14);
    b.permission = Code<auth::AclPermission>(c.permission_type, 3);
    bindings.push_back(std::move(b));
  }
  ToController(ctx, call, [&ctx, bindings = std::move(bindings)] {
    std::vector<Status> results =
        Retried(ctx, [&] { return ctx.authorizer->acls().Create(bindings); });
    kafka::CreateAclsResponse resp;
    for (const Status& st : results) {
      kafka::CreateAclsResponse::AclCreationResult r;
      if (!st.ok()) {
        r.error_code = st.code() == StatusCode::kInvalidArgument ? ErrorCode::kInvalidRequest
                                                                 : ErrorCode::kUnknownServerError;
        r.error_message = std::string(st.message());
      }
      resp.results.push_back(std::move(r));
    }
    return resp;
  });
}

void HandleDeleteAcls(Context& ctx, const Call& call, const kafka::DeleteAclsRequest& req) {
  if (RefusedChange<kafka::DeleteAclsResponse>(ctx, call, req.filters.size(),
                                               &kafka::DeleteAclsResponse::filter_results)) {
    return;
  }
  std::vector<auth::AclFilter> filters;
  for (const auto& f : req.filters) {
    filters.push_back(FilterOf(f.resource_type_filter, f.resource_name_filter,
                               f.pattern_type_filter, f.principal_filter, f.host_filter,
                               f.operation, f.permission_type));
  }
  const int16_t version = call.header.api_version;
  ToController(ctx, call, [&ctx, filters = std::move(filters), version] {
    std::vector<auth::AclStore::Deleted> results =
        Retried(ctx, [&] { return ctx.authorizer->acls().Delete(filters); });
    kafka::DeleteAclsResponse resp;
    for (const auth::AclStore::Deleted& d : results) {
      kafka::DeleteAclsResponse::DeleteAclsFilterResult r;
      if (!d.status.ok()) {
        r.error_code = d.status.code() == StatusCode::kInvalidArgument
                           ? ErrorCode::kInvalidRequest
                           : ErrorCode::kUnknownServerError;
        r.error_message = std::string(d.status.message());
      }
      for (const auth::AclBinding& b : d.bindings) {
        // v0 cannot carry a pattern type (a LITERAL filter matches only LITERAL ones).
        if (version == 0 && b.pattern_type != auth::PatternType::kLiteral) continue;
        kafka::DeleteAclsResponse::DeleteAclsMatchingAcl m;
        m.resource_type = static_cast<int8_t>(b.resource_type);
        m.resource_name = b.resource_name;
        m.pattern_type = static_cast<int8_t>(b.pattern_type);
        m.principal = b.principal;
        m.host = b.host;
        m.operation = static_cast<int8_t>(b.operation);
        m.permission_type = static_cast<int8_t>(b.permission);
        r.matching_acls.push_back(std::move(m));
      }
      resp.filter_results.push_back(std::move(r));
    }
    return resp;
  });
}

}  // namespace sluice::broker::handlers
