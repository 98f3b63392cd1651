// KafkaSource: a pipeline's Source (source.h) over a librdkafka consumer group member
// (kafka/client/consumer.h), on any Kafka cluster.
//
// It owns what is particular to librdkafka (docs/design/0006-pipeline-runner.md #7):
// - the consumer's properties: the pipeline's connection keys, group.id,
//   auto.offset.reset, no auto commit, and librdkafka's own bounds set to a quarter of the
//   read-ahead bound (fetch.prefetch x fetch.max_bytes);
// - the read-ahead: what Poll returned and is not yet in a batch, held up to a quarter of
//   the bound; draining librdkafka's queue stops while it holds that and starts again at
//   an eighth;
// - the wake-up of librdkafka 2.0's sleeping fetcher: a watermark request to a partition's
//   leader after the first drain that follows a full spell, and when the pipeline has
//   waited 5 ms short of a batch while the broker has more;
// - rebalances: a revocation is deferred (Consumer::CompleteRevocation) until the runner
//   acknowledges it; records of revoked or lost partitions polled before the event are
//   dropped (each polled batch carries the revocation count from before its Poll);
// - the rewind of an exactly-once pipeline whose transaction was lost: everything polled
//   dropped, each assigned partition sought to the group's committed offset.
//
// Lifecycle and thread: as Source; made in PipelineRunner::Run.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kafka/client/consumer.h"
#include "pipeline/pipeline_config.h"
#include "pipeline/source.h"

namespace sluice::pipeline {

// The librdkafka properties of the pipeline's consumer (docs/design/0006 #7).
kafka::client::Config KafkaSourceProperties(const KafkaSourceConfig& source);

class KafkaSource final : public Source {
 public:
  // `pipeline`: the pipeline's name, for log lines.
  static Result<std::unique_ptr<KafkaSource>> Create(const KafkaSourceConfig& config,
                                                     std::string pipeline, SourceCounters counters);
  ~KafkaSource() override;

  Status Start(SourceListener* listener, bool arrivals) override;
  SourceStep NextBatch(size_t max_messages, SteadyTime deadline) override;
  std::span<const kafka::client::Message> InHand() const override { return pending_; }
  void BatchDone() override;
  void AcknowledgeRevocation() override;
  Status Commit(const std::vector<kafka::client::TopicPartition>& offsets,
                CommitMode mode) override;
  Result<std::vector<kafka::client::PartitionLag>> Lag() const override;
  // Aborted while the consumer is no member of the group (kafka::client::Consumer::MemberId
  // is empty: its session was lost and it has not rejoined yet): an exactly-once sink
  // must not commit offsets with that metadata, whose generation the group coordinator
  // does not check.
  Result<kafka::client::GroupMetadata> GroupMetadata() const override;
  // The group's committed offsets (stable ones: OffsetFetch require_stable, as the
  // consumer reads read_committed), then a seek of each assigned partition there.
  Status Rewind(std::chrono::milliseconds timeout) override;
  void Close() override;

 private:
  KafkaSource(std::string pipeline, SourceCounters counters);
  void OnRebalance(kafka::client::RebalanceEvent& e);
  // Moves records from the read-ahead into the batch in hand, up to `max_messages_`;
  // counts them, and sets the read-ahead's full flag.
  void Take();
  // After the batch in hand is done (or dropped): releases the polled batches it used up.
  void ReleaseTaken();
  // Drops everything polled (a lost assignment, Close, Rewind).
  void DropAll();
  // Notes the first offset of each partition in `polled` not yet in `first_read_`.
  void NoteFirstRead(const kafka::client::MessageBatch& polled);
  // A watermark request to each partition's leader that has more: wakes its fetcher.
  void WakeFetchers();
  // librdkafka's statistics (inside Poll): each partition's last stable offset.
  void OnStats(std::string_view json);

  const std::string pipeline_;
  SourceCounters counters_;
  std::unique_ptr<kafka::client::Consumer> consumer_;
  std::vector<std::string> topics_;
  SourceListener* listener_ = nullptr;
  bool arrivals_ = false;
  size_t max_messages_ = 1;

  // What Poll returned that is not finished with, oldest first: `pending_` (the batch in
  // hand) views the first records, the rest is the read-ahead.
  struct Polled {
    kafka::client::MessageBatch batch;
    uint64_t epoch;  // the revocation count when it was polled
  };
  std::deque<Polled> held_;
  size_t take_chunk_ = 0;  // held_[take_chunk_].batch[take_index_]: the first record not taken
  size_t take_index_ = 0;
  uint64_t ahead_records_ = 0;  // polled, not yet taken into `pending_`
  uint64_t ahead_bytes_ = 0;
  uint64_t read_ahead_limit_ = 0;  // bytes: a quarter of fetch.prefetch x fetch.max_bytes
  bool full_ = false;  // the read-ahead holds its bound: librdkafka's queue is not drained
  bool wake_after_drain_ =
      false;  // the read-ahead left its bound: wake the fetchers after the drain
  SteadyTime last_wake_;
  SteadyTime last_arrival_;
  // Revoked partitions whose records polled before (epoch <=) must not be taken.
  uint64_t epoch_ = 0;
  std::map<std::pair<std::string, int32_t>, uint64_t> dropped_;
  std::vector<kafka::client::Message> pending_;
  AssignmentEvent event_;  // reported by the next NextBatch
  // The last stable offset per partition, from the statistics (docs/design/0006 #12).
  std::map<std::pair<std::string, int32_t>, int64_t> stable_;
  // The offset of the first record polled of each partition since it was assigned:
  // where Rewind starts a partition the group has no committed offset for.
  std::map<std::pair<std::string, int32_t>, int64_t> first_read_;
};

// The last stable offset of each partition in librdkafka's statistics JSON (the
// `ls_offset` of topics.*.partitions.*; partition -1, the unassigned one, left out).
// Corruption when it is not the JSON librdkafka writes.
Result<std::map<std::pair<std::string, int32_t>, int64_t>> StableOffsetsFromStats(
    std::string_view json);

}  // namespace sluice::pipeline
