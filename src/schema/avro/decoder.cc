// MakeRowDecoder: Avro binary payloads straight into DuckDB vectors. A program of Steps
// (one per writer value, compiled once per writer schema and column list) is walked per
// message over a bounds-checked cursor; no value object is built in between. Lists grow in
// place and are rolled back on a failed row, as in src/json/filler.cc.
#include <duckdb.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/utf8.h"
#include "lake/avro.h"
#include "schema/avro/avro_format.h"
#include "schema/avro/avro_types.h"
#include "schema/avro/binary_reader.h"

namespace sluice::schema::avro {

using duck::LogicalType;
using duck::TypeId;
using duck::Vector;
using lake::avro::Field;

namespace {

// Deepest nesting of values the decoder follows (records, arrays, maps, unions).
constexpr int kMaxDepth = 64;
// Longest decimal (in bytes) written as text into a VARCHAR column.
constexpr size_t kMaxDecimalTextBytes = 512;

// How a value is stored: the physical layout of the target vector.
enum class Store : uint8_t {
  kBool,
  kI8,
  kI16,
  kI32,
  kI64,
  kU8,
  kU16,
  kU32,
  kU64,
  kI128,
  kU128,
  kFloat,
  kDouble,
  kVarchar,
  kBlob,
  kDecimal16,
  kDecimal32,
  kDecimal64,
  kDecimal128,
  kDate,
  kTime,
  kTimestamp,
  kUuid,
  kInterval,
  kEnum8,
  kEnum16,
  kEnum32,
  kStruct,
  kList,
  kMap,
  kUnion,
  kOther,  // a type nothing converts into
};

// One column, struct field, list element, map entry or union member of the target, and
// where it is written in the bound chunk.
struct Slot {
  Store store = Store::kOther;
  std::string type_sql;            // for messages
  std::vector<Slot> children;      // struct fields; list element; map entry; union tag+members
  std::vector<std::string> names;  // struct field / union member names
  std::vector<std::string> enum_values;  // ENUM dictionary
  int decimal_width = 0;
  int decimal_scale = 0;
  int64_t units_per_second = 0;  // TIME and TIMESTAMP*: the unit of the stored integer

  // Bound per chunk.
  Vector vec;
  void* data = nullptr;
  uint64_t* validity = nullptr;
  uint64_t list_size = 0;
  uint64_t list_capacity = 0;

  template <typename T>
  T* at() const {
    return static_cast<T*>(data);
  }
};

Slot BuildSlot(const LogicalType& t) {
  Slot s;
  s.type_sql = TypeSql(t);
  switch (t.id()) {
    case TypeId::kBoolean:
      s.store = Store::kBool;
      break;
    case TypeId::kTinyInt:
      s.store = Store::kI8;
      break;
    case TypeId::kSmallInt:
      s.store = Store::kI16;
      break;
    case TypeId::kInteger:
      s.store = Store::kI32;
      break;
    case TypeId::kBigInt:
      s.store = Store::kI64;
      break;
    case TypeId::kUTinyInt:
      s.store = Store::kU8;
      break;
    case TypeId::kUSmallInt:
      s.store = Store::kU16;
      break;
    case TypeId::kUInteger:
      s.store = Store::kU32;
      break;
    case TypeId::kUBigInt:
      s.store = Store::kU64;
      break;
    case TypeId::kHugeInt:
      s.store = Store::kI128;
      break;
    case TypeId::kUHugeInt:
      s.store = Store::kU128;
      break;
    case TypeId::kFloat:
      s.store = Store::kFloat;
      break;
    case TypeId::kDouble:
      s.store = Store::kDouble;
      break;
    case TypeId::kVarchar:
      s.store = Store::kVarchar;
      break;
    case TypeId::kBlob:
      s.store = Store::kBlob;
      break;
    case TypeId::kDecimal:
      s.decimal_width = t.DecimalWidth();
      s.decimal_scale = t.DecimalScale();
      switch (t.DecimalInternalType()) {
        case TypeId::kSmallInt:
          s.store = Store::kDecimal16;
          break;
        case TypeId::kInteger:
          s.store = Store::kDecimal32;
          break;
        case TypeId::kBigInt:
          s.store = Store::kDecimal64;
          break;
        default:
          s.store = Store::kDecimal128;
          break;
      }
      break;
    case TypeId::kDate:
      s.store = Store::kDate;
      break;
    case TypeId::kTime:
      s.store = Store::kTime;
      s.units_per_second = 1000000;
      break;
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      s.store = Store::kTimestamp;
      s.units_per_second = 1000000;
      break;
    case TypeId::kTimestampS:
      s.store = Store::kTimestamp;
      s.units_per_second = 1;
      break;
    case TypeId::kTimestampMs:
      s.store = Store::kTimestamp;
      s.units_per_second = 1000;
      break;
    case TypeId::kTimestampNs:
      s.store = Store::kTimestamp;
      s.units_per_second = 1000000000;
      break;
    case TypeId::kUuid:
      s.store = Store::kUuid;
      break;
    case TypeId::kInterval:
      s.store = Store::kInterval;
      break;
    case TypeId::kEnum:
      switch (t.EnumInternalType()) {
        case TypeId::kUTinyInt:
          s.store = Store::kEnum8;
          break;
        case TypeId::kUSmallInt:
          s.store = Store::kEnum16;
          break;
        default:
          s.store = Store::kEnum32;
          break;
      }
      for (uint64_t i = 0; i < t.EnumSize(); ++i) s.enum_values.push_back(t.EnumValue(i));
      break;
    case TypeId::kStruct:
      s.store = Store::kStruct;
      for (size_t i = 0; i < t.StructFieldCount(); ++i) {
        s.names.push_back(t.StructFieldName(i));
        s.children.push_back(BuildSlot(t.StructFieldType(i)));
      }
      break;
    case TypeId::kList:
      s.store = Store::kList;
      s.children.push_back(BuildSlot(t.ListChild()));
      break;
    case TypeId::kMap: {
      s.store = Store::kMap;
      Slot entry;
      entry.store = Store::kStruct;
      entry.names = {"key", "value"};
      entry.children.push_back(BuildSlot(t.MapKey()));
      entry.children.push_back(BuildSlot(t.MapValue()));
      s.children.push_back(std::move(entry));
      break;
    }
    case TypeId::kUnion: {
      s.store = Store::kUnion;
      Slot tag;
      tag.store = Store::kU8;
      s.children.push_back(std::move(tag));
      for (size_t i = 0; i < UnionMemberCount(t); ++i) {
        s.names.push_back(UnionMemberName(t, i));
        s.children.push_back(BuildSlot(UnionMemberType(t, i)));
      }
      break;
    }
    default:
      s.store = Store::kOther;
      break;
  }
  return s;
}

void ResetLists(Slot& s) {
  s.list_size = 0;
  s.list_capacity = 0;
  for (Slot& c : s.children) ResetLists(c);
}

void Refresh(Slot& s, Vector v) {
  s.vec = v;
  s.validity = v.validity();
  switch (s.store) {
    case Store::kStruct:
    case Store::kUnion:
      for (size_t i = 0; i < s.children.size(); ++i) Refresh(s.children[i], v.StructField(i));
      s.data = nullptr;
      break;
    case Store::kVarchar:
    case Store::kBlob:
    case Store::kOther:
      s.data = nullptr;
      break;
    default:
      s.data = v.RawData();
      break;
  }
}

void CollectLists(Slot& s, std::vector<Slot*>* out) {
  if (s.store == Store::kList || s.store == Store::kMap) out->push_back(&s);
  for (Slot& c : s.children) CollectLists(c, out);
}

// A NULL cell; struct and union children too, so that DuckDB sees a consistent row.
void SetNullDeep(Slot& s, uint64_t row) {
  Vector::SetInvalid(s.validity, row);
  if (s.store == Store::kStruct || s.store == Store::kUnion) {
    for (Slot& c : s.children) SetNullDeep(c, row);
  }
}

enum class Read : uint8_t {
  kSkip,  // walked by the writer's schema, stored nowhere
  kNull,
  kBoolean,
  kInt,
  kLong,
  kFloat,
  kDouble,
  kBytes,
  kString,
  kFixed,
  kEnum,
  kRecord,
  kArray,
  kMap,
  kUnion,
  kMember,  // a non-union writer value into one member of a UNION column
};

struct Step;

// A target field the writer lacks: the reader's default (its binary encoding, run through
// `step`), or NULL.
struct Fill {
  Slot* slot = nullptr;
  std::string bytes;
  std::vector<Step> step;  // empty: NULL
};

struct Step {
  Read read = Read::kSkip;
  Store store = Store::kOther;
  Logical logical = Logical::kNone;
  Slot* slot = nullptr;
  const Node* node = nullptr;  // the writer's type
  std::string name;            // record fields: the field's name, for messages
  int64_t mul = 1;             // integers: value * mul / div (time units)
  int64_t div = 1;
  __int128 decimal_mul = 1;            // 10^(column scale - value scale)
  int decimal_scale = 0;               // bytes/fixed decimals: the writer's scale
  int member = -1;                     // kMember: the UNION member written
  std::vector<int> branch_member;      // kUnion into a UNION column: per branch, -1 = null
  std::vector<int64_t> enum_map;       // kEnum: per writer symbol an output index, -1 none
  std::vector<std::string> enum_text;  // kEnum into VARCHAR: the output symbols
  std::vector<Step> children;          // record fields, array item, map value, union branches
  std::vector<Fill> fills;             // record: target fields the writer lacks
};

std::vector<std::string> ReaderAliasesOf(const lake::avro::Attributes& attrs) {
  std::vector<std::string> out;
  const std::string* text = lake::avro::FindAttribute(attrs, "aliases");
  if (text == nullptr) return out;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& a : j) {
    if (a.is_string()) out.push_back(a.get<std::string>());
  }
  return out;
}

int FieldByName(const Node& record, std::string_view name) {
  int i = record.FieldIndex(name);
  if (i >= 0) return i;
  for (size_t k = 0; k < record.fields.size(); ++k) {
    if (EqualsIgnoreCase(record.fields[k].name, name)) return static_cast<int>(k);
  }
  return -1;
}

int NameIndex(const std::vector<std::string>& names, std::string_view name) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (EqualsIgnoreCase(names[i], name)) return static_cast<int>(i);
  }
  return -1;
}

