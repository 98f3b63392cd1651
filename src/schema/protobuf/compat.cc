// Incompatibilities: Confluent's Protobuf schema diff (io.confluent.kafka.schemaregistry.
// protobuf.diff), rewritten over our Parsed: the writer's schema is the "original", the
// reader's the "update"; every difference is found, and those outside Confluent's set of
// compatible changes are reported as "<TYPE> at #/<path>".
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "schema/protobuf/internal.h"

namespace sluice::schema::protobuf {

namespace {

enum class Diff {
  kPackageChanged,
  kMessageAdded,
  kMessageRemoved,
  kMessageMoved,
  kEnumAdded,
  kEnumRemoved,
  kEnumConstAdded,
  kEnumConstChanged,
  kEnumConstRemoved,
  kFieldAdded,
  kFieldRemoved,
  kFieldNameChanged,
  kFieldKindChanged,
  kFieldScalarKindChanged,
  kFieldNamedTypeChanged,
  kFieldNumericLabelChanged,
  kFieldStringOrBytesLabelChanged,
  kRequiredFieldAdded,
  kRequiredFieldRemoved,
  kOneofAdded,
  kOneofRemoved,
  kOneofFieldAdded,
  kOneofFieldRemoved,
  kOneofFieldMovedToTopLevel,
  kMultipleFieldsMovedToOneof,
  kFieldMovedToExistingOneof,
};

std::string_view DiffName(Diff d) {
  static constexpr std::string_view kNames[] = {
      "PACKAGE_CHANGED",
      "MESSAGE_ADDED",
      "MESSAGE_REMOVED",
      "MESSAGE_MOVED",
      "ENUM_ADDED",
      "ENUM_REMOVED",
      "ENUM_CONST_ADDED",
      "ENUM_CONST_CHANGED",
      "ENUM_CONST_REMOVED",
      "FIELD_ADDED",
      "FIELD_REMOVED",
      "FIELD_NAME_CHANGED",
      "FIELD_KIND_CHANGED",
      "FIELD_SCALAR_KIND_CHANGED",
      "FIELD_NAMED_TYPE_CHANGED",
      "FIELD_NUMERIC_LABEL_CHANGED",
      "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
      "REQUIRED_FIELD_ADDED",
      "REQUIRED_FIELD_REMOVED",
      "ONEOF_ADDED",
      "ONEOF_REMOVED",
      "ONEOF_FIELD_ADDED",
      "ONEOF_FIELD_REMOVED",
      "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
      "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
      "FIELD_MOVED_TO_EXISTING_ONEOF",
  };
  return kNames[static_cast<int>(d)];
}

// SchemaDiff.COMPATIBLE_CHANGES.
bool Compatible(Diff d) {
  switch (d) {
    case Diff::kMessageAdded:
    case Diff::kMessageMoved:
    case Diff::kEnumAdded:
    case Diff::kEnumRemoved:
    case Diff::kEnumConstAdded:
    case Diff::kEnumConstChanged:
    case Diff::kEnumConstRemoved:
    case Diff::kFieldAdded:
    case Diff::kFieldRemoved:
    case Diff::kFieldNameChanged:
    case Diff::kFieldStringOrBytesLabelChanged:
    case Diff::kOneofAdded:
    case Diff::kOneofRemoved:
    case Diff::kOneofFieldAdded:
    case Diff::kOneofFieldMovedToTopLevel:
      return true;
    default:
      return false;
  }
}

// FieldSchemaDiff's kinds: scalars grouped as protobuf's "updating a message type" allows.
enum class Kind { kScalar, kMap, kMessage };
enum class ScalarKind {
  kGeneralNumber,
  kSignedNumber,
  kStringOrBytes,
  kFixed32,
  kFixed64,
  kFloat,
  kDouble
};

ScalarKind ScalarKindOf(FieldType t) {
  switch (t) {
    case FieldType::kSint32:
    case FieldType::kSint64:
      return ScalarKind::kSignedNumber;
    case FieldType::kString:
    case FieldType::kBytes:
      return ScalarKind::kStringOrBytes;
    case FieldType::kFixed32:
    case FieldType::kSfixed32:
      return ScalarKind::kFixed32;
    case FieldType::kFixed64:
    case FieldType::kSfixed64:
      return ScalarKind::kFixed64;
    case FieldType::kFloat:
      return ScalarKind::kFloat;
    case FieldType::kDouble:
      return ScalarKind::kDouble;
    default:
      return ScalarKind::kGeneralNumber;  // int32/64, uint32/64, bool, enum
  }
}

// A field's type as the diff sees it: a map's key and value are compared as fields.
struct TypeView {
  FieldType type;
  const MessageType* message;
  Kind kind() const {
    return type == FieldType::kMessage || type == FieldType::kGroup ? Kind::kMessage
                                                                    : Kind::kScalar;
  }
};

class Differ {
 public:
  Differ(const Parsed& original, const Parsed& update) : o_(original), u_(update) {}

