// Framed keys (key_column.h) decoded by the pipeline's FramedDecoder into kafka_key: a
// record key as a STRUCT, a primitive key as its type, a Protobuf key into a declared
// STRUCT column, a writer version change mid-batch, null keys and keys that do not decode.
// The schemas come from a real Registry over a log kept in memory; the payloads are written
// byte by byte as the Avro and Protobuf specifications lay them out.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "duck/database.h"
#include "schema/framed_decoder.h"
#include "schema/registry/registry.h"
#include "schema/registry/tests/memory_log.h"
#include "schema/schema_source.h"
#include "schema/tests/avro_bytes.h"

namespace sluice::schema {
namespace {

using kafka::client::Message;
using Rows = std::vector<std::vector<std::optional<std::string>>>;

constexpr const char* kOrder =
    R"({"type":"record","name":"Order","fields":[{"name":"total","type":"long"}]})";
constexpr const char* kKeyV1 =
    R"({"type":"record","name":"OrderKey","fields":[{"name":"shop","type":"string"},{"name":"id","type":"long"}]})";
constexpr const char* kKeyV2 =
    R"({"type":"record","name":"OrderKey","fields":[{"name":"shop","type":"string"},{"name":"id","type":"long"},{"name":"tags","type":{"type":"array","items":"string"},"default":[]}]})";

using testing::Framed;
using testing::Str;
using testing::Zigzag;

class FramedKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_.registry = &registry_;
    source_ = MakeRegistrySchemaSource(&registry_);
    auto db = duck::Database::Open({.memory_limit_bytes = 256 << 20, .threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(conn).value();
  }
  int32_t Register(std::string_view subject, std::string text,
                   SchemaType type = SchemaType::kAvro) {
    registry::SchemaInput in;
    in.type = type;
    in.text = std::move(text);
    auto r = registry_.Register(subject, in, false);
    EXPECT_TRUE(r.ok()) << r.error.message;
    return r.ok() ? r.value->id : -1;
  }
  // Keeps the bytes the messages point into.
  void Add(std::optional<std::string> key, std::string value) {
    keys_.push_back(std::move(key));
    values_.push_back(std::move(value));
  }
  std::vector<Message> Messages() {
    std::vector<Message> out;
    for (size_t i = 0; i < values_.size(); ++i) {
      Message m;
      m.topic = "orders";
      m.partition = 0;
      m.offset = static_cast<int64_t>(i);
      if (keys_[i]) m.key = *keys_[i];
      m.value = values_[i];
      out.push_back(m);
    }
    return out;
  }
  Rows Query(std::string_view sql) {
    auto r = conn_->QueryText(sql);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Rows{};
  }

  registry::MemoryLog log_;
  registry::Registry registry_{&log_};
  std::shared_ptr<SchemaSource> source_;
  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
  std::vector<std::optional<std::string>> keys_;
  std::vector<std::string> values_;
};

// Inferred: kafka_key has the key subject's record as a STRUCT; a version change of the
// key's writer mid-batch, a null key, a key that is not framed and a truncated key.
TEST_F(FramedKeysTest, InferredRecordKeys) {
  const int32_t value_id = Register("orders-value", kOrder);
  const int32_t k1 = Register("orders-key", kKeyV1);
  const int32_t k2 = Register("orders-key", kKeyV2);
  auto dec = FramedDecoder::Create(*conn_, source_,
                                   {.format = PayloadFormat::kAvro,
                                    .subject = "orders-value",
                                    .key_format = PayloadFormat::kAvro,
                                    .key_subject = "orders-key"});
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_NE((*dec)->schema_sql().find(
                R"(kafka_key STRUCT("shop" VARCHAR, "id" BIGINT, "tags" VARCHAR[]))"),
            std::string::npos)
      << (*dec)->schema_sql();
  Add(Framed(k1, Str("berlin") + Zigzag(7)), Framed(value_id, Zigzag(100)));
  Add(Framed(k2, Str("paris") + Zigzag(8) + Zigzag(2) + Str("a") + Str("b") + Zigzag(0)),
      Framed(value_id, Zigzag(200)));
  Add(std::nullopt, Framed(value_id, Zigzag(300)));
  Add(std::string("plain key"), Framed(value_id, Zigzag(400)));
  Add(Framed(k1, Str("berlin")), Framed(value_id, Zigzag(500)));
  Add(Framed(k1, Str("rome") + Zigzag(9)), Framed(value_id, Zigzag(600)));
  std::vector<json::DecodeError> errors;
  auto rows = (*dec)->Decode(Messages(), &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 4u);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].index, 3u);
  EXPECT_NE(errors[0].reason.find("key: not in the Confluent framing"), std::string::npos)
      << errors[0].reason;
  EXPECT_EQ(errors[1].index, 4u);
  EXPECT_EQ(errors[1].reason.rfind("key: ", 0), 0u) << errors[1].reason;
  EXPECT_EQ(Query("SELECT total, kafka_key.shop, kafka_key.id, kafka_key.tags, kafka_key IS NULL "
                  "FROM batch ORDER BY total"),
            (Rows{{"100", "berlin", "7", "[]", "false"},
                  {"200", "paris", "8", "[a, b]", "false"},
                  {"300", std::nullopt, std::nullopt, std::nullopt, "true"},
                  {"600", "rome", "9", "[]", "false"}}));
}

