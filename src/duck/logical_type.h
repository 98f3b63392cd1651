// LogicalType: an owned DuckDB logical type (RAII over duckdb_logical_type), to build
// data chunks and to read a table's column types, without duckdb.h outside this module.
//
//   LogicalType props = LogicalType::Struct({"city", "amount"},
//                                           {LogicalType::Varchar(), LogicalType::Double()});
//   LogicalType tags = LogicalType::List(LogicalType::Varchar());
//
// A LogicalType is a move-only value; Copy() makes an independent one. Any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct _duckdb_logical_type;

namespace sluice::duck {

// DuckDB's type ids, with duckdb_type's values (checked in logical_type.cc).
enum class TypeId : int {
  kInvalid = 0,
  kBoolean = 1,
  kTinyInt = 2,
  kSmallInt = 3,
  kInteger = 4,
  kBigInt = 5,
  kUTinyInt = 6,
  kUSmallInt = 7,
  kUInteger = 8,
  kUBigInt = 9,
  kFloat = 10,
  kDouble = 11,
  kTimestamp = 12,  // microseconds since the epoch, no time zone
  kDate = 13,       // days since the epoch
  kTime = 14,
  kInterval = 15,
  kHugeInt = 16,
  kVarchar = 17,
  kBlob = 18,
  kDecimal = 19,
  kTimestampS = 20,
  kTimestampMs = 21,
  kTimestampNs = 22,
  kEnum = 23,
  kList = 24,
  kStruct = 25,
  kMap = 26,
  kUuid = 27,
  kUnion = 28,
  kBit = 29,
  kTimeTz = 30,
  kTimestampTz = 31,  // microseconds since the epoch, UTC
  kUHugeInt = 32,
  kArray = 33,
  kAny = 34,
  kBigNum = 35,
  kSqlNull = 36,
};

class LogicalType {
 public:
  // A type without parameters (BOOLEAN, INTEGER, VARCHAR, TIMESTAMP...). Parameterised
  // ids (DECIMAL, LIST, STRUCT, ENUM...) have their own constructors or come from a table.
  static LogicalType Of(TypeId id);
  static LogicalType Boolean() { return Of(TypeId::kBoolean); }
  static LogicalType Integer() { return Of(TypeId::kInteger); }
  static LogicalType BigInt() { return Of(TypeId::kBigInt); }
  static LogicalType Double() { return Of(TypeId::kDouble); }
  static LogicalType Varchar() { return Of(TypeId::kVarchar); }
  static LogicalType Blob() { return Of(TypeId::kBlob); }
  static LogicalType Timestamp() { return Of(TypeId::kTimestamp); }
  static LogicalType TimestampTz() { return Of(TypeId::kTimestampTz); }
  static LogicalType Date() { return Of(TypeId::kDate); }
  static LogicalType List(const LogicalType& child);
  // `names` and `children` have the same length.
  static LogicalType Struct(const std::vector<std::string>& names,
                            const std::vector<LogicalType>& children);
  // Takes ownership of a handle DuckDB returned.
  static LogicalType Adopt(_duckdb_logical_type* handle) { return LogicalType(handle); }

  LogicalType(LogicalType&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  LogicalType& operator=(LogicalType&& other) noexcept;
  ~LogicalType();
  LogicalType(const LogicalType&) = delete;
  LogicalType& operator=(const LogicalType&) = delete;

  LogicalType Copy() const;
  // The same type, parameters included (DECIMAL width and scale, ENUM values, LIST, ARRAY,
  // STRUCT, MAP and UNION children, the alias).
  bool Equals(const LogicalType& other) const;

  TypeId id() const;
  // The alias a type was created under ("JSON" for DuckDB's JSON type, which is a VARCHAR),
  // or "".
  std::string alias() const;

  LogicalType ListChild() const;    // id() must be kList
  size_t StructFieldCount() const;  // id() must be kStruct
  std::string StructFieldName(size_t i) const;
  LogicalType StructFieldType(size_t i) const;
  LogicalType MapKey() const;      // id() must be kMap
  LogicalType MapValue() const;    // id() must be kMap
  LogicalType ArrayChild() const;  // id() must be kArray
  int DecimalWidth() const;        // id() must be kDecimal
  int DecimalScale() const;        // id() must be kDecimal
  // The physical type of a DECIMAL's values: kSmallInt, kInteger, kBigInt or kHugeInt.
  TypeId DecimalInternalType() const;
  uint64_t ArraySize() const;  // id() must be kArray
  // ENUM: the physical type of its values (kUTinyInt, kUSmallInt or kUInteger) and the
  // string of a dictionary index.
  TypeId EnumInternalType() const;
  std::string EnumValue(uint64_t index) const;
  uint64_t EnumSize() const;

  // SQL text of the type for the ids sluice builds itself (scalars above, LIST, STRUCT),
  // e.g. STRUCT("city" VARCHAR, "amount" DOUBLE)[]; other ids give their plain name.
  std::string ToSql() const;

  _duckdb_logical_type* handle() const { return handle_; }

 private:
  explicit LogicalType(_duckdb_logical_type* handle) : handle_(handle) {}
  _duckdb_logical_type* handle_;
};

// The name of a type id as SQL spells it ("BIGINT", "TIMESTAMP WITH TIME ZONE").
std::string_view TypeIdName(TypeId id);

}  // namespace sluice::duck
