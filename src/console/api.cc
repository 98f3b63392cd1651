#include "console/api.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <deque>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/strings.h"
#include "console/api_util.h"
#include "console/message_view.h"
#include "console/openapi.h"
#include "kafka/client/consumer.h"
#include "schema/message_json.h"

namespace sluice::console {
namespace {

using namespace api_util;  // NOLINT: the API's answers and input checks
using SteadyClock = std::chrono::steady_clock;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Json BrokerJson(const kafka::client::BrokerInfo& b) {
  return Json{{"node_id", b.node_id}, {"host", b.host}, {"port", b.port}};
}

Json ClusterJson(const ClusterDescription& c) {
  Json brokers = Json::array();
  for (const auto& b : c.brokers) brokers.push_back(BrokerJson(b));
  return Json{
      {"cluster_id", c.cluster_id}, {"controller_id", c.controller_id}, {"brokers", brokers}};
}

void PutBytes(Json& out, const std::string& field, const std::optional<std::string>& bytes,
              BinaryAs binary, size_t whole_size, schema::SchemaSource* schemas = nullptr) {
  if (!bytes.has_value()) {
    out[field] = nullptr;
    out[field + "_encoding"] = nullptr;
    return;
  }
  // In a Schema Registry's framing (magic byte 0, then the schema id): decoded with its
  // writer schema. A value the reader cut (past kMaxShownBytes) cannot be: shown as bytes.
  if (schemas != nullptr && bytes->size() >= 5 && (*bytes)[0] == '\0' &&
      whole_size <= bytes->size()) {
    Result<schema::FramedJson> decoded = schema::FramedToJson(*bytes, *schemas);
    if (decoded.ok()) {
      out[field] = std::move(decoded->json);
      out[field + "_encoding"] = "json";
      Json described{{"format", decoded->format}, {"id", decoded->schema_id}};
      if (!decoded->message.empty()) described["message"] = decoded->message;
      out[field + "_schema"] = std::move(described);
      return;
    }
    // Framed, but not by any schema it names: shown as bytes, with why. Not for keys: a
    // big-endian integer key often starts with a zero byte too.
    if (field == "value" && decoded.status().code() == StatusCode::kInvalidArgument) {
      out[field + "_schema_error"] = decoded.status().message();
    }
  }
  ShownBytes shown = ShowBytes(*bytes, binary, std::max(whole_size, bytes->size()));
  out[field] = shown.text;
  out[field + "_encoding"] = shown.encoding;
  if (shown.truncated) out[field + "_truncated"] = true;
}

Json RecordJson(const ReadRecord& r, BinaryAs binary, schema::SchemaSource* schemas) {
  Json m = Json::object();
  m["partition"] = r.partition;
  m["offset"] = r.offset;
  m["timestamp"] = r.timestamp_ms;
  PutBytes(m, "key", r.key, binary, r.key_size, schemas);
  PutBytes(m, "value", r.value, binary, r.value_size, schemas);
  Json headers = Json::array();
  for (const auto& h : r.headers) {
    Json hj = Json::object();
    hj["key"] = h.name;
    PutBytes(hj, "value", h.value, binary, 0);
    headers.push_back(std::move(hj));
  }
  m["headers"] = std::move(headers);
  m["size"] = r.key_size + r.value_size;
  return m;
}

Json TopicJson(const TopicDetail& d, const std::map<std::string, int64_t>& disk) {
  Json parts = Json::array();
  for (const auto& p : d.partitions) {
    parts.push_back(Json{{"partition", p.info.partition},
                         {"leader", p.info.leader},
                         {"replicas", p.info.replicas},
                         {"isr", p.info.isr},
                         {"low", p.marks.low},
                         {"high", p.marks.high},
                         {"error", p.info.error.empty() ? Json(nullptr) : Json(p.info.error)}});
  }
  Json configs = Json::array();
  for (const auto& c : d.configs) {
    configs.push_back(Json{{"name", c.name},
                           {"value", c.value ? Json(*c.value) : Json(nullptr)},
                           {"source", c.source},
                           {"read_only", c.read_only},
                           {"sensitive", c.sensitive},
                           {"default", c.is_default}});
  }
  auto size = disk.find(d.name);
  return Json{{"name", d.name},
              {"internal", d.internal},
              {"size_bytes", size == disk.end() ? Json(nullptr) : Json(size->second)},
              {"partitions", parts},
              {"configs", configs}};
}

// The path after /api/v1/, split at '/', each segment percent-decoded.
Result<std::vector<std::string>> SplitPath(std::string_view path) {
  constexpr std::string_view kPrefix = "/api/v1/";
  if (!path.starts_with(kPrefix)) return NotFoundError("not under /api/v1/");
  path.remove_prefix(kPrefix.size());
  std::vector<std::string> out;
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view seg = path.substr(0, slash);
    ASSIGN_OR_RETURN(std::string decoded, PercentDecode(seg));
    out.push_back(std::move(decoded));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
    if (path.empty()) out.emplace_back();  // a trailing '/'
  }
  return out;
}

int64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long pages = 0, resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? resident * sysconf(_SC_PAGESIZE) : -1;
}

