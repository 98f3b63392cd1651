// MakeRowDecoder: Protobuf payloads straight into DuckDB vectors. A plan is compiled once
// per (schema, message, columns): a tree of Slots (one per column, struct field and list
// element, as src/json/slot.h) where each STRUCT slot carries the table of its message's
// fields (number -> what to read and which child slot gets it; numbers below 64 by direct
// index, the rest by binary search). Fields arrive in any order and repeat; a slot's
// `seen` stamp tells which were set in the current message, the rest get their absent
// value (default, NULL or empty list) when the message ends. List children are appended
// as elements arrive; a failed row gives them back (MarkRow/RollbackRow, as
// src/json/chunk_builder.h).
#include <duckdb.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "schema/protobuf/columns.h"
#include "schema/protobuf/internal.h"

namespace sluice::schema::protobuf {

namespace {

using duck::TypeId;
using duck::Vector;
using internal::WellKnown;

constexpr int kMaxPayloadDepth = 64;

// Where a value goes: DuckDB's physical layout.
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
  kFloat,
  kDouble,
  kString,  // VARCHAR, BLOB, JSON
  kTimestamp,
  kInterval,
  kList,  // LIST and MAP
  kStruct,
};

// How a field's value is read from the wire.
enum class Src : uint8_t {
  kInt32,
  kInt64,
  kUint32,
  kUint64,
  kSint32,
  kSint64,
  kBool,
  kEnum,
  kFixed32,
  kSfixed32,
  kFixed64,
  kSfixed64,
  kFloat,
  kDouble,
  kString,
  kBytes,
  kMessage,    // into a STRUCT
  kRaw,        // a message's bytes, into a BLOB
  kTimestamp,  // google.protobuf.Timestamp
  kDuration,
  kWrapper,  // google.protobuf.*Value: field 1, `inner`
  kEmpty,    // present: true
  kJson,     // Struct, Value, ListValue as JSON text
};

enum class Absent : uint8_t { kNull, kDefault, kEmptyList };

struct Plan;

struct EnumNames {
  std::vector<std::string> dense;  // by number, for 0 <= number < dense.size()
  std::vector<std::pair<int32_t, std::string>> sorted;
  std::string_view Find(int32_t n) const {
    if (n >= 0 && static_cast<size_t>(n) < dense.size() && !dense[n].empty()) return dense[n];
    auto it = std::lower_bound(sorted.begin(), sorted.end(), n,
                               [](const auto& a, int32_t b) { return a.first < b; });
    if (it != sorted.end() && it->first == n) return it->second;
    return {};
  }
};

struct Slot {
  Store store = Store::kString;
  bool utf8 = false;  // bytes into VARCHAR: checked
  std::string name;   // for errors
  std::vector<Slot> children;
  std::unique_ptr<Plan> plan;  // STRUCT: the fields of its message

  // What to do when the message did not carry it.
  Absent absent = Absent::kNull;
  int64_t default_int = 0;
  std::string default_text;

  // Bound per chunk.
  Vector vec;
  void* data = nullptr;
  uint64_t* validity = nullptr;
  uint64_t list_size = 0;
  uint64_t list_capacity = 0;
  uint64_t seen = 0;         // stamp of the message that last set it
  uint64_t inner_stamp = 0;  // STRUCT: the stamp its current row is decoded under (merges)
};

struct FieldOp {
  int32_t number = 0;
  uint8_t wire = 0;  // the wire type of one value
  Src src = Src::kInt32;
  Src inner = Src::kInt32;  // kWrapper: the wrapped scalar; map/list: unused
  bool repeated = false;
  bool packable = false;
  WellKnown json_kind = WellKnown::kNone;  // kJson: Struct, Value or ListValue
  int16_t oneof = -1;                      // index into Plan::oneofs
  uint32_t child = 0;                      // index of the slot in the struct's children
  const EnumNames* enums = nullptr;
  std::string name;
};

struct Plan {
  int8_t small[64];
  std::vector<FieldOp> ops;
  std::vector<std::pair<int32_t, uint32_t>> large;  // number -> op, sorted
  std::vector<std::vector<uint32_t>> oneofs;        // each oneof's member slots
  const FieldOp* Find(uint32_t number) const {
    if (number < 64) return small[number] < 0 ? nullptr : &ops[small[number]];
    auto it = std::lower_bound(large.begin(), large.end(), static_cast<int32_t>(number),
                               [](const auto& a, int32_t b) { return a.first < b; });
    if (it == large.end() || it->first != static_cast<int32_t>(number)) return nullptr;
    return &ops[it->second];
  }
};

uint8_t WireOf(Src s) {
  switch (s) {
    case Src::kFixed32:
    case Src::kSfixed32:
    case Src::kFloat:
      return 5;
    case Src::kFixed64:
    case Src::kSfixed64:
    case Src::kDouble:
      return 1;
    case Src::kString:
    case Src::kBytes:
    case Src::kMessage:
    case Src::kRaw:
    case Src::kTimestamp:
    case Src::kDuration:
    case Src::kWrapper:
    case Src::kEmpty:
    case Src::kJson:
      return 2;
    default:
      return 0;
  }
}

Src ScalarSrc(FieldType t) {
  switch (t) {
    case FieldType::kDouble:
      return Src::kDouble;
    case FieldType::kFloat:
      return Src::kFloat;
    case FieldType::kInt64:
      return Src::kInt64;
    case FieldType::kUint64:
      return Src::kUint64;
    case FieldType::kInt32:
      return Src::kInt32;
    case FieldType::kFixed64:
      return Src::kFixed64;
    case FieldType::kFixed32:
      return Src::kFixed32;
    case FieldType::kBool:
      return Src::kBool;
    case FieldType::kString:
      return Src::kString;
    case FieldType::kBytes:
      return Src::kBytes;
    case FieldType::kUint32:
      return Src::kUint32;
    case FieldType::kEnum:
      return Src::kEnum;
    case FieldType::kSfixed32:
      return Src::kSfixed32;
    case FieldType::kSfixed64:
      return Src::kSfixed64;
    case FieldType::kSint32:
      return Src::kSint32;
    case FieldType::kSint64:
      return Src::kSint64;
    default:
      return Src::kMessage;
  }
}

bool IsIntegerSrc(Src s) {
  switch (s) {
    case Src::kInt32:
    case Src::kInt64:
    case Src::kUint32:
    case Src::kUint64:
    case Src::kSint32:
    case Src::kSint64:
    case Src::kFixed32:
    case Src::kSfixed32:
    case Src::kFixed64:
    case Src::kSfixed64:
      return true;
    default:
      return false;
  }
}

bool IsNumericStore(Store s) { return s <= Store::kDouble && s != Store::kBool; }

std::string TypeText(const duck::LogicalType& t) { return t.ToSql(); }

char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

bool SameIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  }
  return true;
}

