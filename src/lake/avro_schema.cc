// avro::Schema: the JSON parser (strict, after the Avro 1.11 specification) and writer.
#include "lake/avro_schema.h"

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

namespace sluice::lake::avro {

using Json = nlohmann::ordered_json;

namespace {

constexpr int kMaxJsonDepth = 64;
constexpr int64_t kMaxFixedSize = int64_t{1} << 30;

struct TooDeep {};

bool IsValidName(std::string_view s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s) {
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool IsValidFullName(std::string_view s) {
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (!IsValidName(s.substr(start, dot == std::string_view::npos ? dot : dot - start)))
      return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

std::optional<Type> PrimitiveType(std::string_view s) {
  if (s == "null") return Type::kNull;
  if (s == "boolean") return Type::kBoolean;
  if (s == "int") return Type::kInt;
  if (s == "long") return Type::kLong;
  if (s == "float") return Type::kFloat;
  if (s == "double") return Type::kDouble;
  if (s == "bytes") return Type::kBytes;
  if (s == "string") return Type::kString;
  return std::nullopt;
}

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// Latin-1 code points of a JSON string as bytes (Avro's encoding of bytes and fixed
// defaults); nullopt if a code point is above 255.
std::optional<std::string> Latin1Bytes(const std::string& utf8) {
  std::string out;
  for (size_t i = 0; i < utf8.size(); ++i) {
    auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if ((c & 0xE0) == 0xC0 && i + 1 < utf8.size()) {
      unsigned cp = ((c & 0x1F) << 6) | (static_cast<unsigned char>(utf8[++i]) & 0x3F);
      if (cp > 0xFF) return std::nullopt;
      out.push_back(static_cast<char>(cp));
    } else {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace

std::string_view TypeName(Type type) {
  switch (type) {
    case Type::kNull:
      return "null";
    case Type::kBoolean:
      return "boolean";
    case Type::kInt:
      return "int";
    case Type::kLong:
      return "long";
    case Type::kFloat:
      return "float";
    case Type::kDouble:
      return "double";
    case Type::kBytes:
      return "bytes";
    case Type::kString:
      return "string";
    case Type::kRecord:
      return "record";
    case Type::kEnum:
      return "enum";
    case Type::kArray:
      return "array";
    case Type::kMap:
      return "map";
    case Type::kUnion:
      return "union";
    case Type::kFixed:
      return "fixed";
  }
  return "?";
}

const std::string* FindAttribute(const Attributes& attributes, std::string_view name) {
  for (const Attribute& a : attributes) {
    if (a.name == name) return &a.json;
  }
  return nullptr;
}

std::optional<int64_t> IntAttribute(const Attributes& attributes, std::string_view name) {
  const std::string* text = FindAttribute(attributes, name);
  if (text == nullptr) return std::nullopt;
  Json j = Json::parse(*text, nullptr, false);
  if (!j.is_number_integer()) return std::nullopt;
  if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) {
    return std::nullopt;
  }
  return j.get<int64_t>();
}

std::optional<std::string> StringAttribute(const Attributes& attributes, std::string_view name) {
  const std::string* text = FindAttribute(attributes, name);
  if (text == nullptr) return std::nullopt;
  Json j = Json::parse(*text, nullptr, false);
  if (!j.is_string()) return std::nullopt;
  return j.get<std::string>();
}

const Field* Node::FindField(std::string_view name) const {
  int i = FieldIndex(name);
  return i < 0 ? nullptr : &fields[static_cast<size_t>(i)];
}

int Node::FieldIndex(std::string_view name) const {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

Schema::~Schema() = default;

// Builds a Schema from JSON. One use per schema.
class SchemaParser {
 public:
  Result<Schema> Run(std::string_view text) {
    Json j;
    try {
      Json::parser_callback_t limit = [](int depth, Json::parse_event_t, Json&) {
        if (depth > kMaxJsonDepth) throw TooDeep{};
        return true;
      };
      j = Json::parse(text, limit);
    } catch (const TooDeep&) {
      return InvalidArgumentError("schema: JSON nested deeper than {} levels", kMaxJsonDepth);
    } catch (const Json::exception& e) {
      return InvalidArgumentError("schema: invalid JSON: {}", e.what());
    }
    ASSIGN_OR_RETURN(schema_.root_, ParseType(j, "", "schema"));
    for (const PendingDefault& p : defaults_) {
      Field& f = p.record->fields[p.index];
      auto d = DefaultDatum(*f.type, p.json, 0);
      if (!d.ok()) {
        return InvalidArgumentError("schema: {}.{}: invalid default {}: {}", p.path, f.name,
                                    f.default_json, d.status().message());
      }
      f.default_value = std::move(*d);
    }
    for (const auto& n : schema_.nodes_) MinSize(n.get());
    return std::move(schema_);
  }

 private:
  struct PendingDefault {
    Node* record;
    size_t index;
    Json json;
    std::string path;
  };

  Node* NewNode(Type type) {
    schema_.nodes_.push_back(std::make_unique<Node>());
    schema_.nodes_.back()->type = type;
    return schema_.nodes_.back().get();
  }

  Result<const Node*> ParseType(const Json& j, const std::string& ns, const std::string& path) {
    if (j.is_string()) {
      const std::string& s = j.get_ref<const std::string&>();
      if (auto t = PrimitiveType(s)) return NewNode(*t);
      return Lookup(s, ns, path);
    }
    if (j.is_array()) return ParseUnion(j, ns, path);
    if (!j.is_object()) return InvalidArgumentError("schema: {}: not a schema: {}", path, Dump(j));
    auto type_it = j.find("type");
    if (type_it == j.end())
      return InvalidArgumentError("schema: {}: object without \"type\"", path);
    if (!type_it->is_string()) {
      return ParseType(*type_it, ns, path);  // {"type": {...}} or {"type": [...]}
    }
    const std::string& t = type_it->get_ref<const std::string&>();
    if (auto prim = PrimitiveType(t)) {
      Node* n = NewNode(*prim);
      KeepAttributes(j, {"type"}, &n->attributes);
      return n;
    }
    if (t == "record" || t == "error") return ParseRecord(j, ns, path);
    if (t == "enum") return ParseEnum(j, ns, path);
    if (t == "fixed") return ParseFixed(j, ns, path);
    if (t == "array" || t == "map") {
      const char* key = t == "array" ? "items" : "values";
      auto it = j.find(key);
      if (it == j.end()) return InvalidArgumentError("schema: {}: {} without \"{}\"", path, t, key);
      Node* n = NewNode(t == "array" ? Type::kArray : Type::kMap);
      ASSIGN_OR_RETURN(const Node* child, ParseType(*it, ns, path + "." + key));
      (t == "array" ? n->items : n->values) = child;
      KeepAttributes(j, {"type", key}, &n->attributes);
      return n;
    }
    // {"type": "com.example.Named"}: a reference written as an object.
    return Lookup(t, ns, path);
  }

  Result<const Node*> Lookup(const std::string& name, const std::string& ns,
                             const std::string& path) {
    if (name.find('.') == std::string::npos && !ns.empty()) {
      auto it = named_.find(ns + "." + name);
      if (it != named_.end()) return it->second;
    }
    auto it = named_.find(name);
    if (it != named_.end()) return it->second;
    return InvalidArgumentError("schema: {}: unknown type or unresolved name \"{}\"", path, name);
  }

  Result<const Node*> ParseUnion(const Json& j, const std::string& ns, const std::string& path) {
    Node* n = NewNode(Type::kUnion);
    for (size_t i = 0; i < j.size(); ++i) {
      std::string branch_path = fmt::format("{}[{}]", path, i);
      ASSIGN_OR_RETURN(const Node* b, ParseType(j[i], ns, branch_path));
      if (b->type == Type::kUnion) {
        return InvalidArgumentError("schema: {}: a union cannot contain a union", branch_path);
      }
      for (const Node* other : n->branches) {
        bool same = other->type == b->type && (!b->is_named() || other->full_name == b->full_name);
        if (same) {
          return InvalidArgumentError(
              "schema: {}: union has {} twice", branch_path,
              b->is_named() ? b->full_name : std::string(TypeName(b->type)));
        }
      }
      n->branches.push_back(b);
    }
    if (n->branches.empty()) return InvalidArgumentError("schema: {}: empty union", path);
    return n;
  }

  // Sets the name, namespace and full name of named type `n` and registers it; returns
  // the namespace its children are in.
  Result<std::string> Name(const Json& j, const std::string& ns, const std::string& path, Node* n) {
    auto it = j.find("name");
    if (it == j.end() || !it->is_string()) {
      return InvalidArgumentError("schema: {}: {} without a \"name\"", path, TypeName(n->type));
    }
    n->name = it->get<std::string>();
    auto ns_it = j.find("namespace");
    if (ns_it != j.end() && !ns_it->is_null()) {
      if (!ns_it->is_string())
        return InvalidArgumentError("schema: {}: \"namespace\" is not a string", path);
      n->namespace_ = ns_it->get<std::string>();
      if (!n->namespace_.empty() && !IsValidFullName(n->namespace_)) {
        return InvalidArgumentError("schema: {}: invalid namespace \"{}\"", path, n->namespace_);
      }
    }
    if (!IsValidFullName(n->name))
      return InvalidArgumentError("schema: {}: invalid name \"{}\"", path, n->name);
    std::string child_ns;
    if (n->name.find('.') != std::string::npos) {
      n->full_name = n->name;
      child_ns = n->name.substr(0, n->name.rfind('.'));
    } else {
      child_ns = ns_it != j.end() ? n->namespace_ : ns;
      n->full_name = child_ns.empty() ? n->name : child_ns + "." + n->name;
    }
    std::string_view last = std::string_view(n->full_name).substr(n->full_name.rfind('.') + 1);
    if (PrimitiveType(last)) {
      return InvalidArgumentError("schema: {}: a named type cannot be called \"{}\"", path, last);
    }
    if (!named_.emplace(n->full_name, n).second) {
      return InvalidArgumentError("schema: {}: \"{}\" is defined twice", path, n->full_name);
    }
    auto doc = j.find("doc");
    if (doc != j.end() && doc->is_string()) n->doc = doc->get<std::string>();
    return child_ns;
  }

  Result<const Node*> ParseRecord(const Json& j, const std::string& ns, const std::string& path) {
    Node* n = NewNode(Type::kRecord);
    ASSIGN_OR_RETURN(std::string child_ns, Name(j, ns, path, n));
    std::string rpath = path == "schema" ? n->name : path;
    auto fields = j.find("fields");
    if (fields == j.end() || !fields->is_array()) {
      return InvalidArgumentError("schema: {}: record without a \"fields\" array", rpath);
    }
    for (const Json& fj : *fields) {
      if (!fj.is_object())
        return InvalidArgumentError("schema: {}: a field is not an object", rpath);
      auto name = fj.find("name");
      if (name == fj.end() || !name->is_string() ||
          !IsValidName(name->get_ref<const std::string&>())) {
        return InvalidArgumentError("schema: {}: field without a valid \"name\": {}", rpath,
                                    Dump(fj));
      }
      Field f;
      f.name = name->get<std::string>();
      if (n->FindField(f.name) != nullptr) {
        return InvalidArgumentError("schema: {}: duplicate field \"{}\"", rpath, f.name);
      }
      std::string fpath = rpath + "." + f.name;
      auto type = fj.find("type");
      if (type == fj.end())
        return InvalidArgumentError("schema: {}: field without a \"type\"", fpath);
      ASSIGN_OR_RETURN(f.type, ParseType(*type, child_ns, fpath));
      auto doc = fj.find("doc");
      if (doc != fj.end() && doc->is_string()) f.doc = doc->get<std::string>();
      auto def = fj.find("default");
      if (def != fj.end()) {
        f.default_json = Dump(*def);
        defaults_.push_back({n, n->fields.size(), *def, rpath});
      }
      KeepAttributes(fj, {"name", "type", "doc", "default"}, &f.attributes);
      n->fields.push_back(std::move(f));
    }
    KeepAttributes(j, {"type", "name", "namespace", "doc", "fields"}, &n->attributes);
    return n;
  }

  Result<const Node*> ParseEnum(const Json& j, const std::string& ns, const std::string& path) {
    Node* n = NewNode(Type::kEnum);
    RETURN_IF_ERROR(Name(j, ns, path, n).status());
    auto symbols = j.find("symbols");
    if (symbols == j.end() || !symbols->is_array()) {
      return InvalidArgumentError("schema: {}: enum without a \"symbols\" array", path);
    }
    for (const Json& s : *symbols) {
      if (!s.is_string() || !IsValidName(s.get_ref<const std::string&>())) {
        return InvalidArgumentError("schema: {}: invalid enum symbol {}", path, Dump(s));
      }
      for (const std::string& other : n->symbols) {
        if (other == s.get_ref<const std::string&>()) {
          return InvalidArgumentError("schema: {}: duplicate enum symbol {}", path, Dump(s));
        }
      }
      n->symbols.push_back(s.get<std::string>());
    }
    auto def = j.find("default");
    if (def != j.end()) {
      bool known = def->is_string();
      if (known) {
        n->enum_default = def->get<std::string>();
        known =
            std::find(n->symbols.begin(), n->symbols.end(), n->enum_default) != n->symbols.end();
      }
      if (!known)
        return InvalidArgumentError("schema: {}: enum default {} is not a symbol", path,
                                    Dump(*def));
    }
    KeepAttributes(j, {"type", "name", "namespace", "doc", "symbols", "default"}, &n->attributes);
    return n;
  }

  Result<const Node*> ParseFixed(const Json& j, const std::string& ns, const std::string& path) {
    Node* n = NewNode(Type::kFixed);
    RETURN_IF_ERROR(Name(j, ns, path, n).status());
    auto size = j.find("size");
    if (size == j.end() || !size->is_number_integer() ||
        (size->is_number_unsigned()
             ? size->get<uint64_t>() > uint64_t{kMaxFixedSize}
             : (size->get<int64_t>() < 0 || size->get<int64_t>() > kMaxFixedSize))) {
      return InvalidArgumentError("schema: {}: fixed needs a \"size\" from 0 to {}, got {}", path,
                                  kMaxFixedSize, size == j.end() ? "none" : Dump(*size));
    }
    n->size = size->get<int64_t>();
    KeepAttributes(j, {"type", "name", "namespace", "doc", "size"}, &n->attributes);
    return n;
  }

  static void KeepAttributes(const Json& j, std::initializer_list<std::string_view> known,
                             Attributes* out) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
      out->push_back({it.key(), Dump(it.value())});
    }
  }

  Result<Datum> DefaultDatum(const Node& node, const Json& j, int depth) {
    if (depth > kMaxJsonDepth) return InvalidArgumentError("nested too deeply");
    auto mismatch = [&]() {
      return InvalidArgumentError("{} is not a {}", Dump(j), TypeName(node.type));
    };
    switch (node.type) {
      case Type::kNull:
        if (!j.is_null()) return mismatch();
        return Datum::Null();
      case Type::kBoolean:
        if (!j.is_boolean()) return mismatch();
        return Datum::Boolean(j.get<bool>());
      case Type::kInt:
      case Type::kLong: {
        if (!j.is_number_integer()) return mismatch();
        if (j.is_number_unsigned() &&
            j.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) {
          return mismatch();
        }
        int64_t v = j.get<int64_t>();
        if (node.type == Type::kLong) return Datum::Long(v);
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
          return mismatch();
        return Datum::Int(static_cast<int32_t>(v));
      }
      case Type::kFloat:
      case Type::kDouble:
        if (!j.is_number()) return mismatch();
        return node.type == Type::kFloat ? Datum::Float(j.get<float>())
                                         : Datum::Double(j.get<double>());
      case Type::kString:
        if (!j.is_string()) return mismatch();
        return Datum::String(j.get<std::string>());
      case Type::kBytes:
      case Type::kFixed: {
        if (!j.is_string()) return mismatch();
        auto bytes = Latin1Bytes(j.get_ref<const std::string&>());
        if (!bytes) return InvalidArgumentError("{} has a code point above 255", Dump(j));
        if (node.type == Type::kBytes) return Datum::Bytes(std::move(*bytes));
        if (static_cast<int64_t>(bytes->size()) != node.size) {
          return InvalidArgumentError("{} is not {} bytes long", Dump(j), node.size);
        }
        return Datum::Fixed(std::move(*bytes));
      }
      case Type::kEnum:
        if (!j.is_string() || std::find(node.symbols.begin(), node.symbols.end(),
                                        j.get_ref<const std::string&>()) == node.symbols.end()) {
          return mismatch();
        }
        return Datum::Enum(j.get<std::string>());
      case Type::kArray: {
        if (!j.is_array()) return mismatch();
        std::vector<Datum> items;
        for (const Json& e : j) {
          ASSIGN_OR_RETURN(Datum d, DefaultDatum(*node.items, e, depth + 1));
          items.push_back(std::move(d));
        }
        return Datum::Array(std::move(items));
      }
      case Type::kMap: {
        if (!j.is_object()) return mismatch();
        std::vector<std::pair<std::string, Datum>> entries;
        for (auto it = j.begin(); it != j.end(); ++it) {
          ASSIGN_OR_RETURN(Datum d, DefaultDatum(*node.values, it.value(), depth + 1));
          entries.emplace_back(it.key(), std::move(d));
        }
        return Datum::Map(std::move(entries));
      }
      case Type::kRecord: {
        if (!j.is_object()) return mismatch();
        std::vector<std::pair<std::string, Datum>> fields;
        for (const Field& f : node.fields) {
          auto it = j.find(f.name);
          Datum d;
          if (it != j.end()) {
            ASSIGN_OR_RETURN(d, DefaultDatum(*f.type, *it, depth + 1));
          } else if (!f.default_json.empty()) {
            ASSIGN_OR_RETURN(d, DefaultDatum(*f.type, Json::parse(f.default_json), depth + 1));
          } else {
            return InvalidArgumentError("field \"{}\" missing and without a default", f.name);
          }
          fields.emplace_back(f.name, std::move(d));
        }
        return Datum::Record(std::move(fields));
      }
      case Type::kUnion: {
        // A union's default is a value of its first branch.
        ASSIGN_OR_RETURN(Datum d, DefaultDatum(*node.branches[0], j, depth + 1));
        return std::move(d).WithBranch(0);
      }
    }
    return mismatch();
  }

  // Fills Node::min_size. A record met again while its own size is being computed (a
  // recursive schema) counts as 0 there: min_size is a lower bound.
  int64_t MinSize(Node* n) {
    auto [it, inserted] = min_state_.emplace(n, false);
    if (!inserted) return it->second ? n->min_size : 0;
    int64_t size = 0;
    switch (n->type) {
      case Type::kNull:
        size = 0;
        break;
      case Type::kFloat:
        size = 4;
        break;
      case Type::kDouble:
        size = 8;
        break;
      case Type::kFixed:
        size = n->size;
        break;
      case Type::kRecord:
        for (const Field& f : n->fields) size += MinSize(const_cast<Node*>(f.type));
        break;
      default:
        size = 1;
        break;  // boolean, varints, lengths, counts, union index
    }
    n->min_size = size;
    min_state_[n] = true;
    return size;
  }

  Schema schema_;
  std::map<std::string, Node*, std::less<>> named_;
  std::vector<PendingDefault> defaults_;
  std::map<const Node*, bool> min_state_;  // true once computed
};

Result<Schema> Schema::Parse(std::string_view json) { return SchemaParser().Run(json); }

namespace {

Json ToJsonValue(const Node& n, std::map<const Node*, bool>* written) {
  auto add_attributes = [](const Attributes& attributes, Json* out) {
    for (const Attribute& a : attributes) (*out)[a.name] = Json::parse(a.json);
  };
  if (n.is_named() && written->count(&n)) return n.full_name;
  Json out = Json::object();
  switch (n.type) {
    case Type::kUnion: {
      Json arr = Json::array();
      for (const Node* b : n.branches) arr.push_back(ToJsonValue(*b, written));
      return arr;
    }
    case Type::kArray:
      out["type"] = "array";
      out["items"] = ToJsonValue(*n.items, written);
      break;
    case Type::kMap:
      out["type"] = "map";
      out["values"] = ToJsonValue(*n.values, written);
      break;
    case Type::kRecord:
    case Type::kEnum:
    case Type::kFixed:
      (*written)[&n] = true;
      out["type"] = TypeName(n.type);
      out["name"] = n.name;
      if (!n.namespace_.empty()) out["namespace"] = n.namespace_;
      if (!n.doc.empty()) out["doc"] = n.doc;
      if (n.type == Type::kRecord) {
        Json fields = Json::array();
        for (const Field& f : n.fields) {
          Json fj = Json::object();
          fj["name"] = f.name;
          fj["type"] = ToJsonValue(*f.type, written);
          if (!f.doc.empty()) fj["doc"] = f.doc;
          if (!f.default_json.empty()) fj["default"] = Json::parse(f.default_json);
          add_attributes(f.attributes, &fj);
          fields.push_back(std::move(fj));
        }
        out["fields"] = std::move(fields);
      } else if (n.type == Type::kEnum) {
        out["symbols"] = n.symbols;
        if (!n.enum_default.empty()) out["default"] = n.enum_default;
      } else {
        out["size"] = n.size;
      }
      break;
    default:
      if (n.attributes.empty()) return TypeName(n.type);
      out["type"] = TypeName(n.type);
      break;
  }
  add_attributes(n.attributes, &out);
  return out;
}

}  // namespace

std::string Schema::ToJson() const {
  std::map<const Node*, bool> written;
  return Dump(ToJsonValue(*root_, &written));
}

}  // namespace sluice::lake::avro
