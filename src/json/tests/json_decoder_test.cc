// StructuredDecoder and InferredDecoder: every type mapping, NULLs, nesting, escapes, bad
// input, chunk boundaries. Results are read back with SQL and, where the semantics are the
// same, compared with DuckDB's own read_json over the same lines.
#include "json/json_decoder.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <deque>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace sluice::json {
namespace {

using Rows = std::vector<std::vector<std::optional<std::string>>>;
using kafka::client::Message;

// The parameter: decoders keep batches in memory behind a view (in_memory) or fill tables.
class JsonDecoderTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto db = duck::Database::Open({.memory_limit_bytes = 512 << 20, .threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(*conn);
  }
  void TearDown() override {
    decoder_.reset();
    for (const std::string& f : files_) std::remove(f.c_str());
  }

  void Exec(const std::string& sql) {
    Status st = conn_->Execute(sql);
    ASSERT_TRUE(st.ok()) << sql << ": " << st.ToString();
  }
  Rows Query(const std::string& sql) {
    auto r = conn_->QueryText(sql);
    EXPECT_TRUE(r.ok()) << sql << ": " << r.status().ToString();
    return r.ok() ? *r : Rows{};
  }
  std::string One(const std::string& sql) {
    Rows r = Query(sql);
    if (r.size() != 1 || r[0].size() != 1) return "<not one value>";
    return r[0][0].value_or("NULL");
  }

  // Messages whose values are `values` (kept alive by the fixture).
  std::vector<Message> Messages(const std::vector<std::string>& values) {
    std::vector<Message> out;
    for (const std::string& v : values) {
      const std::string& kept = storage_.emplace_back(v);
      Message m;
      m.topic = "events";
      m.partition = 0;
      m.offset = static_cast<int64_t>(out.size());
      m.timestamp_ms = 1714564800000 + static_cast<int64_t>(out.size());
      m.value = std::string_view(kept.data(), kept.size());
      out.push_back(m);
    }
    return out;
  }

  std::string WriteLines(const std::vector<std::string>& lines) {
    std::string path = fmt::format("/tmp/json_decoder_test_{}_{}.jsonl", getpid(), files_.size());
    std::ofstream out(path, std::ios::binary);
    for (const std::string& l : lines) out << l << "\n";
    files_.push_back(path);
    return path;
  }

  std::unique_ptr<StructuredDecoder> Structured(const std::string& table) {
    auto d = StructuredDecoder::Create(*conn_, table, {.in_memory = GetParam()});
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? std::move(*d) : nullptr;
  }
  Result<std::unique_ptr<InferredDecoder>> Inferred(InferredOptions options = {}) {
    options.in_memory = GetParam();
    return InferredDecoder::Create(*conn_, options);
  }

  // Decodes `lines` into a new table t(`columns`) and checks it against read_json with
  // `read_json_columns` over the same lines; returns the decode errors.
  std::vector<DecodeError> DecodeAndCompare(const std::string& columns,
                                            const std::string& read_json_columns,
                                            const std::vector<std::string>& lines) {
    decoder_.reset();
    Exec("CREATE OR REPLACE TABLE t (" + columns + ")");
    // Kept: an in-memory batch is only visible while its decoder lives.
    decoder_ = Structured("t");
    if (!decoder_) return {};
    std::vector<DecodeError> errors;
    auto rows = decoder_->Decode(Messages(lines), &errors);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    EXPECT_TRUE(errors.empty()) << errors[0].reason;
    std::string path = WriteLines(lines);
    Rows ours = Query("SELECT * FROM t");
    Rows theirs =
        Query(fmt::format("SELECT * FROM read_json('{}', format='newline_delimited', columns={})",
                          path, read_json_columns));
    EXPECT_EQ(ours, theirs);
    return errors;
  }

  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
  std::unique_ptr<StructuredDecoder> decoder_;  // DecodeAndCompare's
  std::deque<std::string> storage_;
  std::vector<std::string> files_;
};

const char* kSample =
    R"({"event":"page_view","timestamp":"2024-05-01T12:00:00.123Z","user_id":"u-123456","properties":{"city":"Berlin","amount":12.5}})";

TEST_P(JsonDecoderTest, SampleEventsMatchReadJson) {
  std::vector<std::string> lines;
  for (int i = 0; i < 50; ++i) {
    lines.push_back(fmt::format(
        R"({{"event":"e{}","timestamp":"2024-05-01T12:00:{:02}.{}Z","user_id":"u-{}","properties":{{"city":"C{}","amount":{}.25}}}})",
        i % 3, i, i * 7, i, i % 5, i));
  }
  DecodeAndCompare(
      "event VARCHAR, timestamp TIMESTAMP, user_id VARCHAR, properties STRUCT(city VARCHAR, amount "
      "DOUBLE)",
      "{event: 'VARCHAR', timestamp: 'TIMESTAMP', user_id: 'VARCHAR', properties: 'STRUCT(city "
      "VARCHAR, amount DOUBLE)'}",
      lines);
  EXPECT_EQ(One("SELECT properties.city FROM t WHERE user_id = 'u-7'"), "C2");
}

TEST_P(JsonDecoderTest, EveryScalarTypeMatchesReadJson) {
  std::string cols =
      "b BOOLEAN, i8 TINYINT, i16 SMALLINT, i32 INTEGER, i64 BIGINT, u8 UTINYINT, u16 USMALLINT, "
      "u32 UINTEGER, u64 UBIGINT, f FLOAT, d DOUBLE, s VARCHAR, bl BLOB, dt DATE, ts TIMESTAMP, "
      "tz TIMESTAMPTZ, tss TIMESTAMP_S, tsm TIMESTAMP_MS, tsn TIMESTAMP_NS";
  std::string rj =
      "{b:'BOOLEAN', i8:'TINYINT', i16:'SMALLINT', i32:'INTEGER', i64:'BIGINT', u8:'UTINYINT', "
      "u16:'USMALLINT', u32:'UINTEGER', u64:'UBIGINT', f:'FLOAT', d:'DOUBLE', s:'VARCHAR', "
      "bl:'BLOB', dt:'DATE', ts:'TIMESTAMP', tz:'TIMESTAMPTZ', tss:'TIMESTAMP_S', "
      "tsm:'TIMESTAMP_MS', tsn:'TIMESTAMP_NS'}";
  DecodeAndCompare(
      cols, rj,
      {R"({"b":true,"i8":-128,"i16":32767,"i32":-2147483648,"i64":9223372036854775807,"u8":255,"u16":65535,"u32":4294967295,"u64":18446744073709551615,"f":1.5,"d":-2.5e-300,"s":"x","bl":"bytes","dt":"2024-02-29","ts":"2024-05-01T12:00:00.123456Z","tz":"2024-05-01T12:00:00.5+02:00","tss":"2024-05-01 12:00:01","tsm":"2024-05-01T12:00:00.123Z","tsn":"2024-05-01T12:00:00.123456789Z"})",
       R"({"b":false,"i8":127,"i16":-32768,"i32":2147483647,"i64":-9223372036854775808,"u8":0,"u16":0,"u32":0,"u64":0,"f":-3.25,"d":1e300,"s":"","bl":"","dt":"1969-12-31","ts":"1900-01-01","tz":"2024-05-01T12:00:00Z","tss":"1970-01-01T00:00:00Z","tsm":"2000-01-01T00:00:00.001Z","tsn":"2024-05-01T00:00:00Z"})",
       R"({})"});
}

TEST_P(JsonDecoderTest, NullsMissingAndExtraKeys) {
  DecodeAndCompare(
      "a INTEGER, b VARCHAR, c STRUCT(x INTEGER, y VARCHAR), d INTEGER[]",
      "{a:'INTEGER', b:'VARCHAR', c:'STRUCT(x INTEGER, y VARCHAR)', d:'INTEGER[]'}",
      {R"({"a":null,"b":null,"c":null,"d":null})", R"({"z":1,"y":{"q":[1,{"r":null}]}})",
       R"({"c":{"x":1},"extra":"ignored","d":[1,null,3]})", R"({"c":{"y":"only y","w":5}})",
       R"({"b":"last"})"});
  EXPECT_EQ(One("SELECT count(*) FROM t WHERE c IS NULL"), "3");
  EXPECT_EQ(One("SELECT c.y FROM t WHERE c.x IS NULL AND c IS NOT NULL"), "only y");
}

TEST_P(JsonDecoderTest, NestedStructsAndListsMatchReadJson) {
  DecodeAndCompare(
      "id INTEGER, tags VARCHAR[], items STRUCT(sku VARCHAR, qty INTEGER, opts INTEGER[])[], "
      "grid DOUBLE[][], meta STRUCT(inr STRUCT(deep VARCHAR[], n BIGINT), ts TIMESTAMP)",
      "{id:'INTEGER', tags:'VARCHAR[]', items:'STRUCT(sku VARCHAR, qty INTEGER, opts "
      "INTEGER[])[]', "
      "grid:'DOUBLE[][]', meta:'STRUCT(inr STRUCT(deep VARCHAR[], n BIGINT), ts TIMESTAMP)'}",
      {R"({"id":1,"tags":["a","b"],"items":[{"sku":"x","qty":2,"opts":[1,2]},{"sku":"y","qty":null}],"grid":[[1,2],[],[3.5]],"meta":{"inr":{"deep":["p","q"],"n":7},"ts":"2024-01-01T00:00:00"}})",
       R"({"id":2,"tags":[],"items":[],"grid":[],"meta":{"inr":null}})",
       R"({"id":3,"tags":null,"items":[null,{"opts":[]}],"grid":[null,[null]],"meta":{}})",
       R"({"id":4})"});
}

TEST_P(JsonDecoderTest, UnicodeAndEscapesMatchReadJson) {
  DecodeAndCompare(
      "s VARCHAR, t VARCHAR[]", "{s:'VARCHAR', t:'VARCHAR[]'}",
      {R"({"s":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \n\t\r\b\f"})",
       "{\"s\":\"Gr\xc3\xbc\xc3\x9f"
       "e \xe2\x82\xac \xf0\x9f\x98\x80\",\"t\":[\"\xe6\x97\xa5\xe6\x9c\xac\",\"\\u0000x\"]}",
       R"({"s\u0041":"key with an escape is still s? no: sA"})",
       std::string("{\"s\":\"") + std::string(100, 'a') + "\"}"});
}

