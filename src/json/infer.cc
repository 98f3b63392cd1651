// Schema inference: the InferNode tree, merging messages into it, and its types.
#include "json/infer.h"

#include <fmt/format.h>

#include "duck/database.h"
#include "duck/json_type.h"
#include "json/text.h"

namespace sluice::json {

namespace od = simdjson::ondemand;

int InferNode::Find(std::string_view key) const {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == key) return static_cast<int>(i);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (EqualsIgnoreCase(names[i], key)) return static_cast<int>(i);
  }
  return -1;
}

std::string InferNode::Sql(InferredTypes types) const {
  if (types == InferredTypes::kFlat) {
    switch (kind) {
      case Kind::kBool:
        return "BOOLEAN";
      case Kind::kNumber:
        return saw_fraction ? "DOUBLE" : "BIGINT";
      case Kind::kString:
        return "VARCHAR";
      case Kind::kText:
        return saw_nested ? "JSON" : "VARCHAR";
      default:
        return "JSON";  // null only, objects, arrays
    }
  }
  // kNested: numbers are DOUBLE; strings, conflicts, all-null and empty objects VARCHAR.
  switch (kind) {
    case Kind::kBool:
      return "BOOLEAN";
    case Kind::kNumber:
      return "DOUBLE";
    case Kind::kObject: {
      if (names.empty()) return "VARCHAR";
      std::string out = "STRUCT(";
      for (size_t i = 0; i < names.size(); ++i) {
        if (i > 0) out += ", ";
        out += duck::QuoteIdentifier(names[i]) + " " + fields[i]->Sql(types);
      }
      return out + ")";
    }
    case Kind::kArray:
      return (element ? element->Sql(types) : std::string("VARCHAR")) + "[]";
    default:
      return "VARCHAR";
  }
}

duck::LogicalType InferNode::Type(InferredTypes types) const {
  if (types == InferredTypes::kFlat) {
    switch (kind) {
      case Kind::kBool:
        return duck::LogicalType::Boolean();
      case Kind::kNumber:
        return saw_fraction ? duck::LogicalType::Double() : duck::LogicalType::BigInt();
      case Kind::kString:
        return duck::LogicalType::Varchar();
      case Kind::kText:
        return saw_nested ? duck::JsonType() : duck::LogicalType::Varchar();
      default:
        return duck::JsonType();
    }
  }
  switch (kind) {
    case Kind::kBool:
      return duck::LogicalType::Boolean();
    case Kind::kNumber:
      return duck::LogicalType::Double();
    case Kind::kObject: {
      if (names.empty()) return duck::LogicalType::Varchar();
      std::vector<duck::LogicalType> children;
      for (const auto& f : fields) children.push_back(f->Type(types));
      return duck::LogicalType::Struct(names, children);
    }
    case Kind::kArray:
      return duck::LogicalType::List(element ? element->Type(types) : duck::LogicalType::Varchar());
    default:
      return duck::LogicalType::Varchar();
  }
}

void Inferrer::Reset() {
  root_ = InferNode();
  root_.kind = InferNode::Kind::kObject;
  refused_by_order_ = false;
}

bool Inferrer::Merge(const Inferrer& later) {
  // This tree's refusals are what one pass would refuse (it began where one pass does);
  // the later one began empty, and a value it refused might have been taken by one pass.
  if (later.refused_by_order_) return false;
  return MergeNode(root_, later.root_, /*top=*/true);
}

// The join of what `n` and `from` saw at one place, the same lattice Observe climbs: null
// below every kind, two different kinds text; names (unique ignoring case) in the order
// first seen, this tree's first.
bool Inferrer::MergeNode(InferNode& n, const InferNode& from, bool top) {
  using Kind = InferNode::Kind;
  n.saw_nested = n.saw_nested || from.saw_nested;
  n.saw_fraction = n.saw_fraction || from.saw_fraction;
  if (from.kind != Kind::kNull && n.kind != from.kind && n.kind != Kind::kText) {
    n.kind = n.kind == Kind::kNull ? from.kind : Kind::kText;
  }
  if (n.kind == Kind::kText) return true;  // what is inside no longer matters
  if (from.kind == Kind::kArray && from.element) {
    if (!n.element) n.element = std::make_unique<InferNode>();
    return MergeNode(*n.element, *from.element, false);
  }
  if (from.kind != Kind::kObject) return true;
  for (size_t i = 0; i < from.names.size(); ++i) {
    int idx = n.Find(from.names[i]);
    if (idx < 0) {
      if (n.names.size() >= (top ? limits_.max_columns : limits_.max_struct_fields)) {
        if (top) return false;
        n.kind = Kind::kText;  // too wide for a struct: its JSON text
        return true;
      }
      n.names.push_back(from.names[i]);
      n.fields.push_back(std::make_unique<InferNode>());
      idx = static_cast<int>(n.names.size() - 1);
    }
    if (!MergeNode(*n.fields[idx], *from.fields[i], false)) return false;
  }
  return true;
}

