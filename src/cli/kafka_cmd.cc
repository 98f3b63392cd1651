#include "cli/kafka_cmd.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "base/clock.h"
#include "base/strings.h"
#include "base/utf8.h"
#include "console/kafka_ops.h"
#include "kafka/client/consumer.h"
#include "kafka/client/producer.h"

namespace sluice::cli {
namespace {

using Json = nlohmann::ordered_json;
using console::KafkaOps;

// Set by SIGINT or SIGTERM while `topic consume` runs: it stops and closes its consumer,
// which leaves the group at once (else the group waits a session timeout for it).
std::atomic<bool> g_stop{false};
void OnStopSignal(int) { g_stop.store(true); }

int Fail(std::string_view cmd, std::string_view message) {
  std::fprintf(stderr, "sluice %.*s: %.*s\n", static_cast<int>(cmd.size()), cmd.data(),
               static_cast<int>(message.size()), message.data());
  return 1;
}

int Fail(std::string_view cmd, const Status& st) { return Fail(cmd, st.message()); }

// KEY=VALUE, split at the first '='.
Result<std::pair<std::string, std::string>> KeyValue(std::string_view s, std::string_view what) {
  const size_t eq = s.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return InvalidArgumentError("{} '{}': not KEY=VALUE", what, s);
  return std::pair<std::string, std::string>(std::string(s.substr(0, eq)),
                                             std::string(s.substr(eq + 1)));
}

Result<kafka::client::Config> ClientConfig(const KafkaCmdFlags& f) {
  kafka::client::Config c;
  std::string brokers = f.brokers;
  if (brokers.empty()) {
    const char* env = std::getenv("SLUICE_BROKERS");
    brokers = env != nullptr && *env != '\0' ? env : "127.0.0.1:9092";
  }
  c["bootstrap.servers"] = brokers;
  c["client.id"] = "sluice-cli";
  // librdkafka's own lines (each failed connect) would bury the one error the command
  // prints; -X log_level=7 brings them back.
  c["log_level"] = "0";
  for (const std::string& p : f.props) {
    ASSIGN_OR_RETURN(auto kv, KeyValue(p, "-X"));
    // rpk's short names for the common ones.
    if (kv.first == "brokers") kv.first = "bootstrap.servers";
    c[kv.first] = kv.second;
  }
  return c;
}

Result<std::unique_ptr<KafkaOps>> Connect(const KafkaCmdFlags& f) {
  ASSIGN_OR_RETURN(kafka::client::Config c, ClientConfig(f));
  return KafkaOps::Create(std::move(c), std::chrono::milliseconds(f.timeout_ms));
}

// An aligned table as rpk prints one: upper-case headers, two spaces between columns.
void PrintColumns(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = CountCodePoints(header[c]);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], CountCodePoints(row[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < cells.size(); ++c) {
      out += cells[c];
      if (c + 1 < cells.size()) out += std::string(width[c] - CountCodePoints(cells[c]) + 2, ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    fmt::print("{}\n", out);
  };
  line(header);
  for (const auto& row : rows) line(row);
}

std::string Join(const std::vector<int32_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? " " : "") + std::to_string(v[i]);
  return out + "]";
}

void PrintJson(const Json& j) {
  fmt::print("{}\n", j.dump(2, ' ', false, Json::error_handler_t::replace));
}

Result<std::map<std::string, std::string>> ConfigMap(const std::vector<std::string>& items,
                                                     std::string_view what) {
  std::map<std::string, std::string> out;
  for (const std::string& s : items) {
    ASSIGN_OR_RETURN(auto kv, KeyValue(s, what));
    out[kv.first] = kv.second;
  }
  return out;
}

// Bytes in a JSON line: the text when UTF-8, else base64 (with `<field>_encoding`).
void PutBytes(Json& j, const std::string& field, const std::optional<std::string_view>& bytes) {
  if (!bytes) {
    j[field] = nullptr;
  } else if (IsValidUtf8(*bytes)) {
    j[field] = std::string(*bytes);
  } else {
    j[field] = Base64Encode(*bytes);
    j[field + "_encoding"] = "base64";
  }
}

}  // namespace

int RunClusterInfo(const KafkaCmdFlags& f) {
  auto ops = Connect(f);
  if (!ops.ok()) return Fail("cluster info", ops.status());
  auto c = (*ops)->Cluster();
  if (!c.ok()) return Fail("cluster info", c.status());
  if (f.json) {
    Json brokers = Json::array();
    for (const auto& b : c->brokers)
      brokers.push_back(Json{{"node_id", b.node_id}, {"host", b.host}, {"port", b.port}});
    PrintJson(Json{
        {"cluster_id", c->cluster_id}, {"controller_id", c->controller_id}, {"brokers", brokers}});
    return 0;
  }
  fmt::print("CLUSTER\n=======\n{}\n\nBROKERS\n=======\n", c->cluster_id);
  std::vector<std::vector<std::string>> rows;
  for (const auto& b : c->brokers) {
    rows.push_back({std::to_string(b.node_id) + (b.node_id == c->controller_id ? "*" : ""), b.host,
                    std::to_string(b.port)});
  }
  PrintColumns({"ID", "HOST", "PORT"}, rows);
  return 0;
}

int RunTopicList(const KafkaCmdFlags& f) {
  auto ops = Connect(f);
  if (!ops.ok()) return Fail("topic list", ops.status());
  auto topics = (*ops)->ListTopics(f.internal);
  if (!topics.ok()) return Fail("topic list", topics.status());
  if (f.json) {
    Json list = Json::array();
    for (const auto& t : *topics) {
      list.push_back(Json{{"name", t.name},
                          {"partitions", t.partitions},
                          {"replicas", t.replication_factor},
                          {"internal", t.internal},
                          {"messages", t.messages}});
    }
    PrintJson(list);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : *topics) {
    rows.push_back({t.name, std::to_string(t.partitions), std::to_string(t.replication_factor),
                    std::to_string(t.messages)});
  }
  PrintColumns({"NAME", "PARTITIONS", "REPLICAS", "MESSAGES"}, rows);
  return 0;
}

int RunTopicCreate(const KafkaCmdFlags& f) {
  auto configs = ConfigMap(f.configs, "-c");
  if (!configs.ok()) return Fail("topic create", configs.status());
  auto ops = Connect(f);
  if (!ops.ok()) return Fail("topic create", ops.status());
  int failed = 0;
  Json list = Json::array();
  std::vector<std::vector<std::string>> rows;
  for (const std::string& t : f.topics) {
    Status st = (*ops)->CreateTopic(t, f.partitions, f.replicas, *configs);
    failed += st.ok() ? 0 : 1;
    list.push_back(Json{
        {"topic", t}, {"ok", st.ok()}, {"error", st.ok() ? Json(nullptr) : Json(st.message())}});
    rows.push_back({t, st.ok() ? "OK" : st.message()});
  }
  if (f.json) {
    PrintJson(list);
  } else {
    PrintColumns({"TOPIC", "STATUS"}, rows);
  }
  return failed == 0 ? 0 : 1;
}

int RunTopicDelete(const KafkaCmdFlags& f) {
  auto ops = Connect(f);
  if (!ops.ok()) return Fail("topic delete", ops.status());
  int failed = 0;
  Json list = Json::array();
  std::vector<std::vector<std::string>> rows;
  for (const std::string& t : f.topics) {
    Status st = (*ops)->DeleteTopic(t);
    failed += st.ok() ? 0 : 1;
    list.push_back(Json{
        {"topic", t}, {"ok", st.ok()}, {"error", st.ok() ? Json(nullptr) : Json(st.message())}});
    rows.push_back({t, st.ok() ? "OK" : st.message()});
  }
  if (f.json) {
    PrintJson(list);
  } else {
    PrintColumns({"TOPIC", "STATUS"}, rows);
  }
  return failed == 0 ? 0 : 1;
}

int RunTopicDescribe(const KafkaCmdFlags& f) {
  auto ops = Connect(f);
  if (!ops.ok()) return Fail("topic describe", ops.status());
  Json all = Json::array();
  int failed = 0;
  for (size_t i = 0; i < f.topics.size(); ++i) {
    auto d = (*ops)->DescribeTopic(f.topics[i]);
    if (!d.ok()) {
      Fail("topic describe", d.status());
      ++failed;
      continue;
    }
    if (f.json) {
      Json parts = Json::array();
      for (const auto& p : d->partitions) {
        parts.push_back(Json{{"partition", p.info.partition},
                             {"leader", p.info.leader},
                             {"replicas", p.info.replicas},
                             {"isr", p.info.isr},
                             {"low", p.marks.low},
                             {"high", p.marks.high}});
      }
      Json configs = Json::array();
      for (const auto& c : d->configs) {
        configs.push_back(Json{{"name", c.name},
                               {"value", c.value ? Json(*c.value) : Json(nullptr)},
                               {"source", c.source}});
      }
      all.push_back(Json{{"name", d->name},
                         {"internal", d->internal},
                         {"partitions", parts},
                         {"configs", configs}});
      continue;
    }
    if (i > 0) fmt::print("\n");
    fmt::print(
        "SUMMARY\n=======\nNAME        {}\nPARTITIONS  {}\nREPLICAS    {}\nINTERNAL    {}\n\n",
        d->name, d->partitions.size(),
        d->partitions.empty() ? 0 : d->partitions[0].info.replicas.size(), d->internal);
    fmt::print("CONFIGS\n=======\n");
    std::vector<std::vector<std::string>> rows;
    for (const auto& c : d->configs) rows.push_back({c.name, c.value.value_or("-"), c.source});
    PrintColumns({"KEY", "VALUE", "SOURCE"}, rows);
    fmt::print("\nPARTITIONS\n==========\n");
    rows.clear();
    for (const auto& p : d->partitions) {
      rows.push_back({std::to_string(p.info.partition), std::to_string(p.info.leader),
                      Join(p.info.replicas), Join(p.info.isr), std::to_string(p.marks.low),
                      std::to_string(p.marks.high)});
    }
    PrintColumns({"PARTITION", "LEADER", "REPLICAS", "IN-SYNC-REPLICAS", "LOG-START-OFFSET",
                  "HIGH-WATERMARK"},
                 rows);
  }
  if (f.json) PrintJson(f.topics.size() == 1 && !all.empty() ? all[0] : all);
  return failed == 0 ? 0 : 1;
}

int RunTopicAlterConfig(const KafkaCmdFlags& f) {
  auto set = ConfigMap(f.configs, "--set");
  if (!set.ok()) return Fail("topic alter-config", set.status());
  if (set->empty() && f.remove.empty())
    return Fail("topic alter-config", "nothing to change: give --set or --delete");
  auto ops = Connect(f);
  if (!ops.ok()) return Fail("topic alter-config", ops.status());
  int failed = 0;
  for (const std::string& t : f.topics) {
    Status st = (*ops)->AlterConfigs(t, *set, f.remove);
    if (!st.ok()) {
      Fail("topic alter-config", st);
      ++failed;
    } else if (!f.json) {
      fmt::print("{}  OK\n", t);
    }
  }
  if (f.json) PrintJson(Json{{"ok", failed == 0}});
  return failed == 0 ? 0 : 1;
}

int RunTopicAddPartitions(const KafkaCmdFlags& f) {
  auto ops = Connect(f);
  if (!ops.ok()) return Fail("topic add-partitions", ops.status());
  int failed = 0;
  for (const std::string& t : f.topics) {
    Status st = (*ops)->AddPartitions(t, f.add_partitions_total);
    if (!st.ok()) {
      Fail("topic add-partitions", st);
      ++failed;
    } else {
      fmt::print("{}  OK ({} partitions)\n", t, f.add_partitions_total);
    }
  }
  return failed == 0 ? 0 : 1;
}

int RunTopicProduce(const KafkaCmdFlags& f) {
  const std::string cmd = "topic produce";
  if (f.topics.size() != 1) return Fail(cmd, "give one topic");
  std::vector<kafka::client::RecordHeader> headers;
  for (const std::string& h : f.headers) {
    auto kv = KeyValue(h, "-H");
    if (!kv.ok()) return Fail(cmd, kv.status());
    headers.push_back({kv->first, kv->second});
  }
  auto config = ClientConfig(f);
  if (!config.ok()) return Fail(cmd, config.status());
  (*config)["acks"] = "all";
  (*config)["linger.ms"] = "5";
  (*config)["message.timeout.ms"] = std::to_string(f.timeout_ms);
  uint64_t failed = 0, delivered = 0;
  const bool json = f.json;
  auto producer =
      kafka::client::Producer::Create(*config, [&](const kafka::client::DeliveryReport& r) {
        if (!r.status.ok()) {
          ++failed;
          std::fprintf(stderr, "sluice topic produce: %s\n", r.status.message().c_str());
          return;
        }
        ++delivered;
        if (json) {
          fmt::print(
              "{}\n",
              Json{{"topic", r.topic}, {"partition", r.partition}, {"offset", r.offset}}.dump());
        } else {
          fmt::print("Produced to partition {} at offset {}.\n", r.partition, r.offset);
        }
      });
  if (!producer.ok()) return Fail(cmd, producer.status());
  std::string line;
  while (std::getline(std::cin, line)) {
    std::optional<std::string_view> key;
    std::string_view value = line;
    if (f.key) key = *f.key;
    if (!f.key_separator.empty()) {
      const size_t at = line.find(f.key_separator);
      if (at == std::string::npos) {
        std::fprintf(stderr,
                     "sluice topic produce: no key separator in a line; sent without a key\n");
      } else {
        key = std::string_view(line).substr(0, at);
        value = std::string_view(line).substr(at + f.key_separator.size());
      }
    }
    while (true) {
      Status st = (*producer)->ProduceRecord(f.topics[0], f.partition, key, value, headers);
      if (st.ok()) break;
      if (st.code() != StatusCode::kResourceExhausted) return Fail(cmd, st);
      (*producer)->Poll(std::chrono::milliseconds(100));
    }
    (*producer)->Poll();
  }
  if (Status st = (*producer)->Flush(std::chrono::milliseconds(f.timeout_ms + 1000)); !st.ok())
    return Fail(cmd, st);
  std::fflush(stdout);
  return failed == 0 ? 0 : 1;
}

int RunTopicConsume(const KafkaCmdFlags& f) {
  const std::string cmd = "topic consume";
  if (f.topics.empty()) return Fail(cmd, "give a topic");
  auto config = ClientConfig(f);
  if (!config.ok()) return Fail(cmd, config.status());
  // Where to start: -o start|end|N|-N|@TIME, or --from-time TIME.
  enum class From { kStart, kEnd, kOffset, kFromEnd, kFromStart, kTime } from = From::kStart;
  int64_t value = 0;
  std::string spec = f.from_time.empty() ? f.offset : "@" + f.from_time;
  if (spec == "start" || spec == "oldest" || spec == "beginning") {
    from = From::kStart;
  } else if (spec == "end" || spec == "newest") {
    from = From::kEnd;
  } else if (spec.starts_with("@")) {
    std::optional<int64_t> t = ParseTimeMs(std::string_view(spec).substr(1));
    if (!t)
      return Fail(cmd, fmt::format("'{}' is not a time (RFC 3339, a date, or ms since 1970)",
                                   spec.substr(1)));
    from = From::kTime;
    value = *t;
  } else {
    std::string_view digits = spec;
    const bool back = digits.starts_with("-");
    const bool ahead = digits.starts_with("+");  // rpk's +N: N after the log start
    if (back || ahead) digits.remove_prefix(1);
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() || value < 0)
      return Fail(cmd, fmt::format("-o '{}': start, end, N, -N, +N or @TIME", spec));
    from = back ? From::kFromEnd : ahead ? From::kFromStart : From::kOffset;
  }
  const std::string format = f.format;
  uint64_t printed = 0;
  auto print = [&](const kafka::client::MessageBatch& batch, size_t i) {
    kafka::client::Message m = batch[i];
    std::optional<std::string_view> key, val;
    if (!batch.KeyIsNull(i)) key = m.key;
    if (!batch.ValueIsNull(i)) val = m.value;
    if (format.empty()) {
      Json j = Json::object();
      j["topic"] = std::string(m.topic);
      j["partition"] = m.partition;
      j["offset"] = m.offset;
      j["timestamp"] = m.timestamp_ms;
      PutBytes(j, "key", key);
      PutBytes(j, "value", val);
      auto headers = batch.Headers(i);
      if (!headers.empty()) {
        Json hs = Json::array();
        for (const auto& h : headers) {
          Json hj{{"key", h.name}};
          PutBytes(hj, "value", h.value ? std::optional<std::string_view>(*h.value) : std::nullopt);
          hs.push_back(std::move(hj));
        }
        j["headers"] = std::move(hs);
      }
      fmt::print("{}\n", j.dump(-1, ' ', false, Json::error_handler_t::replace));
      return;
    }
    std::string out;
    for (size_t c = 0; c < format.size(); ++c) {
      const char ch = format[c];
      if (ch == '\\' && c + 1 < format.size()) {
        const char e = format[++c];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == '0' ? '\0' : e;
        continue;
      }
      if (ch != '%' || c + 1 >= format.size()) {
        out += ch;
        continue;
      }
      switch (format[++c]) {
        case 't':
          out += m.topic;
          break;
        case 'p':
          out += std::to_string(m.partition);
          break;
        case 'o':
          out += std::to_string(m.offset);
          break;
        case 'd':
          out += std::to_string(m.timestamp_ms);
          break;
        case 'k':
          out += key.value_or("");
          break;
        case 'v':
          out += val.value_or("");
          break;
        case 'K':
          out += std::to_string(key ? key->size() : 0);
          break;
        case 'V':
          out += std::to_string(val ? val->size() : 0);
          break;
        case 'h': {
          bool first = true;
          for (const auto& h : batch.Headers(i)) {
            out += (first ? "" : ",") + h.name + "=" + h.value.value_or("");
            first = false;
          }
          break;
        }
        case '%':
          out += '%';
          break;
        default:
          out += '%';
          out += format[c];
          break;
      }
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
  };

  std::unique_ptr<kafka::client::Consumer> consumer;
  // Per partition: the high watermark when reading began (for -e).
  std::map<std::pair<std::string, int32_t>, int64_t> stop_at;
  if (!f.group.empty()) {
    (*config)["group.id"] = f.group;
    (*config)["enable.auto.commit"] = "true";
    (*config)["auto.offset.reset"] = from == From::kEnd ? "latest" : "earliest";
    if (from == From::kOffset || from == From::kFromEnd || from == From::kFromStart ||
        from == From::kTime)
      return Fail(cmd,
                  "with -g the group's committed offsets decide; -o takes start or end there "
                  "(reset a group with `sluice group reset-offsets`)");
    if (f.exit_at_end) return Fail(cmd, "-e is for reading without a group");
    auto c = kafka::client::Consumer::Create(*config);
    if (!c.ok()) return Fail(cmd, c.status());
    consumer = std::move(*c);
    if (Status st = consumer->Subscribe(f.topics); !st.ok()) return Fail(cmd, st);
  } else {
    auto ops = KafkaOps::Create(*config, std::chrono::milliseconds(f.timeout_ms));
    if (!ops.ok()) return Fail(cmd, ops.status());
    std::vector<kafka::client::TopicPartition> assign;
    for (const std::string& t : f.topics) {
      auto d = (*ops)->DescribeTopic(t);
      if (!d.ok()) return Fail(cmd, d.status());
      for (const auto& p : d->partitions) {
        if (f.partition >= 0 && p.info.partition != f.partition) continue;
        int64_t start = kafka::client::kOffsetBeginning;
        switch (from) {
          case From::kStart:
            start = p.marks.low;
            break;
          case From::kEnd:
            start = p.marks.high;
            break;
          case From::kOffset:
            start = std::clamp(value, p.marks.low, p.marks.high);
            break;
          case From::kFromEnd:
            start = std::max(p.marks.low, p.marks.high - value);
            break;
          case From::kFromStart:
            start = std::min(p.marks.high, p.marks.low + value);
            break;
          case From::kTime: {
            auto o = (*ops)->admin().OffsetForTime(t, p.info.partition, value,
                                                   std::chrono::milliseconds(f.timeout_ms));
            if (!o.ok()) return Fail(cmd, o.status());
            start = *o;
            break;
          }
        }
        assign.push_back({t, p.info.partition, start});
        stop_at[{t, p.info.partition}] = p.marks.high;
      }
    }
    if (assign.empty())
      return Fail(cmd, fmt::format("no partition {} in the topic(s)", f.partition));
    (*config)["enable.partition.eof"] = "true";
    auto c = kafka::client::Consumer::Create(*config);
    if (!c.ok()) return Fail(cmd, c.status());
    consumer = std::move(*c);
    if (Status st = consumer->Assign(assign); !st.ok()) return Fail(cmd, st);
    // A partition already at its end is done for -e.
    for (const auto& a : assign) {
      if (a.offset >= stop_at[{a.topic, a.partition}]) stop_at.erase({a.topic, a.partition});
    }
  }
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  while (!g_stop.load()) {
    if (f.exit_at_end && stop_at.empty()) break;
    auto batch = consumer->Poll(std::chrono::milliseconds(200));
    if (!batch.ok()) return Fail(cmd, batch.status());
    for (const Status& st : batch->errors()) return Fail(cmd, st);
    for (size_t i = 0; i < batch->size(); ++i) {
      kafka::client::Message m = (*batch)[i];
      auto stop = stop_at.find({std::string(m.topic), m.partition});
      if (f.exit_at_end && stop == stop_at.end()) continue;
      print(*batch, i);
      if (f.exit_at_end && m.offset + 1 >= stop->second) stop_at.erase(stop);
      if (f.count > 0 && ++printed >= static_cast<uint64_t>(f.count)) {
        std::fflush(stdout);
        return 0;
      }
    }
    for (const auto& end : batch->ends()) {
      auto stop = stop_at.find({end.topic, end.partition});
      if (stop != stop_at.end() && end.offset >= stop->second) stop_at.erase(stop);
    }
    std::fflush(stdout);
  }
  std::fflush(stdout);
  return 0;
}

int RunGroupList(const KafkaCmdFlags& f) {
  auto ops = Connect(f);
  if (!ops.ok()) return Fail("group list", ops.status());
  auto groups = (*ops)->GroupListings();
  if (!groups.ok()) return Fail("group list", groups.status());
  if (f.json) {
    Json list = Json::array();
    for (const auto& g : *groups) list.push_back(Json{{"group", g.group_id}, {"state", g.state}});
    PrintJson(list);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : *groups) rows.push_back({g.group_id, g.state});
  PrintColumns({"GROUP", "STATE"}, rows);
  return 0;
}

int RunGroupDescribe(const KafkaCmdFlags& f) {
  auto ops = Connect(f);
  if (!ops.ok()) return Fail("group describe", ops.status());
  Json all = Json::array();
  int failed = 0;
  for (size_t gi = 0; gi < f.topics.size(); ++gi) {
    const std::string& group = f.topics[gi];
    auto d = (*ops)->DescribeGroup(group);
    if (!d.ok()) {
      Fail("group describe", d.status());
      ++failed;
      continue;
    }
    // Who holds each partition.
    std::map<std::pair<std::string, int32_t>, const kafka::client::GroupMember*> holder;
    for (const auto& m : d->description.members) {
      for (const auto& tp : m.assignment) holder[{tp.topic, tp.partition}] = &m;
    }
    int64_t total_lag = 0;
    for (const auto& o : d->offsets) total_lag += std::max<int64_t>(o.lag, 0);
    if (f.json) {
      Json offsets = Json::array();
      for (const auto& o : d->offsets) {
        auto h = holder.find({o.topic, o.partition});
        offsets.push_back(
            Json{{"topic", o.topic},
                 {"partition", o.partition},
                 {"offset", o.offset < 0 ? Json(nullptr) : Json(o.offset)},
                 {"high", o.high < 0 ? Json(nullptr) : Json(o.high)},
                 {"lag", o.lag < 0 ? Json(nullptr) : Json(o.lag)},
                 {"member_id", h == holder.end() ? Json(nullptr) : Json(h->second->member_id)}});
      }
      all.push_back(Json{{"group", d->description.group_id},
                         {"state", d->description.state},
                         {"protocol", d->description.assignor},
                         {"coordinator", d->description.coordinator.node_id},
                         {"members", d->description.members.size()},
                         {"total_lag", total_lag},
                         {"offsets", offsets}});
      continue;
    }
    if (gi > 0) fmt::print("\n");
    fmt::print(
        "GROUP        {}\nCOORDINATOR  {}\nSTATE        {}\nBALANCER     {}\nMEMBERS      "
        "{}\nTOTAL-LAG    {}\n\n",
        d->description.group_id, d->description.coordinator.node_id, d->description.state,
        d->description.assignor, d->description.members.size(), total_lag);
    std::vector<std::vector<std::string>> rows;
    for (const auto& o : d->offsets) {
      auto h = holder.find({o.topic, o.partition});
      rows.push_back(
          {o.topic, std::to_string(o.partition), o.offset < 0 ? "-" : std::to_string(o.offset),
           o.high < 0 ? "-" : std::to_string(o.high), o.lag < 0 ? "-" : std::to_string(o.lag),
           h == holder.end() ? "" : h->second->member_id,
           h == holder.end() ? "" : h->second->client_id,
           h == holder.end() ? "" : h->second->host});
    }
    PrintColumns({"TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID",
                  "CLIENT-ID", "HOST"},
                 rows);
  }
  if (f.json) PrintJson(f.topics.size() == 1 && !all.empty() ? all[0] : all);
  return failed == 0 ? 0 : 1;
}

int RunGroupResetOffsets(const KafkaCmdFlags& f) {
  const std::string cmd = "group reset-offsets";
  if (f.topics.size() != 1) return Fail(cmd, "give one group");
  console::ResetSpec spec;
  if (f.reset_to == "earliest") {
    spec.to = console::ResetTo::kEarliest;
  } else if (f.reset_to == "latest") {
    spec.to = console::ResetTo::kLatest;
  } else if (f.reset_to == "offset") {
    spec.to = console::ResetTo::kOffset;
    spec.value = f.reset_offset;
  } else if (f.reset_to == "datetime") {
    std::optional<int64_t> t = ParseTimeMs(f.reset_datetime);
    if (!t) return Fail(cmd, fmt::format("--to-datetime '{}' is not a time", f.reset_datetime));
    spec.to = console::ResetTo::kTimestamp;
    spec.value = *t;
  } else {
    return Fail(cmd, "give one of --to-earliest, --to-latest, --to-offset N, --to-datetime TIME");
  }
  if (f.reset_topics.empty()) return Fail(cmd, "give --topic TOPIC[:P,P,...]");
  auto ops = Connect(f);
  if (!ops.ok()) return Fail(cmd, ops.status());
  std::vector<std::vector<std::string>> rows;
  Json list = Json::array();
  std::vector<console::ResetRow> all_rows;
  for (const std::string& t : f.reset_topics) {
    console::ResetSpec s = spec;
    s.execute = false;  // every topic computed first, then committed in one request
    const size_t colon = t.rfind(':');
    s.topic = t.substr(0, colon);
    if (colon != std::string::npos) {
      std::string_view list = std::string_view(t).substr(colon + 1);
      while (!list.empty() || s.partitions.empty()) {
        const size_t comma = list.find(',');
        std::string_view p = Trim(list.substr(0, comma));
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
        int32_t n = -1;
        auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), n);
        if (ec != std::errc() || end != p.data() + p.size() || n < 0)
          return Fail(cmd, fmt::format("--topic '{}': partitions are numbers after ':'", t));
        s.partitions.push_back(n);
      }
    }
    auto result = (*ops)->ResetOffsets(f.topics[0], s);
    if (!result.ok()) return Fail(cmd, result.status());
    all_rows.insert(all_rows.end(), result->begin(), result->end());
    for (const auto& r : *result) {
      rows.push_back({r.topic, std::to_string(r.partition),
                      r.previous < 0 ? "-" : std::to_string(r.previous), std::to_string(r.offset)});
      list.push_back(Json{{"topic", r.topic},
                          {"partition", r.partition},
                          {"previous", r.previous < 0 ? Json(nullptr) : Json(r.previous)},
                          {"offset", r.offset}});
    }
  }
  if (f.execute) {
    if (Status st = (*ops)->CommitResets(f.topics[0], all_rows); !st.ok()) return Fail(cmd, st);
  }
  if (f.json) {
    PrintJson(Json{{"executed", f.execute}, {"offsets", list}});
  } else {
    PrintColumns({"TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"}, rows);
    if (!f.execute) fmt::print("\n(a preview: nothing changed; add --execute to reset)\n");
  }
  return 0;
}

int RunGroupDelete(const KafkaCmdFlags& f) {
  auto ops = Connect(f);
  if (!ops.ok()) return Fail("group delete", ops.status());
  int failed = 0;
  for (const std::string& g : f.topics) {
    Status st = (*ops)->DeleteGroup(g);
    if (!st.ok()) {
      Fail("group delete", st);
      ++failed;
    } else {
      fmt::print("{}  OK\n", g);
    }
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace sluice::cli