// The reader's type for writer type `w` inside reader type `r` (a union's matching branch).
const Node* MatchReader(const Node* r, const Node& w) {
  if (r == nullptr) return nullptr;
  auto same = [&](const Node* x) {
    return x->type == w.type && (!w.is_named() || SimpleName(*x) == SimpleName(w));
  };
  if (r->type == Type::kUnion && w.type != Type::kUnion) {
    for (const Node* b : r->branches) {
      if (same(b)) return b;
    }
    return nullptr;
  }
  return same(r) || r->type == Type::kUnion ? r : nullptr;
}

bool IsIntegerStore(Store s) {
  switch (s) {
    case Store::kI8:
    case Store::kI16:
    case Store::kI32:
    case Store::kI64:
    case Store::kU8:
    case Store::kU16:
    case Store::kU32:
    case Store::kU64:
    case Store::kI128:
    case Store::kU128:
      return true;
    default:
      return false;
  }
}

bool IsDecimalStore(Store s) {
  return s == Store::kDecimal16 || s == Store::kDecimal32 || s == Store::kDecimal64 ||
         s == Store::kDecimal128;
}

__int128 Pow10(int n) {
  __int128 v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

// Builds the program for one writer schema and one list of target columns.
class Compiler {
 public:
  Status Top(const Node& w, const Node* r, std::vector<Slot>& slots,
             std::span<const Column> columns, Step* top) {
    top->read = Read::kRecord;
    top->node = &w;
    std::vector<Slot*> targets;
    std::vector<std::string> names;
    for (size_t i = 0; i < slots.size(); ++i) {
      targets.push_back(&slots[i]);
      names.push_back(columns[i].name);
    }
    if (w.type == Type::kRecord) {
      return PlanRecord(w, r != nullptr && r->type == Type::kRecord ? r : nullptr, targets, names,
                        "", top);
    }
    // A non-record schema fills the column `value`, or the only column.
    int target = NameIndex(names, "value");
    if (target < 0 && names.size() == 1) target = 0;
    for (size_t i = 0; i < targets.size(); ++i) {
      if (static_cast<int>(i) != target) top->fills.push_back({targets[i], "", {}});
    }
    if (target >= 0) {
      ASSIGN_OR_RETURN(Step s, Compile(w, r, targets[target], names[target]));
      top->children.push_back(std::move(s));
    } else {
      top->children.push_back(Skip(w));
    }
    return Status::OK();
  }

 private:
  static Step Skip(const Node& w) {
    Step s;
    s.read = Read::kSkip;
    s.node = &w;
    return s;
  }

  static Status Mismatch(const Node& w, const Slot& slot, const std::string& path) {
    return InvalidArgumentError("field '{}': Avro {} cannot go into a {} column", path, Describe(w),
                                slot.type_sql);
  }

  Status PlanRecord(const Node& w, const Node* r, const std::vector<Slot*>& targets,
                    const std::vector<std::string>& names, const std::string& path, Step* out) {
    std::vector<int> writer_target(w.fields.size(), -1);
    std::vector<const Field*> reader_field(targets.size(), nullptr);
    auto sub = [&](std::string_view name) {
      return path.empty() ? std::string(name) : path + "." + std::string(name);
    };
    for (size_t t = 0; t < targets.size(); ++t) {
      const Field* rf = nullptr;
      if (r != nullptr) {
        int ri = FieldByName(*r, names[t]);
        if (ri >= 0) rf = &r->fields[static_cast<size_t>(ri)];
      }
      int wi = -1;
      if (rf != nullptr) {
        wi = w.FieldIndex(rf->name);
        for (const std::string& a : ReaderAliasesOf(rf->attributes)) {
          if (wi < 0) wi = w.FieldIndex(a);
        }
      }
      if (wi < 0) wi = FieldByName(w, names[t]);
      reader_field[t] = rf;
      if (wi >= 0 && writer_target[static_cast<size_t>(wi)] < 0) {
        writer_target[static_cast<size_t>(wi)] = static_cast<int>(t);
        continue;
      }
      Fill fill;
      fill.slot = targets[t];
      if (rf != nullptr && rf->default_value.has_value()) {
        RETURN_IF_ERROR(lake::avro::Encode(*rf->type, *rf->default_value, &fill.bytes));
        ASSIGN_OR_RETURN(Step s, Compile(*rf->type, rf->type, targets[t], sub(names[t])));
        fill.step.push_back(std::move(s));
      }
      out->fills.push_back(std::move(fill));
    }
    for (size_t i = 0; i < w.fields.size(); ++i) {
      const Field& wf = w.fields[i];
      int t = writer_target[i];
      Step s;
      if (t < 0) {
        s = Skip(*wf.type);
      } else {
        const Field* rf = reader_field[static_cast<size_t>(t)];
        ASSIGN_OR_RETURN(s, Compile(*wf.type, rf != nullptr ? rf->type : nullptr,
                                    targets[static_cast<size_t>(t)], sub(wf.name)));
      }
      s.name = wf.name;
      out->children.push_back(std::move(s));
    }
    return Status::OK();
  }

  Result<Step> Compile(const Node& w, const Node* r, Slot* slot, const std::string& path) {
    if (++depth_ > kMaxTypeDepth + 8) {
      return InvalidArgumentError("field '{}': nested too deeply", path);
    }
    auto result = CompileValue(w, r, slot, path);
    --depth_;
    return result;
  }

  Result<Step> CompileValue(const Node& w, const Node* r, Slot* slot, const std::string& path) {
    if (slot == nullptr) return Skip(w);
    Step s;
    s.node = &w;
    s.slot = slot;
    s.store = slot->store;
    if (w.type == Type::kNull) {
      s.read = Read::kNull;
      return s;
    }
    if (w.type == Type::kUnion) return CompileUnion(w, r, slot, path);
    if (slot->store == Store::kUnion) {
      // One writer type into the UNION member of its name (or the first that takes it).
      std::vector<std::string> member_names(slot->names);
      int m = NameIndex(member_names, UnionTags({&w})[0]);
      std::vector<int> order;
      if (m >= 0) order.push_back(m);
      for (int i = 0; i < static_cast<int>(member_names.size()); ++i) {
        if (i != m) order.push_back(i);
      }
      for (int i : order) {
        auto child = Compile(w, r, &slot->children[static_cast<size_t>(i) + 1], path);
        if (!child.ok()) continue;
        s.read = Read::kMember;
        s.member = i;
        s.children.push_back(std::move(*child));
        return s;
      }
      return Mismatch(w, *slot, path);
    }
    LogicalInfo l = LogicalOf(w);
    s.logical = l.kind;
    const Store st = slot->store;
    switch (w.type) {
      case Type::kBoolean:
        s.read = Read::kBoolean;
        if (st == Store::kBool || st == Store::kVarchar) return s;
        break;
      case Type::kInt:
      case Type::kLong:
        s.read = w.type == Type::kInt ? Read::kInt : Read::kLong;
        if (IntegerTarget(&s, l, *slot)) return s;
        break;
      case Type::kFloat:
      case Type::kDouble:
        s.read = w.type == Type::kFloat ? Read::kFloat : Read::kDouble;
        if (st == Store::kFloat || st == Store::kDouble || st == Store::kVarchar) return s;
        break;
      case Type::kString:
        s.read = Read::kString;
        if (st == Store::kVarchar || st == Store::kBlob || st == Store::kUuid) return s;
        break;
      case Type::kBytes:
      case Type::kFixed:
        s.read = w.type == Type::kBytes ? Read::kBytes : Read::kFixed;
        if (l.kind == Logical::kDecimal) {
          s.decimal_scale = l.scale;
          if (st == Store::kVarchar || st == Store::kDouble) return s;
          if (IsDecimalStore(st) && slot->decimal_scale >= l.scale) {
            s.decimal_mul = Pow10(slot->decimal_scale - l.scale);
            return s;
          }
          break;
        }
        if (l.kind == Logical::kDuration && st == Store::kInterval) return s;
        if (l.kind == Logical::kUuid && (st == Store::kUuid || st == Store::kVarchar)) return s;
        if (st == Store::kBlob || st == Store::kVarchar) return s;
        break;
      case Type::kEnum:
        s.read = Read::kEnum;
        if (st == Store::kVarchar || st == Store::kEnum8 || st == Store::kEnum16 ||
            st == Store::kEnum32) {
          PlanEnum(w, MatchReader(r, w), *slot, &s);
          return s;
        }
        break;
      case Type::kRecord:
        s.read = Read::kRecord;
        if (st == Store::kStruct) {
          if (std::find(stack_.begin(), stack_.end(), &w) != stack_.end()) {
            return InvalidArgumentError("field '{}': record {} contains itself", path, w.full_name);
          }
          stack_.push_back(&w);
          std::vector<Slot*> targets;
          for (Slot& c : slot->children) targets.push_back(&c);
          const Node* rr = MatchReader(r, w);
          Status planned = PlanRecord(w, rr != nullptr && rr->type == Type::kRecord ? rr : nullptr,
                                      targets, slot->names, path, &s);
          stack_.pop_back();
          RETURN_IF_ERROR(planned);
          return s;
        }
        break;
      case Type::kArray:
        s.read = Read::kArray;
        if (st == Store::kList) {
          const Node* rr = MatchReader(r, w);
          ASSIGN_OR_RETURN(Step item, Compile(*w.items, rr != nullptr ? rr->items : nullptr,
                                              &slot->children[0], path + "[]"));
          s.children.push_back(std::move(item));
          return s;
        }
        break;
      case Type::kMap:
        s.read = Read::kMap;
        if (st == Store::kMap && slot->children[0].children[0].store == Store::kVarchar) {
          const Node* rr = MatchReader(r, w);
          ASSIGN_OR_RETURN(Step value, Compile(*w.values, rr != nullptr ? rr->values : nullptr,
                                               &slot->children[0].children[1], path + "{}"));
          s.children.push_back(std::move(value));
          return s;
        }
        break;
      default:
        break;
    }
    return Mismatch(w, *slot, path);
  }

  Result<Step> CompileUnion(const Node& w, const Node* r, Slot* slot, const std::string& path) {
    Step s;
    s.read = Read::kUnion;
    s.node = &w;
    s.slot = slot;
    s.store = slot->store;
    std::vector<const Node*> non_null = NonNullBranches(w);
    std::vector<std::string> tags = UnionTags(non_null);
    for (const Node* b : w.branches) {
      if (b->type == Type::kNull) {
        Step n;
        n.read = Read::kNull;
        n.node = b;
        n.slot = slot;
        s.children.push_back(std::move(n));
        s.branch_member.push_back(-1);
        continue;
      }
      const Node* rb = MatchReader(r, *b);
      if (slot->store == Store::kUnion) {
        size_t k =
            static_cast<size_t>(std::find(non_null.begin(), non_null.end(), b) - non_null.begin());
        int m = NameIndex(slot->names, tags[k]);
        if (m < 0) {
          return InvalidArgumentError("field '{}': the {} column has no member '{}' for {}", path,
                                      slot->type_sql, tags[k], Describe(*b));
        }
        ASSIGN_OR_RETURN(Step c,
                         Compile(*b, rb, &slot->children[static_cast<size_t>(m) + 1], path));
        s.children.push_back(std::move(c));
        s.branch_member.push_back(m);
      } else {
        ASSIGN_OR_RETURN(Step c, Compile(*b, rb, slot, path));
        s.children.push_back(std::move(c));
        s.branch_member.push_back(-1);
      }
    }
    return s;
  }

  // Integers (and the logical types on them) into `slot`: sets the unit conversion.
  static bool IntegerTarget(Step* s, LogicalInfo l, const Slot& slot) {
    const Store st = slot.store;
    if (IsIntegerStore(st)) return true;  // the raw value, logical type or not
    auto scale_units = [&](int64_t from, int64_t to) {
      if (from <= to) {
        s->mul = to / from;
      } else {
        s->div = from / to;
      }
    };
    switch (l.kind) {
      case Logical::kNone:
        if (st == Store::kFloat || st == Store::kDouble || st == Store::kVarchar) return true;
        if (IsDecimalStore(st)) {
          s->decimal_mul = Pow10(slot.decimal_scale);
          return true;
        }
        return false;
      case Logical::kDate:
        if (st == Store::kDate) return true;
        if (st == Store::kTimestamp) {
          s->mul = 86400 * slot.units_per_second;
          return true;
        }
        return false;
      case Logical::kTimeMillis:
      case Logical::kTimeMicros:
        if (st != Store::kTime) return false;
        scale_units(UnitsPerSecond(l.kind), slot.units_per_second);
        return true;
      case Logical::kTimestampMillis:
      case Logical::kTimestampMicros:
      case Logical::kTimestampNanos:
      case Logical::kLocalTimestampMillis:
      case Logical::kLocalTimestampMicros:
      case Logical::kLocalTimestampNanos:
        if (st != Store::kTimestamp) return false;
        scale_units(UnitsPerSecond(l.kind), slot.units_per_second);
        return true;
      default:
        return false;
    }
  }

  // Enum symbols: the writer's index to the symbol stored (the reader's default for a
  // symbol the reader lacks), as text or as the index of a DuckDB ENUM value.
  static void PlanEnum(const Node& w, const Node* r, const Slot& slot, Step* s) {
    const bool resolve = r != nullptr && r->type == Type::kEnum;
    for (const std::string& sym : w.symbols) {
      std::string out = sym;
      if (resolve && std::find(r->symbols.begin(), r->symbols.end(), sym) == r->symbols.end()) {
        out = r->enum_default;  // "" when none: the row fails
      }
      int64_t index = -1;
      if (!out.empty()) {
        if (slot.store == Store::kVarchar) {
          index = static_cast<int64_t>(s->enum_text.size());
          s->enum_text.push_back(out);
        } else {
          auto it = std::find(slot.enum_values.begin(), slot.enum_values.end(), out);
          if (it != slot.enum_values.end()) index = it - slot.enum_values.begin();
        }
      }
      s->enum_map.push_back(index);
    }
  }

  std::vector<const Node*> stack_;
  int depth_ = 0;
};

// ---- the decoder ----

struct Hugeint {
  uint64_t lower;
  int64_t upper;
};
static_assert(sizeof(Hugeint) == sizeof(duckdb_hugeint));

struct Interval {
  int32_t months;
  int32_t days;
  int64_t micros;
};
static_assert(sizeof(Interval) == sizeof(duckdb_interval));

Hugeint ToHugeint(__int128 v) {
  auto u = static_cast<unsigned __int128>(v);
  return {static_cast<uint64_t>(u), static_cast<int64_t>(static_cast<uint64_t>(u >> 64))};
}

// ASCII runs 8 bytes at a time, the rest by the exact check.
bool Utf8(std::string_view s) {
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if ((w & 0x8080808080808080ull) != 0) return IsValidUtf8(s.substr(i));
  }
  for (; i < s.size(); ++i) {
    if (static_cast<unsigned char>(s[i]) >= 0x80) return IsValidUtf8(s.substr(i));
  }
  return true;
}