bool Inferrer::ObserveMessage(od::object obj, std::string* reason) {
  undo_.clear();
  validator_->error().Clear();
  bool ok = ObserveFields(root_, obj, 0, /*top=*/true);
  if (!ok) {
    *reason = top_error_.empty() ? validator_->error().Reason() : std::move(top_error_);
    top_error_.clear();
    Undo();
  }
  return ok;
}

void Inferrer::Undo() {
  for (size_t i = undo_.size(); i-- > 0;) {
    Change& c = undo_[i];
    c.node->kind = c.kind;
    c.node->saw_nested = c.saw_nested;
    c.node->saw_fraction = c.saw_fraction;
    c.node->names.resize(c.field_count);
    c.node->fields.resize(c.field_count);
  }
  undo_.clear();
}

inline bool Inferrer::IsReserved(std::string_view key) const {
  for (std::string_view r : limits_.reserved) {
    if (EqualsIgnoreCase(r, key)) return true;
  }
  return false;
}

inline bool Inferrer::ObserveFields(InferNode& n, od::object obj, int depth, bool top) {
  size_t hint = 0;  // producers keep key order: the field after the last one is tried first
  for (auto field_result : obj) {
    if (auto e = field_result.error(); e) return Syntax(e);
    od::field& field = field_result.value_unsafe();  // not moved: see FillObject
    std::string_view key;
    if (auto e = field.unescaped_key().get(key); e) return Syntax(e);
    // The caller's own columns (the pipeline's kafka_ columns come from the message's
    // metadata), and an empty name cannot be a column: such keys are checked and skipped.
    if (key.empty() || (top && IsReserved(key))) {
      if (!validator_->SkipValidated(field.value(), depth + 1)) return Path(key);
      continue;
    }
    // Names are unique ignoring case, so an exact match at the hint is the one Find gives.
    int idx = hint < n.names.size() && n.names[hint] == key ? static_cast<int>(hint) : n.Find(key);
    if (idx < 0) {
      size_t limit = top ? limits_.max_columns : limits_.max_struct_fields;
      if (n.names.size() >= limit) {
        if (top && !limits_.drop_extra_columns) {
          refused_by_order_ = true;
          top_error_ = fmt::format(
              "key '{}': the batch already has {} columns, the most "
              "an inferred batch may have",
              key, limit);
          return false;
        }
        // Too wide for a struct: the object is kept as its JSON text. Too many columns,
        // when dropping: the key is left out.
        if (!top) SetKind(n, InferNode::Kind::kText);
        if (!validator_->SkipValidated(field.value(), depth + 1)) return Path(key);
        continue;
      }
      Log(n);
      n.names.emplace_back(key);
      n.fields.push_back(std::make_unique<InferNode>());
      idx = static_cast<int>(n.names.size() - 1);
    }
    hint = static_cast<size_t>(idx) + 1;
    if (n.kind == InferNode::Kind::kText) {
      if (!validator_->SkipValidated(field.value(), depth + 1)) return Path(key);
      continue;
    }
    if (!Observe(*n.fields[idx], field.value(), depth + 1)) return Path(key);
  }
  return true;
}

