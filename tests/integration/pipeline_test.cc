// `sluice pipeline run` end to end: the real binary as a child process,
// reading from `sluice serve` on 127.0.0.1 and a free port, fed by kafka::client::Producer;
// its output (console, a kafka topic, Parquet files through sqlcommand, a real PostgreSQL
// table) is checked against the same SQL run by DuckDB over the same input as a JSON-lines
// file. Committed offsets are read with librdkafka's rd_kafka_committed (an OffsetFetch
// for the group, without joining it) and never pass what the sink holds.
//
// The binary comes from SLUICE_BINARY (ctest sets it); without it every test skips. The
// crash test (PipelineCrashTest.*) is registered as its own ctest test (pipeline_tests.cmake);
// its seed is printed and can be set with SLUICE_PIPELINE_CRASH_SEED.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
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
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "duck/database.h"
#include "kafka/client/admin.h"
#include "kafka/client/consumer.h"
#include "kafka/client/producer.h"
#include "sinks/testing/postgres_server.h"
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
    posix_spawn_file_actions_addopen(&actions, 1, out_.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
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

// GET http://127.0.0.1:port/path: the status line and the body ("" when unreachable).
std::string HttpGet(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

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
  std::string fetch;   // the YAML under `kafka.fetch:`, or ""
  std::string tables;  // a top-level `tables:` section as YAML, or ""
  std::string window;  // the YAML under `window:` (then no `sink`), or ""
  std::string state;   // pipeline.state.path, or ""
};

std::string Render(const PipelineSpec& p, const std::string& bootstrap) {
  std::string out;
  if (!p.commands.empty())
    out += "commands:\n  - name: setup\n    sql: |\n" + Indent(p.commands, 6);
  out += p.tables;
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
  if (!p.fetch.empty()) out += "      fetch:\n" + Indent(p.fetch, 8);
  out += fmt::format("  handler:\n    type: {}\n", p.handler);
  if (p.handler == "handlers.StructuredBatch") out += fmt::format("    table: {}\n", p.table);
  out += "    sql: |\n" + Indent(p.sql, 6);
  if (p.window.empty()) {
    out += "  sink:\n" + Indent(p.sink, 4);
  } else {
    out += "  window:\n" + Indent(p.window, 4);
  }
  if (!p.state.empty()) out += fmt::format("  state: {{path: '{}'}}\n", p.state);
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
    broker_ = new SluiceProcess(
        binary, "groups:\n  initial_rebalance_delay: 0s\n  min_session_timeout: 1s\n");
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

  // The shared broker, or the one a test points the helpers at.
  const std::string& bootstrap() const {
    return bootstrap_override_.empty() ? broker_->bootstrap() : bootstrap_override_;
  }
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
  std::vector<int64_t> Committed(const std::string& group, const std::string& topic,
                                 int partitions) {
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
    bool ok = WaitFor(
                  [&] {
                    last = Committed(group, topic, partitions);
                    return last == ends || (running != nullptr && !running->Running());
                  },
                  timeout) &&
              last == ends;
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
  Child* StartPipeline(const PipelineSpec& spec, const std::string& label = "",
                       const std::vector<std::string>& extra_args = {}) {
    std::string name = label.empty() ? spec.name : label;
    fs::path file = dir_ / (name + ".yml");
    WriteFile(file, Render(spec, bootstrap()));
    auto& slot = children_[name];
    if (!slot) {
      std::vector<std::string> args{binary_, "pipeline", "run", file.string(), "--no-progress"};
      args.insert(args.end(), extra_args.begin(), extra_args.end());
      slot = std::make_unique<Child>(args, dir_ / (name + ".out"), dir_ / (name + ".err"));
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
  std::string bootstrap_override_;
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
  std::string sink;          // console, kafka, sqlcommand
  int read_ahead_bytes = 0;  // fetch.max_bytes with prefetch 1; 0: the default read-ahead
};

void PrintTo(const AggregateCase& c, std::ostream* os) {
  *os << c.handler << " to " << c.sink;
  if (c.read_ahead_bytes > 0) *os << " reading ahead " << c.read_ahead_bytes << " bytes";
}

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
  if (c.read_ahead_bytes > 0) {
    // A read-ahead smaller than a batch: it fills and drains many times.
    spec.fetch =
        fmt::format("max_bytes: {}\nmax_partition_bytes: 4096\nprefetch: 1", c.read_ahead_bytes);
    spec.properties += fmt::format("\nmessage.max.bytes: {}", c.read_ahead_bytes);
  }
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
    spec.sink =
        fmt::format("type: kafka\nkafka:\n  brokers: ['{}']\n  topic: {}", bootstrap(), out_topic);
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
  EXPECT_NE(run->Err().find("pipeline agg stopped: 3000 messages in"), std::string::npos)
      << run->Err();

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
                      AggregateCase{"handlers.StructuredBatch", "console", 16384},
                      AggregateCase{"handlers.InferredMemBatch", "kafka"},
                      AggregateCase{"handlers.InferredDiskBatch", "sqlcommand"}),
    [](const auto& info) {
      return info.param.handler.substr(std::string("handlers.").size()) + "To" +
             static_cast<char>(std::toupper(info.param.sink[0])) + info.param.sink.substr(1) +
             (info.param.read_ahead_bytes > 0 ? "SmallReadAhead" : "");
    });

// ---------------------------------------------------------------------------------------
// Helpers over the rows of the id/partition/offset pipelines.

// The handler of the pipelines whose rows say which message they came from.
constexpr const char* kWhereSql =
    "SELECT id::BIGINT AS id, kafka_partition AS p, kafka_offset AS o FROM batch";

// (partition, offset) -> times seen, and id -> times seen, from JSON lines (complete
// lines only: a file may be in the middle of a write).
struct Held {
  std::map<std::pair<int32_t, int64_t>, int> where;
  std::map<int64_t, int> ids;
  size_t rows = 0;
};

int64_t JsonInt(const std::string& line, const std::string& key) {
  std::string k = "\"" + key + "\":";
  size_t at = line.find(k);
  if (at == std::string::npos) return -1;
  return std::strtoll(line.c_str() + at + k.size(), nullptr, 10);
}

Held ParseHeld(const std::string& text) {
  Held h;
  size_t start = 0;
  while (true) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) break;
    std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line[0] != '{') continue;
    ++h.rows;
    ++h.ids[JsonInt(line, "id")];
    if (line.find("\"p\":") != std::string::npos)
      ++h.where[{JsonInt(line, "p"), JsonInt(line, "o")}];
  }
  return h;
}

// From psql -At output of "SELECT id, p, o ...".
Held ParsePsqlHeld(const std::string& text) {
  Held h;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    int64_t id = 0, p = 0, o = 0;
    if (std::sscanf(line.c_str(), "%ld|%ld|%ld", &id, &p, &o) != 3) continue;
    ++h.rows;
    ++h.ids[id];
    ++h.where[{static_cast<int32_t>(p), o}];
  }
  return h;
}

// At-least-once: every offset below a partition's committed offset is in the sink.
void ExpectCommittedHeld(const std::vector<int64_t>& committed, const Held& held,
                         const std::string& when) {
  for (size_t p = 0; p < committed.size(); ++p) {
    int64_t missing = 0, first_missing = -1;
    for (int64_t o = 0; o < committed[p]; ++o) {
      if (!held.where.contains({static_cast<int32_t>(p), o})) {
        if (first_missing < 0) first_missing = o;
        ++missing;
      }
    }
    EXPECT_EQ(missing, 0) << when << ": partition " << p << " committed " << committed[p]
                          << " but the sink lacks " << missing << " offsets below it, the first "
                          << first_missing;
  }
}

std::set<int64_t> Range(int64_t from, int64_t to) {
  std::set<int64_t> s;
  for (int64_t i = from; i < to; ++i) s.insert(i);
  return s;
}

std::set<int64_t> Keys(const std::map<int64_t, int>& m) {
  std::set<int64_t> s;
  for (const auto& [k, v] : m) s.insert(k);
  return s;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ---------------------------------------------------------------------------------------
// 2. At-least-once and commits: a clean stop commits what the sink holds, and a restart
// with the same group reads nothing old.

TEST_F(PipelineTest, RestartAfterSigtermReadsNothingOldAndCommitsNeverPassTheSink) {
  const int kPartitions = 3;
  const std::string topic = Name("in");
  CreateTopic(topic, kPartitions);
  PipelineSpec spec;
  spec.name = "where";
  spec.group = Name("group");
  spec.topics = {topic};
  spec.handler = "handlers.InferredMemBatch";
  spec.sql = kWhereSql;
  spec.batch_size = 100;
  Child* first = StartPipeline(spec, "first");
  for (int chunk = 0; chunk < 3; ++chunk) {
    Produce(topic, Jsons(MakeEvents(chunk * 500, 500)), kPartitions);
    // Committed first, then the sink: a commit always follows its batch's flush.
    std::vector<int64_t> committed = Committed(spec.group, topic, kPartitions);
    ExpectCommittedHeld(committed, ParseHeld(first->Out()), fmt::format("after chunk {}", chunk));
  }
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, first));
  EXPECT_EQ(first->Terminate(), 0);
  Held held = ParseHeld(first->Out());
  ExpectCommittedHeld(Committed(spec.group, topic, kPartitions), held, "after SIGTERM");
  EXPECT_EQ(Keys(held.ids), Range(0, 1500));
  EXPECT_EQ(held.rows, 1500u) << "a clean run repeated messages";

  Child* second = StartPipeline(spec, "second");
  Produce(topic, Jsons(MakeEvents(1500, 600)), kPartitions);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, second));
  EXPECT_EQ(second->Terminate(), 0);
  Held again = ParseHeld(second->Out());
  EXPECT_EQ(Keys(again.ids), Range(1500, 2100)) << "the restarted pipeline read old messages";
  EXPECT_EQ(again.rows, 600u);
}

// ---------------------------------------------------------------------------------------
// 5. Bad input, as on_error says: invalid JSON, JSON that does not fit the table, and
// 10 MB messages (one valid, which goes through; one truncated).

TEST_F(PipelineTest, BadMessagesFollowOnErrorRaiseIgnoreAndDlq) {
  const std::string topic = Name("in");
  const std::string dlq_topic = Name("dlq");
  CreateTopic(topic, 1, {{"max.message.bytes", "16000000"}});
  CreateTopic(dlq_topic, 1, {{"max.message.bytes", "16000000"}});
  const size_t kBig = 10 << 20;
  std::vector<std::string> input;
  for (const Event& e : MakeEvents(0, 50)) input.push_back(e.Json());
  input.push_back(R"({"id": 50, "city": )");                            // invalid JSON
  input.push_back(R"({"id": "fifty-one", "city": "X", "amount": 1})");  // does not fit
  input.push_back(R"({"id": 52, "city": "Big", "note": ")" + std::string(kBig, 'x') + "\"}");
  input.push_back(R"({"id": 53, "city": "Big", "note": ")" + std::string(kBig, 'y'));  // cut
  for (const Event& e : MakeEvents(54, 46)) input.push_back(e.Json());
  Produce(topic, input, 1);

  PipelineSpec spec;
  spec.topics = {topic};
  spec.commands = "CREATE TABLE events (id BIGINT, city VARCHAR, amount DOUBLE, note VARCHAR);";
  spec.sql = "SELECT id, city, length(note) AS note_len FROM events";
  spec.batch_size = 20;
  PipelineSpec raise = spec, ignore = spec, dlq = spec;
  raise.name = "raise";
  raise.group = Name("raise");
  ignore.name = "ignore";
  ignore.group = Name("ignore");
  ignore.on_error = "policy: ignore";  // values are case-insensitive
  dlq.name = "dlq";
  dlq.group = Name("dlq");
  dlq.on_error = fmt::format(
      "policy: DLQ\ndlq:\n  type: kafka\n  kafka:\n    brokers: ['{}']\n    topic: {}\n"
      "    properties: {{message.max.bytes: 20000000}}",
      bootstrap(), dlq_topic);
  Child* r = StartPipeline(raise);
  Child* i = StartPipeline(ignore);
  Child* d = StartPipeline(dlq);

  // RAISE: stops non-zero naming the message, nothing committed past the last flushed batch.
  std::optional<int> raised = r->WaitExit(90s);
  ASSERT_TRUE(raised.has_value()) << "RAISE did not stop";
  EXPECT_NE(*raised, 0);
  EXPECT_TRUE(Contains(r->Err(), "decode failed") && Contains(r->Err(), "offset 50")) << r->Err();
  std::vector<int64_t> committed = Committed(raise.group, topic, 1);
  EXPECT_LE(committed[0], 50);
  Held raise_held = ParseHeld(r->Out());
  for (int64_t id = 0; id < committed[0]; ++id) EXPECT_TRUE(raise_held.ids.contains(id)) << id;

  // IGNORE and DLQ: the good messages all arrive, the three bad ones are counted.
  std::set<int64_t> good = Range(0, 100);
  good.erase(50);
  good.erase(51);
  good.erase(53);
  for (Child* c : {i, d}) {
    const std::string& group = c == i ? ignore.group : dlq.group;
    ASSERT_TRUE(WaitCommittedToEnd(group, topic, 1, c));
    EXPECT_EQ(c->Terminate(), 0);
    Held held = ParseHeld(c->Out());
    EXPECT_EQ(Keys(held.ids), good);
    EXPECT_TRUE(Contains(c->Out(), fmt::format("\"note_len\":{}", kBig))) << "the 10 MB message";
    EXPECT_TRUE(Contains(c->Err(), "100 messages in, 97 rows out, 3 errors")) << c->Err();
  }
  for (const char* offset : {"offset 50", "offset 51", "offset 53"}) {
    EXPECT_TRUE(Contains(i->Err(), offset)) << offset << "\n" << Tail(i->Err(), 3000);
  }
  EXPECT_TRUE(Contains(i->Err(), "skipped (on_error IGNORE)")) << i->Err();

  // DLQ: one record per bad message with error, message, phase, topic, partition, offset,
  // timestamp.
  std::vector<std::string> letters = ReadTopic(dlq_topic, 1, 3);
  ASSERT_EQ(letters.size(), 3u);
  fs::path letters_file = WriteJsonLines("letters.jsonl", letters);
  std::vector<std::string> got = DuckRows(
      "",
      fmt::format("SELECT phase, topic, \"partition\", \"offset\", length(error) > 10, "
                  "\"timestamp\" IS NOT NULL, message = {} OR message = {} OR length(message) > {} "
                  "FROM read_json({}, format='newline_delimited', maximum_object_size=100000000) "
                  "ORDER BY \"offset\"",
                  duck::QuoteLiteral(input[50]), duck::QuoteLiteral(input[51]), kBig,
                  Lit(letters_file)));
  std::vector<std::string> want;
  for (int o : {50, 51, 53}) want.push_back(fmt::format("decode|{}|0|{}|true|true|true", topic, o));
  EXPECT_EQ(got, want);
  // The truncated 10 MB message went through whole, as a JSON string.
  EXPECT_EQ(std::count_if(letters.begin(), letters.end(),
                          [&](const std::string& l) {
                            return Contains(l,
                                            R"(\"id\": 53, \"city\": \"Big\", \"note\": \"yyyy)") &&
                                   Contains(l, std::string(kBig, 'y'));
                          }),
            1);
}

