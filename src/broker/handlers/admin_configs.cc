// Configs: DescribeConfigs (from the shard's snapshot: sources, synonyms, types, docs),
// AlterConfigs and IncrementalAlterConfigs (on the metadata controller's thread; the
// changes reach the open logs).
#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "broker/handlers/handlers.h"

namespace sluice::broker::handlers {
namespace {

using kafka::ErrorCode;

// DescribeConfigs resource types and config sources/types (Kafka's enums).
constexpr int8_t kResourceTopic = 2;
constexpr int8_t kResourceBroker = 4;
constexpr int8_t kResourceBrokerLogger = 8;
constexpr int8_t kSourceTopic = 1;         // DYNAMIC_TOPIC_CONFIG
constexpr int8_t kSourceStaticBroker = 4;  // STATIC_BROKER_CONFIG
constexpr int8_t kSourceDefault = 5;       // DEFAULT_CONFIG
constexpr int8_t kTypeBoolean = 1, kTypeString = 2, kTypeInt = 3, kTypeLong = 5, kTypeDouble = 6,
                 kTypeList = 7;

// What DescribeConfigs says about each topic config: its type, the broker config that
// sets its default (a synonym), and one line of documentation.
struct ConfigDoc {
  int8_t type;
  const char* broker_name;
  const char* doc;
};
const std::map<std::string, ConfigDoc>& TopicConfigDocs() {
  static const std::map<std::string, ConfigDoc> kDocs = {
      {"cleanup.policy",
       {kTypeList, "log.cleanup.policy",
        "delete: old segments are deleted by retention; compact: the cleaner keeps the latest "
        "record of each key; or both."}},
      {"delete.retention.ms",
       {kTypeLong, "log.cleaner.delete.retention.ms",
        "How long a compacted topic keeps tombstones after the cleaner first kept them."}},
      {"max.compaction.lag.ms",
       {kTypeLong, "log.cleaner.max.compaction.lag.ms",
        "Longest a record stays uncompacted in a compacted topic."}},
      {"min.cleanable.dirty.ratio",
       {kTypeDouble, "log.cleaner.min.cleanable.ratio",
        "Share of a compacted log not yet cleaned at which the cleaner cleans it."}},
      {"min.compaction.lag.ms",
       {kTypeLong, "log.cleaner.min.compaction.lag.ms",
        "Shortest time a record stays uncompacted in a compacted topic."}},
      {"min.insync.replicas",
       {kTypeInt, "min.insync.replicas",
        "Fewest in-sync replicas with which an acks=all produce is accepted (a cluster's "
        "replicated partitions)."}},
      {"max.message.bytes",
       {kTypeInt, "message.max.bytes", "The largest record batch the topic accepts."}},
      {"message.timestamp.type",
       {kTypeString, "log.message.timestamp.type", "CreateTime or LogAppendTime."}},
      {"retention.bytes",
       {kTypeLong, "log.retention.bytes",
        "Partition size past which old segments are deleted; -1 for no limit."}},
      {"retention.ms",
       {kTypeLong, "log.retention.ms",
        "Age past which old segments are deleted; -1 for no limit."}},
      {"segment.bytes",
       {kTypeInt, "log.segment.bytes", "Segment file size at which a new segment is rolled."}},
      {"segment.ms", {kTypeLong, "log.roll.ms", "Segment age at which a new segment is rolled."}},
      {"remote.storage.enable",
       {kTypeBoolean, "remote.log.storage.system.enable",
        "Tiered storage: closed segments are uploaded to the broker's tiered_storage bucket "
        "and served from there once deleted locally."}},
      {"local.retention.ms",
       {kTypeLong, "log.local.retention.ms",
        "Tiered topics: age past which uploaded segments are deleted from the local disk; "
        "-2 for retention.ms."}},
      {"local.retention.bytes",
       {kTypeLong, "log.local.retention.bytes",
        "Tiered topics: local size past which uploaded segments are deleted from the disk; "
        "-2 for retention.bytes."}},
  };
  return kDocs;
}

kafka::DescribeConfigsResponse::Config DescribeOne(const std::string& name,
                                                   const std::string& value, bool overridden,
                                                   const std::string& default_value, bool synonyms,
                                                   bool docs, bool read_only, int8_t type,
                                                   const char* broker_name, const char* doc,
                                                   int8_t default_source) {
  kafka::DescribeConfigsResponse::Config c;
  c.name = name;
  c.value = value;
  c.read_only = read_only;
  c.is_default = !overridden;
  c.config_source = overridden ? kSourceTopic : default_source;
  c.config_type = type;
  if (docs && doc != nullptr) c.documentation = doc;
  if (synonyms) {
    if (overridden) c.synonyms.push_back({name, value, kSourceTopic, {}});
    if (broker_name != nullptr)
      c.synonyms.push_back({broker_name, default_value, default_source, {}});
  }
  return c;
}

// Kafka's checks: `op` (DESCRIBE_CONFIGS, ALTER_CONFIGS) on the topic, or on the cluster
// for a broker's configs; the error for a refused resource, else NONE.
ErrorCode ConfigsDenied(const Access& access, int8_t type, const std::string& name,
                        auth::AclOperation op) {
  if (type == kResourceTopic) {
    return access.Check(auth::ResourceType::kTopic, name, op)
               ? ErrorCode::kNone
               : ErrorCode::kTopicAuthorizationFailed;
  }
  if (type == kResourceBroker || type == kResourceBrokerLogger) {
    return access.CheckCluster(op) ? ErrorCode::kNone : ErrorCode::kClusterAuthorizationFailed;
  }
  return ErrorCode::kNone;  // refused later as unknown
}

template <typename Out>
bool Denied(const Access& access, int8_t type, const std::string& name, auth::AclOperation op,
            Out* out) {
  const ErrorCode e = ConfigsDenied(access, type, name, op);
  if (e == ErrorCode::kNone) return false;
  out->resource_type = type;
  out->resource_name = name;
  out->error_code = e;
  out->error_message = e == ErrorCode::kTopicAuthorizationFailed ? kTopicDenied : kClusterDenied;
  return true;
}

kafka::DescribeConfigsResponse DescribeConfigs(const Context& ctx, const MetadataSnapshot& meta,
                                               const kafka::DescribeConfigsRequest& req,
                                               int16_t version, const Access& access) {
  kafka::DescribeConfigsResponse resp;
  const bool synonyms = version >= 1 && req.include_synonyms;
  const bool docs = version >= 3 && req.include_documentation;
  const std::map<std::string, std::string> defaults = ctx.options.topic_defaults.ToMap();
  for (const auto& r : req.resources) {
    kafka::DescribeConfigsResponse::Result out;
    out.resource_type = r.resource_type;
    out.resource_name = r.resource_name;
    if (Denied(access, r.resource_type, r.resource_name, auth::AclOperation::kDescribeConfigs,
               &out)) {
      resp.results.push_back(std::move(out));
      continue;
    }
    std::optional<std::set<std::string>> keys;
    if (r.configuration_keys.has_value() && !r.configuration_keys->empty()) {
      keys.emplace(r.configuration_keys->begin(), r.configuration_keys->end());
    }
    auto wanted = [&](const std::string& name) { return !keys || keys->count(name) != 0; };
    if (r.resource_type == kResourceTopic) {
      const MetadataSnapshot::Topic* found = meta.Find(r.resource_name);
      const TopicInfo* info = found != nullptr ? &found->info : nullptr;
      if (info == nullptr) {
        out.error_code = ValidateTopicName(r.resource_name).ok()
                             ? ErrorCode::kUnknownTopicOrPartition
                             : ErrorCode::kInvalidTopicException;
        out.error_message = fmt::format("topic '{}' does not exist", r.resource_name);
      } else {
        for (const auto& [name, value] : info->config.ToMap()) {
          if (!wanted(name)) continue;
          const ConfigDoc& d = TopicConfigDocs().at(name);
          out.configs.push_back(DescribeOne(name, value, info->overrides.count(name) != 0,
                                            defaults.at(name), synonyms, docs, false, d.type,
                                            d.broker_name, d.doc, kSourceDefault));
        }
      }
    } else if (r.resource_type == kResourceBroker) {
      // A broker of a cluster describes itself (clients send a broker's configs to it).
      const bool cluster = ctx.options.cluster.enabled();
      const int32_t self = cluster ? ctx.options.cluster.node_id : kNodeId;
      if (!r.resource_name.empty() && r.resource_name != std::to_string(self)) {
        out.error_code = ErrorCode::kInvalidRequest;
        out.error_message =
            cluster
                ? fmt::format("broker {} describes itself only, not '{}'", self, r.resource_name)
                : fmt::format("no broker '{}': this cluster's only broker is {}", r.resource_name,
                              kNodeId);
      } else {
        // The broker's settings, read-only: they come from the command line or config file.
        std::vector<std::tuple<std::string, std::string, int8_t>> configs = {
            {"node.id", std::to_string(self), kTypeInt},
            {"broker.id", std::to_string(self), kTypeInt},
            {"auto.create.topics.enable", ctx.options.auto_create_topics ? "true" : "false",
             kTypeBoolean},
            {"num.partitions", std::to_string(ctx.options.num_partitions), kTypeInt},
            {"default.replication.factor", "1", kTypeInt},
            {"offsets.topic.replication.factor", "1", kTypeInt},
            {"log.dirs", ctx.options.data_dir, kTypeString},
            {"log.flush.interval.ms", std::to_string(ctx.options.flush_ms), kTypeLong},
            {"log.cleaner.enable", "true", kTypeBoolean},
            {"log.cleaner.threads", std::to_string(ctx.options.cleaner.threads), kTypeInt},
            {"log.cleaner.dedupe.buffer.size",
             std::to_string(ctx.options.cleaner.dedupe_buffer_bytes), kTypeLong},
            {"log.cleaner.io.max.bytes.per.second",
             fmt::format("{}", ctx.options.cleaner.io_max_bytes_per_second), kTypeDouble},
            {"log.cleaner.backoff.ms", std::to_string(ctx.options.cleaner.backoff_ms), kTypeLong},
        };
        for (const auto& [topic_name, d] : TopicConfigDocs()) {
          configs.emplace_back(d.broker_name, defaults.at(topic_name), d.type);
        }
        for (const auto& [name, value, type] : configs) {
          if (!wanted(name)) continue;
          out.configs.push_back(DescribeOne(name, value, false, value, synonyms, docs, true, type,
                                            nullptr, nullptr, kSourceStaticBroker));
        }
      }
    } else if (r.resource_type == kResourceBrokerLogger) {
      out.error_code = ErrorCode::kInvalidRequest;
      out.error_message = "broker loggers are not configurable";
    } else {
      out.error_code = ErrorCode::kInvalidRequest;
      out.error_message = fmt::format("unknown resource type {}", r.resource_type);
    }
    resp.results.push_back(std::move(out));
  }
  return resp;
}

// Applies a topic's changed overrides (AlterConfigs, IncrementalAlterConfigs).
kafka::AlterConfigsResourceResponse ChangeTopicConfigs(
    Context& ctx, int8_t resource_type, const std::string& topic,
    const std::map<std::string, std::optional<std::string>>& changes, bool replace_all,
    bool validate_only) {
  kafka::AlterConfigsResourceResponse out;
  out.resource_type = resource_type;
  out.resource_name = topic;
  if (resource_type == kResourceBroker || resource_type == kResourceBrokerLogger) {
    out.error_code = ErrorCode::kInvalidRequest;
    out.error_message = "broker configs are static in sluice: set them in the config file";
    return out;
  }
  if (resource_type != kResourceTopic) {
    out.error_code = ErrorCode::kInvalidRequest;
    out.error_message = fmt::format("unknown resource type {}", resource_type);
    return out;
  }
  if (ctx.controller.FindTopic(topic) == nullptr) {
    out.error_code = ErrorCode::kUnknownTopicOrPartition;
    out.error_message = fmt::format("topic '{}' does not exist", topic);
    return out;
  }
  TopicError err = ctx.controller.SetTopicConfigs(topic, changes, replace_all, validate_only);
  if (!err.ok()) {
    out.error_code = err.code;
    out.error_message = err.message;
  }
  return out;
}

kafka::AlterConfigsResponse AlterConfigs(Context& ctx, const kafka::AlterConfigsRequest& req,
                                         const Access& access) {
  kafka::AlterConfigsResponse resp;
  for (const auto& r : req.resources) {
    std::map<std::string, std::optional<std::string>> changes;
    kafka::AlterConfigsResourceResponse bad;
    if (Denied(access, r.resource_type, r.resource_name, auth::AclOperation::kAlterConfigs, &bad)) {
      resp.responses.push_back(std::move(bad));
      continue;
    }
    for (const auto& c : r.configs) {
      if (!c.value.has_value()) {
        bad.error_code = ErrorCode::kInvalidConfig;
        bad.error_message = fmt::format("config '{}' has a null value", c.name);
      }
      changes[c.name] = c.value;
    }
    if (bad.error_code != ErrorCode::kNone) {
      bad.resource_type = r.resource_type;
      bad.resource_name = r.resource_name;
      resp.responses.push_back(std::move(bad));
      continue;
    }
    resp.responses.push_back(ChangeTopicConfigs(ctx, r.resource_type, r.resource_name, changes,
                                                /*replace_all=*/true, req.validate_only));
  }
  if (!req.validate_only) ctx.controller.Publish();
  return resp;
}

kafka::IncrementalAlterConfigsResponse IncrementalAlterConfigs(
    Context& ctx, const kafka::IncrementalAlterConfigsRequest& req, const Access& access) {
  constexpr int8_t kSet = 0, kDelete = 1, kAppend = 2, kSubtract = 3;
  kafka::IncrementalAlterConfigsResponse resp;
  for (const auto& r : req.resources) {
    if (kafka::AlterConfigsResourceResponse denied; Denied(
            access, r.resource_type, r.resource_name, auth::AclOperation::kAlterConfigs, &denied)) {
      resp.responses.push_back(std::move(denied));
      continue;
    }
    std::map<std::string, std::optional<std::string>> changes;
    std::string problem;
    std::set<std::string> names;
    const TopicInfo* info =
        r.resource_type == kResourceTopic ? ctx.controller.FindTopic(r.resource_name) : nullptr;
    for (const auto& c : r.configs) {
      if (!names.insert(c.name).second) {
        problem = fmt::format("config '{}' appears more than once", c.name);
        break;
      }
      switch (c.config_operation) {
        case kSet:
          if (!c.value.has_value()) problem = fmt::format("SET of '{}' has a null value", c.name);
          changes[c.name] = c.value;
          break;
        case kDelete:
          changes[c.name] = std::nullopt;
          break;
        case kAppend:
        case kSubtract: {
          // Only list configs take these; cleanup.policy is the one list here.
          if (c.name != "cleanup.policy" || !c.value.has_value()) {
            problem =
                fmt::format("APPEND and SUBTRACT apply to list configs; '{}' is not one", c.name);
            break;
          }
          std::string current = info != nullptr ? info->config.cleanup_policy : "delete";
          std::set<std::string> items;
          size_t pos = 0;
          while (pos <= current.size() && !current.empty()) {
            size_t comma = current.find(',', pos);
            items.insert(
                current.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
            if (comma == std::string::npos) break;
            pos = comma + 1;
          }
          if (c.config_operation == kAppend) {
            items.insert(*c.value);
          } else {
            items.erase(*c.value);
          }
          std::string joined;
          for (const auto& i : items) joined += (joined.empty() ? "" : ",") + i;
          changes[c.name] = joined;
          break;
        }
        default:
          problem = fmt::format("unknown config operation {} for '{}'", c.config_operation, c.name);
      }
      if (!problem.empty()) break;
    }
    if (!problem.empty()) {
      kafka::AlterConfigsResourceResponse bad;
      bad.error_code = ErrorCode::kInvalidConfig;
      bad.error_message = problem;
      bad.resource_type = r.resource_type;
      bad.resource_name = r.resource_name;
      resp.responses.push_back(std::move(bad));
      continue;
    }
    resp.responses.push_back(ChangeTopicConfigs(ctx, r.resource_type, r.resource_name, changes,
                                                /*replace_all=*/false, req.validate_only));
  }
  if (!req.validate_only) ctx.controller.Publish();
  return resp;
}

}  // namespace

void HandleDescribeConfigs(Context& ctx, const Call& call,
                           const kafka::DescribeConfigsRequest& req) {
  const MetadataSnapshot& meta = ctx.shards.SnapshotFor(ctx.shards.ShardOf(call.conn->loop()));
  Reply(call.conn, call.header,
        DescribeConfigs(ctx, meta, req, call.header.api_version, AccessOf(ctx, call)));
}

void HandleAlterConfigs(Context& ctx, const Call& call, const kafka::AlterConfigsRequest& req) {
  ToController(ctx, call, [&ctx, req, access = AccessOf(ctx, call)] {
    return AlterConfigs(ctx, req, access);
  });
}

void HandleIncrementalAlterConfigs(Context& ctx, const Call& call,
                                   const kafka::IncrementalAlterConfigsRequest& req) {
  ToController(ctx, call, [&ctx, req, access = AccessOf(ctx, call)] {
    return IncrementalAlterConfigs(ctx, req, access);
  });
}

}  // namespace sluice::broker::handlers
