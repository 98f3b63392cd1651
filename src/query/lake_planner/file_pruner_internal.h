// Inside the file pruner (file_pruner.h): what one manifest or data file tells about the
// query's columns (Evidence), and the Pruner that plans one scan: predicate evaluation in
// file_pruner.cc, the constants it compares in C++ in native_constants.cc, evidence decoded
// from partition values and column statistics in file_evidence.cc. Not for other modules.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query/lake_planner/file_pruner.h"

namespace sluice::query::pruning {

using lake::Type;
using lake::TypeId;
using lake::Value;

constexpr int64_t kMicrosPerHour = 3'600'000'000LL;
constexpr int64_t kMicrosPerDay = 24 * kMicrosPerHour;

// What one item (a manifest or a data file) tells about one column: every non-null value
// lies in [lo, hi] (either may be unknown); whether nulls, non-null values and NaNs may occur
// (nullopt: unknown, treated as yes).
struct Range {
  std::optional<Value> lo, hi;
  std::optional<bool> may_null, may_value, may_nan;
};

// The bucket partition values of one column under bucket[N]: all in [lo, hi].
struct BucketRange {
  int32_t n = 0;
  std::optional<int32_t> lo, hi;
};

struct Evidence {
  std::map<int32_t, Range> ranges;                      // by field id
  std::map<int32_t, std::vector<BucketRange>> buckets;  // by source field id
};

// A comparison's constant as a value of the column's type, when comparing a column value
// with it in C++ gives what DuckDB's comparison in the query gives (NativeKind).
struct Native {
  enum class Kind { kInt, kDouble, kString };
  Kind kind = Kind::kInt;
  bool is_null = false;  // the constant is NULL
  int64_t i = 0;         // kInt: the integer, days (date) or microseconds (timestamps)
  double d = 0;          // kDouble
  std::string s;         // kString: the bytes
};

// What pruning knows of a comparison leaf beyond its text: for = with a constant that is
// exactly a value of the column's type, that value (its bucket is compared); the constant
// as a native value when the leaf is evaluated in C++.
struct Leaf {
  std::optional<Value> exact;
  std::optional<Native> native;
};

std::optional<int64_t> IntegerOf(const Value& v);
std::optional<double> FloatingOf(const Value& v);

// Whether a comparison with a constant of DuckDB type `constant` (typeof) compares by value
// in the family of the column's type (numbers with numbers, dates and timestamps, ...).
bool SameFamily(const Type& column, std::string_view constant);

// ---- constants compared in C++ (native_constants.cc)

// How a comparison of a column of Iceberg type `column` with a constant of DuckDB type
// `constant` (typeof) is evaluated in C++: the constant cast to the column's DuckDB type `T`
// (when that cast is exact), compared with the bounds as DuckDB compares values of `T`.
// This is DuckDB's comparison in the query when the query compares in a type to which `T`
// converts without merging values: integers with integer constants, floats with any number,
// dates and timestamps with dates and timestamps, strings with strings, and any column with
// a string literal (DuckDB casts the literal to the column's type). Other cases (an integer
// column against a DOUBLE, which rounds big integers together; decimals; TIME; BLOB;
// TIMESTAMP_NS) are left to DuckDB. `value` is SQL over `t`, the cast constant, giving the
// native value as BIGINT, DOUBLE or VARCHAR.
struct NativeForm {
  Native::Kind kind;
  std::string_view duck_type;
  std::string_view value;
};

// The native form of a column type (NativeForm), if it has one.
std::optional<NativeForm> FormOfColumn(const Type& column);
// Whether a comparison of a `column` with a constant of DuckDB type `constant` (typeof) may
// be evaluated natively (see NativeForm).
bool NativeAllowed(const Type& column, std::string_view constant, bool string_literal);
std::string NativeKey(const std::string& constant, std::string_view duck_type, bool literal);
// The SQL of a native value's three columns: whether the constant is NULL, whether its cast
// to the column's type is exact (for a string literal: whether it casts, as the query casts
// it), the value.
std::vector<std::string> NativeColumnsSql(const std::string& constant, const NativeForm& form,
                                          bool literal);
// Reads NativeColumnsSql's three columns at `col` of a one-row result; nullopt when the
// constant is not exactly a value of the column's type.
std::optional<Native> ReadNative(duck::QueryResult& result, duck::ResultChunk& row, size_t col,
                                 Native::Kind kind);

// A constant whose type and value are known from its text, without DuckDB: the forms the
// planner prints itself (sql_tree's SimpleConstantSql) for the commonest constants.
// Strict: anything else (and any date or time not written exactly so) is left to DuckDB.
struct KnownConstant {
  enum class Kind { kInteger, kString, kDate, kTimestamp };
  Kind kind;
  std::string type;  // what typeof says
  int64_t i = 0;     // kInteger; kDate days; kTimestamp microseconds
  std::string s;     // kString
};
std::optional<KnownConstant> ParseKnownConstant(std::string_view t);
// The native value of a known constant compared with a column of `column`'s form: the
// value, nullopt inside when it is not exactly a value of the column's type, nullopt
// outside when that is DuckDB's to say (casts of strings to numbers, floats, timestamptz).
std::optional<std::optional<Native>> NativeOfKnown(const KnownConstant& k, const Type& column,
                                                   bool string_literal);

// Plans one scan (PlanScan). Lifecycle: one per call, on the caller's thread; everything
// it is given must outlive it.
class Pruner {
 public:
  Pruner(duck::Connection& conn, const lake::TableMetadata& metadata, const lake::Schema& schema,
         std::string_view table, const ManifestReader& manifests,
         std::optional<std::string> collation)
      : conn_(conn),
        metadata_(metadata),
        schema_(schema),
        table_(table),
        manifests_(manifests),
        collation_(std::move(collation)) {}

