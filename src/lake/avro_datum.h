// avro::Datum: one generic Avro value (a record, an array, a long, ...), what the encoder
// writes and the decoder produces. A Datum carries no schema: it is checked against one
// when encoded. Records and maps keep their entries in order, as (name, value) pairs.
//
//   Datum entry = Datum::Record({{"status", Datum::Int(1)},
//                                {"data_file", Datum::Record({{"record_count",
//                                Datum::Long(7)}})}});
//   ASSIGN_OR_RETURN(int64_t n, entry.LongAt("data_file.record_count"));
//
// Union values are the branch's value itself (a nullable long is a Null or a Long datum);
// the encoder picks the branch by kind, or the one set with WithBranch(). Decoded values
// remember the branch they came from.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace sluice::lake::avro {

class Datum {
 public:
  // A Datum's kind is the Avro type it holds, except that there is no union kind.
  enum class Kind : uint8_t {
    kNull,
    kBoolean,
    kInt,
    kLong,
    kFloat,
    kDouble,
    kBytes,
    kString,
    kRecord,
    kEnum,
    kArray,
    kMap,
    kFixed,
  };

  Datum() = default;  // null
  static Datum Null() { return Datum(); }
  static Datum Boolean(bool v);
  static Datum Int(int32_t v);
  static Datum Long(int64_t v);
  static Datum Float(float v);
  static Datum Double(double v);
  static Datum Bytes(std::string v);
  static Datum String(std::string v);
  static Datum Enum(std::string symbol);
  static Datum Fixed(std::string v);
  static Datum Array(std::vector<Datum> items);
  static Datum Map(std::vector<std::pair<std::string, Datum>> entries);
  // Fields by name, in any order: the encoder takes them in the schema's order and fills
  // a missing field from its default; a name the schema does not have is an error.
  static Datum Record(std::vector<std::pair<std::string, Datum>> fields);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }

  // Scalars; asking for the wrong kind is a bug in the caller (asserted).
  bool boolean() const;
  int32_t int_value() const;
  int64_t long_value() const;
  float float_value() const;
  double double_value() const;
  // The bytes of a bytes, string or fixed; the symbol of an enum.
  const std::string& bytes() const;

  // Arrays: the items. Records: the field values. Maps: the values.
  const std::vector<Datum>& items() const { return items_; }
  std::vector<Datum>& mutable_items() { return items_; }
  // Records: the field names. Maps: the keys. Parallel to items().
  const std::vector<std::string>& names() const { return names_; }

  // Records and maps: the value named `name`, or nullptr.
  const Datum* Find(std::string_view name) const;
  Datum* Find(std::string_view name) {
    return const_cast<Datum*>(static_cast<const Datum*>(this)->Find(name));
  }
  // Records and maps: sets `name` (replacing or appending); returns *this for chaining.
  Datum& Set(std::string_view name, Datum value);
  // Arrays: appends an item.
  void Append(Datum item);

  // Path accessors for reading manifests: `path` is field names joined by '.'
  // ("data_file.record_count"; Avro names cannot contain '.'). Errors name the path.
  Result<const Datum*> At(std::string_view path) const;
  Result<bool> BooleanAt(std::string_view path) const;
  Result<int32_t> IntAt(std::string_view path) const;
  Result<int64_t> LongAt(std::string_view path) const;
  Result<std::string_view> StringAt(std::string_view path) const;
  Result<std::string_view> BytesAt(std::string_view path) const;  // bytes or fixed

  // The union branch this value is encoded as / was decoded from; -1 lets the encoder
  // choose by kind.
  int union_branch() const { return branch_; }
  Datum&& WithBranch(int branch) && {
    branch_ = branch;
    return std::move(*this);
  }
  void set_union_branch(int branch) { branch_ = branch; }

  // Equal kind and value, recursively; the union branch is not compared. Floats compare
  // by bits, so NaN equals the same NaN.
  bool operator==(const Datum& other) const;

  // JSON-like text for messages and tests: {"a": 1, "b": [b"\x00"]}.
  std::string ToString() const;

 private:
  Kind kind_ = Kind::kNull;
  int32_t branch_ = -1;
  int64_t int_ = 0;                 // boolean, int, long
  double double_ = 0;               // float, double
  std::string bytes_;               // bytes, string, fixed, enum symbol
  std::vector<std::string> names_;  // record field names, map keys
  std::vector<Datum> items_;        // array items, record and map values
};

std::string_view KindName(Datum::Kind kind);

}  // namespace sluice::lake::avro
