// The console page over HTTP: the route under "/" that answers GET and HEAD with the
// assets compiled into the binary (assets.h) and index.html for every other page path, so
// that the page can route by location.pathname (docs/design/0026-console.md #5).
#pragma once

#include "base/http_server.h"

namespace sluice::console {

// Prefix "/", no login (the assets reveal nothing; the API under /api/v1 has its own). It
// matches every path, so it must come after every other route in HttpServer::Start's
// list; a path under /api/, /v1/, /metrics or /healthz that still reaches it is a 404.
// Responses carry Content-Encoding: gzip when the client accepts it (else the bytes
// decompressed), an ETag (If-None-Match: 304), Cache-Control (immutable for the hashed
// bundle files, no-cache for index.html) and the page's Content-Security-Policy.
HttpRoute ConsoleRoute();

}  // namespace sluice::console
