// Broker: topic and partition administration — CreatePartitions, DescribeConfigs,
// AlterConfigs, IncrementalAlterConfigs, DeleteRecords (on the metadata thread) and
// OffsetForLeaderEpoch (on the partitions' owners). See broker.h.
#include <map>
#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>

#include "base/logging.h"
#include "broker/broker.h"

namespace sluice::broker {
namespace {

const Logger kLog("broker");
using kafka::ErrorCode;

template <typename Body>
void Reply(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
           const Body& body) {
  Response resp;
  kafka::Writer w(&resp.buffer);
  kafka::EncodeResponseHeader(w, static_cast<kafka::ApiKey>(h.api_key), h.api_version,
                              h.correlation_id);
  body.Encode(w, h.api_version);
  conn->Send(std::move(resp));
}

// DescribeConfigs resource types and config sources/types (Kafka's enums).
constexpr int8_t kResourceTopic = 2;
constexpr int8_t kResourceBroker = 4;
constexpr int8_t kResourceBrokerLogger = 8;
constexpr int8_t kSourceTopic = 1;          // DYNAMIC_TOPIC_CONFIG
constexpr int8_t kSourceStaticBroker = 4;   // STATIC_BROKER_CONFIG
constexpr int8_t kSourceDefault = 5;        // DEFAULT_CONFIG
constexpr int8_t kTypeBoolean = 1, kTypeString = 2, kTypeInt = 3, kTypeLong = 5, kTypeList = 7;

// What DescribeConfigs says about each topic config: its type, the broker config that
// sets its default (a synonym), and one line of documentation.
struct ConfigDoc {
  int8_t type;
  const char* broker_name;
  const char* doc;
};
const std::map<std::string, ConfigDoc>& TopicConfigDocs() {
  static const std::map<std::string, ConfigDoc> kDocs = {
      {"cleanup.policy", {kTypeList, "log.cleanup.policy", "delete: old segments are deleted by retention"}},
      {"max.message.bytes", {kTypeInt, "message.max.bytes", "The largest record batch the topic accepts."}},
      {"message.timestamp.type", {kTypeString, "log.message.timestamp.type", "CreateTime or LogAppendTime."}},
      {"retention.bytes", {kTypeLong, "log.retention.bytes", "Partition size past which old segments are deleted; -1 for no limit."}},
      {"retention.ms", {kTypeLong, "log.retention.ms", "Age past which old segments are deleted; -1 for no limit."}},
      {"segment.bytes", {kTypeInt, "log.segment.bytes", "Segment file size at which a new segment is rolled."}},
      {"segment.ms", {kTypeLong, "log.roll.ms", "Segment age at which a new segment is rolled."}},
  };
  return kDocs;
}

kafka::DescribeConfigsResponse::Config DescribeOne(const std::string& name, const std::string& value,
                                                   bool overridden, const std::string& default_value,
                                                   bool synonyms, bool docs, bool read_only,
                                                   int8_t type, const char* broker_name,
                                                   const char* doc, int8_t default_source) {
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
    if (broker_name != nullptr) c.synonyms.push_back({broker_name, default_value, default_source, {}});
  }
  return c;
}

}  // namespace

