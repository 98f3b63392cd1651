// The console page as a browser gets it from a real HttpServer: gzip or not, caching,
// index.html for page paths, and nothing but the page's files whatever the path.
#include <gtest/gtest.h>
#include <httplib.h>
#include <zlib.h>

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/http_server.h"
#include "base/strings.h"
#include "console/assets/assets.h"
#include "console/assets/static_route.h"

namespace sluice::console {
namespace {

constexpr char kBrowserEncodings[] = "gzip, deflate, br";

std::string Gunzip(const std::string& gz) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  char buf[16384];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
  }
  inflateEnd(&z);
  EXPECT_EQ(rc, Z_STREAM_END) << "not one whole gzip stream";
  return out;
}

std::string Gunzip(std::span<const uint8_t> gz) {
  return Gunzip(std::string(reinterpret_cast<const char*>(gz.data()), gz.size()));
}

const Asset* BundleFile(std::string_view extension) {
  for (const Asset& a : AllAssets()) {
    if (a.immutable && a.path.ends_with(extension)) return &a;
  }
  return nullptr;
}

class ConsoleAssetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s =
        HttpServer::Start("127.0.0.1:0", registry_, [] { return std::string(); }, {ConsoleRoute()});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    // The bytes as they come, and the paths as written (no encoding by the client).
    client_->set_decompress(false);
    client_->set_url_encode(false);
    const Asset* index = FindAsset("/index.html");
    ASSERT_NE(index, nullptr);
    index_html_ = Gunzip(index->gzip);
  }

  httplib::Result Get(const std::string& path, httplib::Headers headers = {}) {
    if (headers.find("Accept-Encoding") == headers.end()) {
      headers.emplace("Accept-Encoding", "identity");
    }
    return client_->Get(path, headers);
  }

  MetricsRegistry registry_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
  std::string index_html_;
};

TEST_F(ConsoleAssetsTest, IndexIsGzippedForBrowsersAndTheSameBytesPlainForOthers) {
  auto gz = Get("/", {{"Accept-Encoding", kBrowserEncodings}});
  ASSERT_TRUE(gz);
  EXPECT_EQ(gz->status, 200);
  EXPECT_EQ(gz->get_header_value("Content-Encoding"), "gzip");
  EXPECT_EQ(gz->get_header_value_count("Content-Encoding"), 1u);  // not compressed twice
  EXPECT_EQ(gz->get_header_value("Cache-Control"), "no-cache");
  EXPECT_EQ(gz->get_header_value("Vary"), "Accept-Encoding");
  EXPECT_TRUE(EqualsIgnoreCase(gz->get_header_value("Content-Type"), "text/html; charset=utf-8"))
      << gz->get_header_value("Content-Type");
  EXPECT_EQ(Gunzip(gz->body), index_html_);

  auto plain = Get("/");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 200);
  EXPECT_FALSE(plain->has_header("Content-Encoding"));
  EXPECT_EQ(plain->body, index_html_);
  EXPECT_NE(plain->get_header_value("ETag"), gz->get_header_value("ETag"));

  // "/index.html" is the same file; q=0 refuses gzip.
  auto refused = Get("/index.html", {{"Accept-Encoding", "gzip;q=0, br"}});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 200);
  EXPECT_NE(refused->get_header_value("Content-Encoding"), "gzip");
}

// index.html names one script and one stylesheet; every other bundle file is a chunk that
// index.html preloads or that a script it reaches imports when a page needs it (build.mjs:
// the lazy pages, CodeMirror, uPlot). No file is embedded that nothing reaches.
TEST_F(ConsoleAssetsTest, IndexNamesTheBundleFiles) {
  EXPECT_NE(index_html_.find("<div id=\"app\">"), std::string::npos);
  auto in_index = [&](const Asset& a) {
    return index_html_.find("\"" + std::string(a.path) + "\"") != std::string::npos;
  };
  int scripts = 0;
  int stylesheets = 0;
  for (const Asset& a : AllAssets()) {
    if (!a.immutable) continue;
    EXPECT_TRUE(a.path.starts_with("/assets/")) << a.path;
    if (a.path.ends_with(".css")) {
      ++stylesheets;
      EXPECT_TRUE(a.path.starts_with("/assets/app-")) << a.path;
      EXPECT_TRUE(in_index(a)) << a.path;
    } else if (a.path.starts_with("/assets/app-") && a.path.ends_with(".js")) {
      ++scripts;
      EXPECT_NE(index_html_.find("<script type=\"module\" src=\"" + std::string(a.path) + "\">"),
                std::string::npos)
          << a.path;
    } else {
      EXPECT_TRUE(a.path.ends_with(".js")) << a.path;
    }
  }
  EXPECT_EQ(scripts, 1);
  EXPECT_EQ(stylesheets, 1);

  // Reachable: named by index.html, or imported ("./FILE") by a reachable script.
  std::set<std::string_view> reached;
  std::vector<const Asset*> todo;
  for (const Asset& a : AllAssets()) {
    if (a.immutable && a.path.ends_with(".js") && in_index(a)) {
      reached.insert(a.path);
      todo.push_back(&a);
    }
  }
  while (!todo.empty()) {
    const std::string code = Gunzip(todo.back()->gzip);
    todo.pop_back();
    for (const Asset& b : AllAssets()) {
      if (!b.immutable || !b.path.ends_with(".js") || reached.contains(b.path)) continue;
      const std::string file(b.path.substr(b.path.rfind('/') + 1));
      if (code.find("\"./" + file + "\"") != std::string::npos) {
        reached.insert(b.path);
        todo.push_back(&b);
      }
    }
  }
  for (const Asset& a : AllAssets()) {
    if (a.immutable && a.path.ends_with(".js")) EXPECT_TRUE(reached.contains(a.path)) << a.path;
  }
  ASSERT_NE(BundleFile(".js"), nullptr);
  ASSERT_NE(BundleFile(".css"), nullptr);
}