TEST_P(JsonDecoderTest, TimestampsAndDates) {
  Exec("CREATE TABLE t (n INTEGER, ts TIMESTAMP, tz TIMESTAMPTZ, d DATE, ns TIMESTAMP_NS)");
  auto dec = Structured("t");
  std::vector<DecodeError> errors;
  auto rows = dec->Decode(
      Messages(
          {R"({"n":1,"ts":"2024-05-01T12:00:00+02:00","tz":"2024-05-01T12:00:00+02:00","d":"2024-05-01T23:59:59Z"})",
           R"({"n":2,"ts":"2024-05-01 12:00","tz":"2024-05-01T12:00:00.1-0530","d":"2024-5-1"})",
           R"({"n":3,"ts":1714564800,"tz":1714564800123,"ns":1714564800123456789})",
           R"({"n":4,"ts":1714564800123456,"tz":1714564800.5})", R"({"n":5,"ts":"2024-02-30"})",
           R"({"n":6,"tz":"yesterday"})", R"({"n":7,"d":20240501})", R"({"n":8,"ts":true})"}),
      &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 4u);
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0].index, 4u);
  EXPECT_NE(errors[0].reason.find("key 'ts'"), std::string::npos) << errors[0].reason;
  EXPECT_NE(errors[0].reason.find("\"2024-02-30\""), std::string::npos) << errors[0].reason;
  EXPECT_NE(errors[1].reason.find("key 'tz'"), std::string::npos) << errors[1].reason;
  EXPECT_NE(errors[2].reason.find("key 'd'"), std::string::npos) << errors[2].reason;
  EXPECT_NE(errors[3].reason.find("expected a timestamp string or number, got a boolean"),
            std::string::npos)
      << errors[3].reason;
  // TIMESTAMP keeps the wall-clock time as DuckDB's cast does; TIMESTAMPTZ is the instant.
  Rows r = Query("SELECT ts::VARCHAR, tz::VARCHAR, d::VARCHAR, ns::VARCHAR FROM t ORDER BY n");
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0][0], Query("SELECT '2024-05-01T12:00:00+02:00'::TIMESTAMP::VARCHAR")[0][0]);
  EXPECT_EQ(r[0][1], "2024-05-01 10:00:00+00");
  EXPECT_EQ(r[0][2], "2024-05-01");
  EXPECT_EQ(r[1][0], "2024-05-01 12:00:00");
  EXPECT_EQ(r[1][1], "2024-05-01 17:30:00.1+00");
  EXPECT_EQ(r[1][2], "2024-05-01");
  EXPECT_EQ(r[2][0], "2024-05-01 12:00:00");            // epoch seconds
  EXPECT_EQ(r[2][1], "2024-05-01 12:00:00.123+00");     // epoch milliseconds
  EXPECT_EQ(r[2][3], "2024-05-01 12:00:00.123456789");  // epoch nanoseconds
  EXPECT_EQ(r[3][0], "2024-05-01 12:00:00.123456");     // epoch microseconds
  EXPECT_EQ(r[3][1], "2024-05-01 12:00:00.5+00");       // fractional seconds
}

