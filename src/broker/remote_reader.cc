// Reads of offsets that only tiered storage holds. See remote_reader.h.
#include "broker/remote_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "base/logging.h"
#include "base/metrics.h"
#include "broker/loggers.h"
#include "broker/record_lookup.h"
#include "storage/env.h"

namespace sluice::broker {
namespace {

constexpr size_t kReadAheadMemory = 64;  // chunks remembered as read ahead
constexpr int kReadAheadChunks = 4;      // how many chunks past a read are fetched ahead

// A copy's file, open, keeping the copy in the cache while a slice of it is held.
Result<std::shared_ptr<storage::File>> OpenCopy(const RemoteStore::Copy& copy) {
  struct Held {
    std::unique_ptr<storage::File> file;
    std::shared_ptr<const void> hold;
  };
  auto held = std::make_shared<Held>();
  ASSIGN_OR_RETURN(held->file, storage::Env::Posix()->Open(copy.path, storage::OpenMode::kRead));
  held->hold = copy.hold;
  storage::File* raw = held->file.get();
  return std::shared_ptr<storage::File>(std::move(held), raw);
}

}  // namespace

RemoteReader::RemoteReader(const RemoteStore* store, const RemoteSegments* index, int threads,
                           int ahead_threads, uint64_t chunk_bytes)
    : store_(store), index_(index), chunk_bytes_(chunk_bytes) {
  for (int i = 0; i < std::max(threads, 1); ++i) threads_.emplace_back([this] { Run(false); });
  for (int i = 0; i < std::max(ahead_threads, 1); ++i) threads_.emplace_back([this] { Run(true); });
}

RemoteReader::~RemoteReader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  for (std::thread& t : threads_) t.join();
  // Asks left are answered with errors: their callers must not wait forever.
  for (Job& job : jobs_) {
    job.batch->fail(job.ask);
    if (--job.batch->left == 0) job.batch->done();
  }
}

template <typename AskT, typename AnswerT>
void RemoteReader::Submit(std::vector<AskT> asks, AnswerT (RemoteReader::*answer)(const AskT&),
                          std::function<void(std::vector<AnswerT>)> done) {
  if (asks.empty()) return done({});
  struct State {
    std::vector<AskT> asks;
    std::vector<AnswerT> answers;
  };
  auto state = std::make_shared<State>();
  state->answers.resize(asks.size());
  state->asks = std::move(asks);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      for (AnswerT& a : state->answers) a.error = kafka::ErrorCode::kKafkaStorageError;
      return done(std::move(state->answers));
    }
  }
  auto batch = std::make_shared<Batch>();
  batch->answer = [this, state, answer](size_t i) {
    state->answers[i] = (this->*answer)(state->asks[i]);
  };
  batch->fail = [state](size_t i) {
    state->answers[i].error = kafka::ErrorCode::kKafkaStorageError;
  };
  batch->done = [state, done = std::move(done)] { done(std::move(state->answers)); };
  batch->left = state->asks.size();
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < batch->left; ++i) jobs_.push_back(Job{batch, i, {}, 0});
  cv_.notify_all();
}

void RemoteReader::Read(std::vector<RemoteReadAsk> asks,
                        std::function<void(std::vector<RemoteReadAnswer>)> done) {
  Submit(std::move(asks), &RemoteReader::ReadOne, std::move(done));
}

void RemoteReader::FindByTime(std::vector<RemoteTimeAsk> asks,
                              std::function<void(std::vector<RemoteTimeAnswer>)> done) {
  Submit(std::move(asks), &RemoteReader::FindOne, std::move(done));
}

void RemoteReader::Run(bool ahead) {
  std::deque<Job>& queue = ahead ? ahead_ : jobs_;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue.empty(); });
    if (stopping_) return;
    Job job = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    if (job.batch == nullptr) {
      // Downloaded into the cache and let go: the reader that follows finds it there.
      Result<storage::SegmentFile> file = OpenIndex(job.ahead);
      if (file.ok()) file = OpenChunk(job.ahead, *std::move(file), job.ahead_at);
      if (!file.ok()) {
        SLUICE_LOG(kTieredLog, kDebug, "reading ahead {} at byte {}: {}", job.ahead.log,
                   job.ahead_at, file.status().message());
      }
      lock.lock();
      continue;
    }
    job.batch->answer(job.ask);
    lock.lock();
    if (--job.batch->left == 0) {
      lock.unlock();
      job.batch->done();
      lock.lock();
    }
  }
}

