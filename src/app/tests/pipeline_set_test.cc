// PipelineSet against a real broker in-process: pipelines loaded from a folder, then added,
// restarted, reloaded and removed one by one inside the memory budget; refusals change
// nothing.
#include "app/pipeline_set.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "app/serve.h"
#include "kafka/client/admin.h"
#include "kafka/client/producer.h"
#include "storage/testing/files.h"

namespace sluice::app {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr int64_t kMiB = int64_t{1} << 20;

class PipelineSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Config c;
    c.Set("kafka.addr", "127.0.0.1:0", "test");
    c.Set("http.addr", "off", "test");
    c.Set("query.pg_addr", "off", "test");
    c.Set("schema_registry.addr", "off", "test");
    c.Set("data_dir", tmp_.path() + "/data", "test");
    c.Set("shards", "2", "test");
    c.Set("groups.initial_rebalance_delay", "0", "test");
    auto p = ServeProcess::Start(c, {});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    serve_ = std::move(p).value();
    bootstrap_ = fmt::format("127.0.0.1:{}", serve_->kafka_port());
    auto admin = kafka::client::Admin::Create({{"bootstrap.servers", bootstrap_}});
    ASSERT_TRUE(admin.ok()) << admin.status().ToString();
    ASSERT_TRUE((*admin)->CreateTopic("events", 2, 1, {}, 30s).ok());
    auto producer = kafka::client::Producer::Create({{"bootstrap.servers", bootstrap_}});
    ASSERT_TRUE(producer.ok()) << producer.status().ToString();
    for (int i = 0; i < kMessages; ++i) {
      ASSERT_TRUE((*producer)->Produce("events", i % 2, "", fmt::format(R"({{"n": {}}})", i)).ok());
    }
    ASSERT_TRUE((*producer)->Flush(30s).ok());
    fs::create_directories(dir_);
  }

  void TearDown() override {
    if (serve_) {
      EXPECT_TRUE(serve_->Stop().ok());
    }
  }

  // A pipeline file reading `events` from the start into the noop sink.
  void Write(const fs::path& file, const std::string& name, const std::string& memory = "256MiB",
             int batch_size = 100) {
    std::ofstream(file) << fmt::format(
        "pipeline:\n"
        "  name: {}\n"
        "  batch_size: {}\n"
        "  flush_interval_seconds: 1\n"
        "  source:\n"
        "    type: kafka\n"
        "    kafka:\n"
        "      brokers: [{}]\n"
        "      group_id: {}\n"
        "      auto_offset_reset: earliest\n"
        "      topics: [events]\n"
        "  handler:\n"
        "    type: handlers.InferredMemBatch\n"
        "    sql: SELECT n FROM batch\n"
        "  sink:\n"
        "    type: noop\n"
        "  duckdb: {{memory_limit: {}}}\n",
        name, batch_size, bootstrap_, name, memory);
  }

  // A pipeline file that loads, but whose start-up SQL (`commands`) fails.
  void WriteBroken(const fs::path& file, const std::string& name) {
    Write(file, name);
    std::ofstream(file, std::ios::app) << "commands:\n  - name: broken\n    sql: SELEC nothing\n";
  }

  static const PipelineStatus* Find(const std::vector<PipelineStatus>& list,
                                    const std::string& name) {
    for (const auto& s : list) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }

  // Waits until pipeline `name` has read every message.
  bool ReadAll(PipelineSet& set, const std::string& name) {
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto list = set.List();
      const PipelineStatus* s = Find(list, name);
      if (s != nullptr && s->messages_in >= kMessages) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  static std::vector<std::string> Names(const PipelineSet& set) {
    std::vector<std::string> names;
    for (const auto& s : set.List()) names.push_back(s.name);
    return names;
  }

  static constexpr int kMessages = 50;
  storage::testing::TempDir tmp_{"sluice-pipeline-set"};
  fs::path dir_ = fs::path(tmp_.path()) / "pipelines";
  std::unique_ptr<ServeProcess> serve_;
  std::string bootstrap_;
};

TEST_F(PipelineSetTest, LoadRefusesEveryBadFileAndABudgetOverrunAtOnce) {
  Write(dir_ / "a.yml", "a", "512MiB");
  Write(dir_ / "b.yml", "b", "512MiB");
  Write(dir_ / "c.yaml", "a");  // a's name again
  std::ofstream(dir_ / "d.yml") << "pipeline: [not, a, map]\n";
  auto set = PipelineSet::Load(dir_.string(), 768 * kMiB);
  ASSERT_FALSE(set.ok());
  const std::string& m = set.status().message();
  EXPECT_NE(m.find("pipeline name 'a' is also used by"), std::string::npos) << m;
  EXPECT_NE(m.find("d.yml"), std::string::npos) << m;
  EXPECT_NE(m.find("over the budget of 768 MiB"), std::string::npos) << m;
  EXPECT_FALSE(PipelineSet::Load((dir_ / "missing").string(), 768 * kMiB).ok());
}