// StructuredBatch: the declared kafka_key column takes the key (a primitive Avro schema);
// a table without that column is refused.
TEST_F(FramedKeysTest, StructuredPrimitiveKey) {
  const int32_t value_id = Register("orders-value", kOrder);
  const int32_t key_id = Register("orders-key", R"("string")");
  ASSERT_TRUE(conn_->Execute("CREATE TABLE orders (total BIGINT, kafka_key VARCHAR)").ok());
  auto dec = FramedDecoder::Create(
      *conn_, source_,
      {.format = PayloadFormat::kAvro, .table = "orders", .key_format = PayloadFormat::kAvro});
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  Add(Framed(key_id, Str("k-1")), Framed(value_id, Zigzag(1)));
  Add(std::nullopt, Framed(value_id, Zigzag(2)));
  Add(Framed(value_id, Zigzag(5)), Framed(value_id, Zigzag(3)));  // a record key
  std::vector<json::DecodeError> errors;
  auto rows = (*dec)->Decode(Messages(), &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 2u);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].index, 2u);
  EXPECT_NE(errors[0].reason.find("is a record; the key column is VARCHAR"), std::string::npos)
      << errors[0].reason;
  EXPECT_EQ(Query("SELECT total, kafka_key FROM orders ORDER BY total"),
            (Rows{{"1", "k-1"}, {"2", std::nullopt}}));

  ASSERT_TRUE(conn_->Execute("CREATE TABLE bare (total BIGINT)").ok());
  auto refused = FramedDecoder::Create(
      *conn_, source_,
      {.format = PayloadFormat::kAvro, .table = "bare", .key_format = PayloadFormat::kAvro});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("the column kafka_key, which table 'bare' lacks"),
            std::string::npos)
      << refused.status().ToString();
}

// Protobuf keys (with and without message indexes) into a declared STRUCT column; a
// scalar column for a Protobuf key is refused.
TEST_F(FramedKeysTest, ProtobufKeyIntoStruct) {
  const int32_t value_id = Register("orders-value", kOrder);
  const int32_t key_id = Register(
      "orders-key", "syntax = \"proto3\";\nmessage Key { string region = 1; int64 n = 2; }\n",
      SchemaType::kProtobuf);
  ASSERT_TRUE(
      conn_
          ->Execute(
              "CREATE TABLE orders (kafka_key STRUCT(region VARCHAR, n BIGINT), total BIGINT)")
          .ok());
  auto dec = FramedDecoder::Create(
      *conn_, source_,
      {.format = PayloadFormat::kAvro, .table = "orders", .key_format = PayloadFormat::kProtobuf});
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  const std::string key = std::string("\x0a\x02") + "eu" + "\x10\x2a";  // region "eu", n 42
  Add(Framed(key_id, std::string(1, '\0') + key), Framed(value_id, Zigzag(1)));
  Add(Framed(key_id, key), Framed(value_id, Zigzag(2)));  // no indexes (the npm client)
  Add(Framed(key_id, std::string(1, '\0') + "\x0a\x09" + "eu"), Framed(value_id, Zigzag(3)));
  std::vector<json::DecodeError> errors;
  auto rows = (*dec)->Decode(Messages(), &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 2u);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].reason.rfind("key: ", 0), 0u) << errors[0].reason;
  EXPECT_EQ(Query("SELECT total, kafka_key.region, kafka_key.n FROM orders ORDER BY total"),
            (Rows{{"1", "eu", "42"}, {"2", "eu", "42"}}));

  ASSERT_TRUE(conn_->Execute("CREATE TABLE scalar_key (kafka_key VARCHAR, total BIGINT)").ok());
  auto refused = FramedDecoder::Create(*conn_, source_,
                                       {.format = PayloadFormat::kAvro,
                                        .table = "scalar_key",
                                        .key_format = PayloadFormat::kProtobuf});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("a Protobuf key is a message"), std::string::npos);
}

