// `sluice pipeline run` end to end (issue 4, "Tests"): the real binary as a child process,
// reading from `sluice serve` on 127.0.0.1 and a free port, fed by kafka::client::Producer;
// its output (console, a kafka topic, Parquet files through sqlcommand, a real PostgreSQL
// table) is checked against the same SQL run by DuckDB over the same input as a JSON-lines
// file. Committed offsets are read with librdkafka's rd_kafka_committed (an OffsetFetch
// for the group, without joining it) and never pass what the sink holds.
//
// The binary comes from SLUICE_BINARY (ctest sets it); without it every test skips. The
// crash test (PipelineCrashTest.*) is registered as its own ctest test (pipeline_tests.cmake);
// its seed is printed and can be set with SLUICE_PIPELINE_CRASH_SEED.
#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/logging.h"
#include "duck/database.h"
#include "kafka/client/admin.h"
#include "kafka/client/consumer.h"
#include "kafka/client/producer.h"
#include "sinks/tests/postgres_server.h"
#include "sluice_process.h"

extern char** environ;

namespace sluice::integration {
namespace {

namespace fs = std::filesystem;
namespace kc = kafka::client;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using sinks::testing::PostgresServer;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Polls `done` every 50 ms until it holds or `timeout` passes; returns its last value.
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout = 60s) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    if (done()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
}

std::string Indent(const std::string& text, int spaces) {
  std::string pad(spaces, ' ');
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out += pad + line + "\n";
  return out;
}

// A child process (`sluice pipeline ...`) with its stdout and stderr in files.
// Lifecycle: Start, then Terminate / Kill / WaitExit; the destructor kills one still
// running. One thread owns it.
class Child {
 public:
  Child(std::vector<std::string> args, fs::path out, fs::path err)
      : args_(std::move(args)), out_(std::move(out)), err_(std::move(err)) {}
  ~Child() { Kill(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // "" or what went wrong.
  std::string Start() {
    std::vector<char*> argv;
    for (std::string& a : args_) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    // Appended to, so a restarted pipeline adds to what its predecessor wrote.
    posix_spawn_file_actions_addopen(&actions, 1, out_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      return fmt::format("posix_spawn {}: {}", args_[0], std::strerror(rc));
    }
    status_.reset();
    return "";
  }

  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      status_ = Decode(status);
      return false;
    }
    return true;
  }

  // The exit status (128 + signal when killed), or nullopt if still running at `timeout`.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout) {
    WaitFor([this] { return !Running(); }, timeout);
    return status_;
  }

