// ConsoleSink and NoopSink: one JSON object per row, every DuckDB type the pipelines
// produce (nested and NULL included), rendered by DuckDB's to_json.
#include "sinks/console_sink.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "duck/database.h"
#include "sinks/noop_sink.h"

namespace sluice::sinks {
namespace {

class ConsoleSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = duck::Database::Open({.threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(conn_->Execute("SET TimeZone = 'UTC'").ok());
    out_ = std::tmpfile();
    ASSERT_NE(out_, nullptr);
  }
  void TearDown() override {
    if (out_ != nullptr) std::fclose(out_);
  }

  std::string Output() {
    std::fflush(out_);
    std::rewind(out_);
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), out_)) > 0) text.append(buf, n);
    return text;
  }

  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
  std::FILE* out_ = nullptr;
};

TEST_F(ConsoleSinkTest, WritesEveryTypeAsOneJsonObjectPerLine) {
  ASSERT_TRUE(conn_
                  ->Execute(R"sql(
    CREATE TABLE batch AS SELECT * FROM (VALUES
      (true, 42::TINYINT, -7::INTEGER, 9007199254740993::BIGINT, 1.5::DOUBLE,
       12.34::DECIMAL(10,2), 'tab	"quoted"\ and é', '\x00\xFFab'::BLOB,
       DATE '2024-02-29', TIME '13:14:15', TIMESTAMP '2024-02-29 13:14:15.123456',
       TIMESTAMPTZ '2024-02-29 13:14:15+02', INTERVAL 90 MINUTE,
       '6ba7b810-9dad-11d1-80b4-00c04fd430c8'::UUID,
       {'city': 'Paris', 'amount': 2.5, 'tags': ['a', 'b']}, [1, NULL, 3], MAP {'k': 1}),
      (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL)
    ) t(b, ti, i, bi, d, dec, s, bl, dt, tm, ts, tstz, iv, u, st, l, m)
  )sql")
                  .ok());
  ConsoleSink sink({.out = out_});
  std::vector<RejectedRow> rejected;
  Status st = sink.Write(*conn_, "batch", {}, &rejected);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(sink.Flush().ok());
  EXPECT_TRUE(rejected.empty());
  EXPECT_EQ(Output(),
            R"({"b":true,"ti":42,"i":-7,"bi":9007199254740993,"d":1.5,"dec":12.34,)"
            R"("s":"tab\t\"quoted\"\\ and é","bl":"\\x00\\xFFab","dt":"2024-02-29",)"
            R"("tm":"13:14:15","ts":"2024-02-29 13:14:15.123456",)"
            R"("tstz":"2024-02-29 11:14:15+00","iv":"01:30:00",)"
            R"("u":"6ba7b810-9dad-11d1-80b4-00c04fd430c8",)"
            R"("st":{"city":"Paris","amount":2.5,"tags":["a","b"]},"l":[1,null,3],"m":{"k":1}})"
            "\n"
            R"({"b":null,"ti":null,"i":null,"bi":null,"d":null,"dec":null,"s":null,"bl":null,)"
            R"("dt":null,"tm":null,"ts":null,"tstz":null,"iv":null,"u":null,"st":null,"l":null,)"
            R"("m":null})"
            "\n");
}

TEST_F(ConsoleSinkTest, EachWriteAppendsItsRowsInTableOrder) {
  ConsoleSink sink({.out = out_});
  std::vector<RejectedRow> rejected;
  for (int batch = 0; batch < 2; ++batch) {
    ASSERT_TRUE(conn_
                    ->Execute("CREATE OR REPLACE TABLE batch AS SELECT range + " +
                              std::to_string(batch * 3) + " AS n FROM range(3)")
                    .ok());
    ASSERT_TRUE(sink.Write(*conn_, "batch", {}, &rejected).ok());
  }
  ASSERT_TRUE(sink.Flush().ok());
  EXPECT_EQ(Output(), "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n{\"n\":5}\n");
}

TEST_F(ConsoleSinkTest, AnEmptyBatchWritesNothing) {
  ASSERT_TRUE(conn_->Execute("CREATE TABLE batch (a INT)").ok());
  ConsoleSink sink({.out = out_});
  std::vector<RejectedRow> rejected;
  ASSERT_TRUE(sink.Write(*conn_, "batch", {}, &rejected).ok());
  ASSERT_TRUE(sink.Flush().ok());
  EXPECT_EQ(Output(), "");
}

TEST_F(ConsoleSinkTest, AMissingTableIsAnError) {
  ConsoleSink sink({.out = out_});
  std::vector<RejectedRow> rejected;
  Status st = sink.Write(*conn_, "nope", {}, &rejected);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("nope"), std::string::npos) << st.ToString();
}

TEST_F(ConsoleSinkTest, NoopSinkTakesAnythingAndFlushes) {
  NoopSink sink;
  std::vector<RejectedRow> rejected;
  EXPECT_TRUE(sink.Write(*conn_, "does_not_even_exist", {}, &rejected).ok());
  EXPECT_TRUE(sink.Flush().ok());
  EXPECT_EQ(sink.Describe(), "noop");
}

}  // namespace
}  // namespace sluice::sinks
