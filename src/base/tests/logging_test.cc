#include "base/logging.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

// Restores the process-wide level so tests do not leak their setting into each other.
class LogLevelTest : public testing::Test {
 protected:
  void SetUp() override { saved_ = GetLogLevel(); }
  void TearDown() override { SetLogLevel(saved_); }

 private:
  LogLevel saved_ = LogLevel::kInfo;
};

TEST(ParseLogLevelTest, AcceptsEveryLevelName) {
  EXPECT_EQ(*ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("info"), LogLevel::kInfo);
  EXPECT_EQ(*ParseLogLevel("warn"), LogLevel::kWarn);
  EXPECT_EQ(*ParseLogLevel("error"), LogLevel::kError);
  EXPECT_EQ(*ParseLogLevel("off"), LogLevel::kOff);
}

TEST(ParseLogLevelTest, ReadsEveryLevelsName) {
  for (LogLevel l :
       {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError, LogLevel::kOff}) {
    EXPECT_EQ(*ParseLogLevel(LogLevelName(l)), l) << LogLevelName(l);
  }
  EXPECT_EQ(LogLevelName(LogLevel::kWarn), "warn");
}

TEST(ParseLogLevelTest, IgnoresCase) {
  EXPECT_EQ(*ParseLogLevel("DEBUG"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("Warn"), LogLevel::kWarn);
}

TEST(ParseLogLevelTest, RejectsUnknownNameAndQuotesIt) {
  for (std::string_view bad : {"", "verbose", "inf", "debug ", "3"}) {
    Result<LogLevel> r = ParseLogLevel(bad);
    ASSERT_FALSE(r.ok()) << "'" << bad << "'";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(fmt::format("'{}'", bad)), std::string::npos)
        << r.status().message();
  }
}

TEST_F(LogLevelTest, SetLogLevelIsWhatGetLogLevelReturns) {
  SetLogLevel(LogLevel::kError);
  EXPECT_EQ(GetLogLevel(), LogLevel::kError);
}

TEST_F(LogLevelTest, ThresholdEnablesItsLevelAndAbove) {
  const Logger log("test");
  SetLogLevel(LogLevel::kWarn);
  EXPECT_FALSE(log.Enabled(LogLevel::kDebug));
  EXPECT_FALSE(log.Enabled(LogLevel::kInfo));
  EXPECT_TRUE(log.Enabled(LogLevel::kWarn));
  EXPECT_TRUE(log.Enabled(LogLevel::kError));
}

TEST_F(LogLevelTest, DebugEnablesEverything) {
  const Logger log("test");
  SetLogLevel(LogLevel::kDebug);
  EXPECT_TRUE(log.Enabled(LogLevel::kDebug));
  EXPECT_TRUE(log.Enabled(LogLevel::kError));
}

TEST_F(LogLevelTest, OffDisablesEveryMessageLevel) {
  const Logger log("test");
  SetLogLevel(LogLevel::kOff);
  EXPECT_FALSE(log.Enabled(LogLevel::kDebug));
  EXPECT_FALSE(log.Enabled(LogLevel::kError));
}

TEST_F(LogLevelTest, DisabledMessageIsNotFormatted) {
  const Logger log("test");
  SetLogLevel(LogLevel::kError);
  int formatted = 0;
  auto count = [&formatted] { return ++formatted; };
  SLUICE_LOG(log, kDebug, "{}", count());
  EXPECT_EQ(formatted, 0);
}

TEST_F(LogLevelTest, EnabledMessageWritesOneLineWithLevelAndName) {
  const Logger log("storage");
  SetLogLevel(LogLevel::kInfo);
  testing::internal::CaptureStderr();
  SLUICE_LOG(log, kWarn, "truncated {} bytes", 12);
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find(" WARN storage: truncated 12 bytes\n"), std::string::npos) << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;
}

TEST(LoggerTest, KeepsItsName) {
  constexpr Logger log("kafka");
  EXPECT_EQ(log.name(), "kafka");
}

TEST(LogFormatTest, ParsesTextAndJsonAndRefusesOthers) {
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(*ParseLogFormat("JSON"), LogFormat::kJson);
  for (std::string_view bad : {"", "logfmt", "json "}) {
    Result<LogFormat> r = ParseLogFormat(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(fmt::format("'{}'", bad)), std::string::npos);
  }
}

TEST(LogFormatTest, TextLineHasTimeLevelLoggerAndMessage) {
  // 2026-12-07T05:44:31.123Z
  EXPECT_EQ(FormatLogLine(LogFormat::kText, 1796622271123, LogLevel::kWarn, "storage", "hi"),
            "2026-12-07T05:44:31.123Z WARN storage: hi\n");
}

TEST(LogFormatTest, JsonLineIsOneObjectWithEscapes) {
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, 1796622271123, LogLevel::kInfo, "serve",
                          "a \"b\" \\ c\nd\te\x01\x7f"),
            "{\"ts\":\"2026-12-07T05:44:31.123Z\",\"level\":\"info\",\"logger\":\"serve\","
            "\"msg\":\"a \\\"b\\\" \\\\ c\\nd\\te\\u0001\\u007f\"}\n");
}

TEST(LogFormatTest, JsonKeepsUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(JsonQuote("gr\xC3\xBC\xC3\x9F \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "\"gr\xC3\xBC\xC3\x9F \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  // A lone continuation byte, a truncated sequence, an overlong '/', a surrogate, 0xFF.
  EXPECT_EQ(JsonQuote("a\x80"
                      "b\xE2\x82"),
            "\"a\\ufffdb\\ufffd\\ufffd\"");
  EXPECT_EQ(JsonQuote("\xC0\xAF"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(JsonQuote("\xED\xA0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
  EXPECT_EQ(JsonQuote("\xFF"), "\"\\ufffd\"");
  EXPECT_EQ(JsonQuote(std::string_view("\0x", 2)), "\"\\u0000x\"");
}

}  // namespace
}  // namespace sluice