  // SIGTERM, then the exit status (or -1 after a SIGKILL when it did not stop in time).
  int Terminate(std::chrono::milliseconds timeout = 60s) {
    if (!Running()) return status_.value_or(-1);
    ::kill(pid_, SIGTERM);
    if (auto st = WaitExit(timeout)) return *st;
    Kill();
    return -1;
  }

  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    status_ = Decode(status);
  }

  std::string Out() const { return ReadFile(out_); }
  std::string Err() const { return ReadFile(err_); }
  const fs::path& out_path() const { return out_; }

 private:
  static int Decode(int status) {
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::vector<std::string> args_;
  fs::path out_;
  fs::path err_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// What a pipeline file says; Render writes it in sqlflow's format.
struct PipelineSpec {
  std::string name;
  std::string group;
  std::vector<std::string> topics;
  std::string commands;  // SQL of one `commands` entry, or ""
  std::string handler = "handlers.StructuredBatch";
  std::string table = "events";  // StructuredBatch only
  std::string sql;
  std::string sink = "type: console";  // the YAML under `sink:`
  std::string on_error = "policy: RAISE";
  int batch_size = 200;
  // librdkafka consumer properties, "key: value" lines.
  std::string properties = "fetch.wait.max.ms: 50";
};

std::string Render(const PipelineSpec& p, const std::string& bootstrap) {
  std::string out;
  if (!p.commands.empty()) out += "commands:\n  - name: setup\n    sql: |\n" + Indent(p.commands, 6);
  out += fmt::format(
      "pipeline:\n"
      "  name: {}\n"
      "  batch_size: {}\n"
      "  flush_interval_seconds: 1\n"
      "  source:\n"
      "    type: kafka\n"
      "    kafka:\n"
      "      brokers: ['{}']\n"
      "      group_id: {}\n"
      "      auto_offset_reset: earliest\n"
      "      topics: [{}]\n",
      p.name, p.batch_size, bootstrap, p.group, fmt::join(p.topics, ", "));
  if (!p.properties.empty()) out += "      properties:\n" + Indent(p.properties, 8);
  out += fmt::format("  handler:\n    type: {}\n", p.handler);
  if (p.handler == "handlers.StructuredBatch") out += fmt::format("    table: {}\n", p.table);
  out += "    sql: |\n" + Indent(p.sql, 6);
  out += "  sink:\n" + Indent(p.sink, 4);
  out += "  on_error:\n" + Indent(p.on_error, 4);
  out += "  duckdb: {memory_limit: 256MiB, threads: 1}\n";
  return out;
}

// Runs `setup` and then `query` in a fresh in-memory DuckDB; each row as its values'
// text joined by '|' (NULL as "NULL"). A failure is a test failure and an empty result.
std::vector<std::string> DuckRows(const std::string& setup, const std::string& query) {
  auto db = duck::Database::Open({.memory_limit_bytes = 512 << 20, .threads = 1});
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  if (!db.ok()) return {};
  auto conn = duck::Connection::Open(**db);
  EXPECT_TRUE(conn.ok()) << conn.status().ToString();
  if (!conn.ok()) return {};
  Status st = (*conn)->Execute("SET TimeZone = 'UTC'");
  if (st.ok() && !setup.empty()) st = (*conn)->Execute(setup);
  EXPECT_TRUE(st.ok()) << st.ToString() << "\n" << setup;
  if (!st.ok()) return {};
  auto rows = (*conn)->QueryText(query);
  EXPECT_TRUE(rows.ok()) << rows.status().ToString() << "\n" << query;
  if (!rows.ok()) return {};
  std::vector<std::string> out;
  for (const auto& row : *rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line += '|';
      line += row[i] ? *row[i] : "NULL";
    }
    out.push_back(std::move(line));
  }
  return out;
}

// Like DuckRows, but quiet: nullopt when DuckDB fails (a file still being written).
std::optional<std::vector<std::string>> TryDuckRows(const std::string& query) {
  auto db = duck::Database::Open({.memory_limit_bytes = 256 << 20, .threads = 1});
  if (!db.ok()) return std::nullopt;
  auto conn = duck::Connection::Open(**db);
  if (!conn.ok()) return std::nullopt;
  auto rows = (*conn)->QueryText(query);
  if (!rows.ok()) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& row : *rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) line += (i > 0 ? "|" : "") + row[i].value_or("NULL");
    out.push_back(std::move(line));
  }
  return out;
}

std::string Lit(const fs::path& p) { return duck::QuoteLiteral(p.string()); }

// One input event. Amounts are multiples of 0.25, so sums of doubles are exact in any order.
struct Event {
  int64_t id;
  std::string city;
  double amount;
  std::string uid;
  int64_t version;
  std::string Json() const {
    return fmt::format(
        R"({{"id":{},"city":"{}","amount":{},"uid":"{}","version":{},"properties":{{"city":"{}","amount":{}}}}})",
        id, city, amount, uid, version, city, amount);
  }
};

std::vector<Event> MakeEvents(int64_t first, int64_t n) {
  static const char* kCities[] = {"Paris", "Lyon", "Nantes", "Lille", "Brest", "Nice", "Metz"};
  std::vector<Event> out;
  for (int64_t i = first; i < first + n; ++i) {
    out.push_back({i, kCities[(i * 7 + i / 3) % 7], static_cast<double>((i * 37) % 401) * 0.25,
                   fmt::format("u{}", i % 50), i});
  }
  return out;
}

