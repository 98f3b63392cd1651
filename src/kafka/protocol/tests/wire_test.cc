#include "kafka/protocol/wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kafka/protocol/header.h"

namespace sluice::kafka {
namespace wire_test {
namespace {

std::vector<uint8_t> B(std::initializer_list<int> bytes) {
  std::vector<uint8_t> v;
  for (int b : bytes) v.push_back(static_cast<uint8_t>(b));
  return v;
}

TEST(WireTest, FixedWidthIntegersAreBigEndian) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.Int16(0x0102);
  w.Int32(-2);
  w.Int64(0x0102030405060708);
  EXPECT_EQ(out, B({1, 2, 0xff, 0xff, 0xff, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8}));
  Reader r(out);
  EXPECT_EQ(r.Int16("a"), 0x0102);
  EXPECT_EQ(r.Int32("b"), -2);
  EXPECT_EQ(r.Int64("c"), 0x0102030405060708);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.remaining(), 0u);
}

// Kafka's FLOAT64 (quota values): ByteBuffer.putDouble, an IEEE 754 double big-endian,
// bit for bit: -0.0 keeps its sign and a NaN its payload.
TEST(WireTest, Float64IsABigEndianIeeeDouble) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.Float64(1.5);
  w.Float64(-0.0);
  w.Float64(1048576.0);
  w.Float64(std::numeric_limits<double>::infinity());
  EXPECT_EQ(out, B({0x3f, 0xf8, 0, 0, 0, 0, 0, 0,     // 1.5
                    0x80, 0,    0, 0, 0, 0, 0, 0,     // -0.0
                    0x41, 0x30, 0, 0, 0, 0, 0, 0,     // 2^20
                    0x7f, 0xf0, 0, 0, 0, 0, 0, 0}));  // +inf
  Reader r(out);
  EXPECT_EQ(r.Float64("a"), 1.5);
  const double negative_zero = r.Float64("b");
  EXPECT_EQ(negative_zero, 0.0);
  EXPECT_TRUE(std::signbit(negative_zero));
  EXPECT_EQ(r.Float64("c"), 1048576.0);
  EXPECT_EQ(r.Float64("d"), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.remaining(), 0u);

  const std::vector<uint8_t> nan = B({0x7f, 0xf8, 0, 0, 0, 0, 0, 0x2a});
  Reader rn(nan);
  const double d = rn.Float64("nan");
  EXPECT_TRUE(std::isnan(d));
  std::vector<uint8_t> again;
  Writer wn(&again);
  wn.Float64(d);
  EXPECT_EQ(again, nan);
}

TEST(WireTest, TruncatedFloat64IsAnError) {
  auto bytes = B({0x3f, 0xf8, 0, 0, 0, 0, 0});
  Reader r(bytes);
  EXPECT_EQ(r.Float64("quota value"), 0.0);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("quota value"), std::string::npos) << r.status().message();
}

TEST(WireTest, VarintsZigZagAndUnsigned) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.Varint(-1);
  w.Varint(150);
  w.UnsignedVarint(300);
  w.Varlong(INT64_MIN);
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 6),
            B({0x01, 0xac, 0x02, 0xac, 0x02, 0xff}));
  Reader r(out);
  EXPECT_EQ(r.Varint("a"), -1);
  EXPECT_EQ(r.Varint("b"), 150);
  EXPECT_EQ(r.UnsignedVarint("c"), 300u);
  EXPECT_EQ(r.Varlong("d"), INT64_MIN);
  EXPECT_TRUE(r.ok());
}

TEST(WireTest, OverlongVarintIsAnError) {
  auto bytes = B({0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
  Reader r(bytes);
  r.UnsignedVarint("count");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("count"), std::string::npos);
}

TEST(WireTest, StringsCompactAndNot) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.String(false, "ab");
  w.String(true, "ab");
  w.NullableString(false, std::nullopt);
  w.NullableString(true, std::nullopt);
  EXPECT_EQ(out, B({0, 2, 'a', 'b', 3, 'a', 'b', 0xff, 0xff, 0}));
  Reader r(out);
  EXPECT_EQ(r.String(false, "s1"), "ab");
  EXPECT_EQ(r.String(true, "s2"), "ab");
  EXPECT_EQ(r.NullableString(false, "s3"), std::nullopt);
  EXPECT_EQ(r.NullableString(true, "s4"), std::nullopt);
  EXPECT_TRUE(r.ok());
}

