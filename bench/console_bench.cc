#include "bench/console_bench.h"

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "bench/child_process.h"
#include "bench/console_page_js.h"
#include "bench/machine_info.h"
#include "kafka/client/admin.h"
#include "kafka/client/producer.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr double kListTargetMs = 20;
constexpr double kPageTargetMs = 300;
constexpr double kTaskTargetMs = 200;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

// A pipeline reading `topic` into a noop sink: running, idle once it has read the topic.
std::string PipelineYaml(const std::string& name, const std::string& bootstrap,
                         const std::string& topic) {
  return fmt::format(
      "pipeline:\n  name: {0}\n  batch_size: 1000\n  flush_interval_seconds: 1\n  source:\n"
      "    type: kafka\n    kafka:\n      brokers: [{1}]\n      group_id: {0}\n"
      "      auto_offset_reset: earliest\n      topics: [{2}]\n  handler:\n"
      "    type: handlers.InferredMemBatch\n"
      "    sql: SELECT count(*) AS n FROM batch\n  sink:\n    type: noop\n",
      name, bootstrap, topic);
}

// Produces `rate` records a second to `topic` until `stop`, paced in 10 ms steps.
void ProduceAtRate(kafka::client::Producer& p, const std::string& topic, int64_t rate,
                   const std::atomic<bool>& stop, std::atomic<int64_t>* produced) {
  const std::string value =
      R"({"order_id": 123456, "customer": "customer-42", "amount": 17.5, "city": "Lima"})";
  const auto start = Clock::now();
  int64_t sent = 0;
  while (!stop.load()) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    const auto due = static_cast<int64_t>(elapsed * static_cast<double>(rate));
    while (sent < due) {
      if (!p.Produce(topic, kafka::client::kAnyPartition, "", value).ok()) {
        p.Poll(std::chrono::milliseconds(5));
        break;
      }
      ++sent;
    }
    p.Poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  produced->store(sent);
}

struct ListTiming {
  std::string path;
  double median_ms = 0, p95_ms = 0, max_ms = 0;
  size_t bytes = 0;
};

Result<ListTiming> TimeList(httplib::Client& http, const std::string& path, int calls) {
  ListTiming t{.path = path};
  std::vector<double> ms;
  for (int i = 0; i < calls + 3; ++i) {
    const auto start = Clock::now();
    // As chromium asks: the page's calls are what is measured.
    httplib::Result r = http.Get(path, {{"Accept-Encoding", "gzip, deflate, br"}});
    const double took = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (!r || r->status != 200) {
      return AbortedError("GET {}: {}", path,
                          r ? fmt::format("status {}: {}", r->status, r->body.substr(0, 300))
                            : httplib::to_string(r.error()));
    }
    t.bytes = r->body.size();
    if (i >= 3) ms.push_back(took);  // the first three warm the handles up
  }
  t.median_ms = Median(ms);
  t.p95_ms = Percentile(ms, 0.95);
  t.max_ms = *std::max_element(ms.begin(), ms.end());
  return t;
}

std::string Ms(double v) { return fmt::format("{:.1f}", v); }

int Fail(const std::string& why) {
  std::fprintf(stderr, "sluice bench console: %s\n", why.c_str());
  return 1;
}

}  // namespace

