#include "lake/single_value.h"

#include <gtest/gtest.h>

namespace sluice::lake {
namespace single_value_test {
namespace {

Type T(TypeId id) { return Type::Primitive(id); }

Bytes Encode(const Type& t, const Value& v) {
  auto r = ToSingleValueBinary(t, v);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Bytes{};
}

void ExpectRoundTrip(const Type& t, const Value& v, const Bytes& expected) {
  Bytes b = Encode(t, v);
  EXPECT_EQ(b, expected) << t.ToString() << " " << v.ToString();
  auto back = FromSingleValueBinary(t, b);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, v) << t.ToString();
}

TEST(SingleValueTest, EveryPrimitiveTypeRoundTrips) {
  ExpectRoundTrip(T(TypeId::kBoolean), Value::Boolean(true), {0x01});
  ExpectRoundTrip(T(TypeId::kBoolean), Value::Boolean(false), {0x00});
  ExpectRoundTrip(T(TypeId::kInt), Value::Int(34), {0x22, 0, 0, 0});
  ExpectRoundTrip(T(TypeId::kInt), Value::Int(-2), {0xfe, 0xff, 0xff, 0xff});
  ExpectRoundTrip(T(TypeId::kLong), Value::Long(34), {0x22, 0, 0, 0, 0, 0, 0, 0});
  ExpectRoundTrip(T(TypeId::kFloat), Value::Float(1.0f), {0, 0, 0x80, 0x3f});
  ExpectRoundTrip(T(TypeId::kDouble), Value::Double(1.0), {0, 0, 0, 0, 0, 0, 0xf0, 0x3f});
  // 2017-11-16 is day 17486 = 0x444e.
  ExpectRoundTrip(T(TypeId::kDate), Value::Int(DaysFromCivil(2017, 11, 16)), {0x4e, 0x44, 0, 0});
  ExpectRoundTrip(T(TypeId::kTime), Value::Long(1), {1, 0, 0, 0, 0, 0, 0, 0});
  ExpectRoundTrip(T(TypeId::kTimestamp), Value::Long(-1), Bytes(8, 0xff));
  ExpectRoundTrip(T(TypeId::kTimestampTz), Value::Long(256), {0, 1, 0, 0, 0, 0, 0, 0});
  ExpectRoundTrip(T(TypeId::kTimestampNs), Value::Long(2), {2, 0, 0, 0, 0, 0, 0, 0});
  ExpectRoundTrip(T(TypeId::kString), Value::String("iceberg"),
                  {'i', 'c', 'e', 'b', 'e', 'r', 'g'});
  ExpectRoundTrip(T(TypeId::kString), Value::String(""), {});
  auto uuid = ParseUuid("f79c3e09-677c-4bbd-a479-3f349cb785e7");
  ASSERT_TRUE(uuid.ok());
  ExpectRoundTrip(T(TypeId::kUuid), Value::UuidValue(*uuid),
                  {0xF7, 0x9C, 0x3E, 0x09, 0x67, 0x7C, 0x4B, 0xBD, 0xA4, 0x79, 0x3F, 0x34, 0x9C,
                   0xB7, 0x85, 0xE7});
  ExpectRoundTrip(Type::Fixed(3), Value::Binary({1, 2, 3}), {1, 2, 3});
  ExpectRoundTrip(T(TypeId::kBinary), Value::Binary({0, 0xff}), {0, 0xff});
  ExpectRoundTrip(T(TypeId::kBinary), Value::Binary({}), {});
}

TEST(SingleValueTest, DecimalsUseMinimalTwosComplementBigEndian) {
  Type d = Type::Decimal(9, 2);
  ExpectRoundTrip(d, Value::Decimal(1420), {0x05, 0x8c});  // 14.20
  ExpectRoundTrip(d, Value::Decimal(0), {0x00});
  ExpectRoundTrip(d, Value::Decimal(-1), {0xff});
  ExpectRoundTrip(d, Value::Decimal(127), {0x7f});
  ExpectRoundTrip(d, Value::Decimal(128), {0x00, 0x80});
  ExpectRoundTrip(d, Value::Decimal(-128), {0x80});
  ExpectRoundTrip(d, Value::Decimal(-129), {0xff, 0x7f});
  // 38 nines need 16 bytes.
  __int128 max38 = 1;
  for (int i = 0; i < 38; ++i) max38 *= 10;
  max38 -= 1;
  Bytes b = Encode(Type::Decimal(38, 0), Value::Decimal(max38));
  EXPECT_EQ(b.size(), 16u);
  auto back = FromSingleValueBinary(Type::Decimal(38, 0), b);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->as_unscaled(), max38);
  EXPECT_FALSE(ToSingleValueBinary(Type::Decimal(38, 0), Value::Decimal(max38 + 1)).ok());
  EXPECT_EQ(DecimalToString(1420, 2), "14.20");
  EXPECT_EQ(DecimalToString(-5, 2), "-0.05");
}

TEST(SingleValueTest, BoundsWrittenBeforePromotionAreWidened) {
  auto l = FromSingleValueBinary(T(TypeId::kLong), Bytes{0xfe, 0xff, 0xff, 0xff});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(*l, Value::Long(-2));
  auto d = FromSingleValueBinary(T(TypeId::kDouble), Bytes{0, 0, 0x80, 0x3f});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, Value::Double(1.0));
}

