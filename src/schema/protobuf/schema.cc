// Parse: a schema and its imports (references and the built-in well-known types) into one
// Parsed, with full names assigned, type names resolved and the rules protoc checks
// (field numbers, duplicates, reserved numbers and names) applied. And the message
// indexes of the Confluent framing.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "schema/protobuf/internal.h"

namespace sluice::schema::protobuf {

using internal::ReadVarint;

std::string_view ScalarName(FieldType t) {
  switch (t) {
    case FieldType::kDouble:
      return "double";
    case FieldType::kFloat:
      return "float";
    case FieldType::kInt64:
      return "int64";
    case FieldType::kUint64:
      return "uint64";
    case FieldType::kInt32:
      return "int32";
    case FieldType::kFixed64:
      return "fixed64";
    case FieldType::kFixed32:
      return "fixed32";
    case FieldType::kBool:
      return "bool";
    case FieldType::kString:
      return "string";
    case FieldType::kBytes:
      return "bytes";
    case FieldType::kUint32:
      return "uint32";
    case FieldType::kSfixed32:
      return "sfixed32";
    case FieldType::kSfixed64:
      return "sfixed64";
    case FieldType::kSint32:
      return "sint32";
    case FieldType::kSint64:
      return "sint64";
    default:
      return "";
  }
}

namespace {

constexpr size_t kMaxImports = 256;

std::string Where(uint32_t line, uint32_t column) {
  return fmt::format("{}:{}", line == 0 ? 1 : line, column == 0 ? 1 : column);
}

Result<File> ParseOne(std::string_view text, std::string name) {
  std::string_view trimmed = text;
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.front())))
    trimmed.remove_prefix(1);
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back())))
    trimmed.remove_suffix(1);
  if (internal::LooksLikeBase64(trimmed)) {
    std::string bytes;
    if (internal::Base64Decode(trimmed, &bytes)) {
      auto f = internal::ParseDescriptor(bytes);
      if (f.ok()) {
        f->name = std::move(name);
        return f;
      }
      // Not a descriptor: maybe a one-word .proto; let the text parser say what is wrong.
    }
  }
  return internal::ParseProtoText(text, std::move(name));
}

class Linker {
 public:
  explicit Linker(Parsed* p) : p_(p) {}

  void Name(File* f) {
    for (MessageType& m : f->messages) NameMessage(f, &m, f->package);
    for (EnumType& e : f->enums) NameEnum(f, &e, f->package);
  }

  Status Register(File* f) {
    for (MessageType& m : f->messages) RETURN_IF_ERROR(RegisterMessage(f, &m));
    for (EnumType& e : f->enums) RETURN_IF_ERROR(RegisterEnum(f, &e));
    return Status::OK();
  }

  Status Resolve(File* f) {
    for (MessageType& m : f->messages) RETURN_IF_ERROR(ResolveMessage(f, &m));
    for (EnumType& e : f->enums) RETURN_IF_ERROR(CheckEnum(f, e));
    return Status::OK();
  }

 private:
  static std::string Join(const std::string& scope, const std::string& name) {
    return scope.empty() ? name : scope + "." + name;
  }

  void NameMessage(File* f, MessageType* m, const std::string& scope) {
    m->full_name = Join(scope, m->name);
    for (MessageType& n : m->messages) NameMessage(f, &n, m->full_name);
    for (EnumType& e : m->enums) NameEnum(f, &e, m->full_name);
  }
  void NameEnum(File* f, EnumType* e, const std::string& scope) {
    e->full_name = Join(scope, e->name);
  }

  Status Duplicate(const File* f, const std::string& name) {
    return InvalidArgumentError("1:1: '{}' is defined twice{}", name,
                                f->name.empty() ? "" : fmt::format(" (in \"{}\")", f->name));
  }

  Status RegisterMessage(File* f, MessageType* m) {
    if (p_->messages.count(m->full_name) || p_->enums.count(m->full_name))
      return Duplicate(f, m->full_name);
    p_->messages[m->full_name] = m;
    p_->owner[m] = f;
    for (MessageType& n : m->messages) RETURN_IF_ERROR(RegisterMessage(f, &n));
    for (EnumType& e : m->enums) RETURN_IF_ERROR(RegisterEnum(f, &e));
    return Status::OK();
  }
  Status RegisterEnum(File* f, EnumType* e) {
    if (p_->messages.count(e->full_name) || p_->enums.count(e->full_name))
      return Duplicate(f, e->full_name);
    p_->enums[e->full_name] = e;
    p_->owner[e] = f;
    return Status::OK();
  }

