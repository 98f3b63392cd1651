// The .proto text parser (proto2 and proto3): a tokenizer that keeps line:column, and a
// recursive descent over the grammar of protobuf's language guide. Services, extend blocks
// and option values are parsed; services and extend blocks are then dropped.
#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <optional>

#include "schema/protobuf/internal.h"

namespace sluice::schema::protobuf::internal {

namespace {

constexpr int32_t kMaxFieldNumber = (1 << 29) - 1;

enum class Tok : uint8_t { kIdent, kInt, kFloat, kString, kSymbol, kEnd };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  // identifier / number text as written / unescaped string / symbol
  uint32_t line = 1, column = 1;
};

class Tokenizer {
 public:
  explicit Tokenizer(std::string_view s) : s_(s) {}

  // The next token into `*t`; an error for an unterminated comment or string.
  Status Next(Token* t) {
    RETURN_IF_ERROR(SkipSpace());
    t->line = line_;
    t->column = col_;
    t->text.clear();
    if (i_ >= s_.size()) {
      t->kind = Tok::kEnd;
      return Status::OK();
    }
    char c = s_[i_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      t->kind = Tok::kIdent;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
        t->text += Advance();
      return Status::OK();
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))) {
      t->kind = Tok::kInt;
      if (c == '0' && i_ + 1 < s_.size() && (s_[i_ + 1] == 'x' || s_[i_ + 1] == 'X')) {
        t->text += Advance();
        t->text += Advance();
        while (i_ < s_.size() && std::isxdigit(static_cast<unsigned char>(s_[i_])))
          t->text += Advance();
        if (t->text.size() == 2) return Error(*t, "hex literal without digits");
        return Status::OK();
      }
      while (i_ < s_.size()) {
        char d = s_[i_];
        if (std::isdigit(static_cast<unsigned char>(d))) {
          t->text += Advance();
        } else if (d == '.') {
          t->kind = Tok::kFloat;
          t->text += Advance();
        } else if ((d == 'e' || d == 'E')) {
          t->kind = Tok::kFloat;
          t->text += Advance();
          if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) t->text += Advance();
        } else {
          break;
        }
      }
      if (i_ < s_.size() && (s_[i_] == 'f' || s_[i_] == 'F')) {
        t->kind = Tok::kFloat;
        Advance();
      }
      return Status::OK();
    }
    if (c == '"' || c == '\'') return ReadString(t);
    t->kind = Tok::kSymbol;
    t->text += Advance();
    return Status::OK();
  }

  static Status Error(const Token& t, std::string_view what) {
    return InvalidArgumentError("{}:{}: {}", t.line, t.column, what);
  }

 private:
  char Advance() {
    char c = s_[i_++];
    if (c == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    return c;
  }

  Status SkipSpace() {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (std::isspace(static_cast<unsigned char>(c))) {
        Advance();
      } else if (c == '/' && i_ + 1 < s_.size() && s_[i_ + 1] == '/') {
        while (i_ < s_.size() && s_[i_] != '\n') Advance();
      } else if (c == '/' && i_ + 1 < s_.size() && s_[i_ + 1] == '*') {
        Token at{Tok::kEnd, "", line_, col_};
        Advance();
        Advance();
        while (true) {
          if (i_ + 1 >= s_.size()) return Error(at, "unterminated comment");
          if (s_[i_] == '*' && s_[i_ + 1] == '/') break;
          Advance();
        }
        Advance();
        Advance();
      } else {
        break;
      }
    }
    return Status::OK();
  }

  static int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  Status ReadString(Token* t) {
    t->kind = Tok::kString;
    char quote = Advance();
    while (true) {
      if (i_ >= s_.size() || s_[i_] == '\n') return Error(*t, "unterminated string");
      char c = Advance();
      if (c == quote) return Status::OK();
      if (c != '\\') {
        t->text += c;
        continue;
      }
      if (i_ >= s_.size()) return Error(*t, "unterminated string");
      char e = Advance();
      switch (e) {
        case 'a':
          t->text += '\a';
          break;
        case 'b':
          t->text += '\b';
          break;
        case 'f':
          t->text += '\f';
          break;
        case 'n':
          t->text += '\n';
          break;
        case 'r':
          t->text += '\r';
          break;
        case 't':
          t->text += '\t';
          break;
        case 'v':
          t->text += '\v';
          break;
        case '\\':
          t->text += '\\';
          break;
        case '\'':
          t->text += '\'';
          break;
        case '"':
          t->text += '"';
          break;
        case '?':
          t->text += '?';
          break;
        case 'x':
        case 'X': {
          int v = 0, n = 0;
          while (n < 2 && i_ < s_.size() && HexValue(s_[i_]) >= 0) {
            v = v * 16 + HexValue(Advance());
            ++n;
          }
          if (n == 0) return Error(*t, "\\x without hex digits");
          t->text += static_cast<char>(v);
          break;
        }
        case 'u':
        case 'U': {
          int digits = e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < digits; ++k) {
            if (i_ >= s_.size() || HexValue(s_[i_]) < 0) return Error(*t, "bad \\u escape");
            cp = cp * 16 + static_cast<uint32_t>(HexValue(Advance()));
          }
          if (cp > 0x10ffff) return Error(*t, "bad \\U escape");
          AppendUtf8(cp, &t->text);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            int v = e - '0', n = 1;
            while (n < 3 && i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '7') {
              v = v * 8 + (Advance() - '0');
              ++n;
            }
            t->text += static_cast<char>(v & 0xff);
            break;
          }
          return Error(*t, fmt::format("unknown escape \\{}", e));
      }
    }
  }

  std::string_view s_;
  size_t i_ = 0;
  uint32_t line_ = 1, col_ = 1;
};

