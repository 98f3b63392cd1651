// ACLs: DescribeAcls, CreateAcls, DeleteAcls. No authorizer runs yet
// (docs/design/0019-security.md, phase E), so each answers as Kafka does without one:
// SECURITY_DISABLED, "No Authorizer is configured." — an admin tool gets a clear error,
// not a closed connection.
#include <string>

#include "broker/handlers/handlers.h"

namespace sluice::broker::handlers {
namespace {

constexpr const char* kNoAuthorizer = "No Authorizer is configured.";

}  // namespace

void HandleDescribeAcls(Context&, const Call& call, const kafka::DescribeAclsRequest&) {
  kafka::DescribeAclsResponse resp;
  resp.error_code = kafka::ErrorCode::kSecurityDisabled;
  resp.error_message = kNoAuthorizer;
  Reply(call.conn, call.header, resp);
}

void HandleCreateAcls(Context&, const Call& call, const kafka::CreateAclsRequest& req) {
  kafka::CreateAclsResponse resp;
  for (size_t i = 0; i < req.creations.size(); ++i) {
    kafka::CreateAclsResponse::AclCreationResult r;
    r.error_code = kafka::ErrorCode::kSecurityDisabled;
    r.error_message = kNoAuthorizer;
    resp.results.push_back(std::move(r));
  }
  Reply(call.conn, call.header, resp);
}

void HandleDeleteAcls(Context&, const Call& call, const kafka::DeleteAclsRequest& req) {
  kafka::DeleteAclsResponse resp;
  for (size_t i = 0; i < req.filters.size(); ++i) {
    kafka::DeleteAclsResponse::DeleteAclsFilterResult r;
    r.error_code = kafka::ErrorCode::kSecurityDisabled;
    r.error_message = kNoAuthorizer;
    resp.filter_results.push_back(std::move(r));
  }
  Reply(call.conn, call.header, resp);
}

}  // namespace sluice::broker::handlers
