// Consumer groups: FindCoordinator (a single node coordinates every group and
// transactional id; in a cluster the leader of the key's partition of the internal topic)
// and the hand-off of every group request to the GroupCoordinator, whose answer is
// posted back to the connection's loop (docs/design/0003-group-coordinator.md).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "broker/coordinator_partitions.h"
#include "broker/handlers/handlers.h"

namespace sluice::broker::handlers {
namespace {

using kafka::ErrorCode;

// The coordinator's callback for a request: its answer is posted back to the
// connection's loop. The coordinator's thread gets a copy of the request (it reads it
// after the frame is gone).
// `finish` (if given) completes the coordinator's answer first: the parts the authorizer
// refused, which never reached the coordinator.
template <typename Resp>
GroupCoordinator::Done<Resp> AnswerOnLoop(Context& ctx, const Call& call,
                                          std::function<void(Resp&)> finish = nullptr) {
  return [&ctx, conn = call.conn, h = call.header, finish = std::move(finish)](Resp resp) {
    if (finish) finish(resp);
    auto shared = std::make_shared<Resp>(std::move(resp));
    ctx.shards.PostGated(conn->loop(), [conn, h, shared] { Reply(conn, h, *shared); });
  };
}

using auth::AclOperation;
using auth::ResourceType;

bool GroupAllowed(const Access& access, const std::string& group, AclOperation op) {
  return access.Check(ResourceType::kGroup, group, op);
}

// Splits a request's topics into those `access` may do `op` on (kept in `topics`) and
// the others (returned), as Kafka's filterByAuthorized.
template <typename Topic>
std::vector<Topic> TakeDenied(const Access& access, std::vector<Topic>& topics, AclOperation op) {
  std::vector<Topic> denied;
  std::vector<Topic> kept;
  for (Topic& t : topics) {
    (access.Check(ResourceType::kTopic, t.name, op) ? kept : denied).push_back(std::move(t));
  }
  topics = std::move(kept);
  return denied;
}

// The refused entries of a per-group request (GROUP_AUTHORIZATION_FAILED each, `Out` with
// a group_id and an error_code); the groups `access` may do `op` on go to *allowed.
template <typename Out>
std::vector<Out> RefuseGroups(const Access& access, const std::vector<std::string>& groups,
                              AclOperation op, std::vector<std::string>* allowed) {
  std::vector<Out> refused;
  allowed->clear();
  for (const std::string& g : groups) {
    if (GroupAllowed(access, g, op)) {
      allowed->push_back(g);
      continue;
    }
    Out r;
    r.group_id = g;
    r.error_code = ErrorCode::kGroupAuthorizationFailed;
    refused.push_back(std::move(r));
  }
  return refused;
}

// Hands what the authorizer left of a request to the coordinator (`ask` takes the answer's
// callback) and completes its answer with `finish`; with nothing left, `finish` alone
// answers.
template <typename Resp, typename Ask>
void AskCoordinator(Context& ctx, const Call& call, bool nothing_left,
                    std::function<void(Resp&)> finish, Ask ask) {
  if (nothing_left) {
    Resp resp;
    finish(resp);
    return Reply(call.conn, call.header, resp);
  }
  ask(AnswerOnLoop<Resp>(ctx, call, std::move(finish)));
}

// The response topics for request topics answered with one error per partition.
template <typename OutTopic, typename InTopic, typename PartitionIndex>
std::vector<OutTopic> ErrorTopics(const std::vector<InTopic>& in, ErrorCode error,
                                  PartitionIndex index) {
  std::vector<OutTopic> out;
  for (const InTopic& t : in) {
    OutTopic o;
    o.name = t.name;
    for (const auto& p : t.partitions) {
      typename decltype(o.partitions)::value_type part;
      part.partition_index = index(p);
      part.error_code = error;
      o.partitions.push_back(std::move(part));
    }
    out.push_back(std::move(o));
  }
  return out;
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
  const Access access = AccessOf(ctx, call);
  auto answer = [&](const std::string& key) {
    CoordinatorAnswer a;
    if (known &&
        !access.Check(req.key_type == 1 ? ResourceType::kTransactionalId : ResourceType::kGroup,
                      key, AclOperation::kDescribe)) {
      // Kafka's check: DESCRIBE on the group or the transactional id.
      a.error = req.key_type == 1 ? ErrorCode::kTransactionalIdAuthorizationFailed
                                  : ErrorCode::kGroupAuthorizationFailed;
      a.why = req.key_type == 1 ? kTxnIdDenied : kGroupDenied;
    } else if (!known) {
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
  if (missing) CreateInternalTopicSoon(ctx, topic);  // the client asks again
}

void CreateInternalTopicSoon(Context& ctx, const std::string& topic) {
  ctx.controller.Post([&ctx, topic] {
    if (ctx.controller.FindTopic(topic) == nullptr && ctx.controller.AutoCreateTopic(topic)) {
      ctx.controller.Publish();
    }
  });
}

void HandleJoinGroup(Context& ctx, const Call& call, const kafka::JoinGroupRequest& req) {
  if (!GroupAllowed(AccessOf(ctx, call), req.group_id, AclOperation::kRead)) {
    kafka::JoinGroupResponse resp;
    resp.error_code = ErrorCode::kGroupAuthorizationFailed;
    return Reply(call.conn, call.header, resp);
  }
  GroupClient client{call.header.client_id.value_or(""), "/" + call.conn->peer_host()};
  ctx.groups->JoinGroup(req, call.header.api_version, std::move(client),
                        AnswerOnLoop<kafka::JoinGroupResponse>(ctx, call));
}

void HandleSyncGroup(Context& ctx, const Call& call, const kafka::SyncGroupRequest& req) {
  if (!GroupAllowed(AccessOf(ctx, call), req.group_id, AclOperation::kRead)) {
    kafka::SyncGroupResponse resp;
    resp.error_code = ErrorCode::kGroupAuthorizationFailed;
    return Reply(call.conn, call.header, resp);
  }
  ctx.groups->SyncGroup(req, call.header.api_version,
                        AnswerOnLoop<kafka::SyncGroupResponse>(ctx, call));
}

void HandleHeartbeat(Context& ctx, const Call& call, const kafka::HeartbeatRequest& req) {
  if (!GroupAllowed(AccessOf(ctx, call), req.group_id, AclOperation::kRead)) {
    kafka::HeartbeatResponse resp;
    resp.error_code = ErrorCode::kGroupAuthorizationFailed;
    return Reply(call.conn, call.header, resp);
  }
  ctx.groups->Heartbeat(req, call.header.api_version,
                        AnswerOnLoop<kafka::HeartbeatResponse>(ctx, call));
}

void HandleLeaveGroup(Context& ctx, const Call& call, const kafka::LeaveGroupRequest& req) {
  if (!GroupAllowed(AccessOf(ctx, call), req.group_id, AclOperation::kRead)) {
    kafka::LeaveGroupResponse resp;
    resp.error_code = ErrorCode::kGroupAuthorizationFailed;
    return Reply(call.conn, call.header, resp);
  }
  ctx.groups->LeaveGroup(req, call.header.api_version,
                         AnswerOnLoop<kafka::LeaveGroupResponse>(ctx, call));
}

// OffsetCommit: READ on the group (every partition GROUP_AUTHORIZATION_FAILED without it),
// READ on each topic (TOPIC_AUTHORIZATION_FAILED), as Kafka.
void HandleOffsetCommit(Context& ctx, const Call& call, const kafka::OffsetCommitRequest& req) {
  using Resp = kafka::OffsetCommitResponse;
  const Access access = AccessOf(ctx, call);
  auto index = [](const kafka::OffsetCommitRequest::Partition& p) { return p.partition_index; };
  if (!GroupAllowed(access, req.group_id, AclOperation::kRead)) {
    Resp resp;
    resp.topics = ErrorTopics<Resp::Topic>(req.topics, ErrorCode::kGroupAuthorizationFailed, index);
    return Reply(call.conn, call.header, resp);
  }
  if (access.everything()) {
    return ctx.groups->OffsetCommit(req, call.header.api_version, AnswerOnLoop<Resp>(ctx, call));
  }
  kafka::OffsetCommitRequest allowed = req;
  auto denied = ErrorTopics<Resp::Topic>(TakeDenied(access, allowed.topics, AclOperation::kRead),
                                         ErrorCode::kTopicAuthorizationFailed, index);
  auto finish = [denied](Resp& resp) {
    resp.topics.insert(resp.topics.end(), denied.begin(), denied.end());
  };
  AskCoordinator<Resp>(ctx, call, allowed.topics.empty() && !denied.empty(), finish,
                       [&](GroupCoordinator::Done<Resp> done) {
                         ctx.groups->OffsetCommit(allowed, call.header.api_version,
                                                  std::move(done));
                       });
}

namespace {

// One group of an OffsetFetch as the authorizer leaves it: nullopt when the group may not
// be described (GROUP_AUTHORIZATION_FAILED), else the topics it may not describe, taken out
// of `topics` (each partition TOPIC_AUTHORIZATION_FAILED); with every topic asked for (null)
// the coordinator's answer is filtered instead (FilterFetched).
using FetchTopics = std::optional<std::vector<kafka::OffsetFetchRequest::Topic>>;

// A topic of an OffsetFetch answered with `error` on each partition asked for.
kafka::OffsetFetchResponse::Topic FetchError(const kafka::OffsetFetchRequest::Topic& t,
                                             ErrorCode error) {
  kafka::OffsetFetchResponse::Topic o;
  o.name = t.name;
  for (int32_t p : t.partition_indexes) {
    kafka::OffsetFetchResponse::Partition part;
    part.partition_index = p;
    part.committed_offset = -1;
    part.metadata = "";
    part.error_code = error;
    o.partitions.push_back(std::move(part));
  }
  return o;
}

std::optional<std::vector<kafka::OffsetFetchResponse::Topic>> AuthorizeFetch(
    const Access& access, const std::string& group, FetchTopics& topics) {
  if (!GroupAllowed(access, group, AclOperation::kDescribe)) return std::nullopt;
  std::vector<kafka::OffsetFetchResponse::Topic> out;
  if (!topics.has_value()) return out;
  for (const auto& t : TakeDenied(access, *topics, AclOperation::kDescribe)) {
    out.push_back(FetchError(t, ErrorCode::kTopicAuthorizationFailed));
  }
  return out;
}

void FilterFetched(const Access& access, std::vector<kafka::OffsetFetchResponse::Topic>& topics) {
  std::erase_if(topics, [&](const kafka::OffsetFetchResponse::Topic& t) {
    return !access.Allows(ResourceType::kTopic, t.name, AclOperation::kDescribe);
  });
}

}  // namespace

// OffsetFetch: DESCRIBE on each group, DESCRIBE on each topic (a listing of every topic
// leaves out the others), as Kafka.
void HandleOffsetFetch(Context& ctx, const Call& call, const kafka::OffsetFetchRequest& req) {
  using Resp = kafka::OffsetFetchResponse;
  const Access access = AccessOf(ctx, call);
  const int16_t version = call.header.api_version;
  if (access.everything()) {
    return ctx.groups->OffsetFetch(req, version, AnswerOnLoop<Resp>(ctx, call));
  }
  kafka::OffsetFetchRequest allowed = req;
  if (version < 8) {
    auto denied = AuthorizeFetch(access, req.group_id, allowed.topics);
    if (!denied.has_value()) {
      Resp resp;
      resp.error_code = ErrorCode::kGroupAuthorizationFailed;
      if (version < 2 && req.topics.has_value()) {
        // v0-1 have no group error: every partition carries it.
        for (const auto& t : *req.topics) {
          resp.topics.push_back(FetchError(t, ErrorCode::kGroupAuthorizationFailed));
        }
      }
      return Reply(call.conn, call.header, resp);
    }
    const bool every_topic = !req.topics.has_value();
    return ctx.groups->OffsetFetch(
        allowed, version,
        AnswerOnLoop<Resp>(ctx, call, [access, denied = std::move(*denied), every_topic](Resp& r) {
          if (every_topic) FilterFetched(access, r.topics);
          r.topics.insert(r.topics.end(), denied.begin(), denied.end());
        }));
  }
  // v8+: per group.
  std::vector<Resp::Group> refused;
  std::map<std::string, std::vector<Resp::Topic>> denied_topics;
  std::set<std::string> every_topic;
  allowed.groups.clear();
  for (kafka::OffsetFetchRequest::Group g : req.groups) {
    auto denied = AuthorizeFetch(access, g.group_id, g.topics);
    if (!denied.has_value()) {
      Resp::Group r;
      r.group_id = g.group_id;
      r.error_code = ErrorCode::kGroupAuthorizationFailed;
      refused.push_back(std::move(r));
      continue;
    }
    if (!g.topics.has_value()) every_topic.insert(g.group_id);
    denied_topics[g.group_id] = std::move(*denied);
    allowed.groups.push_back(std::move(g));
  }
  auto finish = [access, refused, denied_topics, every_topic](Resp& r) {
    for (Resp::Group& g : r.groups) {
      if (every_topic.count(g.group_id) != 0) FilterFetched(access, g.topics);
      auto d = denied_topics.find(g.group_id);
      if (d != denied_topics.end())
        g.topics.insert(g.topics.end(), d->second.begin(), d->second.end());
    }
    r.groups.insert(r.groups.end(), refused.begin(), refused.end());
  };
  AskCoordinator<Resp>(ctx, call, allowed.groups.empty(), finish,
                       [&](GroupCoordinator::Done<Resp> done) {
                         ctx.groups->OffsetFetch(allowed, version, std::move(done));
                       });
}

// ListGroups: every group with DESCRIBE on the cluster, else those it may DESCRIBE.
void HandleListGroups(Context& ctx, const Call& call, const kafka::ListGroupsRequest& req) {
  using Resp = kafka::ListGroupsResponse;
  const Access access = AccessOf(ctx, call);
  std::function<void(Resp&)> finish;
  if (!access.AllowsCluster(AclOperation::kDescribe)) {
    finish = [access](Resp& r) {
      std::erase_if(r.groups, [&](const Resp::Group& g) {
        return !access.Allows(ResourceType::kGroup, g.group_id, AclOperation::kDescribe);
      });
    };
  }
  ctx.groups->ListGroups(req, call.header.api_version, AnswerOnLoop<Resp>(ctx, call, finish));
}

// DescribeGroups: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for the others), and
// the operations the principal may do on it when asked.
void HandleDescribeGroups(Context& ctx, const Call& call, const kafka::DescribeGroupsRequest& req) {
  using Resp = kafka::DescribeGroupsResponse;
  const Access access = AccessOf(ctx, call);
  kafka::DescribeGroupsRequest allowed = req;
  std::vector<Resp::Group> refused =
      RefuseGroups<Resp::Group>(access, req.groups, AclOperation::kDescribe, &allowed.groups);
  const bool ops = req.include_authorized_operations;
  auto finish = [access, refused, ops](Resp& r) {
    if (ops && !access.everything()) {
      for (Resp::Group& g : r.groups) {
        g.authorized_operations = access.Operations(ResourceType::kGroup, g.group_id);
      }
    }
    r.groups.insert(r.groups.end(), refused.begin(), refused.end());
  };
  AskCoordinator<Resp>(ctx, call, allowed.groups.empty() && !refused.empty(), finish,
                       [&](GroupCoordinator::Done<Resp> done) {
                         ctx.groups->DescribeGroups(allowed, call.header.api_version,
                                                    std::move(done));
                       });
}

// DeleteGroups: DELETE on each group.
void HandleDeleteGroups(Context& ctx, const Call& call, const kafka::DeleteGroupsRequest& req) {
  using Resp = kafka::DeleteGroupsResponse;
  const Access access = AccessOf(ctx, call);
  kafka::DeleteGroupsRequest allowed = req;
  std::vector<Resp::GroupResult> refused = RefuseGroups<Resp::GroupResult>(
      access, req.groups_names, AclOperation::kDelete, &allowed.groups_names);
  auto finish = [refused](Resp& r) {
    r.results.insert(r.results.end(), refused.begin(), refused.end());
  };
  AskCoordinator<Resp>(ctx, call, allowed.groups_names.empty() && !refused.empty(), finish,
                       [&](GroupCoordinator::Done<Resp> done) {
                         ctx.groups->DeleteGroups(allowed, call.header.api_version,
                                                  std::move(done));
                       });
}

// Kafka's handleTxnOffsetCommitRequest checks authorization and the partitions, then
// hands over; here the coordinator checks the partitions (partition_exists) with the
// rest. Whether the transaction holds the group (AddOffsetsToTxn) is the transaction
// coordinator's to say, through the coordinator's TxnVerifier, as in Kafka.
//
// Authorization as Kafka's: WRITE on the transactional id, READ on the group (every
// partition refused with the error), READ on each topic.
void HandleTxnOffsetCommit(Context& ctx, const Call& call,
                           const kafka::TxnOffsetCommitRequest& req) {
  using Resp = kafka::TxnOffsetCommitResponse;
  const Access access = AccessOf(ctx, call);
  auto index = [](const kafka::TxnOffsetCommitRequest::Partition& p) { return p.partition_index; };
  ErrorCode refused = ErrorCode::kNone;
  if (!access.Check(ResourceType::kTransactionalId, req.transactional_id, AclOperation::kWrite)) {
    refused = ErrorCode::kTransactionalIdAuthorizationFailed;
  } else if (!GroupAllowed(access, req.group_id, AclOperation::kRead)) {
    refused = ErrorCode::kGroupAuthorizationFailed;
  }
  if (refused != ErrorCode::kNone) {
    Resp resp;
    resp.topics = ErrorTopics<kafka::TxnTopicErrors>(req.topics, refused, index);
    return Reply(call.conn, call.header, resp);
  }
  if (access.everything()) {
    return ctx.groups->TxnOffsetCommit(req, call.header.api_version, AnswerOnLoop<Resp>(ctx, call));
  }
  kafka::TxnOffsetCommitRequest allowed = req;
  auto denied =
      ErrorTopics<kafka::TxnTopicErrors>(TakeDenied(access, allowed.topics, AclOperation::kRead),
                                         ErrorCode::kTopicAuthorizationFailed, index);
  auto finish = [denied](Resp& resp) {
    resp.topics.insert(resp.topics.end(), denied.begin(), denied.end());
  };
  AskCoordinator<Resp>(ctx, call, allowed.topics.empty() && !denied.empty(), finish,
                       [&](GroupCoordinator::Done<Resp> done) {
                         ctx.groups->TxnOffsetCommit(allowed, call.header.api_version,
                                                     std::move(done));
                       });
}

}  // namespace sluice::broker::handlers