  void File() {
    if (o_.file->package != u_.file->package) Add(Diff::kPackageChanged);
    Types(o_.file->messages, u_.file->messages, o_.file->enums, u_.file->enums);
  }

  std::vector<std::string> Incompatible() const {
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (const auto& [d, path] : diffs_) {
      if (Compatible(d)) continue;
      std::string s = fmt::format("{} at {}", DiffName(d), path);
      if (seen.insert(s).second) out.push_back(std::move(s));
    }
    return out;
  }

 private:
  void Add(Diff d) {
    std::string path = "#/";
    for (size_t i = 0; i < path_.size(); ++i) path += (i ? "/" : "") + path_[i];
    diffs_.emplace_back(d, std::move(path));
  }

  struct Scope {
    Scope(Differ* d, std::string s) : d_(d) { d_->path_.push_back(std::move(s)); }
    ~Scope() { d_->path_.pop_back(); }
    Differ* d_;
  };

  void Types(const std::vector<MessageType>& om, const std::vector<MessageType>& um,
             const std::vector<EnumType>& oe, const std::vector<EnumType>& ue) {
    std::map<std::string, std::pair<const MessageType*, int>> o_msgs, u_msgs;
    auto index = [](const std::vector<MessageType>& v, auto* out) {
      int i = 0;
      for (const MessageType& m : v) {
        if (!m.is_group) (*out)[m.name] = {&m, i++};
      }
    };
    index(om, &o_msgs);
    index(um, &u_msgs);
    std::set<std::string> names;
    for (const auto& [n, _] : o_msgs) names.insert(n);
    for (const auto& [n, _] : u_msgs) names.insert(n);
    for (const std::string& n : names) {
      Scope s(this, n);
      auto o = o_msgs.find(n);
      auto u = u_msgs.find(n);
      if (u == u_msgs.end()) {
        Add(Diff::kMessageRemoved);
      } else if (o == o_msgs.end()) {
        Add(Diff::kMessageAdded);
      } else {
        Message(*o->second.first, *u->second.first);
        if (o->second.second != u->second.second) Add(Diff::kMessageMoved);
      }
    }
    std::map<std::string, const EnumType*> o_enums, u_enums;
    for (const EnumType& e : oe) o_enums[e.name] = &e;
    for (const EnumType& e : ue) u_enums[e.name] = &e;
    names.clear();
    for (const auto& [n, _] : o_enums) names.insert(n);
    for (const auto& [n, _] : u_enums) names.insert(n);
    for (const std::string& n : names) {
      Scope s(this, n);
      auto o = o_enums.find(n);
      auto u = u_enums.find(n);
      if (u == u_enums.end()) {
        Add(Diff::kEnumRemoved);
      } else if (o == o_enums.end()) {
        Add(Diff::kEnumAdded);
      } else {
        Enum(*o->second, *u->second);
      }
    }
  }

  void Enum(const EnumType& o, const EnumType& u) {
    std::map<int32_t, const EnumValue*> ov, uv;
    for (const EnumValue& v : o.values) ov[v.number] = &v;
    for (const EnumValue& v : u.values) uv[v.number] = &v;
    std::set<int32_t> tags;
    for (const auto& [t, _] : ov) tags.insert(t);
    for (const auto& [t, _] : uv) tags.insert(t);
    for (int32_t t : tags) {
      Scope s(this, std::to_string(t));
      auto a = ov.find(t);
      auto b = uv.find(t);
      if (b == uv.end()) {
        Add(Diff::kEnumConstRemoved);
      } else if (a == ov.end()) {
        Add(Diff::kEnumConstAdded);
      } else if (a->second->name != b->second->name) {
        Add(Diff::kEnumConstChanged);
      }
    }
  }

