// `sluice bench console`: the web console's figures (docs/design/0026-console.md, issue
// 28's targets): a `sluice serve` of its own with `topics` topics and `pipelines` running
// pipelines; the API's list calls timed from a client on loopback (median and p95 of
// `calls` each, target ≤ 20 ms); each page loaded in Debian's chromium driven by
// puppeteer-core (bench/console/console_page.js, compiled in): the first load in a fresh
// browser context (the median of `cold_runs` such) and `page_runs - 1` more with the bundle cached,
// from the navigation to the frame that shows the page's data (target ≤ 300 ms), with the main
// thread's long tasks; then the topic page following a topic the bench produces `follow_rate`
// messages/s to for `follow_seconds` (target: no task over 200 ms). The targets are the reference:
// the issue names no other console to measure beside it. What it measures: docs/benchmarks.md,
// "Console".
#pragma once

#include <cstdint>
#include <string>

namespace sluice::bench {

struct ConsoleBenchOptions {
  std::string sluice_binary = "/proc/self/exe";
  std::string data_dir;  // work files under <data_dir>/run-<pid>; empty: $TMPDIR
  int topics = 1000;
  int partitions = 2;
  int pipelines = 10;  // running, each reading one of the topics into a noop sink
  // Pipeline files in the folder: `pipelines` running, the others stopped (*.yaml.stopped),
  // as the "100 pipeline files present (10 running)".
  int pipeline_files = 100;
  int calls = 30;     // per API list call, after 3 not counted
  int page_runs = 5;  // per page, in one tab: one cold, the others warm
  // Per page: cold loads, each in a fresh browser context (the last is page_runs' first);
  // the cold figure is their median, one load being too noisy on a small machine.
  int cold_runs = 3;
  int64_t follow_rate = 10'000;
  int follow_seconds = 10;
  std::string chromium = "/usr/bin/chromium";
  std::string node = "node";
  std::string node_modules;  // holding puppeteer-core; empty: the source tree's
  bool json = false;         // one JSON object instead of the table
  bool quick = false;  // 100 topics, 2 pipelines (10 files), 10 calls, 2 page runs, 1 cold run, 3 s
                       // following
};

// Runs it; the process's exit status (0, or 1 with the reason on stderr).
int RunConsoleBench(const ConsoleBenchOptions& options);

}  // namespace sluice::bench