// Inferred, no key subject: kafka_key is typed by the first framed key of the batch (null
// keys before it are NULL); with no framed key in the first batch, keys stay bytes.
TEST_F(FramedKeysTest, InferredKeyFromTheFirstFramedKey) {
  const int32_t value_id = Register("orders-value", kOrder);
  const int32_t key_id = Register("other-key", R"("long")");
  auto dec = FramedDecoder::Create(*conn_, source_,
                                   {.format = PayloadFormat::kAvro,
                                    .subject = "orders-value",
                                    .key_format = PayloadFormat::kAvro,
                                    .key_subject = "orders-key"});
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ((*dec)->schema_sql(), "");
  Add(std::nullopt, Framed(value_id, Zigzag(1)));
  Add(Framed(key_id, Zigzag(77)), Framed(value_id, Zigzag(2)));
  Add(std::nullopt, Framed(value_id, Zigzag(3)));
  std::vector<json::DecodeError> errors;
  auto rows = (*dec)->Decode(Messages(), &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 3u);
  EXPECT_TRUE(errors.empty()) << errors[0].reason;
  EXPECT_EQ(
      Query("SELECT total, kafka_key, typeof(kafka_key) FROM batch ORDER BY total"),
      (Rows{{"1", std::nullopt, "BIGINT"}, {"2", "77", "BIGINT"}, {"3", std::nullopt, "BIGINT"}}));
}

TEST_F(FramedKeysTest, KeysStayBytesWhenNoKeySchemaIsFound) {
  const int32_t value_id = Register("orders-value", kOrder);
  auto dec = FramedDecoder::Create(*conn_, source_,
                                   {.format = PayloadFormat::kAvro,
                                    .subject = "orders-value",
                                    .key_format = PayloadFormat::kAvro,
                                    .key_subject = "orders-key"});
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  Add(std::nullopt, Framed(value_id, Zigzag(1)));
  Add(std::string("raw"), Framed(value_id, Zigzag(2)));
  std::vector<json::DecodeError> errors;
  auto rows = (*dec)->Decode(Messages(), &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 2u);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(Query("SELECT total, kafka_key::VARCHAR, typeof(kafka_key) FROM batch ORDER BY total"),
            (Rows{{"1", std::nullopt, "BLOB"}, {"2", "raw", "BLOB"}}));
}

// A non-record key into a STRUCT column is refused, not filled by position.
TEST_F(FramedKeysTest, NonRecordKeyIntoStructIsAnError) {
  const int32_t value_id = Register("orders-value", kOrder);
  const int32_t key_id = Register("orders-key", R"("string")");
  ASSERT_TRUE(
      conn_->Execute("CREATE TABLE orders (total BIGINT, kafka_key STRUCT(a VARCHAR))").ok());
  auto dec = FramedDecoder::Create(
      *conn_, source_,
      {.format = PayloadFormat::kAvro, .table = "orders", .key_format = PayloadFormat::kAvro});
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  Add(Framed(key_id, Str("user0")), Framed(value_id, Zigzag(1)));
  std::vector<json::DecodeError> errors;
  auto rows = (*dec)->Decode(Messages(), &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 0u);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].reason.find("is not a record; the key column is STRUCT"), std::string::npos)
      << errors[0].reason;
}

}  // namespace
}  // namespace sluice::schema
