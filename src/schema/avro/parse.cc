// Parse (with references spliced in before the schema), Canonical, Normalized, Fingerprint.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "schema/avro/avro_format.h"
#include "schema/avro/avro_types.h"

namespace sluice::schema::avro {

using Json = nlohmann::ordered_json;
using lake::avro::Attribute;
using lake::avro::Field;

namespace {

// The record the references and the schema are parsed in, as its fields, so that the
// lake parser sees every named type defined before it is used. Its name never shows.
constexpr std::string_view kWrapper = "__sluice_references__";
constexpr int kMaxJsonDepth = 64;

struct TooDeep {};

Result<Json> ParseJson(std::string_view text, std::string_view what) {
  try {
    Json::parser_callback_t limit = [](int depth, Json::parse_event_t, Json&) {
      if (depth > kMaxJsonDepth) throw TooDeep{};
      return true;
    };
    return Json::parse(text, limit);
  } catch (const TooDeep&) {
    return InvalidArgumentError("{}: JSON nested deeper than {} levels", what, kMaxJsonDepth);
  } catch (const Json::exception& e) {
    return InvalidArgumentError("{}: invalid JSON: {}", what, e.what());
  }
}

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  size_t at = 0;
  while ((at = s->find(from, at)) != std::string::npos) {
    s->replace(at, from.size(), to);
    at += to.size();
  }
}

void CollectNamed(const Node* n, std::set<const Node*>* out) {
  if (n->is_named() && !out->insert(n).second) return;
  for (const Field& f : n->fields) CollectNamed(f.type, out);
  for (const Node* b : n->branches) CollectNamed(b, out);
  if (n->items != nullptr) CollectNamed(n->items, out);
  if (n->values != nullptr) CollectNamed(n->values, out);
}

}  // namespace

Parsed::~Parsed() = default;

bool Parsed::IsReferenced(const Node* n) const {
  return std::find(referenced_.begin(), referenced_.end(), n) != referenced_.end();
}

Result<Parsed> Parse(std::string_view schema_text, const std::vector<Reference>& refs) {
  Parsed p;
  if (refs.empty()) {
    ASSIGN_OR_RETURN(lake::avro::Schema s, lake::avro::Schema::Parse(schema_text));
    p.schema_ = std::make_unique<lake::avro::Schema>(std::move(s));
    p.root_ = &p.schema_->root();
    return p;
  }
  // Each text is checked to be one JSON value on its own, then they are put together as
  // values: no text can reach into another.
  Json fields = Json::array();
  std::vector<std::string> seen;
  std::vector<std::pair<std::string, std::string>> renames;
  for (const Reference& r : refs) {
    if (std::find(seen.begin(), seen.end(), r.schema_text) != seen.end()) continue;
    seen.push_back(r.schema_text);
    std::string field = fmt::format("ref{}", fields.size());
    ASSIGN_OR_RETURN(Json j, ParseJson(r.schema_text, fmt::format("reference \"{}\"", r.name)));
    fields.push_back(Json{{"name", field}, {"type", std::move(j)}});
    renames.emplace_back(fmt::format("{}.{}", kWrapper, field),
                         fmt::format("(reference \"{}\")", r.name));
  }
  ASSIGN_OR_RETURN(Json main, ParseJson(schema_text, "schema"));
  fields.push_back(Json{{"name", "main"}, {"type", std::move(main)}});
  renames.emplace_back(fmt::format("{}.main", kWrapper), "(schema)");
  Json wrapper{{"type", "record"}, {"name", kWrapper}, {"fields", std::move(fields)}};
  auto parsed = lake::avro::Schema::Parse(wrapper.dump());
  if (!parsed.ok()) {
    std::string message = parsed.status().message();
    for (auto it = renames.rbegin(); it != renames.rend(); ++it) {
      ReplaceAll(&message, it->first, it->second);
    }
    return Status(parsed.status().code(), message);
  }
  p.schema_ = std::make_unique<lake::avro::Schema>(std::move(*parsed));
  const Node& w = p.schema_->root();
  p.root_ = w.fields.back().type;
  std::set<const Node*> named;
  for (size_t i = 0; i + 1 < w.fields.size(); ++i) CollectNamed(w.fields[i].type, &named);
  p.referenced_.assign(named.begin(), named.end());
  return p;
}

namespace {

// Writes a schema as JSON text, in the canonical or the normalized form.
class SchemaWriter {
 public:
  SchemaWriter(const Parsed& p, bool normalized) : parsed_(p), normalized_(normalized) {}

  std::string Run() {
    Write(parsed_.root(), "");
    return std::move(out_);
  }

 private:
  void Str(std::string_view s) { AppendJsonString(s, &out_); }
  void Key(std::string_view k) {
    Str(k);
    out_ += ':';
  }

