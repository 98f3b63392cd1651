#include "lake/transforms.h"

#include <gtest/gtest.h>

#include <cstring>

namespace sluice::lake {
namespace transforms_test {
namespace {

Type T(TypeId id) { return Type::Primitive(id); }

int32_t Hash(const Type& t, const Value& v) {
  auto r = BucketHash(t, v);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : 0;
}

constexpr int64_t kMicros_2017_11_16T22_31_08 =
    (17486LL * 86400 + 22 * 3600 + 31 * 60 + 8) * 1000000;

TEST(Murmur3Test, ReferenceVectors) {
  const uint8_t ff[] = {0xff, 0xff, 0xff, 0xff};
  const uint8_t endian[] = {0x21, 0x43, 0x65, 0x87};
  EXPECT_EQ(Murmur3X86_32(nullptr, 0, 0), 0u);
  EXPECT_EQ(Murmur3X86_32(nullptr, 0, 1), 0x514E28B7u);
  EXPECT_EQ(Murmur3X86_32(nullptr, 0, 0xffffffff), 0x81F16F39u);
  EXPECT_EQ(Murmur3X86_32(ff, 4, 0), 0x76293B50u);
  EXPECT_EQ(Murmur3X86_32(endian, 4, 0), 0xF55B516Bu);
  EXPECT_EQ(Murmur3X86_32(endian, 4, 0x5082EDEE), 0x2362F9DEu);
  const char* hello = "Hello, world!";
  EXPECT_EQ(Murmur3X86_32(reinterpret_cast<const uint8_t*>(hello), std::strlen(hello), 1234),
            0xfaf6cdb3u);
}

// Appendix B's test values, one per type.
TEST(BucketHashTest, SpecVectors) {
  EXPECT_EQ(Hash(T(TypeId::kInt), Value::Int(34)), 2017239379);
  EXPECT_EQ(Hash(T(TypeId::kLong), Value::Long(34)), 2017239379);
  EXPECT_EQ(Hash(Type::Decimal(9, 2), Value::Decimal(1420)), -500754589);
  EXPECT_EQ(Hash(T(TypeId::kDate), Value::Int(DaysFromCivil(2017, 11, 16))), -653330422);
  EXPECT_EQ(Hash(T(TypeId::kTime), Value::Long((22 * 3600 + 31 * 60 + 8) * 1000000LL)), -662762989);
  EXPECT_EQ(Hash(T(TypeId::kTimestamp), Value::Long(kMicros_2017_11_16T22_31_08)), -2047944441);
  EXPECT_EQ(Hash(T(TypeId::kTimestamp), Value::Long(kMicros_2017_11_16T22_31_08 + 1)), -1207196810);
  // 2017-11-16T14:31:08-08:00 is the same instant.
  EXPECT_EQ(Hash(T(TypeId::kTimestampTz), Value::Long(kMicros_2017_11_16T22_31_08)), -2047944441);
  EXPECT_EQ(Hash(T(TypeId::kTimestampTz), Value::Long(kMicros_2017_11_16T22_31_08 + 1)),
            -1207196810);
  EXPECT_EQ(Hash(T(TypeId::kTimestampNs), Value::Long(kMicros_2017_11_16T22_31_08 * 1000)),
            -2047944441);
  EXPECT_EQ(Hash(T(TypeId::kTimestampNs), Value::Long(kMicros_2017_11_16T22_31_08 * 1000 + 1001)),
            -1207196810);
  EXPECT_EQ(Hash(T(TypeId::kTimestampTzNs), Value::Long(kMicros_2017_11_16T22_31_08 * 1000 + 1001)),
            -1207196810);
  EXPECT_EQ(Hash(T(TypeId::kString), Value::String("iceberg")), 1210000089);
  auto uuid = ParseUuid("f79c3e09-677c-4bbd-a479-3f349cb785e7");
  ASSERT_TRUE(uuid.ok());
  EXPECT_EQ(Hash(T(TypeId::kUuid), Value::UuidValue(*uuid)), 1488055340);
  EXPECT_EQ(Hash(Type::Fixed(4), Value::Binary({0, 1, 2, 3})), -188683207);
  EXPECT_EQ(Hash(T(TypeId::kBinary), Value::Binary({0, 1, 2, 3})), -188683207);
}

TEST(BucketHashTest, SpecPromotionExampleDiffersForStrings) {
  // The spec's note: bucket of 34 and "34" differ (2017239379 != -427558391).
  EXPECT_EQ(Hash(T(TypeId::kString), Value::String("34")), -427558391);
}

TEST(BucketHashTest, RejectsTypesBucketDoesNotAccept) {
  EXPECT_FALSE(BucketHash(T(TypeId::kBoolean), Value::Boolean(true)).ok());
  EXPECT_FALSE(BucketHash(T(TypeId::kDouble), Value::Double(1.0)).ok());
  EXPECT_FALSE(BucketHash(T(TypeId::kInt), Value::Long(1)).ok());  // wrong representation
}

TEST(TransformTest, ParsesAndPrintsSpecStrings) {
  for (std::string_view s :
       {"identity", "bucket[16]", "truncate[10]", "year", "month", "day", "hour", "void"}) {
    auto t = Transform::Parse(s);
    ASSERT_TRUE(t.ok()) << s;
    EXPECT_EQ(t->ToString(), s);
  }
  auto b = Transform::Parse("BUCKET[8]");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->kind(), TransformKind::kBucket);
  EXPECT_EQ(b->param(), 8);
}

TEST(TransformTest, MalformedParametersAreErrors) {
  for (std::string_view s : {"bucket[0]", "bucket[-1]", "bucket[]", "bucket[x]", "bucket[16",
                             "truncate[0]", "truncate[1.5]", "bucket[99999999999]", ""}) {
    EXPECT_FALSE(Transform::Parse(s).ok()) << s;
  }
}

TEST(TransformTest, UnknownTransformRoundTripsButCannotApply) {
  auto t = Transform::Parse("zorder");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->kind(), TransformKind::kUnknown);
  EXPECT_EQ(t->ToString(), "zorder");
  EXPECT_FALSE(t->CanTransform(T(TypeId::kInt)));
  EXPECT_FALSE(t->Apply(T(TypeId::kInt), Value::Int(1)).ok());
}

TEST(TransformTest, SourceTypes) {
  EXPECT_TRUE(Transform::Bucket(4).CanTransform(T(TypeId::kUuid)));
  EXPECT_FALSE(Transform::Bucket(4).CanTransform(T(TypeId::kFloat)));
  EXPECT_TRUE(Transform::Truncate(4).CanTransform(T(TypeId::kBinary)));
  EXPECT_FALSE(Transform::Truncate(4).CanTransform(T(TypeId::kUuid)));
  EXPECT_TRUE(Transform::Day().CanTransform(T(TypeId::kDate)));
  EXPECT_FALSE(Transform::Hour().CanTransform(T(TypeId::kDate)));
  EXPECT_TRUE(Transform::Hour().CanTransform(T(TypeId::kTimestampTz)));
  EXPECT_FALSE(Transform::Identity().CanTransform(Type::List(2, T(TypeId::kInt), true)));
  auto rt = Transform::Day().ResultType(T(TypeId::kTimestamp));
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ(rt->id, TypeId::kInt);
  auto tt = Transform::Truncate(3).ResultType(T(TypeId::kString));
  ASSERT_TRUE(tt.ok());
  EXPECT_EQ(tt->id, TypeId::kString);
  EXPECT_FALSE(Transform::Year().ResultType(T(TypeId::kString)).ok());
}

Value Apply(const Transform& t, const Type& type, const Value& v) {
  auto r = t.Apply(type, v);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Value::Null();
}

TEST(TransformTest, BucketIsHashModN) {
  EXPECT_EQ(Apply(Transform::Bucket(16), T(TypeId::kInt), Value::Int(34)), Value::Int(3));
  EXPECT_EQ(Apply(Transform::Bucket(10), T(TypeId::kString), Value::String("iceberg")),
            Value::Int(9));
  // A negative hash loses its sign bit first: -500754589 & INT_MAX = 1646729059.
  EXPECT_EQ(Apply(Transform::Bucket(7), Type::Decimal(9, 2), Value::Decimal(1420)),
            Value::Int(1646729059 % 7));
}

TEST(TransformTest, TruncateSpecExamples) {
  EXPECT_EQ(Apply(Transform::Truncate(10), T(TypeId::kInt), Value::Int(1)), Value::Int(0));
  EXPECT_EQ(Apply(Transform::Truncate(10), T(TypeId::kInt), Value::Int(-1)), Value::Int(-10));
  EXPECT_EQ(Apply(Transform::Truncate(10), T(TypeId::kLong), Value::Long(-1)), Value::Long(-10));
  EXPECT_EQ(Apply(Transform::Truncate(50), Type::Decimal(9, 2), Value::Decimal(1065)),
            Value::Decimal(1050));
  EXPECT_EQ(Apply(Transform::Truncate(3), T(TypeId::kString), Value::String("iceberg")),
            Value::String("ice"));
  EXPECT_EQ(Apply(Transform::Truncate(3), T(TypeId::kBinary), Value::Binary({1, 2, 3, 4, 5})),
            Value::Binary({1, 2, 3}));
  // Strings are cut at code points, not bytes: "é" is two bytes.
  EXPECT_EQ(
      Apply(Transform::Truncate(2), T(TypeId::kString), Value::String("\xc3\xa9\xc3\xa9\xc3\xa9")),
      Value::String("\xc3\xa9\xc3\xa9"));
  EXPECT_EQ(Apply(Transform::Truncate(5), T(TypeId::kString), Value::String("ab")),
            Value::String("ab"));
}

TEST(TransformTest, DateAndTimeTransforms) {
  Type ts = T(TypeId::kTimestamp);
  Value v = Value::Long(kMicros_2017_11_16T22_31_08);
  EXPECT_EQ(Apply(Transform::Year(), ts, v), Value::Int(47));
  EXPECT_EQ(Apply(Transform::Month(), ts, v), Value::Int(47 * 12 + 10));
  EXPECT_EQ(Apply(Transform::Day(), ts, v), Value::Int(17486));
  EXPECT_EQ(Apply(Transform::Hour(), ts, v), Value::Int(419686));
  Type ns = T(TypeId::kTimestampNs);
  EXPECT_EQ(Apply(Transform::Hour(), ns, Value::Long(kMicros_2017_11_16T22_31_08 * 1000)),
            Value::Int(419686));
  Type date = T(TypeId::kDate);
  EXPECT_EQ(Apply(Transform::Day(), date, Value::Int(17486)), Value::Int(17486));
  EXPECT_EQ(Apply(Transform::Month(), date, Value::Int(17486)), Value::Int(574));
  // Before the epoch the values are floored: one microsecond before 1970 is in 1969.
  EXPECT_EQ(Apply(Transform::Year(), ts, Value::Long(-1)), Value::Int(-1));
  EXPECT_EQ(Apply(Transform::Month(), ts, Value::Long(-1)), Value::Int(-1));
  EXPECT_EQ(Apply(Transform::Day(), ts, Value::Long(-1)), Value::Int(-1));
  EXPECT_EQ(Apply(Transform::Hour(), ts, Value::Long(-1)), Value::Int(-1));
  EXPECT_EQ(Apply(Transform::Year(), date, Value::Int(DaysFromCivil(1969, 1, 1))), Value::Int(-1));
  EXPECT_EQ(Apply(Transform::Year(), date, Value::Int(DaysFromCivil(1968, 12, 31))),
            Value::Int(-2));
}

TEST(TransformTest, NullInNullOutAndVoid) {
  EXPECT_TRUE(Apply(Transform::Bucket(4), T(TypeId::kInt), Value::Null()).is_null());
  EXPECT_TRUE(Apply(Transform::Void(), T(TypeId::kInt), Value::Int(3)).is_null());
  EXPECT_EQ(Apply(Transform::Identity(), T(TypeId::kInt), Value::Int(3)), Value::Int(3));
}

}  // namespace
}  // namespace transforms_test
}  // namespace sluice::lake
