// The rewrite works on Lex()'s tokens in one pass: tokens are copied to an output list,
// and a Postgres-only construct is replaced as it is met. A postfix form (x::regclass,
// a OPERATOR(~) b) needs its left operand: the output keeps, for every closing bracket, the
// index where its group starts, so the operand is found by walking back over whole groups
// in constant time per step. A right operand is found forward on the input with the
// input's bracket matching, and its closing text is queued to go out after its last token.
#include "query/pg_catalog/rewrite.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <vector>

#include "base/strings.h"
#include "query/pg_catalog/lexer.h"

namespace sluice::query::pg_catalog {
namespace {

constexpr size_t kNone = static_cast<size_t>(-1);
constexpr uint32_t kNoPrefix = static_cast<uint32_t>(-1);

bool EqualsWord(std::string_view a, std::string_view word) {
  if (a.size() != word.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != word[i]) return false;
  }
  return true;
}

bool IsWord(const Token& t, std::string_view word) {
  return t.kind == TokenKind::kIdentifier && EqualsWord(t.text, word);
}

bool IsTrivia(TokenKind k) { return k == TokenKind::kSpace || k == TokenKind::kComment; }
bool IsName(TokenKind k) { return k == TokenKind::kIdentifier || k == TokenKind::kQuoted; }
bool IsLiteral(TokenKind k) {
  return k == TokenKind::kString || k == TokenKind::kNumber || k == TokenKind::kParam ||
         k == TokenKind::kDollar;
}

// Keywords that end or join expressions: never a function name, a column or an alias.
bool IsReserved(std::string_view word) {
  static constexpr std::array<std::string_view, 52> kWords = {
      "all",    "and",     "any",       "as",        "asc",      "between", "both",    "by",
      "case",   "collate", "cross",     "desc",      "distinct", "else",    "end",     "except",
      "exists", "fetch",   "for",       "from",      "full",     "group",   "having",  "ilike",
      "in",     "inner",   "intersect", "into",      "is",       "join",    "lateral", "left",
      "like",   "limit",   "natural",   "not",       "offset",   "on",      "or",      "order",
      "outer",  "over",    "qualify",   "returning", "right",    "select",  "similar", "some",
      "then",   "union",   "using",     "where"};
  const std::string w = AsciiLower(word);
  return std::find(kWords.begin(), kWords.end(), w) != kWords.end() || w == "when" ||
         w == "values" || w == "with" || w == "window" || w == "tablesample" || w == "ordinality";
}

// A name token as written, unquoted and lower-cased when it was not quoted.
std::string NameOf(const Token& t) {
  if (t.kind == TokenKind::kQuoted && t.text.size() >= 2 && t.text.front() == '"') {
    std::string out;
    std::string_view in = t.text.substr(1, t.text.size() - 2);
    for (size_t i = 0; i < in.size(); ++i) {
      out.push_back(in[i]);
      if (in[i] == '"') ++i;  // "" is one "
    }
    return out;
  }
  return AsciiLower(t.text);
}

// The functions InstallCatalog() creates for the reg* casts: [0] for a string literal
// operand (name to oid), [1] for anything else (oid to name).
struct RegCast {
  std::string_view type;
  std::string_view from_name;
  std::string_view to_name;
};
constexpr std::array<RegCast, 7> kRegCasts = {{
    {"regclass", "sluice_regclass_oid(", "sluice_regclass_name("},
    {"regtype", "sluice_regtype_oid(", "sluice_regtype_name("},
    {"regnamespace", "sluice_regnamespace_oid(", "sluice_regnamespace_name("},
    {"regproc", "sluice_regproc_oid(", "sluice_regproc_name("},
    {"regprocedure", "sluice_regproc_oid(", "sluice_regproc_name("},
    {"regrole", "sluice_regrole_oid(", "sluice_regrole_name("},
    {"regoper", "sluice_regproc_oid(", "sluice_regproc_name("},
}};

// Postgres types DuckDB has no name for, and what a cast to them becomes.
std::string_view DuckTypeFor(std::string_view pg_type) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 12> kTypes = {{
      {"name", "VARCHAR"},
      {"xid", "BIGINT"},
      {"xid8", "BIGINT"},
      {"cid", "BIGINT"},
      {"tid", "VARCHAR"},
      {"aclitem", "VARCHAR"},
      {"pg_node_tree", "VARCHAR"},
      {"int2vector", "VARCHAR"},
      {"oidvector", "VARCHAR"},
      {"anyarray", "VARCHAR"},
      {"cstring", "VARCHAR"},
      {"regconfig", "BIGINT"},
  }};
  for (const auto& [pg, duck] : kTypes) {
    if (pg == pg_type) return duck;
  }
  return {};
}

