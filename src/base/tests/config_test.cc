#include "base/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {
namespace {

using testing::AllOf;
using testing::ElementsAre;
using testing::HasSubstr;

Config MustParse(std::string_view yaml) {
  Result<Config> config = Config::Parse(yaml, "cfg.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? std::move(config).value() : Config();
}

// The error message of a Result or Status that must not be OK.
template <typename R>
std::string ErrorOf(const R& r) {
  if constexpr (std::is_same_v<R, Status>) {
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.code(), StatusCode::kInvalidArgument) << r.ToString();
    return r.message();
  } else {
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    return r.status().message();
  }
}

// --- Parsing and flattening ---

TEST(ConfigTest, EmptyTextIsEmptyConfig) {
  Config config = MustParse("");
  EXPECT_FALSE(config.Has("a"));
  EXPECT_TRUE(config.CheckKnown({}).ok());
}

TEST(ConfigTest, CommentsOnlyIsEmptyConfig) {
  Config config = MustParse("# nothing here yet\n\n");
  EXPECT_TRUE(config.CheckKnown({}).ok());
}

TEST(ConfigTest, NestedMapsFlattenToDottedKeys) {
  Config config = MustParse(
      "storage:\n"
      "  dir: /data\n"
      "  flush:\n"
      "    ms: 100\n"
      "kafka: {port: 9092}\n");
  EXPECT_EQ(*config.GetString("storage.dir", ""), "/data");
  EXPECT_EQ(*config.GetInt("storage.flush.ms", 0), 100);
  EXPECT_EQ(*config.GetInt("kafka.port", 0), 9092);
  EXPECT_FALSE(config.Has("storage"));
  EXPECT_FALSE(config.Has("storage.flush"));
}

TEST(ConfigTest, DottedKeyNamesTheSameSettingAsNesting) {
  Config nested = MustParse("storage:\n  flush:\n    ms: 100\n");
  Config dotted_inside = MustParse("storage:\n  flush.ms: 100\n");
  Config dotted_top = MustParse("storage.flush.ms: 100\n");
  EXPECT_EQ(*nested.GetInt("storage.flush.ms", 0), 100);
  EXPECT_EQ(*dotted_inside.GetInt("storage.flush.ms", 0), 100);
  EXPECT_EQ(*dotted_top.GetInt("storage.flush.ms", 0), 100);
}

TEST(ConfigTest, OriginIsFileAndLine) {
  Config config = MustParse("a: 1\nb:\n  c: 2\n");
  EXPECT_EQ(config.Origin("a"), "cfg.yaml:1");
  EXPECT_EQ(config.Origin("b.c"), "cfg.yaml:3");
  EXPECT_EQ(config.Origin("missing"), "");
}

TEST(ConfigTest, TopLevelScalarIsError) {
  EXPECT_THAT(ErrorOf(Config::Parse("just a string\n", "cfg.yaml")),
              AllOf(HasSubstr("cfg.yaml:1"), HasSubstr("top level must be a map")));
}

TEST(ConfigTest, TopLevelListIsError) {
  EXPECT_THAT(
      ErrorOf(Config::Parse("- a\n- b\n", "cfg.yaml")),
      AllOf(HasSubstr("cfg.yaml:1"), HasSubstr("top level must be a map"), HasSubstr("a list")));
}

TEST(ConfigTest, BadYamlReportsOriginLineAndColumn) {
  // The flow sequence opened on line 1 is never closed; yaml-cpp notices on line 2.
  EXPECT_THAT(ErrorOf(Config::Parse("a: [1, 2\nb: 3\n", "cfg.yaml")),
              AllOf(HasSubstr("cfg.yaml:2:2:"), HasSubstr("bad YAML")));
  EXPECT_THAT(ErrorOf(Config::Parse("a: 1\n  b: 2\n", "cfg.yaml")),
              HasSubstr("cfg.yaml:2:4: bad YAML"));
  EXPECT_THAT(ErrorOf(Config::Parse("a: b: c\n", "cfg.yaml")), HasSubstr("cfg.yaml:1:5: bad YAML"));
  EXPECT_THAT(ErrorOf(Config::Parse("a: 1\n\tb: 2\n", "cfg.yaml")), HasSubstr("cfg.yaml:2:"));
}

TEST(ConfigTest, SecondDocumentIsError) {
  EXPECT_THAT(ErrorOf(Config::Parse("a: 1\n---\nb: 2\n", "cfg.yaml")),
              AllOf(HasSubstr("cfg.yaml:3"), HasSubstr("second YAML document")));
}

TEST(ConfigTest, DocumentMarkersAroundOneDocumentAreFine) {
  Config config = MustParse("---\na: 1\n---\n");
  EXPECT_EQ(*config.GetInt("a", 0), 1);
}

TEST(ConfigTest, DuplicateKeyNamesBothLines) {
  EXPECT_THAT(
      ErrorOf(Config::Parse("a: 1\nb: 2\na: 3\n", "cfg.yaml")),
      AllOf(HasSubstr("duplicate key 'a'"), HasSubstr("cfg.yaml:1"), HasSubstr("cfg.yaml:3")));
}

TEST(ConfigTest, DuplicateKeyAcrossNestedAndDottedSpellingsNamesBothLines) {
  EXPECT_THAT(ErrorOf(Config::Parse("storage:\n"
                                    "  flush:\n"
                                    "    ms: 100\n"
                                    "storage.flush.ms: 200\n",
                                    "cfg.yaml")),
              AllOf(HasSubstr("duplicate key 'storage.flush.ms'"), HasSubstr("cfg.yaml:3"),
                    HasSubstr("cfg.yaml:4")));
  EXPECT_THAT(ErrorOf(Config::Parse("storage:\n"
                                    "  flush.ms: 100\n"
                                    "  flush:\n"
                                    "    ms: 200\n",
                                    "cfg.yaml")),
              AllOf(HasSubstr("duplicate key 'storage.flush.ms'"), HasSubstr("cfg.yaml:2"),
                    HasSubstr("cfg.yaml:4")));
}

TEST(ConfigTest, SectionWrittenTwiceIsDuplicate) {
  // Even with different keys inside: a repeated YAML key is a paste error, not a merge.
  EXPECT_THAT(ErrorOf(Config::Parse("storage:\n  a: 1\nstorage:\n  b: 2\n", "cfg.yaml")),
              AllOf(HasSubstr("duplicate key 'storage'"), HasSubstr("cfg.yaml:1"),
                    HasSubstr("cfg.yaml:3")));
}

TEST(ConfigTest, EmptyKeyOrEmptyKeyPartIsError) {
  EXPECT_THAT(ErrorOf(Config::Parse("\"\": 1\n", "cfg.yaml")), HasSubstr("cfg.yaml:1"));
  EXPECT_THAT(ErrorOf(Config::Parse("a:\n  b..c: 1\n", "cfg.yaml")),
              AllOf(HasSubstr("cfg.yaml:2"), HasSubstr("'a.b..c'")));
  EXPECT_THAT(ErrorOf(Config::Parse(".a: 1\n", "cfg.yaml")), HasSubstr("'.a'"));
  EXPECT_THAT(ErrorOf(Config::Parse("a.: 1\n", "cfg.yaml")), HasSubstr("'a.'"));
  EXPECT_FALSE(Config::Parse("~: 1\n", "cfg.yaml").ok());
}

TEST(ConfigTest, NonScalarKeyIsError) {
  EXPECT_THAT(ErrorOf(Config::Parse("? [a, b]\n: 1\n", "cfg.yaml")),
              AllOf(HasSubstr("cfg.yaml:1"), HasSubstr("key must be a plain name")));
}

TEST(ConfigTest, ListItemThatIsNotAScalarIsError) {
  EXPECT_THAT(ErrorOf(Config::Parse("brokers:\n  - a\n  - {host: b}\n", "cfg.yaml")),
              AllOf(HasSubstr("cfg.yaml:3"), HasSubstr("brokers"), HasSubstr("plain value")));
}

// --- Strings, lists and empty values ---

TEST(ConfigTest, GetStringReturnsValueOrDefault) {
  Config config = MustParse("name: sluice\nquoted: \"null\"\nempty: \"\"\n");
  EXPECT_EQ(*config.GetString("name", "x"), "sluice");
  EXPECT_EQ(*config.GetString("quoted", "x"), "null");
  EXPECT_EQ(*config.GetString("empty", "x"), "");
  EXPECT_EQ(*config.GetString("absent", "fallback"), "fallback");
}

TEST(ConfigTest, KeyWithNoValueIsErrorForEveryGetter) {
  Config config = MustParse("a:\nb: ~\nc: null\n");
  for (std::string_view key : {"a", "b", "c"}) {
    EXPECT_THAT(ErrorOf(config.GetString(key, "")),
                AllOf(HasSubstr(std::string(key)), HasSubstr("cfg.yaml:"), HasSubstr("no value")));
    EXPECT_THAT(ErrorOf(config.GetInt(key, 0)), HasSubstr("no value"));
    EXPECT_THAT(ErrorOf(config.GetBool(key, false)), HasSubstr("no value"));
    EXPECT_THAT(ErrorOf(config.GetBytes(key, 0)), HasSubstr("no value"));
    EXPECT_THAT(ErrorOf(config.GetDurationMs(key, 0)), HasSubstr("no value"));
    EXPECT_THAT(ErrorOf(config.GetList(key)), HasSubstr("no value"));
  }
}

TEST(ConfigTest, EmptyValueIsErrorForTypedGetters) {
  Config config = MustParse("n: \"\"\n");
  EXPECT_THAT(ErrorOf(config.GetInt("n", 0)),
              AllOf(HasSubstr("n (from cfg.yaml:1)"), HasSubstr("'' is empty")));
  EXPECT_THAT(ErrorOf(config.GetBool("n", false)), HasSubstr("'' is empty"));
  EXPECT_THAT(ErrorOf(config.GetBytes("n", 0)), HasSubstr("'' is empty"));
  EXPECT_THAT(ErrorOf(config.GetDurationMs("n", 0)), HasSubstr("'' is empty"));
}

TEST(ConfigTest, SequenceWhereScalarExpectedIsError) {
  Config config = MustParse("port:\n  - 1\n  - 2\n");
  EXPECT_THAT(ErrorOf(config.GetInt("port", 0)),
              AllOf(HasSubstr("port (from cfg.yaml:1)"), HasSubstr("is a list")));
  EXPECT_THAT(ErrorOf(config.GetString("port", "")), HasSubstr("is a list"));
}

TEST(ConfigTest, GetListReturnsScalarItems) {
  Config config = MustParse("block:\n  - a\n  - 2\nflow: [x, \"y z\"]\nnone: []\n");
  EXPECT_THAT(*config.GetList("block"), ElementsAre("a", "2"));
  EXPECT_THAT(*config.GetList("flow"), ElementsAre("x", "y z"));
  EXPECT_TRUE(config.GetList("none")->empty());
  EXPECT_TRUE(config.GetList("absent")->empty());
}

TEST(ConfigTest, GetListOfScalarIsError) {
  Config config = MustParse("brokers: a\n");
  EXPECT_THAT(ErrorOf(config.GetList("brokers")),
              AllOf(HasSubstr("brokers (from cfg.yaml:1)"), HasSubstr("'a'"),
                    HasSubstr("expected a list")));
}

// --- Integers ---

TEST(ConfigTest, GetIntParsesDecimalAndReturnsDefaultWhenAbsent) {
  Config config =
      MustParse("a: 42\nb: -7\nc: 0\nd: 9223372036854775807\ne: -9223372036854775808\n");
  EXPECT_EQ(*config.GetInt("a", 0), 42);
  EXPECT_EQ(*config.GetInt("b", 0), -7);
  EXPECT_EQ(*config.GetInt("c", 5), 0);
  EXPECT_EQ(*config.GetInt("d", 0), INT64_MAX);
  EXPECT_EQ(*config.GetInt("e", 0), INT64_MIN);
  EXPECT_EQ(*config.GetInt("absent", 17), 17);
}

TEST(ConfigTest, GetIntNonNumericNamesKeyOriginAndValue) {
  Config config = MustParse("kafka:\n  port: abc\n");
  EXPECT_THAT(ErrorOf(config.GetInt("kafka.port", 0)),
              AllOf(HasSubstr("kafka.port"), HasSubstr("cfg.yaml:2"), HasSubstr("'abc'"),
                    HasSubstr("not an integer")));
}

TEST(ConfigTest, GetIntRejectsTrailingJunkAndOtherForms) {
  Config config = MustParse("a: 12x\nb: 1.5\nc: \" 3\"\nd: +4\ne: 0x10\nf: 1e3\n");
  for (std::string_view key : {"a", "b", "c", "d", "e", "f"}) {
    EXPECT_THAT(ErrorOf(config.GetInt(key, 0)), HasSubstr("not an integer")) << key;
  }
}

TEST(ConfigTest, GetIntRejectsOverflow) {
  Config config = MustParse("a: 9223372036854775808\nb: -9223372036854775809\n");
  EXPECT_THAT(ErrorOf(config.GetInt("a", 0)),
              AllOf(HasSubstr("'9223372036854775808'"), HasSubstr("does not fit")));
  EXPECT_THAT(ErrorOf(config.GetInt("b", 0)), HasSubstr("does not fit"));
}

TEST(ConfigTest, GetIntRejectsOutOfRangeAndNamesBounds) {
  Config config = MustParse("port: 70000\nlow: 0\nok: 1\n");
  EXPECT_THAT(ErrorOf(config.GetInt("port", 9092, 1, 65535)),
              AllOf(HasSubstr("'70000'"), HasSubstr("[1, 65535]")));
  EXPECT_THAT(ErrorOf(config.GetInt("low", 9092, 1, 65535)), HasSubstr("out of range"));
  EXPECT_EQ(*config.GetInt("ok", 9092, 1, 65535), 1);
}

// --- Booleans ---

TEST(ConfigTest, GetBoolAcceptsEveryNamedForm) {
  Config config = MustParse(
      "t1: true\nt2: yes\nt3: on\nt4: 1\nt5: TRUE\nt6: Yes\n"
      "f1: false\nf2: no\nf3: off\nf4: 0\nf5: OFF\n");
  for (std::string_view key : {"t1", "t2", "t3", "t4", "t5", "t6"}) {
    EXPECT_TRUE(*config.GetBool(key, false)) << key;
  }
  for (std::string_view key : {"f1", "f2", "f3", "f4", "f5"}) {
    EXPECT_FALSE(*config.GetBool(key, true)) << key;
  }
  EXPECT_TRUE(*config.GetBool("absent", true));
}

TEST(ConfigTest, GetBoolRejectsOtherWords) {
  Config config = MustParse("tls: maybe\nx: 2\n");
  EXPECT_THAT(
      ErrorOf(config.GetBool("tls", false)),
      AllOf(HasSubstr("tls (from cfg.yaml:1)"), HasSubstr("'maybe'"), HasSubstr("not a boolean")));
  EXPECT_FALSE(config.GetBool("x", false).ok());
}

// --- Byte sizes ---

TEST(ConfigTest, GetBytesAcceptsPlainNumbersAndEverySuffix) {
  Config config = MustParse(
      "plain: 4096\nb: 7B\nkb: 2KB\nkib: 2KiB\nmb: 3MB\nmib: 3MiB\ngb: 1GB\ngib: 1GiB\n"
      "tb: 2TB\ntib: 2TiB\nspaced: 64 MiB\nlower: 64mib\nzero: 0\n");
  EXPECT_EQ(*config.GetBytes("plain", 0), 4096);
  EXPECT_EQ(*config.GetBytes("b", 0), 7);
  EXPECT_EQ(*config.GetBytes("kb", 0), 2'000);
  EXPECT_EQ(*config.GetBytes("kib", 0), 2'048);
  EXPECT_EQ(*config.GetBytes("mb", 0), 3'000'000);
  EXPECT_EQ(*config.GetBytes("mib", 0), 3 * 1024 * 1024);
  EXPECT_EQ(*config.GetBytes("gb", 0), 1'000'000'000);
  EXPECT_EQ(*config.GetBytes("gib", 0), int64_t{1} << 30);
  EXPECT_EQ(*config.GetBytes("tb", 0), 2'000'000'000'000);
  EXPECT_EQ(*config.GetBytes("tib", 0), int64_t{2} << 40);
  EXPECT_EQ(*config.GetBytes("spaced", 0), int64_t{64} << 20);
  EXPECT_EQ(*config.GetBytes("lower", 0), int64_t{64} << 20);
  EXPECT_EQ(*config.GetBytes("zero", 1), 0);
  EXPECT_EQ(*config.GetBytes("absent", 123), 123);
}

TEST(ConfigTest, GetBytesRejectsNegative) {
  Config config = MustParse("segment.bytes: -1MiB\n");
  EXPECT_THAT(ErrorOf(config.GetBytes("segment.bytes", 0)),
              AllOf(HasSubstr("segment.bytes (from cfg.yaml:1)"), HasSubstr("'-1MiB'"),
                    HasSubstr("negative")));
}

TEST(ConfigTest, GetBytesRejectsOverflow) {
  Config config = MustParse(
      "a: 8388608TiB\nb: 99999999999999999999\nc: 9223372036854775808\n"
      "max: 9223372036854775807\n");
  EXPECT_THAT(ErrorOf(config.GetBytes("a", 0)),
              AllOf(HasSubstr("'8388608TiB'"), HasSubstr("too large")));
  EXPECT_THAT(ErrorOf(config.GetBytes("b", 0)), HasSubstr("too large"));
  EXPECT_THAT(ErrorOf(config.GetBytes("c", 0)), HasSubstr("too large"));
  EXPECT_EQ(*config.GetBytes("max", 0), INT64_MAX);
}

TEST(ConfigTest, GetBytesRejectsUnknownSuffixAndListsTheKnownOnes) {
  Config config = MustParse("a: 10K\nb: 10 bytes\nc: 10EiB\nd: \"10 \"\n");
  EXPECT_THAT(ErrorOf(config.GetBytes("a", 0)),
              AllOf(HasSubstr("'10K'"), HasSubstr("unknown unit 'K'"), HasSubstr("KiB")));
  EXPECT_THAT(ErrorOf(config.GetBytes("b", 0)), HasSubstr("unknown unit"));
  EXPECT_THAT(ErrorOf(config.GetBytes("c", 0)), HasSubstr("unknown unit"));
  EXPECT_THAT(ErrorOf(config.GetBytes("d", 0)), HasSubstr("unknown unit"));
}

TEST(ConfigTest, GetBytesRejectsNonNumbersAndFractions) {
  Config config = MustParse("a: MiB\nb: 1.5GiB\nc: lots\nd: +5\n");
  EXPECT_THAT(ErrorOf(config.GetBytes("a", 0)), HasSubstr("not a number"));
  EXPECT_THAT(ErrorOf(config.GetBytes("b", 0)), HasSubstr("not a whole number"));
  EXPECT_THAT(ErrorOf(config.GetBytes("c", 0)), HasSubstr("not a number"));
  EXPECT_THAT(ErrorOf(config.GetBytes("d", 0)), HasSubstr("not a number"));
}

// --- Durations ---

TEST(ConfigTest, GetDurationMsAcceptsPlainMillisAndEverySuffix) {
  Config config = MustParse("plain: 250\nms: 250ms\ns: 3s\nm: 2m\nh: 1h\nd: 7d\nspaced: 5 s\n");
  EXPECT_EQ(*config.GetDurationMs("plain", 0), 250);
  EXPECT_EQ(*config.GetDurationMs("ms", 0), 250);
  EXPECT_EQ(*config.GetDurationMs("s", 0), 3'000);
  EXPECT_EQ(*config.GetDurationMs("m", 0), 120'000);
  EXPECT_EQ(*config.GetDurationMs("h", 0), 3'600'000);
  EXPECT_EQ(*config.GetDurationMs("d", 0), 7 * 86'400'000LL);
  EXPECT_EQ(*config.GetDurationMs("spaced", 0), 5'000);
  EXPECT_EQ(*config.GetDurationMs("absent", 1000), 1000);
}

TEST(ConfigTest, GetDurationMsRejectsNegativeOverflowAndUnknownSuffix) {
  Config config = MustParse("neg: -5s\nbig: 200000000000000d\nweeks: 2w\nupper: 10S\nfrac: 0.5s\n");
  EXPECT_THAT(ErrorOf(config.GetDurationMs("neg", 0)),
              AllOf(HasSubstr("neg (from cfg.yaml:1)"), HasSubstr("'-5s'"), HasSubstr("negative")));
  EXPECT_THAT(ErrorOf(config.GetDurationMs("big", 0)), HasSubstr("too large"));
  EXPECT_THAT(ErrorOf(config.GetDurationMs("weeks", 0)),
              AllOf(HasSubstr("unknown unit 'w'"), HasSubstr("ms, s, m, h or d")));
  EXPECT_THAT(ErrorOf(config.GetDurationMs("upper", 0)), HasSubstr("unknown unit 'S'"));
  EXPECT_THAT(ErrorOf(config.GetDurationMs("frac", 0)), HasSubstr("not a whole number"));
}

// --- Flags ---

TEST(ConfigTest, FlagOverridesFileAndTakesTheFlagOrigin) {
  Config config = MustParse("storage:\n  flush.ms: 100\n");
  config.Set("storage.flush.ms", "5s");
  EXPECT_EQ(*config.GetDurationMs("storage.flush.ms", 0), 5'000);
  EXPECT_EQ(config.Origin("storage.flush.ms"), "flag");
}

TEST(ConfigTest, FlagCanAddKeyAndErrorsNameItsOrigin) {
  Config config;
  config.Set("kafka.port", "nine", "--kafka.port");
  EXPECT_THAT(ErrorOf(config.GetInt("kafka.port", 0)),
              AllOf(HasSubstr("kafka.port (from --kafka.port)"), HasSubstr("'nine'")));
}

TEST(ConfigTest, FlagReplacesAListWithAScalar) {
  Config config = MustParse("brokers: [a, b]\n");
  config.Set("brokers", "c");
  EXPECT_EQ(*config.GetString("brokers", ""), "c");
}

// --- Unknown keys ---

constexpr std::string_view kKnown[] = {"storage.dir", "storage.flush.ms", "kafka.port"};

TEST(ConfigTest, CheckKnownAcceptsKnownKeys) {
  Config config = MustParse("storage:\n  dir: /d\n  flush.ms: 1\nkafka.port: 9092\n");
  EXPECT_TRUE(config.CheckKnown(kKnown).ok());
}

TEST(ConfigTest, CheckKnownListsEveryUnknownKeyWithItsOrigin) {
  Config config = MustParse("storage:\n  dir: /d\n  flsh.ms: 1\nkafka.prot: 9092\n");
  config.Set("typo.flag", "1");
  std::string message = ErrorOf(config.CheckKnown(kKnown));
  EXPECT_THAT(message, AllOf(HasSubstr("storage.flsh.ms (cfg.yaml:3)"),
                             HasSubstr("kafka.prot (cfg.yaml:4)"), HasSubstr("typo.flag (flag)")));
  EXPECT_THAT(message, testing::Not(HasSubstr("storage.dir")));
}

TEST(ConfigTest, CheckKnownMatchesExactlyNotByPrefix) {
  Config config = MustParse("storage:\n  flush: 1\n  flush.ms.x: 2\n");
  std::string message = ErrorOf(config.CheckKnown(kKnown));
  EXPECT_THAT(message, AllOf(HasSubstr("storage.flush (cfg.yaml:2)"),
                             HasSubstr("storage.flush.ms.x (cfg.yaml:3)")));
}

TEST(ConfigTest, CheckKnownAllowsEmptySectionOfKnownKeys) {
  Config config = MustParse("storage:\n#  dir: /d\nkafka:\n");
  EXPECT_TRUE(config.CheckKnown(kKnown).ok());
  Config unknown_section = MustParse("stroage:\n");
  EXPECT_THAT(ErrorOf(unknown_section.CheckKnown(kKnown)), HasSubstr("stroage (cfg.yaml:1)"));
}

// --- Files ---

class ConfigFileTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = testing::TempDir() + "sluice_config_test_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string Write(std::string_view name, std::string_view text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(ConfigFileTest, LoadFileReadsSettingsWithPathAndLine) {
  std::string path = Write("sluice.yaml", "# sluice\nstorage:\n  flush.ms: 100\n");
  Result<Config> config = Config::LoadFile(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(*config->GetInt("storage.flush.ms", 0), 100);
  EXPECT_EQ(config->Origin("storage.flush.ms"), path + ":3");
}

TEST_F(ConfigFileTest, LoadFileOfEmptyFileIsEmptyConfig) {
  Result<Config> config = Config::LoadFile(Write("empty.yaml", ""));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->CheckKnown({}).ok());
}

TEST_F(ConfigFileTest, MissingFileIsNotFoundNamingPath) {
  std::string path = (dir_ / "absent.yaml").string();
  Result<Config> config = Config::LoadFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr(path));
}

TEST(ConfigTest, ChangedKeysComparesValuesNotOrigins) {
  Result<Config> a = Config::Parse("a: 1\nb: [x, y]\nc: same\nd: gone\n", "one.yaml");
  Result<Config> b = Config::Parse("c: same\na: 2\nb: [x, z]\ne: new\n", "two.yaml");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(Config::ChangedKeys(*a, *b), (std::vector<std::string>{"a", "b", "d", "e"}));
  EXPECT_TRUE(Config::ChangedKeys(*a, *a).empty());
  Config flagged = *a;
  flagged.Set("c", "same", "--flag");  // another origin, the same value
  EXPECT_TRUE(Config::ChangedKeys(*a, flagged).empty());
  flagged.Set("b", "x", "--flag");  // a scalar where there was a list
  EXPECT_EQ(Config::ChangedKeys(*a, flagged), (std::vector<std::string>{"b"}));
}

TEST_F(ConfigFileTest, DirectoryIsIOErrorNamingPath) {
  Result<Config> config = Config::LoadFile(dir_.string());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kIOError);
  EXPECT_THAT(config.status().message(), HasSubstr(dir_.string()));
}

TEST_F(ConfigFileTest, BadYamlInFileNamesPathLineAndColumn) {
  std::string path = Write("bad.yaml", "a: 1\nb: [1\nc: 2\n");
  EXPECT_THAT(ErrorOf(Config::LoadFile(path)), HasSubstr(path + ":3:"));
}

TEST_F(ConfigFileTest, DuplicateKeyInFileNamesPathAndBothLines) {
  std::string path = Write("dup.yaml", "storage:\n  flush:\n    ms: 1\nstorage.flush.ms: 2\n");
  EXPECT_THAT(ErrorOf(Config::LoadFile(path)),
              AllOf(HasSubstr(path + ":3"), HasSubstr(path + ":4")));
}

}  // namespace
}  // namespace sluice
