// topic()'s value schema without a broker: `columns =>` strings, good and bad, and what a
// sample of message values infers.
#include "query/topic_scan/value_schema.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::query {
namespace {

constexpr std::string_view kReserved[] = {"partition", "offset", "timestamp", "key", "value"};

std::string Describe(const std::vector<ValueColumn>& columns) {
  std::string out;
  for (const ValueColumn& c : columns)
    out += (out.empty() ? "" : ", ") + c.name + " " + std::string(TypeName(c.type));
  return out;
}

std::string Parsed(std::string_view text) {
  Result<std::vector<ValueColumn>> r = ParseValueColumns(text, kReserved);
  return r.ok() ? Describe(*r) : "error: " + r.status().message();
}

TEST(ValueSchemaTest, DeclaredColumnsParse) {
  EXPECT_EQ(Parsed("user_id BIGINT, city VARCHAR, amount DOUBLE"),
            "user_id BIGINT, city VARCHAR, amount DOUBLE");
  EXPECT_EQ(
      Parsed(
          "  a int ,b   double  precision,c text, d json, e bool, f real, g smallint, h tinyint "),
      "a INTEGER, b DOUBLE, c VARCHAR, d JSON, e BOOLEAN, f FLOAT, g SMALLINT, h TINYINT");
  EXPECT_EQ(Parsed(R"("my col" BIGINT, "a""b" VARCHAR)"), "my col BIGINT, a\"b VARCHAR");
}

TEST(ValueSchemaTest, BadDeclarationsAreErrors) {
  EXPECT_NE(Parsed("").find("expected a column name"), std::string::npos);
  EXPECT_NE(Parsed("a BIGINT,").find("expected a column name"), std::string::npos);
  EXPECT_NE(Parsed("a").find("has no type"), std::string::npos);
  EXPECT_NE(Parsed("a BIGINT, b").find("'b' has no type"), std::string::npos);
  EXPECT_NE(Parsed("a DECIMAL(10, 2)").find("unknown or unsupported type"), std::string::npos);
  EXPECT_NE(Parsed("a TIMESTAMP").find("unknown or unsupported type 'TIMESTAMP'"),
            std::string::npos);
  EXPECT_NE(Parsed("a BIGINT, A VARCHAR").find("declared twice"), std::string::npos);
  EXPECT_NE(Parsed("Offset BIGINT").find("topic()'s own columns"), std::string::npos);
  EXPECT_NE(Parsed("\"a BIGINT").find("unterminated"), std::string::npos);
  EXPECT_NE(Parsed("(a) BIGINT").find("expected a column name"), std::string::npos);
}

TEST(ValueSchemaTest, InferenceWidensMixedKinds) {
  std::vector<std::string> samples = {
      R"({"id": 1, "price": 2, "name": "a", "ok": true, "tags": ["x"], "meta": {"k": 1}, "mixed": 1, "n": null})",
      R"({"id": 2, "price": 2.5, "name": "b", "ok": false, "tags": [], "meta": null, "mixed": "one", "n": null,
          "deep": {"a": [1]}, "late": "x", "ID": 3, "Key": "dropped", "": 1, "both": 1})",
      "not json",
      "[1, 2]",
      "",
      R"({"both": [1]})"};
  EXPECT_EQ(Describe(InferValueColumns(samples, kReserved)),
            "id BIGINT, price DOUBLE, name VARCHAR, ok BOOLEAN, tags JSON, meta JSON, mixed "
            "VARCHAR, n JSON, "
            "deep JSON, late VARCHAR, both JSON");
  EXPECT_EQ(Describe(InferValueColumns(samples, kReserved, 2)), "id BIGINT, price DOUBLE");
  EXPECT_EQ(Describe(InferValueColumns({}, kReserved)), "");
  // Integers past BIGINT make a DOUBLE.
  std::vector<std::string> big = {R"({"u": 1})", R"({"u": 18446744073709551615})"};
  EXPECT_EQ(Describe(InferValueColumns(big, kReserved)), "u DOUBLE");
}

}  // namespace
}  // namespace sluice::query
