// The aborted-transaction index of a segment, <base>.txnindex (Kafka's TransactionIndex),
// and the control record key a reader needs to tell a commit marker from an abort marker.
// Byte layout in docs/formats/storage.md; design in docs/design/0016-transactions.md
// ("Partitions").
//
// One 34-byte entry per aborted transaction whose abort marker is in the segment, in the
// order of the markers (big-endian):
//
//   offset  size  field
//   0       2     version = 0
//   2       8     producer id
//   10      8     first offset of the transaction
//   18      8     last offset: the abort marker's offset
//   26      8     last stable offset right after the abort was decided
//
// Pure functions over bytes; the files are read and written by PartitionLog
// (storage/log_txn.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace sluice::storage {

inline constexpr size_t kAbortedTxnSize = 34;
inline constexpr int16_t kAbortedTxnVersion = 0;

struct AbortedTxn {
  int64_t producer_id = -1;
  int64_t first_offset = -1;
  int64_t last_offset = -1;         // the abort marker's offset
  int64_t last_stable_offset = -1;  // what the LSO became once this transaction ended
  bool operator==(const AbortedTxn&) const = default;
};

// Writes the 34-byte entry of `txn` at `out`.
void EncodeAbortedTxn(const AbortedTxn& txn, uint8_t* out);

// The entries of an index file's bytes, stopping at the first that is not whole or has a
// version other than 0 (`problem` then says which, with the byte position).
struct TxnIndexContents {
  std::vector<AbortedTxn> entries;
  std::string problem;  // empty when every byte was a good entry
};
TxnIndexContents ParseTxnIndex(std::span<const uint8_t> bytes);

// Kafka's collectAbortedTxns over one segment's entries: appends to `out` the aborted
// transactions overlapping [from, upper) (last offset >= from, first offset < upper).
// Returns true when the search is complete: an entry's last stable offset is at or past
// `upper`, so no later segment holds a transaction that started before `upper`.
bool CollectAbortedTxns(std::span<const AbortedTxn> entries, int64_t from, int64_t upper,
                        std::vector<AbortedTxn>* out);

// Control batches (attributes bit 5) hold one record whose key is version (int16, 0) and
// type (int16): 0 abort, 1 commit (Kafka's ControlRecordType); the value of a
// transaction marker is version (int16, 0) and the coordinator epoch (int32).
enum class ControlType : int16_t { kAbort = 0, kCommit = 1 };

// Bytes past a control batch's header that hold its first record's key and a marker's
// value (record length, attributes, timestamp delta, offset delta, key length, the 4-byte
// key, value length and the 6-byte value, each varint at its longest).
inline constexpr size_t kControlPeekBytes = 5 + 1 + 10 + 5 + 5 + 4 + 5 + 6;

// The control type of an uncompressed control batch's first record, from the bytes that
// follow the batch header (at least the first record's key); nullopt when they do not
// hold a key of version 0 (a record of another kind or version, or too few bytes). When
// `coordinator_epoch` is given and the bytes also hold a marker value (version >= 0,
// then the epoch), it receives the epoch; otherwise it is left alone.
std::optional<int16_t> ParseControlType(std::span<const uint8_t> records_prefix,
                                        int32_t* coordinator_epoch = nullptr);

}  // namespace sluice::storage
