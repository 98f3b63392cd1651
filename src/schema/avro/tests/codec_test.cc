// The Avro RowDecoder and RowEncoder against a real DuckDB: payloads (built by hand, byte by
// byte) decoded into a chunk, appended to a table and read back with SQL; every type
// mapping, NULLs, nesting, unions, logical types, reader defaults, skipped writer fields,
// names ignoring case, malformed payloads, and encode -> decode round trips.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "duck/appender.h"
#include "duck/database.h"
#include "schema/avro/avro_format.h"
#include "schema/avro/avro_types.h"

namespace sluice::schema::avro {
namespace codec_test {
namespace {

using Rows = std::vector<std::vector<std::optional<std::string>>>;

// ---- payload bytes ----

std::string L(int64_t v) {  // int and long: zig-zag varint
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  std::string out;
  while (z >= 0x80) {
    out.push_back(static_cast<char>((z & 0x7F) | 0x80));
    z >>= 7;
  }
  out.push_back(static_cast<char>(z));
  return out;
}
std::string S(std::string_view s) { return L(static_cast<int64_t>(s.size())) + std::string(s); }
std::string D(double d) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &d, 8);
  return out;
}
std::string F(float f) {
  std::string out(4, '\0');
  std::memcpy(out.data(), &f, 4);
  return out;
}
std::string B(bool b) { return std::string(1, b ? '\1' : '\0'); }
std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

Parsed P(std::string_view text) {
  auto p = Parse(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status().ToString();
  return std::move(*p);
}

class AvroCodecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = duck::Database::Open({.memory_limit_bytes = 256 << 20, .threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(*conn);
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
  // The rows of `sql` as "a|b|NULL" lines.
  std::string Text(const std::string& sql) {
    std::string out;
    for (const auto& row : Query(sql)) {
      for (size_t i = 0; i < row.size(); ++i) {
        if (i > 0) out += '|';
        out += row[i].value_or("NULL");
      }
      out += '\n';
    }
    return out;
  }

  // Creates table t (columns `table_sql`, or ColumnsOf the reader/writer when empty),
  // decodes `payloads` into it and returns the reasons of those that failed.
  std::vector<std::string> Load(std::string_view writer_text, const std::string& table_sql,
                                const std::vector<std::string>& payloads,
                                std::string_view reader_text = "") {
    std::vector<std::string> reasons;
    Parsed writer = P(writer_text);
    std::optional<Parsed> reader;
    if (!reader_text.empty()) reader.emplace(P(reader_text));
    conn_->Execute("DROP TABLE IF EXISTS t").ok();
    std::string ddl = table_sql;
    if (ddl.empty()) {
      auto cols = ColumnsOf(reader ? *reader : writer);
      EXPECT_TRUE(cols.ok()) << cols.status().ToString();
      if (!cols.ok()) return reasons;
      for (const Column& c : *cols) {
        if (!ddl.empty()) ddl += ", ";
        ddl += "\"" + c.name + "\" " + TypeSql(c.type);
      }
    }
    Status st = conn_->Execute("CREATE TABLE t (" + ddl + ")");
    EXPECT_TRUE(st.ok()) << ddl << ": " << st.ToString();
    auto described = duck::DescribeTable(*conn_, "t");
    EXPECT_TRUE(described.ok());
    std::vector<Column> columns;
    std::vector<duck::LogicalType> types;
    for (const duck::TableColumn& c : *described) {
      columns.push_back({c.name, CopyType(c.type)});
      types.push_back(CopyType(c.type));
    }
    auto dec = MakeRowDecoder(writer, reader ? &*reader : nullptr, columns);
    EXPECT_TRUE(dec.ok()) << dec.status().ToString();
    if (!dec.ok()) return {"make: " + dec.status().message()};
    auto app = duck::Appender::Open(*conn_, "t");
    EXPECT_TRUE(app.ok());
    auto chunk = duck::DataChunk::Create(types);
    EXPECT_TRUE(chunk.ok());
    (*dec)->Bind(*chunk, 0);
    uint64_t row = 0;
    auto flush = [&]() {
      EXPECT_TRUE((*dec)->Finish(row).ok());
      chunk->SetSize(row);
      Status s = app->Append(*chunk);
      EXPECT_TRUE(s.ok()) << s.ToString();
      chunk->Reset();
      (*dec)->Bind(*chunk, 0);
      row = 0;
    };
    for (const std::string& p : payloads) {
      std::string reason;
      if ((*dec)->Decode(p, row, &reason)) {
        if (++row == duck::DataChunk::Capacity()) flush();
      } else {
        reasons.push_back(reason);
      }
    }
    flush();
    EXPECT_TRUE(app->Flush().ok());
    return reasons;
  }

  std::string MakeError(std::string_view writer, const std::string& table_sql) {
    Exec("CREATE OR REPLACE TABLE e (" + table_sql + ")");
    auto described = duck::DescribeTable(*conn_, "e");
    std::vector<Column> columns;
    for (const duck::TableColumn& c : *described) columns.push_back({c.name, CopyType(c.type)});
    Parsed w = P(writer);
    auto dec = MakeRowDecoder(w, nullptr, columns);
    if (dec.ok()) return "<made>";
    EXPECT_EQ(dec.status().code(), StatusCode::kInvalidArgument);
    return dec.status().message();
  }

  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

constexpr const char* kPrimitives = R"({"type":"record","name":"R","fields":[
    {"name":"b","type":"boolean"},{"name":"i","type":"int"},{"name":"l","type":"long"},
    {"name":"f","type":"float"},{"name":"d","type":"double"},{"name":"s","type":"string"},
    {"name":"y","type":"bytes"},{"name":"x","type":{"type":"fixed","name":"X","size":2}},
    {"name":"e","type":{"type":"enum","name":"E","symbols":["RED","GREEN"]}}]})";

TEST_F(AvroCodecTest, Primitives) {
  std::vector<std::string> msgs = {B(true) + L(-5) + L(1LL << 40) + F(1.5f) + D(-2.25) +
                                       S("héllo") + S(Bytes({0, 255})) + Bytes({1, 2}) + L(1),
                                   B(false) + L(2147483647) + L(-9223372036854775807LL - 1) + F(0) +
                                       D(1e300) + S("") + S("") + Bytes({0, 0}) + L(0)};
  EXPECT_TRUE(Load(kPrimitives, "", msgs).empty());
  EXPECT_EQ(Text("SELECT * FROM t"),
            "true|-5|1099511627776|1.5|-2.25|héllo|\\x00\\xFF|\\x01\\x02|GREEN\n"
            "false|2147483647|-9223372036854775808|0.0|1e+300|||\\x00\\x00|RED\n");
}

TEST_F(AvroCodecTest, NullableUnionsEitherOrder) {
  const char* schema = R"({"type":"record","name":"R","fields":[
      {"name":"a","type":["null","long"]},{"name":"b","type":["string","null"]},
      {"name":"c","type":"null"}]})";
  std::vector<std::string> msgs = {L(1) + L(7) + L(1), L(0) + L(0) + S("x")};
  EXPECT_TRUE(Load(schema, "", msgs).empty());
  EXPECT_EQ(Text("SELECT a, b, c FROM t"), "7|NULL|NULL\nNULL|x|NULL\n");
}