// Whether two characters, put side by side by a rewrite, could lex as one token or start a
// comment: conservative (a needless space is harmless).
bool Merges(char a, char b) {
  auto word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
           static_cast<unsigned char>(c) >= 0x80;
  };
  auto op = [](char c) { return std::strchr("+-*/<>=~!@#%^&|`?", c) != nullptr && c != 0; };
  if (word(a) && (word(b) || b == '\'' || b == '"')) return true;
  if (a == '$' || b == '$') return true;
  if (op(a) && (op(b) || b == '\'' || b == '"')) return true;
  if ((a == '\'' && b == '\'') || (a == '"' && b == '"') || (a == ':' && b == ':')) return true;
  if ((std::isdigit(static_cast<unsigned char>(a)) && b == '.') ||
      (a == '.' && std::isdigit(static_cast<unsigned char>(b)))) {
    return true;
  }
  return false;
}

bool IsRegexOperator(std::string_view op) {
  return op == "~" || op == "!~" || op == "~*" || op == "!~*";
}

// What an identifier does to the clause state Qualifier() needs: kFrom for FROM and JOIN,
// kOther for another clause keyword, kNone for anything else.
enum class Clause : uint8_t { kNone, kFrom, kOther };
Clause ClauseOf(std::string_view word) {
  if (word.size() < 2 || word.size() > 9) return Clause::kNone;
  if (EqualsWord(word, "from") || EqualsWord(word, "join")) return Clause::kFrom;
  static constexpr std::array<std::string_view, 15> kClauses = {
      "select", "where",     "group", "having", "order",  "limit",   "offset", "union",
      "except", "intersect", "on",    "using",  "window", "qualify", "values"};
  for (std::string_view c : kClauses) {
    if (EqualsWord(word, c)) return Clause::kOther;
  }
  return Clause::kNone;
}

class Rewriter {
 public:
  explicit Rewriter(std::vector<Token> in) : in_(std::move(in)), match_(in_.size(), kNone) {
    out_.reserve(in_.size() + 16);
    std::vector<size_t> stack;
    for (size_t i = 0; i < in_.size(); ++i) {
      const Token& t = in_[i];
      if (t.kind != TokenKind::kPunct) continue;
      if (t.text == "(" || t.text == "[") {
        stack.push_back(i);
      } else if ((t.text == ")" || t.text == "]") && !stack.empty()) {
        const char open = t.text == ")" ? '(' : '[';
        if (in_[stack.back()].text[0] == open) {
          match_[stack.back()] = i;
          match_[i] = stack.back();
          stack.pop_back();
        }
      }
    }
  }

  // Whether anything was rewritten; Text() is the result.
  bool Run() {
    clause_.assign(1, Clause::kNone);
    for (size_t i = 0; i < in_.size(); ++i) {
      if (drop_until_ != kNone && i <= drop_until_) {
        Flush(i);
        continue;
      }
      const Token& t = in_[i];
      bool handled = false;
      if (t.kind == TokenKind::kCast) {
        handled = Cast(i);
      } else if (IsWord(t, "operator")) {
        handled = Operator(i);
      } else if (t.kind == TokenKind::kOperator && IsRegexOperator(t.text)) {
        handled = Regex(t.text, i);
      } else if (IsWord(t, "collate")) {
        handled = Collate(i);
      } else if (IsWord(t, "pg_catalog")) {
        handled = Qualifier(i);
      } else if (IsWord(t, "information_schema")) {
        handled = InformationSchema(i);
      }
      if (handled) {
        changed_ = true;
      } else {
        Emit(t);
      }
      Flush(i);
    }
    return changed_;
  }

