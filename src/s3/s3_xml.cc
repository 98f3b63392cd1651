// A strict reader of S3's XML replies (see s3_xml.h).
#include "s3/s3_xml.h"

#include <charconv>
#include <ctime>

namespace sluice::s3 {
namespace {

constexpr int kMaxDepth = 64;

bool IsNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == ':' || static_cast<unsigned char>(c) >= 0x80;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

class Parser {
 public:
  explicit Parser(std::string_view doc) : doc_(doc) {}

  Result<XmlElement> Document() {
    RETURN_IF_ERROR(SkipMisc());
    if (AtEnd() || doc_[pos_] != '<') return Error("no root element");
    XmlElement root;
    RETURN_IF_ERROR(Element(root, 0));
    RETURN_IF_ERROR(SkipMisc());
    if (!AtEnd()) return Error("bytes after the root element");
    return root;
  }

 private:
  bool AtEnd() const { return pos_ >= doc_.size(); }
  bool StartsWith(std::string_view s) const { return doc_.substr(pos_).starts_with(s); }

  Status Error(std::string_view what) const {
    return CorruptionError("S3 XML at byte {}: {}", pos_, what);
  }

  // Skips to just past `end`, or fails as truncated.
  Status SkipPast(std::string_view end) {
    size_t at = doc_.find(end, pos_);
    if (at == std::string_view::npos) return Error(fmt::format("no closing '{}'", end));
    pos_ = at + end.size();
    return Status::OK();
  }

  // Whitespace, the XML declaration, comments and processing instructions outside the
  // root. A DOCTYPE is refused: S3 never sends one and it could declare entities.
  Status SkipMisc() {
    while (!AtEnd()) {
      if (IsSpace(doc_[pos_])) {
        ++pos_;
      } else if (StartsWith("<?")) {
        RETURN_IF_ERROR(SkipPast("?>"));
      } else if (StartsWith("<!--")) {
        RETURN_IF_ERROR(SkipPast("-->"));
      } else if (StartsWith("<!")) {
        return Error("DOCTYPE or other declaration");
      } else {
        break;
      }
    }
    return Status::OK();
  }

  Result<std::string> Name() {
    size_t start = pos_;
    while (!AtEnd() && IsNameChar(doc_[pos_])) ++pos_;
    if (pos_ == start) return Error("expected a name");
    return std::string(doc_.substr(start, pos_ - start));
  }

  static std::string LocalName(const std::string& name) {
    size_t colon = name.rfind(':');
    return colon == std::string::npos ? name : name.substr(colon + 1);
  }

  // Attributes are read for well-formedness and dropped: S3 puts only xmlns in them.
  Status Attributes() {
    while (true) {
      while (!AtEnd() && IsSpace(doc_[pos_])) ++pos_;
      if (AtEnd()) return Error("truncated start tag");
      if (doc_[pos_] == '>' || doc_[pos_] == '/') return Status::OK();
      ASSIGN_OR_RETURN(std::string name, Name());
      while (!AtEnd() && IsSpace(doc_[pos_])) ++pos_;
      if (AtEnd() || doc_[pos_] != '=') return Error("attribute without '='");
      ++pos_;
      while (!AtEnd() && IsSpace(doc_[pos_])) ++pos_;
      if (AtEnd() || (doc_[pos_] != '"' && doc_[pos_] != '\'')) {
        return Error("attribute value without quotes");
      }
      char quote = doc_[pos_++];
      size_t end = doc_.find(quote, pos_);
      if (end == std::string_view::npos) return Error("truncated attribute value");
      std::string ignored;
      RETURN_IF_ERROR(DecodeText(doc_.substr(pos_, end - pos_), ignored));
      pos_ = end + 1;
    }
  }

