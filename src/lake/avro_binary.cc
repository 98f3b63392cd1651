// avro: the binary encoding. Encode() checks a Datum against a schema while writing it;
// Decode() and the file reader (avro_file.cc) read through avro_decoder.h's Decoder.
#include <cstring>
#include <limits>

#include "lake/avro.h"
#include "lake/avro_decoder.h"

namespace sluice::lake::avro {

namespace {

bool Compatible(const Node& n, Datum::Kind k) {
  switch (n.type) {
    case Type::kNull:
      return k == Datum::Kind::kNull;
    case Type::kBoolean:
      return k == Datum::Kind::kBoolean;
    case Type::kInt:
      return k == Datum::Kind::kInt;
    case Type::kLong:
      return k == Datum::Kind::kLong;
    case Type::kFloat:
      return k == Datum::Kind::kFloat;
    case Type::kDouble:
      return k == Datum::Kind::kDouble;
    case Type::kBytes:
      return k == Datum::Kind::kBytes;
    case Type::kString:
      return k == Datum::Kind::kString;
    case Type::kRecord:
      return k == Datum::Kind::kRecord;
    case Type::kEnum:
      return k == Datum::Kind::kEnum;
    case Type::kArray:
      return k == Datum::Kind::kArray;
    case Type::kMap:
      return k == Datum::Kind::kMap;
    case Type::kFixed:
      return k == Datum::Kind::kFixed;
    case Type::kUnion:
      return false;
  }
  return false;
}

std::string Describe(const Node& n) {
  if (n.is_named()) return fmt::format("{} {}", TypeName(n.type), n.full_name);
  if (n.type != Type::kUnion) return std::string(TypeName(n.type));
  std::string s = "union [";
  for (size_t i = 0; i < n.branches.size(); ++i) {
    if (i) s += ", ";
    s += Describe(*n.branches[i]);
  }
  return s + "]";
}

// Writes one value, checking it; `path` names where it is for errors.
class Encoder {
 public:
  explicit Encoder(std::string* out) : out_(out) {}

  Status Write(const Node& n, const Datum& d, int depth) {
    if (depth > kMaxDepth) return Error("nested deeper than {} levels", kMaxDepth);
    if (n.type == Type::kUnion) return WriteUnion(n, d, depth);
    if (!Compatible(n, d.kind()))
      return Error("expected {}, got {}", Describe(n), KindName(d.kind()));
    switch (n.type) {
      case Type::kNull:
        return Status::OK();
      case Type::kBoolean:
        out_->push_back(d.boolean() ? 1 : 0);
        return Status::OK();
      case Type::kInt:
        WriteLong(d.int_value(), out_);
        return Status::OK();
      case Type::kLong:
        WriteLong(d.long_value(), out_);
        return Status::OK();
      case Type::kFloat: {
        float f = d.float_value();
        char b[4];
        std::memcpy(b, &f, 4);  // little-endian hosts only (x86-64, arm64)
        out_->append(b, 4);
        return Status::OK();
      }
      case Type::kDouble: {
        double v = d.double_value();
        char b[8];
        std::memcpy(b, &v, 8);
        out_->append(b, 8);
        return Status::OK();
      }
      case Type::kString:
        if (!IsValidUtf8(d.bytes())) return Error("string is not valid UTF-8");
        [[fallthrough]];
      case Type::kBytes:
        WriteLong(static_cast<int64_t>(d.bytes().size()), out_);
        out_->append(d.bytes());
        return Status::OK();
      case Type::kFixed:
        if (static_cast<int64_t>(d.bytes().size()) != n.size) {
          return Error("fixed {} takes {} bytes, got {}", n.full_name, n.size, d.bytes().size());
        }
        out_->append(d.bytes());
        return Status::OK();
      case Type::kEnum:
        for (size_t i = 0; i < n.symbols.size(); ++i) {
          if (n.symbols[i] == d.bytes()) {
            WriteLong(static_cast<int64_t>(i), out_);
            return Status::OK();
          }
        }
        return Error("\"{}\" is not a symbol of enum {}", d.bytes(), n.full_name);
      case Type::kArray:
        if (!d.items().empty()) {
          WriteLong(static_cast<int64_t>(d.items().size()), out_);
          for (size_t i = 0; i < d.items().size(); ++i) {
            size_t mark = path_.size();
            path_ += fmt::format("[{}]", i);
            RETURN_IF_ERROR(Write(*n.items, d.items()[i], depth + 1));
            path_.resize(mark);
          }
        }
        out_->push_back(0);
        return Status::OK();
      case Type::kMap:
        if (!d.items().empty()) {
          WriteLong(static_cast<int64_t>(d.items().size()), out_);
          for (size_t i = 0; i < d.items().size(); ++i) {
            const std::string& key = d.names()[i];
            size_t mark = path_.size();
            path_ += fmt::format("[\"{}\"]", key);
            if (!IsValidUtf8(key)) return Error("map key is not valid UTF-8");
            WriteLong(static_cast<int64_t>(key.size()), out_);
            out_->append(key);
            RETURN_IF_ERROR(Write(*n.values, d.items()[i], depth + 1));
            path_.resize(mark);
          }
        }
        out_->push_back(0);
        return Status::OK();
      case Type::kRecord:
        return WriteRecord(n, d, depth);
      case Type::kUnion:
        break;
    }
    return Error("unhandled type");
  }