TEST_P(JsonDecoderTest, NumbersRangeChecksAndCasts) {
  Exec(
      "CREATE TABLE t (n INTEGER, i8 TINYINT, i INTEGER, b BIGINT, u UBIGINT, f FLOAT, d DOUBLE, "
      "ok BOOLEAN)");
  auto dec = Structured("t");
  std::vector<DecodeError> errors;
  auto rows = dec->Decode(
      Messages({R"({"n":1,"i":12.5,"b":"123","u":"18446744073709551615","d":"2.5","ok":"true"})",
                R"({"n":2,"i":13.5,"b":1e3,"d":12,"f":3.4e38,"ok":"F"})", R"({"n":3,"b":"abc"})",
                R"({"n":4,"i":1e300})", R"({"n":5,"i8":128})", R"({"n":6,"b":9223372036854775808})",
                R"({"n":7,"u":-1})", R"({"n":8,"f":1e39})", R"({"n":9,"d":1e400})",
                R"({"n":10,"ok":"maybe"})", R"({"n":11,"i":true})", R"({"n":12,"b":{"x":1}})",
                R"({"n":13,"u":18446744073709551616})", R"({"n":14,"d":[1]})"}),
      &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 2u);
  ASSERT_EQ(errors.size(), 12u);
  const char* expect[] = {"key 'b' (column b BIGINT): \"abc\" is not a number",
                          "key 'i' (column i INTEGER): 1e300 is out of range",
                          "key 'i8' (column i8 TINYINT): 128 is out of range",
                          "key 'b' (column b BIGINT): 9223372036854775808 is out of range",
                          "key 'u' (column u UBIGINT): -1 is out of range",
                          "key 'f' (column f FLOAT)",
                          "key 'd' (column d DOUBLE): 1e400 is out of range",
                          "key 'ok' (column ok BOOLEAN): \"maybe\" is not a boolean",
                          "key 'i' (column i INTEGER): expected a number, got a boolean",
                          "key 'b' (column b BIGINT): expected a number, got an object",
                          "key 'u' (column u UBIGINT): 18446744073709551616 is out of range",
                          "key 'd' (column d DOUBLE): expected a number, got an array"};
  for (size_t i = 0; i < errors.size(); ++i) {
    EXPECT_EQ(errors[i].index, i + 2);
    EXPECT_NE(errors[i].reason.find(expect[i]), std::string::npos) << errors[i].reason;
  }
  // DuckDB rounds fractions half to even when casting to an integer; numeric strings cast.
  Rows r = Query("SELECT i, b, u::VARCHAR, d, ok FROM t ORDER BY n");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], (std::vector<std::optional<std::string>>{"12", "123", "18446744073709551615",
                                                           "2.5", "true"}));
  EXPECT_EQ(r[1],
            (std::vector<std::optional<std::string>>{"14", "1000", std::nullopt, "12.0", "false"}));
}

TEST_P(JsonDecoderTest, VarcharAndJsonColumnsKeepJsonText) {
  Exec("CREATE TABLE t (n INTEGER, v VARCHAR, j JSON)");
  auto dec = Structured("t");
  std::vector<DecodeError> errors;
  auto rows = dec->Decode(
      Messages({R"({"n":1,"v":{"a":[1,2]},"j":{"a":[1,2]}})", R"({"n":2,"v":12.50,"j":"str"})",
                R"({"n":3,"v":true,"j":[true , null]})", R"({"n":4,"v":"plain","j":-0.5e3})"}),
      &errors);
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(errors.empty());
  Rows r = Query("SELECT v, j FROM t ORDER BY n");
  EXPECT_EQ(r, (Rows{{"{\"a\":[1,2]}", "{\"a\":[1,2]}"},
                     {"12.50", "\"str\""},
                     {"true", "[true , null]"},
                     {"plain", "-0.5e3"}}));
}

TEST_P(JsonDecoderTest, BadMessagesAreReportedAndTheRestGoesIn) {
  Exec("CREATE TABLE t (a INTEGER, l INTEGER[])");
  auto dec = Structured("t");
  std::vector<std::string> bad = {
      R"({"a":1)",                     // truncated
      R"({"a":})",                     // missing value
      R"([1,2])",                      // not an object
      R"("str")",                      // not an object
      R"(42)",                         // not an object
      "",                              // empty
      R"({"a":1} x)",                  // trailing content
      R"({"a":1}{"a":2})",             // two objects
      R"({"a":tru})",                  // bad literal
      R"({"unknown":[1,2,}, "a":1})",  // malformed inside an ignored key
      R"({"unknown":{"x":nul}})",      // malformed literal inside an ignored key
      R"({"unknown":01})",             // bad number inside an ignored key
      R"({"a":"\x"})",                 // bad escape
      "{\"a\":\"\xff\xfe\"}",          // invalid UTF-8
      R"({"l":[1,2,"x"]})",            // wrong type inside a list
      R"({"a" 1})",                    // missing colon
      R"({"a":1,})",                   // trailing comma
      "   ",                           // whitespace only
      "not json",                      // text: starts like null, is not JSON
      "null",                          // JSON, not an object
      "fals",                          // a broken literal
      R"({"u":)" + std::string(300, '[') + std::string(300, ']') + "}",  // nested too deep
  };
  std::vector<std::string> values;
  for (const std::string& b : bad) {
    values.push_back(b);
    values.push_back(
        fmt::format(R"({{"a":{},"l":[{},{}]}})", values.size(), values.size(), values.size()));
  }
  std::vector<Message> messages = Messages(values);
  Message tombstone = messages[0];
  tombstone.value = std::string_view();
  messages.push_back(tombstone);
  std::vector<DecodeError> errors;
  auto rows = dec->Decode(messages, &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, bad.size());
  ASSERT_EQ(errors.size(), bad.size() + 1);
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(errors[i].index, 2 * i) << bad[i];
    EXPECT_FALSE(errors[i].reason.empty());
  }
  EXPECT_NE(errors[2].reason.find("expected a JSON object, got an array"), std::string::npos);
  EXPECT_NE(errors[5].reason.find("empty message"), std::string::npos);
  EXPECT_NE(errors[9].reason.find("key 'unknown[2]': invalid JSON"), std::string::npos)
      << errors[9].reason;
  EXPECT_NE(errors[14].reason.find("key 'l[2]' (INTEGER): \"x\" is not a number"),
            std::string::npos)
      << errors[14].reason;
  EXPECT_NE(errors[18].reason.find("invalid JSON"), std::string::npos) << errors[18].reason;
  EXPECT_NE(errors[19].reason.find("expected a JSON object, got null"), std::string::npos)
      << errors[19].reason;
  EXPECT_NE(errors[20].reason.find("invalid JSON"), std::string::npos) << errors[20].reason;
  EXPECT_NE(errors[bad.size() - 1].reason.find("too deep"), std::string::npos)
      << errors[bad.size() - 1].reason;
  EXPECT_NE(errors.back().reason.find("no value"), std::string::npos);
  // The good rows are intact, lists included (a failed row's list entries are dropped).
  EXPECT_EQ(One("SELECT count(*) FROM t WHERE l = [a, a]"), std::to_string(bad.size()));
}

