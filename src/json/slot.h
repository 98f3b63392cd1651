// The column plan of the JSON decoders (internal to src/json): one Slot per column, struct
// field and list element, built once from DuckDB column types, and bound per chunk to the
// vectors it writes (docs/design/0005-json-decoding.md, "Shape").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "duck/data_chunk.h"
#include "duck/logical_type.h"

namespace sluice::json {

enum class Kind : uint8_t {
  kBool,
  kI8,
  kI16,
  kI32,
  kI64,
  kU8,
  kU16,
  kU32,
  kU64,
  kFloat,
  kDouble,
  kVarchar,
  kBlob,
  kJson,
  kDate,
  kTimestamp,
  kTimestampTz,
  kTimestampS,
  kTimestampMs,
  kTimestampNs,
  kList,
  kStruct,
  kStaged,  // a rare type: the value's JSON text, cast by DuckDB later
};

// Whether every part of `t` has a direct path (else a column is staged: DuckDB casts it).
bool IsDirect(const duck::LogicalType& t);

// One column, struct field or list element, and where it is written in the current chunk.
struct Slot {
  Kind kind = Kind::kVarchar;
  std::string name;            // column or field name ("" for a list element)
  std::string type_name;       // for error messages
  std::vector<Slot> children;  // struct fields, or the one list element
  std::vector<std::pair<std::string, uint32_t>> sorted;  // struct fields by name, when many

  // Bound per chunk.
  duck::Vector vec;
  void* data = nullptr;
  uint64_t* validity = nullptr;
  uint64_t list_size = 0;      // child rows used (LIST)
  uint64_t list_capacity = 0;  // child rows reserved (LIST)
  uint64_t seen = 0;           // stamp of the object that last set this field
};

// The plan for a value of type `t`; `type_name` names it in error messages.
Slot BuildSlot(const duck::LogicalType& t, std::string name, std::string type_name);

// Structs with more fields than this are looked up by binary search (Slot::sorted).
constexpr size_t kLinearLookupMax = 16;

// Fills `sorted` with `fields` by name when there are more than kLinearLookupMax.
void IndexFields(std::vector<Slot>& fields, std::vector<std::pair<std::string, uint32_t>>* sorted);
// IndexFields for every struct in the tree under `s`.
void IndexTree(Slot& s);

}  // namespace sluice::json
