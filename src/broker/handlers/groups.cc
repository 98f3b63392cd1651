// Consumer groups: FindCoordinator (this node coordinates every group) and the hand-off of
// every group request to the GroupCoordinator, whose answer is posted back to the
// connection's loop (docs/design/0003-group-coordinator.md).
#include <string>

#include "broker/handlers/handlers.h"

namespace sluice::broker::handlers {
namespace {

using kafka::ErrorCode;

// Hands a group request to the coordinator (its thread reads a copy after the frame is
// gone); its answer is posted back to the connection. `method(request, done)` calls the
// coordinator.
template <typename Resp, typename Req, typename Method>
void ToCoordinator(Context& ctx, const Call& call, const Req& req, Method method) {
  Req copy = req;
  GroupCoordinator::Done<Resp> done = [&ctx, conn = call.conn, h = call.header](Resp resp) {
    auto shared = std::make_shared<Resp>(std::move(resp));
    ctx.shards.PostGated(conn->loop(), [conn, h, shared] { Reply(conn, h, *shared); });
  };
  method(std::move(copy), std::move(done));
}

}  // namespace

void HandleFindCoordinator(Context& ctx, const Call& call,
                           const kafka::FindCoordinatorRequest& req) {
  const MetadataSnapshot& meta = ctx.shards.SnapshotFor(ctx.shards.ShardOf(call.conn->loop()));
  const int16_t version = call.header.api_version;
  kafka::FindCoordinatorResponse resp;
  const std::string& host = meta.advertised_host;
  const int32_t port = meta.advertised_port;
  // Transactions (key type 1) have no coordinator: there are no transactions yet.
  const bool served = req.key_type == 0;
  const ErrorCode error = served              ? ErrorCode::kNone
                          : req.key_type == 1 ? ErrorCode::kCoordinatorNotAvailable
                                              : ErrorCode::kInvalidRequest;
  if (version >= 4) {
    for (const std::string& key : req.coordinator_keys) {
      kafka::FindCoordinatorResponse::Coordinator c;
      c.key = key;
      c.node_id = served ? kNodeId : -1;
      c.host = served ? host : "";
      c.port = served ? port : -1;
      c.error_code = error;
      if (!served) c.error_message = "transactions are not supported";
      resp.coordinators.push_back(std::move(c));
    }
    Reply(call.conn, call.header, resp);
    return;
  }
  resp.error_code = error;
  resp.node_id = served ? kNodeId : -1;
  resp.host = served ? host : "";
  resp.port = served ? port : -1;
  if (!served) resp.error_message = "transactions are not supported";
  Reply(call.conn, call.header, resp);
}

void HandleJoinGroup(Context& ctx, const Call& call, const kafka::JoinGroupRequest& req) {
  GroupClient client{call.header.client_id.value_or(""), "/" + call.conn->peer_host()};
  ToCoordinator<kafka::JoinGroupResponse>(
      ctx, call, req,
      [groups = ctx.groups, client, v = call.header.api_version](auto&& r, auto&& done) {
        groups->JoinGroup(std::move(r), v, client, std::move(done));
      });
}

void HandleSyncGroup(Context& ctx, const Call& call, const kafka::SyncGroupRequest& req) {
  ToCoordinator<kafka::SyncGroupResponse>(
      ctx, call, req, [groups = ctx.groups, v = call.header.api_version](auto&& r, auto&& done) {
        groups->SyncGroup(std::move(r), v, std::move(done));
      });
}

void HandleHeartbeat(Context& ctx, const Call& call, const kafka::HeartbeatRequest& req) {
  ToCoordinator<kafka::HeartbeatResponse>(
      ctx, call, req, [groups = ctx.groups, v = call.header.api_version](auto&& r, auto&& done) {
        groups->Heartbeat(std::move(r), v, std::move(done));
      });
}

void HandleLeaveGroup(Context& ctx, const Call& call, const kafka::LeaveGroupRequest& req) {
  ToCoordinator<kafka::LeaveGroupResponse>(
      ctx, call, req, [groups = ctx.groups, v = call.header.api_version](auto&& r, auto&& done) {
        groups->LeaveGroup(std::move(r), v, std::move(done));
      });
}

void HandleOffsetCommit(Context& ctx, const Call& call, const kafka::OffsetCommitRequest& req) {
  ToCoordinator<kafka::OffsetCommitResponse>(
      ctx, call, req, [groups = ctx.groups, v = call.header.api_version](auto&& r, auto&& done) {
        groups->OffsetCommit(std::move(r), v, std::move(done));
      });
}

void HandleOffsetFetch(Context& ctx, const Call& call, const kafka::OffsetFetchRequest& req) {
  ToCoordinator<kafka::OffsetFetchResponse>(
      ctx, call, req, [groups = ctx.groups, v = call.header.api_version](auto&& r, auto&& done) {
        groups->OffsetFetch(std::move(r), v, std::move(done));
      });
}

void HandleListGroups(Context& ctx, const Call& call, const kafka::ListGroupsRequest& req) {
  ToCoordinator<kafka::ListGroupsResponse>(
      ctx, call, req, [groups = ctx.groups, v = call.header.api_version](auto&& r, auto&& done) {
        groups->ListGroups(std::move(r), v, std::move(done));
      });
}

void HandleDescribeGroups(Context& ctx, const Call& call, const kafka::DescribeGroupsRequest& req) {
  ToCoordinator<kafka::DescribeGroupsResponse>(
      ctx, call, req, [groups = ctx.groups, v = call.header.api_version](auto&& r, auto&& done) {
        groups->DescribeGroups(std::move(r), v, std::move(done));
      });
}

void HandleDeleteGroups(Context& ctx, const Call& call, const kafka::DeleteGroupsRequest& req) {
  ToCoordinator<kafka::DeleteGroupsResponse>(
      ctx, call, req, [groups = ctx.groups, v = call.header.api_version](auto&& r, auto&& done) {
        groups->DeleteGroups(std::move(r), v, std::move(done));
      });
}

}  // namespace sluice::broker::handlers
