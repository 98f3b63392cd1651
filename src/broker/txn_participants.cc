// BrokerTxnParticipants: see txn_participants.h.
#include "broker/txn_participants.h"

#include <memory>

#include "base/crash_point.h"

namespace sluice::broker {

void TxnAnswerGather::Set(size_t i, kafka::ErrorCode e) {
  {
    std::lock_guard g(mu_);
    errors_[i] = e;
    if (--left_ > 0) return;
  }
  done_(std::move(errors_));
}

void BrokerTxnParticipants::WritePartitionMarkers(
    const TxnMarker& marker, std::vector<TopicPartition> partitions,
    std::function<void(std::vector<kafka::ErrorCode>)> done) {
  if (partitions.empty()) return done({});
  auto gather = std::make_shared<TxnAnswerGather>(partitions.size(), std::move(done));
  for (size_t i = 0; i < partitions.size(); ++i) {
    write_partition_(marker, partitions[i], [gather, i](kafka::ErrorCode e) {
      if (e == kafka::ErrorCode::kNone) CrashPoint("txn-partition-marker");
      gather->Set(i, e);
    });
  }
}

void BrokerTxnParticipants::CompleteGroupOffsets(
    const TxnMarker& marker, std::vector<std::string> groups,
    std::function<void(std::vector<kafka::ErrorCode>)> done) {
  if (groups.empty()) return done({});
  auto gather = std::make_shared<TxnAnswerGather>(groups.size(), std::move(done));
  for (size_t i = 0; i < groups.size(); ++i) {
    write_group_(marker, groups[i], [gather, i](kafka::ErrorCode e) { gather->Set(i, e); });
  }
}

}  // namespace sluice::broker
