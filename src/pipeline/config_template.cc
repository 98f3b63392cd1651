// Template substitution for pipeline files (config_template.h): sqlflow's Jinja forms
// `{{ NAME }}` and `{{ NAME|default(literal[, true]) }}`, with whitespace control.
#include "pipeline/config_template.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <optional>

#include "pipeline/config_text.h"

namespace sluice::pipeline::config_internal {
namespace {

// ------------------------------------------------------------------------------------
// Step 1: {{ NAME }} and {{ NAME|default(literal) }}.

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Parses one expression's inside (between "{{" and "}}", whitespace-control dashes
// removed). On success fills the variable, and the default when there is one.
struct Expression {
  std::string variable;
  std::optional<std::string> default_value;
  bool default_if_empty = false;  // default(value, true): also when set but empty
};

class ExpressionParser {
 public:
  explicit ExpressionParser(std::string_view s) : s_(s) {}

  // An error message without location, or "" when it parsed.
  std::string Parse(Expression* out) {
    SkipSpace();
    if (AtEnd()) return "empty expression";
    if (!IsIdentStart(s_[pos_])) return "expected a variable name";
    out->variable = Ident();
    SkipSpace();
    if (AtEnd()) return "";
    if (s_[pos_] != '|') {
      return fmt::format(
          "only {{{{ NAME }}}} and {{{{ NAME|default('value') }}}} are supported, "
          "not {}",
          Quote(s_));
    }
    ++pos_;
    SkipSpace();
    std::string filter = AtEnd() || !IsIdentStart(s_[pos_]) ? "" : Ident();
    if (filter != "default" && filter != "d") {
      return fmt::format("filter '{}' is not supported (only default)", filter);
    }
    SkipSpace();
    if (AtEnd() || s_[pos_] != '(') return "default needs a value: default('value')";
    ++pos_;
    SkipSpace();
    std::string value;
    if (std::string err = Literal(&value); !err.empty()) return err;
    out->default_value = std::move(value);
    SkipSpace();
    if (!AtEnd() && s_[pos_] == ',') {
      ++pos_;
      SkipSpace();
      if (s_.substr(pos_).starts_with("boolean")) {
        pos_ += 7;
        SkipSpace();
        if (AtEnd() || s_[pos_] != '=') return "expected '=' after boolean";
        ++pos_;
        SkipSpace();
      }
      std::string flag;
      if (std::string err = Literal(&flag); !err.empty()) return err;
      out->default_if_empty = flag == "True";
      SkipSpace();
    }
    if (AtEnd() || s_[pos_] != ')') return "expected ')' after the default value";
    ++pos_;
    SkipSpace();
    if (!AtEnd()) return fmt::format("unexpected {} after default(...)", Quote(s_.substr(pos_)));
    return "";
  }

