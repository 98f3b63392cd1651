// Incompatibilities: Avro's schema resolution rules (the specification's "Schema
// Resolution", as Java's SchemaCompatibility applies them for Confluent), reader against
// writer, with a JSON-pointer-like location for each problem.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "schema/avro/avro_format.h"
#include "schema/avro/avro_types.h"

namespace sluice::schema::avro {

using lake::avro::Field;

namespace {

std::vector<std::string> AliasesOf(const lake::avro::Attributes& attrs) {
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

// Named types match by unqualified name, as the specification and Java's
// SchemaCompatibility.schemaNameEquals have it, or by a reader alias naming the writer.
bool NamesMatch(const Node& reader, const Node& writer) {
  if (SimpleName(reader) == SimpleName(writer)) return true;
  std::string_view ns = NamespaceOf(reader);
  for (const std::string& a : AliasesOf(reader.attributes)) {
    std::string full =
        a.find('.') == std::string::npos && !ns.empty() ? fmt::format("{}.{}", ns, a) : a;
    if (full == writer.full_name || a == SimpleName(writer)) return true;
  }
  return false;
}

const Field* WriterField(const Node& writer, const Field& reader_field) {
  if (const Field* f = writer.FindField(reader_field.name)) return f;
  for (const std::string& a : AliasesOf(reader_field.attributes)) {
    if (const Field* f = writer.FindField(a)) return f;
  }
  return nullptr;
}

std::string TypeWord(const Node& n) {
  return n.is_named() ? n.full_name : std::string(lake::avro::TypeName(n.type));
}

class Checker {
 public:
  std::vector<std::string> Run(const Node& reader, const Node& writer) {
    Check(reader, writer);
    return std::move(problems_);
  }

 private:
  void Add(std::string_view type, std::string what, std::string_view last = "") {
    std::string at;
    for (const std::string& s : location_) {
      at += '/';
      at += s;
    }
    if (!last.empty()) at += fmt::format("/{}", last);
    if (at.empty()) at.push_back('/');
    problems_.push_back(fmt::format("{} at {}: {}", type, at, what));
  }

  // Does `reader` read `writer` with no problem? (Used to pick a reader union's branch.)
  bool Compatible(const Node& reader, const Node& writer) {
    Checker sub;
    sub.in_progress_ = in_progress_;
    sub.Check(reader, writer);
    return sub.problems_.empty();
  }

  void Push(std::string s) { location_.push_back(std::move(s)); }
  void Pop() { location_.pop_back(); }

  void Check(const Node& r, const Node& w) {
    // A recursive pair already being checked is assumed to match (Java does the same).
    if (!in_progress_.insert({&r, &w}).second) return;
    CheckPair(r, w);
    in_progress_.erase({&r, &w});
  }

  void CheckPair(const Node& r, const Node& w) {
    if (w.type == Type::kUnion) {
      // Every branch the writer may have written must be readable.
      for (size_t i = 0; i < w.branches.size(); ++i) {
        const Node& b = *w.branches[i];
        if (r.type == Type::kUnion) {
          if (!Compatible(r, b)) {
            Add("MISSING_UNION_BRANCH",
                fmt::format("reader union lacking writer type: {}", TypeWord(b)),
                std::to_string(i));
          }
        } else {
          Push(std::to_string(i));
          Check(r, b);
          Pop();
        }
      }
      return;
    }
    if (r.type == Type::kUnion) {
      for (const Node* b : r.branches) {
        if (Compatible(*b, w)) return;
      }
      Add("MISSING_UNION_BRANCH", fmt::format("reader union lacking writer type: {}", TypeWord(w)));
      return;
    }
    if (r.type != w.type) {
      if (!Promotes(w.type, r.type)) {
        Add("TYPE_MISMATCH",
            fmt::format("reader type: {} not compatible with writer type: {}",
                        lake::avro::TypeName(r.type), lake::avro::TypeName(w.type)));
      }
      return;
    }
    switch (r.type) {
      case Type::kRecord:
        if (!NamesMatch(r, w)) return NameMismatch(r, w);
        Push("fields");
        for (size_t i = 0; i < r.fields.size(); ++i) {
          const Field& rf = r.fields[i];
          Push(std::to_string(i));
          const Field* wf = WriterField(w, rf);
          if (wf == nullptr) {
            if (rf.default_json.empty()) {
              Add("READER_FIELD_MISSING_DEFAULT_VALUE",
                  fmt::format("field '{}' has no default and the writer has no such field",
                              rf.name));
            }
          } else {
            Push("type");
            Check(*rf.type, *wf->type);
            Pop();
          }
          Pop();
        }
        Pop();
        return;
      case Type::kEnum: {
        if (!NamesMatch(r, w)) return NameMismatch(r, w);
        std::vector<std::string> missing;
        for (const std::string& s : w.symbols) {
          if (std::find(r.symbols.begin(), r.symbols.end(), s) == r.symbols.end()) {
            missing.push_back(s);
          }
        }
        if (!missing.empty() && r.enum_default.empty()) {
          std::sort(missing.begin(), missing.end());
          Add("MISSING_ENUM_SYMBOLS",
              fmt::format("reader enum {} lacks writer symbols [{}]", r.full_name,
                          fmt::join(missing, ", ")),
              "symbols");
        }
        return;
      }
      case Type::kFixed:
        if (!NamesMatch(r, w)) return NameMismatch(r, w);
        if (r.size != w.size) {
          Add("FIXED_SIZE_MISMATCH", fmt::format("expected: {}, found: {}", w.size, r.size),
              "size");
        }
        return;
      case Type::kArray:
        Push("items");
        Check(*r.items, *w.items);
        Pop();
        return;
      case Type::kMap:
        Push("values");
        Check(*r.values, *w.values);
        Pop();
        return;
      default:
        return;  // the same primitive
    }
  }

  void NameMismatch(const Node& r, const Node& w) {
    Add("NAME_MISMATCH",
        fmt::format("reader {} {} does not match writer {}", lake::avro::TypeName(r.type),
                    r.full_name, w.full_name),
        "name");
  }

  // Avro's promotions: int to long, float, double; long to float, double; float to
  // double; string to bytes and bytes to string.
  static bool Promotes(Type writer, Type reader) {
    switch (reader) {
      case Type::kLong:
        return writer == Type::kInt;
      case Type::kFloat:
        return writer == Type::kInt || writer == Type::kLong;
      case Type::kDouble:
        return writer == Type::kInt || writer == Type::kLong || writer == Type::kFloat;
      case Type::kBytes:
        return writer == Type::kString;
      case Type::kString:
        return writer == Type::kBytes;
      default:
        return false;
    }
  }

  std::vector<std::string> location_;
  std::vector<std::string> problems_;
  std::set<std::pair<const Node*, const Node*>> in_progress_;
};

}  // namespace

std::vector<std::string> Incompatibilities(const Parsed& reader, const Parsed& writer) {
  return Checker().Run(reader.root(), writer.root());
}

}  // namespace sluice::schema::avro
