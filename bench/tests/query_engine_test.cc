// The query bench's pieces that need no engine: the process-tree watchdog (trees of real
// child processes), memory settings, option checks and the SQL templates.
#include "bench/query_engine.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "bench/query_bench.h"

namespace sluice::bench {
namespace {

using namespace std::chrono_literals;

// Whether `pid` is a live process (a zombie whose parent has not reaped it yet is not).
bool Alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

// A shell whose two children sleep: a tree of three processes. Its files go to a temporary
// directory.
class ShellTree {
 public:
  ShellTree() {
    dir_ = std::filesystem::temp_directory_path() /
           ("query-engine-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    auto run =
        LaunchOneShotChild({"/bin/sh", "-c", "sleep 30 & sleep 30 & wait"}, {}, dir_.string());
    EXPECT_TRUE(run.ok()) << run.status().ToString();
    run_ = std::move(run).value();
  }
  ~ShellTree() {
    run_->Stop();
    std::filesystem::remove_all(dir_);
  }
  EngineRun& run() { return *run_; }

  // Waits until the tree has `n` processes (the shell forks its children after exec).
  std::vector<pid_t> WaitForTree(size_t n) {
    std::vector<pid_t> tree;
    for (int i = 0; i < 500; ++i) {
      tree = ProcessTree(run_->root_pid());
      if (tree.size() >= n) break;
      std::this_thread::sleep_for(10ms);
    }
    return tree;
  }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<EngineRun> run_;
};

TEST(ProcessTreeTest, FindsTheRootAndItsChildren) {
  ShellTree t;
  std::vector<pid_t> tree = t.WaitForTree(3);
  ASSERT_EQ(tree.size(), 3u);
  EXPECT_EQ(tree[0], t.run().root_pid());
  EXPECT_GT(TreeRssBytes(tree), 0);
}

TEST(ProcessTreeTest, KillTreeEndsEveryProcess) {
  ShellTree t;
  std::vector<pid_t> tree = t.WaitForTree(3);
  ASSERT_EQ(tree.size(), 3u);
  KillTree(t.run().root_pid());
  // The children are orphans once the shell dies; they must be gone too.
  for (int i = 0; i < 200 && (Alive(tree[1]) || Alive(tree[2])); ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(Alive(tree[1]));
  EXPECT_FALSE(Alive(tree[2]));
  EXPECT_FALSE(t.run().Execute().ok());  // it was killed: no answer
}

TEST(TreeWatchdogTest, KillsATreeOverTheCap) {
  ShellTree t;
  ASSERT_EQ(t.WaitForTree(3).size(), 3u);
  TreeWatchdog watchdog(t.run().root_pid(), /*cap_bytes=*/1, /*timeout_s=*/60);
  Result<EngineAnswer> answer = t.run().Execute();  // returns once the watchdog has killed it
  watchdog.Finish();
  EXPECT_FALSE(answer.ok());
  EXPECT_TRUE(watchdog.killed_over_cap());
  EXPECT_FALSE(watchdog.timed_out());
  EXPECT_GT(watchdog.peak_bytes(), 1);
}

TEST(TreeWatchdogTest, KillsATreeThatRunsTooLong) {
  ShellTree t;
  TreeWatchdog watchdog(t.run().root_pid(), /*cap_bytes=*/int64_t{1} << 40, /*timeout_s=*/0.2);
  EXPECT_FALSE(t.run().Execute().ok());
  watchdog.Finish();
  EXPECT_TRUE(watchdog.timed_out());
  EXPECT_FALSE(watchdog.killed_over_cap());
}

TEST(OneShotChildTest, ReadsTheAnswerLine) {
  auto dir = std::filesystem::temp_directory_path() /
             ("query-engine-answer-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto run = LaunchOneShotChild({"/bin/sh", "-c",
                                 "echo noise; echo \"{\\\"elapsed_s\\\": 1.5, \\\"columns\\\": "
                                 "[\\\"n\\\"], \\\"answer\\\": [\\\"$X\\\"]}\""},
                                {"X=42"}, dir.string());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  Result<EngineAnswer> a = (*run)->Execute();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->seconds, 1.5);
  EXPECT_EQ(a->columns, std::vector<std::string>{"n"});
  EXPECT_EQ(a->values, std::vector<std::string>{"42"});
  (*run)->Stop();
  std::filesystem::remove_all(dir);
}

TEST(OneShotChildTest, AFailingChildIsAnErrorWithItsStderr) {
  auto dir =
      std::filesystem::temp_directory_path() / ("query-engine-fail-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto run =
      LaunchOneShotChild({"/bin/sh", "-c", "echo 'out of memory' >&2; exit 3"}, {}, dir.string());
  ASSERT_TRUE(run.ok());
  Result<EngineAnswer> a = (*run)->Execute();
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("exited with status 3"), std::string::npos)
      << a.status().message();
  EXPECT_NE(a.status().message().find("out of memory"), std::string::npos) << a.status().message();
  std::filesystem::remove_all(dir);
}

TEST(MemorySettingTest, ParsesUnitsAsDuckDBDoes) {
  EXPECT_EQ(*ParseMemorySetting("3GB"), 3'000'000'000);
  EXPECT_EQ(*ParseMemorySetting("1gb"), 1'000'000'000);
  EXPECT_EQ(*ParseMemorySetting("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(*ParseMemorySetting("1.5GiB"), int64_t{3} << 29);
  for (const char* bad : {"", "GB", "3XB", "-1GB", "0GB", "1KB", "3 G B"}) {
    EXPECT_FALSE(ParseMemorySetting(bad).ok()) << bad;
  }
}

TEST(QueryBenchOptionsTest, NamesTheWrongOption) {
  QueryBenchOptions o;
  EXPECT_TRUE(ValidateQueryBenchOptions(o).ok());
  auto error = [](QueryBenchOptions o) { return ValidateQueryBenchOptions(o).message(); };
  o.queries = {"q1", "q9"};
  EXPECT_NE(error(o).find("--queries: unknown query \"q9\""), std::string::npos) << error(o);
  o = {};
  o.engines = {"duckdb", "duckdb"};
  EXPECT_NE(error(o).find("--engines: duckdb given twice"), std::string::npos) << error(o);
  o = {};
  o.engines = {"sluice-parquet", "sluice-iceberg"};
  EXPECT_TRUE(ValidateQueryBenchOptions(o).ok()) << error(o);
  o.engines = {"sluice-lake"};
  EXPECT_NE(error(o).find("sluice-lake"), std::string::npos) << error(o);
  o = {};
  o.files = 31;
  o.rows = 30;
  EXPECT_NE(error(o).find("--files 31"), std::string::npos) << error(o);
  o = {};
  o.chart = "chart.svg";
  EXPECT_NE(error(o).find("--chart"), std::string::npos) << error(o);
}

TEST(QueryBenchOptionsTest, ChecksTheS3Options) {
  auto error = [](QueryBenchOptions o) { return ValidateQueryBenchOptions(o).message(); };
  QueryBenchOptions o;
  o.storage = "s3";
  EXPECT_TRUE(ValidateQueryBenchOptions(o).ok()) << error(o);
  o.s3_warehouse = "s3://bucket/prefix";
  EXPECT_TRUE(ValidateQueryBenchOptions(o).ok()) << error(o);
  o.s3_warehouse = "/tmp/warehouse";
  EXPECT_NE(error(o).find("--s3-warehouse /tmp/warehouse: not an S3 location"), std::string::npos)
      << error(o);
  o = {};
  o.s3_warehouse = "s3://bucket/prefix";
  EXPECT_NE(error(o).find("--s3-warehouse: only with --storage s3"), std::string::npos) << error(o);
  o = {};
  o.storage = "s3";
  o.engines = {"duckdb"};
  EXPECT_NE(error(o).find("--engines: not with --storage s3"), std::string::npos) << error(o);
  o = {};
  o.storage = "s3";
  o.chart = "chart.png";
  EXPECT_NE(error(o).find("--chart"), std::string::npos) << error(o);
  o = {};
  o.storage = "gcs";
  EXPECT_NE(error(o).find("--storage \"gcs\""), std::string::npos) << error(o);
}

TEST(BindTablesTest, ReplacesEveryPlaceholder) {
  EXPECT_EQ(
      BindTables("SELECT * FROM {sales} s JOIN {products} p USING (k) UNION SELECT * FROM {sales}",
                 "lake.bench.sales", "read_parquet('p/*.parquet')"),
      "SELECT * FROM lake.bench.sales s JOIN read_parquet('p/*.parquet') p USING (k) UNION SELECT "
      "* FROM "
      "lake.bench.sales");
  EXPECT_EQ(BindTables("{sale} {}", "x", "y"), "{sale} {}");
}

}  // namespace
}  // namespace sluice::bench
