// Topic administration and producer ids, run on the metadata controller's thread (their
// fsyncs, log opens and closes never run on a shard): CreateTopics, DeleteTopics,
// CreatePartitions, DeleteRecords, InitProducerId.
#include <fmt/format.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/logging.h"
#include "broker/handlers/handlers.h"
#include "broker/loggers.h"
#include "broker/partition.h"

namespace sluice::broker::handlers {
namespace {

using kafka::ErrorCode;

// Kafka refuses appends to and DeleteRecords of its internal topics with
// INVALID_TOPIC_EXCEPTION ("Cannot ... internal topic"); sluice refuses deleting them and
// growing them the same way (0018, "controller (session 14)"): the coordinators are their
// only writers, and a group's or transactional id's partition is its hash modulo their
// partition count.
std::string InternalTopicRefusal(std::string_view what, const std::string& name) {
  return fmt::format(
      "Cannot {} internal topic {}: the broker's coordinators keep their state in it", what, name);
}

// Authorization (each admin call below, as Kafka's): CREATE on the cluster or the topic;
// DELETE on a topic to delete it or its records; ALTER to add partitions. A refused topic
// is TOPIC_AUTHORIZATION_FAILED.
kafka::CreateTopicsResponse CreateTopics(Context& ctx, const kafka::CreateTopicsRequest& req,
                                         const Access& access) {
  kafka::CreateTopicsResponse resp;
  const bool may_create_any = access.AllowsCluster(auth::AclOperation::kCreate);
  std::map<std::string, int> seen;
  for (const auto& t : req.topics) ++seen[t.name];

  for (const auto& t : req.topics) {
    kafka::CreateTopicsResponse::Topic out;
    out.name = t.name;
    auto fail = [&](ErrorCode code, std::string message) {
      out.error_code = code;
      out.error_message = std::move(message);
      resp.topics.push_back(std::move(out));
    };
    if (seen[t.name] > 1) {
      fail(ErrorCode::kInvalidRequest,
           fmt::format("topic '{}' appears more than once in the request", t.name));
      continue;
    }
    if (!may_create_any &&
        !access.Check(auth::ResourceType::kTopic, t.name, auth::AclOperation::kCreate)) {
      fail(ErrorCode::kTopicAuthorizationFailed, kTopicDenied);
      continue;
    }
    if (IsReservedTopic(t.name)) {
      fail(ErrorCode::kTopicAlreadyExists,
           fmt::format("{} is reserved for the broker's internal use", t.name));
      continue;
    }
    if (!t.assignments.empty()) {
      fail(ErrorCode::kInvalidRequest,
           "replica assignments are not supported: sluice has one broker; give num_partitions");
      continue;
    }
    std::map<std::string, std::string> overrides;
    bool null_config = false;
    for (const auto& c : t.configs) {
      if (!c.value.has_value()) {
        fail(ErrorCode::kInvalidConfig, fmt::format("config '{}' has a null value", c.name));
        null_config = true;
        break;
      }
      overrides[c.name] = *c.value;
    }
    if (null_config) continue;

    const int32_t partitions = t.num_partitions == -1 ? 1 : t.num_partitions;
    TopicInfo info;
    // The controller checks the replication factor against the brokers it has.
    TopicError err = ctx.controller.CreateReplicatedTopic(t.name, partitions, t.replication_factor,
                                                          overrides, req.validate_only, &info);
    if (!err.ok()) {
      fail(err.code, err.message);
      continue;
    }
    out.topic_id = info.id;  // zero for validate_only, as in Kafka
    out.num_partitions = partitions;
    out.replication_factor = static_cast<int16_t>(std::max<int32_t>(t.replication_factor, 1));
    resp.topics.push_back(std::move(out));
  }
  if (!req.validate_only) ctx.controller.Publish();
  return resp;
}

kafka::DeleteTopicsResponse DeleteTopics(Context& ctx, const kafka::DeleteTopicsRequest& req,
                                         int16_t version, const Access& access) {
  kafka::DeleteTopicsResponse resp;
  std::vector<kafka::DeleteTopicsRequest::Topic> wanted = req.topics;
  if (version < 6) {
    for (const std::string& name : req.topic_names) wanted.push_back({name, {}, {}});
  }
  for (const auto& want : wanted) {
    kafka::DeleteTopicsResponse::Result out;
    out.name = want.name;
    out.topic_id = want.topic_id;
    const TopicInfo* info = want.name ? ctx.controller.FindTopic(*want.name)
                                      : ctx.controller.FindTopicById(want.topic_id);
    const std::string* named = want.name ? &*want.name : info != nullptr ? &info->name : nullptr;
    // Kafka: a topic named by id needs DESCRIBE first (refused without it, its name kept
    // to itself), then DELETE.
    const bool may_describe = named != nullptr && access.Allows(auth::ResourceType::kTopic, *named,
                                                                auth::AclOperation::kDescribe);
    if (named != nullptr &&
        ((!want.name && !may_describe) ||
         !access.Check(auth::ResourceType::kTopic, *named, auth::AclOperation::kDelete))) {
      if (!want.name && !may_describe) out.name = std::nullopt;
      out.error_code = ErrorCode::kTopicAuthorizationFailed;
      out.error_message = kTopicDenied;
      resp.responses.push_back(std::move(out));
      continue;
    }
    if (named != nullptr && IsReservedTopic(*named)) {
      out.name = *named;
      out.topic_id = info != nullptr ? info->id : want.topic_id;
      out.error_code = ErrorCode::kInvalidTopicException;
      out.error_message = InternalTopicRefusal("delete", *named);
      resp.responses.push_back(std::move(out));
      continue;
    }
    if (info == nullptr) {
      out.error_code = want.name ? ErrorCode::kUnknownTopicOrPartition : ErrorCode::kUnknownTopicId;
      out.error_message = want.name ? fmt::format("topic '{}' does not exist", *want.name)
                                    : fmt::format("no topic has id {}", want.topic_id.ToString());
      resp.responses.push_back(std::move(out));
      continue;
    }
    out.name = info->name;
    out.topic_id = info->id;
    std::string name = info->name;
    TopicError err = ctx.controller.DeleteTopic(name);
    if (!err.ok()) {
      out.error_code = err.code;
      out.error_message = err.message;
    } else {
      SLUICE_LOG(kLog, kInfo, "deleted topic {}", name);
      if (ctx.groups != nullptr) ctx.groups->OnTopicDeleted(name);
    }
    resp.responses.push_back(std::move(out));
  }
  ctx.controller.Publish();
  return resp;
}

kafka::CreatePartitionsResponse CreatePartitions(Context& ctx,
                                                 const kafka::CreatePartitionsRequest& req,
                                                 const Access& access) {
  kafka::CreatePartitionsResponse resp;
  std::map<std::string, int> seen;
  for (const auto& t : req.topics) ++seen[t.name];
  for (const auto& t : req.topics) {
    kafka::CreatePartitionsResponse::Result out;
    out.name = t.name;
    auto fail = [&](ErrorCode code, std::string message) {
      out.error_code = code;
      out.error_message = std::move(message);
      resp.results.push_back(std::move(out));
    };
    if (seen[t.name] > 1) {
      fail(ErrorCode::kInvalidRequest, fmt::format("topic '{}' appears more than once", t.name));
      continue;
    }
    if (!access.Check(auth::ResourceType::kTopic, t.name, auth::AclOperation::kAlter)) {
      fail(ErrorCode::kTopicAuthorizationFailed, kTopicDenied);
      continue;
    }
    if (IsReservedTopic(t.name)) {
      fail(ErrorCode::kInvalidTopicException, InternalTopicRefusal("add partitions to", t.name));
      continue;
    }
    const TopicInfo* info = ctx.controller.FindTopic(t.name);
    if (info == nullptr) {
      fail(ErrorCode::kUnknownTopicOrPartition, fmt::format("topic '{}' does not exist", t.name));
      continue;
    }
    if (t.count <= info->partitions) {
      fail(ErrorCode::kInvalidPartitions,
           fmt::format("topic '{}' has {} partitions; the new count must be larger, not {}", t.name,
                       info->partitions, t.count));
      continue;
    }
    if (t.assignments.has_value() && !t.assignments->empty()) {
      // Only the one broker can hold a replica: [[1], [1], ...], one per new partition.
      bool ok = static_cast<int32_t>(t.assignments->size()) == t.count - info->partitions;
      for (const auto& a : *t.assignments) ok = ok && a.broker_ids == std::vector<int32_t>{kNodeId};
      if (!ok) {
        fail(ErrorCode::kInvalidReplicaAssignment,
             fmt::format("assignments must list broker {} once for each of the {} new partitions",
                         kNodeId, t.count - info->partitions));
        continue;
      }
    }
    TopicError err = ctx.controller.AddPartitions(t.name, t.count, req.validate_only);
    if (!err.ok()) {
      fail(err.code, err.message);
      continue;
    }
    resp.results.push_back(std::move(out));
  }
  if (!req.validate_only) ctx.controller.Publish();
  return resp;
}

// DeleteRecords moves log starts durably (an fsync): on the controller's thread, on the
// thread-safe log, not on the owners.
kafka::DeleteRecordsResponse DeleteRecords(Context& ctx, const kafka::DeleteRecordsRequest& req,
                                           const Access& access) {
  kafka::DeleteRecordsResponse resp;
  for (const auto& t : req.topics) {
    kafka::DeleteRecordsResponse::Topic tout;
    tout.name = t.name;
    const bool may_delete =
        access.Check(auth::ResourceType::kTopic, t.name, auth::AclOperation::kDelete);
    for (const auto& p : t.partitions) {
      kafka::DeleteRecordsResponse::Partition out;
      out.partition_index = p.partition_index;
      out.low_watermark = -1;
      if (!may_delete) {
        out.error_code = ErrorCode::kTopicAuthorizationFailed;
        tout.partitions.push_back(out);
        continue;
      }
      if (IsReservedTopic(t.name)) {  // Kafka: "Cannot delete records of internal topic"
        out.error_code = ErrorCode::kInvalidTopicException;
        tout.partitions.push_back(out);
        continue;
      }
      storage::PartitionLog* log = ctx.controller.LogOf(t.name, p.partition_index);
      if (log == nullptr) {
        out.error_code = ErrorCode::kUnknownTopicOrPartition;
        tout.partitions.push_back(out);
        continue;
      }
      int64_t hw = HighWatermark(ctx.options.flush_policy, *log);
      // A replicated partition: its leader's replicated high watermark (0018).
      if (ErrorCode e = replica::DeleteRecordsBound(ctx, t.name, p.partition_index, &hw);
          e != ErrorCode::kNone) {
        out.error_code = e;
        tout.partitions.push_back(out);
        continue;
      }
      // -1 means the high watermark, as in Kafka.
      const int64_t target = p.offset == -1 ? hw : p.offset;
      if (target < 0 || target > hw) {
        out.error_code = ErrorCode::kOffsetOutOfRange;
        tout.partitions.push_back(out);
        continue;
      }
      Result<int64_t> start = log->DeleteRecordsBefore(target);
      if (!start.ok()) {
        SLUICE_LOG(kLog, kError, "DeleteRecords {}-{}: {}", t.name, p.partition_index,
                   start.status().ToString());
        out.error_code = start.status().code() == StatusCode::kOutOfRange
                             ? ErrorCode::kOffsetOutOfRange
                             : ErrorCode::kKafkaStorageError;
      } else {
        out.low_watermark = *start;
        // A tiered topic's start below the local log (design 0025): the remote segments
        // below it go (the uploader), and reads below it are out of range from now on.
        const TopicInfo* info = ctx.controller.FindTopic(t.name);
        if (target < *start && ctx.remote_reader != nullptr && info != nullptr &&
            info->config.remote_storage_enable) {
          std::shared_ptr<const RemoteSegmentList> remote =
              ctx.remote_reader->segments().Get(info->id, p.partition_index);
          if (remote != nullptr && remote->start >= 0 && remote->start < *start)
            out.low_watermark = std::max(target, remote->start);
        }
      }
      tout.partitions.push_back(out);
    }
    resp.topics.push_back(std::move(tout));
  }
  return resp;
}

// Idempotent producers only (no transactions). A producer without a transactional id
// always gets a new id at epoch 0, also when it names the id and epoch it has (KIP-360,
// v3+), as Kafka's TransactionCoordinator answers it: bumping the epoch of a named id
// would let a client take an id never issued, or one another producer holds, and fence
// that producer (docs/design/0002-broker-plan.md, decision 17).
kafka::InitProducerIdResponse InitProducerId(Context& ctx,
                                             const kafka::InitProducerIdRequest& req) {
  kafka::InitProducerIdResponse resp;
  if (req.transactional_id.has_value()) {
    // No transaction coordinator runs (the broker is closing).
    resp.error_code = ErrorCode::kCoordinatorNotAvailable;
    return resp;
  }
  Result<int64_t> id = ctx.controller.AllocateProducerId();
  if (!id.ok()) {
    SLUICE_LOG(kLog, kError, "reserving producer ids: {}", id.status().ToString());
    resp.error_code = ErrorCode::kKafkaStorageError;
    return resp;
  }
  resp.producer_id = *id;
  resp.producer_epoch = 0;
  return resp;
}

// A topic a successful request changed, and what this broker's metadata must show before
// the answer goes (Kafka's DelayedCreatePartitions / DelayedDeleteTopics): `partitions`
// partitions of topic `id` with leaders, or (`gone`) no topic `id` under the name.
struct Settling {
  size_t index;  // the topic's entry in the response
  std::string name;
  kafka::Uuid id;
  int32_t partitions = 0;
  bool gone = false;
};

bool Settled(const Controller& controller, const Settling& s) {
  if (!s.gone) return controller.TopicLed(s.name, s.id, s.partitions);
  const TopicInfo* info = controller.FindTopic(s.name);
  return info == nullptr || info->id != s.id;
}

// Answers `body` once every `settling` topic is settled in this broker's metadata, or at
// `timeout_ms` with `time_out(body, index)` for each one that is not (REQUEST_TIMED_OUT,
// the change still under way); at once when nothing is to wait for or timeout_ms <= 0
// (Kafka answers those without waiting). Runs on the controller's thread, never blocking it.
template <typename Body, typename TimeOut>
void AnswerOnceSettled(Context& ctx, const std::shared_ptr<Connection>& conn,
                       const kafka::RequestHeader& h, std::shared_ptr<Body> body,
                       std::vector<Settling> settling, int32_t timeout_ms, TimeOut time_out) {
  auto reply = [&ctx, conn, h, body] {
    ctx.shards.PostGated(conn->loop(), [conn, h, body] { Reply(conn, h, *body); });
  };
  if (settling.empty() || timeout_ms <= 0) {
    reply();
    return;
  }
  auto all = [&ctx, settling] {
    for (const Settling& s : settling) {
      if (!Settled(ctx.controller, s)) return false;
    }
    return true;
  };
  ctx.controller.AwaitMetadata(all, timeout_ms,
                               [&ctx, settling, body, time_out, reply](bool settled) {
                                 if (!settled) {
                                   for (const Settling& s : settling) {
                                     if (!Settled(ctx.controller, s)) time_out(*body, s.index);
                                   }
                                 }
                                 reply();
                               });
}

constexpr std::string_view kStillUnderWay =
    "the request timed out before this broker's metadata showed the change; it goes on";

}  // namespace

void HandleCreateTopics(Context& ctx, const Call& call, const kafka::CreateTopicsRequest& req) {
  ctx.controller.Post([&ctx, conn = call.conn, h = call.header, req, access = AccessOf(ctx, call)] {
    auto body = std::make_shared<kafka::CreateTopicsResponse>(CreateTopics(ctx, req, access));
    std::vector<Settling> settling;
    for (size_t i = 0; i < body->topics.size() && !req.validate_only; ++i) {
      const auto& t = body->topics[i];
      if (t.error_code == ErrorCode::kNone) {
        settling.push_back({i, t.name, t.topic_id, t.num_partitions, false});
      }
    }
    AnswerOnceSettled(ctx, conn, h, body, std::move(settling), req.timeout_ms,
                      [](kafka::CreateTopicsResponse& r, size_t i) {
                        r.topics[i].error_code = ErrorCode::kRequestTimedOut;
                        r.topics[i].error_message = std::string(kStillUnderWay);
                      });
  });
}

void HandleDeleteTopics(Context& ctx, const Call& call, const kafka::DeleteTopicsRequest& req) {
  ctx.controller.Post([&ctx, conn = call.conn, h = call.header, req, access = AccessOf(ctx, call)] {
    auto body = std::make_shared<kafka::DeleteTopicsResponse>(
        DeleteTopics(ctx, req, h.api_version, access));
    std::vector<Settling> settling;
    for (size_t i = 0; i < body->responses.size(); ++i) {
      const auto& t = body->responses[i];
      if (t.error_code == ErrorCode::kNone && t.name.has_value()) {
        settling.push_back({i, *t.name, t.topic_id, 0, true});
      }
    }
    AnswerOnceSettled(ctx, conn, h, body, std::move(settling), req.timeout_ms,
                      [](kafka::DeleteTopicsResponse& r, size_t i) {
                        r.responses[i].error_code = ErrorCode::kRequestTimedOut;
                        r.responses[i].error_message = std::string(kStillUnderWay);
                      });
  });
}

void HandleCreatePartitions(Context& ctx, const Call& call,
                            const kafka::CreatePartitionsRequest& req) {
  ctx.controller.Post([&ctx, conn = call.conn, h = call.header, req, access = AccessOf(ctx, call)] {
    auto body =
        std::make_shared<kafka::CreatePartitionsResponse>(CreatePartitions(ctx, req, access));
    std::vector<Settling> settling;
    for (size_t i = 0; i < body->results.size() && !req.validate_only; ++i) {
      const auto& r = body->results[i];
      const TopicInfo* info = ctx.controller.FindTopic(r.name);
      if (r.error_code != ErrorCode::kNone || info == nullptr) continue;
      for (const auto& t : req.topics) {
        if (t.name == r.name) settling.push_back({i, r.name, info->id, t.count, false});
      }
    }
    AnswerOnceSettled(ctx, conn, h, body, std::move(settling), req.timeout_ms,
                      [](kafka::CreatePartitionsResponse& r, size_t i) {
                        r.results[i].error_code = ErrorCode::kRequestTimedOut;
                        r.results[i].error_message = std::string(kStillUnderWay);
                      });
  });
}

void HandleDeleteRecords(Context& ctx, const Call& call, const kafka::DeleteRecordsRequest& req) {
  ToController(ctx, call, [&ctx, req, access = AccessOf(ctx, call)] {
    return DeleteRecords(ctx, req, access);
  });
}

void HandleInitProducerId(Context& ctx, const Call& call, const kafka::InitProducerIdRequest& req) {
  // With a transactional id: the transaction coordinator. Without: a new id from the
  // controller for every request (decision 17 of 0002).
  const Access access = AccessOf(ctx, call);
  if (req.transactional_id.has_value()) {
    // Kafka: WRITE on the transactional id.
    if (!access.Check(auth::ResourceType::kTransactionalId, *req.transactional_id,
                      auth::AclOperation::kWrite)) {
      kafka::InitProducerIdResponse resp;
      resp.producer_epoch = -1;
      resp.error_code = ErrorCode::kTransactionalIdAuthorizationFailed;
      return Reply(call.conn, call.header, resp);
    }
    if (ctx.txns != nullptr) return HandleInitProducerIdTxn(ctx, call, req);
  } else if (!access.AllowsCluster(auth::AclOperation::kIdempotentWrite) &&
             !access.AllowsAny(auth::ResourceType::kTopic, auth::AclOperation::kWrite)) {
    // An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
    // (KIP-679).
    (void)access.CheckCluster(auth::AclOperation::kIdempotentWrite);  // logs the denial
    kafka::InitProducerIdResponse resp;
    resp.producer_epoch = -1;
    resp.error_code = ErrorCode::kClusterAuthorizationFailed;
    return Reply(call.conn, call.header, resp);
  }
  ToController(ctx, call, [&ctx, req] { return InitProducerId(ctx, req); });
}

}  // namespace sluice::broker::handlers