// ---- building the plan ----

// A MAP's entries (STRUCT(key, value)), or a LIST's element.
duck::LogicalType EntryType(const duck::LogicalType& t) {
  if (t.id() != TypeId::kMap) return t.ListChild();
  std::vector<duck::LogicalType> kv;
  kv.push_back(t.MapKey());
  kv.push_back(t.MapValue());
  return duck::LogicalType::Struct({"key", "value"}, kv);
}

class Builder {
 public:
  // A slot for a column/field/element of DuckDB type `t`, receiving `field`'s values
  // (`element`: one element of a repeated field).
  Status Build(const Field& f, bool element, const duck::LogicalType& t, const std::string& path,
               Slot* s, FieldOp* op, int depth) {
    s->name = path;
    if (!element && f.is_map) {
      if (t.id() != TypeId::kMap && t.id() != TypeId::kList) return Mismatch(path, f, t, "a MAP");
      op->repeated = true;
      op->src = Src::kMessage;
      op->wire = 2;
      s->store = Store::kList;
      s->absent = Absent::kEmptyList;
      duck::LogicalType entry = EntryType(t);
      if (entry.id() != TypeId::kStruct || entry.StructFieldCount() != 2)
        return Mismatch(path, f, t, "a MAP or a LIST of STRUCT(key, value)");
      // The entry is a message of two fields: key = 1, value = 2.
      std::vector<Field> ef;
      Field key;
      key.name = "key";
      key.number = 1;
      key.type = f.map_key;
      Field value = f;
      value.name = "value";
      value.number = 2;
      value.is_map = false;
      value.label = Label::kNone;
      ef.push_back(key);
      ef.push_back(value);
      Slot& es = s->children.emplace_back();
      es.name = path + "[]";
      es.store = Store::kStruct;
      es.plan = std::make_unique<Plan>();
      std::memset(es.plan->small, -1, sizeof(es.plan->small));
      for (size_t i = 0; i < 2; ++i) {
        Slot& c = es.children.emplace_back();
        FieldOp cop;
        cop.number = ef[i].number;
        cop.child = static_cast<uint32_t>(i);
        cop.name = ef[i].name;
        RETURN_IF_ERROR(Build(ef[i], false, entry.StructFieldType(i), path + "." + ef[i].name, &c,
                              &cop, depth + 1));
        // Absent key or scalar value: its default (a map entry has no presence).
        if (c.absent == Absent::kNull && ef[i].type != FieldType::kMessage) {
          c.absent = Absent::kDefault;
        }
        AddOp(es.plan.get(), std::move(cop));
      }
      return Status::OK();
    }
    if (!element && f.label == Label::kRepeated) {
      if (t.id() != TypeId::kList) return Mismatch(path, f, t, "a LIST");
      s->store = Store::kList;
      s->absent = Absent::kEmptyList;
      op->repeated = true;
      Slot& es = s->children.emplace_back();
      RETURN_IF_ERROR(Build(f, true, t.ListChild(), path + "[]", &es, op, depth + 1));
      op->packable = op->wire != 2;
      return Status::OK();
    }
    // One value.
    const bool proto3 = proto3_;
    bool presence = f.label == Label::kOptional || f.label == Label::kRequired || f.oneof >= 0 ||
                    f.proto3_optional || !proto3 || f.type == FieldType::kMessage;
    s->absent = presence ? Absent::kNull : Absent::kDefault;
    if (f.type == FieldType::kMessage) {
      WellKnown wk = internal::WellKnownOf(f.message);
      RETURN_IF_ERROR(Message(f, wk, t, path, s, op, depth));
    } else {
      op->src = ScalarSrc(f.type);
      RETURN_IF_ERROR(Scalar(f, op->src, t, path, s, op));
      if (f.type == FieldType::kEnum) {
        const EnumType* e = f.enumeration;
        s->default_int = e->values.empty() ? 0 : e->values[0].number;
        s->default_text = e->values.empty() ? "0" : e->values[0].name;
      }
    }
    op->wire = WireOf(op->src);
    return Status::OK();
  }

  Status Root(const MessageType& m, std::span<const Column> columns, Slot* root) {
    root->store = Store::kStruct;
    root->plan = std::make_unique<Plan>();
    std::memset(root->plan->small, -1, sizeof(root->plan->small));
    std::vector<std::string> names;
    std::vector<const duck::LogicalType*> types;
    for (const Column& c : columns) {
      names.push_back(c.name);
      types.push_back(&c.type);
    }
    return Struct(m, names, types, "", root, 0);
  }

  bool proto3_ = true;

 private:
  static Status Mismatch(const std::string& path, const Field& f, const duck::LogicalType& t,
                         std::string_view wanted) {
    std::string type = f.is_map ? "map"
                       : f.type == FieldType::kMessage || f.type == FieldType::kEnum
                           ? f.full_type_name
                           : std::string(ScalarName(f.type));
    if (f.label == Label::kRepeated && !f.is_map) type = "repeated " + type;
    return InvalidArgumentError("field '{}' ({}) cannot go into a {} column (it needs {})", path,
                                type, TypeText(t), wanted);
  }

  void AddOp(Plan* plan, FieldOp op) {
    uint32_t index = static_cast<uint32_t>(plan->ops.size());
    if (op.number < 64) {
      plan->small[op.number] = static_cast<int8_t>(index);
    } else {
      plan->large.emplace_back(op.number, index);
      std::sort(plan->large.begin(), plan->large.end());
    }
    plan->ops.push_back(std::move(op));
  }

