// S3Client against a real S3 server: Ceph's radosgw on loopback, started by
// tests/integration/s3_rgw_test.sh (which sets SLUICE_S3_BUCKET and the AWS_* variables
// and creates the bucket). Every operation the lake will use, with the answers a real
// server gives: the conditional create the table commit rests on, ranges, listing past a
// page, multipart, keys that need encoding, and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "s3/s3_client.h"

namespace sluice::s3 {
namespace {

using ::testing::HasSubstr;

class RgwTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bucket = std::getenv("SLUICE_S3_BUCKET");
    // Not a skip: this binary runs only under its script, which always sets it.
    ASSERT_NE(bucket, nullptr) << "run through tests/integration/s3_rgw_test.sh";
    bucket_ = bucket;
    Result<S3Options> options = S3Options::FromEnvironment();
    ASSERT_TRUE(options.ok()) << options.status().ToString();
    Result<S3Client> client = S3Client::Create(*options);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_.emplace(std::move(client).value());
    prefix_ = std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "/";
  }

  const S3Client& c() const { return *client_; }

  std::string bucket_;
  std::string prefix_;
  std::optional<S3Client> client_;
};

TEST_F(RgwTest, PutGetHeadDelete) {
  const std::string key = prefix_ + "a b+c/ü=1&x.json";  // every part needs encoding
  const std::string body = "{\"hello\": \"world\"}";
  Result<std::string> etag = c().PutObject(bucket_, key, body);
  ASSERT_TRUE(etag.ok()) << etag.status().ToString();
  EXPECT_FALSE(etag->empty());
  Result<std::string> got = c().GetObject(bucket_, key);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, body);
  Result<ObjectInfo> info = c().HeadObject(bucket_, key);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, body.size());
  EXPECT_EQ(info->etag, *etag);
  ASSERT_TRUE(c().DeleteObject(bucket_, key).ok());
  EXPECT_EQ(c().HeadObject(bucket_, key).status().code(), StatusCode::kNotFound);
  Result<std::string> gone = c().GetObject(bucket_, key);
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(gone.status().message(), HasSubstr("NoSuchKey"));
  // Deleting what is not there is not an error.
  EXPECT_TRUE(c().DeleteObject(bucket_, key).ok());
}

TEST_F(RgwTest, ConditionalCreateRefusesASecondWriter) {
  // What a table commit rests on: the next metadata file created once, never replaced.
  const std::string key = prefix_ + "v2.metadata.json";
  PutOptions create;
  create.if_none_match_star = true;
  ASSERT_TRUE(c().PutObject(bucket_, key, "first", create).ok());
  Result<std::string> second = c().PutObject(bucket_, key, "second", create);
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists) << second.status().ToString();
  Result<std::string> got = c().GetObject(bucket_, key);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "first");
  // A plain put replaces it.
  ASSERT_TRUE(c().PutObject(bucket_, key, "third").ok());
  EXPECT_EQ(*c().GetObject(bucket_, key), "third");
  // The check a writer makes before it commits there.
  Status probe = ProbeConditionalCreate(c(), bucket_, prefix_);
  EXPECT_TRUE(probe.ok()) << probe.ToString();
}

TEST_F(RgwTest, Ranges) {
  const std::string key = prefix_ + "digits";
  ASSERT_TRUE(c().PutObject(bucket_, key, "0123456789").ok());
  EXPECT_EQ(*c().GetObject(bucket_, key, ByteRange{2, 3}), "234");
  EXPECT_EQ(*c().GetObject(bucket_, key, ByteRange{7, std::nullopt}), "789");
  EXPECT_EQ(c().GetObject(bucket_, key, ByteRange{50, 2}).status().code(), StatusCode::kOutOfRange);
}

TEST_F(RgwTest, ListingPastOnePage) {
  // 1,000 keys a page: 1,003 keys take two pages and a continuation token.
  for (int i = 0; i < 1003; ++i) {
    ASSERT_TRUE(c().PutObject(bucket_, prefix_ + "k" + std::to_string(i), "x").ok());
  }
  ASSERT_TRUE(c().PutObject(bucket_, prefix_ + "sub/one", "y").ok());
  size_t keys = 0;
  int pages = 0;
  std::string token;
  do {
    Result<ListObjectsPage> page = c().ListObjectsV2(bucket_, prefix_ + "k", token);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    keys += page->objects.size();
    for (const auto& o : page->objects) EXPECT_EQ(o.size, 1u);
    token = page->next_continuation_token;
    ++pages;
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(keys, 1003u);
  EXPECT_EQ(pages, 2);
  // A delimiter rolls the sub-folder up.
  Result<ListObjectsPage> top = c().ListObjectsV2(bucket_, prefix_ + "sub", {}, "/");
  ASSERT_TRUE(top.ok());
  EXPECT_TRUE(top->objects.empty());
  ASSERT_EQ(top->common_prefixes.size(), 1u);
  EXPECT_EQ(top->common_prefixes[0], prefix_ + "sub/");
}

TEST_F(RgwTest, MultipartUpload) {
  const std::string key = prefix_ + "big.parquet";
  const std::string part1(5 << 20, 'a');  // every part but the last at least 5 MiB
  const std::string part2 = "tail";
  Result<std::string> id = c().CreateMultipartUpload(bucket_, key);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  Result<std::string> e1 = c().UploadPart(bucket_, key, *id, 1, part1);
  ASSERT_TRUE(e1.ok()) << e1.status().ToString();
  Result<std::string> e2 = c().UploadPart(bucket_, key, *id, 2, part2);
  ASSERT_TRUE(e2.ok()) << e2.status().ToString();
  Result<std::string> done = c().CompleteMultipartUpload(bucket_, key, *id, {{1, *e1}, {2, *e2}});
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  Result<ObjectInfo> info = c().HeadObject(bucket_, key);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, part1.size() + part2.size());
  EXPECT_EQ(*c().GetObject(bucket_, key, ByteRange{part1.size() - 2, std::nullopt}), "aatail");

  // An aborted upload leaves no object.
  Result<std::string> other = c().CreateMultipartUpload(bucket_, key + ".aborted");
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(c().UploadPart(bucket_, key + ".aborted", *other, 1, "x").ok());
  ASSERT_TRUE(c().AbortMultipartUpload(bucket_, key + ".aborted", *other).ok());
  EXPECT_EQ(c().HeadObject(bucket_, key + ".aborted").status().code(), StatusCode::kNotFound);
}

TEST_F(RgwTest, WrongSecretAndMissingBucket) {
  Result<S3Options> options = S3Options::FromEnvironment();
  ASSERT_TRUE(options.ok());
  S3Options wrong = *options;
  wrong.secret_access_key = "not-the-secret";
  wrong.max_retries = 0;
  Result<S3Client> bad = S3Client::Create(wrong);
  ASSERT_TRUE(bad.ok());
  Result<std::string> refused = bad->GetObject(bucket_, prefix_ + "x");
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition)
      << refused.status().ToString();
  EXPECT_THAT(refused.status().message(), HasSubstr("SignatureDoesNotMatch"));
  EXPECT_THAT(refused.status().message(), ::testing::Not(HasSubstr("not-the-secret")));
  Result<std::string> nobucket = c().GetObject("no-such-bucket-here", "x");
  EXPECT_EQ(nobucket.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(nobucket.status().message(), HasSubstr("NoSuchBucket"));
}

}  // namespace
}  // namespace sluice::s3