std::string Int128Text(__int128 v, int scale) {
  bool neg = v < 0;
  auto u = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string digits;
  do {
    digits.push_back(static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  } while (u != 0);
  while (static_cast<int>(digits.size()) <= scale) digits.push_back('0');
  std::string out = neg ? "-" : "";
  for (size_t i = digits.size(); i-- > 0;) {
    out.push_back(digits[i]);
    if (scale > 0 && i == static_cast<size_t>(scale)) out.push_back('.');
  }
  return out;
}

// The text of a big-endian two's complement integer of any length, with `scale` digits
// after the point.
std::string BigDecimalText(std::string_view bytes, int scale) {
  std::vector<uint8_t> mag(bytes.begin(), bytes.end());
  bool neg = !mag.empty() && (mag[0] & 0x80) != 0;
  if (neg) {  // two's complement: invert and add one
    for (uint8_t& b : mag) b = static_cast<uint8_t>(~b);
    for (size_t i = mag.size(); i-- > 0;) {
      if (++mag[i] != 0) break;
    }
  }
  std::string digits;
  size_t start = 0;
  while (start < mag.size()) {
    unsigned rem = 0;
    for (size_t i = start; i < mag.size(); ++i) {
      unsigned cur = (rem << 8) | mag[i];
      mag[i] = static_cast<uint8_t>(cur / 10);
      rem = cur % 10;
    }
    digits.push_back(static_cast<char>('0' + rem));
    while (start < mag.size() && mag[start] == 0) ++start;
  }
  if (digits.empty()) digits = "0";
  while (static_cast<int>(digits.size()) <= scale) digits.push_back('0');
  std::string out = neg ? "-" : "";
  for (size_t i = digits.size(); i-- > 0;) {
    out.push_back(digits[i]);
    if (scale > 0 && i == static_cast<size_t>(scale)) out.push_back('.');
  }
  return out;
}

// A big-endian two's complement integer into 128 bits; false if it does not fit.
bool BigEndianInt128(std::string_view b, __int128* out) {
  size_t n = b.size();
  if (n == 0) {
    *out = 0;
    return true;
  }
  const bool neg = (static_cast<uint8_t>(b[0]) & 0x80) != 0;
  if (n > 16) {
    const uint8_t sign = neg ? 0xFF : 0x00;
    for (size_t i = 0; i < n - 16; ++i) {
      if (static_cast<uint8_t>(b[i]) != sign) return false;
    }
    if (((static_cast<uint8_t>(b[n - 16]) & 0x80) != 0) != neg) return false;
    b = b.substr(n - 16);
  }
  unsigned __int128 u = neg ? ~static_cast<unsigned __int128>(0) : 0;
  for (char c : b) u = (u << 8) | static_cast<uint8_t>(c);
  *out = static_cast<__int128>(u);
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (or the 32 digits alone) into 16 bytes.
bool ParseUuid(std::string_view s, uint8_t out[16]) {
  if (s.size() != 36 && s.size() != 32) return false;
  size_t k = 0;
  for (size_t i = 0; i < s.size();) {
    if (s.size() == 36 && (i == 8 || i == 13 || i == 18 || i == 23)) {
      if (s[i] != '-') return false;
      ++i;
      continue;
    }
    int hi = HexValue(s[i]), lo = i + 1 < s.size() ? HexValue(s[i + 1]) : -1;
    if (hi < 0 || lo < 0) return false;
    out[k++] = static_cast<uint8_t>(hi << 4 | lo);
    i += 2;
  }
  return k == 16;
}

std::string UuidText(const uint8_t b[16]) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(kHex[b[i] >> 4]);
    out.push_back(kHex[b[i] & 15]);
  }
  return out;
}