  // A STRUCT slot: children named `names`, filled from `m`'s fields by name.
  Status Struct(const MessageType& m, const std::vector<std::string>& names,
                const std::vector<const duck::LogicalType*>& types, const std::string& path,
                Slot* s, int depth) {
    if (depth > kMaxPayloadDepth)
      return InvalidArgumentError("field '{}': nested too deeply", path);
    std::vector<bool> taken(m.fields.size(), false);
    s->children.resize(names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      int match = -1;
      for (size_t k = 0; k < m.fields.size() && match < 0; ++k) {
        if (!taken[k] && m.fields[k].name == names[i]) match = static_cast<int>(k);
      }
      for (size_t k = 0; k < m.fields.size() && match < 0; ++k) {
        if (!taken[k] && SameIgnoringCase(m.fields[k].name, names[i])) match = static_cast<int>(k);
      }
      Slot& c = s->children[i];
      std::string cpath = path.empty() ? names[i] : path + "." + names[i];
      if (match < 0 || m.fields[match].type == FieldType::kGroup) {
        // A column the message does not have: NULL (or empty, or its parts NULL).
        RETURN_IF_ERROR(Unmatched(*types[i], cpath, &c));
        continue;
      }
      taken[match] = true;
      FieldOp op;
      op.number = m.fields[match].number;
      op.child = static_cast<uint32_t>(i);
      op.name = cpath;
      RETURN_IF_ERROR(Build(m.fields[match], false, *types[i], cpath, &c, &op, depth + 1));
      if (int o = m.fields[match].oneof; o >= 0) {
        Plan& plan = *s->plan;
        if (plan.oneofs.size() <= static_cast<size_t>(o)) plan.oneofs.resize(o + 1);
        plan.oneofs[o].push_back(op.child);
        op.oneof = static_cast<int16_t>(o);
      }
      AddOp(s->plan.get(), std::move(op));
    }
    return Status::OK();
  }

  // A slot no field feeds: its store only, always NULL.
  Status Unmatched(const duck::LogicalType& t, const std::string& path, Slot* s) {
    s->name = path;
    s->absent = Absent::kNull;
    ASSIGN_OR_RETURN(s->store, StoreOf(t, path));
    if (s->store == Store::kStruct) {
      for (size_t i = 0; i < t.StructFieldCount(); ++i) {
        RETURN_IF_ERROR(Unmatched(t.StructFieldType(i), path + "." + t.StructFieldName(i),
                                  &s->children.emplace_back()));
      }
    } else if (s->store == Store::kList) {
      duck::LogicalType child = EntryType(t);
      RETURN_IF_ERROR(Unmatched(child, path + "[]", &s->children.emplace_back()));
    }
    return Status::OK();
  }

  static Result<Store> StoreOf(const duck::LogicalType& t, const std::string& path) {
    switch (t.id()) {
      case TypeId::kBoolean:
        return Store::kBool;
      case TypeId::kTinyInt:
        return Store::kI8;
      case TypeId::kSmallInt:
        return Store::kI16;
      case TypeId::kInteger:
        return Store::kI32;
      case TypeId::kBigInt:
        return Store::kI64;
      case TypeId::kUTinyInt:
        return Store::kU8;
      case TypeId::kUSmallInt:
        return Store::kU16;
      case TypeId::kUInteger:
        return Store::kU32;
      case TypeId::kUBigInt:
        return Store::kU64;
      case TypeId::kFloat:
        return Store::kFloat;
      case TypeId::kDouble:
        return Store::kDouble;
      case TypeId::kVarchar:
      case TypeId::kBlob:
        return Store::kString;
      case TypeId::kTimestamp:
      case TypeId::kTimestampTz:
        return Store::kTimestamp;
      case TypeId::kInterval:
        return Store::kInterval;
      case TypeId::kList:
      case TypeId::kMap:
        return Store::kList;
      case TypeId::kStruct:
        return Store::kStruct;
      default:
        return InvalidArgumentError("column '{}': type {} is not supported for Protobuf", path,
                                    TypeText(t));
    }
  }

  Status Scalar(const Field& f, Src src, const duck::LogicalType& t, const std::string& path,
                Slot* s, FieldOp* op) {
    auto st = StoreOf(t, path);
    if (!st.ok()) return Mismatch(path, f, t, "a column of a scalar type");
    s->store = *st;
    bool ok = false;
    if (IsIntegerSrc(src)) {
      ok = IsNumericStore(s->store);
    } else if (src == Src::kBool) {
      ok = s->store == Store::kBool || (IsNumericStore(s->store) && s->store < Store::kFloat);
    } else if (src == Src::kEnum) {
      ok = (s->store == Store::kString && t.id() == TypeId::kVarchar) ||
           (IsNumericStore(s->store) && s->store < Store::kFloat);
      if (ok) op->enums = Names(*f.enumeration);
    } else if (src == Src::kFloat || src == Src::kDouble) {
      ok = s->store == Store::kFloat || s->store == Store::kDouble;
    } else if (src == Src::kString) {
      ok = s->store == Store::kString;
    } else if (src == Src::kBytes) {
      ok = s->store == Store::kString;
      s->utf8 = t.id() == TypeId::kVarchar;
    }
    if (!ok) return Mismatch(path, f, t, TypeText(ScalarColumnTypeFor(f)));
    return Status::OK();
  }

  static duck::LogicalType ScalarColumnTypeFor(const Field& f) {
    return internal::ScalarColumnType(f.type);
  }

  Status Message(const Field& f, WellKnown wk, const duck::LogicalType& t, const std::string& path,
                 Slot* s, FieldOp* op, int depth) {
    auto st = StoreOf(t, path);
    if (!st.ok()) return Mismatch(path, f, t, "a STRUCT");
    s->store = *st;
    auto want = [&](bool ok, std::string_view wanted) -> Status {
      if (!ok) return Mismatch(path, f, t, wanted);
      return Status::OK();
    };
    switch (wk) {
      case WellKnown::kTimestamp:
        op->src = Src::kTimestamp;
        return want(s->store == Store::kTimestamp, "TIMESTAMP WITH TIME ZONE");
      case WellKnown::kDuration:
        op->src = Src::kDuration;
        return want(s->store == Store::kInterval, "INTERVAL");
      case WellKnown::kEmpty:
        op->src = Src::kEmpty;
        return want(s->store == Store::kBool, "BOOLEAN");
      case WellKnown::kStruct:
      case WellKnown::kValue:
      case WellKnown::kListValue:
        op->src = Src::kJson;
        op->json_kind = wk;
        return want(s->store == Store::kString && t.id() == TypeId::kVarchar, "VARCHAR (JSON)");
      case WellKnown::kNone:
        break;
      default: {
        // Wrappers: the scalar of field 1, NULL when the wrapper is absent.
        op->src = Src::kWrapper;
        const Field& inner = f.message->fields[0];
        op->inner = ScalarSrc(inner.type);
        FieldOp scratch;
        return Scalar(inner, op->inner, t, path, s, &scratch);
      }
    }
    if (s->store == Store::kString && t.id() == TypeId::kBlob) {
      op->src = Src::kRaw;
      return Status::OK();
    }
    if (!internal::HasColumns(*f.message)) {
      op->src = Src::kEmpty;
      return want(s->store == Store::kBool, "BOOLEAN");
    }
    if (s->store != Store::kStruct) return Mismatch(path, f, t, "a STRUCT or a BLOB");
    op->src = Src::kMessage;
    s->plan = std::make_unique<Plan>();
    std::memset(s->plan->small, -1, sizeof(s->plan->small));
    std::vector<std::string> names;
    std::vector<duck::LogicalType> owned;
    std::vector<const duck::LogicalType*> types;
    for (size_t i = 0; i < t.StructFieldCount(); ++i) {
      names.push_back(t.StructFieldName(i));
      owned.push_back(t.StructFieldType(i));
    }
    for (const duck::LogicalType& o : owned) types.push_back(&o);
    bool saved = proto3_;
    auto it = owner_->find(f.message);
    if (it != owner_->end()) proto3_ = it->second->syntax == "proto3";
    Status r = Struct(*f.message, names, types, path, s, depth + 1);
    proto3_ = saved;
    return r;
  }

