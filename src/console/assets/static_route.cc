#include "console/assets/static_route.h"

#include <zlib.h>

#include <optional>
#include <string>
#include <string_view>

#include "base/strings.h"
#include "console/assets/assets.h"

namespace sluice::console {
namespace {

// Scripts and styles from this origin only, no inline ones (the page has none; uPlot
// styles its elements through the CSSOM, which the policy allows), fetch and
// EventSource to this origin, never framed.
constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";

void AddSecurityHeaders(HttpResponse& out) {
  out.headers.push_back({"X-Content-Type-Options", "nosniff"});
  out.headers.push_back({"Content-Security-Policy", kContentSecurityPolicy});
  out.headers.push_back({"Referrer-Policy", "no-referrer"});
  out.headers.push_back({"X-Frame-Options", "DENY"});
}

// The API's error shape (docs/design/0026-console.md #7). `message` is one of the
// constants below: nothing in it needs JSON escaping.
HttpResponse Error(int status, std::string_view code, std::string_view message) {
  HttpResponse out;
  out.status = status;
  out.body = "{\"error\":{\"code\":\"" + std::string(code) + "\",\"message\":\"" +
             std::string(message) + "\"}}\n";
  AddSecurityHeaders(out);
  return out;
}

bool StartsWithSegment(std::string_view path, std::string_view prefix) {
  return path == prefix || (path.starts_with(prefix) && path[prefix.size()] == '/');
}

// Paths the server's other routes own: never answered with the page, even when nothing
// else took them (no catalog on /v1/, a mistyped API path).
bool IsServerPath(std::string_view path) {
  return StartsWithSegment(path, "/api") || StartsWithSegment(path, "/v1") ||
         path.starts_with("/metrics") || path.starts_with("/healthz");
}

// Whether Accept-Encoding allows gzip (RFC 9110 12.5.3): named (or x-gzip) with a q above
// 0, or "*" above 0 when gzip is not named. No header: no, as curl without --compressed.
bool AcceptsGzip(const HttpRequest& req) {
  const std::string* header = req.Header("accept-encoding");
  if (header == nullptr) return false;
  std::optional<bool> gzip, any;
  std::string_view rest = *header;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t semi = item.find(';');
    const std::string_view coding = Trim(item.substr(0, semi));
    bool allowed = true;
    if (semi != std::string_view::npos) {
      const std::string_view param = Trim(item.substr(semi + 1));
      if (param.size() >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') {
        // q is 0 when every digit is: "0", "0.0", "0.000".
        allowed = Trim(param.substr(2)).find_first_not_of("0.") != std::string_view::npos;
      }
    }
    if (EqualsIgnoreCase(coding, "gzip") || EqualsIgnoreCase(coding, "x-gzip")) {
      gzip = allowed;
    } else if (coding == "*") {
      any = allowed;
    }
  }
  return gzip.value_or(any.value_or(false));
}

// If-None-Match names `etag` (weak comparison, RFC 9110 13.1.2), or is "*".
bool NoneMatch(const HttpRequest& req, std::string_view etag) {
  const std::string* header = req.Header("if-none-match");
  if (header == nullptr) return false;
  std::string_view rest = *header;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view tag = Trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (tag == "*") return true;
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == etag) return true;
  }
  return false;
}

// The ETag of the decompressed bytes: another representation than the gzip one, so
// another strong validator.
std::string IdentityEtag(std::string_view gzip_etag) {
  std::string tag(gzip_etag);
  tag.insert(tag.size() - 1, "-identity");  // before the closing quote
  return tag;
}

std::optional<std::string> Gunzip(std::span<const uint8_t> gz) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return std::nullopt;  // 16: a gzip header
  z.next_in = const_cast<Bytef*>(gz.data());
  z.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  int rc = Z_OK;
  char buf[64 * 1024];
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) return std::nullopt;
  return out;
}

HttpResponse Serve(const HttpRequest& req) {
  if (IsServerPath(req.path)) {
    return Error(404, "NOT_FOUND", "nothing is served at this path");
  }
  if (req.method != "GET" && req.method != "HEAD") {
    HttpResponse out = Error(405, "METHOD_NOT_ALLOWED", "the console page answers GET and HEAD");
    out.headers.push_back({"Allow", "GET, HEAD"});
    return out;
  }
  const Asset* asset = FindAsset(req.path == "/" ? "/index.html" : req.path);
  if (asset == nullptr) {
    // A bundle file of another build (a page loaded before an upgrade): a 404, not the
    // page's HTML where a script or stylesheet is expected.
    if (req.path.starts_with("/assets/")) {
      return Error(404, "NOT_FOUND", "no such file in this build of the console");
    }
    // Any other path is a page of the console, which routes by location.pathname. The
    // request path is only compared, never opened: a traversal lands here too.
    asset = FindAsset("/index.html");
    if (asset == nullptr) return Error(404, "NOT_FOUND", "this build has no console page");
  }

  const bool gzip = AcceptsGzip(req);
  const std::string etag = gzip ? std::string(asset->etag) : IdentityEtag(asset->etag);
  HttpResponse out;
  out.headers.push_back({"ETag", etag});
  out.headers.push_back(
      {"Cache-Control", asset->immutable ? "public, max-age=31536000, immutable" : "no-cache"});
  out.headers.push_back({"Vary", "Accept-Encoding"});
  AddSecurityHeaders(out);
  if (NoneMatch(req, etag)) {
    out.status = 304;
    return out;
  }
  out.content_type = std::string(asset->content_type);
  if (gzip) {
    out.headers.push_back({"Content-Encoding", "gzip"});
    out.body.assign(reinterpret_cast<const char*>(asset->gzip.data()), asset->gzip.size());
  } else {
    std::optional<std::string> plain = Gunzip(asset->gzip);
    if (!plain) return Error(500, "INTERNAL", "a console file does not decompress");
    out.body = std::move(*plain);
  }
  return out;
}

}  // namespace

HttpRoute ConsoleRoute() {
  HttpRoute route;
  route.prefix = "/";
  route.handler = Serve;
  route.needs_login = false;
  return route;
}

}  // namespace sluice::console
