// S3Client against a small S3 imitation on 127.0.0.1 that checks every request's
// signature by recomputing it, and that can answer 503 or cut the connection on demand.
// Also the client's configuration: endpoints and the environment.
#include "s3/s3_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "base/strings.h"

namespace sluice::s3 {
namespace {

const char kAccessKey[] = "AKIDTEST";
const char kSecretKey[] = "very/secret+key";
const char kToken[] = "session-token-value";

struct HttpRequest {
  std::string method;
  std::string path;    // as sent, still encoded
  NameValues query;    // decoded
  NameValues headers;  // lowercase names
  std::string body;

  std::string Header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n == name) return v;
    }
    return "";
  }
  bool HasQuery(std::string_view name) const {
    for (const auto& [n, v] : query) {
      if (n == name) return true;
    }
    return false;
  }
  std::string Query(std::string_view name) const {
    for (const auto& [n, v] : query) {
      if (n == name) return v;
    }
    return "";
  }
};

struct HttpReply {
  int status = 200;
  NameValues headers;
  std::string body;
  bool cut = false;  // close the connection without answering
};

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// One connection at a time, one request per connection ("Connection: close").
class TestHttpServer {
 public:
  explicit TestHttpServer(std::function<HttpReply(const HttpRequest&)> handler)
      : handler_(std::move(handler)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listen_fd_, 16), 0);
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~TestHttpServer() {
    stop_ = true;
    thread_.join();
    close(listen_fd_);
  }
  uint16_t port() const { return port_; }

 private:
  void Run() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      Serve(fd);
      close(fd);
    }
  }

  void Serve(int fd) {
    std::string data;
    char buf[65536];
    size_t header_end;
    while ((header_end = data.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) return;
      data.append(buf, static_cast<size_t>(n));
    }
    HttpRequest request;
    std::string_view head(data.data(), header_end);
    size_t line_end = head.find("\r\n");
    std::string_view request_line = head.substr(0, line_end);
    size_t sp1 = request_line.find(' ');
    size_t sp2 = request_line.rfind(' ');
    request.method = std::string(request_line.substr(0, sp1));
    std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
    size_t qmark = target.find('?');
    request.path = std::string(target.substr(0, qmark));
    if (qmark != std::string_view::npos) {
      std::string_view query = target.substr(qmark + 1);
      while (!query.empty()) {
        size_t amp = query.find('&');
        std::string_view pair = query.substr(0, amp);
        size_t eq = pair.find('=');
        request.query.emplace_back(
            PercentDecode(pair.substr(0, eq)),
            eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1)));
        query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
      }
    }
    std::string_view rest = line_end == std::string_view::npos ? "" : head.substr(line_end + 2);
    while (!rest.empty()) {
      size_t end = rest.find("\r\n");
      std::string_view line = rest.substr(0, end);
      size_t colon = line.find(':');
      request.headers.emplace_back(AsciiLower(Trim(line.substr(0, colon))),
                                   std::string(Trim(line.substr(colon + 1))));
      rest = end == std::string_view::npos ? "" : rest.substr(end + 2);
    }
    size_t length = 0;
    if (std::string cl = request.Header("content-length"); !cl.empty()) length = std::stoul(cl);
    request.body = data.substr(header_end + 4);
    while (request.body.size() < length) {
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) return;
      request.body.append(buf, static_cast<size_t>(n));
    }
    HttpReply reply = handler_(request);
    if (reply.cut) return;
    std::string out = fmt::format("HTTP/1.1 {} X\r\nConnection: close\r\n", reply.status);
    bool has_length = false;
    for (const auto& [n, v] : reply.headers) {
      out += n + ": " + v + "\r\n";
      if (EqualsIgnoreCase(n, "content-length")) has_length = true;
    }
    if (!has_length) out += fmt::format("Content-Length: {}\r\n", reply.body.size());
    out += "\r\n";
    if (request.method != "HEAD") out += reply.body;
    size_t sent = 0;
    while (sent < out.size()) {
      ssize_t n = write(fd, out.data() + sent, out.size() - sent);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  std::function<HttpReply(const HttpRequest&)> handler_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

HttpReply ErrorReply(int status, std::string_view code) {
  return {status,
          {{"Content-Type", "application/xml"}},
          fmt::format("<?xml version=\"1.0\"?><Error><Code>{}</Code><Message>m</Message></Error>",
                      code)};
}

// Empty when `request` carries a valid signature by kAccessKey/kSecretKey (and kToken),
// else what is wrong.
std::string CheckSignature(const HttpRequest& request, uint16_t port) {
  std::string authorization = request.Header("authorization");
  size_t at = authorization.find("SignedHeaders=");
  if (at == std::string::npos) return "no SignedHeaders in '" + authorization + "'";
  std::string_view signed_list(authorization);
  signed_list = signed_list.substr(at + 14);
  signed_list = signed_list.substr(0, signed_list.find(','));
  SigningRequest signing;
  signing.method = request.method;
  signing.encoded_path = request.path;
  signing.query = request.query;
  signing.payload_hash = request.Header("x-amz-content-sha256");
  if (signing.payload_hash != Sha256Hex(request.body)) return "x-amz-content-sha256 is wrong";
  if (request.Header("host") != fmt::format("127.0.0.1:{}", port)) return "bad host header";
  if (request.Header("x-amz-security-token") != kToken) return "no or bad security token";
  while (!signed_list.empty()) {
    size_t semi = signed_list.find(';');
    std::string name(signed_list.substr(0, semi));
    if (name != "x-amz-security-token") signing.headers.emplace_back(name, request.Header(name));
    signed_list = semi == std::string_view::npos ? "" : signed_list.substr(semi + 1);
  }
  Result<SigningResult> expected =
      SignRequest(signing, {kAccessKey, kSecretKey, kToken}, "us-east-1", "s3");
  if (!expected.ok()) return expected.status().ToString();
  if (expected->authorization != authorization) {
    return "signature mismatch; canonical request:\n" + expected->canonical_request;
  }
  return "";
}

// An S3 imitation: objects in a map, multipart uploads, failures on request.
class FakeS3 {
 public:
  FakeS3() : server_([this](const HttpRequest& r) { return Handle(r); }) {}

  S3Options Options() const {
    S3Options options;
    options.endpoint = fmt::format("http://127.0.0.1:{}", server_.port());
    options.access_key_id = kAccessKey;
    options.secret_access_key = kSecretKey;
    options.session_token = kToken;
    options.retry_base_delay = std::chrono::milliseconds(1);
    return options;
  }

  std::mutex mu;
  // Guarded by mu.
  std::map<std::string, std::string> objects;  // "bucket/key" (decoded) -> bytes
  std::map<std::string, std::map<int, std::string>> uploads;
  int fail_503 = 0;                  // answer this many requests with 503 SlowDown
  int cut = 0;                       // cut this many connections
  bool honour_if_none_match = true;  // false: a store that ignores conditional creates
  size_t list_padding = 0;           // bytes of whitespace in a list reply
  bool ignore_range = false;         // answer a ranged GET with 200 and the whole object
  int requests = 0;
  std::vector<std::string> signature_errors;

 private:
  HttpReply Handle(const HttpRequest& r) {
    std::lock_guard lock(mu);
    ++requests;
    if (cut > 0) {
      --cut;
      return {.cut = true};
    }
    if (fail_503 > 0) {
      --fail_503;
      return ErrorReply(503, "SlowDown");
    }
    if (std::string error = CheckSignature(r, server_.port()); !error.empty()) {
      signature_errors.push_back(error);
      return ErrorReply(403, "SignatureDoesNotMatch");
    }
    std::string path = PercentDecode(r.path.substr(1));
    size_t slash = path.find('/');
    std::string bucket = path.substr(0, slash);
    std::string key = slash == std::string::npos ? "" : path.substr(slash + 1);
    std::string name = bucket + "/" + key;
    if (key.empty() && r.method == "GET" && r.Query("list-type") == "2") {
      std::string prefix = r.Query("prefix");
      std::string body = "<ListBucketResult><IsTruncated>false</IsTruncated>";
      for (const auto& [n, bytes] : objects) {
        if (!n.starts_with(bucket + "/" + prefix)) continue;
        body += fmt::format("<Contents><Key>{}</Key><Size>{}</Size></Contents>",
                            XmlEscape(n.substr(bucket.size() + 1)), bytes.size());
      }
      return {200, {}, body + std::string(list_padding, ' ') + "</ListBucketResult>"};
    }
    if (r.method == "PUT" && r.HasQuery("partNumber")) {
      uploads[r.Query("uploadId")][std::stoi(r.Query("partNumber"))] = r.body;
      return {200, {{"ETag", "\"part" + r.Query("partNumber") + "\""}}, ""};
    }
    if (r.method == "PUT") {
      if (honour_if_none_match && r.Header("if-none-match") == "*" && objects.count(name)) {
        return ErrorReply(412, "PreconditionFailed");
      }
      objects[name] = r.body;
      return {200, {{"ETag", "\"" + Sha256Hex(r.body).substr(0, 8) + "\""}}, ""};
    }
    if (r.method == "POST" && r.HasQuery("uploads")) {
      uploads["up&1"];
      return {200,
              {},
              "<InitiateMultipartUploadResult><UploadId>up&amp;1</UploadId>"
              "</InitiateMultipartUploadResult>"};
    }
    if (r.method == "POST" && r.HasQuery("uploadId")) {
      auto it = uploads.find(r.Query("uploadId"));
      if (it == uploads.end()) return ErrorReply(404, "NoSuchUpload");
      std::string whole;
      for (const auto& [n, part] : it->second) {
        if (r.body.find(fmt::format("<PartNumber>{}</PartNumber><ETag>&quot;part{}&quot;</ETag>", n,
                                    n)) == std::string::npos) {
          return ErrorReply(400, "InvalidPart");
        }
        whole += part;
      }
      objects[name] = whole;
      uploads.erase(it);
      return {200,
              {},
              "<CompleteMultipartUploadResult><ETag>&quot;mp-2&quot;</ETag>"
              "</CompleteMultipartUploadResult>"};
    }
    if (r.method == "DELETE" && r.HasQuery("uploadId")) {
      uploads.erase(r.Query("uploadId"));
      return {204, {}, ""};
    }
    if (r.method == "DELETE") {
      objects.erase(name);
      return {204, {}, ""};
    }
    auto it = objects.find(name);
    if (it == objects.end()) {
      return r.method == "HEAD" ? HttpReply{404, {}, ""} : ErrorReply(404, "NoSuchKey");
    }
    if (r.method == "HEAD") {
      return {200, {{"Content-Length", std::to_string(it->second.size())}, {"ETag", "\"e\""}}, ""};
    }
    std::string range = r.Header("range");
    if (range.starts_with("bytes=") && !ignore_range) {
      size_t dash = range.find('-');
      size_t from = std::stoul(range.substr(6, dash - 6));
      std::string to = range.substr(dash + 1);
      size_t length = to.empty() ? std::string::npos : std::stoul(to) - from + 1;
      return {206, {}, it->second.substr(from, length)};
    }
    return {200, {}, it->second};
  }

  TestHttpServer server_;
};

S3Client MakeClient(const FakeS3& s3) {
  Result<S3Client> client = S3Client::Create(s3.Options());
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return std::move(client).value();
}

TEST(S3ClientTest, PutGetHeadListDelete) {
  FakeS3 s3;
  S3Client client = MakeClient(s3);
  const std::string key = "dir/a key+with ü & such";
  Result<std::string> etag = client.PutObject("bucket", key, "hello world");
  ASSERT_TRUE(etag.ok()) << etag.status().ToString();
  EXPECT_FALSE(etag->empty());
  ASSERT_TRUE(client.PutObject("bucket", "dir/empty", "").ok());

  Result<std::string> body = client.GetObject("bucket", key);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ(*body, "hello world");
  Result<std::string> part = client.GetObject("bucket", key, ByteRange{6, 3});
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_EQ(*part, "wor");
  Result<std::string> tail = client.GetObject("bucket", key, ByteRange{6, std::nullopt});
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(*tail, "world");

  Result<ObjectInfo> info = client.HeadObject("bucket", key);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, 11u);

  Result<ListObjectsPage> page = client.ListObjectsV2("bucket", "dir/a key");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, key);
  EXPECT_EQ(page->objects[0].size, 11u);

  ASSERT_TRUE(client.DeleteObject("bucket", key).ok());
  EXPECT_EQ(client.HeadObject("bucket", key).status().code(), StatusCode::kNotFound);
  Result<std::string> missing = client.GetObject("bucket", key);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("HTTP 404 NoSuchKey"), std::string::npos)
      << missing.status().message();

  std::lock_guard lock(s3.mu);
  EXPECT_TRUE(s3.signature_errors.empty()) << s3.signature_errors.front();
}

