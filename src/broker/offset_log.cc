#include "broker/offset_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "base/clock.h"
#include "base/logging.h"
#include "broker/loggers.h"
#include "kafka/protocol/records.h"
#include "kafka/protocol/wire.h"
#include "storage/batch_header.h"

namespace sluice::broker {
namespace {

constexpr int16_t kOffsetKeyVersion = 1;
constexpr int16_t kGroupKeyVersion = 2;
constexpr int16_t kOffsetValueVersion = 3;
constexpr int16_t kGroupValueVersion = 0;
constexpr int16_t kMarkerKeyVersion = 0;
constexpr int16_t kMarkerValueVersion = 0;

// Records are gathered into batches of about this size.
constexpr size_t kTargetBatchBytes = 256 << 10;
// The internal log's message.max.bytes; a single record larger than this (less the batch
// framing) cannot be written.
constexpr uint32_t kMaxBatchBytes = 8 << 20;
// Batch header plus a generous bound on one record's varint framing.
constexpr size_t kBatchOverhead = 61;
constexpr size_t kOffsetRecordOverhead = 24;

size_t StringSize(const std::string& s) { return 2 + s.size(); }
size_t NullableStringSize(const std::optional<std::string>& s) { return 2 + (s ? s->size() : 0); }

uint64_t OffsetRecordSize(const std::string& group, const TopicPartition& tp,
                          const CommittedOffset& v) {
  size_t key = 2 + StringSize(group) + StringSize(tp.topic) + 4;
  size_t value = 2 + 8 + 4 + StringSize(v.metadata) + 8;
  return key + value + kOffsetRecordOverhead;
}

uint64_t GroupRecordSize(const std::string& group, const GroupRecord& r) {
  size_t key = 2 + StringSize(group);
  size_t value = 2 + StringSize(r.protocol_type) + 4 + NullableStringSize(r.protocol) +
                 NullableStringSize(r.leader) + 4;
  return key + value + kOffsetRecordOverhead;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Record formats

namespace offsets_format {

std::vector<uint8_t> EncodeOffsetKey(const std::string& group, const TopicPartition& tp) {
  std::vector<uint8_t> out;
  kafka::Writer w(&out);
  w.Int16(kOffsetKeyVersion);
  w.String(false, group);
  w.String(false, tp.topic);
  w.Int32(tp.partition);
  return out;
}

std::vector<uint8_t> EncodeGroupKey(const std::string& group) {
  std::vector<uint8_t> out;
  kafka::Writer w(&out);
  w.Int16(kGroupKeyVersion);
  w.String(false, group);
  return out;
}

std::vector<uint8_t> EncodeOffsetValue(const CommittedOffset& v) {
  std::vector<uint8_t> out;
  kafka::Writer w(&out);
  w.Int16(kOffsetValueVersion);
  w.Int64(v.offset);
  w.Int32(v.leader_epoch);
  w.String(false, v.metadata);
  w.Int64(v.commit_timestamp_ms);
  return out;
}

std::vector<uint8_t> EncodeGroupValue(const GroupRecord& r) {
  std::vector<uint8_t> out;
  kafka::Writer w(&out);
  w.Int16(kGroupValueVersion);
  w.String(false, r.protocol_type);
  w.Int32(r.generation);
  w.NullableString(false, r.protocol);
  w.NullableString(false, r.leader);
  w.ArrayLength(false, 0);  // members are not persisted
  return out;
}

Result<Key> DecodeKey(std::span<const uint8_t> bytes) {
  kafka::Reader r(bytes);
  int16_t version = r.Int16("key version");
  if (!r.ok()) return r.status().WithContext("__consumer_offsets key");
  Key key;
  if (version == 0 || version == 1) {
    key.kind = Key::Kind::kOffset;
    key.group = r.String(false, "group");
    key.tp.topic = r.String(false, "topic");
    key.tp.partition = r.Int32("partition");
  } else if (version == 2) {
    key.kind = Key::Kind::kGroup;
    key.group = r.String(false, "group");
  } else {
    return InvalidArgumentError("__consumer_offsets key: unknown key version {}", version);
  }
  if (!r.ok()) return r.status().WithContext(fmt::format("__consumer_offsets key v{}", version));
  return key;
}

Result<CommittedOffset> DecodeOffsetValue(std::span<const uint8_t> bytes) {
  kafka::Reader r(bytes);
  int16_t version = r.Int16("value version");
  if (!r.ok()) return r.status().WithContext("OffsetCommitValue");
  if (version < 0 || version > 4) {
    return InvalidArgumentError("OffsetCommitValue: unknown version {}", version);
  }
  const bool flexible = version >= 4;
  CommittedOffset v;
  v.offset = r.Int64("offset");
  if (version >= 3) v.leader_epoch = r.Int32("leader epoch");
  v.metadata = r.String(flexible, "metadata");
  v.commit_timestamp_ms = r.Int64("commit timestamp");
  if (version == 1) r.Int64("expire timestamp");
  if (flexible) r.TaggedFields([](uint32_t, kafka::Reader&) { return false; });
  if (!r.ok()) return r.status().WithContext(fmt::format("OffsetCommitValue v{}", version));
  return v;
}

Result<GroupRecord> DecodeGroupValue(std::span<const uint8_t> bytes) {
  kafka::Reader r(bytes);
  int16_t version = r.Int16("value version");
  if (!r.ok()) return r.status().WithContext("GroupMetadataValue");
  if (version < 0 || version > 4) {
    return InvalidArgumentError("GroupMetadataValue: unknown version {}", version);
  }
  const bool flexible = version >= 4;
  auto skip_tags = [](uint32_t, kafka::Reader&) { return false; };
  GroupRecord g;
  g.protocol_type = r.String(flexible, "protocol type");
  g.generation = r.Int32("generation");
  g.protocol = r.NullableString(flexible, "protocol");
  g.leader = r.NullableString(flexible, "leader");
  if (version >= 2) r.Int64("current state timestamp");
  int32_t members = r.ArrayLength(flexible, "members", 2 + 2 + 2 + 4 + 4 + 4);
  if (members < 0 && r.ok()) r.Fail("members", "null array");
  for (int32_t i = 0; i < members && r.ok(); ++i) {
    r.String(flexible, "member id");
    if (version >= 3) r.NullableString(flexible, "group instance id");
    r.String(flexible, "client id");
    r.String(flexible, "client host");
    if (version >= 1) r.Int32("rebalance timeout");
    r.Int32("session timeout");
    r.NullableBytesView(flexible, "subscription");
    r.NullableBytesView(flexible, "assignment");
    if (flexible) r.TaggedFields(skip_tags);
  }
  if (flexible) r.TaggedFields(skip_tags);
  if (!r.ok()) return r.status().WithContext(fmt::format("GroupMetadataValue v{}", version));
  return g;
}

std::vector<uint8_t> EncodeMarkerKey(bool commit) {
  std::vector<uint8_t> out;
  kafka::Writer w(&out);
  w.Int16(kMarkerKeyVersion);
  w.Int16(commit ? 1 : 0);
  return out;
}

std::vector<uint8_t> EncodeMarkerValue(int32_t coordinator_epoch) {
  std::vector<uint8_t> out;
  kafka::Writer w(&out);
  w.Int16(kMarkerValueVersion);
  w.Int32(coordinator_epoch);
  return out;
}

Result<int32_t> DecodeMarkerValue(std::span<const uint8_t> bytes) {
  kafka::Reader r(bytes);
  int16_t version = r.Int16("marker value version");
  int32_t coordinator_epoch = r.Int32("coordinator epoch");
  if (!r.ok()) return r.status().WithContext("transaction marker value");
  if (version < 0) {
    return InvalidArgumentError("transaction marker value: negative version {}", version);
  }
  return coordinator_epoch;
}

Result<bool> DecodeMarkerKey(std::span<const uint8_t> bytes) {
  kafka::Reader r(bytes);
  int16_t version = r.Int16("control record version");
  int16_t type = r.Int16("control record type");
  if (!r.ok()) return r.status().WithContext("transaction marker key");
  if (version < 0) {
    return InvalidArgumentError("transaction marker key: negative version {}", version);
  }
  if (type == 0) return false;
  if (type == 1) return true;
  return InvalidArgumentError(
      "transaction marker key: control type {} is neither abort (0) nor "
      "commit (1)",
      type);
}

std::vector<uint8_t> BuildMarkerBatch(int64_t producer_id, int16_t producer_epoch, bool commit,
                                      int32_t coordinator_epoch, int64_t timestamp_ms) {
  const std::vector<uint8_t> key = EncodeMarkerKey(commit);
  const std::vector<uint8_t> value = EncodeMarkerValue(coordinator_epoch);
  kafka::RecordInput in;
  in.key = std::span<const uint8_t>(key);
  in.value = std::span<const uint8_t>(value);
  kafka::BatchBuilderOptions bo;
  bo.base_timestamp = timestamp_ms;
  bo.transactional = true;
  bo.control = true;
  bo.producer_id = producer_id;
  bo.producer_epoch = producer_epoch;
  bo.base_sequence = -1;
  return kafka::BuildBatch(bo, std::span<const kafka::RecordInput>(&in, 1));
}

}  // namespace offsets_format

// ---------------------------------------------------------------------------------------
// OffsetWrite

void OffsetWrite::Commit(std::string group, TopicPartition tp, CommittedOffset value) {
  ops_.emplace_back(CommitOp{std::move(group), std::move(tp), std::move(value)});
}
void OffsetWrite::SetGroup(std::string group, GroupRecord record) {
  ops_.emplace_back(SetGroupOp{std::move(group), std::move(record)});
}
void OffsetWrite::DeleteGroup(std::string group) {
  ops_.emplace_back(DeleteGroupOp{std::move(group)});
}
void OffsetWrite::DeleteTopic(std::string topic) {
  ops_.emplace_back(DeleteTopicOp{std::move(topic)});
}

// ---------------------------------------------------------------------------------------
// OffsetLog

OffsetLog::OffsetLog(OffsetLogOptions options) : options_(std::move(options)) {}

OffsetLog::~OffsetLog() {
  Status st = Close();
  if (!st.ok()) SLUICE_LOG(kOffsetsLog, kWarn, "closing {}: {}", options_.dir, st.ToString());
}

Result<std::unique_ptr<OffsetLog>> OffsetLog::Open(OffsetLogOptions options) {
  options.name = kOffsetsLogName;
  options.max_batch_bytes = kMaxBatchBytes;
  InternalLogOptions lo = options;
  std::unique_ptr<OffsetLog> self(new OffsetLog(std::move(options)));
  ASSIGN_OR_RETURN(self->log_, InternalLog::Open(std::move(lo)));
  RETURN_IF_ERROR(self->Replay().WithContext("replaying offsets log " + self->options_.dir));
  self->log_->StartCleaning();
  SLUICE_LOG(kOffsetsLog, kInfo,
             "{}: {} groups, {} offsets ({} pending in {} transactions), {} live bytes in a "
             "{}-byte log ({} records skipped)",
             self->options_.dir, self->groups_.size(), self->offset_count(), self->pending_count(),
             self->txns_.size(), self->live_bytes_, self->log_bytes(), self->skipped_records());
  return self;
}

// Every batch from the log start to the written end (InternalLog::Replay: gaps, emptied
// batches and a start inside the first segment are what a cleaned or snapshotted log
// holds). What does not decode is skipped and counted, never fatal: the rest of the log
// still holds good commits.
Status OffsetLog::Replay() {
  return log_->Replay(
      [this](const InternalBatch& b) {
        if (b.control()) {
          ReplayMarker(b);
          return false;
        }
        if (b.transactional() && (b.producer_id < 0 || b.producer_epoch < 0)) {
          SLUICE_LOG(kOffsetsLog, kWarn,
                     "{}: skipping transactional batch at offset {}: producer id {} epoch {}",
                     options_.dir, b.header.base_offset, b.producer_id, b.producer_epoch);
          log_->Skip(std::max(0, b.header.records_count));
          return false;
        }
        // A producer's last batch the cleaner emptied still carries its epoch.
        if (b.transactional()) NoteEpoch(b.producer_id, b.producer_epoch);
        return true;
      },
      [this](const InternalBatch& b, int64_t at, std::span<const uint8_t> key,
             std::optional<std::span<const uint8_t>> value) {
        ApplyRecord(at, key, value, b.transactional() ? b.producer_id : -1, b.producer_epoch);
      });
}

// A control batch: its first record is the marker (Kafka's loader reads only that one).
// A marker that does not decode is skipped: the producer's offsets stay pending, as if
// the marker had not been written, and the transaction coordinator writes it again.
void OffsetLog::ReplayMarker(const InternalBatch& b) {
  const storage::BatchHeader& h = b.header;
  auto skip = [&](const std::string& why) {
    SLUICE_LOG(kOffsetsLog, kWarn, "{}: skipping transaction marker at offset {}: {}", options_.dir,
               h.base_offset, why);
    log_->Skip(std::max(1, h.records_count));
  };
  if (b.producer_id < 0 || b.producer_epoch < 0) {
    return skip(fmt::format("producer id {} epoch {}", b.producer_id, b.producer_epoch));
  }
  if (h.base_offset < log_->log().start_offset()) {
    return skip("it straddles the log start offset");
  }
  kafka::RecordReader reader;
  Status st = reader.Open(b.bytes, kMaxBatchBytes * 4ull);
  if (!st.ok()) return skip(st.ToString());
  kafka::Record rec;
  if (!reader.Next(&rec)) {
    return skip(reader.status().ok() ? std::string("no record") : reader.status().ToString());
  }
  if (!rec.key) return skip("null key");
  Result<bool> commit = offsets_format::DecodeMarkerKey(*rec.key);
  if (!commit.ok()) return skip(commit.status().ToString());
  // The coordinator epoch only fences later markers: one that does not decode still
  // completes its transaction (skipping it would leave the offsets pending for good).
  Result<int32_t> coordinator_epoch =
      rec.value ? offsets_format::DecodeMarkerValue(*rec.value)
                : Result<int32_t>(InvalidArgumentError("transaction marker value: null"));
  if (coordinator_epoch.ok()) {
    NoteCoordinatorEpoch(b.producer_id, *coordinator_epoch);
  } else {
    SLUICE_LOG(kOffsetsLog, kWarn, "{}: transaction marker at offset {}: {}", options_.dir,
               h.base_offset, coordinator_epoch.status().ToString());
  }
  NoteEpoch(b.producer_id, b.producer_epoch);
  ApplyMarker(b.producer_id, *commit);
}

void OffsetLog::ApplyRecord(int64_t at, std::span<const uint8_t> key_bytes,
                            std::optional<std::span<const uint8_t>> value, int64_t producer_id,
                            int16_t producer_epoch) {
  using offsets_format::Key;
  auto key = offsets_format::DecodeKey(key_bytes);
  if (!key.ok()) {
    SLUICE_LOG(kOffsetsLog, kWarn, "{}: skipping record at offset {}: {}", options_.dir, at,
               key.status().ToString());
    log_->Skip(1);
    return;
  }
  if (key->kind == Key::Kind::kOffset) {
    if (!value) {
      // A tombstone in a transaction removes only that producer's pending offset (Kafka's
      // loader); outside one it removes the offset and every pending one of the key.
      if (producer_id >= 0) {
        ErasePending(producer_id, key->group, key->tp);
      } else {
        EraseOffset(key->group, key->tp);
        ErasePendingOfAll(key->group, key->tp);
      }
      return;
    }
    auto v = offsets_format::DecodeOffsetValue(*value);
    if (!v.ok()) {
      SLUICE_LOG(kOffsetsLog, kWarn, "{}: skipping record at offset {} (group {}, {}-{}): {}",
                 options_.dir, at, key->group, key->tp.topic, key->tp.partition,
                 v.status().ToString());
      log_->Skip(1);
      return;
    }
    if (producer_id >= 0) {
      PutPending(producer_id, producer_epoch, key->group, key->tp, std::move(*v), at);
    } else {
      PutOffset(key->group, key->tp, std::move(*v), at);
    }
  } else {
    if (!value) {
      EraseGroupRecord(key->group);
      return;
    }
    auto g = offsets_format::DecodeGroupValue(*value);
    if (!g.ok()) {
      SLUICE_LOG(kOffsetsLog, kWarn, "{}: skipping record at offset {} (group {}): {}",
                 options_.dir, at, key->group, g.status().ToString());
      log_->Skip(1);
      return;
    }
    PutGroup(key->group, std::move(*g));
  }
}

void OffsetLog::PutOffset(const std::string& group, const TopicPartition& tp, CommittedOffset value,
                          int64_t at) {
  GroupState& g = groups_[group];
  auto [it, inserted] = g.offsets.try_emplace(tp);
  if (!inserted) live_bytes_ -= OffsetRecordSize(group, tp, it->second);
  it->second = std::move(value);
  live_bytes_ += OffsetRecordSize(group, tp, it->second);
  g.offset_at[tp] = at;
}

void OffsetLog::EraseOffset(const std::string& group, const TopicPartition& tp) {
  auto g = groups_.find(group);
  if (g == groups_.end()) return;
  auto it = g->second.offsets.find(tp);
  if (it == g->second.offsets.end()) return;
  live_bytes_ -= OffsetRecordSize(group, tp, it->second);
  g->second.offsets.erase(it);
  g->second.offset_at.erase(tp);
  DropIfEmpty(group);
}

void OffsetLog::PutPending(int64_t producer_id, int16_t producer_epoch, const std::string& group,
                           const TopicPartition& tp, CommittedOffset value, int64_t at) {
  ProducerTxn& txn = txns_[producer_id];
  txn.epoch = std::max(txn.epoch, producer_epoch);
  auto [it, inserted] = txn.offsets[group].try_emplace(tp);
  if (!inserted) live_bytes_ -= OffsetRecordSize(group, tp, it->second.value);
  it->second = PendingOffset{std::move(value), at};
  live_bytes_ += OffsetRecordSize(group, tp, it->second.value);
  groups_[group].open_producers.insert(producer_id);
}

void OffsetLog::ErasePending(int64_t producer_id, const std::string& group,
                             const TopicPartition& tp) {
  auto t = txns_.find(producer_id);
  if (t == txns_.end()) return;
  auto g = t->second.offsets.find(group);
  if (g == t->second.offsets.end()) return;
  auto it = g->second.find(tp);
  if (it == g->second.end()) return;
  live_bytes_ -= OffsetRecordSize(group, tp, it->second.value);
  g->second.erase(it);
  if (!g->second.empty()) return;
  t->second.offsets.erase(g);
  if (t->second.offsets.empty()) txns_.erase(t);
  auto gs = groups_.find(group);
  if (gs != groups_.end()) {
    gs->second.open_producers.erase(producer_id);
    DropIfEmpty(group);
  }
}

void OffsetLog::ErasePendingOfAll(const std::string& group, const TopicPartition& tp) {
  auto g = groups_.find(group);
  if (g == groups_.end()) return;
  // ErasePending may erase from open_producers (and the group): iterate over a copy.
  const std::set<int64_t> producers = g->second.open_producers;
  for (int64_t pid : producers) ErasePending(pid, group, tp);
}

// Kafka's completePendingTxnOffsetCommit for every group of the producer: a pending offset
// becomes visible only over an offset whose record is older than its own.
void OffsetLog::ApplyMarker(int64_t producer_id, bool commit) {
  auto t = txns_.find(producer_id);
  if (t == txns_.end()) return;
  ProducerTxn txn = std::move(t->second);
  txns_.erase(t);
  for (auto& [group, offsets] : txn.offsets) {
    for (auto& [tp, pending] : offsets) {
      live_bytes_ -= OffsetRecordSize(group, tp, pending.value);
      if (!commit) continue;
      const GroupState& g = groups_[group];
      auto at = g.offset_at.find(tp);
      if (at == g.offset_at.end() || at->second < pending.at) {
        PutOffset(group, tp, std::move(pending.value), pending.at);
      }
    }
    groups_[group].open_producers.erase(producer_id);
    DropIfEmpty(group);
  }
}

void OffsetLog::NoteEpoch(int64_t producer_id, int16_t producer_epoch) {
  auto [it, inserted] = producer_epochs_.try_emplace(producer_id, producer_epoch);
  if (!inserted) it->second = std::max(it->second, producer_epoch);
}

void OffsetLog::NoteCoordinatorEpoch(int64_t producer_id, int32_t coordinator_epoch) {
  auto [it, inserted] = coordinator_epochs_.try_emplace(producer_id, coordinator_epoch);
  if (!inserted) it->second = std::max(it->second, coordinator_epoch);
}

void OffsetLog::NoteInFlight(const std::string& group, const TopicPartition& tp, int delta) {
  auto key = std::make_pair(group, tp);
  InFlight& f = in_flight_[key];
  f.count += delta;
  if (f.count <= 0) in_flight_.erase(key);
}

void OffsetLog::SupersedeInFlight(const std::string& group, const TopicPartition& tp, int64_t at) {
  auto it = in_flight_.find(std::make_pair(group, tp));
  if (it != in_flight_.end()) it->second.superseded_at = std::max(it->second.superseded_at, at);
}

bool OffsetLog::Fenced(int64_t producer_id, int16_t producer_epoch) const {
  auto it = producer_epochs_.find(producer_id);
  return it != producer_epochs_.end() && producer_epoch < it->second;
}

void OffsetLog::PutGroup(const std::string& group, GroupRecord record) {
  GroupState& g = groups_[group];
  if (g.record) live_bytes_ -= GroupRecordSize(group, *g.record);
  g.record = std::move(record);
  live_bytes_ += GroupRecordSize(group, *g.record);
}

void OffsetLog::EraseGroupRecord(const std::string& group) {
  auto g = groups_.find(group);
  if (g == groups_.end() || !g->second.record) return;
  live_bytes_ -= GroupRecordSize(group, *g->second.record);
  g->second.record.reset();
  DropIfEmpty(group);
}

void OffsetLog::DropIfEmpty(const std::string& group) {
  auto g = groups_.find(group);
  if (g != groups_.end() && g->second.offsets.empty() && !g->second.record &&
      g->second.open_producers.empty()) {
    groups_.erase(g);
  }
}

// Sizes first, so that a record too large changes nothing.
Status OffsetLog::CheckSizes(const OffsetWrite& write) const {
  for (const auto& op : write.ops_) {
    uint64_t size = 0;
    if (const auto* c = std::get_if<OffsetWrite::CommitOp>(&op)) {
      size = OffsetRecordSize(c->group, c->tp, c->value);
    } else if (const auto* s = std::get_if<OffsetWrite::SetGroupOp>(&op)) {
      size = GroupRecordSize(s->group, s->record);
    }
    if (size + kBatchOverhead > kMaxBatchBytes) {
      return InvalidArgumentError(
          "a {}-byte record is larger than the offsets log takes ({} bytes)", size,
          kMaxBatchBytes - kBatchOverhead);
    }
  }
  return Status::OK();
}

// Each record's log offset is known before it is appended: this thread is the only
// appender, and AppendRecords gives the records consecutive offsets from end_offset().
Status OffsetLog::Write(const OffsetWrite& write, Done on_durable) {
  if (closed_) return FailedPreconditionError("offsets log {} is closed", options_.dir);
  RETURN_IF_ERROR(CheckSizes(write));
  const int64_t base = log_->end_offset();
  std::vector<InternalRecord> records;
  auto next_at = [&] { return base + static_cast<int64_t>(records.size()) - 1; };
  // Tombstones for the key and for every pending offset of it.
  auto erase_key = [&](const std::string& group, const TopicPartition& tp) {
    records.push_back({offsets_format::EncodeOffsetKey(group, tp), std::nullopt});
    SupersedeInFlight(group, tp, next_at());
    EraseOffset(group, tp);
    ErasePendingOfAll(group, tp);
  };
  for (const auto& op : write.ops_) {
    if (const auto* c = std::get_if<OffsetWrite::CommitOp>(&op)) {
      records.push_back({offsets_format::EncodeOffsetKey(c->group, c->tp),
                         offsets_format::EncodeOffsetValue(c->value)});
      PutOffset(c->group, c->tp, c->value, next_at());
    } else if (const auto* s = std::get_if<OffsetWrite::SetGroupOp>(&op)) {
      records.push_back(
          {offsets_format::EncodeGroupKey(s->group), offsets_format::EncodeGroupValue(s->record)});
      PutGroup(s->group, s->record);
    } else if (const auto* d = std::get_if<OffsetWrite::DeleteGroupOp>(&op)) {
      // Tombstones for everything written for the group, including writes not yet
      // durable (they precede these tombstones in the log) and pending offsets (as
      // Kafka's deleteAllOffsets).
      std::set<TopicPartition> keys;
      auto g = groups_.find(d->group);
      if (g != groups_.end()) {
        for (const auto& [tp, v] : g->second.offsets) keys.insert(tp);
        for (int64_t pid : g->second.open_producers) {
          for (const auto& [tp, p] : txns_.at(pid).offsets.at(d->group)) keys.insert(tp);
        }
      }
      // Commits in flight too: a tombstone follows them in the log.
      for (auto it = in_flight_.lower_bound({d->group, TopicPartition{"", INT32_MIN}});
           it != in_flight_.end() && it->first.first == d->group; ++it) {
        keys.insert(it->first.second);
      }
      for (const TopicPartition& tp : keys) erase_key(d->group, tp);
      // Always written: cheap, and it also covers a group record this process never saw
      // (a record skipped at replay).
      records.push_back({offsets_format::EncodeGroupKey(d->group), std::nullopt});
      EraseGroupRecord(d->group);
    } else if (const auto* t = std::get_if<OffsetWrite::DeleteTopicOp>(&op)) {
      std::set<std::pair<std::string, TopicPartition>> keys;
      auto in_topic = [&](const TopicPartition& tp) { return tp.topic == t->topic; };
      for (const auto& [group, g] : groups_) {
        for (auto it = g.offsets.lower_bound(TopicPartition{t->topic, INT32_MIN});
             it != g.offsets.end() && in_topic(it->first); ++it) {
          keys.emplace(group, it->first);
        }
      }
      for (const auto& [pid, txn] : txns_) {
        for (const auto& [group, offsets] : txn.offsets) {
          for (const auto& [tp, p] : offsets) {
            if (in_topic(tp)) keys.emplace(group, tp);
          }
        }
      }
      for (const auto& [key, f] : in_flight_) {
        if (in_topic(key.second)) keys.insert(key);
      }
      for (const auto& [group, tp] : keys) erase_key(group, tp);
    }
  }
  if (records.empty()) {
    on_durable(Status::OK());
    return Status::OK();
  }
  return AppendRecords(records, std::move(on_durable));
}

Status OffsetLog::AppendOffsets(const OffsetWrite& write, Done on_durable,
                                AppendedOffsets* appended) {
  if (closed_) return FailedPreconditionError("offsets log {} is closed", options_.dir);
  for (const auto& op : write.ops_) {
    if (!std::holds_alternative<OffsetWrite::CommitOp>(op)) {
      return InvalidArgumentError("AppendOffsets takes offsets only");
    }
  }
  RETURN_IF_ERROR(CheckSizes(write));
  RETURN_IF_ERROR(AppendCommits(write, -1, -1, std::move(on_durable), appended));
  for (const auto& e : appended->entries) NoteInFlight(e.group, e.tp, +1);
  return Status::OK();
}

Status OffsetLog::AppendCommits(const OffsetWrite& write, int64_t producer_id,
                                int16_t producer_epoch, Done on_durable,
                                AppendedOffsets* appended) {
  appended->producer_id = producer_id;
  appended->entries.clear();
  if (write.empty()) {
    on_durable(Status::OK());
    return Status::OK();
  }
  const int64_t base = log_->end_offset();
  std::vector<InternalRecord> records;
  for (const auto& op : write.ops_) {
    const auto& c = std::get<OffsetWrite::CommitOp>(op);
    records.push_back({offsets_format::EncodeOffsetKey(c.group, c.tp),
                       offsets_format::EncodeOffsetValue(c.value), producer_id, producer_epoch});
    appended->entries.push_back(
        {c.group, c.tp, c.value, base + static_cast<int64_t>(records.size()) - 1});
  }
  Status st = AppendRecords(records, std::move(on_durable));
  if (!st.ok()) appended->entries.clear();
  return st;
}

void OffsetLog::FinishOffsets(const AppendedOffsets& appended, bool ok) {
  for (const auto& e : appended.entries) {
    auto key = std::make_pair(e.group, e.tp);
    auto f = in_flight_.find(key);
    const int64_t superseded = f != in_flight_.end() ? f->second.superseded_at : -1;
    NoteInFlight(e.group, e.tp, -1);
    if (!ok || superseded > e.at) continue;
    // A newer record of the key already visible (a commit acknowledged first, or a
    // transaction's offset committed after) wins, as replay would have it.
    auto g = groups_.find(e.group);
    if (g != groups_.end()) {
      auto at = g->second.offset_at.find(e.tp);
      if (at != g->second.offset_at.end() && at->second > e.at) continue;
    }
    PutOffset(e.group, e.tp, e.value, e.at);
  }
}

void OffsetLog::FailTxnOffsets(const AppendedOffsets& appended) {
  for (const auto& e : appended.entries) {
    auto t = txns_.find(appended.producer_id);
    if (t == txns_.end()) return;  // completed meanwhile (a marker)
    auto g = t->second.offsets.find(e.group);
    if (g == t->second.offsets.end()) continue;
    auto it = g->second.find(e.tp);
    if (it == g->second.end() || it->second.at != e.at) continue;  // a later write's
    ErasePending(appended.producer_id, e.group, e.tp);
  }
}

Status OffsetLog::WriteTxnOffsets(int64_t producer_id, int16_t producer_epoch,
                                  const OffsetWrite& write, Done on_durable,
                                  AppendedOffsets* appended) {
  if (closed_) return FailedPreconditionError("offsets log {} is closed", options_.dir);
  if (producer_id < 0 || producer_epoch < 0) {
    return InvalidArgumentError("transactional offsets need a producer id and epoch, not {}/{}",
                                producer_id, producer_epoch);
  }
  for (const auto& op : write.ops_) {
    if (!std::holds_alternative<OffsetWrite::CommitOp>(op)) {
      return InvalidArgumentError("a transaction writes offsets only");
    }
  }
  if (Fenced(producer_id, producer_epoch)) {
    return AbortedError("producer {} epoch {} is older than its epoch {} in the offsets log",
                        producer_id, producer_epoch, *ProducerEpoch(producer_id));
  }
  RETURN_IF_ERROR(CheckSizes(write));
  if (write.empty()) {
    on_durable(Status::OK());
    return Status::OK();
  }
  AppendedOffsets local;
  AppendedOffsets* out = appended != nullptr ? appended : &local;
  RETURN_IF_ERROR(AppendCommits(write, producer_id, producer_epoch, std::move(on_durable), out));
  // Pending (invisible) once appended; FailTxnOffsets takes them back if the write fails.
  for (const auto& e : out->entries) {
    PutPending(producer_id, producer_epoch, e.group, e.tp, e.value, e.at);
  }
  NoteEpoch(producer_id, producer_epoch);
  return Status::OK();
}

Status OffsetLog::CompleteTxn(int64_t producer_id, int16_t producer_epoch, bool commit,
                              int32_t coordinator_epoch, Done on_durable) {
  if (closed_) return FailedPreconditionError("offsets log {} is closed", options_.dir);
  if (producer_id < 0 || producer_epoch < 0) {
    return InvalidArgumentError("a transaction marker needs a producer id and epoch, not {}/{}",
                                producer_id, producer_epoch);
  }
  if (Fenced(producer_id, producer_epoch)) {
    return AbortedError("producer {} epoch {} is older than its epoch {} in the offsets log",
                        producer_id, producer_epoch, *ProducerEpoch(producer_id));
  }
  if (auto last = CoordinatorEpoch(producer_id); last && coordinator_epoch < *last) {
    return Status(
        StatusCode::kOutOfRange,
        fmt::format(
            "producer {}: coordinator epoch {} is older than {}, its last marker's in the offsets "
            "log",
            producer_id, coordinator_epoch, *last));
  }
  std::vector<uint8_t> batch = offsets_format::BuildMarkerBatch(producer_id, producer_epoch, commit,
                                                                coordinator_epoch, WallMillis());
  RETURN_IF_ERROR(log_->AppendBatch(batch, std::move(on_durable))
                      .WithContext("appending a transaction marker"));
  NoteEpoch(producer_id, producer_epoch);
  NoteCoordinatorEpoch(producer_id, coordinator_epoch);
  ApplyMarker(producer_id, commit);
  return Status::OK();
}

// Batches of about kTargetBatchBytes, a new one wherever the producer changes (records of
// a transaction go in transactional batches of their producer), with consecutive offsets
// from end_offset().
Status OffsetLog::AppendRecords(const std::vector<InternalRecord>& records, Done on_durable) {
  return log_->Append(records, kTargetBatchBytes, std::move(on_durable));
}

const CommittedOffset* OffsetLog::Find(const std::string& group, const TopicPartition& tp) const {
  const OffsetMap* offsets = Offsets(group);
  if (offsets == nullptr) return nullptr;
  auto it = offsets->find(tp);
  return it == offsets->end() ? nullptr : &it->second;
}

const OffsetLog::OffsetMap* OffsetLog::Offsets(const std::string& group) const {
  auto g = groups_.find(group);
  if (g == groups_.end() || g->second.offsets.empty()) return nullptr;
  return &g->second.offsets;
}

const GroupRecord* OffsetLog::Group(const std::string& group) const {
  auto g = groups_.find(group);
  if (g == groups_.end() || !g->second.record) return nullptr;
  return &*g->second.record;
}

std::vector<std::string> OffsetLog::GroupIds() const {
  std::vector<std::string> ids;
  ids.reserve(groups_.size());
  for (const auto& [id, g] : groups_) ids.push_back(id);
  return ids;
}

bool OffsetLog::HasPendingOffset(const std::string& group, const TopicPartition& tp) const {
  if (in_flight_.count(std::make_pair(group, tp)) != 0) return true;  // a commit in flight
  auto g = groups_.find(group);
  if (g == groups_.end()) return false;
  for (int64_t pid : g->second.open_producers) {
    if (FindPending(pid, group, tp) != nullptr) return true;
  }
  return false;
}

bool OffsetLog::HasPendingOffsets(const std::string& group) const {
  auto f = in_flight_.lower_bound({group, TopicPartition{"", INT32_MIN}});
  if (f != in_flight_.end() && f->first.first == group) return true;
  auto g = groups_.find(group);
  return g != groups_.end() && !g->second.open_producers.empty();
}

const CommittedOffset* OffsetLog::FindPending(int64_t producer_id, const std::string& group,
                                              const TopicPartition& tp) const {
  auto t = txns_.find(producer_id);
  if (t == txns_.end()) return nullptr;
  auto g = t->second.offsets.find(group);
  if (g == t->second.offsets.end()) return nullptr;
  auto it = g->second.find(tp);
  return it == g->second.end() ? nullptr : &it->second.value;
}

std::vector<int64_t> OffsetLog::OpenProducers() const {
  std::vector<int64_t> ids;
  ids.reserve(txns_.size());
  for (const auto& [pid, txn] : txns_) ids.push_back(pid);
  return ids;
}

std::optional<int16_t> OffsetLog::ProducerEpoch(int64_t producer_id) const {
  auto it = producer_epochs_.find(producer_id);
  if (it == producer_epochs_.end()) return std::nullopt;
  return it->second;
}

std::optional<int32_t> OffsetLog::CoordinatorEpoch(int64_t producer_id) const {
  auto it = coordinator_epochs_.find(producer_id);
  if (it == coordinator_epochs_.end()) return std::nullopt;
  return it->second;
}

size_t OffsetLog::pending_count() const {
  size_t n = 0;
  for (const auto& [pid, txn] : txns_) {
    for (const auto& [group, offsets] : txn.offsets) n += offsets.size();
  }
  return n;
}

size_t OffsetLog::offset_count() const {
  size_t n = 0;
  for (const auto& [id, g] : groups_) n += g.offsets.size();
  return n;
}

Status OffsetLog::Close() {
  if (closed_) return Status::OK();
  closed_ = true;
  return log_ ? log_->Close() : Status::OK();
}

}  // namespace sluice::broker