TEST_F(AvroCodecTest, NestedRecordsArraysAndMaps) {
  const char* schema = R"({"type":"record","name":"R","fields":[
      {"name":"addr","type":{"type":"record","name":"A","fields":[
          {"name":"city","type":"string"},{"name":"geo","type":["null",{"type":"record","name":"G","fields":[
              {"name":"lat","type":"double"}]}]}]}},
      {"name":"tags","type":{"type":"array","items":"string"}},
      {"name":"grid","type":{"type":"array","items":{"type":"array","items":"int"}}},
      {"name":"attrs","type":{"type":"map","values":["null","long"]}},
      {"name":"people","type":{"type":"array","items":"A"}}]})";
  // tags written as two blocks, the second with a byte size (negative count).
  std::string m1 = S("Paris") + L(1) + D(48.5) + L(1) + S("a") + L(-1) + L(2) + S("b") + L(0) +
                   L(2) + L(1) + L(1) + L(0) + L(2) + L(2) + L(3) + L(0) + L(0) + L(2) + S("k") +
                   L(1) + L(9) + S("n") + L(0) + L(0) + L(1) + S("Rome") + L(0) + L(0);
  std::string m2 = S("Oslo") + L(0) + L(0) + L(0) + L(0) + L(0);
  EXPECT_TRUE(Load(schema, "", {m1, m2}).empty());
  EXPECT_EQ(
      Text("SELECT addr, tags, grid, attrs, people FROM t"),
      "{'city': Paris, 'geo': {'lat': 48.5}}|[a, b]|[[1], [2, 3]]|{k=9, n=NULL}|[{'city': Rome, "
      "'geo': NULL}]\n"
      "{'city': Oslo, 'geo': NULL}|[]|[]|{}|[]\n");
}

