// PartitionLog, the aborted-transaction index: each segment's <base>.txnindex made to
// agree with its log at recovery and truncation, and Kafka's collectAbortedTxns over the
// segments. Entries are appended by the write job (log.cc: AppendOptions::aborted_txn),
// synced before the marker they describe, so a marker on disk always has its entry; an
// entry whose marker was lost (a torn tail, a truncation) is dropped here. The entry
// format is in txn_index.h and docs/formats/storage.md.
#include <algorithm>

#include "base/logging.h"
#include "storage/log.h"
#include "storage/loggers.h"
#include "storage/segment.h"
#include "storage/txn_index.h"

namespace sluice::storage {
namespace {

// The entries of a .txnindex file, up to `max_entries` (all when unset).
Result<TxnIndexContents> ReadTxnIndex(File& file, uint64_t max_entries = UINT64_MAX) {
  ASSIGN_OR_RETURN(uint64_t size, file.Size());
  size = std::min<uint64_t>(size, max_entries == UINT64_MAX ? size : max_entries * kAbortedTxnSize);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0) {
    ASSIGN_OR_RETURN(size_t n, file.ReadAt(0, bytes));
    bytes.resize(n);
  }
  return ParseTxnIndex(bytes);
}

}  // namespace

// Keeps the leading entries that are whole, of version 0, in marker order and inside the
// segment's offsets [base, next_offset); cuts the file after them. The last segment's
// file is created when missing (logs written before the index existed), so the write
// job only ever extends a file whose name is durable.
Status PartitionLog::RecoverTxnIndex(Segment& seg, bool is_last) {
  Env* env = options_.env;
  if (!env->Exists(seg.txn_index_path)) {
    seg.txn_entries = seg.written_txn_entries = 0;
    if (!is_last) return Status::OK();
    RETURN_IF_ERROR(files_->Get(seg.txn_index_path, OpenMode::kCreate).status());
    return env->SyncDir(dir_);
  }
  ASSIGN_OR_RETURN(auto file, files_->Get(seg.txn_index_path, OpenMode::kReadWrite));
  ASSIGN_OR_RETURN(uint64_t size, file->Size());
  ASSIGN_OR_RETURN(TxnIndexContents c, ReadTxnIndex(*file));
  size_t keep = 0;
  int64_t prev_last = -1;
  std::string problem = c.problem;
  for (const AbortedTxn& t : c.entries) {
    if (t.last_offset < seg.base_offset || t.last_offset >= seg.next_offset ||
        t.last_offset <= prev_last || t.first_offset > t.last_offset) {
      problem = fmt::format(
          "entry {} (producer {}, offsets {}..{}) has no marker in the segment "
          "[{}, {})",
          keep, t.producer_id, t.first_offset, t.last_offset, seg.base_offset, seg.next_offset);
      break;
    }
    prev_last = t.last_offset;
    ++keep;
  }
  if (keep * kAbortedTxnSize != size) {
    SLUICE_LOG(kLog, kWarn, "recovery: cutting {} after {} entries: {}", seg.txn_index_path, keep,
               problem);
    RETURN_IF_ERROR(file->Truncate(keep * kAbortedTxnSize));
    RETURN_IF_ERROR(file->Sync());
    ++recovery_.indexes_rebuilt;
  }
  seg.txn_entries = seg.written_txn_entries = keep;
  return Status::OK();
}

// After a truncation cut `seg` (no I/O pending): its entries past the new end go, as
// Kafka's TransactionIndex.truncateTo.
Status PartitionLog::CutTxnIndex(Segment& seg) {
  if (seg.txn_entries == 0) return Status::OK();
  ASSIGN_OR_RETURN(auto file, files_->Get(seg.txn_index_path, OpenMode::kReadWrite));
  ASSIGN_OR_RETURN(TxnIndexContents c, ReadTxnIndex(*file, seg.txn_entries));
  size_t keep = 0;
  while (keep < c.entries.size() && c.entries[keep].last_offset < seg.next_offset) ++keep;
  if (keep == seg.txn_entries) return Status::OK();
  RETURN_IF_ERROR(file->Truncate(keep * kAbortedTxnSize));
  RETURN_IF_ERROR(file->Sync());
  seg.txn_entries = seg.written_txn_entries = keep;
  return Status::OK();
}

