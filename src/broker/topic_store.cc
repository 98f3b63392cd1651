#include "broker/topic_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <random>

#include "broker/meta_files.h"
#include "storage/env.h"

namespace sluice::broker {
namespace {

using kafka::ErrorCode;

constexpr int kFormatVersion = 1;

TopicError Err(ErrorCode code, std::string message) { return TopicError{code, std::move(message)}; }

std::optional<int64_t> ParseInt(const std::string& s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::string UuidText(const kafka::Uuid& u) {
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", u.hi >> 32, (u.hi >> 16) & 0xffff,
                     u.hi & 0xffff, u.lo >> 48, u.lo & 0xffffffffffffULL);
}

std::optional<kafka::Uuid> ParseUuidText(const std::string& s) {
  if (s.size() != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-')
    return std::nullopt;
  std::string hex;
  for (char c : s) {
    if (c != '-') hex.push_back(c);
  }
  uint64_t parts[2];
  for (size_t i = 0; i < 2; ++i) {
    const char* begin = hex.data() + 16 * i;
    auto [p, ec] = std::from_chars(begin, begin + 16, parts[i], 16);
    if (ec != std::errc() || p != begin + 16) return std::nullopt;
  }
  return kafka::Uuid{parts[0], parts[1]};
}

// Kafka rejects a topic whose name equals an existing one once '.' and '_' are the same.
std::string CollisionKey(const std::string& name) {
  std::string k = name;
  std::replace(k.begin(), k.end(), '.', '_');
  return k;
}

}  // namespace

kafka::Uuid RandomUuid() {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  kafka::Uuid u;
  do {
    u.hi = (gen() & ~0xf000ULL) | 0x4000ULL;        // version 4
    u.lo = (gen() & ~(3ULL << 62)) | (2ULL << 62);  // variant 10
  } while (u.IsZero());
  return u;
}

TopicError ValidateTopicName(const std::string& name) {
  if (name.empty()) return Err(ErrorCode::kInvalidTopicException, "topic name is empty");
  if (name == "." || name == "..") {
    return Err(ErrorCode::kInvalidTopicException, fmt::format("topic name cannot be '{}'", name));
  }
  if (name.size() > 249) {
    return Err(ErrorCode::kInvalidTopicException,
               fmt::format("topic name is {} characters long; the maximum is 249", name.size()));
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) {
      return Err(ErrorCode::kInvalidTopicException,
                 fmt::format("topic name '{}' contains '{}': only ASCII letters, digits, '.', "
                             "'_' and '-' are allowed",
                             name, c));
    }
  }
  return {};
}

const std::vector<std::string>& TopicConfig::Names() {
  static const std::vector<std::string> kNames = {
      "cleanup.policy",        "delete.retention.ms",    "max.compaction.lag.ms",
      "max.message.bytes",     "message.timestamp.type", "min.cleanable.dirty.ratio",
      "min.compaction.lag.ms", "min.insync.replicas",    "retention.bytes",
      "retention.ms",          "segment.bytes",          "segment.ms",
      "remote.storage.enable", "local.retention.ms",     "local.retention.bytes"};
  return kNames;
}

Result<TopicConfig> TopicConfig::Resolve(const std::map<std::string, std::string>& overrides,
                                         const TopicConfig& defaults, TopicError* error) {
  TopicConfig c = defaults;
  auto bad = [&](const std::string& key, const std::string& value, const std::string& why) {
    *error = Err(ErrorCode::kInvalidConfig,
                 fmt::format("invalid value '{}' for config {}: {}", value, key, why));
    return InvalidArgumentError("{}", error->message);
  };
  for (const auto& [key, value] : overrides) {
    auto n = ParseInt(value);
    if (key == "retention.ms" || key == "retention.bytes") {
      if (!n || *n < -1) return bad(key, value, "must be an integer, -1 or more");
      (key == "retention.ms" ? c.retention_ms : c.retention_bytes) = *n;
    } else if (key == "segment.bytes") {
      if (!n || *n < kMinSegmentBytes || *n > kMaxSegmentBytes) {
        return bad(
            key, value,
            fmt::format("must be an integer from {} to {}", kMinSegmentBytes, kMaxSegmentBytes));
      }
      c.segment_bytes = *n;
    } else if (key == "segment.ms") {
      if (!n || *n < 1) return bad(key, value, "must be a positive integer");
      c.segment_ms = *n;
    } else if (key == "max.message.bytes") {
      if (!n || *n < 0 || *n > kMaxTopicMessageBytes) {
        return bad(key, value,
                   fmt::format("must be an integer from 0 to {}", kMaxTopicMessageBytes));
      }
      c.max_message_bytes = static_cast<int32_t>(*n);
    } else if (key == "message.timestamp.type") {
      if (value != "CreateTime" && value != "LogAppendTime") {
        return bad(key, value, "must be CreateTime or LogAppendTime");
      }
      c.log_append_time = value == "LogAppendTime";
    } else if (key == "cleanup.policy") {
      // A list of compact and delete, in any order, spaces allowed (as Kafka's parser).
      bool compact = false, del = false;
      size_t pos = 0;
      while (pos <= value.size()) {
        size_t comma = std::min(value.find(',', pos), value.size());
        std::string item = value.substr(pos, comma - pos);
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        if (item == "compact") {
          compact = true;
        } else if (item == "delete") {
          del = true;
        } else {
          return bad(key, value, "must be a list of 'compact' and 'delete'");
        }
        pos = comma + 1;
      }
      c.cleanup_policy = compact && del ? "compact,delete" : compact ? "compact" : "delete";
    } else if (key == "min.cleanable.dirty.ratio") {
      double v = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (value.empty() || ec != std::errc() || p != value.data() + value.size() || !(v >= 0) ||
          v > 1) {
        return bad(key, value, "must be a number from 0 to 1");
      }
      c.min_cleanable_dirty_ratio = v;
    } else if (key == "min.compaction.lag.ms" || key == "delete.retention.ms") {
      if (!n || *n < 0) return bad(key, value, "must be an integer, 0 or more");
      (key == "delete.retention.ms" ? c.delete_retention_ms : c.min_compaction_lag_ms) = *n;
    } else if (key == "min.insync.replicas") {
      // Kafka's range: at least 1 (above the replication factor acks=all always fails,
      // which Kafka also allows).
      if (!n || *n < 1 || *n > INT32_MAX) return bad(key, value, "must be a positive integer");
      c.min_insync_replicas = static_cast<int32_t>(*n);
    } else if (key == "max.compaction.lag.ms") {
      if (!n || *n < 1) return bad(key, value, "must be a positive integer");
      c.max_compaction_lag_ms = *n;
    } else if (key == "remote.storage.enable") {
      if (value != "true" && value != "false") return bad(key, value, "must be true or false");
      c.remote_storage_enable = value == "true";
    } else if (key == "local.retention.ms" || key == "local.retention.bytes") {
      if (!n || *n < -2) return bad(key, value, "must be an integer, -2 (as retention) or more");
      (key == "local.retention.ms" ? c.local_retention_ms : c.local_retention_bytes) = *n;
    } else {
      *error = Err(ErrorCode::kInvalidConfig, fmt::format("unknown topic config '{}'", key));
      return InvalidArgumentError("{}", error->message);
    }
  }
  if (c.min_compaction_lag_ms > c.max_compaction_lag_ms) {
    return bad("min.compaction.lag.ms", std::to_string(c.min_compaction_lag_ms),
               fmt::format("must not exceed max.compaction.lag.ms ({})", c.max_compaction_lag_ms));
  }
  // Tiered storage, as Kafka checks it: the local part is no longer than the whole (-1,
  // forever, only with a whole that is forever too), never on compacted topics, and only
  // on a broker with a tiered_storage bucket.
  if (c.remote_storage_enable) {
    if (!c.remote_storage_available) {
      return bad("remote.storage.enable", "true",
                 "this broker has no tiered storage (a tiered_storage: section in its config)");
    }
    if (c.compacted()) {
      return bad(
          "remote.storage.enable", "true",
          fmt::format("tiered storage is not supported with cleanup.policy={}", c.cleanup_policy));
    }
    auto longer = [](int64_t local, int64_t whole) {
      if (local == -2 || whole == -1) return false;
      return local == -1 || local > whole;
    };
    if (longer(c.local_retention_ms, c.retention_ms)) {
      return bad("local.retention.ms", std::to_string(c.local_retention_ms),
                 fmt::format("must not exceed retention.ms ({})", c.retention_ms));
    }
    if (longer(c.local_retention_bytes, c.retention_bytes)) {
      return bad("local.retention.bytes", std::to_string(c.local_retention_bytes),
                 fmt::format("must not exceed retention.bytes ({})", c.retention_bytes));
    }
  }
  return c;
}

std::map<std::string, std::string> TopicConfig::ToMap() const {
  return {{"cleanup.policy", cleanup_policy},
          {"delete.retention.ms", std::to_string(delete_retention_ms)},
          {"max.compaction.lag.ms", std::to_string(max_compaction_lag_ms)},
          {"min.cleanable.dirty.ratio", fmt::format("{}", min_cleanable_dirty_ratio)},
          {"min.compaction.lag.ms", std::to_string(min_compaction_lag_ms)},
          {"min.insync.replicas", std::to_string(min_insync_replicas)},
          {"max.message.bytes", std::to_string(max_message_bytes)},
          {"message.timestamp.type", log_append_time ? "LogAppendTime" : "CreateTime"},
          {"retention.bytes", std::to_string(retention_bytes)},
          {"retention.ms", std::to_string(retention_ms)},
          {"segment.bytes", std::to_string(segment_bytes)},
          {"segment.ms", std::to_string(segment_ms)},
          {"remote.storage.enable", remote_storage_enable ? "true" : "false"},
          {"local.retention.ms", std::to_string(local_retention_ms)},
          {"local.retention.bytes", std::to_string(local_retention_bytes)}};
}

TopicStore::TopicStore(const std::string& data_dir, TopicConfig defaults, storage::Env* env)
    : env_(env),
      meta_dir_(data_dir + "/meta"),
      path_(meta_dir_ + "/topics.json"),
      defaults_(std::move(defaults)) {}

Result<std::unique_ptr<TopicStore>> TopicStore::Open(const std::string& data_dir,
                                                     TopicConfig defaults, storage::Env* env) {
  std::unique_ptr<TopicStore> store(new TopicStore(data_dir, std::move(defaults), env));
  RETURN_IF_ERROR(env->CreateDirs(store->meta_dir_));
  RETURN_IF_ERROR(store->Load());
  return store;
}

Status TopicStore::Load() {
  // No real bound: the cap only keeps a damaged size from allocating without limit.
  constexpr size_t kMaxTopicsFileBytes = size_t{1} << 30;
  Result<std::string> text = ReadSmallFile(env_, path_, kMaxTopicsFileBytes);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return Status::OK();
    return IOError("cannot read {}: {}", path_, text.status().message());
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& e) {
    return CorruptionError("{}: not valid JSON: {}", path_, e.what());
  }
  auto corrupt = [&](const std::string& what) { return CorruptionError("{}: {}", path_, what); };
  if (!doc.is_object() || !doc.contains("version") || !doc["version"].is_number_integer()) {
    return corrupt("no integer \"version\" at the top level");
  }
  if (doc["version"].get<int64_t>() != kFormatVersion) {
    return corrupt(
        fmt::format("format version {} is not {}", doc["version"].dump(), kFormatVersion));
  }
  if (!doc.contains("topics") || !doc["topics"].is_array()) return corrupt("no \"topics\" array");
  for (const auto& t : doc["topics"]) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("id") ||
        !t["id"].is_string() || !t.contains("partitions") || !t["partitions"].is_number_integer()) {
      return corrupt(
          fmt::format("topic entry {} lacks a string name, a string id or an integer partitions",
                      t.dump().substr(0, 200)));
    }
    TopicInfo info;
    info.name = t["name"].get<std::string>();
    if (TopicError e = ValidateTopicName(info.name); !e.ok()) return corrupt(e.message);
    auto id = ParseUuidText(t["id"].get<std::string>());
    if (!id || id->IsZero()) return corrupt(fmt::format("topic {} has a bad id", info.name));
    info.id = *id;
    int64_t partitions = t["partitions"].get<int64_t>();
    if (partitions < 1 || partitions > 1'000'000) {
      return corrupt(fmt::format("topic {} has {} partitions", info.name, partitions));
    }
    info.partitions = static_cast<int32_t>(partitions);
    if (t.contains("configs")) {
      if (!t["configs"].is_object())
        return corrupt(fmt::format("topic {}: configs is not an object", info.name));
      for (const auto& [k, v] : t["configs"].items()) {
        if (!v.is_string())
          return corrupt(fmt::format("topic {}: config {} is not a string", info.name, k));
        info.overrides[k] = v.get<std::string>();
      }
    }
    TopicError err;
    auto config = TopicConfig::Resolve(info.overrides, defaults_, &err);
    if (!config.ok()) return corrupt(fmt::format("topic {}: {}", info.name, err.message));
    info.config = *config;
    if (topics_.count(info.name) != 0)
      return corrupt(fmt::format("topic {} appears twice", info.name));
    topics_.emplace(info.name, std::move(info));
  }
  return Status::OK();
}