TEST_F(AvroCodecTest, GeneralUnionsBecomeDuckUnions) {
  const char* schema = R"({"type":"record","name":"R","fields":[
      {"name":"u","type":["null","int","string",{"type":"record","name":"P","fields":[{"name":"x","type":"int"}]}]}]})";
  std::vector<std::string> msgs = {L(1) + L(5), L(2) + S("s"), L(3) + L(7), L(0)};
  EXPECT_TRUE(Load(schema, "", msgs).empty());
  EXPECT_EQ(Text("SELECT union_tag(u), u FROM t"), "int|5\nstring|s\nP|{'x': 7}\nNULL|NULL\n");
  // A union whose branches all fit one column goes into that column.
  EXPECT_TRUE(
      Load(R"({"type":"record","name":"R","fields":[{"name":"u","type":["int","long","null"]}]})",
           "u BIGINT", {L(0) + L(1), L(1) + L(1LL << 50), L(2)})
          .empty());
  EXPECT_EQ(Text("SELECT u FROM t"), "1\n1125899906842624\nNULL\n");
}

TEST_F(AvroCodecTest, LogicalTypes) {
  const char* schema = R"({"type":"record","name":"R","fields":[
      {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
      {"name":"decf","type":{"type":"fixed","name":"DF","size":4,"logicalType":"decimal","precision":9,"scale":3}},
      {"name":"big","type":{"type":"bytes","logicalType":"decimal","precision":50,"scale":2}},
      {"name":"day","type":{"type":"int","logicalType":"date"}},
      {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
      {"name":"tu","type":{"type":"long","logicalType":"time-micros"}},
      {"name":"tsm","type":{"type":"long","logicalType":"timestamp-millis"}},
      {"name":"tsu","type":{"type":"long","logicalType":"timestamp-micros"}},
      {"name":"tsn","type":{"type":"long","logicalType":"timestamp-nanos"}},
      {"name":"ltm","type":{"type":"long","logicalType":"local-timestamp-millis"}},
      {"name":"ltu","type":{"type":"long","logicalType":"local-timestamp-micros"}},
      {"name":"id","type":{"type":"string","logicalType":"uuid"}},
      {"name":"idf","type":{"type":"fixed","name":"U","size":16,"logicalType":"uuid"}},
      {"name":"dur","type":{"type":"fixed","name":"Dur","size":12,"logicalType":"duration"}}]})";
  std::string uuid_bytes = Bytes({0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45,
                                  0x67, 0x89, 0xab, 0xcd, 0xef});
  std::string m = S(Bytes({0x30, 0x39})) +           // 12345 -> 123.45
                  Bytes({0xFF, 0xFF, 0xFF, 0x85}) +  // -123 -> -0.123
                  S(Bytes({0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                           0x00, 0x00, 0x00, 0x00, 0x00})) +  // 2^128 -> text
                  L(19844) +                                  // 2024-05-01
                  L(45296789) +                               // 12:34:56.789
                  L(45296789012) +
                  L(1714564800123) + L(1714564800123456) + L(1714564800123456789) +
                  L(1714564800123) + L(1714564800123456) +
                  S("12345678-9abc-def0-0123-456789abcdef") + uuid_bytes +
                  Bytes({1, 0, 0, 0, 2, 0, 0, 0, 0xE8, 0x03, 0, 0});  // 1 month 2 days 1 s
  EXPECT_TRUE(Load(schema, "", {m}).empty());
  Exec("SET TimeZone='UTC'");
  EXPECT_EQ(
      Text("SELECT dec, decf, big, day, tm, tu, tsm, tsu, tsn, ltm, ltu, id, idf = id, dur FROM t"),
      "123.45|-0.123|3402823669209384634633746074317682114.56|2024-05-01|12:34:56.789|"
      "12:34:56.789012|2024-05-01 12:00:00.123+00|2024-05-01 12:00:00.123456+00|"
      "2024-05-01 12:00:00.123456789|2024-05-01 12:00:00.123|2024-05-01 12:00:00.123456|"
      "12345678-9abc-def0-0123-456789abcdef|true|1 month 2 days 00:00:01\n");
}

