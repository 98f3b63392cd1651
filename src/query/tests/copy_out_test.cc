// COPY ... TO STDOUT: the statement and option parser (sql_text.h) and the text and CSV
// value encoders (copy_out.h). The protocol flow is in server_test.cc.
#include "query/copy_out.h"

#include <gtest/gtest.h>

#include "query/sql_text.h"

namespace sluice::query {
namespace {

CopyStatement Parsed(std::string_view sql) {
  auto c = ParseCopyStatement(sql);
  EXPECT_TRUE(c.ok()) << sql << ": " << c.status().message();
  if (!c.ok() || !c->has_value()) {
    ADD_FAILURE() << sql << ": not read as COPY";
    return {};
  }
  return **c;
}

// The SQLSTATE of the error, "" when it parsed.
std::string ErrorState(std::string_view sql) {
  auto c = ParseCopyStatement(sql);
  return c.ok() ? "" : c.status().message().substr(0, 5);
}

TEST(CopyStatementTest, ReadsTheQueryForm) {
  CopyStatement c = Parsed("COPY (SELECT ')', \"a)\" FROM t /* ) */ WHERE (x > 1)) TO STDOUT");
  EXPECT_EQ(c.query, "SELECT ')', \"a)\" FROM t /* ) */ WHERE (x > 1)");
  EXPECT_EQ(c.direction, CopyStatement::Direction::kTo);
  EXPECT_EQ(c.target, CopyStatement::Target::kClient);
  EXPECT_EQ(c.options.format, CopyFormat::kText);
  EXPECT_EQ(c.options.delimiter, '\t');
  EXPECT_EQ(c.options.null_string, "\\N");
  EXPECT_FALSE(c.options.header);
  // psql's \copy sends the user's options after TO STDOUT as typed.
  c = Parsed("copy  ( select 1 ) to stdout csv header");
  EXPECT_EQ(c.query, "select 1");
  EXPECT_EQ(c.options.format, CopyFormat::kCsv);
  EXPECT_TRUE(c.options.header);
  EXPECT_EQ(c.options.delimiter, ',');
  EXPECT_EQ(c.options.null_string, "");
  EXPECT_EQ(c.options.quote, '"');
  EXPECT_EQ(c.options.escape, '"');
}

TEST(CopyStatementTest, ReadsTheTableForm) {
  EXPECT_EQ(Parsed("COPY t TO STDOUT").query, "SELECT * FROM t");
  EXPECT_EQ(Parsed("COPY lake.\"my ns\".events (id, \"User Id\") TO STDOUT").query,
            "SELECT id, \"User Id\" FROM lake.\"my ns\".events");
  CopyStatement c = Parsed("COPY BINARY t TO STDOUT");
  EXPECT_EQ(c.query, "SELECT * FROM t");
  EXPECT_EQ(c.options.format, CopyFormat::kBinary);
}

TEST(CopyStatementTest, ReadsTheOptionList) {
  CopyStatement c = Parsed(
      "COPY t TO STDOUT WITH (FORMAT csv, HEADER true, DELIMITER ';', NULL 'NULL', QUOTE '''', "
      "ESCAPE E'\\\\', "
      "FORCE_QUOTE (a, \"B\"), ENCODING 'UTF8', FREEZE false)");
  EXPECT_EQ(c.options.format, CopyFormat::kCsv);
  EXPECT_TRUE(c.options.header);
  EXPECT_EQ(c.options.delimiter, ';');
  EXPECT_EQ(c.options.null_string, "NULL");
  EXPECT_EQ(c.options.quote, '\'');
  EXPECT_EQ(c.options.escape, '\\');
  EXPECT_EQ(c.options.force_quote, (std::vector<std::string>{"a", "B"}));
  EXPECT_TRUE(Parsed("COPY t TO STDOUT (FORMAT 'csv', FORCE_QUOTE *)").options.force_quote_all);
  EXPECT_FALSE(Parsed("COPY t TO STDOUT (HEADER 0)").options.header);
  EXPECT_TRUE(Parsed("COPY t TO STDOUT (HEADER on)").options.header);
  EXPECT_TRUE(Parsed("COPY t TO STDOUT (HEADER)").options.header);
  EXPECT_EQ(Parsed("COPY t TO STDOUT (DELIMITER E'\\x7c')").options.delimiter, '|');
  EXPECT_EQ(Parsed("COPY t TO STDOUT (DELIMITER $$;$$)").options.delimiter, ';');
  EXPECT_EQ(Parsed("COPY t TO STDOUT (FORMAT binary)").options.format, CopyFormat::kBinary);
}

TEST(CopyStatementTest, ReadsTheOldOptionKeywords) {
  CopyStatement c = Parsed(
      "COPY t TO STDOUT WITH DELIMITER AS '|' NULL AS 'null' CSV HEADER QUOTE AS '\"' "
      "ESCAPE AS '\\' FORCE QUOTE a, b");
  EXPECT_EQ(c.options.format, CopyFormat::kCsv);
  EXPECT_EQ(c.options.delimiter, '|');
  EXPECT_EQ(c.options.null_string, "null");
  EXPECT_EQ(c.options.escape, '\\');
  EXPECT_EQ(c.options.force_quote, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(c.options.header);
  EXPECT_TRUE(Parsed("COPY t TO STDOUT CSV FORCE QUOTE *").options.force_quote_all);
  EXPECT_EQ(Parsed("COPY t TO STDOUT BINARY").options.format, CopyFormat::kBinary);
  EXPECT_EQ(Parsed("COPY t TO STDOUT USING DELIMITERS ','").options.delimiter, ',');
}

TEST(CopyStatementTest, TellsTheTargets) {
  EXPECT_EQ(Parsed("COPY t FROM STDIN").direction, CopyStatement::Direction::kFrom);
  EXPECT_EQ(Parsed("COPY t FROM STDIN (FORCE_NOT_NULL (a))").target,
            CopyStatement::Target::kClient);
  EXPECT_EQ(Parsed("COPY (SELECT 1) TO '/tmp/x.csv' (FORMAT csv)").target,
            CopyStatement::Target::kFile);
  EXPECT_EQ(Parsed("COPY t TO 'x.parquet' (FORMAT parquet, PARTITION_BY (a))").target,
            CopyStatement::Target::kFile);
  EXPECT_EQ(Parsed("COPY t TO PROGRAM 'rm -rf /'").target, CopyStatement::Target::kProgram);
  // Not COPY, or not Postgres's COPY: DuckDB runs (and judges) them.
  for (const char* sql :
       {"SELECT 'COPY (x) TO STDOUT'", "COPY FROM DATABASE a TO b", "COPY (SELECT 1 TO STDOUT",
        "COPY t INTO STDOUT", "-- COPY t TO STDOUT\nSELECT 1"}) {
    auto c = ParseCopyStatement(sql);
    ASSERT_TRUE(c.ok()) << sql;
    EXPECT_FALSE(c->has_value()) << sql;
  }
}

TEST(CopyStatementTest, RefusesWhatPostgresRefuses) {
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (FORMAT xml)"), "22023");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (BOGUS 1)"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (FORMAT csv, FORMAT text)"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT CSV BINARY"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (FORMAT csv"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (FORMAT csv,)"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (FORMAT csv) trailing"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT WITH CSV HEADER GARBAGE"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (HEADER maybe)"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (HEADER match)"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (DELIMITER)"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (DELIMITER ';;')"), "0A000");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (DELIMITER 'é')"), "0A000");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (DELIMITER E'\\n')"), "22023");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (DELIMITER 'a')"), "22023");  // text mode: ambiguous
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (DELIMITER '\\')"), "22023");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (FORMAT csv, DELIMITER 'a')"), "");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (NULL E'a\\rb')"), "22023");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (NULL 'a,b', FORMAT csv)"), "22023");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (NULL 'a\"b', FORMAT csv)"), "22023");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (QUOTE '''')"), "0A000");  // text mode
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (ESCAPE '\\')"), "0A000");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (FORCE_QUOTE *)"), "0A000");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (FORMAT csv, QUOTE ',')"), "22023");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (FORMAT csv, QUOTE '')"), "0A000");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (FORMAT csv, FORCE_NOT_NULL (a))"), "0A000");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (FORMAT binary, DELIMITER ',')"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (FORMAT binary, NULL '')"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (FORMAT binary, HEADER)"), "0A000");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (ENCODING 'LATIN1')"), "0A000");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (DELIMITER E'\\xff')"), "22021");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (DELIMITER 'unterminated)"), "42601");
  EXPECT_EQ(ErrorState("COPY () TO STDOUT"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (NULL 'ab'')"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (NULL E'ab\\')"), "42601");
  EXPECT_EQ(ErrorState("COPY t TO STDOUT (NULL $$ab$)"), "42601");
  EXPECT_EQ(Parsed("COPY t TO STDOUT (NULL E'a\\'b')").options.null_string, "a'b");
  EXPECT_EQ(Parsed("COPY t TO STDOUT (NULL 'a''b')").options.null_string, "a'b");
  EXPECT_EQ(Parsed("COPY t TO STDOUT (NULL '')").options.null_string, "");
}

std::string Text(std::string_view v, char delimiter = '\t') {
  std::string out;
  AppendCopyText(v, delimiter, out);
  return out;
}

std::string Csv(std::string_view v, const CopyOptions& o, bool force = false, bool only = false) {
  std::string out;
  AppendCopyCsv(v, o, force, only, out);
  return out;
}

TEST(CopyFormatTest, TextEscapesBackslashDelimiterAndControlCharacters) {
  EXPECT_EQ(Text("plain"), "plain");
  EXPECT_EQ(Text("a\\b"), "a\\\\b");
  EXPECT_EQ(Text("a\tb\nc\rd"), "a\\tb\\nc\\rd");
  EXPECT_EQ(Text("\b\f\v"), "\\b\\f\\v");
  EXPECT_EQ(Text("a|b", '|'), "a\\|b");
  EXPECT_EQ(Text("\\N"), "\\\\N");  // a value that reads like NULL stays a value
  EXPECT_EQ(Text(std::string_view("\x01", 1)), std::string_view("\x01", 1));
  EXPECT_EQ(Text(std::string_view("\x01", 1), '\x01'), std::string_view("\\\x01", 2));
  EXPECT_EQ(Text("zürich 東京 😀"), "zürich 東京 😀");
  EXPECT_EQ(Text(""), "");
}

TEST(CopyFormatTest, CsvQuotesWhatNeedsQuoting) {
  CopyOptions o;
  o.format = CopyFormat::kCsv;
  o.delimiter = ',';
  o.null_string = "";
  EXPECT_EQ(Csv("plain", o), "plain");
  EXPECT_EQ(Csv("", o), "\"\"");  // the empty string is not NULL (which is nothing)
  EXPECT_EQ(Csv("a,b", o), "\"a,b\"");
  EXPECT_EQ(Csv("say \"hi\"", o), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(Csv("two\nlines", o), "\"two\nlines\"");
  EXPECT_EQ(Csv("cr\r", o), "\"cr\r\"");
  EXPECT_EQ(Csv("back\\slash", o), "back\\slash");
  EXPECT_EQ(Csv("zürich, 東京", o), "\"zürich, 東京\"");
  EXPECT_EQ(Csv("x", o, /*force=*/true), "\"x\"");
  EXPECT_EQ(Csv("\\.", o, false, /*only_column=*/true), "\"\\.\"");
  EXPECT_EQ(Csv("\\.", o), "\\.");
  o.null_string = "NULL";
  EXPECT_EQ(Csv("NULL", o), "\"NULL\"");
  EXPECT_EQ(Csv("", o), "");
  o.escape = '\\';
  EXPECT_EQ(Csv("a\"b\\c", o), "\"a\\\"b\\\\c\"");
  o.delimiter = ';';
  EXPECT_EQ(Csv("a,b", o), "a,b");
  EXPECT_EQ(Csv("a;b", o), "\"a;b\"");
}

}  // namespace
}  // namespace sluice::query