TEST(S3ClientTest, IfNoneMatchOnExistingKeyIsAlreadyExists) {
  FakeS3 s3;
  S3Client client = MakeClient(s3);
  PutOptions create{.if_none_match_star = true};
  ASSERT_TRUE(client.PutObject("b", "v1.metadata.json", "one", create).ok());
  Result<std::string> again = client.PutObject("b", "v1.metadata.json", "two", create);
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists) << again.status().ToString();
  EXPECT_NE(again.status().message().find("412 PreconditionFailed"), std::string::npos);
  EXPECT_EQ(*client.GetObject("b", "v1.metadata.json"), "one");
  std::lock_guard lock(s3.mu);
  EXPECT_TRUE(s3.signature_errors.empty()) << s3.signature_errors.front();
}

TEST(S3ClientTest, ProbeOfConditionalCreates) {
  FakeS3 s3;
  S3Client client = MakeClient(s3);
  EXPECT_TRUE(ProbeConditionalCreate(client, "b", "db/t/metadata/").ok());
  {
    std::lock_guard lock(s3.mu);
    EXPECT_TRUE(s3.objects.empty()) << "the probe object is removed";
    s3.honour_if_none_match = false;
  }
  Status refused = ProbeConditionalCreate(client, "b", "db/t/metadata/");
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("does not honour conditional PUTs"), std::string::npos)
      << refused.message();
  std::lock_guard lock(s3.mu);
  EXPECT_TRUE(s3.objects.empty());
}