TEST_P(JsonDecoderTest, DuplicateKeysLastWinsAndCaseInsensitiveFallback) {
  Exec("CREATE TABLE t (n INTEGER, user_id VARCHAR, p STRUCT(city VARCHAR))");
  auto dec = Structured("t");
  std::vector<DecodeError> errors;
  ASSERT_TRUE(dec->Decode(Messages({R"({"n":1,"user_id":"a","user_id":"b"})",
                                    R"({"n":2,"User_ID":"c","P":{"CITY":"Rome"}})",
                                    R"({"n":3,"p":{"city":"x"},"p":{}})"}),
                          &errors)
                  .ok());
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(Query("SELECT user_id, p.city FROM t ORDER BY n"),
            (Rows{{"b", std::nullopt}, {"c", "Rome"}, {std::nullopt, std::nullopt}}));

  Exec("CREATE TABLE t2 (user_id VARCHAR)");
  auto strict = StructuredDecoder::Create(
      *conn_, "t2", {.case_insensitive_keys = false, .in_memory = GetParam()});
  ASSERT_TRUE(strict.ok());
  ASSERT_TRUE((*strict)->Decode(Messages({R"({"User_ID":"c"})"}), &errors).ok());
  EXPECT_EQ(One("SELECT count(*) FROM t2 WHERE user_id IS NULL"), "1");
}

TEST_P(JsonDecoderTest, ManyRowsAcrossChunksMatchReadJson) {
  std::vector<std::string> lines;
  for (int i = 0; i < 5000; ++i) {
    lines.push_back(fmt::format(R"({{"id":{},"name":"n{}","tags":[{}],"s":{{"k":{},"l":["{}"]}}}})",
                                i, i, i % 7 == 0 ? "" : fmt::format("\"t{}\",\"u\"", i), i * 2,
                                std::string(i % 40, 'x')));
  }
  DecodeAndCompare(
      "id BIGINT, name VARCHAR, tags VARCHAR[], s STRUCT(k BIGINT, l VARCHAR[])",
      "{id:'BIGINT', name:'VARCHAR', tags:'VARCHAR[]', s:'STRUCT(k BIGINT, l VARCHAR[])'}", lines);
  EXPECT_EQ(One("SELECT count(*) FROM t"), "5000");
}

// Decodes `messages` with a decoder of one thread and one in parts, each on its own
// connection: the same rows in the same order (each connection sees its decoder's view of
// `table`), the same refused messages for the same reasons. Returns the errors.
template <typename Decoder>
std::vector<DecodeError> ExpectSameDecode(Decoder& one, Decoder& parts, duck::Connection& one_conn,
                                          duck::Connection& parts_conn, const std::string& table,
                                          const std::vector<Message>& messages) {
  const size_t batch = messages.size();
  std::vector<DecodeError> one_errors, parts_errors;
  auto one_rows = one.Decode(messages, &one_errors);
  auto parts_rows = parts.Decode(messages, &parts_errors);
  EXPECT_TRUE(one_rows.ok() && parts_rows.ok());
  if (!one_rows.ok() || !parts_rows.ok()) return {};
  EXPECT_EQ(*one_rows, *parts_rows) << "batch " << batch;
  EXPECT_EQ(one_errors.size(), parts_errors.size()) << "batch " << batch;
  for (size_t i = 0; i < std::min(one_errors.size(), parts_errors.size()); ++i) {
    EXPECT_EQ(one_errors[i].index, parts_errors[i].index);
    EXPECT_EQ(one_errors[i].reason, parts_errors[i].reason);
  }
  auto a = one_conn.QueryText("SELECT * FROM " + table);
  auto b = parts_conn.QueryText("SELECT * FROM " + table);
  EXPECT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  if (!a.ok() || !b.ok()) return {};
  EXPECT_EQ(a->size(), *one_rows);
  EXPECT_TRUE(*a == *b) << "batch " << batch;
  return one_errors;
}

// StructuredOptions::threads: a batch decoded in parts on helper threads gives the same
// rows in the same order and the same errors (their indices in the whole batch) as one
// thread, batch after batch, large and small.
TEST(JsonDecoderInParts, SameRowsOrderAndErrorsAsOneThread) {
  auto db = duck::Database::Open({.memory_limit_bytes = 512 << 20, .threads = 1});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto one_conn = duck::Connection::Open(**db);
  auto parts_conn = duck::Connection::Open(**db);
  ASSERT_TRUE(one_conn.ok() && parts_conn.ok());
  ASSERT_TRUE((*one_conn)
                  ->Execute("CREATE TABLE t (id BIGINT, name VARCHAR, tags VARCHAR[], "
                            "s STRUCT(k BIGINT, l VARCHAR[]))")
                  .ok());
  auto one = StructuredDecoder::Create(**one_conn, "t", {.in_memory = true, .threads = 1});
  auto parts = StructuredDecoder::Create(**parts_conn, "t", {.in_memory = true, .threads = 3});
  ASSERT_TRUE(one.ok() && parts.ok());
  std::deque<std::string> storage;
  for (size_t batch : {6001, 700, 1500, 5000, 0, 3000}) {
    std::vector<Message> messages;
    for (size_t i = 0; i < batch; ++i) {
      std::string v =
          i % 97 == 5   ? R"({"id":)"
          : i % 89 == 7 ? R"({"id":"x"})"
          : i % 1200 == 3
              ? std::string("[1]")
              : fmt::format(R"({{"id":{},"name":"n{}","tags":[{}],"s":{{"k":{},"l":["{}"]}}}})",
                            i + batch, i, i % 7 == 0 ? "" : "\"a\",\"b\"", i * 2,
                            std::string(i % 30, 'x'));
      const std::string& kept = storage.emplace_back(std::move(v));
      Message m;
      m.topic = "events";
      m.partition = 0;
      m.offset = static_cast<int64_t>(i);
      m.value = kept;
      messages.push_back(m);
    }
    std::vector<DecodeError> errors =
        ExpectSameDecode(**one, **parts, **one_conn, **parts_conn, "t", messages);
    if (batch > 0) {
      EXPECT_FALSE(errors.empty());
    }
  }
}

