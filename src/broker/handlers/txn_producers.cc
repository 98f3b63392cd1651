// DescribeProducers (KIP-664): the producers each partition's owner knows — epoch, last
// sequence and timestamp, the coordinator epoch of the last marker and the first offset
// of the producer's open transaction (docs/design/0016-transactions.md, "Partitions").
#include <memory>
#include <utility>
#include <vector>

#include "broker/handlers/handlers.h"

namespace sluice::broker::handlers {

void HandleDescribeProducers(Context& ctx, const Call& call,
                             const kafka::DescribeProducersRequest& req) {
  using kafka::ErrorCode;
  const std::shared_ptr<Connection>& conn = call.conn;
  const kafka::RequestHeader& h = call.header;
  Shard& home = ctx.shards.ShardOf(conn->loop());
  const MetadataSnapshot& meta = ctx.shards.SnapshotFor(home);
  struct State {
    kafka::DescribeProducersResponse resp;
    std::vector<kafka::DescribeProducersResponse::Partition*> outs;  // per target
  };
  auto st = std::make_shared<State>();
  std::vector<Target> targets;
  std::vector<std::pair<size_t, size_t>> where;
  const Access access = AccessOf(ctx, call);  // READ on each topic, as Kafka
  for (size_t t = 0; t < req.topics.size(); ++t) {
    const kafka::TxnTopic& want = req.topics[t];
    kafka::DescribeProducersResponse::Topic tout;
    tout.name = want.name;
    const MetadataSnapshot::Topic* info = meta.Find(want.name);
    const bool allowed =
        access.Check(auth::ResourceType::kTopic, want.name, auth::AclOperation::kRead);
    for (size_t i = 0; i < want.partitions.size(); ++i) {
      kafka::DescribeProducersResponse::Partition out;
      out.partition_index = want.partitions[i];
      if (!allowed) {
        out.error_code = ErrorCode::kTopicAuthorizationFailed;
        out.error_message = kTopicDenied;
        tout.partitions.push_back(std::move(out));
        continue;
      }
      targets.push_back(ctx.shards.TargetOf(info, want.name, out.partition_index));
      where.emplace_back(t, i);
      tout.partitions.push_back(std::move(out));
    }
    st->resp.topics.push_back(std::move(tout));
  }
  for (auto [t, i] : where) st->outs.push_back(&st->resp.topics[t].partitions[i]);
  ctx.shards.VisitOwners(
      home, std::move(targets),
      [st](Partition* part, size_t k) {
        kafka::DescribeProducersResponse::Partition& out = *st->outs[k];
        if (part == nullptr) {
          out.error_code = ErrorCode::kUnknownTopicOrPartition;
          out.error_message = "no such partition";
          return;
        }
        for (const ProducerStateTable::ProducerView& v : part->producers.Describe()) {
          kafka::DescribeProducersResponse::Producer p;
          p.producer_id = v.producer_id;
          p.producer_epoch = v.epoch;
          p.last_sequence = v.last_sequence;
          p.last_timestamp = v.last_timestamp;
          p.coordinator_epoch = v.coordinator_epoch;
          p.current_txn_start_offset = v.txn_start_offset;
          out.active_producers.push_back(std::move(p));
        }
      },
      [conn, h, st] { Reply(conn, h, st->resp); });
}

}  // namespace sluice::broker::handlers
