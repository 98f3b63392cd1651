#include "auth/principal.h"

#include <algorithm>
#include <cctype>

namespace sluice::auth {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Reads up to the next '/' not escaped by '\' (the backslashes stay: they mean the same in
// the regular expression and in the replacement). False when there is none.
bool ReadPart(std::string_view s, size_t* at, std::string* out) {
  for (size_t i = *at; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      out->push_back(s[i]);
      out->push_back(s[++i]);
    } else if (s[i] == '/') {
      *at = i + 1;
      return true;
    } else {
      out->push_back(s[i]);
    }
  }
  return false;
}

}  // namespace

Result<SslPrincipalMapper> SslPrincipalMapper::Parse(std::string_view text) {
  SslPrincipalMapper m;
  size_t i = 0;
  auto skip_space = [&] {
    while (i < text.size() && IsSpace(text[i])) ++i;
  };
  skip_space();
  if (i == text.size()) {
    m.rules_.push_back(Rule{.is_default = true});
    return m;
  }
  auto skip_lines = [&] {
    while (i < text.size() && (IsSpace(text[i]) || text[i] == '\n')) ++i;
  };
  while (i < text.size()) {
    skip_lines();
    const size_t start = i;
    Rule rule;
    if (text.substr(i).starts_with("DEFAULT")) {
      rule.is_default = true;
      i += 7;
    } else if (text.substr(i).starts_with("RULE:")) {
      i += 5;
      if (!ReadPart(text, &i, &rule.pattern_text) || !ReadPart(text, &i, &rule.replacement)) {
        return InvalidArgumentError("Invalid rule: {}", text.substr(start, 200));
      }
      if (i < text.size() && (text[i] == 'L' || text[i] == 'U')) rule.case_change = text[i++];
      // Java's replacement escapes ("\/", "\$") as ECMAScript's format string.
      std::string format;
      for (size_t k = 0; k < rule.replacement.size(); ++k) {
        if (rule.replacement[k] == '\\' && k + 1 < rule.replacement.size()) {
          const char c = rule.replacement[++k];
          format += c == '$' ? std::string("$$") : std::string(1, c);
        } else {
          format.push_back(rule.replacement[k]);
        }
      }
      rule.replacement = std::move(format);
      try {
        rule.pattern =
            std::make_shared<const std::regex>(rule.pattern_text, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return InvalidArgumentError("Invalid rule: {} ({})", text.substr(start, i - start),
                                    e.what());
      }
    } else {
      const size_t end = text.find_first_of(",\n", i);
      return InvalidArgumentError("Invalid rule: {}",
                                  text.substr(i, std::min<size_t>(end - i, 200)));
    }
    skip_space();
    if (i < text.size() && text[i] != ',' && text[i] != '\n') {
      return InvalidArgumentError("Invalid rule: {}", text.substr(start, 200));
    }
    if (i < text.size()) ++i;  // the separator
    m.rules_.push_back(std::move(rule));
    skip_lines();
  }
  return m;
}

Result<std::string> SslPrincipalMapper::Apply(std::string_view dn) const {
  for (const Rule& r : rules_) {
    if (r.is_default) return std::string(dn);
    const std::string subject(dn);
    if (!std::regex_match(subject, *r.pattern)) continue;
    std::string out = std::regex_replace(subject, *r.pattern, r.replacement);
    if (r.case_change == 'L') {
      std::transform(out.begin(), out.end(), out.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    } else if (r.case_change == 'U') {
      std::transform(out.begin(), out.end(), out.begin(),
                     [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    }
    return out;
  }
  return NotFoundError("No rules apply to {}", dn.substr(0, 512));
}

}  // namespace sluice::auth
