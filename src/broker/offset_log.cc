#include "broker/offset_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "base/clock.h"
#include "base/logging.h"
#include "kafka/protocol/records.h"
#include "kafka/protocol/wire.h"

namespace sluice::broker {
namespace {

const Logger kLog("offsets");

constexpr int16_t kOffsetKeyVersion = 1;
constexpr int16_t kGroupKeyVersion = 2;
constexpr int16_t kOffsetValueVersion = 3;
constexpr int16_t kGroupValueVersion = 0;

// Records are gathered into batches of about this size.
constexpr size_t kTargetBatchBytes = 256 << 10;
// The internal log's message.max.bytes; a single record larger than this (less the batch
// framing) cannot be written.
constexpr uint32_t kMaxBatchBytes = 8 << 20;
// Batch header plus a generous bound on one record's varint framing.
constexpr size_t kBatchOverhead = 61;
constexpr size_t kRecordOverhead = 24;
// Bytes read from the log per Read at replay.
constexpr uint64_t kReplayReadBytes = 4 << 20;

size_t StringSize(const std::string& s) { return 2 + s.size(); }
size_t NullableStringSize(const std::optional<std::string>& s) { return 2 + (s ? s->size() : 0); }

uint64_t OffsetRecordSize(const std::string& group, const TopicPartition& tp,
                          const CommittedOffset& v) {
  size_t key = 2 + StringSize(group) + StringSize(tp.topic) + 4;
  size_t value = 2 + 8 + 4 + StringSize(v.metadata) + 8;
  return key + value + kRecordOverhead;
}

uint64_t GroupRecordSize(const std::string& group, const GroupRecord& r) {
  size_t key = 2 + StringSize(group);
  size_t value = 2 + StringSize(r.protocol_type) + 4 + NullableStringSize(r.protocol) +
                 NullableStringSize(r.leader) + 4;
  return key + value + kRecordOverhead;
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
  if (!st.ok()) SLUICE_LOG(kLog, kWarn, "closing {}: {}", options_.dir, st.ToString());
}

Result<std::unique_ptr<OffsetLog>> OffsetLog::Open(OffsetLogOptions options) {
  if (options.executor == nullptr)
    return InvalidArgumentError("offsets log {}: no IoExecutor", options.dir);
  if (options.snapshot_ratio < 2) {
    return InvalidArgumentError("offsets log {}: snapshot ratio {} must be at least 2", options.dir,
                                options.snapshot_ratio);
  }
  storage::LogOptions lo;
  lo.env = options.env;
  lo.executor = options.executor;
  lo.files = options.files;
  lo.flush_policy = options.flush_policy;
  lo.flush_ms = options.flush_ms;
  lo.segment_bytes = options.segment_bytes;
  lo.max_batch_bytes = kMaxBatchBytes;
  lo.retention_bytes = -1;  // never expired: only snapshots remove records
  lo.retention_ms = -1;
  std::unique_ptr<OffsetLog> self(new OffsetLog(std::move(options)));
  RETURN_IF_ERROR(self->options_.env->CreateDirs(self->options_.dir));
  ASSIGN_OR_RETURN(self->log_, storage::PartitionLog::Open(self->options_.dir, lo));
  RETURN_IF_ERROR(self->Replay().WithContext("replaying offsets log " + self->options_.dir));
  SLUICE_LOG(kLog, kInfo,
             "{}: {} groups, {} offsets, {} live bytes in a {}-byte log ({} records skipped)",
             self->options_.dir, self->groups_.size(), self->offset_count(), self->live_bytes_,
             self->log_->size_bytes(), self->skipped_records_);
  return self;
}

// Reads every batch from the log start to the written end. A batch whose records do not
// decode is skipped whole; a record whose key or value does not decode is skipped alone.
// Both are reported, never fatal: the rest of the log still holds good commits.
Status OffsetLog::Replay() {
  const int64_t start = log_->start_offset();
  const int64_t end = log_->written_end_offset();
  int64_t offset = start;
  std::vector<uint8_t> buf;
  while (offset < end) {
    ASSIGN_OR_RETURN(storage::ReadResult rr, log_->Read(offset, kReplayReadBytes));
    if (rr.slice.size == 0) break;
    buf.clear();
    RETURN_IF_ERROR(storage::PartitionLog::ReadSlice(rr.slice, &buf));
    size_t pos = 0;
    while (pos + storage::kBatchHeaderSize <= buf.size()) {
      storage::BatchHeader h = storage::ParseBatchHeader(std::span(buf).subspan(pos));
      if (h.length < 0 || pos + h.total_size() > buf.size()) {
        return CorruptionError("batch at offset {} runs past the bytes read", h.base_offset);
      }
      std::span<const uint8_t> batch(buf.data() + pos, h.total_size());
      pos += h.total_size();
      if (h.next_offset() <= start) continue;
      kafka::RecordReader reader;
      Status st = reader.Open(batch, kMaxBatchBytes * 4ull);
      if (!st.ok()) {
        SLUICE_LOG(kLog, kWarn, "{}: skipping batch at offset {}: {}", options_.dir, h.base_offset,
                   st.ToString());
        skipped_records_ += h.records_count;
        continue;
      }
      kafka::Record rec;
      while (reader.Next(&rec)) {
        int64_t at = h.base_offset + rec.offset_delta;
        if (at < start) continue;
        if (!rec.key) {
          SLUICE_LOG(kLog, kWarn, "{}: skipping record at offset {}: null key", options_.dir, at);
          ++skipped_records_;
          continue;
        }
        ApplyRecord(at, *rec.key, rec.value);
      }
      if (!reader.status().ok()) {
        SLUICE_LOG(kLog, kWarn, "{}: rest of batch at offset {} skipped: {}", options_.dir,
                   h.base_offset, reader.status().ToString());
        skipped_records_ += std::max(0, h.records_count - reader.records_read());
      }
    }
    offset = rr.next_offset;
  }
  return Status::OK();
}

void OffsetLog::ApplyRecord(int64_t at, std::span<const uint8_t> key_bytes,
                            std::optional<std::span<const uint8_t>> value) {
  using offsets_format::Key;
  auto key = offsets_format::DecodeKey(key_bytes);
  if (!key.ok()) {
    SLUICE_LOG(kLog, kWarn, "{}: skipping record at offset {}: {}", options_.dir, at,
               key.status().ToString());
    ++skipped_records_;
    return;
  }
  if (key->kind == Key::Kind::kOffset) {
    if (!value) {
      EraseOffset(key->group, key->tp);
      return;
    }
    auto v = offsets_format::DecodeOffsetValue(*value);
    if (!v.ok()) {
      SLUICE_LOG(kLog, kWarn, "{}: skipping record at offset {} (group {}, {}-{}): {}",
                 options_.dir, at, key->group, key->tp.topic, key->tp.partition,
                 v.status().ToString());
      ++skipped_records_;
      return;
    }
    PutOffset(key->group, key->tp, std::move(*v));
  } else {
    if (!value) {
      EraseGroupRecord(key->group);
      return;
    }
    auto g = offsets_format::DecodeGroupValue(*value);
    if (!g.ok()) {
      SLUICE_LOG(kLog, kWarn, "{}: skipping record at offset {} (group {}): {}", options_.dir, at,
                 key->group, g.status().ToString());
      ++skipped_records_;
      return;
    }
    PutGroup(key->group, std::move(*g));
  }
}

void OffsetLog::PutOffset(const std::string& group, const TopicPartition& tp,
                          CommittedOffset value) {
  OffsetMap& offsets = groups_[group].offsets;
  auto [it, inserted] = offsets.try_emplace(tp);
  if (!inserted) live_bytes_ -= OffsetRecordSize(group, tp, it->second);
  it->second = std::move(value);
  live_bytes_ += OffsetRecordSize(group, tp, it->second);
}

void OffsetLog::EraseOffset(const std::string& group, const TopicPartition& tp) {
  auto g = groups_.find(group);
  if (g == groups_.end()) return;
  auto it = g->second.offsets.find(tp);
  if (it == g->second.offsets.end()) return;
  live_bytes_ -= OffsetRecordSize(group, tp, it->second);
  g->second.offsets.erase(it);
  DropIfEmpty(group);
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
  if (g != groups_.end() && g->second.offsets.empty() && !g->second.record) groups_.erase(g);
}

Status OffsetLog::Write(const OffsetWrite& write, Done on_durable) {
  if (closed_) return FailedPreconditionError("offsets log {} is closed", options_.dir);
  // Sizes first, so that a record too large changes nothing.
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
  std::vector<RawRecord> records;
  for (const auto& op : write.ops_) {
    if (const auto* c = std::get_if<OffsetWrite::CommitOp>(&op)) {
      records.push_back({offsets_format::EncodeOffsetKey(c->group, c->tp),
                         offsets_format::EncodeOffsetValue(c->value)});
      PutOffset(c->group, c->tp, c->value);
    } else if (const auto* s = std::get_if<OffsetWrite::SetGroupOp>(&op)) {
      records.push_back(
          {offsets_format::EncodeGroupKey(s->group), offsets_format::EncodeGroupValue(s->record)});
      PutGroup(s->group, s->record);
    } else if (const auto* d = std::get_if<OffsetWrite::DeleteGroupOp>(&op)) {
      // Tombstones for everything written for the group, including writes not yet
      // durable: they precede these tombstones in the log.
      auto g = groups_.find(d->group);
      if (g != groups_.end()) {
        for (const auto& [tp, v] : g->second.offsets) {
          records.push_back({offsets_format::EncodeOffsetKey(d->group, tp), std::nullopt});
          live_bytes_ -= OffsetRecordSize(d->group, tp, v);
        }
        if (g->second.record) live_bytes_ -= GroupRecordSize(d->group, *g->second.record);
        groups_.erase(g);
      }
      // Always written: cheap, and it also covers a group record this process never saw
      // (a record skipped at replay).
      records.push_back({offsets_format::EncodeGroupKey(d->group), std::nullopt});
    } else if (const auto* t = std::get_if<OffsetWrite::DeleteTopicOp>(&op)) {
      for (auto g = groups_.begin(); g != groups_.end();) {
        OffsetMap& offsets = g->second.offsets;
        auto it = offsets.lower_bound(TopicPartition{t->topic, INT32_MIN});
        while (it != offsets.end() && it->first.topic == t->topic) {
          records.push_back({offsets_format::EncodeOffsetKey(g->first, it->first), std::nullopt});
          live_bytes_ -= OffsetRecordSize(g->first, it->first, it->second);
          it = offsets.erase(it);
        }
        if (offsets.empty() && !g->second.record) {
          g = groups_.erase(g);
        } else {
          ++g;
        }
      }
    }
  }
  if (records.empty()) {
    on_durable(Status::OK());
    return Status::OK();
  }
  return AppendRecords(records, std::move(on_durable));
}

// Batches of about kTargetBatchBytes; only the last append carries the callback: the
// log acknowledges in order, so its durability covers the others.
Status OffsetLog::AppendRecords(const std::vector<RawRecord>& records, Done on_durable) {
  const int64_t now = WallMillis();
  std::vector<std::vector<uint8_t>> batches;
  size_t i = 0;
  while (i < records.size()) {
    std::vector<kafka::RecordInput> inputs;
    size_t bytes = kBatchOverhead;
    size_t j = i;
    while (j < records.size()) {
      size_t size = records[j].key.size() + (records[j].value ? records[j].value->size() : 0) +
                    kRecordOverhead;
      if (j > i && bytes + size > kTargetBatchBytes) break;
      kafka::RecordInput in;
      in.key = std::span<const uint8_t>(records[j].key);
      if (records[j].value) in.value = std::span<const uint8_t>(*records[j].value);
      inputs.push_back(std::move(in));
      bytes += size;
      ++j;
    }
    kafka::BatchBuilderOptions bo;
    bo.base_timestamp = now;
    batches.push_back(kafka::BuildBatch(bo, inputs));
    i = j;
  }
  auto append = [&](const std::vector<uint8_t>& batch, storage::AppendCallback on_ack) -> Status {
    storage::AppendOptions ao;
    ao.ack = storage::AckLevel::kDurable;
    ao.on_ack = std::move(on_ack);
    auto appended = log_->Append(batch, std::move(ao));
    return appended.ok()
               ? Status::OK()
               : appended.status().WithContext("appending to offsets log " + options_.dir);
  };
  for (size_t b = 0; b + 1 < batches.size(); ++b) RETURN_IF_ERROR(append(batches[b], nullptr));
  return append(batches.back(), [cb = std::move(on_durable)](
                                    const Status& st, const storage::AppendInfo&) { cb(st); });
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

size_t OffsetLog::offset_count() const {
  size_t n = 0;
  for (const auto& [id, g] : groups_) n += g.offsets.size();
  return n;
}

bool OffsetLog::SnapshotDue() const {
  if (closed_ || snapshot_running_) return false;
  uint64_t size = log_->size_bytes();
  return size > options_.snapshot_min_bytes && size > options_.snapshot_ratio * live_bytes_;
}

Status OffsetLog::StartSnapshot(Done on_durable) {
  if (closed_) return FailedPreconditionError("offsets log {} is closed", options_.dir);
  if (snapshot_running_)
    return FailedPreconditionError("a snapshot of {} is under way", options_.dir);
  std::vector<RawRecord> records;
  for (const auto& [group, g] : groups_) {
    if (g.record) {
      records.push_back(
          {offsets_format::EncodeGroupKey(group), offsets_format::EncodeGroupValue(*g.record)});
    }
    for (const auto& [tp, v] : g.offsets) {
      records.push_back(
          {offsets_format::EncodeOffsetKey(group, tp), offsets_format::EncodeOffsetValue(v)});
    }
  }
  const int64_t start = log_->end_offset();
  SLUICE_LOG(kLog, kInfo, "{}: snapshot of {} records ({} live bytes, log {} bytes) at offset {}",
             options_.dir, records.size(), live_bytes_, log_->size_bytes(), start);
  if (records.empty()) {
    // Nothing live: everything written so far is dead. (Appends not yet written are
    // tombstones, since nothing is live; they stay.)
    snapshot_running_ = true;
    snapshot_start_ = log_->written_end_offset();
    on_durable(Status::OK());
    return Status::OK();
  }
  RETURN_IF_ERROR(AppendRecords(records, std::move(on_durable)));
  snapshot_running_ = true;
  snapshot_start_ = start;
  return Status::OK();
}

Status OffsetLog::FinishSnapshot(const Status& written) {
  if (!snapshot_running_)
    return FailedPreconditionError("no snapshot of {} under way", options_.dir);
  snapshot_running_ = false;
  if (!written.ok()) return written.WithContext("writing the snapshot of " + options_.dir);
  if (closed_) return FailedPreconditionError("offsets log {} is closed", options_.dir);
  const uint64_t before = log_->size_bytes();
  const int segments_before = log_->segment_count();
  auto start = log_->DeleteRecordsBefore(snapshot_start_);
  if (!start.ok())
    return start.status().WithContext("dropping what the snapshot of " + options_.dir +
                                      " replaced");
  SLUICE_LOG(kLog, kInfo, "{}: snapshot done, log start {}, {} -> {} segments, {} -> {} bytes",
             options_.dir, *start, segments_before, log_->segment_count(), before,
             log_->size_bytes());
  return Status::OK();
}

Status OffsetLog::Close() {
  if (closed_) return Status::OK();
  closed_ = true;
  return log_ ? log_->Close() : Status::OK();
}

}  // namespace sluice::broker