TEST_F(PipelineSetTest, PipelinesAreAddedRestartedReloadedAndRemovedOneByOne) {
  Write(dir_ / "a.yml", "a");
  auto loaded = PipelineSet::Load(dir_.string(), 1024 * kMiB);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  PipelineSet& set = **loaded;
  ASSERT_TRUE(set.Start().ok());
  EXPECT_TRUE(ReadAll(set, "a"));

  // Add: a second pipeline, its own group, reads everything too.
  Write(dir_ / "b.yml", "b");
  ASSERT_TRUE(set.Add((dir_ / "b.yml").string()).ok());
  EXPECT_TRUE(ReadAll(set, "b"));
  EXPECT_EQ(set.memory_in_use(), 512 * kMiB);

  // Refused, and nothing changes: past the budget, a name in use, a missing pipeline.
  fs::path elsewhere = fs::path(tmp_.path()) / "elsewhere";
  fs::create_directories(elsewhere);
  Write(elsewhere / "big.yml", "big", "600MiB");
  Status over = set.Add((elsewhere / "big.yml").string());
  EXPECT_FALSE(over.ok());
  EXPECT_NE(over.message().find("over the budget"), std::string::npos) << over.ToString();
  Write(elsewhere / "a-again.yml", "a");
  EXPECT_EQ(set.Add((elsewhere / "a-again.yml").string()).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(set.Restart("nobody").code(), StatusCode::kNotFound);
  EXPECT_EQ(set.Remove("nobody").code(), StatusCode::kNotFound);
  EXPECT_EQ(Names(set), (std::vector<std::string>{"a", "b"}));

  // Restart: a file grown past the budget keeps the running pipeline; a good one restarts.
  Write(dir_ / "a.yml", "a", "900MiB");
  EXPECT_FALSE(set.Restart("a").ok());
  EXPECT_TRUE(Find(set.List(), "a")->running);
  Write(dir_ / "a.yml", "a", "256MiB", 10);
  ASSERT_TRUE(set.Restart("a").ok());
  EXPECT_TRUE(Find(set.List(), "a")->running);
  EXPECT_EQ(set.Health(), "");

  // A version that loads but cannot start (its start-up SQL fails): Restart brings the
  // previous one back, Add adds nothing.
  WriteBroken(dir_ / "a.yml", "a");
  Status broken = set.Restart("a");
  EXPECT_FALSE(broken.ok());
  EXPECT_NE(broken.message().find("the previous version runs again"), std::string::npos)
      << broken.ToString();
  ASSERT_NE(Find(set.List(), "a"), nullptr);
  EXPECT_TRUE(Find(set.List(), "a")->running);
  WriteBroken(elsewhere / "d.yml", "d");
  EXPECT_FALSE(set.Add((elsewhere / "d.yml").string()).ok());
  EXPECT_EQ(Find(set.List(), "d"), nullptr);

  // Reload: b's file goes, c's comes, a's changes; a broken file refuses it all.
  fs::remove(dir_ / "b.yml");
  Write(dir_ / "c.yml", "c");
  Write(dir_ / "a.yml", "a", "256MiB", 20);
  std::ofstream(dir_ / "e.yml") << "pipeline:\n  batch_size: -1\n";
  auto refused = set.Reload();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("e.yml"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(Names(set), (std::vector<std::string>{"a", "b"}));
  fs::remove(dir_ / "e.yml");
  auto reloaded = set.Reload();
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
  EXPECT_EQ(reloaded->added, std::vector<std::string>{"c"});
  EXPECT_EQ(reloaded->removed, std::vector<std::string>{"b"});
  EXPECT_EQ(reloaded->restarted, std::vector<std::string>{"a"});
  EXPECT_EQ(Names(set), (std::vector<std::string>{"a", "c"}));
  EXPECT_TRUE(ReadAll(set, "c"));
  // Nothing changed on disk: a reload does nothing.
  auto again = set.Reload();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->added.empty() && again->removed.empty() && again->restarted.empty());

  ASSERT_TRUE(set.Remove("c").ok());
  EXPECT_EQ(Names(set), std::vector<std::string>{"a"});
  EXPECT_EQ(set.Health(), "");
  set.Stop();
  EXPECT_FALSE(Find(set.List(), "a")->running);
}

// Readiness (/readyz): every pipeline not stopped by hand runs; one not started yet, or
// ended on an error, is named.
TEST_F(PipelineSetTest, ReadinessNamesPipelinesThatDoNotRun) {
  Write(dir_ / "a.yml", "a");
  Write(dir_ / "b.yml", "b");
  auto loaded = PipelineSet::Load(dir_.string(), 1024 * kMiB);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  PipelineSet& set = **loaded;
  EXPECT_NE(set.Readiness().find("pipeline a"), std::string::npos) << set.Readiness();
  EXPECT_NE(set.Readiness().find("has not started"), std::string::npos) << set.Readiness();
  ASSERT_TRUE(set.Start().ok());
  EXPECT_EQ(set.Readiness(), "");
  ASSERT_TRUE(set.StopOne("a").ok());
  EXPECT_EQ(set.Readiness(), "");  // stopped by hand: not a reason

  // A handler whose SQL fails on the first batch ends its pipeline with the error.
  Write(dir_ / "c.yml", "c");
  {
    std::ifstream in(dir_ / "c.yml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text.replace(text.find("SELECT n FROM batch"), 19, "SELECT error('boom') AS n FROM batch");
    std::ofstream(dir_ / "c.yml") << text;
  }
  ASSERT_TRUE(set.Add((dir_ / "c.yml").string()).ok());
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (set.Readiness().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  const std::string why = set.Readiness();
  EXPECT_NE(why.find("pipeline c"), std::string::npos) << why;
  EXPECT_NE(why.find("boom"), std::string::npos) << why;
  EXPECT_EQ(why.find("pipeline b"), std::string::npos) << why;
  ASSERT_TRUE(set.Remove("c").ok());
  EXPECT_EQ(set.Readiness(), "");
  set.Stop();
}

// Stopped by hand: the file says so (<file>.stopped), the budget's share is free, a restart
// of the process keeps it stopped, and it starts again from its file as it is then.
TEST_F(PipelineSetTest, APipelineStoppedByHandKeepsItsFileAndStaysStopped) {
  Write(dir_ / "a.yml", "a", "600MiB");
  Write(dir_ / "b.yml", "b", "300MiB");
  auto loaded = PipelineSet::Load(dir_.string(), 1024 * kMiB);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  PipelineSet& set = **loaded;
  ASSERT_TRUE(set.Start().ok());
  EXPECT_TRUE(ReadAll(set, "a"));
  EXPECT_EQ(set.StopOne("nobody").code(), StatusCode::kNotFound);

  ASSERT_TRUE(set.StopOne("a").ok());
  EXPECT_FALSE(fs::exists(dir_ / "a.yml"));
  EXPECT_TRUE(fs::exists(dir_ / "a.yml.stopped"));
  const std::vector<PipelineStatus> list = set.List();
  const PipelineStatus* a = Find(list, "a");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->stopped);
  EXPECT_FALSE(a->running);
  EXPECT_EQ(a->file, fs::weakly_canonical(dir_ / "a.yml.stopped").string());
  EXPECT_EQ(set.memory_in_use(), 300 * kMiB);
  EXPECT_EQ(set.Health(), "");
  EXPECT_TRUE(set.StopOne("a").ok());  // already stopped: nothing to do

  // Its share went to another pipeline, so it cannot start until that one stops.
  Write(dir_ / "c.yml", "c", "600MiB");
  ASSERT_TRUE(set.Add((dir_ / "c.yml").string()).ok());
  Status over = set.StartOne("a");
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted) << over.ToString();
  EXPECT_TRUE(fs::exists(dir_ / "a.yml.stopped"));
  EXPECT_EQ(set.Restart("a").code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(set.Remove("c").ok());
  fs::remove(dir_ / "c.yml");

  // A reload sees nothing new; the process's next start keeps it stopped.
  auto reloaded = set.Reload();
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
  EXPECT_TRUE(reloaded->added.empty() && reloaded->removed.empty() && reloaded->restarted.empty());
  set.Stop();
  auto next = PipelineSet::Load(dir_.string(), 1024 * kMiB);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  ASSERT_TRUE((*next)->Start().ok());
  EXPECT_TRUE(Find((*next)->List(), "a")->stopped);
  EXPECT_FALSE(Find((*next)->List(), "a")->running);
  EXPECT_TRUE(Find((*next)->List(), "b")->running);

  // Started from its file as it now is (a smaller batch), under its running name.
  Write(dir_ / "a.yml.stopped", "a", "600MiB", 7);
  ASSERT_TRUE((*next)->StartOne("a").ok());
  EXPECT_TRUE(fs::exists(dir_ / "a.yml"));
  EXPECT_FALSE(fs::exists(dir_ / "a.yml.stopped"));
  EXPECT_TRUE(Find((*next)->List(), "a")->running);
  EXPECT_EQ((*next)->memory_in_use(), 900 * kMiB);

  // One that cannot start stays stopped, its file too.
  ASSERT_TRUE((*next)->StopOne("b").ok());
  WriteBroken(dir_ / "b.yml.stopped", "b");
  Status broken = (*next)->StartOne("b");
  EXPECT_FALSE(broken.ok());
  EXPECT_NE(broken.message().find("it stays stopped"), std::string::npos) << broken.ToString();
  EXPECT_TRUE(fs::exists(dir_ / "b.yml.stopped"));
  EXPECT_TRUE(Find((*next)->List(), "b")->stopped);
  EXPECT_EQ((*next)->Health(), "");

  // A file and its stopped copy name one pipeline twice: refused at load.
  Write(dir_ / "b.yml", "b");
  EXPECT_FALSE(PipelineSet::Load(dir_.string(), 4096 * kMiB).ok());
}

}  // namespace
}  // namespace sluice::app
