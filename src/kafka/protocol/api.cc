// The Kafka APIs the codec knows, the ones the broker serves, and their names.
#include "kafka/protocol/api.h"

#include <algorithm>
#include <array>

namespace sluice::kafka {
namespace {

constexpr int16_t kNone = 0x7fff;  // no flexible version

// Every API the codec has; flexible_from from Kafka's JSON definitions
// ("flexibleVersions"). `served`: the broker has a handler (docs/design/0002-broker-plan.md,
// 0016-transactions.md); set it in the commit that adds the handler to
// broker/handlers/dispatch.cc.
struct KnownApi {
  ApiVersionRange range;
  bool served;
};

constexpr std::array<KnownApi, 42> kKnown = {{
    {{ApiKey::kProduce, 3, 11, 9}, true},
    {{ApiKey::kFetch, 4, 16, 12}, true},
    {{ApiKey::kListOffsets, 0, 9, 6}, true},
    {{ApiKey::kMetadata, 0, 12, 9}, true},
    {{ApiKey::kOffsetCommit, 0, 9, 8}, true},
    {{ApiKey::kOffsetFetch, 0, 9, 6}, true},
    {{ApiKey::kFindCoordinator, 0, 5, 3}, true},
    {{ApiKey::kJoinGroup, 0, 9, 6}, true},
    {{ApiKey::kHeartbeat, 0, 4, 4}, true},
    {{ApiKey::kLeaveGroup, 0, 5, 4}, true},
    {{ApiKey::kSyncGroup, 0, 5, 4}, true},
    {{ApiKey::kDescribeGroups, 0, 5, 5}, true},
    {{ApiKey::kListGroups, 0, 5, 3}, true},
    {{ApiKey::kSaslHandshake, 0, 1, kNone}, true},
    {{ApiKey::kApiVersions, 0, 4, 3}, true},
    {{ApiKey::kCreateTopics, 0, 7, 5}, true},
    {{ApiKey::kDeleteTopics, 0, 6, 4}, true},
    {{ApiKey::kDeleteRecords, 0, 2, 2}, true},
    {{ApiKey::kInitProducerId, 0, 5, 2}, true},
    {{ApiKey::kOffsetForLeaderEpoch, 0, 4, 4}, true},
    // Transactions (messages/txn.h). v4+ of AddPartitionsToTxn is the broker-to-broker
    // batch (KIP-890); EndTxn v5 is "latestVersionUnstable" in Kafka's JSON (epoch bump per
    // transaction, KIP-890 part 2): the codec has it, nothing advertises it.
    {{ApiKey::kAddPartitionsToTxn, 0, 5, 3}, true},
    {{ApiKey::kAddOffsetsToTxn, 0, 4, 3}, true},
    {{ApiKey::kEndTxn, 0, 4, 3}, true},
    {{ApiKey::kWriteTxnMarkers, 0, 1, 1}, true},
    {{ApiKey::kTxnOffsetCommit, 0, 4, 3}, true},
    // ACLs (messages/acls.h): served; without an authorizer they answer SECURITY_DISABLED.
    {{ApiKey::kDescribeAcls, 0, 3, 2}, true},
    {{ApiKey::kCreateAcls, 0, 3, 2}, true},
    {{ApiKey::kDeleteAcls, 0, 3, 2}, true},
    {{ApiKey::kDescribeConfigs, 0, 4, 4}, true},
    {{ApiKey::kAlterConfigs, 0, 2, 2}, true},
    {{ApiKey::kSaslAuthenticate, 0, 2, 2}, true},
    {{ApiKey::kCreatePartitions, 0, 3, 2}, true},
    {{ApiKey::kDeleteGroups, 0, 2, 2}, true},
    {{ApiKey::kIncrementalAlterConfigs, 0, 1, 1}, true},
    {{ApiKey::kDescribeClientQuotas, 0, 1, 1}, true},  // messages/quotas.h
    {{ApiKey::kAlterClientQuotas, 0, 1, 1}, true},
    {{ApiKey::kDescribeUserScramCredentials, 0, 0, 0}, true},  // messages/users.h
    {{ApiKey::kAlterUserScramCredentials, 0, 0, 0}, true},
    {{ApiKey::kDescribeCluster, 0, 1, 0}, true},
    {{ApiKey::kDescribeProducers, 0, 0, 0}, true},
    {{ApiKey::kDescribeTransactions, 0, 0, 0}, true},
    {{ApiKey::kListTransactions, 0, 1, 0}, true},
}};

template <bool kServedOnly>
constexpr size_t Count() {
  size_t n = 0;
  for (const KnownApi& a : kKnown) n += (!kServedOnly || a.served) ? 1 : 0;
  return n;
}

template <bool kServedOnly>
constexpr std::array<ApiVersionRange, Count<kServedOnly>()> Ranges() {
  std::array<ApiVersionRange, Count<kServedOnly>()> out{};
  size_t i = 0;
  for (const KnownApi& a : kKnown) {
    if (!kServedOnly || a.served) out[i++] = a.range;
  }
  return out;
}

constexpr auto kAll = Ranges<false>();
constexpr auto kServed = Ranges<true>();

constexpr bool InKeyOrder() {
  for (size_t i = 1; i < kKnown.size(); ++i) {
    if (kKnown[i - 1].range.key >= kKnown[i].range.key) return false;
  }
  return true;
}
static_assert(InKeyOrder(), "kKnown must be in ApiKey order");

}  // namespace

std::span<const ApiVersionRange> KnownApis() { return kAll; }
std::span<const ApiVersionRange> SupportedApis() { return kServed; }

bool IsServed(ApiKey key) {
  return std::any_of(kServed.begin(), kServed.end(),
                     [key](const ApiVersionRange& a) { return a.key == key; });
}

ApiVersionRange AdvertisedRange(const ApiVersionRange& supported) {
  ApiVersionRange r = supported;
  if (r.key == ApiKey::kProduce) r.min = 0;
  return r;
}

std::optional<ApiVersionRange> FindApi(int16_t key) {
  auto it = std::find_if(kAll.begin(), kAll.end(), [key](const ApiVersionRange& a) {
    return static_cast<int16_t>(a.key) == key;
  });
  if (it == kAll.end()) return std::nullopt;
  return *it;
}

std::optional<ApiVersionRange> FindApi(ApiKey key) { return FindApi(static_cast<int16_t>(key)); }

std::string_view ApiName(ApiKey key) {
  switch (key) {
    case ApiKey::kProduce:
      return "Produce";
    case ApiKey::kFetch:
      return "Fetch";
    case ApiKey::kListOffsets:
      return "ListOffsets";
    case ApiKey::kMetadata:
      return "Metadata";
    case ApiKey::kOffsetCommit:
      return "OffsetCommit";
    case ApiKey::kOffsetFetch:
      return "OffsetFetch";
    case ApiKey::kFindCoordinator:
      return "FindCoordinator";
    case ApiKey::kJoinGroup:
      return "JoinGroup";
    case ApiKey::kHeartbeat:
      return "Heartbeat";
    case ApiKey::kLeaveGroup:
      return "LeaveGroup";
    case ApiKey::kSyncGroup:
      return "SyncGroup";
    case ApiKey::kDescribeGroups:
      return "DescribeGroups";
    case ApiKey::kListGroups:
      return "ListGroups";
    case ApiKey::kSaslHandshake:
      return "SaslHandshake";
    case ApiKey::kApiVersions:
      return "ApiVersions";
    case ApiKey::kCreateTopics:
      return "CreateTopics";
    case ApiKey::kDeleteTopics:
      return "DeleteTopics";
    case ApiKey::kDeleteRecords:
      return "DeleteRecords";
    case ApiKey::kInitProducerId:
      return "InitProducerId";
    case ApiKey::kOffsetForLeaderEpoch:
      return "OffsetForLeaderEpoch";
    case ApiKey::kAddPartitionsToTxn:
      return "AddPartitionsToTxn";
    case ApiKey::kAddOffsetsToTxn:
      return "AddOffsetsToTxn";
    case ApiKey::kEndTxn:
      return "EndTxn";
    case ApiKey::kWriteTxnMarkers:
      return "WriteTxnMarkers";
    case ApiKey::kTxnOffsetCommit:
      return "TxnOffsetCommit";
    case ApiKey::kDescribeAcls:
      return "DescribeAcls";
    case ApiKey::kCreateAcls:
      return "CreateAcls";
    case ApiKey::kDeleteAcls:
      return "DeleteAcls";
    case ApiKey::kDescribeConfigs:
      return "DescribeConfigs";
    case ApiKey::kAlterConfigs:
      return "AlterConfigs";
    case ApiKey::kSaslAuthenticate:
      return "SaslAuthenticate";
    case ApiKey::kCreatePartitions:
      return "CreatePartitions";
    case ApiKey::kDeleteGroups:
      return "DeleteGroups";
    case ApiKey::kIncrementalAlterConfigs:
      return "IncrementalAlterConfigs";
    case ApiKey::kDescribeClientQuotas:
      return "DescribeClientQuotas";
    case ApiKey::kAlterClientQuotas:
      return "AlterClientQuotas";
    case ApiKey::kDescribeUserScramCredentials:
      return "DescribeUserScramCredentials";
    case ApiKey::kAlterUserScramCredentials:
      return "AlterUserScramCredentials";
    case ApiKey::kDescribeCluster:
      return "DescribeCluster";
    case ApiKey::kDescribeProducers:
      return "DescribeProducers";
    case ApiKey::kDescribeTransactions:
      return "DescribeTransactions";
    case ApiKey::kListTransactions:
      return "ListTransactions";
  }
  return "Unknown";
}

int RequestHeaderVersion(ApiKey key, int16_t version) {
  auto api = FindApi(key);
  return api && IsFlexible(*api, version) ? 2 : 1;
}

int ResponseHeaderVersion(ApiKey key, int16_t version) {
  if (key == ApiKey::kApiVersions) return 0;
  auto api = FindApi(key);
  return api && IsFlexible(*api, version) ? 1 : 0;
}

}  // namespace sluice::kafka
