// InProcessSource: a pipeline's Source (source.h) that reads the partition logs of the
// broker in this process, with no Kafka protocol and no librdkafka
// (docs/design/0023-native-path.md).
//
// - Membership: a member of the pipeline's group through the broker's own coordinator
//   (broker::InProcessKafka), speaking Kafka's consumer protocol (kafka/group) with the
//   range and roundrobin assignors with eager rebalances or cooperative-sticky with
//   incremental ones (KIP-429); on its own thread, which joins,
//   syncs, heartbeats and leaves, and hands the assignment and revocations to the runner's
//   thread.
// - Reads: on the runner's thread inside NextBatch, when the read-ahead cannot fill the
//   batch: one in-process fetch of every assigned partition (the Fetch handler's rules),
//   the slices read into a buffer of the read-ahead, the batches decoded where they lie
//   (kafka/local). The read-ahead holds at most fetch.max_bytes x fetch.prefetch.
// - Offsets: commits and the committed offsets through the coordinator, with the member's
//   generation; GroupMetadata for an exactly-once sink's transaction.
// - In a cluster (broker::InProcessClient): the group's requests go to its coordinator
//   wherever it is, and the partitions led by other brokers are fetched from them over
//   inter-broker connections, while those this broker leads are read in-process.
//
// Lifecycle and thread: as Source.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "broker/in_process_client.h"
#include "broker/in_process_kafka.h"
#include "kafka/local/local_batches.h"
#include "pipeline/pipeline_config.h"
#include "pipeline/source.h"

namespace sluice::pipeline {

struct InProcessSourceOptions {
  broker::InProcessKafka* kafka = nullptr;  // must outlive the source
  // The principal the member reads and commits as ("User:alice"); "" for the service.
  std::string principal;
};

class InProcessSource final : public Source {
 public:
  // FailedPrecondition when the broker cannot serve in-process reads (a cluster, or its
  // server not running).
  static Result<std::unique_ptr<InProcessSource>> Create(const KafkaSourceConfig& config,
                                                         std::string pipeline,
                                                         SourceCounters counters,
                                                         InProcessSourceOptions options);
  ~InProcessSource() override;

  Status Start(SourceListener* listener, bool arrivals) override;
  SourceStep NextBatch(size_t max_messages, SteadyTime deadline) override;
  std::span<const kafka::client::Message> InHand() const override { return pending_; }
  void BatchDecoded() override;
  void BatchDone() override;
  void AcknowledgeRevocation() override;
  Status Commit(const std::vector<kafka::client::TopicPartition>& offsets,
                CommitMode mode) override;
  Result<std::vector<kafka::client::PartitionLag>> Lag() const override;
  Result<kafka::client::GroupMetadata> GroupMetadata() const override;
  Status Rewind(std::chrono::milliseconds timeout) override;
  std::string_view path() const override { return "in_process"; }
  void Close() override;

 private:
  using Key = std::pair<std::string, int32_t>;
  struct Settings {
    int32_t session_timeout_ms = 45000;
    int32_t rebalance_timeout_ms = 300000;
    int32_t heartbeat_interval_ms = 3000;
    std::vector<std::string> assignors = {"range", "roundrobin"};
    // cooperative-sticky (KIP-429): partitions are kept across rebalances, only those that
    // move are given up, after the SyncGroup that moves them.
    bool cooperative = false;
    bool read_committed = true;
  };
  // One assigned partition, on the runner's thread.
  struct Position {
    int64_t next = -1;  // the next offset to fetch (-1: to be found)
    int64_t high_watermark = -1;
    int64_t last_stable_offset = -1;
    // Where the records not yet taken into a batch start: the offset after the last record
    // taken, or where reading started (-1: not known yet). A partial revocation drops the
    // read-ahead and reads the partitions kept from here again.
    int64_t consumed = -1;
  };
  // What one fetch brought: the bytes of its slices and the records decoded from them.
  struct Fetched {
    // The fetch's bytes, read over whole (not zeroed first: a vector's resize cost as
    // much as the read, 7% of the runner's thread).
    std::unique_ptr<uint8_t[]> bytes;
    size_t size = 0;
    std::vector<kafka::client::Message> records;
    size_t taken = 0;         // records moved into a batch so far
    uint64_t generation = 0;  // the decoder's buffers these records use
  };
  // From the member's thread to the runner's.
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::string member_id;
    int32_t generation = -1;
    std::optional<std::vector<kafka::client::TopicPartition>> assignment;  // to apply
    bool revoke = false;  // the runner must give up its partitions
    // Cooperative: only these (else every one).
    std::optional<std::set<Key>> revoke_only;
    bool revoke_reported = false;
    bool revoke_acked = false;
    bool lost = false;  // the membership was lost: drop everything
    bool stop = false;
  };