// DuckDB stores a UUID as a hugeint with the top bit flipped (so that it sorts as text).
Hugeint UuidHugeint(const uint8_t b[16]) {
  uint64_t hi = 0, lo = 0;
  for (int i = 0; i < 8; ++i) hi = hi << 8 | b[i];
  for (int i = 8; i < 16; ++i) lo = lo << 8 | b[i];
  return {lo, static_cast<int64_t>(hi ^ (uint64_t{1} << 63))};
}

uint32_t LittleEndian32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(p[i]);
  return v;
}

// Reads through BinaryReader (its p_, end_): the calls inline, and fail through FailAt.
class AvroRowDecoder final : public RowDecoder, private BinaryReader<AvroRowDecoder> {
  friend class BinaryReader<AvroRowDecoder>;

 public:
  AvroRowDecoder(std::vector<Slot> slots, Step top)
      : slots_(std::move(slots)), top_(std::move(top)) {
    for (Slot& s : slots_) CollectLists(s, &lists_);
    marks_.resize(lists_.size());
  }
  // Steps point into slots_: neither is moved after construction.
  static std::unique_ptr<AvroRowDecoder> Make(std::vector<Slot> slots) {
    return std::unique_ptr<AvroRowDecoder>(new AvroRowDecoder(std::move(slots), Step{}));
  }
  std::vector<Slot>& slots() { return slots_; }
  Step& top() { return top_; }