  // An attribute's JSON text as kept, or re-dumped with sorted keys (normalized).
  std::string Value(const std::string& json) {
    if (!normalized_) return json;
    nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
    if (j.is_discarded()) return json;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  // Attributes other than those listed in `skip`, in written order (canonical) or sorted.
  void Attributes(const lake::avro::Attributes& attrs,
                  std::initializer_list<std::string_view> skip) {
    std::vector<const Attribute*> list;
    for (const Attribute& a : attrs) {
      if (std::find(skip.begin(), skip.end(), a.name) == skip.end()) list.push_back(&a);
    }
    if (normalized_) {
      std::sort(list.begin(), list.end(),
                [](const Attribute* a, const Attribute* b) { return a->name < b->name; });
    }
    for (const Attribute* a : list) {
      if (normalized_ && a->name == "order" && a->json == "\"ascending\"") continue;
      out_ += ',';
      Key(a->name);
      out_ += Value(a->json);
    }
  }

  // Normalized: "aliases" of a named type as full names, sorted; of a field, sorted.
  void Aliases(const lake::avro::Attributes& attrs, std::string_view ns) {
    const std::string* text = lake::avro::FindAttribute(attrs, "aliases");
    if (text == nullptr) return;
    Json j = Json::parse(*text, nullptr, false);
    if (!j.is_array()) return;
    std::vector<std::string> names;
    for (const Json& a : j) {
      if (!a.is_string()) continue;
      std::string name = a.get<std::string>();
      if (!ns.empty() && name.find('.') == std::string::npos) name = std::string(ns) + "." + name;
      names.push_back(std::move(name));
    }
    std::sort(names.begin(), names.end());
    out_ += ",\"aliases\":[";
    for (size_t i = 0; i < names.size(); ++i) {
      if (i > 0) out_ += ',';
      Str(names[i]);
    }
    out_ += ']';
  }

  void Write(const Node& n, std::string_view ns) {
    if (n.is_named() && (written_.count(&n) > 0 || parsed_.IsReferenced(&n))) {
      Str(normalized_ || NamespaceOf(n) != ns ? std::string_view(n.full_name) : SimpleName(n));
      return;
    }
    switch (n.type) {
      case Type::kUnion:
        out_ += '[';
        for (size_t i = 0; i < n.branches.size(); ++i) {
          if (i > 0) out_ += ',';
          Write(*n.branches[i], ns);
        }
        out_ += ']';
        return;
      case Type::kArray:
      case Type::kMap:
        out_ += "{\"type\":";
        Str(n.type == Type::kArray ? "array" : "map");
        out_ += n.type == Type::kArray ? ",\"items\":" : ",\"values\":";
        Write(n.type == Type::kArray ? *n.items : *n.values, ns);
        Attributes(n.attributes, {});
        out_ += '}';
        return;
      case Type::kRecord:
      case Type::kEnum:
      case Type::kFixed:
        WriteNamed(n, ns);
        return;
      default:
        if (n.attributes.empty()) {
          Str(lake::avro::TypeName(n.type));
          return;
        }
        out_ += "{\"type\":";
        Str(lake::avro::TypeName(n.type));
        Attributes(n.attributes, {});
        out_ += '}';
        return;
    }
  }

  void WriteNamed(const Node& n, std::string_view ns) {
    written_.insert(&n);
    std::string_view own_ns = NamespaceOf(n);
    out_ += "{\"type\":";
    Str(lake::avro::TypeName(n.type));
    out_ += ",\"name\":";
    if (normalized_) {
      Str(n.full_name);
    } else {
      Str(SimpleName(n));
      if (own_ns != ns) {
        out_ += ",\"namespace\":";
        Str(own_ns);
      }
    }
    if (!n.doc.empty()) {
      out_ += ",\"doc\":";
      Str(n.doc);
    }
    if (n.type == Type::kRecord) {
      out_ += ",\"fields\":[";
      for (size_t i = 0; i < n.fields.size(); ++i) {
        const Field& f = n.fields[i];
        if (i > 0) out_ += ',';
        out_ += "{\"name\":";
        Str(f.name);
        out_ += ",\"type\":";
        Write(*f.type, own_ns);
        if (!f.doc.empty()) {
          out_ += ",\"doc\":";
          Str(f.doc);
        }
        if (!f.default_json.empty()) {
          out_ += ",\"default\":";
          out_ += Value(f.default_json);
        }
        if (normalized_) {
          Aliases(f.attributes, "");
          Attributes(f.attributes, {"aliases"});
        } else {
          Attributes(f.attributes, {});
        }
        out_ += '}';
      }
      out_ += ']';
    } else if (n.type == Type::kEnum) {
      out_ += ",\"symbols\":[";
      for (size_t i = 0; i < n.symbols.size(); ++i) {
        if (i > 0) out_ += ',';
        Str(n.symbols[i]);
      }
      out_ += ']';
      if (!n.enum_default.empty()) {
        out_ += ",\"default\":";
        Str(n.enum_default);
      }
    } else {
      out_ += fmt::format(",\"size\":{}", n.size);
    }
    if (normalized_) {
      Aliases(n.attributes, own_ns);
      Attributes(n.attributes, {"aliases"});
    } else {
      Attributes(n.attributes, {});
    }
    out_ += '}';
  }

  const Parsed& parsed_;
  const bool normalized_;
  std::set<const Node*> written_;
  std::string out_;
};

}  // namespace

std::string Canonical(const Parsed& schema) { return SchemaWriter(schema, false).Run(); }

std::string Normalized(const Parsed& schema) { return SchemaWriter(schema, true).Run(); }

uint64_t Fingerprint(const Parsed& schema) {
  uint64_t h = 14695981039346656037ull;
  for (char c : Normalized(schema)) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace sluice::schema::avro