  // The output text. Where a rewrite joined tokens that were not adjacent in the input
  // (dropped a qualifier, put a name in front), a space goes between them if without it
  // they would lex as something else ('a' 'b' into one string, $ x$ into a dollar quote).
  std::string Text() const {
    size_t size = 0;
    for (const Out& o : out_) {
      size += o.text.size() + 1;
      if (o.prefix != kNoPrefix) {
        for (std::string_view p : prefixes_[o.prefix]) size += p.size();
      }
    }
    std::string s;
    s.reserve(size);
    const char* prev_end = nullptr;
    for (const Out& o : out_) {
      const bool seam = o.prefix != kNoPrefix || o.text.data() != prev_end;
      if (o.prefix != kNoPrefix) {
        const auto& p = prefixes_[o.prefix];
        for (auto it = p.rbegin(); it != p.rend(); ++it) {
          if (!s.empty() && !it->empty() && seam && it == p.rbegin() &&
              Merges(s.back(), it->front()))
            s += ' ';
          s += *it;
        }
      } else if (seam && !s.empty() && !o.text.empty() && Merges(s.back(), o.text.front())) {
        s += ' ';
      }
      s += o.text;
      prev_end = o.text.data() + o.text.size();
    }
    return s;
  }

 private:
  struct Out {
    TokenKind kind;
    std::string_view text;  // input text, or a static string
    // Index in prefixes_ of the static texts put in front by rewrites ("regexp_matches("),
    // or kNoPrefix.
    uint32_t prefix = kNoPrefix;
    size_t group_start = kNone;  // for ) and ]: where the group (or a wrap) starts
    bool wrap = false;           // a ) this rewrite added: group_start is its operand
  };
  struct Pending {
    std::string text;
    size_t group_start;  // kNone: not a closing bracket
  };

  size_t NextSig(size_t i) const {
    while (i < in_.size() && IsTrivia(in_[i].kind)) ++i;
    return i;
  }
  size_t PrevSigOut(size_t j) const {
    while (j > 0) {
      --j;
      if (!IsTrivia(out_[j].kind)) return j;
    }
    return kNone;
  }
  bool InIs(size_t i, std::string_view text) const {
    return i < in_.size() && in_[i].kind == TokenKind::kPunct && in_[i].text == text;
  }
  bool OutIs(size_t j, std::string_view text) const {
    return j != kNone && out_[j].kind == TokenKind::kPunct && out_[j].prefix == kNoPrefix &&
           out_[j].text == text;
  }
  // A ) or ] whose group start is known, or the closing text of a wrap (") or ", 'i'))").
  bool OutIsCloser(size_t j) const {
    return j != kNone && out_[j].kind == TokenKind::kPunct && out_[j].group_start != kNone &&
           (out_[j].wrap || out_[j].text == ")" || out_[j].text == "]");
  }

  void Emit(const Token& t) {
    Out o{t.kind, t.text, kNoPrefix, kNone, false};
    if (t.kind == TokenKind::kPunct && (t.text == "(" || t.text == "[")) {
      open_.push_back(out_.size());
      clause_.push_back(Clause::kNone);
    } else if (t.kind == TokenKind::kPunct && (t.text == ")" || t.text == "]")) {
      if (!open_.empty() && out_[open_.back()].text[0] == (t.text == ")" ? '(' : '[')) {
        o.group_start = open_.back();
        open_.pop_back();
        if (clause_.size() > 1) clause_.pop_back();
      }
    } else if (t.kind == TokenKind::kIdentifier) {
      const Clause c = ClauseOf(t.text);
      if (c != Clause::kNone) clause_.back() = c;
    }
    out_.push_back(std::move(o));
  }

  void AddPrefix(size_t j, std::string_view text) {
    if (out_[j].prefix == kNoPrefix) {
      out_[j].prefix = static_cast<uint32_t>(prefixes_.size());
      prefixes_.emplace_back();
    }
    prefixes_[out_[j].prefix].push_back(text);
  }

  void Push(TokenKind kind, std::string_view text, size_t group_start = kNone, bool wrap = false) {
    out_.push_back(Out{kind, text, kNoPrefix, group_start, wrap});
  }