  void BindVectors(std::span<const duck::Vector> columns) override {
    for (size_t i = 0; i < slots_.size(); ++i) {
      ResetLists(slots_[i]);
      Refresh(slots_[i], columns[i]);
    }
  }
  size_t column_count() const override { return slots_.size(); }

  bool Decode(std::string_view payload, uint64_t row, std::string* reason) override {
    begin_ = reinterpret_cast<const uint8_t*>(payload.data());
    Reset(payload);
    for (size_t i = 0; i < lists_.size(); ++i) marks_[i] = lists_[i]->list_size;
    bool ok = RunRecord(top_, row, 0);
    if (ok && p_ != end_) {
      ok = Fail(fmt::format("{} bytes after the end of the value", end_ - p_));
    }
    if (ok) return true;
    for (size_t i = 0; i < lists_.size(); ++i) lists_[i]->list_size = marks_[i];
    for (Slot& s : slots_) SetNullDeep(s, row);
    if (reason != nullptr) *reason = Reason();
    path_.clear();
    return false;
  }

  Status Finish(uint64_t) override {
    for (Slot* l : lists_) {
      if (l->list_capacity > 0) RETURN_IF_ERROR(l->vec.ListSetSize(l->list_size));
    }
    return Status::OK();
  }

 private:
  std::string Reason() const {
    std::string where;
    for (size_t i = path_.size(); i-- > 0;) {
      if (path_[i].empty()) continue;
      if (!where.empty() && path_[i][0] != '[') where += '.';
      where += path_[i];
    }
    if (where.size() > 200) where = where.substr(0, 197) + "...";
    if (where.empty()) return fmt::format("{} at byte {}", problem_, problem_at_);
    return fmt::format("field '{}': {} at byte {}", where, problem_, problem_at_);
  }