  const EnumNames* Names(const EnumType& e) {
    for (const auto& [type, names] : enum_names_) {
      if (type == &e) return names.get();
    }
    auto n = std::make_unique<EnumNames>();
    for (const EnumValue& v : e.values) {
      if (v.number >= 0 && v.number < 1024) {
        if (n->dense.size() <= static_cast<size_t>(v.number)) n->dense.resize(v.number + 1);
        if (n->dense[v.number].empty()) n->dense[v.number] = v.name;
      }
      n->sorted.emplace_back(v.number, v.name);
    }
    std::stable_sort(n->sorted.begin(), n->sorted.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    n->sorted.erase(std::unique(n->sorted.begin(), n->sorted.end(),
                                [](const auto& a, const auto& b) { return a.first == b.first; }),
                    n->sorted.end());
    enum_names_.emplace_back(&e, std::move(n));
    return enum_names_.back().second.get();
  }

 public:
  const std::unordered_map<const void*, const File*>* owner_ = nullptr;
  std::vector<std::pair<const EnumType*, std::unique_ptr<EnumNames>>> enum_names_;
};

// ---- decoding ----

class Decoder final : public RowDecoder {
 public:
  Decoder(Slot root, std::vector<std::pair<const EnumType*, std::unique_ptr<EnumNames>>> enums)
      : root_(std::move(root)), enums_(std::move(enums)) {
    Collect(root_);
    marks_.resize(lists_.size());
  }

  void BindVectors(std::span<const duck::Vector> columns) override {
    for (size_t i = 0; i < root_.children.size(); ++i) {
      Reset(root_.children[i]);
      Refresh(root_.children[i], columns[i]);
    }
  }
  size_t column_count() const override { return root_.children.size(); }

  bool Decode(std::string_view payload, uint64_t row, std::string* reason) override {
    for (size_t i = 0; i < lists_.size(); ++i) marks_[i] = lists_[i]->list_size;
    const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
    error_.clear();
    if (DecodeMessage(p, p + payload.size(), root_, row, ++stamp_, 0, false)) return true;
    for (size_t i = 0; i < lists_.size(); ++i) lists_[i]->list_size = marks_[i];
    for (Slot& c : root_.children) SetNull(c, row);
    *reason = std::move(error_);
    return false;
  }

  Status Finish(uint64_t rows) override {
    for (Slot* l : lists_) {
      if (l->list_capacity > 0) RETURN_IF_ERROR(l->vec.ListSetSize(l->list_size));
    }
    return Status::OK();
  }

 private:
  void Collect(Slot& s) {
    if (s.store == Store::kList) lists_.push_back(&s);
    for (Slot& c : s.children) Collect(c);
  }

  static void Reset(Slot& s) {
    s.list_size = 0;
    s.list_capacity = 0;
    s.seen = 0;
    for (Slot& c : s.children) Reset(c);
  }

  static void Refresh(Slot& s, Vector v) {
    s.vec = v;
    s.validity = v.validity();
    if (s.store == Store::kStruct) {
      for (size_t i = 0; i < s.children.size(); ++i) Refresh(s.children[i], v.StructField(i));
      s.data = nullptr;
    } else if (s.store == Store::kString) {
      s.data = nullptr;
    } else {
      s.data = v.RawData();
    }
  }

  bool Fail(std::string_view where, std::string_view what) {
    if (error_.empty()) {
      error_ = where.empty() ? std::string(what) : fmt::format("field '{}': {}", where, what);
    }
    return false;
  }

  bool EnsureListRoom(Slot& s, uint64_t index) {
    if (index < s.list_capacity) return true;
    if (index > (uint64_t{1} << 31)) return Fail(s.name, "list too long");
    uint64_t cap = std::max<uint64_t>({index + 1, s.list_capacity * 2, 64});
    Status st = s.vec.ListReserve(cap);
    if (!st.ok()) return Fail(s.name, st.message());
    s.list_capacity = cap;
    Refresh(s.children[0], s.vec.ListChild());
    return true;
  }

  static void SetNull(Slot& s, uint64_t row) {
    Vector::SetInvalid(s.validity, row);
    if (s.store == Store::kStruct) {
      for (Slot& c : s.children) SetNull(c, row);
    } else if (s.store == Store::kList) {
      static_cast<duck::ListEntry*>(s.data)[row] = {s.list_size, 0};
    }
  }

  void SetAbsent(Slot& s, uint64_t row) {
    switch (s.absent) {
      case Absent::kNull:
        SetNull(s, row);
        return;
      case Absent::kEmptyList:
        static_cast<duck::ListEntry*>(s.data)[row] = {s.list_size, 0};
        Vector::SetValid(s.validity, row);
        return;
      case Absent::kDefault:
        break;
    }
    Vector::SetValid(s.validity, row);
    switch (s.store) {
      case Store::kBool:
        static_cast<bool*>(s.data)[row] = false;
        break;
      case Store::kI8:
        static_cast<int8_t*>(s.data)[row] = static_cast<int8_t>(s.default_int);
        break;
      case Store::kI16:
        static_cast<int16_t*>(s.data)[row] = static_cast<int16_t>(s.default_int);
        break;
      case Store::kI32:
        static_cast<int32_t*>(s.data)[row] = static_cast<int32_t>(s.default_int);
        break;
      case Store::kI64:
        static_cast<int64_t*>(s.data)[row] = s.default_int;
        break;
      case Store::kU8:
        static_cast<uint8_t*>(s.data)[row] = static_cast<uint8_t>(s.default_int);
        break;
      case Store::kU16:
        static_cast<uint16_t*>(s.data)[row] = static_cast<uint16_t>(s.default_int);
        break;
      case Store::kU32:
        static_cast<uint32_t*>(s.data)[row] = static_cast<uint32_t>(s.default_int);
        break;
      case Store::kU64:
        static_cast<uint64_t*>(s.data)[row] = static_cast<uint64_t>(s.default_int);
        break;
      case Store::kFloat:
        static_cast<float*>(s.data)[row] = 0;
        break;
      case Store::kDouble:
        static_cast<double*>(s.data)[row] = 0;
        break;
      case Store::kString:
        s.vec.AssignString(row, s.default_text);
        break;
      default:
        SetNull(s, row);
        break;
    }
  }