  void Flush(size_t i) {
    if (pending_.empty()) return;
    auto it = pending_.find(i);
    if (it == pending_.end()) return;
    for (const Pending& p : it->second) {
      owned_.push_back(p.text);
      Push(TokenKind::kPunct, owned_.back(), p.group_start, p.group_start != kNone);
    }
    pending_.erase(it);
  }

  // The first output token of a name chain a.b.c ending at output index j.
  size_t ChainStart(size_t j) const {
    for (;;) {
      const size_t dot = PrevSigOut(j);
      if (!OutIs(dot, ".")) return j;
      const size_t name = PrevSigOut(dot);
      if (name == kNone || !IsName(out_[name].kind)) return j;
      j = name;
    }
  }

  // The start of the left operand of a postfix operator applied at the end of the output:
  // a literal, a name chain, a function call, a parenthesized expression, with subscripts
  // and casts. kNone when it is none of these.
  size_t OperandStart() const {
    size_t end = PrevSigOut(out_.size());
    for (;;) {
      if (end == kNone) return kNone;
      size_t start = kNone;
      // One primary with its subscripts, walking back.
      for (;;) {
        const Out& t = out_[end];
        if (IsLiteral(t.kind)) {
          start = end;
          break;
        }
        if (IsName(t.kind)) {
          if (t.kind == TokenKind::kIdentifier && IsReserved(t.text) &&
              !EqualsWord(t.text, "null")) {
            return kNone;
          }
          start = ChainStart(end);
          break;
        }
        if (!OutIsCloser(end)) return kNone;
        const size_t open = t.group_start;
        if (t.wrap) {
          start = open;
          break;
        }
        const size_t before = PrevSigOut(open);
        if (out_[open].text == "[" && OutIsCloser(before)) {
          end = before;  // (expr)[1] or f(x)[1]: keep walking back
          continue;
        }
        if (before != kNone && IsName(out_[before].kind) && !out_[before].wrap &&
            !(out_[before].kind == TokenKind::kIdentifier && IsReserved(out_[before].text))) {
          start = ChainStart(before);  // f(x), a.b[1]
        } else {
          start = open;
        }
        break;
      }
      const size_t before = PrevSigOut(start);
      if (before != kNone &&
          (out_[before].kind == TokenKind::kCast || (out_[before].kind == TokenKind::kIdentifier &&
                                                     EqualsWord(out_[before].text, "collate")))) {
        end = PrevSigOut(before);  // what we walked over was a type or collation name
        continue;
      }
      return start;
    }
  }

  // The last input index of the right operand starting at input index i, or kNone.
  size_t OperandEnd(size_t i) const {
    if (i >= in_.size()) return kNone;
    size_t j = i;
    const Token& t = in_[i];
    if (InIs(i, "(")) {
      j = match_[i];
    } else if (IsLiteral(t.kind)) {
      j = i;
    } else if (IsName(t.kind)) {
      if (t.kind == TokenKind::kIdentifier && IsReserved(t.text)) return kNone;
      j = NameChainEnd(i);
      const size_t k = NextSig(j + 1);
      if (InIs(k, "(")) j = match_[k];
    } else {
      return kNone;
    }
    while (j != kNone) {
      const size_t k = NextSig(j + 1);
      if (InIs(k, "[")) {
        j = match_[k];
      } else if (k < in_.size() && (in_[k].kind == TokenKind::kCast || IsWord(in_[k], "collate"))) {
        const size_t name = NextSig(k + 1);
        if (name >= in_.size() || !IsName(in_[name].kind)) return kNone;
        j = NameChainEnd(name);
        const size_t after = NextSig(j + 1);
        if (in_[k].kind == TokenKind::kCast && InIs(after, "(")) j = match_[after];
      } else {
        break;
      }
    }
    return j;
  }

  size_t NameChainEnd(size_t i) const {
    for (;;) {
      const size_t dot = NextSig(i + 1);
      if (!InIs(dot, ".")) return i;
      const size_t name = NextSig(dot + 1);
      if (name >= in_.size() || !IsName(in_[name].kind)) return i;
      i = name;
    }
  }