Status TopicStore::Save() const {
  nlohmann::json doc;
  doc["version"] = kFormatVersion;
  doc["topics"] = nlohmann::json::array();
  for (const auto& [name, t] : topics_) {
    nlohmann::json entry;
    entry["name"] = name;
    entry["id"] = UuidText(t.id);
    entry["partitions"] = t.partitions;
    entry["configs"] = nlohmann::json::object();
    for (const auto& [k, v] : t.overrides) entry["configs"][k] = v;
    doc["topics"].push_back(std::move(entry));
  }
  std::string text = doc.dump(2) + "\n";
  storage::Env* env = env_;
  std::string tmp = path_ + ".tmp";
  {
    ASSIGN_OR_RETURN(auto f, env->Open(tmp, storage::OpenMode::kCreate));
    RETURN_IF_ERROR(f->Truncate(0));
    RETURN_IF_ERROR(f->WriteAt(
        0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size())));
    RETURN_IF_ERROR(f->Sync());
  }
  RETURN_IF_ERROR(env->Rename(tmp, path_));
  return env->SyncDir(meta_dir_);
}

TopicError TopicStore::Create(const std::string& name, int32_t partitions,
                              const std::map<std::string, std::string>& overrides,
                              bool validate_only, TopicInfo* created) {
  if (TopicError e = ValidateTopicName(name); !e.ok()) return e;
  if (topics_.count(name) != 0) {
    return Err(ErrorCode::kTopicAlreadyExists, fmt::format("topic '{}' already exists", name));
  }
  std::string key = CollisionKey(name);
  for (const auto& [other, info] : topics_) {
    if (CollisionKey(other) == key) {
      return Err(ErrorCode::kInvalidTopicException,
                 fmt::format("topic '{}' collides with existing topic '{}' ('.' and '_' are alike)",
                             name, other));
    }
  }
  if (partitions < 1 || partitions > 100'000) {
    return Err(ErrorCode::kInvalidPartitions,
               fmt::format("number of partitions must be from 1 to 100000, not {}", partitions));
  }
  TopicError err;
  auto config = TopicConfig::Resolve(overrides, defaults_, &err);
  if (!config.ok()) return err;
  if (validate_only) return {};
  TopicInfo info;
  info.name = name;
  info.partitions = partitions;
  info.overrides = overrides;
  info.config = *config;
  do {
    info.id = RandomUuid();
  } while (FindById(info.id) != nullptr);
  topics_.emplace(name, info);
  if (Status st = Save(); !st.ok()) {
    topics_.erase(name);
    return Err(ErrorCode::kKafkaStorageError, st.ToString());
  }
  if (created != nullptr) *created = std::move(info);
  return {};
}