kafka::CreatePartitionsResponse Broker::CreatePartitionsMeta(
    const kafka::CreatePartitionsRequest& req) {
  kafka::CreatePartitionsResponse resp;
  std::map<std::string, int> seen;
  for (const auto& t : req.topics) ++seen[t.name];
  for (const auto& t : req.topics) {
    kafka::CreatePartitionsResponse::Result out;
    out.name = t.name;
    auto fail = [&](ErrorCode code, std::string message) {
      out.error_code = code;
      out.error_message = std::move(message);
      resp.results.push_back(std::move(out));
    };
    if (seen[t.name] > 1) {
      fail(ErrorCode::kInvalidRequest, fmt::format("topic '{}' appears more than once", t.name));
      continue;
    }
    const TopicInfo* info = topics_->Find(t.name);
    if (info == nullptr) {
      fail(ErrorCode::kUnknownTopicOrPartition, fmt::format("topic '{}' does not exist", t.name));
      continue;
    }
    if (t.count <= info->partitions) {
      fail(ErrorCode::kInvalidPartitions,
           fmt::format("topic '{}' has {} partitions; the new count must be larger, not {}", t.name,
                       info->partitions, t.count));
      continue;
    }
    if (t.assignments.has_value() && !t.assignments->empty()) {
      // Only the one broker can hold a replica: [[1], [1], ...], one per new partition.
      bool ok = static_cast<int32_t>(t.assignments->size()) == t.count - info->partitions;
      for (const auto& a : *t.assignments) ok = ok && a.broker_ids == std::vector<int32_t>{kNodeId};
      if (!ok) {
        fail(ErrorCode::kInvalidReplicaAssignment,
             fmt::format("assignments must list broker {} once for each of the {} new partitions",
                         kNodeId, t.count - info->partitions));
        continue;
      }
    }
    const int32_t before = info->partitions;
    TopicError err = topics_->AddPartitions(t.name, t.count, req.validate_only);
    if (!err.ok()) {
      fail(err.code, err.message);
      continue;
    }
    if (!req.validate_only) {
      if (Status st = OpenTopicLogsMeta(*topics_->Find(t.name)); !st.ok()) {
        SLUICE_LOG(kLog, kError, "adding partitions to {}: {}", t.name, st.ToString());
        fail(ErrorCode::kKafkaStorageError, st.ToString());
        continue;
      }
      SLUICE_LOG(kLog, kInfo, "topic {}: {} partitions, was {}", t.name, t.count, before);
    }
    resp.results.push_back(std::move(out));
  }
  if (!req.validate_only) PublishMeta();
  return resp;
}