const std::pair<std::string_view, FieldType> kScalars[] = {
    {"double", FieldType::kDouble},     {"float", FieldType::kFloat},
    {"int64", FieldType::kInt64},       {"uint64", FieldType::kUint64},
    {"int32", FieldType::kInt32},       {"fixed64", FieldType::kFixed64},
    {"fixed32", FieldType::kFixed32},   {"bool", FieldType::kBool},
    {"string", FieldType::kString},     {"bytes", FieldType::kBytes},
    {"uint32", FieldType::kUint32},     {"sfixed32", FieldType::kSfixed32},
    {"sfixed64", FieldType::kSfixed64}, {"sint32", FieldType::kSint32},
    {"sint64", FieldType::kSint64},
};

std::optional<FieldType> ScalarOf(std::string_view name) {
  for (const auto& [n, t] : kScalars) {
    if (n == name) return t;
  }
  return std::nullopt;
}

class Parser {
 public:
  Parser(std::string_view text, File* file) : tok_(text), file_(file) {}

  Status Run() {
    RETURN_IF_ERROR(Next());
    file_->syntax = "proto2";
    bool first = true;
    while (cur_.kind != Tok::kEnd) {
      if (IsSymbol(";")) {
        RETURN_IF_ERROR(Next());
        continue;
      }
      if (cur_.kind != Tok::kIdent) return Unexpected("a declaration");
      if (cur_.text == "syntax" || cur_.text == "edition") {
        if (!first) return Err(cur_, "syntax must come first");
        bool edition = cur_.text == "edition";
        RETURN_IF_ERROR(Next());
        RETURN_IF_ERROR(Expect("="));
        if (cur_.kind != Tok::kString) return Unexpected("a string");
        if (edition) return Err(cur_, "editions are not supported");
        if (cur_.text != "proto2" && cur_.text != "proto3")
          return Err(cur_, fmt::format("unknown syntax \"{}\"", cur_.text));
        file_->syntax = cur_.text;
        RETURN_IF_ERROR(Next());
        RETURN_IF_ERROR(Expect(";"));
      } else if (cur_.text == "package") {
        if (!file_->package.empty()) return Err(cur_, "package given twice");
        RETURN_IF_ERROR(Next());
        RETURN_IF_ERROR(FullIdent(&file_->package));
        RETURN_IF_ERROR(Expect(";"));
      } else if (cur_.text == "import") {
        Import imp;
        imp.line = cur_.line;
        imp.column = cur_.column;
        RETURN_IF_ERROR(Next());
        if (IsIdent("public")) {
          imp.kind = Import::Kind::kPublic;
          RETURN_IF_ERROR(Next());
        } else if (IsIdent("weak")) {
          imp.kind = Import::Kind::kWeak;
          RETURN_IF_ERROR(Next());
        }
        if (cur_.kind != Tok::kString) return Unexpected("an import path");
        imp.path = cur_.text;
        RETURN_IF_ERROR(Next());
        RETURN_IF_ERROR(Expect(";"));
        file_->imports.push_back(std::move(imp));
      } else if (cur_.text == "option") {
        RETURN_IF_ERROR(OptionStatement(&file_->options));
      } else if (cur_.text == "message") {
        file_->messages.emplace_back();
        RETURN_IF_ERROR(Message(&file_->messages.back(), 0));
      } else if (cur_.text == "enum") {
        file_->enums.emplace_back();
        RETURN_IF_ERROR(Enum(&file_->enums.back()));
      } else if (cur_.text == "service") {
        RETURN_IF_ERROR(Service());
      } else if (cur_.text == "extend") {
        RETURN_IF_ERROR(Extend(0));
      } else {
        return Unexpected("a declaration");
      }
      first = false;
    }
    return Status::OK();
  }

