// S3's XML replies, well-formed and not: every malformed case is an error, never a crash.
#include "s3/s3_xml.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::s3 {
namespace {

TEST(S3XmlTest, ListObjectsV2DecodesEntitiesAndToken) {
  std::string doc = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix>a&amp;b</Prefix><KeyCount>2</KeyCount>
  <IsTruncated>true</IsTruncated>
  <Contents><Key>a&amp;b/x &lt;1&gt; &quot;q&quot; &apos;s&apos; &#252;&#xFC;</Key>
    <LastModified>2026-01-01T00:00:00.000Z</LastModified>
    <ETag>&quot;0123&quot;</ETag><Size>42</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key><![CDATA[raw & <cdata>]]></Key><Size>0</Size></Contents>
  <CommonPrefixes><Prefix>a&amp;b/dir/</Prefix></CommonPrefixes>
  <NextContinuationToken>tok/+=</NextContinuationToken>
</ListBucketResult>)";
  Result<ListObjectsPage> page = ParseListObjectsV2(doc);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "a&b/x <1> \"q\" 's' \xc3\xbc\xc3\xbc");
  EXPECT_EQ(page->objects[0].size, 42u);
  EXPECT_EQ(page->objects[0].etag, "\"0123\"");
  EXPECT_EQ(page->objects[0].last_modified_ms, std::optional<int64_t>(1767225600000));
  EXPECT_EQ(page->objects[1].last_modified_ms, std::nullopt);
  EXPECT_EQ(page->objects[1].key, "raw & <cdata>");
  ASSERT_EQ(page->common_prefixes.size(), 1u);
  EXPECT_EQ(page->common_prefixes[0], "a&b/dir/");
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_continuation_token, "tok/+=");
}

TEST(S3XmlTest, LastModifiedTimesWithAndWithoutFractions) {
  auto at = [](const std::string& t) {
    Result<ListObjectsPage> page =
        ParseListObjectsV2("<ListBucketResult><Contents><Key>k</Key><LastModified>" + t +
                           "</LastModified></Contents></ListBucketResult>");
    return page.ok() ? page->objects[0].last_modified_ms : std::optional<int64_t>(-1);
  };
  EXPECT_EQ(at("1970-01-01T00:00:00Z"), std::optional<int64_t>(0));
  EXPECT_EQ(at("1970-01-01T00:00:01.5Z"), std::optional<int64_t>(1500));
  EXPECT_EQ(at("1970-01-01T00:00:01.123456Z"), std::optional<int64_t>(1123));
  EXPECT_EQ(at("2024-02-29T12:30:45.007Z"), std::optional<int64_t>(1709209845007));
}

TEST(S3XmlTest, EmptyListing) {
  Result<ListObjectsPage> page = ParseListObjectsV2(
      "<ListBucketResult><Name>b</Name><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated>"
      "<Prefix/></ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(page->objects.empty());
  EXPECT_FALSE(page->truncated);
}

TEST(S3XmlTest, MalformedListingsAreCorruption) {
  const std::string good =
      "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>k</Key><Size>1</Size>"
      "</Contents></ListBucketResult>";
  // Every truncation of a good document.
  for (size_t n = 0; n < good.size(); ++n) {
    Result<ListObjectsPage> page = ParseListObjectsV2(good.substr(0, n));
    EXPECT_EQ(page.status().code(), StatusCode::kCorruption) << n;
  }
  const char* bad[] = {
      "",
      "garbage",
      "\x00\x01\x02",
      "<ListBucketResult>",
      "<ListBucketResult></ListBucketResul>",
      "<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>x",
      "<Other></Other>",
      "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key>k</Key><Size>99999999999999999999999</Size>"
      "</Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key>a&bogus;</Key></Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key>a&amp</Key></Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key>&#0;</Key></Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key>&#xD800;</Key></Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key>&#x110000;</Key></Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key>&#;</Key></Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key>&#xZZ;</Key></Contents></ListBucketResult>",
      "<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>",
      "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
      "<!DOCTYPE x [<!ENTITY a 'b'>]><ListBucketResult></ListBucketResult>",
      "<ListBucketResult a=b></ListBucketResult>",
      "<ListBucketResult a=\"b></ListBucketResult>",
      "<ListBucketResult><![CDATA[never closed</ListBucketResult>",
      "<ListBucketResult/><ListBucketResult/>",
      "<ListBucketResult><Contents><Key>k</Key><LastModified>yesterday</LastModified>"
      "</Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key>k</Key><LastModified>2026-13-01T00:00:00Z"
      "</LastModified></Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key>k</Key><LastModified>2026-01-01T00:00:00.Z"
      "</LastModified></Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key>k</Key><LastModified>2026-01-01T00:00:00+01:00"
      "</LastModified></Contents></ListBucketResult>",
  };
  for (const char* doc : bad) {
    Result<ListObjectsPage> page = ParseListObjectsV2(doc);
    EXPECT_EQ(page.status().code(), StatusCode::kCorruption) << doc;
  }
}

TEST(S3XmlTest, DeepNestingIsRefusedNotOverflowed) {
  std::string doc;
  for (int i = 0; i < 100000; ++i) doc += "<a>";
  EXPECT_EQ(ParseXml(doc).status().code(), StatusCode::kCorruption);
}

TEST(S3XmlTest, ErrorBody) {
  Result<S3ErrorBody> error = ParseErrorBody(
      "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The key &amp; more"
      "</Message><Key>k</Key><RequestId>1</RequestId></Error>");
  ASSERT_TRUE(error.ok()) << error.status().ToString();
  EXPECT_EQ(error->code, "NoSuchKey");
  EXPECT_EQ(error->message, "The key & more");
  EXPECT_EQ(ParseErrorBody("<Error><Message>m</Message></Error>").status().code(),
            StatusCode::kCorruption);
  EXPECT_EQ(ParseErrorBody("<Error><Code>X</Code>").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(ParseErrorBody("<html>502 Bad Gateway</html>").status().code(),
            StatusCode::kCorruption);
  EXPECT_EQ(ParseErrorBody("<html><body>oops<br></body></html>").status().code(),
            StatusCode::kCorruption);
}

TEST(S3XmlTest, MultipartReplies) {
  Result<std::string> id = ParseInitiateMultipartUpload(
      "<InitiateMultipartUploadResult xmlns=\"x\"><Bucket>b</Bucket><Key>k</Key>"
      "<UploadId>2~abc&amp;</UploadId></InitiateMultipartUploadResult>");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, "2~abc&");
  EXPECT_EQ(ParseInitiateMultipartUpload("<InitiateMultipartUploadResult/>").status().code(),
            StatusCode::kCorruption);
  Result<std::string> etag = ParseCompleteMultipartUpload(
      "<CompleteMultipartUploadResult><ETag>&quot;e-2&quot;</ETag>"
      "</CompleteMultipartUploadResult>");
  ASSERT_TRUE(etag.ok());
  EXPECT_EQ(*etag, "\"e-2\"");
  // A 200 whose body is an error.
  Result<std::string> failed = ParseCompleteMultipartUpload(
      "<Error><Code>InternalError</Code><Message>try again</Message></Error>");
  EXPECT_EQ(failed.status().code(), StatusCode::kIOError);
  EXPECT_NE(failed.status().message().find("InternalError"), std::string::npos);
}

TEST(S3XmlTest, EscapeRoundTrips) {
  std::string text = "<a&b>\"'";
  Result<XmlElement> root = ParseXml("<x>" + XmlEscape(text) + "</x>");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->text, text);
}

}  // namespace
}  // namespace sluice::s3
