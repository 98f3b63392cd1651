// TxnLog: __transaction_state records and their replay. See txn_log.h.
#include "broker/txn_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "base/clock.h"
#include "base/logging.h"
#include "broker/loggers.h"
#include "kafka/protocol/records.h"
#include "kafka/protocol/wire.h"

namespace sluice::broker {
namespace {

constexpr int16_t kKeyVersion = 0;
// sluice's own tagged field of TransactionLogValue v1: the transaction's group ids.
constexpr uint32_t kGroupsTag = 10000;
constexpr uint32_t kMaxBatchBytes = 1 << 20;
constexpr size_t kRecordOverhead = 24;

bool NeedsFlexible(const TxnRecord& r) {
  return r.previous_producer_id != kNoProducerId || r.next_producer_id != kNoProducerId ||
         !r.groups.empty();
}

void WriteInt64Tag(kafka::Writer& w, uint32_t tag, int64_t v) {
  w.TaggedFieldHeader(tag, 8);
  w.Int64(v);
}

uint64_t RecordSize(const std::string& id, const TxnRecord& r) {
  return txn_format::EncodeKey(id).size() + txn_format::EncodeValue(r).size() + kRecordOverhead;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Record formats

namespace txn_format {

std::vector<uint8_t> EncodeKey(const std::string& transactional_id) {
  std::vector<uint8_t> out;
  kafka::Writer w(&out);
  w.Int16(kKeyVersion);
  w.String(false, transactional_id);
  return out;
}

std::vector<uint8_t> EncodeValue(const TxnRecord& r) {
  const bool flexible = NeedsFlexible(r);
  std::vector<uint8_t> out;
  kafka::Writer w(&out);
  w.Int16(flexible ? 1 : 0);
  w.Int64(r.producer_id);
  w.Int16(r.producer_epoch);
  w.Int32(r.timeout_ms);
  w.Int8(static_cast<int8_t>(r.state));
  if (r.state == TxnState::kEmpty) {
    w.ArrayLength(flexible, -1);  // Kafka writes null for Empty
  } else {
    std::map<std::string, std::vector<int32_t>> by_topic;
    for (const auto& tp : r.partitions) by_topic[tp.topic].push_back(tp.partition);
    w.ArrayLength(flexible, static_cast<int32_t>(by_topic.size()));
    for (const auto& [topic, ids] : by_topic) {
      w.String(flexible, topic);
      w.ArrayLength(flexible, static_cast<int32_t>(ids.size()));
      for (int32_t p : ids) w.Int32(p);
      if (flexible) w.EmptyTaggedFields();
    }
  }
  w.Int64(r.last_update_ms);
  w.Int64(r.start_ms);
  if (flexible) {
    uint32_t tags = (r.previous_producer_id != kNoProducerId ? 1 : 0) +
                    (r.next_producer_id != kNoProducerId ? 1 : 0) + (r.groups.empty() ? 0 : 1);
    w.UnsignedVarint(tags);
    if (r.previous_producer_id != kNoProducerId) WriteInt64Tag(w, 0, r.previous_producer_id);
    if (r.next_producer_id != kNoProducerId) WriteInt64Tag(w, 1, r.next_producer_id);
    if (!r.groups.empty()) {
      std::vector<uint8_t> groups;
      kafka::Writer g(&groups);
      g.ArrayLength(true, static_cast<int32_t>(r.groups.size()));
      for (const auto& id : r.groups) g.String(true, id);
      w.TaggedFieldHeader(kGroupsTag, static_cast<uint32_t>(groups.size()));
      w.Raw(groups);
    }
  }
  return out;
}

Result<std::string> DecodeKey(std::span<const uint8_t> bytes) {
  kafka::Reader r(bytes);
  int16_t version = r.Int16("key version");
  if (r.ok() && version != kKeyVersion) {
    return InvalidArgumentError("__transaction_state key: unknown key version {}", version);
  }
  std::string id = r.String(false, "transactional id");
  if (!r.ok()) return r.status().WithContext("TransactionLogKey");
  return id;
}

Result<TxnRecord> DecodeValue(std::span<const uint8_t> bytes) {
  kafka::Reader r(bytes);
  int16_t version = r.Int16("value version");
  if (!r.ok()) return r.status().WithContext("TransactionLogValue");
  if (version < 0 || version > 1) {
    return InvalidArgumentError("TransactionLogValue: unknown version {}", version);
  }
  const bool flexible = version >= 1;
  TxnRecord v;
  v.producer_id = r.Int64("producer id");
  v.producer_epoch = r.Int16("producer epoch");
  v.timeout_ms = r.Int32("transaction timeout");
  int8_t status = r.Int8("transaction status");
  std::optional<TxnState> state = TxnStateFromId(status);
  if (r.ok() && (!state || *state == TxnState::kPrepareEpochFence)) {
    return InvalidArgumentError("TransactionLogValue: unknown transaction status {}", status);
  }
  if (state) v.state = *state;
  int32_t topics = r.ArrayLength(flexible, "transaction partitions", 2 + 4);
  for (int32_t i = 0; i < topics && r.ok(); ++i) {
    std::string topic = r.String(flexible, "topic");
    int32_t n = r.ArrayLength(flexible, "partition ids", 4);
    for (int32_t j = 0; j < n && r.ok(); ++j) {
      int32_t p = r.Int32("partition id");
      // Kafka ignores the partitions of an Empty record.
      if (v.state != TxnState::kEmpty) v.partitions.insert(TopicPartition{topic, p});
    }
    if (flexible) r.TaggedFields([](uint32_t, kafka::Reader&) { return false; });
  }
  v.last_update_ms = r.Int64("last update timestamp");
  v.start_ms = r.Int64("start timestamp");
  if (flexible) {
    r.TaggedFields([&v](uint32_t tag, kafka::Reader& t) {
      if (tag == 0) {
        v.previous_producer_id = t.Int64("previous producer id");
      } else if (tag == 1) {
        v.next_producer_id = t.Int64("next producer id");
      } else if (tag == kGroupsTag) {
        int32_t n = t.ArrayLength(true, "group ids");
        for (int32_t i = 0; i < n && t.ok(); ++i) v.groups.insert(t.String(true, "group id"));
      } else {
        return false;
      }
      return true;
    });
  }
  if (!r.ok()) return r.status().WithContext(fmt::format("TransactionLogValue v{}", version));
  return v;
}

}  // namespace txn_format

// ---------------------------------------------------------------------------------------
// TxnLog

TxnLog::TxnLog(TxnLogOptions options) : options_(std::move(options)) {}

TxnLog::~TxnLog() {
  Status st = Close();
  if (!st.ok()) SLUICE_LOG(kTxnLog, kWarn, "closing {}: {}", options_.dir, st.ToString());
}

Result<std::unique_ptr<TxnLog>> TxnLog::Open(TxnLogOptions options) {
  options.name = kTxnLogName;
  options.max_batch_bytes = kMaxBatchBytes;
  InternalLogOptions lo = options;
  std::unique_ptr<TxnLog> self(new TxnLog(std::move(options)));
  ASSIGN_OR_RETURN(self->log_, InternalLog::Open(std::move(lo)));
  RETURN_IF_ERROR(self->Replay().WithContext("replaying transaction log " + self->options_.dir));
  self->log_->StartCleaning();
  SLUICE_LOG(kTxnLog, kInfo,
             "{}: {} transactional ids, {} live bytes in a {}-byte log ({} skipped)",
             self->options_.dir, self->records_.size(), self->live_bytes_, self->log_bytes(),
             self->skipped_records());
  return self;
}

// Every record from the log start to the written end, in order (InternalLog::Replay).
// What does not decode is skipped and counted, never fatal: the other ids' records are
// still good. The coordinator writes no control batch here: one is skipped.
Status TxnLog::Replay() {
  return log_->Replay(
      [this](const InternalBatch& b) {
        if (!b.control()) return true;
        SLUICE_LOG(kTxnLog, kWarn, "{}: skipping control batch at offset {}", options_.dir,
                   b.header.base_offset);
        log_->Skip(std::max(1, b.header.records_count));
        return false;
      },
      [this](const InternalBatch&, int64_t at, std::span<const uint8_t> key,
             std::optional<std::span<const uint8_t>> value) { Apply(at, key, value); });
}

void TxnLog::Apply(int64_t at, std::span<const uint8_t> key,
                   std::optional<std::span<const uint8_t>> value) {
  auto id = txn_format::DecodeKey(key);
  if (!id.ok()) {
    SLUICE_LOG(kTxnLog, kWarn, "{}: skipping record at offset {}: {}", options_.dir, at,
               id.status().ToString());
    log_->Skip(1);
    return;
  }
  if (!value) {
    Erase(*id);
    return;
  }
  auto rec = txn_format::DecodeValue(*value);
  if (!rec.ok()) {
    SLUICE_LOG(kTxnLog, kWarn, "{}: skipping record at offset {} (transactional id {}): {}",
               options_.dir, at, *id, rec.status().ToString());
    log_->Skip(1);
    return;
  }
  Put(*id, std::move(*rec));
}

void TxnLog::Put(const std::string& id, TxnRecord record) {
  auto [it, inserted] = records_.try_emplace(id);
  if (!inserted) live_bytes_ -= RecordSize(id, it->second);
  it->second = std::move(record);
  live_bytes_ += RecordSize(id, it->second);
}

void TxnLog::Erase(const std::string& id) {
  auto it = records_.find(id);
  if (it == records_.end()) return;
  live_bytes_ -= RecordSize(id, it->second);
  records_.erase(it);
}

Status TxnLog::Write(const std::string& id, const std::optional<TxnRecord>& record,
                     Done on_durable) {
  if (closed_) return FailedPreconditionError("transaction log {} is closed", options_.dir);
  if (record && RecordSize(id, *record) + storage::kBatchHeaderSize > kMaxBatchBytes) {
    return InvalidArgumentError("a transaction record of {} bytes is larger than {} takes",
                                RecordSize(id, *record), options_.dir);
  }
  InternalRecord r;
  r.key = txn_format::EncodeKey(id);
  if (record) r.value = txn_format::EncodeValue(*record);
  RETURN_IF_ERROR(
      log_->Append(std::span<const InternalRecord>(&r, 1), kMaxBatchBytes, std::move(on_durable))
          .WithContext("appending to transaction log " + options_.dir));
  if (record) {
    Put(id, *record);
  } else {
    Erase(id);
  }
  return Status::OK();
}

Status TxnLog::Close() {
  if (closed_) return Status::OK();
  closed_ = true;
  return log_ ? log_->Close() : Status::OK();
}

}  // namespace sluice::broker