// InferredOptions::threads: the rows filled in parts match one thread's, order, errors and
// the kafka_ columns included, across batches whose schema changes and stays.
TEST(JsonDecoderInParts, InferredSameRowsOrderAndErrorsAsOneThread) {
  auto db = duck::Database::Open({.memory_limit_bytes = 512 << 20, .threads = 1});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto one_conn = duck::Connection::Open(**db);
  auto parts_conn = duck::Connection::Open(**db);
  ASSERT_TRUE(one_conn.ok() && parts_conn.ok());
  auto one = InferredDecoder::Create(**one_conn, {.in_memory = true, .threads = 1});
  auto parts = InferredDecoder::Create(**parts_conn, {.in_memory = true, .threads = 3});
  ASSERT_TRUE(one.ok() && parts.ok());
  std::deque<std::string> storage;
  int batch_no = 0;
  for (size_t batch : {6001, 4000, 700, 3000, 0, 2500}) {
    ++batch_no;
    std::vector<Message> messages;
    for (size_t i = 0; i < batch; ++i) {
      // Batch 2 adds a key (a new schema); unterminated objects everywhere; the same key
      // differing in case across parts (batch 4); list elements of two types (batch 1); a
      // key that is a string in one part and a number past DOUBLE's range in another
      // (batch 6: one pass accepts it, as the key is text by then; a part alone would not).
      std::string v = i % 97 == 5                      ? R"({"id":)"
                      : batch_no == 1 && i % 1201 == 3 ? R"({"id":1, "tags":[1,"x"]})"
                      : batch_no == 4 && i == 2500     ? R"({"ID":7, "name":"z"})"
                      : batch_no == 6 && i == 10       ? R"({"id":1, "x":"a"})"
                      : batch_no == 6 && i == 2400
                          ? R"({"id":2, "x":1e999})"
                          : fmt::format(R"({{"id":{},"name":"n{}","tags":[{}]{}}})", i, i,
                                        i % 7 == 0 ? "" : "\"a\"",
                                        batch_no == 2 ? fmt::format(R"(,"extra":{})", i) : "");
      const std::string& kept = storage.emplace_back(std::move(v));
      Message m;
      m.topic = "events";
      m.partition = static_cast<int32_t>(i % 3);
      m.offset = static_cast<int64_t>(i);
      m.timestamp_ms = i % 11 == 0 ? -1 : 1714564800000 + static_cast<int64_t>(i);
      if (i % 13 != 0) m.key = kept.substr(0, 4);
      m.value = kept;
      messages.push_back(m);
    }
    ExpectSameDecode(**one, **parts, **one_conn, **parts_conn, "batch", messages);
    EXPECT_EQ((*one)->schema_sql(), (*parts)->schema_sql());
  }
}

// The schema inferred in parts and merged is the one pass's where the order matters: the
// column limit met only across parts (later keys refused, one pass's way), a struct that
// grows past max_struct_fields only once the parts' fields are together (text), a key of
// two types in two parts (text), and a key whose first value comes in the last part. Into
// a table too (InferredDiskBatch: the schema in parts, the rows in one).
TEST(JsonDecoderInParts, InferredMergesAsOnePassAtTheLimits) {
  auto db = duck::Database::Open({.memory_limit_bytes = 512 << 20, .threads = 1});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  for (bool in_memory : {true, false}) {
    auto one_conn = duck::Connection::Open(**db);
    auto parts_conn = duck::Connection::Open(**db);
    ASSERT_TRUE(one_conn.ok() && parts_conn.ok());
    InferredOptions o{.in_memory = in_memory, .threads = 1};
    o.max_columns = 4;
    o.max_struct_fields = 3;
    auto one = InferredDecoder::Create(**one_conn, o);
    o.threads = 2;
    auto parts = InferredDecoder::Create(**parts_conn, o);
    ASSERT_TRUE(one.ok() && parts.ok());
    std::deque<std::string> storage;
    for (int batch_no = 1; batch_no <= 3; ++batch_no) {
      const size_t batch = 3000;
      std::vector<Message> messages;
      for (size_t i = 0; i < batch; ++i) {
        const bool later = i >= batch / 2;
        std::string v;
        if (batch_no == 1) {
          // Columns id, a, b in the first half; c, d, e in the second: one pass takes c and
          // refuses the messages that bring d or e.
          v = !later ? fmt::format(R"({{"id":{},"a":1,"b":2}})", i)
                     : fmt::format(R"({{"id":{},"{}":{}}})", i, "cde"[i % 3], i);
        } else if (batch_no == 2) {
          // s has fields x, y in the first half and z, w in the second: four, so text.
          v = !later ? fmt::format(R"({{"id":{},"s":{{"x":1,"y":{}}}}})", i, i)
                     : fmt::format(R"({{"id":{},"s":{{"z":{},"w":"q"}}}})", i, i);
        } else {
          // k a number first, a string later (text); n only in the last message.
          v = i == batch - 1 ? R"({"id":1,"n":[1,2]})"
              : !later       ? fmt::format(R"({{"id":{},"k":{}}})", i, i)
                             : fmt::format(R"({{"id":{},"k":"v{}"}})", i, i);
        }
        const std::string& kept = storage.emplace_back(std::move(v));
        Message m;
        m.topic = "events";
        m.offset = static_cast<int64_t>(i);
        m.value = kept;
        messages.push_back(m);
      }
      SCOPED_TRACE(fmt::format("batch {} {}", batch_no, in_memory ? "in memory" : "table"));
      std::vector<DecodeError> errors =
          ExpectSameDecode(**one, **parts, **one_conn, **parts_conn, "batch", messages);
      EXPECT_EQ((*one)->schema_sql(), (*parts)->schema_sql());
      const std::string& schema = (*parts)->schema_sql();
      if (batch_no == 1) {
        EXPECT_EQ(errors.size(), 1000u);  // those with d or e
      } else {
        EXPECT_NE(schema.find(batch_no == 2 ? "\"s\" VARCHAR" : "\"k\" VARCHAR"), std::string::npos)
            << schema;
      }
    }
  }
}

