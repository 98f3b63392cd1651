#include "query/authz/grant_sql.h"

#include <cctype>

#include "base/strings.h"
#include "query/pg_catalog/lexer.h"
#include "query/sql_text.h"

namespace sluice::query::authz {
namespace {

using pg_catalog::Lex;
using pg_catalog::Token;
using pg_catalog::TokenKind;

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && AsciiLower(a) == AsciiLower(b);
}

// The statement's tokens without space and comments, and a cursor over them.
class Reader {
 public:
  explicit Reader(std::vector<Token> tokens) {
    for (Token& t : tokens) {
      if (t.kind != TokenKind::kSpace && t.kind != TokenKind::kComment) t_.push_back(t);
    }
    // A trailing semicolon is the statement's end.
    while (!t_.empty() && t_.back().text == ";") t_.pop_back();
  }

  bool done() const { return i_ >= t_.size(); }
  const Token* peek(size_t ahead = 0) const {
    return i_ + ahead < t_.size() ? &t_[i_ + ahead] : nullptr;
  }
  // Whether the next token is keyword `word` (case-insensitive, unquoted); consumes it if so.
  bool Accept(std::string_view word) {
    if (!IsWord(peek(), word)) return false;
    ++i_;
    return true;
  }
  bool AcceptPunct(std::string_view p) {
    const Token* t = peek();
    if (t == nullptr || t->kind == TokenKind::kString || t->text != p) return false;
    ++i_;
    return true;
  }
  static bool IsWord(const Token* t, std::string_view word) {
    return t != nullptr && t->kind == TokenKind::kIdentifier && IEquals(t->text, word);
  }

  Status Expected(std::string_view what) const {
    const Token* t = peek();
    if (t == nullptr)
      return InvalidArgumentError("42601: syntax error at end of input: {} expected", what);
    return InvalidArgumentError("42601: syntax error at or near \"{}\": {} expected", t->text,
                                what);
  }