  // Integers into any numeric store, range-checked.
  bool StoreSigned(Slot& s, uint64_t row, int64_t v) {
    auto fits = [&](int64_t lo, int64_t hi) {
      if (v < lo || v > hi) return Fail(s.name, fmt::format("{} out of range", v));
      return true;
    };
    switch (s.store) {
      case Store::kI64:
        static_cast<int64_t*>(s.data)[row] = v;
        break;
      case Store::kI32:
        if (!fits(INT32_MIN, INT32_MAX)) return false;
        static_cast<int32_t*>(s.data)[row] = static_cast<int32_t>(v);
        break;
      case Store::kI16:
        if (!fits(INT16_MIN, INT16_MAX)) return false;
        static_cast<int16_t*>(s.data)[row] = static_cast<int16_t>(v);
        break;
      case Store::kI8:
        if (!fits(INT8_MIN, INT8_MAX)) return false;
        static_cast<int8_t*>(s.data)[row] = static_cast<int8_t>(v);
        break;
      case Store::kU8:
        if (!fits(0, UINT8_MAX)) return false;
        static_cast<uint8_t*>(s.data)[row] = static_cast<uint8_t>(v);
        break;
      case Store::kU16:
        if (!fits(0, UINT16_MAX)) return false;
        static_cast<uint16_t*>(s.data)[row] = static_cast<uint16_t>(v);
        break;
      case Store::kU32:
        if (!fits(0, UINT32_MAX)) return false;
        static_cast<uint32_t*>(s.data)[row] = static_cast<uint32_t>(v);
        break;
      case Store::kU64:
        if (!fits(0, INT64_MAX)) return false;
        static_cast<uint64_t*>(s.data)[row] = static_cast<uint64_t>(v);
        break;
      case Store::kBool:
        static_cast<bool*>(s.data)[row] = v != 0;
        break;
      case Store::kFloat:
        static_cast<float*>(s.data)[row] = static_cast<float>(v);
        break;
      case Store::kDouble:
        static_cast<double*>(s.data)[row] = static_cast<double>(v);
        break;
      default:
        return Fail(s.name, "not a number column");
    }
    Vector::SetValid(s.validity, row);
    return true;
  }

  bool StoreUnsigned(Slot& s, uint64_t row, uint64_t v) {
    if (s.store == Store::kU64) {
      static_cast<uint64_t*>(s.data)[row] = v;
      Vector::SetValid(s.validity, row);
      return true;
    }
    if (s.store == Store::kDouble || s.store == Store::kFloat) {
      if (s.store == Store::kDouble) {
        static_cast<double*>(s.data)[row] = static_cast<double>(v);
      } else {
        static_cast<float*>(s.data)[row] = static_cast<float>(v);
      }
      Vector::SetValid(s.validity, row);
      return true;
    }
    if (v > static_cast<uint64_t>(INT64_MAX))
      return Fail(s.name, fmt::format("{} out of range", v));
    return StoreSigned(s, row, static_cast<int64_t>(v));
  }

  bool StoreDouble(Slot& s, uint64_t row, double v) {
    if (s.store == Store::kDouble) {
      static_cast<double*>(s.data)[row] = v;
    } else {
      static_cast<float*>(s.data)[row] = static_cast<float>(v);
    }
    Vector::SetValid(s.validity, row);
    return true;
  }

  bool StoreText(Slot& s, uint64_t row, std::string_view v, bool check_utf8) {
    if (check_utf8 && !internal::ValidUtf8(v)) return Fail(s.name, "invalid UTF-8");
    s.vec.AssignString(row, v);
    Vector::SetValid(s.validity, row);
    return true;
  }

  // One scalar whose wire value is at *p (varint, or 4/8 bytes).
  bool Scalar(Src src, const FieldOp& op, Slot& s, uint64_t row, const uint8_t** p,
              const uint8_t* end) {
    uint64_t v;
    switch (src) {
      case Src::kInt32:
      case Src::kInt64:
      case Src::kUint32:
      case Src::kUint64:
      case Src::kSint32:
      case Src::kSint64:
      case Src::kBool:
      case Src::kEnum:
        if (!internal::ReadVarint(p, end, &v)) return Fail(s.name, "truncated or overlong varint");
        break;
      case Src::kFixed32:
      case Src::kSfixed32:
      case Src::kFloat: {
        if (end - *p < 4) return Fail(s.name, "truncated fixed32");
        uint32_t x;
        std::memcpy(&x, *p, 4);
        *p += 4;
        v = x;
        break;
      }
      default: {
        if (end - *p < 8) return Fail(s.name, "truncated fixed64");
        std::memcpy(&v, *p, 8);
        *p += 8;
        break;
      }
    }
    switch (src) {
      case Src::kInt32:
        return StoreSigned(s, row, static_cast<int32_t>(static_cast<uint32_t>(v)));
      case Src::kInt64:
        if (s.store == Store::kI64) {
          static_cast<int64_t*>(s.data)[row] = static_cast<int64_t>(v);
          Vector::SetValid(s.validity, row);
          return true;
        }
        return StoreSigned(s, row, static_cast<int64_t>(v));
      case Src::kUint32:
        return StoreSigned(s, row, static_cast<uint32_t>(v));
      case Src::kUint64:
      case Src::kFixed64:
        return StoreUnsigned(s, row, v);
      case Src::kSint32:
        return StoreSigned(s, row,
                           static_cast<int32_t>(internal::UnZigZag64(static_cast<uint32_t>(v))));
      case Src::kSint64:
        return StoreSigned(s, row, internal::UnZigZag64(v));
      case Src::kBool:
        if (s.store == Store::kBool) {
          static_cast<bool*>(s.data)[row] = v != 0;
          Vector::SetValid(s.validity, row);
          return true;
        }
        return StoreSigned(s, row, v != 0 ? 1 : 0);
      case Src::kEnum: {
        int32_t n = static_cast<int32_t>(static_cast<uint32_t>(v));
        if (s.store != Store::kString) return StoreSigned(s, row, n);
        std::string_view name = op.enums->Find(n);
        if (name.empty()) {
          char buf[16];
          auto r = fmt::format_to_n(buf, sizeof(buf), "{}", n);
          name = std::string_view(buf, r.size);
          return StoreText(s, row, name, false);
        }
        return StoreText(s, row, name, false);
      }
      case Src::kFixed32:
        return StoreSigned(s, row, static_cast<uint32_t>(v));
      case Src::kSfixed32:
        return StoreSigned(s, row, static_cast<int32_t>(static_cast<uint32_t>(v)));
      case Src::kSfixed64:
        return StoreSigned(s, row, static_cast<int64_t>(v));
      case Src::kFloat: {
        float f;
        uint32_t x = static_cast<uint32_t>(v);
        std::memcpy(&f, &x, 4);
        return StoreDouble(s, row, f);
      }
      case Src::kDouble: {
        double d;
        std::memcpy(&d, &v, 8);
        return StoreDouble(s, row, d);
      }
      default:
        return Fail(s.name, "internal: not a scalar");
    }
  }

