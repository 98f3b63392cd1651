// Fuzz target for the in-process batch decoder (kafka/local/local_batches.h): fetched bytes
// of a partition's log decoded into consumer records, read_committed with an aborted
// transaction list, with a small decompression limit so that no input can make it allocate
// much.
// Input: a flags byte, an aborted-transaction count byte, that many (producer id, first
// offset) byte pairs, a fetch offset byte; the rest is the fetched bytes.
//   flags bit 0: read_committed (else read_uncommitted; both are decoded and compared)
//   flags bit 1: skip the CRC check
//   flags bit 2: seal first: fix the CRC of every batch whose length fits, so that the
//                decoder gets past the CRC into the records
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

#include "base/crc32c.h"
#include "kafka/local/local_batches.h"
#include "storage/batch_header.h"

using namespace sluice;
using namespace sluice::kafka::local;
using sluice::kafka::client::Message;

namespace {

constexpr size_t kMaxDecompressed = 1 << 20;
constexpr std::string_view kTopic = "fuzz";

void Check(bool cond) {
  if (!cond) std::abort();
}

// Fixes the CRC of each batch in turn, as far as the length fields lead.
void Seal(std::vector<uint8_t>* bytes) {
  size_t pos = 0;
  while (bytes->size() - pos >= storage::kBatchHeaderSize) {
    uint8_t* p = bytes->data() + pos;
    const uint32_t length = storage::LoadBE32(p + storage::kBatchLengthOffset);
    if (length < storage::kBatchHeaderSize - storage::kBatchLogOverhead ||
        length > bytes->size() - pos - storage::kBatchLogOverhead) {
      return;
    }
    const size_t total = storage::kBatchLogOverhead + length;
    storage::StoreBE32(p + storage::kCrcOffset, crc32c::Value(p + storage::kAttributesOffset,
                                                              total - storage::kAttributesOffset));
    pos += total;
  }
}

// Checks what every decode promises, and reads every byte a view points at (so ASan sees
// any view that strays outside its buffer or outlives it).
void CheckResult(const FetchedBytes& fetched, const DecodeResult& r,
                 std::span<const Message> messages) {
  Check(r.bytes_consumed <= fetched.bytes.size());
  Check(r.batches_consumed >= 0);
  Check(r.next_offset >= fetched.fetch_offset);
  Check(r.batches_consumed > 0 || (r.bytes_consumed == 0 && r.next_offset == fetched.fetch_offset));
  int64_t previous = fetched.fetch_offset - 1;
  volatile uint8_t sink = 0;
  for (const Message& m : messages) {
    Check(m.topic.data() == kTopic.data() && m.partition == fetched.partition);
    Check(m.offset > previous && m.offset < r.next_offset);
    previous = m.offset;
    for (char c : m.key) sink = sink ^ static_cast<uint8_t>(c);
    for (char c : m.value) sink = sink ^ static_cast<uint8_t>(c);
  }
}

void Touch(std::span<const Message> messages) {
  volatile uint8_t sink = 0;
  for (const Message& m : messages) {
    for (char c : m.value) sink = sink ^ static_cast<uint8_t>(c);
  }
}

bool SameMessages(std::span<const Message> a, std::span<const Message> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Message& x, const Message& y) {
    return x.offset == y.offset && x.timestamp_ms == y.timestamp_ms && x.key == y.key &&
           x.value == y.value && (x.key.data() == nullptr) == (y.key.data() == nullptr) &&
           (x.value.data() == nullptr) == (y.value.data() == nullptr);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t flags = data[0];
  const size_t count = data[1] % 5;
  if (size < 3 + 2 * count) return 0;
  std::vector<AbortedTransaction> aborted;
  for (size_t i = 0; i < count; ++i) {
    aborted.push_back({data[2 + 2 * i] % 4, data[3 + 2 * i]});
  }
  const size_t at = 2 + 2 * count;
  const int64_t fetch_offset = data[at];
  std::vector<uint8_t> bytes(data + at + 1, data + size);
  if (flags & 4) Seal(&bytes);

  BatchDecoder decoder(
      DecoderOptions{.check_crcs = (flags & 2) == 0, .max_decompressed_bytes = kMaxDecompressed});
  FetchedBytes fetched;
  fetched.topic = kTopic;
  fetched.partition = 1;
  fetched.bytes = bytes;
  fetched.fetch_offset = fetch_offset;
  fetched.aborted = aborted;

  fetched.read_committed = (flags & 1) != 0;
  std::vector<Message> first;
  DecodeResult r1 = decoder.Decode(fetched, &first);
  CheckResult(fetched, r1, first);

  fetched.read_committed = !fetched.read_committed;
  std::vector<Message> second;
  DecodeResult r2 = decoder.Decode(fetched, &second);
  CheckResult(fetched, r2, second);
  Check(r2.generation > r1.generation);

  // Read committed keeps a subset of what read uncommitted sees, and the same batches.
  if (r1.status.ok() && r2.status.ok()) {
    const auto& committed = (flags & 1) ? first : second;
    const auto& uncommitted = (flags & 1) ? second : first;
    Check(r1.next_offset == r2.next_offset && r1.bytes_consumed == r2.bytes_consumed);
    Check(std::includes(uncommitted.begin(), uncommitted.end(), committed.begin(), committed.end(),
                        [](const Message& a, const Message& b) { return a.offset < b.offset; }));
  }

  // The bytes consumed decode alone to the same records, with nothing left over (the first
  // decode's views still valid: nothing is released yet).
  fetched.read_committed = (flags & 1) != 0;
  fetched.bytes = std::span<const uint8_t>(bytes).first(r1.bytes_consumed);
  std::vector<Message> again;
  DecodeResult r3 = decoder.Decode(fetched, &again);
  Check(r3.status.ok() && r3.bytes_consumed == r1.bytes_consumed);
  Check(r3.next_offset == r1.next_offset && SameMessages(first, again));

  // Releasing the first decode leaves the later ones' views valid.
  decoder.ReleaseUpTo(r1.generation);
  Touch(second);
  Touch(again);
  decoder.ReleaseAll();
  Check(decoder.held_batches() == 0 && decoder.held_bytes() == 0);
  return 0;
}