TEST_F(AvroCodecTest, ReaderDefaultsFillWhatTheWriterLacks) {
  const char* writer = R"({"type":"record","name":"R","fields":[
      {"name":"id","type":"long"},
      {"name":"color","type":{"type":"enum","name":"C","symbols":["RED","BLUE","PINK"]}},
      {"name":"inner","type":{"type":"record","name":"I","fields":[{"name":"a","type":"int"}]}}]})";
  const char* reader = R"({"type":"record","name":"R","fields":[
      {"name":"id","type":"long"},
      {"name":"name","type":"string","default":"anon"},
      {"name":"score","type":["null","double"],"default":null},
      {"name":"tags","type":{"type":"array","items":"string"},"default":["x","y"]},
      {"name":"color","type":{"type":"enum","name":"C","symbols":["RED","BLUE","OTHER"],"default":"OTHER"}},
      {"name":"inner","type":{"type":"record","name":"I","fields":[{"name":"a","type":"int"},
          {"name":"b","type":"long","default":42}]}}]})";
  EXPECT_TRUE(Load(writer, "", {L(1) + L(0) + L(3), L(2) + L(2) + L(4)}, reader).empty());
  EXPECT_EQ(Text("SELECT * FROM t"),
            "1|anon|NULL|[x, y]|RED|{'a': 3, 'b': 42}\n"
            "2|anon|NULL|[x, y]|OTHER|{'a': 4, 'b': 42}\n");
  // Without a reader a column the writer lacks is NULL.
  EXPECT_TRUE(Load(writer, "id BIGINT, name VARCHAR", {L(1) + L(0) + L(3)}).empty());
  EXPECT_EQ(Text("SELECT * FROM t"), "1|NULL\n");
}

