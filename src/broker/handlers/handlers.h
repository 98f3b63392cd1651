// The request handlers, one file per API family, and the table that dispatches a decoded
// request to its handler by API key (handlers/dispatch.cc). Every handler runs on its
// connection's shard and answers exactly once (Reply, or FinishRequest for acks=0), now
// or later from a posted task.
//
//   produce.cc        Produce
//   fetch.cc          Fetch and its waits (long polls)
//   list_offsets.cc   ListOffsets, OffsetForLeaderEpoch
//   cluster.cc        ApiVersions, Metadata (with auto-creation), DescribeCluster
//   admin_topics.cc   CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
//                     InitProducerId (on the controller's thread)
//   admin_configs.cc  DescribeConfigs, AlterConfigs, IncrementalAlterConfigs
//   groups.cc         FindCoordinator and the hand-off to the group coordinator
//                     (TxnOffsetCommit included)
//   txn.cc            InitProducerId with a transactional id, AddPartitionsToTxn,
//                     AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions:
//                     the hand-off to the transaction coordinator; WriteTxnMarkers refused
//   sasl_gate.cc      SaslHandshake, SaslAuthenticate, the raw-token exchange and the
//                     gate that admits nothing else before authentication
//   txn_producers.cc  DescribeProducers
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "broker/handlers/context.h"
#include "kafka/protocol/requests.h"

namespace sluice::broker::handlers {

void HandleProduce(Context& ctx, const Call& call, const kafka::ProduceRequest& req);
void HandleFetch(Context& ctx, const Call& call, const kafka::FetchRequest& req);
void HandleListOffsets(Context& ctx, const Call& call, const kafka::ListOffsetsRequest& req);
void HandleOffsetForLeaderEpoch(Context& ctx, const Call& call,
                                const kafka::OffsetForLeaderEpochRequest& req);
void HandleDescribeProducers(Context& ctx, const Call& call,
                             const kafka::DescribeProducersRequest& req);

void HandleApiVersions(Context& ctx, const Call& call, const kafka::ApiVersionsRequest& req);
void HandleMetadata(Context& ctx, const Call& call, const kafka::MetadataRequest& req);
void HandleDescribeAcls(Context& ctx, const Call& call, const kafka::DescribeAclsRequest& req);
void HandleDescribeClientQuotas(Context& ctx, const Call& call,
                                const kafka::DescribeClientQuotasRequest& req);
void HandleAlterClientQuotas(Context& ctx, const Call& call,
                             const kafka::AlterClientQuotasRequest& req);
void HandleCreateAcls(Context& ctx, const Call& call, const kafka::CreateAclsRequest& req);
void HandleDeleteAcls(Context& ctx, const Call& call, const kafka::DeleteAclsRequest& req);
void HandleDescribeUserScramCredentials(Context& ctx, const Call& call,
                                        const kafka::DescribeUserScramCredentialsRequest& req);
void HandleAlterUserScramCredentials(Context& ctx, const Call& call,
                                     const kafka::AlterUserScramCredentialsRequest& req);
void HandleDescribeCluster(Context& ctx, const Call& call,
                           const kafka::DescribeClusterRequest& req);

void HandleCreateTopics(Context& ctx, const Call& call, const kafka::CreateTopicsRequest& req);
void HandleDeleteTopics(Context& ctx, const Call& call, const kafka::DeleteTopicsRequest& req);
void HandleCreatePartitions(Context& ctx, const Call& call,
                            const kafka::CreatePartitionsRequest& req);
void HandleDeleteRecords(Context& ctx, const Call& call, const kafka::DeleteRecordsRequest& req);
void HandleInitProducerId(Context& ctx, const Call& call, const kafka::InitProducerIdRequest& req);

void HandleDescribeConfigs(Context& ctx, const Call& call,
                           const kafka::DescribeConfigsRequest& req);
void HandleAlterConfigs(Context& ctx, const Call& call, const kafka::AlterConfigsRequest& req);
void HandleIncrementalAlterConfigs(Context& ctx, const Call& call,
                                   const kafka::IncrementalAlterConfigsRequest& req);

void HandleFindCoordinator(Context& ctx, const Call& call,
                           const kafka::FindCoordinatorRequest& req);
// As Kafka creates a coordinator's internal topic on the first FindCoordinator: asks the
// controller to create `topic` (__consumer_offsets, __transaction_state) when it is
// missing (another broker's controller thread refuses; the controller creates them by
// itself once enough brokers are registered). Any thread.
void CreateInternalTopicSoon(Context& ctx, const std::string& topic);
void HandleJoinGroup(Context& ctx, const Call& call, const kafka::JoinGroupRequest& req);
void HandleSyncGroup(Context& ctx, const Call& call, const kafka::SyncGroupRequest& req);
void HandleHeartbeat(Context& ctx, const Call& call, const kafka::HeartbeatRequest& req);
void HandleLeaveGroup(Context& ctx, const Call& call, const kafka::LeaveGroupRequest& req);
void HandleOffsetCommit(Context& ctx, const Call& call, const kafka::OffsetCommitRequest& req);
void HandleOffsetFetch(Context& ctx, const Call& call, const kafka::OffsetFetchRequest& req);
void HandleListGroups(Context& ctx, const Call& call, const kafka::ListGroupsRequest& req);
void HandleDescribeGroups(Context& ctx, const Call& call, const kafka::DescribeGroupsRequest& req);
void HandleDeleteGroups(Context& ctx, const Call& call, const kafka::DeleteGroupsRequest& req);
void HandleTxnOffsetCommit(Context& ctx, const Call& call,
                           const kafka::TxnOffsetCommitRequest& req);

// Transactions (txn.cc). InitProducerId with a transactional id comes here from
// HandleInitProducerId.
void HandleInitProducerIdTxn(Context& ctx, const Call& call,
                             const kafka::InitProducerIdRequest& req);
void HandleAddPartitionsToTxn(Context& ctx, const Call& call,
                              const kafka::AddPartitionsToTxnRequest& req);
void HandleAddOffsetsToTxn(Context& ctx, const Call& call,
                           const kafka::AddOffsetsToTxnRequest& req);
void HandleEndTxn(Context& ctx, const Call& call, const kafka::EndTxnRequest& req);
void HandleWriteTxnMarkers(Context& ctx, const Call& call,
                           const kafka::WriteTxnMarkersRequest& req);
void HandleDescribeTransactions(Context& ctx, const Call& call,
                                const kafka::DescribeTransactionsRequest& req);
void HandleListTransactions(Context& ctx, const Call& call,
                            const kafka::ListTransactionsRequest& req);

void HandleSaslHandshake(Context& ctx, const Call& call, const kafka::SaslHandshakeRequest& req);
void HandleSaslAuthenticate(Context& ctx, const Call& call,
                            const kafka::SaslAuthenticateRequest& req);

// The SASL gate (when SASL is on), before and after a frame is decoded. TakesRawToken:
// the connection is in the unframed exchange after SaslHandshake v0, and the frame (a
// bare token) was consumed. SaslAdmits: whether `key` may be served on the connection
// now; when not, the connection was closed (as Kafka does).
bool SaslTakesRawToken(Context& ctx, const std::shared_ptr<Connection>& conn,
                       std::span<const uint8_t> frame);
bool SaslAdmits(Context& ctx, const std::shared_ptr<Connection>& conn, kafka::ApiKey key);

// The dispatch table: the handler of a decoded request, by API key; null for a key with
// none (the decoder knows no other).
using Handler = void (*)(Context& ctx, const Call& call, const kafka::AnyRequest& body);
Handler HandlerFor(int16_t api_key);

}  // namespace sluice::broker::handlers