  bool ReadLength(const uint8_t** p, const uint8_t* end, std::string_view* out,
                  std::string_view name) {
    uint64_t n;
    if (!internal::ReadVarint(p, end, &n)) return Fail(name, "truncated length");
    if (n > static_cast<uint64_t>(end - *p))
      return Fail(name, fmt::format("length {} past the end", n));
    *out = std::string_view(reinterpret_cast<const char*>(*p), n);
    *p += n;
    return true;
  }

  // A length-delimited value of field `op` into `s` at `row`.
  bool Delimited(const FieldOp& op, Src src, Slot& s, uint64_t row, std::string_view b,
                 uint64_t parent_stamp, int depth) {
    switch (src) {
      case Src::kString:
        return StoreText(s, row, b, true);
      case Src::kBytes:
        return StoreText(s, row, b, s.utf8);
      case Src::kRaw:
        return StoreText(s, row, b, false);
      case Src::kMessage: {
        uint64_t stamp = s.seen == parent_stamp && s.inner_stamp != 0 ? s.inner_stamp : ++stamp_;
        s.inner_stamp = stamp;
        const auto* q = reinterpret_cast<const uint8_t*>(b.data());
        if (!DecodeMessage(q, q + b.size(), s, row, stamp, depth + 1, false)) return false;
        Vector::SetValid(s.validity, row);
        return true;
      }
      case Src::kTimestamp:
      case Src::kDuration: {
        int64_t seconds = 0, nanos = 0;
        if (!SecondsNanos(b, &seconds, &nanos, s.name, depth)) return false;
        if (nanos <= -1000000000 || nanos >= 1000000000) return Fail(s.name, "nanos out of range");
        if (seconds > INT64_MAX / 1000000 - 1 || seconds < INT64_MIN / 1000000 + 1)
          return Fail(s.name, "seconds out of range");
        int64_t micros = seconds * 1000000 + nanos / 1000;
        if (src == Src::kTimestamp) {
          static_cast<int64_t*>(s.data)[row] = micros;
        } else {
          auto* iv = static_cast<duckdb_interval*>(s.data) + row;
          iv->months = 0;
          iv->days = 0;
          iv->micros = micros;
        }
        Vector::SetValid(s.validity, row);
        return true;
      }
      case Src::kWrapper:
        return Wrapper(op, s, row, b, depth);
      case Src::kEmpty:
        if (!SkipAll(b, s.name, depth)) return false;
        static_cast<bool*>(s.data)[row] = true;
        Vector::SetValid(s.validity, row);
        return true;
      case Src::kJson: {
        json_.clear();
        const auto* q = reinterpret_cast<const uint8_t*>(b.data());
        if (!JsonOf(op, q, q + b.size(), depth)) return false;
        return StoreText(s, row, json_, false);
      }
      default:
        return Fail(s.name, "internal: not length-delimited");
    }
  }

  bool SecondsNanos(std::string_view b, int64_t* seconds, int64_t* nanos, std::string_view name,
                    int depth) {
    const auto* p = reinterpret_cast<const uint8_t*>(b.data());
    const uint8_t* end = p + b.size();
    while (p < end) {
      uint64_t key, v;
      if (!internal::ReadVarint(&p, end, &key)) return Fail(name, "truncated tag");
      uint32_t number = static_cast<uint32_t>(key >> 3);
      int wire = static_cast<int>(key & 7);
      if ((number == 1 || number == 2) && wire == 0) {
        if (!internal::ReadVarint(&p, end, &v)) return Fail(name, "truncated varint");
        if (number == 1) {
          *seconds = static_cast<int64_t>(v);
        } else {
          *nanos = static_cast<int32_t>(static_cast<uint32_t>(v));
        }
      } else if (number == 1 || number == 2) {
        return Fail(name, fmt::format("wrong wire type {} for field {}", wire, number));
      } else if (!Skip(&p, end, key, name, depth + 1)) {
        return false;
      }
    }
    return true;
  }

  bool Wrapper(const FieldOp& op, Slot& s, uint64_t row, std::string_view b, int depth) {
    const auto* p = reinterpret_cast<const uint8_t*>(b.data());
    const uint8_t* end = p + b.size();
    bool set = false;
    uint8_t wire = WireOf(op.inner);
    while (p < end) {
      uint64_t key;
      if (!internal::ReadVarint(&p, end, &key)) return Fail(s.name, "truncated tag");
      if ((key >> 3) != 1) {
        if (!Skip(&p, end, key, s.name, depth + 1)) return false;
        continue;
      }
      if ((key & 7) != wire) return Fail(s.name, fmt::format("wrong wire type {}", key & 7));
      if (wire == 2) {
        std::string_view v;
        if (!ReadLength(&p, end, &v, s.name)) return false;
        if (!StoreText(s, row, v, op.inner == Src::kString || s.utf8)) return false;
      } else if (!Scalar(op.inner, op, s, row, &p, end)) {
        return false;
      }
      set = true;
    }
    if (!set) {  // a wrapper present without its value: the value's default
      switch (op.inner) {
        case Src::kString:
        case Src::kBytes:
          return StoreText(s, row, "", false);
        case Src::kFloat:
        case Src::kDouble:
          return StoreDouble(s, row, 0);
        default:
          return StoreSigned(s, row, 0);
      }
    }
    return true;
  }