TEST_F(AvroCodecTest, SkippedWriterFieldsAreWalked) {
  const char* writer = R"({"type":"record","name":"R","fields":[
      {"name":"skip1","type":{"type":"array","items":{"type":"map","values":"string"}}},
      {"name":"keep","type":"string"},
      {"name":"skip2","type":["null",{"type":"record","name":"S","fields":[{"name":"f","type":{"type":"fixed","name":"F","size":3}},
          {"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}},{"name":"d","type":"double"}]}]},
      {"name":"skip3","type":{"type":"array","items":"long"}},
      {"name":"n","type":"int"}]})";
  std::string m = L(1) + L(1) + S("k") + S("v") + L(0) + L(0) + S("kept") + L(1) + "abc" + L(0) +
                  D(1) + L(-2) + L(2) + L(5) + L(6) + L(0) + L(9);
  EXPECT_TRUE(Load(writer, "KEEP VARCHAR, N INTEGER", {m}).empty());  // names ignoring case
  EXPECT_EQ(Text("SELECT * FROM t"), "kept|9\n");
}

TEST_F(AvroCodecTest, DeclaredColumnsWidenAndConvert) {
  const char* writer = R"({"type":"record","name":"R","fields":[
      {"name":"a","type":"int"},{"name":"b","type":"int"},{"name":"c","type":"int"},
      {"name":"d","type":"long"},{"name":"e","type":"float"},{"name":"f","type":"boolean"},
      {"name":"g","type":{"type":"enum","name":"E","symbols":["X","Y"]}},
      {"name":"h","type":{"type":"long","logicalType":"timestamp-millis"}},
      {"name":"i","type":{"type":"bytes","logicalType":"decimal","precision":4,"scale":1}}]})";
  EXPECT_TRUE(Load(writer,
                   "a BIGINT, b DOUBLE, c DECIMAL(10,2), d VARCHAR, e DOUBLE, f VARCHAR, "
                   "g ENUM('Y', 'X'), h TIMESTAMP, i DECIMAL(18,3)",
                   {L(1) + L(2) + L(3) + L(-4) + F(0.5f) + B(true) + L(1) + L(1000) +
                    S(Bytes({0x04, 0xD2}))})
                  .empty());
  EXPECT_EQ(Text("SELECT * FROM t"), "1|2.0|3.00|-4|0.5|true|Y|1970-01-01 00:00:01|123.400\n");
  // Narrowing is checked per value.
  std::vector<std::string> r =
      Load(R"({"type":"record","name":"R","fields":[{"name":"a","type":"long"}]})", "a SMALLINT",
           {L(7), L(40000)});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].find("field 'a': 40000 out of range for SMALLINT"), std::string::npos) << r[0];
  EXPECT_EQ(Text("SELECT * FROM t"), "7\n");
}

TEST_F(AvroCodecTest, TypesThatCannotGoIntoTheirColumnAreRefused) {
  EXPECT_EQ(MakeError(R"({"type":"record","name":"R","fields":[{"name":"price","type":"string"}]})",
                      "price INTEGER"),
            "field 'price': Avro string cannot go into a INTEGER column");
  EXPECT_EQ(
      MakeError(
          R"({"type":"record","name":"R","fields":[{"name":"r","type":{"type":"record","name":"In","fields":[{"name":"x","type":"double"}]}}]})",
          "r STRUCT(x INTEGER)"),
      "field 'r.x': Avro double cannot go into a INTEGER column");
  EXPECT_NE(MakeError(R"({"type":"record","name":"R","fields":[{"name":"t","type":"long"}]})",
                      "t TIMESTAMP")
                .find("cannot go into"),
            std::string::npos);
  EXPECT_NE(
      MakeError(
          R"({"type":"record","name":"R","fields":[{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":4}}]})",
          "d DECIMAL(9,2)")
          .find("cannot go into"),
      std::string::npos);
}

TEST_F(AvroCodecTest, NonRecordSchemaFillsValue) {
  EXPECT_TRUE(Load(R"("string")", "", {S("one"), S("two")}).empty());
  EXPECT_EQ(Text("SELECT value FROM t"), "one\ntwo\n");
}