  Result<ScanPlan> Run(const lake::Snapshot* snapshot, const std::vector<Predicate>& conjuncts);

 private:
  // Checks every comparison's constant (its type, its exact value) once; unusable leaves
  // become kUnknown. Returns the predicate with only usable parts.
  Predicate Prepare(const Predicate& p);
  void CollectFields(const Predicate& p, std::set<int32_t>* out) const;
  // DuckDB's type of each comparison's constant (typeof), in one query when they all bind,
  // with the session's default collation.
  void TypeConstants(const std::vector<Predicate>& conjuncts);
  // The native value of every prepared comparison whose column type and constant allow it
  // (NativeType), in one query when they all evaluate.
  void NativeConstants();
  // Whether every leaf of `p` is evaluated in C++ (IS [NOT] NULL, native comparisons).
  bool AllNative(const Predicate& p) const;
  // Whether an item may hold a row satisfying `p`, in C++: KeepSql's meaning exactly.
  bool KeepNative(const Predicate& p, const Evidence& ev) const;
  bool LeafNative(const Predicate& p, const Evidence& ev) const;
  // The bucket values of `p`'s constant under each bucket[N] of its column.
  std::vector<std::pair<int32_t, int32_t>> BucketsOf(const Predicate& p) const;
  std::optional<std::string> TypeOf(const std::string& constant);
  // Whether the session compares strings by their bytes, as Iceberg orders string bounds
  // (not under a default collation such as nocase).
  bool ByteOrderStrings();
  // SQL over the evidence columns that is true (or NULL) when an item may hold a row
  // satisfying `p`.
  std::string KeepSql(const Predicate& p) const;
  std::string LeafSql(const Predicate& p) const;
  // The indexes of `items` that may hold rows satisfying every conjunct.
  std::vector<bool> Evaluate(const std::vector<Evidence>& items);

  // Evidence from a partition value range [plo, phi] of `field` (a manifest summary, or one
  // file's value when plo = phi); `has_null`: whether the range's items may hold nulls.
  void AddPartitionEvidence(const lake::PartitionField& field, const std::optional<Value>& plo,
                            const std::optional<Value>& phi, std::optional<bool> has_null,
                            std::optional<bool> has_value, std::optional<bool> has_nan,
                            Evidence* ev) const;
  Evidence FromSummaries(const lake::ManifestFile& m, const lake::PartitionSpec& spec) const;
  Evidence FromPartition(const lake::ManifestEntry& e, const lake::PartitionSpec& spec) const;
  Evidence FromStats(const lake::ManifestEntry& e) const;

  duck::Connection& conn_;
  const lake::TableMetadata& metadata_;
  const lake::Schema& schema_;
  std::string table_;
  const ManifestReader& manifests_;
  std::vector<Predicate> conjuncts_;  // prepared, without kUnknown ones
  std::set<int32_t> fields_;          // field ids the conjuncts use
  std::map<const Predicate*, Leaf> leaves_;
  std::optional<bool> byte_order_strings_;
  std::optional<std::string>
      collation_;  // current_setting('default_collation'), read with the types
  std::map<std::string, std::optional<std::string>> types_;  // constant -> typeof
  // NativeKey -> the native value, or nullopt when the constant has none.
  std::map<std::string, std::optional<Native>> natives_;
};

}  // namespace sluice::query::pruning
