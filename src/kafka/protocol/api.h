// Kafka API keys, error codes, and the (API, version) pairs sluice advertises.
// Numbers are Kafka's (the JSON message definitions and the protocol guide).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace sluice::kafka {

enum class ApiKey : int16_t {
  kProduce = 0,
  kFetch = 1,
  kListOffsets = 2,
  kMetadata = 3,
  kOffsetCommit = 8,
  kOffsetFetch = 9,
  kFindCoordinator = 10,
  kJoinGroup = 11,
  kHeartbeat = 12,
  kLeaveGroup = 13,
  kSyncGroup = 14,
  kDescribeGroups = 15,
  kListGroups = 16,
  kSaslHandshake = 17,
  kApiVersions = 18,
  kCreateTopics = 19,
  kDeleteTopics = 20,
  kDeleteRecords = 21,
  kInitProducerId = 22,
  kOffsetForLeaderEpoch = 23,
  kAddPartitionsToTxn = 24,
  kAddOffsetsToTxn = 25,
  kEndTxn = 26,
  kWriteTxnMarkers = 27,
  kTxnOffsetCommit = 28,
  kDescribeAcls = 29,
  kCreateAcls = 30,
  kDeleteAcls = 31,
  kDescribeConfigs = 32,
  kAlterConfigs = 33,
  kSaslAuthenticate = 36,
  kCreatePartitions = 37,
  kDeleteGroups = 42,
  kIncrementalAlterConfigs = 44,
  kDescribeClientQuotas = 48,
  kAlterClientQuotas = 49,
  kDescribeUserScramCredentials = 50,
  kAlterUserScramCredentials = 51,
  kDescribeCluster = 60,
  kDescribeProducers = 61,
  kDescribeTransactions = 65,
  kListTransactions = 66,
};

enum class ErrorCode : int16_t {
  kUnknownServerError = -1,
  kNone = 0,
  kOffsetOutOfRange = 1,
  kCorruptMessage = 2,
  kUnknownTopicOrPartition = 3,
  kInvalidFetchSize = 4,
  kLeaderNotAvailable = 5,
  kNotLeaderOrFollower = 6,
  kRequestTimedOut = 7,
  kBrokerNotAvailable = 8,
  kReplicaNotAvailable = 9,
  kMessageTooLarge = 10,
  kStaleControllerEpoch = 11,
  kOffsetMetadataTooLarge = 12,
  kNetworkException = 13,
  kCoordinatorLoadInProgress = 14,
  kCoordinatorNotAvailable = 15,
  kNotCoordinator = 16,
  kInvalidTopicException = 17,
  kRecordListTooLarge = 18,
  kNotEnoughReplicas = 19,
  kNotEnoughReplicasAfterAppend = 20,
  kInvalidRequiredAcks = 21,
  kIllegalGeneration = 22,
  kInconsistentGroupProtocol = 23,
  kInvalidGroupId = 24,
  kUnknownMemberId = 25,
  kInvalidSessionTimeout = 26,
  kRebalanceInProgress = 27,
  kInvalidCommitOffsetSize = 28,
  kTopicAuthorizationFailed = 29,
  kGroupAuthorizationFailed = 30,
  kClusterAuthorizationFailed = 31,
  kInvalidTimestamp = 32,
  kUnsupportedSaslMechanism = 33,
  kIllegalSaslState = 34,
  kUnsupportedVersion = 35,
  kTopicAlreadyExists = 36,
  kInvalidPartitions = 37,
  kInvalidReplicationFactor = 38,
  kInvalidReplicaAssignment = 39,
  kInvalidConfig = 40,
  kNotController = 41,
  kInvalidRequest = 42,
  kUnsupportedForMessageFormat = 43,
  kPolicyViolation = 44,
  kOutOfOrderSequenceNumber = 45,
  kDuplicateSequenceNumber = 46,
  kInvalidProducerEpoch = 47,
  kInvalidTxnState = 48,
  kInvalidProducerIdMapping = 49,
  kInvalidTransactionTimeout = 50,
  kConcurrentTransactions = 51,
  kTransactionCoordinatorFenced = 52,
  kTransactionalIdAuthorizationFailed = 53,
  kSecurityDisabled = 54,
  kOperationNotAttempted = 55,
  kKafkaStorageError = 56,
  kLogDirNotFound = 57,
  kSaslAuthenticationFailed = 58,
  kUnknownProducerId = 59,
  kReassignmentInProgress = 60,
  kNonEmptyGroup = 68,
  kGroupIdNotFound = 69,
  kFetchSessionIdNotFound = 70,
  kInvalidFetchSessionEpoch = 71,
  kListenerNotFound = 72,
  kTopicDeletionDisabled = 73,
  kFencedLeaderEpoch = 74,
  kUnknownLeaderEpoch = 75,
  kUnsupportedCompressionType = 76,
  kStaleBrokerEpoch = 77,
  kOffsetNotAvailable = 78,
  kMemberIdRequired = 79,
  kPreferredLeaderNotAvailable = 80,
  kGroupMaxSizeReached = 81,
  kFencedInstanceId = 82,
  kInvalidRecord = 87,
  kUnstableOffsetCommit = 88,
  kThrottlingQuotaExceeded = 89,
  kProducerFenced = 90,
  kResourceNotFound = 91,
  kDuplicateResource = 92,
  kUnacceptableCredential = 93,
  kUnknownTopicId = 100,
  kInconsistentTopicId = 103,
  kTransactionalIdNotFound = 105,
  kFetchSessionTopicIdError = 106,
  kOffsetMovedToTieredStorage = 109,
  kTransactionAbortable = 120,
};

// The versions sluice advertises for one API, and the first flexible version (compact
// strings and arrays, tagged fields); flexible_from > max means none is flexible.
struct ApiVersionRange {
  ApiKey key;
  int16_t min;
  int16_t max;
  int16_t flexible_from;
};

// Every API the codec decodes (messages/), in ApiKey order: DecodeRequest accepts these,
// FindApi and the header versions know them. An API is here before the broker serves it:
// the codec lands first and a handler later.
std::span<const ApiVersionRange> KnownApis();

// The APIs the broker serves, in ApiKey order: the KnownApis() marked served in api.cc,
// which is what ApiVersions lists and what the dispatch table must have a handler for
// (broker_api_test checks that). Whoever adds a handler marks its API served there.
std::span<const ApiVersionRange> SupportedApis();
bool IsServed(ApiKey key);

// What ApiVersions lists: SupportedApis(), except that Produce is listed from v0.
// librdkafka before 2.8 compresses with gzip, snappy or lz4 only when the broker lists
// Produce v0, and otherwise silently sends those batches uncompressed; Kafka 4 lists v0
// for the same reason (KAFKA-18659) and still refuses v0-2 requests, as sluice does
// (DecodeRequest checks the range in KnownApis()).
ApiVersionRange AdvertisedRange(const ApiVersionRange& supported);
// Looks in KnownApis().
std::optional<ApiVersionRange> FindApi(ApiKey key);
std::optional<ApiVersionRange> FindApi(int16_t key);
std::string_view ApiName(ApiKey key);  // "Produce"

inline bool IsFlexible(const ApiVersionRange& api, int16_t version) {
  return version >= api.flexible_from;
}

// Header versions: requests use v2 in flexible versions, v1 otherwise; responses v1 in
// flexible versions, v0 otherwise, except ApiVersions, whose response header is always v0.
int RequestHeaderVersion(ApiKey key, int16_t version);
int ResponseHeaderVersion(ApiKey key, int16_t version);

}  // namespace sluice::kafka