// The sizes of the files under `dir` (one level: a partition's directory).
int64_t DirBytes(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  int64_t total = 0;
  while (dirent* e = readdir(d)) {
    struct stat st {};
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
      total += static_cast<int64_t>(st.st_size);  // written bytes, not preallocated room
    }
  }
  closedir(d);
  return total;
}

}  // namespace

ConsoleApi::OpsLease::~OpsLease() {
  if (ops_ == nullptr) return;
  std::lock_guard<std::mutex> lock(api_->mu_);
  auto& idle = api_->idle_[principal_];
  if (idle.size() < 4) idle.push_back(std::move(ops_));
}

ConsoleRefusal ConsoleRefusalFor(bool http_login, bool kafka_needs_login, bool loopback, bool tls) {
  if (!loopback && !tls) {
    return {"CONSOLE_NEEDS_TLS",
            "this HTTP port reaches beyond this machine without TLS, where the console's logins "
            "and data would cross the network readable: set http.tls: true (or listen on "
            "127.0.0.1 and reach it through an SSH tunnel)"};
  }
  if (!http_login && kafka_needs_login) {
    return {"CONSOLE_NEEDS_LOGIN",
            "Kafka here requires logins (sasl.enabled or authorization.enabled) but the HTTP "
            "port has none: set http.auth to basic or token to use the console as a Kafka user"};
  }
  return {};
}

ConsoleApi::ConsoleApi(ConsoleApiOptions options) : options_(std::move(options)) {
  History::Sources sources;
  sources.metrics = options_.metrics;
  if (options_.pipelines != nullptr) {
    sources.pipelines = [control = options_.pipelines] {
      std::vector<std::string> names;
      for (const PipelineInfo& p : control->List()) names.push_back(p.name);
      return names;
    };
  }
  sources.group_offsets = [this](const std::string& principal,
                                 const std::string& group) -> Result<std::vector<GroupOffset>> {
    OpsLease ops = Lease(principal);
    if (!ops.status().ok()) return ops.status();
    ASSIGN_OR_RETURN(GroupDetail d, ops->DescribeGroup(group));
    return std::move(d.offsets);
  };
  sources.on_step = [this] { RefreshDiskUseIfAsked(); };
  history_ = std::make_unique<History>(std::move(sources));
}

ConsoleApi::~ConsoleApi() {
  Stop();
  history_.reset();  // its thread leases KafkaOps from the members below
}

HttpRoute ConsoleApi::Route() {
  return HttpRoute{.prefix = "/api/v1/",
                   .handler = [this](const HttpRequest& r) { return Handle(r); }};
}

ConsoleApi::OpsLease ConsoleApi::Lease(const std::string& principal) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = idle_.find(principal);
    if (it != idle_.end() && !it->second.empty()) {
      std::unique_ptr<KafkaOps> ops = std::move(it->second.back());
      it->second.pop_back();
      return OpsLease(this, principal, std::move(ops), Status::OK());
    }
  }
  kafka::client::Config client = options_.client_for(principal);
  client.emplace("client.id", "sluice-console");
  Result<std::unique_ptr<KafkaOps>> ops = KafkaOps::Create(client, options_.kafka_timeout);
  if (!ops.ok()) return OpsLease(this, principal, nullptr, ops.status());
  return OpsLease(this, principal, std::move(*ops), Status::OK());
}

HttpResponse ConsoleApi::Handle(const HttpRequest& req) {
  Result<std::vector<std::string>> split = SplitPath(req.path);
  if (!split.ok()) return BadRequest(split.status().message());
  const std::vector<std::string>& path = *split;
  const std::string first = path.empty() ? "" : path[0];
  if (first == "openapi.json" && path.size() == 1) {
    if (req.method != "GET" && req.method != "HEAD") return MethodNotAllowed(req);
    HttpResponse r;
    r.body = OpenApiDocument();
    return r;
  }
  if (!options_.refusal.empty()) {
    return ErrorResponse(
        403, options_.refusal_code.empty() ? "CONSOLE_NEEDS_LOGIN" : options_.refusal_code,
        options_.refusal);
  }
  if (first == "cluster" && path.size() == 1) {
    if (req.method != "GET" && req.method != "HEAD") return MethodNotAllowed(req);
    OpsLease ops = Lease(req.principal);
    if (!ops.status().ok()) return FromStatus(ops.status());
    Result<ClusterDescription> c = ops->Cluster();
    if (!c.ok()) return FromStatus(c.status());
    return JsonResponse(200, ClusterJson(*c));
  }
  if (first == "overview" && path.size() == 1) {
    if (req.method != "GET" && req.method != "HEAD") return MethodNotAllowed(req);
    return Overview(req);
  }
  if (first == "topics") return Topics(req, path);
  if (first == "groups") return Groups(req, path);
  if (first == "pipelines") return Pipelines(req, path);
  if (first == "sql") return Sql(req, path);
  if (first == "tables") return Tables(req, path);
  return ErrorResponse(404, "NOT_FOUND", fmt::format("no such API: {}", req.path));
}

