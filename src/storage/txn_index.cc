// The aborted-transaction index entries and the control record key. See txn_index.h.
#include "storage/txn_index.h"

#include <fmt/format.h>

#include "storage/batch_header.h"
#include "storage/segment.h"

namespace sluice::storage {

void EncodeAbortedTxn(const AbortedTxn& txn, uint8_t* out) {
  StoreBE16(out, static_cast<uint16_t>(kAbortedTxnVersion));
  StoreBE64(out + 2, static_cast<uint64_t>(txn.producer_id));
  StoreBE64(out + 10, static_cast<uint64_t>(txn.first_offset));
  StoreBE64(out + 18, static_cast<uint64_t>(txn.last_offset));
  StoreBE64(out + 26, static_cast<uint64_t>(txn.last_stable_offset));
}

TxnIndexContents ParseTxnIndex(std::span<const uint8_t> bytes) {
  TxnIndexContents c;
  size_t pos = 0;
  for (; pos + kAbortedTxnSize <= bytes.size(); pos += kAbortedTxnSize) {
    const uint8_t* p = bytes.data() + pos;
    int16_t version = static_cast<int16_t>(LoadBE16(p));
    if (version != kAbortedTxnVersion) {
      c.problem = fmt::format("entry at byte {} has version {} (want 0)", pos, version);
      return c;
    }
    AbortedTxn t;
    t.producer_id = static_cast<int64_t>(LoadBE64(p + 2));
    t.first_offset = static_cast<int64_t>(LoadBE64(p + 10));
    t.last_offset = static_cast<int64_t>(LoadBE64(p + 18));
    t.last_stable_offset = static_cast<int64_t>(LoadBE64(p + 26));
    c.entries.push_back(t);
  }
  if (pos < bytes.size()) {
    c.problem =
        fmt::format("{} trailing bytes at byte {} are not a whole entry", bytes.size() - pos, pos);
  }
  return c;
}

bool CollectAbortedTxns(std::span<const AbortedTxn> entries, int64_t from, int64_t upper,
                        std::vector<AbortedTxn>* out) {
  for (const AbortedTxn& t : entries) {
    if (t.last_offset >= from && t.first_offset < upper) out->push_back(t);
    if (t.last_stable_offset >= upper) return true;
  }
  return false;
}

std::optional<int16_t> ParseControlType(std::span<const uint8_t> records_prefix,
                                        int32_t* coordinator_epoch) {
  log_internal::VarintReader r(records_prefix.data(),
                               records_prefix.data() + records_prefix.size());
  int64_t length, ts_delta, offset_delta, key_length;
  if (!r.ReadVarlong(&length) || length <= 0) return std::nullopt;
  if (!r.Skip(1) || !r.ReadVarlong(&ts_delta) || !r.ReadVarlong(&offset_delta)) return std::nullopt;
  if (!r.ReadVarlong(&key_length) || key_length < 4 || r.remaining() < 4) return std::nullopt;
  const uint8_t* key = r.pos();
  if (static_cast<int16_t>(LoadBE16(key)) != 0) return std::nullopt;
  int16_t type = static_cast<int16_t>(LoadBE16(key + 2));
  int64_t value_length;
  if (coordinator_epoch != nullptr && r.Skip(static_cast<size_t>(key_length)) &&
      r.ReadVarlong(&value_length) && value_length >= 6 && r.remaining() >= 6 &&
      static_cast<int16_t>(LoadBE16(r.pos())) >= 0) {
    *coordinator_epoch = static_cast<int32_t>(LoadBE32(r.pos() + 2));
  }
  return type;
}

}  // namespace sluice::storage
