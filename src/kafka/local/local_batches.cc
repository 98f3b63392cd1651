#include "kafka/local/local_batches.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "storage/batch_header.h"
#include "storage/txn_index.h"

namespace sluice::kafka::local {

namespace {

using client::Message;

std::string_view View(const std::optional<std::span<const uint8_t>>& bytes) {
  if (!bytes) return {};
  return {reinterpret_cast<const char*>(bytes->data()), bytes->size()};
}

// RecordReader calls a malformed batch InvalidArgument (the produce path's INVALID_RECORD);
// bytes read back from the log that do not decode are corrupt.
Status AsReadError(Status status) {
  if (status.code() != StatusCode::kInvalidArgument) return status;
  return Status(StatusCode::kCorruption, status.message());
}

// Decodes every record of a control batch (a consumer does, so a corrupt one shows) and,
// when `abort` is given, says whether the batch is an abort marker: its first record's key
// is version (int16, >= 0) and type (int16) 0, what Java's ControlRecordType.parse reads.
Status WalkControlBatch(std::span<const uint8_t> batch, size_t max_decompressed, bool* abort) {
  RecordReader reader;
  RETURN_IF_ERROR(reader.Open(batch, max_decompressed));
  Record record;
  while (reader.Next(&record)) {
    if (abort == nullptr || reader.records_read() != 1) continue;
    if (!record.key || record.key->size() < 4) {
      return CorruptionError("control record key of {} bytes is shorter than 4",
                             record.key ? record.key->size() : 0);
    }
    const auto version = static_cast<int16_t>(storage::LoadBE16(record.key->data()));
    if (version < 0) return CorruptionError("control record key version {} is negative", version);
    *abort = static_cast<int16_t>(storage::LoadBE16(record.key->data() + 2)) ==
             static_cast<int16_t>(storage::ControlType::kAbort);
  }
  return reader.status();
}

}  // namespace

DecodeResult BatchDecoder::Decode(const FetchedBytes& fetched, std::vector<Message>* out) {
  DecodeResult result;
  result.generation = ++generation_;
  StartTransactions(fetched);
  const std::span<const uint8_t> bytes = fetched.bytes;
  int64_t position = fetched.fetch_offset;  // the next offset a record may have
  size_t pos = 0;
  while (bytes.size() - pos >= storage::kBatchLogOverhead) {
    const uint8_t* p = bytes.data() + pos;
    const size_t left = bytes.size() - pos;
    const auto length = static_cast<int32_t>(storage::LoadBE32(p + storage::kBatchLengthOffset));
    Status problem;
    if (length < static_cast<int32_t>(storage::kBatchHeaderSize - storage::kBatchLogOverhead)) {
      problem = CorruptionError("batch length {} is shorter than a batch header", length);
    } else if (left > storage::kMagicOffset && p[storage::kMagicOffset] != 2) {
      problem =
          CorruptionError("batch magic {} is not 2", static_cast<int8_t>(p[storage::kMagicOffset]));
    } else {
      const size_t total = storage::kBatchLogOverhead + static_cast<size_t>(length);
      if (left < total) break;  // a trailing partial batch: the next read's
      problem = DecodeBatch(fetched, bytes.subspan(pos, total), result.generation, &position, out);
      if (problem.ok()) {
        pos += total;
        ++result.batches_consumed;
        continue;
      }
    }
    result.status = problem.WithContext(
        fmt::format("{}-{}: batch {} at byte {} (base offset {})", fetched.topic, fetched.partition,
                    result.batches_consumed, pos, static_cast<int64_t>(storage::LoadBE64(p))));
    break;
  }
  result.next_offset = position;
  result.bytes_consumed = pos;
  return result;
}

Status BatchDecoder::DecodeBatch(const FetchedBytes& fetched, std::span<const uint8_t> batch,
                                 uint64_t generation, int64_t* position,
                                 std::vector<Message>* out) {
  const storage::BatchHeader header = storage::ParseBatchHeader(batch);
  if (options_.check_crcs && !storage::CrcMatches(batch)) {
    return CorruptionError("batch CRC {:#010x} does not match its bytes", header.crc);
  }
  RETURN_IF_ERROR(storage::CheckStoredHeader(header, static_cast<uint32_t>(batch.size())));
  // Every offset of the batch, up to its next offset, must be an int64.
  if (header.base_offset < 0 ||
      header.base_offset >= std::numeric_limits<int64_t>::max() - header.last_offset_delta) {
    return CorruptionError("batch base offset {} with last offset delta {} is out of range",
                           header.base_offset, header.last_offset_delta);
  }
  const int64_t next_offset = header.next_offset();
  const auto attributes = static_cast<uint16_t>(header.attributes);
  const bool control = (attributes & storage::kAttrControl) != 0;
  const bool transactional = (attributes & storage::kAttrTransactional) != 0;
  const auto producer_id =
      static_cast<int64_t>(storage::LoadBE64(batch.data() + storage::kProducerIdOffset));
  const bool track_transactions = fetched.read_committed && producer_id >= 0;

  if (track_transactions) AbortTransactionsUpTo(header.last_offset());
  // Record-less batches (a producer's last one, emptied by compaction) and batches of
  // aborted transactions (not even decompressed) count for their offsets only.
  Status st;
  if (control) {
    bool abort = false;
    if (header.records_count != 0) {
      st = WalkControlBatch(batch, options_.max_decompressed_bytes,
                            track_transactions ? &abort : nullptr);
    }
    if (st.ok() && abort) EndAbortedTransaction(producer_id);
  } else if (header.records_count != 0 &&
             !(track_transactions && transactional && ProducerAborted(producer_id))) {
    st = AppendBatch(fetched, batch, header, generation, position, out);
  }
  if (!st.ok()) return AsReadError(std::move(st));
  *position = std::max(*position, next_offset);
  return Status::OK();
}

Status BatchDecoder::AppendBatch(const FetchedBytes& fetched, std::span<const uint8_t> batch,
                                 const storage::BatchHeader& header, uint64_t generation,
                                 int64_t* position, std::vector<Message>* out) {
  ASSIGN_OR_RETURN(Compression codec, CompressionFromAttributes(header.attributes));
  if (codec == Compression::kNone) {
    RETURN_IF_ERROR(reader_.Open(batch, options_.max_decompressed_bytes));
    return AppendRecords(fetched, header, &reader_, position, out);
  }
  // The reader keeps the decompressed records the messages view, until released.
  held_.push_back({generation, std::make_unique<RecordReader>()});
  RecordReader* reader = held_.back().reader.get();
  const size_t mark = out->size();
  Status st = reader->Open(batch, options_.max_decompressed_bytes);
  if (st.ok()) st = AppendRecords(fetched, header, reader, position, out);
  if (st.ok() && out->size() != mark) {
    held_bytes_ += reader->records_size();
  } else {
    held_.pop_back();  // no message views it
  }
  return st;
}

Status BatchDecoder::AppendRecords(const FetchedBytes& fetched, const storage::BatchHeader& header,
                                   RecordReader* reader, int64_t* position,
                                   std::vector<Message>* out) {
  const size_t mark = out->size();
  int64_t next = *position;
  while (reader->Next(&record_)) {
    const int32_t delta = record_.offset_delta;
    if (delta < 0 || delta > header.last_offset_delta) [[unlikely]] {
      out->resize(mark);
      return CorruptionError("record {} has offset delta {}, outside the batch's 0..{}",
                             reader->records_read() - 1, delta, header.last_offset_delta);
    }
    const int64_t offset = header.base_offset + delta;
    if (offset < next) continue;  // before the fetch offset, or out of order (as Java skips)
    next = offset + 1;
    out->push_back(Message{fetched.topic, fetched.partition, offset,
                           RecordTimestamp(header, record_), View(record_.key),
                           View(record_.value)});
  }
  if (!reader->status().ok()) {
    out->resize(mark);
    return reader->status();
  }
  *position = next;
  return Status::OK();
}

void BatchDecoder::ReleaseUpTo(uint64_t generation) {
  while (!held_.empty() && held_.front().generation <= generation) {
    held_bytes_ -= held_.front().reader->records_size();
    held_.pop_front();
  }
}

void BatchDecoder::StartTransactions(const FetchedBytes& fetched) {
  pending_aborts_.clear();
  next_abort_ = 0;
  aborted_producers_.clear();
  if (!fetched.read_committed) return;
  pending_aborts_.assign(fetched.aborted.begin(), fetched.aborted.end());
  std::sort(pending_aborts_.begin(), pending_aborts_.end(),
            [](const AbortedTransaction& a, const AbortedTransaction& b) {
              return a.first_offset < b.first_offset;
            });
}

// Java's consumeAbortedTransactionsUpTo: a transaction that began at or before `offset` (a
// batch's last offset) makes its producer's transactional batches aborted until the
// producer's abort marker.
void BatchDecoder::AbortTransactionsUpTo(int64_t offset) {
  while (next_abort_ < pending_aborts_.size() &&
         pending_aborts_[next_abort_].first_offset <= offset) {
    const int64_t producer_id = pending_aborts_[next_abort_++].producer_id;
    auto it = std::lower_bound(aborted_producers_.begin(), aborted_producers_.end(), producer_id);
    if (it == aborted_producers_.end() || *it != producer_id) {
      aborted_producers_.insert(it, producer_id);
    }
  }
}

bool BatchDecoder::ProducerAborted(int64_t producer_id) const {
  return std::binary_search(aborted_producers_.begin(), aborted_producers_.end(), producer_id);
}

void BatchDecoder::EndAbortedTransaction(int64_t producer_id) {
  auto it = std::lower_bound(aborted_producers_.begin(), aborted_producers_.end(), producer_id);
  if (it != aborted_producers_.end() && *it == producer_id) aborted_producers_.erase(it);
}

}  // namespace sluice::kafka::local
