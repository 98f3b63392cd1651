// The cluster as clients see it: ApiVersions, Metadata (answered from the shard's
// snapshot; a missing topic that may be auto-created goes to the controller's thread)
// and DescribeCluster.
#include <string>
#include <vector>

#include "broker/handlers/handlers.h"

namespace sluice::broker::handlers {
namespace {

using kafka::ErrorCode;

// A partition of a cluster as etcd holds it (the snapshot's Leadership); a partition without
// a leader, or whose state is not written yet, is LEADER_NOT_AVAILABLE, as Kafka answers it.
// A leader without the request's listener is LISTENER_NOT_FOUND from Metadata v6 on
// (LEADER_NOT_AVAILABLE before), Kafka's answer: the client cannot reach it from here.
void ClusterPartition(const MetadataSnapshot& meta, const MetadataSnapshot::Topic& t, int32_t p,
                      int16_t version, std::string_view listener,
                      kafka::MetadataResponse::Partition* part) {
  if (static_cast<size_t>(p) >= t.partitions.size()) {
    part->error_code = ErrorCode::kLeaderNotAvailable;
    part->leader_id = -1;
    return;
  }
  const MetadataSnapshot::Leadership& l = t.partitions[static_cast<size_t>(p)];
  part->leader_id = l.leader;
  part->leader_epoch = l.leader_epoch;
  part->replica_nodes = l.replicas;
  part->isr_nodes = l.isr;
  part->offline_replicas = l.offline;
  if (l.leader < 0) {
    part->error_code = ErrorCode::kLeaderNotAvailable;
    return;
  }
  const MetadataSnapshot::Broker* leader = meta.FindBroker(l.leader);
  if (leader != nullptr && !leader->AddressFor(listener).has_value()) {
    part->error_code = version >= 6 ? ErrorCode::kListenerNotFound : ErrorCode::kLeaderNotAvailable;
    part->leader_id = -1;
  }
}

// The live brokers a client on `listener` can reach, at that listener's address.
template <typename Out>
void ClusterBrokers(const MetadataSnapshot& meta, std::string_view listener, Out* out) {
  for (const MetadataSnapshot::Broker& b : meta.brokers) {
    if (auto address = b.AddressFor(listener)) {
      out->push_back({b.node_id, std::string(address->first), address->second, std::nullopt, {}});
    }
  }
}

// The controller a client on `listener` is told of: the elected one when it has that
// listener, else this broker, else any broker there is (-1 with none). Every broker takes
// the admin requests clients send a controller (topic changes are forwarded through etcd),
// as a KRaft broker answers with an alive broker and forwards; and librdkafka, told -1 or
// a broker it cannot reach, waits for a controller without asking Metadata again until
// its request times out (seen right after a cluster started, before the view held the
// controller's key).
int32_t ReachableController(const MetadataSnapshot& meta, std::string_view listener) {
  int32_t any = -1;
  bool self = false;
  for (const MetadataSnapshot::Broker& b : meta.brokers) {
    if (!b.AddressFor(listener).has_value()) continue;
    if (b.node_id == meta.controller_id) return b.node_id;
    if (b.node_id == meta.node_id) self = true;
    if (any == -1) any = b.node_id;
  }
  return self ? meta.node_id : any;
}

// The response from `meta`; `missing` gets the names that do not exist and may be
// auto-created. What `access` may not DESCRIBE is left out of a listing of every topic,
// and TOPIC_AUTHORIZATION_FAILED when named (whether or not it exists, as Kafka); a
// missing topic is auto-created only with CREATE on the cluster or on it.
kafka::MetadataResponse MetadataFrom(const Context& ctx, const MetadataSnapshot& meta,
                                     const kafka::MetadataRequest& req, int16_t version,
                                     std::string_view listener, const Access& access,
                                     std::vector<std::string>* missing) {
  using auth::AclOperation;
  using auth::ResourceType;
  kafka::MetadataResponse resp;
  resp.cluster_id = ctx.cluster_id;
  resp.controller_id = meta.cluster ? ReachableController(meta, listener) : kNodeId;
  if (req.include_cluster_authorized_operations && version <= 10) {
    resp.cluster_authorized_operations =
        access.AllowsCluster(AclOperation::kDescribe)
            ? access.Operations(ResourceType::kCluster, auth::kClusterName)
            : 0;
  }
  auto may_describe = [&access](std::string_view name) {
    return access.Allows(ResourceType::kTopic, name, AclOperation::kDescribe);
  };

  auto describe = [&meta, &req, &access, version, listener](const MetadataSnapshot::Topic& t) {
    kafka::MetadataResponse::Topic out;
    out.name = t.info.name;
    out.topic_id = t.info.id;
    if (req.include_topic_authorized_operations) {
      out.topic_authorized_operations = access.Operations(ResourceType::kTopic, t.info.name);
    }
    for (int32_t p = 0; p < t.info.partitions; ++p) {
      kafka::MetadataResponse::Partition part;
      part.partition_index = p;
      if (meta.cluster) {
        ClusterPartition(meta, t, p, version, listener, &part);
      } else {
        part.leader_id = kNodeId;
        part.leader_epoch = t.leader_epochs[static_cast<size_t>(p)];
        part.replica_nodes = {kNodeId};
        part.isr_nodes = {kNodeId};
      }
      out.partitions.push_back(std::move(part));
    }
    return out;
  };

  if (meta.cluster) {
    ClusterBrokers(meta, listener, &resp.brokers);
  } else {
    const auto [host, port] = meta.AdvertisedFor(listener);
    resp.brokers.push_back({kNodeId, std::string(host), port, std::nullopt, {}});
  }
  // Null asks for every topic, and so does an empty array in v0.
  const bool all = !req.topics.has_value() || (version == 0 && req.topics->empty());
  if (all) {
    for (const auto& [name, t] : meta.topics) {
      if (may_describe(name)) resp.topics.push_back(describe(t));
    }
    return resp;
  }
  const bool may_create_any = access.AllowsCluster(AclOperation::kCreate);
  for (const kafka::MetadataRequest::Topic& want : *req.topics) {
    const MetadataSnapshot::Topic* found = nullptr;
    kafka::MetadataResponse::Topic out;
    out.name = want.name;
    out.topic_id = want.topic_id;
    if (want.name.has_value()) {
      found = meta.Find(*want.name);
      // Named, and answered with an error when denied: logged (a listing of all is not).
      if (!access.Check(ResourceType::kTopic, *want.name, AclOperation::kDescribe)) {
        found = nullptr;
        out.error_code = ErrorCode::kTopicAuthorizationFailed;
      } else if (found == nullptr) {
        // Kafka asks for CREATE only where it would create (auto.create.topics.enable).
        const bool auto_create =
            ctx.options.auto_create_topics && (version < 4 || req.allow_auto_topic_creation);
        out.error_code = ValidateTopicName(*want.name).ok() ? ErrorCode::kUnknownTopicOrPartition
                                                            : ErrorCode::kInvalidTopicException;
        if (auto_create && !may_create_any &&
            !access.Check(ResourceType::kTopic, *want.name, AclOperation::kCreate)) {
          out.error_code = ErrorCode::kTopicAuthorizationFailed;
        } else if (auto_create) {
          missing->push_back(*want.name);
        }
      }
    } else {
      found = meta.FindById(want.topic_id);
      if (found == nullptr) {
        out.error_code = ErrorCode::kUnknownTopicId;
      } else if (!access.Check(ResourceType::kTopic, found->info.name, AclOperation::kDescribe)) {
        found = nullptr;
        out.error_code = ErrorCode::kTopicAuthorizationFailed;
      }
    }
    resp.topics.push_back(found != nullptr ? describe(*found) : std::move(out));
  }
  return resp;
}

}  // namespace

void HandleApiVersions(Context&, const Call& call, const kafka::ApiVersionsRequest&) {
  kafka::ApiVersionsResponse resp;
  for (const kafka::ApiVersionRange& supported : kafka::SupportedApis()) {
    const kafka::ApiVersionRange a = kafka::AdvertisedRange(supported);  // Produce from v0
    resp.api_keys.push_back({static_cast<int16_t>(a.key), a.min, a.max, {}});
  }
  Reply(call.conn, call.header, resp);
}

void HandleMetadata(Context& ctx, const Call& call, const kafka::MetadataRequest& req) {
  std::vector<std::string> missing;
  Access access = AccessOf(ctx, call);
  kafka::MetadataResponse resp =
      MetadataFrom(ctx, ctx.shards.SnapshotFor(ctx.shards.ShardOf(call.conn->loop())), req,
                   call.header.api_version, call.conn->listener(), access, &missing);
  if (missing.empty() || !ctx.options.auto_create_topics) {
    Reply(call.conn, call.header, resp);
    return;
  }
  // Topics to create: the controller creates them and answers from its snapshot.
  ToController(ctx, call,
               [&ctx, req, missing, v = call.header.api_version, listener = call.conn->listener(),
                access = std::move(access)] {
                 bool created = false;
                 for (const std::string& name : missing) {
                   if (ctx.controller.FindTopic(name) == nullptr)
                     created |= ctx.controller.AutoCreateTopic(name);
                 }
                 if (created) ctx.controller.Publish();
                 std::vector<std::string> still;
                 return MetadataFrom(ctx, *ctx.shards.Published(), req, v, listener, access,
                                     &still);
               });
}

void HandleDescribeCluster(Context& ctx, const Call& call,
                           const kafka::DescribeClusterRequest& req) {
  const MetadataSnapshot& meta = ctx.shards.SnapshotFor(ctx.shards.ShardOf(call.conn->loop()));
  kafka::DescribeClusterResponse resp;
  resp.cluster_id = ctx.cluster_id;
  if (req.include_cluster_authorized_operations) {
    // Kafka: the operations only for a principal that may DESCRIBE the cluster, else none.
    const Access access = AccessOf(ctx, call);
    resp.cluster_authorized_operations =
        access.AllowsCluster(auth::AclOperation::kDescribe)
            ? access.Operations(auth::ResourceType::kCluster, auth::kClusterName)
            : 0;
  }
  if (meta.cluster) {
    resp.controller_id = ReachableController(meta, call.conn->listener());
    ClusterBrokers(meta, call.conn->listener(), &resp.brokers);
  } else {
    resp.controller_id = kNodeId;
    const auto [host, port] = meta.AdvertisedFor(call.conn->listener());
    resp.brokers.push_back({kNodeId, std::string(host), port, std::nullopt, {}});
  }
  Reply(call.conn, call.header, resp);
}

}  // namespace sluice::broker::handlers