inline bool Inferrer::Observe(InferNode& n, od::value& v, int depth) {
  if (depth > validator_->max_depth()) return Syntax(simdjson::DEPTH_ERROR);
  od::json_type t;
  if (auto e = v.type().get(t); e) return Syntax(e);
  InferNode::Kind k = InferNode::Kind::kNull;
  switch (t) {
    case od::json_type::null:
      k = InferNode::Kind::kNull;
      break;
    case od::json_type::boolean:
      k = InferNode::Kind::kBool;
      break;
    case od::json_type::number:
      k = InferNode::Kind::kNumber;
      break;
    case od::json_type::string:
      k = InferNode::Kind::kString;
      break;
    case od::json_type::object:
      k = InferNode::Kind::kObject;
      break;
    case od::json_type::array:
      k = InferNode::Kind::kArray;
      break;
  }
  if (k != InferNode::Kind::kNull && n.kind != k && n.kind != InferNode::Kind::kText) {
    if (n.kind == InferNode::Kind::kNull) {
      SetKind(n, k);
    } else {
      SetKind(n, InferNode::Kind::kText);  // conflicting types: VARCHAR
    }
  }
  const bool nested = k == InferNode::Kind::kObject || k == InferNode::Kind::kArray;
  if (limits_.types == InferredTypes::kFlat) {
    // Objects and arrays are JSON: what is inside them does not matter.
    if (nested && !n.saw_nested) {
      Log(n);
      n.saw_nested = true;
    }
    if (k == InferNode::Kind::kNumber && n.kind != InferNode::Kind::kText) {
      return ObserveNumber(n, v);
    }
    return validator_->SkipValidated(v, depth);
  }
  if (n.kind == InferNode::Kind::kObject && depth > limits_.max_struct_depth) {
    SetKind(n, InferNode::Kind::kText);
  }
  if (n.kind == InferNode::Kind::kText || !nested) {
    if (k == InferNode::Kind::kNumber && n.kind != InferNode::Kind::kText) {
      return ObserveNumber(n, v);
    }
    return validator_->SkipValidated(v, depth);
  }
  if (k == InferNode::Kind::kObject) {
    od::object obj;
    if (auto e = v.get_object().get(obj); e) return Syntax(e);
    return ObserveFields(n, obj, depth, false);
  }
  // An array: every element merges into one element node.
  od::array arr;
  if (auto e = v.get_array().get(arr); e) return Syntax(e);
  if (!n.element) n.element = std::make_unique<InferNode>();
  size_t i = 0;
  for (auto elem_result : arr) {
    if (auto e = elem_result.error(); e) return Syntax(e);
    od::value& elem = elem_result.value_unsafe();
    if (!Observe(*n.element, elem, depth + 1)) {
      validator_->error().path.push_back(fmt::format("[{}]", i));
      return false;
    }
    ++i;
  }
  return true;
}

inline bool Inferrer::ObserveNumber(InferNode& n, od::value& v) {
  if (validator_->lenient()) {
    // As simdjson's DOM reads numbers: one it cannot read makes the message unreadable.
    od::number num;
    if (v.get_number().get(num) != simdjson::SUCCESS) {
      std::string_view token = TrimRight(v.raw_json_token());
      top_error_.clear();
      refused_by_order_ = true;  // (lenient readers do not merge parts; kept to be safe)
      validator_->error().problem = fmt::format("unreadable number {}", Excerpt(token));
      return false;
    }
    if (!num.is_int64() && !n.saw_fraction) {
      Log(n);
      n.saw_fraction = true;
    }
    return true;
  }
  if (limits_.types == InferredTypes::kFlat) {
    int64_t x;
    if (v.get_int64().get(x) == simdjson::SUCCESS) return true;
    if (!n.saw_fraction) {
      Log(n);
      n.saw_fraction = true;
    }
  }
  // kNested numbers become DOUBLE: one out of its range cannot be stored.
  double d;
  if (v.get_double().get(d) != simdjson::SUCCESS) {
    std::string_view token = TrimRight(v.raw_json_token());
    top_error_.clear();
    // Out of range only here: one pass does not read the number once the key is text (a
    // token that is no number at all is refused there too, for the same reason).
    if (IsJsonNumber(token)) refused_by_order_ = true;
    validator_->error().problem = IsJsonNumber(token)
                                      ? fmt::format("{} is out of range for DOUBLE", token)
                                      : fmt::format("invalid number {}", Excerpt(token));
    return false;
  }
  return true;
}

inline bool Inferrer::Path(std::string_view key) {
  validator_->error().path.emplace_back(key);
  return false;
}

inline bool Inferrer::Syntax(simdjson::error_code e) {
  validator_->error().problem = fmt::format("invalid JSON: {}", simdjson::error_message(e));
  return false;
}

}  // namespace sluice::json