  // A name: an identifier folded to lower case (`fold`) or kept, or a quoted identifier.
  Result<std::string> Name(std::string_view what, bool fold) {
    const Token* t = peek();
    if (t == nullptr || (t->kind != TokenKind::kIdentifier && t->kind != TokenKind::kQuoted)) {
      return Expected(what);
    }
    ++i_;
    if (t->kind == TokenKind::kQuoted) return pg_catalog::UnquoteIdentifier(t->text);
    return fold ? AsciiLower(t->text) : std::string(t->text);
  }
  Result<std::vector<std::string>> NameList(std::string_view what, bool fold) {
    std::vector<std::string> out;
    do {
      ASSIGN_OR_RETURN(std::string n, Name(what, fold));
      out.push_back(std::move(n));
    } while (AcceptPunct(","));
    return out;
  }
  // A string literal's value ('...' with '' for a quote; E'...' is refused).
  Result<std::string> Literal(std::string_view what) {
    const Token* t = peek();
    if (t == nullptr || t->kind != TokenKind::kString || t->text.empty() || t->text[0] != '\'') {
      return Expected(what);
    }
    ++i_;
    std::string out;
    for (size_t k = 1; k + 1 < t->text.size(); ++k) {
      out += t->text[k];
      if (t->text[k] == '\'' && t->text[k + 1] == '\'') ++k;
    }
    return out;
  }
  Status End() const {
    if (done()) return Status::OK();
    return InvalidArgumentError("42601: syntax error at or near \"{}\"", peek()->text);
  }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
};

// `lake.a.b`: the parts after `lake` as written ("lake.a".b, as the catalog emulation shows
// the schema, counts as lake.a.b).
Result<std::vector<std::string>> LakeName(Reader& r) {
  const Token* first = r.peek();
  if (first == nullptr) return r.Expected("a lake name (lake.<namespace>[.<table>])");
  std::vector<std::string> parts;
  ASSIGN_OR_RETURN(std::string head, r.Name("a lake name", /*fold=*/false));
  if (first->kind == TokenKind::kQuoted && head.size() > 5 && IEquals(head.substr(0, 5), "lake.")) {
    parts.push_back(head.substr(5));
  } else if (!IEquals(head, "lake")) {
    return InvalidArgumentError(
        "42601: \"{}\" is not a lake name: write lake.<namespace> or lake.<namespace>.<table>, "
        "TOPIC <name> or DIRECTORY '<path>'",
        head);
  }
  while (r.AcceptPunct(".")) {
    ASSIGN_OR_RETURN(std::string part, r.Name("a name after '.'", /*fold=*/false));
    parts.push_back(std::move(part));
  }
  if (parts.empty()) return InvalidArgumentError("42601: lake needs a namespace: lake.<namespace>");
  return parts;
}

Status ParseObject(Reader& r, GrantStatement& s) {
  if (r.Accept("TOPIC")) {
    s.object_kind = GrantObject::Kind::kTopic;
    const Token* t = r.peek();
    std::string name;
    if (t != nullptr && t->kind == TokenKind::kString) {
      ASSIGN_OR_RETURN(name, r.Literal("a topic name"));
    } else {
      ASSIGN_OR_RETURN(name, r.Name("a topic name", /*fold=*/false));
    }
    if (name.empty()) return InvalidArgumentError("42601: a topic name is empty");
    s.name = {name};
    return Status::OK();
  }
  if (r.Accept("DIRECTORY")) {
    s.object_kind = GrantObject::Kind::kDirectory;
    ASSIGN_OR_RETURN(std::string path, r.Literal("a directory as a string ('/data/x')"));
    if (path.empty()) return InvalidArgumentError("42601: a directory path is empty");
    s.name = {path};
    return Status::OK();
  }
  if (r.Accept("TABLE")) {
    s.lake_kind = GrantObject::Kind::kTable;
  } else if (r.Accept("SCHEMA") || r.Accept("NAMESPACE")) {
    s.lake_kind = GrantObject::Kind::kNamespace;
  } else if (r.Accept("ALL")) {
    if (!r.Accept("TABLES") || !r.Accept("IN") || !r.Accept("SCHEMA")) {
      return r.Expected("ALL TABLES IN SCHEMA");
    }
    s.lake_kind = GrantObject::Kind::kNamespace;
  }
  ASSIGN_OR_RETURN(s.name, LakeName(r));
  if (s.lake_kind == GrantObject::Kind::kTable && s.name.size() < 2) {
    return InvalidArgumentError("42601: a lake table is lake.<namespace>.<table>");
  }
  s.object_kind = s.lake_kind.value_or(GrantObject::Kind::kTable);
  return Status::OK();
}

Result<int> LimitValue(Reader& r, bool percent) {
  const Token* t = r.peek();
  std::string text;
  if (t != nullptr && t->kind == TokenKind::kString) {
    ASSIGN_OR_RETURN(text, r.Literal("a number"));
  } else if (t != nullptr && t->kind == TokenKind::kNumber) {
    text = std::string(t->text);
    r.AcceptPunct(t->text);
  } else {
    return r.Expected("a number");
  }
  std::string_view v = Trim(text);
  if (percent && !v.empty() && v.back() == '%') v = Trim(v.substr(0, v.size() - 1));
  int n = 0;
  if (v.empty() || v.size() > 6)
    return InvalidArgumentError("22023: '{}' is not a valid limit", text);
  for (char c : v) {
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return InvalidArgumentError("22023: '{}' is not a valid limit", text);
    n = n * 10 + (c - '0');
  }
  if (percent && (n < 1 || n > 100))
    return InvalidArgumentError("22023: memory_share is a percentage from 1 to 100, not {}", text);
  if (!percent && n < 1)
    return InvalidArgumentError("22023: max_statements is at least 1, not {} (RESET removes it)",
                                text);
  return n;
}

Result<GrantStatement> ParseAlter(Reader& r) {
  GrantStatement s;
  s.kind = GrantStatement::Kind::kAlterLimits;
  ASSIGN_OR_RETURN(std::string who, r.Name("a role or user name", /*fold=*/true));
  s.grantees = {who};
  if (r.Accept("SET")) {
    ASSIGN_OR_RETURN(std::string key, r.Name("max_statements or memory_share", true));
    if (!r.AcceptPunct("=") && !r.Accept("TO")) return r.Expected("= or TO");
    if (key == "max_statements") {
      ASSIGN_OR_RETURN(int n, LimitValue(r, false));
      s.max_statements = n;
    } else if (key == "memory_share") {
      ASSIGN_OR_RETURN(int n, LimitValue(r, true));
      s.memory_percent = n;
    } else {
      return InvalidArgumentError(
          "42704: unrecognized limit \"{}\": max_statements or memory_share", key);
    }
  } else if (r.Accept("RESET")) {
    if (r.Accept("ALL")) {
      s.max_statements = -1;
      s.memory_percent = -1;
    } else {
      ASSIGN_OR_RETURN(std::string key, r.Name("max_statements, memory_share or ALL", true));
      if (key == "max_statements") {
        s.max_statements = -1;
      } else if (key == "memory_share") {
        s.memory_percent = -1;
      } else {
        return InvalidArgumentError(
            "42704: unrecognized limit \"{}\": max_statements or memory_share", key);
      }
    }
  } else {
    return InvalidArgumentError(
        "0A000: ALTER ROLE/USER takes SET or RESET of max_statements or memory_share here; "
        "users and passwords are managed with `sluice user`");
  }
  RETURN_IF_ERROR(r.End());
  return s;
}

Result<GrantStatement> ParseGrantOrRevoke(Reader& r, bool grant) {
  GrantStatement s;
  // Privileges, or role names: privileges are followed by ON.
  std::vector<std::string> words;
  do {
    const Token* t = r.peek();
    if (t == nullptr) return r.Expected("a privilege or a role");
    ASSIGN_OR_RETURN(std::string w, r.Name("a privilege or a role", /*fold=*/true));
    if (t->kind == TokenKind::kQuoted) w = "\"" + w;  // never a privilege keyword
    words.push_back(std::move(w));
    if (words.back() == "all") r.Accept("PRIVILEGES");
  } while (r.AcceptPunct(","));
  if (r.Accept("ON")) {
    s.kind = grant ? GrantStatement::Kind::kGrant : GrantStatement::Kind::kRevoke;
    for (const std::string& w : words) {
      if (w == "select") {
        s.privileges.push_back(Privilege::kSelect);
      } else if (w == "read") {
        s.privileges.push_back(Privilege::kRead);
      } else if (w == "write") {
        s.privileges.push_back(Privilege::kWrite);
      } else if (w == "insert") {
        s.privileges.push_back(Privilege::kInsert);
      } else if (w == "create") {
        s.privileges.push_back(Privilege::kCreate);
      } else if (w == "all") {
        s.all_privileges = true;
      } else {
        return InvalidArgumentError(
            "0A000: privilege \"{}\" is not one sluice grants: SELECT (lake tables, namespaces, "
            "topics), INSERT (lake tables, namespaces), CREATE (lake namespaces), READ and WRITE "
            "(directories), ALL",
            w[0] == '"' ? w.substr(1) : w);
      }
    }
    RETURN_IF_ERROR(ParseObject(r, s));
    // What each object takes.
    // (A lake object whose kind the warehouse decides is checked again once it is known.)
    for (Privilege p : s.privileges) {
      const bool lake = s.object_kind == GrantObject::Kind::kTable ||
                        s.object_kind == GrantObject::Kind::kNamespace;
      const bool fits = lake && !s.lake_kind ? PrivilegeApplies(p, GrantObject::Kind::kNamespace)
                                             : PrivilegeApplies(p, s.object_kind);
      if (!fits) return PrivilegeMisfit(p, s.object_kind);
    }
  } else {
    s.kind = grant ? GrantStatement::Kind::kGrantRole : GrantStatement::Kind::kRevokeRole;
    for (std::string& w : words) {
      if (w[0] == '"') w = w.substr(1);
      s.roles.push_back(w);
    }
  }
  if (!r.Accept(grant ? "TO" : "FROM")) return r.Expected(grant ? "TO" : "FROM");
  ASSIGN_OR_RETURN(s.grantees, r.NameList("a user or role", /*fold=*/true));
  for (const std::string& g : s.grantees) {
    if (g == "public") {
      return InvalidArgumentError(
          "0A000: grants to PUBLIC are not supported: grant to a role every user holds");
    }
  }
  if (r.Accept("WITH")) {
    return InvalidArgumentError(
        "0A000: WITH GRANT/ADMIN OPTION is not supported: only "
        "superusers manage grants");
  }
  RETURN_IF_ERROR(r.End());
  return s;
}

}  // namespace

