// Benchmark, not a test: a pipeline batch's decode + handler SQL + result fetch, in msgs/s.
//   decode_bench [structured|inferred] [messages=1000000] [batch=5000] [threads=1] [memory|table]
//                [decode_threads=1]
// (threads: DuckDB's; decode_threads: StructuredOptions::threads, in memory)
// 1M page_view events of ~200 bytes, batches of 5000; each batch is decoded into the
// handler table (`events`, or `batch` inferred), the runner's handler step runs
// (CREATE OR REPLACE TEMP TABLE __result AS <aggregate>) and the result is fetched. Prints
// the best of three runs, the load average and peak RSS. Run the release build.
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "json/json_decoder.h"

using namespace sluice;
using kafka::client::Message;

namespace {

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

long PeakRssMiB() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024;
}

void Die(const Status& st, const char* what) {
  if (st.ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, st.ToString().c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const bool inferred = argc > 1 && std::strcmp(argv[1], "inferred") == 0;
  const size_t total = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 1000000;
  const size_t batch = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 5000;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 1;
  const bool in_memory = !(argc > 5 && std::strcmp(argv[5], "table") == 0);
  const size_t decode_threads = argc > 6 ? std::strtoul(argv[6], nullptr, 10) : 1;

  static const char* kCities[] = {"Berlin", "Paris",  "Rome",   "Madrid", "Lisbon",
                                  "Vienna", "Prague", "Warsaw", "Oslo",   "Dublin"};
  static const char* kEvents[] = {"page_view", "click", "purchase", "signup"};
  std::vector<std::string> values;
  values.reserve(total);
  size_t bytes = 0;
  for (size_t i = 0; i < total; ++i) {
    values.push_back(fmt::format(
        R"({{"event":"{}","timestamp":"2024-05-01T12:{:02}:{:02}.{:03}Z","user_id":"u-{:06}",)"
        R"("session_id":"s-{:016x}","page":"/products/{}/item-{:05}",)"
        R"("properties":{{"city":"{}","amount":{}.{}}}}})",
        kEvents[i % 4], (i / 60) % 60, i % 60, i % 1000, i % 1000000, i * 2654435761u,
        kCities[(i / 7) % 10], i % 99991, kCities[i % 10], i % 500, i % 100));
    bytes += values.back().size();
  }
  std::vector<Message> messages(total);
  for (size_t i = 0; i < total; ++i) {
    messages[i].topic = "events";
    messages[i].partition = 0;
    messages[i].offset = static_cast<int64_t>(i);
    messages[i].timestamp_ms = 1714564800000 + static_cast<int64_t>(i);
    messages[i].value = values[i];
  }

  const long input_rss = PeakRssMiB();  // the messages themselves, before DuckDB
  auto db = duck::Database::Open({.memory_limit_bytes = 256 << 20, .threads = threads});
  Die(db.status(), "open");
  auto conn = duck::Connection::Open(**db);
  Die(conn.status(), "connect");
  duck::Connection& c = **conn;
  // DuckDB settings to try, e.g. DECODE_BENCH_SETTINGS="SET preserve_insertion_order=false".
  if (const char* settings = std::getenv("DECODE_BENCH_SETTINGS"))
    Die(c.Execute(settings), "settings");
  std::unique_ptr<json::StructuredDecoder> sdec;
  std::unique_ptr<json::InferredDecoder> idec;
  std::string table = inferred ? "batch" : "events";
  if (inferred) {
    auto d = json::InferredDecoder::Create(c, {.in_memory = in_memory, .threads = decode_threads});
    Die(d.status(), "inferred");
    idec = std::move(*d);
  } else {
    Die(c.Execute("CREATE TABLE events (event VARCHAR, timestamp TIMESTAMP, user_id VARCHAR, "
                  "session_id VARCHAR, page VARCHAR, "
                  "properties STRUCT(city VARCHAR, amount DOUBLE))"),
        "create");
    auto d = json::StructuredDecoder::Create(c, table,
                                             {.in_memory = in_memory, .threads = decode_threads});
    Die(d.status(), "structured");
    sdec = std::move(*d);
  }
  const std::string handler = fmt::format(
      "CREATE OR REPLACE TEMP TABLE __result AS SELECT properties.city AS city, count(*) AS n, "
      "sum(properties.amount) AS total FROM {} GROUP BY 1",
      table);

  double best = 0, best_decode = 0;
  for (int run = 0; run < 3; ++run) {
    double decode_s = 0, handler_s = 0;
    int64_t checksum = 0;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<json::DecodeError> errors;
    for (size_t off = 0; off < total; off += batch) {
      std::span<const Message> part(messages.data() + off, std::min(batch, total - off));
      auto d0 = std::chrono::steady_clock::now();
      auto rows = inferred ? idec->Decode(part, &errors) : sdec->Decode(part, &errors);
      Die(rows.status(), "decode");
      decode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - d0).count();
      if (!errors.empty()) Die(InternalError("{}", errors[0].reason), "errors");
      auto h0 = std::chrono::steady_clock::now();
      Die(c.Execute(handler), "handler");
      handler_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count();
      auto result = c.Query("SELECT city, n, total FROM __result");
      Die(result.status(), "result");
      for (size_t k = 0; k < result->chunk_count(); ++k) {
        duck::ResultChunk ch = result->chunk(k);
        for (size_t r = 0; r < ch.size(); ++r) checksum += ch.GetInt64(1, r);
      }
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (checksum != static_cast<int64_t>(total))
      Die(InternalError("checksum {}", checksum), "check");
    std::printf(
        "run %d: %.0f msgs/s (%.0f ns/msg: decode %.0f, handler %.0f, fetch %.0f) load %s\n", run,
        total / s, s * 1e9 / total, decode_s * 1e9 / total, handler_s * 1e9 / total,
        (s - decode_s - handler_s) * 1e9 / total, LoadAverage().c_str());
    best = std::max(best, total / s);
    best_decode = std::max(best_decode, total / decode_s);
  }
  std::printf(
      "%s%s: %zu msgs of %.0f bytes avg, batch %zu, threads %d: best %.0f msgs/s "
      "(decode alone %.0f msgs/s), peak RSS %ld MiB (%ld MiB of it the input), load %s\n",
      inferred ? "inferred" : "structured", in_memory ? " in memory" : " into the table", total,
      double(bytes) / total, batch, threads, best, best_decode, PeakRssMiB(), input_rss,
      LoadAverage().c_str());
  return 0;
}
