#include "broker/producer_state.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "storage/log.h"
#include "storage/txn_index.h"

namespace sluice::broker {

using Json = nlohmann::json;

int32_t ProducerBatch::last_sequence() const {
  int64_t last = static_cast<int64_t>(base_sequence) + record_count - 1;
  if (last > INT32_MAX) last -= static_cast<int64_t>(INT32_MAX) + 1;
  return static_cast<int32_t>(last);
}

ProducerBatch ProducerBatch::FromHeader(std::span<const uint8_t> raw) {
  using namespace storage;
  ProducerBatch b;
  b.producer_id = static_cast<int64_t>(LoadBE64(raw.data() + kProducerIdOffset));
  b.producer_epoch = static_cast<int16_t>(LoadBE16(raw.data() + kProducerEpochOffset));
  b.base_sequence = static_cast<int32_t>(LoadBE32(raw.data() + kBaseSequenceOffset));
  b.record_count = static_cast<int32_t>(LoadBE32(raw.data() + kRecordsCountOffset));
  b.transactional = (LoadBE16(raw.data() + kAttributesOffset) & kAttrTransactional) != 0;
  b.max_timestamp = static_cast<int64_t>(LoadBE64(raw.data() + kMaxTimestampOffset));
  return b;
}

namespace {

// A producer whose transaction is open here may write only transactional batches until
// its marker (Kafka's ProducerAppendInfo.appendDataBatch).
template <typename P>
ProducerStateTable::Check CheckTxnState(const ProducerBatch& b, const P& p,
                                        ProducerStateTable::Check c) {
  if (!b.transactional && p.txn_first_offset >= 0) {
    c.verdict = ProducerStateTable::Verdict::kInvalidTxnState;
    c.message = fmt::format(
        "producer {} has a transaction open here since offset {}: expected a transactional batch",
        b.producer_id, p.txn_first_offset);
  }
  return c;
}

}  // namespace

bool ProducerStateTable::TakeEarlyGap(int64_t producer_id, int32_t leader_epoch,
                                      int64_t epoch_start_offset) {
  auto it = producers_.find(producer_id);
  if (it != producers_.end() && !it->second.batches.empty() &&
      it->second.batches.back().last_offset >= epoch_start_offset) {
    return false;
  }
  if (early_gaps_.size() >= kMaxRefused && early_gaps_.count(producer_id) == 0) {
    early_gaps_.clear();
  }
  auto& [epoch, count] = early_gaps_[producer_id];
  if (epoch != leader_epoch) {
    epoch = leader_epoch;
    count = 0;
  }
  if (count >= kMaxEarlyGaps) return false;
  ++count;
  return true;
}

ProducerStateTable::Check ProducerStateTable::CheckBatch(const ProducerBatch& b) const {
  Check c = CheckSequence(b);
  if (c.verdict != Verdict::kOutOfOrder && c.verdict != Verdict::kUnknownProducer) return c;
  auto it = producers_.find(b.producer_id);
  int32_t expected = 0;
  if (it != producers_.end() && it->second.epoch == b.producer_epoch &&
      !it->second.batches.empty() && it->second.batches.back().last_seq != INT32_MAX) {
    expected = it->second.batches.back().last_seq + 1;
  }
  c.expected_sequence = expected;
  // A gap right after a batch refused here: the client is to resend that one first.
  auto r = refused_.find(b.producer_id);
  if (r == refused_.end() || r->second.epoch != b.producer_epoch ||
      r->second.base_sequence == b.base_sequence) {
    return c;
  }
  if (r->second.base_sequence != expected) return c;
  c.verdict = Verdict::kEarlierRefused;
  c.refused_error = r->second.error_code;
  c.message = fmt::format(
      "producer {} epoch {}: its batch at sequence {} was refused here and must come before "
      "sequence {}",
      b.producer_id, b.producer_epoch, expected, b.base_sequence);
  return c;
}

void ProducerStateTable::OnRefused(const ProducerBatch& b, int16_t error_code) {
  if (!b.idempotent() || CheckSequence(b).verdict != Verdict::kAppend) return;
  if (refused_.size() >= kMaxRefused && refused_.count(b.producer_id) == 0) refused_.clear();
  refused_[b.producer_id] = Refused{b.producer_epoch, b.base_sequence, error_code};
}

ProducerStateTable::Check ProducerStateTable::CheckSequence(const ProducerBatch& b) const {
  Check c;
  if (!b.idempotent()) return c;
  auto it = producers_.find(b.producer_id);
  if (it == producers_.end()) {
    if (b.base_sequence != 0) {
      c.verdict = Verdict::kUnknownProducer;
      c.message =
          fmt::format("producer {} has no state here; its first batch must have sequence 0, not {}",
                      b.producer_id, b.base_sequence);
    }
    return c;
  }
  const Producer& p = it->second;
  if (b.producer_epoch < p.epoch) {
    c.verdict = Verdict::kFenced;
    c.message = fmt::format("producer {} epoch {} is older than the current epoch {}",
                            b.producer_id, b.producer_epoch, p.epoch);
    return c;
  }
  if (b.producer_epoch > p.epoch) {
    if (b.base_sequence != 0) {
      c.verdict = Verdict::kOutOfOrder;
      c.message = fmt::format("producer {} new epoch {} must start at sequence 0, not {}",
                              b.producer_id, b.producer_epoch, b.base_sequence);
      return c;
    }
    return CheckTxnState(b, p, c);
  }
  for (const Entry& e : p.batches) {
    if (e.first_seq == b.base_sequence && e.last_seq == b.last_sequence()) {
      c.verdict = Verdict::kDuplicate;
      c.first_offset = e.first_offset;
      c.last_offset = e.last_offset;
      return c;
    }
  }
  int32_t expected = p.batches.empty()                        ? 0
                     : p.batches.back().last_seq == INT32_MAX ? 0
                                                              : p.batches.back().last_seq + 1;
  if (b.base_sequence != expected) {
    c.verdict = Verdict::kOutOfOrder;
    c.message = fmt::format("producer {} epoch {}: expected sequence {}, got {}", b.producer_id,
                            b.producer_epoch, expected, b.base_sequence);
    return c;
  }
  return CheckTxnState(b, p, c);
}

void ProducerStateTable::TakeEpoch(Producer& p, int16_t epoch) {
  if (epoch != p.epoch) {
    p.epoch = epoch;
    p.batches.clear();
  }
}

void ProducerStateTable::OnAppended(const ProducerBatch& b, int64_t first_offset) {
  if (!b.idempotent()) return;
  refused_.erase(b.producer_id);
  Producer& p = producers_[b.producer_id];
  TakeEpoch(p, b.producer_epoch);
  p.batches.push_back(
      Entry{b.base_sequence, b.last_sequence(), first_offset, first_offset + b.record_count - 1});
  if (p.batches.size() > kKeep) p.batches.pop_front();
  p.last_timestamp = b.max_timestamp;
  if (b.transactional && p.txn_first_offset < 0) {
    p.txn_first_offset = first_offset;
    open_[first_offset] = b.producer_id;
    verifying_.erase(b.producer_id);
  }
}

uint64_t ProducerStateTable::StartVerification(int64_t producer_id) {
  if (OpenTxn(producer_id)) return 0;
  // Requests verifying at the same time share the token, as Kafka's verification entry.
  auto [it, added] = verifying_.try_emplace(producer_id, next_token_);
  if (added) ++next_token_;
  return it->second;
}

bool ProducerStateTable::Verified(int64_t producer_id, uint64_t token) const {
  if (OpenTxn(producer_id)) return true;
  auto it = verifying_.find(producer_id);
  return token != 0 && it != verifying_.end() && it->second == token;
}

ProducerStateTable::MarkerVerdict ProducerStateTable::CheckMarker(int64_t producer_id,
                                                                  int16_t producer_epoch,
                                                                  int32_t coordinator_epoch) const {
  auto it = producers_.find(producer_id);
  if (it == producers_.end()) return MarkerVerdict::kOk;
  if (producer_epoch < it->second.epoch) return MarkerVerdict::kFenced;
  if (coordinator_epoch < it->second.coordinator_epoch) return MarkerVerdict::kCoordinatorFenced;
  return MarkerVerdict::kOk;
}

std::optional<int64_t> ProducerStateTable::OpenTxn(int64_t producer_id) const {
  auto it = producers_.find(producer_id);
  if (it == producers_.end() || it->second.txn_first_offset < 0) return std::nullopt;
  return it->second.txn_first_offset;
}

int64_t ProducerStateTable::LastStableOffsetWithout(int64_t producer_id) const {
  for (const auto& [first, pid] : open_) {
    if (pid != producer_id) return first;
  }
  return -1;
}

void ProducerStateTable::OnMarker(int64_t producer_id, int16_t producer_epoch,
                                  int32_t coordinator_epoch, int64_t offset) {
  Producer& p = producers_[producer_id];
  TakeEpoch(p, producer_epoch);
  p.coordinator_epoch = coordinator_epoch;
  if (p.txn_first_offset >= 0) {
    open_.erase(p.txn_first_offset);
    decided_[p.txn_first_offset] = offset;
    p.txn_first_offset = -1;
  }
  verifying_.erase(producer_id);
}

int64_t ProducerStateTable::LastStableOffset(int64_t hw) {
  // A decided transaction stops holding the LSO back once its marker is below the HW.
  std::erase_if(decided_, [hw](const auto& e) { return e.second < hw; });
  int64_t lso = hw;
  if (!open_.empty()) lso = std::min(lso, open_.begin()->first);
  if (!decided_.empty()) lso = std::min(lso, decided_.begin()->first);
  return lso;
}

std::vector<ProducerStateTable::ProducerView> ProducerStateTable::Describe() const {
  std::vector<ProducerView> out;
  out.reserve(producers_.size());
  for (const auto& [pid, p] : producers_) {
    ProducerView v;
    v.producer_id = pid;
    v.epoch = p.epoch;
    v.last_sequence = p.batches.empty() ? -1 : p.batches.back().last_seq;
    v.last_timestamp = p.last_timestamp;
    v.coordinator_epoch = p.coordinator_epoch;
    v.txn_start_offset = p.txn_first_offset;
    out.push_back(v);
  }
  return out;
}

void ProducerStateTable::Replay(const storage::BatchHeader& h, std::span<const uint8_t> raw,
                                std::vector<storage::AbortedTxn>* aborted) {
  ProducerBatch b = ProducerBatch::FromHeader(raw);
  if ((h.attributes & storage::kAttrControl) != 0) {
    // A marker: its type and coordinator epoch are in its one record.
    int32_t coordinator_epoch = -1;
    std::optional<int16_t> type =
        storage::ParseControlType(raw.subspan(storage::kBatchHeaderSize), &coordinator_epoch);
    if (b.producer_id < 0 || !type.has_value()) return;
    std::optional<int64_t> first = OpenTxn(b.producer_id);
    if (*type == static_cast<int16_t>(storage::ControlType::kAbort) && first.has_value()) {
      int64_t lso = LastStableOffsetWithout(b.producer_id);
      aborted->push_back(
          {b.producer_id, *first, h.base_offset, lso >= 0 ? lso : h.base_offset + 1});
    }
    OnMarker(b.producer_id, b.producer_epoch, coordinator_epoch, h.base_offset);
    return;
  }
  // The offsets the batch took (the log checked count = last offset delta + 1).
  b.record_count = h.last_offset_delta + 1;
  OnAppended(b, h.base_offset);
}

Status ProducerStateTable::Rebuild(storage::PartitionLog& log, std::string_view snapshot) {
  producers_.clear();
  open_.clear();
  decided_.clear();
  verifying_.clear();
  refused_.clear();
  early_gaps_.clear();
  int64_t from = 0;
  if (!snapshot.empty()) {
    ProducerStateTable loaded;
    Result<SnapshotInfo> info = loaded.LoadSnapshot(snapshot);
    if (info.ok() && info->offset >= log.start_offset() &&
        info->offset <= log.written_end_offset()) {
      producers_ = std::move(loaded.producers_);
      open_ = std::move(loaded.open_);
      from = info->offset;
    }
  }
  // The aborted transactions as the markers say, for the index (storage keeps it in step
  // with the log; this also restores entries of a lost or damaged .txnindex).
  std::vector<storage::AbortedTxn> aborted;
  Status st = log.ForEachBatchHeader(
      from, [this, &aborted](const storage::BatchHeader& h, std::span<const uint8_t> raw) {
        Replay(h, raw, &aborted);
        return true;
      });
  RETURN_IF_ERROR(st);
  // Everything in the log at open is durable: its decided transactions hold nothing back.
  LastStableOffset(log.written_end_offset());
  if (!aborted.empty()) RETURN_IF_ERROR(log.AddMissingAbortedTxns(aborted).status());
  return Status::OK();
}

std::string ProducerStateTable::Snapshot(int64_t offset, bool complete) const {
  Json producers = Json::array();
  std::map<int64_t, const Producer*> ordered;  // by id: the same state, the same text
  for (const auto& [id, p] : producers_) ordered[id] = &p;
  for (const auto& [id, p] : ordered) {
    Json batches = Json::array();
    for (const Entry& e : p->batches) {
      batches.push_back({e.first_seq, e.last_seq, e.first_offset, e.last_offset});
    }
    producers.push_back({{"id", id},
                         {"epoch", p->epoch},
                         {"coordinator_epoch", p->coordinator_epoch},
                         {"txn_first_offset", p->txn_first_offset},
                         {"last_timestamp", p->last_timestamp},
                         {"batches", std::move(batches)}});
  }
  Json out = {{"version", 1},
              {"offset", offset},
              {"complete", complete},
              {"producers", std::move(producers)}};
  return out.dump();
}

Result<ProducerStateTable::SnapshotInfo> ProducerStateTable::LoadSnapshot(std::string_view text) {
  Json j = Json::parse(text, nullptr, false);
  auto integer = [](const Json& o, const char* key, int64_t lo,
                    int64_t hi) -> std::optional<int64_t> {
    if (!o.is_object() || !o.contains(key) || !o[key].is_number_integer()) return std::nullopt;
    const int64_t v = o[key].get<int64_t>();
    if (v < lo || v > hi) return std::nullopt;
    return v;
  };
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgumentError("a producer snapshot is not a JSON object");
  }
  if (integer(j, "version", 1, 1) != 1) {
    return InvalidArgumentError("a producer snapshot of an unknown version");
  }
  std::optional<int64_t> offset = integer(j, "offset", 0, INT64_MAX);
  if (!offset || !j.contains("complete") || !j["complete"].is_boolean() ||
      !j.contains("producers") || !j["producers"].is_array()) {
    return InvalidArgumentError("a producer snapshot without offset, complete or producers");
  }
  std::unordered_map<int64_t, Producer> producers;
  std::map<int64_t, int64_t> open;
  for (const Json& pj : j["producers"]) {
    const auto id = integer(pj, "id", 0, INT64_MAX);
    const auto epoch = integer(pj, "epoch", -1, INT16_MAX);
    const auto coordinator_epoch = integer(pj, "coordinator_epoch", -1, INT32_MAX);
    const auto txn = integer(pj, "txn_first_offset", -1, *offset - 1);
    const auto ts = integer(pj, "last_timestamp", INT64_MIN, INT64_MAX);
    if (!id || !epoch || !coordinator_epoch || !txn || !ts || !pj.contains("batches") ||
        !pj["batches"].is_array() || pj["batches"].size() > kKeep || producers.count(*id) > 0) {
      return InvalidArgumentError("producer snapshot at offset {}: a malformed producer: {}",
                                  *offset, pj.dump().substr(0, 200));
    }
    Producer p;
    p.epoch = static_cast<int16_t>(*epoch);
    p.coordinator_epoch = static_cast<int32_t>(*coordinator_epoch);
    p.txn_first_offset = *txn;
    p.last_timestamp = *ts;
    for (const Json& b : pj["batches"]) {
      bool ok = b.is_array() && b.size() == 4;
      for (size_t i = 0; ok && i < 4; ++i) ok = b[i].is_number_integer();
      Entry e{};
      if (ok) {
        const int64_t fs = b[0].get<int64_t>(), ls = b[1].get<int64_t>();
        e = {static_cast<int32_t>(fs), static_cast<int32_t>(ls), b[2].get<int64_t>(),
             b[3].get<int64_t>()};
        ok = fs >= 0 && fs <= INT32_MAX && ls >= 0 && ls <= INT32_MAX && e.first_offset >= 0 &&
             e.first_offset <= e.last_offset && e.last_offset < *offset;
      }
      if (!ok) {
        return InvalidArgumentError(
            "producer snapshot at offset {}: producer {}: a malformed batch", *offset, *id);
      }
      p.batches.push_back(e);
    }
    if (p.txn_first_offset >= 0) open[p.txn_first_offset] = *id;
    producers.emplace(*id, std::move(p));
  }
  producers_ = std::move(producers);
  open_ = std::move(open);
  decided_.clear();
  return SnapshotInfo{*offset, j["complete"].get<bool>()};
}

}  // namespace sluice::broker
