// Transactions, the client side of the transaction coordinator: InitProducerId with a
// transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn (the coordinator answers
// on its thread; the answer is posted back to the connection's loop). PRODUCER_FENCED is
// turned into INVALID_PRODUCER_EPOCH for the versions that predate it, as Kafka's
// KafkaApis does. docs/design/0016-transactions.md, "The coordinator".
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "broker/handlers/handlers.h"
#include "broker/txn_coordinator.h"

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
  if (version >= 4) {
    // KIP-890's batched form is for brokers (ClusterAction); a client is refused.
    resp.error_code = ErrorCode::kClusterAuthorizationFailed;
    return Reply(call.conn, call.header, resp);
  }
  // Every partition gets `error`, or its own when one is set in `own`.
  auto answer_all = [&req](ErrorCode error, const std::map<TopicPartition, ErrorCode>& own) {
    std::vector<kafka::TxnTopicErrors> topics;
    for (const auto& t : req.v3_and_below_topics) {
      kafka::TxnTopicErrors out;
      out.name = t.name;
      for (int32_t p : t.partitions) {
        auto it = own.find(TopicPartition{t.name, p});
        out.partitions.push_back({p, it != own.end() ? it->second : error, {}});
      }
      topics.push_back(std::move(out));
    }
    return topics;
  };
  const MetadataSnapshot& meta = ctx.shards.SnapshotFor(ctx.shards.ShardOf(call.conn->loop()));
  std::vector<TopicPartition> partitions;
  std::map<TopicPartition, ErrorCode> unknown;
  for (const auto& t : req.v3_and_below_topics) {
    const MetadataSnapshot::Topic* topic = meta.Find(t.name);
    for (int32_t p : t.partitions) {
      TopicPartition tp{t.name, p};
      if (topic == nullptr || p < 0 || p >= topic->info.partitions) {
        unknown[tp] = ErrorCode::kUnknownTopicOrPartition;
      } else {
        partitions.push_back(std::move(tp));
      }
    }
  }
  if (!unknown.empty() || ctx.txns == nullptr) {
    // Kafka: any unknown partition fails the whole request; the others were not attempted.
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
  if (ctx.txns == nullptr) {
    kafka::AddOffsetsToTxnResponse resp;
    resp.error_code = ErrorCode::kCoordinatorNotAvailable;
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
  if (ctx.txns == nullptr) {
    kafka::EndTxnResponse resp;
    resp.error_code = ErrorCode::kCoordinatorNotAvailable;
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

}  // namespace sluice::broker::handlers