// A dead letter the DLQ sink refuses (a 2 MB message, over the kafka producer's default
// message.max.bytes of 1 MB) has nowhere left to go: the pipeline stops rather than commit
// past it.
TEST_F(PipelineTest, DeadLetterTheDlqSinkRefusesStopsThePipeline) {
  const std::string topic = Name("in");
  const std::string dlq_topic = Name("dlq");
  CreateTopic(topic, 1, {{"max.message.bytes", "16000000"}});
  CreateTopic(dlq_topic, 1);
  std::vector<std::string> input = Jsons(MakeEvents(0, 20));
  input.push_back(R"({"id": 20, "city": ")" + std::string(2 << 20, 'z'));  // invalid, 2 MB
  for (const Event& e : MakeEvents(21, 20)) input.push_back(e.Json());
  Produce(topic, input, 1);
  PipelineSpec spec;
  spec.name = "dlq";
  spec.group = Name("group");
  spec.topics = {topic};
  spec.commands = kEventsTable;
  spec.sql = "SELECT id FROM events";
  spec.batch_size = 10;
  spec.on_error =
      fmt::format("policy: DLQ\ndlq:\n  type: kafka\n  kafka:\n    brokers: ['{}']\n    topic: {}",
                  bootstrap(), dlq_topic);
  Child* run = StartPipeline(spec);
  // Either the dead letter arrives, or the pipeline stops naming the dead-letter sink; it
  // never commits past a message that went nowhere.
  std::vector<int64_t> committed;
  WaitFor(
      [&] {
        committed = Committed(spec.group, topic, 1);
        return committed[0] == 41 || !run->Running();
      },
      60s);
  std::optional<int> exit = run->WaitExit(0ms);
  std::vector<int64_t> ends = Ends(dlq_topic, 1);
  if (!exit.has_value()) {
    EXPECT_EQ(ends[0], 1) << "offset 20 was committed (" << committed[0]
                          << ") but its dead letter is not in " << dlq_topic;
    EXPECT_EQ(run->Terminate(), 0);
  } else {
    EXPECT_NE(*exit, 0);
    EXPECT_TRUE(Contains(run->Err(), "dead-letter")) << run->Err();
    EXPECT_LE(committed[0], 20);
  }
}

// An SQL error in the handler (a cast that fails on one message's data): RAISE names
// DuckDB's error and stops; IGNORE skips that batch and counts it; DLQ sends each of its
// messages to the dead-letter topic.
TEST_F(PipelineTest, HandlerSqlErrorFollowsOnErrorRaiseIgnoreAndDlq) {
  const std::string topic = Name("in");
  const std::string dlq_topic = Name("dlq");
  CreateTopic(topic, 1);
  CreateTopic(dlq_topic, 1);
  std::vector<std::string> input;
  for (int id = 0; id < 60; ++id) {
    input.push_back(fmt::format(R"({{"id":{},"city":"{}"}})", id, id == 30 ? "Paris" : "7"));
  }
  Produce(topic, input, 1);
  PipelineSpec spec;
  spec.topics = {topic};
  spec.commands = "CREATE TABLE events (id BIGINT, city VARCHAR);";
  spec.sql = "SELECT id, CAST(city AS INTEGER) AS code FROM events";
  spec.batch_size = 10;
  PipelineSpec raise = spec, ignore = spec, dlq = spec;
  raise.name = "raise";
  raise.group = Name("raise");
  ignore.name = "ignore";
  ignore.group = Name("ignore");
  ignore.on_error = "policy: IGNORE";
  dlq.name = "dlq";
  dlq.group = Name("dlq");
  dlq.on_error =
      fmt::format("policy: dlq\ndlq:\n  type: kafka\n  kafka:\n    brokers: ['{}']\n    topic: {}",
                  bootstrap(), dlq_topic);
  Child* r = StartPipeline(raise);
  Child* i = StartPipeline(ignore);
  Child* d = StartPipeline(dlq);

  std::optional<int> raised = r->WaitExit(90s);
  ASSERT_TRUE(raised.has_value()) << "RAISE did not stop";
  EXPECT_NE(*raised, 0);
  EXPECT_TRUE(Contains(r->Err(), "handler failed") && Contains(r->Err(), "Conversion Error"))
      << r->Err();
  std::vector<int64_t> committed = Committed(raise.group, topic, 1);
  EXPECT_LE(committed[0], 30);
  Held raise_held = ParseHeld(r->Out());
  for (int64_t id = 0; id < committed[0]; ++id) EXPECT_TRUE(raise_held.ids.contains(id)) << id;
  EXPECT_FALSE(raise_held.ids.contains(30));

  ASSERT_TRUE(WaitCommittedToEnd(ignore.group, topic, 1, i));
  EXPECT_EQ(i->Terminate(), 0);
  Held ignored = ParseHeld(i->Out());
  EXPECT_FALSE(ignored.ids.contains(30));
  EXPECT_LT(ignored.rows, 60u);
  EXPECT_TRUE(Contains(i->Err(), "skipped (on_error IGNORE)") &&
              Contains(i->Err(), "Conversion Error"))
      << i->Err();
  EXPECT_TRUE(Contains(i->Err(), fmt::format("60 messages in, {} rows out, {} errors", ignored.rows,
                                             60 - ignored.rows)))
      << i->Err();

  ASSERT_TRUE(WaitCommittedToEnd(dlq.group, topic, 1, d));
  EXPECT_EQ(d->Terminate(), 0);
  Held delivered = ParseHeld(d->Out());
  std::vector<std::string> letters = ReadTopic(dlq_topic, 1, 60 - delivered.rows);
  ASSERT_EQ(letters.size(), 60 - delivered.rows);
  std::set<int64_t> all = Keys(delivered.ids);
  for (const std::string& l : letters) {
    EXPECT_TRUE(Contains(l, "\"phase\":\"handler\"") && Contains(l, "Conversion Error")) << l;
    int64_t offset = JsonInt(l, "offset");
    // The message is the record's value, as a JSON string.
    EXPECT_TRUE(Contains(l, fmt::format(R"(\"id\":{},)", offset))) << l;
    EXPECT_TRUE(all.insert(offset).second) << "offset " << offset << " both delivered and dead";
  }
  EXPECT_EQ(all, Range(0, 60));
}

// ---------------------------------------------------------------------------------------
// 6. validate names the key and line; invoke prints the handler's rows.

TEST_F(PipelineTest, ValidateNamesKeyAndLineAndInvokePrintsRows) {
  PipelineSpec spec;
  spec.name = "checked";
  spec.group = "g";
  spec.topics = {"events"};
  spec.commands = kEventsTable;
  spec.sql =
      "SELECT city, count(*) AS n, sum(amount) AS total FROM events GROUP BY city ORDER BY city";
  std::string yaml = Render(spec, "127.0.0.1:9");
  fs::path good = dir_ / "good.yml";
  WriteFile(good, yaml);
  std::string out, err;
  EXPECT_EQ(RunSluice({"pipeline", "validate", good.string()}, &out, &err), 0) << err;
  EXPECT_TRUE(Contains(out, "valid")) << out;

  // A misspelt key: exit status 2, the file, line and key named.
  std::string bad_yaml = yaml;
  size_t at = bad_yaml.find("group_id:");
  ASSERT_NE(at, std::string::npos);
  bad_yaml.replace(at, 9, "groupid:");
  int line = 1 + static_cast<int>(std::count(bad_yaml.begin(), bad_yaml.begin() + at, '\n'));
  fs::path bad = dir_ / "bad.yml";
  WriteFile(bad, bad_yaml);
  EXPECT_EQ(RunSluice({"pipeline", "validate", bad.string()}, &out, &err), 2);
  EXPECT_TRUE(Contains(
      err, fmt::format("{}:{}: pipeline.source.kafka.groupid: unknown key", bad.string(), line)))
      << err;

  // invoke: the handler over a fixture, rows as JSON lines, equal to DuckDB's.
  std::vector<std::string> input = Jsons(MakeEvents(0, 300));
  fs::path fixture = WriteJsonLines("fixture.jsonl", input);
  ASSERT_EQ(RunSluice({"pipeline", "invoke", good.string(), fixture.string()}, &out, &err), 0)
      << err;
  std::vector<std::string> want =
      DuckRows(fmt::format("{} INSERT INTO events SELECT * FROM {};", kEventsTable,
                           JsonLinesReader(fixture, kEventsColumns)),
               fmt::format("SELECT to_json(t)::VARCHAR FROM ({}) t", spec.sql));
  std::vector<std::string> got;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);) got.push_back(l);
  EXPECT_EQ(got, want);
}

// ---------------------------------------------------------------------------------------
// 7. An idle topic still flushes a partial batch on the interval.

TEST_F(PipelineTest, IdleTopicFlushesAPartialBatchOnTheInterval) {
  const std::string topic = Name("in");
  CreateTopic(topic, 1);
  PipelineSpec spec;
  spec.name = "idle";
  spec.group = Name("group");
  spec.topics = {topic};
  spec.handler = "handlers.InferredMemBatch";
  spec.sql = kWhereSql;
  spec.batch_size = 100000;  // never filled
  Child* run = StartPipeline(spec);
  Produce(topic, Jsons(MakeEvents(0, 3)), 1);
  EXPECT_TRUE(WaitFor([&] { return ParseHeld(run->Out()).rows == 3; }, 60s)) << run->Out();
  EXPECT_TRUE(WaitCommittedToEnd(spec.group, topic, 1, run));
  EXPECT_TRUE(run->Running());
  EXPECT_EQ(run->Terminate(), 0);
  EXPECT_EQ(Keys(ParseHeld(run->Out()).ids), Range(0, 3));
}

// `--http-addr off` means no HTTP port, as it does for `sluice serve`.
TEST_F(PipelineTest, RunTakesHttpAddrOff) {
  const std::string topic = Name("in");
  CreateTopic(topic, 1);
  PipelineSpec spec;
  spec.name = "http-off";
  spec.group = Name("group");
  spec.topics = {topic};
  spec.handler = "handlers.InferredMemBatch";
  spec.sql = kWhereSql;
  spec.batch_size = 100000;
  Child* run = StartPipeline(spec, "", {"--http-addr", "off"});
  Produce(topic, Jsons(MakeEvents(0, 3)), 1);
  EXPECT_TRUE(WaitFor([&] { return ParseHeld(run->Out()).rows == 3; }, 60s)) << run->Err();
  EXPECT_TRUE(run->Running()) << run->Err();
  EXPECT_EQ(run->Terminate(), 0) << run->Err();
  EXPECT_EQ(run->Err().find("metrics on http"), std::string::npos) << run->Err();
}

// ---------------------------------------------------------------------------------------
// 8. Rebalance: two members over 4 partitions; one leaves (SIGTERM) mid-stream.

TEST_F(PipelineTest, MemberLeavingMidStreamLosesNothing) {
  const int kPartitions = 4;
  const int kMessages = 4000;
  const std::string topic = Name("in");
  CreateTopic(topic, kPartitions);
  PipelineSpec spec;
  spec.name = "member";
  spec.group = Name("group");
  spec.topics = {topic};
  spec.handler = "handlers.InferredMemBatch";
  spec.sql = kWhereSql;
  spec.batch_size = 50;
  spec.properties = "fetch.wait.max.ms: 50\nsession.timeout.ms: 3000\nheartbeat.interval.ms: 300";
  Child* a = StartPipeline(spec, "a");
  Child* b = StartPipeline(spec, "b");
  std::atomic<int> produced{0};
  std::thread producer([&] {
    for (int chunk = 0; chunk < 40; ++chunk) {
      Produce(topic, Jsons(MakeEvents(chunk * 100, 100)), kPartitions);
      produced += 100;
      std::this_thread::sleep_for(30ms);  // a steady stream, not a synchronisation
    }
  });
  // Both members hold partitions and have written rows before one leaves.
  bool both =
      WaitFor([&] { return ParseHeld(a->Out()).rows > 0 && ParseHeld(b->Out()).rows > 0; }, 60s);
  EXPECT_TRUE(both) << "a: " << ParseHeld(a->Out()).rows << ", b: " << ParseHeld(b->Out()).rows;
  int left_at = produced.load();
  EXPECT_EQ(b->Terminate(), 0);
  producer.join();
  EXPECT_LT(left_at, kMessages) << "the member left after the stream ended";
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, a));
  EXPECT_EQ(a->Terminate(), 0);
  Held ha = ParseHeld(a->Out());
  Held hb = ParseHeld(b->Out());
  std::set<int64_t> all = Keys(ha.ids);
  all.merge(Keys(hb.ids));
  EXPECT_EQ(all, Range(0, kMessages));
  for (const auto& [where, n] : hb.where) ha.where[where] += n;
  ExpectCommittedHeld(Committed(spec.group, topic, kPartitions), ha, "at the end");
}

// ---------------------------------------------------------------------------------------
// 9. `sluice serve --pipelines DIR`: every pipeline file in the folder runs beside the
// broker, reading from it as {{ SLUICE_KAFKA_ADDR }}; a bad folder stops serve before it
// listens.

