// Reads of offsets that only tiered storage holds (docs/design/0025-tiered-storage.md,
// decisions 7 and 10): a pool of threads that, for each ask, finds the remote segment
// holding the offset (RemoteSegments), brings a copy of its .index and of the chunk of its
// .log holding the offset (about `chunk_bytes`, split at indexed batch starts:
// storage::SegmentChunkAt) through the store's cache (RemoteStore::FetchRange: concurrent
// readers share one download, the cache's budget applies) and answers a slice of that
// copy, which the connection sends as it sends a local segment's. The next chunks (into
// the next segments) are fetched ahead, so a consumer reading an old range waits for S3
// once. Never on a shard's loop.
//
//   reader.Read({{id, 0, offset, 1 << 20, hw, false}}, [](std::vector<RemoteReadAnswer> a) {
//     ... // on a reader thread: post to the connection's loop
//   });
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/status.h"
#include "broker/remote_segments.h"
#include "broker/remote_store.h"
#include "kafka/protocol/api.h"
#include "storage/log.h"
#include "storage/segment_file.h"
#include "storage/txn_index.h"

namespace sluice::broker {

struct RemoteReadAsk {
  kafka::Uuid topic_id;
  int32_t partition = 0;
  int64_t offset = 0;
  uint64_t max_bytes = 0;     // whole batches up to this, at least one
  int64_t limit = INT64_MAX;  // nothing at or past it (the high watermark or the LSO)
  bool read_committed = false;
  storage::EmptyBatches empty = storage::EmptyBatches::kSkip;
  // The local log's start when asked: remote segments from there on are also local (not
  // read ahead, their transactions in `local_aborted`).
  int64_t local_start = INT64_MAX;
  // read_committed: the aborted transactions of the local log that began below its start
  // (PartitionLog::CollectAbortedTxns(local_start, local_start)), collected by the owner.
  std::vector<storage::AbortedTxn> local_aborted;
};

struct RemoteReadAnswer {
  kafka::ErrorCode error = kafka::ErrorCode::kNone;
  std::optional<storage::FileSlice> slice;  // none: nothing to read (or an error)
  bool holds_records = false;
  std::vector<storage::AbortedTxn> aborted;  // read_committed: overlapping the slice
};

// A ListOffsets by time whose answer is in one remote segment (design 0025, decision 6):
// the owner chose the segment from the published list (the first below the local start
// whose max timestamp reaches the one asked; for -3, the first holding the largest).
struct RemoteTimeAsk {
  kafka::Uuid topic_id;
  int32_t partition = 0;
  int64_t base = 0;       // the segment's base offset
  int64_t timestamp = 0;  // the first record with a timestamp at or past it ...
  bool exact = false;     // ... or, true, the first record with exactly it (-3)
  int64_t from = 0;       // no record below it (the log start)
};

struct RemoteTimeAnswer {
  kafka::ErrorCode error = kafka::ErrorCode::kNone;
  int64_t offset = -1, timestamp = -1;  // -1: no record in the segment answers
};

class RemoteReader {
 public:
  // `store` and `index` outlive the reader.
  // `threads` answer reads; `ahead_threads` of their own download ahead, so a read never
  // waits behind a read-ahead.
  // `chunk_bytes`: how much of a segment's .log one download brings (0: whole segments).
  RemoteReader(const RemoteStore* store, const RemoteSegments* index, int threads = 4,
               int ahead_threads = 2, uint64_t chunk_bytes = kDefaultChunkBytes);
  static constexpr uint64_t kDefaultChunkBytes = 16 << 20;
  ~RemoteReader();
  RemoteReader(const RemoteReader&) = delete;
  RemoteReader& operator=(const RemoteReader&) = delete;

  // Answers every ask, in order, by calling `done` once on a reader thread (with errors
  // when the reader stops first). The asks are read in parallel, each by a reader thread.
  void Read(std::vector<RemoteReadAsk> asks,
            std::function<void(std::vector<RemoteReadAnswer>)> done);
  // One ask, on the calling thread (blocking).
  RemoteReadAnswer ReadOne(const RemoteReadAsk& ask);
  // Answers every time lookup as Read answers reads: `done` once, on a reader thread.
  void FindByTime(std::vector<RemoteTimeAsk> asks,
                  std::function<void(std::vector<RemoteTimeAnswer>)> done);
  RemoteTimeAnswer FindOne(const RemoteTimeAsk& ask);

 private:
  // The asks of one Read (or FindByTime); the thread answering the last calls `done`.
  struct Batch {
    std::function<void(size_t)> answer;  // answers ask i
    std::function<void(size_t)> fail;    // answers ask i with an error (the reader stopped)
    std::function<void()> done;
    size_t left = 0;  // guarded by the reader's mu_
  };
  // Queues a Batch answering `asks` with `answer`, in order, into `done`.
  template <typename AskT, typename AnswerT>
  void Submit(std::vector<AskT> asks, AnswerT (RemoteReader::*answer)(const AskT&),
              std::function<void(std::vector<AnswerT>)> done);
  struct Job {
    std::shared_ptr<Batch> batch;  // null: a read-ahead of `ahead` from byte `ahead_at`
    size_t ask = 0;
    RemoteSegment ahead;
    uint64_t ahead_at = 0;
  };
  void Run(bool ahead);
  Result<RemoteReadAnswer> Answer(const RemoteReadAsk& ask);
  Result<RemoteTimeAnswer> AnswerTime(const RemoteTimeAsk& ask);
  // `seg` with a copy of its .index (when uploaded), and of its .timeindex with
  // `time_index`, no .log yet, held while the files are.
  Result<storage::SegmentFile> OpenIndex(const RemoteSegment& seg, bool time_index = false);
  // `file` (OpenIndex's) with a copy of the chunk of its .log holding byte `pos`.
  Result<storage::SegmentFile> OpenChunk(const RemoteSegment& seg, storage::SegmentFile file,
                                         uint64_t pos);
  // Starts downloads of the chunks after byte `pos` of `seg` (one segment's `file`), into
  // the next segments below `local_start`, when none was started for them lately.
  void ReadAhead(const RemoteSegmentList& list, const RemoteSegment& seg,
                 const storage::SegmentFile& file, uint64_t pos, int64_t local_start);

 public:
  const RemoteSegments& segments() const { return *index_; }

 private:
  const RemoteStore* const store_;
  const RemoteSegments* const index_;
  const uint64_t chunk_bytes_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;                // guarded by mu_: reads
  std::deque<Job> ahead_;               // guarded by mu_: read-aheads
  std::deque<std::string> read_ahead_;  // guarded by mu_: the last chunks read ahead
  bool stopping_ = false;               // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace sluice::broker