TEST_P(JsonDecoderTest, TenMegabyteMessage) {
  Exec("CREATE TABLE t (s VARCHAR, l BIGINT[])");
  auto dec = Structured("t");
  std::string big_string = R"({"s":")" + std::string(10 << 20, 'z') + R"("})";
  std::string big_list = R"({"l":[)";
  for (int i = 0; i < 1500000; ++i) big_list += (i ? "," : "") + std::to_string(i);
  big_list += "]}";
  std::string big_bad = big_string.substr(0, big_string.size() - 2);  // unterminated
  std::vector<DecodeError> errors;
  auto rows = dec->Decode(Messages({big_string, big_list, big_bad, R"({"s":"small"})"}), &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 3u);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].index, 2u);
  EXPECT_EQ(One("SELECT max(length(s)) FROM t"), std::to_string(10 << 20));
  EXPECT_EQ(One("SELECT sum(len(l)) FROM t"), "1500000");
  EXPECT_EQ(One("SELECT list_sum(l) FROM t WHERE l IS NOT NULL"), "1124999250000");
}

// DuckDB keeps the deleted rows of in-memory and temporary tables: a table emptied with
// DELETE before each batch would hold every batch ever decoded.
TEST_P(JsonDecoderTest, BatchesDoNotAccumulateInDuckDBsMemory) {
  for (const char* columns :
       {"n BIGINT, name VARCHAR", "n BIGINT, price DECIMAL(12,2), name VARCHAR"}) {
    decoder_.reset();
    Exec(fmt::format("CREATE OR REPLACE TABLE t ({}, CHECK (n >= 0))", columns));
    decoder_ = Structured("t");
    ASSERT_NE(decoder_, nullptr);
    std::vector<std::string> lines;
    for (int i = 0; i < 5000; ++i) {
      lines.push_back(
          fmt::format(R"({{"n":{0},"price":{0}.25,"name":"some longer name {0}"}})", i));
    }
    std::vector<Message> messages = Messages(lines);
    auto in_memory_tables = [&] {
      return std::stoll(
          One("SELECT coalesce(sum(memory_usage_bytes + temporary_storage_bytes), 0)::BIGINT "
              "FROM duckdb_memory() WHERE tag = 'IN_MEMORY_TABLE'"));
    };
    int64_t after_first = 0;
    for (int batch = 0; batch < 60; ++batch) {
      std::vector<DecodeError> errors;
      auto rows = decoder_->Decode(messages, &errors);
      ASSERT_TRUE(rows.ok()) << rows.status().ToString();
      ASSERT_EQ(*rows, 5000u);
      if (batch == 0) after_first = in_memory_tables();
    }
    EXPECT_EQ(One("SELECT count(*) FROM t"), "5000") << columns;
    // Sixty batches hold what one did (300,000 rows would take about 30 times as much).
    EXPECT_LE(in_memory_tables(), after_first + (int64_t{2} << 20)) << columns;
    // The table keeps its constraint after being recreated.
    EXPECT_FALSE(conn_->Execute("INSERT INTO t (n) VALUES (-1)").ok()) << columns;
  }
  // A table another references by foreign key cannot be dropped: it is emptied instead.
  decoder_.reset();
  Exec("CREATE OR REPLACE TABLE keyed (n BIGINT PRIMARY KEY, price DECIMAL(12,2))");
  Exec("CREATE TABLE child (n BIGINT REFERENCES keyed (n))");
  decoder_ = Structured("keyed");
  ASSERT_NE(decoder_, nullptr);
  for (int batch = 0; batch < 3; ++batch) {
    std::vector<DecodeError> errors;
    auto rows = decoder_->Decode(Messages({R"({"n":1,"price":2.5})", R"({"n":2})"}), &errors);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    EXPECT_EQ(*rows, 2u);
  }
  EXPECT_EQ(One("SELECT count(*) FROM keyed"), "2");
}

TEST_P(JsonDecoderTest, RareTypesGoThroughDuckDBCasts) {
  Exec("CREATE TYPE mood AS ENUM ('happy', 'sad')");
  Exec(
      "CREATE TABLE t (n INTEGER, price DECIMAL(10,2), id UUID, m MAP(VARCHAR, INTEGER), "
      "h HUGEINT, iv INTERVAL, md mood, s STRUCT(q DECIMAL(4,1), name VARCHAR), tm TIME)");
  auto dec = Structured("t");
  ASSERT_TRUE(dec->staged());
  std::vector<DecodeError> errors;
  std::vector<std::string> lines = {
      R"({"n":1,"price":12.345,"id":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","m":{"a":1,"b":2},"h":123456789012345678901234567890,"iv":"1 day","md":"happy","s":{"q":"1.5","name":"x"},"tm":"01:02:03"})",
      R"({"n":2,"price":"7"})",
      R"({"n":3,"price":"abc"})",
      R"({"n":4,"id":"not-a-uuid"})",
      R"({"n":5,"md":"angry"})",
      R"({"n":6,"s":{"q":1234.5}})",
      R"({"n":7,"price":null,"m":null})",
      R"({"n":"x"})"};
  auto rows = dec->Decode(Messages(lines), &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 3u);
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_EQ(errors[0].index, 2u);
  EXPECT_NE(errors[0].reason.find("column price DECIMAL(10,2)"), std::string::npos)
      << errors[0].reason;
  EXPECT_EQ(errors[1].index, 3u);
  EXPECT_NE(errors[1].reason.find("column id UUID"), std::string::npos) << errors[1].reason;
  EXPECT_EQ(errors[2].index, 4u);
  EXPECT_NE(errors[2].reason.find("column md"), std::string::npos) << errors[2].reason;
  EXPECT_EQ(errors[3].index, 5u);
  EXPECT_NE(errors[3].reason.find("column s"), std::string::npos) << errors[3].reason;
  EXPECT_EQ(errors[4].index, 7u);  // found by the direct path, before DuckDB
  EXPECT_NE(errors[4].reason.find("key 'n' (column n INTEGER)"), std::string::npos)
      << errors[4].reason;
  // The same lines through read_json: identical rows for the ones it accepts.
  std::string path = WriteLines({lines[0], lines[1], lines[6]});
  Rows theirs = Query(fmt::format(
      "SELECT * FROM read_json('{}', format='newline_delimited', columns={{n:'INTEGER', "
      "price:'DECIMAL(10,2)', id:'UUID', m:'MAP(VARCHAR, INTEGER)', h:'HUGEINT', iv:'INTERVAL', "
      "md:'mood', s:'STRUCT(q DECIMAL(4,1), name VARCHAR)', tm:'TIME'}}) ORDER BY n",
      path));
  EXPECT_EQ(Query("SELECT * FROM t ORDER BY n"), theirs);
  // A second batch reuses the staging table and replaces the first.
  ASSERT_TRUE(dec->Decode(Messages({R"({"n":8,"price":1})"}), &errors).ok());
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(Query("SELECT n, price FROM t"), (Rows{{"8", "1.00"}}));
}