TEST_F(PipelineTest, ServeRunsEveryPipelineInTheFolderBesideItsBroker) {
  const int port = sinks::testing::FreePort();
  ASSERT_GT(port, 0);
  const std::string topic = Name("in");
  fs::path pipelines = dir_ / "pipelines";
  fs::path out = dir_ / "out";
  fs::create_directories(pipelines);
  fs::create_directories(out);
  auto sink_to = [&](const std::string& prefix) {
    return fmt::format(
        "type: sqlcommand\nsqlcommand:\n  substitutions:\n    - var: $uuid\n      type: uuid4\n"
        "  sql: COPY sqlflow_sink_batch TO '{}/{}-$uuid.json' (FORMAT JSON)",
        out.string(), prefix);
  };
  PipelineSpec structured;
  structured.name = "structured";
  structured.group = Name("structured");
  structured.topics = {topic};
  structured.commands = kEventsTable;
  structured.sql = "SELECT id, city FROM events";
  structured.sink = sink_to("structured");
  PipelineSpec inferred = structured;
  inferred.name = "inferred";
  inferred.group = Name("inferred");
  inferred.commands = "";
  inferred.handler = "handlers.InferredMemBatch";
  inferred.sql = kWhereSql;
  inferred.sink = sink_to("inferred");
  WriteFile(pipelines / "a.yml", Render(structured, "{{ SLUICE_KAFKA_ADDR }}"));
  WriteFile(pipelines / "b.yaml", Render(inferred, "{{ SLUICE_KAFKA_ADDR }}"));
  WriteFile(pipelines / "notes.txt", "not a pipeline file: ignored\n");
  WriteFile(dir_ / "serve.yaml", "groups:\n  initial_rebalance_delay: 0s\n");
  std::vector<std::string> args = {binary_,
                                   "serve",
                                   "--config",
                                   (dir_ / "serve.yaml").string(),
                                   "--kafka-addr",
                                   fmt::format("127.0.0.1:{}", port),
                                   "--data-dir",
                                   (dir_ / "serve-data").string(),
                                   "--pipelines",
                                   pipelines.string(),
                                   "--http-addr",
                                   "127.0.0.1:0",
                                   "--pg-addr",
                                   "127.0.0.1:0",
                                   "--schema-registry-addr",
                                   "off"};
  Child serve(args, dir_ / "serve.out", dir_ / "serve.err");
  ASSERT_EQ(serve.Start(), "");
  ASSERT_TRUE(
      WaitFor([&] { return serve.Out().find("metrics on http://") != std::string::npos; }, 60s))
      << serve.Out() << serve.Err();
  EXPECT_NE(serve.Out().find("running 2 pipeline(s)"), std::string::npos) << serve.Out();
  std::string so = serve.Out();
  size_t at =
      so.find("metrics on http://127.0.0.1:") + std::string("metrics on http://127.0.0.1:").size();
  const int http_port = std::atoi(so.c_str() + at);

  bootstrap_override_ = fmt::format("127.0.0.1:{}", port);
  CreateTopic(topic, 2);
  std::vector<Event> events = MakeEvents(0, 1000);
  Produce(topic, Jsons(events), 2);
  EXPECT_TRUE(WaitCommittedToEnd(structured.group, topic, 2, &serve));
  EXPECT_TRUE(WaitCommittedToEnd(inferred.group, topic, 2, &serve));
  bootstrap_override_.clear();

  std::string metrics = HttpGet(http_port, "/metrics");
  EXPECT_NE(metrics.find("sluice_pipeline_messages_in_total{pipeline=\"structured\"} 1000"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sluice_pipeline_messages_in_total{pipeline=\"inferred\"} 1000"),
            std::string::npos);
  EXPECT_NE(HttpGet(http_port, "/healthz").find(" 200 "), std::string::npos);
  EXPECT_EQ(serve.Terminate(), 0) << serve.Err();
  EXPECT_NE(serve.Out().find("sluice: stopped"), std::string::npos) << serve.Out();

  // Each pipeline wrote every message once (no failure, no restart).
  std::string reader =
      "read_json('{}/{}-*.json', format='newline_delimited', columns={{id: 'BIGINT'}})";
  for (const char* which : {"structured", "inferred"}) {
    std::vector<std::string> got =
        DuckRows("", fmt::format("SELECT count(*), count(DISTINCT id), min(id), max(id) FROM {}",
                                 fmt::format(fmt::runtime(reader), out.string(), which)));
    EXPECT_EQ(got, std::vector<std::string>{"1000|1000|0|999"}) << which;
  }
}

TEST_F(PipelineTest, ServeRefusesABadPipelineFolderBeforeListening) {
  fs::path pipelines = dir_ / "pipelines";
  fs::create_directories(pipelines);
  PipelineSpec spec;
  spec.name = "big";
  spec.group = Name("group");
  spec.topics = {"t"};
  spec.commands = kEventsTable;
  spec.sql = "SELECT * FROM events";
  WriteFile(pipelines / "a.yml", Render(spec, "127.0.0.1:9"));  // duckdb memory_limit 256MiB
  spec.name = "big2";
  WriteFile(pipelines / "b.yml", Render(spec, "127.0.0.1:9"));
  WriteFile(pipelines / "c.yml", "pipeline:\n  name: broken\n  batch_size: many\n");
  std::string out_text, err_text;
  int status = RunSluice(
      {"serve", "--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--pg-addr",
       "127.0.0.1:0", "--schema-registry-addr", "off", "--data-dir", (dir_ / "data").string(),
       "--pipelines", pipelines.string(), "--pipelines-memory-budget", "300"},
      &out_text, &err_text);
  EXPECT_EQ(status, 2) << out_text << err_text;
  EXPECT_EQ(out_text.find("serving Kafka"), std::string::npos) << out_text;
  EXPECT_NE(err_text.find("c.yml:3"), std::string::npos) << err_text;
  EXPECT_NE(err_text.find("batch_size"), std::string::npos) << err_text;
  EXPECT_NE(err_text.find("add up to 512 MiB, over the budget of 300 MiB"), std::string::npos)
      << err_text;
  EXPECT_FALSE(fs::exists(dir_ / "data" / "meta")) << "the broker started";
}

// ---------------------------------------------------------------------------------------
// 10. sqlflow's windowed table: the handler upserts per-bucket counts into it, its manager
// sends closed buckets to their own sink and deletes them; summed per bucket, what the
// window sink got equals DuckDB's counts over the input.

TEST_F(PipelineTest, SqlflowTumblingWindowSendsClosedBucketsToItsSink) {
  const std::string topic = Name("in");
  CreateTopic(topic, 2);
  std::vector<std::string> input = Jsons(MakeEvents(0, 3000));
  fs::path input_file = WriteJsonLines("input.jsonl", input);
  fs::path out = dir_ / "windows";
  fs::create_directories(out);
  // Event time: minute id/100 of 1970, long closed by the wall clock the collect SQL reads.
  PipelineSpec spec;
  spec.name = "window";
  spec.group = Name("group");
  spec.topics = {topic};
  spec.handler = "handlers.InferredMemBatch";
  spec.batch_size = 400;
  spec.sql =
      "INSERT INTO agg BY NAME\n"
      "SELECT to_timestamp((id::BIGINT // 100) * 60) AS bucket, properties.city AS city, count(*) "
      "AS n\n"
      "FROM batch GROUP BY ALL\n"
      "ON CONFLICT (bucket, city) DO UPDATE SET n = n + EXCLUDED.n";
  spec.sink = "type: noop";
  spec.tables = fmt::format(
      "tables:\n"
      "  sql:\n"
      "    - name: agg\n"
      "      sql: |\n"
      "        CREATE TABLE agg (bucket TIMESTAMPTZ, city VARCHAR, n BIGINT);\n"
      "        CREATE UNIQUE INDEX agg_idx ON agg (bucket, city);\n"
      "      manager:\n"
      "        tumbling_window:\n"
      "          poll_interval_seconds: 1\n"
      "          collect_closed_windows_sql: SELECT bucket, city, n FROM agg WHERE bucket < now() "
      "- INTERVAL '60' SECOND\n"
      "          delete_closed_windows_sql: DELETE FROM agg WHERE bucket < now() - INTERVAL '60' "
      "SECOND\n"
      "        sink:\n"
      "          type: sqlcommand\n"
      "          sqlcommand:\n"
      "            substitutions: [{{var: $uuid, type: uuid4}}]\n"
      "            sql: COPY sqlflow_sink_batch TO '{}/w-$uuid.json' (FORMAT JSON)\n",
      out.string());
  Child* run = StartPipeline(spec);
  Produce(topic, input, 2);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, 2, run));
  std::string emitted = fmt::format(
      "read_json('{}/w-*.json', format='newline_delimited', columns={{bucket: 'TIMESTAMPTZ', city: "
      "'VARCHAR', n: 'BIGINT'}})",
      out.string());
  auto total = [&] {
    if (fs::is_empty(out)) return std::string("0");
    std::vector<std::string> r =
        DuckRows("", fmt::format("SELECT coalesce(sum(n), 0) FROM {}", emitted));
    return r.empty() ? std::string("?") : r[0];
  };
  // Polled every second: every bucket closed long ago, so all of them come out.
  EXPECT_TRUE(WaitFor([&] { return total() == "3000"; }, 60s)) << total();
  EXPECT_EQ(run->Terminate(), 0) << run->Err();
  std::vector<std::string> want = DuckRows(
      fmt::format(
          "CREATE TABLE batch AS SELECT * FROM read_json_auto({}, format='newline_delimited');",
          Lit(input_file)),
      "SELECT epoch(to_timestamp((id::BIGINT // 100) * 60))::BIGINT, properties.city, count(*) "
      "FROM batch GROUP BY ALL ORDER BY ALL");
  std::vector<std::string> got = DuckRows(
      "",
      fmt::format(
          "SELECT epoch(bucket)::BIGINT, city, sum(n)::BIGINT FROM {} GROUP BY ALL ORDER BY ALL",
          emitted));
  EXPECT_GE(want.size(), 30u);  // 30 minutes, each with several cities
  EXPECT_EQ(got, want);
}

// ---------------------------------------------------------------------------------------
// Declarative windows (docs/design/0007-windows-and-state.md): event time in the messages, results
// against DuckDB over the whole input.