// The broker (and PostgreSQL, when a test asks) shared by the tests of one binary; each
// test uses its own topics and groups.
class PipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* binary = std::getenv("SLUICE_BINARY");
    if (binary == nullptr) return;
    SetLogLevel(LogLevel::kWarn);
    broker_ = new SluiceProcess(binary,
                                "groups:\n  initial_rebalance_delay: 0s\n  min_session_timeout: 1s\n");
    broker_error_ = broker_->Start();
  }
  static void TearDownTestSuite() {
    if (broker_ != nullptr) {
      if (broker_error_.empty()) {
        int st = broker_->Stop();
        if (st != 0) {
          broker_->DumpLogs();
          ADD_FAILURE() << "the broker exited with " << st;
        }
      }
      delete broker_;
      broker_ = nullptr;
    }
    delete pg_;
    pg_ = nullptr;
  }

  void SetUp() override {
    const char* binary = std::getenv("SLUICE_BINARY");
    if (binary == nullptr) GTEST_SKIP() << "SLUICE_BINARY is not set (ctest sets it)";
    binary_ = binary;
    ASSERT_EQ(broker_error_, "");
    std::string templ = (fs::temp_directory_path() / "sluice-pipeline-it-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    fs::permissions(dir_, fs::perms::all);  // COPY ... TO from a pipeline, psql COPY
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // Kafka topic names allow [a-zA-Z0-9._-]; parameterised tests' names hold '/'.
    prefix_ = fmt::format("{}-{}", info->test_suite_name(), info->name());
    for (char& ch : prefix_) {
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-') ch = '_';
    }
  }

  void TearDown() override {
    if (HasFailure()) {
      for (const auto& [name, child] : children_) {
        fmt::print(stderr, "--- pipeline {} stderr (last 4000 bytes):\n{}\n", name,
                   Tail(child->Err(), 4000));
      }
      if (broker_ != nullptr) broker_->DumpLogs(30);
    }
    children_.clear();
    std::error_code ec;
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_, ec);
  }

  static std::string Tail(const std::string& s, size_t n) {
    return s.size() <= n ? s : s.substr(s.size() - n);
  }

  const std::string& bootstrap() const { return broker_->bootstrap(); }
  std::string Name(const std::string& what) const { return prefix_ + "-" + what; }

  // The shared PostgreSQL server, started at the first call (nullptr and a skip reason in
  // `why` when its binaries are missing).
  PostgresServer* Pg(std::string* why) {
    if (pg_ == nullptr) {
      *why = PostgresServer::Unavailable();
      if (!why->empty()) return nullptr;
      pg_ = new PostgresServer();
    }
    if (!pg_->running()) {
      std::string error = pg_->Start();
      EXPECT_EQ(error, "");
      if (!error.empty()) {
        *why = error;
        return nullptr;
      }
    }
    return pg_;
  }

  void CreateTopic(const std::string& topic, int partitions, const kc::Config& config = {}) {
    auto admin = kc::Admin::Create({{"bootstrap.servers", bootstrap()}});
    ASSERT_TRUE(admin.ok()) << admin.status().ToString();
    Status st = (*admin)->CreateTopic(topic, partitions, 1, config, 10s);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  // Produces `values` (with `keys` when given, else round robin over `partitions`) and
  // waits for every acknowledgement. Returns each record's (partition, offset) in order.
  std::vector<std::pair<int32_t, int64_t>> Produce(const std::string& topic,
                                                   const std::vector<std::string>& values,
                                                   int partitions,
                                                   const std::vector<std::string>& keys = {}) {
    std::vector<std::pair<int32_t, int64_t>> where(values.size(), {-1, -1});
    size_t failed = 0;
    auto producer = kc::Producer::Create(
        {{"bootstrap.servers", bootstrap()}, {"linger.ms", "5"}, {"message.max.bytes", "20000000"}},
        [&](const kc::DeliveryReport& r) {
          if (!r.status.ok()) ++failed;
          where[r.cookie] = {r.partition, r.offset};
        });
    EXPECT_TRUE(producer.ok()) << producer.status().ToString();
    if (!producer.ok()) return {};
    for (size_t i = 0; i < values.size(); ++i) {
      std::string_view key = keys.empty() ? std::string_view() : std::string_view(keys[i]);
      int32_t partition = keys.empty() ? static_cast<int32_t>(i % partitions) : kc::kAnyPartition;
      while (true) {
        Status st = (*producer)->Produce(topic, partition, key, values[i], i);
        if (st.code() != StatusCode::kResourceExhausted) {
          EXPECT_TRUE(st.ok()) << st.ToString();
          break;
        }
        (*producer)->Poll(10ms);
      }
    }
    Status st = (*producer)->Flush(60s);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(failed, 0u);
    return where;
  }

  static std::vector<std::string> Jsons(const std::vector<Event>& events) {
    std::vector<std::string> out;
    for (const Event& e : events) out.push_back(e.Json());
    return out;
  }

  // The JSON-lines file DuckDB reads as the reference input.
  fs::path WriteJsonLines(const std::string& name, const std::vector<std::string>& lines) {
    fs::path p = dir_ / name;
    std::string text;
    for (const std::string& l : lines) text += l + "\n";
    WriteFile(p, text);
    return p;
  }

  // High watermarks of `topic`'s partitions 0..partitions-1.
  std::vector<int64_t> Ends(const std::string& topic, int partitions) {
    auto admin = kc::Admin::Create({{"bootstrap.servers", bootstrap()}});
    EXPECT_TRUE(admin.ok()) << admin.status().ToString();
    std::vector<int64_t> out;
    for (int p = 0; p < partitions && admin.ok(); ++p) {
      auto w = (*admin)->QueryWatermarks(topic, p, 10s);
      EXPECT_TRUE(w.ok()) << w.status().ToString();
      out.push_back(w.ok() ? w->high : -1);
    }
    return out;
  }

  // The group's committed offsets of `topic`'s partitions (-1 for none), by an OffsetFetch
  // (rd_kafka_committed) from a handle that does not join the group.
  std::vector<int64_t> Committed(const std::string& group, const std::string& topic, int partitions) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap().c_str(), err, sizeof err);
    rd_kafka_conf_set(conf, "group.id", group.c_str(), err, sizeof err);
    rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err);
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    EXPECT_NE(rk, nullptr) << err;
    if (rk == nullptr) return {};
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; ++p) rd_kafka_topic_partition_list_add(list, topic.c_str(), p);
    rd_kafka_resp_err_t e = rd_kafka_committed(rk, list, 10000);
    EXPECT_EQ(e, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(e);
    std::vector<int64_t> out(partitions, -1);
    for (int i = 0; i < list->cnt; ++i) {
      const rd_kafka_topic_partition_t& tp = list->elems[i];
      EXPECT_EQ(tp.err, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(tp.err);
      out[tp.partition] = tp.offset >= 0 ? tp.offset : -1;
    }
    rd_kafka_topic_partition_list_destroy(list);
    rd_kafka_destroy(rk);
    return out;
  }

  // Waits until the group has committed every partition's end (the pipeline flushed
  // everything produced so far).
  // Gives up early when `running` (if given) exits.
  bool WaitCommittedToEnd(const std::string& group, const std::string& topic, int partitions,
                          Child* running = nullptr, std::chrono::milliseconds timeout = 90s) {
    std::vector<int64_t> ends = Ends(topic, partitions);
    std::vector<int64_t> last;
    bool ok = WaitFor([&] {
      last = Committed(group, topic, partitions);
      return last == ends || (running != nullptr && !running->Running());
    }, timeout) && last == ends;
    EXPECT_TRUE(ok) << "group " << group << " committed " << fmt::format("{}", fmt::join(last, ","))
                    << ", ends " << fmt::format("{}", fmt::join(ends, ","));
    return ok;
  }

  // Every record of `topic` until `want` arrived (or 60 s passed), values only.
  std::vector<std::string> ReadTopic(const std::string& topic, int partitions, size_t want) {
    auto consumer = kc::Consumer::Create({{"bootstrap.servers", bootstrap()},
                                          {"fetch.message.max.bytes", "20000000"},
                                          {"receive.message.max.bytes", "100000000"}});
    EXPECT_TRUE(consumer.ok()) << consumer.status().ToString();
    if (!consumer.ok()) return {};
    std::vector<kc::TopicPartition> assign;
    for (int p = 0; p < partitions; ++p) assign.push_back({topic, p, kc::kOffsetBeginning});
    EXPECT_TRUE((*consumer)->Assign(assign).ok());
    std::vector<std::string> got;
    auto deadline = Clock::now() + 60s;
    while (got.size() < want && Clock::now() < deadline) {
      auto batch = (*consumer)->Poll(100ms);
      EXPECT_TRUE(batch.ok()) << batch.status().ToString();
      if (!batch.ok()) break;
      for (size_t i = 0; i < batch->size(); ++i) got.emplace_back((*batch)[i].value);
    }
    return got;
  }

  // Writes the pipeline file and starts `sluice pipeline run` on it.
  Child* StartPipeline(const PipelineSpec& spec, const std::string& label = "") {
    std::string name = label.empty() ? spec.name : label;
    fs::path file = dir_ / (name + ".yml");
    WriteFile(file, Render(spec, bootstrap()));
    auto& slot = children_[name];
    if (!slot) {
      slot = std::make_unique<Child>(
          std::vector<std::string>{binary_, "pipeline", "run", file.string(), "--no-progress"},
          dir_ / (name + ".out"), dir_ / (name + ".err"));
    }
    std::string error = slot->Start();
    EXPECT_EQ(error, "");
    return slot.get();
  }

  // Runs `sluice args...` to its end; returns the exit status, with stdout and stderr.
  int RunSluice(std::vector<std::string> args, std::string* out, std::string* err) {
    args.insert(args.begin(), binary_);
    static int n = 0;
    Child c(args, dir_ / fmt::format("cmd{}.out", n), dir_ / fmt::format("cmd{}.err", n));
    ++n;
    EXPECT_EQ(c.Start(), "");
    auto st = c.WaitExit(60s);
    *out = c.Out();
    *err = c.Err();
    return st.value_or(-1);
  }

  // The pipeline's output rows (a JSON-lines file or a DuckDB reader expression) re-read
  // by DuckDB: the reader expression for FROM.
  static std::string JsonLinesReader(const fs::path& file, const std::string& columns) {
    return fmt::format("read_json({}, format='newline_delimited', columns={})", Lit(file), columns);
  }

  static inline SluiceProcess* broker_ = nullptr;
  static inline std::string broker_error_;
  static inline PostgresServer* pg_ = nullptr;
  std::string binary_;
  fs::path dir_;
  std::string prefix_;
  std::map<std::string, std::unique_ptr<Child>> children_;
};