  // Appends `raw` to `out` with entities and character references resolved.
  Status DecodeText(std::string_view raw, std::string& out) const {
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '<') return Error("'<' inside text");
      if (raw[i] != '&') {
        out.push_back(raw[i]);
        continue;
      }
      size_t semi = raw.find(';', i);
      if (semi == std::string_view::npos || semi - i > 12) return Error("unterminated entity");
      std::string_view entity = raw.substr(i + 1, semi - i - 1);
      if (entity == "amp") {
        out.push_back('&');
      } else if (entity == "lt") {
        out.push_back('<');
      } else if (entity == "gt") {
        out.push_back('>');
      } else if (entity == "quot") {
        out.push_back('"');
      } else if (entity == "apos") {
        out.push_back('\'');
      } else if (entity.size() >= 2 && entity[0] == '#') {
        bool hex = entity[1] == 'x';
        std::string_view digits = entity.substr(hex ? 2 : 1);
        uint32_t cp = 0;
        auto [end, ec] =
            std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
        if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
            cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
          return Error(fmt::format("bad character reference '&{};'", entity));
        }
        AppendUtf8(cp, out);
      } else {
        return Error(fmt::format("unknown entity '&{};'", entity));
      }
      i = semi;
    }
    return Status::OK();
  }

  // An element starting at '<'.
  Status Element(XmlElement& element, int depth) {
    if (depth >= kMaxDepth) return Error("elements nested too deep");
    ++pos_;  // '<'
    ASSIGN_OR_RETURN(std::string name, Name());
    element.name = LocalName(name);
    RETURN_IF_ERROR(Attributes());
    if (doc_[pos_] == '/') {
      if (!StartsWith("/>")) return Error("'/' not followed by '>'");
      pos_ += 2;
      return Status::OK();
    }
    ++pos_;  // '>'
    while (true) {
      size_t lt = doc_.find('<', pos_);
      if (lt == std::string_view::npos) {
        return Error(fmt::format("truncated inside <{}>", element.name));
      }
      RETURN_IF_ERROR(DecodeText(doc_.substr(pos_, lt - pos_), element.text));
      pos_ = lt;
      if (StartsWith("</")) {
        pos_ += 2;
        ASSIGN_OR_RETURN(std::string end_name, Name());
        while (!AtEnd() && IsSpace(doc_[pos_])) ++pos_;
        if (AtEnd() || doc_[pos_] != '>') return Error("truncated end tag");
        ++pos_;
        if (end_name != name) {
          return Error(fmt::format("</{}> closes <{}>", end_name, name));
        }
        return Status::OK();
      }
      if (StartsWith("<![CDATA[")) {
        size_t start = pos_ + 9;
        RETURN_IF_ERROR(SkipPast("]]>"));
        element.text.append(doc_.substr(start, pos_ - 3 - start));
      } else if (StartsWith("<!--")) {
        RETURN_IF_ERROR(SkipPast("-->"));
      } else if (StartsWith("<?")) {
        RETURN_IF_ERROR(SkipPast("?>"));
      } else if (StartsWith("<!")) {
        return Error("declaration inside an element");
      } else {
        element.children.emplace_back();
        RETURN_IF_ERROR(Element(element.children.back(), depth + 1));
      }
    }
  }

  std::string_view doc_;
  size_t pos_ = 0;
};

Result<XmlElement> ParseRoot(std::string_view document, std::string_view expected) {
  ASSIGN_OR_RETURN(XmlElement root, ParseXml(document));
  if (root.name != expected) {
    return CorruptionError("S3 XML: expected <{}>, got <{}>", expected, root.name);
  }
  return root;
}

Result<uint64_t> ParseUint(std::string_view text, std::string_view what) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return CorruptionError("S3 XML: {} '{}' is not a number", what, text);
  }
  return value;
}

}  // namespace

const XmlElement* XmlElement::Child(std::string_view child_name) const {
  for (const XmlElement& child : children) {
    if (child.name == child_name) return &child;
  }
  return nullptr;
}

Result<XmlElement> ParseXml(std::string_view document) { return Parser(document).Document(); }

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// "2009-10-12T17:50:30.000Z" (fraction optional) -> ms since the epoch.
Result<int64_t> ParseIsoTime(std::string_view text) {
  auto bad = [&] { return CorruptionError("S3 XML: <LastModified> '{}' is not a UTC time", text); };
  auto digits = [&](size_t at, size_t n) -> std::optional<int> {
    if (at + n > text.size()) return std::nullopt;
    int v = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return std::nullopt;
      v = v * 10 + (text[i] - '0');
    }
    return v;
  };
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text.back() != 'Z') {
    return bad();
  }
  auto year = digits(0, 4), month = digits(5, 2), day = digits(8, 2), hour = digits(11, 2),
       minute = digits(14, 2), second = digits(17, 2);
  if (!year || !month || !day || !hour || !minute || !second || *month < 1 || *month > 12 ||
      *day < 1 || *day > 31 || *hour > 23 || *minute > 59 || *second > 60) {
    return bad();
  }
  int ms = 0;
  size_t at = 19;
  if (text[at] == '.') {
    size_t start = ++at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      if (at - start < 3) ms = ms * 10 + (text[at] - '0');
      ++at;
    }
    if (at == start) return bad();
    for (size_t n = std::min<size_t>(at - start, 3); n < 3; ++n) ms *= 10;
  }
  if (at != text.size() - 1) return bad();
  std::tm tm{};
  tm.tm_year = *year - 1900;
  tm.tm_mon = *month - 1;
  tm.tm_mday = *day;
  tm.tm_hour = *hour;
  tm.tm_min = *minute;
  tm.tm_sec = *second;
  return static_cast<int64_t>(::timegm(&tm)) * 1000 + ms;
}

