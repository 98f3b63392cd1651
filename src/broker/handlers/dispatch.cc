// The dispatch table: API key -> handler. See handlers.h.
#include <algorithm>
#include <array>
#include <variant>

#include "base/status.h"
#include "broker/handlers/handlers.h"

namespace sluice::broker::handlers {
namespace {

using kafka::ApiKey;

// A handler of one request type behind the table's common signature. The decoder puts
// the body of the header's API key in the variant, so the get never misses.
template <typename Req, void (*Fn)(Context&, const Call&, const Req&)>
void Typed(Context& ctx, const Call& call, const kafka::AnyRequest& body) {
  const Req* req = std::get_if<Req>(&body);
  SLUICE_ASSERT(req != nullptr);
  Fn(ctx, call, *req);
}

struct Entry {
  ApiKey key;
  Handler handler;
};

constexpr Entry kEntries[] = {
    {ApiKey::kProduce, Typed<kafka::ProduceRequest, HandleProduce>},
    {ApiKey::kFetch, Typed<kafka::FetchRequest, HandleFetch>},
    {ApiKey::kListOffsets, Typed<kafka::ListOffsetsRequest, HandleListOffsets>},
    {ApiKey::kMetadata, Typed<kafka::MetadataRequest, HandleMetadata>},
    {ApiKey::kOffsetCommit, Typed<kafka::OffsetCommitRequest, HandleOffsetCommit>},
    {ApiKey::kOffsetFetch, Typed<kafka::OffsetFetchRequest, HandleOffsetFetch>},
    {ApiKey::kFindCoordinator, Typed<kafka::FindCoordinatorRequest, HandleFindCoordinator>},
    {ApiKey::kJoinGroup, Typed<kafka::JoinGroupRequest, HandleJoinGroup>},
    {ApiKey::kHeartbeat, Typed<kafka::HeartbeatRequest, HandleHeartbeat>},
    {ApiKey::kLeaveGroup, Typed<kafka::LeaveGroupRequest, HandleLeaveGroup>},
    {ApiKey::kSyncGroup, Typed<kafka::SyncGroupRequest, HandleSyncGroup>},
    {ApiKey::kDescribeGroups, Typed<kafka::DescribeGroupsRequest, HandleDescribeGroups>},
    {ApiKey::kListGroups, Typed<kafka::ListGroupsRequest, HandleListGroups>},
    {ApiKey::kSaslHandshake, Typed<kafka::SaslHandshakeRequest, HandleSaslHandshake>},
    {ApiKey::kApiVersions, Typed<kafka::ApiVersionsRequest, HandleApiVersions>},
    {ApiKey::kCreateTopics, Typed<kafka::CreateTopicsRequest, HandleCreateTopics>},
    {ApiKey::kDeleteTopics, Typed<kafka::DeleteTopicsRequest, HandleDeleteTopics>},
    {ApiKey::kDeleteRecords, Typed<kafka::DeleteRecordsRequest, HandleDeleteRecords>},
    {ApiKey::kInitProducerId, Typed<kafka::InitProducerIdRequest, HandleInitProducerId>},
    {ApiKey::kOffsetForLeaderEpoch,
     Typed<kafka::OffsetForLeaderEpochRequest, HandleOffsetForLeaderEpoch>},
    {ApiKey::kDescribeConfigs, Typed<kafka::DescribeConfigsRequest, HandleDescribeConfigs>},
    {ApiKey::kAlterConfigs, Typed<kafka::AlterConfigsRequest, HandleAlterConfigs>},
    {ApiKey::kSaslAuthenticate, Typed<kafka::SaslAuthenticateRequest, HandleSaslAuthenticate>},
    {ApiKey::kCreatePartitions, Typed<kafka::CreatePartitionsRequest, HandleCreatePartitions>},
    {ApiKey::kDeleteGroups, Typed<kafka::DeleteGroupsRequest, HandleDeleteGroups>},
    {ApiKey::kTxnOffsetCommit, Typed<kafka::TxnOffsetCommitRequest, HandleTxnOffsetCommit>},
    {ApiKey::kIncrementalAlterConfigs,
     Typed<kafka::IncrementalAlterConfigsRequest, HandleIncrementalAlterConfigs>},
    {ApiKey::kDescribeCluster, Typed<kafka::DescribeClusterRequest, HandleDescribeCluster>},
    {ApiKey::kAddPartitionsToTxn,
     Typed<kafka::AddPartitionsToTxnRequest, HandleAddPartitionsToTxn>},
    {ApiKey::kAddOffsetsToTxn, Typed<kafka::AddOffsetsToTxnRequest, HandleAddOffsetsToTxn>},
    {ApiKey::kEndTxn, Typed<kafka::EndTxnRequest, HandleEndTxn>},
    {ApiKey::kWriteTxnMarkers, Typed<kafka::WriteTxnMarkersRequest, HandleWriteTxnMarkers>},
    {ApiKey::kDescribeTransactions,
     Typed<kafka::DescribeTransactionsRequest, HandleDescribeTransactions>},
    {ApiKey::kListTransactions, Typed<kafka::ListTransactionsRequest, HandleListTransactions>},
    {ApiKey::kDescribeProducers, Typed<kafka::DescribeProducersRequest, HandleDescribeProducers>},
    {ApiKey::kDescribeAcls, Typed<kafka::DescribeAclsRequest, HandleDescribeAcls>},
    {ApiKey::kDescribeClientQuotas,
     Typed<kafka::DescribeClientQuotasRequest, HandleDescribeClientQuotas>},
    {ApiKey::kAlterClientQuotas, Typed<kafka::AlterClientQuotasRequest, HandleAlterClientQuotas>},
    {ApiKey::kCreateAcls, Typed<kafka::CreateAclsRequest, HandleCreateAcls>},
    {ApiKey::kDeleteAcls, Typed<kafka::DeleteAclsRequest, HandleDeleteAcls>},
    {ApiKey::kDescribeUserScramCredentials,
     Typed<kafka::DescribeUserScramCredentialsRequest, HandleDescribeUserScramCredentials>},
    {ApiKey::kAlterUserScramCredentials,
     Typed<kafka::AlterUserScramCredentialsRequest, HandleAlterUserScramCredentials>},
};

// One past the largest key in the table.
constexpr size_t TableSize() {
  size_t n = 0;
  for (const Entry& e : kEntries) n = std::max(n, static_cast<size_t>(e.key) + 1);
  return n;
}
constexpr size_t kTableSize = TableSize();

constexpr std::array<Handler, kTableSize> MakeTable() {
  std::array<Handler, kTableSize> table{};
  for (const Entry& e : kEntries) table[static_cast<size_t>(e.key)] = e.handler;
  return table;
}

constexpr std::array<Handler, kTableSize> kTable = MakeTable();

}  // namespace

Handler HandlerFor(int16_t api_key) {
  if (api_key < 0 || static_cast<size_t>(api_key) >= kTable.size()) return nullptr;
  return kTable[static_cast<size_t>(api_key)];
}

}  // namespace sluice::broker::handlers
