// The etcd values' JSON and keys. See cluster_values.h.
#include "cluster/cluster_values.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "base/json_depth.h"

namespace sluice::cluster {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kBase64Url =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr int kMaxDepth = 8;  // the deepest value written is 3 levels

int Base64UrlValue(char c) {
  size_t i = kBase64Url.find(c);
  return i == std::string_view::npos ? -1 : static_cast<int>(i);
}

// Parses `text` as one JSON object, after checking its size and nesting (bounded before
// the parser allocates anything for it).
Result<Json> ParseObject(std::string_view text, std::string_view what) {
  if (text.size() > kMaxValueBytes) {
    return InvalidArgumentError("{}: {} bytes, more than the {} a value may have", what,
                                text.size(), kMaxValueBytes);
  }
  if (JsonTooDeep(text, kMaxDepth) != std::string_view::npos) {
    return InvalidArgumentError("{}: nested deeper than {} levels", what, kMaxDepth);
  }
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError("{}: not JSON", what);
  if (!j.is_object()) return InvalidArgumentError("{}: not a JSON object", what);
  return j;
}

// A field of `j`: present and of the right kind, or an error naming it.
class Fields {
 public:
  Fields(const Json& j, std::string_view what) : j_(j), what_(what) {}

  Result<int64_t> Int(const char* name, int64_t min, int64_t max) const {
    auto it = j_.find(name);
    if (it == j_.end()) return InvalidArgumentError("{}: no \"{}\"", what_, name);
    return IntOf(*it, name, min, max);
  }
  Result<int64_t> IntOf(const Json& v, const char* name, int64_t min, int64_t max) const {
    if (!v.is_number_integer()) {
      return InvalidArgumentError("{}: \"{}\" is not an integer", what_, name);
    }
    // Unsigned above INT64_MAX: out of any range this code takes.
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgumentError("{}: \"{}\" is out of range", what_, name);
    }
    const int64_t n = v.get<int64_t>();
    if (n < min || n > max) {
      return InvalidArgumentError("{}: \"{}\" is {}, outside {} to {}", what_, name, n, min, max);
    }
    return n;
  }
  Result<std::string> String(const char* name) const {
    auto it = j_.find(name);
    if (it == j_.end()) return InvalidArgumentError("{}: no \"{}\"", what_, name);
    if (!it->is_string()) return InvalidArgumentError("{}: \"{}\" is not a string", what_, name);
    return it->get<std::string>();
  }
  Result<std::string> Id(const char* name) const {
    ASSIGN_OR_RETURN(std::string s, String(name));
    if (!IsIdText(s)) {
      return InvalidArgumentError("{}: \"{}\" is not an id (22 characters of URL-safe base64)",
                                  what_, name);
    }
    return s;
  }
  Result<bool> Bool(const char* name) const {
    auto it = j_.find(name);
    if (it == j_.end()) return InvalidArgumentError("{}: no \"{}\"", what_, name);
    if (!it->is_boolean())
      return InvalidArgumentError("{}: \"{}\" is not true or false", what_, name);
    return it->get<bool>();
  }
  Result<const Json*> Array(const char* name, size_t max) const {
    auto it = j_.find(name);
    if (it == j_.end()) return InvalidArgumentError("{}: no \"{}\"", what_, name);
    if (!it->is_array()) return InvalidArgumentError("{}: \"{}\" is not an array", what_, name);
    if (it->size() > max) {
      return InvalidArgumentError("{}: \"{}\" has {} entries, more than {}", what_, name,
                                  it->size(), max);
    }
    return &*it;
  }
  std::string_view what() const { return what_; }

 private:
  const Json& j_;
  std::string_view what_;
};

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

Result<int32_t> Port(const Fields& f, const char* name) {
  ASSIGN_OR_RETURN(int64_t p, f.Int(name, 1, 65535));
  return static_cast<int32_t>(p);
}

std::optional<int32_t> ParseNode(std::string_view text) {
  int32_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0 ||
      (text.size() > 1 && text[0] == '0')) {
    return std::nullopt;
  }
  return v;
}

}  // namespace

bool IsIdText(std::string_view s) {
  return s.size() == 22 &&
         std::all_of(s.begin(), s.end(), [](char c) { return Base64UrlValue(c) >= 0; });
}

