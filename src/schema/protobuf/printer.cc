// Canonical and Normalized: the .proto text the registry stores, in the layout of
// Confluent's ProtobufSchemaUtils (syntax, package, imports, options, then types; in a
// message reserved, options, fields, oneofs, nested types). Normalized sorts what has no
// meaning in its order and writes type names fully qualified.
#include <fmt/format.h>

#include <algorithm>

#include "schema/protobuf/internal.h"

namespace sluice::schema::protobuf {

namespace {

constexpr int32_t kMaxFieldNumber = (1 << 29) - 1;

class Printer {
 public:
  explicit Printer(bool normalize) : normalize_(normalize) {}

  std::string File(const protobuf::File& f) {
    if (!normalize_ || f.syntax == "proto3") out_ += fmt::format("syntax = \"{}\";\n", f.syntax);
    if (!f.package.empty()) out_ += fmt::format("package {};\n", f.package);
    if (!f.imports.empty()) {
      out_ += '\n';
      std::vector<Import> imports = f.imports;
      if (normalize_) {
        std::sort(imports.begin(), imports.end(), [](const Import& a, const Import& b) {
          return std::tie(a.kind, a.path) < std::tie(b.kind, b.path);
        });
        imports.erase(std::unique(imports.begin(), imports.end(),
                                  [](const Import& a, const Import& b) {
                                    return a.kind == b.kind && a.path == b.path;
                                  }),
                      imports.end());
      }
      for (const Import& i : imports) {
        const char* kind = i.kind == Import::Kind::kPublic ? "public "
                           : i.kind == Import::Kind::kWeak ? "weak "
                                                           : "";
        out_ += fmt::format("import {}{};\n", kind, internal::QuoteString(i.path));
      }
    }
    if (!f.options.empty()) {
      out_ += '\n';
      for (const Option& o : Sorted(f.options))
        Line(0, fmt::format("option {} = {};", o.name, o.value));
    }
    if (!f.messages.empty() || !f.enums.empty()) {
      out_ += '\n';
      for (const MessageType& m : f.messages) Message(m, 0);
      for (const EnumType& e : f.enums) Enum(e, 0);
    }
    return std::move(out_);
  }

 private:
  void Line(int indent, std::string_view s) {
    out_.append(static_cast<size_t>(indent) * 2, ' ');
    out_ += s;
    out_ += '\n';
  }

  std::vector<Option> Sorted(const std::vector<Option>& options) const {
    std::vector<Option> v = options;
    if (normalize_) {
      std::stable_sort(v.begin(), v.end(),
                       [](const Option& a, const Option& b) { return a.name < b.name; });
    }
    return v;
  }

  static std::string RangeText(const Range& r, bool enum_values) {
    int32_t max = enum_values ? INT32_MAX : kMaxFieldNumber;
    if (r.start == r.end) return std::to_string(r.start);
    return fmt::format("{} to {}", r.start, r.end == max ? "max" : std::to_string(r.end));
  }

  void Reserved(int indent, const std::vector<Range>& ranges, const std::vector<std::string>& names,
                bool enum_values) {
    if (normalize_) {
      std::vector<Range> r = ranges;
      std::sort(r.begin(), r.end(), [](const Range& a, const Range& b) {
        return a.start < b.start || (a.start == b.start && a.end < b.end);
      });
      for (const Range& x : r) Line(indent, fmt::format("reserved {};", RangeText(x, enum_values)));
      std::vector<std::string> n = names;
      std::sort(n.begin(), n.end());
      for (const std::string& x : n)
        Line(indent, fmt::format("reserved {};", internal::QuoteString(x)));
      return;
    }
    if (!ranges.empty()) {
      std::string s;
      for (const Range& r : ranges) s += (s.empty() ? "" : ", ") + RangeText(r, enum_values);
      Line(indent, fmt::format("reserved {};", s));
    }
    if (!names.empty()) {
      std::string s;
      for (const std::string& n : names) s += (s.empty() ? "" : ", ") + internal::QuoteString(n);
      Line(indent, fmt::format("reserved {};", s));
    }
  }

  std::string TypeText(FieldType type, const Field& f) const {
    if (type != FieldType::kMessage && type != FieldType::kEnum && type != FieldType::kGroup)
      return std::string(ScalarName(type));
    if (normalize_ && !f.full_type_name.empty()) return "." + f.full_type_name;
    return f.type_name;
  }

  std::string FieldText(const Field& f, const MessageType& m, int indent) {
    std::string s;
    if (!f.is_map) {
      switch (f.label) {
        case Label::kOptional:
          s = "optional ";
          break;
        case Label::kRequired:
          s = "required ";
          break;
        case Label::kRepeated:
          s = "repeated ";
          break;
        case Label::kNone:
          break;
      }
    }
    if (f.is_map) {
      s += fmt::format("map<{}, {}>", ScalarName(f.map_key), TypeText(f.type, f));
    } else if (f.type == FieldType::kGroup) {
      s += "group " + GroupName(f);
    } else {
      s += TypeText(f.type, f);
    }
    if (f.type != FieldType::kGroup) s += " " + f.name;
    s += fmt::format(" = {}", f.number);
    std::vector<Option> opts;
    if (!f.default_value.empty()) opts.push_back({"default", f.default_value});
    for (const Option& o : Sorted(f.options)) opts.push_back(o);
    if (!opts.empty()) {
      s += " [";
      for (size_t i = 0; i < opts.size(); ++i)
        s += fmt::format("{}{} = {}", i ? ", " : "", opts[i].name, opts[i].value);
      s += "]";
    }
    return s;
  }