TEST_P(JsonDecoderTest, EachDecodeReplacesTheTablesRows) {
  Exec("CREATE TABLE t (n INTEGER)");
  Exec("INSERT INTO t VALUES (100), (101)");  // rows from before the decoder are dropped too
  auto dec = Structured("t");
  std::vector<DecodeError> errors;
  ASSERT_TRUE(dec->Decode(Messages({R"({"n":1})", R"({"n":2})", "oops"}), &errors).ok());
  EXPECT_EQ(Query("SELECT n FROM t ORDER BY n"), (Rows{{"1"}, {"2"}}));
  ASSERT_TRUE(dec->Decode(Messages({R"({"n":3})"}), &errors).ok());
  EXPECT_EQ(Query("SELECT n FROM t"), (Rows{{"3"}}));
  ASSERT_TRUE(dec->Decode(Messages({"bad"}), &errors).ok());
  EXPECT_EQ(errors.size(), 1u);
  EXPECT_EQ(One("SELECT count(*) FROM t"), "0");
}

TEST_P(JsonDecoderTest, UnknownTableIsAnError) {
  auto dec = StructuredDecoder::Create(*conn_, "missing");
  EXPECT_FALSE(dec.ok());
}

// ---- InferredDecoder -----------------------------------------------------------------------

TEST_P(JsonDecoderTest, InferredSampleEvents) {
  auto dec = Inferred();
  ASSERT_TRUE(dec.ok());
  std::vector<Message> messages = Messages({kSample, kSample});
  messages[1].key = "k1";
  messages[1].timestamp_ms = -1;
  messages[1].partition = 3;
  std::vector<DecodeError> errors;
  auto rows = (*dec)->Decode(messages, &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 2u);
  EXPECT_EQ(
      (*dec)->schema_sql(),
      "\"event\" VARCHAR, \"timestamp\" VARCHAR, \"user_id\" VARCHAR, "
      "\"properties\" STRUCT(\"city\" VARCHAR, \"amount\" DOUBLE), \"kafka_topic\" VARCHAR, "
      "\"kafka_partition\" INTEGER, \"kafka_offset\" BIGINT, \"kafka_timestamp\" TIMESTAMPTZ, "
      "\"kafka_key\" BLOB");
  EXPECT_EQ(Query("SELECT event, properties.city, properties.amount, kafka_topic, kafka_partition, "
                  "kafka_offset, kafka_timestamp::VARCHAR, kafka_key::VARCHAR FROM batch ORDER BY "
                  "kafka_offset"),
            (Rows{{"page_view", "Berlin", "12.5", "events", "0", "0", "2024-05-01 12:00:00+00",
                   std::nullopt},
                  {"page_view", "Berlin", "12.5", "events", "3", "1", std::nullopt, "k1"}}));
}

TEST_P(JsonDecoderTest, InferredWideningConflictsAndMissingKeys) {
  auto dec = Inferred();
  ASSERT_TRUE(dec.ok());
  std::vector<DecodeError> errors;
  auto rows = (*dec)->Decode(
      Messages(
          {R"({"n":1,"x":1,"mixed":"a","obj":{"a":1},"arr":[1,2],"nul":null,"empty":[],"eo":{}})",
           R"({"n":2,"x":2.5,"mixed":3,"obj":{"b":"s"},"arr":[3.5,"t"],"late":true})",
           R"({"n":3,"mixed":{"k":[1, 2]},"obj":null,"ARR":null,"N2":1})",
           R"({"n":4,"bad":tru,"neverseen":1})", R"({"n":5,"kafka_offset":"spoof"})"}),
      &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 4u);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].index, 3u);
  EXPECT_NE(errors[0].reason.find("key 'bad'"), std::string::npos) << errors[0].reason;
  // Columns: first-seen order; the bad message added none ("bad", "neverseen").
  EXPECT_EQ(
      (*dec)->schema_sql(),
      "\"n\" DOUBLE, \"x\" DOUBLE, \"mixed\" VARCHAR, \"obj\" STRUCT(\"a\" DOUBLE, \"b\" VARCHAR), "
      "\"arr\" VARCHAR[], \"nul\" VARCHAR, \"empty\" VARCHAR[], \"eo\" VARCHAR, \"late\" BOOLEAN, "
      "\"N2\" DOUBLE, \"kafka_topic\" VARCHAR, \"kafka_partition\" INTEGER, \"kafka_offset\" "
      "BIGINT, "
      "\"kafka_timestamp\" TIMESTAMPTZ, \"kafka_key\" BLOB");
  EXPECT_EQ(Query("SELECT n, x, mixed, obj::VARCHAR, arr::VARCHAR, nul, empty::VARCHAR, eo, late, "
                  "kafka_offset "
                  "FROM batch ORDER BY n"),
            (Rows{{"1.0", "1.0", "a", "{'a': 1.0, 'b': NULL}", "[1, 2]", std::nullopt, "[]", "{}",
                   std::nullopt, "0"},
                  {"2.0", "2.5", "3", "{'a': NULL, 'b': s}", "[3.5, t]", std::nullopt, std::nullopt,
                   std::nullopt, "true", "1"},
                  {"3.0", std::nullopt, "{\"k\":[1, 2]}", std::nullopt, std::nullopt, std::nullopt,
                   std::nullopt, std::nullopt, std::nullopt, "2"},
                  {"5.0", std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                   std::nullopt, std::nullopt, std::nullopt, "4"}}));
  // The next batch recreates the table with its own schema.
  ASSERT_TRUE((*dec)->Decode(Messages({R"({"other":"x"})"}), &errors).ok());
  EXPECT_EQ(One("SELECT count(*) FROM information_schema.columns WHERE table_name = 'batch'"), "6");
  // An empty batch: only the kafka_ columns.
  ASSERT_TRUE((*dec)->Decode({}, &errors).ok());
  EXPECT_EQ(One("SELECT count(*) FROM batch"), "0");
}

