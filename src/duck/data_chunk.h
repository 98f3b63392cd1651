// DataChunk and Vector: DuckDB's columnar batches (up to duckdb_vector_size() rows), to be
// filled in place through raw typed pointers and handed to an Appender. This is the
// decoder's hot path, so Vector is a thin view: no per-row calls except for strings.
//
//   ASSIGN_OR_RETURN(DataChunk chunk, DataChunk::Create(types));
//   Vector v = chunk.column(0);
//   v.data<int64_t>()[row] = 42;      // BIGINT
//   v.AssignString(row, "Berlin");    // VARCHAR / BLOB
//   v.SetNull(row);
//   chunk.SetSize(rows);
//
// A DataChunk is move-only and owned by one thread. Vectors are views into it: valid while
// the chunk lives, and their data pointers until the chunk is Reset (a list's child data
// also moves when the list is reserved).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/logical_type.h"

struct _duckdb_data_chunk;
struct _duckdb_vector;

namespace sluice::duck {

// The layout of one LIST row: child rows [offset, offset + length). Same as duckdb_list_entry.
struct ListEntry {
  uint64_t offset;
  uint64_t length;
};

// DuckDB's value layouts for the types the decoder writes directly.
struct TimestampMicros {
  int64_t micros;
};  // TIMESTAMP, TIMESTAMPTZ
struct DateDays {
  int32_t days;
};  // DATE

class Vector {
 public:
  Vector() = default;
  explicit Vector(_duckdb_vector* v) : v_(v) {}

  // The column's values: bool, int8_t..uint64_t, float, double, int64_t (timestamps),
  // int32_t (DATE), ListEntry (LIST). Not for VARCHAR/BLOB (use AssignString) or STRUCT.
  template <typename T>
  T* data() const {
    return static_cast<T*>(RawData());
  }
  void* RawData() const;

  // The validity bitmap (bit `row` of word row / 64 set = valid), made writable first.
  // Rows start valid after DataChunk::Create or Reset.
  uint64_t* validity() const;
  static void SetValid(uint64_t* validity, uint64_t row) {
    validity[row >> 6] |= uint64_t{1} << (row & 63);
  }
  static void SetInvalid(uint64_t* validity, uint64_t row) {
    validity[row >> 6] &= ~(uint64_t{1} << (row & 63));
  }
  void SetNull(uint64_t row) const { SetInvalid(validity(), row); }

  // Copies `value` into the vector's string heap (VARCHAR or BLOB).
  void AssignString(uint64_t row, std::string_view value) const;

  // LIST: the child vector, its capacity and its size (rows of the child in use).
  Vector ListChild() const;
  // Makes room for `capacity` child rows; the child's data and validity pointers change.
  Status ListReserve(uint64_t capacity) const;
  Status ListSetSize(uint64_t size) const;
  uint64_t ListSize() const;

  // STRUCT: the vector of field `i`.
  Vector StructField(size_t i) const;
  // ARRAY (fixed size): the child vector; row r's elements are child rows
  // [r * size, (r + 1) * size) with size LogicalType::ArraySize().
  Vector ArrayChild() const;

  // Reading: is row `row` valid (not NULL)? A vector without a validity mask is all valid.
  bool IsValid(uint64_t row) const;
  // The VARCHAR or BLOB value of a row (valid while the chunk lives).
  std::string_view GetString(uint64_t row) const;

  LogicalType type() const;
  _duckdb_vector* handle() const { return v_; }

  // Makes this vector show `from`'s data with no copy (DuckDB's vector reference: both
  // share the buffers). The types must be the same.
  void Reference(const Vector& from) const;

 private:
  _duckdb_vector* v_ = nullptr;
};

class DataChunk {
 public:
  // A chunk with one column per type, capacity duckdb_vector_size() rows, size 0.
  static Result<DataChunk> Create(const std::vector<LogicalType>& types);
  DataChunk(DataChunk&& other) noexcept : chunk_(other.chunk_), columns_(other.columns_) {
    other.chunk_ = nullptr;
  }
  DataChunk& operator=(DataChunk&& other) noexcept;
  ~DataChunk();
  DataChunk(const DataChunk&) = delete;
  DataChunk& operator=(const DataChunk&) = delete;

  // duckdb_vector_size(): the most rows a chunk holds (2048 in standard builds).
  static uint64_t Capacity();

  size_t column_count() const { return columns_; }
  Vector column(size_t i) const;
  uint64_t size() const;
  void SetSize(uint64_t rows);
  // Empties the chunk for reuse: size 0, every row valid, list children emptied. Data and
  // validity pointers must be fetched again.
  void Reset();

  _duckdb_data_chunk* handle() const { return chunk_; }

 private:
  friend class QueryResult;   // hands its chunks over (TakeChunks)
  friend class StreamResult;  // hands fetched chunks over
  DataChunk(_duckdb_data_chunk* chunk, size_t columns) : chunk_(chunk), columns_(columns) {}
  _duckdb_data_chunk* chunk_;
  size_t columns_;
};

}  // namespace sluice::duck
