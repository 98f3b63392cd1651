// Fuzz target for what a follower reads from its leader (src/broker/replica_fetcher.cc):
// a Fetch response body and the record batches in it. The first byte picks the mode:
//   0, 1: the rest is a Fetch response body (v15, v12) decoded by the codec, and each
//         partition's records are split into batches and each batch validated, as the
//         fetcher does before it appends anything
//   2:    the rest is a records section: split and validated
// Whatever the bytes: no crash, no read outside the input, every batch split off lies
// inside the records and is at least a batch header long.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "broker/replica_fetcher.h"
#include "kafka/protocol/requests.h"
#include "storage/batch_header.h"

using namespace sluice;

namespace {

void Check(bool cond) {
  if (!cond) std::abort();
}

void SplitAndValidate(std::span<const uint8_t> records) {
  std::vector<std::span<const uint8_t>> batches;
  Status st = broker::replica::SplitFetchedBatches(records, &batches);
  size_t total = 0;
  for (std::span<const uint8_t> b : batches) {
    Check(b.size() >= storage::kBatchHeaderSize);
    Check(b.data() >= records.data() && b.data() + b.size() <= records.data() + records.size());
    total += b.size();
    (void)storage::ValidateBatch(b, 1 << 20).ok();
  }
  Check(total <= records.size());
  (void)st;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::span<const uint8_t> rest(data + 1, size - 1);
  const int mode = data[0] % 3;
  if (mode == 2) {
    SplitAndValidate(rest);
    return 0;
  }
  kafka::FetchResponse resp;
  kafka::Reader r(rest);
  if (!resp.Decode(r, mode == 0 ? 15 : 12).ok()) return 0;
  for (const auto& t : resp.responses) {
    for (const auto& p : t.partitions) {
      if (p.records.inline_bytes.has_value()) SplitAndValidate(*p.records.inline_bytes);
    }
  }
  return 0;
}
