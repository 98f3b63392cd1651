// The lake planner over real tables: Parquet written by DuckDB with statistics, manifests
// and metadata by sluice. Every query's answer through the planner is compared with DuckDB
// reading every file of the snapshot without pruning (the reference), and where pruning
// must happen, the files it kept are asserted.
#include "query/lake_planner/lake_planner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include "lake/data_files.h"
#include "lake/iceberg_json.h"
#include "lake/parquet_read.h"
#include "lake/table.h"
#include "lake/table_files.h"
#include "lake/transforms.h"

namespace sluice::query {
namespace {

namespace fs = std::filesystem;
using lake::avro::Datum;

std::string FreshDir(std::string_view name) {
  std::string dir = ::testing::TempDir() + "/sluice_lake_planner_" + std::to_string(getpid()) +
                    "_" + std::string(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

lake::Schema ParseSchema(std::string_view json) {
  auto s = lake::SchemaFromJson(lake::Json::parse(json), "$", true);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

constexpr int32_t kDay0 = 19723;  // 2024-01-01

class LakePlannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    warehouse_ = FreshDir(info->name());
    catalog_ = std::make_unique<WarehouseCatalog>(warehouse_);
    auto db = duck::Database::Open({.threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().message();
    db_ = std::move(*db);
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().message();
    conn_ = std::move(*conn);
  }
  void TearDown() override { fs::remove_all(warehouse_); }

  std::string Root(const std::string& table) const { return warehouse_ + "/db/" + table; }

  lake::Table Create(const std::string& table, const lake::Schema& schema,
                     const lake::PartitionSpec& spec) {
    fs::create_directories(Root(table) + "/data");
    auto t = lake::Table::Create(Root(table), schema, spec, {});
    EXPECT_TRUE(t.ok()) << t.status().message();
    return std::move(*t);
  }

  // One data file of `select`'s rows (columns as the table's current schema) with `partition`.
  lake::DataFile File(lake::Table& t, const std::string& select,
                      Datum partition = Datum::Record({})) {
    const lake::Schema* schema = t.metadata().CurrentSchema();
    std::string path = fmt::format("{}/data/{}.parquet", t.files().root(), lake::NewUuid());
    auto f = lake::WriteDataFile(*conn_, select, *schema, path, lake::FileUri(path));
    EXPECT_TRUE(f.ok()) << f.status().message() << "\n" << select;
    f->partition = std::move(partition);
    return *f;
  }

  int64_t Append(lake::Table& t, const std::vector<lake::DataFile>& files) {
    auto id = t.Append(
        files, [](const lake::TableMetadata&) -> Result<std::map<std::string, std::string>> {
          return std::map<std::string, std::string>{};
        });
    EXPECT_TRUE(id.ok()) << id.status().message();
    return id.ok() ? *id : 0;
  }

  // events (id long, ts timestamp, city string, amount double, note string), partitioned by
  // day(ts) and city: 4 days x 2 cities, one file each of 25 rows; amount has NULLs in
  // oslo's files and a NaN on day 3 in rome; notes are longer than the 16-character bound.
  void MakeEvents() {
    lake::Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
        {"id":1,"name":"id","required":false,"type":"long"},
        {"id":2,"name":"ts","required":false,"type":"timestamp"},
        {"id":3,"name":"city","required":false,"type":"string"},
        {"id":4,"name":"amount","required":false,"type":"double"},
        {"id":5,"name":"note","required":false,"type":"string"}]})j");
    lake::PartitionSpec spec;
    spec.fields.push_back(lake::PartitionField{2, 1000, "ts_day", lake::Transform::Day()});
    spec.fields.push_back(lake::PartitionField{3, 1001, "city", lake::Transform::Identity()});
    lake::Table t = Create("events", s, spec);
    std::vector<lake::DataFile> files;
    int n = 0;
    for (int day = 0; day < 4; ++day) {
      for (std::string city : {"oslo", "rome"}) {
        std::string amount = city == "oslo" ? "CASE WHEN i % 3 = 0 THEN NULL ELSE i * 1.5 END"
                             : day == 3     ? "CASE WHEN i = 7 THEN 'NaN'::DOUBLE ELSE i * 2.0 END"
                                            : "i * 2.0";
        std::string select = fmt::format(
            "SELECT ({0} * 25 + i)::BIGINT AS id, TIMESTAMP '2024-01-01' + INTERVAL ({1}) DAY + "
            "INTERVAL (i) HOUR "
            "- INTERVAL 1 MICROSECOND * (i = 24)::INT AS ts, '{2}' AS city, ({3})::DOUBLE AS "
            "amount, "
            "'a long note that is longer than sixteen characters #' || ({0} * 25 + i) AS note FROM "
            "range(25) r(i)",
            n, day, city, amount);
        files.push_back(File(
            t, select,
            Datum::Record({{"ts_day", Datum::Int(kDay0 + day)}, {"city", Datum::String(city)}})));
        ++n;
      }
      if (day % 2 == 1) {  // two appends: a manifest for days 0-1, one for days 2-3
        Append(t, files);
        files.clear();
      }
    }
  }

  // users (uid int, name string), bucket[4](uid): one file per bucket.
  void MakeUsers() {
    lake::Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
        {"id":1,"name":"uid","required":false,"type":"int"},
        {"id":2,"name":"name","required":false,"type":"string"}]})j");
    lake::PartitionSpec spec;
    spec.fields.push_back(lake::PartitionField{1, 1000, "uid_bucket", lake::Transform::Bucket(4)});
    lake::Table t = Create("users", s, spec);
    std::map<int32_t, std::vector<std::string>> by_bucket;
    for (int32_t uid = 0; uid < 100; ++uid) {
      auto b = lake::Transform::Bucket(4).Apply(lake::Type::Primitive(lake::TypeId::kInt),
                                                lake::Value::Int(uid));
      ASSERT_TRUE(b.ok());
      by_bucket[b->as_int()].push_back(fmt::format("({}, 'user{}')", uid, uid));
    }
    std::vector<lake::DataFile> files;
    for (const auto& [b, rows] : by_bucket) {
      files.push_back(
          File(t,
               fmt::format("SELECT c0::INTEGER AS uid, c1 AS name FROM (VALUES {}) v(c0, c1)",
                           fmt::join(rows, ", ")),
               Datum::Record({{"uid_bucket", Datum::Int(b)}})));
    }
    Append(t, files);
  }

  // words (w string, n long), truncate[2](w): files "ap", "ba", "ch" and one of NULL words.
  void MakeWords() {
    lake::Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
        {"id":1,"name":"w","required":false,"type":"string"},
        {"id":2,"name":"n","required":false,"type":"long"}]})j");
    lake::PartitionSpec spec;
    spec.fields.push_back(lake::PartitionField{1, 1000, "w_trunc", lake::Transform::Truncate(2)});
    lake::Table t = Create("words", s, spec);
    std::vector<lake::DataFile> files;
    std::map<std::string, std::string> groups = {{"ap", "'apple', 'apricot', 'ap'"},
                                                 {"ba", "'banana', 'bandana', 'basil'"},
                                                 {"ch", "'cherry', 'chive', 'chocolate'"}};
    int64_t base = 0;
    for (const auto& [prefix, words] : groups) {
      files.push_back(File(t,
                           fmt::format("SELECT w, ({} + row_number() OVER ())::BIGINT AS n FROM "
                                       "(SELECT unnest([{}]) AS w)",
                                       base, words),
                           Datum::Record({{"w_trunc", Datum::String(prefix)}})));
      base += 10;
    }
    files.push_back(File(t, "SELECT NULL::VARCHAR AS w, 100::BIGINT AS n",
                         Datum::Record({{"w_trunc", Datum::Null()}})));
    Append(t, files);
  }

  // Every file of the table's snapshot (the current one, or `snapshot_id`), read without
  // pruning under that snapshot's schema (or the current one).
  std::string Reference(const std::string& table,
                        std::optional<int64_t> snapshot_id = std::nullopt) {
    auto t = lake::Table::Load(Root(table));
    EXPECT_TRUE(t.ok()) << t.status().message();
    const lake::TableMetadata& m = t->metadata();
    const lake::Snapshot* s = snapshot_id ? m.FindSnapshot(*snapshot_id) : m.CurrentSnapshot();
    const lake::Schema* schema = m.CurrentSchema();
    if (snapshot_id && s->schema_id) schema = m.FindSchema(*s->schema_id);
    std::vector<std::string> paths;
    if (s != nullptr) {
      auto manifests = lake::ReadManifestsOf(*s);
      EXPECT_TRUE(manifests.ok()) << manifests.status().message();
      for (const lake::ManifestFile& mf : *manifests) {
        auto entries = lake::ReadEntriesOf(mf);
        EXPECT_TRUE(entries.ok());
        for (const lake::ManifestEntry& e : *entries) {
          if (e.status != lake::EntryStatus::kDeleted)
            paths.push_back(*lake::LocalPath(e.file.file_path));
        }
      }
    }
    return fmt::format("({})", lake::ParquetScanSql(paths, *schema));
  }

  std::vector<std::string> Rows(const std::string& sql) {
    auto rows = conn_->QueryText(sql);
    EXPECT_TRUE(rows.ok()) << rows.status().message() << "\n" << sql;
    std::vector<std::string> out;
    if (!rows.ok()) return out;
    for (const auto& r : *rows) {
      std::string line;
      for (const auto& v : r) line += (line.empty() ? "" : "|") + v.value_or("NULL");
      out.push_back(line);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  Result<PlannedQuery> Plan(const std::string& sql) {
    return PlanLakeQuery(*conn_, sql, *catalog_);
  }

  // `query` with {t} for each table name in `tables`: planned with lake.db.<t>, against the
  // reference with every file. Returns the plan.
  PlannedQuery Check(const std::string& query, const std::vector<std::string>& tables,
                     const std::map<std::string, std::optional<int64_t>>& snapshots = {}) {
    std::string planned = query, reference = query;
    for (const std::string& t : tables) {
      const std::string key = "{" + t + "}";
      auto snap = snapshots.find(t);
      std::string ref = Reference(t, snap == snapshots.end() ? std::nullopt : snap->second);
      for (size_t p; (p = planned.find(key)) != std::string::npos;)
        planned.replace(p, key.size(), "lake.db." + t);
      for (size_t p; (p = reference.find(key)) != std::string::npos;)
        reference.replace(p, key.size(), ref);
    }
    // The reference keeps AT clauses out: the snapshot is chosen by `snapshots`.
    for (std::string_view at : {" AT (VERSION => ", " AT (TIMESTAMP => "}) {
      for (size_t p; (p = reference.find(at)) != std::string::npos;) {
        size_t depth = 0, q = reference.find('(', p);
        for (; q < reference.size(); ++q) {
          if (reference[q] == '(') ++depth;
          if (reference[q] == ')' && --depth == 0) break;
        }
        reference.erase(p, q + 1 - p);
      }
    }
    auto plan = Plan(planned);
    EXPECT_TRUE(plan.ok()) << plan.status().message() << "\n" << planned;
    if (!plan.ok()) return PlannedQuery{};
    EXPECT_TRUE(plan->rewritten) << planned;
    std::vector<std::string> expected = Rows(reference);
    EXPECT_EQ(Rows(plan->sql), expected) << planned << "\n-> " << plan->sql;
    return *plan;
  }

  std::string warehouse_;
  std::unique_ptr<WarehouseCatalog> catalog_;
  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

TEST_F(LakePlannerTest, SqlWithoutLakeTablesComesBackUnchanged) {
  for (std::string sql :
       {"SELECT 1", "SELECT * FROM range(3) AS lake", "SELEC nonsense FROM lake.db.t",
        "SELECT 'lake' AS lake_id, '/data/lakes/x' AS path", "CREATE TABLE x AS SELECT 1",
        "SELECT * FROM lake.t"}) {
    auto plan = Plan(sql);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_FALSE(plan->rewritten) << sql;
    EXPECT_EQ(plan->sql, sql);
    EXPECT_TRUE(plan->tables.empty());
  }
}

TEST_F(LakePlannerTest, PartitionValuesPruneByIdentityAndDay) {
  MakeEvents();
  PlannedQuery q = Check("SELECT id, city FROM {events} WHERE city = 'oslo'", {"events"});
  ASSERT_EQ(q.tables.size(), 1u);
  EXPECT_EQ(q.tables[0].table, "db.events");
  EXPECT_EQ(q.tables[0].stats.files_total, 8);
  EXPECT_EQ(q.tables[0].stats.files_kept, 4);
  EXPECT_EQ(q.tables[0].stats.pruned_by_partition, 4);

  EXPECT_EQ(q.tables[0].stats.manifests_total, 2);
  EXPECT_EQ(q.tables[0].stats.manifests_read, 2);
  // The manifest of days 0-1 is skipped by its partition summary, unread.
  q = Check("SELECT count(*), sum(id) FROM {events} WHERE ts >= TIMESTAMP '2024-01-03'",
            {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 4);
  EXPECT_EQ(q.tables[0].stats.manifests_read, 1);
  EXPECT_EQ(q.tables[0].stats.files_total, 8);
  EXPECT_EQ(q.tables[0].stats.pruned_by_partition, 4);
  // A string literal is cast to the column's type, as the query does.
  q = Check("SELECT count(*) FROM {events} WHERE ts < '2024-01-02' AND city IN ('rome', 'paris')",
            {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  // The last microsecond of a day stays in that day's file.
  q = Check("SELECT id FROM {events} WHERE ts = TIMESTAMP '2024-01-02 23:59:59.999999'",
            {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 2);
  q = Check(
      "SELECT count(*) FROM {events} WHERE ts BETWEEN DATE '2024-01-02' AND DATE '2024-01-02'",
      {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 2);
  // OR of prunable branches; an unusable conjunct (a function of the column) is kept.
  q = Check(
      "SELECT count(*) FROM {events} WHERE (city = 'oslo' AND ts < '2024-01-02') OR city = 'rome' "
      "AND "
      "lower(note) LIKE '%#1%'",
      {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 5);
  EXPECT_EQ(q.tables[0].stats.snapshot_id,
            lake::Table::Load(Root("events"))->metadata().current_snapshot_id);
}

TEST_F(LakePlannerTest, ColumnStatisticsPrune) {
  MakeEvents();
  PlannedQuery q = Check("SELECT * FROM {events} WHERE id BETWEEN 30 AND 40", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  EXPECT_EQ(q.tables[0].stats.pruned_by_stats, 7);
  // DuckDB is told the kept files' rows (its estimate of a read with a schema is 1,000 rows
  // a file, which can put a join's hash table on the wrong side).
  EXPECT_NE(q.sql.find(fmt::format("explicit_cardinality = {}", q.tables[0].stats.records_kept)),
            std::string::npos)
      << q.sql;
  EXPECT_GT(q.tables[0].stats.records_kept, 0);
  q = Check("SELECT id FROM {events} WHERE id > 190 OR id < 3", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 2);
  q = Check("SELECT id FROM {events} e WHERE e.id IN (5, 199)", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 2);
  // Only oslo's files hold NULL amounts.
  q = Check("SELECT id FROM {events} WHERE amount IS NULL", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 4);
  q = Check("SELECT count(*) FROM {events} WHERE amount IS NOT NULL", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 8);
  // NaN sorts above every number in DuckDB: the file holding one is kept for >.
  q = Check("SELECT id, amount FROM {events} WHERE amount > 1000", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  q = Check("SELECT id FROM {events} WHERE amount = 'NaN'::DOUBLE", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  // Numbers of another type compare by value: 47.5 is above every amount of the first files.
  q = Check("SELECT id FROM {events} WHERE amount >= 47.5 AND ts < '2024-01-02'", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  // id <> constant prunes nothing here, and is still right.
  Check("SELECT count(*) FROM {events} WHERE id <> 3", {"events"});
  Check(
      "SELECT count(*) FROM {events} WHERE id IS DISTINCT FROM 3 AND amount IS NOT DISTINCT FROM "
      "NULL",
      {"events"});
}

TEST_F(LakePlannerTest, StringBoundsTruncatedAtSixteenCharactersKeepLongerValues) {
  MakeEvents();
  // Every note shares its first 16 characters: bounds cannot tell the files apart, and
  // must not drop the one holding it.
  PlannedQuery q = Check(
      "SELECT id FROM {events} WHERE note = 'a long note that is longer than sixteen characters "
      "#77'",
      {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 8);
  q = Check(
      "SELECT id FROM {events} WHERE note > 'a long note that is longer than sixteen characters "
      "#198'",
      {"events"});
  q = Check("SELECT id FROM {events} WHERE note < 'a long note that'", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 0);
  q = Check("SELECT id FROM {events} WHERE note >= 'a long note that'", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 8);
}

// A string bound that is not well-formed UTF-8 (an overlong form, a surrogate) is not
// trusted: it orders above 'x' by its bytes, but the file holding 'x' must be kept.
TEST_F(LakePlannerTest, StringBoundsThatAreNotUtf8DoNotPrune) {
  lake::Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"tag","required":false,"type":"string"}]})j");
  lake::Table t = Create("tags", s, lake::PartitionSpec{});
  std::vector<lake::DataFile> files;
  for (const std::string& bad : {std::string("\xC0\xAF"), std::string("\xED\xA0\x80")}) {
    lake::DataFile f = File(t, "SELECT 'x' AS tag");
    f.lower_bounds[1] = bad;  // '/' written in two bytes; U+D800
    f.upper_bounds[1] = bad;
    files.push_back(std::move(f));
  }
  Append(t, files);
  for (const char* filter : {"tag = 'x'", "tag < 'y'", "tag <= 'x'"}) {
    auto plan = PlanLakeQuery(
        *conn_, fmt::format("SELECT count(*) FROM lake.db.tags WHERE {}", filter), *catalog_);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    ASSERT_EQ(plan->tables.size(), 1u);
    EXPECT_EQ(plan->tables[0].stats.files_kept, 2) << filter;
    EXPECT_EQ(Rows(plan->sql), (std::vector<std::string>{"2"})) << filter;
  }
  // Such a string is not written as a literal either; a well-formed one is.
  EXPECT_FALSE(
      LiteralSql(lake::Type::Primitive(lake::TypeId::kString), lake::Value::String("\xC0\xAF"))
          .has_value());
  EXPECT_FALSE(
      LiteralSql(lake::Type::Primitive(lake::TypeId::kString), lake::Value::String("\xED\xA0\x80"))
          .has_value());
  EXPECT_EQ(
      LiteralSql(lake::Type::Primitive(lake::TypeId::kString), lake::Value::String("\xC3\xA9")),
      "'\xC3\xA9'");
}

TEST_F(LakePlannerTest, BucketAndTruncatePartitions) {
  MakeUsers();
  MakeWords();
  PlannedQuery q = Check("SELECT * FROM {users} WHERE uid = 42", {"users"});
  EXPECT_EQ(q.tables[0].stats.files_total, 4);
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  q = Check("SELECT * FROM {users} WHERE uid IN (1, 2, 3, 4, 5, 6, 7, 8)", {"users"});
  q = Check("SELECT count(*) FROM {users} WHERE uid = 42::BIGINT", {"users"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  // A long IN list (its constants typed and printed in one call each).
  std::vector<std::string> many;
  for (int i = 0; i < 500; ++i) many.push_back(std::to_string(1000 + i));
  many.push_back("42");
  q = Check(fmt::format("SELECT * FROM {{users}} WHERE uid IN ({})", fmt::join(many, ", ")),
            {"users"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 4);  // 500 values hit every bucket
  q = Check(
      "SELECT * FROM {users} WHERE uid IN (42, 40 + 2, 1000000) AND name IN ('user42', 'a, b')",
      {"users"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  // One value of another family makes the whole list unusable (and names are in every bucket).
  q = Check("SELECT * FROM {users} WHERE uid IN (42, '4' || '2') AND name IN ('user42', 'a, b')",
            {"users"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 4);
  q = Check("SELECT count(*) FROM {users} WHERE uid < 50", {"users"});  // buckets do not order
  EXPECT_EQ(q.tables[0].stats.files_kept, 4);

  q = Check("SELECT * FROM {words} WHERE w = 'banana'", {"words"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  q = Check("SELECT * FROM {words} WHERE w >= 'bz'", {"words"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  q = Check("SELECT * FROM {words} WHERE w < 'b'", {"words"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  q = Check("SELECT * FROM {words} WHERE w = 'ap'", {"words"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  q = Check("SELECT n FROM {words} WHERE w IS NULL", {"words"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  // "ap" by n's bounds, the NULL words' file by its partition.
  q = Check("SELECT n FROM {words} WHERE w IS NOT NULL AND n > 5", {"words"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 2);
  EXPECT_EQ(q.tables[0].stats.pruned_by_partition, 1);
  EXPECT_EQ(q.tables[0].stats.pruned_by_stats, 1);
}

TEST_F(LakePlannerTest, JoinsSubqueriesCtesAndSetOperations) {
  MakeEvents();
  MakeUsers();
  PlannedQuery q = Check(
      "SELECT e.id, u.name FROM {events} e JOIN {users} u ON u.uid = e.id WHERE e.city = 'rome' "
      "AND u.uid < 30",
      {"events", "users"});
  ASSERT_EQ(q.tables.size(), 2u);
  EXPECT_EQ(q.tables[0].stats.files_kept, 4);
  q = Check(
      "WITH r AS (SELECT * FROM {events} WHERE city = 'rome') SELECT count(*), min(id) FROM r "
      "WHERE id > 100",
      {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 4);
  q = Check(
      "SELECT count(*) FROM (SELECT id FROM {events} WHERE id < 10 UNION ALL SELECT uid FROM "
      "{users} WHERE uid = 7)",
      {"events", "users"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  EXPECT_EQ(q.tables[1].stats.files_kept, 1);
  // In a subquery of the WHERE; correlated names from outside are not constants.
  q = Check(
      "SELECT uid FROM {users} u WHERE EXISTS (SELECT 1 FROM {events} e WHERE e.id = u.uid AND "
      "e.ts < '2024-01-02')",
      {"users", "events"});
  EXPECT_EQ(q.tables[1].stats.files_kept, 2);
  // The nullable side of an outer join is not pruned by the WHERE (its rows would turn into
  // NULL-extended ones); the preserved side is.
  q = Check(
      "SELECT u.uid, e.id FROM {users} u LEFT JOIN {events} e ON e.id = u.uid WHERE e.id IS NULL "
      "OR u.uid < 3",
      {"users", "events"});
  EXPECT_EQ(q.tables[1].stats.files_kept, 8);
  q = Check(
      "SELECT u.uid, e.id FROM {users} u LEFT JOIN {events} e ON e.id = u.uid WHERE u.uid = 3",
      {"users", "events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  EXPECT_EQ(q.tables[1].stats.files_kept, 8);
  // A self-join, both references planned; the full name qualifies a column.
  q = Check(
      "SELECT a.id FROM {events} a, {events} b WHERE a.id = b.id + 1 AND b.id = 3 AND a.city = "
      "'oslo'",
      {"events"});
  ASSERT_EQ(q.tables.size(), 2u);
  auto plan =
      Plan("SELECT lake.db.events.id, db.events.city FROM lake.db.events WHERE db.events.id = 3");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->tables[0].stats.files_kept, 1);
  EXPECT_EQ(Rows(plan->sql), (std::vector<std::string>{"3|oslo"}));
}

TEST_F(LakePlannerTest, TimeTravelByVersionAndTimestamp) {
  lake::Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"x","required":false,"type":"long"}]})j");
  lake::Table t = Create("tt", s, lake::PartitionSpec{});
  int64_t first = Append(t, {File(t, "SELECT range AS x FROM range(0, 10)")});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  int64_t second = Append(t, {File(t, "SELECT range AS x FROM range(10, 30)")});
  auto loaded = lake::Table::Load(Root("tt"));
  ASSERT_TRUE(loaded.ok());
  const lake::TableMetadata& m = loaded->metadata();
  const int64_t first_ms = m.FindSnapshot(first)->timestamp_ms;
  const int64_t second_ms = m.FindSnapshot(second)->timestamp_ms;
  ASSERT_LT(first_ms, second_ms);

  PlannedQuery q =
      Check(fmt::format("SELECT count(*), max(x) FROM {{tt}} AT (VERSION => {})", first), {"tt"},
            {{"tt", first}});
  EXPECT_EQ(q.tables[0].stats.snapshot_id, first);
  EXPECT_EQ(Rows(q.sql), (std::vector<std::string>{"10|9"}));
  q = Check("SELECT count(*) FROM {tt}", {"tt"});
  EXPECT_EQ(Rows(q.sql), (std::vector<std::string>{"30"}));
  // By time: a TIMESTAMP is UTC; between the two commits the first one answers.
  q = Check(
      fmt::format("SELECT count(*) FROM {{tt}} AT (TIMESTAMP => make_timestamp({}::BIGINT * 1000))",
                  second_ms - 1),
      {"tt"}, {{"tt", first}});
  EXPECT_EQ(q.tables[0].stats.snapshot_id, first);
  q = Check(
      fmt::format("SELECT count(*) FROM {{tt}} AT (TIMESTAMP => make_timestamp({}::BIGINT * 1000))",
                  second_ms),
      {"tt"}, {{"tt", second}});
  EXPECT_EQ(q.tables[0].stats.snapshot_id, second);
  // Both versions in one query, with pruning on each.
  auto both =
      Plan(fmt::format("SELECT (SELECT count(*) FROM lake.db.tt AT (VERSION => {}) WHERE x >= 10), "
                       "(SELECT count(*) FROM lake.db.tt WHERE x >= 10)",
                       first));
  ASSERT_TRUE(both.ok()) << both.status().message();
  q = *both;
  ASSERT_EQ(q.tables.size(), 2u);
  EXPECT_EQ(Rows(q.sql), (std::vector<std::string>{"0|20"}));
  EXPECT_EQ(q.tables[0].stats.files_kept, 0);
  EXPECT_EQ(q.tables[1].stats.files_kept, 1);

  auto bad = Plan("SELECT * FROM lake.db.tt AT (VERSION => 12345)");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("db.tt has no snapshot 12345"), std::string::npos)
      << bad.status().message();
  bad = Plan("SELECT * FROM lake.db.tt AT (TIMESTAMP => TIMESTAMP '2000-01-01')");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("no snapshot at or before 2000-01-01"), std::string::npos)
      << bad.status().message();
  bad = Plan("SELECT * FROM lake.db.tt AT (VERSION => 'nope')");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no branch or tag \"nope\""), std::string::npos)
      << bad.status().message();
  // The main branch by name.
  auto main = Plan("SELECT count(*) FROM lake.db.tt AT (VERSION => 'main')");
  ASSERT_TRUE(main.ok()) << main.status().message();
  EXPECT_EQ(Rows(main->sql), (std::vector<std::string>{"30"}));
}

TEST_F(LakePlannerTest, SchemaEvolutionRenamesAddsAndPromotes) {
  lake::Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"id","required":false,"type":"int"},
      {"id":2,"name":"name","required":false,"type":"string"}]})j");
  lake::Table t = Create("evolve", s, lake::PartitionSpec{});
  int64_t v1 =
      Append(t, {File(t, "SELECT range::INTEGER AS id, 'n' || range AS name FROM range(0, 5)")});
  // Rename name -> label, promote id to long, add extra.
  auto changed = t.CommitUpdates(
      [](const lake::TableMetadata& base) -> Result<std::vector<lake::TableUpdate>> {
        lake::Schema next = *base.CurrentSchema();
        next.schema_id = 1;
        next.fields[0].type = lake::Type::Primitive(lake::TypeId::kLong);
        next.fields[1].name = "label";
        next.fields.push_back(
            lake::NestedField{3, "extra", false, lake::Type::Primitive(lake::TypeId::kDouble), {}});
        return std::vector<lake::TableUpdate>{lake::AddSchemaUpdate{next, 3},
                                              lake::SetCurrentSchemaUpdate{-1}};
      },
      0);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  ASSERT_TRUE(t.Refresh().ok());
  Append(t, {File(t,
                  "SELECT range::BIGINT AS id, 'm' || range AS label, range * 0.5 AS extra FROM "
                  "range(100, 103)")});

  PlannedQuery q = Check("SELECT id, label, extra FROM {evolve}", {"evolve"});
  EXPECT_EQ(Rows(q.sql).size(), 8u);
  // The old file has no statistics for extra: kept, its rows NULL there.
  q = Check("SELECT id, label FROM {evolve} WHERE extra IS NULL", {"evolve"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);  // the new file has no NULL extra
  q = Check("SELECT id FROM {evolve} WHERE extra > 0.7", {"evolve"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 2);
  // Bounds of the int file read as long.
  q = Check("SELECT label FROM {evolve} WHERE id >= 100", {"evolve"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  EXPECT_EQ(Rows(q.sql), (std::vector<std::string>{"m100", "m101", "m102"}));
  // The old version reads with its own schema.
  q = Check(fmt::format("SELECT * FROM {{evolve}} AT (VERSION => {})", v1), {"evolve"},
            {{"evolve", v1}});
  EXPECT_EQ(Rows(q.sql).front(), "0|n0");
}

TEST_F(LakePlannerTest, EmptyTablesAndEmptyResults) {
  lake::Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"a","required":false,"type":"long"},
      {"id":2,"name":"b","required":false,"type":"date"}]})j");
  Create("nothing", s, lake::PartitionSpec{});
  auto plan = Plan("SELECT count(*), max(b) FROM lake.db.nothing");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(Rows(plan->sql), (std::vector<std::string>{"0|NULL"}));
  EXPECT_FALSE(plan->tables[0].stats.snapshot_id.has_value());
  plan = Plan("SELECT typeof(b) FROM lake.db.nothing UNION ALL SELECT 'x'");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(Rows(plan->sql), (std::vector<std::string>{"x"}));

  MakeEvents();
  PlannedQuery q = Check("SELECT count(*) FROM {events} WHERE city = 'paris'", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 0);
  EXPECT_EQ(Rows(q.sql), (std::vector<std::string>{"0"}));
}

TEST_F(LakePlannerTest, UnknownTablesAndCorruptManifestsAreClearErrors) {
  auto plan = Plan("SELECT * FROM lake.db.missing");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kNotFound);
  EXPECT_NE(plan.status().message().find("lake table db.missing does not exist"), std::string::npos)
      << plan.status().message();
  plan = Plan("SELECT * FROM lake.\"..\".x");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument) << plan.status().message();

  // A two-level namespace: its levels joined by dots in one quoted name.
  lake::Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"x","required":false,"type":"long"}]})j");
  fs::create_directories(warehouse_ + "/a/b/deep/data");
  auto deep = lake::Table::Create(warehouse_ + "/a/b/deep", s, lake::PartitionSpec{}, {});
  ASSERT_TRUE(deep.ok()) << deep.status().message();
  Append(*deep, {File(*deep, "SELECT range AS x FROM range(4)")});
  plan = Plan("SELECT sum(x) FROM lake.\"a.b\".deep");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->tables[0].table, "a.b.deep");
  EXPECT_EQ(Rows(plan->sql), (std::vector<std::string>{"6"}));

  MakeEvents();
  auto t = lake::Table::Load(Root("events"));
  ASSERT_TRUE(t.ok());
  auto manifests = lake::ReadManifestsOf(*t->metadata().CurrentSnapshot());
  ASSERT_TRUE(manifests.ok());
  std::string path = *lake::LocalPath(manifests->at(0).manifest_path);
  std::ofstream(path, std::ios::trunc) << "not avro";
  plan = Plan("SELECT * FROM lake.db.events");
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find(path), std::string::npos) << plan.status().message();
}

// The catalog keeps parsed metadata and manifests between queries (FileCache); a commit
// between two queries moves the table's current version, and the next query sees it.
TEST_F(LakePlannerTest, CachedMetadataSeesANewSnapshotAndADroppedTable) {
  MakeEvents();
  const std::string sql = "SELECT count(*), sum(id) FROM {events} WHERE city = 'oslo'";
  PlannedQuery first = Check(sql, {"events"});
  EXPECT_EQ(first.tables[0].stats.files_total, 8);
  PlannedQuery again = Check(sql, {"events"});
  EXPECT_EQ(again.tables[0].stats.snapshot_id, first.tables[0].stats.snapshot_id);
  const FileCache::Stats warm = catalog_->cache_stats();
  EXPECT_GE(warm.hits, 4) << "metadata, manifest list and two manifests the second time";
  EXPECT_GT(warm.entries, 0u);

  auto t = lake::Table::Load(Root("events"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  Append(
      *t,
      {File(*t,
            "SELECT 1000::BIGINT AS id, TIMESTAMP '2024-01-02' AS ts, 'oslo' AS city, "
            "1.0::DOUBLE AS amount, 'new' AS note",
            Datum::Record({{"ts_day", Datum::Int(kDay0 + 1)}, {"city", Datum::String("oslo")}}))});
  PlannedQuery after = Check(sql, {"events"});
  EXPECT_NE(after.tables[0].stats.snapshot_id, first.tables[0].stats.snapshot_id);
  EXPECT_EQ(after.tables[0].stats.files_total, 9);
  ASSERT_EQ(Rows(after.sql).size(), 1u);
  EXPECT_TRUE(Rows(after.sql)[0].starts_with("101|")) << Rows(after.sql)[0];

  // Dropped: the directory is gone, the cached metadata is not used.
  fs::remove_all(Root("events"));
  auto dropped = Plan("SELECT count(*) FROM lake.db.events");
  ASSERT_FALSE(dropped.ok());
  EXPECT_EQ(dropped.status().code(), StatusCode::kNotFound) << dropped.status().message();
  // Created again under the same name: its own metadata and files.
  lake::Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"x","required":false,"type":"long"}]})j");
  lake::Table other = Create("events", s, lake::PartitionSpec{});
  Append(other, {File(other, "SELECT range AS x FROM range(3)")});
  auto recreated = Plan("SELECT sum(x) FROM lake.db.events");
  ASSERT_TRUE(recreated.ok()) << recreated.status().message();
  EXPECT_EQ(Rows(recreated->sql), (std::vector<std::string>{"3"}));
}

// Sessions are threads planning on their own connections with one shared catalog.
TEST_F(LakePlannerTest, ConcurrentPlansShareTheCatalog) {
  MakeEvents();
  MakeUsers();
  const std::vector<std::string> queries = {
      "SELECT count(*), sum(id) FROM lake.db.events WHERE city = 'rome' AND ts >= '2024-01-03'",
      "SELECT count(*) FROM lake.db.events WHERE amount > 30",
      "SELECT name FROM lake.db.users WHERE uid = 42",
      "SELECT count(*) FROM lake.db.users u JOIN lake.db.events e ON u.uid = e.id WHERE u.uid < 10",
  };
  std::vector<std::vector<std::string>> expected;
  for (const std::string& q : queries) {
    auto plan = Plan(q);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    expected.push_back(Rows(plan->sql));
  }
  // A fresh catalog (cold cache) shared by four threads.
  WarehouseCatalog shared(warehouse_);
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      auto conn = duck::Connection::Open(*db_);
      if (!conn.ok()) {
        failures[k] = conn.status().message();
        return;
      }
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < queries.size(); ++i) {
          const size_t q = (i + k) % queries.size();
          auto plan = PlanLakeQuery(**conn, queries[q], shared);
          if (!plan.ok()) {
            failures[k] = plan.status().message();
            return;
          }
          auto rows = (*conn)->QueryText(plan->sql);
          if (!rows.ok()) {
            failures[k] = rows.status().message();
            return;
          }
          std::vector<std::string> got;
          for (const auto& r : *rows) {
            std::string line;
            for (const auto& v : r) line += (line.empty() ? "" : "|") + v.value_or("NULL");
            got.push_back(line);
          }
          std::sort(got.begin(), got.end());
          if (got != expected[q]) {
            failures[k] = "wrong answer to " + queries[q];
            return;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "");
  EXPECT_GT(shared.cache_stats().hits, 0);
}

// With no room, nothing is kept and every plan reads the files.
TEST_F(LakePlannerTest, CatalogWithoutCacheRoomStillPlans) {
  MakeEvents();
  catalog_ = std::make_unique<WarehouseCatalog>(warehouse_, 0);
  Check("SELECT count(*) FROM {events} WHERE city = 'oslo'", {"events"});
  Check("SELECT count(*) FROM {events} WHERE city = 'oslo'", {"events"});
  EXPECT_EQ(catalog_->cache_stats().entries, 0u);
  EXPECT_EQ(catalog_->cache_stats().hits, 0);
}

// Iceberg v2 row-level deletes, as Spark and Flink write them: position deletes (a data
// file's rows by position), equality deletes per partition (rows by value, NULL matching
// NULL), each applying only to data older than itself.
TEST_F(LakePlannerTest, PositionAndEqualityDeletesApplyBySequenceNumberAndPartition) {
  MakeWords();
  auto t = lake::Table::Load(Root("words"));
  ASSERT_TRUE(t.ok());
  // The data files by their partition ("ap", "ba", "ch", null).
  std::map<std::string, std::string> data_of;
  auto manifests = t->CurrentManifests();
  ASSERT_TRUE(manifests.ok());
  for (const auto& [m, entries] : *manifests) {
    for (const lake::ManifestEntry& e : entries) {
      const Datum* p = e.file.partition.Find("w_trunc");
      data_of[p == nullptr || p->is_null() ? "null" : p->bytes()] = e.file.file_path;
    }
  }
  ASSERT_EQ(data_of.size(), 4u);
  // A delete file written by DuckDB with the spec's field ids.
  auto write = [&](const std::string& name, const std::string& select,
                   const std::string& field_ids) {
    std::string path = Root("words") + "/data/" + name + ".parquet";
    EXPECT_TRUE(conn_
                    ->Execute(fmt::format("COPY ({}) TO '{}' (FORMAT parquet, FIELD_IDS {{{}}})",
                                          select, path, field_ids))
                    .ok());
    lake::DataFile f;
    f.file_path = lake::FileUri(path);
    f.file_size_in_bytes = static_cast<int64_t>(fs::file_size(path));
    f.record_count = 1;
    return f;
  };
  // Sequence 2: apricot (row 1 of ap) and cherry (row 0 of ch) by position, a file per
  // partition as writers do; basil in ba, chive in ch and the NULL word in the null
  // partition by equality on w (field 1).
  std::vector<lake::DataFile> deletes;
  for (auto [partition, pos] : std::vector<std::pair<std::string, int>>{{"ap", 1}, {"ch", 0}}) {
    lake::DataFile positions = write("pos-" + partition,
                                     fmt::format("SELECT {} AS file_path, {}::BIGINT AS pos",
                                                 duck::QuoteLiteral(data_of[partition]), pos),
                                     "file_path: 2147483546, pos: 2147483545");
    positions.content = 1;
    positions.partition = Datum::Record({{"w_trunc", Datum::String(partition)}});
    deletes.push_back(positions);
  }
  for (auto [partition, word] : std::vector<std::pair<std::string, std::string>>{
           {"ba", "'basil'"}, {"ch", "'chive'"}, {"null", "NULL::VARCHAR"}}) {
    lake::DataFile eq = write("eq-" + partition, "SELECT " + word + " AS w", "w: 1");
    eq.content = 2;
    eq.equality_ids = {1};
    eq.partition = Datum::Record(
        {{"w_trunc", partition == "null" ? Datum::Null() : Datum::String(partition)}});
    deletes.push_back(eq);
  }
  auto id = t->Commit("delete", [&](const lake::CommitAttempt& a) -> Result<lake::SnapshotPlan> {
    lake::SnapshotPlan plan;
    ASSIGN_OR_RETURN(plan.manifests, lake::ReadManifestsOf(*a.base.CurrentSnapshot()));
    ASSIGN_OR_RETURN(lake::ManifestContext ctx, lake::ContextOf(a.base));
    std::vector<lake::ManifestEntry> entries;
    for (const lake::DataFile& d : deletes) {
      lake::ManifestEntry e;
      e.file = d;
      entries.push_back(e);
    }
    ASSIGN_OR_RETURN(std::string bytes, lake::WriteManifest(ctx, entries));
    std::string mpath = Root("words") + "/metadata/deletes-" + std::to_string(a.attempt) + ".avro";
    RETURN_IF_ERROR(lake::WriteFileAtomically(mpath, bytes));
    lake::ManifestFile mf;
    mf.manifest_path = lake::FileUri(mpath);
    mf.manifest_length = static_cast<int64_t>(bytes.size());
    mf.content = 1;
    mf.sequence_number = a.sequence_number;
    mf.min_sequence_number = a.sequence_number;
    mf.added_snapshot_id = a.snapshot_id;
    mf.added_files_count = static_cast<int32_t>(entries.size());
    mf.added_rows_count = 5;
    plan.manifests.push_back(mf);
    return plan;
  });
  ASSERT_TRUE(id.ok()) << id.status().message();
  // Sequence 3: chive again, newer than the delete: it stays.
  Append(*t, {File(*t, "SELECT 'chive' AS w, 99::BIGINT AS n",
                   Datum::Record({{"w_trunc", Datum::String("ch")}}))});

  auto plan = Plan("SELECT w, n FROM lake.db.words");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->tables.size(), 1u);
  EXPECT_EQ(plan->tables[0].stats.delete_files, 5);
  EXPECT_EQ(Rows(plan->sql), (std::vector<std::string>{"apple|1", "ap|3", "banana|11", "bandana|12",
                                                       "chive|99", "chocolate|23"}));
  // Pruned to one partition, only its deletes are read.
  auto ba = Plan("SELECT w, n FROM lake.db.words WHERE w = 'basil' OR w = 'banana'");
  ASSERT_TRUE(ba.ok()) << ba.status().message();
  EXPECT_EQ(Rows(ba->sql), (std::vector<std::string>{"banana|11"}));
  EXPECT_EQ(ba->tables[0].stats.delete_files, 1);
  // The snapshot before the deletes still has every row.
  auto before = Plan(fmt::format("SELECT count(*) FROM lake.db.words AT (VERSION => {})",
                                 t->metadata().snapshots.front().snapshot_id));
  ASSERT_TRUE(before.ok()) << before.status().message();
  EXPECT_EQ(Rows(before->sql), (std::vector<std::string>{"10"}));
}

// A table with files imported without field ids (plain Parquet added to it, as
// migrate and add_files do) reads them by its name mapping, beside files with ids.
TEST_F(LakePlannerTest, NameMappedFilesWithoutFieldIdsReadByTheirNames) {
  lake::Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"id","required":false,"type":"long"},
      {"id":2,"name":"city","required":false,"type":"string"}]})j");
  auto make = [&](const std::string& table, const std::string& mapping) {
    fs::create_directories(Root(table) + "/data");
    auto t = lake::Table::Create(Root(table), s, lake::PartitionSpec{},
                                 {{"schema.name-mapping.default", mapping}});
    EXPECT_TRUE(t.ok()) << t.status().message();
    return std::move(*t);
  };
  lake::Table t = make("mapped", R"([{"field-id": 1, "names": ["id", "record_id"]},
                                     {"field-id": 2, "names": ["town", "city"]},
                                     {"names": ["unmapped"]}])");
  // Two imported files (other column names, another order, an extra column, one without
  // the city), and one written with field ids.
  std::vector<lake::DataFile> files;
  for (auto [name, select] : std::vector<std::pair<std::string, std::string>>{
           {"a", "SELECT 'oslo' AS Town, i::INTEGER AS record_id, 'x' AS extra FROM range(3) r(i)"},
           {"b", "SELECT (10 + i)::BIGINT AS ID FROM range(2) r(i)"}}) {
    std::string path = Root("mapped") + "/data/" + name + ".parquet";
    ASSERT_TRUE(
        conn_->Execute(fmt::format("COPY ({}) TO '{}' (FORMAT parquet)", select, path)).ok());
    lake::DataFile f;
    f.file_path = lake::FileUri(path);
    f.file_size_in_bytes = static_cast<int64_t>(fs::file_size(path));
    f.record_count = name == "a" ? 3 : 2;
    files.push_back(f);
  }
  files.push_back(File(t, "SELECT 20::BIGINT AS id, 'rome' AS city"));
  Append(t, files);
  auto plan = Plan("SELECT id, city FROM lake.db.mapped");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(Rows(plan->sql), (std::vector<std::string>{"0|oslo", "10|NULL", "11|NULL", "1|oslo",
                                                       "20|rome", "2|oslo"}));
  auto filtered = Plan("SELECT count(*) FROM lake.db.mapped WHERE city = 'oslo'");
  ASSERT_TRUE(filtered.ok()) << filtered.status().message();
  EXPECT_EQ(Rows(filtered->sql), (std::vector<std::string>{"3"}));

  // A mapping that is not one is an error naming the property.
  for (std::string bad : {"not json", "{}", R"([{"field-id": "one", "names": ["a"]}])",
                          R"([{"field-id": 1, "names": "a"}])",
                          R"([{"field-id": 1, "names": ["a"]}, {"field-id": 1, "names": []}])"}) {
    std::string table = fmt::format("bad{}", std::hash<std::string>{}(bad) % 100000);
    make(table, bad);
    auto p = Plan(fmt::format("SELECT * FROM lake.db.{}", table));
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.status().message().find("schema.name-mapping.default"), std::string::npos)
        << p.status().message();
  }
}

TEST_F(LakePlannerTest, MalformedAndUnusualSqlPassesThroughOrStaysCorrect) {
  MakeEvents();
  // A syntax error is DuckDB's to report.
  auto plan = Plan("SELECT FROM WHERE lake.db.events");
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->rewritten);
  // Parameters, volatile functions and columns on both sides are not used to prune.
  plan = Plan("SELECT count(*) FROM lake.db.events WHERE id = $1");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->tables[0].stats.files_kept, 8);
  Check("SELECT count(*) FROM {events} WHERE ts < now() AND id < amount", {"events"});
  // A constant that fails to cast leaves pruning alone; the query reports it.
  plan = Plan("SELECT count(*) FROM lake.db.events WHERE id = 'abc'");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->tables[0].stats.files_kept, 8);
  EXPECT_FALSE(conn_->Query(plan->sql).ok());
  // A number compared with a string column is not pruned (DuckDB may cast the column).
  Check("SELECT count(*) FROM {events} WHERE note > 5::VARCHAR", {"events"});
  // Aliased columns, TABLESAMPLE and ORDER BY/LIMIT survive the rewrite.
  Check("SELECT x, y FROM {events} AS e(x, y) WHERE x < 5 ORDER BY x LIMIT 3", {"events"});
  Check("SELECT count(*) > 0 FROM {events} TABLESAMPLE 100%", {"events"});
  // Samples are drawn before WHERE: no pruning under TABLESAMPLE or USING SAMPLE.
  for (std::string sql :
       {"SELECT count(*) FROM lake.db.events TABLESAMPLE 50% WHERE city = 'oslo'",
        "SELECT count(*) FROM lake.db.events WHERE city = 'oslo' USING SAMPLE 10 ROWS"}) {
    plan = Plan(sql);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->tables[0].stats.files_kept, 8) << sql;
    EXPECT_TRUE(conn_->Query(plan->sql).ok()) << plan->sql;
  }
  // Several statements.
  plan = Plan("SELECT 1; SELECT count(*) FROM lake.db.events WHERE city = 'oslo'");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->tables[0].stats.files_kept, 4);
  // The quick check for `lake.` before parsing sees through case, quotes, spaces and
  // (nested) comments.
  for (std::string sql :
       {"SELECT count(*) FROM \"LAKE\" . db.events WHERE city = 'oslo'",
        "SELECT count(*) FROM Lake -- a comment\n  .db.events WHERE city = 'oslo'",
        "SELECT count(*) FROM lake/* a /* nested */ comment */.db.events WHERE city = 'oslo'"}) {
    plan = Plan(sql);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    ASSERT_TRUE(plan->rewritten) << sql;
    EXPECT_EQ(plan->tables[0].stats.files_kept, 4) << sql;
    EXPECT_EQ(Rows(plan->sql), (std::vector<std::string>{"100"})) << plan->sql;
  }
}