Status PrivilegeMisfit(Privilege p, GrantObject::Kind k) {
  return InvalidArgumentError(
      "0LP01: {} cannot be granted on a {}: SELECT is for lake tables, namespaces and topics, "
      "INSERT for lake tables and namespaces, CREATE for lake namespaces, READ and WRITE for "
      "directories",
      PrivilegeName(p), GrantObject{k, {}}.KindName());
}

bool IsGrantStatement(std::string_view sql) {
  std::vector<std::string> w = LeadingWords(sql, 2);
  if (w.empty()) return false;
  if (w[0] == "GRANT" || w[0] == "REVOKE") return true;
  if (w.size() < 2) return false;
  if (w[0] == "CREATE" || w[0] == "DROP") return w[1] == "ROLE";
  if (w[0] == "SHOW") return w[1] == "GRANTS";
  if (w[0] == "ALTER") return w[1] == "ROLE" || w[1] == "USER";
  return false;
}

Result<std::optional<GrantStatement>> ParseGrantStatement(std::string_view sql) {
  if (!IsGrantStatement(sql)) return std::optional<GrantStatement>();
  auto tokens = Lex(sql);
  if (!tokens.ok()) return InvalidArgumentError("42601: {}", tokens.status().message());
  Reader r(std::move(*tokens));
  if (r.Accept("GRANT")) {
    ASSIGN_OR_RETURN(GrantStatement s, ParseGrantOrRevoke(r, true));
    return std::optional<GrantStatement>(std::move(s));
  }
  if (r.Accept("REVOKE")) {
    if (r.Accept("GRANT") || r.Accept("ADMIN")) {
      return InvalidArgumentError("0A000: REVOKE GRANT/ADMIN OPTION FOR is not supported");
    }
    ASSIGN_OR_RETURN(GrantStatement s, ParseGrantOrRevoke(r, false));
    return std::optional<GrantStatement>(std::move(s));
  }
  GrantStatement s;
  if (r.Accept("CREATE")) {
    r.Accept("ROLE");
    s.kind = GrantStatement::Kind::kCreateRole;
    ASSIGN_OR_RETURN(std::string role, r.Name("a role name", /*fold=*/true));
    s.roles = {role};
    if (!r.done()) {
      return InvalidArgumentError(
          "0A000: CREATE ROLE takes a name only: logins are users (`sluice user add`), "
          "privileges are GRANTed");
    }
  } else if (r.Accept("DROP")) {
    r.Accept("ROLE");
    s.kind = GrantStatement::Kind::kDropRole;
    if (r.Accept("IF")) {
      if (!r.Accept("EXISTS")) return r.Expected("EXISTS");
      s.if_exists = true;
    }
    ASSIGN_OR_RETURN(s.roles, r.NameList("a role name", /*fold=*/true));
    RETURN_IF_ERROR(r.End());
  } else if (r.Accept("SHOW")) {
    r.Accept("GRANTS");
    s.kind = GrantStatement::Kind::kShowGrants;
    if (r.Accept("FOR")) {
      ASSIGN_OR_RETURN(std::string who, r.Name("a user or role", /*fold=*/true));
      s.grantees = {who};
    }
    RETURN_IF_ERROR(r.End());
  } else if (r.Accept("ALTER")) {
    if (!r.Accept("ROLE")) r.Accept("USER");
    ASSIGN_OR_RETURN(s, ParseAlter(r));
  }
  return std::optional<GrantStatement>(std::move(s));
}

std::string_view GrantCommandTag(const GrantStatement& s) {
  switch (s.kind) {
    case GrantStatement::Kind::kCreateRole:
      return "CREATE ROLE";
    case GrantStatement::Kind::kDropRole:
      return "DROP ROLE";
    case GrantStatement::Kind::kGrantRole:
      return "GRANT ROLE";
    case GrantStatement::Kind::kGrant:
      return "GRANT";
    case GrantStatement::Kind::kRevokeRole:
      return "REVOKE ROLE";
    case GrantStatement::Kind::kRevoke:
      return "REVOKE";
    case GrantStatement::Kind::kShowGrants:
      return "SHOW";
    case GrantStatement::Kind::kAlterLimits:
      return "ALTER ROLE";
  }
  return "";
}

}  // namespace sluice::query::authz
