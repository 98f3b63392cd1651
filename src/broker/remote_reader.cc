// Reads of offsets that only tiered storage holds. See remote_reader.h.
#include "broker/remote_reader.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "base/logging.h"
#include "base/metrics.h"
#include "storage/env.h"
#include "storage/segment_file.h"

namespace sluice::broker {
namespace {

const Logger kLog("tiered");
constexpr size_t kReadAheadMemory = 64;  // objects remembered as read ahead

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
                           int ahead_threads)
    : store_(store), index_(index) {
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
  // Reads left are answered with errors: their callers must not wait forever.
  for (Job& job : jobs_) {
    if (job.batch == nullptr) continue;
    job.batch->answers[job.ask].error = kafka::ErrorCode::kKafkaStorageError;
    if (--job.batch->left == 0) job.batch->done(std::move(job.batch->answers));
  }
}

void RemoteReader::Read(std::vector<RemoteReadAsk> asks,
                        std::function<void(std::vector<RemoteReadAnswer>)> done) {
  if (asks.empty()) return done({});
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      std::vector<RemoteReadAnswer> answers(asks.size());
      for (RemoteReadAnswer& a : answers) a.error = kafka::ErrorCode::kKafkaStorageError;
      return done(std::move(answers));
    }
  }
  auto batch = std::make_shared<Batch>();
  batch->answers.resize(asks.size());
  batch->left = asks.size();
  batch->asks = std::move(asks);
  batch->done = std::move(done);
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < batch->asks.size(); ++i) jobs_.push_back(Job{batch, i, "", 0});
  cv_.notify_all();
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
      Result<RemoteStore::Copy> copy = store_->Fetch(job.prefetch_key, job.prefetch_size);
      if (!copy.ok()) {
        SLUICE_LOG(kLog, kDebug, "reading ahead {}: {}", job.prefetch_key, copy.status().message());
      }
      lock.lock();
      continue;
    }
    RemoteReadAnswer answer = ReadOne(job.batch->asks[job.ask]);
    lock.lock();
    job.batch->answers[job.ask] = std::move(answer);
    if (--job.batch->left == 0) {
      lock.unlock();
      job.batch->done(std::move(job.batch->answers));
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
    SLUICE_LOG(kLog, kWarn, "reading offset {} of partition {} from {}: {}", ask.offset,
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
  // Two segments ahead: one downloads while the reader crosses the next.
  const RemoteSegment* next = list->After(seg);
  for (int i = 0; i < 2 && next != nullptr && next->base < ask.local_start; ++i) {
    ReadAhead(*next);
    next = list->After(next);
  }
  ASSIGN_OR_RETURN(RemoteStore::Copy log_copy, store_->Fetch(seg->log, seg->size));
  storage::SegmentFile file;
  ASSIGN_OR_RETURN(file.log, OpenCopy(log_copy));
  file.size = seg->size;
  file.base_offset = seg->base;
  if (!seg->index.empty()) {
    ASSIGN_OR_RETURN(RemoteStore::Copy index_copy, store_->Fetch(seg->index, 0));
    ASSIGN_OR_RETURN(file.index, OpenCopy(index_copy));
  }
  ASSIGN_OR_RETURN(storage::ReadResult r,
                   storage::ReadSegmentFile(file, std::max(ask.offset, seg->base), ask.max_bytes,
                                            ask.limit, ask.empty));
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

void RemoteReader::ReadAhead(const RemoteSegment& seg) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || std::find(read_ahead_.begin(), read_ahead_.end(), seg.log) != read_ahead_.end())
    return;
  read_ahead_.push_back(seg.log);
  if (read_ahead_.size() > kReadAheadMemory) read_ahead_.pop_front();
  ahead_.push_back(Job{nullptr, 0, seg.log, seg.size});
  if (!seg.index.empty()) ahead_.push_back(Job{nullptr, 0, seg.index, 0});
  cv_.notify_all();
}

}  // namespace sluice::broker