Result<ListObjectsPage> ParseListObjectsV2(std::string_view document) {
  ASSIGN_OR_RETURN(XmlElement root, ParseRoot(document, "ListBucketResult"));
  ListObjectsPage page;
  for (const XmlElement& child : root.children) {
    if (child.name == "Contents") {
      const XmlElement* key = child.Child("Key");
      if (key == nullptr) return CorruptionError("S3 XML: <Contents> without <Key>");
      ListedObject object;
      object.key = key->text;
      if (const XmlElement* size = child.Child("Size")) {
        ASSIGN_OR_RETURN(object.size, ParseUint(size->text, "<Size>"));
      }
      if (const XmlElement* etag = child.Child("ETag")) object.etag = etag->text;
      if (const XmlElement* modified = child.Child("LastModified")) {
        ASSIGN_OR_RETURN(int64_t ms, ParseIsoTime(modified->text));
        object.last_modified_ms = ms;
      }
      page.objects.push_back(std::move(object));
    } else if (child.name == "CommonPrefixes") {
      const XmlElement* prefix = child.Child("Prefix");
      if (prefix == nullptr) return CorruptionError("S3 XML: <CommonPrefixes> without <Prefix>");
      page.common_prefixes.push_back(prefix->text);
    } else if (child.name == "IsTruncated") {
      if (child.text == "true") {
        page.truncated = true;
      } else if (child.text != "false") {
        return CorruptionError("S3 XML: <IsTruncated> is '{}'", child.text);
      }
    } else if (child.name == "NextContinuationToken") {
      page.next_continuation_token = child.text;
    }
  }
  if (page.truncated && page.next_continuation_token.empty()) {
    return CorruptionError("S3 XML: a truncated listing without <NextContinuationToken>");
  }
  if (!page.truncated) page.next_continuation_token.clear();
  return page;
}

Result<S3ErrorBody> ParseErrorBody(std::string_view document) {
  ASSIGN_OR_RETURN(XmlElement root, ParseRoot(document, "Error"));
  S3ErrorBody body;
  if (const XmlElement* code = root.Child("Code")) body.code = code->text;
  if (const XmlElement* message = root.Child("Message")) body.message = message->text;
  if (body.code.empty()) return CorruptionError("S3 XML: <Error> without <Code>");
  return body;
}

Result<std::string> ParseInitiateMultipartUpload(std::string_view document) {
  ASSIGN_OR_RETURN(XmlElement root, ParseRoot(document, "InitiateMultipartUploadResult"));
  const XmlElement* upload_id = root.Child("UploadId");
  if (upload_id == nullptr || upload_id->text.empty()) {
    return CorruptionError("S3 XML: <InitiateMultipartUploadResult> without <UploadId>");
  }
  return upload_id->text;
}

Result<std::string> ParseCompleteMultipartUpload(std::string_view document) {
  ASSIGN_OR_RETURN(XmlElement root, ParseXml(document));
  if (root.name == "Error") {
    ASSIGN_OR_RETURN(S3ErrorBody error, ParseErrorBody(document));
    return IOError("S3 CompleteMultipartUpload failed after HTTP 200: {}: {}", error.code,
                   error.message);
  }
  if (root.name != "CompleteMultipartUploadResult") {
    return CorruptionError("S3 XML: expected <CompleteMultipartUploadResult>, got <{}>", root.name);
  }
  const XmlElement* etag = root.Child("ETag");
  if (etag == nullptr) {
    return CorruptionError("S3 XML: <CompleteMultipartUploadResult> without <ETag>");
  }
  return etag->text;
}

}  // namespace sluice::s3