std::map<std::string, int64_t> ConsoleApi::DiskUse() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    disk_asked_ = SteadyClock::now();
    // Measured by the history's sampler every step while asked for (RefreshDiskUse): a
    // request waits only for the first measure (2,000 partitions' files: tens of ms).
    if (options_.data_dir.empty() || disk_at_ != SteadyClock::time_point{}) return disk_;
  }
  return RefreshDiskUse();
}

void ConsoleApi::RefreshDiskUseIfAsked() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (options_.data_dir.empty() || disk_asked_ == SteadyClock::time_point{} ||
        SteadyClock::now() - disk_asked_ > std::chrono::minutes(1)) {
      return;
    }
  }
  RefreshDiskUse();
}

std::map<std::string, int64_t> ConsoleApi::RefreshDiskUse() {
  std::map<std::string, int64_t> out;
  if (DIR* d = opendir(options_.data_dir.c_str()); d != nullptr) {
    while (dirent* e = readdir(d)) {
      std::string_view name = e->d_name;
      // <topic>-<partition>: the topic is everything before the last '-'.
      const size_t dash = name.rfind('-');
      if (dash == std::string_view::npos || dash == 0 || dash + 1 == name.size()) continue;
      std::string_view number = name.substr(dash + 1);
      if (!std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; }))
        continue;
      out[std::string(name.substr(0, dash))] +=
          DirBytes(options_.data_dir + "/" + std::string(name));
    }
    closedir(d);
  }
  std::lock_guard<std::mutex> lock(mu_);
  disk_ = out;
  disk_at_ = SteadyClock::now();
  return out;
}

HttpResponse ConsoleApi::Overview(const HttpRequest& req) {
  OpsLease ops = Lease(req.principal);
  if (!ops.status().ok()) return FromStatus(ops.status());
  // One Metadata request: the counts need no offsets (the page polls this every 2 s).
  Result<ClusterDescription> cluster =
      ops->admin().DescribeCluster(true, {}, options_.kafka_timeout);
  if (!cluster.ok()) return FromStatus(cluster.status());
  int partitions = 0, user_topics = 0;
  for (const auto& t : cluster->topics) {
    if (t.internal) continue;
    ++user_topics;
    partitions += static_cast<int>(t.partitions.size());
  }
  MetricsRegistry& m = *options_.metrics;
  const uint64_t in = m.GetCounter("sluice_kafka_produce_bytes_total", "").value();
  const uint64_t out = m.GetCounter("sluice_kafka_fetch_bytes_total", "").value();
  const uint64_t records = m.GetCounter("sluice_kafka_produce_records_total", "").value();
  Sample s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = SteadyClock::now();
    const double dt = std::chrono::duration<double>(now - sample_.at).count();
    if (sample_.at == SteadyClock::time_point{}) {
      sample_ = {now, in, out, records, 0, 0, 0};
    } else if (dt >= 1.0) {
      sample_.bytes_in_rate = static_cast<double>(in - sample_.bytes_in) / dt;
      sample_.bytes_out_rate = static_cast<double>(out - sample_.bytes_out) / dt;
      sample_.records_in_rate = static_cast<double>(records - sample_.records_in) / dt;
      sample_.at = now;
      sample_.bytes_in = in;
      sample_.bytes_out = out;
      sample_.records_in = records;
    }
    s = sample_;
  }
  int64_t disk = 0;
  for (const auto& [topic, bytes] : DiskUse()) disk += bytes;
  Json pipelines = nullptr;
  if (options_.pipelines != nullptr) {
    int running = 0, total = 0;
    for (const PipelineInfo& p : options_.pipelines->List()) {
      ++total;
      running += p.running ? 1 : 0;
    }
    pipelines = Json{{"running", running}, {"total", total}};
  }
  Result<std::vector<GroupListing>> group_list = ops->GroupListings();
  Json body{{"time_ms", NowMs()},
            {"cluster", ClusterJson(*cluster)},
            {"topics", user_topics},
            {"partitions", partitions},
            {"groups", group_list.ok() ? Json(group_list->size()) : Json(nullptr)},
            {"scope", "this broker"},
            {"bytes_in_per_sec", s.bytes_in_rate},
            {"bytes_out_per_sec", s.bytes_out_rate},
            {"messages_in_per_sec", s.records_in_rate},
            {"bytes_in_total", in},
            {"bytes_out_total", out},
            {"messages_in_total", records},
            {"disk_bytes", options_.data_dir.empty() ? Json(nullptr) : Json(disk)},
            {"memory_rss_bytes", ResidentBytes()},
            {"pipelines", pipelines}};
  return JsonResponse(200, body);
}