TopicError TopicStore::Delete(const std::string& name) {
  auto it = topics_.find(name);
  if (it == topics_.end()) {
    return Err(ErrorCode::kUnknownTopicOrPartition, fmt::format("topic '{}' does not exist", name));
  }
  TopicInfo saved = std::move(it->second);
  topics_.erase(it);
  if (Status st = Save(); !st.ok()) {
    topics_.emplace(name, std::move(saved));
    return Err(ErrorCode::kKafkaStorageError, st.ToString());
  }
  return {};
}

TopicError TopicStore::AddPartitions(const std::string& name, int32_t total, bool validate_only) {
  auto it = topics_.find(name);
  if (it == topics_.end()) {
    return Err(ErrorCode::kUnknownTopicOrPartition, fmt::format("topic '{}' does not exist", name));
  }
  if (total <= it->second.partitions || total > 100'000) {
    return Err(ErrorCode::kInvalidPartitions,
               fmt::format("topic '{}' has {} partitions; the new count must be larger (and at "
                           "most 100000), not {}",
                           name, it->second.partitions, total));
  }
  if (validate_only) return {};
  int32_t old = it->second.partitions;
  it->second.partitions = total;
  if (Status st = Save(); !st.ok()) {
    it->second.partitions = old;
    return Err(ErrorCode::kKafkaStorageError, st.ToString());
  }
  return {};
}

