#include "query/pg_protocol.h"

#include <gtest/gtest.h>

namespace sluice::query::pg {
namespace {

std::string Int32Bytes(int32_t v) {
  std::string out;
  MessageWriter w(out);
  w.Int32(v);
  return out;
}

std::string Message(char type, std::string_view body) {
  std::string out;
  MessageWriter w(out);
  w.Begin(type);
  w.Bytes(body);
  w.End();
  return out;
}

std::string StartupBody(std::initializer_list<std::pair<std::string, std::string>> params) {
  std::string body = Int32Bytes(kProtocolVersion3);
  for (const auto& [k, v] : params) {
    body += k + '\0' + v + '\0';
  }
  body += '\0';
  return body;
}

TEST(PgFrameTest, ReadsAFrameOnlyWhenComplete) {
  std::string msg = Message('Q', std::string("SELECT 1\0", 9));
  size_t used = 0;
  for (size_t n = 0; n < msg.size(); ++n) {
    auto f = ReadFrame(std::string_view(msg).substr(0, n), 1024, &used);
    ASSERT_TRUE(f.ok());
    EXPECT_FALSE(f->has_value()) << n;
  }
  std::string with_more = msg + "extra";
  auto f = ReadFrame(with_more, 1024, &used);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->type, 'Q');
  EXPECT_EQ((*f)->body, std::string_view("SELECT 1\0", 9));
  EXPECT_EQ(used, msg.size());
}

TEST(PgFrameTest, RefusesBadAndOversizedLengths) {
  size_t used = 0;
  EXPECT_FALSE(ReadFrame("Q" + Int32Bytes(3), 1024, &used).ok());
  EXPECT_FALSE(ReadFrame("Q" + Int32Bytes(-1), 1024, &used).ok());
  auto big = ReadFrame("Q" + Int32Bytes(4 + 1025), 1024, &used);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("over the limit"), std::string::npos);
  EXPECT_TRUE(
      ReadFrame("Q" + Int32Bytes(4 + 1024), 1024, &used).ok());  // at the limit: wait for it
}

TEST(PgFrameTest, StartupFrameLengthsAreChecked) {
  size_t used = 0;
  EXPECT_FALSE(ReadStartupFrame(Int32Bytes(7), &used).ok());
  EXPECT_FALSE(ReadStartupFrame(Int32Bytes(10001), &used).ok());
  EXPECT_FALSE(ReadStartupFrame(Int32Bytes(-8), &used).ok());
  auto partial = ReadStartupFrame(Int32Bytes(8) + "ab", &used);
  ASSERT_TRUE(partial.ok());
  EXPECT_FALSE(partial->has_value());
}

TEST(PgStartupTest, ParsesStartupSslGssAndCancel) {
  auto p = ParseStartupPacket(
      StartupBody({{"user", "alice"}, {"database", "db"}, {"application_name", "psql"}}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->kind, StartupPacket::Kind::kStartup);
  EXPECT_EQ(p->Param("user"), "alice");
  EXPECT_EQ(p->Param("application_name"), "psql");
  EXPECT_EQ(p->Param("missing"), "");

  auto ssl = ParseStartupPacket(Int32Bytes(kSslRequestCode));
  ASSERT_TRUE(ssl.ok());
  EXPECT_EQ(ssl->kind, StartupPacket::Kind::kSslRequest);
  auto gss = ParseStartupPacket(Int32Bytes(kGssEncRequestCode));
  ASSERT_TRUE(gss.ok());
  EXPECT_EQ(gss->kind, StartupPacket::Kind::kGssEncRequest);

  auto cancel =
      ParseStartupPacket(Int32Bytes(kCancelRequestCode) + Int32Bytes(42) + Int32Bytes(-7));
  ASSERT_TRUE(cancel.ok());
  EXPECT_EQ(cancel->kind, StartupPacket::Kind::kCancel);
  EXPECT_EQ(cancel->process_id, 42);
  EXPECT_EQ(cancel->secret_key, -7);
}

TEST(PgStartupTest, RefusesMalformedStartupPackets) {
  EXPECT_FALSE(ParseStartupPacket(StartupBody({{"database", "db"}})).ok());  // no user
  EXPECT_EQ(ParseStartupPacket(Int32Bytes(2 << 16) + std::string(1, '\0')).status().code(),
            StatusCode::kUnimplemented);
  std::string truncated = StartupBody({{"user", "alice"}});
  truncated.resize(truncated.size() - 3);  // cut inside "alice"
  EXPECT_FALSE(ParseStartupPacket(truncated).ok());
  EXPECT_FALSE(ParseStartupPacket(Int32Bytes(kCancelRequestCode) + Int32Bytes(42)).ok());
  EXPECT_FALSE(ParseStartupPacket(Int32Bytes(kSslRequestCode) + "x").ok());
  EXPECT_FALSE(ParseStartupPacket(StartupBody({{"user", "\xff\xfe"}})).ok());
  EXPECT_FALSE(ParseStartupPacket("ab").ok());
}

std::string BindBody(std::vector<int16_t> formats, std::vector<std::optional<std::string>> params,
                     std::vector<int16_t> result_formats) {
  std::string out = std::string("p1\0s1\0", 6);
  MessageWriter w(out);
  w.Int16(static_cast<int16_t>(formats.size()));
  for (int16_t f : formats) w.Int16(f);
  w.Int16(static_cast<int16_t>(params.size()));
  for (const auto& p : params) {
    if (!p) {
      w.Int32(-1);
    } else {
      w.Int32(static_cast<int32_t>(p->size()));
      w.Bytes(*p);
    }
  }
  w.Int16(static_cast<int16_t>(result_formats.size()));
  for (int16_t f : result_formats) w.Int16(f);
  return out;
}

TEST(PgMessageTest, ParsesBind) {
  auto b = ParseBind(BindBody({1}, {std::string("\0\0\0\1", 4), std::nullopt}, {0, 1}));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->portal, "p1");
  EXPECT_EQ(b->statement, "s1");
  ASSERT_EQ(b->params.size(), 2u);
  EXPECT_EQ(*b->params[0], std::string("\0\0\0\1", 4));
  EXPECT_FALSE(b->params[1].has_value());
  EXPECT_EQ(b->ParamFormat(0), 1);
  EXPECT_EQ(b->ParamFormat(1), 1);
  EXPECT_EQ(b->result_formats, (std::vector<int16_t>{0, 1}));
}