// 2026-01-01T00:00:00Z plus `seconds`, as ISO 8601.
std::string IsoUtc(int64_t seconds) {
  std::time_t t = 1'767'225'600 + seconds;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Event i at `seconds` after the base: {"ts", "city", "amount"} (amounts in quarters).
std::string TimedEvent(int64_t i, int64_t seconds) {
  static const char* kCities[] = {"Paris", "Lyon", "Nantes", "Lille", "Brest"};
  return fmt::format(R"({{"ts":"{}","city":"{}","amount":{}}})", IsoUtc(seconds),
                     kCities[(i * 3 + i / 7) % 5], static_cast<double>((i * 37) % 401) * 0.25);
}

constexpr const char* kTimedColumns = "{ts: 'TIMESTAMPTZ', city: 'VARCHAR', amount: 'DOUBLE'}";

TEST_F(PipelineTest, HoppingWindowOverSkewedPartitionsMatchesDuckDb) {
  const int kPartitions = 3;
  const int kEvents = 3000;
  const std::string topic = Name("in");
  const std::string out_topic = Name("out");
  CreateTopic(topic, kPartitions);
  CreateTopic(out_topic, 1);
  // Event i goes to partition i % 3 at 2 s steps; partition 0 runs 7 minutes ahead of the
  // others, so windows wait for the slow partitions. Then one event per partition a day
  // later closes every window of the input.
  std::vector<std::string> input;
  for (int64_t i = 0; i < kEvents; ++i)
    input.push_back(TimedEvent(i, i * 2 + (i % 3 == 0 ? 420 : 0)));
  std::vector<std::string> closers;
  for (int p = 0; p < kPartitions; ++p) closers.push_back(TimedEvent(p, 86'400));
  fs::path input_file = WriteJsonLines("input.jsonl", input);

  PipelineSpec spec;
  spec.name = "hopping";
  spec.group = Name("group");
  spec.topics = {topic};
  spec.commands = "CREATE TABLE events (ts TIMESTAMPTZ, city VARCHAR, amount DOUBLE);";
  spec.sql = "SELECT ts, city, amount FROM events";
  spec.batch_size = 150;
  spec.window = fmt::format(
      "type: hopping\ntime_column: ts\nsize: 5m\nslide: 1m\ngrace: 5s\n"
      "emit_sql: SELECT window_start, window_end, city, count(*) AS n, sum(amount) AS amount FROM "
      "closed GROUP BY ALL\n"
      "sink:\n  type: kafka\n  kafka:\n    brokers: ['{}']\n    topic: {}\n",
      bootstrap(), out_topic);
  Child* run = StartPipeline(spec);
  Produce(topic, input, kPartitions);
  Produce(topic, closers, kPartitions);

  std::vector<std::string> want = DuckRows(fmt::format("CREATE TABLE e AS SELECT * FROM {};",
                                                       JsonLinesReader(input_file, kTimedColumns)),
                                           "SELECT ws, ws + 300, city, count(*), sum(amount) FROM ("
                                           "  SELECT (epoch(ts)::BIGINT // 60) * 60 - k * 60 AS "
                                           "ws, city, amount FROM e, range(0, 5) r(k)) "
                                           "GROUP BY ALL ORDER BY ALL");
  ASSERT_GE(want.size(), 400u);
  std::vector<std::string> lines = ReadTopic(out_topic, 1, want.size());
  fs::path got_file = WriteJsonLines("got.jsonl", lines);
  std::vector<std::string> got = DuckRows(
      "",
      fmt::format("SELECT epoch(window_start)::BIGINT, epoch(window_end)::BIGINT, city, n, amount "
                  "FROM {} ORDER BY ALL",
                  JsonLinesReader(got_file,
                                  "{window_start: 'TIMESTAMPTZ', window_end: 'TIMESTAMPTZ', city: "
                                  "'VARCHAR', n: 'BIGINT', amount: 'DOUBLE'}")));
  EXPECT_EQ(got, want);
  EXPECT_EQ(run->Terminate(), 0) << run->Err();
  // Nothing is emitted twice, and the closing events' windows are still open.
  EXPECT_EQ(Ends(out_topic, 1), std::vector<int64_t>{static_cast<int64_t>(want.size())});
  // The group's commit stays at what the open windows need: below the end.
  std::vector<int64_t> committed = Committed(spec.group, topic, kPartitions);
  std::vector<int64_t> ends = Ends(topic, kPartitions);
  for (int p = 0; p < kPartitions; ++p) EXPECT_LT(committed[p], ends[p]) << "partition " << p;
}

class PipelineWindowCrashTest : public PipelineTest {
 protected:
  void KillAndCompare(bool to_kafka);
};

// A tumbling window with pipeline.state, killed at seeded moments and at each crash point
// (SLUICE_TEST_CRASH_AT): the windows in the end are exactly DuckDB's over the input.
// Its sink is a sqlcommand writing into the state's own database (the state written in the
// batch's transaction; emission exactly once too), or a Kafka topic (the state written
// behind; emission at least once, every emission of a window with the same values).
// With the sqlcommand sink, runs of messages that are not JSON go to a sqlcommand DLQ in
// the same database: whole batches of them fail before the handler, and their dead letters
// and offsets commit together, so each is in the DLQ exactly once.
TEST_F(PipelineWindowCrashTest, KilledAtSeededPointsGivesTheWindowsOfAnUninterruptedRun) {
  KillAndCompare(false);
}
TEST_F(PipelineWindowCrashTest, WriteBehindStateKilledAtSeededPointsGivesTheSameWindows) {
  KillAndCompare(true);
}

void PipelineWindowCrashTest::KillAndCompare(bool to_kafka) {
  const int kPartitions = 3;
  const int kEvents = 6000;
  uint32_t seed = std::random_device{}();
  if (const char* s = std::getenv("SLUICE_PIPELINE_CRASH_SEED"))
    seed = std::strtoul(s, nullptr, 10);
  RecordProperty("seed", std::to_string(seed));
  fmt::print("window crash test seed {} (SLUICE_PIPELINE_CRASH_SEED={} repeats it)\n", seed, seed);
  SCOPED_TRACE(fmt::format("SLUICE_PIPELINE_CRASH_SEED={}", seed));
  std::mt19937 rng(seed);

  const std::string topic = Name("in");
  const std::string out_topic = Name("out");
  CreateTopic(topic, kPartitions);
  if (to_kafka) CreateTopic(out_topic, 1);
  std::vector<std::string> input;
  for (int64_t i = 0; i < kEvents; ++i) input.push_back(TimedEvent(i, i));  // 100 minutes
  fs::path input_file = WriteJsonLines("input.jsonl", input);
  fs::path state = dir_ / "state" / "window.duckdb";

  PipelineSpec spec;
  spec.name = "crash-window";
  spec.group = Name("group");
  spec.topics = {topic};
  spec.handler = "handlers.InferredMemBatch";
  spec.sql = "SELECT ts, city, amount FROM batch";  // ts is VARCHAR here: the window casts it
  spec.batch_size = 40;
  spec.commands =
      "CREATE TABLE IF NOT EXISTS results (window_start TIMESTAMPTZ, window_end TIMESTAMPTZ, city "
      "VARCHAR, "
      "n BIGINT, amount DOUBLE);";
  if (!to_kafka) {
    spec.commands +=
        "\nCREATE TABLE IF NOT EXISTS dead (phase VARCHAR, \"partition\" INTEGER, \"offset\" "
        "BIGINT, message VARCHAR);";
    spec.on_error =
        "policy: DLQ\ndlq:\n  type: sqlcommand\n  sqlcommand:\n    sql: INSERT INTO dead SELECT "
        "phase, \"partition\", \"offset\", message FROM sqlflow_sink_batch";
  }
  spec.properties = "fetch.wait.max.ms: 50\nsession.timeout.ms: 2000\nheartbeat.interval.ms: 200";
  spec.window =
      "type: tumbling\ntime_column: ts\nsize: 1m\nidle_close: 2s\n"
      "emit_sql: SELECT window_start, window_end, city, count(*) AS n, sum(amount) AS amount FROM "
      "closed GROUP BY ALL\n";
  spec.window +=
      to_kafka
          ? fmt::format("sink:\n  type: kafka\n  kafka:\n    brokers: ['{}']\n    topic: {}\n",
                        bootstrap(), out_topic)
          : "sink:\n  type: sqlcommand\n  sqlcommand:\n    sql: INSERT INTO results SELECT * FROM "
            "sqlflow_sink_batch\n";
  spec.state = state.string();

  // The state file as a copy (the pipeline may hold the file): results and stored offsets.
  int copies = 0;
  auto read_state = [&](const std::string& query) {
    fs::path copy = dir_ / fmt::format("copy{}", copies++);
    fs::create_directories(copy);
    std::error_code ec;
    fs::copy_file(state, copy / "s.duckdb", ec);
    if (fs::exists(state.string() + ".wal"))
      fs::copy_file(state.string() + ".wal", copy / "s.duckdb.wal", ec);
    return DuckRows(fmt::format("ATTACH {} AS s;", Lit(copy / "s.duckdb")), query);
  };
  // Every emission so far, as a relation of window_start, city, n, amount.
  int reads = 0;
  auto emitted = [&]() -> std::string {
    if (!to_kafka) return "";
    std::vector<std::string> lines =
        ReadTopic(out_topic, 1, static_cast<size_t>(Ends(out_topic, 1)[0]));
    fs::path file = WriteJsonLines(fmt::format("got{}.jsonl", reads++), lines);
    if (lines.empty())
      return "(SELECT NULL::TIMESTAMPTZ AS window_start, ''::VARCHAR AS city, 0::BIGINT AS n, "
             "0::DOUBLE AS amount WHERE false)";
    return JsonLinesReader(
        file,
        "{window_start: 'TIMESTAMPTZ', window_end: 'TIMESTAMPTZ', city: 'VARCHAR', n: "
        "'BIGINT', amount: 'DOUBLE'}");
  };
  auto check_commit_behind_state = [&](const std::string& when) {
    std::vector<int64_t> committed = Committed(spec.group, topic, kPartitions);
    std::vector<std::string> stored = read_state(
        "SELECT \"partition\", arg_max(next_offset, seq) FROM s.sluice_state GROUP BY 1 ORDER BY "
        "1");
    fmt::print("{}: committed {}, state {}\n", when, fmt::join(committed, ","),
               fmt::join(stored, " "));
    std::map<int, int64_t> next;
    for (const std::string& row : stored)
      next[std::stoi(row)] = std::stoll(row.substr(row.find('|') + 1));
    for (int p = 0; p < kPartitions; ++p) {
      if (committed[p] < 0) continue;
      EXPECT_LE(committed[p], next.count(p) ? next[p] : 0)
          << when << ": partition " << p << " committed past the state";
    }
    if (to_kafka) {
      // At least once: a window emitted again has the same values.
      std::vector<std::string> dup = DuckRows(
          "",
          fmt::format("SELECT count(*) FROM (SELECT window_start, city FROM {} GROUP BY ALL HAVING "
                      "count(DISTINCT (n, amount)) > 1)",
                      emitted()));
      EXPECT_EQ(dup, std::vector<std::string>{"0"})
          << when << ": a window emitted with different values";
    } else {
      std::vector<std::string> dup = read_state(
          "SELECT count(*) FROM (SELECT window_start, city FROM s.results GROUP BY ALL HAVING "
          "count(*) > 1)");
      EXPECT_EQ(dup, std::vector<std::string>{"0"}) << when << ": a window emitted twice";
      dup = read_state(
          "SELECT count(*) FROM (SELECT \"partition\", \"offset\" FROM s.dead WHERE \"offset\" "
          "IS NOT NULL GROUP BY ALL HAVING count(*) > 1)");
      EXPECT_EQ(dup, std::vector<std::string>{"0"}) << when << ": a message dead-lettered twice";
    }
  };
  // Not JSON: 45 a partition in a row (batches of 40), so that some batches have no message
  // that decodes.
  int bad_count = 0;
  auto produce_bad = [&] {
    if (to_kafka) return;
    std::vector<std::string> bad;
    for (int i = 0; i < 45 * kPartitions; ++i)
      bad.push_back(fmt::format("not json {}", bad_count++));
    Produce(topic, bad, kPartitions);
  };

  // Runs over a growing stream: killed by itself at a crash point (the Nth pass, seeded),
  // or by SIGKILL after a seeded delay.
  const std::vector<std::string> points = {"batch-begun", "state-committed", "window-emitted"};
  const int kRuns = 6;
  std::uniform_int_distribution<int> nth(1, 12);
  std::uniform_int_distribution<int> delay_ms(2500, 4000);  // past the dead member's session
  for (int k = 0; k < kRuns; ++k) {
    int first = k * kEvents / (kRuns + 1);
    int last = (k + 1) * kEvents / (kRuns + 1);
    produce_bad();  // first: a crash at batch-begun:N then often meets a batch of them
    Produce(topic, std::vector<std::string>(input.begin() + first, input.begin() + last),
            kPartitions);
    std::string how;
    if (k % 2 == 0) {
      // A run's slice closes a dozen or so windows, in fewer closes: an emission past the
      // last one is never reached, and the run would only end at the wait below.
      const std::string& point = points[(k / 2) % points.size()];
      // Write-behind passes state-committed once per file commit (20 ms or more), not per batch.
      const bool few = point == "window-emitted" || (to_kafka && point == "state-committed");
      int n = few ? 1 + nth(rng) % 4 : nth(rng);
      // The first run's first batch holds only messages that are not JSON (they were
      // produced first): its dead letters and offsets must commit together.
      if (k == 0 && !to_kafka) n = 1;
      how = fmt::format("{}:{}", point, n);
      ::setenv("SLUICE_TEST_CRASH_AT", how.c_str(), 1);
    } else {
      how = fmt::format("SIGKILL after {} ms", delay_ms(rng));
    }
    Child* run = StartPipeline(spec);
    ::unsetenv("SLUICE_TEST_CRASH_AT");
    if (k % 2 == 0) {
      auto st = run->WaitExit(60s);
      if (!st) run->Kill();  // never reached the point: the window count was too small
      EXPECT_TRUE(!st || *st == 128 + SIGKILL) << how << ": exit " << *st << "\n" << run->Err();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(how.substr(13))));
      run->Kill();
    }
    fmt::print("run {} ended by {}\n", k, how);
    check_commit_behind_state(fmt::format("after run {} ({})", k, how));
  }
  Produce(topic,
          std::vector<std::string>(input.begin() + kRuns * kEvents / (kRuns + 1), input.end()),
          kPartitions);
  // A closer per partition a day later: every window of the input closes.
  std::vector<std::string> closers;
  for (int p = 0; p < kPartitions; ++p) closers.push_back(TimedEvent(p, 86'400));
  Produce(topic, closers, kPartitions);

  std::vector<std::string> want =
      DuckRows(fmt::format("CREATE TABLE e AS SELECT * FROM {};",
                           JsonLinesReader(input_file, kTimedColumns)),
               "SELECT (epoch(ts)::BIGINT // 60) * 60 AS ws, city, count(*), sum(amount) FROM e "
               "GROUP BY ALL ORDER BY ALL");
  ASSERT_EQ(want.size(), 500u);  // 100 minutes, 5 cities
  const std::string query =
      "SELECT epoch(window_start)::BIGINT, city, n, amount FROM s.results ORDER BY ALL";
  // The last run goes until its state holds every window: it is stopped (SIGTERM) and
  // looked at, and started again while windows are missing.
  std::vector<std::string> got;
  for (int attempt = 0; attempt < 30 && got.size() < want.size(); ++attempt) {
    Child* run = StartPipeline(spec);
    std::this_thread::sleep_for(2s);
    EXPECT_EQ(run->Terminate(), 0) << run->Err();
    got = to_kafka
              ? DuckRows("",
                         fmt::format(
                             "SELECT DISTINCT epoch(window_start)::BIGINT, city, n, amount FROM {} "
                             "ORDER BY ALL",
                             emitted()))
              : read_state(query);
  }
  EXPECT_EQ(got, want);
  check_commit_behind_state("at the end");
  if (!to_kafka) {
    // Every message that is not JSON, once, as a decode error; nothing else.
    EXPECT_EQ(read_state("SELECT count(*), count(DISTINCT message), min(phase), max(phase) FROM "
                         "s.dead WHERE message LIKE 'not json %'"),
              std::vector<std::string>{fmt::format("{}|{}|decode|decode", bad_count, bad_count)});
    EXPECT_EQ(read_state("SELECT count(*) FROM s.dead"),
              std::vector<std::string>{std::to_string(bad_count)});
  }
}

// ---------------------------------------------------------------------------------------
// 4. and 5. The postgres sink against a real PostgreSQL: append and upsert, and a server
// that goes down under RAISE.

class PipelinePostgresTest : public PipelineTest {};

TEST_F(PipelinePostgresTest, AppendAndUpsertMatchDuckDb) {
  std::string why;
  PostgresServer* pg = Pg(&why);
  if (pg == nullptr) GTEST_SKIP() << why;
  const int kPartitions = 3;
  const std::string topic = Name("in");
  CreateTopic(topic, kPartitions);
  std::vector<Event> events = MakeEvents(0, 2000);
  std::vector<std::string> keys;
  for (const Event& e : events)
    keys.push_back(e.uid);  // a user's events in one partition, in order
  Produce(topic, Jsons(events), kPartitions, keys);
  fs::path input_file = WriteJsonLines("input.jsonl", Jsons(events));

  PipelineSpec spec;
  spec.topics = {topic};
  spec.commands = kEventsTable;
  spec.batch_size = 150;
  PipelineSpec append = spec, upsert = spec;
  append.name = "append";
  append.group = Name("append");
  append.sql = "SELECT id, city, amount FROM events";
  append.sink = fmt::format(
      "type: postgres\npostgres:\n  dsn: '{}'\n  table: pg_append\n  mode: append", pg->dsn());
  upsert.name = "upsert";
  upsert.group = Name("upsert");
  upsert.sql =
      "SELECT uid, max(version) AS version, arg_max(amount, version) AS amount FROM events GROUP "
      "BY uid";
  upsert.sink = fmt::format(
      "type: postgres\npostgres:\n  dsn: '{}'\n  table: public.pg_upsert\n  mode: upsert\n  key: "
      "[uid]",
      pg->dsn());
  Child* a = StartPipeline(append);
  Child* u = StartPipeline(upsert);
  ASSERT_TRUE(WaitCommittedToEnd(append.group, topic, kPartitions, a));
  ASSERT_TRUE(WaitCommittedToEnd(upsert.group, topic, kPartitions, u));
  EXPECT_EQ(a->Terminate(), 0);
  EXPECT_EQ(u->Terminate(), 0);

  std::string setup = fmt::format("{} INSERT INTO events SELECT * FROM {};", kEventsTable,
                                  JsonLinesReader(input_file, kEventsColumns));
  auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  };
  EXPECT_EQ(lines(pg->Psql("SELECT city, count(*), count(DISTINCT id), sum(amount)::numeric(18,2) "
                           "FROM pg_append GROUP BY city ORDER BY city COLLATE \"C\"")),
            DuckRows(setup,
                     "SELECT city, count(*), count(DISTINCT id), sum(amount)::DECIMAL(18,2) "
                     "FROM events GROUP BY city ORDER BY city"));
  EXPECT_EQ(lines(pg->Psql("SELECT uid, version, amount::numeric(18,2) FROM pg_upsert "
                           "ORDER BY uid COLLATE \"C\"")),
            DuckRows(setup,
                     "SELECT uid, max(version), arg_max(amount, version)::DECIMAL(18,2) "
                     "FROM events GROUP BY uid ORDER BY uid"));
}

class PipelinePostgresDownTest : public PipelineTest {
 protected:
  void ServerDown(int64_t commit_interval_ms);
};

TEST_F(PipelinePostgresDownTest, ServerDownUnderRaiseStopsClearlyAndLosesNothing) { ServerDown(0); }

// With commit_interval_ms the failure comes at the sink's commit, not a batch's flush.
TEST_F(PipelinePostgresDownTest, ServerDownWithACommitIntervalStopsClearlyAndLosesNothing) {
  ServerDown(200);
}

void PipelinePostgresDownTest::ServerDown(int64_t commit_interval_ms) {
  std::string why;
  PostgresServer* pg = Pg(&why);
  if (pg == nullptr) GTEST_SKIP() << why;
  const int kPartitions = 2;
  const std::string topic = Name("in");
  CreateTopic(topic, kPartitions);
  // A table per variant: the server is shared by the tests of this binary.
  const std::string table = commit_interval_ms > 0 ? "down_rows_streamed" : "down_rows";
  ASSERT_EQ(pg->Psql(fmt::format("CREATE TABLE {} (id bigint, p integer, o bigint)", table)), "");
  PipelineSpec spec;
  spec.name = "down";
  spec.group = Name("group");
  spec.topics = {topic};
  spec.handler = "handlers.InferredMemBatch";
  spec.sql = kWhereSql;
  spec.batch_size = 100;
  spec.sink = fmt::format(
      "type: postgres\npostgres:\n  dsn: '{}'\n  table: {}\n  mode: append{}", pg->dsn(), table,
      commit_interval_ms > 0 ? fmt::format("\n  commit_interval_ms: {}", commit_interval_ms)
                             : std::string());
  Child* run = StartPipeline(spec);
  Produce(topic, Jsons(MakeEvents(0, 500)), kPartitions);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run));
  std::vector<int64_t> before = Committed(spec.group, topic, kPartitions);

  ASSERT_EQ(pg->Stop(), "");
  Produce(topic, Jsons(MakeEvents(500, 300)), kPartitions);
  std::optional<int> exit = run->WaitExit(90s);
  ASSERT_TRUE(exit.has_value()) << "RAISE did not stop with the server down";
  EXPECT_NE(*exit, 0);
  // A batch's write fails ("sink failed"), or with rows in the open COPY the sink's commit.
  EXPECT_TRUE((Contains(run->Err(), "sink failed") || Contains(run->Err(), "could not commit")) &&
              Contains(run->Err(), table) &&
              Contains(run->Err(), fmt::format("127.0.0.1:{}", pg->port())))
      << run->Err();
  EXPECT_EQ(Committed(spec.group, topic, kPartitions), before) << "committed past the last flush";

  ASSERT_EQ(pg->Start(), "");
  run = StartPipeline(spec);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run));
  EXPECT_EQ(run->Terminate(), 0);
  Held held = ParsePsqlHeld(pg->Psql(fmt::format("SELECT id, p, o FROM {}", table)));
  EXPECT_EQ(Keys(held.ids), Range(0, 800));
  ExpectCommittedHeld(Committed(spec.group, topic, kPartitions), held, "at the end");
}

// Inferred schemas meet a typed table: a row whose value does not cast into its column is
// a bad row (phase sink) and goes to the DLQ (here a console sink: stdout holds only dead
// letters), as does an empty message (phase decode); the other rows are written.
TEST_F(PipelinePostgresTest, RowsThatDoNotCastIntoTheTypedTableGoToTheDlq) {
  std::string why;
  PostgresServer* pg = Pg(&why);
  if (pg == nullptr) GTEST_SKIP() << why;
  const std::string topic = Name("in");
  CreateTopic(topic, 1);
  ASSERT_EQ(pg->Psql("CREATE TABLE typed_rows (id bigint, amount double precision)"), "");
  std::vector<std::string> input;
  for (int id = 0; id < 40; ++id) {
    input.push_back(id == 17 ? R"({"id":17,"amount":"lots"})"
                             : fmt::format(R"({{"id":{},"amount":{}}})", id, id));
  }
  input.push_back("");  // not JSON
  Produce(topic, input, 1);
  PipelineSpec spec;
  spec.name = "typed";
  spec.group = Name("group");
  spec.topics = {topic};
  spec.handler = "handlers.InferredMemBatch";
  spec.sql = "SELECT id, amount FROM batch";
  spec.batch_size = 100;
  spec.sink = fmt::format(
      "type: postgres\npostgres:\n  dsn: '{}'\n  table: typed_rows\n  mode: append", pg->dsn());
  spec.on_error = "policy: DLQ\ndlq:\n  type: console";
  Child* run = StartPipeline(spec);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, 1, run));
  EXPECT_EQ(run->Terminate(), 0);
  std::string ids = pg->Psql("SELECT string_agg(id::text, ',' ORDER BY id) FROM typed_rows");
  std::vector<std::string> want;
  for (int id = 0; id < 40; ++id) {
    if (id != 17) want.push_back(std::to_string(id));
  }
  EXPECT_EQ(ids, fmt::format("{}", fmt::join(want, ",")));
  std::string letters = run->Out();
  EXPECT_TRUE(Contains(letters, R"("phase":"sink")") && Contains(letters, "lots") &&
              Contains(letters, "amount"))
      << letters;
  EXPECT_TRUE(Contains(letters, R"("phase":"decode")") && Contains(letters, R"("offset":40)"))
      << letters;
  EXPECT_EQ(std::count(letters.begin(), letters.end(), '\n'), 2) << letters;
}

