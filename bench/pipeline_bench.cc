#include "bench/pipeline_bench.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <sstream>
#include <string_view>
#include <thread>

#include "base/clock.h"
#include "base/status.h"
#include "base/strings.h"
#include "bench/bench_util.h"
#include "bench/child_process.h"
#include "bench/machine_info.h"
#include "duck/chunk_view.h"
#include "duck/database.h"
#include "json/json_decoder.h"
#include "kafka/client/admin.h"
#include "kafka/client/producer.h"
#include "lake/storage.h"
#include "pipeline/pipeline_config.h"
#include "sinks/testing/postgres_server.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
namespace kc = kafka::client;
using namespace std::chrono_literals;
using Json = nlohmann::ordered_json;

constexpr auto kBrokerStartTimeout = 30s;
constexpr auto kChildStopTimeout = 60s;
constexpr auto kAdminTimeout = 20s;
constexpr auto kFlushTimeout = 600s;
constexpr auto kFirstMessageTimeout = 120s;  // pipeline start, group join, first fetch
constexpr auto kStallTimeout = 60s;          // no new message for this long = stuck
constexpr auto kScrapeEvery = 20ms;          // /metrics while a pipeline runs
constexpr auto kSampleEvery = 1s;            // RssAnon
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kTolerance = 0.10;  // backlog and paced checks

// The handler SQL, sqlflow's benchmark aggregate plus a sum; {} is the table.
constexpr std::string_view kHandlerSql =
    "SELECT properties.city AS city, count(*) AS n, sum(properties.amount) AS total "
    "FROM {} GROUP BY 1";
// StructuredBatch's declared table: sqlflow's benchmark table (event, properties.city)
// plus the amount the SQL sums.
constexpr std::string_view kStructuredTable =
    "CREATE TABLE events (event VARCHAR, properties STRUCT(city VARCHAR, amount DOUBLE))";

// --window (docs/design/0007, decision 9). StructuredBatch's table gains the event time, the
// events' "timestamp".
constexpr std::string_view kWindowStructuredTable =
    "CREATE TABLE events (event VARCHAR, properties STRUCT(city VARCHAR, amount DOUBLE), "
    "\"timestamp\" TIMESTAMPTZ)";
// The handler pre-aggregates each batch to one-second buckets per city, the time column
// keeping its name (docs/pipelines.md, "Event time"). {0} is the table, {1} the time:
// InferredMemBatch reads the ISO strings as VARCHAR, so its SQL casts them.
constexpr std::string_view kWindowHandlerSql =
    "SELECT time_bucket(INTERVAL '1 second', {1}) AS \"timestamp\", properties.city AS city, "
    "count(*) AS n, sum(properties.amount) AS amount FROM {0} GROUP BY ALL";
constexpr std::string_view kWindowEmitSql =
    "SELECT window_start, window_end, city, sum(n) AS n, sum(amount) AS amount FROM closed GROUP "
    "BY ALL";

struct WindowKind {
  std::string_view name;   // in --json: "tumbling_1m"
  std::string_view label;  // in the table
  std::string_view type;   // pipeline.window keys
  std::string_view size;
  std::string_view slide;  // hopping only
};
constexpr std::array<WindowKind, 2> kWindows = {{
    {"tumbling_1m", "tumbling 1m", "tumbling", "1m", ""},
    {"hopping_5m_1m", "hopping 5m/1m", "hopping", "5m", "1m"},
}};

// sqlflow's published cost of its durable state in throughput, per batch size; sluice's
// target is under half of each.
std::optional<double> SqlflowStateCost(int64_t batch) {
  switch (batch) {
    case 500:
      return 0.47;
    case 2000:
      return 0.29;
    case 5000:
      return 0.15;
    default:
      return std::nullopt;
  }
}

constexpr std::array<std::string_view, 5> kCities = {"San Francisco", "Baltimore", "New York",
                                                     "Miami", "Asheville"};
constexpr int64_t kBaseEpochMs = 1'735'689'600'000;  // 2025-01-01T00:00:00Z

// ---------------------------------------------------------------------------------------
// The events: sqlflow's fixture event (sqlflow/fixtures KafkaFaker) with an amount in
// properties, a per-event timestamp and user id. Event i is a function of i only, so the
// DuckDB-only reference can build the same values with SQL (EventsSql) and check them.

int CityIndex(int64_t i) {
  return static_cast<int>(((static_cast<uint64_t>(i) * 2654435761ULL) >> 16) % kCities.size());
}
int64_t AmountCents(int64_t i) { return (i * 7919) % 100000; }
int64_t UserNumber(int64_t i) { return (i * 48271) % 1000003; }

// Appends event i's JSON to `out` (cleared first). `ts_cache` keeps the formatted second.
void MakeEvent(int64_t i, std::string* out, std::pair<int64_t, std::string>* ts_cache) {
  int64_t ms = kBaseEpochMs + i;
  int64_t sec = ms / 1000;
  if (ts_cache->first != sec || ts_cache->second.empty()) {
    time_t t = static_cast<time_t>(sec);
    tm parts{};
    gmtime_r(&t, &parts);
    ts_cache->first = sec;
    ts_cache->second =
        fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", parts.tm_year + 1900, parts.tm_mon + 1,
                    parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec);
  }
  int64_t cents = AmountCents(i);
  out->clear();
  fmt::format_to(std::back_inserter(*out),
                 R"({{"ip":"103.22.200.1","event":"search_event","properties":{{"city":"{}",)"
                 R"("country":"USA","amount":{}.{:02}}},"timestamp":"{}.{:03}Z","type":"track",)"
                 R"("userId":"U{:09}"}})",
                 kCities[static_cast<size_t>(CityIndex(i))], cents / 100, cents % 100,
                 ts_cache->second, ms % 1000, UserNumber(i));
}

// --format avro / protobuf: the same event's fields as an Avro record or a Protobuf message
// in the Confluent framing (magic byte, schema id; Protobuf's message index [0]). The
// timestamp is a timestamp-millis long / a google.protobuf.Timestamp rather than ISO text.
constexpr std::string_view kAvroEventSchema =
    R"({"type":"record","name":"Event","namespace":"sluice.bench","fields":[)"
    R"({"name":"ip","type":"string"},{"name":"event","type":"string"},)"
    R"({"name":"properties","type":{"type":"record","name":"Properties","fields":[)"
    R"({"name":"city","type":"string"},{"name":"country","type":"string"},)"
    R"({"name":"amount","type":"double"}]}},)"
    R"({"name":"timestamp","type":{"type":"long","logicalType":"timestamp-millis"}},)"
    R"({"name":"type","type":"string"},{"name":"userId","type":"string"}]})";
constexpr std::string_view kProtobufEventSchema =
    "syntax = \"proto3\";\npackage sluice.bench;\nimport \"google/protobuf/timestamp.proto\";\n"
    "message Event {\n  string ip = 1;\n  string event = 2;\n  Properties properties = 3;\n"
    "  google.protobuf.Timestamp timestamp = 4;\n  string type = 5;\n  string userId = 6;\n}\n"
    "message Properties {\n  string city = 1;\n  string country = 2;\n  double amount = 3;\n}\n";

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void PutAvroLong(int64_t v, std::string* out) {
  PutVarint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63), out);
}
void PutAvroString(std::string_view v, std::string* out) {
  PutAvroLong(static_cast<int64_t>(v.size()), out);
  out->append(v);
}
void PutDouble(double d, std::string* out) {
  char b[8];
  std::memcpy(b, &d, 8);
  out->append(b, 8);
}
void PutProtoString(int field, std::string_view v, std::string* out) {
  PutVarint(static_cast<uint64_t>(field) << 3 | 2, out);
  PutVarint(v.size(), out);
  out->append(v);
}

// Event i (MakeEvent's fields) in `format`, framed with `schema_id`.
void MakeFramedEvent(int64_t i, std::string_view format, int32_t schema_id, std::string* out) {
  const int64_t ms = kBaseEpochMs + i;
  const int64_t cents = AmountCents(i);
  const double amount = static_cast<double>(cents / 100) + static_cast<double>(cents % 100) / 100.0;
  const std::string_view city = kCities[static_cast<size_t>(CityIndex(i))];
  char user[16];
  std::snprintf(user, sizeof(user), "U%09lld", static_cast<long long>(UserNumber(i)));
  out->clear();
  out->push_back('\0');
  for (int shift : {24, 16, 8, 0}) out->push_back(static_cast<char>(schema_id >> shift));
  if (format == "avro") {
    PutAvroString("103.22.200.1", out);
    PutAvroString("search_event", out);
    PutAvroString(city, out);
    PutAvroString("USA", out);
    PutDouble(amount, out);
    PutAvroLong(ms, out);
    PutAvroString("track", out);
    PutAvroString(user, out);
    return;
  }
  out->push_back('\0');  // message indexes [0]: Event
  PutProtoString(1, "103.22.200.1", out);
  PutProtoString(2, "search_event", out);
  std::string props;
  PutProtoString(1, city, &props);
  PutProtoString(2, "USA", &props);
  props.push_back(static_cast<char>(3 << 3 | 1));
  PutDouble(amount, &props);
  PutProtoString(3, props, out);
  std::string ts;
  ts.push_back(static_cast<char>(1 << 3));
  PutVarint(static_cast<uint64_t>(ms / 1000), &ts);
  if (ms % 1000 != 0) {
    ts.push_back(static_cast<char>(2 << 3));
    PutVarint(static_cast<uint64_t>(ms % 1000) * 1'000'000, &ts);
  }
  PutProtoString(4, ts, out);
  PutProtoString(5, "track", out);
  PutProtoString(6, user, out);
}

// Registers the event schema of `format` under `subject` with the registry at `url`
// (http://HOST:PORT): its id.
Result<int32_t> RegisterEventSchema(const std::string& url, const std::string& subject,
                                    std::string_view format) {
  Json body = {{"schema", format == "avro" ? kAvroEventSchema : kProtobufEventSchema}};
  if (format == "protobuf") body["schemaType"] = "PROTOBUF";
  httplib::Client client(url);
  client.set_connection_timeout(10s);
  client.set_read_timeout(30s);
  httplib::Result r = client.Post("/subjects/" + subject + "/versions", body.dump(),
                                  "application/vnd.schemaregistry.v1+json");
  if (!r)
    return IOError("registering the {} schema at {}: {}", format, url,
                   httplib::to_string(r.error()));
  Json answer = Json::parse(r->body, nullptr, false);
  if (r->status != 200 || !answer.is_object() || !answer.contains("id")) {
    return InternalError("registering the {} schema at {}: {} {}", format, url, r->status, r->body);
  }
  return answer["id"].get<int32_t>();
}

// What the events of a topic add up to, per city: the check of the reference's data.
struct Totals {
  std::array<int64_t, kCities.size()> count{};
  std::array<int64_t, kCities.size()> cents{};
  void Add(int64_t i) {
    size_t c = static_cast<size_t>(CityIndex(i));
    ++count[c];
    cents[c] += AmountCents(i);
  }
};

// SQL that builds the first `n` events, already decoded, as table all_events with a row
// id `rid` = i: the shape StructuredBatch's table has (`window`: kWindowStructuredTable's,
// with the time), or (inferred) every JSON field as InferredMemBatch infers it (the kafka_*
// metadata columns left out: the SQL reads none).
std::string EventsSql(int64_t n, bool inferred, bool window) {
  std::string cities;
  for (std::string_view c : kCities) cities += fmt::format("{}'{}'", cities.empty() ? "" : ", ", c);
  std::string city =
      fmt::format("([{}])[(((i * 2654435761) >> 16) % {}) + 1]", cities, kCities.size());
  std::string amount = "((i * 7919) % 100000)::DOUBLE / 100";
  if (!inferred) {
    // to_timestamp(0) + an interval of milliseconds: the instant, whatever the TimeZone.
    return fmt::format(
        "CREATE TABLE all_events AS SELECT i AS rid, 'search_event' AS event, "
        "{{'city': {}, 'amount': {}}} AS properties{} FROM range({}) t(i)",
        city, amount,
        window ? fmt::format(", to_timestamp(0) + to_milliseconds({} + i) AS \"timestamp\"",
                             kBaseEpochMs)
               : "",
        n);
  }
  return fmt::format(
      "CREATE TABLE all_events AS SELECT i AS rid, '103.22.200.1' AS ip, 'search_event' AS event, "
      "{{'city': {}, 'country': 'USA', 'amount': {}}} AS properties, "
      "strftime(make_timestamp(({} + i) * 1000), '%Y-%m-%dT%H:%M:%S.%gZ') AS \"timestamp\", "
      "'track' AS type, 'U' || lpad(((i * 48271) % 1000003)::VARCHAR, 9, '0') AS userId "
      "FROM range({}) t(i)",
      city, amount, kBaseEpochMs, n);
}

// ---------------------------------------------------------------------------------------
// Small helpers.

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double Seconds(int64_t from_ns, int64_t to_ns) {
  return static_cast<double>(to_ns - from_ns) / 1e9;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return IOError("cannot write {}", path);
  return Status::OK();
}