 private:
  static constexpr int kMaxNesting = 64;

  Status Next() { return tok_.Next(&cur_); }
  bool IsSymbol(std::string_view s) const { return cur_.kind == Tok::kSymbol && cur_.text == s; }
  bool IsIdent(std::string_view s) const { return cur_.kind == Tok::kIdent && cur_.text == s; }
  static Status Err(const Token& t, std::string_view what) { return Tokenizer::Error(t, what); }
  Status Unexpected(std::string_view wanted) const {
    std::string got = cur_.kind == Tok::kEnd      ? "end of input"
                      : cur_.kind == Tok::kString ? "a string"
                                                  : "'" + cur_.text + "'";
    return Err(cur_, fmt::format("expected {}, got {}", wanted, got));
  }
  Status Expect(std::string_view sym) {
    if (!IsSymbol(sym)) return Unexpected(fmt::format("'{}'", sym));
    return Next();
  }
  Status Ident(std::string* out) {
    if (cur_.kind != Tok::kIdent) return Unexpected("a name");
    *out = cur_.text;
    return Next();
  }
  // a.b.c
  Status FullIdent(std::string* out) {
    RETURN_IF_ERROR(Ident(out));
    while (IsSymbol(".")) {
      RETURN_IF_ERROR(Next());
      std::string part;
      RETURN_IF_ERROR(Ident(&part));
      *out += "." + part;
    }
    return Status::OK();
  }
  // A type reference: [.]a.b.c
  Status TypeName(std::string* out) {
    out->clear();
    if (IsSymbol(".")) {
      *out = ".";
      RETURN_IF_ERROR(Next());
    }
    std::string rest;
    RETURN_IF_ERROR(FullIdent(&rest));
    *out += rest;
    return Status::OK();
  }

