// Transactions, the client side of the transaction coordinator: InitProducerId with a
// transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions,
// ListTransactions (the coordinator answers on its thread; the answer is posted back to
// the connection's loop); WriteTxnMarkers and AddPartitionsToTxn v4+, which brokers send
// each other in a cluster (refused on one node). PRODUCER_FENCED is
// turned into INVALID_PRODUCER_EPOCH for the versions that predate it, as Kafka's
// KafkaApis does. docs/design/0016-transactions.md, "The coordinator".
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "broker/handlers/handlers.h"
#include "broker/txn_cluster.h"
#include "broker/txn_coordinator.h"
#include "broker/txn_partition_markers.h"

namespace sluice::broker::handlers {
namespace {

using kafka::ErrorCode;

// Posts `resp` to the connection's loop and answers there.
template <typename Resp>
void AnswerLater(Context& ctx, const std::shared_ptr<Connection>& conn,
                 const kafka::RequestHeader& h, Resp resp) {
  auto shared = std::make_shared<Resp>(std::move(resp));
  ctx.shards.PostGated(conn->loop(), [conn, h, shared] { Reply(conn, h, *shared); });
}

// KIP-588: versions before `first` know only INVALID_PRODUCER_EPOCH.
ErrorCode FencedFor(ErrorCode e, int16_t version, int16_t first) {
  return e == ErrorCode::kProducerFenced && version < first ? ErrorCode::kInvalidProducerEpoch : e;
}

// AddPartitionsToTxn v4+ from a partition leader of the cluster (Kafka's
// handleVerifyPartitionsInTransaction, and the batched add): each transaction answered
// by this broker's coordinator; NOT_COORDINATOR for an id this broker does not
// coordinate now (the leader asks again, after the producer's retry).
void ServeBrokerAddPartitions(Context& ctx, const Call& call,
                              const kafka::AddPartitionsToTxnRequest& req) {
  struct Served {
    std::mutex mu;
    kafka::AddPartitionsToTxnResponse resp;  // guarded by mu until the last answer
    size_t left = 0;                         // guarded by mu
  };
  auto served = std::make_shared<Served>();
  served->left = req.transactions.size() + 1;
  auto release = [&ctx, served, conn = call.conn, h = call.header] {
    {
      std::lock_guard g(served->mu);
      if (--served->left > 0) return;
    }
    AnswerLater(ctx, conn, h, std::move(served->resp));
  };
  const MetadataSnapshot& meta = ctx.shards.SnapshotFor(ctx.shards.ShardOf(call.conn->loop()));
  served->resp.results_by_transaction.resize(req.transactions.size());
  for (size_t k = 0; k < req.transactions.size(); ++k) {
    const auto& t = req.transactions[k];
    std::vector<TopicPartition> tps;
    for (const auto& topic : t.topics) {
      for (int32_t p : topic.partitions) tps.push_back(TopicPartition{topic.name, p});
    }
    // Every partition's error, in the request's order.
    auto answer = [served, k, release, id = t.transactional_id,
                   topics = t.topics](std::vector<ErrorCode> errors) {
      {
        std::lock_guard g(served->mu);
        auto& out = served->resp.results_by_transaction[k];
        out.transactional_id = id;
        size_t i = 0;
        for (const auto& topic : topics) {
          kafka::TxnTopicErrors te;
          te.name = topic.name;
          for (int32_t p : topic.partitions) {
            te.partitions.push_back(
                {p, i < errors.size() ? errors[i] : ErrorCode::kUnknownServerError, {}});
            ++i;
          }
          out.topic_results.push_back(std::move(te));
        }
      }
      release();
    };
    if (ctx.txns == nullptr) {
      answer(std::vector<ErrorCode>(tps.size(), ErrorCode::kCoordinatorNotAvailable));
    } else if (TxnCoordinatorNode(meta, t.transactional_id) != meta.node_id) {
      answer(std::vector<ErrorCode>(tps.size(), ErrorCode::kNotCoordinator));
    } else if (t.verify_only) {
      ctx.txns->Verify(t.transactional_id, t.producer_id, t.producer_epoch, tps, std::move(answer));
    } else {
      const size_t n = tps.size();
      ctx.txns->AddPartitions(
          t.transactional_id, t.producer_id, t.producer_epoch, std::move(tps),
          [answer = std::move(answer), n](ErrorCode e) { answer(std::vector<ErrorCode>(n, e)); });
    }
  }
  release();
}

}  // namespace

void HandleInitProducerIdTxn(Context& ctx, const Call& call,
                             const kafka::InitProducerIdRequest& req) {
  const int16_t version = call.header.api_version;
  kafka::InitProducerIdResponse resp;
  resp.producer_epoch = -1;
  if (ctx.txns == nullptr) {
    resp.error_code = ErrorCode::kCoordinatorNotAvailable;
    return Reply(call.conn, call.header, resp);
  }
  // Kafka: an id without an epoch (or the reverse) is an invalid request.
  if ((req.producer_id == -1) != (req.producer_epoch == -1)) {
    resp.error_code = ErrorCode::kInvalidRequest;
    return Reply(call.conn, call.header, resp);
  }
  ctx.txns->InitProducerId(*req.transactional_id, req.transaction_timeout_ms, req.producer_id,
                           req.producer_epoch,
                           [&ctx, conn = call.conn, h = call.header, version](TxnProducerResult r) {
                             kafka::InitProducerIdResponse out;
                             out.error_code = FencedFor(r.error, version, 4);
                             out.producer_id = r.producer_id;
                             out.producer_epoch = r.producer_epoch;
                             AnswerLater(ctx, conn, h, std::move(out));
                           });
}

void HandleAddPartitionsToTxn(Context& ctx, const Call& call,
                              const kafka::AddPartitionsToTxnRequest& req) {
  const int16_t version = call.header.api_version;
  kafka::AddPartitionsToTxnResponse resp;
  const Access access = AccessOf(ctx, call);
  if (version >= 4) {
    // KIP-890's batched form is for brokers (ClusterAction): a cluster's partition
    // leaders verify with it; on one node a client is refused.
    if (ctx.options.cluster.enabled() && access.AllowsCluster(auth::AclOperation::kClusterAction)) {
      return ServeBrokerAddPartitions(ctx, call, req);
    }
    resp.error_code = ErrorCode::kClusterAuthorizationFailed;
    return Reply(call.conn, call.header, resp);
  }
  // Every partition gets `error`, or its own when one is set in `own`. Kept by the
  // coordinator's answer: it holds its own copy of the topics, not the request's.
  auto answer_all = [topics = req.v3_and_below_topics](
                        ErrorCode error, const std::map<TopicPartition, ErrorCode>& own) {
    std::vector<kafka::TxnTopicErrors> out;
    for (const auto& t : topics) {
      kafka::TxnTopicErrors topic;
      topic.name = t.name;
      for (int32_t p : t.partitions) {
        auto it = own.find(TopicPartition{t.name, p});
        topic.partitions.push_back({p, it != own.end() ? it->second : error, {}});
      }
      out.push_back(std::move(topic));
    }
    return out;
  };
  // Kafka: WRITE on the transactional id (every partition refused without it), WRITE on
  // each topic (the others not attempted).
  if (!access.Check(auth::ResourceType::kTransactionalId, req.v3_and_below_transactional_id,
                    auth::AclOperation::kWrite)) {
    resp.results_by_topic_v3_and_below =
        answer_all(ErrorCode::kTransactionalIdAuthorizationFailed, {});
    return Reply(call.conn, call.header, resp);
  }
  const MetadataSnapshot& meta = ctx.shards.SnapshotFor(ctx.shards.ShardOf(call.conn->loop()));
  std::vector<TopicPartition> partitions;
  std::map<TopicPartition, ErrorCode> unknown;
  for (const auto& t : req.v3_and_below_topics) {
    const MetadataSnapshot::Topic* topic = meta.Find(t.name);
    const bool may_write =
        access.Check(auth::ResourceType::kTopic, t.name, auth::AclOperation::kWrite);
    for (int32_t p : t.partitions) {
      TopicPartition tp{t.name, p};
      if (!may_write) {
        unknown[tp] = ErrorCode::kTopicAuthorizationFailed;
      } else if (topic == nullptr || p < 0 || p >= topic->info.partitions) {
        unknown[tp] = ErrorCode::kUnknownTopicOrPartition;
      } else {
        partitions.push_back(std::move(tp));
      }
    }
  }
  if (!unknown.empty() || ctx.txns == nullptr) {
    // Kafka: any unknown or refused partition fails the whole request; the others were not
    // attempted.
    resp.results_by_topic_v3_and_below =
        answer_all(ctx.txns == nullptr ? ErrorCode::kCoordinatorNotAvailable
                                       : ErrorCode::kOperationNotAttempted,
                   unknown);
    return Reply(call.conn, call.header, resp);
  }
  ctx.txns->AddPartitions(
      req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
      req.v3_and_below_producer_epoch, std::move(partitions),
      [&ctx, conn = call.conn, h = call.header, version, answer_all](ErrorCode e) {
        kafka::AddPartitionsToTxnResponse out;
        out.results_by_topic_v3_and_below = answer_all(FencedFor(e, version, 2), {});
        AnswerLater(ctx, conn, h, std::move(out));
      });
}

void HandleAddOffsetsToTxn(Context& ctx, const Call& call,
                           const kafka::AddOffsetsToTxnRequest& req) {
  const int16_t version = call.header.api_version;
  const Access access = AccessOf(ctx, call);
  ErrorCode refused = ErrorCode::kNone;
  if (!access.Check(auth::ResourceType::kTransactionalId, req.transactional_id,
                    auth::AclOperation::kWrite)) {
    refused = ErrorCode::kTransactionalIdAuthorizationFailed;
  } else if (!access.Check(auth::ResourceType::kGroup, req.group_id, auth::AclOperation::kRead)) {
    refused = ErrorCode::kGroupAuthorizationFailed;
  } else if (ctx.txns == nullptr) {
    refused = ErrorCode::kCoordinatorNotAvailable;
  }
  if (refused != ErrorCode::kNone) {
    kafka::AddOffsetsToTxnResponse resp;
    resp.error_code = refused;
    return Reply(call.conn, call.header, resp);
  }
  ctx.txns->AddOffsets(req.transactional_id, req.producer_id, req.producer_epoch, req.group_id,
                       [&ctx, conn = call.conn, h = call.header, version](ErrorCode e) {
                         kafka::AddOffsetsToTxnResponse out;
                         out.error_code = FencedFor(e, version, 2);
                         AnswerLater(ctx, conn, h, std::move(out));
                       });
}

void HandleEndTxn(Context& ctx, const Call& call, const kafka::EndTxnRequest& req) {
  const int16_t version = call.header.api_version;
  const bool allowed = AccessOf(ctx, call).Check(auth::ResourceType::kTransactionalId,
                                                 req.transactional_id, auth::AclOperation::kWrite);
  if (!allowed || ctx.txns == nullptr) {
    kafka::EndTxnResponse resp;
    resp.error_code = allowed ? ErrorCode::kCoordinatorNotAvailable
                              : ErrorCode::kTransactionalIdAuthorizationFailed;
    resp.producer_id = -1;
    resp.producer_epoch = -1;
    return Reply(call.conn, call.header, resp);
  }
  ctx.txns->EndTxn(req.transactional_id, req.producer_id, req.producer_epoch, req.committed,
                   [&ctx, conn = call.conn, h = call.header, version](TxnProducerResult r) {
                     kafka::EndTxnResponse out;
                     out.error_code = FencedFor(r.error, version, 2);
                     out.producer_id = r.producer_id;
                     out.producer_epoch = r.producer_epoch;
                     AnswerLater(ctx, conn, h, std::move(out));
                   });
}

void HandleWriteTxnMarkers(Context& ctx, const Call& call,
                           const kafka::WriteTxnMarkersRequest& req) {
  if (ctx.options.cluster.enabled() &&
      AccessOf(ctx, call).AllowsCluster(auth::AclOperation::kClusterAction)) {
    // A cluster's transaction coordinator writing markers to the partitions this broker
    // leads: each answered once replicated (txn_partition_markers.h), or
    // NOT_LEADER_OR_FOLLOWER where this broker does not lead (the coordinator asks the
    // leader it finds next). Kafka without an authorizer takes it from anyone, as here;
    // with one, from a principal with CLUSTER_ACTION (the brokers').
    // A marker for a partition of __consumer_offsets led here completes the group
    // coordinator's pending transactional offsets there.
    ServeWriteTxnMarkers(
        ctx.shards, req,
        [&ctx, conn = call.conn, h = call.header](kafka::WriteTxnMarkersResponse out) {
          AnswerLater(ctx, conn, h, std::move(out));
        },
        ctx.groups);
    return;
  }
  // On one node markers are written by its coordinator only (ClusterAction): Kafka
  // answers a client with CLUSTER_AUTHORIZATION_FAILED for every partition, and writes
  // nothing; so does a cluster's broker to a principal without CLUSTER_ACTION.
  Reply(call.conn, call.header, MarkersAnswerFor(req, ErrorCode::kClusterAuthorizationFailed));
}

// Kafka's checks: DESCRIBE on each transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// for the others); the partitions of topics the principal may not describe are left out.
void HandleDescribeTransactions(Context& ctx, const Call& call,
                                const kafka::DescribeTransactionsRequest& req) {
  const Access access = AccessOf(ctx, call);
  std::vector<kafka::DescribeTransactionsResponse::State> refused;
  std::vector<std::string> ids;
  for (const auto& id : req.transactional_ids) {
    const bool allowed =
        access.Allows(auth::ResourceType::kTransactionalId, id, auth::AclOperation::kDescribe);
    if (allowed && ctx.txns != nullptr) {
      ids.push_back(id);
      continue;
    }
    kafka::DescribeTransactionsResponse::State s;
    s.transactional_id = id;
    s.error_code = allowed ? ErrorCode::kCoordinatorNotAvailable
                           : ErrorCode::kTransactionalIdAuthorizationFailed;
    s.producer_id = -1;
    s.producer_epoch = -1;
    s.transaction_start_time_ms = -1;
    refused.push_back(std::move(s));
  }
  if (ids.empty()) {
    kafka::DescribeTransactionsResponse resp;
    resp.transaction_states = std::move(refused);
    return Reply(call.conn, call.header, resp);
  }
  ctx.txns->Describe(ids, [&ctx, conn = call.conn, h = call.header, access,
                           refused = std::move(refused)](std::vector<TxnDescription> found) {
    kafka::DescribeTransactionsResponse out;
    out.transaction_states = refused;
    for (auto& d : found) {
      kafka::DescribeTransactionsResponse::State s;
      s.error_code = d.error;
      s.transactional_id = std::move(d.transactional_id);
      if (d.error == ErrorCode::kNone) {
        s.transaction_state = std::move(d.state);
        s.transaction_timeout_ms = d.timeout_ms;
        s.transaction_start_time_ms = d.start_ms;
        s.producer_id = d.producer_id;
        s.producer_epoch = d.producer_epoch;
        for (const auto& tp : d.partitions) {  // sorted: one entry per topic
          if (!access.Allows(auth::ResourceType::kTopic, tp.topic, auth::AclOperation::kDescribe)) {
            continue;
          }
          if (s.topics.empty() || s.topics.back().name != tp.topic) {
            s.topics.push_back({tp.topic, {}, {}});
          }
          s.topics.back().partitions.push_back(tp.partition);
        }
      } else {
        s.producer_id = -1;
        s.producer_epoch = -1;
        s.transaction_start_time_ms = -1;
      }
      out.transaction_states.push_back(std::move(s));
    }
    AnswerLater(ctx, conn, h, std::move(out));
  });
}

void HandleListTransactions(Context& ctx, const Call& call,
                            const kafka::ListTransactionsRequest& req) {
  if (ctx.txns == nullptr) {
    kafka::ListTransactionsResponse resp;
    resp.error_code = ErrorCode::kCoordinatorNotAvailable;
    return Reply(call.conn, call.header, resp);
  }
  const int64_t duration = call.header.api_version >= 1 ? req.duration_filter : -1;
  // Only the transactional ids the principal may DESCRIBE, as Kafka lists them.
  ctx.txns->List(
      req.state_filters, req.producer_id_filters, duration,
      [&ctx, conn = call.conn, h = call.header, access = AccessOf(ctx, call)](TxnListResult r) {
        kafka::ListTransactionsResponse out;
        out.error_code = r.error;
        out.unknown_state_filters = std::move(r.unknown_state_filters);
        for (auto& s : r.states) {
          if (!access.Allows(auth::ResourceType::kTransactionalId, s.transactional_id,
                             auth::AclOperation::kDescribe)) {
            continue;
          }
          out.transaction_states.push_back(
              {std::move(s.transactional_id), s.producer_id, std::move(s.state), {}});
        }
        AnswerLater(ctx, conn, h, std::move(out));
      });
}

}  // namespace sluice::broker::handlers