TEST(WireTest, TruncatedStringFailsWithFieldAndPosition) {
  auto bytes = B({0, 5, 'a', 'b'});
  Reader r(bytes);
  r.String(false, "topic name");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("topic name"), std::string::npos);
  EXPECT_NE(r.status().message().find("at byte 2"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.Int32("after"), 0);  // sticky
}

TEST(WireTest, NegativeLengthsAreErrors) {
  auto bytes = B({0xff, 0xfe});
  Reader r(bytes);
  r.NullableString(false, "s");
  EXPECT_FALSE(r.ok());
  auto arr = B({0xff, 0xff, 0xff, 0xf0});
  Reader r2(arr);
  r2.ArrayLength(false, "topics");
  EXPECT_FALSE(r2.ok());
}

TEST(WireTest, HugeArrayLengthIsRejectedBeforeAnyAllocation) {
  auto bytes = B({0x7f, 0xff, 0xff, 0xff, 1, 2, 3});
  Reader r(bytes);
  EXPECT_EQ(r.ArrayLength(false, "partitions", 4), -1);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot fit"), std::string::npos);
}

TEST(WireTest, TaggedFieldsKnownAndUnknown) {
  std::vector<uint8_t> out;
  Writer w(&out);
  w.UnsignedVarint(2);
  w.TaggedFieldHeader(0, 4);
  w.Int32(7);
  w.TaggedFieldHeader(5, 2);
  w.Int16(9);
  Reader r(out);
  int32_t seen = 0;
  std::vector<RawTaggedField> unknown;
  r.TaggedFields(
      [&](uint32_t tag, Reader& sub) {
        if (tag != 0) return false;
        seen = sub.Int32("tag0");
        return true;
      },
      &unknown);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(seen, 7);
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0].tag, 5u);
  EXPECT_EQ(unknown[0].data, B({0, 9}));
}

TEST(WireTest, UuidToStringIsKafkaBase64) {
  Uuid u{0, 0};
  EXPECT_EQ(u.ToString(), "AAAAAAAAAAAAAAAAAAAAAA");
  EXPECT_EQ(u.ToString().size(), 22u);
}

TEST(HeaderTest, RequestHeaderV1AndV2) {
  // Metadata v12 is flexible: header v2 with tagged fields; client id stays non-compact.
  auto bytes = B({0, 3, 0, 12, 0, 0, 0, 42, 0, 3, 'c', 'l', 'i', 0, 0xAA});
  Reader r(bytes);
  auto h = DecodeRequestHeader(r);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->api_key, 3);
  EXPECT_EQ(h->api_version, 12);
  EXPECT_EQ(h->correlation_id, 42);
  EXPECT_EQ(h->client_id, "cli");
  EXPECT_EQ(h->header_version, 2);
  EXPECT_EQ(r.remaining(), 1u);
  std::vector<uint8_t> out;
  Writer w(&out);
  EncodeRequestHeader(w, *h);
  EXPECT_EQ(out, std::vector<uint8_t>(bytes.begin(), bytes.end() - 1));
}

TEST(HeaderTest, UnknownApiIsReadAsHeaderV1) {
  auto bytes = B({0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff});
  Reader r(bytes);
  auto h = DecodeRequestHeader(r);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->api_key, 999);
  EXPECT_EQ(h->client_id, std::nullopt);
  EXPECT_EQ(h->header_version, 1);
}

TEST(HeaderTest, ApiVersionsResponseHeaderNeverHasTaggedFields) {
  std::vector<uint8_t> out;
  Writer w(&out);
  EncodeResponseHeader(w, ApiKey::kApiVersions, 3, 7);
  EXPECT_EQ(out, B({0, 0, 0, 7}));
  out.clear();
  EncodeResponseHeader(w, ApiKey::kMetadata, 9, 7);
  EXPECT_EQ(out, B({0, 0, 0, 7, 0}));
}

TEST(HeaderTest, TruncatedHeaderIsAnError) {
  auto bytes = B({0, 3, 0});
  Reader r(bytes);
  EXPECT_FALSE(DecodeRequestHeader(r).ok());
}

}  // namespace
}  // namespace wire_test
}  // namespace sluice::kafka
