#include "duck/data_chunk.h"

#include <duckdb.h>

#include <utility>

namespace sluice::duck {

static_assert(sizeof(ListEntry) == sizeof(duckdb_list_entry));
static_assert(offsetof(ListEntry, length) == offsetof(duckdb_list_entry, length));
static_assert(sizeof(TimestampMicros) == sizeof(duckdb_timestamp));
static_assert(sizeof(DateDays) == sizeof(duckdb_date));

void* Vector::RawData() const { return duckdb_vector_get_data(v_); }

uint64_t* Vector::validity() const {
  duckdb_vector_ensure_validity_writable(v_);
  return duckdb_vector_get_validity(v_);
}

void Vector::AssignString(uint64_t row, std::string_view value) const {
  duckdb_vector_assign_string_element_len(v_, row, value.data(), value.size());
}

void Vector::Reference(const Vector& from) const { duckdb_vector_reference_vector(v_, from.v_); }

Vector Vector::ListChild() const { return Vector(duckdb_list_vector_get_child(v_)); }

Status Vector::ListReserve(uint64_t capacity) const {
  if (duckdb_list_vector_reserve(v_, capacity) == DuckDBError) {
    return ResourceExhaustedError("DuckDB: cannot reserve {} list entries", capacity);
  }
  return Status::OK();
}

Status Vector::ListSetSize(uint64_t size) const {
  if (duckdb_list_vector_set_size(v_, size) == DuckDBError) {
    return InternalError("DuckDB: cannot set a list's size to {}", size);
  }
  return Status::OK();
}

uint64_t Vector::ListSize() const { return duckdb_list_vector_get_size(v_); }

Vector Vector::StructField(size_t i) const { return Vector(duckdb_struct_vector_get_child(v_, i)); }

Vector Vector::ArrayChild() const { return Vector(duckdb_array_vector_get_child(v_)); }

bool Vector::IsValid(uint64_t row) const {
  uint64_t* validity = duckdb_vector_get_validity(v_);
  return validity == nullptr || duckdb_validity_row_is_valid(validity, row);
}

std::string_view Vector::GetString(uint64_t row) const {
  auto* s = static_cast<duckdb_string_t*>(duckdb_vector_get_data(v_)) + row;
  return {duckdb_string_t_data(s), duckdb_string_t_length(*s)};
}

LogicalType Vector::type() const { return LogicalType::Adopt(duckdb_vector_get_column_type(v_)); }

Result<DataChunk> DataChunk::Create(const std::vector<LogicalType>& types) {
  std::vector<duckdb_logical_type> handles;
  handles.reserve(types.size());
  for (const LogicalType& t : types) handles.push_back(t.handle());
  duckdb_data_chunk chunk = duckdb_create_data_chunk(handles.data(), handles.size());
  if (chunk == nullptr) return InternalError("DuckDB: cannot create a data chunk");
  return DataChunk(chunk, types.size());
}

DataChunk& DataChunk::operator=(DataChunk&& other) noexcept {
  if (this != &other) {
    if (chunk_ != nullptr) duckdb_destroy_data_chunk(&chunk_);
    chunk_ = std::exchange(other.chunk_, nullptr);
    columns_ = other.columns_;
  }
  return *this;
}

DataChunk::~DataChunk() {
  if (chunk_ != nullptr) duckdb_destroy_data_chunk(&chunk_);
}

uint64_t DataChunk::Capacity() { return duckdb_vector_size(); }

Vector DataChunk::column(size_t i) const { return Vector(duckdb_data_chunk_get_vector(chunk_, i)); }

uint64_t DataChunk::size() const { return duckdb_data_chunk_get_size(chunk_); }

void DataChunk::SetSize(uint64_t rows) { duckdb_data_chunk_set_size(chunk_, rows); }

void DataChunk::Reset() { duckdb_data_chunk_reset(chunk_); }

}  // namespace sluice::duck
