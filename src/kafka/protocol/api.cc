#include "kafka/protocol/api.h"

#include <algorithm>
#include <array>

namespace sluice::kafka {
namespace {

constexpr int16_t kNone = 0x7fff;  // no flexible version

// The versions sluice serves (docs/design/0002-broker-plan.md); flexible_from from Kafka's JSON
// definitions ("flexibleVersions").
constexpr std::array<ApiVersionRange, 27> kApis = {{
    {ApiKey::kProduce, 3, 11, 9},         {ApiKey::kFetch, 4, 16, 12},
    {ApiKey::kListOffsets, 0, 9, 6},      {ApiKey::kMetadata, 0, 12, 9},
    {ApiKey::kOffsetCommit, 0, 9, 8},     {ApiKey::kOffsetFetch, 0, 9, 6},
    {ApiKey::kFindCoordinator, 0, 5, 3},  {ApiKey::kJoinGroup, 0, 9, 6},
    {ApiKey::kHeartbeat, 0, 4, 4},        {ApiKey::kLeaveGroup, 0, 5, 4},
    {ApiKey::kSyncGroup, 0, 5, 4},        {ApiKey::kDescribeGroups, 0, 5, 5},
    {ApiKey::kListGroups, 0, 5, 3},       {ApiKey::kSaslHandshake, 0, 1, kNone},
    {ApiKey::kApiVersions, 0, 4, 3},      {ApiKey::kCreateTopics, 0, 7, 5},
    {ApiKey::kDeleteTopics, 0, 6, 4},     {ApiKey::kDeleteRecords, 0, 2, 2},
    {ApiKey::kInitProducerId, 0, 5, 2},   {ApiKey::kOffsetForLeaderEpoch, 0, 4, 4},
    {ApiKey::kDescribeConfigs, 0, 4, 4},  {ApiKey::kAlterConfigs, 0, 2, 2},
    {ApiKey::kSaslAuthenticate, 0, 2, 2}, {ApiKey::kCreatePartitions, 0, 3, 2},
    {ApiKey::kDeleteGroups, 0, 2, 2},     {ApiKey::kIncrementalAlterConfigs, 0, 1, 1},
    {ApiKey::kDescribeCluster, 0, 1, 0},
}};

}  // namespace

std::span<const ApiVersionRange> SupportedApis() { return kApis; }

ApiVersionRange AdvertisedRange(const ApiVersionRange& supported) {
  ApiVersionRange r = supported;
  if (r.key == ApiKey::kProduce) r.min = 0;
  return r;
}

std::optional<ApiVersionRange> FindApi(int16_t key) {
  auto it = std::find_if(kApis.begin(), kApis.end(), [key](const ApiVersionRange& a) {
    return static_cast<int16_t>(a.key) == key;
  });
  if (it == kApis.end()) return std::nullopt;
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
    case ApiKey::kDescribeCluster:
      return "DescribeCluster";
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