kafka::DescribeConfigsResponse Broker::DescribeConfigs(const MetadataSnapshot& meta,
                                                       const kafka::DescribeConfigsRequest& req,
                                                       int16_t version) {
  kafka::DescribeConfigsResponse resp;
  const bool synonyms = version >= 1 && req.include_synonyms;
  const bool docs = version >= 3 && req.include_documentation;
  const std::map<std::string, std::string> defaults = options_.topic_defaults.ToMap();
  for (const auto& r : req.resources) {
    kafka::DescribeConfigsResponse::Result out;
    out.resource_type = r.resource_type;
    out.resource_name = r.resource_name;
    std::optional<std::set<std::string>> keys;
    if (r.configuration_keys.has_value() && !r.configuration_keys->empty()) {
      keys.emplace(r.configuration_keys->begin(), r.configuration_keys->end());
    }
    auto wanted = [&](const std::string& name) { return !keys || keys->count(name) != 0; };
    if (r.resource_type == kResourceTopic) {
      const MetadataSnapshot::Topic* found = meta.Find(r.resource_name);
      const TopicInfo* info = found != nullptr ? &found->info : nullptr;
      if (info == nullptr) {
        out.error_code = ValidateTopicName(r.resource_name).ok() ? ErrorCode::kUnknownTopicOrPartition
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
      if (!r.resource_name.empty() && r.resource_name != std::to_string(kNodeId)) {
        out.error_code = ErrorCode::kInvalidRequest;
        out.error_message = fmt::format("no broker '{}': this cluster's only broker is {}",
                                        r.resource_name, kNodeId);
      } else {
        // The broker's settings, read-only: they come from the command line or config file.
        std::vector<std::tuple<std::string, std::string, int8_t>> configs = {
            {"node.id", std::to_string(kNodeId), kTypeInt},
            {"broker.id", std::to_string(kNodeId), kTypeInt},
            {"auto.create.topics.enable", options_.auto_create_topics ? "true" : "false", kTypeBoolean},
            {"num.partitions", std::to_string(options_.num_partitions), kTypeInt},
            {"default.replication.factor", "1", kTypeInt},
            {"offsets.topic.replication.factor", "1", kTypeInt},
            {"log.dirs", options_.data_dir, kTypeString},
            {"log.flush.interval.ms", std::to_string(options_.flush_ms), kTypeLong},
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

kafka::AlterConfigsResourceResponse Broker::ChangeTopicConfigsMeta(
    int8_t resource_type, const std::string& topic,
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
  if (topics_->Find(topic) == nullptr) {
    out.error_code = ErrorCode::kUnknownTopicOrPartition;
    out.error_message = fmt::format("topic '{}' does not exist", topic);
    return out;
  }
  TopicError err = topics_->SetConfigs(topic, changes, replace_all, validate_only);
  if (!err.ok()) {
    out.error_code = err.code;
    out.error_message = err.message;
    return out;
  }
  if (validate_only) return out;
  const TopicInfo* info = topics_->Find(topic);
  const storage::PartitionLog::Limits limits{
      static_cast<uint64_t>(info->config.segment_bytes), info->config.segment_ms,
      info->config.retention_bytes, info->config.retention_ms, kMaxTopicMessageBytes};
  for (int32_t p = 0; p < info->partitions; ++p) {
    auto it = catalog_.find({topic, p});
    if (it != catalog_.end()) it->second->log->Reconfigure(limits);  // thread-safe
  }
  SLUICE_LOG(kLog, kInfo, "topic {}: configs changed", topic);
  return out;
}

kafka::AlterConfigsResponse Broker::AlterConfigsMeta(const kafka::AlterConfigsRequest& req) {
  kafka::AlterConfigsResponse resp;
  for (const auto& r : req.resources) {
    std::map<std::string, std::optional<std::string>> changes;
    kafka::AlterConfigsResourceResponse bad;
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
    resp.responses.push_back(ChangeTopicConfigsMeta(r.resource_type, r.resource_name, changes,
                                                      /*replace_all=*/true, req.validate_only));
  }
  if (!req.validate_only) PublishMeta();
  return resp;
}

kafka::IncrementalAlterConfigsResponse Broker::IncrementalAlterConfigsMeta(
    const kafka::IncrementalAlterConfigsRequest& req) {
  constexpr int8_t kSet = 0, kDelete = 1, kAppend = 2, kSubtract = 3;
  kafka::IncrementalAlterConfigsResponse resp;
  for (const auto& r : req.resources) {
    std::map<std::string, std::optional<std::string>> changes;
    std::string problem;
    std::set<std::string> names;
    const TopicInfo* info = r.resource_type == kResourceTopic ? topics_->Find(r.resource_name) : nullptr;
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
            problem = fmt::format("APPEND and SUBTRACT apply to list configs; '{}' is not one", c.name);
            break;
          }
          std::string current = info != nullptr ? info->config.cleanup_policy : "delete";
          std::set<std::string> items;
          size_t pos = 0;
          while (pos <= current.size() && !current.empty()) {
            size_t comma = current.find(',', pos);
            items.insert(current.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
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
    resp.responses.push_back(ChangeTopicConfigsMeta(r.resource_type, r.resource_name, changes,
                                                      /*replace_all=*/false, req.validate_only));
  }
  if (!req.validate_only) PublishMeta();
  return resp;
}

kafka::DeleteRecordsResponse Broker::DeleteRecordsMeta(const kafka::DeleteRecordsRequest& req) {
  kafka::DeleteRecordsResponse resp;
  for (const auto& t : req.topics) {
    kafka::DeleteRecordsResponse::Topic tout;
    tout.name = t.name;
    for (const auto& p : t.partitions) {
      kafka::DeleteRecordsResponse::Partition out;
      out.partition_index = p.partition_index;
      out.low_watermark = -1;
      auto it = catalog_.find({t.name, p.partition_index});
      if (it == catalog_.end()) {
        out.error_code = ErrorCode::kUnknownTopicOrPartition;
        tout.partitions.push_back(out);
        continue;
      }
      storage::PartitionLog& log = *it->second->log;
      const int64_t hw = HighWatermark(log);
      // -1 means the high watermark, as in Kafka.
      const int64_t target = p.offset == -1 ? hw : p.offset;
      if (target < 0 || target > hw) {
        out.error_code = ErrorCode::kOffsetOutOfRange;
        tout.partitions.push_back(out);
        continue;
      }
      Result<int64_t> start = log.DeleteRecordsBefore(target);
      if (!start.ok()) {
        SLUICE_LOG(kLog, kError, "DeleteRecords {}-{}: {}", t.name, p.partition_index,
                   start.status().ToString());
        out.error_code = start.status().code() == StatusCode::kOutOfRange
                             ? ErrorCode::kOffsetOutOfRange
                             : ErrorCode::kKafkaStorageError;
      } else {
        out.low_watermark = *start;
      }
      tout.partitions.push_back(out);
    }
    resp.topics.push_back(std::move(tout));
  }
  return resp;
}

void Broker::OffsetForLeaderEpoch(const std::shared_ptr<Connection>& conn,
                                  const kafka::RequestHeader& h,
                                  const kafka::OffsetForLeaderEpochRequest& req) {
  Shard& home = ShardOf(conn->loop());
  const MetadataSnapshot& meta = SnapshotFor(home);
  struct State {
    kafka::OffsetForLeaderEpochResponse resp;
    std::vector<kafka::OffsetForLeaderEpochResponse::Partition*> outs;  // per target
    std::vector<std::pair<int32_t, int32_t>> asked;  // (current epoch, leader epoch)
  };
  auto st = std::make_shared<State>();
  std::vector<Target> targets;
  std::vector<std::pair<size_t, size_t>> where;
  for (size_t t = 0; t < req.topics.size(); ++t) {
    const auto& want = req.topics[t];
    kafka::OffsetForLeaderEpochResponse::Topic tout;
    tout.topic = want.topic;
    const MetadataSnapshot::Topic* info = meta.Find(want.topic);
    for (size_t i = 0; i < want.partitions.size(); ++i) {
      const auto& p = want.partitions[i];
      kafka::OffsetForLeaderEpochResponse::Partition out;
      out.partition = p.partition;
      targets.push_back(TargetOf(info, want.topic, p.partition));
      st->asked.emplace_back(p.current_leader_epoch, p.leader_epoch);
      where.emplace_back(t, i);
      tout.partitions.push_back(out);
    }
    st->resp.topics.push_back(std::move(tout));
  }
  for (auto [t, i] : where) st->outs.push_back(&st->resp.topics[t].partitions[i]);
  VisitOwners(
      home, std::move(targets),
      [this, st](Partition* part, size_t k) {
        kafka::OffsetForLeaderEpochResponse::Partition& out = *st->outs[k];
        const auto [current_epoch, leader_epoch] = st->asked[k];
        if (part == nullptr) {
          out.error_code = ErrorCode::kUnknownTopicOrPartition;
          return;
        }
        const LeaderEpochCache& epochs = part->epochs;
        if (current_epoch >= 0 && current_epoch != epochs.latest_epoch()) {
          out.error_code = current_epoch > epochs.latest_epoch() ? ErrorCode::kUnknownLeaderEpoch
                                                                 : ErrorCode::kFencedLeaderEpoch;
          return;
        }
        // Consumers are answered up to the high watermark, as Kafka answers them (a
        // follower, replica id >= 0, would get the log end; there are none).
        auto [epoch, end] = epochs.EndOffsetFor(leader_epoch, HighWatermark(*part->log));
        out.leader_epoch = epoch;
        out.end_offset = end;
      },
      [conn, h, st] { Reply(conn, h, st->resp); });
}

}  // namespace sluice::broker
