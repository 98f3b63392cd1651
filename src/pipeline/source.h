// Source: where a pipeline's messages come from, as the runner sees it. The runner asks
// for the next batch, processes it, tells the source it is done with it, and commits the
// offsets its commit strategy allows (commit_strategy.h). Group membership shows up as
// assignment events: a revocation is reported by NextBatch and the partitions stay this
// member's until the runner, having finished and committed the batch in hand, calls
// AcknowledgeRevocation.
//
// Implementations: KafkaSource (kafka_source.h: a consumer group member on any Kafka
// cluster, with a bounded read-ahead) and InProcessSource (in_process_source.h: the
// broker of this process, read in-process). A source speaks Kafka's records and offsets
// (kafka::client::Message, TopicPartition: plain views and values, whatever client
// produced them), so a source reading the broker's own log in-process fits here too.
//
// Lifecycle: made by the runner, Start once, then NextBatch / BatchDone /
// AcknowledgeRevocation / Commit / Rewind on the runner's thread until Close.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"
#include "kafka/client/consumer.h"

namespace sluice::pipeline {

using SteadyTime = std::chrono::steady_clock::time_point;
// (topic, partition) -> the offset of the next record to read (the same type as
// sinks::SourceOffsets).
using SourceOffsets = std::map<std::pair<std::string, int32_t>, int64_t>;

enum class CommitMode {
  kAsync,  // while running: commits go out in order, a failure is covered by the next
  kSync,   // on revocation and at stop: returns once the commit is stored
};

// A change of the assignment the runner acts on before it asks for more.
struct AssignmentEvent {
  enum class Kind {
    kNone,
    // The partitions are about to be given up: finish the batch in hand (sink, flush, a
    // synchronous commit), then AcknowledgeRevocation. Their records read ahead of the
    // batch in hand are already dropped (their next owner reads them from the commit).
    kRevoked,
    // The partitions were already given to another member (the session was lost): the
    // batch in hand and the read-ahead are already dropped; commit nothing of them.
    kLost,
  };
  Kind kind = Kind::kNone;
  std::vector<kafka::client::TopicPartition> partitions;
};

// What NextBatch found.
struct SourceStep {
  // The batch is full (max_messages) or its deadline passed: process it now (it may be
  // empty at a deadline).
  bool ready = false;
  AssignmentEvent event;  // when not kNone, `ready` is false
};

// Where a source counts what it reads (the runner's metrics; every pointer set).
struct SourceCounters {
  Counter* messages_in = nullptr;                     // records taken into batches
  Counter* bytes_in = nullptr;                        // their value bytes
  std::atomic<uint64_t>* messages_in_stat = nullptr;  // RunnerStats::messages_in
  Counter* errors = nullptr;                          // errors of phase "source"
  Counter* read_ahead_full = nullptr;                 // times the read-ahead reached its bound
  Gauge* read_ahead = nullptr;                        // bytes read ahead, not yet in a batch
};

// The runner's side of a source: called inside NextBatch, on the runner's thread.
class SourceListener {
 public:
  virtual ~SourceListener() = default;
  // These partitions are about to be assigned: set each one's offset to start there
  // (TopicPartition::offset; left unset, the group's committed offset).
  virtual void Assigning(std::vector<kafka::client::TopicPartition>& partitions) = 0;
  // Records of a partition arrived (read ahead, not yet in a batch), once per run of a
  // partition in what was fetched; only when the source was started with arrivals.
  virtual void Heard(std::string_view topic, int32_t partition, SteadyTime now) = 0;
};

class Source {
 public:
  virtual ~Source() = default;

  // Starts reading (joins the group). `listener` must outlive the source; `arrivals`:
  // call listener->Heard.
  virtual Status Start(SourceListener* listener, bool arrivals) = 0;

  // Tops up the batch in hand with up to `max_messages` records, waiting a few
  // milliseconds at most (never past `deadline`) when it has fewer, and says whether the
  // batch is ready or an assignment event came. Errors of the source are counted and
  // logged, not returned: the source keeps trying.
  virtual SourceStep NextBatch(size_t max_messages, SteadyTime deadline) = 0;
  // The batch in hand (valid until BatchDone, Close or the next event).
  virtual std::span<const kafka::client::Message> InHand() const = 0;
  // The batch in hand is decoded: what is left of it (the SQL, the sink) keeps one thread
  // busy, so a source that reads ahead on a thread of its own may start now (before, it
  // would take a core from the decode's parts).
  virtual void BatchDecoded() {}
  // The batch in hand is processed (or given up): its records are released, and the next
  // batch starts with what was read ahead.
  virtual void BatchDone() = 0;
  // The revocation NextBatch reported is dealt with: the partitions may go.
  virtual void AcknowledgeRevocation() = 0;

  // Commits, for the group, the next offset to read of each partition.
  virtual Status Commit(const std::vector<kafka::client::TopicPartition>& offsets,
                        CommitMode mode) = 0;
  // Position (after the read-ahead) and high watermark of each assigned partition, from
  // what the source last heard (no request).
  virtual Result<std::vector<kafka::client::PartitionLag>> Lag() const = 0;

  // The member's current consumer group metadata (generation, member id), for a sink
  // that commits the offsets in its own Kafka transaction (KIP-447). Unimplemented for a
  // source that is no group member.
  virtual Result<kafka::client::GroupMetadata> GroupMetadata() const {
    return UnimplementedError("this source is not a consumer group member");
  }

  // Exactly-once, after the sink's transaction was lost (sinks::Sink::TransactionLost):
  // drops the batch in hand and everything read ahead, and makes each assigned partition
  // read again from the group's committed offset — where the group has none, from the
  // first record the source read of it since it was assigned. Whatever else the member's
  // group does (a rejoin after its membership was lost) comes as NextBatch's assignment
  // events, as ever. At most `timeout`. Unimplemented for a source that cannot rewind (the
  // pipeline then stops, as before).
  virtual Status Rewind(std::chrono::milliseconds /*timeout*/) {
    return UnimplementedError("this source cannot rewind to the group's committed offsets");
  }

  // Which path it reads by, for the log and the metrics (docs/design/0023-native-path.md):
  // "kafka" (a Kafka client) or "in_process" (the broker's log in this process).
  virtual std::string_view path() const { return "kafka"; }

  // Drops the batch in hand and everything read ahead, then leaves the group.
  virtual void Close() = 0;
};

}  // namespace sluice::pipeline