  // An integer literal with an optional sign, into int64 (hex, octal, decimal).
  Status Integer(int64_t* out, bool allow_max = false) {
    bool neg = false;
    if (IsSymbol("-")) {
      neg = true;
      RETURN_IF_ERROR(Next());
    }
    if (allow_max && IsIdent("max")) {
      *out = kMaxFieldNumber;
      return Next();
    }
    if (cur_.kind != Tok::kInt) return Unexpected("an integer");
    const std::string& t = cur_.text;
    int base = 10;
    size_t start = 0;
    if (t.size() > 2 && (t[1] == 'x' || t[1] == 'X')) {
      base = 16;
      start = 2;
    } else if (t.size() > 1 && t[0] == '0') {
      base = 8;
      start = 1;
    }
    uint64_t v = 0;
    for (size_t k = start; k < t.size(); ++k) {
      int d = std::isdigit(static_cast<unsigned char>(t[k])) ? t[k] - '0'
                                                             : (std::tolower(t[k]) - 'a' + 10);
      if (d >= base) return Err(cur_, fmt::format("bad digit in '{}'", t));
      if (v > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base))
        return Err(cur_, "integer out of range");
      v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    }
    if (v > static_cast<uint64_t>(INT64_MAX) + (neg ? 1 : 0))
      return Err(cur_, "integer out of range");
    *out = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
    return Next();
  }

  // A constant (option or default value) as .proto text.
  Status Constant(std::string* out, int depth = 0) {
    if (depth > kMaxNesting) return Err(cur_, "option value nested too deeply");
    if (cur_.kind == Tok::kString) {
      std::string s;
      while (cur_.kind == Tok::kString) {  // adjacent strings concatenate
        s += cur_.text;
        RETURN_IF_ERROR(Next());
      }
      *out = QuoteString(s);
      return Status::OK();
    }
    if (IsSymbol("{")) {  // an aggregate (text format): kept token by token
      RETURN_IF_ERROR(Next());
      *out = "{";
      while (!IsSymbol("}")) {
        if (cur_.kind == Tok::kEnd) return Unexpected("'}'");
        std::string part;
        if (cur_.kind == Tok::kString || IsSymbol("{") || IsSymbol("-") || cur_.kind == Tok::kInt ||
            cur_.kind == Tok::kFloat) {
          RETURN_IF_ERROR(Constant(&part, depth + 1));
        } else {
          part = cur_.text;
          RETURN_IF_ERROR(Next());
        }
        *out += " " + part;
      }
      *out += " }";
      return Next();
    }
    std::string sign;
    if (IsSymbol("-") || IsSymbol("+")) {
      sign = cur_.text == "-" ? "-" : "";
      RETURN_IF_ERROR(Next());
    }
    if (cur_.kind == Tok::kInt || cur_.kind == Tok::kFloat || cur_.kind == Tok::kIdent) {
      if (cur_.kind == Tok::kIdent) {
        std::string id;
        RETURN_IF_ERROR(FullIdent(&id));
        *out = sign + id;
        return Status::OK();
      }
      *out = sign + cur_.text;
      return Next();
    }
    return Unexpected("a constant");
  }

  // name: ident | (full.ident) followed by .ident...
  Status OptionName(std::string* out) {
    out->clear();
    while (true) {
      if (IsSymbol("(")) {
        RETURN_IF_ERROR(Next());
        std::string n;
        RETURN_IF_ERROR(TypeName(&n));
        RETURN_IF_ERROR(Expect(")"));
        *out += "(" + n + ")";
      } else {
        std::string n;
        RETURN_IF_ERROR(Ident(&n));
        *out += n;
      }
      if (!IsSymbol(".")) return Status::OK();
      *out += ".";
      RETURN_IF_ERROR(Next());
    }
  }

  Status OptionStatement(std::vector<Option>* options) {
    RETURN_IF_ERROR(Next());  // option
    Option o;
    RETURN_IF_ERROR(OptionName(&o.name));
    RETURN_IF_ERROR(Expect("="));
    RETURN_IF_ERROR(Constant(&o.value));
    RETURN_IF_ERROR(Expect(";"));
    options->push_back(std::move(o));
    return Status::OK();
  }

  // [a = 1, (b).c = "x"]; default and json_name go to the field.
  Status FieldOptions(Field* f, std::vector<Option>* options) {
    RETURN_IF_ERROR(Next());  // [
    while (true) {
      Token at = cur_;
      Option o;
      RETURN_IF_ERROR(OptionName(&o.name));
      RETURN_IF_ERROR(Expect("="));
      RETURN_IF_ERROR(Constant(&o.value));
      if (f != nullptr && o.name == "default") {
        if (f->label == Label::kRepeated) return Err(at, "repeated fields cannot have defaults");
        f->default_value = o.value;
      } else {
        options->push_back(std::move(o));
      }
      if (IsSymbol("]")) return Next();
      RETURN_IF_ERROR(Expect(","));
    }
  }

  Status Ranges(std::vector<Range>* ranges, std::vector<std::string>* names, bool enum_values) {
    RETURN_IF_ERROR(Next());  // reserved / extensions
    if (cur_.kind == Tok::kString || (cur_.kind == Tok::kIdent && names != nullptr &&
                                      cur_.text != "max")) {  // names (editions: bare)
      if (names == nullptr) return Unexpected("a number");
      while (true) {
        if (cur_.kind == Tok::kString || cur_.kind == Tok::kIdent) {
          names->push_back(cur_.text);
          RETURN_IF_ERROR(Next());
        } else {
          return Unexpected("a name");
        }
        if (IsSymbol(";")) return Next();
        RETURN_IF_ERROR(Expect(","));
      }
    }
    while (true) {
      Token at = cur_;
      int64_t a, b;
      RETURN_IF_ERROR(Integer(&a));
      b = a;
      if (IsIdent("to")) {
        RETURN_IF_ERROR(Next());
        if (IsIdent("max")) {
          b = enum_values ? INT32_MAX : kMaxFieldNumber;
          RETURN_IF_ERROR(Next());
        } else {
          RETURN_IF_ERROR(Integer(&b));
        }
      }
      int64_t lo = enum_values ? INT32_MIN : 1;
      int64_t hi = enum_values ? INT32_MAX : kMaxFieldNumber;
      if (a < lo || b > hi || b < a) return Err(at, "bad range");
      ranges->push_back({static_cast<int32_t>(a), static_cast<int32_t>(b)});
      if (IsSymbol("[")) {  // extensions ranges may carry options
        std::vector<Option> ignored;
        RETURN_IF_ERROR(FieldOptions(nullptr, &ignored));
      }
      if (IsSymbol(";")) return Next();
      RETURN_IF_ERROR(Expect(","));
    }
  }

  Status Message(MessageType* m, int depth) {
    if (depth > kMaxNesting) return Err(cur_, "messages nested too deeply");
    RETURN_IF_ERROR(Next());  // message
    RETURN_IF_ERROR(Ident(&m->name));
    return MessageBody(m, depth);
  }

  Status MessageBody(MessageType* m, int depth) {
    RETURN_IF_ERROR(Expect("{"));
    while (!IsSymbol("}")) {
      if (cur_.kind == Tok::kEnd) return Unexpected("'}'");
      if (IsSymbol(";")) {
        RETURN_IF_ERROR(Next());
      } else if (IsIdent("message")) {
        m->messages.emplace_back();
        RETURN_IF_ERROR(Message(&m->messages.back(), depth + 1));
      } else if (IsIdent("enum")) {
        m->enums.emplace_back();
        RETURN_IF_ERROR(Enum(&m->enums.back()));
      } else if (IsIdent("option")) {
        RETURN_IF_ERROR(OptionStatement(&m->options));
      } else if (IsIdent("reserved")) {
        RETURN_IF_ERROR(Ranges(&m->reserved_ranges, &m->reserved_names, false));
      } else if (IsIdent("extensions")) {
        RETURN_IF_ERROR(Ranges(&m->extension_ranges, nullptr, false));
      } else if (IsIdent("extend")) {
        RETURN_IF_ERROR(Extend(depth + 1));
      } else if (IsIdent("oneof")) {
        RETURN_IF_ERROR(OneofBlock(m, depth));
      } else {
        RETURN_IF_ERROR(FieldDecl(m, -1, depth));
      }
    }
    return Next();
  }

  Status OneofBlock(MessageType* m, int depth) {
    RETURN_IF_ERROR(Next());
    Oneof o;
    RETURN_IF_ERROR(Ident(&o.name));
    RETURN_IF_ERROR(Expect("{"));
    int index = static_cast<int>(m->oneofs.size());
    m->oneofs.push_back(std::move(o));
    while (!IsSymbol("}")) {
      if (cur_.kind == Tok::kEnd) return Unexpected("'}'");
      if (IsSymbol(";")) {
        RETURN_IF_ERROR(Next());
      } else if (IsIdent("option")) {
        RETURN_IF_ERROR(OptionStatement(&m->oneofs[index].options));
      } else {
        RETURN_IF_ERROR(FieldDecl(m, index, depth));
      }
    }
    return Next();
  }

  // [label] type name = number [options];  |  map<K, V> name = number;  |  group
  Status FieldDecl(MessageType* m, int oneof, int depth) {
    Field f;
    f.line = cur_.line;
    f.column = cur_.column;
    f.oneof = oneof;
    if (oneof < 0) {
      if (IsIdent("optional")) {
        f.label = Label::kOptional;
      } else if (IsIdent("required")) {
        f.label = Label::kRequired;
      } else if (IsIdent("repeated")) {
        f.label = Label::kRepeated;
      }
      if (f.label != Label::kNone) {
        // `optional` could also be a message type named so; not supported (as protoc).
        RETURN_IF_ERROR(Next());
      }
    }
    bool proto3 = file_->syntax == "proto3";
    if (f.label == Label::kRequired && proto3)
      return Err(cur_, "required fields are not allowed in proto3");
    if (f.label == Label::kOptional && proto3) f.proto3_optional = true;
    if (IsIdent("map") && f.label == Label::kNone) {
      Token map_at = cur_;
      RETURN_IF_ERROR(Next());
      if (IsSymbol("<")) {
        if (oneof >= 0) return Err(map_at, "map fields cannot be in a oneof");
        RETURN_IF_ERROR(Next());
        Token key_at = cur_;
        std::string key;
        RETURN_IF_ERROR(Ident(&key));
        auto kt = ScalarOf(key);
        if (!kt || *kt == FieldType::kDouble || *kt == FieldType::kFloat ||
            *kt == FieldType::kBytes)
          return Err(key_at, fmt::format("'{}' cannot be a map key", key));
        f.is_map = true;
        f.map_key = *kt;
        RETURN_IF_ERROR(Expect(","));
        std::string value;
        RETURN_IF_ERROR(TypeName(&value));
        if (auto vt = ScalarOf(value)) {
          f.type = *vt;
        } else {
          f.type = FieldType::kMessage;  // or enum: settled when resolved
          f.type_name = value;
        }
        RETURN_IF_ERROR(Expect(">"));
        f.label = Label::kRepeated;
        return FieldRest(m, std::move(f));
      }
      f.type = FieldType::kMessage;  // a type named map
      f.type_name = "map";
      if (IsSymbol(".")) {
        std::string rest;
        RETURN_IF_ERROR(Next());
        RETURN_IF_ERROR(FullIdent(&rest));
        f.type_name += "." + rest;
      }
      return FieldRest(m, std::move(f));
    }
    if (IsIdent("group")) {
      Token at = cur_;
      RETURN_IF_ERROR(Next());
      std::string gname;
      RETURN_IF_ERROR(Ident(&gname));
      if (gname.empty() || !std::isupper(static_cast<unsigned char>(gname[0])))
        return Err(at, "a group's name must start with a capital letter");
      f.type = FieldType::kGroup;
      f.type_name = gname;
      f.name = gname;
      for (char& c : f.name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      RETURN_IF_ERROR(Expect("="));
      RETURN_IF_ERROR(FieldNumber(&f));
      if (IsSymbol("[")) RETURN_IF_ERROR(FieldOptions(&f, &f.options));
      MessageType g;
      g.name = gname;
      g.is_group = true;
      RETURN_IF_ERROR(MessageBody(&g, depth + 1));
      m->messages.push_back(std::move(g));
      m->fields.push_back(std::move(f));
      return Status::OK();
    }
    if (f.label == Label::kNone && !proto3 && oneof < 0)
      return Err(cur_, "proto2 fields need a label (optional, required or repeated)");
    std::string type;
    RETURN_IF_ERROR(TypeName(&type));
    if (auto st = ScalarOf(type)) {
      f.type = *st;
    } else {
      f.type = FieldType::kMessage;
      f.type_name = type;
    }
    return FieldRest(m, std::move(f));
  }

  Status FieldNumber(Field* f) {
    Token at = cur_;
    int64_t n;
    RETURN_IF_ERROR(Integer(&n));
    if (n < 1 || n > kMaxFieldNumber)
      return Err(at, fmt::format("field number {} out of range 1..{}", n, kMaxFieldNumber));
    if (n >= 19000 && n <= 19999)
      return Err(at, fmt::format("field number {} is reserved for Protobuf (19000-19999)", n));
    f->number = static_cast<int32_t>(n);
    return Status::OK();
  }

  Status FieldRest(MessageType* m, Field f) {
    RETURN_IF_ERROR(Ident(&f.name));
    RETURN_IF_ERROR(Expect("="));
    RETURN_IF_ERROR(FieldNumber(&f));
    if (IsSymbol("[")) RETURN_IF_ERROR(FieldOptions(&f, &f.options));
    RETURN_IF_ERROR(Expect(";"));
    m->fields.push_back(std::move(f));
    return Status::OK();
  }

  Status Enum(EnumType* e) {
    RETURN_IF_ERROR(Next());  // enum
    RETURN_IF_ERROR(Ident(&e->name));
    RETURN_IF_ERROR(Expect("{"));
    while (!IsSymbol("}")) {
      if (cur_.kind == Tok::kEnd) return Unexpected("'}'");
      if (IsSymbol(";")) {
        RETURN_IF_ERROR(Next());
      } else if (IsIdent("option")) {
        RETURN_IF_ERROR(OptionStatement(&e->options));
      } else if (IsIdent("reserved")) {
        RETURN_IF_ERROR(Ranges(&e->reserved_ranges, &e->reserved_names, true));
      } else {
        EnumValue v;
        RETURN_IF_ERROR(Ident(&v.name));
        RETURN_IF_ERROR(Expect("="));
        Token at = cur_;
        int64_t n;
        RETURN_IF_ERROR(Integer(&n));
        if (n < INT32_MIN || n > INT32_MAX) return Err(at, "enum value out of range");
        v.number = static_cast<int32_t>(n);
        if (IsSymbol("[")) RETURN_IF_ERROR(FieldOptions(nullptr, &v.options));
        RETURN_IF_ERROR(Expect(";"));
        e->values.push_back(std::move(v));
      }
    }
    return Next();
  }

  // Parsed, then dropped.
  Status Service() {
    RETURN_IF_ERROR(Next());
    std::string name;
    RETURN_IF_ERROR(Ident(&name));
    RETURN_IF_ERROR(Expect("{"));
    std::vector<Option> ignored;
    while (!IsSymbol("}")) {
      if (cur_.kind == Tok::kEnd) return Unexpected("'}'");
      if (IsSymbol(";")) {
        RETURN_IF_ERROR(Next());
      } else if (IsIdent("option")) {
        RETURN_IF_ERROR(OptionStatement(&ignored));
      } else if (IsIdent("rpc")) {
        RETURN_IF_ERROR(Next());
        RETURN_IF_ERROR(Ident(&name));
        for (int side = 0; side < 2; ++side) {
          if (side == 1) {
            if (!IsIdent("returns")) return Unexpected("'returns'");
            RETURN_IF_ERROR(Next());
          }
          RETURN_IF_ERROR(Expect("("));
          if (IsIdent("stream")) RETURN_IF_ERROR(Next());
          std::string type;
          RETURN_IF_ERROR(TypeName(&type));
          RETURN_IF_ERROR(Expect(")"));
        }
        if (IsSymbol("{")) {
          RETURN_IF_ERROR(Next());
          while (!IsSymbol("}")) {
            if (cur_.kind == Tok::kEnd) return Unexpected("'}'");
            if (IsSymbol(";")) {
              RETURN_IF_ERROR(Next());
            } else if (IsIdent("option")) {
              RETURN_IF_ERROR(OptionStatement(&ignored));
            } else {
              return Unexpected("'option' or '}'");
            }
          }
          RETURN_IF_ERROR(Next());
        } else {
          RETURN_IF_ERROR(Expect(";"));
        }
      } else {
        return Unexpected("'rpc'");
      }
    }
    return Next();
  }

  // Parsed, then dropped: extensions do not change the messages' fields.
  Status Extend(int depth) {
    RETURN_IF_ERROR(Next());
    std::string extendee;
    RETURN_IF_ERROR(TypeName(&extendee));
    MessageType scratch;
    scratch.name = "extend";
    return MessageBody(&scratch, depth);
  }

  Tokenizer tok_;
  File* file_;
  Token cur_;
};

}  // namespace

Result<File> ParseProtoText(std::string_view text, std::string name) {
  File file;
  file.name = std::move(name);
  Parser p(text, &file);
  RETURN_IF_ERROR(p.Run());
  return file;
}

std::string QuoteString(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\{:03o}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace sluice::schema::protobuf::internal