  // google.protobuf.Struct / Value / ListValue as JSON text (json_), for field `op`.
  bool JsonOf(const FieldOp& op, const uint8_t* p, const uint8_t* end, int depth) {
    switch (op.json_kind) {
      case WellKnown::kStruct:
        return JsonStruct(p, end, op.name, depth);
      case WellKnown::kListValue:
        return JsonList(p, end, op.name, depth);
      default:
        return JsonValue(p, end, op.name, depth);
    }
  }

  bool JsonStruct(const uint8_t* p, const uint8_t* end, std::string_view name, int depth) {
    if (depth > kMaxPayloadDepth) return Fail(name, "nested too deeply");
    json_ += '{';
    bool first = true;
    while (p < end) {
      uint64_t key;
      if (!internal::ReadVarint(&p, end, &key)) return Fail(name, "truncated tag");
      if (key != ((1 << 3) | 2)) {
        if (!Skip(&p, end, key, name, depth + 1)) return false;
        continue;
      }
      std::string_view entry;
      if (!ReadLength(&p, end, &entry, name)) return false;
      std::string_view k;
      std::string_view v;
      bool has_v = false;
      const auto* q = reinterpret_cast<const uint8_t*>(entry.data());
      const uint8_t* qe = q + entry.size();
      while (q < qe) {
        uint64_t ek;
        if (!internal::ReadVarint(&q, qe, &ek)) return Fail(name, "truncated tag");
        if (ek == ((1 << 3) | 2)) {
          if (!ReadLength(&q, qe, &k, name)) return false;
        } else if (ek == ((2 << 3) | 2)) {
          if (!ReadLength(&q, qe, &v, name)) return false;
          has_v = true;
        } else if (!Skip(&q, qe, ek, name, depth + 1)) {
          return false;
        }
      }
      if (!internal::ValidUtf8(k)) return Fail(name, "invalid UTF-8");
      if (!first) json_ += ',';
      first = false;
      JsonString(k);
      json_ += ':';
      if (!has_v) {
        json_ += "null";
      } else {
        const auto* vp = reinterpret_cast<const uint8_t*>(v.data());
        if (!JsonValue(vp, vp + v.size(), name, depth + 1)) return false;
      }
    }
    json_ += '}';
    return true;
  }

  bool JsonList(const uint8_t* p, const uint8_t* end, std::string_view name, int depth) {
    if (depth > kMaxPayloadDepth) return Fail(name, "nested too deeply");
    json_ += '[';
    bool first = true;
    while (p < end) {
      uint64_t key;
      if (!internal::ReadVarint(&p, end, &key)) return Fail(name, "truncated tag");
      if (key != ((1 << 3) | 2)) {
        if (!Skip(&p, end, key, name, depth + 1)) return false;
        continue;
      }
      std::string_view v;
      if (!ReadLength(&p, end, &v, name)) return false;
      if (!first) json_ += ',';
      first = false;
      const auto* vp = reinterpret_cast<const uint8_t*>(v.data());
      if (!JsonValue(vp, vp + v.size(), name, depth + 1)) return false;
    }
    json_ += ']';
    return true;
  }

  bool JsonValue(const uint8_t* p, const uint8_t* end, std::string_view name, int depth) {
    if (depth > kMaxPayloadDepth) return Fail(name, "nested too deeply");
    size_t mark = json_.size();
    bool any = false;
    while (p < end) {
      uint64_t key, v;
      if (!internal::ReadVarint(&p, end, &key)) return Fail(name, "truncated tag");
      uint32_t number = static_cast<uint32_t>(key >> 3);
      int wire = static_cast<int>(key & 7);
      if (number < 1 || number > 6) {
        if (!Skip(&p, end, key, name, depth + 1)) return false;
        continue;
      }
      json_.resize(mark);  // a oneof: the last kind wins
      any = true;
      static constexpr int kWire[] = {0, 0, 1, 2, 0, 2, 2};
      if (wire != kWire[number]) return Fail(name, fmt::format("wrong wire type {}", wire));
      if (number == 1 || number == 4) {
        if (!internal::ReadVarint(&p, end, &v)) return Fail(name, "truncated varint");
        json_ += number == 1 ? "null" : v != 0 ? "true" : "false";
      } else if (number == 2) {
        if (end - p < 8) return Fail(name, "truncated double");
        double d;
        std::memcpy(&d, p, 8);
        p += 8;
        if (std::isfinite(d)) {
          fmt::format_to(std::back_inserter(json_), "{}", d);
        } else {
          json_ += "null";
        }
      } else {
        std::string_view b;
        if (!ReadLength(&p, end, &b, name)) return false;
        const auto* bp = reinterpret_cast<const uint8_t*>(b.data());
        if (number == 3) {
          if (!internal::ValidUtf8(b)) return Fail(name, "invalid UTF-8");
          JsonString(b);
        } else if (number == 5) {
          if (!JsonStruct(bp, bp + b.size(), name, depth + 1)) return false;
        } else if (!JsonList(bp, bp + b.size(), name, depth + 1)) {
          return false;
        }
      }
    }
    if (!any) json_ += "null";
    return true;
  }

  void JsonString(std::string_view s) {
    json_ += '"';
    for (char c : s) {
      switch (c) {
        case '"':
          json_ += "\\\"";
          break;
        case '\\':
          json_ += "\\\\";
          break;
        case '\n':
          json_ += "\\n";
          break;
        case '\r':
          json_ += "\\r";
          break;
        case '\t':
          json_ += "\\t";
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            fmt::format_to(std::back_inserter(json_), "\\u{:04x}", static_cast<unsigned char>(c));
          } else {
            json_ += c;
          }
      }
    }
    json_ += '"';
  }

  bool SkipAll(std::string_view b, std::string_view name, int depth) {
    const auto* p = reinterpret_cast<const uint8_t*>(b.data());
    const uint8_t* end = p + b.size();
    while (p < end) {
      uint64_t key;
      if (!internal::ReadVarint(&p, end, &key)) return Fail(name, "truncated tag");
      if (!Skip(&p, end, key, name, depth + 1)) return false;
    }
    return true;
  }

