// Consumer groups: FindCoordinator (a single node coordinates every group and
// transactional id; in a cluster the leader of the key's partition of the internal topic)
// and the hand-off of every group request to the GroupCoordinator, whose answer is
// posted back to the connection's loop (docs/design/0003-group-coordinator.md).
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "broker/coordinator_partitions.h"
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

namespace {

// One key's coordinator, as FindCoordinator answers it.
struct CoordinatorAnswer {
  ErrorCode error = ErrorCode::kNone;
  int32_t node = -1;
  std::string host;
  int32_t port = -1;
  std::string why;  // the error message
};

// In a cluster (docs/design/0018-cluster.md, "coordmove"): the leader of the key's
// partition of the internal topic, Kafka's Utils.abs(key.hashCode) % partitions;
// COORDINATOR_NOT_AVAILABLE while the topic does not exist (`*missing` set: it is to be
// created) or the partition has no live leader.
CoordinatorAnswer ClusterCoordinator(const MetadataSnapshot& meta, const std::string& topic,
                                     const std::string& key, std::string_view listener,
                                     bool* missing) {
  CoordinatorAnswer a;
  a.error = ErrorCode::kCoordinatorNotAvailable;
  const MetadataSnapshot::Topic* t = meta.Find(topic);
  if (t == nullptr || t->partitions.empty()) {
    *missing = t == nullptr;
    a.why = topic + " is being created";
    return a;
  }
  const int32_t p = CoordinatorPartitionFor(key, static_cast<int32_t>(t->partitions.size()));
  const int32_t leader = t->partitions[static_cast<size_t>(p)].leader;
  const MetadataSnapshot::Broker* b = meta.FindBroker(leader);
  if (leader < 0 || b == nullptr) {
    a.why = fmt::format("partition {} of {} has no leader now", p, topic);
    return a;
  }
  const auto address = b->AddressFor(listener);
  if (!address.has_value()) {
    // Kafka's answer too: the coordinator is not reachable on this listener.
    a.why = fmt::format("the coordinator, broker {}, has no {} listener", leader, listener);
    return a;
  }
  a.error = ErrorCode::kNone;
  a.node = leader;
  a.host = std::string(address->first);
  a.port = address->second;
  return a;
}

}  // namespace

void HandleFindCoordinator(Context& ctx, const Call& call,
                           const kafka::FindCoordinatorRequest& req) {
  const MetadataSnapshot& meta = ctx.shards.SnapshotFor(ctx.shards.ShardOf(call.conn->loop()));
  const int16_t version = call.header.api_version;
  kafka::FindCoordinatorResponse resp;
  // Groups (key type 0) always; transactional ids (key type 1) while the transaction
  // coordinator runs.
  const bool known = req.key_type == 0 || req.key_type == 1;
  const bool running = req.key_type == 0 || ctx.txns != nullptr;
  const std::string topic = req.key_type == 1 ? "__transaction_state" : "__consumer_offsets";
  bool missing = false;
  auto answer = [&](const std::string& key) {
    CoordinatorAnswer a;
    if (!known) {
      a.error = ErrorCode::kInvalidRequest;
      a.why = "no transaction coordinator is running";
    } else if (!running) {
      a.error = ErrorCode::kCoordinatorNotAvailable;
      a.why = "no transaction coordinator is running";
    } else if (meta.cluster) {
      a = ClusterCoordinator(meta, topic, key, call.conn->listener(), &missing);
    } else {
      // A single node coordinates every key.
      a.node = kNodeId;
      const auto [host, port] = meta.AdvertisedFor(call.conn->listener());
      a.host = std::string(host);
      a.port = port;
    }
    return a;
  };
  if (version >= 4) {
    for (const std::string& key : req.coordinator_keys) {
      CoordinatorAnswer a = answer(key);
      kafka::FindCoordinatorResponse::Coordinator c;
      c.key = key;
      c.node_id = a.node;
      c.host = a.host;
      c.port = a.port;
      c.error_code = a.error;
      if (a.error != ErrorCode::kNone) c.error_message = a.why;
      resp.coordinators.push_back(std::move(c));
    }
  } else {
    CoordinatorAnswer a = answer(req.key);
    resp.error_code = a.error;
    resp.node_id = a.node;
    resp.host = a.host;
    resp.port = a.port;
    if (a.error != ErrorCode::kNone) resp.error_message = a.why;
  }
  Reply(call.conn, call.header, resp);
  if (missing) {
    // As Kafka creates the internal topic on the first FindCoordinator: the controller
    // does (another broker's controller thread refuses; the controller creates them by
    // itself once enough brokers are registered). The client asks again.
    ctx.controller.Post([&ctx, topic] {
      if (ctx.controller.FindTopic(topic) == nullptr && ctx.controller.AutoCreateTopic(topic)) {
        ctx.controller.Publish();
      }
    });
  }
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