int RunConsoleBench(const ConsoleBenchOptions& given) {
  ConsoleBenchOptions o = given;
  if (o.quick) {
    o.topics = std::min(o.topics, 100);
    o.pipelines = std::min(o.pipelines, 2);
    o.pipeline_files = std::min(o.pipeline_files, 10);
    o.calls = std::min(o.calls, 10);
    o.page_runs = std::min(o.page_runs, 2);
    o.cold_runs = 1;
    o.follow_seconds = std::min(o.follow_seconds, 3);
  }
  o.pipeline_files = std::max(o.pipeline_files, o.pipelines);
  if (o.topics < 1 || o.partitions < 1 || o.pipelines < 0 || o.pipelines > o.topics ||
      o.calls < 1 || o.page_runs < 1 || o.cold_runs < 1 || o.follow_rate < 1 ||
      o.follow_seconds < 1) {
    return Fail(
        "--topics, --partitions, --calls, --page-runs, --cold-runs, --follow-rate and "
        "--follow-seconds "
        "must be at least 1, --pipelines from 0 to --topics");
  }
  if (o.node_modules.empty()) o.node_modules = SourceNodeModules();
  if (!fs::exists(o.node_modules + "/puppeteer-core/package.json")) {
    return Fail(
        fmt::format("puppeteer-core is not in {} (npm ci --ignore-scripts in the source tree, or "
                    "--node-modules DIR)",
                    o.node_modules));
  }
  if (::access(o.chromium.c_str(), X_OK) != 0) {
    return Fail(
        fmt::format("{} is not an executable chromium (apt-get install chromium, or "
                    "--chromium PATH)",
                    o.chromium));
  }
  auto work = WorkDir::Create(o.data_dir, "console");
  if (!work.ok()) return Fail(work.status().message());
  const std::string dir = (*work)->path();
  const std::string pipelines_dir = dir + "/pipelines";
  fs::create_directories(pipelines_dir);
  const std::string binary = o.sluice_binary == "/proc/self/exe"
                                 ? fs::read_symlink("/proc/self/exe").string()
                                 : o.sluice_binary;
  const std::string load_start = LoadAverages();

  // The broker first, then its topics and the pipelines' files (a pipeline needs its
  // topic): a restart with --pipelines starts them.
  auto start_serve = [&](bool with_pipelines) {
    std::vector<std::string> args = {binary,
                                     "serve",
                                     "--data-dir",
                                     dir + "/data",
                                     "--kafka-addr",
                                     "127.0.0.1:0",
                                     "--http-addr",
                                     "127.0.0.1:0",
                                     "--pg-addr",
                                     "127.0.0.1:0",
                                     "--schema-registry-addr",
                                     "off"};
    args.push_back("--pipelines");
    args.push_back(with_pipelines ? pipelines_dir : "off");
    // A log of its own per run: the marker is looked for in the whole file.
    return ListeningChild::Start(
        "sluice serve", args, dir + (with_pipelines ? "/serve" : "/serve-topics"),
        "sluice: console on http://", false, std::chrono::seconds(60), std::chrono::seconds(60));
  };
  auto serve = start_serve(false);
  if (!serve.ok()) return Fail(serve.status().message());
  std::smatch m;
  const std::string banner = ReadFile(dir + "/serve-topics.out");
  if (!std::regex_search(banner, m, std::regex("serving Kafka on (\\S+) "))) {
    return Fail("no Kafka address in sluice serve's banner:\n" + banner);
  }
  std::string bootstrap = m[1];
  auto topic_name = [](int i) { return fmt::format("bench-topic-{:04}", i); };
  {
    auto admin = kafka::client::Admin::Create({{"bootstrap.servers", bootstrap}});
    if (!admin.ok()) return Fail(admin.status().message());
    for (int i = 0; i < o.topics; ++i) {
      Status st =
          (*admin)->CreateTopic(topic_name(i), o.partitions, 1, {}, std::chrono::seconds(30));
      if (!st.ok()) return Fail(fmt::format("creating {}: {}", topic_name(i), st.message()));
    }
    Status st = (*admin)->CreateTopic("bench-follow", 1, 1, {}, std::chrono::seconds(30));
    if (!st.ok()) return Fail(fmt::format("creating bench-follow: {}", st.message()));
  }
  // The first `pipelines` run; the others are files of stopped pipelines.
  for (int i = 0; i < o.pipeline_files; ++i) {
    Status st = WriteTextFile(
        fmt::format("{}/p{:03}.yaml{}", pipelines_dir, i, i < o.pipelines ? "" : ".stopped"),
        PipelineYaml(fmt::format("bench-{:03}", i), bootstrap, topic_name(i % o.topics)));
    if (!st.ok()) return Fail(st.message());
  }
  if (Status st = (*serve)->Stop(); !st.ok()) return Fail(st.message());
  serve = start_serve(true);
  if (!serve.ok()) return Fail(serve.status().message());
  const std::string restarted = ReadFile(dir + "/serve.out");
  if (!std::regex_search(restarted, m, std::regex("serving Kafka on (\\S+) "))) {
    return Fail("no Kafka address in sluice serve's banner:\n" + restarted);
  }
  bootstrap = m[1];
  const std::string http_addr = (*serve)->address();
  const std::string base = "http://" + http_addr;

  // A few records in the first topics, so that sizes, counts and rates are not all zero.
  {
    auto p = kafka::client::Producer::Create({{"bootstrap.servers", bootstrap}});
    if (!p.ok()) return Fail(p.status().message());
    for (int i = 0; i < std::min(o.topics, 50); ++i) {
      for (int k = 0; k < 20; ++k) {
        (void)(*p)->Produce(topic_name(i), kafka::client::kAnyPartition, "", "{\"n\": 1}");
      }
    }
    if (Status st = (*p)->Flush(std::chrono::seconds(30)); !st.ok()) return Fail(st.message());
  }

  // The API's list calls.
  const size_t colon = http_addr.rfind(':');
  httplib::Client http(http_addr.substr(0, colon), std::stoi(http_addr.substr(colon + 1)));
  http.set_keep_alive(true);
  http.set_read_timeout(60, 0);
  std::vector<ListTiming> lists;
  for (const char* path : {"/api/v1/topics", "/api/v1/groups", "/api/v1/pipelines",
                           "/api/v1/overview", "/api/v1/cluster"}) {
    Result<ListTiming> t = TimeList(http, path, o.calls);
    if (!t.ok()) return Fail(t.status().message());
    lists.push_back(*t);
  }

  // The pages, then the following, in chromium, while the bench produces to bench-follow.
  const std::string script = dir + "/console_page.js";
  if (Status st = WriteTextFile(script, std::string(kConsolePageJs)); !st.ok()) {
    return Fail(st.message());
  }
  Result<std::string> node = FindProgram(o.node);
  if (!node.ok()) return Fail(fmt::format("node: {}", node.status().message()));
  // NODE_PATH finds puppeteer-core; Spawn passes the environment on.
  ::setenv("NODE_PATH", o.node_modules.c_str(), 1);
  // One run of the script: its JSON answer, or why there is none.
  auto run_page = [&](const Json& input, const std::string& name) -> Result<Json> {
    Result<pid_t> pid =
        Spawn({*node, script, input.dump()}, dir + "/" + name + ".out", dir + "/" + name + ".err");
    if (!pid.ok()) return pid.status();
    std::optional<int> status = WaitFor(*pid, std::chrono::minutes(10));
    if (!status.has_value() || *status != 0) {
      return AbortedError("the page script {}:\n{}",
                          status ? DescribeWaitStatus(*status) : "did not end in 10 minutes",
                          Tail(dir + "/" + name + ".err", 20));
    }
    Json answer = Json::parse(ReadFile(dir + "/" + name + ".out"), nullptr, false);
    if (!answer.is_object()) {
      return AbortedError("the page script's answer is not JSON:\n{}",
                          ReadFile(dir + "/" + name + ".out"));
    }
    return answer;
  };
  Result<Json> page = run_page(
      {{"base", base},
       {"chromium", o.chromium},
       {"pages",
        {"/", "/topics", "/topics/" + topic_name(0), "/groups", "/pipelines", "/tables", "/sql"}},
       {"runs", o.page_runs},
       {"cold_runs", o.cold_runs}},
      "pages");
  if (!page.ok()) return Fail(page.status().message());
  // Following, while the bench produces to the topic.
  auto producer = kafka::client::Producer::Create(
      {{"bootstrap.servers", bootstrap}, {"linger.ms", "5"}, {"acks", "all"}});
  if (!producer.ok()) return Fail(producer.status().message());
  std::atomic<bool> stop{false};
  std::atomic<int64_t> produced{0};
  std::thread feeder(
      [&] { ProduceAtRate(**producer, "bench-follow", o.follow_rate, stop, &produced); });
  const auto follow_start = Clock::now();
  Result<Json> follow =
      run_page({{"base", base},
                {"chromium", o.chromium},
                {"follow", {{"topic", "bench-follow"}, {"seconds", o.follow_seconds}}}},
               "follow");
  stop = true;
  feeder.join();
  const double follow_seconds = std::chrono::duration<double>(Clock::now() - follow_start).count();
  if (!follow.ok()) return Fail(follow.status().message());
  const Status stopped = (*serve)->Stop();

  // The report.
  const MachineInfo mi = GetMachineInfo();
  Json out = {{"bench", "console"},
              {"commit", SourceCommit()},
              {"machine", fmt::format("{}, {} cores, {}, {}", mi.cpu_model, mi.cores,
                                      FormatBinaryBytes(mi.memory_bytes), mi.kernel)},
              {"topics", o.topics},
              {"partitions", o.partitions},
              {"pipelines_running", o.pipelines},
              {"pipeline_files", o.pipeline_files},
              {"load_start", load_start},
              {"load_end", LoadAverages()},
              {"list_target_ms", kListTargetMs},
              {"page_target_ms", kPageTargetMs},
              {"task_target_ms", kTaskTargetMs}};
  Json list_json = Json::array();
  for (const ListTiming& t : lists) {
    list_json.push_back({{"path", t.path},
                         {"median_ms", Round(t.median_ms, 2)},
                         {"p95_ms", Round(t.p95_ms, 2)},
                         {"max_ms", Round(t.max_ms, 2)},
                         {"bytes", t.bytes}});
  }
  out["lists"] = list_json;
  Json pages_json = Json::array();
  for (const Json& p : (*page)["pages"]) {
    std::vector<double> warm = p["warm_ms"].get<std::vector<double>>();
    Json cold = Json::array();
    for (double ms : p["cold_runs_ms"].get<std::vector<double>>()) cold.push_back(Round(ms, 1));
    pages_json.push_back({{"path", p["path"]},
                          {"cold_ms", Round(p["cold_ms"].get<double>(), 1)},
                          {"cold_runs_ms", cold},
                          {"warm_median_ms", Round(Median(warm), 1)},
                          {"longest_task_ms", Round(p["longest_task_ms"].get<double>(), 1)},
                          {"long_tasks", p["long_tasks"]}});
  }
  out["pages"] = pages_json;
  const Json& f = (*follow)["follow"];
  out["follow"] = {
      {"rate_per_sec", o.follow_rate},
      {"produced_per_sec", Round(static_cast<double>(produced.load()) / follow_seconds, 0)},
      {"seconds", f["seconds"]},
      {"longest_task_ms", Round(f["longest_task_ms"].get<double>(), 1)},
      {"long_tasks", f["long_tasks"]},
      {"rows_shown", f["rows_shown"]}};
  if (o.json) {
    fmt::print("{}\n", out.dump());
  } else {
    fmt::print(
        "sluice bench console: {} topics x {} partitions, {} pipeline files ({} running), on {}\n",
        o.topics, o.partitions, o.pipeline_files, o.pipelines, out["machine"].get<std::string>());
    fmt::print("commit {}, load average {} at the start, {} at the end\n\n",
               out["commit"].get<std::string>(), load_start, out["load_end"].get<std::string>());
    fmt::print("{:<28} {:>10} {:>10} {:>10} {:>10}   target\n", "API list call", "median ms",
               "p95 ms", "max ms", "bytes");
    for (const ListTiming& t : lists) {
      fmt::print("{:<28} {:>10} {:>10} {:>10} {:>10}   <= {} ms {}\n", t.path, Ms(t.median_ms),
                 Ms(t.p95_ms), Ms(t.max_ms), t.bytes, kListTargetMs,
                 t.median_ms <= kListTargetMs ? "met" : "MISSED");
    }
    fmt::print("\n{:<28} {:>10} {:>10} {:>12} {:>10}   target <= {} ms: cold, warm\n",
               "page (chromium)", "cold ms", "warm ms", "longest task", "tasks>50ms",
               kPageTargetMs);
    auto verdict = [](double ms) { return ms <= kPageTargetMs ? "met" : "MISSED"; };
    for (const Json& p : pages_json) {
      const double cold = p["cold_ms"].get<double>();
      const double warm = p["warm_median_ms"].get<double>();
      fmt::print("{:<28} {:>10} {:>10} {:>12} {:>10}   {}, {}\n", p["path"].get<std::string>(),
                 Ms(cold), o.page_runs > 1 ? Ms(warm) : "-", Ms(p["longest_task_ms"].get<double>()),
                 p["long_tasks"].get<int>(), verdict(cold), o.page_runs > 1 ? verdict(warm) : "-");
    }
    fmt::print(
        "\nfollowing bench-follow at {} msgs/s (produced {}/s) for {} s: longest task {} "
        "ms, {} tasks over 50 ms, {} rows shown   target: no task over {} ms, {}\n",
        o.follow_rate, out["follow"]["produced_per_sec"].get<double>(), o.follow_seconds,
        Ms(f["longest_task_ms"].get<double>()), f["long_tasks"].get<int>(),
        f["rows_shown"].get<int>(), kTaskTargetMs,
        f["longest_task_ms"].get<double>() <= kTaskTargetMs ? "met" : "MISSED");
  }
  if (!stopped.ok()) return Fail(stopped.message());
  return 0;
}

}  // namespace sluice::bench
