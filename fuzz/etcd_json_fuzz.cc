// Fuzz target for the parsers of etcd's JSON gateway (src/cluster/etcd_json.h): the first
// byte picks the parser, the rest is the response body. Whatever the bytes, a parser
// returns a value or an error (no crash, no hang). The watch stream's splitter must cut
// the same objects whether the bytes come at once or in two pieces (cut where the second
// byte says).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/etcd_json.h"

using namespace sluice::cluster;

namespace {

void Split(std::string_view body, size_t cut, std::vector<std::string>* out, bool* ok) {
  JsonObjectSplitter splitter(1 << 16);
  *ok = splitter.Feed(body.substr(0, cut), out).ok() && splitter.Feed(body.substr(cut), out).ok();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t selector = data[0];
  const size_t cut_byte = data[1];
  std::string_view body(reinterpret_cast<const char*>(data) + 2, size - 2);
  switch (selector % 10) {
    case 0:
      (void)ParseRangeResponse(body);
      break;
    case 1:
      (void)ParsePutResponse(body);
      break;
    case 2:
      (void)ParseDeleteResponse(body);
      break;
    case 3:
      (void)ParseTxnResponse(body);
      break;
    case 4:
      (void)ParseLeaseGrantResponse(body);
      break;
    case 5:
      (void)ParseLeaseKeepAliveResponse(body);
      break;
    case 6:
      (void)ParseLeaseRevokeResponse(body);
      break;
    case 7:
      (void)ParseStatusResponse(body);
      break;
    case 8:
      (void)ParseHeaderResponse(body);
      break;
    default: {
      std::vector<std::string> whole, pieces;
      bool whole_ok = false, pieces_ok = false;
      Split(body, body.size(), &whole, &whole_ok);
      Split(body, cut_byte % (body.size() + 1), &pieces, &pieces_ok);
      if (whole_ok != pieces_ok || (whole_ok && whole != pieces)) std::abort();
      for (const std::string& m : whole) (void)ParseWatchResponse(m);
      break;
    }
  }
  return 0;
}