  // protoc's scoping: innermost scope outwards, then the name as given.
  bool Lookup(const std::string& name, std::string scope, Field* f) {
    auto try_name = [&](const std::string& full) {
      if (auto it = p_->messages.find(full); it != p_->messages.end()) {
        f->message = it->second;
        f->full_type_name = full;
        return true;
      }
      if (auto it = p_->enums.find(full); it != p_->enums.end()) {
        f->enumeration = it->second;
        f->full_type_name = full;
        return true;
      }
      return false;
    };
    if (!name.empty() && name[0] == '.') return try_name(name.substr(1));
    while (true) {
      if (try_name(Join(scope, name))) return true;
      if (scope.empty()) return false;
      size_t dot = scope.rfind('.');
      scope = dot == std::string::npos ? "" : scope.substr(0, dot);
    }
  }

  Status FieldError(const File* f, const Field& field, std::string_view what) {
    std::string in = f->name.empty() ? "" : fmt::format(" (in \"{}\")", f->name);
    return InvalidArgumentError("{}: field '{}': {}{}", Where(field.line, field.column), field.name,
                                what, in);
  }

  Status ResolveMessage(File* f, MessageType* m) {
    std::set<int32_t> numbers;
    std::set<std::string> names;
    for (Field& field : m->fields) {
      if (!numbers.insert(field.number).second)
        return FieldError(
            f, field, fmt::format("number {} is used twice in '{}'", field.number, m->full_name));
      if (!names.insert(field.name).second)
        return FieldError(f, field, fmt::format("name is used twice in '{}'", m->full_name));
      for (const Range& r : m->reserved_ranges) {
        if (field.number >= r.start && field.number <= r.end)
          return FieldError(f, field, fmt::format("number {} is reserved", field.number));
      }
      for (const Range& r : m->extension_ranges) {
        if (field.number >= r.start && field.number <= r.end)
          return FieldError(f, field,
                            fmt::format("number {} is in an extension range", field.number));
      }
      if (std::find(m->reserved_names.begin(), m->reserved_names.end(), field.name) !=
          m->reserved_names.end())
        return FieldError(f, field, "name is reserved");
      if (field.oneof >= 0 && field.label == Label::kRepeated)
        return FieldError(f, field, "oneof members cannot be repeated");
      if (field.type_name.empty()) continue;
      if (!Lookup(field.type_name, m->full_name, &field))
        return FieldError(f, field, fmt::format("unknown type '{}'", field.type_name));
      if (field.enumeration != nullptr) {
        if (field.type == FieldType::kGroup)
          return FieldError(f, field, "a group must be a message");
        field.type = FieldType::kEnum;
      } else if (field.type == FieldType::kEnum) {
        return FieldError(f, field, fmt::format("'{}' is not an enum", field.type_name));
      }
    }
    for (MessageType& n : m->messages) RETURN_IF_ERROR(ResolveMessage(f, &n));
    for (EnumType& e : m->enums) RETURN_IF_ERROR(CheckEnum(f, e));
    return Status::OK();
  }

  Status CheckEnum(const File* f, const EnumType& e) {
    if (e.values.empty()) return InvalidArgumentError("1:1: enum '{}' has no values", e.full_name);
    bool alias = false;
    for (const Option& o : e.options) {
      if (o.name == "allow_alias" && o.value == "true") alias = true;
    }
    std::set<int32_t> numbers;
    std::set<std::string> names;
    for (const EnumValue& v : e.values) {
      if (!names.insert(v.name).second)
        return InvalidArgumentError("1:1: enum '{}' names '{}' twice", e.full_name, v.name);
      if (!numbers.insert(v.number).second && !alias)
        return InvalidArgumentError(
            "1:1: enum '{}' uses {} twice (set option allow_alias = true to allow it)", e.full_name,
            v.number);
    }
    // protoc wants 0 first; Normalized sorts values by number, so a 0 anywhere is accepted.
    if (f->syntax == "proto3" && !numbers.count(0))
      return InvalidArgumentError("1:1: proto3 enum '{}' needs a value 0", e.full_name);
    return Status::OK();
  }

  Parsed* p_;
};

}  // namespace

