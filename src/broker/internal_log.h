// InternalLog: the keyed, compacted partition log under a coordinator's state
// (__consumer_offsets-0 for the group coordinator's OffsetLog, __transaction_state-0 for
// the transaction coordinator's TxnLog). It opens the log with the internal topics'
// settings, replays it batch by batch and record by record, appends keyed records (and
// control batches) and registers the log with the process's compaction::LogCleaner under
// cleanup.policy=compact, so the log stays bounded by the live state as any compacted
// topic does (docs/design/0017-log-compaction.md, "Internal topics").
//
// Replay tolerates whatever the cleaner leaves: offset gaps, batches emptied of their
// records (a producer's kept last batch), markers removed, tombstones gone past
// delete.retention.ms, and a log start inside the first segment (data directories
// written by the snapshots of earlier versions: their re-appended live state is ordinary
// last-wins records). Nothing is kept beside the log: the state is the log, so a follower
// replica holding the same bytes rebuilds the same state (issue 21).
//
// Everything but Open/Close works on a storage::PartitionLog* this object may or may not
// own (Attach: a log owned elsewhere, such as a replicated partition).
//
// Threads: one owner thread calls every method (the coordinator's loop). The cleaner's
// threads clean the log concurrently, as they do user partitions; `on_durable` callbacks
// run on an IoExecutor thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "compaction/cleaner.h"
#include "storage/batch_header.h"
#include "storage/file_cache.h"
#include "storage/io_executor.h"
#include "storage/log.h"

namespace sluice::broker {

// The cleaning settings of the internal topics. Kafka leaves its internal topics at the
// topic defaults for these: clean when half the log is dirty, keep tombstones (and the
// markers of emptied transactions) a day after the cleaning that first kept them, so a
// replica or reader that lags by less than that still sees every delete.
inline constexpr double kInternalMinCleanableDirtyRatio = 0.5;
inline constexpr int64_t kInternalDeleteRetentionMs = 86'400'000;

struct InternalLogOptions {
  // Where a replicated log's batches go (docs/design/0018-cluster.md, "coordmove"): a
  // batch is handed over with its callback (null for all but a write's last batch), which
  // runs once, on any thread, when the high watermark passed it or with the error. The
  // log is then Attach'ed and only read here; offsets are counted from its end at attach.
  using AppendFn =
      std::function<void(std::vector<uint8_t> batch, std::function<void(const Status&)> done)>;

  std::string dir;
  // The log's name in the cleaner ("__consumer_offsets-0").
  std::string name;
  storage::IoExecutor* executor = nullptr;  // required by Open; must outlive the log
  storage::FileCache* files = nullptr;      // shared; null: the log owns a small one
  storage::Env* env = storage::Env::Posix();
  storage::FlushPolicy flush_policy = storage::FlushPolicy::kDurable;
  int64_t flush_ms = 100;
  uint64_t segment_bytes = 8ull << 20;  // segment.bytes
  uint32_t max_batch_bytes = 1 << 20;   // message.max.bytes of the internal topic
  // The process's cleaner; null: the log is not cleaned (it grows with every write).
  compaction::LogCleaner* cleaner = nullptr;
  double min_cleanable_dirty_ratio = kInternalMinCleanableDirtyRatio;
  int64_t delete_retention_ms = kInternalDeleteRetentionMs;
  // Empty: appends go to the log itself (a single node's own log).
  AppendFn append;
  // Set: Open attaches to this log (a replicated partition's, owned by its shard; it must
  // outlive the InternalLog) instead of opening `dir`.
  storage::PartitionLog* attach = nullptr;
};

// One record to append.
struct InternalRecord {
  std::vector<uint8_t> key;
  std::optional<std::vector<uint8_t>> value;  // nullopt: a tombstone
  int64_t producer_id = -1;                   // >= 0: in a transactional batch of it
  int16_t producer_epoch = -1;
};

// A batch as replay hands it to the owner.
struct InternalBatch {
  storage::BatchHeader header;
  std::span<const uint8_t> bytes;  // the whole batch
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  bool control() const {
    return (static_cast<uint16_t>(header.attributes) & storage::kAttrControl) != 0;
  }
  bool transactional() const {
    return (static_cast<uint16_t>(header.attributes) & storage::kAttrTransactional) != 0;
  }
};

class InternalLog {
 public:
  using Done = std::function<void(const Status&)>;
  // Before a batch's records: false skips them (the owner handled the batch itself, or
  // refuses it and counted it with Skip).
  using BatchFn = std::function<bool(const InternalBatch&)>;
  // Each keyed record at or after the log start: `value` nullopt is a tombstone.
  // Records without a key are skipped and counted.
  using RecordFn =
      std::function<void(const InternalBatch&, int64_t offset, std::span<const uint8_t> key,
                         std::optional<std::span<const uint8_t>> value)>;