TopicError TopicStore::SetConfigs(const std::string& name,
                                  const std::map<std::string, std::optional<std::string>>& changes,
                                  bool replace_all, bool validate_only) {
  auto it = topics_.find(name);
  if (it == topics_.end()) {
    return Err(ErrorCode::kUnknownTopicOrPartition, fmt::format("topic '{}' does not exist", name));
  }
  std::map<std::string, std::string> overrides =
      replace_all ? std::map<std::string, std::string>() : it->second.overrides;
  for (const auto& [k, v] : changes) {
    if (v) {
      overrides[k] = *v;
    } else {
      overrides.erase(k);
    }
  }
  TopicError err;
  auto config = TopicConfig::Resolve(overrides, defaults_, &err);
  if (!config.ok()) return err;
  // Tiered storage cannot be turned off (as in Kafka before 3.9): the topic's uploaded
  // segments would be orphaned in the bucket (docs/design/0025, decision 2). An
  // AlterConfigs that leaves the key out would otherwise do it unawares.
  if (it->second.config.remote_storage_enable && !config->remote_storage_enable) {
    return Err(ErrorCode::kInvalidConfig,
               fmt::format("invalid value 'false' for config remote.storage.enable: topic '{}' "
                           "is tiered, and turning tiered storage off is not supported (keep "
                           "remote.storage.enable=true in the request)",
                           name));
  }
  if (validate_only) return {};
  TopicInfo saved = it->second;
  it->second.overrides = std::move(overrides);
  it->second.config = *config;
  if (Status st = Save(); !st.ok()) {
    it->second = std::move(saved);
    return Err(ErrorCode::kKafkaStorageError, st.ToString());
  }
  return {};
}

const TopicInfo* TopicStore::Find(const std::string& name) const {
  auto it = topics_.find(name);
  return it == topics_.end() ? nullptr : &it->second;
}

const TopicInfo* TopicStore::FindById(const kafka::Uuid& id) const {
  for (const auto& [name, info] : topics_) {
    if (info.id == id) return &info;
  }
  return nullptr;
}

std::vector<const TopicInfo*> TopicStore::List() const {
  std::vector<const TopicInfo*> out;
  for (const auto& [name, info] : topics_) out.push_back(&info);
  return out;
}

}  // namespace sluice::broker
