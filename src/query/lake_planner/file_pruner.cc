#include "query/lake_planner/file_pruner.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include "base/utf8.h"
#include "lake/data_files.h"
#include "lake/deletes.h"
#include "lake/duck_types.h"
#include "lake/object_cache.h"
#include "lake/table.h"
#include "lake/table_files.h"
#include "lake/transforms.h"
#include "query/lake_planner/file_pruner_internal.h"

namespace sluice::query {
namespace pruning {

std::string_view OpText(CompareOp op) {
  switch (op) {
    case CompareOp::kEq:
      return "=";
    case CompareOp::kNe:
      return "<>";
    case CompareOp::kLt:
      return "<";
    case CompareOp::kLe:
      return "<=";
    case CompareOp::kGt:
      return ">";
    case CompareOp::kGe:
      return ">=";
    case CompareOp::kDistinctFrom:
      return "IS DISTINCT FROM";
    case CompareOp::kNotDistinctFrom:
      return "IS NOT DISTINCT FROM";
  }
  return "?";
}

bool IEqualsBinary(const std::string& collation) {
  return collation == "binary" || collation == "BINARY";
}

bool IsFloating(const Type& t) { return t.id == TypeId::kFloat || t.id == TypeId::kDouble; }

// Column types whose bounds pruning compares (UUIDs are left out: Java orders them as two
// signed longs, DuckDB as unsigned bytes).
bool Comparable(const Type& t) {
  switch (t.id) {
    case TypeId::kBoolean:
    case TypeId::kInt:
    case TypeId::kLong:
    case TypeId::kFloat:
    case TypeId::kDouble:
    case TypeId::kDecimal:
    case TypeId::kDate:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
    case TypeId::kString:
    case TypeId::kFixed:
    case TypeId::kBinary:
      return true;
    default:
      return false;
  }
}

// Whether DuckDB compares a column of Iceberg type `column` with a constant of DuckDB type
// `constant` (typeof's text) without casting the column non-monotonically: the same family
// on both sides (numeric widening, date <-> timestamp and timestamp units keep the order;
// a number compared with a VARCHAR does not, nor a TIMESTAMP with a TIMESTAMPTZ, which goes
// through the session's time zone).
bool SameFamily(const Type& column, std::string_view constant) {
  auto numeric = [](std::string_view c) {
    for (std::string_view n : {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                               "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE"}) {
      if (c == n) return true;
    }
    return c.starts_with("DECIMAL(");
  };
  switch (column.id) {
    case TypeId::kInt:
    case TypeId::kLong:
    case TypeId::kFloat:
    case TypeId::kDouble:
    case TypeId::kDecimal:
      return numeric(constant);
    case TypeId::kDate:
    case TypeId::kTimestamp:
      return constant == "DATE" || constant == "TIMESTAMP" || constant == "TIMESTAMP_S" ||
             constant == "TIMESTAMP_MS" || constant == "TIMESTAMP_NS";
    case TypeId::kTimestampTz:
      return constant == "TIMESTAMP WITH TIME ZONE";
    case TypeId::kTime:
      return constant == "TIME";
    case TypeId::kString:
      return constant == "VARCHAR";
    case TypeId::kFixed:
    case TypeId::kBinary:
      return constant == "BLOB";
    case TypeId::kBoolean:
      return constant == "BOOLEAN";
    default:
      return false;
  }
}

// Text pruning may compare or print as a literal: well-formed UTF-8 (RFC 3629: an overlong
// form or a surrogate in a bound is not trusted) without NUL (DuckDB strings may hold it,
// its literals not).
bool ValidUtf8(std::string_view s) {
  return s.find('\0') == std::string_view::npos && IsValidUtf8(s);
}

std::optional<int64_t> IntegerOf(const Value& v) {
  if (const auto* i = std::get_if<int32_t>(&v.data)) return *i;
  if (const auto* l = std::get_if<int64_t>(&v.data)) return *l;
  return std::nullopt;
}

std::optional<double> FloatingOf(const Value& v) {
  if (const auto* f = std::get_if<float>(&v.data)) return *f;
  if (const auto* d = std::get_if<double>(&v.data)) return *d;
  return std::nullopt;
}

// SQL semantics of a nullable boolean.
enum class Tri { kFalse, kTrue, kNull };
Tri And(Tri a, Tri b) {
  if (a == Tri::kFalse || b == Tri::kFalse) return Tri::kFalse;
  return a == Tri::kNull || b == Tri::kNull ? Tri::kNull : Tri::kTrue;
}
Tri Of(bool b) { return b ? Tri::kTrue : Tri::kFalse; }
bool Coalesce(Tri t, bool otherwise) { return t == Tri::kNull ? otherwise : t == Tri::kTrue; }

void Pruner::TypeConstants(const std::vector<Predicate>& conjuncts) {
  std::vector<std::string> constants;
  // Also, ahead of knowing the constants' types, each comparison's native value under its
  // column's form (NativeConstants uses them where the types allow it): one query in all.
  struct Speculative {
    std::string key;
    Native::Kind kind;
  };
  std::vector<Speculative> natives;
  std::vector<std::string> native_exprs;
  std::function<void(const Predicate&)> collect = [&](const Predicate& p) {
    for (const Predicate& c : p.children) collect(c);
    if (p.kind != Predicate::Kind::kCompare) return;
    const std::optional<KnownConstant> known = ParseKnownConstant(p.constant);
    if (known) {
      types_[p.constant] = known->type;
    } else if (!types_.contains(p.constant)) {
      types_[p.constant];
      constants.push_back(p.constant);
    }
    const lake::NestedField* f = schema_.FindField(p.field_id);
    std::optional<NativeForm> form = f ? FormOfColumn(f->type) : std::nullopt;
    if (!form) return;
    std::string key = NativeKey(p.constant, form->duck_type, p.constant_is_string_literal);
    if (natives_.contains(key) || std::any_of(natives.begin(), natives.end(),
                                              [&](const Speculative& n) { return n.key == key; }))
      return;
    if (known) {
      if (auto decided = NativeOfKnown(*known, f->type, p.constant_is_string_literal)) {
        natives_[key] = std::move(*decided);
        return;
      }
    }
    for (std::string& e : NativeColumnsSql(p.constant, *form, p.constant_is_string_literal))
      native_exprs.push_back(std::move(e));
    natives.push_back({std::move(key), form->kind});
  };
  for (const Predicate& c : conjuncts) collect(c);
  if (constants.empty() && natives.empty()) return;  // known without DuckDB
  std::vector<std::string> exprs = {"current_setting('default_collation')"};
  for (const std::string& c : constants) exprs.push_back(fmt::format("typeof(({}))", c));
  const size_t first_native = exprs.size();
  exprs.insert(exprs.end(), native_exprs.begin(), native_exprs.end());
  auto result = conn_.Query(fmt::format("SELECT {}", fmt::join(exprs, ", ")));
  if (!natives.empty() && !result.ok()) {
    // A native column that does not bind or evaluate: the types alone.
    exprs.resize(first_native);
    result = conn_.Query(fmt::format("SELECT {}", fmt::join(exprs, ", ")));
    natives.clear();
  }
  if (!result.ok() || result->chunk_count() != 1 || result->chunk(0).size() != 1) {
    for (const std::string& c : constants) types_.erase(c);  // one by one in TypeOf
    return;
  }
  duck::ResultChunk row = result->chunk(0);
  for (size_t i = 0; i < first_native; ++i) {
    if (result->column_type(i) != duck::ColumnType::kVarchar) {
      for (const std::string& c : constants) types_.erase(c);
      return;
    }
  }
  collation_ = row.IsNull(0, 0) ? "" : std::string(row.GetString(0, 0));
  for (size_t i = 0; i < constants.size(); ++i) {
    if (row.IsNull(i + 1, 0)) {
      types_[constants[i]] = std::nullopt;
    } else {
      types_[constants[i]] = std::string(row.GetString(i + 1, 0));
    }
  }
  for (size_t k = 0; k < natives.size(); ++k) {
    natives_[natives[k].key] = ReadNative(*result, row, first_native + 3 * k, natives[k].kind);
  }
}

std::optional<std::string> Pruner::TypeOf(const std::string& constant) {
  if (auto it = types_.find(constant); it != types_.end()) return it->second;
  auto typed = conn_.QueryText(fmt::format("SELECT typeof(({}))", constant));
  std::optional<std::string> out;
  if (typed.ok() && typed->size() == 1) out = (*typed)[0][0];
  types_[constant] = out;
  return out;
}

bool Pruner::ByteOrderStrings() {
  if (!byte_order_strings_ && collation_) {
    byte_order_strings_ = collation_->empty() || IEqualsBinary(*collation_);
  }
  if (!byte_order_strings_) {
    auto rows = conn_.QueryText("SELECT current_setting('default_collation')");
    byte_order_strings_ =
        rows.ok() && rows->size() == 1 &&
        (!(*rows)[0][0] || (*rows)[0][0]->empty() || IEqualsBinary(*(*rows)[0][0]));
  }
  return *byte_order_strings_;
}

void Pruner::NativeConstants() {
  struct Candidate {
    const Predicate* p;
    NativeForm form;
    std::string key;
  };
  std::vector<Candidate> candidates;
  std::function<void(const Predicate&)> collect = [&](const Predicate& p) {
    for (const Predicate& c : p.children) collect(c);
    if (p.kind != Predicate::Kind::kCompare) return;
    const lake::NestedField* f = schema_.FindField(p.field_id);
    std::optional<std::string> ctype = TypeOf(p.constant);
    if (f == nullptr || !ctype || !NativeAllowed(f->type, *ctype, p.constant_is_string_literal))
      return;
    std::optional<NativeForm> form = FormOfColumn(f->type);
    if (!form) return;
    std::string key = NativeKey(p.constant, form->duck_type, p.constant_is_string_literal);
    if (auto known = natives_.find(key); known != natives_.end()) {  // read with the types
      if (known->second) leaves_[&p].native = *known->second;
      return;
    }
    candidates.push_back({&p, *form, std::move(key)});
  };
  for (const Predicate& c : conjuncts_) collect(c);
  auto run = [&](size_t from, size_t to) -> bool {
    std::vector<std::string> exprs;
    for (size_t k = from; k < to; ++k) {
      const Candidate& c = candidates[k];
      for (std::string& e :
           NativeColumnsSql(c.p->constant, c.form, c.p->constant_is_string_literal))
        exprs.push_back(std::move(e));
    }
    auto result = conn_.Query(fmt::format("SELECT {}", fmt::join(exprs, ", ")));
    if (!result.ok() || result->chunk_count() != 1) return false;
    duck::ResultChunk row = result->chunk(0);
    if (row.size() != 1) return false;
    for (size_t k = from; k < to; ++k) {
      const Candidate& c = candidates[k];
      std::optional<Native> n = ReadNative(*result, row, 3 * (k - from), c.form.kind);
      natives_[c.key] = n;
      if (n) leaves_[c.p].native = std::move(*n);
    }
    return true;
  };
  if (candidates.empty() || run(0, candidates.size())) return;
  for (size_t k = 0; k < candidates.size(); ++k) run(k, k + 1);  // one that fails is left out
}

bool Pruner::AllNative(const Predicate& p) const {
  switch (p.kind) {
    case Predicate::Kind::kAnd:
    case Predicate::Kind::kOr:
      return std::all_of(p.children.begin(), p.children.end(),
                         [&](const Predicate& c) { return AllNative(c); });
    case Predicate::Kind::kIsNull:
    case Predicate::Kind::kIsNotNull:
      return true;
    case Predicate::Kind::kCompare: {
      auto it = leaves_.find(&p);
      return it != leaves_.end() && it->second.native.has_value();
    }
    case Predicate::Kind::kUnknown:
      return false;
  }
  return false;
}

bool Pruner::KeepNative(const Predicate& p, const Evidence& ev) const {
  switch (p.kind) {
    case Predicate::Kind::kAnd:
      return std::all_of(p.children.begin(), p.children.end(),
                         [&](const Predicate& c) { return KeepNative(c, ev); });
    case Predicate::Kind::kOr:
      return std::any_of(p.children.begin(), p.children.end(),
                         [&](const Predicate& c) { return KeepNative(c, ev); });
    case Predicate::Kind::kUnknown:
      return true;
    default:
      return LeafNative(p, ev);
  }
}

std::vector<std::pair<int32_t, int32_t>> Pruner::BucketsOf(const Predicate& p) const {
  std::vector<std::pair<int32_t, int32_t>> out;  // (N, bucket)
  auto bit = leaves_.find(&p);
  if (bit == leaves_.end() || !bit->second.exact) return out;
  const lake::NestedField* f = schema_.FindField(p.field_id);
  std::set<int32_t> ns;
  for (const auto& spec : metadata_.partition_specs) {
    for (const auto& pf : spec.fields) {
      if (pf.source_id == p.field_id && pf.transform.kind() == lake::TransformKind::kBucket)
        ns.insert(pf.transform.param());
    }
  }
  for (int32_t n : ns) {
    Result<Value> b = lake::Transform::Bucket(n).Apply(f->type, *bit->second.exact);
    if (b.ok() && !b->is_null()) out.emplace_back(n, b->as_int());
  }
  return out;
}

// LeafSql's meaning over one item, in C++ (the cases NativeAllowed allows): the same
// three-valued logic, unknown evidence counting as "may".
bool Pruner::LeafNative(const Predicate& p, const Evidence& ev) const {
  const int32_t id = p.field_id;
  auto it = ev.ranges.find(id);
  const Range r = it == ev.ranges.end() ? Range{} : it->second;
  const bool mv = r.may_value.value_or(true);
  const bool mn = r.may_null.value_or(true);
  if (p.kind == Predicate::Kind::kIsNull) return mn;
  if (p.kind == Predicate::Kind::kIsNotNull) return mv;
  const Native& c = *leaves_.at(&p).native;
  const lake::NestedField* f = schema_.FindField(id);
  const bool nan = IsFloating(f->type) && r.may_nan.value_or(true);
  // The order of a bound against the constant (-1, 0, 1), as DuckDB orders values of the
  // column's type (NaN above every number, equal to itself); nullopt when unknown: no
  // bound, one the SQL path could not write as a literal, or a NULL constant.
  auto order = [&](const std::optional<Value>& bound) -> std::optional<int> {
    if (!bound || c.is_null) return std::nullopt;
    switch (c.kind) {
      case Native::Kind::kInt: {
        std::optional<int64_t> v = IntegerOf(*bound);
        if (!v) return std::nullopt;
        return *v < c.i ? -1 : *v == c.i ? 0 : 1;
      }
      case Native::Kind::kDouble: {
        std::optional<double> v = FloatingOf(*bound);
        if (!v || std::isnan(*v)) return std::nullopt;
        if (std::isnan(c.d)) return -1;
        return *v < c.d ? -1 : *v == c.d ? 0 : 1;
      }
      case Native::Kind::kString: {
        const auto* v = std::get_if<std::string>(&bound->data);
        if (v == nullptr || !ValidUtf8(*v)) return std::nullopt;
        const int k = v->compare(c.s);  // bytes, unsigned: DuckDB's binary collation
        return k < 0 ? -1 : k == 0 ? 0 : 1;
      }
    }
    return std::nullopt;
  };
  const std::optional<int> lo = order(r.lo), hi = order(r.hi);
  auto holds = [](std::optional<int> o, bool (*pred)(int)) {
    return o ? Of(pred(*o)) : Tri::kNull;
  };
  auto le0 = +[](int o) { return o <= 0; };
  auto lt0 = +[](int o) { return o < 0; };
  auto ge0 = +[](int o) { return o >= 0; };
  auto gt0 = +[](int o) { return o > 0; };
  auto eq0 = +[](int o) { return o == 0; };
  bool eq = mv && (Coalesce(And(holds(lo, le0), holds(hi, ge0)), true) || nan);
  if (eq) {
    for (const auto& [n, bucket] : BucketsOf(p)) {
      std::optional<int32_t> blo, bhi;
      if (auto b = ev.buckets.find(id); b != ev.buckets.end()) {
        for (const BucketRange& br : b->second) {
          if (br.n == n) blo = br.lo, bhi = br.hi;
        }
      }
      Tri in = And(blo ? Of(*blo <= bucket) : Tri::kNull, bhi ? Of(bucket <= *bhi) : Tri::kNull);
      eq = eq && Coalesce(in, true);
    }
  }
  const bool ne = mv && !Coalesce(And(And(holds(lo, eq0), holds(hi, eq0)), Of(!nan)), false);
  switch (p.op) {
    case CompareOp::kEq:
      return eq;
    case CompareOp::kLt:
      return mv && Coalesce(holds(lo, lt0), true);
    case CompareOp::kLe:
      return mv && Coalesce(holds(lo, le0), true);
    case CompareOp::kGt:
      return mv && (Coalesce(holds(hi, gt0), true) || nan);
    case CompareOp::kGe:
      return mv && (Coalesce(holds(hi, ge0), true) || nan);
    case CompareOp::kNe:
      return ne;
    case CompareOp::kDistinctFrom:
      return c.is_null ? mv : (mn || ne);
    case CompareOp::kNotDistinctFrom:
      return c.is_null ? mn : eq;
  }
  return true;
}

std::optional<std::string> BoolSql(std::optional<bool> b) {
  if (!b) return std::nullopt;
  return std::string(*b ? "true" : "false");
}

}  // namespace pruning

using lake::Type;
using lake::TypeId;
using lake::Value;
using pruning::FloatingOf;
using pruning::IntegerOf;
using pruning::OpText;
using pruning::ValidUtf8;

std::string Predicate::ToString() const {
  switch (kind) {
    case Kind::kUnknown:
      return "true";
    case Kind::kAnd:
    case Kind::kOr: {
      std::vector<std::string> parts;
      for (const Predicate& c : children) parts.push_back(c.ToString());
      return fmt::format("({})", fmt::join(parts, kind == Kind::kAnd ? " AND " : " OR "));
    }
    case Kind::kCompare:
      return fmt::format("#{} {} {}", field_id, OpText(op), constant);
    case Kind::kIsNull:
      return fmt::format("#{} IS NULL", field_id);
    case Kind::kIsNotNull:
      return fmt::format("#{} IS NOT NULL", field_id);
  }
  return "?";
}

std::optional<std::string> LiteralSql(const Type& type, const Value& value) {
  if (value.is_null()) return std::nullopt;
  switch (type.id) {
    case TypeId::kBoolean:
      if (const auto* b = std::get_if<bool>(&value.data)) return std::string(*b ? "true" : "false");
      return std::nullopt;
    case TypeId::kInt:
    case TypeId::kLong: {
      std::optional<int64_t> v = IntegerOf(value);
      if (!v) return std::nullopt;
      return fmt::format("CAST({} AS {})", *v, type.id == TypeId::kInt ? "INTEGER" : "BIGINT");
    }
    case TypeId::kFloat:
    case TypeId::kDouble: {
      std::optional<double> v = FloatingOf(value);
      if (!v || std::isnan(*v)) return std::nullopt;
      std::string text = std::isinf(*v) ? (*v > 0 ? "inf" : "-inf") : fmt::format("{}", *v);
      if (type.id == TypeId::kFloat) {
        if (const auto* f = std::get_if<float>(&value.data))
          text = std::isinf(*f) ? text : fmt::format("{}", *f);
      }
      return fmt::format("CAST('{}' AS {})", text, type.id == TypeId::kFloat ? "FLOAT" : "DOUBLE");
    }
    case TypeId::kDecimal: {
      const auto* d = std::get_if<lake::DecimalValue>(&value.data);
      if (d == nullptr) return std::nullopt;
      return fmt::format("CAST('{}' AS DECIMAL({}, {}))",
                         lake::DecimalToString(d->unscaled, type.scale), type.precision,
                         type.scale);
    }
    case TypeId::kDate: {
      std::optional<int64_t> v = IntegerOf(value);
      if (!v) return std::nullopt;
      return fmt::format("CAST(DATE '1970-01-01' + CAST({} AS INTEGER) AS DATE)", *v);
    }
    case TypeId::kTime: {
      std::optional<int64_t> v = IntegerOf(value);
      if (!v) return std::nullopt;
      return fmt::format("CAST(TIME '00:00:00' + to_microseconds(CAST({} AS BIGINT)) AS TIME)", *v);
    }
    case TypeId::kTimestamp: {
      std::optional<int64_t> v = IntegerOf(value);
      if (!v) return std::nullopt;
      return fmt::format("make_timestamp(CAST({} AS BIGINT))", *v);
    }
    case TypeId::kTimestampTz: {
      // Through text with an explicit +00 offset: no session time zone involved.
      std::optional<int64_t> v = IntegerOf(value);
      if (!v) return std::nullopt;
      return fmt::format(
          "CAST(CAST(make_timestamp(CAST({} AS BIGINT)) AS VARCHAR) || '+00' AS TIMESTAMPTZ)", *v);
    }
    case TypeId::kString: {
      const auto* s = std::get_if<std::string>(&value.data);
      if (s == nullptr || !ValidUtf8(*s)) return std::nullopt;
      return duck::QuoteLiteral(*s);
    }
    case TypeId::kFixed:
    case TypeId::kBinary: {
      const auto* b = std::get_if<lake::Bytes>(&value.data);
      if (b == nullptr) return std::nullopt;
      std::string hex;
      for (uint8_t c : *b) hex += fmt::format("{:02x}", c);
      return fmt::format("from_hex('{}')", hex);
    }
    default:
      return std::nullopt;
  }
}

namespace pruning {

Predicate Pruner::Prepare(const Predicate& p) {
  switch (p.kind) {
    case Predicate::Kind::kAnd:
    case Predicate::Kind::kOr: {
      Predicate out;
      out.kind = p.kind;
      for (const Predicate& c : p.children) {
        Predicate pc = Prepare(c);
        if (pc.kind == Predicate::Kind::kUnknown) {
          if (p.kind == Predicate::Kind::kOr) return Predicate::Unknown();  // A OR true
          continue;                                                         // A AND true
        }
        out.children.push_back(std::move(pc));
      }
      if (out.children.empty()) return Predicate::Unknown();
      if (out.children.size() == 1) return std::move(out.children[0]);
      return out;
    }
    case Predicate::Kind::kIsNull:
    case Predicate::Kind::kIsNotNull: {
      if (schema_.FindField(p.field_id) == nullptr) return Predicate::Unknown();
      return p;
    }
    case Predicate::Kind::kCompare: {
      const lake::NestedField* f = schema_.FindField(p.field_id);
      if (f == nullptr || !Comparable(f->type)) return Predicate::Unknown();
      if (f->type.id == TypeId::kString && !ByteOrderStrings()) return Predicate::Unknown();
      std::optional<std::string> ctype = TypeOf(p.constant);
      if (!ctype) return Predicate::Unknown();
      if (!p.constant_is_string_literal && !SameFamily(f->type, *ctype))
        return Predicate::Unknown();
      return p;
    }
    case Predicate::Kind::kUnknown:
      return p;
  }
  return Predicate::Unknown();
}

void Pruner::CollectFields(const Predicate& p, std::set<int32_t>* out) const {
  if (p.kind == Predicate::Kind::kAnd || p.kind == Predicate::Kind::kOr) {
    for (const Predicate& c : p.children) CollectFields(c, out);
  } else if (p.kind != Predicate::Kind::kUnknown) {
    out->insert(p.field_id);
  }
}

std::string Pruner::LeafSql(const Predicate& p) const {
  const int32_t id = p.field_id;
  const std::string mv = fmt::format("coalesce(mv_{}, true)", id);
  const std::string mn = fmt::format("coalesce(mn_{}, true)", id);
  if (p.kind == Predicate::Kind::kIsNull) return mn;
  if (p.kind == Predicate::Kind::kIsNotNull) return mv;
  const std::string c = fmt::format("({})", p.constant);
  const std::string lo = fmt::format("lo_{}", id), hi = fmt::format("hi_{}", id);
  // DuckDB orders NaN above every number (NaN > x, NaN >= x and NaN = NaN are true), and
  // bounds leave NaN out: a file that may hold NaN is kept for =, >, >= and <>.
  const std::string nan = fmt::format("coalesce(nan_{}, true)", id);
  auto in_range = [&](std::string cond) { return fmt::format("coalesce({}, true)", cond); };
  std::string eq = fmt::format("({} AND ({} OR {}))", mv,
                               in_range(fmt::format("{0} <= {1} AND {1} <= {2}", lo, c, hi)), nan);
  // Buckets: the constant's bucket must be among the item's bucket values.
  if (auto bit = leaves_.find(&p); bit != leaves_.end() && bit->second.exact) {
    const lake::NestedField* f = schema_.FindField(id);
    std::set<int32_t> ns;
    for (const auto& spec : metadata_.partition_specs) {
      for (const auto& pf : spec.fields) {
        if (pf.source_id == id && pf.transform.kind() == lake::TransformKind::kBucket)
          ns.insert(pf.transform.param());
      }
    }
    for (int32_t n : ns) {
      Result<Value> b = lake::Transform::Bucket(n).Apply(f->type, *bit->second.exact);
      if (!b.ok() || b->is_null()) continue;
      eq = fmt::format("({0} AND coalesce(bklo_{1}_{2} <= {3} AND {3} <= bkhi_{1}_{2}, true))", eq,
                       id, n, b->as_int());
    }
  }
  switch (p.op) {
    case CompareOp::kEq:
      return eq;
    case CompareOp::kLt:
      return fmt::format("({} AND {})", mv, in_range(fmt::format("{} < {}", lo, c)));
    case CompareOp::kLe:
      return fmt::format("({} AND {})", mv, in_range(fmt::format("{} <= {}", lo, c)));
    case CompareOp::kGt:
      return fmt::format("({} AND ({} OR {}))", mv, in_range(fmt::format("{} > {}", hi, c)), nan);
    case CompareOp::kGe:
      return fmt::format("({} AND ({} OR {}))", mv, in_range(fmt::format("{} >= {}", hi, c)), nan);
    case CompareOp::kNe:
    case CompareOp::kDistinctFrom: {
      // Only an item whose every value equals the constant has no row for <>.
      std::string ne = fmt::format("({} AND NOT coalesce({} = {} AND {} = {} AND NOT {}, false))",
                                   mv, lo, c, hi, c, nan);
      if (p.op == CompareOp::kNe) return ne;
      return fmt::format("(CASE WHEN {} IS NULL THEN {} ELSE ({} OR {}) END)", c, mv, mn, ne);
    }
    case CompareOp::kNotDistinctFrom:
      return fmt::format("(CASE WHEN {} IS NULL THEN {} ELSE {} END)", c, mn, eq);
  }
  return "true";
}

std::string Pruner::KeepSql(const Predicate& p) const {
  switch (p.kind) {
    case Predicate::Kind::kUnknown:
      return "true";
    case Predicate::Kind::kAnd:
    case Predicate::Kind::kOr: {
      std::vector<std::string> parts;
      for (const Predicate& c : p.children) parts.push_back(KeepSql(c));
      return fmt::format("({})",
                         fmt::join(parts, p.kind == Predicate::Kind::kAnd ? " AND " : " OR "));
    }
    default:
      return LeafSql(p);
  }
}

std::vector<bool> Pruner::Evaluate(const std::vector<Evidence>& items) {
  std::vector<bool> keep(items.size(), true);
  if (items.empty() || conjuncts_.empty()) return keep;
  // Conjuncts whose every leaf is native are evaluated here; the rest by DuckDB over a
  // VALUES list of the evidence.
  std::vector<const Predicate*> in_duckdb;
  for (const Predicate& c : conjuncts_) {
    if (!AllNative(c)) {
      in_duckdb.push_back(&c);
      continue;
    }
    for (size_t i = 0; i < items.size(); ++i) {
      if (keep[i]) keep[i] = KeepNative(c, items[i]);
    }
  }
  // No evidence at all (an unpartitioned table's manifests and files): every keep
  // expression is true.
  const bool evidence = std::any_of(items.begin(), items.end(), [](const Evidence& ev) {
    return !ev.ranges.empty() || !ev.buckets.empty();
  });
  if (in_duckdb.empty() || !evidence) return keep;
  // Columns: per field lo, hi, mn, mv, nan; per bucketed field and N, bklo and bkhi.
  std::vector<std::string> names = {"i"};
  std::map<int32_t, std::set<int32_t>> bucket_ns;
  for (const Evidence& ev : items) {
    for (const auto& [id, list] : ev.buckets) {
      if (!fields_.contains(id)) continue;
      for (const BucketRange& b : list) bucket_ns[id].insert(b.n);
    }
  }
  for (int32_t id : fields_) {
    for (std::string_view c : {"lo", "hi", "mn", "mv", "nan"})
      names.push_back(fmt::format("{}_{}", c, id));
  }
  for (const auto& [id, ns] : bucket_ns) {
    for (int32_t n : ns) {
      names.push_back(fmt::format("bklo_{}_{}", id, n));
      names.push_back(fmt::format("bkhi_{}_{}", id, n));
    }
  }
  // Every referenced bucket column must exist even when no item has it.
  for (const auto& spec : metadata_.partition_specs) {
    for (const auto& pf : spec.fields) {
      if (pf.transform.kind() == lake::TransformKind::kBucket && fields_.contains(pf.source_id) &&
          !bucket_ns[pf.source_id].contains(pf.transform.param())) {
        bucket_ns[pf.source_id].insert(pf.transform.param());
        names.push_back(fmt::format("bklo_{}_{}", pf.source_id, pf.transform.param()));
        names.push_back(fmt::format("bkhi_{}_{}", pf.source_id, pf.transform.param()));
      }
    }
  }
  std::vector<std::string> rows;
  rows.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const Evidence& ev = items[i];
    std::vector<std::string> cells = {std::to_string(i)};
    for (int32_t id : fields_) {
      const lake::NestedField* f = schema_.FindField(id);
      std::string type = lake::DuckTypeOf(f->type);
      auto typed = [&](const std::optional<std::string>& v, std::string_view t) {
        return v ? *v : fmt::format("CAST(NULL AS {})", t);
      };
      auto it = ev.ranges.find(id);
      Range r = it == ev.ranges.end() ? Range{} : it->second;
      if (!IsFloating(f->type)) r.may_nan = false;
      cells.push_back(typed(r.lo ? LiteralSql(f->type, *r.lo) : std::nullopt, type));
      cells.push_back(typed(r.hi ? LiteralSql(f->type, *r.hi) : std::nullopt, type));
      cells.push_back(typed(BoolSql(r.may_null), "BOOLEAN"));
      cells.push_back(typed(BoolSql(r.may_value), "BOOLEAN"));
      cells.push_back(typed(BoolSql(r.may_nan), "BOOLEAN"));
    }
    for (const auto& [id, ns] : bucket_ns) {
      for (int32_t n : ns) {
        std::optional<int32_t> lo, hi;
        if (auto b = ev.buckets.find(id); b != ev.buckets.end()) {
          for (const BucketRange& br : b->second) {
            if (br.n == n) lo = br.lo, hi = br.hi;
          }
        }
        cells.push_back(lo ? fmt::format("CAST({} AS INTEGER)", *lo) : "CAST(NULL AS INTEGER)");
        cells.push_back(hi ? fmt::format("CAST({} AS INTEGER)", *hi) : "CAST(NULL AS INTEGER)");
      }
    }
    rows.push_back(fmt::format("({})", fmt::join(cells, ", ")));
  }
  const std::string values =
      fmt::format("(VALUES {}) AS ev({})", fmt::join(rows, ", "), fmt::join(names, ", "));
  // One query per conjunct: a conjunct DuckDB cannot evaluate (a constant that does not
  // cast, an overflow) is left out instead of failing the query or the others.
  for (const Predicate* c : in_duckdb) {
    auto kept = conn_.QueryText(
        fmt::format("SELECT i FROM {} WHERE coalesce({}, true)", values, KeepSql(*c)));
    if (!kept.ok()) continue;
    std::vector<bool> here(items.size(), false);
    for (const auto& row : *kept) {
      if (row[0]) {
        size_t i = std::strtoull(row[0]->c_str(), nullptr, 10);
        if (i < here.size()) here[i] = true;
      }
    }
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = keep[i] && here[i];
  }
  return keep;
}

Result<ScanPlan> Pruner::Run(const lake::Snapshot* snapshot,
                             const std::vector<Predicate>& conjuncts) {
  ScanPlan plan;
  plan.stats.schema_id = schema_.schema_id;
  if (snapshot == nullptr) return plan;
  plan.stats.snapshot_id = snapshot->snapshot_id;
  TypeConstants(conjuncts);
  for (const Predicate& c : conjuncts) {
    Predicate p = Prepare(c);
    if (p.kind == Predicate::Kind::kUnknown) continue;
    plan.stats.filters.push_back(p.ToString());
    conjuncts_.push_back(std::move(p));
  }
  for (const Predicate& c : conjuncts_) CollectFields(c, &fields_);
  NativeConstants();
  // Leaves whose constant is exactly a value of the column's type: their buckets.
  std::function<void(const Predicate&)> buckets = [&](const Predicate& p) {
    for (const Predicate& c : p.children) buckets(c);
    if (p.kind != Predicate::Kind::kCompare ||
        (p.op != CompareOp::kEq && p.op != CompareOp::kNotDistinctFrom))
      return;
    const lake::NestedField* f = schema_.FindField(p.field_id);
    bool bucketed = false;
    for (const auto& spec : metadata_.partition_specs) {
      for (const auto& pf : spec.fields) {
        bucketed |=
            pf.source_id == p.field_id && pf.transform.kind() == lake::TransformKind::kBucket;
      }
    }
    if (!bucketed) return;
    if (auto it = leaves_.find(&p);
        it != leaves_.end() && it->second.native && !it->second.native->is_null) {
      // The native value is the constant cast exactly to the column's type.
      const Native& n = *it->second.native;
      switch (f->type.id) {
        case TypeId::kInt:
        case TypeId::kDate:
          leaves_[&p].exact = Value::Int(static_cast<int32_t>(n.i));
          return;
        case TypeId::kLong:
          leaves_[&p].exact = Value::Long(n.i);
          return;
        case TypeId::kString:
          leaves_[&p].exact = Value::String(n.s);
          return;
        default:
          break;
      }
    }
    std::string expr;
    switch (f->type.id) {
      case TypeId::kInt:
        expr = "CAST(({0}) AS INTEGER)";
        break;
      case TypeId::kLong:
        expr = "CAST(({0}) AS BIGINT)";
        break;
      case TypeId::kString:
        expr = "CAST(({0}) AS VARCHAR)";
        break;
      case TypeId::kDate:
        expr = "(CAST(({0}) AS DATE) - DATE '1970-01-01')";
        break;
      default:
        return;
    }
    std::string cast = fmt::format(fmt::runtime(expr), p.constant);
    // Exact: the cast value compares equal to the constant itself, so `column = constant`
    // holds for this value of the column's type and no other.
    std::string same = f->type.id == TypeId::kDate
                           ? fmt::format("CAST(({0}) AS DATE) = ({0})", p.constant)
                           : fmt::format("{} = ({})", cast, p.constant);
    auto rows = conn_.QueryText(fmt::format("SELECT ({})::VARCHAR, {}", cast, same));
    if (!rows.ok() || rows->size() != 1 || !(*rows)[0][0] ||
        (*rows)[0][1] != std::optional<std::string>("true"))
      return;
    const std::string& text = *(*rows)[0][0];
    Value v;
    switch (f->type.id) {
      case TypeId::kInt:
      case TypeId::kDate:
        v = Value::Int(static_cast<int32_t>(std::strtoll(text.c_str(), nullptr, 10)));
        break;
      case TypeId::kLong:
        v = Value::Long(std::strtoll(text.c_str(), nullptr, 10));
        break;
      default:
        v = Value::String(text);
        break;
    }
    leaves_[&p].exact = v;
  };
  for (const Predicate& c : conjuncts_) buckets(c);

  ASSIGN_OR_RETURN(std::shared_ptr<const std::vector<lake::ManifestFile>> list,
                   manifests_.ManifestList(*snapshot));
  const std::vector<lake::ManifestFile>& manifests = *list;
  std::vector<const lake::ManifestFile*> data;
  std::vector<const lake::ManifestFile*> delete_manifests;
  for (const lake::ManifestFile& m : manifests) {
    (m.content != 0 ? delete_manifests : data).push_back(&m);
  }
  plan.stats.manifests_total = static_cast<int64_t>(data.size());

  // Manifests by their partition summaries.
  std::vector<Evidence> summaries;
  for (const lake::ManifestFile* m : data) {
    const lake::PartitionSpec* spec = metadata_.FindSpec(m->partition_spec_id);
    summaries.push_back(spec == nullptr ? Evidence{} : FromSummaries(*m, *spec));
  }
  std::vector<bool> read = Evaluate(summaries);

  struct Candidate {
    const lake::ManifestEntry& entry;
    const lake::PartitionSpec* spec;
  };
  std::vector<Candidate> files;
  std::vector<std::shared_ptr<const std::vector<lake::ManifestEntry>>>
      read_entries;  // `files` point into them
  for (size_t i = 0; i < data.size(); ++i) {
    const lake::ManifestFile& m = *data[i];
    if (!read[i]) {
      int64_t live = m.added_files_count + m.existing_files_count;
      plan.stats.files_total += live;
      plan.stats.pruned_by_partition += live;
      continue;
    }
    ++plan.stats.manifests_read;
    const lake::PartitionSpec* spec = metadata_.FindSpec(m.partition_spec_id);
    if (spec == nullptr) {
      return CorruptionError(
          "lake table {}: manifest {} has partition spec {}, which the table does not have", table_,
          m.manifest_path, m.partition_spec_id);
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const std::vector<lake::ManifestEntry>> entries,
                     manifests_.Entries(m));
    read_entries.push_back(entries);
    for (const lake::ManifestEntry& e : *entries) {
      if (e.status == lake::EntryStatus::kDeleted) continue;
      if (e.file.content != 0) {
        return CorruptionError("lake table {}: data manifest {} lists delete file {}", table_,
                               m.manifest_path, e.file.file_path);
      }
      if (e.file.file_format != "PARQUET" && e.file.file_format != "parquet") {
        return UnimplementedError(
            "lake table {}: data file {} is {}; only Parquet data files can be read", table_,
            e.file.file_path, e.file.file_format);
      }
      ++plan.stats.files_total;
      files.push_back(Candidate{e, spec});
    }
  }

  // Files by their partition values, then by their column statistics.
  std::vector<Evidence> partitions;
  for (const Candidate& c : files) partitions.push_back(FromPartition(c.entry, *c.spec));
  std::vector<bool> by_partition = Evaluate(partitions);
  std::vector<size_t> survivors;
  for (size_t i = 0; i < files.size(); ++i) {
    if (by_partition[i]) {
      survivors.push_back(i);
    } else {
      ++plan.stats.pruned_by_partition;
    }
  }
  std::vector<Evidence> stats;
  for (size_t i : survivors) stats.push_back(FromStats(files[i].entry));
  std::vector<bool> by_stats = Evaluate(stats);
  std::vector<const Candidate*> kept;
  for (size_t k = 0; k < survivors.size(); ++k) {
    if (!by_stats[k]) {
      ++plan.stats.pruned_by_stats;
      continue;
    }
    kept.push_back(&files[survivors[k]]);
  }

  // Row-level deletes (Iceberg v2), by the spec's scan planning rules (lake::DeleteApplies).
  struct Delete {
    const lake::ManifestEntry* entry;
    const lake::PartitionSpec* spec;
  };
  std::vector<Delete> deletes;
  for (const lake::ManifestFile* m : delete_manifests) {
    const lake::PartitionSpec* spec = metadata_.FindSpec(m->partition_spec_id);
    if (spec == nullptr) {
      return CorruptionError(
          "lake table {}: manifest {} has partition spec {}, which the table does not have", table_,
          m->manifest_path, m->partition_spec_id);
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const std::vector<lake::ManifestEntry>> entries,
                     manifests_.Entries(*m));
    read_entries.push_back(entries);
    for (const lake::ManifestEntry& e : *entries) {
      if (e.status == lake::EntryStatus::kDeleted) continue;
      if (e.file.content == 0) {
        return CorruptionError("lake table {}: delete manifest {} lists data file {}", table_,
                               m->manifest_path, e.file.file_path);
      }
      if (e.file.file_format != "PARQUET" && e.file.file_format != "parquet") {
        return UnimplementedError(
            "lake table {}: delete file {} is {}; only Parquet delete files can be read", table_,
            e.file.file_path, e.file.file_format);
      }
      deletes.push_back(Delete{&e, spec});
    }
  }
  auto applies = [&](const Delete& d, const Candidate& c) {
    return lake::DeleteApplies(*d.entry, *d.spec, c.entry, *c.spec);
  };
  // Data files with deletes applying to them in one scan with those deletes; the others
  // read plainly.
  // A file's local path, or its S3 location until the fetch below replaces it.
  auto place = [&](const lake::DataFile& f, std::vector<std::string>& into) -> Status {
    if (lake::IsS3Location(f.file_path)) {
      into.push_back(lake::NormalLocation(f.file_path));  // fetched below
    } else {
      ASSIGN_OR_RETURN(std::string path, lake::LocalPath(f.file_path));
      into.push_back(std::move(path));
    }
    return Status::OK();
  };
  std::map<size_t, size_t> slot_of;  // index into `deletes` -> into plan.deletes->deletes
  for (const Candidate* c : kept) {
    const lake::DataFile& f = c->entry.file;
    plan.stats.records_kept += f.record_count;
    ++plan.stats.files_kept;
    std::vector<size_t> mine;
    for (size_t j = 0; j < deletes.size(); ++j) {
      if (applies(deletes[j], *c)) mine.push_back(j);
    }
    if (mine.empty()) {
      RETURN_IF_ERROR(place(f, plan.paths));
      continue;
    }
    if (!plan.deletes) plan.deletes.emplace();
    lake::DeleteScan& scan = *plan.deletes;
    const size_t at = scan.data_paths.size();
    RETURN_IF_ERROR(place(f, scan.data_paths));
    scan.data_locations.push_back(f.file_path);
    for (size_t j : mine) {
      auto [it, fresh] = slot_of.emplace(j, scan.deletes.size());
      if (fresh) {
        const lake::DataFile& d = deletes[j].entry->file;
        std::vector<std::string> one;
        RETURN_IF_ERROR(place(d, one));
        scan.deletes.push_back({one.front(), d.content, d.equality_ids, {}});
      }
      scan.deletes[it->second].applies_to.push_back(at);
    }
  }
  plan.stats.delete_files = static_cast<int64_t>(slot_of.size());
  // Now that no vector grows any more: every S3 location, to be replaced by its copy.
  std::vector<std::string*> slots;
  auto collect = [&](std::vector<std::string>& v) {
    for (std::string& p : v) {
      if (lake::IsS3Location(p)) slots.push_back(&p);
    }
  };
  collect(plan.paths);
  if (plan.deletes) {
    collect(plan.deletes->data_paths);
    for (lake::DeleteScan::File& d : plan.deletes->deletes) {
      if (lake::IsS3Location(d.path)) slots.push_back(&d.path);
    }
  }
  if (!slots.empty()) {
    // Only the files pruning kept, and the deletes applying to them, are fetched
    // (docs/design/0024, decision 6). Their sizes, from the manifests, let the cache check
    // its budget before any download.
    std::map<std::string, uint64_t> size_of;
    for (const Candidate* c : kept) {
      if (lake::IsS3Location(c->entry.file.file_path)) {
        size_of[lake::NormalLocation(c->entry.file.file_path)] =
            static_cast<uint64_t>(std::max<int64_t>(0, c->entry.file.file_size_in_bytes));
      }
    }
    for (const Delete& d : deletes) {
      if (lake::IsS3Location(d.entry->file.file_path)) {
        size_of[lake::NormalLocation(d.entry->file.file_path)] =
            static_cast<uint64_t>(std::max<int64_t>(0, d.entry->file.file_size_in_bytes));
      }
    }
    std::vector<std::string> locations;
    std::vector<uint64_t> sizes;
    for (std::string* slot : slots) {
      locations.push_back(*slot);
      sizes.push_back(size_of[*slot]);
    }
    Result<lake::ObjectCache*> cache = lake::S3ObjectCache();
    if (!cache.ok()) return cache.status().WithContext(fmt::format("lake table {}", table_));
    Result<std::vector<std::shared_ptr<const lake::CachedObject>>> copies =
        (*cache)->Fetch(locations, sizes);
    if (!copies.ok()) return copies.status().WithContext(fmt::format("lake table {}", table_));
    std::set<const lake::CachedObject*> counted;
    for (size_t j = 0; j < slots.size(); ++j) {
      *slots[j] = (*copies)[j]->path();
      if (counted.insert((*copies)[j].get()).second)
        plan.stats.remote_bytes += (*copies)[j]->size();
    }
    plan.holds = std::move(*copies);
  }
  return plan;
}

}  // namespace pruning

Result<std::shared_ptr<const std::vector<lake::ManifestFile>>> ManifestReader::ManifestList(
    const lake::Snapshot& snapshot) const {
  ASSIGN_OR_RETURN(std::vector<lake::ManifestFile> list, lake::ReadManifestsOf(snapshot));
  return std::make_shared<const std::vector<lake::ManifestFile>>(std::move(list));
}

Result<std::shared_ptr<const std::vector<lake::ManifestEntry>>> ManifestReader::Entries(
    const lake::ManifestFile& m) const {
  ASSIGN_OR_RETURN(std::vector<lake::ManifestEntry> entries, lake::ReadEntriesOf(m));
  return std::make_shared<const std::vector<lake::ManifestEntry>>(std::move(entries));
}

Result<ScanPlan> PlanScan(duck::Connection& conn, const lake::TableMetadata& metadata,
                          const lake::Snapshot* snapshot, const lake::Schema& schema,
                          const std::vector<Predicate>& conjuncts, std::string_view table,
                          const ManifestReader& manifests,
                          std::optional<std::string> default_collation) {
  pruning::Pruner pruner(conn, metadata, schema, table, manifests, std::move(default_collation));
  return pruner.Run(snapshot, conjuncts);
}

}  // namespace sluice::query
