// Decoding a whole request frame: header, then the body of whichever API it names.
// The broker's dispatcher and the request fuzz target both start here.
#pragma once

#include <span>
#include <variant>

#include "base/status.h"
#include "kafka/protocol/header.h"
#include "kafka/protocol/messages/acls.h"
#include "kafka/protocol/messages/admin.h"
#include "kafka/protocol/messages/core.h"
#include "kafka/protocol/messages/groups.h"
#include "kafka/protocol/messages/quotas.h"
#include "kafka/protocol/messages/txn.h"
#include "kafka/protocol/messages/users.h"

namespace sluice::kafka {

using AnyRequest =
    std::variant<ProduceRequest, FetchRequest, ListOffsetsRequest, MetadataRequest,
                 OffsetCommitRequest, OffsetFetchRequest, FindCoordinatorRequest, JoinGroupRequest,
                 HeartbeatRequest, LeaveGroupRequest, SyncGroupRequest, DescribeGroupsRequest,
                 ListGroupsRequest, SaslHandshakeRequest, ApiVersionsRequest, CreateTopicsRequest,
                 DeleteTopicsRequest, DeleteRecordsRequest, InitProducerIdRequest,
                 OffsetForLeaderEpochRequest, AddPartitionsToTxnRequest, AddOffsetsToTxnRequest,
                 EndTxnRequest, WriteTxnMarkersRequest, TxnOffsetCommitRequest,
                 DescribeConfigsRequest, AlterConfigsRequest, SaslAuthenticateRequest,
                 CreatePartitionsRequest, DeleteGroupsRequest, IncrementalAlterConfigsRequest,
                 DescribeClusterRequest, DescribeProducersRequest, DescribeTransactionsRequest,
                 ListTransactionsRequest, DescribeUserScramCredentialsRequest,
                 AlterUserScramCredentialsRequest, DescribeAclsRequest, CreateAclsRequest,
                 DeleteAclsRequest, DescribeClientQuotasRequest, AlterClientQuotasRequest>;

struct DecodedRequest {
  RequestHeader header;
  AnyRequest body;
};

// What a broker does with a frame it cannot serve, as Kafka does.
enum class RequestProblem {
  kNone,
  kMalformed,           // close the connection
  kUnsupportedVersion,  // ApiVersions: answer with the v0 fallback; any other API: close
  kUnknownApi,          // close the connection
};

struct DecodeOutcome {
  RequestProblem problem = RequestProblem::kNone;
  Status status;                          // what was wrong, for the log
  std::optional<DecodedRequest> request;  // set when problem == kNone
  std::optional<RequestHeader> header;    // set whenever the header itself decoded
};

// `frame` is one request without its 4-byte size prefix. Every API in KnownApis() is
// decoded, also one the broker does not serve yet (the broker closes the connection when
// its dispatch table has no handler, as for an unknown API). Views in the result (produce
// records) point into `frame`, which must outlive them.
DecodeOutcome DecodeRequest(std::span<const uint8_t> frame);

}  // namespace sluice::kafka
