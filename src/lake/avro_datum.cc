// avro::Datum: constructors, accessors and the text form.
#include "lake/avro_datum.h"

#include <cstring>

namespace sluice::lake::avro {

std::string_view KindName(Datum::Kind kind) {
  switch (kind) {
    case Datum::Kind::kNull:
      return "null";
    case Datum::Kind::kBoolean:
      return "boolean";
    case Datum::Kind::kInt:
      return "int";
    case Datum::Kind::kLong:
      return "long";
    case Datum::Kind::kFloat:
      return "float";
    case Datum::Kind::kDouble:
      return "double";
    case Datum::Kind::kBytes:
      return "bytes";
    case Datum::Kind::kString:
      return "string";
    case Datum::Kind::kRecord:
      return "record";
    case Datum::Kind::kEnum:
      return "enum";
    case Datum::Kind::kArray:
      return "array";
    case Datum::Kind::kMap:
      return "map";
    case Datum::Kind::kFixed:
      return "fixed";
  }
  return "?";
}

Datum Datum::Boolean(bool v) {
  Datum d;
  d.kind_ = Kind::kBoolean;
  d.int_ = v ? 1 : 0;
  return d;
}

Datum Datum::Int(int32_t v) {
  Datum d;
  d.kind_ = Kind::kInt;
  d.int_ = v;
  return d;
}

Datum Datum::Long(int64_t v) {
  Datum d;
  d.kind_ = Kind::kLong;
  d.int_ = v;
  return d;
}

Datum Datum::Float(float v) {
  Datum d;
  d.kind_ = Kind::kFloat;
  d.double_ = v;
  return d;
}

Datum Datum::Double(double v) {
  Datum d;
  d.kind_ = Kind::kDouble;
  d.double_ = v;
  return d;
}

Datum Datum::Bytes(std::string v) {
  Datum d;
  d.kind_ = Kind::kBytes;
  d.bytes_ = std::move(v);
  return d;
}

Datum Datum::String(std::string v) {
  Datum d;
  d.kind_ = Kind::kString;
  d.bytes_ = std::move(v);
  return d;
}

Datum Datum::Enum(std::string symbol) {
  Datum d;
  d.kind_ = Kind::kEnum;
  d.bytes_ = std::move(symbol);
  return d;
}

Datum Datum::Fixed(std::string v) {
  Datum d;
  d.kind_ = Kind::kFixed;
  d.bytes_ = std::move(v);
  return d;
}

Datum Datum::Array(std::vector<Datum> items) {
  Datum d;
  d.kind_ = Kind::kArray;
  d.items_ = std::move(items);
  return d;
}

Datum Datum::Map(std::vector<std::pair<std::string, Datum>> entries) {
  Datum d;
  d.kind_ = Kind::kMap;
  d.names_.reserve(entries.size());
  d.items_.reserve(entries.size());
  for (auto& [k, v] : entries) {
    d.names_.push_back(std::move(k));
    d.items_.push_back(std::move(v));
  }
  return d;
}

Datum Datum::Record(std::vector<std::pair<std::string, Datum>> fields) {
  Datum d = Map(std::move(fields));
  d.kind_ = Kind::kRecord;
  return d;
}

bool Datum::boolean() const {
  SLUICE_ASSERT(kind_ == Kind::kBoolean);
  return int_ != 0;
}

int32_t Datum::int_value() const {
  SLUICE_ASSERT(kind_ == Kind::kInt);
  return static_cast<int32_t>(int_);
}

int64_t Datum::long_value() const {
  SLUICE_ASSERT(kind_ == Kind::kLong);
  return int_;
}

float Datum::float_value() const {
  SLUICE_ASSERT(kind_ == Kind::kFloat);
  return static_cast<float>(double_);
}

double Datum::double_value() const {
  SLUICE_ASSERT(kind_ == Kind::kDouble);
  return double_;
}

const std::string& Datum::bytes() const {
  SLUICE_ASSERT(kind_ == Kind::kBytes || kind_ == Kind::kString || kind_ == Kind::kFixed ||
                kind_ == Kind::kEnum);
  return bytes_;
}

const Datum* Datum::Find(std::string_view name) const {
  if (kind_ != Kind::kRecord && kind_ != Kind::kMap) return nullptr;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return &items_[i];
  }
  return nullptr;
}

Datum& Datum::Set(std::string_view name, Datum value) {
  SLUICE_ASSERT(kind_ == Kind::kRecord || kind_ == Kind::kMap);
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) {
      items_[i] = std::move(value);
      return *this;
    }
  }
  names_.emplace_back(name);
  items_.push_back(std::move(value));
  return *this;
}

void Datum::Append(Datum item) {
  SLUICE_ASSERT(kind_ == Kind::kArray);
  items_.push_back(std::move(item));
}

