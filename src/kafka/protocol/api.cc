#include "kafka/protocol/api.h"

#include <algorithm>
#include <array>

namespace sluice::kafka {
namespace {

constexpr int16_t kNone = 0x7fff;  // no flexible version

// The versions sluice serves (docs/design/0002-broker-plan.md); flexible_from from Kafka's JSON
// definitions ("flexibleVersions").
constexpr std::array<ApiVersionRange, 27> kApis = {{
    {ApiKey::kProduce, 3, 11, 9},
    {ApiKey::kFetch, 4, 16, 12},
    {ApiKey::kListOffsets, 0, 9, 6},
    {ApiKey::kMetadata, 0, 12, 9},
    {ApiKey::kOffsetCommit, 0, 9, 8},
    {ApiKey::kOffsetFetch, 0, 9, 6},
    {ApiKey::kFindCoordinator, 0, 5, 3},
    {ApiKey::kJoinGroup, 0, 9, 6},
    {ApiKey::kHeartbeat, 0, 4, 4},
    {ApiKey::kLeaveGroup, 0, 5, 4},
    {ApiKey::kSyncGroup, 0, 5, 4},
    {ApiKey::kDescribeGroups, 0, 5, 5},
    {ApiKey::kListGroups, 0, 5, 3},
    {ApiKey::kSaslHandshake, 0, 1, kNone},
    {ApiKey::kApiVersions, 0, 4, 3},
    {ApiKey::kCreateTopics, 0, 7, 5},
    {ApiKey::kDeleteTopics, 0, 6, 4},
    {ApiKey::kDeleteRecords, 0, 2, 2},
    {ApiKey::kInitProducerId, 0, 5, 2},
    {ApiKey::kOffsetForLeaderEpoch, 0, 4, 4},
    {ApiKey::kDescribeConfigs, 0, 4, 4},
    {ApiKey::kAlterConfigs, 0, 2, 2},
    {ApiKey::kSaslAuthenticate, 0, 2, 2},
    {ApiKey::kCreatePartitions, 0, 3, 2},
    {ApiKey::kDeleteGroups, 0, 2, 2},
    {ApiKey::kIncrementalAlterConfigs, 0, 1, 1},
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
  auto it = std::find_if(kApis.begin(), kApis.end(),
                         [key](const ApiVersionRange& a) { return static_cast<int16_t>(a.key) == key; });
  if (it == kApis.end()) return std::nullopt;
  return *it;
}

std::optional<ApiVersionRange> FindApi(ApiKey key) { return FindApi(static_cast<int16_t>(key)); }

std::string_view ApiName(ApiKey key) {
  switch (key) {
    case ApiKey::kProduce: return "Produce";
    case ApiKey::kFetch: return "Fetch";
    case ApiKey::kListOffsets: return "ListOffsets";
    case ApiKey::kMetadata: return "Metadata";
    case ApiKey::kOffsetCommit: return "OffsetCommit";
    case ApiKey::kOffsetFetch: return "OffsetFetch";
    case ApiKey::kFindCoordinator: return "FindCoordinator";
    case ApiKey::kJoinGroup: return "JoinGroup";
    case ApiKey::kHeartbeat: return "Heartbeat";
    case ApiKey::kLeaveGroup: return "LeaveGroup";
    case ApiKey::kSyncGroup: return "SyncGroup";
    case ApiKey::kDescribeGroups: return "DescribeGroups";
    case ApiKey::kListGroups: return "ListGroups";
    case ApiKey::kSaslHandshake: return "SaslHandshake";
    case ApiKey::kApiVersions: return "ApiVersions";
    case ApiKey::kCreateTopics: return "CreateTopics";
    case ApiKey::kDeleteTopics: return "DeleteTopics";
    case ApiKey::kDeleteRecords: return "DeleteRecords";
    case ApiKey::kInitProducerId: return "InitProducerId";
    case ApiKey::kOffsetForLeaderEpoch: return "OffsetForLeaderEpoch";
    case ApiKey::kDescribeConfigs: return "DescribeConfigs";
    case ApiKey::kAlterConfigs: return "AlterConfigs";
    case ApiKey::kSaslAuthenticate: return "SaslAuthenticate";
    case ApiKey::kCreatePartitions: return "CreatePartitions";
    case ApiKey::kDeleteGroups: return "DeleteGroups";
    case ApiKey::kIncrementalAlterConfigs: return "IncrementalAlterConfigs";
    case ApiKey::kDescribeCluster: return "DescribeCluster";
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

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
#define E(name, text) \
  case ErrorCode::name: return text;
    E(kUnknownServerError, "UNKNOWN_SERVER_ERROR")
    E(kNone, "NONE")
    E(kOffsetOutOfRange, "OFFSET_OUT_OF_RANGE")
    E(kCorruptMessage, "CORRUPT_MESSAGE")
    E(kUnknownTopicOrPartition, "UNKNOWN_TOPIC_OR_PARTITION")
    E(kInvalidFetchSize, "INVALID_FETCH_SIZE")
    E(kLeaderNotAvailable, "LEADER_NOT_AVAILABLE")
    E(kNotLeaderOrFollower, "NOT_LEADER_OR_FOLLOWER")
    E(kRequestTimedOut, "REQUEST_TIMED_OUT")
    E(kBrokerNotAvailable, "BROKER_NOT_AVAILABLE")
    E(kReplicaNotAvailable, "REPLICA_NOT_AVAILABLE")
    E(kMessageTooLarge, "MESSAGE_TOO_LARGE")
    E(kStaleControllerEpoch, "STALE_CONTROLLER_EPOCH")
    E(kOffsetMetadataTooLarge, "OFFSET_METADATA_TOO_LARGE")
    E(kNetworkException, "NETWORK_EXCEPTION")
    E(kCoordinatorLoadInProgress, "COORDINATOR_LOAD_IN_PROGRESS")
    E(kCoordinatorNotAvailable, "COORDINATOR_NOT_AVAILABLE")
    E(kNotCoordinator, "NOT_COORDINATOR")
    E(kInvalidTopicException, "INVALID_TOPIC_EXCEPTION")
    E(kRecordListTooLarge, "RECORD_LIST_TOO_LARGE")
    E(kNotEnoughReplicas, "NOT_ENOUGH_REPLICAS")
    E(kNotEnoughReplicasAfterAppend, "NOT_ENOUGH_REPLICAS_AFTER_APPEND")
    E(kInvalidRequiredAcks, "INVALID_REQUIRED_ACKS")
    E(kIllegalGeneration, "ILLEGAL_GENERATION")
    E(kInconsistentGroupProtocol, "INCONSISTENT_GROUP_PROTOCOL")
    E(kInvalidGroupId, "INVALID_GROUP_ID")
    E(kUnknownMemberId, "UNKNOWN_MEMBER_ID")
    E(kInvalidSessionTimeout, "INVALID_SESSION_TIMEOUT")
    E(kRebalanceInProgress, "REBALANCE_IN_PROGRESS")
    E(kInvalidCommitOffsetSize, "INVALID_COMMIT_OFFSET_SIZE")
    E(kTopicAuthorizationFailed, "TOPIC_AUTHORIZATION_FAILED")
    E(kGroupAuthorizationFailed, "GROUP_AUTHORIZATION_FAILED")
    E(kClusterAuthorizationFailed, "CLUSTER_AUTHORIZATION_FAILED")
    E(kInvalidTimestamp, "INVALID_TIMESTAMP")
    E(kUnsupportedSaslMechanism, "UNSUPPORTED_SASL_MECHANISM")
    E(kIllegalSaslState, "ILLEGAL_SASL_STATE")
    E(kUnsupportedVersion, "UNSUPPORTED_VERSION")
    E(kTopicAlreadyExists, "TOPIC_ALREADY_EXISTS")
    E(kInvalidPartitions, "INVALID_PARTITIONS")
    E(kInvalidReplicationFactor, "INVALID_REPLICATION_FACTOR")
    E(kInvalidReplicaAssignment, "INVALID_REPLICA_ASSIGNMENT")
    E(kInvalidConfig, "INVALID_CONFIG")
    E(kNotController, "NOT_CONTROLLER")
    E(kInvalidRequest, "INVALID_REQUEST")
    E(kUnsupportedForMessageFormat, "UNSUPPORTED_FOR_MESSAGE_FORMAT")
    E(kPolicyViolation, "POLICY_VIOLATION")
    E(kOutOfOrderSequenceNumber, "OUT_OF_ORDER_SEQUENCE_NUMBER")
    E(kDuplicateSequenceNumber, "DUPLICATE_SEQUENCE_NUMBER")
    E(kInvalidProducerEpoch, "INVALID_PRODUCER_EPOCH")
    E(kInvalidTxnState, "INVALID_TXN_STATE")
    E(kInvalidProducerIdMapping, "INVALID_PRODUCER_ID_MAPPING")
    E(kInvalidTransactionTimeout, "INVALID_TRANSACTION_TIMEOUT")
    E(kConcurrentTransactions, "CONCURRENT_TRANSACTIONS")
    E(kTransactionCoordinatorFenced, "TRANSACTION_COORDINATOR_FENCED")
    E(kTransactionalIdAuthorizationFailed, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
    E(kSecurityDisabled, "SECURITY_DISABLED")
    E(kOperationNotAttempted, "OPERATION_NOT_ATTEMPTED")
    E(kKafkaStorageError, "KAFKA_STORAGE_ERROR")
    E(kLogDirNotFound, "LOG_DIR_NOT_FOUND")
    E(kSaslAuthenticationFailed, "SASL_AUTHENTICATION_FAILED")
    E(kUnknownProducerId, "UNKNOWN_PRODUCER_ID")
    E(kReassignmentInProgress, "REASSIGNMENT_IN_PROGRESS")
    E(kNonEmptyGroup, "NON_EMPTY_GROUP")
    E(kGroupIdNotFound, "GROUP_ID_NOT_FOUND")
    E(kFetchSessionIdNotFound, "FETCH_SESSION_ID_NOT_FOUND")
    E(kInvalidFetchSessionEpoch, "INVALID_FETCH_SESSION_EPOCH")
    E(kListenerNotFound, "LISTENER_NOT_FOUND")
    E(kTopicDeletionDisabled, "TOPIC_DELETION_DISABLED")
    E(kFencedLeaderEpoch, "FENCED_LEADER_EPOCH")
    E(kUnknownLeaderEpoch, "UNKNOWN_LEADER_EPOCH")
    E(kUnsupportedCompressionType, "UNSUPPORTED_COMPRESSION_TYPE")
    E(kStaleBrokerEpoch, "STALE_BROKER_EPOCH")
    E(kOffsetNotAvailable, "OFFSET_NOT_AVAILABLE")
    E(kMemberIdRequired, "MEMBER_ID_REQUIRED")
    E(kPreferredLeaderNotAvailable, "PREFERRED_LEADER_NOT_AVAILABLE")
    E(kGroupMaxSizeReached, "GROUP_MAX_SIZE_REACHED")
    E(kFencedInstanceId, "FENCED_INSTANCE_ID")
    E(kInvalidRecord, "INVALID_RECORD")
    E(kUnstableOffsetCommit, "UNSTABLE_OFFSET_COMMIT")
    E(kThrottlingQuotaExceeded, "THROTTLING_QUOTA_EXCEEDED")
    E(kProducerFenced, "PRODUCER_FENCED")
    E(kResourceNotFound, "RESOURCE_NOT_FOUND")
    E(kDuplicateResource, "DUPLICATE_RESOURCE")
    E(kUnknownTopicId, "UNKNOWN_TOPIC_ID")
    E(kInconsistentTopicId, "INCONSISTENT_TOPIC_ID")
    E(kFetchSessionTopicIdError, "FETCH_SESSION_TOPIC_ID_ERROR")
#undef E
  }
  return "UNKNOWN_ERROR_CODE";
}

}  // namespace sluice::kafka
