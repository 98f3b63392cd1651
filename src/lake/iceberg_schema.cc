#include "lake/iceberg_schema.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>
#include <unordered_map>

#include "base/strings.h"

namespace sluice::lake {

// --- Type --------------------------------------------------------------------------------

Type Type::Primitive(TypeId id) {
  Type t;
  t.id = id;
  return t;
}

Type Type::Decimal(int32_t precision, int32_t scale) {
  Type t;
  t.id = TypeId::kDecimal;
  t.precision = precision;
  t.scale = scale;
  return t;
}

Type Type::Fixed(int32_t length) {
  Type t;
  t.id = TypeId::kFixed;
  t.length = length;
  return t;
}

Type Type::Struct(std::vector<NestedField> fields) {
  Type t;
  t.id = TypeId::kStruct;
  t.fields = std::move(fields);
  return t;
}

Type Type::List(int32_t element_id, Type element, bool element_required) {
  Type t;
  t.id = TypeId::kList;
  t.fields.push_back(NestedField{element_id, "element", element_required, std::move(element), {}});
  return t;
}

Type Type::Map(int32_t key_id, Type key, int32_t value_id, Type value, bool value_required) {
  Type t;
  t.id = TypeId::kMap;
  t.fields.push_back(NestedField{key_id, "key", true, std::move(key), {}});
  t.fields.push_back(NestedField{value_id, "value", value_required, std::move(value), {}});
  return t;
}

const NestedField& Type::element() const {
  SLUICE_ASSERT(id == TypeId::kList && fields.size() == 1);
  return fields[0];
}

const NestedField& Type::key() const {
  SLUICE_ASSERT(id == TypeId::kMap && fields.size() == 2);
  return fields[0];
}

const NestedField& Type::value() const {
  SLUICE_ASSERT(id == TypeId::kMap && fields.size() == 2);
  return fields[1];
}

bool Type::operator==(const Type& other) const {
  return id == other.id && precision == other.precision && scale == other.scale &&
         length == other.length && fields == other.fields;
}

namespace {

struct PrimitiveName {
  TypeId id;
  std::string_view name;
};

constexpr PrimitiveName kPrimitiveNames[] = {
    {TypeId::kBoolean, "boolean"},
    {TypeId::kInt, "int"},
    {TypeId::kLong, "long"},
    {TypeId::kFloat, "float"},
    {TypeId::kDouble, "double"},
    {TypeId::kDate, "date"},
    {TypeId::kTime, "time"},
    {TypeId::kTimestamp, "timestamp"},
    {TypeId::kTimestampTz, "timestamptz"},
    {TypeId::kTimestampNs, "timestamp_ns"},
    {TypeId::kTimestampTzNs, "timestamptz_ns"},
    {TypeId::kString, "string"},
    {TypeId::kUuid, "uuid"},
    {TypeId::kBinary, "binary"},
};

}  // namespace

std::string Type::ToString() const {
  switch (id) {
    case TypeId::kDecimal:
      return fmt::format("decimal({},{})", precision, scale);
    case TypeId::kFixed:
      return fmt::format("fixed[{}]", length);
    case TypeId::kList:
      return fmt::format("list<{}>", element().type.ToString());
    case TypeId::kMap:
      return fmt::format("map<{}, {}>", key().type.ToString(), value().type.ToString());
    case TypeId::kStruct: {
      std::string out = "struct<";
      for (size_t i = 0; i < fields.size(); ++i) {
        if (i > 0) out += ", ";
        out += fmt::format("{} {}: {}", fields[i].id, fields[i].name, fields[i].type.ToString());
      }
      return out + ">";
    }
    default:
      for (const auto& p : kPrimitiveNames) {
        if (p.id == id) return std::string(p.name);
      }
      return "?";
  }
}

// --- JSON --------------------------------------------------------------------------------

namespace {

// A decimal integer of 1..9 digits (no sign), or nullopt.
std::optional<int32_t> SmallNumber(std::string_view s) {
  s = Trim(s);
  if (s.empty() || s.size() > 9) return std::nullopt;
  int32_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

Result<Type> PrimitiveTypeFromString(std::string_view text) {
  for (const auto& p : kPrimitiveNames) {
    if (p.name == text) return Type::Primitive(p.id);
  }
  if (StartsWith(text, "decimal(") && text.back() == ')') {
    std::string_view inner = text.substr(8, text.size() - 9);
    size_t comma = inner.find(',');
    if (comma != std::string_view::npos) {
      auto p = SmallNumber(inner.substr(0, comma));
      auto s = SmallNumber(inner.substr(comma + 1));
      if (p && s) {
        if (*p < 1 || *p > 38) {
          return InvalidArgumentError("type \"{}\": decimal precision must be 1 to 38", text);
        }
        if (*s > *p) {
          return InvalidArgumentError("type \"{}\": decimal scale is greater than its precision",
                                      text);
        }
        return Type::Decimal(*p, *s);
      }
    }
  }
  if (StartsWith(text, "fixed[") && text.back() == ']') {
    auto l = SmallNumber(text.substr(6, text.size() - 7));
    if (l) {
      if (*l < 1) return InvalidArgumentError("type \"{}\": fixed length must be at least 1", text);
      return Type::Fixed(*l);
    }
  }
  if (text == "unknown" || text == "variant" || StartsWith(text, "geometry") ||
      StartsWith(text, "geography")) {
    return UnimplementedError("type \"{}\" (format v3) is not supported", text);
  }
  return InvalidArgumentError("unknown type \"{}\"", text);
}

Json TypeToJson(const Type& type) {
  switch (type.id) {
    case TypeId::kStruct: {
      Json fields = Json::array();
      for (const NestedField& f : type.fields) {
        Json jf = Json::object();
        jf["id"] = f.id;
        jf["name"] = f.name;
        jf["required"] = f.required;
        jf["type"] = TypeToJson(f.type);
        if (f.doc) jf["doc"] = *f.doc;
        fields.push_back(std::move(jf));
      }
      Json j = Json::object();
      j["type"] = "struct";
      j["fields"] = std::move(fields);
      return j;
    }
    case TypeId::kList: {
      Json j = Json::object();
      j["type"] = "list";
      j["element-id"] = type.element().id;
      j["element"] = TypeToJson(type.element().type);
      j["element-required"] = type.element().required;
      return j;
    }
    case TypeId::kMap: {
      Json j = Json::object();
      j["type"] = "map";
      j["key-id"] = type.key().id;
      j["key"] = TypeToJson(type.key().type);
      j["value-id"] = type.value().id;
      j["value"] = TypeToJson(type.value().type);
      j["value-required"] = type.value().required;
      return j;
    }
    default:
      return type.ToString();
  }
}

namespace {

constexpr int kMaxTypeDepth = 200;  // bounds recursion on hostile input

Result<Type> TypeFromJsonAt(const Json& json, std::string_view path, int depth);

Result<std::vector<NestedField>> StructFieldsFromJson(const JsonObject& obj, int depth) {
  ASSIGN_OR_RETURN(const Json* fields, obj.Array("fields"));
  std::vector<NestedField> out;
  out.reserve(fields->size());
  for (size_t i = 0; i < fields->size(); ++i) {
    std::string path = JsonPath(obj.PathOf("fields"), i);
    ASSIGN_OR_RETURN(JsonObject f, JsonObject::Of((*fields)[i], path));
    NestedField field;
    ASSIGN_OR_RETURN(field.id, f.Int("id"));
    ASSIGN_OR_RETURN(field.name, f.String("name"));
    ASSIGN_OR_RETURN(field.required, f.Bool("required"));
    ASSIGN_OR_RETURN(const Json* type, f.Require("type"));
    ASSIGN_OR_RETURN(field.type, TypeFromJsonAt(*type, f.PathOf("type"), depth + 1));
    ASSIGN_OR_RETURN(field.doc, f.OptString("doc"));
    if (f.Has("initial-default") || f.Has("write-default")) {
      return UnimplementedError("{}: field default values (format v3) are not supported", path);
    }
    out.push_back(std::move(field));
  }
  return out;
}

Result<Type> TypeFromJsonAt(const Json& json, std::string_view path, int depth) {
  if (depth > kMaxTypeDepth) return InvalidArgumentError("{}: types nested too deeply", path);
  if (json.is_string()) {
    auto t = PrimitiveTypeFromString(json.get_ref<const std::string&>());
    if (!t.ok()) return t.status().WithContext(path);
    return t;
  }
  ASSIGN_OR_RETURN(JsonObject obj, JsonObject::Of(json, std::string(path)));
  ASSIGN_OR_RETURN(std::string kind, obj.String("type"));
  if (kind == "struct") {
    ASSIGN_OR_RETURN(auto fields, StructFieldsFromJson(obj, depth));
    return Type::Struct(std::move(fields));
  }
  if (kind == "list") {
    ASSIGN_OR_RETURN(int32_t id, obj.Int("element-id"));
    ASSIGN_OR_RETURN(const Json* e, obj.Require("element"));
    ASSIGN_OR_RETURN(Type element, TypeFromJsonAt(*e, obj.PathOf("element"), depth + 1));
    ASSIGN_OR_RETURN(bool required, obj.Bool("element-required"));
    return Type::List(id, std::move(element), required);
  }
  if (kind == "map") {
    ASSIGN_OR_RETURN(int32_t key_id, obj.Int("key-id"));
    ASSIGN_OR_RETURN(const Json* k, obj.Require("key"));
    ASSIGN_OR_RETURN(Type key, TypeFromJsonAt(*k, obj.PathOf("key"), depth + 1));
    ASSIGN_OR_RETURN(int32_t value_id, obj.Int("value-id"));
    ASSIGN_OR_RETURN(const Json* v, obj.Require("value"));
    ASSIGN_OR_RETURN(Type value, TypeFromJsonAt(*v, obj.PathOf("value"), depth + 1));
    ASSIGN_OR_RETURN(bool value_required, obj.Bool("value-required"));
    return Type::Map(key_id, std::move(key), value_id, std::move(value), value_required);
  }
  return InvalidArgumentError("{}: unknown nested type \"{}\" (expected struct, list or map)",
                              obj.PathOf("type"), kind);
}

}  // namespace

Result<Type> TypeFromJson(const Json& json, std::string_view path) {
  return TypeFromJsonAt(json, path, 0);
}

Json SchemaToJson(const Schema& schema) {
  Json j = Json::object();
  j["type"] = "struct";
  j["schema-id"] = schema.schema_id;
  if (!schema.identifier_field_ids.empty()) j["identifier-field-ids"] = schema.identifier_field_ids;
  j["fields"] = TypeToJson(schema.AsStruct())["fields"];
  return j;
}

Result<Schema> SchemaFromJson(const Json& json, std::string_view path, bool require_schema_id) {
  ASSIGN_OR_RETURN(JsonObject obj, JsonObject::Of(json, std::string(path)));
  ASSIGN_OR_RETURN(std::string kind, obj.String("type"));
  if (kind != "struct") {
    return InvalidArgumentError("{}: a schema must have type \"struct\", not \"{}\"",
                                obj.PathOf("type"), kind);
  }
  Schema schema;
  if (require_schema_id) {
    ASSIGN_OR_RETURN(schema.schema_id, obj.Int("schema-id"));
  } else {
    ASSIGN_OR_RETURN(auto id, obj.OptInt("schema-id"));
    schema.schema_id = id.value_or(0);
  }
  if (const Json* ids = obj.Get("identifier-field-ids")) {
    ASSIGN_OR_RETURN(schema.identifier_field_ids,
                     JsonToIntList(*ids, obj.PathOf("identifier-field-ids")));
  }
  ASSIGN_OR_RETURN(schema.fields, StructFieldsFromJson(obj, 0));
  return schema;
}

// --- Lookups -----------------------------------------------------------------------------

namespace {

// Calls fn(field, dotted_name) for every field in pre-order; stops when fn returns true.
template <typename Fn>
bool Walk(const std::vector<NestedField>& fields, const std::string& prefix, Fn& fn) {
  for (const NestedField& f : fields) {
    std::string name = prefix.empty() ? f.name : prefix + "." + f.name;
    if (fn(f, name)) return true;
    if (f.type.is_nested() && Walk(f.type.fields, name, fn)) return true;
  }
  return false;
}

}  // namespace

const NestedField* Schema::FindField(int32_t id) const {
  const NestedField* found = nullptr;
  auto fn = [&](const NestedField& f, const std::string&) {
    if (f.id != id) return false;
    found = &f;
    return true;
  };
  Walk(fields, "", fn);
  return found;
}

const NestedField* Schema::FindField(std::string_view dotted_name) const {
  const NestedField* found = nullptr;
  auto fn = [&](const NestedField& f, const std::string& name) {
    if (name != dotted_name) return false;
    found = &f;
    return true;
  };
  Walk(fields, "", fn);
  return found;
}

std::string Schema::FindName(int32_t id) const {
  std::string found;
  auto fn = [&](const NestedField& f, const std::string& name) {
    if (f.id != id) return false;
    found = name;
    return true;
  };
  Walk(fields, "", fn);
  return found;
}

int32_t Schema::HighestFieldId() const {
  int32_t highest = 0;
  auto fn = [&](const NestedField& f, const std::string&) {
    highest = std::max(highest, f.id);
    return false;
  };
  Walk(fields, "", fn);
  return highest;
}

// --- Validation --------------------------------------------------------------------------

namespace {

Status ValidateFields(const std::vector<NestedField>& fields, const std::string& prefix,
                      std::set<int32_t>* ids) {
  std::set<std::string_view> names;
  for (const NestedField& f : fields) {
    std::string name = prefix.empty() ? f.name : prefix + "." + f.name;
    if (f.id < 0 || f.id > kMaxUserFieldId) {
      return InvalidArgumentError("field \"{}\": id {} is outside 0..{}", name, f.id,
                                  kMaxUserFieldId);
    }
    if (!ids->insert(f.id).second) {
      return InvalidArgumentError("field \"{}\": id {} is used by more than one field", name, f.id);
    }
    if (!names.insert(f.name).second) {
      return InvalidArgumentError("field \"{}\": the name appears twice in its struct", name);
    }
    const Type& t = f.type;
    if (t.id == TypeId::kDecimal &&
        (t.precision < 1 || t.precision > 38 || t.scale < 0 || t.scale > t.precision)) {
      return InvalidArgumentError("field \"{}\": invalid {}", name, t.ToString());
    }
    if (t.id == TypeId::kFixed && t.length < 1) {
      return InvalidArgumentError("field \"{}\": invalid {}", name, t.ToString());
    }
    if (t.id == TypeId::kMap && !t.key().required) {
      return InvalidArgumentError("field \"{}\": map keys must be required", name);
    }
    if (t.is_nested()) RETURN_IF_ERROR(ValidateFields(t.fields, name, ids));
  }
  return Status::OK();
}

// The chain of fields from the top level down to the field with `id`, or empty.
bool PathTo(const std::vector<NestedField>& fields, int32_t id,
            std::vector<const NestedField*>* chain) {
  for (const NestedField& f : fields) {
    chain->push_back(&f);
    if (f.id == id) return true;
    if (f.type.is_nested() && PathTo(f.type.fields, id, chain)) return true;
    chain->pop_back();
  }
  return false;
}

}  // namespace

Status Schema::Validate() const {
  std::set<int32_t> ids;
  RETURN_IF_ERROR(
      ValidateFields(fields, "", &ids).WithContext(fmt::format("schema {}", schema_id)));
  std::set<int32_t> seen;
  for (int32_t id : identifier_field_ids) {
    if (!seen.insert(id).second) {
      return InvalidArgumentError("schema {}: identifier field id {} is listed twice", schema_id,
                                  id);
    }
    std::vector<const NestedField*> chain;
    if (!PathTo(fields, id, &chain)) {
      return InvalidArgumentError("schema {}: identifier field id {} is not in the schema",
                                  schema_id, id);
    }
    const NestedField& f = *chain.back();
    std::string name = FindName(id);
    if (!f.type.is_primitive()) {
      return InvalidArgumentError("schema {}: identifier field \"{}\" is not a primitive type",
                                  schema_id, name);
    }
    if (f.type.id == TypeId::kFloat || f.type.id == TypeId::kDouble) {
      return InvalidArgumentError("schema {}: identifier field \"{}\" cannot be {}", schema_id,
                                  name, f.type.ToString());
    }
    for (const NestedField* link : chain) {
      if (!link->required) {
        return InvalidArgumentError(
            "schema {}: identifier field \"{}\" must be required and not inside an optional struct",
            schema_id, name);
      }
      if (link != chain.back() && link->type.id != TypeId::kStruct) {
        return InvalidArgumentError(
            "schema {}: identifier field \"{}\" cannot be inside a list or map", schema_id, name);
      }
    }
  }
  return Status::OK();
}

// --- Fresh ids ---------------------------------------------------------------------------

namespace {

void AssignFresh(std::vector<NestedField>* fields, int32_t* next_id,
                 std::vector<std::pair<int32_t, int32_t>>* mapping) {
  for (NestedField& f : *fields) {
    mapping->emplace_back(f.id, *next_id);
    f.id = (*next_id)++;
  }
  for (NestedField& f : *fields) {
    if (f.type.is_nested()) AssignFresh(&f.type.fields, next_id, mapping);
  }
}

}  // namespace

Schema AssignFreshIds(const Schema& schema, int32_t* next_id,
                      std::vector<std::pair<int32_t, int32_t>>* old_to_new) {
  Schema out = schema;
  std::vector<std::pair<int32_t, int32_t>> mapping;
  AssignFresh(&out.fields, next_id, &mapping);
  std::unordered_map<int32_t, int32_t> by_old(mapping.begin(), mapping.end());
  for (int32_t& id : out.identifier_field_ids) {
    auto it = by_old.find(id);
    if (it != by_old.end()) id = it->second;
  }
  if (old_to_new != nullptr) *old_to_new = std::move(mapping);
  return out;
}

}  // namespace sluice::lake