HttpResponse ConsoleApi::Topics(const HttpRequest& req, const std::vector<std::string>& path) {
  OpsLease ops = Lease(req.principal);
  if (!ops.status().ok()) return FromStatus(ops.status());
  if (path.size() == 1) {
    if (req.method == "GET" || req.method == "HEAD") {
      const std::string internal = QueryString(req, "internal");
      if (!internal.empty() && internal != "true" && internal != "false")
        return BadRequest("query parameter internal: true or false");
      LocalWatermarks local;
      if (options_.local_watermarks) {
        local = [&](const std::vector<kafka::client::TopicPartition>& partitions) {
          return options_.local_watermarks(req.principal, partitions);
        };
      }
      Result<std::vector<TopicSummary>> topics = ops->ListTopics(internal == "true", local);
      if (!topics.ok()) return FromStatus(topics.status());
      std::map<std::string, int64_t> disk = DiskUse();
      Json list = Json::array();
      std::lock_guard<std::mutex> lock(mu_);
      const auto now = SteadyClock::now();
      for (const TopicSummary& t : *topics) {
        TopicSample& ts = topic_samples_[t.name];
        const double dt = std::chrono::duration<double>(now - ts.at).count();
        if (ts.at == SteadyClock::time_point{}) {
          ts = {now, t.messages, 0};
        } else if (dt >= 1.0) {
          ts.rate = std::max(0.0, static_cast<double>(t.messages - ts.messages) / dt);
          ts.at = now;
          ts.messages = t.messages;
        }
        auto size = disk.find(t.name);
        list.push_back(
            Json{{"name", t.name},
                 {"partitions", t.partitions},
                 {"replication_factor", t.replication_factor},
                 {"internal", t.internal},
                 {"messages", t.messages},
                 {"messages_per_sec", ts.rate},
                 {"size_bytes", size == disk.end() ? Json(nullptr) : Json(size->second)}});
      }
      // Topics gone since: their samples go too.
      for (auto it = topic_samples_.begin(); it != topic_samples_.end();) {
        it = now - it->second.at > std::chrono::minutes(10) ? topic_samples_.erase(it)
                                                            : std::next(it);
      }
      return JsonResponse(200, Json{{"topics", list}});
    }
    if (req.method == "POST") {
      Result<Json> body = ParseBody(req, {"name", "partitions", "replication_factor", "configs"});
      if (!body.ok()) return BadRequest(body.status().message());
      auto name = body->find("name");
      if (name == body->end() || !name->is_string() || name->get<std::string>().empty())
        return ErrorResponse(400, "INVALID_TOPIC_EXCEPTION", "'name' must be a non-empty string");
      Result<int64_t> partitions = IntField(*body, "partitions", -1);
      Result<int64_t> rf = IntField(*body, "replication_factor", -1);
      Result<std::map<std::string, std::string>> configs = StringMap(*body, "configs");
      for (const Status& st : {partitions.status(), rf.status(), configs.status()}) {
        if (!st.ok()) return BadRequest(st.message());
      }
      if (*partitions == 0 || *partitions < -1 || *partitions > 100000)
        return ErrorResponse(400, "INVALID_PARTITIONS", "'partitions' must be from 1 to 100000");
      if (*rf == 0 || *rf < -1 || *rf > 32767)
        return ErrorResponse(400, "INVALID_REPLICATION_FACTOR",
                             "'replication_factor' must be from 1 to 32767");
      const std::string topic = name->get<std::string>();
      Status st =
          ops->CreateTopic(topic, static_cast<int>(*partitions), static_cast<int>(*rf), *configs);
      if (!st.ok()) return FromStatus(st);
      Result<TopicDetail> d = ops->DescribeTopic(topic);
      if (!d.ok()) return JsonResponse(201, Json{{"name", topic}});
      return JsonResponse(201, TopicJson(*d, DiskUse()));
    }
    return MethodNotAllowed(req);
  }
  const std::string& topic = path[1];
  if (topic.empty()) return BadRequest("the topic name is empty");
  if (path.size() == 2) {
    if (req.method == "GET" || req.method == "HEAD") {
      Result<TopicDetail> d = ops->DescribeTopic(topic);
      if (!d.ok()) return FromStatus(d.status());
      return JsonResponse(200, TopicJson(*d, DiskUse()));
    }
    if (req.method == "DELETE") {
      Status st = ops->DeleteTopic(topic);
      return st.ok() ? NoContent() : FromStatus(st);
    }
    return MethodNotAllowed(req);
  }
  const std::string& what = path[2];
  if (what == "partitions" && path.size() == 3) {
    if (req.method != "POST") return MethodNotAllowed(req);
    Result<Json> body = ParseBody(req, {"count"});
    if (!body.ok()) return BadRequest(body.status().message());
    Result<int64_t> count = IntField(*body, "count", 0);
    if (!count.ok()) return BadRequest(count.status().message());
    if (*count < 1 || *count > 100000)
      return ErrorResponse(400, "INVALID_PARTITIONS",
                           "'count' (the new total) must be from 1 to 100000");
    Status st = ops->AddPartitions(topic, static_cast<int>(*count));
    if (!st.ok()) return FromStatus(st);
    Result<TopicDetail> d = ops->DescribeTopic(topic);
    if (!d.ok()) return FromStatus(d.status());
    return JsonResponse(200, TopicJson(*d, DiskUse()));
  }
  if (what == "configs" && path.size() == 3) {
    if (req.method == "GET" || req.method == "HEAD") {
      Result<TopicDetail> d = ops->DescribeTopic(topic);
      if (!d.ok()) return FromStatus(d.status());
      return JsonResponse(200, Json{{"configs", TopicJson(*d, {})["configs"]}});
    }
    if (req.method != "PUT" && req.method != "POST") return MethodNotAllowed(req);
    Result<Json> body = ParseBody(req, {"set", "delete"});
    if (!body.ok()) return BadRequest(body.status().message());
    Result<std::map<std::string, std::string>> set = StringMap(*body, "set");
    if (!set.ok()) return BadRequest(set.status().message());
    std::vector<std::string> remove;
    if (auto it = body->find("delete"); it != body->end() && !it->is_null()) {
      if (!it->is_array()) return BadRequest("'delete' must be an array of config names");
      for (const auto& v : *it) {
        if (!v.is_string()) return BadRequest("'delete' must be an array of config names");
        remove.push_back(v.get<std::string>());
      }
    }
    if (set->empty() && remove.empty())
      return BadRequest("nothing to change: 'set' and 'delete' are empty");
    Status st = ops->AlterConfigs(topic, *set, remove);
    if (!st.ok()) return FromStatus(st);
    Result<TopicDetail> d = ops->DescribeTopic(topic);
    if (!d.ok()) return FromStatus(d.status());
    return JsonResponse(200, Json{{"configs", TopicJson(*d, {})["configs"]}});
  }
  if (what == "messages" && path.size() == 3) {
    if (req.method == "GET" || req.method == "HEAD") return Messages(req, topic);
    if (req.method != "POST") return MethodNotAllowed(req);
    Result<Json> body = ParseBody(req, {"partition", "key", "value", "headers"});
    if (!body.ok()) return BadRequest(body.status().message());
    Result<int64_t> partition = IntField(*body, "partition", -1);
    Result<std::optional<std::string>> key = OptionalString(*body, "key");
    Result<std::optional<std::string>> value = OptionalString(*body, "value");
    for (const Status& st : {partition.status(), key.status(), value.status()}) {
      if (!st.ok()) return BadRequest(st.message());
    }
    if (*partition < -1 || *partition > INT32_MAX)
      return BadRequest("'partition' is not a partition");
    std::vector<RecordHeader> headers;
    if (auto it = body->find("headers"); it != body->end() && !it->is_null()) {
      if (!it->is_object()) return BadRequest("'headers' must be an object of strings");
      for (const auto& [k, v] : it->items()) {
        if (!v.is_string() && !v.is_null())
          return BadRequest(fmt::format("header '{}' must be a string", k));
        headers.push_back(
            {k, v.is_null() ? std::nullopt : std::optional<std::string>(v.get<std::string>())});
      }
    }
    Result<KafkaOps::Produced> p = ops->Produce(
        topic,
        *partition < 0 ? std::nullopt : std::optional<int32_t>(static_cast<int32_t>(*partition)),
        *key, *value, headers);
    if (!p.ok()) return FromStatus(p.status());
    return JsonResponse(201, Json{{"partition", p->partition}, {"offset", p->offset}});
  }
  if (what == "messages" && path.size() == 4 && path[3] == "live") {
    if (req.method != "GET") return MethodNotAllowed(req);
    return Live(req, topic);
  }
  return ErrorResponse(404, "NOT_FOUND", fmt::format("no such API: {}", req.path));
}