TEST_F(AvroCodecTest, MalformedPayloadsFailWithAReason) {
  const char* schema = R"({"type":"record","name":"R","fields":[
      {"name":"n","type":"long"},{"name":"s","type":"string"},
      {"name":"u","type":["null","int"]},{"name":"a","type":{"type":"array","items":"long"}},
      {"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}},{"name":"b","type":"boolean"}]})";
  std::string good =
      L(1) + S("ok") + L(1) + L(3) + L(3) + L(3) + L(2) + L(3) + L(0) + L(0) + B(true);
  struct Case {
    std::string payload;
    std::string reason;
  };
  std::vector<Case> cases = {
      {"", "field 'n': truncated varint at byte 0"},
      {L(1) + "\x80", "field 's': truncated varint at byte 1"},
      {std::string(11, '\xFF'), "field 'n': varint longer than 10 bytes at byte 0"},
      {L(1) + L(100) + "ab", "field 's': length 100 past the end (2 bytes left) at byte 1"},
      {L(1) + L(-3), "field 's': negative length -3 at byte 1"},
      {L(1) + S("\xC3\x28"), "field 's': invalid UTF-8 at byte 2"},
      {L(1) + S("x") + L(2), "field 'u': union index 2 out of range (2 branches) at byte 3"},
      {L(1) + S("x") + L(1) + L(1LL << 32), "field 'u': int 4294967296 out of range at byte 4"},
      {L(1) + S("x") + L(0) + L(1000000000),
       "field 'a': 1000000000 items cannot fit in the 0 bytes left at byte 4"},
      {L(1) + S("x") + L(0) + L(2) + L(5),
       "field 'a': 2 items cannot fit in the 1 bytes left at byte 4"},
      {L(1) + S("x") + L(0) + L(2) + L(5) + "\x80", "field 'a[1]': truncated varint at byte 6"},
      {L(1) + S("x") + L(0) + L(0) + L(1),
       "field 'e': enum index 1 out of range (1 symbols) at byte 5"},
      {L(1) + S("x") + L(0) + L(0) + L(0) + "\x02", "field 'b': invalid boolean byte 2 at byte 6"},
      {good + "zz", "2 bytes after the end of the value at byte 13"},
  };
  std::vector<std::string> payloads;
  for (const Case& c : cases) {
    payloads.push_back(c.payload);
    payloads.push_back(good);  // reuses the failed row
  }
  std::vector<std::string> reasons = Load(schema, "", payloads);
  ASSERT_EQ(reasons.size(), cases.size()) << reasons[0];
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(reasons[i], cases[i].reason) << i;
  // Every good row is whole: the failed rows' list items were given back.
  EXPECT_EQ(Text("SELECT count(*), count(DISTINCT a), min(a::VARCHAR), sum(len(a)) FROM t"),
            fmt::format("{}|1|[3, 2, 3]|{}\n", cases.size(), 3 * cases.size()));
}

TEST_F(AvroCodecTest, ZeroSizeItemsAreBounded) {
  const char* schema =
      R"({"type":"record","name":"R","fields":[{"name":"a","type":{"type":"array","items":"null"}}]})";
  std::vector<std::string> reasons = Load(schema, "", {L(1000000000) + L(0), L(3) + L(0)});
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("items that take no bytes"), std::string::npos) << reasons[0];
  EXPECT_EQ(Text("SELECT a FROM t"), "[NULL, NULL, NULL]\n");
}

TEST_F(AvroCodecTest, ManyRowsAcrossChunksWithLists) {
  const char* schema = R"({"type":"record","name":"R","fields":[{"name":"i","type":"long"},
      {"name":"xs","type":{"type":"array","items":"string"}}]})";
  std::vector<std::string> msgs;
  for (int i = 0; i < 5000; ++i) {
    std::string m = L(i) + L(i % 4);
    for (int k = 0; k < i % 4; ++k) m += S(std::to_string(k));
    msgs.push_back(i % 4 != 0 ? m + L(0) : m);
  }
  EXPECT_TRUE(Load(schema, "", msgs).empty());
  EXPECT_EQ(Text("SELECT count(*), sum(i), sum(len(xs)) FROM t"), "5000|12497500|7500\n");
}

