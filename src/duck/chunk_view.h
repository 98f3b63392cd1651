// ChunkView: a TEMP VIEW whose rows are DataChunks the caller holds in memory, read by
// DuckDB with no copy (a C-API table function that references the held chunks' vectors
// into its output). The pipeline's decoders use it to show a batch to the handler's SQL
// without appending it to a table (docs/design/0005-json-decoding.md, "Serving the batch").
//
//   ASSIGN_OR_RETURN(auto view, ChunkView::Create(conn, "events", names, types));
//   ... fill chunks ...
//   view->SetChunks({&chunk0, &chunk1});   // SELECT ... FROM events now reads them
//
// The view lives in the connection's temp schema, which DuckDB searches before `main`: a
// view named like a table of `main` shadows it for unqualified names on this connection.
// Scans are single-threaded and in chunk order (insertion order is kept). The view is
// read-only: INSERT/DELETE against its name fail.
//
// Lifecycle: owned by the connection's thread; the Connection must outlive it. Destroying
// it drops the view; the table function stays registered (DuckDB cannot unregister one)
// but is detached, and a query naming it fails.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/data_chunk.h"
#include "duck/database.h"
#include "duck/logical_type.h"

namespace sluice::duck {

struct ChunkViewSource;  // shared with the table function (chunk_view.cc)

class ChunkView {
 public:
  // Registers a table function for this view and creates `TEMP VIEW <view>` over it with
  // the given columns (an empty batch until SetChunks).
  static Result<std::unique_ptr<ChunkView>> Create(Connection& conn, std::string_view view,
                                                   const std::vector<std::string>& names,
                                                   const std::vector<LogicalType>& types);
  // The same, taking the types (any type, e.g. a query result's, which Copy cannot rebuild).
  static Result<std::unique_ptr<ChunkView>> Create(Connection& conn, std::string_view view,
                                                   const std::vector<std::string>& names,
                                                   std::vector<LogicalType>&& types);
  ~ChunkView();
  ChunkView(const ChunkView&) = delete;
  ChunkView& operator=(const ChunkView&) = delete;

  // The rows the view shows from now on: `chunks` in order (empty ones skipped), whose
  // column types are the view's. They must stay alive and unchanged until the next
  // SetChunks/SetColumns or the view's destruction, and must not be written while a query
  // on the connection runs.
  void SetChunks(const std::vector<const DataChunk*>& chunks);

  // New columns (recreates the view); the view is empty until SetChunks.
  Status SetColumns(const std::vector<std::string>& names, const std::vector<LogicalType>& types);
  // The same, taking the types (any type, e.g. a query result's, which Copy cannot rebuild).
  Status SetColumns(const std::vector<std::string>& names, std::vector<LogicalType>&& types);

  const std::string& function_name() const { return function_; }

 private:
  ChunkView(Connection& conn, std::string view, std::string function,
            std::shared_ptr<ChunkViewSource> source);
  Connection& conn_;
  std::string view_;      // the view's name, unquoted
  std::string function_;  // the table function's name, unique in the process
  std::shared_ptr<ChunkViewSource> source_;
};

}  // namespace sluice::duck