TEST(SingleValueTest, WrongLengthsAreErrors) {
  EXPECT_FALSE(FromSingleValueBinary(T(TypeId::kInt), Bytes{1, 2, 3}).ok());
  EXPECT_FALSE(FromSingleValueBinary(T(TypeId::kLong), Bytes{1, 2, 3, 4, 5}).ok());
  EXPECT_FALSE(FromSingleValueBinary(T(TypeId::kBoolean), Bytes{}).ok());
  EXPECT_FALSE(FromSingleValueBinary(T(TypeId::kUuid), Bytes(15, 0)).ok());
  EXPECT_FALSE(FromSingleValueBinary(Type::Fixed(4), Bytes(3, 0)).ok());
  EXPECT_FALSE(FromSingleValueBinary(Type::Decimal(9, 2), Bytes{}).ok());
  EXPECT_FALSE(FromSingleValueBinary(Type::Decimal(38, 2), Bytes(17, 0)).ok());
  // Five bytes hold more than nine digits.
  EXPECT_FALSE(
      FromSingleValueBinary(Type::Decimal(9, 2), Bytes{0x7f, 0xff, 0xff, 0xff, 0xff}).ok());
  auto s = FromSingleValueBinary(T(TypeId::kInt), Bytes{1, 2, 3});
  EXPECT_NE(s.status().message().find("3 bytes"), std::string::npos) << s.status().message();
}

TEST(SingleValueTest, NullNestedAndMismatchedValuesAreErrors) {
  EXPECT_FALSE(ToSingleValueBinary(T(TypeId::kInt), Value::Null()).ok());
  EXPECT_FALSE(ToSingleValueBinary(T(TypeId::kInt), Value::Long(1)).ok());
  EXPECT_FALSE(ToSingleValueBinary(Type::Fixed(2), Value::Binary({1})).ok());
  EXPECT_FALSE(ToSingleValueBinary(Type::List(1, T(TypeId::kInt), true), Value::Int(1)).ok());
}

TEST(SingleValueTest, UuidText) {
  EXPECT_FALSE(ParseUuid("f79c3e09677c4bbda4793f349cb785e7").ok());
  EXPECT_FALSE(ParseUuid("g79c3e09-677c-4bbd-a479-3f349cb785e7").ok());
  auto u = ParseUuid("F79C3E09-677C-4BBD-A479-3F349CB785E7");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(UuidToString(*u), "f79c3e09-677c-4bbd-a479-3f349cb785e7");
}

TEST(SingleValueTest, CalendarHelpers) {
  EXPECT_EQ(DaysFromCivil(1970, 1, 1), 0);
  EXPECT_EQ(DaysFromCivil(1969, 12, 31), -1);
  EXPECT_EQ(DaysFromCivil(2000, 3, 1), 11017);
  int64_t y;
  unsigned m, d;
  CivilFromDays(-1, &y, &m, &d);
  EXPECT_EQ(y, 1969);
  EXPECT_EQ(m, 12u);
  EXPECT_EQ(d, 31u);
}

}  // namespace
}  // namespace single_value_test
}  // namespace sluice::lake