TEST_F(AvroCodecTest, EncodeThenDecodeRoundTrips) {
  Exec("SET TimeZone='UTC'");
  Exec(R"(CREATE TABLE src AS SELECT * FROM (VALUES
      (1::BIGINT, 'a'::VARCHAR, 1.5::DOUBLE, true, 12.34::DECIMAL(10,2), DATE '2024-05-01',
       TIMESTAMPTZ '2024-05-01 12:00:00.5+00', TIMESTAMP '2024-05-01 01:02:03', TIME '01:02:03.5',
       '12345678-9abc-def0-0123-456789abcdef'::UUID, ['x', NULL], {'c': 'Paris', 'n': 3},
       MAP {'k': 1}, '\x00\x01'::BLOB, 7::INTEGER, -1.25::FLOAT, INTERVAL 3 DAY, 123456789012345678901234567890::HUGEINT),
      (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
      (-9, 'ü', -0.0, false, -0.01::DECIMAL(10,2), DATE '1969-12-31', TIMESTAMPTZ '1960-01-01 00:00:00+00',
       TIMESTAMP '1960-01-01 00:00:00', TIME '23:59:59', NULL, [], {'c': NULL, 'n': NULL}, MAP {}, ''::BLOB,
       -7, 0, INTERVAL 2 MONTH, -5))
      AS v(id, s, d, b, dec, day, tz, ts, tm, u, l, st, m, bl, i, f, iv, h))");
  auto q = conn_->Query("SELECT * FROM src");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  std::vector<duck::LogicalType> types = q->column_logical_types();
  std::vector<Column> cols;
  for (size_t i = 0; i < types.size(); ++i) cols.push_back({q->column_name(i), CopyType(types[i])});
  auto schema_text = SchemaForColumns(cols, "Row");
  ASSERT_TRUE(schema_text.ok()) << schema_text.status().ToString();
  Parsed schema = P(*schema_text);
  auto enc = MakeRowEncoder(schema, cols);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  std::vector<std::string> payloads;
  std::vector<duck::DataChunk> chunks = q->TakeChunks();
  for (const duck::DataChunk& c : chunks) {
    for (uint64_t r = 0; r < c.size(); ++r) {
      std::string out;
      Status st = (*enc)->Encode(c, 0, r, &out);
      ASSERT_TRUE(st.ok()) << st.ToString();
      payloads.push_back(out);
    }
  }
  chunks.clear();
  ASSERT_EQ(payloads.size(), 3u);
  std::vector<std::string> reasons = Load(*schema_text, "", payloads);
  EXPECT_TRUE(reasons.empty()) << reasons[0];
  // h (HUGEINT) is written as a string; the rest comes back as it was.
  EXPECT_EQ(Text("SELECT * EXCLUDE (h) FROM t EXCEPT SELECT * EXCLUDE (h) FROM src"), "");
  EXPECT_EQ(Text("SELECT count(*) FROM t"), "3\n");
  EXPECT_EQ(Text("SELECT h FROM t ORDER BY h"), "-5\n123456789012345678901234567890\nNULL\n");
}

TEST_F(AvroCodecTest, EncoderRefusesNullForARequiredField) {
  Exec("CREATE TABLE n AS SELECT NULL::BIGINT AS a");
  auto q = conn_->Query("SELECT * FROM n");
  ASSERT_TRUE(q.ok());
  std::vector<Column> cols;
  cols.push_back({"a", duck::LogicalType::BigInt()});
  Parsed schema = P(
      R"({"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"z","type":"int","default":5}]})");
  auto enc = MakeRowEncoder(schema, cols);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  std::vector<duck::DataChunk> chunks = q->TakeChunks();
  std::string out = "keep";
  Status st = (*enc)->Encode(chunks[0], 0, 0, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(out, "keep");
  EXPECT_NE(st.message().find("NULL"), std::string::npos);
}

}  // namespace
}  // namespace codec_test
}  // namespace sluice::schema::avro