TEST_P(JsonDecoderTest, InferredMatchesReadJsonWithTheInferredColumns) {
  std::vector<std::string> lines;
  for (int i = 0; i < 4100; ++i) {
    lines.push_back(fmt::format(
        R"({{"event":"e{}","amount":{},"tags":["a{}","b"],"props":{{"city":"c{}","n":{}}},"flag":{}}})",
        i % 4, i * 0.5, i, i % 9, i, i % 2 ? "true" : "false"));
  }
  auto dec = Inferred();
  ASSERT_TRUE(dec.ok());
  std::vector<DecodeError> errors;
  auto rows = (*dec)->Decode(Messages(lines), &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, lines.size());
  std::string path = WriteLines(lines);
  EXPECT_EQ(Query("SELECT event, amount, tags, props, flag FROM batch ORDER BY kafka_offset"),
            Query(fmt::format("SELECT * FROM read_json('{}', format='newline_delimited', "
                              "columns={{event:'VARCHAR', amount:'DOUBLE', tags:'VARCHAR[]', "
                              "props:'STRUCT(city VARCHAR, n DOUBLE)', flag:'BOOLEAN'}})",
                              path)));
}

TEST_P(JsonDecoderTest, InferredLimits) {
  InferredOptions options;
  options.max_columns = 3;
  options.max_struct_fields = 2;
  options.max_struct_depth = 2;
  auto dec = Inferred(options);
  ASSERT_TRUE(dec.ok());
  std::vector<DecodeError> errors;
  auto rows = (*dec)->Decode(
      Messages(
          {R"({"a":1,"wide":{"x":1,"y":2,"z":3},"deep":{"d1":{"d2":{"d3":1}}}})", R"({"d":1})"}),
      &errors);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, 1u);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].reason.find("already has 3 columns"), std::string::npos) << errors[0].reason;
  EXPECT_EQ(Query("SELECT wide, deep::VARCHAR FROM batch"),
            (Rows{{"{\"x\":1,\"y\":2,\"z\":3}", "{'d1': {'d2': '{\"d3\":1}'}}"}}));
}

TEST_P(JsonDecoderTest, InMemoryViewShadowsTheTableWhileTheDecoderLives) {
  if (!GetParam()) GTEST_SKIP() << "in memory only";
  Exec("CREATE TABLE t (n INTEGER, s VARCHAR, p STRUCT(l INTEGER[]))");
  Exec("INSERT INTO t VALUES (100, 'old', NULL)");
  auto dec = Structured("t");
  ASSERT_TRUE(dec);
  EXPECT_EQ(One("SELECT count(*) FROM t"), "0");  // no batch yet
  std::vector<std::string> lines;
  for (int i = 0; i < 4500; ++i)
    lines.push_back(fmt::format(R"({{"n":{},"s":"v{}","p":{{"l":[{},{}]}}}})", i, i, i, i));
  std::vector<DecodeError> errors;
  ASSERT_TRUE(dec->Decode(Messages(lines), &errors).ok());
  // Several scans of the batch in one query, projections, count(*), row order.
  EXPECT_EQ(One("SELECT count(*) FROM t a JOIN t b USING (n)"), "4500");
  EXPECT_EQ(One("SELECT count(*) FROM t"), "4500");
  EXPECT_EQ(One("SELECT sum(p.l[2]) FROM t WHERE s LIKE 'v1%'"),
            One("SELECT sum(n) FROM range(4500) r(n) WHERE n::VARCHAR LIKE '1%'"));
  EXPECT_EQ(One("SELECT bool_and(n = rn - 1) FROM (SELECT n, row_number() OVER () AS rn FROM t)"),
            "true");
  // The table itself is left alone (`main.t` is the view too: temp has a schema main).
  EXPECT_EQ(One("SELECT n FROM memory.main.t"), "100");
  // The handler's result outlives the batch (copied when materialized).
  Exec("CREATE TEMP TABLE kept AS SELECT s, p FROM t WHERE n < 3");
  ASSERT_TRUE(dec->Decode(Messages({R"({"n":7,"s":"x"})"}), &errors).ok());
  EXPECT_EQ(Query("SELECT n, s FROM t"), (Rows{{"7", "x"}}));
  EXPECT_EQ(Query("SELECT s, p.l::VARCHAR FROM kept ORDER BY s"),
            (Rows{{"v0", "[0, 0]"}, {"v1", "[1, 1]"}, {"v2", "[2, 2]"}}));
  // The view is read-only.
  EXPECT_FALSE(conn_->Execute("DELETE FROM t").ok());
  dec.reset();
  EXPECT_EQ(Query("SELECT n, s FROM t"), (Rows{{"100", "old"}}));
}

TEST_P(JsonDecoderTest, InMemoryViewShadowsATableOfAFileDatabase) {
  if (!GetParam()) GTEST_SKIP() << "in memory only";
  std::string path = fmt::format("/tmp/json_decoder_test_{}.duckdb", getpid());
  files_.push_back(path);
  files_.push_back(path + ".wal");
  auto db = duck::Database::Open({.path = path, .threads = 2});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto conn = duck::Connection::Open(**db);
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE((*conn)->Execute("CREATE TABLE events (city VARCHAR, amount DOUBLE)").ok());
  auto dec = StructuredDecoder::Create(**conn, "events", {.in_memory = true});
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  std::vector<DecodeError> errors;
  ASSERT_TRUE(
      (*dec)
          ->Decode(Messages({R"({"city":"Rome","amount":2})", R"({"city":"Rome","amount":3.5})"}),
                   &errors)
          .ok());
  auto rows = (*conn)->QueryText("SELECT city, sum(amount), count(*) FROM events GROUP BY 1");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, (Rows{{"Rome", "5.5", "2"}}));
}

TEST_P(JsonDecoderTest, InferredSchemaChangesBetweenBatches) {
  auto dec = Inferred();
  ASSERT_TRUE(dec.ok());
  std::vector<DecodeError> errors;
  ASSERT_TRUE((*dec)->Decode(Messages({R"({"a":1,"b":"x"})"}), &errors).ok());
  EXPECT_EQ(Query("SELECT a, b FROM batch"), (Rows{{"1.0", "x"}}));
  ASSERT_TRUE((*dec)->Decode(Messages({R"({"c":[true]})", R"({"c":[false,null]})"}), &errors).ok());
  EXPECT_EQ(Query("SELECT c::VARCHAR, kafka_offset FROM batch"),
            (Rows{{"[true]", "0"}, {"[false, NULL]", "1"}}));
  EXPECT_FALSE(conn_->Execute("SELECT a FROM batch").ok());
  ASSERT_TRUE((*dec)->Decode(Messages({R"({"c":[true,true]})"}), &errors).ok());  // same schema
  EXPECT_EQ(One("SELECT len(c) FROM batch"), "2");
  ASSERT_TRUE((*dec)->Decode({}, &errors).ok());
  EXPECT_EQ(One("SELECT count(*) FROM batch"), "0");
}

INSTANTIATE_TEST_SUITE_P(TableOrMemory, JsonDecoderTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "InMemory" : "Table";
                         });

}  // namespace
}  // namespace sluice::json
