// The evidence pruning reads (file_pruner_internal.h): a manifest's partition summaries, a
// data file's partition values through the spec's transforms, and its column statistics
// (lower/upper bounds, null and NaN counts), as ranges of the query's columns.
#include <cmath>

#include "lake/data_files.h"
#include "lake/duck_types.h"
#include "lake/table.h"
#include "lake/transforms.h"
#include "query/lake_planner/file_pruner_internal.h"

namespace sluice::query::pruning {

// A partition value as a Value of the transform's result type over `source`.
std::optional<Value> PartitionValue(const lake::avro::Datum& d, const Type& result) {
  using K = lake::avro::Datum::Kind;
  switch (d.kind()) {
    case K::kBoolean:
      return Value::Boolean(d.boolean());
    case K::kInt:
      if (result.id == TypeId::kLong || result.id == TypeId::kTime ||
          result.id == TypeId::kTimestamp || result.id == TypeId::kTimestampTz) {
        return Value::Long(d.int_value());
      }
      return Value::Int(d.int_value());
    case K::kLong:
      if (result.id == TypeId::kInt || result.id == TypeId::kDate) return std::nullopt;
      return Value::Long(d.long_value());
    case K::kFloat:
      if (result.id == TypeId::kDouble) return Value::Double(d.float_value());
      return Value::Float(d.float_value());
    case K::kDouble:
      if (result.id != TypeId::kDouble) return std::nullopt;
      return Value::Double(d.double_value());
    case K::kString:
      return Value::String(d.bytes());
    case K::kBytes:
    case K::kFixed: {
      const std::string& b = d.bytes();
      if (result.id == TypeId::kString) return Value::String(b);
      Result<Value> v =
          lake::FromSingleValueBinary(result, reinterpret_cast<const uint8_t*>(b.data()), b.size());
      if (!v.ok()) return std::nullopt;
      return *v;
    }
    default:
      return std::nullopt;
  }
}

// A bound from a manifest list summary or a data file's statistics, read as `type`.
std::optional<Value> BoundValue(const Type& type, const std::string& bytes) {
  Result<Value> v = lake::FromSingleValueBinary(
      type, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!v.ok() || v->is_null()) return std::nullopt;
  if (std::optional<double> f = FloatingOf(*v); f && std::isnan(*f)) return std::nullopt;
  return *v;
}

// Days from the epoch of the first day of month `m` months after 1970-01.
int64_t MonthStartDays(int64_t m) {
  int64_t year = 1970 + (m >= 0 ? m / 12 : -((-m + 11) / 12));
  int64_t month = m - (year - 1970) * 12;
  return lake::DaysFromCivil(year, static_cast<unsigned>(month + 1), 1);
}

void Pruner::AddPartitionEvidence(const lake::PartitionField& field,
                                  const std::optional<Value>& plo, const std::optional<Value>& phi,
                                  std::optional<bool> has_null, std::optional<bool> has_value,
                                  std::optional<bool> has_nan, Evidence* ev) const {
  const lake::NestedField* source = schema_.FindField(field.source_id);
  if (source == nullptr || !fields_.contains(field.source_id)) return;
  const Type& t = source->type;
  const lake::Transform& tr = field.transform;
  if (tr.kind() == lake::TransformKind::kVoid || tr.kind() == lake::TransformKind::kUnknown) return;
  // Null in, null out: a null partition value means a null source value, and back.
  Range r;
  r.may_null = has_null;
  r.may_value = has_value;
  if (tr.kind() == lake::TransformKind::kIdentity) r.may_nan = has_nan;
  auto start_of = [&](int64_t days) -> Value {
    return t.id == TypeId::kDate ? Value::Int(static_cast<int32_t>(days))
                                 : Value::Long(days * kMicrosPerDay);
  };
  auto end_of = [&](int64_t next_days) -> Value {  // the last value before day `next_days`
    return t.id == TypeId::kDate ? Value::Int(static_cast<int32_t>(next_days - 1))
                                 : Value::Long(next_days * kMicrosPerDay - 1);
  };
  // Partition values of time transforms beyond what a timestamp can hold (corrupt
  // metadata) would overflow the arithmetic below: no bound from them.
  const int64_t limit = tr.kind() == lake::TransformKind::kYear    ? 300'000
                        : tr.kind() == lake::TransformKind::kMonth ? 3'600'000
                        : tr.kind() == lake::TransformKind::kDay   ? 110'000'000
                                                                   : INT64_MAX;
  auto as_int = [limit](const std::optional<Value>& v) -> std::optional<int64_t> {
    std::optional<int64_t> i = v ? IntegerOf(*v) : std::nullopt;
    if (i && (*i > limit || *i < -limit)) return std::nullopt;
    return i;
  };
  const bool temporal =
      t.id == TypeId::kDate || t.id == TypeId::kTimestamp || t.id == TypeId::kTimestampTz;
  switch (tr.kind()) {
    case lake::TransformKind::kIdentity:
      r.lo = plo;
      r.hi = phi;
      break;
    case lake::TransformKind::kYear:
      if (!temporal) return;
      if (auto lo = as_int(plo)) r.lo = start_of(lake::DaysFromCivil(1970 + *lo, 1, 1));
      if (auto hi = as_int(phi)) r.hi = end_of(lake::DaysFromCivil(1970 + *hi + 1, 1, 1));
      break;
    case lake::TransformKind::kMonth:
      if (!temporal) return;
      if (auto lo = as_int(plo)) r.lo = start_of(MonthStartDays(*lo));
      if (auto hi = as_int(phi)) r.hi = end_of(MonthStartDays(*hi + 1));
      break;
    case lake::TransformKind::kDay:
      if (!temporal) return;
      if (auto lo = as_int(plo)) r.lo = start_of(*lo);
      if (auto hi = as_int(phi)) r.hi = end_of(*hi + 1);
      break;
    case lake::TransformKind::kHour:
      if (t.id != TypeId::kTimestamp && t.id != TypeId::kTimestampTz) return;
      if (auto lo = as_int(plo)) r.lo = Value::Long(*lo * kMicrosPerHour);
      if (auto hi = as_int(phi)) r.hi = Value::Long((*hi + 1) * kMicrosPerHour - 1);
      break;
    case lake::TransformKind::kTruncate: {
      const int64_t w = tr.param();
      if (t.id == TypeId::kInt || t.id == TypeId::kLong) {
        auto lo = as_int(plo);
        auto hi = as_int(phi);
        if (lo)
          r.lo = t.id == TypeId::kInt ? Value::Int(static_cast<int32_t>(*lo)) : Value::Long(*lo);
        if (hi && *hi <= (t.id == TypeId::kInt ? INT32_MAX : INT64_MAX) - (w - 1)) {
          r.hi = t.id == TypeId::kInt ? Value::Int(static_cast<int32_t>(*hi + w - 1))
                                      : Value::Long(*hi + w - 1);
        }
      } else if (t.id == TypeId::kDecimal) {
        if (plo) r.lo = plo;
        if (phi) {
          if (const auto* d = std::get_if<lake::DecimalValue>(&phi->data)) {
            Value up = Value::Decimal(d->unscaled + w - 1);
            if (lake::CheckValueType(t, up).ok()) r.hi = up;
          }
        }
      } else if (t.id == TypeId::kString) {
        // Every value starts with its partition value: at least it, below the next prefix.
        if (plo) r.lo = plo;
        if (phi) {
          if (const auto* s = std::get_if<std::string>(&phi->data)) {
            if (auto up = lake::UpperOfPrefix(*s)) r.hi = Value::String(*up);
          }
        }
      } else {
        return;
      }
      break;
    }
    case lake::TransformKind::kBucket: {
      BucketRange b;
      b.n = tr.param();
      if (auto lo = as_int(plo)) b.lo = static_cast<int32_t>(*lo);
      if (auto hi = as_int(phi)) b.hi = static_cast<int32_t>(*hi);
      ev->buckets[field.source_id].push_back(b);
      r = Range{};  // buckets say nothing of the order
      r.may_null = has_null;
      r.may_value = has_value;
      break;
    }
    default:
      return;
  }
  auto [it, inserted] = ev->ranges.emplace(field.source_id, r);
  if (!inserted) {
    // A second partition field on the same column: keep the first range, but any field
    // that proves "no nulls" or "only nulls" decides.
    Range& have = it->second;
    if (!have.lo) have.lo = r.lo;
    if (!have.hi) have.hi = r.hi;
    if (r.may_null == false) have.may_null = false;
    if (r.may_value == false) have.may_value = false;
  }
}

Evidence Pruner::FromSummaries(const lake::ManifestFile& m, const lake::PartitionSpec& spec) const {
  Evidence ev;
  if (m.partitions.size() != spec.fields.size()) return ev;  // no summaries, or not ours
  for (size_t i = 0; i < spec.fields.size(); ++i) {
    const lake::PartitionField& pf = spec.fields[i];
    const lake::NestedField* source = schema_.FindField(pf.source_id);
    if (source == nullptr) continue;
    Result<Type> result = pf.transform.ResultType(source->type);
    if (!result.ok()) continue;
    const lake::FieldSummary& s = m.partitions[i];
    std::optional<Value> lo, hi;
    if (s.lower_bound) lo = BoundValue(*result, *s.lower_bound);
    if (s.upper_bound) hi = BoundValue(*result, *s.upper_bound);
    // A summary with bounds has non-null values; one without says nothing about them.
    std::optional<bool> has_value;
    if (s.lower_bound || s.upper_bound) has_value = true;
    AddPartitionEvidence(pf, lo, hi, s.contains_null, has_value, s.contains_nan, &ev);
  }
  return ev;
}

Evidence Pruner::FromPartition(const lake::ManifestEntry& e,
                               const lake::PartitionSpec& spec) const {
  Evidence ev;
  for (const lake::PartitionField& pf : spec.fields) {
    const lake::NestedField* source = schema_.FindField(pf.source_id);
    if (source == nullptr) continue;
    Result<Type> result = pf.transform.ResultType(source->type);
    if (!result.ok()) continue;
    const lake::avro::Datum* d = e.file.partition.Find(pf.name);
    if (d == nullptr) continue;
    if (d->is_null()) {
      AddPartitionEvidence(pf, std::nullopt, std::nullopt, true, false, false, &ev);
      continue;
    }
    std::optional<Value> v = PartitionValue(*d, *result);
    if (!v) continue;
    if (std::optional<double> f = FloatingOf(*v); f && std::isnan(*f)) {
      // Identity of a float column: every row is NaN, which no range holds.
      AddPartitionEvidence(pf, std::nullopt, std::nullopt, false, true, true, &ev);
      continue;
    }
    AddPartitionEvidence(pf, v, v, false, true, false, &ev);
  }
  return ev;
}

Evidence Pruner::FromStats(const lake::ManifestEntry& e) const {
  Evidence ev;
  const lake::DataFile& f = e.file;
  for (int32_t id : fields_) {
    const lake::NestedField* field = schema_.FindField(id);
    if (field == nullptr) continue;
    Range r;
    if (auto it = f.lower_bounds.find(id); it != f.lower_bounds.end())
      r.lo = BoundValue(field->type, it->second);
    if (auto it = f.upper_bounds.find(id); it != f.upper_bounds.end())
      r.hi = BoundValue(field->type, it->second);
    auto nulls = f.null_value_counts.find(id);
    auto values = f.value_counts.find(id);
    if (nulls != f.null_value_counts.end()) {
      r.may_null = nulls->second > 0;
      if (values != f.value_counts.end()) r.may_value = nulls->second < values->second;
    }
    if (auto it = f.nan_value_counts.find(id); it != f.nan_value_counts.end())
      r.may_nan = it->second > 0;
    ev.ranges.emplace(id, r);
  }
  return ev;
}

}  // namespace sluice::query::pruning