RemoteReadAnswer RemoteReader::ReadOne(const RemoteReadAsk& ask) {
  static Counter& reads = MetricsRegistry::Global().GetCounter(
      "sluice_tiered_fetch_total", "Fetches of partitions answered from tiered storage.");
  static Counter& failures = MetricsRegistry::Global().GetCounter(
      "sluice_tiered_fetch_errors_total",
      "Fetches of tiered storage that failed (answered KAFKA_STORAGE_ERROR).");
  static Counter& bytes = MetricsRegistry::Global().GetCounter(
      "sluice_tiered_fetch_bytes_total", "Bytes of record batches read from tiered storage.");
  reads.Inc();
  Result<RemoteReadAnswer> answer = Answer(ask);
  if (answer.ok()) {
    if (answer->slice.has_value()) bytes.Inc(answer->slice->size);
    return *std::move(answer);
  }
  RemoteReadAnswer failed;
  if (answer.status().code() == StatusCode::kOutOfRange) {
    failed.error = kafka::ErrorCode::kOffsetOutOfRange;
  } else {
    failures.Inc();
    failed.error = kafka::ErrorCode::kKafkaStorageError;
    SLUICE_LOG(kTieredLog, kWarn, "reading offset {} of partition {} from {}: {}", ask.offset,
               ask.partition, store_->Describe(), answer.status().message());
  }
  return failed;
}

Result<RemoteReadAnswer> RemoteReader::Answer(const RemoteReadAsk& ask) {
  std::shared_ptr<const RemoteSegmentList> list = index_->Get(ask.topic_id, ask.partition);
  const RemoteSegment* seg = list != nullptr ? list->Covering(ask.offset) : nullptr;
  if (seg == nullptr) {
    // Below the remote start: gone (retention). Otherwise the list is older than what the
    // owner saw (an upload published meanwhile): asked again, it is there.
    if (list != nullptr && list->start >= 0 && ask.offset >= list->start) {
      return UnavailableError("offset {} is not in the published remote segments yet", ask.offset);
    }
    return OutOfRangeError("offset {} is not in tiered storage", ask.offset);
  }
  RemoteReadAnswer out;
  if (seg->base >= ask.limit) return out;
  const int64_t offset = std::max(ask.offset, seg->base);
  ASSIGN_OR_RETURN(storage::SegmentFile file, OpenIndex(*seg));
  ASSIGN_OR_RETURN(uint64_t pos, storage::IndexPosition(file, offset));
  Result<storage::ReadResult> read = OutOfRangeError("offset {} is not in the segment", offset);
  for (bool first_chunk = true; pos < seg->size; first_chunk = false) {
    ASSIGN_OR_RETURN(file, OpenChunk(*seg, std::move(file), pos));
    int64_t at = offset;
    if (!first_chunk) {
      // Past the last chunk's batches (a gap at its end): this one from its first batch.
      at = -1;
      RETURN_IF_ERROR(storage::ForEachSegmentFileBatch(
          file, offset, [&](const storage::BatchHeader& h, uint64_t) {
            at = std::max(offset, h.base_offset);
            return false;
          }));
      if (at < 0) break;
    }
    read = storage::ReadSegmentFile(file, at, ask.max_bytes, ask.limit, ask.empty);
    if (read.ok() || read.status().code() != StatusCode::kOutOfRange) break;
    pos = file.stop();
  }
  RETURN_IF_ERROR(read.status());
  storage::ReadResult& r = *read;
  ReadAhead(*list, *seg, file, file.stop(), ask.local_start);
  if (r.slice.size == 0) return out;
  if (ask.read_committed) {
    // Kafka's collectAbortedTxns over the remote segments from this one on, until an
    // entry's LSO shows no later one can overlap.
    bool complete = false;
    for (const RemoteSegment* s = seg; s != nullptr && s->base < ask.local_start && !complete;
         s = list->After(s)) {
      if (s->txn_index.empty()) continue;
      ASSIGN_OR_RETURN(RemoteStore::Copy copy, store_->Fetch(s->txn_index, 0));
      ASSIGN_OR_RETURN(std::shared_ptr<storage::File> f, OpenCopy(copy));
      ASSIGN_OR_RETURN(uint64_t n, f->Size());
      std::vector<uint8_t> bytes(n);
      ASSIGN_OR_RETURN(size_t got, f->ReadAt(0, bytes));
      bytes.resize(got);
      storage::TxnIndexContents entries = storage::ParseTxnIndex(bytes);
      complete =
          storage::CollectAbortedTxns(entries.entries, ask.offset, r.next_offset, &out.aborted);
    }
    // Those whose abort marker is in the local log.
    for (const storage::AbortedTxn& t : ask.local_aborted) {
      if (!complete && t.first_offset < r.next_offset && t.last_offset >= ask.offset)
        out.aborted.push_back(t);
    }
  }
  out.holds_records = r.holds_records;
  out.slice = std::move(r.slice);
  return out;
}

Result<storage::SegmentFile> RemoteReader::OpenIndex(const RemoteSegment& seg, bool time_index) {
  storage::SegmentFile file;
  file.size = seg.size;
  file.base_offset = seg.base;
  if (!seg.index.empty()) {
    ASSIGN_OR_RETURN(RemoteStore::Copy index_copy, store_->Fetch(seg.index, 0));
    ASSIGN_OR_RETURN(file.index, OpenCopy(index_copy));
  }
  if (time_index && !seg.time_index.empty()) {
    ASSIGN_OR_RETURN(RemoteStore::Copy copy, store_->Fetch(seg.time_index, 0));
    ASSIGN_OR_RETURN(file.time_index, OpenCopy(copy));
  }
  return file;
}

