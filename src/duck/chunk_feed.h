// ChunkFeed: a table function whose rows arrive while a query reads them. One thread pushes
// query results into the feed; another runs a query over `function_name()()` (a COPY ... TO
// a Parquet file, say), whose scan waits for each next chunk and ends when the feed is
// closed, or fails when it is abandoned. The iceberg sink streams each batch's rows into
// the open COPY of its next data file this way, on a writer thread, so the Parquet encoding
// runs beside the pipeline rather than at the commit (docs/design/0023, decision 19).
//
//   ASSIGN_OR_RETURN(auto feed, ChunkFeed::Create(conn, /*max_queued_chunks=*/32));
//   feed->Open(names, types);                       // before the reading query binds
//   writer: conn2.Execute("COPY (SELECT * FROM " + feed->function_name() + "()) TO ...");
//   runner: feed->Push(std::move(rows));  ...  feed->Close();   // the COPY then ends
//
// One scan at a time reads an opened feed, on one thread, chunks in push order. Each Open
// starts a new stream (what an earlier one left queued is dropped). The table function
// stays registered with the database (DuckDB cannot unregister one): Create it once per
// writer, not per stream.
//
// Thread safety: Push, Close, Abandon and Open may be called from any thread; the scan
// runs on the thread of the query reading the feed.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "duck/data_chunk.h"
#include "duck/database.h"
#include "duck/logical_type.h"

namespace sluice::duck {

class ChunkFeed {
 public:
  // Registers the feed's table function on `conn`'s database. Pushes wait while more than
  // `max_queued_chunks` chunks (of up to DataChunk::Capacity() rows) are queued.
  static Result<std::shared_ptr<ChunkFeed>> Create(Connection& conn, size_t max_queued_chunks);
  ~ChunkFeed();
  ChunkFeed(const ChunkFeed&) = delete;
  ChunkFeed& operator=(const ChunkFeed&) = delete;

  const std::string& function_name() const { return function_; }

  // A new stream with these columns: the next scan binds them and reads what is pushed.
  void Open(const std::vector<std::string>& names, const std::vector<LogicalType>& types);

  // Queues `rows` (whose columns are the stream's, by position and type). Waits while the
  // queue is full; an error when the stream is not open, was abandoned, or its reader
  // ended (failed) before reading everything.
  Status Push(QueryResult rows);

  // The scan ends after the queued chunks.
  void Close();
  // The scan fails with `why` at its next chunk; what is queued is dropped.
  void Abandon(const std::string& why);
  // The reading query ended (succeeded or not): pushes fail from now on with `why`.
  void ReaderGone(const std::string& why);

  // Rows pushed since Open.
  uint64_t rows() const;

  struct State;  // shared with the table function (chunk_feed.cc)

 private:
  ChunkFeed(std::string function, std::shared_ptr<State> state);
  // Sets `reason` (the first time) and drops what is queued.
  void Stop(std::optional<std::string> State::*reason, const std::string& why);
  std::string function_;
  std::shared_ptr<State> state_;
};

}  // namespace sluice::duck
