// ChunkView: a C-API table function over held DataChunks, and the TEMP VIEW over it.
#include "duck/chunk_view.h"

#include <duckdb.h>
#include <fmt/format.h>

#include <atomic>
#include <utility>

#include "duck/held_function.h"

namespace sluice::duck {

// What the table function reads; shared by the ChunkView and DuckDB's catalog (which keeps
// the function, and so this, until the database closes).
struct ChunkViewSource {
  bool attached = true;
  std::vector<std::string> names;
  std::vector<LogicalType> types;
  std::vector<duckdb_data_chunk> chunks;
  uint64_t rows = 0;
};

namespace {

// Per scan: the columns DuckDB asked for (projection pushdown) and the next chunk. Each scan
// of the view has its own, so a query reading the view twice works.
struct ScanState {
  std::vector<idx_t> columns;
  std::vector<duckdb_data_chunk> chunks;  // the batch when the scan started
  size_t next = 0;
};

ChunkViewSource& SourceOf(void* extra) { return HeldBy<ChunkViewSource>(extra); }

void Bind(duckdb_bind_info info) {
  ChunkViewSource& src = SourceOf(duckdb_bind_get_extra_info(info));
  if (!src.attached) {
    duckdb_bind_set_error(info, "this batch's decoder is gone");
    return;
  }
  for (size_t i = 0; i < src.names.size(); ++i) {
    duckdb_bind_add_result_column(info, src.names[i].c_str(), src.types[i].handle());
  }
  duckdb_bind_set_cardinality(info, src.rows, true);
}

void Init(duckdb_init_info info) {
  ChunkViewSource& src = SourceOf(duckdb_init_get_extra_info(info));
  auto* state = new ScanState;
  idx_t n = duckdb_init_get_column_count(info);
  for (idx_t i = 0; i < n; ++i) state->columns.push_back(duckdb_init_get_column_index(info, i));
  state->chunks = src.chunks;
  duckdb_init_set_init_data(info, state, [](void* p) { delete static_cast<ScanState*>(p); });
  // One thread, chunks in order: the handler sees the batch in message order.
  duckdb_init_set_max_threads(info, 1);
}

void Scan(duckdb_function_info info, duckdb_data_chunk output) {
  auto* state = static_cast<ScanState*>(duckdb_function_get_init_data(info));
  if (state->next >= state->chunks.size()) {
    duckdb_data_chunk_set_size(output, 0);
    return;
  }
  duckdb_data_chunk chunk = state->chunks[state->next++];
  const idx_t ncols = duckdb_data_chunk_get_column_count(chunk);
  for (size_t i = 0; i < state->columns.size(); ++i) {
    idx_t c = state->columns[i];
    if (c >= ncols) continue;  // a virtual column (row id): never read by our views
    duckdb_vector_reference_vector(duckdb_data_chunk_get_vector(output, i),
                                   duckdb_data_chunk_get_vector(chunk, c));
  }
  duckdb_data_chunk_set_size(output, duckdb_data_chunk_get_size(chunk));
}

std::atomic<uint64_t> next_function_id{0};

std::string ViewSql(std::string_view view, std::string_view function) {
  return fmt::format("CREATE OR REPLACE TEMP VIEW {} AS SELECT * FROM {}()", QuoteIdentifier(view),
                     QuoteIdentifier(function));
}

}  // namespace

ChunkView::ChunkView(Connection& conn, std::string view, std::string function,
                     std::shared_ptr<ChunkViewSource> source)
    : conn_(conn),
      view_(std::move(view)),
      function_(std::move(function)),
      source_(std::move(source)) {}

Result<std::unique_ptr<ChunkView>> ChunkView::Create(Connection& conn, std::string_view view,
                                                     const std::vector<std::string>& names,
                                                     const std::vector<LogicalType>& types) {
  std::vector<LogicalType> copies;
  for (const LogicalType& t : types) copies.push_back(t.Copy());
  return Create(conn, view, names, std::move(copies));
}

Result<std::unique_ptr<ChunkView>> ChunkView::Create(Connection& conn, std::string_view view,
                                                     const std::vector<std::string>& names,
                                                     std::vector<LogicalType>&& types) {
  if (names.empty() || names.size() != types.size()) {
    return InvalidArgumentError("view '{}' needs columns", view);
  }
  auto source = std::make_shared<ChunkViewSource>();
  std::string function = fmt::format("__sluice_chunks_{}", next_function_id.fetch_add(1));
  RETURN_IF_ERROR(RegisterHeldFunction(conn, function, source, Bind, Init, Scan));
  std::unique_ptr<ChunkView> out(
      new ChunkView(conn, std::string(view), std::move(function), source));
  RETURN_IF_ERROR(out->SetColumns(names, std::move(types)));
  return out;
}

ChunkView::~ChunkView() {
  source_->attached = false;
  source_->chunks.clear();
  (void)conn_.Execute("DROP VIEW IF EXISTS temp.main." + QuoteIdentifier(view_));
}

void ChunkView::SetChunks(const std::vector<const DataChunk*>& chunks) {
  source_->chunks.clear();
  source_->rows = 0;
  for (const DataChunk* c : chunks) {
    if (c->size() == 0) continue;
    source_->chunks.push_back(c->handle());
    source_->rows += c->size();
  }
}

Status ChunkView::SetColumns(const std::vector<std::string>& names,
                             const std::vector<LogicalType>& types) {
  std::vector<LogicalType> copies;
  for (const LogicalType& t : types) copies.push_back(t.Copy());
  return SetColumns(names, std::move(copies));
}

Status ChunkView::SetColumns(const std::vector<std::string>& names,
                             std::vector<LogicalType>&& types) {
  source_->chunks.clear();
  source_->rows = 0;
  source_->names = names;
  source_->types = std::move(types);
  // The view stores the columns it was bound with: a new schema needs a new view.
  return conn_.Execute(ViewSql(view_, function_));
}

}  // namespace sluice::duck
