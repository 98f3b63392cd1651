// SigV4 against AWS's published S3 examples and against botocore's signer.
#include "s3/sigv4.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace sluice::s3 {
namespace {

const Credentials kExampleCredentials{"AKIAIOSFODNN7EXAMPLE",
                                      "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
const char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html,
// "Example: GET Object".
TEST(SigV4Test, AwsGetObjectExample) {
  SigningRequest request;
  request.method = "GET";
  request.encoded_path = "/test.txt";
  request.payload_hash = kEmptySha256;
  request.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                     {"Range", "bytes=0-9"},
                     {"x-amz-content-sha256", kEmptySha256},
                     {"x-amz-date", "20130524T000000Z"}};
  Result<SigningResult> result = SignRequest(request, kExampleCredentials, "us-east-1", "s3");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->canonical_request,
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
            "\nx-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(result->authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

// The same page, "Example: PUT Object".
TEST(SigV4Test, AwsPutObjectExample) {
  std::string body = "Welcome to Amazon S3.";
  SigningRequest request;
  request.method = "PUT";
  request.encoded_path = "/" + UriEncode("test$file.text", true);
  request.payload_hash = Sha256Hex(body);
  EXPECT_EQ(request.payload_hash,
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  request.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                     {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                     {"x-amz-date", "20130524T000000Z"},
                     {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                     {"x-amz-content-sha256", request.payload_hash}};
  Result<SigningResult> result = SignRequest(request, kExampleCredentials, "us-east-1", "s3");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->signed_headers,
            "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class");
  EXPECT_EQ(result->signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

// The same page, "Example: GET Bucket (List Objects)".
TEST(SigV4Test, AwsListObjectsExample) {
  SigningRequest request;
  request.method = "GET";
  request.encoded_path = "/";
  request.query = {{"prefix", "J"}, {"max-keys", "2"}};
  request.payload_hash = kEmptySha256;
  request.headers = {{"host", "examplebucket.s3.amazonaws.com"},
                     {"x-amz-date", "20130524T000000Z"},
                     {"x-amz-content-sha256", kEmptySha256}};
  Result<SigningResult> result = SignRequest(request, kExampleCredentials, "us-east-1", "s3");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4Test, UriEncodeKeepsUnreservedAndSlashOnlyInPaths) {
  EXPECT_EQ(UriEncode("AZaz09-_.~", false), "AZaz09-_.~");
  EXPECT_EQ(UriEncode("a/b c+d=e&f*", true), "a/b%20c%2Bd%3De%26f%2A");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(UriEncode("\xc3\xbc\xff", false), "%C3%BC%FF");
  EXPECT_EQ(CanonicalQueryString({{"prefix", "a b"}, {"list-type", "2"}, {"uploads", ""}}),
            "list-type=2&prefix=a%20b&uploads=");
}

TEST(SigV4Test, RefusesMissingHostBadDateAndLineBreaks) {
  SigningRequest request;
  request.method = "GET";
  request.encoded_path = "/";
  request.payload_hash = kEmptySha256;
  request.headers = {{"x-amz-date", "20130524T000000Z"}};
  EXPECT_EQ(SignRequest(request, kExampleCredentials, "us-east-1", "s3").status().code(),
            StatusCode::kInvalidArgument);
  request.headers = {{"host", "h"}, {"x-amz-date", "2013-05-24"}};
  EXPECT_EQ(SignRequest(request, kExampleCredentials, "us-east-1", "s3").status().code(),
            StatusCode::kInvalidArgument);
  request.headers = {{"host", "h"}, {"x-amz-date", "20130524T000000Z"}, {"x-a", "1\r\nx: y"}};
  EXPECT_EQ(SignRequest(request, kExampleCredentials, "us-east-1", "s3").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SigV4Test, SessionTokenIsSignedAsSecurityTokenHeader) {
  SigningRequest request;
  request.method = "GET";
  request.encoded_path = "/b/k";
  request.payload_hash = kEmptySha256;
  request.headers = {{"host", "h"}, {"x-amz-date", "20130524T000000Z"}};
  Credentials credentials = kExampleCredentials;
  credentials.session_token = "token/with+chars=";
  Result<SigningResult> result = SignRequest(request, credentials, "eu-west-1", "s3");
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->signed_headers, "host;x-amz-date;x-amz-security-token");
  ASSERT_EQ(result->headers.size(), 3u);
  EXPECT_EQ(result->headers[2].second, "token/with+chars=");
  EXPECT_EQ(result->authorization.find(credentials.secret_access_key), std::string::npos);
}

// One request as both signers see it.
struct BotoCase {
  std::string method;
  std::string path;  // raw
  NameValues params;
  NameValues headers;  // besides host, x-amz-date, x-amz-content-sha256
  std::string body;
};

// Runs botocore_sign.py over `cases`; one JSON object per case.
std::vector<nlohmann::json> SignWithBotocore(const std::vector<BotoCase>& cases,
                                             const Credentials& credentials,
                                             const std::string& region, const std::string& date,
                                             const std::string& url) {
  nlohmann::json spec = {{"access_key", credentials.access_key_id},
                         {"secret_key", credentials.secret_access_key},
                         {"token", credentials.session_token},
                         {"region", region},
                         {"amz_date", date},
                         {"requests", nlohmann::json::array()}};
  for (const BotoCase& c : cases) {
    spec["requests"].push_back({{"method", c.method},
                                {"url", url},
                                {"path", c.path},
                                {"params", c.params},
                                {"headers", c.headers},
                                {"body", c.body}});
  }
  char input_path[] = "/tmp/sluice_botocore_XXXXXX";
  int fd = mkstemp(input_path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(input_path) << spec.dump();
  std::string command =
      fmt::format("/usr/bin/python3 {} < {} 2>&1", SLUICE_BOTOCORE_SIGN_PY, input_path);
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string output;
  char buf[4096];
  size_t n;
  while (pipe != nullptr && (n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  int rc = pipe != nullptr ? pclose(pipe) : -1;
  unlink(input_path);
  EXPECT_EQ(rc, 0) << "botocore_sign.py failed (is python3-botocore installed? "
                      "apt-get install python3-botocore): "
                   << output;
  std::vector<nlohmann::json> results;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json parsed = nlohmann::json::parse(line, nullptr, false);
    EXPECT_FALSE(parsed.is_discarded()) << line;
    results.push_back(parsed);
  }
  return results;
}

void CompareWithBotocore(const Credentials& credentials) {
  const std::string region = "eu-central-1";
  const std::string date = "20261203T101112Z";
  const std::string host = "127.0.0.1:7480";
  std::string put_body = "hello, \xc3\xbc world\n";
  std::vector<BotoCase> cases = {
      {"GET", "/bucket/plain.txt", {}, {}, ""},
      {"GET", "/bucket/a key with spaces+plus/\xc3\xbcnicode/~tilde*star", {}, {}, ""},
      {"GET",
       "/bucket",
       {{"list-type", "2"},
        {"prefix", "dir/sub dir/a+b=c&d"},
        {"continuation-token", "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM="},
        {"delimiter", "/"}},
       {},
       ""},
      {"GET", "/bucket/data.parquet", {}, {{"Range", "bytes=100-199"}}, ""},
      {"PUT",
       "/bucket/warehouse/t/metadata/v1.metadata.json",
       {},
       {{"If-None-Match", "*"}, {"Content-Type", "application/json"}},
       put_body},
      {"POST", "/bucket/big object", {{"uploads", ""}}, {}, ""},
      {"PUT", "/bucket/big object", {{"partNumber", "2"}, {"uploadId", "a+b/c=="}}, {}, put_body},
      {"GET", "/bucket/k", {}, {{"x-amz-meta-note", "  two   spaces\tand tab  "}}, ""},
  };
  std::vector<nlohmann::json> expected =
      SignWithBotocore(cases, credentials, region, date, "http://" + host);
  ASSERT_EQ(expected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const BotoCase& c = cases[i];
    SigningRequest request;
    request.method = c.method;
    request.encoded_path = UriEncode(c.path, true);
    request.query = c.params;
    request.payload_hash = Sha256Hex(c.body);
    request.headers = c.headers;
    request.headers.emplace_back("host", host);
    request.headers.emplace_back("x-amz-date", date);
    request.headers.emplace_back("x-amz-content-sha256", request.payload_hash);
    Result<SigningResult> result = SignRequest(request, credentials, region, "s3");
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    EXPECT_EQ(result->canonical_request, expected[i]["canonical_request"].get<std::string>())
        << "case " << i;
    EXPECT_EQ(result->authorization, expected[i]["authorization"].get<std::string>())
        << "case " << i;
  }
}

TEST(SigV4Test, MatchesBotocore) { CompareWithBotocore(kExampleCredentials); }

TEST(SigV4Test, MatchesBotocoreWithSessionToken) {
  Credentials credentials = kExampleCredentials;
  credentials.session_token = "FwoGZXIvYXdzEJr//////////wEaDH+token/with=chars";
  CompareWithBotocore(credentials);
}

}  // namespace
}  // namespace sluice::s3