HttpResponse ConsoleApi::Messages(const HttpRequest& req, const std::string& topic) {
  MessageQuery q;
  q.topic = topic;
  Result<int64_t> partition = QueryInt(req, "partition", -1);
  Result<int64_t> limit = QueryInt(req, "limit", 50);
  for (const Status& st : {partition.status(), limit.status()}) {
    if (!st.ok()) return BadRequest(st.message());
  }
  if (*partition < -1 || *partition > INT32_MAX) return BadRequest("partition: not a partition");
  if (*partition >= 0) q.partition = static_cast<int32_t>(*partition);
  if (*limit < 1 || *limit > MessageQuery::kMaxLimit)
    return BadRequest(fmt::format("limit: from 1 to {}", MessageQuery::kMaxLimit));
  q.limit = static_cast<int>(*limit);
  const bool has_offset = !QueryString(req, "offset").empty();
  const bool has_time = !QueryString(req, "timestamp").empty();
  const std::string start = QueryString(req, "start");
  if (has_offset && has_time) return BadRequest("give offset or timestamp, not both");
  if (has_offset) {
    Result<int64_t> offset = QueryInt(req, "offset", 0);
    if (!offset.ok()) return BadRequest(offset.status().message());
    if (*offset < 0) return BadRequest("offset: not an offset");
    q.start = StartAt::kOffset;
    q.offset = *offset;
  } else if (has_time) {
    Result<int64_t> ts = QueryInt(req, "timestamp", 0);
    if (!ts.ok()) return BadRequest(ts.status().message());
    if (*ts < 0) return BadRequest("timestamp: milliseconds since 1970, not negative");
    q.start = StartAt::kTimestamp;
    q.timestamp_ms = *ts;
  } else if (start == "oldest") {
    q.start = StartAt::kOldest;
  } else if (start.empty() || start == "newest") {
    q.start = StartAt::kNewest;
  } else {
    return BadRequest("start: newest or oldest (or give offset or timestamp)");
  }
  const std::string order = QueryString(req, "order");
  if (!order.empty() && order != "newest" && order != "oldest")
    return BadRequest("order: newest or oldest");
  const std::string binary = QueryString(req, "binary");
  if (!binary.empty() && binary != "hex" && binary != "base64")
    return BadRequest("binary: hex or base64");
  const BinaryAs as = binary == "base64" ? BinaryAs::kBase64 : BinaryAs::kHex;
  OpsLease ops = Lease(req.principal);
  if (!ops.status().ok()) return FromStatus(ops.status());
  Result<MessagePage> page = ops->ReadMessages(q);
  if (!page.ok()) return FromStatus(page.status());
  Json messages = Json::array();
  if (order == "oldest") {
    for (const ReadRecord& r : page->records)
      messages.push_back(RecordJson(r, as, options_.schemas.get()));
  } else {
    for (auto it = page->records.rbegin(); it != page->records.rend(); ++it)
      messages.push_back(RecordJson(*it, as, options_.schemas.get()));
  }
  Json next = Json::object();
  for (const auto& [p, o] : page->next) next[std::to_string(p)] = o;
  return JsonResponse(200,
                      Json{{"messages", messages}, {"next", next}, {"partial", page->partial}});
}

