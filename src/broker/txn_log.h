// TxnLog: the durable store of the transaction coordinator, the last TransactionLogValue
// of every transactional id, kept in memory and written to an internal PartitionLog
// (<data-dir>/__transaction_state-0) as Kafka's own __transaction_state records
// (docs/formats/transaction-state.md). Open replays the log (last record per id wins, a
// null value deletes the id); records that do not decode are skipped with a warning.
//
// Every state change appends one record while the live state stays one record per id,
// so when the log has grown well past the live state (TxnLogOptions::snapshot_*) the
// owner writes the live state again at the end of the log (StartSnapshot) and, once
// that is durable, drops every segment wholly before it (FinishSnapshot), as the offsets
// log does (docs/design/0003-group-coordinator.md, decision 6) until compaction runs on
// internal logs.
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
#include "broker/txn_state.h"
#include "storage/file_cache.h"
#include "storage/io_executor.h"
#include "storage/log.h"

namespace sluice::broker {

struct TxnLogOptions {
  std::string dir;
  storage::IoExecutor* executor = nullptr;  // required; must outlive the TxnLog
  storage::FileCache* files = nullptr;      // shared; null: the log owns a small one
  storage::Env* env = storage::Env::Posix();
  storage::FlushPolicy flush_policy = storage::FlushPolicy::kDurable;
  int64_t flush_ms = 100;
  uint64_t segment_bytes = 4ull << 20;
  // A snapshot is due when the log is larger than both snapshot_min_bytes and
  // snapshot_ratio times the encoded live state (snapshot_min_bytes >= 2 segments).
  uint64_t snapshot_min_bytes = 8ull << 20;
  uint64_t snapshot_ratio = 4;
};

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
  uint64_t log_bytes() const { return log_->size_bytes(); }
  int segment_count() const { return log_->segment_count(); }
  int64_t start_offset() const { return log_->start_offset(); }
  int skipped_records() const { return skipped_records_; }

  // As OffsetLog's: see the file comment.
  bool SnapshotDue() const;
  Status StartSnapshot(Done on_durable);
  Status FinishSnapshot(const Status& written);

  // Waits for pending writes (their callbacks run), syncs and closes the log. Idempotent.
  Status Close();

 private:
  explicit TxnLog(TxnLogOptions options);
  Status Replay();
  void Apply(int64_t at, std::span<const uint8_t> key,
             std::optional<std::span<const uint8_t>> value);
  void Put(const std::string& id, TxnRecord record);
  void Erase(const std::string& id);
  Status Append(const std::vector<std::pair<std::string, std::optional<TxnRecord>>>& records,
                Done on_durable);

  const TxnLogOptions options_;
  std::unique_ptr<storage::PartitionLog> log_;
  std::map<std::string, TxnRecord> records_;
  uint64_t live_bytes_ = 0;
  int skipped_records_ = 0;
  bool snapshot_running_ = false;
  int64_t snapshot_start_ = -1;
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