  const std::string& path() const { return path_; }

 private:
  template <typename... Args>
  Status Error(fmt::format_string<Args...> f, Args&&... args) {
    return InvalidArgumentError("{}: {}", path_.empty() ? "value" : path_,
                                fmt::format(f, std::forward<Args>(args)...));
  }

  Status WriteRecord(const Node& n, const Datum& d, int depth) {
    for (const std::string& name : d.names()) {
      if (n.FieldIndex(name) < 0) return Error("record {} has no field \"{}\"", n.full_name, name);
    }
    for (const Field& f : n.fields) {
      size_t mark = path_.size();
      if (!path_.empty()) path_ += '.';
      path_ += f.name;
      const Datum* v = d.Find(f.name);
      if (v == nullptr) {
        if (!f.default_value) return Error("missing, and the field has no default");
        v = &*f.default_value;
      }
      RETURN_IF_ERROR(Write(*f.type, *v, depth + 1));
      path_.resize(mark);
    }
    return Status::OK();
  }

  Status WriteUnion(const Node& n, const Datum& d, int depth) {
    int chosen = d.union_branch();
    if (chosen >= static_cast<int>(n.branches.size())) {
      return Error("union branch {} of {} does not exist", chosen, Describe(n));
    }
    if (chosen >= 0) {
      WriteLong(chosen, out_);
      return Write(*n.branches[static_cast<size_t>(chosen)], d, depth + 1);
    }
    // The first branch of the datum's kind that takes it (records: the first whose fields fit).
    Status first_error;
    size_t mark = out_->size();
    for (size_t i = 0; i < n.branches.size(); ++i) {
      if (!Compatible(*n.branches[i], d.kind())) continue;
      WriteLong(static_cast<int64_t>(i), out_);
      Status st = Write(*n.branches[i], d, depth + 1);
      if (st.ok()) return st;
      out_->resize(mark);
      if (first_error.ok()) first_error = st;
    }
    if (!first_error.ok()) return first_error;
    return Error("expected {}, got {}", Describe(n), KindName(d.kind()));
  }

