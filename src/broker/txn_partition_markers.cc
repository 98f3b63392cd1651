// Transaction markers on the partitions' owner shards. See txn_partition_markers.h.
#include "broker/txn_partition_markers.h"

#include <atomic>
#include <memory>
#include <utility>

#include "base/clock.h"
#include "base/logging.h"
#include "kafka/protocol/records.h"
#include "storage/txn_index.h"

namespace sluice::broker {
namespace {

using kafka::ErrorCode;

const Logger kLog("broker");

// The markers of one call in flight: each partition writes only its own error; the last
// to finish (the counter's acquire/release orders the writes) calls `done`.
struct MarkerCall {
  TxnMarker marker;
  std::vector<ErrorCode> errors;
  std::function<void(std::vector<ErrorCode>)> done;
  std::atomic<size_t> outstanding{0};

  void Finish(size_t i, ErrorCode e) {
    errors[i] = e;
    if (outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) done(std::move(errors));
  }
};

// On the partition's owner thread: the check, the append and the producer state.
void WriteOne(const std::shared_ptr<MarkerCall>& call, size_t i, Partition* part) {
  const TxnMarker& m = call->marker;
  if (part == nullptr) return call->Finish(i, ErrorCode::kNotLeaderOrFollower);
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
  ao.on_ack = [call, i](const Status& st, const storage::AppendInfo&) {
    if (!st.ok()) SLUICE_LOG(kLog, kWarn, "transaction marker: {}", st.ToString());
    call->Finish(i, st.ok() ? ErrorCode::kNone : ErrorCode::kKafkaStorageError);
  };
  Result<storage::AppendInfo> appended = part->log->Append(batch, std::move(ao));
  if (!appended.ok()) {
    SLUICE_LOG(kLog, kWarn, "transaction marker: {}", appended.status().ToString());
    return call->Finish(i, ErrorCode::kKafkaStorageError);
  }
  // Closed at once on the owner: the producer's next batch (after the coordinator's
  // answer) sees the transaction ended even before the marker is durable. Decided
  // transactions whose markers are durable stop being tracked (the durable end is never
  // past the high watermark), so the table stays small without readers.
  part->producers.LastStableOffset(part->log->durable_end_offset());
  part->producers.OnMarker(m.producer_id, m.producer_epoch, m.coordinator_epoch,
                           appended->base_offset);
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

}  // namespace sluice::broker
