// The few S3 XML documents the client reads and writes: list results, error bodies and
// multipart replies. A small strict reader rather than a general XML library: S3 replies
// are element trees of text with the five predefined entities, numeric character
// references and, rarely, CDATA; anything else is refused as Corruption.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::s3 {

// One element: its local name (any "prefix:" dropped), its decoded text (the
// concatenation of its direct text, entities resolved) and its child elements.
struct XmlElement {
  std::string name;
  std::string text;
  std::vector<XmlElement> children;

  // The first child named `name`, or nullptr.
  const XmlElement* Child(std::string_view name) const;
};

// Parses a whole document into its root element. Corruption on anything malformed:
// truncation, mismatched tags, unknown entities, nesting deeper than 64, trailing bytes.
Result<XmlElement> ParseXml(std::string_view document);

// `text` with & < > " ' escaped, for values put into request bodies.
std::string XmlEscape(std::string_view text);

struct ListedObject {
  std::string key;
  uint64_t size = 0;
  std::string etag;
  std::optional<int64_t> last_modified_ms;  // <LastModified>, when the store sends it
};

struct ListObjectsPage {
  std::vector<ListedObject> objects;
  std::vector<std::string> common_prefixes;  // with a delimiter only
  bool truncated = false;
  std::string next_continuation_token;  // set when `truncated`
};

// A ListObjectsV2 reply (<ListBucketResult>). Corruption when it is not one, when a
// <Contents> lacks a <Key>, has a <Size> that is not a number or a <LastModified> that
// is not an ISO 8601 UTC time (2009-10-12T17:50:30.000Z), or when it says it is
// truncated but gives no token to continue from.
Result<ListObjectsPage> ParseListObjectsV2(std::string_view document);

struct S3ErrorBody {
  std::string code;  // "NoSuchKey", "PreconditionFailed", ...
  std::string message;
};

// An <Error> body. Corruption when the document is not one.
Result<S3ErrorBody> ParseErrorBody(std::string_view document);

// The <UploadId> of an <InitiateMultipartUploadResult>.
Result<std::string> ParseInitiateMultipartUpload(std::string_view document);

// The <ETag> of a <CompleteMultipartUploadResult>. S3 may answer 200 and still fail the
// completion with an <Error> body: that is returned as an IOError naming its code.
Result<std::string> ParseCompleteMultipartUpload(std::string_view document);

}  // namespace sluice::s3
