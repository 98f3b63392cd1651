// TxnLog: the durable store of the transaction coordinator, the last TransactionLogValue
// of every transactional id, kept in memory and written to an internal PartitionLog
// (<data-dir>/__transaction_state-0) as Kafka's own __transaction_state records
// (docs/formats/transaction-state.md). Open replays the log (last record per id wins, a
// null value deletes the id); records that do not decode are skipped with a warning.
//
// The log is an internal compacted topic (InternalLog, internal_log.h): the process's
// log cleaner keeps each id's last record and drops the tombstones of expired ids after
// delete.retention.ms, so the log stays bounded by the live state
// (docs/design/0016-transactions.md).
//
// Threads: one owner thread (the transaction coordinator's loop) calls every method.
// Write applies its change to the in-memory state at once; `on_durable` runs on an
// IoExecutor thread and must not call back into the TxnLog (the owner posts it to its
// own loop).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "broker/internal_log.h"
#include "broker/txn_state.h"
#include "storage/file_cache.h"
#include "storage/io_executor.h"
#include "storage/log.h"

namespace sluice::broker {

// The internal log's options (internal_log.h); Open sets `name` and `max_batch_bytes`.
// Durable flushes (every state change is awaited) and segment.bytes 4 MiB (Kafka's
// transaction.state.log.segment.bytes is 100 MiB; smaller here so that the active
// segment, never cleaned, bounds what a restart replays).
struct TxnLogOptions : InternalLogOptions {
  TxnLogOptions() {
    flush_policy = storage::FlushPolicy::kDurable;
    segment_bytes = 4ull << 20;
  }
};

// The state log's name in the cleaner (and its directory's name in the data dir).
inline constexpr const char kTxnLogName[] = "__transaction_state-0";

class TxnLog {
 public:
  using Done = std::function<void(const Status&)>;

  static Result<std::unique_ptr<TxnLog>> Open(TxnLogOptions options);
  ~TxnLog();  // Close()s
  TxnLog(const TxnLog&) = delete;
  TxnLog& operator=(const TxnLog&) = delete;

  // Sets `id`'s record (nullopt: a tombstone that forgets it) and appends it. On OK,
  // `on_durable` runs once, on an IoExecutor thread, with OK once an fdatasync covers the
  // record or with the log's write error. On an error return it never runs (the log has
  // failed or is closed, or the record is larger than the log takes).
  Status Write(const std::string& id, const std::optional<TxnRecord>& record, Done on_durable);

  // The live state: every id's last record (including writes not yet durable).
  const std::map<std::string, TxnRecord>& records() const { return records_; }
  uint64_t live_bytes() const { return live_bytes_; }
  uint64_t log_bytes() const { return log_->log().size_bytes(); }
  int segment_count() const { return log_->log().segment_count(); }
  int64_t start_offset() const { return log_->log().start_offset(); }
  int skipped_records() const { return log_->skipped_records(); }

  // Unregisters the log from the cleaner, waits for pending writes (their callbacks run),
  // syncs and closes the log. Idempotent.
  Status Close();

 private:
  explicit TxnLog(TxnLogOptions options);
  Status Replay();
  void Apply(int64_t at, std::span<const uint8_t> key,
             std::optional<std::span<const uint8_t>> value);
  void Put(const std::string& id, TxnRecord record);
  void Erase(const std::string& id);

  const TxnLogOptions options_;
  std::unique_ptr<InternalLog> log_;
  std::map<std::string, TxnRecord> records_;
  uint64_t live_bytes_ = 0;
  bool closed_ = false;
};

// The record formats of __transaction_state, public for tests and the fuzz target.
namespace txn_format {

// TransactionLogKey v0: int16 version, string transactional id.
std::vector<uint8_t> EncodeKey(const std::string& transactional_id);
// TransactionLogValue: v0 as Kafka writes it without transaction.version 2; v1 (flexible)
// when the record carries what only tagged fields hold (previous/next producer id,
// groups).
std::vector<uint8_t> EncodeValue(const TxnRecord& record);

// InvalidArgument naming the field for bytes that do not decode or an unknown version.
Result<std::string> DecodeKey(std::span<const uint8_t> bytes);
Result<TxnRecord> DecodeValue(std::span<const uint8_t> bytes);

}  // namespace txn_format

}  // namespace sluice::broker