TEST(S3ClientTest, AnOversizedReplyIsRefusedButAnObjectIsNot) {
  FakeS3 s3;
  S3Client client = MakeClient(s3);
  const std::string big(17u << 20, 'x');  // past the 16 MiB cap on replies that are not objects
  ASSERT_TRUE(client.PutObject("b", "big", big).ok());
  Result<std::string> got = client.GetObject("b", "big");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size(), big.size());
  {
    std::lock_guard lock(s3.mu);
    s3.list_padding = 17u << 20;
  }
  Result<ListObjectsPage> page = client.ListObjectsV2("b", "");
  EXPECT_EQ(page.status().code(), StatusCode::kCorruption) << page.status().ToString();
  EXPECT_NE(page.status().message().find("larger than sluice takes"), std::string::npos);
}

TEST(S3ClientTest, RetriesServerErrorsThenSucceeds) {
  FakeS3 s3;
  S3Client client = MakeClient(s3);
  {
    std::lock_guard lock(s3.mu);
    s3.fail_503 = 2;
  }
  ASSERT_TRUE(client.PutObject("b", "k", "v").ok());
  std::lock_guard lock(s3.mu);
  EXPECT_EQ(s3.requests, 3);
  EXPECT_EQ(s3.objects["b/k"], "v");
}