TEST_F(ConsoleAssetsTest, BundleFilesAreCachedForever) {
  for (const char* ext : {".js", ".css"}) {
    const Asset* a = BundleFile(ext);
    ASSERT_NE(a, nullptr);
    auto res = Get(std::string(a->path), {{"Accept-Encoding", kBrowserEncodings}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Cache-Control"), "public, max-age=31536000, immutable");
    EXPECT_EQ(res->get_header_value("ETag"), a->etag);
    EXPECT_TRUE(EqualsIgnoreCase(res->get_header_value("Content-Type"), a->content_type));
    EXPECT_EQ(res->get_header_value("Content-Encoding"), "gzip");
    EXPECT_EQ(Gunzip(res->body), Gunzip(a->gzip));
  }
  EXPECT_EQ(BundleFile(".js")->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(BundleFile(".css")->content_type, "text/css; charset=utf-8");
}

TEST_F(ConsoleAssetsTest, IfNoneMatchAnswers304WithoutABody) {
  const Asset* js = BundleFile(".js");
  ASSERT_NE(js, nullptr);
  const std::string etag(js->etag);
  for (const std::string& tag : {etag, "W/" + etag, "\"other\", " + etag, std::string("*")}) {
    auto res = Get(std::string(js->path),
                   {{"Accept-Encoding", kBrowserEncodings}, {"If-None-Match", tag}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 304) << tag;
    EXPECT_EQ(res->body, "");
    EXPECT_EQ(res->get_header_value("ETag"), etag);
  }
  auto changed = Get(std::string(js->path),
                     {{"Accept-Encoding", kBrowserEncodings}, {"If-None-Match", "\"other\""}});
  ASSERT_TRUE(changed);
  EXPECT_EQ(changed->status, 200);
  // The gzip bytes' tag does not validate the plain ones.
  auto plain = Get(std::string(js->path), {{"If-None-Match", etag}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 200);
}

TEST_F(ConsoleAssetsTest, PagePathsAnswerIndex) {
  for (const char* path : {"/topics", "/topics/a%2Fb", "/groups/g%20x?tab=1", "/sql", "/x/y/z"}) {
    auto res = Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200) << path;
    EXPECT_EQ(res->body, index_html_) << path;
    EXPECT_EQ(res->get_header_value("Cache-Control"), "no-cache") << path;
  }
}

TEST_F(ConsoleAssetsTest, ServerPathsAreNotThePage) {
  for (const char* path : {"/api/v1/nope", "/api", "/v1/config", "/metrics/x", "/healthzz"}) {
    auto res = Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 404) << path;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json") << path;
    EXPECT_NE(res->body.find("{\"error\":{\"code\":\"NOT_FOUND\",\"message\":\""),
              std::string::npos)
        << res->body;
  }
  // A bundle file of another build: a 404, never HTML where a script is expected.
  auto stale = Get("/assets/app-OLDHASH.js");
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->status, 404);
}

TEST_F(ConsoleAssetsTest, OnlyGetAndHeadAreAnswered) {
  auto post = client_->Post("/", "{}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
  auto del = client_->Delete("/topics/x");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 405);

  auto head = client_->Head("/", {{"Accept-Encoding", "identity"}});
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->body, "");
  EXPECT_EQ(head->get_header_value("Content-Length"), std::to_string(index_html_.size()));
}

TEST_F(ConsoleAssetsTest, EveryAnswerCarriesTheSecurityHeaders) {
  for (const char* path : {"/", "/topics/t", "/api/v1/nope"}) {
    auto res = Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->get_header_value("X-Content-Type-Options"), "nosniff") << path;
    EXPECT_EQ(res->get_header_value("Referrer-Policy"), "no-referrer") << path;
    EXPECT_EQ(res->get_header_value("X-Frame-Options"), "DENY") << path;
    const std::string csp = res->get_header_value("Content-Security-Policy");
    EXPECT_NE(csp.find("default-src 'self'"), std::string::npos) << path;
    EXPECT_NE(csp.find("script-src 'self';"), std::string::npos) << path;
    EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;
    EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << path;
  }
}

TEST_F(ConsoleAssetsTest, TraversalNeverReachesAFile) {
  for (const char* path :
       {"/../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/%2e%2e/", "/assets/../../etc/passwd",
        "/..%2f..%2fetc%2fpasswd", "/assets/%2e%2e/%2e%2e/etc/passwd", "/./index.html/.."}) {
    auto res = Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->body.find("root:"), std::string::npos) << path;
    if (res->status == 200) {
      EXPECT_EQ(res->body, index_html_) << path;
    } else {
      EXPECT_TRUE(res->status == 400 || res->status == 404) << path << ": " << res->status;
    }
  }
}

TEST(ConsoleAssets, TheWholePageIsWithinItsBudget) {
  size_t total = 0;
  for (const Asset& a : AllAssets()) {
    total += a.gzip.size();
    EXPECT_EQ(a.etag.size(), 34u) << a.path;  // 32 hex digits, quoted
  }
  EXPECT_GT(total, 0u);
  EXPECT_LE(total, 400u * 1024);
}

}  // namespace
}  // namespace sluice::console