  // Skips the value of `key` (groups to their end).
  bool Skip(const uint8_t** p, const uint8_t* end, uint64_t key, std::string_view name, int depth) {
    uint64_t v;
    switch (key & 7) {
      case 0:
        if (!internal::ReadVarint(p, end, &v)) return Fail(name, "truncated or overlong varint");
        return true;
      case 1:
        if (end - *p < 8) return Fail(name, "truncated fixed64");
        *p += 8;
        return true;
      case 2: {
        std::string_view b;
        return ReadLength(p, end, &b, name);
      }
      case 3: {
        if (depth > kMaxPayloadDepth) return Fail(name, "groups nested too deeply");
        uint64_t number = key >> 3;
        while (true) {
          uint64_t k;
          if (*p >= end) return Fail(name, "unterminated group");
          if (!internal::ReadVarint(p, end, &k)) return Fail(name, "truncated tag");
          if ((k & 7) == 4) {
            if ((k >> 3) != number) return Fail(name, "end-group tag does not match");
            return true;
          }
          if (!Skip(p, end, k, name, depth + 1)) return false;
        }
      }
      case 5:
        if (end - *p < 4) return Fail(name, "truncated fixed32");
        *p += 4;
        return true;
      default:
        return Fail(name, fmt::format("invalid wire type {}", key & 7));
    }
  }

  // Appends one element to list slot `s` for `row` (stamp: whether the row has one yet).
  bool ListAppend(Slot& s, uint64_t row, uint64_t stamp, uint64_t* index) {
    auto* entries = static_cast<duck::ListEntry*>(s.data);
    if (s.seen != stamp) {
      entries[row] = {s.list_size, 0};
      Vector::SetValid(s.validity, row);
      s.seen = stamp;
    } else if (entries[row].offset + entries[row].length != s.list_size) {
      return Fail(s.name, "internal: list elements not contiguous");
    }
    if (!EnsureListRoom(s, s.list_size)) return false;
    *index = s.list_size++;
    ++entries[row].length;
    return true;
  }

  // The fields of one message (at [p, end)) into struct slot `st`'s children at `row`.
  bool DecodeMessage(const uint8_t* p, const uint8_t* end, Slot& st, uint64_t row, uint64_t stamp,
                     int depth, bool group) {
    if (depth > kMaxPayloadDepth) return Fail(st.name, "nested too deeply");
    const Plan& plan = *st.plan;
    while (p < end) {
      uint64_t key;
      if (!internal::ReadVarint(&p, end, &key)) return Fail(st.name, "truncated tag");
      uint64_t number64 = key >> 3;
      uint8_t wire = static_cast<uint8_t>(key & 7);
      if (number64 == 0 || number64 > (1u << 29) - 1)
        return Fail(st.name, fmt::format("bad field number {}", number64));
      const FieldOp* op = plan.Find(static_cast<uint32_t>(number64));
      if (op == nullptr) {
        if (wire == 4) return Fail(st.name, "unexpected end-group tag");
        if (!Skip(&p, end, key, st.name, depth)) return false;
        continue;
      }
      Slot& c = st.children[op->child];
      if (!op->repeated) {
        if (wire != op->wire)
          return Fail(op->name, fmt::format("wrong wire type {} (expected {})", wire, op->wire));
        if (wire == 2) {
          std::string_view b;
          if (!ReadLength(&p, end, &b, op->name)) return false;
          if (!Delimited(*op, op->src, c, row, b, stamp, depth)) return false;
        } else if (!Scalar(op->src, *op, c, row, &p, end)) {
          return false;
        }
        if (op->oneof >= 0) {  // the last member of a oneof wins: the others become absent
          for (uint32_t other : plan.oneofs[op->oneof]) st.children[other].seen = 0;
        }
        c.seen = stamp;
        continue;
      }
      Slot& e = c.children[0];
      uint64_t index;
      if (wire == op->wire) {
        if (!ListAppend(c, row, stamp, &index)) return false;
        if (wire == 2) {
          std::string_view b;
          if (!ReadLength(&p, end, &b, op->name)) return false;
          if (op->src == Src::kMessage) {
            e.seen = 0;  // a new element: no merging
            const auto* q = reinterpret_cast<const uint8_t*>(b.data());
            if (!DecodeMessage(q, q + b.size(), e, index, ++stamp_, depth + 1, false)) return false;
            Vector::SetValid(e.validity, index);
          } else if (!Delimited(*op, op->src, e, index, b, 0, depth)) {
            return false;
          }
        } else if (!Scalar(op->src, *op, e, index, &p, end)) {
          return false;
        }
      } else if (wire == 2 && op->packable) {
        std::string_view b;
        if (!ReadLength(&p, end, &b, op->name)) return false;
        const auto* q = reinterpret_cast<const uint8_t*>(b.data());
        const uint8_t* qe = q + b.size();
        if (c.seen != stamp) {  // an empty packed run still makes the list present
          static_cast<duck::ListEntry*>(c.data)[row] = {c.list_size, 0};
          Vector::SetValid(c.validity, row);
          c.seen = stamp;
        }
        while (q < qe) {
          if (!ListAppend(c, row, stamp, &index)) return false;
          if (!Scalar(op->src, *op, e, index, &q, qe)) return false;
        }
      } else {
        return Fail(op->name, fmt::format("wrong wire type {} (expected {})", wire, op->wire));
      }
    }
    (void)group;
    for (Slot& c : st.children) {
      if (c.seen != stamp) SetAbsent(c, row);
    }
    return true;
  }

 private:
  Slot root_;
  std::vector<std::pair<const EnumType*, std::unique_ptr<EnumNames>>> enums_;
  std::vector<Slot*> lists_;
  std::vector<uint64_t> marks_;
  uint64_t stamp_ = 0;
  std::string error_;
  std::string json_;
};

}  // namespace

Result<std::unique_ptr<RowDecoder>> MakeRowDecoder(const Parsed& writer,
                                                   std::span<const int> message_indexes,
                                                   std::span<const Column> columns) {
  ASSIGN_OR_RETURN(const MessageType* m, FindMessage(writer, message_indexes));
  Builder b;
  b.owner_ = &writer.owner;
  auto owner = writer.owner.find(m);
  b.proto3_ = owner != writer.owner.end() && owner->second->syntax == "proto3";
  Slot root;
  RETURN_IF_ERROR(b.Root(*m, columns, &root));
  auto d = std::make_unique<Decoder>(std::move(root), std::move(b.enum_names_));
  return std::unique_ptr<RowDecoder>(std::move(d));
}

}  // namespace sluice::schema::protobuf