// ---------------------------------------------------------------------------------------
// 3. Crash test: SIGKILL at seeded moments while the postgres sink is written, restart;
// every message lands at least once and the committed offsets never pass the sink.

class PipelineCrashTest : public PipelineTest {
 protected:
  // `commit_interval_ms` > 0: the sink streams the batches into one COPY committed on that
  // cadence (docs/sinks.md); kills then land inside COPYs spanning many batches.
  void KilledAtRandomMoments(int64_t commit_interval_ms);
};

TEST_F(PipelineCrashTest, KilledAtRandomMomentsLosesNothingAndNeverCommitsAheadOfTheSink) {
  KilledAtRandomMoments(0);
}

TEST_F(PipelineCrashTest, KilledAtRandomMomentsWithACommitIntervalLosesNothing) {
  KilledAtRandomMoments(100);
}

void PipelineCrashTest::KilledAtRandomMoments(int64_t commit_interval_ms) {
  std::string why;
  PostgresServer* pg = Pg(&why);
  if (pg == nullptr) GTEST_SKIP() << why;
  const int kPartitions = 3;
  const int kMessages = 6000;
  const int kKills = 5;
  uint32_t seed = std::random_device{}();
  if (const char* s = std::getenv("SLUICE_PIPELINE_CRASH_SEED"))
    seed = std::strtoul(s, nullptr, 10);
  RecordProperty("seed", std::to_string(seed));
  fmt::print("crash test seed {} (SLUICE_PIPELINE_CRASH_SEED={} repeats it)\n", seed, seed);
  SCOPED_TRACE(fmt::format("SLUICE_PIPELINE_CRASH_SEED={}", seed));
  std::mt19937 rng(seed);

  const std::string topic = Name("in");
  CreateTopic(topic, kPartitions);
  // A table per variant: the server is shared by the tests of this binary.
  const std::string table = commit_interval_ms > 0 ? "crash_rows_streamed" : "crash_rows";
  ASSERT_EQ(pg->Psql(fmt::format("CREATE TABLE {} (id bigint, p integer, o bigint)", table)), "");
  PipelineSpec spec;
  spec.name = "crash";
  spec.group = Name("group");
  spec.topics = {topic};
  spec.handler = "handlers.InferredMemBatch";
  spec.sql = kWhereSql;
  spec.batch_size = 20;  // many small postgres transactions: kills land between and inside them
  // A killed member is dropped from the group after its session times out.
  spec.properties = "fetch.wait.max.ms: 50\nsession.timeout.ms: 2000\nheartbeat.interval.ms: 200";
  spec.sink = fmt::format(
      "type: postgres\npostgres:\n  dsn: '{}'\n  table: {}\n  mode: append{}", pg->dsn(), table,
      commit_interval_ms > 0 ? fmt::format("\n  commit_interval_ms: {}", commit_interval_ms)
                             : std::string());

  // Each run gets a fresh chunk of the stream; it is killed at a random moment after it
  // wrote its first rows, while it drains the chunk.
  const int kChunk = kMessages / (kKills + 1);
  auto distinct = [&] {
    return std::atoi(pg->Psql(fmt::format("SELECT count(DISTINCT id) FROM {}", table)).c_str());
  };
  std::uniform_int_distribution<int> delay_ms(0, 150);
  for (int k = 0; k < kKills; ++k) {
    Produce(topic, Jsons(MakeEvents(k * kChunk, kChunk)), kPartitions);
    int before = distinct();
    Child* run = StartPipeline(spec);
    bool wrote = WaitFor([&] { return distinct() > before || !run->Running(); }, 90s);
    ASSERT_TRUE(wrote && run->Running()) << "run " << k << " wrote nothing";
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    run->Kill();
    Held held = ParsePsqlHeld(pg->Psql(fmt::format("SELECT id, p, o FROM {}", table)));
    std::vector<int64_t> committed = Committed(spec.group, topic, kPartitions);
    fmt::print("kill {}: {} of {} produced in the sink ({} rows), committed {}\n", k,
               held.ids.size(), (k + 1) * kChunk, held.rows, fmt::join(committed, ","));
    ExpectCommittedHeld(committed, held,
                        fmt::format("after kill {} at {} rows", k, held.ids.size()));
  }
  Produce(topic, Jsons(MakeEvents(kKills * kChunk, kMessages - kKills * kChunk)), kPartitions);
  Child* run = StartPipeline(spec);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run, 120s));
  EXPECT_EQ(run->Terminate(), 0);
  Held held = ParsePsqlHeld(pg->Psql(fmt::format("SELECT id, p, o FROM {}", table)));
  EXPECT_EQ(Keys(held.ids), Range(0, kMessages));
  ExpectCommittedHeld(Committed(spec.group, topic, kPartitions), held, "at the end");
  fmt::print("crash test: {} rows for {} messages after {} kills\n", held.rows, kMessages, kKills);
}

// --- Iceberg tables (docs/design/0009) ---------------------------------------------------

// An independent reader of the table sluice wrote: python3-avro over the metadata JSON,
// the manifest list and every manifest. Prints one JSON object: the data files (path,
// record_count), the snapshots, the current snapshot's summary, and the field ids of the
// files' Avro schemas.
constexpr std::string_view kIcebergReader = R"PY(
import json, os, sys, warnings
import avro.datafile, avro.io
warnings.simplefilter("ignore")
# An S3 table is read from a local mirror of its bucket (argv[2]), made by botocore.
mirror = sys.argv[2] if len(sys.argv) > 2 else None
def local(p):
    if p.startswith("file://"): return p[7:]
    for scheme in ("s3://", "s3a://", "s3n://"):
        if p.startswith(scheme): return os.path.join(mirror, p[len(scheme):])
    return p
root = local(sys.argv[1])
meta_dir = os.path.join(root, "metadata")
if not os.path.isdir(meta_dir):
    print(json.dumps({"absent": True}))
    sys.exit(0)
versions = [int(f[1:-14]) for f in os.listdir(meta_dir) if f.startswith("v") and f.endswith(".metadata.json")]
current = max(versions)
hint = open(os.path.join(meta_dir, "version-hint.text")).read().strip()
meta = json.load(open(os.path.join(meta_dir, "v%d.metadata.json" % current)))
def read(path):
    with open(local(path), "rb") as f:
        r = avro.datafile.DataFileReader(f, avro.io.DatumReader())
        rows = list(r)
        m = {k: v.decode() for k, v in r.meta.items()}
    return rows, m
def ids(schema):
    out = {}
    def walk(node, path):
        if isinstance(node, dict):
            for f in node.get("fields", []):
                out[path + f["name"]] = f.get("field-id")
                walk(f["type"], path + f["name"] + ".")
            if "items" in node: walk(node["items"], path)
        elif isinstance(node, list):
            for b in node: walk(b, path)
    walk(json.loads(schema), "")
    return out
snap = next((s for s in meta.get("snapshots", []) if s["snapshot-id"] == meta.get("current-snapshot-id")), None)
if snap is None:  # created, nothing committed yet
    print(json.dumps({"version": current, "hint": hint, "files": [], "snapshots": 0, "summaries": [],
                      "summary": {}, "missing": [], "manifest_ids": {}, "list_ids": {},
                      "format": meta["format-version"], "location": meta["location"]}))
    sys.exit(0)
lst, lst_meta = read(snap["manifest-list"])
files, manifest_ids, missing = [], {}, []
for m in lst:
    if not os.path.exists(local(m["manifest_path"])): missing.append(m["manifest_path"])
    rows, mm = read(m["manifest_path"])
    manifest_ids = ids(mm["avro.schema"])
    for e in rows:
        if e["status"] == 2: continue
        df = e["data_file"]
        if not os.path.exists(local(df["file_path"])): missing.append(df["file_path"])
        files.append({"path": local(df["file_path"]), "records": df["record_count"], "partition": df["partition"]})
summaries = [[{"null": f["contains_null"], "lower": f["lower_bound"] is not None, "upper": f["upper_bound"] is not None}
              for f in (m["partitions"] or [])] for m in lst]
print(json.dumps({"version": current, "hint": hint, "files": files, "snapshots": len(meta["snapshots"]),
                  "summaries": summaries,
                  "summary": snap["summary"], "sequence": snap["sequence-number"], "missing": missing,
                  "manifest_ids": manifest_ids, "list_ids": ids(lst_meta["avro.schema"]),
                  "format": meta["format-version"], "location": meta["location"]}))
)PY";

// Copies every object under s3://bucket/prefix to <out>/bucket/..., with botocore (an S3
// client independent of sluice's), for the reader above.
constexpr std::string_view kS3Mirror = R"PY(
import os, sys, botocore.session
from botocore.config import Config
location, out = sys.argv[1], sys.argv[2]
bucket, _, prefix = location[len("s3://"):].partition("/")
client = botocore.session.get_session().create_client(
    "s3", endpoint_url=os.environ["AWS_ENDPOINT_URL_S3"],
    region_name=os.environ.get("AWS_REGION", "us-east-1"),
    aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
    aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
    config=Config(s3={"addressing_style": "path"}))
token = None
while True:
    kw = {"Bucket": bucket, "Prefix": prefix + "/"}
    if token: kw["ContinuationToken"] = token
    page = client.list_objects_v2(**kw)
    for o in page.get("Contents", []):
        path = os.path.join(out, bucket, o["Key"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read())
    if not page.get("IsTruncated"): break
    token = page["NextContinuationToken"]
)PY";

class PipelineIcebergTest : public PipelineTest {
 protected:
  // The Postgres port a `sluice serve` child printed ("" when none within 30 s).
  static std::string PgPort(Child& serve) {
    std::string port;
    WaitFor(
        [&] {
          const std::string text = serve.Out();
          const std::string banner = "Postgres wire protocol on 127.0.0.1:";
          size_t at = text.find(banner);
          if (at == std::string::npos) return false;
          at += banner.size();
          port = text.substr(at, text.find_first_not_of("0123456789", at) - at);
          return !port.empty();
        },
        30s);
    return port;
  }
  // Two writers of one table: topic in<k> holding `each` events from k * each, writer k
  // (group<k>, batches of 50) made by `spec_of(k, topic)`; both run to the ends of their
  // topics at once, then stop.
  std::vector<PipelineSpec> RunRacingWriters(
      int partitions, int each,
      const std::function<PipelineSpec(int, const std::string&)>& spec_of) {
    std::vector<PipelineSpec> specs;
    for (int k = 0; k < 2; ++k) {
      const std::string topic = Name(fmt::format("in{}", k));
      CreateTopic(topic, partitions);
      Produce(topic, Jsons(MakeEvents(k * each, each)), partitions);
      PipelineSpec spec = spec_of(k, topic);
      spec.name = fmt::format("writer{}", k);
      spec.group = Name(fmt::format("group{}", k));
      spec.batch_size = 50;
      specs.push_back(spec);
    }
    std::vector<Child*> runs;
    for (const PipelineSpec& spec : specs) runs.push_back(StartPipeline(spec));
    for (size_t k = 0; k < specs.size(); ++k) {
      EXPECT_TRUE(WaitCommittedToEnd(specs[k].group, specs[k].topics[0], partitions, runs[k]));
    }
    for (Child* run : runs) EXPECT_EQ(run->Terminate(), 0);
    return specs;
  }
  // psql's unaligned rows (or its error) for `sql` on the query server at `port`.
  static std::string Psql(const std::string& port, const std::string& sql) {
    std::string cmd = fmt::format(
        "psql -X -A -t -h 127.0.0.1 -p {} -U sluice -d sluice -c \"{}\" 2>&1", port, sql);
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string answer;
    char buf[4096];
    size_t n;
    while (p != nullptr && (n = fread(buf, 1, sizeof buf, p)) > 0) answer.append(buf, n);
    if (p != nullptr) ::pclose(p);
    return answer;
  }

  // The table as python3-avro reads it; an S3 table (s3://...) from a fresh local mirror.
  nlohmann::json ReadTable(const fs::path& root) {
    fs::path script = dir_ / "iceberg_reader.py";
    WriteFile(script, std::string(kIcebergReader));
    std::string mirror;
    if (root.string().rfind("s3://", 0) == 0) {
      static int n = 0;
      fs::path mirror_script = dir_ / "s3_mirror.py";
      WriteFile(mirror_script, std::string(kS3Mirror));
      mirror = (dir_ / fmt::format("mirror{}", n++)).string();
      std::string cmd =
          fmt::format("/usr/bin/python3 {} {} {}", mirror_script.string(), root.string(), mirror);
      EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    std::string cmd =
        fmt::format("/usr/bin/python3 {} {} {} 2>&1", script.string(), root.string(), mirror);
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while (p != nullptr && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int rc = p != nullptr ? ::pclose(p) : -1;
    EXPECT_EQ(rc, 0) << out;
    nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << out;
    return j;
  }

  // DuckDB over exactly the Parquet files the metadata lists.
  static std::string FilesReader(const nlohmann::json& table) {
    std::vector<std::string> paths;
    for (const auto& f : table["files"])
      paths.push_back(duck::QuoteLiteral(f["path"].get<std::string>()));
    return fmt::format("read_parquet([{}])", fmt::join(paths, ", "));
  }

  // Compaction and expiry by `sluice table` while a pipeline appends: every message once.
  void CompactAndExpireBesideARunningPipeline();

  // A local directory, or a prefix of the S3 bucket the S3 tests are given.
  fs::path Warehouse() const {
    if (!catalog_yaml_.empty()) return dir_ / "catalog-wh";  // the catalog's own
    return s3_warehouse_.empty() ? dir_ / "warehouse" : fs::path(s3_warehouse_);
  }
  std::string s3_warehouse_;
  // sink.iceberg.catalog's lines (indented) instead of a warehouse, when set.
  std::string catalog_yaml_;

  PipelineSpec IcebergSpec(const std::string& topic, const fs::path& warehouse,
                           const std::string& extra = "") {
    PipelineSpec spec;
    spec.name = "lake";
    spec.group = Name("group");
    spec.topics = {topic};
    spec.handler = "handlers.InferredMemBatch";
    spec.sql =
        "SELECT id::BIGINT AS id, city, amount::DOUBLE AS amount, kafka_partition AS p, "
        "kafka_offset AS o "
        "FROM batch";
    spec.batch_size = 100;
    spec.sink = fmt::format(
        "type: iceberg\niceberg:\n  catalog_name: sluice\n  table_name: db.events\n{}"
        "  commit_interval_seconds: 1\n{}",
        catalog_yaml_.empty() ? fmt::format("  warehouse: '{}'\n", warehouse.string())
                              : catalog_yaml_,
        extra);
    return spec;
  }
};

TEST_F(PipelineIcebergTest, AppendsEveryMessageOnceAndIndependentReadersAgree) {
  if (std::system("/usr/bin/python3 -c 'import avro.datafile' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import avro (apt-get install python3-avro)";
  }
  const int kPartitions = 3;
  const std::string topic = Name("in");
  CreateTopic(topic, kPartitions);
  std::vector<Event> events = MakeEvents(0, 3000);
  Produce(topic, Jsons(events), kPartitions);
  const fs::path warehouse = dir_ / "warehouse";
  PipelineSpec spec = IcebergSpec(topic, warehouse, "  partition_by: [city]\n");
  Child* run = StartPipeline(spec);
  // The Kafka commit follows the table's: once it reaches the end, the table has it all.
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run));
  EXPECT_EQ(run->Terminate(), 0);

  const fs::path root = warehouse / "db" / "events";
  nlohmann::json table = ReadTable(root);
  ASSERT_TRUE(table.is_object());
  EXPECT_EQ(table["format"], 2);
  EXPECT_EQ(table["location"], "file://" + root.string());
  EXPECT_EQ(table["missing"].size(), 0u) << table["missing"].dump();
  EXPECT_EQ(table["hint"], std::to_string(table["version"].get<int>()));
  EXPECT_EQ(table["manifest_ids"]["data_file.file_path"], 100);
  EXPECT_EQ(table["manifest_ids"]["data_file.partition.city"], 1000);
  EXPECT_EQ(table["list_ids"]["manifest_path"], 500);
  int64_t listed = 0;
  for (const auto& f : table["files"]) {
    listed += f["records"].get<int64_t>();
    EXPECT_TRUE(f["partition"].contains("city")) << f.dump();
  }
  EXPECT_EQ(listed, 3000);
  EXPECT_EQ(table["summary"]["total-records"], "3000");
  // The offsets the last snapshot recorded: every partition's end.
  nlohmann::json offsets = nlohmann::json::parse(
      table["summary"][fmt::format("sluice.offsets.{}.{}", spec.group, topic)].get<std::string>());
  std::vector<int64_t> ends = Ends(topic, kPartitions);
  for (int p = 0; p < kPartitions; ++p) EXPECT_EQ(offsets[std::to_string(p)], ends[p]) << p;

  // DuckDB over the listed files: every message exactly once, the values DuckDB computes
  // from the same input.
  fs::path input = WriteJsonLines("input.jsonl", Jsons(events));
  std::string reader = FilesReader(table);
  EXPECT_EQ(DuckRows("", fmt::format(
                             "SELECT count(*), count(DISTINCT id), count(DISTINCT (p, o)) FROM {}",
                             reader)),
            std::vector<std::string>{"3000|3000|3000"});
  EXPECT_EQ(
      DuckRows("",
               fmt::format("SELECT city, count(*), sum(amount) FROM {} GROUP BY ALL ORDER BY ALL",
                           reader)),
      DuckRows(
          "", fmt::format(
                  "SELECT city, count(*), sum(amount) FROM read_json({}) GROUP BY ALL ORDER BY ALL",
                  Lit(input))));
  // Field ids in the Parquet files: the table schema's (id is field 1).
  EXPECT_EQ(
      DuckRows("", fmt::format("SELECT field_id FROM parquet_schema({}) WHERE name = 'id'",
                               duck::QuoteLiteral(table["files"][0]["path"].get<std::string>()))),
      std::vector<std::string>{"1"});

  // A restart resumes from the table's offsets: 1000 more, still each once.
  Produce(topic, Jsons(MakeEvents(3000, 1000)), kPartitions);
  run = StartPipeline(spec, "again");
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run));
  EXPECT_EQ(run->Terminate(), 0);
  table = ReadTable(root);
  EXPECT_EQ(
      DuckRows("", fmt::format("SELECT count(*), count(DISTINCT id) FROM {}", FilesReader(table))),
      std::vector<std::string>{"4000|4000"});
  EXPECT_GE(table["snapshots"].get<int>(), 2);
}

