// topic()'s value schema without a broker: `columns =>` strings, good and bad, and what a
// sample of message values infers.
#include "query/topic_scan/value_schema.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "duck/database.h"
#include "json/json_decoder.h"

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

// topic()'s inference is the pipeline's InferredDecoder's, with topic()'s types: over the
// same messages both see the same columns in the same order, and the same types where the
// two rules agree (booleans, strings, numbers with a fraction, conflicting scalars).
TEST(ValueSchemaTest, SameColumnsAsThePipelinesInference) {
  const std::vector<std::string> samples = {
      R"({"event": "click", "ok": true, "amount": 1.5, "user": {"id": 7}, "tags": ["a"]})",
      R"({"Event": "view", "mixed": 1, "amount": 2, "note": null, "user": null})",
      R"({"mixed": "x", "": 1, "late": false})",
      "not json",
      "[1]",
      R"({"truncated": )"};
  auto db = duck::Database::Open({.memory_limit_bytes = 128 << 20, .threads = 1});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto conn = duck::Connection::Open(**db);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  auto decoder = json::InferredDecoder::Create(**conn);
  ASSERT_TRUE(decoder.ok()) << decoder.status().ToString();
  std::vector<kafka::client::Message> messages(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) messages[i].value = samples[i];
  std::vector<json::DecodeError> errors;
  ASSERT_TRUE((*decoder)->Decode(messages, &errors).ok());
  auto described = (*conn)->QueryText(
      "SELECT column_name, column_type FROM (DESCRIBE batch) WHERE column_name NOT LIKE 'kafka_%'");
  ASSERT_TRUE(described.ok()) << described.status().ToString();
  std::string pipeline;
  for (const auto& row : *described)
    pipeline += (pipeline.empty() ? "" : ", ") + *row[0] + " " + *row[1];
  EXPECT_EQ(pipeline,
            "event VARCHAR, ok BOOLEAN, amount DOUBLE, user STRUCT(id DOUBLE), tags VARCHAR[], "
            "mixed VARCHAR, note VARCHAR, late BOOLEAN");
  EXPECT_EQ(Describe(InferValueColumns(samples, kReserved)),
            "event VARCHAR, ok BOOLEAN, amount DOUBLE, user JSON, tags JSON, mixed VARCHAR, "
            "note JSON, late BOOLEAN");
}

}  // namespace
}  // namespace sluice::query