TEST(S3ClientTest, GivesUpAfterMaxRetries) {
  FakeS3 s3;
  S3Options options = s3.Options();
  options.max_retries = 2;
  Result<S3Client> client = S3Client::Create(options);
  ASSERT_TRUE(client.ok());
  {
    std::lock_guard lock(s3.mu);
    s3.fail_503 = 10;
  }
  Result<std::string> put = client->PutObject("b", "k", "v");
  EXPECT_EQ(put.status().code(), StatusCode::kResourceExhausted) << put.status().ToString();
  EXPECT_NE(put.status().message().find("HTTP 503 SlowDown"), std::string::npos);
  std::lock_guard lock(s3.mu);
  EXPECT_EQ(s3.requests, 3);
}

TEST(S3ClientTest, RetriesACutConnection) {
  FakeS3 s3;
  S3Client client = MakeClient(s3);
  ASSERT_TRUE(client.PutObject("b", "k", "value").ok());
  {
    std::lock_guard lock(s3.mu);
    s3.cut = 1;
    s3.requests = 0;
  }
  Result<std::string> body = client.GetObject("b", "k");
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ(*body, "value");
  std::lock_guard lock(s3.mu);
  EXPECT_EQ(s3.requests, 2);
}

// GetObjectToFile: the bytes land in the file at the offset given, never an error body;
// retries write the same bytes again; a server ignoring Range is cut to the range.
TEST(S3ClientTest, GetObjectToFileStreamsTheBytes) {
  FakeS3 s3;
  S3Client client = MakeClient(s3);
  std::string object;
  for (int i = 0; i < 200000; ++i) object += static_cast<char>('a' + i % 26);
  ASSERT_TRUE(client.PutObject("b", "obj", object).ok());
  char tmpl[] = "/tmp/sluice-s3-get-XXXXXX";
  int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  auto file = [&] {
    std::string bytes;
    char buf[65536];
    for (off_t at = 0;;) {
      ssize_t n = ::pread(fd, buf, sizeof buf, at);
      if (n <= 0) break;
      bytes.append(buf, static_cast<size_t>(n));
      at += n;
    }
    return bytes;
  };

  Result<uint64_t> whole = client.GetObjectToFile("b", "obj", std::nullopt, fd, 0);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(*whole, object.size());
  EXPECT_EQ(file(), object);

  // A range at an offset of the file; the rest of the file untouched.
  ASSERT_EQ(::ftruncate(fd, 0), 0);
  Result<uint64_t> part = client.GetObjectToFile("b", "obj", ByteRange{1000, 70000}, fd, 10);
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_EQ(*part, 70000u);
  EXPECT_EQ(file(), std::string(10, '\0') + object.substr(1000, 70000));

  // 503 then a cut connection, then the bytes: the error body is not in the file.
  ASSERT_EQ(::ftruncate(fd, 0), 0);
  {
    std::lock_guard lock(s3.mu);
    s3.fail_503 = 1;
    s3.cut = 1;
  }
  Result<uint64_t> retried = client.GetObjectToFile("b", "obj", ByteRange{5, 100}, fd, 0);
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  EXPECT_EQ(file(), object.substr(5, 100));

  // A server that ignores Range: the range's bytes only.
  ASSERT_EQ(::ftruncate(fd, 0), 0);
  {
    std::lock_guard lock(s3.mu);
    s3.ignore_range = true;
  }
  Result<uint64_t> cut = client.GetObjectToFile("b", "obj", ByteRange{150000, 100000}, fd, 0);
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  EXPECT_EQ(*cut, 50000u);
  EXPECT_EQ(file(), object.substr(150000));

  // A missing key: NotFound, nothing written.
  ASSERT_EQ(::ftruncate(fd, 0), 0);
  Result<uint64_t> missing = client.GetObjectToFile("b", "nope", std::nullopt, fd, 0);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(file(), "");
  ::close(fd);
  ::unlink(tmpl);
}