  bool Fail(std::string problem) { return FailAt(p_, std::move(problem)); }
  bool FailAt(const uint8_t* at, std::string problem) {
    problem_ = std::move(problem);
    problem_at_ = static_cast<size_t>(at - begin_);
    return false;
  }

  // binary_reader.h's two problems in this decoder's words.
  static std::string FixedPastEndText(int64_t size, int64_t bytes_left) {
    return fmt::format("fixed of {} bytes past the end ({} bytes left)", size, bytes_left);
  }
  static std::string ZeroSizeItemsText(int64_t count) {
    return fmt::format("{} items that take no bytes", count);
  }

  // ---- walking values nothing stores ----

  bool Skip(const Node& n, int depth) {
    if (depth > kMaxDepth) return Fail("values nested too deeply");
    int64_t v;
    std::string_view b;
    switch (n.type) {
      case Type::kNull:
        return true;
      case Type::kBoolean: {
        bool x;
        return ReadBoolean(&x);
      }
      case Type::kInt:
        return ReadInt(&v);
      case Type::kLong:
        return ReadLong(&v);
      case Type::kFloat:
        return ReadFixed(4, &b);
      case Type::kDouble:
        return ReadFixed(8, &b);
      case Type::kBytes:
      case Type::kString:
        return ReadBytes(&b);
      case Type::kFixed:
        return ReadFixed(n.size, &b);
      case Type::kEnum: {
        const uint8_t* start = p_;
        if (!ReadLong(&v)) return false;
        if (v < 0 || v >= static_cast<int64_t>(n.symbols.size())) {
          return FailAt(
              start, fmt::format("enum index {} out of range ({} symbols)", v, n.symbols.size()));
        }
        return true;
      }
      case Type::kRecord:
        for (const Field& f : n.fields) {
          if (!Skip(*f.type, depth + 1)) {
            path_.push_back(f.name);
            return false;
          }
        }
        return true;
      case Type::kArray:
      case Type::kMap: {
        const Node& item = n.type == Type::kArray ? *n.items : *n.values;
        int64_t min_size = item.min_size + (n.type == Type::kMap ? 1 : 0);
        while (true) {
          int64_t count;
          if (!ReadBlockCount(min_size, &count)) return false;
          if (count == 0) return true;
          for (int64_t i = 0; i < count; ++i) {
            if (n.type == Type::kMap && !ReadBytes(&b)) return false;
            if (!Skip(item, depth + 1)) return false;
          }
        }
      }
      case Type::kUnion: {
        const uint8_t* start = p_;
        if (!ReadLong(&v)) return false;
        if (v < 0 || v >= static_cast<int64_t>(n.branches.size())) {
          return FailAt(start, fmt::format("union index {} out of range ({} branches)", v,
                                           n.branches.size()));
        }
        return Skip(*n.branches[static_cast<size_t>(v)], depth + 1);
      }
    }
    return Fail("unknown type");
  }

  // ---- stores ----

  static void Valid(const Slot& s, uint64_t row) { Vector::SetValid(s.validity, row); }

  bool OutOfRange(const Step& s, std::string_view value) {
    return Fail(fmt::format("{} out of range for {}", value, s.slot->type_sql));
  }