  void Message(const MessageType& o, const MessageType& u) {
    if (!visiting_.count(&o)) {
      visiting_.insert(&o);
      MessageFields(o, u);
      visiting_.erase(&o);
    }
    Types(o.messages, u.messages, o.enums, u.enums);
  }

  void MessageFields(const MessageType& o, const MessageType& u) {
    std::map<int32_t, const Field*> ob, ub;
    for (const Field& f : o.fields) {
      if (f.type != FieldType::kGroup) ob[f.number] = &f;
    }
    for (const Field& f : u.fields) {
      if (f.type != FieldType::kGroup) ub[f.number] = &f;
    }
    auto oneof_name = [](const MessageType& m, const Field* f) -> const std::string* {
      return f != nullptr && f->oneof >= 0 ? &m.oneofs[f->oneof].name : nullptr;
    };
    // A oneof removed with none of its members left anywhere is a complete deletion.
    std::set<std::string> u_oneofs, o_oneofs, deleted;
    for (const Oneof& x : u.oneofs) u_oneofs.insert(x.name);
    for (const Oneof& x : o.oneofs) o_oneofs.insert(x.name);
    for (size_t i = 0; i < o.oneofs.size(); ++i) {
      if (u_oneofs.count(o.oneofs[i].name)) continue;
      bool survives = false;
      for (const Field& f : o.fields) {
        if (f.oneof == static_cast<int>(i) && ub.count(f.number)) survives = true;
      }
      if (!survives) deleted.insert(o.oneofs[i].name);
    }
    // Newly mutually exclusive fields.
    for (size_t i = 0; i < u.oneofs.size(); ++i) {
      Scope s(this, u.oneofs[i].name);
      std::set<std::string> groups;
      int moved_in = 0;
      for (const Field& f : u.fields) {
        if (f.oneof != static_cast<int>(i)) continue;
        auto it = ob.find(f.number);
        if (it == ob.end()) continue;
        if (const std::string* on = oneof_name(o, it->second)) {
          groups.insert("oneof:" + *on);
        } else {
          groups.insert("field:" + std::to_string(f.number));
          ++moved_in;
        }
      }
      if (groups.size() > 1)
        Add(moved_in > 1 ? Diff::kMultipleFieldsMovedToOneof : Diff::kFieldMovedToExistingOneof);
    }
    std::set<std::string> all_oneofs = o_oneofs;
    all_oneofs.insert(u_oneofs.begin(), u_oneofs.end());
    for (const std::string& n : all_oneofs) {
      Scope s(this, n);
      if (!u_oneofs.count(n)) {
        Add(Diff::kOneofRemoved);
      } else if (!o_oneofs.count(n)) {
        Add(Diff::kOneofAdded);
      }
    }
    std::set<int32_t> tags;
    for (const auto& [t, _] : ob) tags.insert(t);
    for (const auto& [t, _] : ub) tags.insert(t);
    for (int32_t tag : tags) {
      auto oi = ob.find(tag);
      auto ui = ub.find(tag);
      const Field* of = oi == ob.end() ? nullptr : oi->second;
      const Field* uf = ui == ub.end() ? nullptr : ui->second;
      const std::string* o_oneof = oneof_name(o, of);
      const std::string* u_oneof = oneof_name(u, uf);
      std::string t = std::to_string(tag);
      if (uf == nullptr) {
        if (o_oneof != nullptr) {
          if (!deleted.count(*o_oneof)) {
            Scope a(this, *o_oneof), b(this, t);
            Add(Diff::kOneofFieldRemoved);
          }
        } else {
          Scope a(this, t);
          Add(of->label == Label::kRequired ? Diff::kRequiredFieldRemoved : Diff::kFieldRemoved);
        }
      } else if (of == nullptr) {
        if (u_oneof != nullptr) {
          Scope a(this, *u_oneof), b(this, t);
          Add(Diff::kOneofFieldAdded);
        } else {
          Scope a(this, t);
          Add(uf->label == Label::kRequired ? Diff::kRequiredFieldAdded : Diff::kFieldAdded);
        }
      } else {
        if (o_oneof != nullptr && u_oneof == nullptr) {
          Scope a(this, t);
          Add(Diff::kOneofFieldMovedToTopLevel);
        }
        if (u_oneof != nullptr) {
          Scope a(this, *u_oneof), b(this, t);
          Field_(*of, *uf);
        } else {
          Scope a(this, t);
          Field_(*of, *uf);
        }
      }
    }
  }