HttpResponse ConsoleApi::Live(const HttpRequest& req, const std::string& topic) {
  Result<int64_t> partition = QueryInt(req, "partition", -1);
  if (!partition.ok()) return BadRequest(partition.status().message());
  const std::string binary = QueryString(req, "binary");
  if (!binary.empty() && binary != "hex" && binary != "base64")
    return BadRequest("binary: hex or base64");
  const BinaryAs as = binary == "base64" ? BinaryAs::kBase64 : BinaryAs::kHex;
  std::vector<int32_t> partitions;
  kafka::client::Config client;
  {
    OpsLease ops = Lease(req.principal);
    if (!ops.status().ok()) return FromStatus(ops.status());
    Result<TopicDetail> d = ops->DescribeTopic(topic);
    if (!d.ok()) return FromStatus(d.status());
    for (const auto& p : d->partitions) {
      if (*partition < 0 || p.info.partition == *partition) partitions.push_back(p.info.partition);
    }
    if (partitions.empty())
      return ErrorResponse(404, "UNKNOWN_TOPIC_OR_PART",
                           fmt::format("topic '{}' has no partition {}", topic, *partition));
    client = ops->client();
  }
  if (live_streams_.fetch_add(1) >= kMaxLiveStreams) {
    live_streams_.fetch_sub(1);
    HttpResponse r = ErrorResponse(
        429, "TOO_MANY_STREAMS",
        fmt::format("at most {} live message streams at once; close one", kMaxLiveStreams));
    r.headers.emplace_back("Retry-After", "5");
    return r;
  }
  client["enable.partition.eof"] = "false";
  client["isolation.level"] = "read_uncommitted";
  client["fetch.wait.max.ms"] = "100";
  auto consumer = kafka::client::Consumer::Create(client);
  if (!consumer.ok()) {
    live_streams_.fetch_sub(1);
    return FromStatus(consumer.status());
  }
  std::vector<kafka::client::TopicPartition> assign;
  for (int32_t p : partitions) assign.push_back({topic, p, kafka::client::kOffsetEnd});
  if (Status st = (*consumer)->Assign(assign); !st.ok()) {
    live_streams_.fetch_sub(1);
    return FromStatus(st);
  }
  HttpResponse r;
  r.content_type = "text/event-stream";
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back("X-Accel-Buffering", "no");
  std::shared_ptr<kafka::client::Consumer> shared(std::move(*consumer));
  r.stream = [this, shared, as](HttpStream& out) {
    struct Release {
      std::atomic<int>* n;
      ~Release() { n->fetch_sub(1); }
    } release{&live_streams_};
    // At most one event per 200 ms, of at most kMaxPerEvent records (the newest; the
    // others are counted as skipped): a page cannot draw 10K rows a second anyway.
    constexpr size_t kMaxPerEvent = 500;
    constexpr auto kEvery = std::chrono::milliseconds(200);
    if (!out.Write(": following\n\n")) return;
    // The newest kMaxPerEvent records since the last event, as the batches kept them; a
    // batch is looked at from its end, so the records skipped cost a count, not a copy.
    std::deque<ReadRecord> pending;
    uint64_t skipped = 0;
    auto last_sent = SteadyClock::now();
    while (!stopping_.load()) {
      Result<kafka::client::MessageBatch> batch = shared->Poll(std::chrono::milliseconds(100));
      if (!batch.ok()) {
        out.Write(fmt::format("event: error\ndata: {}\n\n",
                              Json{{"message", batch.status().message()}}.dump()));
        return;
      }
      const size_t n = batch->size();
      const size_t keep = std::min(n, kMaxPerEvent);
      skipped += n - keep;
      for (size_t i = n - keep; i < n; ++i) pending.push_back(KeepRecord(*batch, i));
      while (pending.size() > kMaxPerEvent) {
        pending.pop_front();
        ++skipped;
      }
      const auto now = SteadyClock::now();
      if (now - last_sent < kEvery) continue;
      // Idle, a comment every second: a write is how a client that went is found.
      if (pending.empty() && now - last_sent < std::chrono::seconds(1)) continue;
      bool ok;
      if (pending.empty()) {
        ok = out.Write(": keep-alive\n\n");
      } else {
        Json messages = Json::array();
        for (const ReadRecord& rec : pending)
          messages.push_back(RecordJson(rec, as, options_.schemas.get()));
        Json data{{"messages", std::move(messages)}, {"skipped", skipped}};
        ok = out.Write("event: messages\ndata: " +
                       data.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n");
        pending.clear();
        skipped = 0;
      }
      if (!ok) return;
      last_sent = now;
    }
  };
  return r;
}

HttpResponse ConsoleApi::Groups(const HttpRequest& req, const std::vector<std::string>& path) {
  OpsLease ops = Lease(req.principal);
  if (!ops.status().ok()) return FromStatus(ops.status());
  if (path.size() == 1) {
    if (req.method != "GET" && req.method != "HEAD") return MethodNotAllowed(req);
    Result<std::vector<GroupSummary>> groups = ops->ListGroups();
    if (!groups.ok()) return FromStatus(groups.status());
    Json list = Json::array();
    for (const GroupSummary& g : *groups) {
      list.push_back(Json{{"group_id", g.listing.group_id},
                          {"state", g.listing.state},
                          {"simple", g.listing.simple},
                          {"members", g.members},
                          {"lag", g.lag ? Json(*g.lag) : Json(nullptr)}});
    }
    return JsonResponse(200, Json{{"groups", list}});
  }
  const std::string& group = path[1];
  if (group.empty()) return BadRequest("the group id is empty");
  if (path.size() == 2) {
    if (req.method == "GET" || req.method == "HEAD") {
      Result<GroupDetail> d = ops->DescribeGroup(group);
      if (!d.ok()) return FromStatus(d.status());
      Json members = Json::array();
      for (const auto& m : d->description.members) {
        std::map<std::string, std::vector<int32_t>> by_topic;
        for (const auto& tp : m.assignment) by_topic[tp.topic].push_back(tp.partition);
        Json assignments = Json::array();
        for (const auto& [t, ps] : by_topic)
          assignments.push_back(Json{{"topic", t}, {"partitions", ps}});
        members.push_back(
            Json{{"member_id", m.member_id},
                 {"group_instance_id",
                  m.group_instance_id.empty() ? Json(nullptr) : Json(m.group_instance_id)},
                 {"client_id", m.client_id},
                 {"host", m.host},
                 {"assignments", assignments}});
      }
      Json offsets = Json::array();
      for (const GroupOffset& o : d->offsets) {
        offsets.push_back(Json{{"topic", o.topic},
                               {"partition", o.partition},
                               {"offset", o.offset < 0 ? Json(nullptr) : Json(o.offset)},
                               {"high", o.high < 0 ? Json(nullptr) : Json(o.high)},
                               {"lag", o.lag < 0 ? Json(nullptr) : Json(o.lag)}});
      }
      const auto& c = d->description.coordinator;
      return JsonResponse(200, Json{{"group_id", d->description.group_id},
                                    {"state", d->description.state},
                                    {"protocol", d->description.assignor},
                                    {"simple", d->description.simple},
                                    {"coordinator", BrokerJson(c)},
                                    {"members", members},
                                    {"offsets", offsets}});
    }
    if (req.method == "DELETE") {
      Status st = ops->DeleteGroup(group);
      return st.ok() ? NoContent() : FromStatus(st);
    }
    return MethodNotAllowed(req);
  }
  if (path.size() == 3 && path[2] == "history") {
    if (req.method != "GET" && req.method != "HEAD") return MethodNotAllowed(req);
    // Read now as the asker (which also proves they may see it), then watched.
    Result<GroupDetail> d = ops->DescribeGroup(group);
    if (!d.ok()) return FromStatus(d.status());
    History::GroupSeries h = history_->Group(group, req.principal, d->offsets);
    Json partitions = Json::array();
    for (const auto& [tp, lag] : h.partitions) {
      partitions.push_back(
          Json{{"topic", tp.first}, {"partition", tp.second}, {"lag", SeriesJson(lag)}});
    }
    return JsonResponse(200, Json{{"group", group},
                                  {"step_ms", History::kStep.count()},
                                  {"time_ms", h.time_ms},
                                  {"total_lag", SeriesJson(h.total_lag)},
                                  {"partitions", partitions}});
  }
  if (path.size() == 3 && path[2] == "reset-offsets") {
    if (req.method != "POST") return MethodNotAllowed(req);
    Result<Json> body =
        ParseBody(req, {"topic", "partitions", "to", "offset", "timestamp", "dry_run"});
    if (!body.ok()) return BadRequest(body.status().message());
    ResetSpec spec;
    auto topic = body->find("topic");
    if (topic == body->end() || !topic->is_string() || topic->get<std::string>().empty())
      return BadRequest("'topic' must be a non-empty string");
    spec.topic = topic->get<std::string>();
    if (auto it = body->find("partitions"); it != body->end() && !it->is_null()) {
      if (!it->is_array()) return BadRequest("'partitions' must be an array of partition numbers");
      for (const auto& p : *it) {
        if (!p.is_number_integer() || p.get<int64_t>() < 0 || p.get<int64_t>() > INT32_MAX)
          return BadRequest("'partitions' must be an array of partition numbers");
        spec.partitions.push_back(p.get<int32_t>());
      }
    }
    auto to = body->find("to");
    if (to == body->end() || !to->is_string())
      return BadRequest("'to' must be earliest, latest, offset or timestamp");
    Result<ResetTo> parsed = ParseResetTo(to->get<std::string>());
    if (!parsed.ok()) return BadRequest("'to': " + parsed.status().message());
    spec.to = *parsed;
    if (spec.to == ResetTo::kOffset || spec.to == ResetTo::kTimestamp) {
      const char* field = spec.to == ResetTo::kOffset ? "offset" : "timestamp";
      Result<int64_t> v = IntField(*body, field, -1);
      if (!v.ok()) return BadRequest(v.status().message());
      if (*v < 0) return BadRequest(fmt::format("'to': {} needs '{}' (at least 0)", field, field));
      spec.value = *v;
    }
    auto dry = body->find("dry_run");
    if (dry != body->end() && !dry->is_boolean() && !dry->is_null())
      return BadRequest("'dry_run' must be true or false");
    spec.execute = dry == body->end() || dry->is_null() || !dry->get<bool>();
    Result<std::vector<ResetRow>> rows = ops->ResetOffsets(group, spec);
    if (!rows.ok()) return FromStatus(rows.status());
    Json list = Json::array();
    for (const ResetRow& r : *rows) {
      list.push_back(Json{{"topic", r.topic},
                          {"partition", r.partition},
                          {"previous", r.previous < 0 ? Json(nullptr) : Json(r.previous)},
                          {"offset", r.offset}});
    }
    return JsonResponse(200, Json{{"executed", spec.execute}, {"offsets", list}});
  }
  return ErrorResponse(404, "NOT_FOUND", fmt::format("no such API: {}", req.path));
}

}  // namespace sluice::console