  std::string* out_;
  std::string path_;
};

}  // namespace

void WriteLong(int64_t v, std::string* out) {
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  while (z >= 0x80) {
    out->push_back(static_cast<char>((z & 0x7F) | 0x80));
    z >>= 7;
  }
  out->push_back(static_cast<char>(z));
}

Status Encode(const Node& schema, const Datum& datum, std::string* out) {
  size_t mark = out->size();
  Status st = Encoder(out).Write(schema, datum, 0);
  if (!st.ok()) out->resize(mark);
  return st;
}

// --- Decoder ---------------------------------------------------------------------------

Decoder::Decoder(std::string_view data, const DecodeOptions& options, int64_t* zero_budget)
    : data_(data), options_(options), zero_budget_(zero_budget) {}

Status Decoder::Fail(size_t at, std::string_view what) {
  fail_at_ = at;
  error_path_.clear();
  return CorruptionError("{}", what);
}

Status Decoder::ReadLong(int64_t* v) {
  size_t start = pos_;
  uint64_t u = 0;
  for (int i = 0;; ++i) {
    if (pos_ >= data_.size()) return Fail(start, "truncated varint");
    auto b = static_cast<uint8_t>(data_[pos_++]);
    if (i == 9 && b > 1) return Fail(start, "varint overflows 64 bits");
    u |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
    if ((b & 0x80) == 0) break;
  }
  *v = static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
  return Status::OK();
}

Status Decoder::ReadInt(int32_t* v) {
  size_t start = pos_;
  uint32_t u = 0;
  for (int i = 0;; ++i) {
    if (pos_ >= data_.size()) return Fail(start, "truncated varint");
    auto b = static_cast<uint8_t>(data_[pos_++]);
    if (i == 4 && b > 0x0F) return Fail(start, "varint overflows 32 bits");
    u |= static_cast<uint32_t>(b & 0x7F) << (7 * i);
    if ((b & 0x80) == 0) break;
  }
  *v = static_cast<int32_t>((u >> 1) ^ (~(u & 1) + 1));
  return Status::OK();
}

Status Decoder::ReadLength(size_t* n, std::string_view what) {
  size_t start = pos_;
  int64_t v;
  RETURN_IF_ERROR(ReadLong(&v));
  if (v < 0) return Fail(start, fmt::format("negative {} length {}", what, v));
  if (static_cast<uint64_t>(v) > remaining()) {
    return Fail(start, fmt::format("{} length {} but only {} bytes left", what, v, remaining()));
  }
  *n = static_cast<size_t>(v);
  return Status::OK();
}

Status Decoder::ReadBytes(std::string* out, std::string_view what) {
  size_t n;
  RETURN_IF_ERROR(ReadLength(&n, what));
  out->assign(data_.data() + pos_, n);
  pos_ += n;
  return Status::OK();
}

Status Decoder::ReadFixed(size_t n, std::string* out) {
  if (n > remaining())
    return Fail(pos_, fmt::format("{} fixed bytes but only {} left", n, remaining()));
  out->assign(data_.data() + pos_, n);
  pos_ += n;
  return Status::OK();
}

Status Decoder::ChargeCount(int64_t count, int64_t min_size, size_t at) {
  if (min_size > 0) {
    if (static_cast<uint64_t>(count) > remaining() / static_cast<uint64_t>(min_size)) {
      return Fail(at, fmt::format("count {} of values of at least {} bytes but only {} bytes left",
                                  count, min_size, remaining()));
    }
    return Status::OK();
  }
  if (count > *zero_budget_) {
    return Fail(at, fmt::format("count {} of values that take no bytes is over the limit of {}",
                                count, options_.max_zero_size_values));
  }
  *zero_budget_ -= count;
  return Status::OK();
}

// One block header of an array or map: the item count (0 at the end) and, for a negative
// count, the block's byte size, which is then checked against what the items took.
Status Decoder::ReadBlockCount(int64_t min_size, int64_t* count, size_t* block_end) {
  size_t start = pos_;
  RETURN_IF_ERROR(ReadLong(count));
  *block_end = 0;
  if (*count < 0) {
    if (*count == std::numeric_limits<int64_t>::min()) return Fail(start, "block count overflows");
    *count = -*count;
    size_t size;
    RETURN_IF_ERROR(ReadLength(&size, "block"));
    *block_end = pos_ + size;
  }
  if (*count > 0) RETURN_IF_ERROR(ChargeCount(*count, min_size, start));
  return Status::OK();
}

Status Decoder::CheckBlockEnd(size_t block_end, size_t start) {
  if (block_end != 0 && pos_ != block_end) {
    return Fail(start, fmt::format("block declared {} bytes but its items took {}",
                                   block_end - start, pos_ - start));
  }
  return Status::OK();
}

Status Decoder::Read(const Node& n, Datum* out, int depth) {
  if (depth > kMaxDepth) return Fail(pos_, fmt::format("nested deeper than {} levels", kMaxDepth));
  switch (n.type) {
    case Type::kNull:
      *out = Datum::Null();
      return Status::OK();
    case Type::kBoolean: {
      if (remaining() < 1) return Fail(pos_, "truncated boolean");
      auto b = static_cast<uint8_t>(data_[pos_]);
      if (b > 1) return Fail(pos_, fmt::format("boolean byte {}", b));
      ++pos_;
      *out = Datum::Boolean(b == 1);
      return Status::OK();
    }
    case Type::kInt: {
      int32_t v;
      RETURN_IF_ERROR(ReadInt(&v));
      *out = Datum::Int(v);
      return Status::OK();
    }
    case Type::kLong: {
      int64_t v;
      RETURN_IF_ERROR(ReadLong(&v));
      *out = Datum::Long(v);
      return Status::OK();
    }
    case Type::kFloat: {
      if (remaining() < 4) return Fail(pos_, "truncated float");
      float f;
      std::memcpy(&f, data_.data() + pos_, 4);
      pos_ += 4;
      *out = Datum::Float(f);
      return Status::OK();
    }
    case Type::kDouble: {
      if (remaining() < 8) return Fail(pos_, "truncated double");
      double v;
      std::memcpy(&v, data_.data() + pos_, 8);
      pos_ += 8;
      *out = Datum::Double(v);
      return Status::OK();
    }
    case Type::kBytes: {
      std::string s;
      RETURN_IF_ERROR(ReadBytes(&s, "bytes"));
      *out = Datum::Bytes(std::move(s));
      return Status::OK();
    }
    case Type::kString: {
      size_t start = pos_;
      std::string s;
      RETURN_IF_ERROR(ReadBytes(&s, "string"));
      if (!IsValidUtf8(s)) return Fail(start, "string is not valid UTF-8");
      *out = Datum::String(std::move(s));
      return Status::OK();
    }
    case Type::kFixed: {
      std::string s;
      RETURN_IF_ERROR(ReadFixed(static_cast<size_t>(n.size), &s));
      *out = Datum::Fixed(std::move(s));
      return Status::OK();
    }
    case Type::kEnum: {
      size_t start = pos_;
      int32_t i;
      RETURN_IF_ERROR(ReadInt(&i));
      if (i < 0 || static_cast<size_t>(i) >= n.symbols.size()) {
        return Fail(start, fmt::format("enum index {} of {} symbols", i, n.symbols.size()));
      }
      *out = Datum::Enum(n.symbols[static_cast<size_t>(i)]);
      return Status::OK();
    }
    case Type::kUnion: {
      size_t start = pos_;
      int64_t i;
      RETURN_IF_ERROR(ReadLong(&i));
      if (i < 0 || static_cast<uint64_t>(i) >= n.branches.size()) {
        return Fail(start, fmt::format("union index {} of {} branches", i, n.branches.size()));
      }
      RETURN_IF_ERROR(Read(*n.branches[static_cast<size_t>(i)], out, depth + 1));
      out->set_union_branch(static_cast<int>(i));
      return Status::OK();
    }
    case Type::kRecord: {
      std::vector<std::pair<std::string, Datum>> fields(n.fields.size());
      for (size_t i = 0; i < n.fields.size(); ++i) {
        fields[i].first = n.fields[i].name;
        Status st = Read(*n.fields[i].type, &fields[i].second, depth + 1);
        if (!st.ok()) return AddPath(st, "." + n.fields[i].name);
      }
      *out = Datum::Record(std::move(fields));
      return Status::OK();
    }
    case Type::kArray: {
      *out = Datum::Array({});
      while (true) {
        int64_t count;
        size_t block_end;
        RETURN_IF_ERROR(ReadBlockCount(n.items->min_size, &count, &block_end));
        if (count == 0) return Status::OK();
        size_t start = pos_;
        for (int64_t k = 0; k < count; ++k) {
          Datum item;
          Status st = Read(*n.items, &item, depth + 1);
          if (!st.ok()) return AddPath(st, fmt::format("[{}]", out->items().size()));
          out->Append(std::move(item));
        }
        RETURN_IF_ERROR(CheckBlockEnd(block_end, start));
      }
    }
    case Type::kMap: {
      std::vector<std::pair<std::string, Datum>> entries;
      while (true) {
        int64_t count;
        size_t block_end;
        // A map entry is its key (at least a length byte) and its value.
        RETURN_IF_ERROR(ReadBlockCount(1 + n.values->min_size, &count, &block_end));
        if (count == 0) break;
        size_t start = pos_;
        for (int64_t k = 0; k < count; ++k) {
          std::pair<std::string, Datum> e;
          size_t key_at = pos_;
          RETURN_IF_ERROR(ReadBytes(&e.first, "map key"));
          if (!IsValidUtf8(e.first)) return Fail(key_at, "map key is not valid UTF-8");
          Status st = Read(*n.values, &e.second, depth + 1);
          if (!st.ok()) return AddPath(st, fmt::format("[\"{}\"]", e.first));
          entries.push_back(std::move(e));
        }
        RETURN_IF_ERROR(CheckBlockEnd(block_end, start));
      }
      *out = Datum::Map(std::move(entries));
      return Status::OK();
    }
  }
  return Fail(pos_, "unhandled type");
}

Status Decoder::Format(const Status& raw) {
  std::string path;
  for (auto it = error_path_.rbegin(); it != error_path_.rend(); ++it) path += *it;
  error_path_.clear();
  if (!path.empty() && path[0] == '.') path.erase(0, 1);
  std::string where = location_ ? location_(fail_at_) : fmt::format("at byte {}", fail_at_);
  return Status(raw.code(),
                fmt::format("{}: {}{}", where, path.empty() ? "" : path + ": ", raw.message()));
}

Status Decoder::ReadValue(const Node& n, Datum* out) {
  Status st = Read(n, out, 0);
  return st.ok() ? st : Format(st);
}

Status Decoder::ReadCount(int64_t* count) {
  size_t start = pos_;
  Status st = ReadLong(count);
  if (st.ok() && *count < 0) st = Fail(start, fmt::format("negative count {}", *count));
  return st.ok() ? st : Format(st);
}

Status Decoder::ReadLengthAt(size_t* n, std::string_view what) {
  Status st = ReadLength(n, what);
  return st.ok() ? st : Format(st);
}

Status Decoder::ReadBlockCountAt(int64_t min_size, int64_t* count, size_t* block_end) {
  Status st = ReadBlockCount(min_size, count, block_end);
  return st.ok() ? st : Format(st);
}

Status Decoder::ReadBytesAt(std::string* out, std::string_view what) {
  Status st = ReadBytes(out, what);
  return st.ok() ? st : Format(st);
}

Status Decoder::ReadFixedAt(size_t n, std::string* out) {
  Status st = ReadFixed(n, out);
  return st.ok() ? st : Format(st);
}

Status Decoder::Error(size_t at, std::string_view what) { return Format(Fail(at, what)); }

Result<Datum> Decode(const Node& schema, std::string_view bytes, const DecodeOptions& options) {
  int64_t budget = options.max_zero_size_values;
  Decoder d(bytes, options, &budget);
  Datum out;
  RETURN_IF_ERROR(d.ReadValue(schema, &out));
  if (d.remaining() != 0)
    return d.Error(d.pos(), fmt::format("{} bytes after the value", d.remaining()));
  return out;
}

}  // namespace sluice::lake::avro