  // ::[pg_catalog.]type at input index i.
  bool Cast(size_t i) {
    size_t k = NextSig(i + 1);
    bool qualified = false;
    if (k < in_.size() && IsWord(in_[k], "pg_catalog") && InIs(NextSig(k + 1), ".")) {
      k = NextSig(NextSig(k + 1) + 1);
      qualified = true;
    }
    if (k >= in_.size() || !IsName(in_[k].kind)) return false;
    const std::string type = NameOf(in_[k]);
    for (const RegCast& reg : kRegCasts) {
      if (type != reg.type) continue;
      if (InIs(NextSig(k + 1), "[")) return false;  // regclass[]: left to fail in DuckDB
      const size_t start = OperandStart();
      if (start == kNone) return false;
      // A string literal or a bind parameter names the object ('orders'::regclass,
      // $1::regclass); any other expression is an oid to print.
      const bool literal =
          start == PrevSigOut(out_.size()) &&
          (out_[start].kind == TokenKind::kString || out_[start].kind == TokenKind::kParam);
      AddPrefix(start, literal ? reg.from_name : reg.to_name);
      Push(TokenKind::kPunct, ")", start, /*wrap=*/true);
      drop_until_ = k;
      return true;
    }
    const std::string_view duck = DuckTypeFor(type);
    if (!qualified && duck.empty()) return false;
    Push(TokenKind::kCast, "::");
    if (!duck.empty()) {
      Push(TokenKind::kIdentifier, duck);
    } else {
      Emit(in_[k]);
    }
    drop_until_ = k;
    return true;
  }

  // OPERATOR([pg_catalog.]op) at input index i.
  bool Operator(size_t i) {
    const size_t open = NextSig(i + 1);
    if (!InIs(open, "(")) return false;
    size_t op = NextSig(open + 1);
    if (op < in_.size() && IsWord(in_[op], "pg_catalog") && InIs(NextSig(op + 1), ".")) {
      op = NextSig(NextSig(op + 1) + 1);
    }
    if (op >= in_.size() || in_[op].kind != TokenKind::kOperator) return false;
    const size_t close = NextSig(op + 1);
    if (!InIs(close, ")")) return false;
    const std::string_view sym = in_[op].text;
    if (IsRegexOperator(sym) && Regex(sym, close)) return true;
    Push(TokenKind::kOperator, sym);
    drop_until_ = close;
    return true;
  }

  // A regular-expression match operator whose last input token is at `last` (the operator
  // itself, or the ) of OPERATOR(...)): regexp_matches(left, right[, 'i']), which matches
  // anywhere in the string as Postgres's ~ does (DuckDB's ~ must match the whole string).
  // False, changing nothing, when an operand is not one OperandStart/OperandEnd know.
  bool Regex(std::string_view sym, size_t last) {
    const size_t start = OperandStart();
    const size_t right_end = OperandEnd(NextSig(last + 1));
    if (start == kNone || right_end == kNone) return false;
    const bool negate = sym[0] == '!';
    const bool icase = sym.back() == '*';
    AddPrefix(start, negate ? "(NOT regexp_matches(" : "regexp_matches(");
    while (!out_.empty() && out_.back().kind == TokenKind::kSpace) out_.pop_back();
    Push(TokenKind::kPunct, ",");
    std::string tail = icase ? ", 'i')" : ")";
    if (negate) tail += ")";
    pending_[right_end].push_back(Pending{std::move(tail), start});
    drop_until_ = last;
    return true;
  }

  // COLLATE pg_catalog.x, COLLATE "C" and the like at input index i.
  bool Collate(size_t i) {
    const size_t k = NextSig(i + 1);
    if (k >= in_.size()) return false;
    if (IsWord(in_[k], "pg_catalog") && InIs(NextSig(k + 1), ".")) {
      const size_t name = NextSig(NextSig(k + 1) + 1);
      if (name >= in_.size() || !IsName(in_[name].kind)) return false;
      drop_until_ = name;
      return true;
    }
    if (in_[k].kind == TokenKind::kQuoted) {
      const std::string name = AsciiLower(NameOf(in_[k]));
      if (name == "c" || name == "posix" || name == "default" || name == "ucs_basic" ||
          name.find('.') != std::string::npos) {
        drop_until_ = k;
        return true;
      }
    }
    return false;
  }