  InProcessSource(const KafkaSourceConfig& config, std::string pipeline, SourceCounters counters,
                  InProcessSourceOptions options, Settings settings);

  // The member's thread.
  void MemberLoop();
  // One join and sync; the assignment, or an error to retry after.
  Status JoinAndSync();
  Result<std::vector<kafka::SyncGroupRequest::Assignment>> LeaderAssignments(
      const kafka::JoinGroupResponse& joined);
  // `only`: a cooperative revocation of these partitions; else every one.
  void WaitRevocationAck(std::optional<std::set<Key>> only = std::nullopt);
  // The subscribed topics' partition counts now (0: the topic does not exist), and whether
  // they differ from those of the last join.
  std::map<std::string, int32_t> TopicCounts() const;
  bool TopicsChanged() const;

  // The runner's thread.
  void ApplyAssignment(std::vector<kafka::client::TopicPartition> partitions);
  Status ResolvePositions(std::vector<kafka::client::TopicPartition>& partitions);
  // One fetch of the assigned partitions into the read-ahead; false when nothing came.
  // On the runner's thread, or on the prefetch thread while the runner is outside the
  // source (0023 decision 18).
  bool FetchOnce();
  // The prefetch: a FetchOnce started once the batch handed out is decoded
  // (BatchDecoded), so that it runs while the runner's SQL and sink take that batch, not
  // beside the decode's parts (0023 decision 22); every entry point that touches what a
  // fetch changes (positions, the read-ahead, the decoder's buffers) waits for it first.
  void PrefetchLoop();
  void StartPrefetch();
  void WaitPrefetch() const;
  // The arrivals FetchOnce noted, told to the listener (on the runner's thread).
  void DeliverHeard();
  void Take(size_t max_messages);
  void DropAll();
  uint64_t ReadAheadBytes() const;

  const KafkaSourceConfig config_;
  const std::string pipeline_;
  const SourceCounters counters_;
  const InProcessSourceOptions options_;
  const Settings settings_;
  // The broker's calls, routed to the coordinator and the leaders in a cluster.
  const std::unique_ptr<broker::InProcessClient> client_;
  SourceListener* listener_ = nullptr;
  bool arrivals_ = false;

  mutable Shared shared_;
  std::atomic<bool> stopping_{false};  // Close: the member's waits give up
  std::thread member_;
  std::map<std::string, int32_t> counts_at_join_;     // the member's thread
  std::vector<kafka::client::TopicPartition> owned_;  // the member's thread: its assignment
  bool rejoin_now_ = false;  // the member's thread: a cooperative sync took partitions away

  std::map<std::pair<std::string, int32_t>, Position> positions_;  // the assignment
  std::map<std::pair<std::string, int32_t>, int64_t> first_read_;
  std::vector<std::string> topic_names_;  // stable storage Message::topic points into
  std::deque<Fetched> ahead_;
  size_t ahead_taken_chunks_ = 0;  // chunks of ahead_ fully in batches (released at BatchDone)
  kafka::local::BatchDecoder decoder_;
  std::vector<kafka::client::Message> pending_;
  // How long NextBatch sleeps after a fetch that found nothing (in_process_source.cc).
  std::chrono::milliseconds idle_wait_{1};
  // The revocation reported and not yet acknowledged: the partitions given up (cooperative)
  // or none (every one).
  std::optional<std::set<Key>> revoking_;
  SteadyTime last_error_log_{};
  struct Arrival {
    const std::string* topic;
    int32_t partition;
    SteadyTime at;
  };
  std::vector<Arrival> heard_;  // FetchOnce's, until DeliverHeard

  mutable std::mutex prefetch_mu_;
  mutable std::condition_variable prefetch_cv_;
  bool prefetch_wanted_ = false;   // a FetchOnce to run
  bool prefetch_running_ = false;  // one runs now
  bool prefetch_due_ = false;      // the runner's thread only: a prefetch for BatchDecoded
  bool prefetch_stop_ = false;
  std::thread prefetcher_;
};

}  // namespace sluice::pipeline
