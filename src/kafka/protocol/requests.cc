#include "kafka/protocol/requests.h"

#include <fmt/format.h>

namespace sluice::kafka {
namespace {

template <typename T>
Status DecodeBody(Reader& r, int16_t version, std::optional<DecodedRequest>& out,
                  const RequestHeader& header) {
  T body;
  RETURN_IF_ERROR(body.Decode(r, version));
  out.emplace(DecodedRequest{header, AnyRequest(std::move(body))});
  return Status::OK();
}

Status DecodeByKey(ApiKey key, Reader& r, int16_t v, std::optional<DecodedRequest>& out,
                   const RequestHeader& h) {
  switch (key) {
    case ApiKey::kProduce:
      return DecodeBody<ProduceRequest>(r, v, out, h);
    case ApiKey::kFetch:
      return DecodeBody<FetchRequest>(r, v, out, h);
    case ApiKey::kListOffsets:
      return DecodeBody<ListOffsetsRequest>(r, v, out, h);
    case ApiKey::kMetadata:
      return DecodeBody<MetadataRequest>(r, v, out, h);
    case ApiKey::kOffsetCommit:
      return DecodeBody<OffsetCommitRequest>(r, v, out, h);
    case ApiKey::kOffsetFetch:
      return DecodeBody<OffsetFetchRequest>(r, v, out, h);
    case ApiKey::kFindCoordinator:
      return DecodeBody<FindCoordinatorRequest>(r, v, out, h);
    case ApiKey::kJoinGroup:
      return DecodeBody<JoinGroupRequest>(r, v, out, h);
    case ApiKey::kHeartbeat:
      return DecodeBody<HeartbeatRequest>(r, v, out, h);
    case ApiKey::kLeaveGroup:
      return DecodeBody<LeaveGroupRequest>(r, v, out, h);
    case ApiKey::kSyncGroup:
      return DecodeBody<SyncGroupRequest>(r, v, out, h);
    case ApiKey::kDescribeGroups:
      return DecodeBody<DescribeGroupsRequest>(r, v, out, h);
    case ApiKey::kListGroups:
      return DecodeBody<ListGroupsRequest>(r, v, out, h);
    case ApiKey::kSaslHandshake:
      return DecodeBody<SaslHandshakeRequest>(r, v, out, h);
    case ApiKey::kApiVersions:
      return DecodeBody<ApiVersionsRequest>(r, v, out, h);
    case ApiKey::kCreateTopics:
      return DecodeBody<CreateTopicsRequest>(r, v, out, h);
    case ApiKey::kDeleteTopics:
      return DecodeBody<DeleteTopicsRequest>(r, v, out, h);
    case ApiKey::kDeleteRecords:
      return DecodeBody<DeleteRecordsRequest>(r, v, out, h);
    case ApiKey::kInitProducerId:
      return DecodeBody<InitProducerIdRequest>(r, v, out, h);
    case ApiKey::kOffsetForLeaderEpoch:
      return DecodeBody<OffsetForLeaderEpochRequest>(r, v, out, h);
    case ApiKey::kAddPartitionsToTxn:
      return DecodeBody<AddPartitionsToTxnRequest>(r, v, out, h);
    case ApiKey::kAddOffsetsToTxn:
      return DecodeBody<AddOffsetsToTxnRequest>(r, v, out, h);
    case ApiKey::kEndTxn:
      return DecodeBody<EndTxnRequest>(r, v, out, h);
    case ApiKey::kWriteTxnMarkers:
      return DecodeBody<WriteTxnMarkersRequest>(r, v, out, h);
    case ApiKey::kTxnOffsetCommit:
      return DecodeBody<TxnOffsetCommitRequest>(r, v, out, h);
    case ApiKey::kDescribeAcls:
      return DecodeBody<DescribeAclsRequest>(r, v, out, h);
    case ApiKey::kCreateAcls:
      return DecodeBody<CreateAclsRequest>(r, v, out, h);
    case ApiKey::kDeleteAcls:
      return DecodeBody<DeleteAclsRequest>(r, v, out, h);
    case ApiKey::kDescribeConfigs:
      return DecodeBody<DescribeConfigsRequest>(r, v, out, h);
    case ApiKey::kAlterConfigs:
      return DecodeBody<AlterConfigsRequest>(r, v, out, h);
    case ApiKey::kSaslAuthenticate:
      return DecodeBody<SaslAuthenticateRequest>(r, v, out, h);
    case ApiKey::kCreatePartitions:
      return DecodeBody<CreatePartitionsRequest>(r, v, out, h);
    case ApiKey::kDeleteGroups:
      return DecodeBody<DeleteGroupsRequest>(r, v, out, h);
    case ApiKey::kIncrementalAlterConfigs:
      return DecodeBody<IncrementalAlterConfigsRequest>(r, v, out, h);
    case ApiKey::kDescribeClientQuotas:
      return DecodeBody<DescribeClientQuotasRequest>(r, v, out, h);
    case ApiKey::kAlterClientQuotas:
      return DecodeBody<AlterClientQuotasRequest>(r, v, out, h);
    case ApiKey::kDescribeCluster:
      return DecodeBody<DescribeClusterRequest>(r, v, out, h);
    case ApiKey::kDescribeProducers:
      return DecodeBody<DescribeProducersRequest>(r, v, out, h);
    case ApiKey::kDescribeTransactions:
      return DecodeBody<DescribeTransactionsRequest>(r, v, out, h);
    case ApiKey::kListTransactions:
      return DecodeBody<ListTransactionsRequest>(r, v, out, h);
    case ApiKey::kDescribeUserScramCredentials:
      return DecodeBody<DescribeUserScramCredentialsRequest>(r, v, out, h);
    case ApiKey::kAlterUserScramCredentials:
      return DecodeBody<AlterUserScramCredentialsRequest>(r, v, out, h);
  }
  return InternalError("no decoder for API {}", static_cast<int>(key));
}

}  // namespace

DecodeOutcome DecodeRequest(std::span<const uint8_t> frame) {
  DecodeOutcome out;
  Reader r(frame);
  auto header = DecodeRequestHeader(r);
  if (!header.ok()) {
    out.problem = RequestProblem::kMalformed;
    out.status = header.status();
    return out;
  }
  out.header = *header;
  auto api = FindApi(header->api_key);
  if (!api) {
    out.problem = RequestProblem::kUnknownApi;
    out.status = InvalidArgumentError("unknown API key {}", header->api_key);
    return out;
  }
  if (header->api_version < api->min || header->api_version > api->max) {
    out.problem = RequestProblem::kUnsupportedVersion;
    out.status = InvalidArgumentError("{} v{} is not supported (v{} to v{} are)", ApiName(api->key),
                                      header->api_version, api->min, api->max);
    return out;
  }
  Status st = DecodeByKey(api->key, r, header->api_version, out.request, *header);
  if (!st.ok()) {
    out.problem = RequestProblem::kMalformed;
    out.status =
        st.WithContext(fmt::format("{} v{} request", ApiName(api->key), header->api_version));
    out.request.reset();
  }
  return out;
}

}  // namespace sluice::kafka