Result<Parsed> Parse(std::string_view schema_text, const std::vector<Reference>& refs) {
  Parsed p;
  ASSIGN_OR_RETURN(File main, ParseOne(schema_text, ""));
  p.file = std::make_unique<File>(std::move(main));
  // Imports, breadth first; each file once.
  std::set<std::string> loaded;
  std::vector<File*> pending = {p.file.get()};
  while (!pending.empty()) {
    File* f = pending.back();
    pending.pop_back();
    for (const Import& imp : f->imports) {
      if (loaded.count(imp.path)) continue;
      loaded.insert(imp.path);
      if (loaded.size() > kMaxImports) return InvalidArgumentError("1:1: too many imports");
      const Reference* ref = nullptr;
      for (const Reference& r : refs) {
        if (r.name == imp.path) ref = &r;
      }
      std::string_view text;
      if (ref != nullptr) {
        text = ref->schema_text;
      } else if (const char* builtin = internal::WellKnownText(imp.path)) {
        text = builtin;
      } else {
        if (imp.kind == Import::Kind::kWeak) continue;
        return InvalidArgumentError(
            "{}: import \"{}\" not found (no schema reference of that name)",
            Where(imp.line, imp.column), imp.path);
      }
      auto parsed = ParseOne(text, imp.path);
      if (!parsed.ok()) {
        return InvalidArgumentError("in import \"{}\": {}", imp.path, parsed.status().message());
      }
      p.imports.push_back(std::make_unique<File>(std::move(parsed).value()));
      pending.push_back(p.imports.back().get());
    }
  }
  Linker linker(&p);
  linker.Name(p.file.get());
  for (auto& f : p.imports) linker.Name(f.get());
  RETURN_IF_ERROR(linker.Register(p.file.get()));
  for (auto& f : p.imports) RETURN_IF_ERROR(linker.Register(f.get()));
  RETURN_IF_ERROR(linker.Resolve(p.file.get()));
  for (auto& f : p.imports) RETURN_IF_ERROR(linker.Resolve(f.get()));
  return p;
}

bool ReadMessageIndexes(std::string_view payload, std::vector<int>* indexes, size_t* consumed,
                        std::string* reason) {
  const auto* start = reinterpret_cast<const uint8_t*>(payload.data());
  const uint8_t* p = start;
  const uint8_t* end = start + payload.size();
  indexes->clear();
  uint64_t raw;
  if (!ReadVarint(&p, end, &raw)) {
    *reason = "message indexes: truncated count";
    return false;
  }
  int64_t count = internal::UnZigZag64(raw);
  if (count == 0) {
    indexes->push_back(0);
    *consumed = static_cast<size_t>(p - start);
    return true;
  }
  if (count < 0 || count > end - p) {
    *reason = fmt::format("message indexes: bad count {}", count);
    return false;
  }
  for (int64_t i = 0; i < count; ++i) {
    if (!ReadVarint(&p, end, &raw)) {
      *reason = "message indexes: truncated index";
      return false;
    }
    int64_t v = internal::UnZigZag64(raw);
    if (v < 0 || v > INT32_MAX) {
      *reason = fmt::format("message indexes: bad index {}", v);
      return false;
    }
    indexes->push_back(static_cast<int>(v));
  }
  *consumed = static_cast<size_t>(p - start);
  return true;
}

void WriteMessageIndexes(std::span<const int> indexes, std::string* out) {
  if (indexes.size() == 1 && indexes[0] == 0) {
    out->push_back('\0');
    return;
  }
  internal::WriteVarint(internal::ZigZag64(static_cast<int64_t>(indexes.size())), out);
  for (int i : indexes) internal::WriteVarint(internal::ZigZag64(i), out);
}

Result<const MessageType*> FindMessage(const Parsed& schema, std::span<const int> indexes) {
  const std::vector<MessageType>* level = &schema.file->messages;
  const MessageType* m = nullptr;
  if (indexes.empty()) {
    if (level->empty()) return InvalidArgumentError("the schema has no message");
    return &(*level)[0];
  }
  for (int i : indexes) {
    if (i < 0 || static_cast<size_t>(i) >= level->size())
      return InvalidArgumentError("message index {} out of range (the schema has {} there)", i,
                                  level->size());
    m = &(*level)[i];
    level = &m->messages;
  }
  return m;
}

namespace {

bool IndexesOf(const std::vector<MessageType>& level, std::string_view name,
               std::vector<int>* path) {
  for (size_t i = 0; i < level.size(); ++i) {
    path->push_back(static_cast<int>(i));
    if (level[i].full_name == name) return true;
    if (IndexesOf(level[i].messages, name, path)) return true;
    path->pop_back();
  }
  return false;
}

}  // namespace

Result<std::vector<int>> MessageIndexesOf(const Parsed& schema, std::string_view full_name) {
  std::vector<int> path;
  if (IndexesOf(schema.file->messages, full_name, &path)) return path;
  if (!schema.file->package.empty()) {
    std::string qualified = schema.file->package + "." + std::string(full_name);
    if (IndexesOf(schema.file->messages, qualified, &path)) return path;
  }
  return NotFoundError("no message '{}' in the schema", full_name);
}

}  // namespace sluice::schema::protobuf
