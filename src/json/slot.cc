// The column plan: which Kind each DuckDB type decodes as, and the Slot tree.
#include "json/slot.h"

#include <algorithm>

#include "base/status.h"

namespace sluice::json {

using duck::TypeId;

bool IsDirect(const duck::LogicalType& t) {
  switch (t.id()) {
    case TypeId::kBoolean:
    case TypeId::kTinyInt:
    case TypeId::kSmallInt:
    case TypeId::kInteger:
    case TypeId::kBigInt:
    case TypeId::kUTinyInt:
    case TypeId::kUSmallInt:
    case TypeId::kUInteger:
    case TypeId::kUBigInt:
    case TypeId::kFloat:
    case TypeId::kDouble:
    case TypeId::kVarchar:
    case TypeId::kBlob:
    case TypeId::kDate:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
    case TypeId::kTimestampS:
    case TypeId::kTimestampMs:
    case TypeId::kTimestampNs:
      return true;
    case TypeId::kList:
      return IsDirect(t.ListChild());
    case TypeId::kStruct:
      for (size_t i = 0; i < t.StructFieldCount(); ++i) {
        if (!IsDirect(t.StructFieldType(i))) return false;
      }
      return t.StructFieldCount() > 0;
    default:
      return false;
  }
}

Slot BuildSlot(const duck::LogicalType& t, std::string name, std::string type_name) {
  Slot s;
  s.name = std::move(name);
  s.type_name = std::move(type_name);
  if (!IsDirect(t)) {
    s.kind = Kind::kStaged;
    return s;
  }
  switch (t.id()) {
    case TypeId::kBoolean:
      s.kind = Kind::kBool;
      break;
    case TypeId::kTinyInt:
      s.kind = Kind::kI8;
      break;
    case TypeId::kSmallInt:
      s.kind = Kind::kI16;
      break;
    case TypeId::kInteger:
      s.kind = Kind::kI32;
      break;
    case TypeId::kBigInt:
      s.kind = Kind::kI64;
      break;
    case TypeId::kUTinyInt:
      s.kind = Kind::kU8;
      break;
    case TypeId::kUSmallInt:
      s.kind = Kind::kU16;
      break;
    case TypeId::kUInteger:
      s.kind = Kind::kU32;
      break;
    case TypeId::kUBigInt:
      s.kind = Kind::kU64;
      break;
    case TypeId::kFloat:
      s.kind = Kind::kFloat;
      break;
    case TypeId::kDouble:
      s.kind = Kind::kDouble;
      break;
    case TypeId::kVarchar:
      s.kind = t.alias() == "JSON" ? Kind::kJson : Kind::kVarchar;
      break;
    case TypeId::kBlob:
      s.kind = Kind::kBlob;
      break;
    case TypeId::kDate:
      s.kind = Kind::kDate;
      break;
    case TypeId::kTimestamp:
      s.kind = Kind::kTimestamp;
      break;
    case TypeId::kTimestampTz:
      s.kind = Kind::kTimestampTz;
      break;
    case TypeId::kTimestampS:
      s.kind = Kind::kTimestampS;
      break;
    case TypeId::kTimestampMs:
      s.kind = Kind::kTimestampMs;
      break;
    case TypeId::kTimestampNs:
      s.kind = Kind::kTimestampNs;
      break;
    case TypeId::kList: {
      s.kind = Kind::kList;
      duck::LogicalType child = t.ListChild();
      s.children.push_back(BuildSlot(child, "", child.ToSql()));
      break;
    }
    case TypeId::kStruct: {
      s.kind = Kind::kStruct;
      for (size_t i = 0; i < t.StructFieldCount(); ++i) {
        duck::LogicalType f = t.StructFieldType(i);
        s.children.push_back(BuildSlot(f, t.StructFieldName(i), f.ToSql()));
      }
      break;
    }
    default:
      SLUICE_ASSERT(false);
  }
  return s;
}

void IndexFields(std::vector<Slot>& fields, std::vector<std::pair<std::string, uint32_t>>* sorted) {
  sorted->clear();
  if (fields.size() <= kLinearLookupMax) return;
  for (uint32_t i = 0; i < fields.size(); ++i) sorted->emplace_back(fields[i].name, i);
  std::sort(sorted->begin(), sorted->end());
}

void IndexTree(Slot& s) {
  for (Slot& c : s.children) IndexTree(c);
  if (s.kind == Kind::kStruct) IndexFields(s.children, &s.sorted);
}

}  // namespace sluice::json