std::string IdText(uint64_t hi, uint64_t lo) {
  uint8_t bytes[16];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<uint8_t>(hi >> (56 - 8 * i));
    bytes[8 + i] = static_cast<uint8_t>(lo >> (56 - 8 * i));
  }
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (uint8_t b : bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kBase64Url[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(kBase64Url[(acc << (6 - bits)) & 0x3f]);
  return out;
}

bool ParseIdText(std::string_view text, uint64_t* hi, uint64_t* lo) {
  if (!IsIdText(text)) return false;
  uint8_t bytes[16] = {};
  uint32_t acc = 0;
  int bits = 0;
  size_t n = 0;
  for (char c : text) {
    acc = (acc << 6) | static_cast<uint32_t>(Base64UrlValue(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (n < 16) bytes[n++] = static_cast<uint8_t>(acc >> bits);
    }
  }
  // 22 characters carry 132 bits: the last 4 must be zero, as an encoder writes them.
  if ((acc & ((1u << bits) - 1)) != 0) return false;
  *hi = *lo = 0;
  for (int i = 0; i < 8; ++i) {
    *hi = (*hi << 8) | bytes[i];
    *lo = (*lo << 8) | bytes[8 + i];
  }
  return true;
}

bool PartitionState::InIsr(int32_t node) const {
  return std::any_of(isr.begin(), isr.end(), [node](const IsrMember& m) { return m.node == node; });
}

// ---------------------------------------------------------------------------------------
// Encoding

std::string ToJson(const ClusterIdValue& v) { return Json{{"id", v.id}}.dump(); }

std::string ToJson(const BrokerRegistration& v) {
  Json j{{"host", v.host},
         {"port", v.port},
         {"inter_broker_host", v.inter_broker_host},
         {"inter_broker_port", v.inter_broker_port},
         {"incarnation", v.incarnation},
         {"clean", v.clean}};
  if (!v.listeners.empty()) {
    Json listeners = Json::array();
    for (const ListenerAddress& l : v.listeners) {
      listeners.push_back(Json{{"name", l.name}, {"host", l.host}, {"port", l.port}});
    }
    j["listeners"] = std::move(listeners);
  }
  return j.dump();
}

std::string ToJson(const IncarnationValue& v) {
  return Json{{"incarnation", v.incarnation}}.dump();
}

std::string ToJson(const ControllerValue& v) {
  return Json{{"node", v.node}, {"epoch", v.epoch}}.dump();
}

std::string ToJson(const ControllerEpochValue& v) { return Json{{"epoch", v.epoch}}.dump(); }

std::string ToJson(const TopicAssignment& v) {
  Json parts = Json::array();
  for (const auto& replicas : v.partitions) parts.push_back(replicas);
  Json configs = Json::object();
  for (const auto& [k, val] : v.configs) configs[k] = val;
  return Json{{"id", v.id}, {"partitions", parts}, {"configs", configs}}.dump();
}

std::string ToJson(const PartitionState& v) {
  Json isr = Json::array();
  for (const IsrMember& m : v.isr) isr.push_back(Json::array({m.node, m.incarnation}));
  return Json{{"leader", v.leader},
              {"leader_epoch", v.leader_epoch},
              {"isr", isr},
              {"controller_epoch", v.controller_epoch}}
      .dump();
}

std::string ToJson(const ProducerIdBlock& v) { return Json{{"next", v.next}}.dump(); }

std::string ToJson(const DeletingValue& v) { return Json{{"id", v.id}}.dump(); }

// ---------------------------------------------------------------------------------------
// Decoding

Result<ClusterIdValue> ParseClusterIdValue(std::string_view json) {
  ASSIGN_OR_RETURN(Json j, ParseObject(json, "cluster_id"));
  Fields f(j, "cluster_id");
  ClusterIdValue v;
  ASSIGN_OR_RETURN(v.id, f.Id("id"));
  return v;
}

Result<BrokerRegistration> ParseBrokerRegistration(std::string_view json) {
  ASSIGN_OR_RETURN(Json j, ParseObject(json, "broker registration"));
  Fields f(j, "broker registration");
  BrokerRegistration v;
  ASSIGN_OR_RETURN(v.host, f.String("host"));
  ASSIGN_OR_RETURN(v.port, Port(f, "port"));
  ASSIGN_OR_RETURN(v.inter_broker_host, f.String("inter_broker_host"));
  ASSIGN_OR_RETURN(v.inter_broker_port, Port(f, "inter_broker_port"));
  if (v.host.empty() || v.inter_broker_host.empty()) {
    return InvalidArgumentError("broker registration: an empty host");
  }
  ASSIGN_OR_RETURN(v.incarnation, f.Id("incarnation"));
  ASSIGN_OR_RETURN(v.clean, f.Bool("clean"));
  if (j.contains("listeners")) {
    ASSIGN_OR_RETURN(const Json* listeners, f.Array("listeners", 4));
    for (const Json& e : *listeners) {
      if (!e.is_object())
        return InvalidArgumentError("broker registration: a listener is not an object");
      Fields lf(e, "broker registration listener");
      ListenerAddress l;
      ASSIGN_OR_RETURN(l.name, lf.String("name"));
      ASSIGN_OR_RETURN(l.host, lf.String("host"));
      ASSIGN_OR_RETURN(l.port, Port(lf, "port"));
      if (l.name != "PLAINTEXT" && l.name != "SSL" && l.name != "SASL_PLAINTEXT" &&
          l.name != "SASL_SSL") {
        return InvalidArgumentError(
            "broker registration: listener \"{}\" is not a Kafka security protocol",
            l.name.substr(0, 32));
      }
      if (l.host.empty())
        return InvalidArgumentError("broker registration: listener {} has an empty host", l.name);
      for (const ListenerAddress& seen : v.listeners) {
        if (seen.name == l.name) {
          return InvalidArgumentError("broker registration: listener {} twice", l.name);
        }
      }
      v.listeners.push_back(std::move(l));
    }
  }
  return v;
}

Result<IncarnationValue> ParseIncarnationValue(std::string_view json) {
  ASSIGN_OR_RETURN(Json j, ParseObject(json, "incarnation"));
  Fields f(j, "incarnation");
  IncarnationValue v;
  ASSIGN_OR_RETURN(v.incarnation, f.Id("incarnation"));
  return v;
}

Result<ControllerValue> ParseControllerValue(std::string_view json) {
  ASSIGN_OR_RETURN(Json j, ParseObject(json, "controller"));
  Fields f(j, "controller");
  ASSIGN_OR_RETURN(int64_t node, f.Int("node", 0, kInt32Max));
  ASSIGN_OR_RETURN(int64_t epoch, f.Int("epoch", 0, kInt64Max));
  return ControllerValue{static_cast<int32_t>(node), epoch};
}

Result<ControllerEpochValue> ParseControllerEpochValue(std::string_view json) {
  ASSIGN_OR_RETURN(Json j, ParseObject(json, "controller_epoch"));
  Fields f(j, "controller_epoch");
  ASSIGN_OR_RETURN(int64_t epoch, f.Int("epoch", 0, kInt64Max));
  return ControllerEpochValue{epoch};
}

Result<TopicAssignment> ParseTopicAssignment(std::string_view json) {
  ASSIGN_OR_RETURN(Json j, ParseObject(json, "topic"));
  Fields f(j, "topic");
  TopicAssignment v;
  ASSIGN_OR_RETURN(v.id, f.Id("id"));
  ASSIGN_OR_RETURN(const Json* parts, f.Array("partitions", kMaxPartitions));
  if (parts->empty()) return InvalidArgumentError("topic: no partitions");
  v.partitions.reserve(parts->size());
  for (size_t p = 0; p < parts->size(); ++p) {
    const Json& replicas = (*parts)[p];
    if (!replicas.is_array() || replicas.empty() || replicas.size() > kMaxReplicas) {
      return InvalidArgumentError("topic: partition {} is not an array of 1 to {} node ids", p,
                                  kMaxReplicas);
    }
    std::vector<int32_t> nodes;
    std::set<int32_t> seen;
    for (const Json& n : replicas) {
      ASSIGN_OR_RETURN(int64_t node, f.IntOf(n, "partitions", 0, kInt32Max));
      if (!seen.insert(static_cast<int32_t>(node)).second) {
        return InvalidArgumentError("topic: partition {} names node {} twice", p, node);
      }
      nodes.push_back(static_cast<int32_t>(node));
    }
    v.partitions.push_back(std::move(nodes));
  }
  auto configs = j.find("configs");
  if (configs != j.end()) {
    if (!configs->is_object() || configs->size() > kMaxTopicConfigs) {
      return InvalidArgumentError("topic: \"configs\" is not an object of at most {} strings",
                                  kMaxTopicConfigs);
    }
    for (const auto& [k, val] : configs->items()) {
      if (!val.is_string()) {
        return InvalidArgumentError("topic: config \"{}\" is not a string", k);
      }
      v.configs[k] = val.get<std::string>();
    }
  }
  return v;
}

Result<PartitionState> ParsePartitionState(std::string_view json) {
  ASSIGN_OR_RETURN(Json j, ParseObject(json, "partition state"));
  Fields f(j, "partition state");
  PartitionState v;
  ASSIGN_OR_RETURN(int64_t leader, f.Int("leader", -1, kInt32Max));
  ASSIGN_OR_RETURN(int64_t epoch, f.Int("leader_epoch", 0, kInt32Max));
  v.leader = static_cast<int32_t>(leader);
  v.leader_epoch = static_cast<int32_t>(epoch);
  ASSIGN_OR_RETURN(const Json* isr, f.Array("isr", kMaxReplicas));
  std::set<int32_t> seen;
  for (const Json& m : *isr) {
    if (!m.is_array() || m.size() != 2 || !m[1].is_string()) {
      return InvalidArgumentError("partition state: an ISR member is not [node, incarnation]");
    }
    ASSIGN_OR_RETURN(int64_t node, f.IntOf(m[0], "isr", 0, kInt32Max));
    std::string inc = m[1].get<std::string>();
    if (!IsIdText(inc)) {
      return InvalidArgumentError("partition state: ISR member {} has no valid incarnation", node);
    }
    if (!seen.insert(static_cast<int32_t>(node)).second) {
      return InvalidArgumentError("partition state: node {} is in the ISR twice", node);
    }
    v.isr.push_back({static_cast<int32_t>(node), std::move(inc)});
  }
  ASSIGN_OR_RETURN(v.controller_epoch, f.Int("controller_epoch", 0, kInt64Max));
  return v;
}

Result<ProducerIdBlock> ParseProducerIdBlock(std::string_view json) {
  ASSIGN_OR_RETURN(Json j, ParseObject(json, "producer_ids"));
  Fields f(j, "producer_ids");
  // Room for one more block: a value at the very top could never be advanced.
  ASSIGN_OR_RETURN(int64_t next, f.Int("next", 0, kInt64Max - kProducerIdBlockSize));
  return ProducerIdBlock{next};
}

Result<DeletingValue> ParseDeletingValue(std::string_view json) {
  ASSIGN_OR_RETURN(Json j, ParseObject(json, "deleting"));
  Fields f(j, "deleting");
  DeletingValue v;
  ASSIGN_OR_RETURN(v.id, f.Id("id"));
  return v;
}

// ---------------------------------------------------------------------------------------
// Keys

KeyLayout::KeyLayout(const std::string& cluster_name) : prefix_("/sluice/" + cluster_name + "/") {}

std::string KeyLayout::Broker(int32_t node) const { return Brokers() + std::to_string(node); }

std::string KeyLayout::Incarnation(int32_t node) const {
  return Incarnations() + std::to_string(node);
}

std::string KeyLayout::Topic(std::string_view name) const { return Topics() + std::string(name); }

std::string KeyLayout::PartitionsOf(std::string_view topic) const {
  return Partitions() + std::string(topic) + "/";
}

std::string KeyLayout::Partition(std::string_view topic, int32_t partition) const {
  return PartitionsOf(topic) + std::to_string(partition);
}

std::string KeyLayout::Deleting(std::string_view topic) const {
  return Deletions() + std::string(topic);
}

std::optional<int32_t> KeyLayout::NodeOfBroker(std::string_view key) const {
  const std::string p = Brokers();
  if (!key.starts_with(p)) return std::nullopt;
  return ParseNode(key.substr(p.size()));
}

std::optional<int32_t> KeyLayout::NodeOfIncarnation(std::string_view key) const {
  const std::string p = Incarnations();
  if (!key.starts_with(p)) return std::nullopt;
  return ParseNode(key.substr(p.size()));
}

std::optional<std::string> KeyLayout::TopicOf(std::string_view key) const {
  const std::string p = Topics();
  if (!key.starts_with(p) || key.size() == p.size()) return std::nullopt;
  std::string_view name = key.substr(p.size());
  if (name.find('/') != std::string_view::npos) return std::nullopt;
  return std::string(name);
}

std::optional<std::pair<std::string, int32_t>> KeyLayout::PartitionOf(std::string_view key) const {
  const std::string p = Partitions();
  if (!key.starts_with(p)) return std::nullopt;
  std::string_view rest = key.substr(p.size());
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash == 0) return std::nullopt;
  std::optional<int32_t> part = ParseNode(rest.substr(slash + 1));
  if (!part.has_value()) return std::nullopt;
  return std::make_pair(std::string(rest.substr(0, slash)), *part);
}

std::optional<std::string> KeyLayout::DeletingOf(std::string_view key) const {
  const std::string p = Deletions();
  if (!key.starts_with(p) || key.size() == p.size()) return std::nullopt;
  std::string_view name = key.substr(p.size());
  if (name.find('/') != std::string_view::npos) return std::nullopt;
  return std::string(name);
}

}  // namespace sluice::cluster