  void Field_(const Field& o, const Field& u) {
    if (o.name != u.name) Add(Diff::kFieldNameChanged);
    Kind ok = o.is_map ? Kind::kMap : TypeView{o.type, o.message}.kind();
    Kind uk = u.is_map ? Kind::kMap : TypeView{u.type, u.message}.kind();
    if (ok != uk) {
      Add(Diff::kFieldKindChanged);
      return;
    }
    // Confluent: a label null (proto3 without one, oneof members) is never "changed".
    bool labels = o.label != Label::kNone && u.label != Label::kNone && o.label != u.label;
    if (ok == Kind::kMap) {
      LabelsAndTypes(false, {o.map_key, nullptr}, {u.map_key, nullptr});
      LabelsAndTypes(false, {o.type, o.message}, {u.type, u.message});
    } else {
      LabelsAndTypes(labels, {o.type, o.message}, {u.type, u.message});
    }
  }

  void LabelsAndTypes(bool labels_differ, TypeView o, TypeView u) {
    if (o.kind() != u.kind()) {
      Add(Diff::kFieldKindChanged);
      return;
    }
    if (o.kind() == Kind::kScalar) {
      ScalarKind a = ScalarKindOf(o.type), b = ScalarKindOf(u.type);
      if (a != b) {
        Add(Diff::kFieldScalarKindChanged);
      } else if (labels_differ) {
        Add(a == ScalarKind::kStringOrBytes ? Diff::kFieldStringOrBytesLabelChanged
                                            : Diff::kFieldNumericLabelChanged);
      }
      return;
    }
    MessageTypes(o.message, u.message);
  }

  std::string LocalName(const Parsed& p, const MessageType* m) const {
    auto it = p.owner.find(m);
    const std::string& pkg = it == p.owner.end() ? std::string() : it->second->package;
    if (!pkg.empty() && m->full_name.compare(0, pkg.size() + 1, pkg + ".") == 0)
      return m->full_name.substr(pkg.size() + 1);
    return m->full_name;
  }

  void MessageTypes(const MessageType* o, const MessageType* u) {
    if (o == nullptr || u == nullptr) return;
    std::string ol = LocalName(o_, o), ul = LocalName(u_, u);
    if (ol != ul) {
      Add(Diff::kFieldNamedTypeChanged);
      return;
    }
    // Types of the schemas themselves are compared where they are declared; a type from an
    // import is compared here, in a scope of its own name.
    bool o_local = o_.owner.count(o) && o_.owner.at(o) == o_.file.get();
    bool u_local = u_.owner.count(u) && u_.owner.at(u) == u_.file.get();
    if (o_local && u_local) return;
    if (visiting_.count(o)) return;
    Differ sub(o_, u_);
    sub.visiting_ = visiting_;
    size_t start = 0;
    while (start <= ol.size()) {
      size_t dot = ol.find('.', start);
      if (dot == std::string::npos) dot = ol.size();
      sub.path_.push_back(ol.substr(start, dot - start));
      start = dot + 1;
    }
    sub.visiting_.insert(o);
    sub.MessageFields(*o, *u);
    bool compatible = true;
    for (const auto& d : sub.diffs_) {
      diffs_.push_back(d);
      if (!Compatible(d.first)) compatible = false;
    }
    if (!compatible) Add(Diff::kFieldNamedTypeChanged);
  }

  const Parsed& o_;
  const Parsed& u_;
  std::vector<std::string> path_;
  std::set<const MessageType*> visiting_;
  std::vector<std::pair<Diff, std::string>> diffs_;
};

}  // namespace

std::vector<std::string> Incompatibilities(const Parsed& reader, const Parsed& writer) {
  Differ d(writer, reader);
  d.File();
  return d.Incompatible();
}

}  // namespace sluice::schema::protobuf