 private:
  bool AtEnd() const { return pos_ >= s_.size(); }
  void SkipSpace() {
    while (!AtEnd() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  std::string Ident() {
    size_t start = pos_;
    while (!AtEnd() && IsIdentChar(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  // A Jinja literal rendered the way Jinja prints it: strings as they are, numbers as
  // written, true/false/none as Python's True/False/None.
  std::string Literal(std::string* out) {
    if (AtEnd()) return "expected a value";
    char c = s_[pos_];
    if (c == '\'' || c == '"') {
      ++pos_;
      while (!AtEnd() && s_[pos_] != c) {
        if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) {
          char e = s_[pos_ + 1];
          *out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
          pos_ += 2;
          continue;
        }
        *out += s_[pos_++];
      }
      if (AtEnd()) return "unterminated string in default(...)";
      ++pos_;
      return "";
    }
    size_t start = pos_;
    if (c == '-' || c == '+') ++pos_;
    bool digits = false;
    while (!AtEnd() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.' ||
                        s_[pos_] == '_')) {
      digits = true;
      ++pos_;
    }
    if (digits) {
      *out = std::string(s_.substr(start, pos_ - start));
      return "";
    }
    pos_ = start;
    if (IsIdentStart(c)) {
      std::string word = Ident();
      if (word == "true" || word == "True") {
        *out = "True";
      } else if (word == "false" || word == "False") {
        *out = "False";
      } else if (word == "none" || word == "None") {
        *out = "None";
      } else {
        return fmt::format(
            "default({}) names a variable; quote it to use it as text: "
            "default('{}')",
            word, word);
      }
      return "";
    }
    return fmt::format("cannot read the default value {}", Quote(s_.substr(start)));
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

Result<Rendered> Render(std::string_view text, std::string_view origin, const EnvLookup& env) {
  Rendered r;
  r.source_line.push_back(1);
  std::vector<std::string> errors;
  int line = 1;
  // A newline copied from the source follows `line`'s increment; one inside a value
  // stays on the line of the expression.
  auto emit = [&](char c) {
    r.text += c;
    if (c == '\n') r.source_line.push_back(line);
  };
  auto error = [&](int at, std::string msg) {
    if (errors.size() < kMaxErrors) errors.push_back(fmt::format("{}:{}: {}", origin, at, msg));
  };
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    bool open = c == '{' && i + 1 < text.size();
    if (open && text[i + 1] == '#') {  // a Jinja comment, dropped
      size_t end = text.find("#}", i + 2);
      if (end == std::string_view::npos) {
        error(line, "'{#' comment is never closed with '#}'");
        break;
      }
      line += static_cast<int>(std::count(text.begin() + i, text.begin() + end, '\n'));
      i = end + 2;
      continue;
    }
    if (open && text[i + 1] == '%') {
      error(line,
            "template statements ({% ... %}) are not supported: only {{ NAME }} and "
            "{{ NAME|default('value') }}");
      size_t end = text.find("%}", i + 2);
      if (end == std::string_view::npos) break;
      line += static_cast<int>(std::count(text.begin() + i, text.begin() + end, '\n'));
      i = end + 2;
      continue;
    }
    if (open && text[i + 1] == '{') {
      int start_line = line;
      size_t end = text.find("}}", i + 2);
      if (end == std::string_view::npos) {
        error(line, "'{{' is never closed with '}}'");
        break;
      }
      std::string_view inner = text.substr(i + 2, end - i - 2);
      line += static_cast<int>(std::count(inner.begin(), inner.end(), '\n'));
      i = end + 2;
      bool trim_before = !inner.empty() && inner.front() == '-';
      bool trim_after = !inner.empty() && inner.back() == '-';
      if (trim_before) inner.remove_prefix(1);
      if (trim_after && !inner.empty()) inner.remove_suffix(1);
      Expression expr;
      if (std::string err = ExpressionParser(inner).Parse(&expr); !err.empty()) {
        error(start_line, fmt::format("{{{{{}}}}}: {}", inner.substr(0, 60), err));
        continue;
      }
      std::optional<std::string> value = env ? env(expr.variable) : std::nullopt;
      if (value && value->empty() && expr.default_if_empty) value.reset();
      if (!value) value = expr.default_value;
      if (!value) {
        error(start_line,
              fmt::format("environment variable {0} is not set and {{{{ {0} }}}} has no default; "
                          "set it, or write {{{{ {0}|default('value') }}}}",
                          expr.variable));
        continue;
      }
      if (trim_before) {
        while (!r.text.empty() && std::isspace(static_cast<unsigned char>(r.text.back()))) {
          if (r.text.back() == '\n') r.source_line.pop_back();
          r.text.pop_back();
        }
      }
      for (char v : *value) emit(v);
      if (trim_after) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) {
          if (text[i] == '\n') ++line;
          ++i;
        }
      }
      if (r.text.size() > kMaxPipelineFileBytes) {
        return InvalidArgumentError("{}:{}: the file is larger than {} bytes after substitution",
                                    origin, start_line, kMaxPipelineFileBytes);
      }
      continue;
    }
    if (c == '\n') ++line;
    emit(c);
    ++i;
  }
  if (!errors.empty()) return InvalidArgumentError("{}", fmt::join(errors, "\n"));
  return r;
}

}  // namespace sluice::pipeline::config_internal