TEST(PgMessageTest, RefusesMalformedBind) {
  EXPECT_FALSE(ParseBind(BindBody({2}, {}, {})).ok());                     // unknown format
  EXPECT_FALSE(ParseBind(BindBody({0, 1}, {std::string("x")}, {})).ok());  // 2 formats, 1 param
  EXPECT_FALSE(ParseBind(BindBody({}, {}, {3})).ok());                     // unknown result format
  std::string body = BindBody({}, {std::string("abc")}, {});
  EXPECT_FALSE(ParseBind(body.substr(0, body.size() - 4)).ok());  // truncated value
  EXPECT_FALSE(ParseBind(body + "x").ok());                       // trailing bytes
  std::string negative = std::string("\0\0", 2);
  MessageWriter w(negative);
  w.Int16(0);
  w.Int16(1);
  w.Int32(-5);
  w.Int16(0);
  EXPECT_FALSE(ParseBind(negative).ok());
}

TEST(PgMessageTest, ParsesParseExecuteDescribeClose) {
  std::string parse = std::string("st\0SELECT $1\0", 13);
  MessageWriter w(parse);
  w.Int16(1);
  w.Int32(23);
  auto p = ParseParse(parse);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->statement, "st");
  EXPECT_EQ(p->query, "SELECT $1");
  EXPECT_EQ(p->param_types, (std::vector<uint32_t>{23}));
  EXPECT_FALSE(ParseParse(parse.substr(0, parse.size() - 1)).ok());

  auto e = ParseExecute(std::string("p\0", 2) + Int32Bytes(10));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->portal, "p");
  EXPECT_EQ(e->max_rows, 10);
  EXPECT_FALSE(ParseExecute(std::string("p", 1)).ok());

  auto d = ParseDescribe(std::string("Sname\0", 6));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, 'S');
  EXPECT_EQ(d->name, "name");
  EXPECT_FALSE(ParseDescribe(std::string("Xname\0", 6)).ok());
  EXPECT_FALSE(ParseClose(std::string("P", 1)).ok());
  EXPECT_FALSE(ParseQuery("SELECT 1").ok());  // no NUL
}

TEST(PgMessageTest, ParsesSaslInitialResponse) {
  std::string body = std::string("SCRAM-SHA-256\0", 14) + Int32Bytes(3) + "abc";
  auto m = ParseSaslInitialResponse(body);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->mechanism, "SCRAM-SHA-256");
  EXPECT_EQ(m->data, "abc");
  EXPECT_FALSE(
      ParseSaslInitialResponse(std::string("SCRAM-SHA-256\0", 14) + Int32Bytes(9) + "abc").ok());
}

TEST(PgUtf8Test, AcceptsValidAndRefusesInvalid) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\xc3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
}

TEST(PgWriterTest, WritesErrorResponseAndReadyForQuery) {
  std::string out;
  WriteReadyForQuery(out, 'I');
  EXPECT_EQ(out, std::string("Z\0\0\0\5I", 6));
  out.clear();
  WriteErrorResponse(out, {.severity = "ERROR", .sqlstate = "42601", .message = "bad"});
  std::string expected_body = std::string("SERROR\0VERROR\0C42601\0Mbad\0\0", 27);
  EXPECT_EQ(out, "E" + Int32Bytes(4 + static_cast<int32_t>(expected_body.size())) + expected_body);
}

TEST(PgWriterTest, WritesRowDescription) {
  std::string out;
  WriteRowDescription(out, {{"a", 23, 4, -1, 0}, {"b", 25, -1, -1, 1}});
  size_t used = 0;
  auto f = ReadFrame(out, 1 << 20, &used);
  ASSERT_TRUE(f.ok() && f->has_value());
  MessageReader r((*f)->body);
  EXPECT_EQ(*r.Int16(), 2);
  EXPECT_EQ(*r.CString(), "a");
  EXPECT_EQ(*r.Int32(), 0);
  EXPECT_EQ(*r.Int16(), 0);
  EXPECT_EQ(*r.Int32(), 23);
  EXPECT_EQ(*r.Int16(), 4);
  EXPECT_EQ(*r.Int32(), -1);
  EXPECT_EQ(*r.Int16(), 0);
  EXPECT_EQ(*r.CString(), "b");
}

}  // namespace
}  // namespace sluice::query::pg
