// ChunkFeed: a C-API table function whose scan waits for chunks pushed by another thread.
#include "duck/chunk_feed.h"

#include <duckdb.h>
#include <fmt/format.h>

#include <atomic>
#include <utility>

#include "duck/held_function.h"

namespace sluice::duck {

// A pushed result and its chunks (which may point into the result's memory: destroyed
// first).
struct FedRows {
  QueryResult result;
  std::vector<DataChunk> chunks;
  explicit FedRows(QueryResult r) : result(std::move(r)), chunks(result.TakeChunks()) {}
  ~FedRows() { chunks.clear(); }
};

struct ChunkFeed::State {
  std::mutex mu;
  std::condition_variable changed;  // a push, a pop, the end of the stream
  size_t max_queued = 0;
  uint64_t stream = 0;  // one per Open
  bool open = false;
  bool closed = false;                   // no more pushes: the scan ends when drained
  std::optional<std::string> abandoned;  // the scan fails with this
  std::optional<std::string> gone;       // the reader ended: pushes fail with this
  std::vector<std::string> names;
  std::vector<LogicalType> types;
  std::deque<std::shared_ptr<FedRows>> queue;
  size_t queued_chunks = 0;
  uint64_t rows = 0;
};

namespace {

ChunkFeed::State& StateOf(void* extra) { return HeldBy<ChunkFeed::State>(extra); }

// Per scan: its stream, the columns DuckDB asked for, the rows being read (kept until the
// next call: the output references their vectors).
struct FeedScan {
  uint64_t stream = 0;
  std::vector<idx_t> columns;
  std::shared_ptr<FedRows> current;
  size_t next = 0;  // of current->chunks
};

void BindFeed(duckdb_bind_info info) {
  ChunkFeed::State& s = StateOf(duckdb_bind_get_extra_info(info));
  std::lock_guard lock(s.mu);
  if (!s.open) {
    duckdb_bind_set_error(info, "this feed has no open stream");
    return;
  }
  for (size_t i = 0; i < s.names.size(); ++i) {
    duckdb_bind_add_result_column(info, s.names[i].c_str(), s.types[i].handle());
  }
}

void InitFeed(duckdb_init_info info) {
  ChunkFeed::State& s = StateOf(duckdb_init_get_extra_info(info));
  auto* scan = new FeedScan;
  idx_t n = duckdb_init_get_column_count(info);
  for (idx_t i = 0; i < n; ++i) scan->columns.push_back(duckdb_init_get_column_index(info, i));
  {
    std::lock_guard lock(s.mu);
    scan->stream = s.stream;
  }
  duckdb_init_set_init_data(info, scan, [](void* p) { delete static_cast<FeedScan*>(p); });
  duckdb_init_set_max_threads(info, 1);  // in push order
}

void ScanFeed(duckdb_function_info info, duckdb_data_chunk output) {
  ChunkFeed::State& s = StateOf(duckdb_function_get_extra_info(info));
  auto* scan = static_cast<FeedScan*>(duckdb_function_get_init_data(info));
  // The next chunk with rows: a chunk of 0 rows in the output would end the scan.
  for (;;) {
    while (scan->current != nullptr && scan->next < scan->current->chunks.size() &&
           scan->current->chunks[scan->next].size() == 0) {
      ++scan->next;
    }
    if (scan->current != nullptr && scan->next < scan->current->chunks.size()) break;
    std::shared_ptr<FedRows> done = std::move(scan->current);  // freed outside the lock
    std::unique_lock lock(s.mu);
    s.changed.wait(lock, [&] {
      return s.stream != scan->stream || s.abandoned.has_value() || !s.queue.empty() || s.closed;
    });
    if (s.stream != scan->stream || s.abandoned.has_value()) {
      std::string why =
          s.stream != scan->stream ? std::string("the feed's stream was reopened") : *s.abandoned;
      lock.unlock();
      duckdb_function_set_error(info, why.c_str());
      return;
    }
    if (s.queue.empty()) {  // closed and drained
      lock.unlock();
      duckdb_data_chunk_set_size(output, 0);
      return;
    }
    scan->current = std::move(s.queue.front());
    s.queue.pop_front();
    s.queued_chunks -= scan->current->chunks.size();
    scan->next = 0;
    lock.unlock();
    s.changed.notify_all();
  }
  const DataChunk& chunk = scan->current->chunks[scan->next++];
  const idx_t ncols = duckdb_data_chunk_get_column_count(chunk.handle());
  for (size_t i = 0; i < scan->columns.size(); ++i) {
    idx_t c = scan->columns[i];
    if (c >= ncols) continue;
    duckdb_vector_reference_vector(duckdb_data_chunk_get_vector(output, i),
                                   duckdb_data_chunk_get_vector(chunk.handle(), c));
  }
  duckdb_data_chunk_set_size(output, chunk.size());
}

std::atomic<uint64_t> next_feed_function_id{0};

}  // namespace

ChunkFeed::ChunkFeed(std::string function, std::shared_ptr<State> state)
    : function_(std::move(function)), state_(std::move(state)) {}

ChunkFeed::~ChunkFeed() { Abandon("the feed is gone"); }

Result<std::shared_ptr<ChunkFeed>> ChunkFeed::Create(Connection& conn, size_t max_queued_chunks) {
  auto state = std::make_shared<State>();
  state->max_queued = std::max<size_t>(1, max_queued_chunks);
  std::string function = fmt::format("__sluice_feed_{}", next_feed_function_id.fetch_add(1));
  RETURN_IF_ERROR(RegisterHeldFunction(conn, function, state, BindFeed, InitFeed, ScanFeed));
  return std::shared_ptr<ChunkFeed>(new ChunkFeed(std::move(function), std::move(state)));
}

void ChunkFeed::Open(const std::vector<std::string>& names, const std::vector<LogicalType>& types) {
  std::deque<std::shared_ptr<FedRows>> dropped;
  {
    std::lock_guard lock(state_->mu);
    ++state_->stream;
    state_->open = true;
    state_->closed = false;
    state_->abandoned.reset();
    state_->gone.reset();
    state_->names = names;
    state_->types.clear();
    for (const LogicalType& t : types) state_->types.push_back(t.Copy());
    dropped.swap(state_->queue);
    state_->queued_chunks = 0;
    state_->rows = 0;
  }
  state_->changed.notify_all();
}

Status ChunkFeed::Push(QueryResult rows) {
  auto fed = std::make_shared<FedRows>(std::move(rows));
  uint64_t n = 0;
  for (const DataChunk& c : fed->chunks) n += c.size();
  std::unique_lock lock(state_->mu);
  const uint64_t stream = state_->stream;
  state_->changed.wait(lock, [&] {
    return state_->stream != stream || !state_->open || state_->closed ||
           state_->abandoned.has_value() || state_->gone.has_value() ||
           state_->queued_chunks < state_->max_queued;
  });
  if (!state_->open || state_->closed || state_->stream != stream) {
    return FailedPreconditionError("the feed's stream is not open");
  }
  if (state_->abandoned)
    return AbortedError("the feed's stream was abandoned: {}", *state_->abandoned);
  if (state_->gone) return AbortedError("the feed's reader ended: {}", *state_->gone);
  state_->queued_chunks += fed->chunks.size();
  state_->rows += n;
  state_->queue.push_back(std::move(fed));
  lock.unlock();
  state_->changed.notify_all();
  return Status::OK();
}

void ChunkFeed::Close() {
  {
    std::lock_guard lock(state_->mu);
    state_->closed = true;
  }
  state_->changed.notify_all();
}

void ChunkFeed::Abandon(const std::string& why) { Stop(&State::abandoned, why); }

void ChunkFeed::ReaderGone(const std::string& why) { Stop(&State::gone, why); }

void ChunkFeed::Stop(std::optional<std::string> State::*reason, const std::string& why) {
  std::deque<std::shared_ptr<FedRows>> dropped;  // freed outside the lock
  {
    std::lock_guard lock(state_->mu);
    if (!((*state_).*reason)) (*state_).*reason = why;
    dropped.swap(state_->queue);
    state_->queued_chunks = 0;
  }
  state_->changed.notify_all();
}

uint64_t ChunkFeed::rows() const {
  std::lock_guard lock(state_->mu);
  return state_->rows;
}

}  // namespace sluice::duck