// A "Name:   123 kB" line of /proc/<pid>/status in bytes, or -1.
int64_t ProcStatusBytes(pid_t pid, std::string_view name) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(in, line);) {
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 &&
        line[name.size()] == ':') {
      return std::strtoll(line.c_str() + name.size() + 1, nullptr, 10) * 1024;
    }
  }
  return -1;
}

// GET http://127.0.0.1:<port><path> with HTTP/1.0; the body, or an error.
Result<std::string> HttpGet(int port, std::string_view path) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError("socket", "127.0.0.1", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError("connect", fmt::format("127.0.0.1:{}", port), err);
  }
  std::string req =
      fmt::format("GET {} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    int err = errno;
    ::close(fd);
    return ErrnoError("send", "/metrics", err);
  }
  std::string resp;
  char buf[16384];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      resp.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(fd);
  size_t body = resp.find("\r\n\r\n");
  if (resp.compare(0, 9, "HTTP/1.1 ") != 0 && resp.compare(0, 9, "HTTP/1.0 ") != 0) {
    return IOError("GET {}: no HTTP response", path);
  }
  if (resp.compare(9, 3, "200") != 0)
    return IOError("GET {}: {}", path, resp.substr(0, resp.find('\r')));
  return body == std::string::npos ? std::string() : resp.substr(body + 4);
}

// The sum over label sets of a Prometheus text metric.
double MetricSum(std::string_view text, std::string_view name) {
  double sum = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() <= name.size() || line.substr(0, name.size()) != name) continue;
    char next = line[name.size()];
    if (next != '{' && next != ' ') continue;
    size_t space = line.rfind(' ');
    sum += std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
  }
  return sum;
}

// ---------------------------------------------------------------------------------------
// Child processes: the broker and the pipelines.

std::string SelfExe(const std::string& binary) {
  if (binary != "/proc/self/exe") return binary;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? binary : self.string();
}

using Child = ListeningChild;

// ---------------------------------------------------------------------------------------
// Settings and the producer.

struct Settings {
  std::string binary;  // absolute
  std::string bootstrap;
  std::string work_dir;
  int64_t messages = 0;
  int runs = 0;
  std::vector<std::string> handlers;  // "handlers.StructuredBatch", ...
  std::vector<int64_t> batch_sizes;
  kc::Config producer;
  std::vector<std::pair<std::string, std::string>> consumer_properties;
  int64_t fetch_max_bytes = 0;  // 0: sluice's default
  int64_t fetch_max_partition_bytes = 0;
  std::string run_id;    // names topics and groups: <pid>-<ms>
  bool window = false;   // --window: the windowed cells instead of the plain ones
  bool iceberg = false;  // --iceberg: passthrough into an Iceberg table and a noop sink
  int64_t iceberg_commit_seconds = 5;
  std::string s3_warehouse;  // --storage s3: the S3 Iceberg cells' warehouse ("": none)
  bool postgres = false;     // --sink postgres: passthrough into PostgreSQL and a noop sink
  std::string postgres_dsn;  // of the bench's own server
  int64_t postgres_commit_interval_ms = 0;
  std::vector<std::string> formats = {"json"};  // --format, json first
  // The format of the cells being run and, for avro and protobuf, the registry the
  // pipelines read the schema from and the id the events are framed with.
  std::string format = "json";
  std::string registry_url;
  int32_t schema_id = 0;
  bool in_process_asked = false;  // --in-process: each plain cell over both sources
  bool in_process = false;        // the cell being run reads in-process (0023)
};

Result<Settings> MakeSettings(const PipelineBenchOptions& o, const std::string& bootstrap,
                              const std::string& work_dir) {
  Settings s;
  s.binary = SelfExe(o.sluice_binary);
  s.bootstrap = bootstrap;
  s.work_dir = work_dir;
  s.messages = o.messages > 0 ? o.messages : (o.quick ? 200'000 : 10'000'000);
  s.runs = o.runs > 0 ? o.runs : (o.quick ? 1 : 3);
  if (s.messages > 1'000'000'000) return InvalidArgumentError("--messages: at most 1,000,000,000");
  std::vector<std::string> handlers = o.handlers;
  if (handlers.empty()) {
    handlers = o.window ? std::vector<std::string>{"StructuredBatch"}
                        : std::vector<std::string>{"StructuredBatch", "InferredMemBatch"};
  }
  for (std::string h : handlers) {
    if (h.rfind("handlers.", 0) == 0) h = h.substr(9);
    if (h != "StructuredBatch" && h != "InferredMemBatch") {
      return InvalidArgumentError("--handlers: '{}': StructuredBatch or InferredMemBatch", h);
    }
    s.handlers.push_back("handlers." + h);
  }
  if (o.batch_sizes.empty()) return InvalidArgumentError("--batch-sizes: name at least one");
  for (int64_t b : o.batch_sizes) {
    if (b < 1 || b > 1'000'000)
      return InvalidArgumentError("--batch-sizes: {} is not 1 … 1000000", b);
  }
  s.batch_sizes = o.batch_sizes;
  s.in_process_asked = o.in_process;
  if (o.in_process && !o.bootstrap.empty()) {
    return InvalidArgumentError(
        "--in-process runs the pipelines inside the bench's own broker: not with --bootstrap");
  }
  s.window = o.window;
  s.iceberg = o.iceberg || o.sink == "iceberg";
  s.postgres = o.sink == "postgres";
  s.postgres_commit_interval_ms = o.postgres_commit_interval_ms;
  if (o.sink != "noop" && o.sink != "iceberg" && o.sink != "postgres") {
    return InvalidArgumentError("--sink: '{}': noop, iceberg or postgres", o.sink);
  }
  if (s.postgres && o.iceberg) return InvalidArgumentError("--iceberg and --sink postgres: one");
  s.iceberg_commit_seconds = o.iceberg_commit_seconds;
  if (o.storage != "local" && o.storage != "s3")
    return InvalidArgumentError("--storage: '{}': local or s3", o.storage);
  if (o.storage == "s3" && !s.iceberg)
    return InvalidArgumentError("--storage s3 is for the Iceberg cells: add --iceberg");
  if (!o.s3_warehouse.empty() && o.storage != "s3")
    return InvalidArgumentError("--s3-warehouse is for --storage s3");
  if (o.storage == "s3") {
    s.s3_warehouse = o.s3_warehouse;
    if (s.s3_warehouse.empty()) {
      const char* bucket = std::getenv("SLUICE_S3_BUCKET");
      if (bucket == nullptr || *bucket == 0) {
        return InvalidArgumentError(
            "--storage s3: no S3 warehouse (pass --s3-warehouse s3://bucket/prefix or set "
            "SLUICE_S3_BUCKET)");
      }
      s.s3_warehouse = fmt::format("s3://{}/sluice-bench-pipeline", bucket);
    }
    if (!lake::IsS3Location(s.s3_warehouse))
      return InvalidArgumentError("--s3-warehouse {}: not an s3:// location", s.s3_warehouse);
    s.s3_warehouse = lake::NormalLocation(s.s3_warehouse);
    RETURN_IF_ERROR(lake::StorageFor(s.s3_warehouse).status());
  }
  if (s.iceberg && (o.iceberg_commit_seconds < 1 || !o.handlers.empty())) {
    return InvalidArgumentError(
        "--iceberg runs StructuredBatch only (no --handlers) and needs "
        "--iceberg-commit-seconds of at least 1");
  }
  if (s.postgres && !o.handlers.empty()) {
    return InvalidArgumentError("--sink postgres runs StructuredBatch only (no --handlers)");
  }
  if (s.postgres && (o.window || o.backlog || o.paced)) {
    return InvalidArgumentError(
        "--sink postgres runs its own cells: not with --window, --backlog or --paced");
  }
  if (s.iceberg || s.postgres) s.handlers = {"handlers.StructuredBatch"};
  if (o.window && o.backlog) {
    return InvalidArgumentError("--backlog checks the plain pipelines: run it without --window");
  }
  if (o.paced && (o.paced_minutes < 2 || o.paced_rate < 1 || o.paced_reference < 1 ||
                  o.paced_reference >= o.paced_minutes)) {
    return InvalidArgumentError(
        "--paced-minutes must be at least 2, --paced-rate at least 1 and --paced-reference "
        "a minute before the last");
  }
  s.producer = {{"bootstrap.servers", bootstrap},
                {"client.id", "sluice-bench-pipeline"},
                {"acks", "1"},
                {"linger.ms", "5"},
                {"batch.size", "1000000"},
                {"queue.buffering.max.kbytes", "65536"},
                {"compression.codec", o.compression},
                {"socket.nagle.disable", "true"}};
  for (const std::string& kv : o.consumer_config) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError("--consumer-config '{}': NAME=VALUE", kv);
    }
    s.consumer_properties.push_back({kv.substr(0, eq), kv.substr(eq + 1)});
  }
  s.fetch_max_bytes = o.fetch_max_bytes;
  s.fetch_max_partition_bytes = o.fetch_max_partition_bytes;
  for (const std::string& f : o.formats) {
    if (f != "json" && f != "avro" && f != "protobuf") {
      return InvalidArgumentError("--format: '{}': json, avro or protobuf", f);
    }
    if (std::find(s.formats.begin(), s.formats.end(), f) == s.formats.end()) s.formats.push_back(f);
  }
  if (s.formats.size() > 1 && (o.window || s.iceberg || s.postgres || o.backlog || o.paced)) {
    return InvalidArgumentError(
        "--format runs the plain cells: not with --window, --iceberg, --sink postgres, "
        "--backlog or --paced");
  }
  s.run_id = fmt::format("{}-{}", ::getpid(), WallMillis());
  return s;
}

Status CreateTopic(const Settings& s, const std::string& topic) {
  ASSIGN_OR_RETURN(std::unique_ptr<kc::Admin> admin,
                   kc::Admin::Create({{"bootstrap.servers", s.bootstrap},
                                      {"client.id", "sluice-bench-pipeline-admin"}}));
  RETURN_IF_ERROR(admin->CreateTopic(topic, 1, 1, {}, kAdminTimeout));
  Status last;
  for (int attempt = 0; attempt < 50; ++attempt) {
    Result<int> n = admin->PartitionCount(topic, kAdminTimeout);
    if (n.ok() && *n == 1) return Status::OK();
    last = n.ok() ? InternalError("topic '{}' has {} partitions, not 1", topic, *n) : n.status();
    std::this_thread::sleep_for(100ms);
  }
  return last;
}

struct Produced {
  int64_t messages = 0;
  int64_t bytes = 0;
  double seconds = 0;
  Totals totals;
};

// Produces events 0 … n-1 to partition 0 of `topic` as fast as the producer takes them;
// timed to the last delivery report.
Result<Produced> Publish(const Settings& s, const std::string& topic, int64_t n) {
  Status first_failure;
  auto on_delivery = [&first_failure](const kc::DeliveryReport& r) {
    if (!r.status.ok() && first_failure.ok()) first_failure = r.status;
  };
  ASSIGN_OR_RETURN(std::unique_ptr<kc::Producer> producer,
                   kc::Producer::Create(s.producer, on_delivery));
  Produced p;
  std::string value;
  std::pair<int64_t, std::string> ts_cache{-1, ""};
  int64_t start = MonotonicNanos();
  for (int64_t i = 0; i < n; ++i) {
    if (s.format == "json") {
      MakeEvent(i, &value, &ts_cache);
    } else {
      MakeFramedEvent(i, s.format, s.schema_id, &value);
    }
    p.totals.Add(i);
    p.bytes += static_cast<int64_t>(value.size());
    while (true) {
      Status st = producer->Produce(topic, 0, {}, value);
      if (st.ok()) break;
      if (st.code() != StatusCode::kResourceExhausted) return st;
      producer->Poll(1ms);
    }
    if ((i & 1023) == 0) producer->Poll(0ms);
    if (!first_failure.ok()) return first_failure;
  }
  RETURN_IF_ERROR(producer->Flush(kFlushTimeout));
  p.seconds = Seconds(start, MonotonicNanos());
  RETURN_IF_ERROR(first_failure);
  kc::ProducerCounters c = producer->counters();
  if (c.delivered != static_cast<uint64_t>(n) || c.failed != 0) {
    return InternalError("produce: {} events produced, {} delivered, {} failed", n, c.delivered,
                         c.failed);
  }
  p.messages = n;
  return p;
}

// ---------------------------------------------------------------------------------------
// The reference: the same SQL over the same events already in DuckDB, batch by batch.

