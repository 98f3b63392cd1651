// Transaction markers on the partitions' owner shards. See txn_partition_markers.h.
#include "broker/txn_partition_markers.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "base/clock.h"
#include "base/crash_point.h"
#include "base/logging.h"
#include "broker/group_coordinator.h"
#include "broker/loggers.h"
#include "broker/replica_state.h"
#include "broker/txn_participants.h"
#include "kafka/protocol/records.h"
#include "storage/txn_index.h"

namespace sluice::broker {
namespace {

using kafka::ErrorCode;

// The markers of one call in flight: each partition writes only its own error; the last
// to finish (the counter's acquire/release orders the writes) calls `done`.
struct MarkerCall {
  TxnMarker marker;
  int32_t replication_timeout_ms = kMarkerReplicationTimeoutMs;
  std::vector<ErrorCode> errors;
  std::function<void(std::vector<ErrorCode>)> done;
  std::atomic<size_t> outstanding{0};

  void Finish(size_t i, ErrorCode e) {
    errors[i] = e;
    if (outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) done(std::move(errors));
  }
};

// On the partition's owner thread: the check, the append and the producer state. A
// replicated partition (a cluster's) takes the marker only as its leader, and answers
// once the high watermark passed it (acks=all; docs/design/0018-cluster.md, "txncluster").
void WriteOne(const std::shared_ptr<MarkerCall>& call, size_t i, Partition* part) {
  const TxnMarker& m = call->marker;
  if (part == nullptr) return call->Finish(i, ErrorCode::kNotLeaderOrFollower);
  const bool replicated = part->replica != nullptr;
  if (replicated) {
    std::string message;
    const ErrorCode e = replica::CheckAppend(*part, /*acks=*/-1, &message);
    if (e != ErrorCode::kNone) return call->Finish(i, e);
  }
  switch (part->producers.CheckMarker(m.producer_id, m.producer_epoch, m.coordinator_epoch)) {
    case ProducerStateTable::MarkerVerdict::kOk:
      break;
    case ProducerStateTable::MarkerVerdict::kFenced:
      return call->Finish(i, ErrorCode::kInvalidProducerEpoch);
    case ProducerStateTable::MarkerVerdict::kCoordinatorFenced:
      return call->Finish(i, ErrorCode::kTransactionCoordinatorFenced);
  }
  std::vector<uint8_t> batch = kafka::BuildTxnMarkerBatch(
      m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch, Clock::Real()->NowMillis());
  storage::AppendOptions ao;
  ao.leader_epoch = part->epochs.latest_epoch();
  ao.ack = storage::AckLevel::kDurable;
  const std::optional<int64_t> first = part->producers.OpenTxn(m.producer_id);
  if (!m.commit && first.has_value()) {
    // Only a transaction with data here is indexed, as Kafka's CompletedTxn.
    ao.aborted_txn = storage::AbortedTxn{m.producer_id, *first, -1,
                                         part->producers.LastStableOffsetWithout(m.producer_id)};
  }
  if (replicated) {
    // Answered by the high watermark; a failed append never lets it pass (the wait times
    // out and the coordinator writes the marker again).
    ao.on_ack = [](const Status& st, const storage::AppendInfo&) {
      if (!st.ok()) SLUICE_LOG(kLog, kWarn, "transaction marker: {}", st.ToString());
    };
    replica::PrepareAppend(*part, &ao);
  } else {
    ao.on_ack = [call, i](const Status& st, const storage::AppendInfo&) {
      if (!st.ok()) SLUICE_LOG(kLog, kWarn, "transaction marker: {}", st.ToString());
      call->Finish(i, st.ok() ? ErrorCode::kNone : ErrorCode::kKafkaStorageError);
    };
  }
  Result<storage::AppendInfo> appended = part->log->Append(batch, std::move(ao));
  if (!appended.ok()) {
    SLUICE_LOG(kLog, kWarn, "transaction marker: {}", appended.status().ToString());
    return call->Finish(i, ErrorCode::kKafkaStorageError);
  }
  // Closed at once on the owner: the producer's next batch (after the coordinator's
  // answer) sees the transaction ended even before the marker is durable. Decided
  // transactions whose markers are durable (and, replicated, under the high watermark)
  // stop being tracked, so the table stays small without readers.
  int64_t settled = part->log->durable_end_offset();
  if (replicated) settled = std::min(settled, part->replica->high_watermark);
  part->producers.LastStableOffset(settled);
  part->producers.OnMarker(m.producer_id, m.producer_epoch, m.coordinator_epoch,
                           appended->base_offset);
  if (replicated) {
    replica::AwaitHighWatermark(*part, appended->last_offset + 1, call->replication_timeout_ms,
                                [call, i](ErrorCode e) { call->Finish(i, e); });
  }
}

}  // namespace

void WriteTxnMarkers(Shards& shards, const TxnMarker& marker,
                     std::vector<TopicPartition> partitions,
                     std::function<void(std::vector<ErrorCode>)> done) {
  if (partitions.empty()) {
    done({});
    return;
  }
  auto call = std::make_shared<MarkerCall>();
  call->marker = marker;
  call->errors.assign(partitions.size(), ErrorCode::kNone);
  call->done = std::move(done);
  call->outstanding = partitions.size();
  std::shared_ptr<const MetadataSnapshot> meta = shards.Published();
  for (size_t i = 0; i < partitions.size(); ++i) {
    const TopicPartition& tp = partitions[i];
    const MetadataSnapshot::Topic* topic = meta != nullptr ? meta->Find(tp.topic) : nullptr;
    Target target = shards.TargetOf(topic, tp.topic, tp.partition);
    if (target.shard < 0) {
      call->Finish(i, ErrorCode::kUnknownTopicOrPartition);
      continue;
    }
    auto run = [&shards, call, i, target] {
      Shard& owner = shards.at(target.shard);
      auto it = owner.partitions.find(target.key);
      Partition* part = it != owner.partitions.end() && it->second->topic_id == target.topic_id
                            ? it->second.get()
                            : nullptr;
      WriteOne(call, i, part);
    };
    if (!shards.attached()) {
      run();  // before the server: the caller owns the provisional shard
    } else if (!shards.PostGated(shards.at(target.shard).loop, run)) {
      call->Finish(i, ErrorCode::kNotLeaderOrFollower);  // stopping
    }
  }
}

kafka::WriteTxnMarkersResponse MarkersAnswerFor(const kafka::WriteTxnMarkersRequest& req,
                                                ErrorCode error) {
  kafka::WriteTxnMarkersResponse resp;
  for (const auto& m : req.markers) {
    kafka::WriteTxnMarkersResponse::Marker out;
    out.producer_id = m.producer_id;
    for (const auto& t : m.topics) {
      kafka::TxnTopicErrors topic;
      topic.name = t.name;
      for (int32_t p : t.partitions) topic.partitions.push_back({p, error, {}});
      out.topics.push_back(std::move(topic));
    }
    resp.markers.push_back(std::move(out));
  }
  return resp;
}

void ServeWriteTxnMarkers(Shards& shards, const kafka::WriteTxnMarkersRequest& req,
                          std::function<void(kafka::WriteTxnMarkersResponse)> done,
                          GroupCoordinator* groups) {
  struct Served {
    std::mutex mu;
    kafka::WriteTxnMarkersResponse resp;  // guarded by mu until the last marker answered
    size_t left = 0;                      // guarded by mu
    std::function<void(kafka::WriteTxnMarkersResponse)> done;
  };
  auto served = std::make_shared<Served>();
  served->done = std::move(done);
  served->left = req.markers.size() + 1;  // one more, released below once all are asked
  auto release = [served] {
    {
      std::lock_guard g(served->mu);
      if (--served->left > 0) return;
    }
    served->done(std::move(served->resp));
  };
  served->resp = MarkersAnswerFor(req, ErrorCode::kNone);  // the errors are set below
  for (size_t k = 0; k < req.markers.size(); ++k) {
    const auto& m = req.markers[k];
    std::vector<TopicPartition> tps;
    for (const auto& t : m.topics) {
      for (int32_t p : t.partitions) tps.push_back(TopicPartition{t.name, p});
    }
    // A test hook for the cluster tests: a leader killed as a marker for the named topic
    // reaches it, before anything is written.
    for (const auto& t : m.topics) CrashPoint("txn-marker-received-" + t.name);
    const TxnMarker marker{m.producer_id, m.producer_epoch, m.transaction_result,
                           m.coordinator_epoch};
    // The partitions of the offsets log go to the group coordinator, the others to their
    // logs; the errors come back in the request's order.
    if (tps.empty()) {  // nothing to write: answered with the others
      release();
      continue;
    }
    std::vector<size_t> to_logs;
    std::vector<TopicPartition> log_tps;
    std::vector<size_t> to_groups;
    for (size_t i = 0; i < tps.size(); ++i) {
      const bool offsets = tps[i].topic == "__consumer_offsets";
      (offsets ? to_groups : to_logs).push_back(i);
      if (!offsets) log_tps.push_back(tps[i]);
    }
    auto gather = std::make_shared<TxnAnswerGather>(
        tps.size(), [served, k, release](std::vector<ErrorCode> errors) {
          {
            std::lock_guard g(served->mu);
            size_t i = 0;
            for (auto& topic : served->resp.markers[k].topics) {
              for (auto& p : topic.partitions) {
                p.error_code = i < errors.size() ? errors[i] : ErrorCode::kUnknownServerError;
                ++i;
              }
            }
          }
          release();
        });
    for (size_t i : to_groups) {
      // Never written past the group coordinator: without one (closing) it is refused.
      if (groups == nullptr) {
        gather->Set(i, ErrorCode::kNotCoordinator);
        continue;
      }
      groups->CompletePartitionTxn(tps[i].partition, marker.producer_id, marker.producer_epoch,
                                   marker.commit, marker.coordinator_epoch,
                                   [gather, i](ErrorCode e) { gather->Set(i, e); });
    }
    if (!log_tps.empty()) {
      WriteTxnMarkers(
          shards, marker, std::move(log_tps), [gather, to_logs](std::vector<ErrorCode> errors) {
            for (size_t j = 0; j < to_logs.size(); ++j) {
              gather->Set(to_logs[j],
                          j < errors.size() ? errors[j] : ErrorCode::kUnknownServerError);
            }
          });
    }
  }
  release();
}

}  // namespace sluice::broker