// Killed at seeded points of the commit (during the Parquet write, between the manifests
// and the metadata version, between the table's commit and Kafka's) and at seeded moments:
// after every kill the table is whole (no metadata points at a missing file) and holds no
// message twice; Kafka's commit is never ahead of the table's offsets; in the end every
// message is there exactly once.
// Both of the sink's ways: a partitioned table's rows staged and written at the commit, an
// unpartitioned table's streamed into the file being written.
class PipelineIcebergCrashTest : public PipelineIcebergTest {
 protected:
  void KillAtSeededPoints(const std::string& layout);
};

// The same pipelines into tables on S3 (issue 26): Ceph's radosgw on loopback, started by
// tests/integration/pipeline_s3_test.sh, which makes a bucket and names it in
// SLUICE_TEST_S3_WAREHOUSE. The tables are read back by botocore and python3-avro (a
// mirror of the bucket) and by `sluice sql`, which fetches the data files through its
// object cache.
class PipelineIcebergS3Test : public PipelineIcebergCrashTest {
 protected:
  void SetUp() override {
    PipelineIcebergCrashTest::SetUp();
    if (IsSkipped()) return;
    const char* w = std::getenv("SLUICE_TEST_S3_WAREHOUSE");
    ASSERT_NE(w, nullptr) << "run by tests/integration/pipeline_s3_test.sh (it starts radosgw)";
    // Fresh under a bucket that may outlive one run.
    s3_warehouse_ = fmt::format("{}/{}-{:08x}", w, Name("wh"), std::random_device{}());
  }
};

TEST_F(PipelineIcebergS3Test, AppendsEveryMessageOnceAndSqlReadsItBack) {
  const int kPartitions = 3;
  const std::string topic = Name("in");
  CreateTopic(topic, kPartitions);
  std::vector<Event> events = MakeEvents(0, 3000);
  Produce(topic, Jsons(events), kPartitions);
  const fs::path warehouse = Warehouse();
  PipelineSpec spec = IcebergSpec(topic, warehouse, "  partition_by: [city]\n");
  Child* run = StartPipeline(spec);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run));
  EXPECT_EQ(run->Terminate(), 0);

  const fs::path root = warehouse / "db" / "events";
  nlohmann::json table = ReadTable(root);
  ASSERT_TRUE(table.is_object());
  EXPECT_EQ(table["location"], root.string());
  EXPECT_EQ(table["missing"].size(), 0u) << table["missing"].dump();
  EXPECT_EQ(table["hint"], std::to_string(table["version"].get<int>()));
  for (const auto& f : table["files"]) {
    EXPECT_TRUE(f["partition"].contains("city")) << f.dump();
  }
  EXPECT_EQ(table["summary"]["total-records"], "3000");
  fs::path input = WriteJsonLines("input.jsonl", Jsons(events));
  const std::string expected =
      fmt::format("SELECT city, count(*), sum(amount) FROM read_json({}) GROUP BY ALL ORDER BY ALL",
                  Lit(input));
  EXPECT_EQ(DuckRows("", fmt::format("SELECT city, count(*), sum(amount) FROM {} GROUP BY ALL "
                                     "ORDER BY ALL",
                                     FilesReader(table))),
            DuckRows("", expected));

  // `sluice sql` over the S3 warehouse: the same answer, pruned by partition.
  std::string out, err;
  ASSERT_EQ(RunSluice({"sql", "--warehouse", warehouse.string(), "--json",
                       "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM lake.db.events"},
                      &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "{\"n\":3000,\"ids\":3000}\n") << err;
  ASSERT_EQ(RunSluice({"sql", "--warehouse", warehouse.string(), "--json",
                       "SELECT count(*) AS n FROM lake.db.events WHERE city = 'Paris'"},
                      &out, &err),
            0)
      << err;
  EXPECT_EQ(out, fmt::format("{{\"n\":{}}}\n",
                             DuckRows("", fmt::format("SELECT count(*) FROM read_json({}) "
                                                      "WHERE city = 'Paris'",
                                                      Lit(input)))[0]))
      << err;
  // By its metadata file's path (as s3a://, as Hadoop-based writers name it), without a
  // warehouse.
  std::string metadata_file =
      (root / "metadata" / fmt::format("v{}.metadata.json", table["version"].get<int>())).string();
  ASSERT_TRUE(metadata_file.starts_with("s3://")) << metadata_file;
  const std::string s3a_file = "s3a://" + metadata_file.substr(5);
  ASSERT_EQ(RunSluice({"sql", "--json",
                       fmt::format("SELECT count(*) AS n FROM iceberg_scan('{}') WHERE city = "
                                   "'Paris'",
                                   s3a_file)},
                      &out, &err),
            0)
      << err;
  const std::string paris_count = DuckRows(
      "", fmt::format("SELECT count(*) FROM read_json({}) WHERE city = 'Paris'", Lit(input)))[0];
  EXPECT_EQ(out, fmt::format("{{\"n\":{}}}\n", paris_count)) << err;
  // `sluice table` lists and describes it.
  ASSERT_EQ(RunSluice({"table", "list", "--warehouse", warehouse.string()}, &out, &err), 0) << err;
  EXPECT_EQ(out, "db.events\n");

  // The query server of `sluice serve --warehouse s3://...` answers psql (its DuckDB
  // sandboxed to the cache's directory, where the copies are).
  {
    Child serve({binary_, "serve", "--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
                 "--pg-addr", "127.0.0.1:0", "--schema-registry-addr", "off", "--data-dir",
                 (dir_ / "serve-data").string(), "--warehouse", warehouse.string()},
                dir_ / "serve.out", dir_ / "serve.err");
    ASSERT_EQ(serve.Start(), "");
    const std::string port = PgPort(serve);
    ASSERT_FALSE(port.empty()) << serve.Out() << serve.Err();
    const std::string answer =
        Psql(port, "SELECT count(*), count(DISTINCT id) FROM lake.db.events WHERE city = 'Paris'");
    const std::string paris = DuckRows(
        "", fmt::format("SELECT count(*) FROM read_json({}) WHERE city = 'Paris'", Lit(input)))[0];
    EXPECT_EQ(answer, fmt::format("{0}|{0}\n", paris)) << serve.Err();
    EXPECT_EQ(Psql(port, fmt::format("SELECT count(*) FROM iceberg_scan('{}') WHERE city = "
                                     "'Paris'",
                                     metadata_file)),
              paris + "\n")
        << serve.Err();
    EXPECT_EQ(serve.Terminate(), 0) << serve.Err();
  }

  // A restart resumes from the table's offsets on S3: 1000 more, still each once.
  Produce(topic, Jsons(MakeEvents(3000, 1000)), kPartitions);
  run = StartPipeline(spec, "again");
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run));
  EXPECT_EQ(run->Terminate(), 0);
  ASSERT_EQ(RunSluice({"sql", "--warehouse", warehouse.string(), "--json",
                       "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM lake.db.events"},
                      &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "{\"n\":4000,\"ids\":4000}\n") << err;
}

// `sluice serve --warehouse s3://...` serves the REST catalog over the bucket: a pipeline
// writes through it (the catalog creates the table and commits its versions as objects, the
// sink uploads data files and manifests), and the catalog lists, loads (with its S3
// credentials only when vending is on and the client asks), renames (objects copied, the
// old name's versions removed oldest first) and drops with purge.
TEST_F(PipelineIcebergS3Test, TheRestCatalogServesTheS3Warehouse) {
  const int kPartitions = 3;
  const std::string topic = Name("in");
  CreateTopic(topic, kPartitions);
  Produce(topic, Jsons(MakeEvents(0, 3000)), kPartitions);
  WriteFile(dir_ / "catalog.yaml", "http:\n  vend_credentials: true\n");
  Child catalog({binary_, "serve", "--config", (dir_ / "catalog.yaml").string(), "--kafka-addr",
                 "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--pg-addr", "127.0.0.1:0",
                 "--schema-registry-addr", "off", "--data-dir", (dir_ / "catalog-data").string(),
                 "--warehouse", s3_warehouse_},
                dir_ / "catalog.out", dir_ / "catalog.err");
  ASSERT_EQ(catalog.Start(), "");
  std::string uri;
  WaitFor(
      [&] {
        const std::string text = catalog.Out();
        const std::string banner = "Iceberg REST catalog on ";
        size_t at = text.find(banner);
        if (at == std::string::npos) return false;
        at += banner.size();
        uri = text.substr(at, text.find("/v1", at) - at);
        return true;
      },
      30s);
  ASSERT_FALSE(uri.empty()) << catalog.Out() << catalog.Err();
  catalog_yaml_ = fmt::format("  catalog:\n    type: rest\n    uri: {}\n", uri);
  PipelineSpec spec = IcebergSpec(topic, "", "  partition_by: [city]\n");
  catalog_yaml_.clear();
  Child* run = StartPipeline(spec);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run));
  EXPECT_EQ(run->Terminate(), 0);
  nlohmann::json table = ReadTable(fs::path(s3_warehouse_) / "db" / "events");
  ASSERT_TRUE(table.is_object());
  EXPECT_EQ(table["location"], s3_warehouse_ + "/db/events");
  EXPECT_EQ(table["missing"].size(), 0u) << table["missing"].dump();
  EXPECT_EQ(table["summary"]["total-records"], "3000");

  // curl: (status, body).
  auto curl = [&](const std::string& method, const std::string& path, const std::string& body = "",
                  const std::string& header = "") {
    std::string cmd = fmt::format(
        "curl -s -o {0}/curl.body -w '%{{http_code}}' -X {1} -H 'Content-Type: application/json' "
        "{2} {3} '{4}{5}'",
        dir_.string(), method, header.empty() ? "" : "-H '" + header + "'",
        body.empty() ? "" : "--data-binary @" + (dir_ / "curl.in").string(), uri, path);
    if (!body.empty()) WriteFile(dir_ / "curl.in", body);
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string code;
    char buf[64];
    size_t n;
    while (p != nullptr && (n = fread(buf, 1, sizeof buf, p)) > 0) code.append(buf, n);
    if (p != nullptr) ::pclose(p);
    std::ifstream in(dir_ / "curl.body");
    std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return std::make_pair(code, out);
  };
  auto [code, body] = curl("GET", "/v1/namespaces/db/tables");
  EXPECT_EQ(code, "200");
  EXPECT_TRUE(Contains(body, "\"name\":\"events\"")) << body;
  // Credentials only for a client that asks.
  std::tie(code, body) = curl("GET", "/v1/namespaces/db/tables/events");
  EXPECT_EQ(code, "200");
  EXPECT_FALSE(Contains(body, "s3.access-key-id")) << body;
  std::tie(code, body) = curl("GET", "/v1/namespaces/db/tables/events", "",
                              "X-Iceberg-Access-Delegation: vended-credentials");
  EXPECT_EQ(code, "200");
  EXPECT_TRUE(
      Contains(body, fmt::format("\"s3.access-key-id\":\"{}\"", std::getenv("AWS_ACCESS_KEY_ID"))))
      << body;
  // Renamed: the new name answers, the old does not; the data stays where it is.
  std::tie(code, body) = curl("POST", "/v1/tables/rename",
                              R"({"source": {"namespace": ["db"], "name": "events"},
          "destination": {"namespace": ["db"], "name": "moved"}})");
  EXPECT_EQ(code, "204") << body;
  EXPECT_EQ(curl("GET", "/v1/namespaces/db/tables/events").first, "404");
  EXPECT_EQ(curl("GET", "/v1/namespaces/db/tables/moved").first, "200");
  std::string out, err;
  ASSERT_EQ(RunSluice({"sql", "--warehouse", s3_warehouse_, "--json",
                       "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM lake.db.moved"},
                      &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "{\"n\":3000,\"ids\":3000}\n") << err;
  // Dropped with purge: gone from the catalog and the bucket's table list.
  std::tie(code, body) = curl("DELETE", "/v1/namespaces/db/tables/moved?purgeRequested=true", "",
                              "X-Sluice-Request: 1");
  EXPECT_EQ(code, "204") << body;
  EXPECT_EQ(curl("GET", "/v1/namespaces/db/tables/moved").first, "404");
  ASSERT_EQ(RunSluice({"table", "list", "--warehouse", s3_warehouse_}, &out, &err), 0) << err;
  EXPECT_EQ(out, "") << err;

  // A table dropped and created again under its name reuses v1.metadata.json: the query
  // server, which keeps parsed metadata, must see the new one (its ETag differs).
  const std::string port = PgPort(catalog);
  ASSERT_FALSE(port.empty()) << catalog.Out() << catalog.Err();
  auto create = [&](const std::string& column) {
    return curl("POST", "/v1/namespaces/db/tables",
                fmt::format(R"({{"name": "again", "schema": {{"type": "struct", "fields": [
                    {{"id": 1, "name": "{}", "type": "long", "required": false}}]}}}})",
                            column))
        .first;
  };
  EXPECT_EQ(create("first_column"), "200");
  EXPECT_EQ(Psql(port, "SELECT count(first_column) FROM lake.db.again"), "0\n");
  std::tie(code, body) = curl("DELETE", "/v1/namespaces/db/tables/again?purgeRequested=true", "",
                              "X-Sluice-Request: 1");
  EXPECT_EQ(code, "204") << body;
  EXPECT_EQ(create("second_column"), "200");
  EXPECT_EQ(Psql(port, "SELECT count(second_column) FROM lake.db.again"), "0\n");
  EXPECT_EQ(catalog.Terminate(), 0) << catalog.Err();
}