// One in-process DuckDB (1 thread, as a pipeline's) holding the topic's events as
// all_events. Lifecycle: Load, then Measure per batch size; owned by one thread.
class Ceiling {
 public:
  // `window`: the events as --window's pipelines decode them (StructuredBatch's table
  // with the time).
  static Result<std::unique_ptr<Ceiling>> Load(int64_t n, bool inferred, bool window,
                                               const Totals& expect) {
    std::unique_ptr<Ceiling> c(new Ceiling());
    c->n_ = n;
    c->table_ = inferred ? "batch" : "events";
    ASSIGN_OR_RETURN(c->db_,
                     duck::Database::Open({.memory_limit_bytes = int64_t{8} << 30, .threads = 1}));
    ASSIGN_OR_RETURN(c->conn_, duck::Connection::Open(*c->db_));
    RETURN_IF_ERROR(c->conn_->Execute(EventsSql(n, inferred, window)));
    // The same events as those published: per city, the count and the sum of amounts.
    ASSIGN_OR_RETURN(
        auto rows,
        c->conn_->QueryText("SELECT properties.city, count(*), round(sum(properties.amount) * 100) "
                            "FROM all_events GROUP BY 1"));
    int64_t seen = 0;
    for (const auto& row : rows) {
      auto it = std::find(kCities.begin(), kCities.end(), row[0].value_or(""));
      if (it == kCities.end())
        return InternalError("reference: unexpected city '{}'", row[0].value_or("NULL"));
      size_t k = static_cast<size_t>(it - kCities.begin());
      int64_t count = std::stoll(row[1].value_or("0"));
      double cents = std::stod(row[2].value_or("0"));
      if (count != expect.count[k] ||
          std::abs(cents - static_cast<double>(expect.cents[k])) > 1 + 1e-9 * cents) {
        return InternalError(
            "reference: {} has {} events summing to {} cents; the producer sent {} summing to {}",
            kCities[k], count, cents, expect.count[k], expect.cents[k]);
      }
      seen += count;
    }
    if (seen != n) return InternalError("reference: {} events, not {}", seen, n);
    return c;
  }

  // msgs/s of the handler's `sql`, prepared once, over consecutive batches of `batch` rows,
  // each served from chunks already in memory through a view named like the handler's
  // table: what the pipeline does once a batch is decoded. The batches are cut before
  // the clock starts.
  Result<double> Measure(int64_t batch, const std::string& sql) {
    ASSIGN_OR_RETURN(
        auto cut,
        duck::PreparedStatement::Prepare(
            *conn_,
            "SELECT * EXCLUDE (rid) FROM all_events WHERE rid >= $1 AND rid < $2 ORDER BY rid"));
    std::vector<duck::QueryResult> results;  // declared first: the chunks point into them
    std::vector<std::vector<duck::DataChunk>> batches;
    std::vector<std::string> names;
    std::vector<duck::LogicalType> types;
    for (int64_t from = 0; from < n_; from += batch) {
      RETURN_IF_ERROR(cut->BindInt64(1, from));
      RETURN_IF_ERROR(cut->BindInt64(2, std::min(n_, from + batch)));
      ASSIGN_OR_RETURN(duck::QueryResult r, cut->Execute());
      if (names.empty()) {
        for (size_t i = 0; i < r.column_count(); ++i) names.push_back(r.column_name(i));
        types = r.column_logical_types();
      }
      batches.push_back(r.TakeChunks());
      results.push_back(std::move(r));
    }
    // The view is named like the handler's table; the table itself is the reference data.
    ASSIGN_OR_RETURN(auto view, duck::ChunkView::Create(*conn_, table_, names, std::move(types)));
    ASSIGN_OR_RETURN(auto query, duck::PreparedStatement::Prepare(*conn_, sql));
    int64_t start = MonotonicNanos();
    for (const std::vector<duck::DataChunk>& b : batches) {
      std::vector<const duck::DataChunk*> chunks;
      for (const duck::DataChunk& c : b) chunks.push_back(&c);
      view->SetChunks(chunks);
      ASSIGN_OR_RETURN(duck::QueryResult r, query->Execute());
      if (r.row_count() == 0) return InternalError("reference: no rows for a batch");
    }
    double secs = Seconds(start, MonotonicNanos());
    return secs > 0 ? static_cast<double>(n_) / secs : 0;
  }