TEST(S3ClientTest, ConnectionRefusedIsIOErrorWithoutSecrets) {
  S3Options options;
  {
    // A port that was free a moment ago: nothing listens on it.
    FakeS3 s3;
    options = s3.Options();
  }
  options.max_retries = 1;
  options.connect_timeout = std::chrono::milliseconds(500);
  Result<S3Client> client = S3Client::Create(options);
  ASSERT_TRUE(client.ok());
  Result<std::string> put = client->PutObject("b", "k", "v");
  EXPECT_EQ(put.status().code(), StatusCode::kIOError) << put.status().ToString();
  EXPECT_EQ(put.status().message().find(kSecretKey), std::string::npos);
  EXPECT_EQ(put.status().message().find(kToken), std::string::npos);
}

TEST(S3ClientTest, MultipartUpload) {
  FakeS3 s3;
  S3Client client = MakeClient(s3);
  Result<std::string> upload = client.CreateMultipartUpload("b", "big file");
  ASSERT_TRUE(upload.ok()) << upload.status().ToString();
  EXPECT_EQ(*upload, "up&1");
  std::vector<CompletedPart> parts;
  for (int n = 1; n <= 2; ++n) {
    Result<std::string> etag =
        client.UploadPart("b", "big file", *upload, n, std::string(5, static_cast<char>('0' + n)));
    ASSERT_TRUE(etag.ok()) << etag.status().ToString();
    parts.push_back({n, *etag});
  }
  EXPECT_EQ(client.UploadPart("b", "big file", *upload, 0, "x").status().code(),
            StatusCode::kInvalidArgument);
  Result<std::string> etag = client.CompleteMultipartUpload("b", "big file", *upload, parts);
  ASSERT_TRUE(etag.ok()) << etag.status().ToString();
  EXPECT_EQ(*etag, "\"mp-2\"");
  EXPECT_EQ(*client.GetObject("b", "big file"), "1111122222");

  Result<std::string> other = client.CreateMultipartUpload("b", "abandoned");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(client.AbortMultipartUpload("b", "abandoned", *other).ok());
  std::lock_guard lock(s3.mu);
  EXPECT_TRUE(s3.uploads.empty());
  EXPECT_TRUE(s3.signature_errors.empty()) << s3.signature_errors.front();
}