TEST_F(LakePlannerTest, TimestampTzDecimalYearMonthAndHourPartitions) {
  lake::Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"happened","required":false,"type":"timestamptz"},
      {"id":2,"name":"d","required":false,"type":"date"},
      {"id":3,"name":"t","required":false,"type":"timestamp"},
      {"id":4,"name":"price","required":false,"type":"decimal(9,2)"}]})j");
  lake::PartitionSpec spec;
  spec.fields.push_back(lake::PartitionField{1, 1000, "happened_year", lake::Transform::Year()});
  spec.fields.push_back(lake::PartitionField{2, 1001, "d_month", lake::Transform::Month()});
  spec.fields.push_back(lake::PartitionField{3, 1002, "t_hour", lake::Transform::Hour()});
  lake::Table t = Create("cal", s, spec);
  std::vector<lake::DataFile> files;
  // File k: year 2023 + k, month 2024-01 + k, hour k of 2024-03-10; prices 10k .. 10k + 9.99.
  for (int k = 0; k < 3; ++k) {
    std::string select = fmt::format(
        "SELECT TIMESTAMPTZ '{0}-06-01 00:00:00+00' + INTERVAL (i) DAY AS happened, DATE "
        "'2024-0{1}-01' + CAST(i AS INTEGER) "
        "AS d, TIMESTAMP '2024-03-10 0{2}:00:00' + INTERVAL (i) MINUTE AS t, CAST({3} + i * 0.33 "
        "AS DECIMAL(9,2)) AS "
        "price FROM range(28) r(i)",
        2023 + k, k + 1, k, 10 * k);
    auto hours = (lake::DaysFromCivil(2024, 3, 10) * 24LL) + k;
    files.push_back(File(t, select,
                         Datum::Record({{"happened_year", Datum::Int(2023 + k - 1970)},
                                        {"d_month", Datum::Int((2024 - 1970) * 12 + k)},
                                        {"t_hour", Datum::Int(static_cast<int32_t>(hours))}})));
  }
  Append(t, files);
  PlannedQuery q = Check(
      "SELECT count(*) FROM {cal} WHERE happened >= TIMESTAMPTZ '2024-01-01 00:00:00+00'", {"cal"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 2);
  q = Check("SELECT count(*) FROM {cal} WHERE happened < '2024-01-01 01:00:00+01'",
            {"cal"});  // a literal with an offset
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  q = Check("SELECT count(*) FROM {cal} WHERE d = DATE '2024-02-28'", {"cal"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  q = Check("SELECT count(*) FROM {cal} WHERE d = DATE '2024-02-29'",
            {"cal"});  // in February's partition, above its bounds
  EXPECT_EQ(q.tables[0].stats.files_kept, 0);
  EXPECT_EQ(q.tables[0].stats.pruned_by_stats, 1);
  q = Check("SELECT count(*) FROM {cal} WHERE d >= '2024-02-15'", {"cal"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 2);
  q = Check("SELECT count(*) FROM {cal} WHERE t < TIMESTAMP '2024-03-10 01:00:00'", {"cal"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  // Hours 1 and 2 by partition; hour 1's values end at 01:27.
  q = Check(
      "SELECT count(*) FROM {cal} WHERE t BETWEEN '2024-03-10 01:59:59.999999' AND '2024-03-10 "
      "02:00:00'",
      {"cal"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  EXPECT_EQ(q.tables[0].stats.pruned_by_partition, 1);
  EXPECT_EQ(q.tables[0].stats.pruned_by_stats, 1);
  q = Check("SELECT count(*) FROM {cal} WHERE price > 28.90", {"cal"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  q = Check("SELECT count(*) FROM {cal} WHERE price = 8.91", {"cal"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  q = Check("SELECT count(*) FROM {cal} WHERE price <= 10", {"cal"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 2);
  // A TIMESTAMP compared with a TIMESTAMPTZ column goes through the session's time zone:
  // not used to prune, and still right in another zone.
  ASSERT_TRUE(conn_->Execute("SET TimeZone = 'America/New_York'").ok());
  q = Check("SELECT count(*) FROM {cal} WHERE happened >= TIMESTAMP '2024-01-01 00:00:00'",
            {"cal"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 3);
  q = Check("SELECT count(*) FROM {cal} WHERE happened >= '2024-01-01 00:00:00'", {"cal"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 2);
}

TEST_F(LakePlannerTest, ColumnAliasesCaseAndCollation) {
  MakeEvents();
  // `AS e(ts, id)` names the first column ts: the filter is on id's values.
  PlannedQuery q = Check("SELECT ts, id FROM {events} AS e(ts, id) WHERE ts < 3", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  q = Check("SELECT count(*) FROM {events} AS e(a) WHERE a < 3", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 1);
  // Names are matched without case, in SQL and against the warehouse's directories.
  auto plan = Plan("SELECT ID FROM LAKE.DB.Events WHERE CITY = 'oslo' AND Id < 3");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->tables[0].table, "DB.Events");
  EXPECT_EQ(plan->tables[0].stats.files_kept, 1);
  EXPECT_EQ(Rows(plan->sql), (std::vector<std::string>{"0", "1", "2"}));
  // Under a case-insensitive default collation, string bounds (byte order) are not used.
  ASSERT_TRUE(conn_->Execute("SET default_collation = 'nocase'").ok());
  q = Check(
      "SELECT count(*) FROM {events} WHERE note = 'A LONG NOTE THAT IS LONGER THAN SIXTEEN "
      "CHARACTERS #3'",
      {"events"});
  EXPECT_EQ(Rows(q.sql), (std::vector<std::string>{"1"}));
  EXPECT_EQ(q.tables[0].stats.files_kept, 8);
  q = Check("SELECT count(*) FROM {events} WHERE city = 'OSLO'", {"events"});
  EXPECT_EQ(Rows(q.sql), (std::vector<std::string>{"100"}));
}

TEST_F(LakePlannerTest, ExplainAndParametersSurvive) {
  MakeEvents();
  auto plan = Plan("EXPLAIN SELECT count(*) FROM lake.db.events WHERE city = 'rome'");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->sql.starts_with("EXPLAIN SELECT")) << plan->sql;
  EXPECT_EQ(plan->tables[0].stats.files_kept, 4);
  EXPECT_TRUE(conn_->Query(plan->sql).ok());
  plan = Plan("DESCRIBE SELECT id, city FROM lake.db.events");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->rewritten);
  EXPECT_EQ(Rows(fmt::format("SELECT column_name, column_type FROM ({})", plan->sql)),
            (std::vector<std::string>{"city|VARCHAR", "id|BIGINT"}));
  plan = Plan("SELECT id FROM lake.db.events WHERE city = 'rome' AND id = $1");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_NE(plan->sql.find("$1"), std::string::npos) << plan->sql;
  EXPECT_EQ(plan->tables[0].stats.files_kept, 4);  // no value: only city prunes
  // With the values to bind, they prune too (the SQL keeps $1, for those values only).
  plan = PlanLakeQuery(*conn_, "SELECT id FROM lake.db.events WHERE city = 'rome' AND id = $1",
                       *catalog_, {.parameters = {{"1", "'30'"}}});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->tables[0].stats.files_kept, 1);
  EXPECT_NE(plan->sql.find("$1"), std::string::npos) << plan->sql;
  auto named = PlanLakeQuery(
      *conn_, "SELECT count(*) FROM lake.db.events WHERE ts >= ? AND id < ?", *catalog_,
      {.parameters = {{"1", "TIMESTAMP '2024-01-04'"}, {"2", "CAST(170 AS BIGINT)"}}});
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ(named->tables[0].stats.files_kept, 1);
  auto bad = PlanLakeQuery(*conn_, "SELECT count(*) FROM lake.db.events WHERE id = $1", *catalog_,
                           {.parameters = {{"1", "(SELECT 1)"}}});
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  EXPECT_EQ(bad->tables[0].stats.files_kept, 8);
  auto stmt = duck::PreparedStatement::Prepare(*conn_, plan->sql);
  ASSERT_TRUE(stmt.ok()) << stmt.status().message();
  ASSERT_TRUE((*stmt)->BindInt64(1, 30).ok());
  auto r = (*stmt)->Execute();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->row_count(), 1u);
}

// The rest of a query goes through DuckDB's own parse tree and back unchanged in meaning.
TEST_F(LakePlannerTest, RichSqlSurvivesTheRoundTrip) {
  MakeEvents();
  MakeUsers();
  for (std::string sql : {
           "SELECT city, id, sum(amount) OVER (PARTITION BY city ORDER BY id ROWS BETWEEN 2 "
           "PRECEDING AND CURRENT "
           "ROW) FROM {events} QUALIFY row_number() OVER (PARTITION BY city ORDER BY id DESC) <= 3",
           "SELECT city, date_trunc('day', ts) AS d, count(*) FROM {events} GROUP BY GROUPING SETS "
           "((city), (d), ())",
           "SELECT DISTINCT ON (city) city, id FROM {events} ORDER BY city, id DESC",
           "SELECT * EXCLUDE (note, ts) FROM {events} WHERE id % 17 = 0",
           "SELECT max(COLUMNS(* EXCLUDE (note))) FROM {events}",
           "FROM {events} SELECT city, 'it''s \"quoted\" ü' AS s, [id, id + 1] AS l, {'a': id} AS "
           "st WHERE id < 4",
           "SELECT list_transform([id, 2], x -> x * 2) AS l, CASE WHEN amount IS NULL THEN 'none' "
           "WHEN amount > 10 "
           "THEN 'big' ELSE 'small' END FROM {events} WHERE id BETWEEN 10 AND 20",
           "SELECT note ILIKE '%#1_' AS a, note SIMILAR TO '.*#1[0-9]' AS b, (amount > 3) IS TRUE "
           "FROM {events}",
           "WITH RECURSIVE r(n) AS (SELECT min(id) FROM {events} UNION ALL SELECT n + 1 FROM r "
           "WHERE n < 5) SELECT * FROM r",
           "SELECT id FROM {events} WHERE city = 'oslo' UNION BY NAME SELECT uid AS id FROM "
           "{users} WHERE uid < 5",
           "SELECT * FROM (SELECT id, city FROM {events} WHERE id < 6) PIVOT (count(*) FOR city IN "
           "('oslo', 'rome'))",
           "SELECT e.id, u.uid FROM {events} e ASOF JOIN {users} u ON e.id >= u.uid WHERE e.id < "
           "10",
           "SELECT e.id, u.uid FROM {events} e POSITIONAL JOIN {users} u WHERE e.city = 'rome'",
           "SELECT id, ts + INTERVAL '1 day 2 hours' FROM {events} WHERE ts::DATE = '2024-01-02' "
           "ORDER BY ALL LIMIT 5 "
           "OFFSET 2",
           "SELECT count(*) FROM {events} e, LATERAL (SELECT e.id * 2 AS twice) WHERE e.city = "
           "'rome' AND twice > 100",
           "SELECT id, 123456789012345678901234567890 AS big, 1.000000000000000000000000001 AS d, "
           "1e-320::DOUBLE, -9223372036854775808 AS m, 0.1::DOUBLE + 0.2 AS f, 'tab\there' AS t "
           "FROM {events} WHERE id < 2",
           "SELECT id FROM {events} WHERE city = 'oslo' COLLATE nocase AND id IN (SELECT uid FROM "
           "{users} WHERE uid < 7)",
       }) {
    SCOPED_TRACE(sql);
    std::vector<std::string> tables;
    for (const std::string t : {"events", "users"}) {
      if (sql.find("{" + t + "}") != std::string::npos) tables.push_back(t);
    }
    Check(sql, tables);
  }
}

// The query server's sandbox: external access limited to the warehouse, configuration
// locked. Planning reads no file through DuckDB; the planned query reads only the warehouse.
TEST_F(LakePlannerTest, PlansAndRunsInsideTheSandbox) {
  MakeEvents();
  ASSERT_TRUE(conn_->Execute(fmt::format("SET allowed_directories = ['{}']", warehouse_)).ok());
  ASSERT_TRUE(conn_->Execute("SET enable_external_access = false").ok());
  ASSERT_TRUE(conn_->Execute("SET lock_configuration = true").ok());
  PlannedQuery q =
      Check("SELECT count(*) FROM {events} WHERE city = 'rome' AND ts < '2024-01-03'", {"events"});
  EXPECT_EQ(q.tables[0].stats.files_kept, 2);
  EXPECT_FALSE(conn_->Query("SELECT * FROM read_parquet('/etc/passwd')").ok());
}

TEST_F(LakePlannerTest, ListsTheWarehouseTablesAsSqlNamesThem) {
  MakeUsers();
  lake::Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"x","required":true,"type":"decimal(10,2)","doc":"the x"}]})j");
  fs::create_directories(warehouse_ + "/a/b/deep/data");
  ASSERT_TRUE(lake::Table::Create(warehouse_ + "/a/b/deep", s, lake::PartitionSpec{}, {}).ok());
  auto tables = catalog_->ListTables();
  ASSERT_TRUE(tables.ok()) << tables.status().message();
  ASSERT_EQ(tables->size(), 2u);
  EXPECT_EQ((*tables)[0].SqlName(), "lake.\"a.b\".\"deep\"");
  ASSERT_EQ((*tables)[0].columns.size(), 1u);
  EXPECT_EQ((*tables)[0].columns[0].duckdb_type, "DECIMAL(10, 2)");
  EXPECT_TRUE((*tables)[0].columns[0].required);
  EXPECT_EQ((*tables)[0].columns[0].doc, "the x");
  EXPECT_EQ((*tables)[1].SqlName(), "lake.\"db\".\"users\"");
  for (const LakeTableInfo& t : *tables) {
    auto plan = Plan("SELECT count(*) FROM " + t.SqlName());
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_TRUE(conn_->Query(plan->sql).ok()) << plan->sql;
  }
}

// Random filters over columns with NULLs, NaN, long strings and partitions of every kind:
// whatever pruning keeps, the answer must be the one over every file.
TEST_F(LakePlannerTest, RandomFiltersAnswerAsEveryFileDoes) {
  MakeEvents();
  MakeUsers();
  MakeWords();
  struct Column {
    std::string table, name;
    std::vector<std::string> constants;
  };
  const std::vector<Column> columns = {
      {"events",
       "id",
       {"-1", "0", "3", "24", "25", "99", "100", "199", "200", "3.5", "24.0", "NULL", "'42'",
        "-2147483648", "9223372036854775807"}},
      {"events",
       "ts",
       {"TIMESTAMP '2024-01-01'", "'2024-01-02 23:59:59.999999'", "DATE '2024-01-03'",
        "'2024-01-04 12:00'", "TIMESTAMP '2023-12-31 23:59:59.999999'",
        "TIMESTAMP_NS '2024-01-02 "
        "05:00:00.000000001'",
        "NULL", "'2024-01-02'", "TIMESTAMP '2024-01-03 00:00:00.5'", "DATE '2024-02-29'"}},
      {"events", "city", {"'oslo'", "'rome'", "'paris'", "'Oslo'", "'o'", "''", "'rome' || ''"}},
      {"events",
       "amount",
       {"0", "1.5", "'NaN'::DOUBLE", "47.5", "-0.0", "'inf'::DOUBLE", "NULL", "36::FLOAT"}},
      {"events",
       "note",
       {"'a long note that is longer than sixteen characters #1'", "'a long note that'",
        "'a long note that is longer'", "'b'",
        "'a long note that is longer than sixteen characters #199x'"}},
      {"users",
       "uid",
       {"0", "1", "42", "99", "100", "-5", "42::BIGINT", "41.9", "NULL", "2147483648",
        "-2147483648"}},
      {"users", "name", {"'user42'", "'user'", "'user9'", "'v'"}},
      {"words",
       "w",
       {"'ap'", "'apple'", "'b'", "'ba'", "'bz'", "'chocolate'", "'cherry pie'", "NULL", "'a'"}},
      {"words", "n", {"1", "3", "11", "23", "100", "101", "NULL"}},
  };
  const std::vector<std::string> ops = {
      "=", "<>", "<", "<=", ">", ">=", "IS DISTINCT FROM", "IS NOT DISTINCT FROM"};
  // SLUICE_PLANNER_SEED replays (or explores) another sequence.
  const char* seed_env = std::getenv("SLUICE_PLANNER_SEED");
  const uint32_t seed =
      seed_env ? static_cast<uint32_t>(std::strtoul(seed_env, nullptr, 10)) : 20260512;
  SCOPED_TRACE(fmt::format("SLUICE_PLANNER_SEED={}", seed));
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto atom = [&](const std::string& table) {
    std::vector<const Column*> mine;
    for (const Column& c : columns) {
      if (c.table == table) mine.push_back(&c);
    }
    const Column& c = *mine[pick(mine.size())];
    const std::string& k = c.constants[pick(c.constants.size())];
    switch (pick(7)) {
      case 0:
        return fmt::format("{} IS {}NULL", c.name, pick(2) ? "NOT " : "");
      case 1:
        return fmt::format("{} BETWEEN {} AND {}", c.name, k,
                           c.constants[pick(c.constants.size())]);
      case 2:
        return fmt::format("{} IN ({}, {})", c.name, k, c.constants[pick(c.constants.size())]);
      case 3:
        return fmt::format("{} {} {}", k, ops[pick(ops.size())], c.name);  // constant first
      default:
        return fmt::format("{} {} {}", c.name, ops[pick(ops.size())], k);
    }
  };
  int pruned = 0;
  for (int i = 0; i < 150; ++i) {
    const std::string table = i % 3 == 0 ? "events" : i % 3 == 1 ? "users" : "words";
    std::string where = atom(table);
    for (size_t n = pick(3); n > 0; --n) {
      const char* join = pick(3) == 0 ? " OR " : " AND ";
      where = pick(4) == 0 ? fmt::format("NOT ({}){}{}", where, join, atom(table))
                           : fmt::format("({}){}{}", where, join, atom(table));
    }
    SCOPED_TRACE(fmt::format("query {}: {}", i, where));
    const std::string key = table == "events"  ? "id, amount"
                            : table == "users" ? "uid, name"
                                               : "w, n";
    PlannedQuery q =
        Check(fmt::format("SELECT {} FROM {{{}}} WHERE {}", key, table, where), {table});
    if (!q.tables.empty() && q.tables[0].stats.files_kept < q.tables[0].stats.files_total) ++pruned;
  }
  EXPECT_GT(pruned, 40) << "the filters should prune often";
  std::cout << pruned << " of 150 random queries pruned files\n";
}

}  // namespace
}  // namespace sluice::query
