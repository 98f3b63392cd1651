// InternalLog: open, replay, append and cleaner registration of an internal compacted
// log. See internal_log.h.
#include "broker/internal_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "base/clock.h"
#include "base/logging.h"
#include "broker/loggers.h"
#include "kafka/protocol/records.h"

namespace sluice::broker {
namespace {

// Bytes read from the log per Read at replay.
constexpr uint64_t kReplayReadBytes = 4 << 20;
// A bound on one record's varint framing.
constexpr size_t kRecordOverhead = 24;

}  // namespace

compaction::CleanConfig InternalLog::CleanConfigFor(const InternalLogOptions& options) {
  compaction::CleanConfig c;
  c.min_cleanable_dirty_ratio = options.min_cleanable_dirty_ratio;
  c.min_compaction_lag_ms = 0;
  c.delete_retention_ms = options.delete_retention_ms;
  c.segment_bytes = options.segment_bytes;
  return c;
}

InternalLog::InternalLog(storage::PartitionLog* log, std::unique_ptr<storage::PartitionLog> owned,
                         InternalLogOptions options)
    : options_(std::move(options)), owned_(std::move(owned)), log_(log) {
  if (options_.append) next_offset_ = log_->end_offset();
}

int64_t InternalLog::end_offset() const {
  return options_.append ? next_offset_ : log_->end_offset();
}

InternalLog::~InternalLog() {
  Status st = Close();
  if (!st.ok()) SLUICE_LOG(kInternalLogLog, kWarn, "closing {}: {}", options_.dir, st.ToString());
}

Result<std::unique_ptr<InternalLog>> InternalLog::Open(InternalLogOptions options) {
  if (options.executor == nullptr) {
    return InvalidArgumentError("internal log {}: no IoExecutor", options.dir);
  }
  if (options.attach != nullptr) {
    storage::PartitionLog* log = options.attach;
    return Attach(log, std::move(options));
  }
  storage::LogOptions lo;
  lo.env = options.env;
  lo.executor = options.executor;
  lo.files = options.files;
  lo.flush_policy = options.flush_policy;
  lo.flush_ms = options.flush_ms;
  lo.segment_bytes = options.segment_bytes;
  lo.max_batch_bytes = options.max_batch_bytes;
  lo.retention_bytes = -1;  // cleanup.policy=compact: only the cleaner removes records
  lo.retention_ms = -1;
  RETURN_IF_ERROR(options.env->CreateDirs(options.dir));
  ASSIGN_OR_RETURN(std::unique_ptr<storage::PartitionLog> log,
                   storage::PartitionLog::Open(options.dir, lo));
  storage::PartitionLog* raw = log.get();
  return std::unique_ptr<InternalLog>(new InternalLog(raw, std::move(log), std::move(options)));
}

std::unique_ptr<InternalLog> InternalLog::Attach(storage::PartitionLog* log,
                                                 InternalLogOptions options) {
  return std::unique_ptr<InternalLog>(new InternalLog(log, nullptr, std::move(options)));
}

// A cleaned log has gaps between batches and between segments (Read steps over them),
// batches with no record, and, in a data directory written by an earlier version's
// snapshots, a start offset inside its first segment (records below it are skipped).
Status InternalLog::Replay(const BatchFn& on_batch, const RecordFn& on_record) {
  const int64_t start = log_->start_offset();
  const int64_t end = log_->written_end_offset();
  const size_t max_decompressed = static_cast<size_t>(options_.max_batch_bytes) * 4;
  std::vector<uint8_t> buf;
  int64_t offset = start;
  while (offset < end) {
    ASSIGN_OR_RETURN(storage::ReadResult rr, log_->Read(offset, kReplayReadBytes));
    if (rr.slice.size == 0) break;
    buf.clear();
    RETURN_IF_ERROR(storage::PartitionLog::ReadSlice(rr.slice, &buf));
    std::span<const uint8_t> rest(buf);
    while (rest.size() >= storage::kBatchHeaderSize) {
      InternalBatch b;
      b.header = storage::ParseBatchHeader(rest);
      const storage::BatchHeader& h = b.header;
      if (h.length < 0 || h.total_size() > rest.size()) {
        return CorruptionError("{}: batch at offset {} runs past the bytes read", options_.dir,
                               h.base_offset);
      }
      b.bytes = rest.first(h.total_size());
      rest = rest.subspan(h.total_size());
      if (h.next_offset() <= start) continue;
      b.producer_id =
          static_cast<int64_t>(storage::LoadBE64(b.bytes.data() + storage::kProducerIdOffset));
      b.producer_epoch =
          static_cast<int16_t>(storage::LoadBE16(b.bytes.data() + storage::kProducerEpochOffset));
      if (!on_batch(b)) continue;
      kafka::RecordReader reader;
      if (Status st = reader.Open(b.bytes, max_decompressed); !st.ok()) {
        SLUICE_LOG(kInternalLogLog, kWarn, "{}: skipping batch at offset {}: {}", options_.dir,
                   h.base_offset, st.ToString());
        skipped_records_ += std::max(0, h.records_count);
        continue;
      }
      kafka::Record rec;
      while (reader.Next(&rec)) {
        const int64_t at = h.base_offset + rec.offset_delta;
        if (at < start) continue;
        if (!rec.key) {
          SLUICE_LOG(kInternalLogLog, kWarn, "{}: skipping record at offset {}: null key",
                     options_.dir, at);
          ++skipped_records_;
          continue;
        }
        on_record(b, at, *rec.key, rec.value);
      }
      if (!reader.status().ok()) {
        SLUICE_LOG(kInternalLogLog, kWarn, "{}: rest of batch at offset {} skipped: {}",
                   options_.dir, h.base_offset, reader.status().ToString());
        skipped_records_ += std::max(0, h.records_count - reader.records_read());
      }
    }
    if (rr.next_offset <= offset) {
      return CorruptionError("{}: the read at offset {} did not advance", options_.dir, offset);
    }
    offset = rr.next_offset;
  }
  return Status::OK();
}

void InternalLog::StartCleaning() {
  if (options_.cleaner == nullptr || registered_ || closed_) return;
  options_.cleaner->Add(options_.name, log_, CleanConfigFor(options_));
  registered_ = true;
}

Status InternalLog::Append(std::span<const InternalRecord> records, size_t target_batch_bytes,
                           Done on_durable) {
  if (closed_) return FailedPreconditionError("internal log {} is closed", options_.dir);
  if (records.empty()) {
    on_durable(Status::OK());
    return Status::OK();
  }
  const int64_t now = WallMillis();
  std::vector<std::vector<uint8_t>> batches;
  size_t i = 0;
  while (i < records.size()) {
    std::vector<kafka::RecordInput> inputs;
    size_t bytes = storage::kBatchHeaderSize;
    size_t j = i;
    while (j < records.size()) {
      const InternalRecord& r = records[j];
      size_t size = r.key.size() + (r.value ? r.value->size() : 0) + kRecordOverhead;
      if (j > i && bytes + size > target_batch_bytes) break;
      if (j > i && r.producer_id != records[i].producer_id) break;
      kafka::RecordInput in;
      in.key = std::span<const uint8_t>(r.key);
      if (r.value) in.value = std::span<const uint8_t>(*r.value);
      inputs.push_back(std::move(in));
      bytes += size;
      ++j;
    }
    kafka::BatchBuilderOptions bo;
    bo.base_timestamp = now;
    if (records[i].producer_id >= 0) {
      // As Kafka's coordinator writes TxnOffsetCommit: sequence 0.
      bo.transactional = true;
      bo.producer_id = records[i].producer_id;
      bo.producer_epoch = records[i].producer_epoch;
      bo.base_sequence = 0;
    }
    batches.push_back(kafka::BuildBatch(bo, inputs));
    i = j;
  }
  for (size_t b = 0; b + 1 < batches.size(); ++b) RETURN_IF_ERROR(AppendBatch(batches[b], nullptr));
  return AppendBatch(batches.back(), std::move(on_durable));
}

Status InternalLog::AppendBatch(std::span<const uint8_t> batch, Done on_durable) {
  if (closed_) return FailedPreconditionError("internal log {} is closed", options_.dir);
  if (options_.append) {
    // Replicated: the partition's owner appends it with its leader epoch; the offsets
    // are the ones counted here, as this coordinator is the partition's only writer.
    if (batch.size() < storage::kBatchHeaderSize) {
      return InvalidArgumentError("{}: a batch of {} bytes", options_.dir, batch.size());
    }
    const storage::BatchHeader h = storage::ParseBatchHeader(batch);
    next_offset_ += static_cast<int64_t>(h.last_offset_delta) + 1;
    options_.append(std::vector<uint8_t>(batch.begin(), batch.end()), std::move(on_durable));
    return Status::OK();
  }
  storage::AppendOptions ao;
  ao.ack = storage::AckLevel::kDurable;
  if (on_durable) {
    ao.on_ack = [cb = std::move(on_durable)](const Status& st, const storage::AppendInfo&) {
      cb(st);
    };
  }
  auto appended = log_->Append(batch, std::move(ao));
  if (!appended.ok()) return appended.status().WithContext("appending to " + options_.dir);
  return Status::OK();
}

Status InternalLog::Close() {
  if (closed_) return Status::OK();
  closed_ = true;
  if (registered_) {
    options_.cleaner->Remove(options_.name);  // waits for a cleaning under way
    registered_ = false;
  }
  return owned_ ? owned_->Close() : Status::OK();
}

}  // namespace sluice::broker
