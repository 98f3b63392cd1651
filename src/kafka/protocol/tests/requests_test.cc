#include "kafka/protocol/requests.h"

#include <gtest/gtest.h>

#include "kafka/protocol/tests/golden.h"

namespace sluice::kafka {
namespace requests_test {
namespace {

using testing::Golden;

TEST(DecodeRequestTest, ApiVersionsV3WithHeaderV2) {
  auto frame = Golden()
                   .i16(18)
                   .i16(3)
                   .i32(7)
                   .str("client")
                   .tags()  // header v2
                   .cstr("sluice-test")
                   .cstr("1.0")
                   .tags()  // body
                   .take();
  DecodeOutcome out = DecodeRequest(frame);
  ASSERT_EQ(out.problem, RequestProblem::kNone) << out.status.ToString();
  EXPECT_EQ(out.request->header.correlation_id, 7);
  const auto& body = std::get<ApiVersionsRequest>(out.request->body);
  EXPECT_EQ(body.client_software_name, "sluice-test");
}

TEST(DecodeRequestTest, MetadataV1NullTopicsMeansAll) {
  auto frame = Golden().i16(3).i16(1).i32(1).nullstr().arr(-1).take();
  DecodeOutcome out = DecodeRequest(frame);
  ASSERT_EQ(out.problem, RequestProblem::kNone) << out.status.ToString();
  EXPECT_FALSE(std::get<MetadataRequest>(out.request->body).topics.has_value());
}

TEST(DecodeRequestTest, UnsupportedApiVersionsVersionKeepsTheHeader) {
  auto frame = Golden().i16(18).i16(99).i32(5).nullstr().take();
  DecodeOutcome out = DecodeRequest(frame);
  EXPECT_EQ(out.problem, RequestProblem::kUnsupportedVersion);
  ASSERT_TRUE(out.header.has_value());
  EXPECT_EQ(out.header->correlation_id, 5);
  EXPECT_NE(out.status.message().find("ApiVersions v99"), std::string::npos);
}

TEST(DecodeRequestTest, ProduceBelowV3IsUnsupported) {
  auto frame = Golden().i16(0).i16(2).i32(5).nullstr().take();
  EXPECT_EQ(DecodeRequest(frame).problem, RequestProblem::kUnsupportedVersion);
}

TEST(DecodeRequestTest, UnknownApiKey) {
  auto frame = Golden().i16(1000).i16(0).i32(5).nullstr().take();
  EXPECT_EQ(DecodeRequest(frame).problem, RequestProblem::kUnknownApi);
}

TEST(DecodeRequestTest, FrameShorterThanItsHeaderIsMalformed) {
  auto frame = Golden().i16(3).i16(1).take();
  DecodeOutcome out = DecodeRequest(frame);
  EXPECT_EQ(out.problem, RequestProblem::kMalformed);
  EXPECT_FALSE(out.header.has_value());
}

TEST(DecodeRequestTest, TruncatedBodyIsMalformedAndNamesTheApi) {
  auto frame = Golden().i16(3).i16(1).i32(1).nullstr().arr(3).str("a").take();
  DecodeOutcome out = DecodeRequest(frame);
  EXPECT_EQ(out.problem, RequestProblem::kMalformed);
  EXPECT_NE(out.status.message().find("Metadata v1 request"), std::string::npos)
      << out.status.ToString();
}

// Flexible from v0: header v2 (a tagged-field section after the client id), then the body.
TEST(DecodeRequestTest, ScramCredentialRequestsDecodeToTheirTypes) {
  auto describe = Golden()
                      .i16(50)
                      .i16(0)
                      .i32(9)
                      .str("admin")
                      .tags()  // header v2
                      .carr(1)
                      .cstr("alice")
                      .tags()
                      .tags()  // body
                      .take();
  DecodeOutcome out = DecodeRequest(describe);
  ASSERT_EQ(out.problem, RequestProblem::kNone) << out.status.ToString();
  EXPECT_EQ(out.request->header.correlation_id, 9);
  const auto& users = std::get<DescribeUserScramCredentialsRequest>(out.request->body).users;
  ASSERT_TRUE(users.has_value());
  ASSERT_EQ(users->size(), 1u);
  EXPECT_EQ((*users)[0].name, "alice");

  auto alter = Golden()
                   .i16(51)
                   .i16(0)
                   .i32(10)
                   .str("admin")
                   .tags()
                   .carr(1)
                   .cstr("bob")
                   .i8(2)
                   .tags()
                   .carr(0)
                   .tags()
                   .take();
  out = DecodeRequest(alter);
  ASSERT_EQ(out.problem, RequestProblem::kNone) << out.status.ToString();
  const auto& body = std::get<AlterUserScramCredentialsRequest>(out.request->body);
  ASSERT_EQ(body.deletions.size(), 1u);
  EXPECT_EQ(body.deletions[0].name, "bob");
  EXPECT_EQ(body.deletions[0].mechanism, 2);
  EXPECT_TRUE(body.upsertions.empty());

  // v0 is the only version in the definitions.
  EXPECT_EQ(DecodeRequest(Golden().i16(50).i16(1).i32(1).nullstr().tags().take()).problem,
            RequestProblem::kUnsupportedVersion);
  EXPECT_EQ(DecodeRequest(Golden().i16(51).i16(1).i32(1).nullstr().tags().take()).problem,
            RequestProblem::kUnsupportedVersion);
}

// Header v1 and int16 strings before v2, header v2 and compact strings from v2. The ACL
// APIs are decoded before the broker serves them: known, not in ApiVersions.
TEST(DecodeRequestTest, AclRequestsDecodeToTheirTypes) {
  auto describe = Golden()
                      .i16(29)
                      .i16(1)
                      .i32(3)
                      .str("admin")  // header v1
                      .i8(2)
                      .str("orders")
                      .i8(4)
                      .nullstr()
                      .nullstr()
                      .i8(3)
                      .i8(3)
                      .take();
  DecodeOutcome out = DecodeRequest(describe);
  ASSERT_EQ(out.problem, RequestProblem::kNone) << out.status.ToString();
  EXPECT_EQ(out.request->header.correlation_id, 3);
  const auto& filter = std::get<DescribeAclsRequest>(out.request->body);
  EXPECT_EQ(filter.resource_name_filter, "orders");
  EXPECT_EQ(filter.pattern_type_filter, 4);
  EXPECT_FALSE(filter.principal_filter.has_value());

  auto create = Golden()
                    .i16(30)
                    .i16(2)
                    .i32(4)
                    .str("admin")
                    .tags()  // header v2
                    .carr(1)
                    .i8(2)
                    .cstr("orders")
                    .i8(3)
                    .cstr("User:alice")
                    .cstr("*")
                    .i8(4)
                    .i8(3)
                    .tags()
                    .tags()
                    .take();
  out = DecodeRequest(create);
  ASSERT_EQ(out.problem, RequestProblem::kNone) << out.status.ToString();
  const auto& creations = std::get<CreateAclsRequest>(out.request->body).creations;
  ASSERT_EQ(creations.size(), 1u);
  EXPECT_EQ(creations[0].principal, "User:alice");

  auto del = Golden()
                 .i16(31)
                 .i16(3)
                 .i32(5)
                 .str("admin")
                 .tags()
                 .carr(1)
                 .i8(1)
                 .cnullstr()
                 .i8(1)
                 .cnullstr()
                 .cnullstr()
                 .i8(1)
                 .i8(1)
                 .tags()
                 .tags()
                 .take();
  out = DecodeRequest(del);
  ASSERT_EQ(out.problem, RequestProblem::kNone) << out.status.ToString();
  const auto& filters = std::get<DeleteAclsRequest>(out.request->body).filters;
  ASSERT_EQ(filters.size(), 1u);
  EXPECT_FALSE(filters[0].resource_name_filter.has_value());

  for (ApiKey key : {ApiKey::kDescribeAcls, ApiKey::kCreateAcls, ApiKey::kDeleteAcls}) {
    EXPECT_EQ(
        DecodeRequest(Golden().i16(static_cast<int>(key)).i16(4).i32(1).nullstr().take()).problem,
        RequestProblem::kUnsupportedVersion)
        << ApiName(key);
    EXPECT_TRUE(IsServed(key)) << ApiName(key);
  }
  EXPECT_EQ(ApiName(ApiKey::kDescribeAcls), "DescribeAcls");
  EXPECT_EQ(ApiName(ApiKey::kCreateAcls), "CreateAcls");
  EXPECT_EQ(ApiName(ApiKey::kDeleteAcls), "DeleteAcls");
}

// Header v1 and int16 strings at v0, header v2 and compact strings at v1. The client quota
// APIs are in ApiVersions (served): the broker's handlers answer them.
TEST(DecodeRequestTest, ClientQuotaRequestsDecodeToTheirTypes) {
  auto describe = Golden()
                      .i16(48)
                      .i16(0)
                      .i32(6)
                      .str("admin")  // header v1
                      .arr(2)
                      .str("user")
                      .i8(0)
                      .str("alice")
                      .str("client-id")
                      .i8(1)
                      .nullstr()
                      .boolean(true)
                      .take();
  DecodeOutcome out = DecodeRequest(describe);
  ASSERT_EQ(out.problem, RequestProblem::kNone) << out.status.ToString();
  EXPECT_EQ(out.request->header.correlation_id, 6);
  const auto& filter = std::get<DescribeClientQuotasRequest>(out.request->body);
  ASSERT_EQ(filter.components.size(), 2u);
  EXPECT_EQ(filter.components[0].match, "alice");
  EXPECT_EQ(filter.components[1].match_type, 1);
  EXPECT_FALSE(filter.components[1].match.has_value());
  EXPECT_TRUE(filter.strict);

  auto alter = Golden()
                   .i16(49)
                   .i16(1)
                   .i32(7)
                   .str("admin")
                   .tags()  // header v2
                   .carr(1)
                   .carr(1)
                   .cstr("user")
                   .cnullstr()
                   .tags()
                   .carr(1)
                   .cstr("producer_byte_rate")
                   .i64(0x4130000000000000)  // 1048576.0
                   .boolean(false)
                   .tags()
                   .tags()
                   .boolean(true)
                   .tags()
                   .take();
  out = DecodeRequest(alter);
  ASSERT_EQ(out.problem, RequestProblem::kNone) << out.status.ToString();
  const auto& body = std::get<AlterClientQuotasRequest>(out.request->body);
  ASSERT_EQ(body.entries.size(), 1u);
  EXPECT_FALSE(body.entries[0].entity.at(0).entity_name.has_value());
  ASSERT_EQ(body.entries[0].ops.size(), 1u);
  EXPECT_EQ(body.entries[0].ops[0].key, "producer_byte_rate");
  EXPECT_EQ(body.entries[0].ops[0].value, 1048576.0);
  EXPECT_TRUE(body.validate_only);

  for (ApiKey key : {ApiKey::kDescribeClientQuotas, ApiKey::kAlterClientQuotas}) {
    EXPECT_EQ(
        DecodeRequest(Golden().i16(static_cast<int>(key)).i16(2).i32(1).nullstr().tags().take())
            .problem,
        RequestProblem::kUnsupportedVersion)
        << ApiName(key);
    EXPECT_TRUE(IsServed(key)) << ApiName(key);
    auto api = FindApi(key);
    ASSERT_TRUE(api.has_value()) << ApiName(key);
    EXPECT_EQ(api->min, 0);
    EXPECT_EQ(api->max, 1);
    EXPECT_EQ(RequestHeaderVersion(key, 0), 1);
    EXPECT_EQ(RequestHeaderVersion(key, 1), 2);
    EXPECT_EQ(ResponseHeaderVersion(key, 1), 1);
  }
  EXPECT_EQ(ApiName(ApiKey::kDescribeClientQuotas), "DescribeClientQuotas");
  EXPECT_EQ(ApiName(ApiKey::kAlterClientQuotas), "AlterClientQuotas");
}

TEST(DecodeRequestTest, EveryApiDecodesAnEmptyBodyWithoutCrashing) {
  for (const ApiVersionRange& api : KnownApis()) {
    for (int16_t v = api.min; v <= api.max; ++v) {
      Golden g;
      g.i16(static_cast<int>(api.key)).i16(v).i32(1).nullstr();
      if (IsFlexible(api, v)) g.tags();
      DecodeOutcome out = DecodeRequest(g.take());
      EXPECT_NE(out.problem, RequestProblem::kUnknownApi);
      EXPECT_NE(out.problem, RequestProblem::kUnsupportedVersion);
    }
  }
}

}  // namespace
}  // namespace requests_test
}  // namespace sluice::kafka
