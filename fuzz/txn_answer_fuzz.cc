// Fuzz target for the answers a cluster broker reads from another one about transactions
// (src/broker/txn_cluster.cc, inter_broker_sender.h): the first byte picks the answer,
// the rest is the frame after its size (response header, then body), decoded as the
// sender does (header, correlation id, body) and mapped to per-partition errors as
// ClusterTxnParticipants and ClusterTxnVerifier map them:
//   0, 1: WriteTxnMarkers v1, v0
//   2, 3: AddPartitionsToTxn v4, v5
// Whatever the bytes: no crash, no read outside the input, one error per partition asked.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "broker/txn_cluster.h"
#include "kafka/protocol/header.h"
#include "kafka/protocol/messages/txn.h"

using namespace sluice;

namespace {

void Check(bool cond) {
  if (!cond) std::abort();
}

const std::vector<broker::TopicPartition> kAsked = {{"t", 0}, {"t", 1}, {"u", 0}};

template <typename Resp>
void DecodeAndMap(std::span<const uint8_t> frame, kafka::ApiKey api, int16_t version) {
  kafka::Reader r(frame);
  Result<int32_t> id = kafka::DecodeResponseHeader(r, api, version);
  if (!id.ok()) return;
  Resp resp;
  if (!resp.Decode(r, version).ok()) return;
  if constexpr (std::is_same_v<Resp, kafka::WriteTxnMarkersResponse>) {
    for (const auto& m : resp.markers) {
      Check(broker::ErrorsFor(kAsked, m.topics, kafka::ErrorCode::kUnknownServerError).size() ==
            kAsked.size());
    }
  } else {
    for (const auto& t : resp.results_by_transaction) {
      Check(broker::ErrorsFor(kAsked, t.topic_results, kafka::ErrorCode::kUnknownServerError)
                .size() == kAsked.size());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::span<const uint8_t> rest(data + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      DecodeAndMap<kafka::WriteTxnMarkersResponse>(rest, kafka::ApiKey::kWriteTxnMarkers, 1);
      break;
    case 1:
      DecodeAndMap<kafka::WriteTxnMarkersResponse>(rest, kafka::ApiKey::kWriteTxnMarkers, 0);
      break;
    case 2:
      DecodeAndMap<kafka::AddPartitionsToTxnResponse>(rest, kafka::ApiKey::kAddPartitionsToTxn, 4);
      break;
    default:
      DecodeAndMap<kafka::AddPartitionsToTxnResponse>(rest, kafka::ApiKey::kAddPartitionsToTxn, 5);
      break;
  }
  return 0;
}
