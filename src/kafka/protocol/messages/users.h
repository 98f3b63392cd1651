// The SCRAM credential APIs (KIP-554): DescribeUserScramCredentials (key 50) and
// AlterUserScramCredentials (key 51), v0 only, flexible from v0. Written by hand from
// Kafka's JSON definitions, with the rules of the other message files: every field in
// order, unknown tagged fields kept, a decode error for any malformed input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kafka/protocol/api.h"
#include "kafka/protocol/wire.h"

namespace sluice::kafka {

struct DescribeUserScramCredentialsRequest {
  struct User {  // UserName
    std::string name;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const User&) const = default;
  };
  std::optional<std::vector<User>> users;  // null or empty: every user
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeUserScramCredentialsRequest&) const = default;
};

struct DescribeUserScramCredentialsResponse {
  struct CredentialInfo {
    int8_t mechanism = 0;  // 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
    int32_t iterations = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const CredentialInfo&) const = default;
  };
  struct Result {  // DescribeUserScramCredentialsResult
    std::string user;
    ErrorCode error_code = ErrorCode::kNone;
    std::optional<std::string> error_message;
    std::vector<CredentialInfo> credential_infos;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Result&) const = default;
  };
  int32_t throttle_time_ms = 0;
  ErrorCode error_code = ErrorCode::kNone;
  std::optional<std::string> error_message;
  std::vector<Result> results;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeUserScramCredentialsResponse&) const = default;
};

struct AlterUserScramCredentialsRequest {
  struct Deletion {  // ScramCredentialDeletion
    std::string name;
    int8_t mechanism = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Deletion&) const = default;
  };
  struct Upsertion {  // ScramCredentialUpsertion
    std::string name;
    int8_t mechanism = 0;
    int32_t iterations = 0;
    std::vector<uint8_t> salt;
    std::vector<uint8_t> salted_password;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Upsertion&) const = default;
  };
  std::vector<Deletion> deletions;
  std::vector<Upsertion> upsertions;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const AlterUserScramCredentialsRequest&) const = default;
};

struct AlterUserScramCredentialsResponse {
  struct Result {  // AlterUserScramCredentialsResult
    std::string user;
    ErrorCode error_code = ErrorCode::kNone;
    std::optional<std::string> error_message;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Result&) const = default;
  };
  int32_t throttle_time_ms = 0;
  std::vector<Result> results;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const AlterUserScramCredentialsResponse&) const = default;
};

}  // namespace sluice::kafka