// Two pipelines (two groups, two topics) appending to one S3 table at once: their
// commits race for each next metadata version, and the conditional create lets only one
// win each; the loser builds again on the winner's. No commit is lost: every message of
// both topics is in the table once.
TEST_F(PipelineIcebergS3Test, TwoPipelinesRacingOnOneTableLoseNoCommit) {
  const int kPartitions = 2, kEach = 2000;
  const fs::path warehouse = Warehouse();
  std::vector<PipelineSpec> specs = RunRacingWriters(
      kPartitions, kEach,
      [&](int, const std::string& topic) { return IcebergSpec(topic, warehouse); });
  if (HasFailure()) return;
  std::string out, err;
  ASSERT_EQ(RunSluice({"sql", "--warehouse", warehouse.string(), "--json",
                       "SELECT count(*) AS n, count(DISTINCT id) AS ids, min(id) AS lo, "
                       "max(id) AS hi FROM lake.db.events"},
                      &out, &err),
            0)
      << err;
  EXPECT_EQ(
      out, fmt::format("{{\"n\":{0},\"ids\":{0},\"lo\":0,\"hi\":{1}}}\n", 2 * kEach, 2 * kEach - 1))
      << err;
  // Each group's offsets are in the newest snapshot: both resume where they stopped.
  nlohmann::json table = ReadTable(warehouse / "db" / "events");
  ASSERT_TRUE(table.is_object());
  EXPECT_EQ(table["missing"].size(), 0u) << table["missing"].dump();
  for (const PipelineSpec& spec : specs) {
    const std::string key = fmt::format("sluice.offsets.{}.{}", spec.group, spec.topics[0]);
    ASSERT_TRUE(table["summary"].contains(key)) << key;
    nlohmann::json offsets = nlohmann::json::parse(table["summary"][key].get<std::string>());
    std::vector<int64_t> ends = Ends(spec.topics[0], kPartitions);
    for (int p = 0; p < kPartitions; ++p) EXPECT_EQ(offsets[std::to_string(p)], ends[p]) << key;
  }
}

// Pipelines writing through an Iceberg REST catalog (issue 26): a second `sluice serve`
// is the catalog, its warehouse a local directory, its HTTP port behind tokens
// (http.auth: token) that the sink gets with OAuth2 client credentials. The catalog writes
// the metadata files, the sink the data files, manifests and lists; the table is read back
// from the catalog's directory by python3-avro, and by a third process, `sluice serve`
// whose query server takes its lake tables from the catalog.
class PipelineIcebergRestTest : public PipelineIcebergCrashTest {
 protected:
  void SetUp() override {
    PipelineIcebergCrashTest::SetUp();
    if (IsSkipped()) return;
    WriteFile(dir_ / "catalog.yaml",
              "query:\n  users: [\"lake-writer:writer-secret\"]\n"
              "http:\n  auth: token\n");
    catalog_ = std::make_unique<Child>(
        std::vector<std::string>{binary_, "serve", "--config", (dir_ / "catalog.yaml").string(),
                                 "--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
                                 // query.users seed the user store with the query server on
                                 "--pg-addr", "127.0.0.1:0", "--schema-registry-addr", "off",
                                 "--data-dir", (dir_ / "catalog-data").string(), "--warehouse",
                                 (dir_ / "catalog-wh").string()},
        dir_ / "catalog.out", dir_ / "catalog.err");
    ASSERT_EQ(catalog_->Start(), "");
    const std::string banner = "Iceberg REST catalog on ";
    WaitFor(
        [&] {
          const std::string text = catalog_->Out();
          size_t at = text.find(banner);
          if (at == std::string::npos) return false;
          at += banner.size();
          catalog_uri_ = text.substr(at, text.find("/v1", at) - at);
          return true;
        },
        30s);
    ASSERT_FALSE(catalog_uri_.empty()) << catalog_->Out() << catalog_->Err();
    catalog_yaml_ = fmt::format(
        "  catalog:\n    type: rest\n    uri: {}\n    credential: lake-writer:writer-secret\n",
        catalog_uri_);
  }
  void TearDown() override {
    if (catalog_) {
      EXPECT_EQ(catalog_->Terminate(), 0) << catalog_->Err();
    }
    PipelineIcebergCrashTest::TearDown();
  }
  std::unique_ptr<Child> catalog_;
  std::string catalog_uri_;
};

TEST_F(PipelineIcebergRestTest, AppendsOnceThroughTheCatalogAndAServeQueriesIt) {
  const int kPartitions = 3;
  const std::string topic = Name("in");
  CreateTopic(topic, kPartitions);
  std::vector<Event> events = MakeEvents(0, 3000);
  Produce(topic, Jsons(events), kPartitions);
  PipelineSpec spec = IcebergSpec(topic, Warehouse(), "  partition_by: [city]\n");
  Child* run = StartPipeline(spec);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run));
  EXPECT_EQ(run->Terminate(), 0);

  // The catalog put the table in its warehouse; every commit went through it.
  const fs::path root = Warehouse() / "db" / "events";
  nlohmann::json table = ReadTable(root);
  ASSERT_TRUE(table.is_object());
  EXPECT_EQ(table["missing"].size(), 0u) << table["missing"].dump();
  EXPECT_EQ(table["summary"]["total-records"], "3000");
  fs::path input = WriteJsonLines("input.jsonl", Jsons(events));
  EXPECT_EQ(DuckRows("", fmt::format("SELECT city, count(*), sum(amount) FROM {} GROUP BY ALL "
                                     "ORDER BY ALL",
                                     FilesReader(table))),
            DuckRows("", fmt::format("SELECT city, count(*), sum(amount) FROM read_json({}) "
                                     "GROUP BY ALL ORDER BY ALL",
                                     Lit(input))));

  // `sluice sql --catalog-uri`, its login from the environment.
  {
    std::string out, err;
    ::setenv("SLUICE_CATALOG_CREDENTIAL", "lake-writer:writer-secret", 1);
    EXPECT_EQ(RunSluice({"sql", "--catalog-uri", catalog_uri_, "--json",
                         "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM lake.db.events"},
                        &out, &err),
              0)
        << err;
    EXPECT_EQ(out, "{\"n\":3000,\"ids\":3000}\n") << err;
    // `sluice table` through the catalog: list, describe, history.
    ASSERT_EQ(RunSluice({"table", "list", "--catalog-uri", catalog_uri_}, &out, &err), 0) << err;
    EXPECT_EQ(out, "db.events\n");
    ASSERT_EQ(
        RunSluice({"table", "describe", "db.events", "--catalog-uri", catalog_uri_}, &out, &err), 0)
        << err;
    EXPECT_TRUE(Contains(out, "city")) << out;
    ASSERT_EQ(
        RunSluice({"table", "history", "db.events", "--catalog-uri", catalog_uri_}, &out, &err), 0)
        << err;
    EXPECT_TRUE(Contains(out, "append")) << out;
    EXPECT_NE(
        RunSluice({"table", "describe", "db.nope", "--catalog-uri", catalog_uri_}, &out, &err), 0);
    EXPECT_TRUE(Contains(err, "no such table")) << err;
    ::setenv("SLUICE_CATALOG_CREDENTIAL", "lake-writer:WRONG-ONE", 1);
    EXPECT_NE(RunSluice({"sql", "--catalog-uri", catalog_uri_, "SELECT 1"}, &out, &err), 0);
    EXPECT_TRUE(Contains(err, "refused the credential")) << err;
    EXPECT_FALSE(Contains(err, "WRONG-ONE")) << err;
    ::unsetenv("SLUICE_CATALOG_CREDENTIAL");
  }

  // A query server whose lake tables are the catalog's.
  WriteFile(dir_ / "query.yaml",
            fmt::format("catalog:\n  type: rest\n  uri: {}\n  credential: "
                        "lake-writer:writer-secret\nquery:\n  allowed_directories: ['{}']\n",
                        catalog_uri_, Warehouse().string()));
  Child serve({binary_, "serve", "--config", (dir_ / "query.yaml").string(), "--kafka-addr",
               "127.0.0.1:0", "--http-addr", "off", "--pg-addr", "127.0.0.1:0",
               "--schema-registry-addr", "off", "--data-dir", (dir_ / "query-data").string()},
              dir_ / "query.out", dir_ / "query.err");
  ASSERT_EQ(serve.Start(), "");
  const std::string port = PgPort(serve);
  ASSERT_FALSE(port.empty()) << serve.Out() << serve.Err();
  auto psql = [&](const std::string& sql) { return Psql(port, sql); };
  EXPECT_EQ(psql("SELECT count(*), count(DISTINCT id) FROM lake.db.events"), "3000|3000\n")
      << serve.Err();
  const std::string paris = DuckRows(
      "", fmt::format("SELECT count(*) FROM read_json({}) WHERE city = 'Paris'", Lit(input)))[0];
  EXPECT_EQ(psql("SELECT count(*) FROM lake.DB.Events WHERE city = 'Paris'"), paris + "\n");
  EXPECT_TRUE(Contains(psql("SELECT * FROM lake.db.nope"), "does not exist"));
  // The catalog's tables are listed for drivers (pg_class, information_schema).
  EXPECT_EQ(psql("SELECT table_schema || '.' || table_name FROM information_schema.tables "
                 "WHERE table_schema LIKE 'lake%'"),
            "lake.db.events\n");

  // A restart resumes from the offsets the catalog's table holds.
  Produce(topic, Jsons(MakeEvents(3000, 1000)), kPartitions);
  run = StartPipeline(spec, "again");
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run));
  EXPECT_EQ(run->Terminate(), 0);
  EXPECT_EQ(psql("SELECT count(*), count(DISTINCT id) FROM lake.db.events"), "4000|4000\n");
  EXPECT_EQ(serve.Terminate(), 0) << serve.Err();

  {
    std::string out, err;
    ::setenv("SLUICE_CATALOG_CREDENTIAL", "lake-writer:writer-secret", 1);
    // Compact and expire through the catalog: commits with its requirements; the
    // catalog's metadata files are left alone, every row stays.
    ASSERT_EQ(RunSluice({"table", "compact", "db.events", "--catalog-uri", catalog_uri_,
                         "--target-file-size", "10000000"},
                        &out, &err),
              0)
        << err;
    EXPECT_TRUE(Contains(out, "rewrote")) << out;  // two runs: two files per partition
    auto version_files = [&] {
      std::set<std::string> names;
      for (const auto& e : fs::directory_iterator(root / "metadata")) {
        const std::string n = e.path().filename().string();
        if (n.ends_with(".metadata.json")) names.insert(n);
      }
      return names;
    };
    const std::set<std::string> versions_before = version_files();
    std::this_thread::sleep_for(1100ms);
    ASSERT_EQ(RunSluice({"table", "expire", "db.events", "--catalog-uri", catalog_uri_,
                         "--older-than", "1s"},
                        &out, &err),
              0)
        << err;
    EXPECT_TRUE(Contains(out, "0 old metadata files")) << out;
    EXPECT_FALSE(Contains(out, "deleted 0 data files")) << out;  // the compacted ones went
    const std::set<std::string> versions_after = version_files();
    EXPECT_TRUE(std::includes(versions_after.begin(), versions_after.end(), versions_before.begin(),
                              versions_before.end()))
        << "the catalog's metadata files were removed";
    ASSERT_EQ(
        RunSluice({"table", "history", "db.events", "--catalog-uri", catalog_uri_}, &out, &err), 0)
        << err;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;  // a header, one snapshot
    EXPECT_EQ(RunSluice({"sql", "--catalog-uri", catalog_uri_, "--json",
                         "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM lake.db.events"},
                        &out, &err),
              0)
        << err;
    EXPECT_EQ(out, "{\"n\":4000,\"ids\":4000}\n") << err;
    ::unsetenv("SLUICE_CATALOG_CREDENTIAL");
  }

  // A wrong secret, a catalog that is not there: the pipeline fails at start, saying so,
  // and never prints the secret.
  PipelineSpec wrong = spec;
  wrong.sink = fmt::format(
      "type: iceberg\niceberg:\n  catalog_name: sluice\n  table_name: db.events\n"
      "  catalog:\n    type: rest\n    uri: {}\n    credential: lake-writer:NOT-THE-SECRET\n",
      catalog_uri_);
  run = StartPipeline(wrong, "wrong-secret");
  auto status = run->WaitExit(60s);
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(*status, 0);
  EXPECT_TRUE(Contains(run->Err(), "refused the credential")) << run->Err();
  EXPECT_FALSE(Contains(run->Err() + run->Out(), "NOT-THE-SECRET")) << run->Err();
}

// The pipeline through the catalog and another writing the same table's directory
// directly race for every version: the catalog's commit and the directory's are the same
// exclusive create, and the catalog's requirements (the main branch's snapshot) turn a lost
// race into a 409 that the sink builds again on. No commit is lost.
TEST_F(PipelineIcebergRestTest, APipelineThroughTheCatalogRacesOneWritingTheDirectory) {
  const int kPartitions = 2, kEach = 2000;
  std::vector<PipelineSpec> specs =
      RunRacingWriters(kPartitions, kEach, [&](int k, const std::string& topic) {
        const std::string through = catalog_yaml_;
        if (k == 1) catalog_yaml_.clear();  // the second writes the directory itself
        PipelineSpec spec = IcebergSpec(topic, dir_ / "catalog-wh");
        catalog_yaml_ = through;
        return spec;
      });
  if (HasFailure()) return;
  nlohmann::json table = ReadTable(Warehouse() / "db" / "events");
  ASSERT_TRUE(table.is_object());
  EXPECT_EQ(table["missing"].size(), 0u) << table["missing"].dump();
  EXPECT_EQ(
      DuckRows("", fmt::format("SELECT count(*), count(DISTINCT id), min(id), max(id) "
                               "FROM {}",
                               FilesReader(table))),
      std::vector<std::string>{fmt::format("{}|{}|0|{}", 2 * kEach, 2 * kEach, 2 * kEach - 1)});
  for (const PipelineSpec& spec : specs) {
    const std::string key = fmt::format("sluice.offsets.{}.{}", spec.group, spec.topics[0]);
    ASSERT_TRUE(table["summary"].contains(key)) << key;
  }
}

TEST_F(PipelineIcebergRestTest, KilledAtSeededPointsKeepsEveryMessageExactlyOnce) {
  KillAtSeededPoints("  partition_by: [city]\n");
}

TEST_F(PipelineIcebergRestTest, StreamedFilesKilledAtSeededPointsKeepEveryMessageExactlyOnce) {
  KillAtSeededPoints("");
}

TEST_F(PipelineIcebergS3Test, KilledAtSeededPointsKeepsEveryMessageExactlyOnce) {
  KillAtSeededPoints("  partition_by: [city]\n");
}

TEST_F(PipelineIcebergS3Test, StreamedFilesKilledAtSeededPointsKeepEveryMessageExactlyOnce) {
  KillAtSeededPoints("");
}

TEST_F(PipelineIcebergCrashTest, KilledAtSeededPointsKeepsEveryMessageExactlyOnce) {
  KillAtSeededPoints("  partition_by: [city]\n");
}

TEST_F(PipelineIcebergCrashTest, StreamedFilesKilledAtSeededPointsKeepEveryMessageExactlyOnce) {
  KillAtSeededPoints("");
}