  // pg_catalog.name at input index i (not system.pg_catalog.name).
  bool Qualifier(size_t i) {
    const size_t dot = NextSig(i + 1);
    if (!InIs(dot, ".")) return false;
    const size_t name = NextSig(dot + 1);
    if (name >= in_.size() || !IsName(in_[name].kind)) return false;
    if (OutIs(PrevSigOut(out_.size()), ".")) return false;
    const std::string fn = NameOf(in_[name]);
    const size_t open = NextSig(name + 1);
    const bool in_from = clause_.back() == Clause::kFrom;
    if ((fn == "generate_series" || fn == "unnest") && in_from && InIs(open, "(") &&
        match_[open] != kNone) {
      size_t alias = NextSig(match_[open] + 1);
      if (alias < in_.size() && IsWord(in_[alias], "as")) alias = NextSig(alias + 1);
      if (alias < in_.size() && IsName(in_[alias].kind) &&
          !(in_[alias].kind == TokenKind::kIdentifier && IsReserved(in_[alias].text)) &&
          !InIs(NextSig(alias + 1), "(")) {
        pending_[alias].push_back(Pending{"(" + std::string(in_[alias].text) + ")", kNone});
      }
    }
    drop_until_ = dot;
    return true;
  }

  // information_schema.tables (columns, schemata, views) at input index i: the session's
  // filtered copy, which leaves out the emulation's own TEMP views.
  bool InformationSchema(size_t i) {
    const size_t dot = NextSig(i + 1);
    if (!InIs(dot, ".")) return false;
    const size_t name = NextSig(dot + 1);
    if (name >= in_.size() || !IsName(in_[name].kind)) return false;
    if (OutIs(PrevSigOut(out_.size()), ".")) return false;
    const std::string view = NameOf(in_[name]);
    static constexpr std::array<std::string_view, 4> kViews = {
        "sluice_information_schema_tables", "sluice_information_schema_columns",
        "sluice_information_schema_schemata", "sluice_information_schema_views"};
    for (std::string_view v : kViews) {
      if (v.substr(std::string_view("sluice_information_schema_").size()) != view) continue;
      Push(TokenKind::kIdentifier, v);
      drop_until_ = name;
      return true;
    }
    return false;
  }

  std::vector<Token> in_;
  std::vector<size_t> match_;  // input index of the matching bracket, or kNone
  std::vector<Out> out_;
  std::vector<size_t> open_;    // output indexes of unclosed ( and [
  std::vector<Clause> clause_;  // the last clause keyword at each bracket depth
  std::vector<std::vector<std::string_view>> prefixes_;       // Out::prefix indexes these
  std::unordered_map<size_t, std::vector<Pending>> pending_;  // text to emit after input i
  std::deque<std::string> owned_;                             // stable storage for pending texts
  size_t drop_until_ = kNone;
  bool changed_ = false;
};

}  // namespace

Result<std::string> RewriteForDuckDB(std::string_view sql) {
  ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(sql));
  // Most statements hold nothing to rewrite: find that out without building the output.
  const bool any = std::any_of(tokens.begin(), tokens.end(), [](const Token& t) {
    if (t.kind == TokenKind::kCast) return true;
    if (t.kind == TokenKind::kOperator) return IsRegexOperator(t.text);
    return t.kind == TokenKind::kIdentifier &&
           (IsWord(t, "operator") || IsWord(t, "collate") || IsWord(t, "pg_catalog") ||
            IsWord(t, "information_schema"));
  });
  if (!any) return std::string(sql);
  Rewriter rewriter(std::move(tokens));
  if (!rewriter.Run()) return std::string(sql);
  std::string out = rewriter.Text();
  // Never hand on text that no longer lexes (Text() keeps tokens apart; this is the net
  // under it): the input as it was is then the answer, for DuckDB to judge.
  if (!Lex(out).ok()) return std::string(sql);
  return out;
}

}  // namespace sluice::query::pg_catalog