// ---------------------------------------------------------------------------------------
// 1. Aggregates per batch, summed over batches, equal DuckDB's over the whole input.

constexpr const char* kEventsTable =
    "CREATE TABLE events (id BIGINT, city VARCHAR, amount DOUBLE, uid VARCHAR, version BIGINT);";
constexpr const char* kEventsColumns =
    "{id: 'BIGINT', city: 'VARCHAR', amount: 'DOUBLE', uid: 'VARCHAR', version: 'BIGINT'}";
constexpr const char* kAggColumns = "{city: 'VARCHAR', n: 'BIGINT', total: 'DOUBLE'}";
// The per-batch rows summed per city.
constexpr const char* kReaggregate =
    "SELECT city, sum(n)::BIGINT AS n, sum(total) AS total FROM {} GROUP BY city ORDER BY city";

struct AggregateCase {
  std::string handler;
  std::string sink;  // console, kafka, sqlcommand
};

class PipelineAggregateTest : public PipelineTest,
                              public ::testing::WithParamInterface<AggregateCase> {};

TEST_P(PipelineAggregateTest, PerBatchAggregatesSumToDuckDbsOverTheSameInput) {
  const AggregateCase& c = GetParam();
  const int kPartitions = 3;
  const std::string topic = Name("in");
  const std::string out_topic = Name("out");
  CreateTopic(topic, kPartitions);
  std::vector<Event> events = MakeEvents(0, 3000);
  std::vector<std::string> input = Jsons(events);
  Produce(topic, input, kPartitions);
  fs::path input_file = WriteJsonLines("input.jsonl", input);

  PipelineSpec spec;
  spec.name = "agg";
  spec.group = Name("group");
  spec.topics = {topic};
  spec.batch_size = 250;
  std::string reference_setup;
  if (c.handler == "handlers.StructuredBatch") {
    spec.commands = kEventsTable;
    spec.sql = "SELECT city, count(*) AS n, sum(amount) AS total FROM events GROUP BY city";
    reference_setup = fmt::format("{} INSERT INTO events SELECT * FROM {};", kEventsTable,
                                  JsonLinesReader(input_file, kEventsColumns));
  } else {
    spec.handler = c.handler;
    spec.sql =
        "SELECT properties.city AS city, count(*) AS n, sum(properties.amount) AS total\n"
        "FROM batch GROUP BY 1";
    reference_setup = fmt::format(
        "CREATE TABLE batch AS SELECT * FROM read_json_auto({}, format='newline_delimited');",
        Lit(input_file));
  }
  fs::path parquet_dir = dir_ / "parquet";
  if (c.sink == "kafka") {
    CreateTopic(out_topic, 2);
    spec.sink = fmt::format("type: kafka\nkafka:\n  brokers: ['{}']\n  topic: {}", bootstrap(), out_topic);
  } else if (c.sink == "sqlcommand") {
    fs::create_directories(parquet_dir);
    spec.sink = fmt::format(
        "type: sqlcommand\nsqlcommand:\n  substitutions:\n    - var: $uuid\n      type: uuid4\n"
        "  sql: COPY sqlflow_sink_batch TO '{}/batch-$uuid.parquet' (FORMAT PARQUET)",
        parquet_dir.string());
  }
  Child* run = StartPipeline(spec);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run));
  EXPECT_EQ(run->Terminate(), 0);
  EXPECT_NE(run->Err().find("pipeline agg stopped: 3000 messages in"), std::string::npos) << run->Err();

  std::vector<std::string> want =
      DuckRows(reference_setup, fmt::format(kReaggregate, "(" + spec.sql + ")"));
  ASSERT_EQ(want.size(), 7u);
  std::string reader;
  if (c.sink == "console") {
    reader = JsonLinesReader(run->out_path(), kAggColumns);
  } else if (c.sink == "kafka") {
    // The rows are the output topic's records: the flush waited for their acks.
    std::vector<int64_t> ends = Ends(out_topic, 2);
    std::vector<std::string> rows = ReadTopic(out_topic, 2, ends[0] + ends[1]);
    reader = JsonLinesReader(WriteJsonLines("out.jsonl", rows), kAggColumns);
  } else {
    reader = fmt::format("read_parquet({})", Lit(parquet_dir / "*.parquet"));
  }
  std::vector<std::string> got = DuckRows("", fmt::format(kReaggregate, reader));
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(
    Handlers, PipelineAggregateTest,
    ::testing::Values(AggregateCase{"handlers.StructuredBatch", "console"},
                      AggregateCase{"handlers.InferredMemBatch", "kafka"},
                      AggregateCase{"handlers.InferredDiskBatch", "sqlcommand"}),
    [](const auto& info) {
      return info.param.handler.substr(std::string("handlers.").size()) + "To" +
             static_cast<char>(std::toupper(info.param.sink[0])) + info.param.sink.substr(1);
    });

}  // namespace
}  // namespace sluice::integration
