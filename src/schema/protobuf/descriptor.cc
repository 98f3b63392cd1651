// A minimal reader of descriptor.proto's FileDescriptorProto (what confluent-kafka's Python
// client registers, base64-encoded), into the same File the text parser makes. Only the
// parts a schema needs are read; the rest (source info, unknown options) is skipped.
#include <fmt/format.h>

#include <functional>

#include "schema/protobuf/internal.h"

namespace sluice::schema::protobuf::internal {

namespace {

constexpr int kMaxDepth = 64;

// One length-delimited message's fields, in order: calls `on(number, wire_type, reader)`.
class Reader {
 public:
  explicit Reader(std::string_view b)
      : p_(reinterpret_cast<const uint8_t*>(b.data())), end_(p_ + b.size()) {}

  // The next field; false at the end. A malformed encoding sets error_.
  bool Next(int* number, int* wire) {
    if (p_ >= end_ || failed_) return false;
    uint64_t key;
    if (!ReadVarint(&p_, end_, &key) || (key >> 3) == 0 || (key >> 3) > INT32_MAX) {
      failed_ = true;
      return false;
    }
    *number = static_cast<int>(key >> 3);
    *wire = static_cast<int>(key & 7);
    return true;
  }
  bool Varint(uint64_t* v) { return Ok(ReadVarint(&p_, end_, v)); }
  bool Bytes(std::string_view* out) {
    uint64_t n;
    if (!Ok(ReadVarint(&p_, end_, &n)) || !Ok(n <= static_cast<uint64_t>(end_ - p_))) return false;
    *out = std::string_view(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  bool Skip(int wire) {
    uint64_t v;
    std::string_view s;
    switch (wire) {
      case 0:
        return Varint(&v);
      case 1:
        return Ok(end_ - p_ >= 8) && (p_ += 8, true);
      case 2:
        return Bytes(&s);
      case 5:
        return Ok(end_ - p_ >= 4) && (p_ += 4, true);
      default:
        return Ok(false);  // groups do not occur in descriptors
    }
  }
  bool failed() const { return failed_; }

 private:
  bool Ok(bool b) {
    if (!b) failed_ = true;
    return b;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool failed_ = false;
};

Status Bad(std::string_view what) {
  return InvalidArgumentError("1:1: invalid FileDescriptorProto: {}", what);
}

// A name as .proto text needs it: an identifier, or identifiers joined by dots (`dotted`),
// with a leading dot for a type reference (`leading_dot`).
bool ValidName(std::string_view s, bool dotted, bool leading_dot = false) {
  if (leading_dot && !s.empty() && s[0] == '.') s.remove_prefix(1);
  bool start = true;
  for (char c : s) {
    bool alpha = std::isalpha(static_cast<unsigned char>(c)) || c == '_';
    if (start) {
      if (!alpha) return false;
      start = false;
    } else if (c == '.' && dotted) {
      start = true;
    } else if (!alpha && !std::isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return !start;
}

Status CheckName(std::string_view s, std::string_view what, bool dotted = false,
                 bool leading_dot = false) {
  if (!ValidName(s, dotted, leading_dot)) return Bad(fmt::format("bad {} name '{}'", what, s));
  return Status::OK();
}

// Reads a message with `handle(number, wire, reader) -> Status` for its fields;
// handle returns OK having consumed the value, or skips it.
template <typename F>
Status Walk(std::string_view bytes, std::string_view what, F&& handle) {
  Reader r(bytes);
  int n, w;
  while (r.Next(&n, &w)) {
    bool consumed = false;
    RETURN_IF_ERROR(handle(n, w, r, &consumed));
    if (!consumed && !r.Skip(w)) break;
  }
  if (r.failed()) return Bad(fmt::format("malformed {}", what));
  return Status::OK();
}

Status String(Reader& r, int w, std::string* out, bool* consumed) {
  if (w != 2) return Status::OK();
  std::string_view s;
  if (!r.Bytes(&s)) return Bad("truncated string");
  *out = std::string(s);
  *consumed = true;
  return Status::OK();
}

Status Int(Reader& r, int w, int64_t* out, bool* consumed) {
  if (w != 0) return Status::OK();
  uint64_t v;
  if (!r.Varint(&v)) return Bad("truncated varint");
  *out = static_cast<int64_t>(v);
  *consumed = true;
  return Status::OK();
}

Status Sub(Reader& r, int w, std::string_view* out, bool* consumed) {
  if (w != 2) return Status::OK();
  if (!r.Bytes(out)) return Bad("truncated message");
  *consumed = true;
  return Status::OK();
}

// Known options of a *Options message, as .proto options.
struct KnownOption {
  int number;
  const char* name;
  enum { kBool, kString, kInt, kOptimize, kJsType, kCType } kind;
};

Status Options(std::string_view bytes, std::initializer_list<KnownOption> known,
               std::vector<Option>* out, bool* map_entry = nullptr) {
  return Walk(bytes, "options", [&](int n, int w, Reader& r, bool* consumed) -> Status {
    for (const KnownOption& k : known) {
      if (k.number != n) continue;
      if (k.kind == KnownOption::kString) {
        std::string s;
        RETURN_IF_ERROR(String(r, w, &s, consumed));
        if (*consumed) out->push_back({k.name, QuoteString(s)});
      } else {
        int64_t v = 0;
        RETURN_IF_ERROR(Int(r, w, &v, consumed));
        if (!*consumed) break;
        std::string text;
        switch (k.kind) {
          case KnownOption::kBool:
            text = v != 0 ? "true" : "false";
            break;
          case KnownOption::kOptimize:
            text = v == 2 ? "CODE_SIZE" : v == 3 ? "LITE_RUNTIME" : "SPEED";
            break;
          case KnownOption::kJsType:
            text = v == 1 ? "JS_STRING" : v == 2 ? "JS_NUMBER" : "JS_NORMAL";
            break;
          case KnownOption::kCType:
            text = v == 1 ? "CORD" : v == 2 ? "STRING_PIECE" : "STRING";
            break;
          default:
            text = std::to_string(v);
        }
        if (map_entry != nullptr && std::string_view(k.name) == "map_entry") {
          *map_entry = v != 0;
        } else {
          out->push_back({k.name, text});
        }
      }
      break;
    }
    return Status::OK();
  });
}

Status ReadRange(std::string_view bytes, bool end_exclusive, Range* out) {
  int64_t start = 0, end = 0;
  RETURN_IF_ERROR(Walk(bytes, "range", [&](int n, int w, Reader& r, bool* c) -> Status {
    if (n == 1) return Int(r, w, &start, c);
    if (n == 2) return Int(r, w, &end, c);
    return Status::OK();
  }));
  if (end_exclusive) --end;
  out->start = static_cast<int32_t>(start);
  out->end = static_cast<int32_t>(end);
  return Status::OK();
}

Status ReadEnumFields(std::string_view bytes, EnumType* e);

Status ReadEnum(std::string_view bytes, EnumType* e) {
  RETURN_IF_ERROR(ReadEnumFields(bytes, e));
  RETURN_IF_ERROR(CheckName(e->name, "enum"));
  for (const EnumValue& v : e->values) RETURN_IF_ERROR(CheckName(v.name, "enum value"));
  return Status::OK();
}

Status ReadEnumFields(std::string_view bytes, EnumType* e) {
  return Walk(bytes, "enum", [&](int n, int w, Reader& r, bool* c) -> Status {
    std::string_view sub;
    switch (n) {
      case 1:
        return String(r, w, &e->name, c);
      case 2: {
        RETURN_IF_ERROR(Sub(r, w, &sub, c));
        if (!*c) return Status::OK();
        EnumValue v;
        int64_t number = 0;
        RETURN_IF_ERROR(Walk(sub, "enum value", [&](int n2, int w2, Reader& r2, bool* c2) {
          if (n2 == 1) return String(r2, w2, &v.name, c2);
          if (n2 == 2) return Int(r2, w2, &number, c2);
          std::string_view o;
          if (n2 == 3) {
            RETURN_IF_ERROR(Sub(r2, w2, &o, c2));
            return Options(o, {{1, "deprecated", KnownOption::kBool}}, &v.options);
          }
          return Status::OK();
        }));
        v.number = static_cast<int32_t>(number);
        e->values.push_back(std::move(v));
        return Status::OK();
      }
      case 3:
        RETURN_IF_ERROR(Sub(r, w, &sub, c));
        return Options(
            sub, {{2, "allow_alias", KnownOption::kBool}, {3, "deprecated", KnownOption::kBool}},
            &e->options);
      case 4: {
        RETURN_IF_ERROR(Sub(r, w, &sub, c));
        if (!*c) return Status::OK();
        Range range;
        RETURN_IF_ERROR(ReadRange(sub, false, &range));
        e->reserved_ranges.push_back(range);
        return Status::OK();
      }
      case 5: {
        std::string s;
        RETURN_IF_ERROR(String(r, w, &s, c));
        if (*c) e->reserved_names.push_back(std::move(s));
        return Status::OK();
      }
      default:
        return Status::OK();
    }
  });
}

struct RawField {
  Field field;
  int64_t label = 1;
  int64_t oneof_index = -1;
};

Status ReadField(std::string_view bytes, RawField* rf) {
  Field& f = rf->field;
  int64_t number = 0, type = 0, proto3_optional = 0;
  RETURN_IF_ERROR(Walk(bytes, "field", [&](int n, int w, Reader& r, bool* c) -> Status {
    std::string_view sub;
    switch (n) {
      case 1:
        return String(r, w, &f.name, c);
      case 3:
        return Int(r, w, &number, c);
      case 4:
        return Int(r, w, &rf->label, c);
      case 5:
        return Int(r, w, &type, c);
      case 6:
        return String(r, w, &f.type_name, c);
      case 7:
        return String(r, w, &f.default_value, c);
      case 9:
        return Int(r, w, &rf->oneof_index, c);
      case 8:
        RETURN_IF_ERROR(Sub(r, w, &sub, c));
        return Options(sub,
                       {{1, "ctype", KnownOption::kCType},
                        {2, "packed", KnownOption::kBool},
                        {3, "deprecated", KnownOption::kBool},
                        {5, "lazy", KnownOption::kBool},
                        {6, "jstype", KnownOption::kJsType}},
                       &f.options);
      case 17:
        return Int(r, w, &proto3_optional, c);
      default:
        return Status::OK();
    }
  }));
  RETURN_IF_ERROR(CheckName(f.name, "field"));
  if (!f.type_name.empty()) RETURN_IF_ERROR(CheckName(f.type_name, "type", true, true));
  if (number < 1 || number > (1 << 29) - 1)
    return Bad(fmt::format("field '{}' has number {}", f.name, number));
  f.number = static_cast<int32_t>(number);
  if (type < 1 || type > 18) return Bad(fmt::format("field '{}' has type {}", f.name, type));
  f.type = static_cast<FieldType>(type);
  f.proto3_optional = proto3_optional != 0;
  if (rf->label < 1 || rf->label > 3) return Bad(fmt::format("field '{}' label", f.name));
  return Status::OK();
}

// Default values in a descriptor are unquoted text; as .proto text strings get quotes and
// bytes their C escapes.
std::string DefaultText(const Field& f) {
  if (f.default_value.empty()) return "";  // absent and "" are one in a descriptor
  if (f.type == FieldType::kString || f.type == FieldType::kBytes) {
    return QuoteString(f.default_value);  // bytes: the escaped text kept as it is written
  }
  return f.default_value;
}

Status ReadMessage(std::string_view bytes, bool proto3, MessageType* m, int depth) {
  if (depth > kMaxDepth) return Bad("messages nested too deeply");
  std::vector<RawField> raw;
  std::vector<std::pair<MessageType, bool>> nested;  // message, is map entry
  RETURN_IF_ERROR(Walk(bytes, "message", [&](int n, int w, Reader& r, bool* c) -> Status {
    std::string_view sub;
    switch (n) {
      case 1:
        return String(r, w, &m->name, c);
      case 2: {
        RETURN_IF_ERROR(Sub(r, w, &sub, c));
        if (!*c) return Status::OK();
        raw.emplace_back();
        return ReadField(sub, &raw.back());
      }
      case 3: {
        RETURN_IF_ERROR(Sub(r, w, &sub, c));
        if (!*c) return Status::OK();
        nested.emplace_back();
        RETURN_IF_ERROR(ReadMessage(sub, proto3, &nested.back().first, depth + 1));
        for (const Option& o : nested.back().first.options) {
          if (o.name == "map_entry" && o.value == "true") nested.back().second = true;
        }
        return Status::OK();
      }
      case 4: {
        RETURN_IF_ERROR(Sub(r, w, &sub, c));
        if (!*c) return Status::OK();
        m->enums.emplace_back();
        return ReadEnum(sub, &m->enums.back());
      }
      case 5:
      case 9: {
        RETURN_IF_ERROR(Sub(r, w, &sub, c));
        if (!*c) return Status::OK();
        Range range;
        RETURN_IF_ERROR(ReadRange(sub, true, &range));
        (n == 5 ? m->extension_ranges : m->reserved_ranges).push_back(range);
        return Status::OK();
      }
      case 7:
        RETURN_IF_ERROR(Sub(r, w, &sub, c));
        return Options(sub,
                       {{7, "map_entry", KnownOption::kBool},
                        {3, "deprecated", KnownOption::kBool},
                        {1, "message_set_wire_format", KnownOption::kBool}},
                       &m->options);
      case 8: {
        RETURN_IF_ERROR(Sub(r, w, &sub, c));
        if (!*c) return Status::OK();
        Oneof o;
        RETURN_IF_ERROR(Walk(sub, "oneof", [&](int n2, int w2, Reader& r2, bool* c2) {
          if (n2 == 1) return String(r2, w2, &o.name, c2);
          return Status::OK();
        }));
        m->oneofs.push_back(std::move(o));
        return Status::OK();
      }
      case 10: {
        std::string s;
        RETURN_IF_ERROR(String(r, w, &s, c));
        if (*c) m->reserved_names.push_back(std::move(s));
        return Status::OK();
      }
      default:
        return Status::OK();
    }
  }));
  RETURN_IF_ERROR(CheckName(m->name, "message"));
  for (const Oneof& o : m->oneofs) RETURN_IF_ERROR(CheckName(o.name, "oneof"));
  // Map entries become map fields; other nested types stay.
  auto entry_of = [&](const std::string& type_name) -> const MessageType* {
    std::string_view tail = type_name;
    size_t dot = tail.rfind('.');
    if (dot != std::string_view::npos) tail = tail.substr(dot + 1);
    for (const auto& [msg, is_entry] : nested) {
      if (is_entry && msg.name == tail) return &msg;
    }
    return nullptr;
  };
  // Synthetic oneofs of proto3 optional fields are dropped; the others are renumbered.
  std::vector<int> oneof_map(m->oneofs.size(), -1);
  std::vector<bool> synthetic(m->oneofs.size(), true);
  for (const RawField& rf : raw) {
    if (rf.oneof_index >= 0 && static_cast<size_t>(rf.oneof_index) < synthetic.size() &&
        !rf.field.proto3_optional)
      synthetic[rf.oneof_index] = false;
  }
  std::vector<Oneof> kept;
  for (size_t i = 0; i < m->oneofs.size(); ++i) {
    if (synthetic[i]) continue;
    oneof_map[i] = static_cast<int>(kept.size());
    kept.push_back(std::move(m->oneofs[i]));
  }
  m->oneofs = std::move(kept);
  for (RawField& rf : raw) {
    Field f = std::move(rf.field);
    if (rf.oneof_index >= 0) {
      if (static_cast<size_t>(rf.oneof_index) >= oneof_map.size())
        return Bad(fmt::format("field '{}' has a bad oneof index", f.name));
      f.oneof = oneof_map[rf.oneof_index];
    }
    f.default_value = DefaultText(f);
    if (f.type != FieldType::kString && f.type != FieldType::kBytes) {
      std::string_view d = f.default_value;
      if (!d.empty() && d[0] == '-') d.remove_prefix(1);
      bool number = !d.empty() && (std::isdigit(static_cast<unsigned char>(d[0])) || d[0] == '.');
      for (char ch : d) {
        if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' ||
              (number && (ch == '+' || ch == '-'))))
          return Bad(fmt::format("field '{}' has default '{}'", f.name, f.default_value));
      }
      if (!d.empty() && !number && !ValidName(d, false))
        return Bad(fmt::format("field '{}' has default '{}'", f.name, f.default_value));
    }
    if (f.type == FieldType::kEnum || f.type == FieldType::kMessage ||
        f.type == FieldType::kGroup) {
      if (f.type_name.empty()) return Bad(fmt::format("field '{}' has no type name", f.name));
    } else {
      f.type_name.clear();
    }
    if (f.oneof >= 0) {
      f.label = Label::kNone;
    } else if (rf.label == 3) {
      f.label = Label::kRepeated;
    } else if (rf.label == 2) {
      f.label = Label::kRequired;
    } else {
      f.label = proto3 && !f.proto3_optional ? Label::kNone : Label::kOptional;
    }
    if (f.type == FieldType::kMessage && f.label == Label::kRepeated) {
      if (const MessageType* e = entry_of(f.type_name)) {
        if (e->fields.size() != 2) return Bad(fmt::format("map entry of '{}'", f.name));
        const Field& k = e->fields[0].number == 1 ? e->fields[0] : e->fields[1];
        const Field& v = e->fields[0].number == 1 ? e->fields[1] : e->fields[0];
        f.is_map = true;
        f.map_key = k.type;
        f.type = v.type;
        f.type_name = v.type_name;
      }
    }
    if (f.type == FieldType::kGroup) {
      // The group's body is a nested type of the same name; keep it marked.
      for (auto& [msg, is_entry] : nested) {
        std::string_view tail = f.type_name;
        size_t dot = tail.rfind('.');
        if (dot != std::string_view::npos) tail = tail.substr(dot + 1);
        if (msg.name == tail) msg.is_group = true;
      }
    }
    m->fields.push_back(std::move(f));
  }
  for (auto& [msg, is_entry] : nested) {
    if (!is_entry) m->messages.push_back(std::move(msg));
  }
  return Status::OK();
}

}  // namespace

Result<File> ParseDescriptor(std::string_view bytes) {
  File file;
  std::vector<int64_t> public_deps, weak_deps;
  std::vector<std::string_view> messages;
  RETURN_IF_ERROR(Walk(bytes, "file", [&](int n, int w, Reader& r, bool* c) -> Status {
    std::string_view sub;
    switch (n) {
      case 1:
        return String(r, w, &file.name, c);
      case 2:
        return String(r, w, &file.package, c);
      case 3: {
        std::string s;
        RETURN_IF_ERROR(String(r, w, &s, c));
        if (*c) file.imports.push_back({std::move(s), Import::Kind::kPlain});
        return Status::OK();
      }
      case 10:
      case 11: {
        int64_t v = 0;
        RETURN_IF_ERROR(Int(r, w, &v, c));
        if (*c) (n == 10 ? public_deps : weak_deps).push_back(v);
        return Status::OK();
      }
      case 4:
        RETURN_IF_ERROR(Sub(r, w, &sub, c));
        if (*c) messages.push_back(sub);
        return Status::OK();
      case 5: {
        RETURN_IF_ERROR(Sub(r, w, &sub, c));
        if (!*c) return Status::OK();
        file.enums.emplace_back();
        return ReadEnum(sub, &file.enums.back());
      }
      case 8:
        RETURN_IF_ERROR(Sub(r, w, &sub, c));
        return Options(sub,
                       {{1, "java_package", KnownOption::kString},
                        {8, "java_outer_classname", KnownOption::kString},
                        {10, "java_multiple_files", KnownOption::kBool},
                        {9, "optimize_for", KnownOption::kOptimize},
                        {11, "go_package", KnownOption::kString},
                        {23, "deprecated", KnownOption::kBool},
                        {31, "cc_enable_arenas", KnownOption::kBool},
                        {36, "objc_class_prefix", KnownOption::kString},
                        {37, "csharp_namespace", KnownOption::kString},
                        {41, "php_namespace", KnownOption::kString},
                        {45, "ruby_package", KnownOption::kString}},
                       &file.options);
      case 12:
        return String(r, w, &file.syntax, c);
      default:
        return Status::OK();
    }
  }));
  if (file.syntax.empty()) file.syntax = "proto2";
  if (!file.package.empty()) RETURN_IF_ERROR(CheckName(file.package, "package", true));
  if (file.syntax != "proto2" && file.syntax != "proto3")
    return Bad(fmt::format("unsupported syntax \"{}\"", file.syntax));
  for (int64_t i : public_deps) {
    if (i < 0 || static_cast<size_t>(i) >= file.imports.size()) return Bad("public dependency");
    file.imports[i].kind = Import::Kind::kPublic;
  }
  for (int64_t i : weak_deps) {
    if (i < 0 || static_cast<size_t>(i) >= file.imports.size()) return Bad("weak dependency");
    file.imports[i].kind = Import::Kind::kWeak;
  }
  for (std::string_view m : messages) {
    file.messages.emplace_back();
    RETURN_IF_ERROR(ReadMessage(m, file.syntax == "proto3", &file.messages.back(), 0));
  }
  return file;
}

bool LooksLikeBase64(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=' ||
          c == '\n' || c == '\r'))
      return false;
  }
  return true;
}

bool Base64Decode(std::string_view text, std::string* out) {
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '+' || c == '-') {
      v = 62;
    } else if (c == '/' || c == '_') {
      v = 63;
    } else if (c == '=') {
      ++pad;
      continue;
    } else if (c == '\n' || c == '\r') {
      continue;
    } else {
      return false;
    }
    if (pad > 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return pad <= 2;
}

}  // namespace sluice::schema::protobuf::internal