Result<storage::SegmentFile> RemoteReader::OpenChunk(const RemoteSegment& seg,
                                                     storage::SegmentFile file, uint64_t pos) {
  ASSIGN_OR_RETURN(auto chunk, storage::SegmentChunkAt(file, pos, chunk_bytes_));
  ASSIGN_OR_RETURN(RemoteStore::Copy copy,
                   store_->FetchRange(seg.log, chunk.first, chunk.second - chunk.first));
  ASSIGN_OR_RETURN(file.log, OpenCopy(copy));
  file.from = chunk.first;
  file.end = chunk.second;
  return file;
}

RemoteTimeAnswer RemoteReader::FindOne(const RemoteTimeAsk& ask) {
  Result<RemoteTimeAnswer> answer = AnswerTime(ask);
  if (answer.ok()) return *answer;
  SLUICE_LOG(kTieredLog, kWarn, "finding timestamp {} of partition {} in {}: {}", ask.timestamp,
             ask.partition, store_->Describe(), answer.status().message());
  RemoteTimeAnswer failed;
  failed.error = kafka::ErrorCode::kKafkaStorageError;
  return failed;
}

Result<RemoteTimeAnswer> RemoteReader::AnswerTime(const RemoteTimeAsk& ask) {
  std::shared_ptr<const RemoteSegmentList> list = index_->Get(ask.topic_id, ask.partition);
  const RemoteSegment* seg = list != nullptr ? list->Covering(ask.base) : nullptr;
  if (seg == nullptr || seg->base != ask.base) {
    // Deleted by retention since the owner looked: asked again, the owner looks afresh.
    return UnavailableError("remote segment {} is no longer published", ask.base);
  }
  // Kafka's order: the first batch whose max timestamp reaches the target, then its first
  // record that does (or the batch's first record past `from` when none decodes). Chunk by
  // chunk from the one holding `from`, or later where the .timeindex says every batch
  // before is older.
  auto pick = [&](int64_t ts) { return ask.exact ? ts == ask.timestamp : ts >= ask.timestamp; };
  const int64_t from = std::max(ask.from, seg->base);
  ASSIGN_OR_RETURN(storage::SegmentFile file, OpenIndex(*seg, true));
  ASSIGN_OR_RETURN(int64_t older_before, storage::TimeIndexStart(file, ask.timestamp));
  ASSIGN_OR_RETURN(uint64_t pos, storage::IndexPosition(file, std::max(from, older_before)));
  RemoteTimeAnswer out;
  std::vector<uint8_t> bytes;
  Status read_error;
  bool found = false;
  while (!found && pos < seg->size) {
    ASSIGN_OR_RETURN(file, OpenChunk(*seg, std::move(file), pos));
    RETURN_IF_ERROR(storage::ForEachSegmentFileBatch(
        file, from, [&](const storage::BatchHeader& h, uint64_t at) {
          if (!pick(h.max_timestamp)) return true;
          found = true;
          bytes.resize(h.total_size());
          Result<size_t> n = file.log->ReadAt(at - file.from, bytes);
          if (!n.ok()) {
            read_error = n.status();
            return false;
          }
          bytes.resize(*n);
          auto rec = FindRecordInBatch(bytes, ask.from, pick);
          out.offset = rec ? rec->first : std::max(h.base_offset, ask.from);
          out.timestamp = rec ? rec->second : h.max_timestamp;
          return false;
        }));
    RETURN_IF_ERROR(read_error);
    pos = file.stop();
  }
  return out;
}

void RemoteReader::ReadAhead(const RemoteSegmentList& list, const RemoteSegment& seg,
                             const storage::SegmentFile& file, uint64_t pos, int64_t local_start) {
  // The chunks that follow: this segment's from its index, then the first of each next
  // segment (their indexes are fetched by the read-ahead itself).
  std::vector<std::pair<const RemoteSegment*, uint64_t>> wanted;
  const RemoteSegment* at = &seg;
  while (static_cast<int>(wanted.size()) < kReadAheadChunks) {
    if (pos >= at->size) {
      at = list.After(at);
      if (at == nullptr || at->base >= local_start) break;
      pos = 0;
    }
    wanted.emplace_back(at, pos);
    if (at != &seg) {
      pos = at->size;
      continue;
    }
    Result<std::pair<uint64_t, uint64_t>> chunk = storage::SegmentChunkAt(file, pos, chunk_bytes_);
    if (!chunk.ok()) break;
    pos = chunk->second;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  for (const auto& [s, p] : wanted) {
    std::string key = fmt::format("{}@{}", s->log, p);
    if (std::find(read_ahead_.begin(), read_ahead_.end(), key) != read_ahead_.end()) continue;
    read_ahead_.push_back(std::move(key));
    if (read_ahead_.size() > kReadAheadMemory) read_ahead_.pop_front();
    ahead_.push_back(Job{nullptr, 0, *s, p});
  }
  cv_.notify_all();
}

}  // namespace sluice::broker