Result<std::vector<AbortedTxn>> PartitionLog::CollectAbortedTxns(int64_t from, int64_t upper) {
  struct Candidate {
    std::shared_ptr<Segment> seg;
    uint64_t entries;
  };
  std::vector<Candidate> segs;
  uint64_t gen;
  {
    std::lock_guard lock(mu_);
    if (closed_) return FailedPreconditionError("log {} is closed", dir_);
    // From the segment holding `from`: an earlier segment's markers are all below it.
    for (size_t i = 0; i < segments_.size(); ++i) {
      const auto& s = segments_[i];
      bool holds_or_after = i + 1 == segments_.size() || segments_[i + 1]->base_offset > from;
      if (holds_or_after && s->written_txn_entries > 0) segs.push_back({s, s->written_txn_entries});
    }
    gen = layout_gen_;
  }
  std::vector<AbortedTxn> out;
  for (const Candidate& c : segs) {
    auto file = files_->Get(c.seg->txn_index_path, OpenMode::kRead);
    if (!file.ok()) return LayoutChangedOr(gen, file.status());
    auto contents = ReadTxnIndex(**file, c.entries);
    if (!contents.ok()) return LayoutChangedOr(gen, contents.status());
    if (contents->entries.size() < c.entries) {
      return LayoutChangedOr(
          gen, CorruptionError("{}: {} of {} entries readable ({})", c.seg->txn_index_path,
                               contents->entries.size(), c.entries, contents->problem));
    }
    if (storage::CollectAbortedTxns(contents->entries, from, upper, &out)) break;
  }
  return out;
}

Result<int> PartitionLog::AddMissingAbortedTxns(std::span<const AbortedTxn> txns) {
  // Held through the rewrites: nothing else may touch the index files meanwhile (the
  // owner calls this at open, before anything is appended).
  std::lock_guard lock(mu_);
  if (closed_) return FailedPreconditionError("log {} is closed", dir_);
  if (!pending_.empty() || job_running_) {
    return FailedPreconditionError("log {}: appends are pending", dir_);
  }
  int added = 0;
  for (const auto& seg : segments_) {
    std::vector<AbortedTxn> wanted;
    for (const AbortedTxn& t : txns) {
      if (t.last_offset >= seg->base_offset && t.last_offset < seg->next_offset)
        wanted.push_back(t);
    }
    if (wanted.empty()) continue;
    ASSIGN_OR_RETURN(auto file, files_->Get(seg->txn_index_path, OpenMode::kCreate));
    ASSIGN_OR_RETURN(TxnIndexContents c, ReadTxnIndex(*file, seg->written_txn_entries));
    std::vector<AbortedTxn> merged = c.entries;
    size_t before = merged.size();
    for (const AbortedTxn& t : wanted) {
      bool present = std::any_of(merged.begin(), merged.end(), [&](const AbortedTxn& e) {
        return e.last_offset == t.last_offset;
      });
      if (!present) merged.push_back(t);
    }
    if (merged.size() == before) continue;
    std::sort(merged.begin(), merged.end(), [](const AbortedTxn& a, const AbortedTxn& b) {
      return a.last_offset < b.last_offset;
    });
    std::vector<uint8_t> bytes(merged.size() * kAbortedTxnSize);
    for (size_t i = 0; i < merged.size(); ++i) {
      EncodeAbortedTxn(merged[i], bytes.data() + i * kAbortedTxnSize);
    }
    RETURN_IF_ERROR(file->WriteAt(0, bytes));
    RETURN_IF_ERROR(file->Truncate(bytes.size()));
    RETURN_IF_ERROR(file->Sync());
    RETURN_IF_ERROR(options_.env->SyncDir(dir_));  // in case the file was created here
    SLUICE_LOG(kLog, kWarn, "{}: added {} aborted transactions found in the log",
               seg->txn_index_path, merged.size() - before);
    added += static_cast<int>(merged.size() - before);
    seg->txn_entries = seg->written_txn_entries = merged.size();
  }
  return added;
}

}  // namespace sluice::storage