  static std::string GroupName(const Field& f) {
    std::string_view n = f.type_name;
    size_t dot = n.rfind('.');
    return std::string(dot == std::string_view::npos ? n : n.substr(dot + 1));
  }

  void FieldLine(const Field& f, const MessageType& m, int indent) {
    if (f.type != FieldType::kGroup) {
      Line(indent, FieldText(f, m, indent) + ";");
      return;
    }
    Line(indent, FieldText(f, m, indent) + " {");
    const MessageType* body = nullptr;
    for (const MessageType& n : m.messages) {
      if (n.is_group && n.name == GroupName(f)) body = &n;
    }
    if (body != nullptr) Body(*body, indent + 1);
    Line(indent, "}");
  }

  std::vector<const Field*> Ordered(const MessageType& m, int oneof) const {
    std::vector<const Field*> v;
    for (const Field& f : m.fields) {
      if (f.oneof == oneof) v.push_back(&f);
    }
    if (normalize_) {
      std::sort(v.begin(), v.end(),
                [](const Field* a, const Field* b) { return a->number < b->number; });
    }
    return v;
  }

  void Message(const MessageType& m, int indent) {
    Line(indent, fmt::format("message {} {{", m.name));
    Body(m, indent + 1);
    Line(indent, "}");
  }

  void Body(const MessageType& m, int indent) {
    Reserved(indent, m.reserved_ranges, m.reserved_names, false);
    for (const Option& o : Sorted(m.options))
      Line(indent, fmt::format("option {} = {};", o.name, o.value));
    for (const Field* f : Ordered(m, -1)) FieldLine(*f, m, indent);
    std::vector<int> oneofs;
    for (size_t i = 0; i < m.oneofs.size(); ++i) oneofs.push_back(static_cast<int>(i));
    if (normalize_) {
      auto first = [&](int o) {
        auto v = Ordered(m, o);
        return v.empty() ? INT32_MAX : v[0]->number;
      };
      std::stable_sort(oneofs.begin(), oneofs.end(),
                       [&](int a, int b) { return first(a) < first(b); });
    }
    for (int o : oneofs) {
      auto members = Ordered(m, o);
      if (normalize_ && members.empty()) continue;
      Line(indent, fmt::format("oneof {} {{", m.oneofs[o].name));
      for (const Option& opt : Sorted(m.oneofs[o].options))
        Line(indent + 1, fmt::format("option {} = {};", opt.name, opt.value));
      for (const Field* f : members) FieldLine(*f, m, indent + 1);
      Line(indent, "}");
    }
    for (const MessageType& n : m.messages) {
      if (!n.is_group) Message(n, indent);
    }
    for (const EnumType& e : m.enums) Enum(e, indent);
    if (!m.extension_ranges.empty()) {
      std::vector<Range> r = m.extension_ranges;
      if (normalize_) {
        std::sort(r.begin(), r.end(),
                  [](const Range& a, const Range& b) { return a.start < b.start; });
      }
      std::string s;
      for (const Range& x : r) s += (s.empty() ? "" : ", ") + RangeText(x, false);
      Line(indent, fmt::format("extensions {};", s));
    }
  }

  void Enum(const EnumType& e, int indent) {
    Line(indent, fmt::format("enum {} {{", e.name));
    Reserved(indent + 1, e.reserved_ranges, e.reserved_names, true);
    for (const Option& o : Sorted(e.options))
      Line(indent + 1, fmt::format("option {} = {};", o.name, o.value));
    std::vector<const EnumValue*> values;
    for (const EnumValue& v : e.values) values.push_back(&v);
    if (normalize_) {
      std::stable_sort(values.begin(), values.end(), [](const EnumValue* a, const EnumValue* b) {
        return a->number < b->number || (a->number == b->number && a->name < b->name);
      });
    }
    for (const EnumValue* v : values) {
      std::string s = fmt::format("{} = {}", v->name, v->number);
      if (!v->options.empty()) {
        s += " [";
        auto opts = Sorted(v->options);
        for (size_t i = 0; i < opts.size(); ++i)
          s += fmt::format("{}{} = {}", i ? ", " : "", opts[i].name, opts[i].value);
        s += "]";
      }
      Line(indent + 1, s + ";");
    }
    Line(indent, "}");
  }

  bool normalize_;
  std::string out_;
};

}  // namespace

std::string Canonical(const Parsed& schema) { return Printer(false).File(*schema.file); }

std::string Normalized(const Parsed& schema) { return Printer(true).File(*schema.file); }

}  // namespace sluice::schema::protobuf
