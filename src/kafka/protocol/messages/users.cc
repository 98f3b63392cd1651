// Codecs of the SCRAM credential APIs; field order and versions follow Kafka's JSON
// definitions (users.h).
#include "kafka/protocol/messages/users.h"

#include "kafka/protocol/messages/codec_util.h"

namespace sluice::kafka {
namespace {

using namespace codec;

constexpr ApiSpec kDescribeUserScramCredentials{"DescribeUserScramCredentials", 0, 0};
constexpr ApiSpec kAlterUserScramCredentials{"AlterUserScramCredentials", 0, 0};

}  // namespace

Status DescribeUserScramCredentialsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeUserScramCredentials, "Request", version));
  *this = {};
  const bool f = true;
  ReadNullableArray(r, f, "users", MinString(f) + MinTags(f), users, [&](User& u) {
    u.name = r.String(f, "user name");
    ReadTags(r, f, &u.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeUserScramCredentials, "Request", version);
}

void DescribeUserScramCredentialsRequest::Encode(Writer& w, int16_t) const {
  const bool f = true;
  WriteNullableArray(w, f, users, [&](const User& u) {
    w.String(f, u.name);
    WriteTags(w, f, u.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

Status DescribeUserScramCredentialsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeUserScramCredentials, "Response", version));
  *this = {};
  const bool f = true;
  throttle_time_ms = r.Int32("throttle time ms");
  error_code = ReadErrorCode(r, "error code");
  error_message = r.NullableString(f, "error message");
  const size_t result_min = MinString(f) + 2 + MinString(f) + MinArray(f) + MinTags(f);
  ReadArray(r, f, "results", result_min, results, [&](Result& res) {
    res.user = r.String(f, "user");
    res.error_code = ReadErrorCode(r, "user error code");
    res.error_message = r.NullableString(f, "user error message");
    ReadArray(r, f, "credential infos", 1 + 4 + MinTags(f), res.credential_infos,
              [&](CredentialInfo& c) {
                c.mechanism = r.Int8("mechanism");
                c.iterations = r.Int32("iterations");
                ReadTags(r, f, &c.unknown_tags);
              });
    ReadTags(r, f, &res.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeUserScramCredentials, "Response", version);
}

void DescribeUserScramCredentialsResponse::Encode(Writer& w, int16_t) const {
  const bool f = true;
  w.Int32(throttle_time_ms);
  WriteErrorCode(w, error_code);
  w.NullableString(f, error_message);
  WriteArray(w, f, results, [&](const Result& res) {
    w.String(f, res.user);
    WriteErrorCode(w, res.error_code);
    w.NullableString(f, res.error_message);
    WriteArray(w, f, res.credential_infos, [&](const CredentialInfo& c) {
      w.Int8(c.mechanism);
      w.Int32(c.iterations);
      WriteTags(w, f, c.unknown_tags);
    });
    WriteTags(w, f, res.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

Status AlterUserScramCredentialsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kAlterUserScramCredentials, "Request", version));
  *this = {};
  const bool f = true;
  ReadArray(r, f, "deletions", MinString(f) + 1 + MinTags(f), deletions, [&](Deletion& d) {
    d.name = r.String(f, "deletion name");
    d.mechanism = r.Int8("deletion mechanism");
    ReadTags(r, f, &d.unknown_tags);
  });
  const size_t upsertion_min = MinString(f) + 1 + 4 + 2 * MinBytes(f) + MinTags(f);
  ReadArray(r, f, "upsertions", upsertion_min, upsertions, [&](Upsertion& u) {
    u.name = r.String(f, "upsertion name");
    u.mechanism = r.Int8("upsertion mechanism");
    u.iterations = r.Int32("iterations");
    u.salt = r.Bytes(f, "salt");
    u.salted_password = r.Bytes(f, "salted password");
    ReadTags(r, f, &u.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kAlterUserScramCredentials, "Request", version);
}

void AlterUserScramCredentialsRequest::Encode(Writer& w, int16_t) const {
  const bool f = true;
  WriteArray(w, f, deletions, [&](const Deletion& d) {
    w.String(f, d.name);
    w.Int8(d.mechanism);
    WriteTags(w, f, d.unknown_tags);
  });
  WriteArray(w, f, upsertions, [&](const Upsertion& u) {
    w.String(f, u.name);
    w.Int8(u.mechanism);
    w.Int32(u.iterations);
    w.Bytes(f, u.salt);
    w.Bytes(f, u.salted_password);
    WriteTags(w, f, u.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

Status AlterUserScramCredentialsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kAlterUserScramCredentials, "Response", version));
  *this = {};
  const bool f = true;
  throttle_time_ms = r.Int32("throttle time ms");
  ReadArray(r, f, "results", MinString(f) + 2 + MinString(f) + MinTags(f), results,
            [&](Result& res) {
              res.user = r.String(f, "user");
              res.error_code = ReadErrorCode(r, "error code");
              res.error_message = r.NullableString(f, "error message");
              ReadTags(r, f, &res.unknown_tags);
            });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kAlterUserScramCredentials, "Response", version);
}

void AlterUserScramCredentialsResponse::Encode(Writer& w, int16_t) const {
  const bool f = true;
  w.Int32(throttle_time_ms);
  WriteArray(w, f, results, [&](const Result& res) {
    w.String(f, res.user);
    WriteErrorCode(w, res.error_code);
    w.NullableString(f, res.error_message);
    WriteTags(w, f, res.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

}  // namespace sluice::kafka