  // The cleaner's settings for an internal log with these options.
  static compaction::CleanConfig CleanConfigFor(const InternalLogOptions& options);

  // Opens (creating when missing) the log in options.dir, owned by this object; or
  // Attach(options.attach) when that is set.
  static Result<std::unique_ptr<InternalLog>> Open(InternalLogOptions options);
  // Over `log`, owned elsewhere (it must outlive this object, or its Close).
  static std::unique_ptr<InternalLog> Attach(storage::PartitionLog* log,
                                             InternalLogOptions options);
  ~InternalLog();  // Close()s
  InternalLog(const InternalLog&) = delete;
  InternalLog& operator=(const InternalLog&) = delete;

  // Reads every batch from the log start to the written end, in order. A batch whose
  // records do not decode is skipped whole, a record alone; both are counted and logged,
  // never fatal. Errors only for a log that cannot be read.
  Status Replay(const BatchFn& on_batch, const RecordFn& on_record);

  // Registers the log with the cleaner (when there is one). Call after Replay; Close
  // unregisters it before the log closes.
  void StartCleaning();

  // Appends `records` in batches of about `target_batch_bytes`, a new batch wherever the
  // producer changes; they get consecutive offsets from log().end_offset(). On OK,
  // `on_durable` runs once on an IoExecutor thread when an fdatasync covers them all (the
  // log acknowledges in order), or with the log's write error. An empty `records` calls
  // it inline. On an error return it never runs.
  Status Append(std::span<const InternalRecord> records, size_t target_batch_bytes,
                Done on_durable);
  // Appends one whole batch (a control batch: a transaction marker), as Append.
  Status AppendBatch(std::span<const uint8_t> batch, Done on_durable);

  // The offset the next appended record gets: the log's end, or, when appends are handed
  // to `options.append`, the end at attach plus every record handed over since.
  int64_t end_offset() const;

  // Counts records the owner refused at replay (reported by skipped_records()).
  void Skip(int records) { skipped_records_ += records; }
  int skipped_records() const { return skipped_records_; }

  // Unregisters from the cleaner (waiting for a cleaning under way), then closes the log
  // when owned: it waits for pending writes (their callbacks run) and syncs. Idempotent.
  Status Close();
  bool closed() const { return closed_; }

  storage::PartitionLog& log() { return *log_; }
  const storage::PartitionLog& log() const { return *log_; }
  const InternalLogOptions& options() const { return options_; }

 private:
  InternalLog(storage::PartitionLog* log, std::unique_ptr<storage::PartitionLog> owned,
              InternalLogOptions options);

  const InternalLogOptions options_;
  std::unique_ptr<storage::PartitionLog> owned_;
  storage::PartitionLog* log_;
  bool registered_ = false;
  bool closed_ = false;
  int64_t next_offset_ = -1;  // with options_.append: the next record's offset
  int skipped_records_ = 0;
};

}  // namespace sluice::broker