void PipelineIcebergCrashTest::KillAtSeededPoints(const std::string& layout) {
  if (std::system("/usr/bin/python3 -c 'import avro.datafile' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import avro (apt-get install python3-avro)";
  }
  uint32_t seed = std::random_device{}();
  if (const char* e = std::getenv("SLUICE_PIPELINE_CRASH_SEED"))
    seed = std::strtoul(e, nullptr, 10);
  RecordProperty("seed", std::to_string(seed));
  fmt::print("iceberg crash test seed {} (SLUICE_PIPELINE_CRASH_SEED={} repeats it)\n", seed, seed);
  SCOPED_TRACE(fmt::format("SLUICE_PIPELINE_CRASH_SEED={}", seed));
  std::mt19937 rng(seed);
  const int kPartitions = 3, kRounds = 6, kChunk = 400;
  const std::string topic = Name("in");
  CreateTopic(topic, kPartitions);
  const fs::path warehouse = Warehouse();
  const fs::path root = warehouse / "db" / "events";
  PipelineSpec spec = IcebergSpec(topic, warehouse, layout);
  spec.batch_size = 50;
  spec.properties = "fetch.wait.max.ms: 50\nsession.timeout.ms: 2000\nheartbeat.interval.ms: 200";
  std::vector<const char*> points = {"iceberg-data-written", "iceberg-list-written",
                                     "iceberg-committed", "sink-committed"};
  if (!s3_warehouse_.empty()) points.push_back("iceberg-data-uploaded");
  auto check = [&](const std::string& when) {
    nlohmann::json table = ReadTable(root);
    if (!table.is_object() || table.contains("absent") || table["files"].empty()) return;
    EXPECT_EQ(table["missing"].size(), 0u) << when << ": " << table["missing"].dump();
    std::vector<std::string> counts = DuckRows(
        "", fmt::format("SELECT count(*) = count(DISTINCT id) FROM {}", FilesReader(table)));
    EXPECT_EQ(counts, std::vector<std::string>{"true"})
        << when << ": a message is in the table twice";
    // Kafka's commit never passes the offsets the table holds.
    std::string key = fmt::format("sluice.offsets.{}.{}", spec.group, topic);
    nlohmann::json held = table["summary"].contains(key)
                              ? nlohmann::json::parse(table["summary"][key].get<std::string>())
                              : nlohmann::json::object();
    std::vector<int64_t> committed = Committed(spec.group, topic, kPartitions);
    for (int p = 0; p < kPartitions; ++p) {
      int64_t in_table =
          held.contains(std::to_string(p)) ? held[std::to_string(p)].get<int64_t>() : 0;
      EXPECT_LE(committed[p], in_table) << when << ": partition " << p;
    }
  };
  for (int k = 0; k < kRounds; ++k) {
    Produce(topic, Jsons(MakeEvents(k * kChunk, kChunk)), kPartitions);
    std::string how;
    std::chrono::milliseconds delay{0};
    if (k % 2 == 0) {
      how = fmt::format("{}:{}", points[rng() % points.size()], 1 + rng() % 2);
      ::setenv("SLUICE_TEST_CRASH_AT", how.c_str(), 1);
    } else {
      delay = std::chrono::milliseconds(300 + rng() % 1500);
      how = fmt::format("SIGKILL after {} ms", delay.count());
    }
    Child* run = StartPipeline(spec);
    ::unsetenv("SLUICE_TEST_CRASH_AT");
    if (k % 2 == 0) {
      // Dead at its point, or (a point it never reached) done with the chunk: then killed.
      std::vector<int64_t> ends = Ends(topic, kPartitions);
      WaitFor([&] { return !run->Running() || Committed(spec.group, topic, kPartitions) == ends; },
              60s);
      if (run->Running()) {
        how += " (not reached)";
        run->Kill();
      }
    } else {
      std::this_thread::sleep_for(delay);
      run->Kill();
    }
    fmt::print("round {}: {}\n", k, how);
    check(fmt::format("after round {} ({})", k, how));
  }
  // A last chunk, so that the final run has work to do (and is up when it is stopped).
  Produce(topic, Jsons(MakeEvents(kRounds * kChunk, kChunk)), kPartitions);
  const int total = (kRounds + 1) * kChunk;
  Child* run = StartPipeline(spec);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run));
  EXPECT_EQ(run->Terminate(), 0);
  check("at the end");
  nlohmann::json table = ReadTable(root);
  EXPECT_EQ(
      DuckRows("", fmt::format("SELECT count(*), count(DISTINCT id), min(id), max(id) FROM {}",
                               FilesReader(table))),
      std::vector<std::string>{fmt::format("{}|{}|0|{}", total, total, total - 1)});
}

TEST_F(PipelineIcebergTest, SchemaEvolutionAddsNewColumnsOnlyWhenAllowed) {
  const std::string topic = Name("in");
  CreateTopic(topic, 1);
  Produce(topic, Jsons(MakeEvents(0, 50)), 1);
  const fs::path warehouse = dir_ / "warehouse";
  PipelineSpec spec = IcebergSpec(topic, warehouse);
  spec.sql = "SELECT id::BIGINT AS id, city FROM batch";
  Child* run = StartPipeline(spec);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, 1, run));
  EXPECT_EQ(run->Terminate(), 0);
  // A new column: refused with schema_evolution false (the default) ...
  Produce(topic, Jsons(MakeEvents(50, 10)), 1);
  spec.sql = "SELECT id::BIGINT AS id, city, amount::DOUBLE AS amount FROM batch";
  run = StartPipeline(spec, "refused");
  auto status = run->WaitExit(60s);
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(*status, 0);
  EXPECT_TRUE(Contains(run->Err(), "column amount (double) is not in")) << run->Err();
  // ... added with it: the old rows read NULL, the new ones their amount.
  PipelineSpec evolving = IcebergSpec(topic, warehouse, "  schema_evolution: true\n");
  evolving.group = spec.group;
  evolving.sql = spec.sql;
  run = StartPipeline(evolving, "evolving");
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, 1, run));
  EXPECT_EQ(run->Terminate(), 0);
  nlohmann::json table = ReadTable(warehouse / "db" / "events");
  EXPECT_EQ(
      DuckRows("", fmt::format(
                       "SELECT count(*), count(amount), count(DISTINCT id) FROM read_parquet([{}], "
                       "union_by_name = true)",
                       [&] {
                         std::vector<std::string> p;
                         for (const auto& f : table["files"]) {
                           p.push_back(duck::QuoteLiteral(f["path"].get<std::string>()));
                         }
                         return fmt::format("{}", fmt::join(p, ", "));
                       }())),
      std::vector<std::string>{"60|10|60"});
  std::string out, err;
  EXPECT_EQ(
      RunSluice({"table", "describe", "db.events", "--warehouse", warehouse.string()}, &out, &err),
      0)
      << err;
  EXPECT_TRUE(Contains(out, "amount")) << out;
  EXPECT_TRUE(Contains(out, "(id 1)")) << out;
}

// Partition transforms: each file's partition tuple is what the spec's transforms give for
// every row in it (bucket: Iceberg's murmur3 — long 34 hashes to 2017239379, bucket 3 of 4).
TEST_F(PipelineIcebergTest, PartitionTuplesMatchEveryRowOfTheirFile) {
  if (std::system("/usr/bin/python3 -c 'import avro.datafile' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import avro (apt-get install python3-avro)";
  }
  const std::string topic = Name("in");
  CreateTopic(topic, 2);
  Produce(topic, Jsons(MakeEvents(0, 600)), 2);
  const fs::path warehouse = dir_ / "warehouse";
  PipelineSpec spec = IcebergSpec(topic, warehouse,
                                  "  partition_by: [bucket(4, id), day(ts), truncate(100, id)]\n");
  spec.sql =
      "SELECT id::BIGINT AS id, city, make_timestamptz(CAST(id AS BIGINT) * 600000000) AS ts FROM "
      "batch";
  Child* run = StartPipeline(spec);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, 2, run));
  EXPECT_EQ(run->Terminate(), 0);
  nlohmann::json table = ReadTable(warehouse / "db" / "events");
  int64_t rows = 0;
  std::set<int64_t> buckets;
  for (const auto& f : table["files"]) {
    const auto& part = f["partition"];
    std::string file = duck::QuoteLiteral(f["path"].get<std::string>());
    // day: days since 1970 of every row's ts (UTC); truncate: id rounded down to 100.
    EXPECT_EQ(
        DuckRows("SET TimeZone = 'UTC'",
                 fmt::format(
                     "SELECT count(DISTINCT CAST(floor(epoch_us(ts) / 86400000000.0) AS INTEGER)), "
                     "min(CAST(floor(epoch_us(ts) / 86400000000.0) AS INTEGER)), "
                     "count(DISTINCT id - id % 100), min(id - id % 100) FROM read_parquet({})",
                     file)),
        std::vector<std::string>{fmt::format("1|{}|1|{}", part["ts_day"].get<int64_t>(),
                                             part["id_trunc"].get<int64_t>())})
        << f.dump();
    buckets.insert(part["id_bucket"].get<int64_t>());
    if (DuckRows("", fmt::format("SELECT count(*) FROM read_parquet({}) WHERE id = 34", file)) ==
        std::vector<std::string>{"1"}) {
      EXPECT_EQ(part["id_bucket"], 3) << "long 34 is in bucket 3 of 4 (spec Appendix B)";
    }
    rows += f["records"].get<int64_t>();
  }
  EXPECT_EQ(rows, 600);
  // The manifest list summarizes the three partition fields of every manifest.
  for (const auto& m : table["summaries"]) {
    ASSERT_EQ(m.size(), 3u) << table["summaries"].dump();
    for (const auto& f : m)
      EXPECT_TRUE(f["lower"].get<bool>() && f["upper"].get<bool>()) << m.dump();
  }
  EXPECT_LE(buckets.size(), 4u);
  EXPECT_GE(buckets.size(), 2u);
  // Every id in exactly one bucket.
  EXPECT_EQ(
      DuckRows("", fmt::format("SELECT count(*), count(DISTINCT id) FROM {}", FilesReader(table))),
      std::vector<std::string>{"600|600"});
}

// Two members of one group appending to one table: partitions move between them (a member
// joins, another leaves) and each member resumes a partition from the table's offsets, not
// from where it last held it: every message once.
TEST_F(PipelineIcebergTest, MembersTakingPartitionsOverResumeFromTheTable) {
  const int kPartitions = 4;
  const std::string topic = Name("in");
  CreateTopic(topic, kPartitions);
  Produce(topic, Jsons(MakeEvents(0, 2000)), kPartitions);
  const fs::path warehouse = dir_ / "warehouse";
  PipelineSpec spec = IcebergSpec(topic, warehouse);
  spec.properties = "fetch.wait.max.ms: 50\nsession.timeout.ms: 6000\nheartbeat.interval.ms: 200";
  Child* a = StartPipeline(spec, "a");
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, a));
  Child* b = StartPipeline(spec, "b");
  std::this_thread::sleep_for(3s);  // b joins and takes some partitions
  Produce(topic, Jsons(MakeEvents(2000, 2000)), kPartitions);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, a));
  EXPECT_EQ(b->Terminate(), 0);  // its partitions go back to a
  Produce(topic, Jsons(MakeEvents(4000, 2000)), kPartitions);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, a));
  EXPECT_EQ(a->Terminate(), 0);
  nlohmann::json table = ReadTable(warehouse / "db" / "events");
  EXPECT_EQ(
      DuckRows("", fmt::format("SELECT count(*), count(DISTINCT id) FROM {}", FilesReader(table))),
      std::vector<std::string>{"6000|6000"});
}

TEST_F(PipelineIcebergTest, ABatchThatDoesNotFitTheTableNamesTheColumn) {
  const std::string topic = Name("in");
  CreateTopic(topic, 1);
  Produce(topic, Jsons(MakeEvents(0, 50)), 1);
  const fs::path warehouse = dir_ / "warehouse";
  PipelineSpec spec = IcebergSpec(topic, warehouse);
  Child* run = StartPipeline(spec);
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, 1, run));
  EXPECT_EQ(run->Terminate(), 0);
  // Now `id` as a DOUBLE: the table's long cannot hold it without loss.
  Produce(topic, Jsons(MakeEvents(50, 10)), 1);
  spec.sql = "SELECT id::DOUBLE AS id, city FROM batch";
  run = StartPipeline(spec, "wrong");
  auto status = run->WaitExit(60s);
  ASSERT_TRUE(status.has_value()) << "the pipeline kept running";
  EXPECT_NE(*status, 0);
  EXPECT_TRUE(Contains(run->Err(), "column id: the batch has double, the table long"))
      << run->Err();
}
// Maintenance beside a writing pipeline: `sluice table compact` and `expire` run while the
// pipeline commits a snapshot a second; every message is in the table exactly once, and a
// restart after expiry resumes where the table's offsets say.
TEST_F(PipelineIcebergTest, CompactAndExpireBesideARunningPipelineKeepEveryMessageOnce) {
  if (std::system("/usr/bin/python3 -c 'import avro.datafile' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import avro (apt-get install python3-avro)";
  }
  CompactAndExpireBesideARunningPipeline();
}

TEST_F(PipelineIcebergS3Test, CompactAndExpireBesideARunningPipelineKeepEveryMessageOnce) {
  CompactAndExpireBesideARunningPipeline();
}

void PipelineIcebergTest::CompactAndExpireBesideARunningPipeline() {
  const int kPartitions = 2;
  const std::string topic = Name("in");
  CreateTopic(topic, kPartitions);
  const fs::path warehouse = Warehouse();
  PipelineSpec spec = IcebergSpec(topic, warehouse, "  partition_by: [city]\n");
  spec.batch_size = 50;
  Child* run = StartPipeline(spec);
  int produced = 0, rewrites = 0;
  std::string out, err;
  auto table_cmd = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "table");
    args.push_back("db.events");
    args.push_back("--warehouse");
    args.push_back(warehouse.string());
    int rc = RunSluice(args, &out, &err);
    EXPECT_EQ(rc, 0) << args[1] << ": " << out << err;
  };
  for (int round = 0; round < 8; ++round) {
    Produce(topic, Jsons(MakeEvents(produced, 250)), kPartitions);
    produced += 250;
    std::this_thread::sleep_for(1500ms);
    if (s3_warehouse_.empty() ? !fs::exists(warehouse / "db" / "events" / "metadata")
                              : ReadTable(warehouse / "db" / "events").contains("absent")) {
      continue;
    }
    table_cmd({"compact", "--target-file-size", "10000000"});
    rewrites += Contains(out, "rewrote") ? 1 : 0;
    // Older than any pipeline commit takes: it never races a file about to be committed.
    table_cmd({"expire", "--older-than", "4s"});
  }
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run));
  EXPECT_EQ(run->Terminate(), 0);
  EXPECT_GT(rewrites, 0) << "no compaction had small files to rewrite while the pipeline ran";
  table_cmd({"compact", "--target-file-size", "10000000"});
  EXPECT_TRUE(Contains(out, "rewrote") || Contains(out, "nothing to compact")) << out;
  std::this_thread::sleep_for(2s);
  table_cmd({"expire", "--older-than", "1s"});
  EXPECT_TRUE(Contains(out, "removed") && !Contains(out, "removed 0 snapshots")) << out;

  const fs::path root = warehouse / "db" / "events";
  nlohmann::json table = ReadTable(root);
  ASSERT_TRUE(table.is_object());
  EXPECT_EQ(table["missing"].size(), 0u) << table["missing"].dump();
  EXPECT_EQ(DuckRows("", fmt::format(
                             "SELECT count(*), count(DISTINCT id), count(DISTINCT (p, o)) FROM {}",
                             FilesReader(table))),
            std::vector<std::string>{fmt::format("{0}|{0}|{0}", produced)});

  // A restart resumes from the offsets the (compacted, expired) table carries.
  Produce(topic, Jsons(MakeEvents(produced, 300)), kPartitions);
  produced += 300;
  run = StartPipeline(spec, "again");
  ASSERT_TRUE(WaitCommittedToEnd(spec.group, topic, kPartitions, run));
  EXPECT_EQ(run->Terminate(), 0);
  table = ReadTable(root);
  EXPECT_EQ(DuckRows("", fmt::format("SELECT count(*), count(DISTINCT (p, o)) FROM {}",
                                     FilesReader(table))),
            std::vector<std::string>{fmt::format("{0}|{0}", produced)});
}
}  // namespace
}  // namespace sluice::integration
