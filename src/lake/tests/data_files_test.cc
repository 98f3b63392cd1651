// WriteDataFile's description of a file: counts, sizes and bounds from the Parquet writer's
// own statistics (COPY ... RETURN_STATS), for every primitive type a table holds.
#include "lake/data_files.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "duck/database.h"
#include "lake/duck_types.h"
#include "lake/single_value.h"
#include "lake/table_files.h"
#include "lake/tests/scratch_dirs.h"

namespace sluice::lake {
namespace data_files_test {
namespace {

constexpr std::string_view kScratch = "sluice_data_files";
[[maybe_unused]] ::testing::Environment* const kScratchDirs =
    ::testing::AddGlobalTestEnvironment(new ScratchDirs(std::string(kScratch)));

class WriteDataFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = duck::Database::Open({.threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().message();
    db_ = std::move(*db);
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().message();
    conn_ = std::move(*conn);
    ASSERT_TRUE(conn_->Execute("SET TimeZone = 'UTC'").ok());
  }

  // Writes `select`'s rows (as table `src`) and describes the file.
  DataFile Write(const std::string& select) {
    Status st = conn_->Execute(fmt::format("CREATE OR REPLACE TABLE src AS {}", select));
    EXPECT_TRUE(st.ok()) << st.message();
    auto r = conn_->Query("SELECT * FROM src LIMIT 0");
    EXPECT_TRUE(r.ok());
    std::vector<std::string> names;
    for (size_t i = 0; i < r->column_count(); ++i) names.push_back(r->column_name(i));
    auto schema = SchemaOfColumns(names, r->column_logical_types());
    EXPECT_TRUE(schema.ok()) << schema.status().message();
    schema_ = *schema;
    std::string path = ScratchDirs::Fresh(kScratch, "w") + "/f.parquet";
    auto f = WriteDataFile(*conn_, "SELECT * FROM src", schema_, path, FileUri(path));
    EXPECT_TRUE(f.ok()) << f.status().message();
    return f.ok() ? *f : DataFile{};
  }

  int32_t Id(std::string_view name) const {
    const NestedField* f = schema_.FindField(name);
    EXPECT_NE(f, nullptr) << name;
    return f == nullptr ? -1 : f->id;
  }

  // The bound of column `name`, decoded; null when absent.
  Value Bound(const DataFile& f, std::string_view name, bool upper) const {
    const auto& bounds = upper ? f.upper_bounds : f.lower_bounds;
    auto it = bounds.find(Id(name));
    if (it == bounds.end()) return Value::Null();
    auto v = FromSingleValueBinary(schema_.FindField(name)->type,
                                   Bytes(it->second.begin(), it->second.end()));
    EXPECT_TRUE(v.ok()) << name;
    return v.ok() ? *v : Value::Null();
  }

  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
  Schema schema_;
};

TEST_F(WriteDataFileTest, CountsAndBoundsOfEveryPrimitiveType) {
  DataFile f = Write(R"(
    SELECT CASE WHEN i % 10 = 0 THEN NULL ELSE i END::INTEGER AS i32,
           (i - 50)::BIGINT AS i64,
           CASE WHEN i = 3 THEN 'nan'::FLOAT ELSE i * 0.5 END::FLOAT AS f32,
           CASE WHEN i = 0 THEN -0.0 WHEN i IN (1, 2) THEN 'nan'::DOUBLE ELSE -i END::DOUBLE AS f64,
           (i / 4)::DECIMAL(9, 2) AS dec,
           DATE '1969-12-30' + i::INTEGER AS d,
           TIME '00:00:01' + to_seconds(i) AS t,
           TIMESTAMP '1970-01-01 00:00:00.000001' + to_minutes(i) AS ts,
           TIMESTAMPTZ '2000-01-01 00:00:00+05' + to_hours(i) AS tstz,
           repeat('é', i % 20) || 'x' AS s,
           i % 3 = 0 AS b,
           NULL::INTEGER AS all_null,
           uuid() AS u,
           {'a': i} AS st,
           i AS "we""ird"
    FROM range(100) r(i))");
  EXPECT_EQ(f.record_count, 100);
  EXPECT_GT(f.file_size_in_bytes, 0);

  EXPECT_EQ(f.value_counts.at(Id("i32")), 100);
  EXPECT_EQ(f.null_value_counts.at(Id("i32")), 10);
  EXPECT_EQ(Bound(f, "i32", false).as_int(), 1);
  EXPECT_EQ(Bound(f, "i32", true).as_int(), 99);
  EXPECT_EQ(Bound(f, "i64", false).as_long(), -50);
  EXPECT_EQ(Bound(f, "i64", true).as_long(), 49);

  // NaNs counted and kept out of the bounds; zero's bounds are -0.0 and +0.0.
  EXPECT_EQ(f.nan_value_counts.at(Id("f32")), 1);
  EXPECT_EQ(Bound(f, "f32", false).as_float(), 0.0f);
  EXPECT_TRUE(std::signbit(Bound(f, "f32", false).as_float()));
  EXPECT_EQ(Bound(f, "f32", true).as_float(), 49.5f);
  EXPECT_EQ(f.nan_value_counts.at(Id("f64")), 2);
  EXPECT_EQ(Bound(f, "f64", false).as_double(), -99.0);
  EXPECT_EQ(Bound(f, "f64", true).as_double(), 0.0);
  EXPECT_FALSE(std::signbit(Bound(f, "f64", true).as_double()));
  EXPECT_FALSE(f.nan_value_counts.contains(Id("i32"))) << "only float columns count NaNs";

  EXPECT_EQ(Bound(f, "dec", false).as_unscaled(), 0);
  EXPECT_EQ(Bound(f, "dec", true).as_unscaled(), 2475);
  EXPECT_EQ(Bound(f, "d", false).as_int(), -2);
  EXPECT_EQ(Bound(f, "d", true).as_int(), 97);
  EXPECT_EQ(Bound(f, "t", false).as_long(), 1'000'000);
  EXPECT_EQ(Bound(f, "t", true).as_long(), 100'000'000);
  EXPECT_EQ(Bound(f, "ts", false).as_long(), 1);
  EXPECT_EQ(Bound(f, "ts", true).as_long(), 99LL * 60'000'000 + 1);
  EXPECT_EQ(Bound(f, "tstz", false).as_long(), 946'666'800'000'000LL);
  EXPECT_EQ(Bound(f, "tstz", true).as_long(), 946'666'800'000'000LL + 99LL * 3'600'000'000);

  // Strings: cut to 16 characters, the upper bound's last one raised.
  EXPECT_EQ(Bound(f, "s", false).as_string(), "x");
  std::string upper;
  for (int i = 0; i < 15; ++i) upper += "é";
  upper += "ê";
  EXPECT_EQ(Bound(f, "s", true).as_string(), upper);

  EXPECT_FALSE(Bound(f, "b", false).as_bool());
  EXPECT_TRUE(Bound(f, "b", true).as_bool());
  EXPECT_EQ(f.null_value_counts.at(Id("all_null")), 100);
  EXPECT_FALSE(f.lower_bounds.contains(Id("all_null")));
  EXPECT_EQ(f.null_value_counts.at(Id("u")), 0);
  EXPECT_FALSE(f.lower_bounds.contains(Id("u"))) << "no bounds kept for uuids";
  EXPECT_FALSE(f.value_counts.contains(Id("st"))) << "only top-level primitive columns";
  EXPECT_EQ(Bound(f, "we\"ird", true).as_long(), 99);
  for (const char* c : {"i32", "s", "we\"ird"}) EXPECT_GT(f.column_sizes.at(Id(c)), 0) << c;
}

TEST_F(WriteDataFileTest, AnEmptyFileHasCountsAndNoBounds) {
  DataFile f = Write("SELECT i::BIGINT AS a, 'x' || i AS s FROM range(0) r(i)");
  EXPECT_EQ(f.record_count, 0);
  EXPECT_EQ(f.value_counts.at(Id("a")), 0);
  EXPECT_TRUE(f.lower_bounds.empty());
  EXPECT_TRUE(f.upper_bounds.empty());
}

TEST_F(WriteDataFileTest, OnlyNaNsLeaveNoBounds) {
  DataFile f = Write("SELECT 'nan'::DOUBLE AS x FROM range(5)");
  EXPECT_EQ(f.nan_value_counts.at(Id("x")), 5);
  EXPECT_FALSE(f.lower_bounds.contains(Id("x")));
  EXPECT_FALSE(f.upper_bounds.contains(Id("x")));
}

}  // namespace
}  // namespace data_files_test
}  // namespace sluice::lake