TEST(S3ClientTest, WrongSecretIsRefused) {
  FakeS3 s3;
  S3Options options = s3.Options();
  options.secret_access_key = "not-the-secret";
  Result<S3Client> client = S3Client::Create(options);
  ASSERT_TRUE(client.ok());
  Result<std::string> put = client->PutObject("b", "k", "v");
  EXPECT_EQ(put.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(put.status().message().find("403 SignatureDoesNotMatch"), std::string::npos);
  EXPECT_EQ(put.status().message().find("not-the-secret"), std::string::npos);
}

TEST(S3EndpointTest, ParsesGoodEndpoints) {
  Result<Endpoint> e = ParseEndpoint("http://127.0.0.1:7480");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, 7480);
  EXPECT_TRUE(e->host_is_local_or_ip);
  EXPECT_EQ(e->HostHeader(), "127.0.0.1:7480");
  e = ParseEndpoint("https://s3.eu-west-1.amazonaws.com/");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->host_is_local_or_ip);
  EXPECT_EQ(e->HostHeader(), "s3.eu-west-1.amazonaws.com");
  e = ParseEndpoint("http://[::1]:9000");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "::1");
  EXPECT_TRUE(e->host_is_local_or_ip);
  EXPECT_EQ(e->HostHeader(), "[::1]:9000");
  e = ParseEndpoint("HTTP://LocalHost:80");
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->host_is_local_or_ip);
  EXPECT_EQ(e->HostHeader(), "localhost");
}

TEST(S3EndpointTest, RefusesBadEndpoints) {
  for (const char* url :
       {"", "127.0.0.1:7480", "ftp://host", "http://", "http://:80",
        "http://host:", "http://host:0", "http://host:65536", "http://host:12ab",
        "http://user:pw@host", "http://host/path", "http://host?x=1", "http://[::1",
        "http://[::1]x", "http://a:b:c", "http://host name", "http://host\r\nX: y"}) {
    EXPECT_EQ(ParseEndpoint(url).status().code(), StatusCode::kInvalidArgument) << url;
  }
}

TEST(S3OptionsTest, FromEnvironment) {
  std::map<std::string, std::string> env = {{"AWS_ACCESS_KEY_ID", "ak"},
                                            {"AWS_SECRET_ACCESS_KEY", "sk"},
                                            {"AWS_DEFAULT_REGION", "eu-west-1"},
                                            {"AWS_ENDPOINT_URL", "http://10.0.0.1:9000"}};
  auto lookup = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  Result<S3Options> options = S3Options::FromEnvironment(lookup);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->region, "eu-west-1");
  EXPECT_EQ(options->endpoint, "http://10.0.0.1:9000");
  EXPECT_TRUE(options->session_token.empty());

  env["AWS_REGION"] = "ap-south-1";
  env["AWS_ENDPOINT_URL_S3"] = "http://localhost:7480";
  env["AWS_SESSION_TOKEN"] = "tok";
  options = S3Options::FromEnvironment(lookup);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->region, "ap-south-1");
  EXPECT_EQ(options->endpoint, "http://localhost:7480");
  EXPECT_EQ(options->session_token, "tok");

  env["AWS_ENDPOINT_URL_S3"] = "not a url";
  EXPECT_EQ(S3Options::FromEnvironment(lookup).status().code(), StatusCode::kInvalidArgument);
  env.erase("AWS_ENDPOINT_URL_S3");

  env.erase("AWS_SECRET_ACCESS_KEY");
  Result<S3Options> missing = S3Options::FromEnvironment(lookup);
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("AWS_SECRET_ACCESS_KEY"), std::string::npos);
  env["AWS_SECRET_ACCESS_KEY"] = "sk";
  env.erase("AWS_ACCESS_KEY_ID");
  EXPECT_EQ(S3Options::FromEnvironment(lookup).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(S3Options::FromEnvironment([](const char*) -> const char* { return nullptr; })
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(S3OptionsTest, PathStyleDefaultsFollowTheHost) {
  S3Options options;
  options.access_key_id = "a";
  options.secret_access_key = "s";
  Result<S3Client> aws = S3Client::Create(options);
  ASSERT_TRUE(aws.ok());
  EXPECT_EQ(S3Client::Create(
                S3Options{.endpoint = "bogus", .access_key_id = "a", .secret_access_key = "s"})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(S3Client::Create(S3Options{}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice::s3
