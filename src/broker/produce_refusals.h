// ProduceRefusals: what one connection's producers were refused before their batches
// were written, so the batches they pipelined behind a refused one get the same answer
// (docs/design/0018-cluster.md, "dupfix").
//
// A client pipelines up to five produce requests per partition on its connection. When
// the head one is refused before it is written (NOT_LEADER_OR_FOLLOWER while this broker
// takes or drops a leadership, or has not opened the partition; NOT_ENOUGH_REPLICAS; a
// storage error) and a later one arrives once the broker would take it, that one skips
// the refused sequence: OUT_OF_ORDER_SEQUENCE_NUMBER, which librdkafka answers by bumping
// its epoch and renumbering every batch it holds — also those an old leader wrote but did
// not commit, which are then written twice. The partition's ProducerStateTable remembers
// such refusals too, but not across a close and reopen of the partition (a lost lease
// closes them all); this per-connection memory does: a batch of the same producer and
// epoch with a later sequence gets the refused one's error, at most kMaxUses times
// (the requests in flight behind it) and within kMaxAgeMs, until one of the producer's
// batches is written or answered as a duplicate on this connection.
//
// Threads: the connection's loop only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "broker/connection.h"
#include "kafka/protocol/api.h"

namespace sluice::broker {

class ProduceRefusals : public Connection::HandlerState {
 public:
  static constexpr int kMaxUses = 5;
  static constexpr int64_t kMaxAgeMs = 30'000;

  // Batch (producer_id, epoch, base_sequence) of `topic`/`partition` was refused with a
  // retriable `error` before it was written. An older refusal of the same producer there
  // is kept when its sequence is lower (the client resends from the lowest).
  void Refused(const std::string& topic, int32_t partition, int64_t producer_id, int16_t epoch,
               int32_t base_sequence, kafka::ErrorCode error, int64_t now_ms);
  // The producer's batch there was written (or was a duplicate): nothing is owed.
  void Written(const std::string& topic, int32_t partition, int64_t producer_id);
  // The error to answer this batch with instead of sending it to the partition, or kNone.
  kafka::ErrorCode Check(const std::string& topic, int32_t partition, int64_t producer_id,
                         int16_t epoch, int32_t base_sequence, int64_t now_ms,
                         int32_t* refused_sequence = nullptr);

  size_t size() const { return refused_.size(); }

 private:
  struct Entry {
    int16_t epoch;
    int32_t base_sequence;
    kafka::ErrorCode error;
    int64_t at_ms;
    int uses = 0;
  };
  using Key = std::pair<std::pair<std::string, int32_t>, int64_t>;
  static constexpr size_t kMaxEntries = 1024;
  std::map<Key, Entry> refused_;
};

}  // namespace sluice::broker
