// The console page's files (docs/design/0026-console.md #5), compiled into the binary at
// build time: index.html and the hashed bundle files esbuild made of src/console/web,
// each stored gzipped (gzip -9n) and named by the path the browser asks for.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace sluice::console {

struct Asset {
  std::string_view path;          // "/index.html", "/assets/app-<hash>.js"
  std::string_view content_type;  // "text/html; charset=utf-8"
  std::string_view etag;          // quoted: "\"<hash of the gzip bytes>\""
  std::span<const uint8_t> gzip;  // the file, gzipped
  bool immutable;                 // a hashed name: its content never changes
};

// The asset at `path` (as in the URL: "/index.html"), or null. The answer lives as long as
// the process.
const Asset* FindAsset(std::string_view path);

// Every asset, in the order of their paths.
std::span<const Asset> AllAssets();

}  // namespace sluice::console