  template <typename T>
  bool StoreRanged(const Step& s, int64_t v, uint64_t row) {
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        (std::numeric_limits<T>::max() < std::numeric_limits<int64_t>::max() &&
         v > static_cast<int64_t>(std::numeric_limits<T>::max()))) {
      return OutOfRange(s, std::to_string(v));
    }
    s.slot->at<T>()[row] = static_cast<T>(v);
    Valid(*s.slot, row);
    return true;
  }

  bool StoreDecimal(const Step& s, __int128 v, uint64_t row) {
    const Slot& d = *s.slot;
    if (s.decimal_mul != 1 && __builtin_mul_overflow(v, s.decimal_mul, &v)) {
      return Fail(fmt::format("decimal wider than {}", d.type_sql));
    }
    __int128 limit = Pow10(d.decimal_width);
    if (v >= limit || v <= -limit) return Fail(fmt::format("decimal wider than {}", d.type_sql));
    switch (s.store) {
      case Store::kDecimal16:
        d.at<int16_t>()[row] = static_cast<int16_t>(v);
        break;
      case Store::kDecimal32:
        d.at<int32_t>()[row] = static_cast<int32_t>(v);
        break;
      case Store::kDecimal64:
        d.at<int64_t>()[row] = static_cast<int64_t>(v);
        break;
      default:
        d.at<Hugeint>()[row] = ToHugeint(v);
        break;
    }
    Valid(d, row);
    return true;
  }

  bool StoreInt(const Step& s, int64_t v, uint64_t row) {
    const Slot& d = *s.slot;
    if (s.mul != 1) {
      if (__builtin_mul_overflow(v, s.mul, &v)) return OutOfRange(s, "time value");
    } else if (s.div != 1) {
      int64_t q = v / s.div;
      if (v % s.div != 0 && v < 0) --q;  // floor, so that times before 1970 stay ordered
      v = q;
    }
    switch (s.store) {
      case Store::kI64:
      case Store::kTime:
      case Store::kTimestamp:
        d.at<int64_t>()[row] = v;
        break;
      case Store::kI32:
      case Store::kDate:
        return StoreRanged<int32_t>(s, v, row);
      case Store::kI16:
        return StoreRanged<int16_t>(s, v, row);
      case Store::kI8:
        return StoreRanged<int8_t>(s, v, row);
      case Store::kU8:
        return StoreRanged<uint8_t>(s, v, row);
      case Store::kU16:
        return StoreRanged<uint16_t>(s, v, row);
      case Store::kU32:
        return StoreRanged<uint32_t>(s, v, row);
      case Store::kU64:
        if (v < 0) return OutOfRange(s, std::to_string(v));
        d.at<uint64_t>()[row] = static_cast<uint64_t>(v);
        break;
      case Store::kI128:
        d.at<Hugeint>()[row] = ToHugeint(v);
        break;
      case Store::kU128:
        if (v < 0) return OutOfRange(s, std::to_string(v));
        d.at<Hugeint>()[row] = {static_cast<uint64_t>(v), 0};
        break;
      case Store::kFloat:
        d.at<float>()[row] = static_cast<float>(v);
        break;
      case Store::kDouble:
        d.at<double>()[row] = static_cast<double>(v);
        break;
      case Store::kDecimal16:
      case Store::kDecimal32:
      case Store::kDecimal64:
      case Store::kDecimal128:
        return StoreDecimal(s, v, row);
      case Store::kVarchar: {
        fmt::format_int text(v);
        d.vec.AssignString(row, std::string_view(text.data(), text.size()));
        break;
      }
      default:
        return Fail("internal: no integer store");
    }
    Valid(d, row);
    return true;
  }

  bool StoreFloat(const Step& s, double v, uint64_t row) {
    const Slot& d = *s.slot;
    switch (s.store) {
      case Store::kFloat:
        d.at<float>()[row] = static_cast<float>(v);
        break;
      case Store::kDouble:
        d.at<double>()[row] = v;
        break;
      case Store::kVarchar: {
        std::string text = s.read == Read::kFloat ? fmt::format("{}", static_cast<float>(v))
                                                  : fmt::format("{}", v);
        d.vec.AssignString(row, text);
        break;
      }
      default:
        return Fail("internal: no float store");
    }
    Valid(d, row);
    return true;
  }

  bool StoreBytes(const Step& s, std::string_view b, uint64_t row) {
    const Slot& d = *s.slot;
    switch (s.store) {
      case Store::kVarchar:
        if (s.logical == Logical::kDecimal) {
          __int128 v;
          if (BigEndianInt128(b, &v)) {
            d.vec.AssignString(row, Int128Text(v, s.decimal_scale));
          } else if (b.size() <= kMaxDecimalTextBytes) {
            d.vec.AssignString(row, BigDecimalText(b, s.decimal_scale));
          } else {
            return Fail(fmt::format("decimal of {} bytes is too long", b.size()));
          }
          break;
        }
        if (s.logical == Logical::kUuid && s.read == Read::kFixed) {
          d.vec.AssignString(row, UuidText(reinterpret_cast<const uint8_t*>(b.data())));
          break;
        }
        if (!Utf8(b)) return Fail("invalid UTF-8");
        d.vec.AssignString(row, b);
        break;
      case Store::kBlob:
        d.vec.AssignString(row, b);
        break;
      case Store::kUuid: {
        uint8_t bytes[16];
        if (s.read == Read::kFixed) {
          std::memcpy(bytes, b.data(), 16);
        } else if (!ParseUuid(b, bytes)) {
          return Fail("not a UUID");
        }
        d.at<Hugeint>()[row] = UuidHugeint(bytes);
        break;
      }
      case Store::kInterval: {
        uint32_t months = LittleEndian32(b.data()), days = LittleEndian32(b.data() + 4),
                 millis = LittleEndian32(b.data() + 8);
        if (months > static_cast<uint32_t>(std::numeric_limits<int32_t>::max()) ||
            days > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
          return Fail("duration out of range for INTERVAL");
        }
        d.at<Interval>()[row] = {static_cast<int32_t>(months), static_cast<int32_t>(days),
                                 static_cast<int64_t>(millis) * 1000};
        break;
      }
      case Store::kDouble: {
        __int128 v;
        if (!BigEndianInt128(b, &v)) return Fail("decimal too wide for DOUBLE");
        d.at<double>()[row] = static_cast<double>(v) / static_cast<double>(Pow10(s.decimal_scale));
        break;
      }
      case Store::kDecimal16:
      case Store::kDecimal32:
      case Store::kDecimal64:
      case Store::kDecimal128: {
        __int128 v;
        if (!BigEndianInt128(b, &v)) return Fail(fmt::format("decimal wider than {}", d.type_sql));
        return StoreDecimal(s, v, row);
      }
      default:
        return Fail("internal: no bytes store");
    }
    Valid(d, row);
    return true;
  }

  bool EnsureListRoom(Slot& s, uint64_t index) {
    if (index < s.list_capacity) return true;
    uint64_t cap = std::max<uint64_t>({index + 1, s.list_capacity * 2, 64});
    Status st = s.vec.ListReserve(cap);
    if (!st.ok()) return Fail(st.message());
    s.list_capacity = cap;
    Refresh(s.children[0], s.vec.ListChild());
    return true;
  }

  bool RunRecord(const Step& s, uint64_t row, int depth) {
    for (const Step& c : s.children) {
      if (!Run(c, row, depth + 1)) {
        path_.push_back(c.name);
        return false;
      }
    }
    for (const Fill& f : s.fills) {
      if (f.step.empty()) {
        SetNullDeep(*f.slot, row);
        continue;
      }
      const uint8_t *b = begin_, *p = p_, *e = end_;
      begin_ = p_ = reinterpret_cast<const uint8_t*>(f.bytes.data());
      end_ = p_ + f.bytes.size();
      bool ok = Run(f.step[0], row, depth + 1);
      begin_ = b, p_ = p, end_ = e;
      if (!ok) {
        path_.push_back(f.step[0].name.empty() ? "(default)" : f.step[0].name);
        return false;
      }
    }
    return true;
  }

  bool Run(const Step& s, uint64_t row, int depth) {
    if (depth > kMaxDepth) return Fail("values nested too deeply");
    switch (s.read) {
      case Read::kSkip:
        return Skip(*s.node, depth);
      case Read::kNull:
        SetNullDeep(*s.slot, row);
        return true;
      case Read::kBoolean: {
        bool b;
        if (!ReadBoolean(&b)) return false;
        if (s.store == Store::kBool) {
          s.slot->at<bool>()[row] = b;
        } else {
          s.slot->vec.AssignString(row, b ? "true" : "false");
        }
        Valid(*s.slot, row);
        return true;
      }
      case Read::kInt: {
        int64_t v;
        return ReadInt(&v) && StoreInt(s, v, row);
      }
      case Read::kLong: {
        int64_t v;
        if (!ReadLong(&v)) return false;
        if (s.store == Store::kI64 || (s.store == Store::kTimestamp && s.mul == 1 && s.div == 1)) {
          s.slot->at<int64_t>()[row] = v;
          Valid(*s.slot, row);
          return true;
        }
        return StoreInt(s, v, row);
      }
      case Read::kFloat: {
        if (end_ - p_ < 4) return Fail("truncated float");
        float f;
        std::memcpy(&f, p_, 4);
        p_ += 4;
        return StoreFloat(s, f, row);
      }
      case Read::kDouble: {
        if (end_ - p_ < 8) return Fail("truncated double");
        double d;
        std::memcpy(&d, p_, 8);
        p_ += 8;
        if (s.store == Store::kDouble) {
          s.slot->at<double>()[row] = d;
          Valid(*s.slot, row);
          return true;
        }
        return StoreFloat(s, d, row);
      }
      case Read::kString: {
        std::string_view b;
        if (!ReadBytes(&b)) return false;
        if (s.store == Store::kVarchar) {
          if (!Utf8(b)) return FailAt(p_ - b.size(), "invalid UTF-8");
          s.slot->vec.AssignString(row, b);
          Valid(*s.slot, row);
          return true;
        }
        return StoreBytes(s, b, row);
      }
      case Read::kBytes: {
        std::string_view b;
        return ReadBytes(&b) && StoreBytes(s, b, row);
      }
      case Read::kFixed: {
        std::string_view b;
        return ReadFixed(s.node->size, &b) && StoreBytes(s, b, row);
      }
      case Read::kEnum: {
        const uint8_t* start = p_;
        int64_t v;
        if (!ReadLong(&v)) return false;
        if (v < 0 || v >= static_cast<int64_t>(s.enum_map.size())) {
          return FailAt(
              start, fmt::format("enum index {} out of range ({} symbols)", v, s.enum_map.size()));
        }
        int64_t o = s.enum_map[static_cast<size_t>(v)];
        if (o < 0) {
          return FailAt(start,
                        fmt::format("symbol {} has no value in {}",
                                    s.node->symbols[static_cast<size_t>(v)], s.slot->type_sql));
        }
        const Slot& d = *s.slot;
        switch (s.store) {
          case Store::kVarchar:
            d.vec.AssignString(row, s.enum_text[static_cast<size_t>(o)]);
            break;
          case Store::kEnum8:
            d.at<uint8_t>()[row] = static_cast<uint8_t>(o);
            break;
          case Store::kEnum16:
            d.at<uint16_t>()[row] = static_cast<uint16_t>(o);
            break;
          default:
            d.at<uint32_t>()[row] = static_cast<uint32_t>(o);
            break;
        }
        Valid(d, row);
        return true;
      }
      case Read::kRecord:
        Valid(*s.slot, row);
        return RunRecord(s, row, depth);
      case Read::kArray:
      case Read::kMap:
        return RunList(s, row, depth);
      case Read::kUnion: {
        const uint8_t* start = p_;
        int64_t v;
        if (!ReadLong(&v)) return false;
        if (v < 0 || v >= static_cast<int64_t>(s.children.size())) {
          return FailAt(start, fmt::format("union index {} out of range ({} branches)", v,
                                           s.children.size()));
        }
        const auto i = static_cast<size_t>(v);
        if (s.store == Store::kUnion) {
          int m = s.branch_member[i];
          if (m < 0) {
            SetNullDeep(*s.slot, row);
            return true;
          }
          SelectMember(*s.slot, m, row);
        }
        return Run(s.children[i], row, depth + 1);
      }
      case Read::kMember:
        SelectMember(*s.slot, s.member, row);
        return Run(s.children[0], row, depth + 1);
    }
    return Fail("internal: unknown step");
  }

  // A UNION cell holding member `m`: the tag set, the other members NULL.
  static void SelectMember(Slot& u, int m, uint64_t row) {
    Valid(u, row);
    u.children[0].at<uint8_t>()[row] = static_cast<uint8_t>(m);
    Valid(u.children[0], row);
    for (size_t k = 1; k < u.children.size(); ++k) {
      if (static_cast<int>(k) != m + 1) SetNullDeep(u.children[k], row);
    }
  }

  bool RunList(const Step& s, uint64_t row, int depth) {
    Slot& l = *s.slot;
    const bool is_map = s.read == Read::kMap;
    const Node& item = is_map ? *s.node->values : *s.node->items;
    const int64_t min_size = item.min_size + (is_map ? 1 : 0);
    const uint64_t start = l.list_size;
    while (true) {
      int64_t count;
      if (!ReadBlockCount(min_size, &count)) return false;
      if (count == 0) break;
      for (int64_t i = 0; i < count; ++i) {
        const uint64_t at = l.list_size;
        if (!EnsureListRoom(l, at)) return false;
        if (is_map) {
          Slot& entry = l.children[0];
          std::string_view key;
          if (!ReadBytes(&key)) return false;
          if (!Utf8(key)) return Fail("invalid UTF-8 in a map key");
          entry.children[0].vec.AssignString(at, key);
          Valid(entry.children[0], at);
          Valid(entry, at);
          if (!Run(s.children[0], at, depth + 1)) {
            path_.push_back(fmt::format("[\"{}\"]", key.substr(0, 40)));
            return false;
          }
        } else if (!Run(s.children[0], at, depth + 1)) {
          path_.push_back(fmt::format("[{}]", at - start));
          return false;
        }
        ++l.list_size;
      }
    }
    l.at<duck::ListEntry>()[row] = {start, l.list_size - start};
    Valid(l, row);
    return true;
  }

  std::vector<Slot> slots_;
  Step top_;
  std::vector<Slot*> lists_;
  std::vector<uint64_t> marks_;
  const uint8_t* begin_ = nullptr;  // of the payload (or default value) p_ reads
  std::string problem_;
  size_t problem_at_ = 0;
  std::vector<std::string> path_;  // innermost first
};

}  // namespace

Result<std::unique_ptr<RowDecoder>> MakeRowDecoder(const Parsed& writer, const Parsed* reader,
                                                   std::span<const Column> columns) {
  std::vector<Slot> slots;
  for (const Column& c : columns) slots.push_back(BuildSlot(c.type));
  std::unique_ptr<AvroRowDecoder> d = AvroRowDecoder::Make(std::move(slots));
  Compiler compiler;
  RETURN_IF_ERROR(compiler.Top(writer.root(), reader != nullptr ? &reader->root() : nullptr,
                               d->slots(), columns, &d->top()));
  return std::unique_ptr<RowDecoder>(std::move(d));
}

}  // namespace sluice::schema::avro