Result<const Datum*> Datum::At(std::string_view path) const {
  const Datum* d = this;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string_view part = path.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (d->kind_ != Kind::kRecord) {
      return NotFoundError("{}: not a record ({})", path.substr(0, start ? start - 1 : 0),
                           KindName(d->kind_));
    }
    d = d->Find(part);
    if (d == nullptr) {
      return NotFoundError("{}: no such field", path.substr(0, dot));
    }
    if (dot == std::string_view::npos) return d;
    start = dot + 1;
  }
}

namespace {

Result<const Datum*> AtKind(const Datum& d, std::string_view path, Datum::Kind kind,
                            Datum::Kind alt = Datum::Kind::kNull) {
  ASSIGN_OR_RETURN(const Datum* v, d.At(path));
  if (v->kind() != kind && (alt == Datum::Kind::kNull || v->kind() != alt)) {
    return InvalidArgumentError("{}: expected {}, got {}", path, KindName(kind),
                                KindName(v->kind()));
  }
  return v;
}

}  // namespace

Result<bool> Datum::BooleanAt(std::string_view path) const {
  ASSIGN_OR_RETURN(const Datum* v, AtKind(*this, path, Kind::kBoolean));
  return v->boolean();
}

Result<int32_t> Datum::IntAt(std::string_view path) const {
  ASSIGN_OR_RETURN(const Datum* v, AtKind(*this, path, Kind::kInt));
  return v->int_value();
}

Result<int64_t> Datum::LongAt(std::string_view path) const {
  ASSIGN_OR_RETURN(const Datum* v, AtKind(*this, path, Kind::kLong));
  return v->long_value();
}

Result<std::string_view> Datum::StringAt(std::string_view path) const {
  ASSIGN_OR_RETURN(const Datum* v, AtKind(*this, path, Kind::kString));
  return std::string_view(v->bytes());
}

Result<std::string_view> Datum::BytesAt(std::string_view path) const {
  ASSIGN_OR_RETURN(const Datum* v, AtKind(*this, path, Kind::kBytes, Kind::kFixed));
  return std::string_view(v->bytes());
}

bool Datum::operator==(const Datum& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kNull:
      return true;
    case Kind::kBoolean:
    case Kind::kInt:
    case Kind::kLong:
      return int_ == other.int_;
    case Kind::kFloat:
    case Kind::kDouble:
      return std::memcmp(&double_, &other.double_, sizeof(double)) == 0;
    case Kind::kBytes:
    case Kind::kString:
    case Kind::kEnum:
    case Kind::kFixed:
      return bytes_ == other.bytes_;
    case Kind::kRecord:
    case Kind::kMap:
    case Kind::kArray:
      return names_ == other.names_ && items_ == other.items_;
  }
  return false;
}

namespace {

void AppendQuoted(std::string_view s, bool bytes, std::string* out) {
  if (bytes) out->push_back('b');
  out->push_back('"');
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20 || (bytes && c >= 0x7f)) {
      *out += fmt::format("\\x{:02x}", c);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

void AppendText(const Datum& d, std::string* out) {
  switch (d.kind()) {
    case Datum::Kind::kNull:
      *out += "null";
      return;
    case Datum::Kind::kBoolean:
      *out += d.boolean() ? "true" : "false";
      return;
    case Datum::Kind::kInt:
      *out += std::to_string(d.int_value());
      return;
    case Datum::Kind::kLong:
      *out += std::to_string(d.long_value()) + "L";
      return;
    case Datum::Kind::kFloat:
      *out += fmt::format("{}f", d.float_value());
      return;
    case Datum::Kind::kDouble:
      *out += fmt::format("{}", d.double_value());
      return;
    case Datum::Kind::kBytes:
    case Datum::Kind::kFixed:
      AppendQuoted(d.bytes(), true, out);
      return;
    case Datum::Kind::kString:
    case Datum::Kind::kEnum:
      AppendQuoted(d.bytes(), false, out);
      return;
    case Datum::Kind::kArray:
      out->push_back('[');
      for (size_t i = 0; i < d.items().size(); ++i) {
        if (i) *out += ", ";
        AppendText(d.items()[i], out);
      }
      out->push_back(']');
      return;
    case Datum::Kind::kRecord:
    case Datum::Kind::kMap:
      out->push_back('{');
      for (size_t i = 0; i < d.items().size(); ++i) {
        if (i) *out += ", ";
        AppendQuoted(d.names()[i], false, out);
        *out += ": ";
        AppendText(d.items()[i], out);
      }
      out->push_back('}');
      return;
  }
}

}  // namespace

std::string Datum::ToString() const {
  std::string out;
  AppendText(*this, &out);
  return out;
}

}  // namespace sluice::lake::avro
