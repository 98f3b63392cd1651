// Consumer groups: FindCoordinator (this node coordinates every group and transactional
// id) and the hand-off of every group request to the GroupCoordinator, whose answer is
// posted back to the connection's loop (docs/design/0003-group-coordinator.md).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "broker/handlers/handlers.h"

namespace sluice::broker::handlers {
namespace {

using kafka::ErrorCode;

// The coordinator's callback for a request: its answer is posted back to the
// connection's loop. The coordinator's thread gets a copy of the request (it reads it
// after the frame is gone).
template <typename Resp>
GroupCoordinator::Done<Resp> AnswerOnLoop(Context& ctx, const Call& call) {
  return [&ctx, conn = call.conn, h = call.header](Resp resp) {
    auto shared = std::make_shared<Resp>(std::move(resp));
    ctx.shards.PostGated(conn->loop(), [conn, h, shared] { Reply(conn, h, *shared); });
  };
}

}  // namespace

void HandleFindCoordinator(Context& ctx, const Call& call,
                           const kafka::FindCoordinatorRequest& req) {
  const MetadataSnapshot& meta = ctx.shards.SnapshotFor(ctx.shards.ShardOf(call.conn->loop()));
  const int16_t version = call.header.api_version;
  kafka::FindCoordinatorResponse resp;
  std::string host = meta.advertised_host;
  int32_t port = meta.advertised_port;
  int32_t node = kNodeId;
  // This node coordinates every group (key type 0) and, while its transaction
  // coordinator runs, every transactional id (key type 1). In a cluster, until the
  // coordinators' logs are replicated partitions (0018, phase D), the controller
  // coordinates them all, so every broker names the same one.
  bool served = req.key_type == 0 || (req.key_type == 1 && ctx.txns != nullptr);
  if (meta.cluster) {
    node = meta.controller_id;
    auto b = std::find_if(meta.brokers.begin(), meta.brokers.end(),
                          [node](const MetadataSnapshot::Broker& x) { return x.node_id == node; });
    served = served && b != meta.brokers.end();
    if (served) {
      host = b->host;
      port = b->port;
    }
  }
  const ErrorCode error = served ? ErrorCode::kNone
                          : (req.key_type == 1 || (meta.cluster && req.key_type == 0))
                              ? ErrorCode::kCoordinatorNotAvailable
                              : ErrorCode::kInvalidRequest;
  const char* why = meta.cluster && (req.key_type != 1 || ctx.txns != nullptr)
                        ? "no controller is elected now"
                        : "no transaction coordinator is running";
  if (version >= 4) {
    for (const std::string& key : req.coordinator_keys) {
      kafka::FindCoordinatorResponse::Coordinator c;
      c.key = key;
      c.node_id = served ? node : -1;
      c.host = served ? host : "";
      c.port = served ? port : -1;
      c.error_code = error;
      if (!served) c.error_message = why;
      resp.coordinators.push_back(std::move(c));
    }
    Reply(call.conn, call.header, resp);
    return;
  }
  resp.error_code = error;
  resp.node_id = served ? node : -1;
  resp.host = served ? host : "";
  resp.port = served ? port : -1;
  if (!served) resp.error_message = why;
  Reply(call.conn, call.header, resp);
}

void HandleJoinGroup(Context& ctx, const Call& call, const kafka::JoinGroupRequest& req) {
  GroupClient client{call.header.client_id.value_or(""), "/" + call.conn->peer_host()};
  ctx.groups->JoinGroup(req, call.header.api_version, std::move(client),
                        AnswerOnLoop<kafka::JoinGroupResponse>(ctx, call));
}

void HandleSyncGroup(Context& ctx, const Call& call, const kafka::SyncGroupRequest& req) {
  ctx.groups->SyncGroup(req, call.header.api_version,
                        AnswerOnLoop<kafka::SyncGroupResponse>(ctx, call));
}

void HandleHeartbeat(Context& ctx, const Call& call, const kafka::HeartbeatRequest& req) {
  ctx.groups->Heartbeat(req, call.header.api_version,
                        AnswerOnLoop<kafka::HeartbeatResponse>(ctx, call));
}

void HandleLeaveGroup(Context& ctx, const Call& call, const kafka::LeaveGroupRequest& req) {
  ctx.groups->LeaveGroup(req, call.header.api_version,
                         AnswerOnLoop<kafka::LeaveGroupResponse>(ctx, call));
}

void HandleOffsetCommit(Context& ctx, const Call& call, const kafka::OffsetCommitRequest& req) {
  ctx.groups->OffsetCommit(req, call.header.api_version,
                           AnswerOnLoop<kafka::OffsetCommitResponse>(ctx, call));
}

void HandleOffsetFetch(Context& ctx, const Call& call, const kafka::OffsetFetchRequest& req) {
  ctx.groups->OffsetFetch(req, call.header.api_version,
                          AnswerOnLoop<kafka::OffsetFetchResponse>(ctx, call));
}

void HandleListGroups(Context& ctx, const Call& call, const kafka::ListGroupsRequest& req) {
  ctx.groups->ListGroups(req, call.header.api_version,
                         AnswerOnLoop<kafka::ListGroupsResponse>(ctx, call));
}

void HandleDescribeGroups(Context& ctx, const Call& call, const kafka::DescribeGroupsRequest& req) {
  ctx.groups->DescribeGroups(req, call.header.api_version,
                             AnswerOnLoop<kafka::DescribeGroupsResponse>(ctx, call));
}

void HandleDeleteGroups(Context& ctx, const Call& call, const kafka::DeleteGroupsRequest& req) {
  ctx.groups->DeleteGroups(req, call.header.api_version,
                           AnswerOnLoop<kafka::DeleteGroupsResponse>(ctx, call));
}

// Kafka's handleTxnOffsetCommitRequest checks authorization and the partitions, then
// hands over; here the coordinator checks the partitions (partition_exists) with the
// rest. Whether the transaction holds the group (AddOffsetsToTxn) is the transaction
// coordinator's to say, through the coordinator's TxnVerifier, as in Kafka.
void HandleTxnOffsetCommit(Context& ctx, const Call& call,
                           const kafka::TxnOffsetCommitRequest& req) {
  ctx.groups->TxnOffsetCommit(req, call.header.api_version,
                              AnswerOnLoop<kafka::TxnOffsetCommitResponse>(ctx, call));
}

}  // namespace sluice::broker::handlers
