// Sink: where a pipeline's results go. The pipeline runs its SQL, leaves the result in a
// DuckDB table on its own connection and hands that table to the sink; when the sink says
// a flush is durable, the pipeline commits the source offsets that produced it
// (at-least-once, docs/architecture.md). Every sink type (console, noop, kafka, sqlcommand,
// postgres, iceberg) implements this interface; the pipeline's dead-letter queue is a Sink
// too.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "duck/database.h"
#include "kafka/client/consumer.h"

namespace sluice::sinks {

// (topic, partition) -> the offset of the next record to read: what a consumer commits.
using SourceOffsets = std::map<std::pair<std::string, int32_t>, int64_t>;

// A row a sink would not take (it cannot be cast to the schema the sink fixed at its
// first batch, say), and why. The pipeline hands it to its on_error policy.
struct RejectedRow {
  std::string row_json;  // the row as a JSON object
  std::string reason;    // names the column and the problem
};

// Lifecycle: made by the pipeline for one run; Write and Flush alternate on the pipeline's
// thread (never concurrently); destroyed after the last Flush (or without it, on a crash
// path, when buffered rows may be dropped: the offsets were not committed).
class Sink {
 public:
  virtual ~Sink() = default;

  // Takes the rows of `table` (a table or view on `conn`, the pipeline's connection)
  // now: the table is emptied or replaced right after this returns, so a sink that
  // buffers copies the rows it needs. `offsets` are the source offsets the batch covers
  // (for sinks that store them with the data). Rows the sink refuses one by one go to
  // `rejected` (never null) while the others are written. An error means none of the batch
  // can be assumed written; the pipeline applies its on_error policy.
  virtual Status Write(duck::Connection& conn, std::string_view table, const SourceOffsets& offsets,
                       std::vector<RejectedRow>* rejected) = 0;

  // Makes everything written so far durable (or delivered, for a sink with no storage)
  // and returns only then; an error means the pipeline must not commit past the last
  // successful Flush.
  virtual Status Flush() = 0;

  // For sinks that store the source offsets with their data (a transactional table):
  // the offsets they hold now (read again at every call: another member may have written
  // since), which the pipeline seeks to when partitions are assigned. nullopt for sinks
  // that cannot tell.
  virtual std::optional<SourceOffsets> HeldOffsets() { return std::nullopt; }

  // Deferred durability (an Iceberg table commits every commit_interval_seconds, not at
  // each Flush: a snapshot per batch would be hundreds a second). Such a sink returns true
  // from Defers(); its Flush only stages, and the pipeline commits to Kafka only what
  // Commit returns: the source offsets of everything durable so far (empty when nothing
  // new is), after committing what is staged when it is due, or now with `force` (stop,
  // revoked partitions). An error from Commit stops the pipeline: the restart resumes from
  // HeldOffsets. Skip covers a batch that wrote no rows (its messages were skipped or
  // dead-lettered by on_error), so that the next commit covers its offsets too.
  virtual bool Defers() const { return false; }
  virtual Result<SourceOffsets> Commit(bool /*force*/) { return SourceOffsets{}; }
  virtual void Skip(const SourceOffsets& /*offsets*/) {}
  // The partitions were lost to another member without a chance to commit: drop what is
  // staged (their next owner reads it again from the sink's offsets).
  virtual Status Discard() { return Status::OK(); }

  // Exactly-once into Kafka (a deferring sink whose Commit is a Kafka transaction): the
  // sink commits the source offsets to the consumer group itself, inside the transaction
  // that holds its rows (KIP-447), so the pipeline commits nothing to the group. Such a
  // sink asks `group` for the member's current group metadata at each commit.
  using GroupMetadataFn = std::function<Result<kafka::client::GroupMetadata>()>;
  virtual bool CommitsSourceOffsets() const { return false; }
  virtual void SetGroupMetadata(GroupMetadataFn /*group*/) {}
  // Such a sink, after a Write, Flush or Commit (its own or its dead-letter sink's) that
  // failed: why its transaction was lost rather than failed by the batch's records, or
  // empty. Lost: aborted (by the sink, or by the broker at transaction.timeout.ms), so
  // nothing written since the last successful Commit will be visible, and the sink is
  // ready for a new transaction. The pipeline then re-reads everything after the group's
  // committed offsets (Source::Rewind) instead of applying on_error to the batch, as Kafka
  // Streams does on a TaskMigratedException. Causes: "rebalance" (the group coordinator
  // refused the offsets of a member that is no longer the one it was, KIP-447: a
  // rebalance or a session the member missed), "timeout" (the broker aborted the
  // transaction at its timeout and fenced the producer's epoch; the sink made a new
  // producer), "abortable" (another error after which the transaction could only be
  // aborted). Each call of the sink (or its dead-letter sink) clears it first.
  virtual std::string_view TransactionLost() const { return {}; }

  // The sink's type and target, for logs and metrics ("postgres table events").
  virtual std::string Describe() const = 0;
};

}  // namespace sluice::sinks