 private:
  Ceiling() = default;
  int64_t n_ = 0;
  std::string table_;
  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

// ---------------------------------------------------------------------------------------
// A pipeline run.

std::string ShortHandler(const std::string& handler) { return handler.substr(9); }

// The handler's SQL (`window`: --window's pre-aggregation), over the table it reads.
std::string HandlerSql(const std::string& handler, bool window) {
  bool structured = handler == "handlers.StructuredBatch";
  std::string_view table = structured ? "events" : "batch";
  if (!window) return fmt::format(fmt::runtime(kHandlerSql), table);
  return fmt::format(fmt::runtime(kWindowHandlerSql), table,
                     structured ? "\"timestamp\"" : "CAST(\"timestamp\" AS TIMESTAMPTZ)");
}

// --in-process: the decoder's ceiling. The pipeline's decode and SQL over the same events'
// JSON already in memory (no source, no sink): batches of `batch` messages decoded as the
// handler decodes them (in memory, its decode_threads default) and the handler's SQL run
// over each. Over the first million events at most (a rate per message; all ten million
// would hold 2 GB of text).
Result<double> DecoderCeiling(const std::string& handler, int64_t batch, int64_t n) {
  n = std::min<int64_t>(n, 1'000'000);
  std::string text;
  std::vector<std::pair<size_t, size_t>> at;
  std::string value;
  std::pair<int64_t, std::string> ts_cache;
  for (int64_t i = 0; i < n; ++i) {
    MakeEvent(i, &value, &ts_cache);
    at.emplace_back(text.size(), value.size());
    text += value;
  }
  std::vector<kafka::client::Message> messages(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    kafka::client::Message& m = messages[static_cast<size_t>(i)];
    m.topic = "events";
    m.partition = 0;
    m.offset = i;
    m.timestamp_ms = kBaseEpochMs + i;
    m.value = std::string_view(text).substr(at[static_cast<size_t>(i)].first,
                                            at[static_cast<size_t>(i)].second);
  }
  const bool structured = handler == "handlers.StructuredBatch";
  const size_t threads = pipeline::DecodeThreads(pipeline::HandlerConfig{});
  ASSIGN_OR_RETURN(auto db,
                   duck::Database::Open({.memory_limit_bytes = int64_t{256} << 20, .threads = 1}));
  ASSIGN_OR_RETURN(auto conn, duck::Connection::Open(*db));
  std::unique_ptr<json::StructuredDecoder> s;
  std::unique_ptr<json::InferredDecoder> inferred;
  if (structured) {
    RETURN_IF_ERROR(conn->Execute(std::string(kStructuredTable)));
    ASSIGN_OR_RETURN(s, json::StructuredDecoder::Create(*conn, "events",
                                                        {.in_memory = true, .threads = threads}));
  } else {
    ASSIGN_OR_RETURN(inferred,
                     json::InferredDecoder::Create(*conn, {.in_memory = true, .threads = threads}));
  }
  std::unique_ptr<duck::PreparedStatement> query;
  std::vector<json::DecodeError> errors;
  const int64_t start = MonotonicNanos();
  for (int64_t from = 0; from < n; from += batch) {
    std::span<const kafka::client::Message> b(messages.data() + from,
                                              static_cast<size_t>(std::min(batch, n - from)));
    Result<size_t> rows = structured ? s->Decode(b, &errors) : inferred->Decode(b, &errors);
    if (!rows.ok()) return rows.status();
    if (!errors.empty()) return InternalError("decoder ceiling: {}", errors[0].reason);
    if (!query) {
      ASSIGN_OR_RETURN(query, duck::PreparedStatement::Prepare(*conn, HandlerSql(handler, false)));
    }
    ASSIGN_OR_RETURN(duck::QueryResult r, query->Execute());
    if (r.row_count() == 0) return InternalError("decoder ceiling: no rows for a batch");
  }
  const double secs = Seconds(start, MonotonicNanos());
  return secs > 0 ? static_cast<double>(n) / secs : 0;
}

// --iceberg: every event through, as columns.
constexpr std::string_view kPassthroughSql =
    "SELECT event, properties.city AS city, properties.amount AS amount, \"timestamp\" FROM events";
// --sink postgres: the table of kPassthroughSql's rows.
constexpr std::string_view kPostgresTable = "events";
constexpr std::string_view kPostgresTableSql =
    "CREATE TABLE events (event text, city text, amount double precision, "
    "\"timestamp\" timestamptz)";

// A pipeline file. With `window`, the handler's rows go into that window (noop sink for
// what it emits) instead of a sink, and a non-empty `state_path` adds pipeline.state.
std::string PipelineYaml(const Settings& s, const std::string& handler, int64_t batch,
                         const std::string& topic, const std::string& group, int flush_seconds,
                         const WindowKind* window = nullptr, const std::string& state_path = "",
                         const std::string& iceberg_warehouse = "",
                         const std::string& postgres_dsn = "") {
  bool structured = handler == "handlers.StructuredBatch";
  std::string properties;
  if (!s.consumer_properties.empty()) {
    properties = "      properties:\n";
    for (const auto& [k, v] : s.consumer_properties)
      properties += fmt::format("        {}: '{}'\n", k, v);
  }
  if (s.fetch_max_bytes > 0 || s.fetch_max_partition_bytes > 0) {
    properties += "      fetch:\n";
    if (s.fetch_max_bytes > 0)
      properties += fmt::format("        max_bytes: {}\n", s.fetch_max_bytes);
    if (s.fetch_max_partition_bytes > 0) {
      properties += fmt::format("        max_partition_bytes: {}\n", s.fetch_max_partition_bytes);
    }
  }
  if (s.format != "json") {
    properties += fmt::format("      format: {}\n      schema_registry:\n        url: {}\n",
                              s.format, s.registry_url);
  }
  std::string out;
  if (structured) {
    out += fmt::format(
        "commands:\n  - name: events table\n    sql: {}\n\n",
        window != nullptr || s.iceberg || s.postgres ? kWindowStructuredTable : kStructuredTable);
  }
  std::string after_handler = "  sink:\n    type: noop\n";
  if (!iceberg_warehouse.empty()) {
    after_handler = fmt::format(
        "  sink:\n    type: iceberg\n    iceberg:\n      catalog_name: bench\n      table_name: "
        "bench.events\n"
        "      warehouse: '{}'\n      commit_interval_seconds: {}\n",
        iceberg_warehouse, s.iceberg_commit_seconds);
  }
  if (!postgres_dsn.empty()) {
    after_handler = fmt::format(
        "  sink:\n    type: postgres\n    postgres:\n      dsn: '{}'\n      table: {}\n"
        "      mode: append\n{}",
        postgres_dsn, kPostgresTable,
        s.postgres_commit_interval_ms > 0
            ? fmt::format("      commit_interval_ms: {}\n", s.postgres_commit_interval_ms)
            : std::string());
  }
  if (window != nullptr) {
    after_handler = fmt::format(
        "  window:\n"
        "    type: {}\n"
        "    time_column: timestamp\n"
        "    size: {}\n"
        "{}"
        "    emit_sql: |\n"
        "      {}\n"
        "    sink:\n"
        "      type: noop\n",
        window->type, window->size,
        window->slide.empty() ? std::string() : fmt::format("    slide: {}\n", window->slide),
        kWindowEmitSql);
    if (!state_path.empty()) after_handler += fmt::format("  state:\n    path: {}\n", state_path);
  }
  out += fmt::format(
      "pipeline:\n"
      "  name: bench\n"
      "  batch_size: {}\n"
      "  flush_interval_seconds: {}\n"
      "  source:\n"
      "    type: kafka\n"
      "    kafka:\n"
      "      brokers: [{}]\n"
      "      group_id: {}\n"
      "      auto_offset_reset: earliest\n"
      "      topics: [{}]\n"
      "{}{}"
      "  handler:\n"
      "    type: {}\n"
      "{}"
      "    sql: {}\n"
      "{}",
      batch, flush_seconds, s.bootstrap, group, topic, properties,
      s.in_process ? "      in_process: true\n" : "", handler,
      structured ? "    table: events\n" : "",
      window != nullptr         ? "|\n      " + HandlerSql(handler, true)
      : s.iceberg || s.postgres ? std::string(kPassthroughSql)
                                : HandlerSql(handler, false),
      after_handler);
  return out;
}

Result<std::unique_ptr<Child>> StartPipeline(const Settings& s, const std::string& name,
                                             const std::string& yaml) {
  std::string file = fmt::format("{}/{}.yml", s.work_dir, name);
  RETURN_IF_ERROR(WriteFile(file, yaml));
  return Child::Start(
      "sluice pipeline run " + name,
      {s.binary, "pipeline", "run", file, "--http-addr", "127.0.0.1:0", "--no-progress"},
      fmt::format("{}/{}", s.work_dir, name), "sluice: metrics on http://", true,
      kBrokerStartTimeout, kChildStopTimeout);
}

struct Counts {
  double in = 0;
  double rows_out = 0;   // written to the sink and flushed
  double committed = 0;  // the offsets committed to the group, summed over partitions
  double errors = 0;
  double flushes = 0;  // sink flushes; with a window, those of window.sink: emissions
};

Result<Counts> Scrape(const Child& pipeline) {
  ASSIGN_OR_RETURN(std::string text, HttpGet(pipeline.port(), "/metrics"));
  Counts c;
  c.in = MetricSum(text, "sluice_pipeline_messages_in_total");
  c.rows_out = MetricSum(text, "sluice_pipeline_rows_out_total");
  c.committed = MetricSum(text, "sluice_pipeline_committed_offset");
  c.errors = MetricSum(text, "sluice_pipeline_errors_total");
  c.flushes = MetricSum(text, "sluice_pipeline_sink_flush_seconds_count");
  return c;
}

struct RunResult {
  double msgs_per_s = 0;
  double seconds = 0;  // first message to the last
  double peak_rss_mib = 0;
  double working_set_mib = 0;
  double pipeline_cpu = -1;  // CPU seconds of the pipeline process, start to stop
  double broker_cpu = -1;    // of the own broker over the consuming time
  double window_emits =
      0;                  // --window: window.sink flushes (closings that emitted) when all were in
  double state_mib = -1;  // --window with state: the file and its WAL when all were in
  // --iceberg: commits made while consuming, their mean and longest time, and the table
  // after the stop (its last commit made then).
  double commits = 0;
  double commit_mean_s = 0;
  double commit_max_s = 0;
  double table_mib = -1;
  double table_files = 0;
  // --sink postgres: the mean batch (decode, handler, sink write and flush) and the mean
  // sink flush (its commit) while consuming; the same rows through a plain COPY FROM a
  // file, after the run.
  double batch_mean_s = 0;
  double flush_mean_s = 0;
  double copy_rows_per_s = 0;
};

// Bytes of a file, 0 when missing.
int64_t FileBytes(const std::string& path) {
  std::error_code ec;
  auto n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(n);
}

// Runs one pipeline over the `n` events of `topic` under a fresh group: from the first
// scrape that shows messages in to the first that shows all `n`, sampling RssAnon every
// second; then VmHWM, and SIGTERM (exit status 0 required). With `window`, the handler's
// rows go into that window; `state` puts its state in <work_dir>/<name>.duckdb, removed
// when the run ends (each run starts without state). `iceberg` and `postgres` pass every
// event through into that sink (`postgres`: timed until all `n` rows are committed there).
Result<RunResult> RunPipeline(const Settings& s, const std::string& handler, int64_t batch,
                              const std::string& topic, int64_t n, const std::string& name,
                              Child* broker, Progress* progress, const WindowKind* window = nullptr,
                              bool state = false, bool iceberg = false, bool postgres = false,
                              bool on_s3 = false) {
  std::string group = fmt::format("sluice-bench-{}-{}", s.run_id, name);
  std::string state_path = state ? fmt::format("{}/{}.duckdb", s.work_dir, name) : "";
  struct RemoveState {
    std::string path;
    ~RemoveState() {
      if (path.empty()) return;
      std::error_code ec;
      for (const std::string& f : {path, path + ".wal", path + ".tmp"}) fs::remove_all(f, ec);
    }
  } remove_state{state_path};
  std::string warehouse = iceberg ? fmt::format("{}/{}-warehouse", s.work_dir, name) : "";
  if (iceberg && on_s3) warehouse = fmt::format("{}/{}-{}", s.s3_warehouse, s.run_id, name);
  struct RemoveWarehouse {
    std::string path;
    ~RemoveWarehouse() {
      if (path.empty()) return;
      if (lake::IsS3Location(path)) {
        // The run's objects, so that runs do not fill the bucket.
        Result<const lake::Storage*> storage = lake::StorageFor(path);
        if (!storage.ok()) return;
        Result<std::vector<lake::StoredObject>> objects = (*storage)->List(path);
        if (!objects.ok()) return;
        for (const lake::StoredObject& o : *objects) (void)(*storage)->Delete(o.location);
        return;
      }
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } remove_warehouse{warehouse};
  const std::string yaml = PipelineYaml(s, handler, batch, topic, group, 1, window, state_path,
                                        warehouse, postgres ? s.postgres_dsn : std::string());
  std::unique_ptr<Child> p;
  std::vector<std::string> plain_args;  // --in-process: the broker's own, to restart it
  if (!s.in_process) {
    ASSIGN_OR_RETURN(p, StartPipeline(s, name, yaml));
  } else {
    // The pipeline inside the bench's broker: restarted with --pipelines on the same
    // address (and registry), then restarted again without.
    if (broker == nullptr) {
      return FailedPreconditionError(
          "--in-process runs the pipelines inside the bench's own broker: not with --bootstrap");
    }
    const std::string dir = fmt::format("{}/{}-pipelines", s.work_dir, name);
    fs::create_directories(dir);
    RETURN_IF_ERROR(WriteFile(dir + "/bench.yml", yaml));
    plain_args = broker->args();
    for (size_t i = 0; i + 1 < plain_args.size(); ++i) {
      if (plain_args[i] == "--kafka-addr") plain_args[i + 1] = broker->address();
      if (plain_args[i] == "--schema-registry-addr" && !s.registry_url.empty()) {
        plain_args[i + 1] = s.registry_url.substr(s.registry_url.find("//") + 2);
      }
    }
    RETURN_IF_ERROR(broker->Stop());
    std::vector<std::string> args = plain_args;
    args.push_back("--pipelines");
    args.push_back(dir);
    ASSIGN_OR_RETURN(
        p, Child::Start("sluice serve --pipelines " + name, args,
                        fmt::format("{}/{}", s.work_dir, name), "sluice: metrics on http://", false,
                        kBrokerStartTimeout, kChildStopTimeout));
  }
  // In-process, the broker's CPU is the pipeline process's own.
  Child* const broker_process = s.in_process ? nullptr : broker;
  auto fail = [&](Status st) -> Status {
    Status dead = p->CheckAlive();
    if (!dead.ok()) return Status(st.code(), st.message() + "\n" + dead.message());
    return Status(st.code(), st.message() + "\n  pipeline log:\n" + Tail(p->err_path(), 15));
  };
  int64_t started = MonotonicNanos();
  int64_t first_ns = 0, end_ns = 0, last_change_ns = started, next_sample_ns = 0;
  double first_in = 0, last_in = 0, last_flushes = 0;
  double broker_cpu0 = -1;
  std::vector<double> samples;
  const int64_t sample_every = std::chrono::nanoseconds(kSampleEvery).count();
  while (true) {
    std::this_thread::sleep_for(kScrapeEvery);
    int64_t now = MonotonicNanos();
    Result<Counts> c = Scrape(*p);
    if (!c.ok()) return fail(c.status());
    if (c->errors > 0) {
      return fail(InternalError("{}: the pipeline counted {} errors", name, c->errors));
    }
    if (c->in > 0 && first_ns == 0) {
      first_ns = now;
      first_in = c->in;
      next_sample_ns = now;
      broker_cpu0 = broker_process != nullptr ? broker_process->CpuSeconds() : -1;
    }
    if (first_ns != 0 && now >= next_sample_ns) {
      int64_t anon = ProcStatusBytes(p->pid(), "RssAnon");
      if (anon >= 0) samples.push_back(static_cast<double>(anon) / kMiB);
      next_sample_ns += sample_every;
      if (progress != nullptr) {
        progress->Show(fmt::format("{}: {} of {} in", name, Grouped(static_cast<uint64_t>(c->in)),
                                   Grouped(static_cast<uint64_t>(n))));
      }
    }
    if (c->in != last_in) {
      last_in = c->in;
      last_change_ns = now;
    }
    // Into PostgreSQL: until every row is committed there, which the group's committed
    // offsets say (the topic's one partition holds the `n` events, offsets 0 to n-1).
    if ((postgres ? c->committed : c->in) >= static_cast<double>(n)) {
      end_ns = now;
      last_flushes = c->flushes;
      break;
    }
    if (first_ns == 0 && now - started > std::chrono::nanoseconds(kFirstMessageTimeout).count()) {
      return fail(AbortedError("{}: no message within {} s of the start", name,
                               kFirstMessageTimeout.count()));
    }
    if (now - last_change_ns > std::chrono::nanoseconds(kStallTimeout).count()) {
      return fail(AbortedError("{}: stuck at {} of {} messages for {} s", name, c->in, n,
                               kStallTimeout.count()));
    }
  }
  if (progress != nullptr) progress->Clear();
  RunResult r;
  r.seconds = Seconds(first_ns, end_ns);
  // Messages counted between the two scrapes, over the time between them: the messages
  // already in at the first scrape are not timed.
  double timed = static_cast<double>(n) - first_in;
  r.msgs_per_s = r.seconds > 0 && timed > 0 ? timed / r.seconds : 0;
  if (broker_process != nullptr && broker_cpu0 >= 0) {
    r.broker_cpu = broker_process->CpuSeconds() - broker_cpu0;
  }
  int64_t anon = ProcStatusBytes(p->pid(), "RssAnon");
  if (anon >= 0) samples.push_back(static_cast<double>(anon) / kMiB);
  int64_t hwm = ProcStatusBytes(p->pid(), "VmHWM");
  r.peak_rss_mib = hwm >= 0 ? static_cast<double>(hwm) / kMiB : 0;
  r.working_set_mib = Median(samples);
  r.pipeline_cpu = p->CpuSeconds();
  if (window != nullptr) r.window_emits = last_flushes;
  if (state)
    r.state_mib =
        static_cast<double>(FileBytes(state_path) + FileBytes(state_path + ".wal")) / kMiB;
  if (iceberg) {
    if (Result<std::string> text = HttpGet(p->port(), "/metrics"); text.ok()) {
      r.commits = MetricSum(*text, "sluice_pipeline_sink_commit_seconds_count");
      double sum = MetricSum(*text, "sluice_pipeline_sink_commit_seconds_sum");
      r.commit_mean_s = r.commits > 0 ? sum / r.commits : 0;
      r.commit_max_s = MetricSum(*text, "sluice_pipeline_sink_commit_max_seconds");
    }
  }
  if (postgres) {
    if (Result<std::string> text = HttpGet(p->port(), "/metrics"); text.ok()) {
      auto mean = [&](std::string_view name) {
        double count = MetricSum(*text, fmt::format("{}_count", name));
        return count > 0 ? MetricSum(*text, fmt::format("{}_sum", name)) / count : 0.0;
      };
      r.batch_mean_s = mean("sluice_pipeline_batch_seconds");
      r.flush_mean_s = mean("sluice_pipeline_sink_flush_seconds");
    }
  }
  Status stopped = p->Stop();
  if (!stopped.ok()) return stopped;
  if (s.in_process) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<Child> fresh,
        Child::Start("sluice serve", plain_args,
                     fmt::format("{}/broker-after-{}", s.work_dir, name),
                     "sluice: serving Kafka on ", false, kBrokerStartTimeout, kChildStopTimeout));
    broker->Swap(*fresh);
  }
  if (iceberg && on_s3) {
    int64_t bytes = 0, files = 0;
    ASSIGN_OR_RETURN(const lake::Storage* storage, lake::StorageFor(warehouse));
    ASSIGN_OR_RETURN(std::vector<lake::StoredObject> objects,
                     storage->List(warehouse + "/bench/events/data"));
    for (const lake::StoredObject& o : objects) {
      if (!o.location.ends_with(".parquet")) continue;
      bytes += static_cast<int64_t>(o.size);
      ++files;
    }
    r.table_mib = static_cast<double>(bytes) / kMiB;
    r.table_files = static_cast<double>(files);
  } else if (iceberg) {
    int64_t bytes = 0, files = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(warehouse + "/bench/events/data", ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_regular_file() && it->path().extension() == ".parquet") {
        bytes += static_cast<int64_t>(it->file_size());
        ++files;
      }
    }
    r.table_mib = static_cast<double>(bytes) / kMiB;
    r.table_files = static_cast<double>(files);
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// Output.

struct Cell {
  std::string handler;
  std::string format = "json";
  std::string source = "kafka";  // --in-process: "kafka" or "in_process"
  double kafka_msgs_per_s = 0;   // --in-process: the kafka cell of the same handler and batch
  double json_msgs_per_s = 0;    // --format: the json cell of the same handler and batch
  int64_t batch = 0;
  const WindowKind* window = nullptr;  // --window
  bool state = false;                  // --window: with pipeline.state
  std::vector<RunResult> runs;
  double ceiling = 0;          // DuckDB-only msgs/s
  double decoder_ceiling = 0;  // --in-process: the decoder and SQL over the bytes in memory
  double msgs_per_s() const {
    std::vector<double> v;
    for (const RunResult& r : runs) v.push_back(r.msgs_per_s);
    return Median(v);
  }
  double peak_rss_mib() const {
    std::vector<double> v;
    for (const RunResult& r : runs) v.push_back(r.peak_rss_mib);
    return Median(v);
  }
  double working_set_mib() const {
    std::vector<double> v;
    for (const RunResult& r : runs) v.push_back(r.working_set_mib);
    return Median(v);
  }
  double pipeline_cpu() const {
    std::vector<double> v;
    for (const RunResult& r : runs) v.push_back(r.pipeline_cpu);
    return Median(v);
  }
  double broker_cpu() const {
    std::vector<double> v;
    for (const RunResult& r : runs) v.push_back(r.broker_cpu);
    return Median(v);
  }
  double seconds() const {
    std::vector<double> v;
    for (const RunResult& r : runs) v.push_back(r.seconds);
    return Median(v);
  }
  double window_emits() const {
    std::vector<double> v;
    for (const RunResult& r : runs) v.push_back(r.window_emits);
    return Median(v);
  }
  double state_mib() const {
    std::vector<double> v;
    for (const RunResult& r : runs) v.push_back(r.state_mib);
    return Median(v);
  }
};

struct Context {
  MachineInfo machine;
  std::string load_start;
  std::string commit;
  bool own_broker = false;
  std::string compression;
  std::string topic;
  Produced produced;
};

Json Common(const Context& ctx, const Settings& s) {
  Json j;
  j["messages"] = s.messages;
  j["runs"] = s.runs;
  j["event_bytes_avg"] = ctx.produced.messages > 0
                             ? Round(static_cast<double>(ctx.produced.bytes) /
                                         static_cast<double>(ctx.produced.messages),
                                     1)
                             : 0.0;
  j["compression"] = ctx.compression;
  Json props = Json::object();
  for (const auto& [k, v] : s.consumer_properties) props[k] = v;
  j["consumer_properties"] = props;
  j["fetch_max_bytes"] = s.fetch_max_bytes > 0 ? Json(s.fetch_max_bytes) : Json(nullptr);
  j["fetch_max_partition_bytes"] =
      s.fetch_max_partition_bytes > 0 ? Json(s.fetch_max_partition_bytes) : Json(nullptr);
  j["broker"] = ctx.own_broker ? "own" : "external";
  j["topic"] = ctx.topic;
  j["cpu"] = ctx.machine.cpu_model;
  j["cores"] = ctx.machine.cores;
  j["memory_bytes"] = ctx.machine.memory_bytes;
  j["kernel"] = ctx.machine.kernel;
  j["load_start"] = ctx.load_start;
  j["load_now"] = LoadAverages();
  j["commit"] = ctx.commit;
  j["duckdb"] = std::string(duck::LibraryVersion());
  j["librdkafka"] = kc::LibraryVersion();
  return j;
}

void PrintHeader(const Context& ctx, const Settings& s) {
  const MachineInfo& m = ctx.machine;
  if (s.iceberg) {
    fmt::print(
        "sluice bench pipeline --iceberg: {} events, {} run(s) per cell (median), into an Iceberg "
        "table beside a noop sink\n",
        Grouped(static_cast<uint64_t>(s.messages)), s.runs);
  } else if (s.postgres) {
    fmt::print(
        "sluice bench pipeline --sink postgres: {} events, {} run(s) per cell (median), into a "
        "PostgreSQL table beside a noop sink and a plain COPY FROM a file of the same rows\n",
        Grouped(static_cast<uint64_t>(s.messages)), s.runs);
  } else if (s.window) {
    fmt::print(
        "sluice bench pipeline --window: {} events, {} run(s) per cell (median), windows "
        "emitting into a noop sink\n",
        Grouped(static_cast<uint64_t>(s.messages)), s.runs);
  } else {
    fmt::print("sluice bench pipeline: {} events, {} run(s) per cell (median), noop sink\n",
               Grouped(static_cast<uint64_t>(s.messages)), s.runs);
  }
  fmt::print("  machine   {}, {} cores, {} memory, {}; load average {} (1/5/15 min) at start\n",
             m.cpu_model, m.cores, FormatBinaryBytes(m.memory_bytes), m.kernel, ctx.load_start);
  fmt::print("  sluice    {}, duckdb {}, librdkafka {}\n",
             ctx.commit.empty() ? "commit unknown" : "commit " + ctx.commit, duck::LibraryVersion(),
             kc::LibraryVersion());
  fmt::print("  broker    {} ({}), topic {} with 1 partition\n",
             ctx.own_broker ? "own `sluice serve` child" : "external", s.bootstrap, ctx.topic);
  const Produced& p = ctx.produced;
  fmt::print(
      "  produce   {} events of {:.0f} B on average in {:.1f} s ({}/s); acks 1, linger.ms 5, "
      "batch.size 1000000, compression {}\n",
      Grouped(static_cast<uint64_t>(p.messages)),
      p.messages > 0 ? static_cast<double>(p.bytes) / static_cast<double>(p.messages) : 0.0,
      p.seconds,
      Grouped(
          static_cast<uint64_t>(p.seconds > 0 ? static_cast<double>(p.messages) / p.seconds : 0)),
      ctx.compression);
  if (s.window) {
    fmt::print(
        "  events    stamped 1 ms apart from 2025-01-01T00:00:00Z: {:.1f} minutes of event time\n",
        static_cast<double>(s.messages) / 60'000.0);
    fmt::print(
        "  pipeline  `sluice pipeline run` child per run, fresh group, earliest; handler SQL: {}\n",
        fmt::format(fmt::runtime(kWindowHandlerSql), "<table>", "\"timestamp\""));
    fmt::print(
        "            (InferredMemBatch: CAST(\"timestamp\" AS TIMESTAMPTZ)); StructuredBatch "
        "table: {}\n",
        kWindowStructuredTable);
  } else if (s.iceberg || s.postgres) {
    fmt::print("  pipeline  `sluice pipeline run` child per run, fresh group, earliest; SQL: {}\n",
               kPassthroughSql);
    fmt::print("            StructuredBatch table: {}\n", kWindowStructuredTable);
  } else {
    fmt::print("  pipeline  `sluice pipeline run` child per run, fresh group, earliest; SQL: {}\n",
               fmt::format(fmt::runtime(kHandlerSql), "<table>"));
    fmt::print("            StructuredBatch table: {}\n", kStructuredTable);
  }
  if (s.in_process_asked) {
    fmt::print(
        "  source    kafka: as above; in_process: the same pipeline inside the bench's own\n"
        "            `sluice serve --pipelines` (restarted for the run, then without),\n"
        "            source.kafka.in_process: true; its peak RSS and CPU are the whole serve\n"
        "            process's, the broker's included (docs/design/0023)\n");
  }
  std::string props;
  for (const auto& [k, v] : s.consumer_properties) props += fmt::format(" {}={}", k, v);
  fmt::print(
      "            source.kafka.properties:{}; fetch.max_bytes {}, max_partition_bytes {}\n",
      props.empty() ? " none" : props,
      s.fetch_max_bytes > 0 ? std::to_string(s.fetch_max_bytes) : "default",
      s.fetch_max_partition_bytes > 0 ? std::to_string(s.fetch_max_partition_bytes) : "default");
  if (s.window) {
    std::string kinds;
    for (const WindowKind& w : kWindows) {
      kinds += fmt::format("{}{} (size {}{})", kinds.empty() ? "" : ", ", w.type, w.size,
                           w.slide.empty() ? "" : fmt::format(", slide {}", w.slide));
    }
    fmt::print(
        "  window    pipeline.window on \"timestamp\", grace 0: {}; emit_sql: {}; sink noop\n",
        kinds, kWindowEmitSql);
    fmt::print(
        "  state     yes: pipeline.state.path, a new file in the work directory per run, removed "
        "after; "
        "no: in memory\n");
  }
  fmt::print(
      "  msgs/s    from the first /metrics scrape (every {} ms) showing messages in to the first "
      "showing all{}\n",
      kScrapeEvery.count(),
      s.postgres ? " in the group's committed offset (every row committed in PostgreSQL)" : "");
  if (s.iceberg || s.postgres) {
    fmt::print("  peak RSS  the pipeline's VmHWM when all are in; median of the runs per cell\n");
    std::fflush(stdout);
    return;
  }
  fmt::print(
      "  peak RSS  the pipeline's VmHWM when all are in; working set: median of RssAnon sampled "
      "every second while consuming\n");
  fmt::print(
      "  duckdb    the reference: the same {}SQL, prepared once, over the same events already "
      "decoded into DuckDB chunks (1 thread), "
      "one query per batch of rows; ratio = msgs/s / that\n",
      s.window ? "handler " : "");
  if (s.window) {
    fmt::print("            (the handler alone: the window's work and the state are not in it)\n");
  }
  fmt::print(
      "  cpu s     CPU seconds of the pipeline process (start to stop) / of the broker while "
      "consuming\n");
  if (!s.window) {
    if (s.formats.size() > 1) {
      fmt::print(
          "  format    json, or Avro / Protobuf payloads of the same fields in the Confluent "
          "framing (the schema registered with the broker's registry), decoded by schema id; "
          "vs json: msgs/s / the json cell's\n");
    }
    const bool formats = s.formats.size() > 1;
    fmt::print("\n{:<17} {}{:>6} {:>11} {:>9} {:>9} {:>13} {:>6} {:>15} {:>8}{}\n", "handler",
               formats ? fmt::format("{:<9}", "format") : std::string(), "batch", "msgs/s",
               "peak MiB", "ws MiB", "duckdb msgs/s", "ratio", "cpu s", "seconds",
               (formats ? fmt::format(" {:>7}", "vs json") : std::string()) +
                   (s.in_process_asked ? fmt::format(" {:<10} {:>8} {:>14} {:>10}", "source",
                                                     "vs kafka", "decoder msgs/s", "vs decoder")
                                       : std::string()));
    std::fflush(stdout);
    return;
  }
  fmt::print(
      "  emits     window.sink flushes (closings that emitted rows) when all messages were in\n");
  fmt::print(
      "  cost      of the state: 1 - msgs/s with state / without, same window, handler and batch; "
      "sqlflow's published\n"
      "            cost of its state: 47% at batch 500, 29% at 2000, 15% at 5000; target under "
      "half "
      "of it (PASS/MISS)\n\n");
  fmt::print(
      "{:<14} {:<6} {:>6} {:>11} {:>9} {:>9} {:>13} {:>6} {:>15} {:>8} {:>5} {:>6} {:>7}  {}\n",
      "window", "state", "batch", "msgs/s", "peak MiB", "ws MiB", "duckdb msgs/s", "ratio", "cpu s",
      "seconds", "emits", "cost", "sqlflow", "target");
  std::fflush(stdout);
}

// What every cell's JSON object holds: the cell and each of its runs.
Json CellJson(const Cell& c, double ratio) {
  Json j;
  j["bench"] = "pipeline";
  j["handler"] = c.handler;
  j["format"] = c.format;
  j["source"] = c.source;
  j["batch_size"] = c.batch;
  if (c.source == "in_process" && c.kafka_msgs_per_s > 0) {
    j["kafka_msgs_per_s"] = Round(c.kafka_msgs_per_s, 1);
    j["vs_kafka"] = Round(c.msgs_per_s() / c.kafka_msgs_per_s, 4);
  }
  if (c.format != "json" && c.json_msgs_per_s > 0) {
    j["json_msgs_per_s"] = Round(c.json_msgs_per_s, 1);
    j["vs_json"] = Round(c.msgs_per_s() / c.json_msgs_per_s, 4);
  }
  j["msgs_per_s"] = Round(c.msgs_per_s(), 1);
  j["peak_rss_mib"] = Round(c.peak_rss_mib(), 1);
  j["working_set_mib"] = Round(c.working_set_mib(), 1);
  j["duckdb_only_msgs_per_s"] = Round(c.ceiling, 1);
  if (c.decoder_ceiling > 0) {
    j["decoder_only_msgs_per_s"] = Round(c.decoder_ceiling, 1);
    j["vs_decoder_only"] = Round(c.msgs_per_s() / c.decoder_ceiling, 4);
  }
  j["ratio"] = Round(ratio, 4);
  j["seconds"] = Round(c.seconds(), 3);
  j["pipeline_cpu_seconds"] = Round(c.pipeline_cpu(), 2);
  j["broker_cpu_seconds"] = c.broker_cpu() >= 0 ? Json(Round(c.broker_cpu(), 2)) : Json(nullptr);
  Json runs = Json::array();
  for (const RunResult& r : c.runs) {
    runs.push_back({{"msgs_per_s", Round(r.msgs_per_s, 1)},
                    {"peak_rss_mib", Round(r.peak_rss_mib, 1)},
                    {"working_set_mib", Round(r.working_set_mib, 1)},
                    {"seconds", Round(r.seconds, 3)}});
  }
  j["each_run"] = runs;
  return j;
}

void PrintCell(const Cell& c, const Context& ctx, const Settings& s, bool json) {
  double ratio = c.ceiling > 0 ? c.msgs_per_s() / c.ceiling : 0;
  if (json) {
    Json j = CellJson(c, ratio);
    j.update(Common(ctx, s));
    fmt::print("{}\n", j.dump());
  } else {
    auto secs = [](double v) { return v >= 0 ? fmt::format("{:.1f}", v) : std::string("-"); };
    std::string vs_json;
    if (s.formats.size() > 1) {
      vs_json = c.format == "json" || c.json_msgs_per_s <= 0
                    ? fmt::format(" {:>7}", "-")
                    : fmt::format(" {:>7.2f}", c.msgs_per_s() / c.json_msgs_per_s);
    }
    std::string vs_kafka;
    if (s.in_process_asked) {
      vs_kafka = fmt::format(" {:<10} {:>8} {:>14} {:>10}", c.source,
                             c.source == "kafka" || c.kafka_msgs_per_s <= 0
                                 ? std::string("-")
                                 : fmt::format("{:.2f}", c.msgs_per_s() / c.kafka_msgs_per_s),
                             Grouped(static_cast<uint64_t>(c.decoder_ceiling + 0.5)),
                             c.decoder_ceiling > 0
                                 ? fmt::format("{:.2f}", c.msgs_per_s() / c.decoder_ceiling)
                                 : std::string("-"));
    }
    vs_json += vs_kafka;
    fmt::print("{:<17} {}{:>6} {:>11} {:>9.1f} {:>9.1f} {:>13} {:>6.2f} {:>15} {:>8.2f}{}\n",
               ShortHandler(c.handler),
               s.formats.size() > 1 ? fmt::format("{:<9}", c.format) : std::string(), c.batch,
               Grouped(static_cast<uint64_t>(c.msgs_per_s() + 0.5)), c.peak_rss_mib(),
               c.working_set_mib(), Grouped(static_cast<uint64_t>(c.ceiling + 0.5)), ratio,
               secs(c.pipeline_cpu()) + " / " + secs(c.broker_cpu()), c.seconds(), vs_json);
  }
  std::fflush(stdout);
}

// A --window cell; `without` is the same window, handler and batch without state (for a
// cell with state), which gives the state's cost.
void PrintWindowCell(const Cell& c, const Cell* without, const Context& ctx, const Settings& s,
                     bool json) {
  double ratio = c.ceiling > 0 ? c.msgs_per_s() / c.ceiling : 0;
  // Each is known only for a cell with state (sqlflow's only at its three batch sizes).
  const bool has_cost = c.state && without != nullptr && without->msgs_per_s() > 0;
  const double cost = has_cost ? 1 - c.msgs_per_s() / without->msgs_per_s() : 0;
  const std::optional<double> published = SqlflowStateCost(c.batch);
  const bool has_sqlflow = c.state && published.has_value();
  const double sqlflow = published.value_or(0);
  const bool has_pass = has_cost && has_sqlflow;
  const bool pass = has_pass && cost < sqlflow / 2;
  if (json) {
    Json j = CellJson(c, ratio);
    j["window"] = c.window->name;
    j["state"] = c.state;
    j["window_emits"] = static_cast<int64_t>(c.window_emits());
    j["state_file_mib"] = c.state ? Json(Round(c.state_mib(), 1)) : Json(nullptr);
    j["state_cost"] = has_cost ? Json(Round(cost, 4)) : Json(nullptr);
    j["sqlflow_state_cost"] = has_sqlflow ? Json(sqlflow) : Json(nullptr);
    j["state_cost_target"] = has_sqlflow ? Json(Round(sqlflow / 2, 4)) : Json(nullptr);
    j["state_cost_pass"] = has_pass ? Json(pass) : Json(nullptr);
    j.update(Common(ctx, s));
    fmt::print("{}\n", j.dump());
  } else {
    auto secs = [](double v) { return v >= 0 ? fmt::format("{:.1f}", v) : std::string("-"); };
    fmt::print(
        "{:<14} {:<6} {:>6} {:>11} {:>9.1f} {:>9.1f} {:>13} {:>6.2f} {:>15} {:>8.2f} {:>5} {:>6} "
        "{:>7}{}\n",
        c.window->label, c.state ? "yes" : "no", c.batch,
        Grouped(static_cast<uint64_t>(c.msgs_per_s() + 0.5)), c.peak_rss_mib(), c.working_set_mib(),
        Grouped(static_cast<uint64_t>(c.ceiling + 0.5)), ratio,
        secs(c.pipeline_cpu()) + " / " + secs(c.broker_cpu()), c.seconds(),
        static_cast<int64_t>(c.window_emits()),
        has_cost ? fmt::format("{:.1f}%", cost * 100) : std::string("-"),
        has_sqlflow ? fmt::format("{:.0f}%", sqlflow * 100) : std::string("-"),
        has_pass ? fmt::format("  {} (< {:.1f}%)", pass ? "PASS" : "MISS", sqlflow * 50)
                 : std::string());
  }
  std::fflush(stdout);
}

void PrintCheck(const std::string& check, const std::string& handler, const std::string& a_name,
                double a, const std::string& b_name, double b, bool pass, const Context& ctx,
                const Settings& s, bool json, const std::string& detail) {
  if (json) {
    Json j;
    j["bench"] = "pipeline";
    j["check"] = check;
    j["handler"] = handler;
    j[a_name] = Round(a, 1);
    j[b_name] = Round(b, 1);
    j["pass"] = pass;
    j["detail"] = detail;
    j.update(Common(ctx, s));
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("  {:<8} {:<17} {} {:.1f} MiB, {} {:.1f} MiB: {:+.1f}% {} ({})\n", check,
               ShortHandler(handler), a_name, a, b_name, b, b > 0 ? 100 * (a - b) / b : 0.0,
               pass ? "PASS" : "FAIL", detail);
  }
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------
// The paced run: events at a fixed rate for some minutes, one pipeline per handler.

struct PacedResult {
  std::string handler;
  double minute_two_mib = 0;  // the reference minute's (two by default)
  double last_minute_mib = 0;
  std::vector<double> per_minute_mib;
  int64_t produced = 0;
  double consumed = 0;
};

Result<std::vector<PacedResult>> RunPaced(const Settings& s, const PipelineBenchOptions& o,
                                          Progress* progress) {
  std::string topic = fmt::format("sluice-bench-pipeline-{}-paced", s.run_id);
  RETURN_IF_ERROR(CreateTopic(s, topic));
  int64_t batch = *std::min_element(s.batch_sizes.begin(), s.batch_sizes.end());
  std::vector<std::unique_ptr<Child>> pipelines;
  std::vector<std::string> labels;  // "handlers.X" or, with --window, "handlers.X <window>"
  for (const std::string& h : s.handlers) {
    if (!s.window) {
      std::string name = fmt::format("paced-{}", ShortHandler(h));
      std::string group = fmt::format("sluice-bench-{}-{}", s.run_id, name);
      ASSIGN_OR_RETURN(std::unique_ptr<Child> p,
                       StartPipeline(s, name, PipelineYaml(s, h, batch, topic, group, 1)));
      pipelines.push_back(std::move(p));
      labels.push_back(h);
      continue;
    }
    // --window: each window in memory and with its state on file, whose rows come and go
    // as windows close (the events' times advance with the clock at 1000/s); the pair
    // tells the state's share of any growth from the window's.
    for (const WindowKind& w : kWindows) {
      for (bool state : {false, true}) {
        std::string name =
            fmt::format("paced-{}-{}-{}", ShortHandler(h), w.name, state ? "state" : "memory");
        std::string group = fmt::format("sluice-bench-{}-{}", s.run_id, name);
        std::string state_path = state ? fmt::format("{}/{}.duckdb", s.work_dir, name) : "";
        ASSIGN_OR_RETURN(
            std::unique_ptr<Child> p,
            StartPipeline(s, name, PipelineYaml(s, h, batch, topic, group, 1, &w, state_path)));
        pipelines.push_back(std::move(p));
        labels.push_back(fmt::format("{} {} {}", h, w.name, state ? "state" : "memory"));
      }
    }
  }
  kc::Config config = s.producer;
  config["linger.ms"] = "1";
  Status first_failure;
  auto on_delivery = [&first_failure](const kc::DeliveryReport& r) {
    if (!r.status.ok() && first_failure.ok()) first_failure = r.status;
  };
  ASSIGN_OR_RETURN(std::unique_ptr<kc::Producer> producer,
                   kc::Producer::Create(config, on_delivery));
  const int64_t total_ns = int64_t{o.paced_minutes} * 60'000'000'000;
  std::vector<std::vector<std::pair<double, double>>> samples(pipelines.size());  // (t s, MiB)
  std::string value;
  std::pair<int64_t, std::string> ts_cache{-1, ""};
  const int64_t start = MonotonicNanos();
  int64_t next_sample = start;
  int64_t i = 0;
  while (true) {
    int64_t now = MonotonicNanos();
    if (now - start >= total_ns) break;
    int64_t due =
        static_cast<int64_t>(static_cast<__int128>(now - start) * o.paced_rate / 1'000'000'000);
    for (; i <= due; ++i) {
      MakeEvent(i, &value, &ts_cache);
      RETURN_IF_ERROR(producer->Produce(topic, 0, {}, value));
    }
    producer->Poll(0ms);
    RETURN_IF_ERROR(first_failure);
    if (now >= next_sample) {
      double t = Seconds(start, now);
      for (size_t k = 0; k < pipelines.size(); ++k) {
        RETURN_IF_ERROR(pipelines[k]->CheckAlive());
        int64_t anon = ProcStatusBytes(pipelines[k]->pid(), "RssAnon");
        if (anon >= 0) samples[k].push_back({t, static_cast<double>(anon) / kMiB});
      }
      next_sample += std::chrono::nanoseconds(kSampleEvery).count();
      if (progress != nullptr) {
        progress->Show(fmt::format("paced: {:.0f} of {} s, {} events", t, o.paced_minutes * 60,
                                   Grouped(static_cast<uint64_t>(i))));
      }
    }
    std::this_thread::sleep_for(5ms);
  }
  RETURN_IF_ERROR(producer->Flush(kFlushTimeout));
  if (progress != nullptr) progress->Clear();
  std::this_thread::sleep_for(2s);  // the last batch, on the flush interval
  std::vector<PacedResult> out;
  const double end_s = Seconds(start, start + total_ns);
  for (size_t k = 0; k < pipelines.size(); ++k) {
    PacedResult r;
    r.handler = labels[k];
    r.produced = i;
    Result<Counts> c = Scrape(*pipelines[k]);
    if (c.ok()) r.consumed = c->in;
    std::vector<double> two, last;
    std::vector<std::vector<double>> minutes(static_cast<size_t>(o.paced_minutes));
    const double ref = 60.0 * (o.paced_reference - 1);
    for (const auto& [t, mib] : samples[k]) {
      if (t >= ref && t < ref + 60) two.push_back(mib);
      if (t >= end_s - 60) last.push_back(mib);
      size_t m = static_cast<size_t>(t / 60);
      if (m < minutes.size()) minutes[m].push_back(mib);
    }
    r.minute_two_mib = Mean(two);
    r.last_minute_mib = Mean(last);
    for (const std::vector<double>& m : minutes) r.per_minute_mib.push_back(Mean(m));
    RETURN_IF_ERROR(pipelines[k]->Stop());
    out.push_back(r);
  }
  return out;
}

// The paced check (--paced): the working set over the last minute within kTolerance of
// minute two's, per pipeline of RunPaced.
Status PacedChecks(const Settings& s, const PipelineBenchOptions& o, const Context& ctx,
                   Progress* progress, bool* checks_failed) {
  Result<std::vector<PacedResult>> paced = RunPaced(s, o, progress);
  if (!paced.ok()) return paced.status();
  for (const PacedResult& r : *paced) {
    bool pass = r.minute_two_mib > 0 &&
                std::abs(r.last_minute_mib - r.minute_two_mib) <= kTolerance * r.minute_two_mib;
    *checks_failed |= !pass;
    std::vector<std::string> series;
    for (double m : r.per_minute_mib) series.push_back(fmt::format("{:.1f}", m));
    PrintCheck(
        "paced", r.handler, "working_set_last_minute_mib", r.last_minute_mib,
        o.paced_reference == 2 ? std::string("working_set_minute_two_mib")
                               : fmt::format("working_set_minute_{}_mib", o.paced_reference),
        r.minute_two_mib, pass, ctx, s, o.json,
        fmt::format(
            "{}/s for {} min, batch {}; RssAnon mean per minute: {}; {} produced, {} consumed",
            o.paced_rate, o.paced_minutes,
            *std::min_element(s.batch_sizes.begin(), s.batch_sizes.end()), fmt::join(series, " "),
            Grouped(static_cast<uint64_t>(r.produced)),
            Grouped(static_cast<uint64_t>(r.consumed))));
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------------------
// --sink postgres.

// postgresql.conf for the bench's server, after the test settings: a server sized for bulk
// loads rather than the tests' smallest, the same for the sink and the reference.
constexpr std::string_view kPostgresConf =
    "shared_buffers = 128MB\nmax_wal_size = 4GB\nmax_connections = 20\n";

using PgConn = std::unique_ptr<PGconn, decltype(&PQfinish)>;

Result<PgConn> PgConnect(const std::string& dsn) {
  PgConn c(PQconnectdb(dsn.c_str()), &PQfinish);
  if (c == nullptr) return InternalError("PostgreSQL at {}: out of memory", dsn);
  if (PQstatus(c.get()) != CONNECTION_OK) {
    return InternalError("PostgreSQL at {}: {}", dsn, Trim(PQerrorMessage(c.get())));
  }
  return c;
}

// Runs `sql`: the rows it affected (PQcmdTuples) or, for a query, the first column of its
// one row as a number.
Result<int64_t> PgExec(PGconn* c, const std::string& sql) {
  std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(c, sql.c_str()), &PQclear);
  const ExecStatusType st = r != nullptr ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    return InternalError("PostgreSQL: {}: {}", sql,
                         Trim(r != nullptr ? PQresultErrorMessage(r.get()) : PQerrorMessage(c)));
  }
  const char* n = st == PGRES_TUPLES_OK && PQntuples(r.get()) == 1 ? PQgetvalue(r.get(), 0, 0)
                                                                   : PQcmdTuples(r.get());
  if (n == nullptr || *n == '\0') return 0;
  char* end = nullptr;
  const long long v = std::strtoll(n, &end, 10);
  if (*end != '\0') return InternalError("PostgreSQL: {}: '{}' is not a number", sql, n);
  return static_cast<int64_t>(v);
}

std::string PgServerVersion(PGconn* c) {
  const char* v = PQparameterStatus(c, "server_version");
  return v != nullptr ? v : "(version unknown)";
}

// Empties the table and checkpoints, so that each run and each reference starts alike.
Status PgReset(PGconn* c) {
  RETURN_IF_ERROR(PgExec(c, fmt::format("TRUNCATE {}", kPostgresTable)).status());
  return PgExec(c, "CHECKPOINT").status();
}

// The reference of a postgres run: the rows the run committed, written by the server to
// `file` in COPY's text format (and counted: exactly the `n` events), the table emptied,
// and the same file loaded back by a plain COPY FROM, timed. Rows per second; leaves the
// table empty.
Result<double> CopyFromFileRate(PGconn* c, const std::string& file, int64_t n) {
  ASSIGN_OR_RETURN(int64_t rows, PgExec(c, fmt::format("COPY {} TO '{}'", kPostgresTable, file)));
  if (rows != n) {
    return InternalError("the postgres sink's table holds {} rows, not the {} events", rows, n);
  }
  RETURN_IF_ERROR(PgReset(c));
  const int64_t started = MonotonicNanos();
  ASSIGN_OR_RETURN(int64_t loaded,
                   PgExec(c, fmt::format("COPY {} FROM '{}'", kPostgresTable, file)));
  const double seconds = Seconds(started, MonotonicNanos());
  std::error_code ec;
  fs::remove(file, ec);
  RETURN_IF_ERROR(PgReset(c));
  if (loaded != n) return InternalError("COPY FROM loaded {} rows, not {}", loaded, n);
  return seconds > 0 ? static_cast<double>(n) / seconds : 0;
}

// The postgres cells: per batch size, the passthrough pipeline into a noop sink, then into
// the table of `pg`, each followed by its COPY FROM reference.
Status PostgresCells(const Settings& s, const PipelineBenchOptions& o, const Context& ctx,
                     Child* broker, Progress* progress, const sinks::testing::PostgresServer& pg) {
  const std::string h = "handlers.StructuredBatch";
  ASSIGN_OR_RETURN(PgConn conn, PgConnect(pg.dsn()));
  RETURN_IF_ERROR(PgExec(conn.get(), std::string(kPostgresTableSql)).status());
  const std::string file = pg.dir() + "/reference.copy";
  if (!o.json) {
    std::string settings(TrimRight(kPostgresConf));
    for (size_t at; (at = settings.find('\n')) != std::string::npos;) {
      settings.replace(at, 1, ", ");
    }
    fmt::print(
        "  postgres  every event through (handler: {}) into a PostgreSQL {} table ({}; sink.type "
        "postgres, mode append, {}) or a noop sink; msgs/s until every row is committed (the "
        "group's committed offset); reference: the run's rows written to a "
        "file by the server, then loaded back by `COPY events FROM 'file'` (text format), timed "
        "alone; server settings: {}\n\n",
        kPassthroughSql, PgServerVersion(conn.get()), kPostgresTableSql,
        s.postgres_commit_interval_ms > 0
            ? fmt::format("commit_interval_ms {}: the batches streamed into one COPY committed "
                          "every {} ms",
                          s.postgres_commit_interval_ms, s.postgres_commit_interval_ms)
            : std::string("a COPY FROM STDIN and a commit per batch"),
        settings);
    fmt::print("{:<9} {:>7} {:>11} {:>7} {:>12} {:>8} {:>9} {:>9} {:>9}{}\n", "sink", "batch",
               "msgs/s", "vs noop", "COPY rows/s", "vs COPY", "peak MiB", "batch ms", "flush ms",
               s.in_process_asked ? fmt::format(" {:>10}", "source") : std::string());
  }
  // --in-process: each pair of cells over both sources, the noop cell of the same source
  // the reference.
  std::vector<bool> sources = {false};
  if (s.in_process_asked) sources.push_back(true);
  for (int64_t b : s.batch_sizes) {
    for (bool in_process : sources) {
      Settings sc = s;
      sc.in_process = in_process;
      const std::string source = in_process ? "in_process" : "kafka";
      double noop_rate = 0;
      for (bool into_pg : {false, true}) {
        std::vector<RunResult> runs;
        for (int r = 0; r < s.runs; ++r) {
          std::string name = fmt::format("{}-{}-{}run{}", into_pg ? "postgres" : "noop", b,
                                         in_process ? "in-process-" : "", r + 1);
          if (into_pg) RETURN_IF_ERROR(PgReset(conn.get()));
          Result<RunResult> run = RunPipeline(sc, h, b, ctx.topic, s.messages, name, broker,
                                              progress, nullptr, false, false, into_pg);
          if (!run.ok()) return run.status();
          if (into_pg) {
            progress->Show(fmt::format("reference: COPY FROM a file, after {} ...", name));
            Result<double> rate = CopyFromFileRate(conn.get(), file, s.messages);
            progress->Clear();
            if (!rate.ok()) return rate.status();
            run->copy_rows_per_s = *rate;
          }
          runs.push_back(*run);
        }
        auto med = [&](auto f) {
          std::vector<double> v;
          for (const RunResult& r : runs) v.push_back(f(r));
          return Median(v);
        };
        const double rate = med([](const RunResult& r) { return r.msgs_per_s; });
        if (!into_pg) noop_rate = rate;
        const double vs_noop = noop_rate > 0 ? rate / noop_rate : 0;
        const double copy = med([](const RunResult& r) { return r.copy_rows_per_s; });
        const double vs_copy = into_pg && copy > 0 ? rate / copy : 0;
        const double peak = med([](const RunResult& r) { return r.peak_rss_mib; });
        const double batch_ms = 1000 * med([](const RunResult& r) { return r.batch_mean_s; });
        const double flush_ms = 1000 * med([](const RunResult& r) { return r.flush_mean_s; });
        if (o.json) {
          Json j = Common(ctx, s);
          j["sink"] = into_pg ? "postgres" : "noop";
          j["batch_size"] = b;
          if (s.in_process_asked) j["source"] = source;
          j["msgs_per_s"] = Round(rate, 0);
          j["vs_noop"] = Round(vs_noop, 3);
          j["peak_rss_mib"] = Round(peak, 1);
          if (into_pg) {
            j["commit_interval_ms"] = s.postgres_commit_interval_ms;
            j["copy_from_file_rows_per_s"] = Round(copy, 0);
            j["vs_copy_from_file"] = Round(vs_copy, 3);
            j["batch_mean_ms"] = Round(batch_ms, 2);
            j["flush_mean_ms"] = Round(flush_ms, 2);
          }
          fmt::print("{}\n", j.dump());
        } else {
          auto only_pg = [&](std::string text) { return into_pg ? text : std::string("-"); };
          fmt::print("{:<9} {:>7} {:>11} {:>7} {:>12} {:>8} {:>9.1f} {:>9} {:>9}{}\n",
                     into_pg ? "postgres" : "noop", b, Grouped(static_cast<uint64_t>(rate)),
                     fmt::format("{:.2f}", vs_noop), only_pg(Grouped(static_cast<uint64_t>(copy))),
                     only_pg(fmt::format("{:.2f}", vs_copy)), peak,
                     only_pg(fmt::format("{:.2f}", batch_ms)),
                     only_pg(fmt::format("{:.2f}", flush_ms)),
                     s.in_process_asked ? fmt::format(" {:>10}", source) : std::string());
        }
        std::fflush(stdout);
      }
    }
  }
  if (!o.json) fmt::print("\n  load average at the end: {}\n", LoadAverages());
  return Status::OK();
}

// ---------------------------------------------------------------------------------------

Status RunAll(const PipelineBenchOptions& o, const std::string& bootstrap,
              const std::string& work_dir, Child* broker, bool* checks_failed,
              const std::string& registry_url) {
  ASSIGN_OR_RETURN(Settings s, MakeSettings(o, bootstrap, work_dir));
  s.registry_url = registry_url;
  // --sink postgres: the server first (initdb takes seconds), stopped when the cells end.
  std::optional<sinks::testing::PostgresServer> pg;
  if (s.postgres) {
    if (std::string why = sinks::testing::PostgresServer::Unavailable(); !why.empty()) {
      return FailedPreconditionError("--sink postgres: {}", why);
    }
    pg.emplace(std::string(kPostgresConf));
    if (std::string why = pg->Start(); !why.empty()) {
      return InternalError("--sink postgres: starting PostgreSQL: {}", why);
    }
    s.postgres_dsn = pg->dsn();
  }
  Progress progress;
  Context ctx;
  ctx.machine = GetMachineInfo();
  ctx.load_start = LoadAverages();
  ctx.commit = SourceCommit();
  ctx.own_broker = broker != nullptr;
  ctx.compression = o.compression;
  ctx.topic = fmt::format("sluice-bench-pipeline-{}", s.run_id);
  auto with_broker = [&](Status st) {
    if (st.ok() || broker == nullptr) return st;
    Status dead = broker->CheckAlive();
    return dead.ok() ? st : Status(st.code(), st.message() + "\n" + dead.message());
  };

  RETURN_IF_ERROR(with_broker(CreateTopic(s, ctx.topic)));
  progress.Show(
      fmt::format("publishing {} events ...", Grouped(static_cast<uint64_t>(s.messages))));
  Result<Produced> produced = Publish(s, ctx.topic, s.messages);
  progress.Clear();
  if (!produced.ok()) return with_broker(produced.status());
  ctx.produced = *produced;
  if (!o.json) PrintHeader(ctx, s);

  if (s.postgres) return with_broker(PostgresCells(s, o, ctx, broker, &progress, *pg));

  // The reference first, per handler shape, while nothing else runs.
  std::map<std::pair<std::string, int64_t>, double> ceilings;
  std::map<std::pair<std::string, int64_t>, double> decoder_ceilings;  // --in-process
  for (const std::string& h : s.handlers) {
    if (s.iceberg) break;  // its reference is the noop sink's cell
    progress.Show(fmt::format("reference: loading {} events into DuckDB ...",
                              Grouped(static_cast<uint64_t>(s.messages))));
    ASSIGN_OR_RETURN(
        std::unique_ptr<Ceiling> ceiling,
        Ceiling::Load(s.messages, h != "handlers.StructuredBatch", s.window, ctx.produced.totals));
    for (int64_t b : s.batch_sizes) {
      std::vector<double> rates;
      for (int r = 0; r < s.runs; ++r) {
        progress.Show(fmt::format("reference: {} batch {} run {} ...", ShortHandler(h), b, r + 1));
        ASSIGN_OR_RETURN(double rate, ceiling->Measure(b, HandlerSql(h, s.window)));
        rates.push_back(rate);
      }
      ceilings[{h, b}] = Median(rates);
      if (s.in_process_asked) {
        progress.Show(fmt::format("reference: the decoder, {} batch {} ...", ShortHandler(h), b));
        ASSIGN_OR_RETURN(double decoder, DecoderCeiling(h, b, s.messages));
        decoder_ceilings[{h, b}] = decoder;
      }
    }
    progress.Clear();
  }

  if (s.iceberg) {
    const std::string h = "handlers.StructuredBatch";
    if (!o.json) {
      fmt::print(
          "  iceberg   every event through (handler: {}) into an Iceberg table (sink.type iceberg, "
          "unpartitioned, commit_interval_seconds {}) or a noop sink; msgs/s to all in; commits "
          "while "
          "consuming with their mean and longest time (Parquet files, manifests, metadata "
          "version); the "
          "table after the stop's last commit\n\n",
          kPassthroughSql, s.iceberg_commit_seconds);
      if (!s.s3_warehouse.empty()) {
        fmt::print(
            "  iceberg-s3 the same into a table on S3 ({}; {}): data files staged locally and "
            "uploaded at each commit, the commit a conditional PUT; vs local = its msgs/s over "
            "the local table's of the same turn\n\n",
            s.s3_warehouse, [] {
              const char* e = std::getenv("AWS_ENDPOINT_URL_S3");
              if (e == nullptr || *e == 0) e = std::getenv("AWS_ENDPOINT_URL");
              return std::string(e != nullptr && *e != 0 ? e : "AWS S3");
            }());
      }
      fmt::print("{:<10} {:>7} {:>11} {:>7} {:>8} {:>9} {:>8} {:>10} {:>10} {:>9} {:>7}\n", "sink",
                 "batch", "msgs/s", "vs noop", "vs local", "peak MiB", "commits", "commit ms",
                 "max ms", "table MiB", "files");
    }
    // The cells of one batch size: noop, the local table, and with --storage s3 the S3 one.
    enum class Cell { kNoop, kLocal, kS3 };
    std::vector<Cell> cells = {Cell::kNoop, Cell::kLocal};
    if (!s.s3_warehouse.empty()) cells.push_back(Cell::kS3);
    for (int64_t b : s.batch_sizes) {
      double noop_rate = 0;
      double local_rate = 0;
      for (Cell cell : cells) {
        const bool ice = cell != Cell::kNoop;
        const char* label = cell == Cell::kNoop    ? "noop"
                            : cell == Cell::kLocal ? "iceberg"
                                                   : "iceberg-s3";
        std::vector<RunResult> runs;
        for (int r = 0; r < s.runs; ++r) {
          std::string name = fmt::format("{}-{}-run{}", label, b, r + 1);
          Result<RunResult> run =
              RunPipeline(s, h, b, ctx.topic, s.messages, name, broker, &progress, nullptr, false,
                          ice, false, cell == Cell::kS3);
          if (!run.ok()) return with_broker(run.status());
          runs.push_back(*run);
        }
        auto med = [&](auto f) {
          std::vector<double> v;
          for (const RunResult& r : runs) v.push_back(f(r));
          return Median(v);
        };
        double rate = med([](const RunResult& r) { return r.msgs_per_s; });
        if (!ice) noop_rate = rate;
        if (cell == Cell::kLocal) local_rate = rate;
        double ratio = noop_rate > 0 ? rate / noop_rate : 0;
        if (o.json) {
          Json j = Common(ctx, s);
          j["sink"] = ice ? "iceberg" : "noop";
          if (ice) j["storage"] = cell == Cell::kS3 ? "s3" : "local";
          j["batch_size"] = b;
          j["msgs_per_s"] = Round(rate, 0);
          j["vs_noop"] = Round(ratio, 3);
          if (cell == Cell::kS3) j["vs_local"] = Round(local_rate > 0 ? rate / local_rate : 0, 3);
          j["peak_rss_mib"] = Round(med([](const RunResult& r) { return r.peak_rss_mib; }), 1);
          if (ice) {
            j["commits"] = med([](const RunResult& r) { return r.commits; });
            j["commit_mean_ms"] =
                Round(1000 * med([](const RunResult& r) { return r.commit_mean_s; }), 1);
            j["commit_max_ms"] =
                Round(1000 * med([](const RunResult& r) { return r.commit_max_s; }), 1);
            j["table_mib"] = Round(med([](const RunResult& r) { return r.table_mib; }), 1);
            j["table_files"] = med([](const RunResult& r) { return r.table_files; });
          }
          fmt::print("{}\n", j.dump());
        } else {
          fmt::print(
              "{:<10} {:>7} {:>11} {:>7} {:>8} {:>9.1f} {:>8} {:>10} {:>10} {:>9} {:>7}\n", label,
              b, Grouped(static_cast<uint64_t>(rate)), fmt::format("{:.2f}", ratio),
              cell == Cell::kS3 && local_rate > 0 ? fmt::format("{:.2f}", rate / local_rate)
                                                  : std::string("-"),
              med([](const RunResult& r) { return r.peak_rss_mib; }),
              ice ? fmt::format("{:.0f}", med([](const RunResult& r) { return r.commits; })) : "-",
              ice ? fmt::format("{:.1f}",
                                1000 * med([](const RunResult& r) { return r.commit_mean_s; }))
                  : "-",
              ice ? fmt::format("{:.1f}",
                                1000 * med([](const RunResult& r) { return r.commit_max_s; }))
                  : "-",
              ice ? fmt::format("{:.1f}", med([](const RunResult& r) { return r.table_mib; }))
                  : "-",
              ice ? fmt::format("{:.0f}", med([](const RunResult& r) { return r.table_files; }))
                  : "-");
        }
        std::fflush(stdout);
      }
    }
    if (!o.json) fmt::print("\n  load average at the end: {}\n", LoadAverages());
    return Status::OK();
  }

  if (s.window) {
    // Per window, handler and batch: without state, then with it, one after the other so
    // the state's cost compares runs close in time.
    for (const std::string& h : s.handlers) {
      if (!o.json && s.handlers.size() > 1) fmt::print("{}\n", h);
      for (const WindowKind& w : kWindows) {
        for (int64_t b : s.batch_sizes) {
          Cell without;
          for (bool state : {false, true}) {
            Cell cell;
            cell.handler = h;
            cell.batch = b;
            cell.window = &w;
            cell.state = state;
            cell.ceiling = ceilings[{h, b}];
            for (int r = 0; r < s.runs; ++r) {
              std::string name = fmt::format("{}-{}-{}-{}-run{}", ShortHandler(h), w.name,
                                             state ? "state" : "memory", b, r + 1);
              Result<RunResult> run =
                  RunPipeline(s, h, b, ctx.topic, s.messages, name, broker, &progress, &w, state);
              if (!run.ok()) return with_broker(run.status());
              cell.runs.push_back(*run);
            }
            PrintWindowCell(cell, state ? &without : nullptr, ctx, s, o.json);
            if (!state) without = cell;
          }
        }
      }
    }
    if (o.paced) {
      if (!o.json) fmt::print("\nchecks (within {:.0f}%)\n", kTolerance * 100);
      RETURN_IF_ERROR(with_broker(PacedChecks(s, o, ctx, &progress, checks_failed)));
    }
    if (!o.json) fmt::print("\n  load average at the end: {}\n", LoadAverages());
    return Status::OK();
  }

  std::map<std::tuple<std::string, int64_t, bool>, Cell> cells;  // the json cells
  for (const std::string& format : s.formats) {
    // --format: the same events in each format, on a topic of their own.
    Settings sf = s;
    sf.format = format;
    std::string topic = ctx.topic;
    if (format != "json") {
      topic = ctx.topic + "-" + format;
      RETURN_IF_ERROR(with_broker(CreateTopic(s, topic)));
      ASSIGN_OR_RETURN(sf.schema_id, RegisterEventSchema(s.registry_url, topic + "-value", format));
      progress.Show(fmt::format("publishing {} {} events ...",
                                Grouped(static_cast<uint64_t>(s.messages)), format));
      Result<Produced> p = Publish(sf, topic, s.messages);
      progress.Clear();
      if (!p.ok()) return with_broker(p.status());
    }
    for (const std::string& h : s.handlers) {
      for (int64_t b : s.batch_sizes) {
        double kafka_rate = 0;
        for (bool in_process : {false, true}) {
          if (in_process && !s.in_process_asked) continue;
          Settings sc = sf;
          sc.in_process = in_process;
          Cell cell;
          cell.handler = h;
          cell.format = format;
          cell.source = in_process ? "in_process" : "kafka";
          cell.kafka_msgs_per_s = in_process ? kafka_rate : 0;
          cell.batch = b;
          cell.ceiling = ceilings[{h, b}];
          if (format == "json") cell.decoder_ceiling = decoder_ceilings[{h, b}];
          if (format != "json") {
            const Cell& json_cell = cells[{h, b, in_process}];
            cell.json_msgs_per_s = json_cell.msgs_per_s();
          }
          for (int r = 0; r < s.runs; ++r) {
            std::string name =
                fmt::format("{}-{}-{}-{}-run{}", ShortHandler(h), format, b, cell.source, r + 1);
            Result<RunResult> run =
                RunPipeline(sc, h, b, topic, s.messages, name, broker, &progress);
            if (!run.ok()) return with_broker(run.status());
            cell.runs.push_back(*run);
          }
          PrintCell(cell, ctx, sc, o.json);
          if (!in_process) kafka_rate = cell.msgs_per_s();
          if (format == "json") cells[{h, b, in_process}] = cell;
        }
      }
    }
  }

  if (o.backlog || o.paced) {
    if (!o.json) fmt::print("\nchecks (within {:.0f}%)\n", kTolerance * 100);
  }
  if (o.backlog) {
    // A tenth of the events (1M of the default 10M) on a topic of their own.
    int64_t small = std::max<int64_t>(1, s.messages / 10);
    std::string topic = ctx.topic + "-small";
    RETURN_IF_ERROR(with_broker(CreateTopic(s, topic)));
    progress.Show(
        fmt::format("backlog: publishing {} events ...", Grouped(static_cast<uint64_t>(small))));
    Result<Produced> p = Publish(s, topic, small);
    progress.Clear();
    if (!p.ok()) return with_broker(p.status());
    int64_t b = *std::max_element(s.batch_sizes.begin(), s.batch_sizes.end());
    for (const std::string& h : s.handlers) {
      std::vector<double> peaks;
      for (int r = 0; r < s.runs; ++r) {
        std::string name = fmt::format("backlog-{}-{}-run{}", ShortHandler(h), b, r + 1);
        Result<RunResult> run = RunPipeline(s, h, b, topic, small, name, broker, &progress);
        if (!run.ok()) return with_broker(run.status());
        peaks.push_back(run->peak_rss_mib);
      }
      double big = cells[{h, b, false}].peak_rss_mib();
      double base = Median(peaks);
      bool pass = big <= base * (1 + kTolerance);
      *checks_failed |= !pass;
      PrintCheck("backlog", h, fmt::format("peak_rss_{}", s.messages), big,
                 fmt::format("peak_rss_{}", small), base, pass, ctx, s, o.json,
                 fmt::format("batch {}, median of {} run(s) each", b, s.runs));
    }
  }
  if (o.paced) RETURN_IF_ERROR(with_broker(PacedChecks(s, o, ctx, &progress, checks_failed)));
  if (!o.json) fmt::print("\n  load average at the end: {}\n", LoadAverages());
  return Status::OK();
}

Status Run(const PipelineBenchOptions& o, bool* checks_failed) {
  ASSIGN_OR_RETURN(std::unique_ptr<WorkDir> work, WorkDir::Create(o.data_dir, "pipeline"));
  const bool framed = std::any_of(o.formats.begin(), o.formats.end(),
                                  [](const std::string& f) { return f != "json"; });
  if (!o.bootstrap.empty()) {
    // A running broker: its registry where sluice serve puts it.
    std::string host = o.bootstrap.substr(0, o.bootstrap.rfind(':'));
    return RunAll(o, o.bootstrap, work->path(), nullptr, checks_failed,
                  framed ? "http://" + host + ":8081" : "");
  }
  std::string data = work->path() + "/data";
  ASSIGN_OR_RETURN(
      std::unique_ptr<Child> broker,
      Child::Start("sluice serve",
                   {SelfExe(o.sluice_binary), "serve", "--kafka-addr", "127.0.0.1:0", "--http-addr",
                    "127.0.0.1:0", "--pg-addr", "127.0.0.1:0", "--schema-registry-addr",
                    framed ? "127.0.0.1:0" : "off", "--data-dir", data},
                   work->path() + "/broker", "sluice: serving Kafka on ", false,
                   kBrokerStartTimeout, kChildStopTimeout));
  std::string registry;
  if (framed) {
    // Its banner line, after the Kafka one: "sluice: Schema Registry on http://HOST:PORT".
    const auto deadline = std::chrono::steady_clock::now() + kBrokerStartTimeout;
    while (registry.empty() && std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(work->path() + "/broker.out");
      std::string line;
      while (std::getline(in, line)) {
        if (size_t at = line.find("Schema Registry on "); at != std::string::npos) {
          registry = line.substr(at + 19);
        }
      }
      if (registry.empty()) std::this_thread::sleep_for(50ms);
    }
    if (registry.empty()) return InternalError("the broker's schema registry did not start");
  }
  Status st = RunAll(o, broker->address(), work->path(), broker.get(), checks_failed, registry);
  Status stopped = broker->Stop();
  if (!st.ok()) return st;
  if (!stopped.ok()) return stopped;
  if (!o.json) fmt::print("  broker: stopped by SIGTERM, exit status 0\n");
  return Status::OK();
}

}  // namespace

int RunPipelineBench(const PipelineBenchOptions& options) {
  try {
    bool checks_failed = false;
    Status st = Run(options, &checks_failed);
    if (!st.ok()) {
      std::fflush(stdout);
      fmt::print(stderr, "sluice bench pipeline: {}\n", st.ToString());
      return 1;
    }
    return checks_failed ? 3 : 0;
  } catch (const std::exception& e) {  // bad_alloc, filesystem or thread errors
    std::fflush(stdout);
    fmt::print(stderr, "sluice bench pipeline: {}\n", e.what());
    return 1;
  }
}

}  // namespace sluice::bench
