#include "kafka/client/admin.h"

#include <algorithm>
#include <map>

#include "kafka/client/rdkafka_util.h"

namespace sluice::kafka::client {
namespace {

using detail::AdminOptionsPtr;
using detail::EventPtr;
using detail::MakeOptions;
using detail::QueuePtr;
using detail::WaitResult;

Status TopicResultStatus(const rd_kafka_topic_result_t* const* results, size_t count,
                         std::string_view what) {
  for (size_t i = 0; i < count; ++i) {
    rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
    const char* text = rd_kafka_topic_result_error_string(results[i]);
    RETURN_IF_ERROR(detail::ErrorStatus(err, what, text != nullptr ? text : ""));
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Admin>> Admin::Create(const Config& config) {
  std::unique_ptr<Admin> a(new Admin());
  Config effective = config;
  // A producer handle would ask brokers to create every topic its Metadata requests name
  // (allow.auto.create.topics defaults to true for producers): a describe of a mistyped
  // name would make it. Kept when the caller set it.
  effective.emplace("allow.auto.create.topics", "false");
  ASSIGN_OR_RETURN(detail::ConfPtr conf, detail::MakeConf(effective, "admin", a.get()));
  // Admin requests are answered on their own queues; a producer handle is what
  // librdkafka's own admin clients use.
  ASSIGN_OR_RETURN(a->rk_, detail::NewHandle(RD_KAFKA_PRODUCER, std::move(conf), "admin"));
  return a;
}

Admin::~Admin() = default;

Status Admin::CreateTopic(std::string_view name, int partitions, int replication_factor,
                          const Config& topic_config, std::chrono::milliseconds timeout) {
  std::string what = fmt::format("create topic '{}'", name);
  // librdkafka sends anything; a broker may read 0 as its default, which is never meant.
  if (name.empty()) return InvalidArgumentError("create topic: the name is empty");
  if (partitions < 1 && partitions != -1) {
    return InvalidArgumentError(
        "{}: partitions must be at least 1 (or -1: the broker's default), not {}", what,
        partitions);
  }
  if (replication_factor < 1 && replication_factor != -1) {
    return InvalidArgumentError(
        "{}: replication factor must be at least 1 (or -1: the broker's default), not {}", what,
        replication_factor);
  }
  std::string topic(name);
  char errstr[512] = "";
  detail::NewTopicPtr new_topic(
      rd_kafka_NewTopic_new(topic.c_str(), partitions, replication_factor, errstr, sizeof(errstr)));
  if (new_topic == nullptr) return InvalidArgumentError("{}: {}", what, errstr);
  for (const auto& [key, value] : topic_config) {
    RETURN_IF_ERROR(detail::ErrorStatus(
        rd_kafka_NewTopic_set_config(new_topic.get(), key.c_str(), value.c_str()),
        fmt::format("{}: {} = '{}'", what, key, value)));
  }
  ASSIGN_OR_RETURN(AdminOptionsPtr options,
                   MakeOptions(rk_.get(), RD_KAFKA_ADMIN_OP_CREATETOPICS, timeout, what));
  QueuePtr queue(rd_kafka_queue_new(rk_.get()));
  rd_kafka_NewTopic_t* topics[] = {new_topic.get()};
  rd_kafka_CreateTopics(rk_.get(), topics, 1, options.get(), queue.get());
  ASSIGN_OR_RETURN(EventPtr ev, WaitResult(queue.get(), timeout, what));
  const rd_kafka_CreateTopics_result_t* result = rd_kafka_event_CreateTopics_result(ev.get());
  if (result == nullptr)
    return InternalError("{}: unexpected event {}", what, rd_kafka_event_name(ev.get()));
  size_t count = 0;
  const rd_kafka_topic_result_t** results = rd_kafka_CreateTopics_result_topics(result, &count);
  return TopicResultStatus(results, count, what);
}

Status Admin::DeleteTopic(std::string_view name, std::chrono::milliseconds timeout) {
  std::string what = fmt::format("delete topic '{}'", name);
  std::string topic(name);
  detail::DeleteTopicPtr delete_topic(rd_kafka_DeleteTopic_new(topic.c_str()));
  ASSIGN_OR_RETURN(AdminOptionsPtr options,
                   MakeOptions(rk_.get(), RD_KAFKA_ADMIN_OP_DELETETOPICS, timeout, what));
  QueuePtr queue(rd_kafka_queue_new(rk_.get()));
  rd_kafka_DeleteTopic_t* topics[] = {delete_topic.get()};
  rd_kafka_DeleteTopics(rk_.get(), topics, 1, options.get(), queue.get());
  ASSIGN_OR_RETURN(EventPtr ev, WaitResult(queue.get(), timeout, what));
  const rd_kafka_DeleteTopics_result_t* result = rd_kafka_event_DeleteTopics_result(ev.get());
  if (result == nullptr)
    return InternalError("{}: unexpected event {}", what, rd_kafka_event_name(ev.get()));
  size_t count = 0;
  const rd_kafka_topic_result_t** results = rd_kafka_DeleteTopics_result_topics(result, &count);
  return TopicResultStatus(results, count, what);
}

Result<int> Admin::PartitionCount(std::string_view topic, std::chrono::milliseconds timeout) {
  std::string what = fmt::format("metadata of topic '{}'", topic);
  std::string name(topic);
  detail::TopicPtr rkt(rd_kafka_topic_new(rk_.get(), name.c_str(), nullptr));
  if (rkt == nullptr) return detail::ErrorStatus(rd_kafka_last_error(), what);
  const rd_kafka_metadata_t* raw = nullptr;
  RETURN_IF_ERROR(detail::ErrorStatus(
      rd_kafka_metadata(rk_.get(), 0, rkt.get(), &raw, static_cast<int>(timeout.count())), what));
  detail::MetadataPtr metadata(raw);
  for (int i = 0; i < metadata->topic_cnt; ++i) {
    const rd_kafka_metadata_topic_t& t = metadata->topics[i];
    if (name != t.topic) continue;
    RETURN_IF_ERROR(detail::ErrorStatus(t.err, what));
    return t.partition_cnt;
  }
  return NotFoundError("{}: not in the broker's answer", what);
}

Result<std::vector<Admin::TopicInfo>> Admin::ListTopics(std::chrono::milliseconds timeout) {
  const rd_kafka_metadata_t* raw = nullptr;
  RETURN_IF_ERROR(detail::ErrorStatus(
      rd_kafka_metadata(rk_.get(), 1, nullptr, &raw, static_cast<int>(timeout.count())),
      "metadata of every topic"));
  detail::MetadataPtr metadata(raw);
  std::vector<TopicInfo> out;
  for (int i = 0; i < metadata->topic_cnt; ++i) {
    const rd_kafka_metadata_topic_t& t = metadata->topics[i];
    if (t.err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    out.push_back({t.topic, t.partition_cnt});
  }
  return out;
}

Result<std::string> Admin::TopicConfig(std::string_view topic, std::string_view name,
                                       std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(std::vector<ConfigEntry> configs, DescribeTopicConfigs(topic, timeout));
  for (const ConfigEntry& c : configs) {
    if (c.name == name) return c.value.value_or("");
  }
  return NotFoundError("config {} of topic '{}': not in the broker's answer", name, topic);
}

Result<Watermarks> Admin::QueryWatermarks(std::string_view topic, int32_t partition,
                                          std::chrono::milliseconds timeout) {
  std::string name(topic);
  const std::string what = fmt::format("watermarks of {} [{}]", topic, partition);
  auto query = [&](std::chrono::milliseconds t) -> Result<Watermarks> {
    const auto end = std::chrono::steady_clock::now() + t;
    Watermarks w;
    ASSIGN_OR_RETURN(
        w.low, detail::ListOffset(rk_.get(), name, partition, RD_KAFKA_OFFSET_BEGINNING, t, what));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    ASSIGN_OR_RETURN(w.high,
                     detail::ListOffset(rk_.get(), name, partition, RD_KAFKA_OFFSET_END,
                                        std::max(left, std::chrono::milliseconds(1)), what));
    return w;
  };
  // librdkafka sends ListOffsets to the leader its metadata cache names; a handle that
  // subscribes to nothing refreshes that cache only every
  // topic.metadata.refresh.interval.ms (5 minutes), so a leader that went away (a broker of
  // a cluster stopped) would fail every query for minutes: a first try gets a short part
  // of the time, then the topic's metadata is asked for (which updates the cache) and the
  // query tried again with the rest.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Result<Watermarks> first = query(std::min(timeout, kLeaderTry));
  if (first.ok()) return first;
  auto left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
  };
  if (left().count() <= 0) return first;
  if (!PartitionCount(topic, left()).ok() || left().count() <= 0) return first;
  return query(left());
}

Result<int64_t> Admin::OffsetForTime(std::string_view topic, int32_t partition,
                                     int64_t timestamp_ms, std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(int64_t offset, detail::ListOffset(rk_.get(), std::string(topic), partition,
                                                      timestamp_ms, timeout,
                                                      fmt::format("offset of {} [{}] at time {}",
                                                                  topic, partition, timestamp_ms)));
  if (offset < 0) {
    // No record at or after the time: where the next one will go.
    ASSIGN_OR_RETURN(Watermarks w, QueryWatermarks(topic, partition, timeout));
    return w.high;
  }
  return offset;
}

}  // namespace sluice::kafka::client

namespace sluice::kafka::client {
namespace {

using detail::AdminOptionsPtr;
using detail::EventPtr;
using detail::MakeOptions;
using detail::QueuePtr;
using detail::WaitResult;

using ConfigResourcePtr =
    std::unique_ptr<rd_kafka_ConfigResource_t, decltype(&rd_kafka_ConfigResource_destroy)>;

ConfigResourcePtr TopicResource(const std::string& topic) {
  return ConfigResourcePtr(rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic.c_str()),
                           &rd_kafka_ConfigResource_destroy);
}

}  // namespace

std::string_view KafkaErrorName(const Status& status) {
  std::string_view m = status.message();
  if (m.empty() || m.back() != ')') return {};
  const size_t open = m.rfind('(');
  if (open == std::string_view::npos) return {};
  std::string_view name = m.substr(open + 1, m.size() - open - 2);
  if (name.empty()) return {};
  for (char c : name) {
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return {};
  }
  return name;
}

Result<ClusterDescription> Admin::DescribeCluster(bool all_topics,
                                                  const std::vector<std::string>& topics,
                                                  std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const rd_kafka_metadata_t* raw = nullptr;
  const int ms = static_cast<int>(timeout.count());
  rd_kafka_resp_err_t err;
  if (all_topics || topics.size() != 1) {
    // Metadata for every topic (the filter below picks the ones asked for), or for none:
    // librdkafka asks "all topics" or only the ones it knows locally.
    err = rd_kafka_metadata(rk_.get(), (all_topics || !topics.empty()) ? 1 : 0, nullptr, &raw, ms);
  } else {
    detail::TopicPtr rkt(rd_kafka_topic_new(rk_.get(), topics[0].c_str(), nullptr));
    if (rkt == nullptr) return detail::ErrorStatus(rd_kafka_last_error(), "metadata");
    err = rd_kafka_metadata(rk_.get(), 0, rkt.get(), &raw, ms);
  }
  RETURN_IF_ERROR(detail::ErrorStatus(err, "metadata"));
  detail::MetadataPtr metadata(raw);
  ClusterDescription out;
  for (int i = 0; i < metadata->broker_cnt; ++i) {
    const rd_kafka_metadata_broker_t& b = metadata->brokers[i];
    out.brokers.push_back({b.id, b.host != nullptr ? b.host : "", b.port});
  }
  std::sort(out.brokers.begin(), out.brokers.end(),
            [](const BrokerInfo& a, const BrokerInfo& b) { return a.node_id < b.node_id; });
  std::map<std::string, const rd_kafka_metadata_topic_t*> by_name;
  for (int i = 0; i < metadata->topic_cnt; ++i)
    by_name[metadata->topics[i].topic] = &metadata->topics[i];
  auto describe = [&](const rd_kafka_metadata_topic_t& t) -> Result<TopicDescription> {
    RETURN_IF_ERROR(detail::ErrorStatus(t.err, fmt::format("metadata of topic '{}'", t.topic)));
    TopicDescription d;
    d.name = t.topic;
    d.internal = d.name.starts_with("__");
    for (int p = 0; p < t.partition_cnt; ++p) {
      const rd_kafka_metadata_partition_t& mp = t.partitions[p];
      PartitionInfo info;
      info.partition = mp.id;
      info.leader = mp.leader;
      info.replicas.assign(mp.replicas, mp.replicas + mp.replica_cnt);
      info.isr.assign(mp.isrs, mp.isrs + mp.isr_cnt);
      if (mp.err != RD_KAFKA_RESP_ERR_NO_ERROR) info.error = rd_kafka_err2name(mp.err);
      d.partitions.push_back(std::move(info));
    }
    std::sort(
        d.partitions.begin(), d.partitions.end(),
        [](const PartitionInfo& a, const PartitionInfo& b) { return a.partition < b.partition; });
    return d;
  };
  if (all_topics) {
    for (const auto& [name, t] : by_name) {
      if (t->err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;  // being deleted or created
      ASSIGN_OR_RETURN(TopicDescription d, describe(*t));
      out.topics.push_back(std::move(d));
    }
  } else {
    for (const std::string& name : topics) {
      auto it = by_name.find(name);
      if (it == by_name.end()) return NotFoundError("metadata of topic '{}': no such topic", name);
      ASSIGN_OR_RETURN(TopicDescription d, describe(*it->second));
      out.topics.push_back(std::move(d));
    }
    std::sort(out.topics.begin(), out.topics.end(),
              [](const TopicDescription& a, const TopicDescription& b) { return a.name < b.name; });
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  const int left_ms = static_cast<int>(std::max<int64_t>(left.count(), 1));
  // Both come from the Metadata answer librdkafka keeps; they wait only before the first.
  if (char* id = rd_kafka_clusterid(rk_.get(), left_ms); id != nullptr) {
    out.cluster_id = id;
    rd_kafka_mem_free(rk_.get(), id);
  }
  out.controller_id = rd_kafka_controllerid(rk_.get(), left_ms);
  return out;
}

Status Admin::CreatePartitions(std::string_view topic, int total,
                               std::chrono::milliseconds timeout) {
  const std::string what = fmt::format("add partitions to topic '{}'", topic);
  if (total < 1)
    return InvalidArgumentError("{}: the new count must be at least 1, not {}", what, total);
  const std::string name(topic);
  char errstr[512] = "";
  std::unique_ptr<rd_kafka_NewPartitions_t, decltype(&rd_kafka_NewPartitions_destroy)> parts(
      rd_kafka_NewPartitions_new(name.c_str(), static_cast<size_t>(total), errstr, sizeof(errstr)),
      &rd_kafka_NewPartitions_destroy);
  if (parts == nullptr) return InvalidArgumentError("{}: {}", what, errstr);
  ASSIGN_OR_RETURN(AdminOptionsPtr options,
                   MakeOptions(rk_.get(), RD_KAFKA_ADMIN_OP_CREATEPARTITIONS, timeout, what));
  QueuePtr queue(rd_kafka_queue_new(rk_.get()));
  rd_kafka_NewPartitions_t* list[] = {parts.get()};
  rd_kafka_CreatePartitions(rk_.get(), list, 1, options.get(), queue.get());
  ASSIGN_OR_RETURN(EventPtr ev, WaitResult(queue.get(), timeout, what));
  const rd_kafka_CreatePartitions_result_t* result =
      rd_kafka_event_CreatePartitions_result(ev.get());
  if (result == nullptr)
    return InternalError("{}: unexpected event {}", what, rd_kafka_event_name(ev.get()));
  size_t count = 0;
  const rd_kafka_topic_result_t** results = rd_kafka_CreatePartitions_result_topics(result, &count);
  for (size_t i = 0; i < count; ++i) {
    const char* text = rd_kafka_topic_result_error_string(results[i]);
    RETURN_IF_ERROR(detail::ErrorStatus(rd_kafka_topic_result_error(results[i]), what,
                                        text != nullptr ? text : ""));
  }
  return Status::OK();
}

Result<std::vector<ConfigEntry>> Admin::DescribeTopicConfigs(std::string_view topic,
                                                             std::chrono::milliseconds timeout) {
  const std::string what = fmt::format("configs of topic '{}'", topic);
  const std::string name(topic);
  ConfigResourcePtr resource = TopicResource(name);
  ASSIGN_OR_RETURN(AdminOptionsPtr options,
                   MakeOptions(rk_.get(), RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, timeout, what));
  QueuePtr queue(rd_kafka_queue_new(rk_.get()));
  rd_kafka_ConfigResource_t* resources[] = {resource.get()};
  rd_kafka_DescribeConfigs(rk_.get(), resources, 1, options.get(), queue.get());
  ASSIGN_OR_RETURN(EventPtr ev, WaitResult(queue.get(), timeout, what));
  const rd_kafka_DescribeConfigs_result_t* result = rd_kafka_event_DescribeConfigs_result(ev.get());
  if (result == nullptr)
    return InternalError("{}: unexpected event {}", what, rd_kafka_event_name(ev.get()));
  size_t count = 0;
  const rd_kafka_ConfigResource_t** described =
      rd_kafka_DescribeConfigs_result_resources(result, &count);
  std::vector<ConfigEntry> out;
  for (size_t i = 0; i < count; ++i) {
    rd_kafka_resp_err_t err = rd_kafka_ConfigResource_error(described[i]);
    const char* text = rd_kafka_ConfigResource_error_string(described[i]);
    RETURN_IF_ERROR(detail::ErrorStatus(err, what, text != nullptr ? text : ""));
    size_t entries = 0;
    const rd_kafka_ConfigEntry_t** configs =
        rd_kafka_ConfigResource_configs(described[i], &entries);
    for (size_t j = 0; j < entries; ++j) {
      const rd_kafka_ConfigEntry_t* e = configs[j];
      ConfigEntry c;
      const char* n = rd_kafka_ConfigEntry_name(e);
      c.name = n != nullptr ? n : "";
      if (const char* v = rd_kafka_ConfigEntry_value(e); v != nullptr) c.value = v;
      c.source = rd_kafka_ConfigSource_name(rd_kafka_ConfigEntry_source(e));
      c.read_only = rd_kafka_ConfigEntry_is_read_only(e) != 0;
      c.sensitive = rd_kafka_ConfigEntry_is_sensitive(e) != 0;
      c.is_default = rd_kafka_ConfigEntry_is_default(e) != 0;
      out.push_back(std::move(c));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const ConfigEntry& a, const ConfigEntry& b) { return a.name < b.name; });
  return out;
}

Status Admin::AlterTopicConfigs(std::string_view topic,
                                const std::map<std::string, std::string>& set,
                                const std::vector<std::string>& remove,
                                std::chrono::milliseconds timeout) {
  const std::string what = fmt::format("change configs of topic '{}'", topic);
  for (const std::string& name : remove) {
    if (set.contains(name))
      return InvalidArgumentError("{}: {} is both set and removed", what, name);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ASSIGN_OR_RETURN(std::vector<ConfigEntry> now, DescribeTopicConfigs(topic, timeout));
  std::map<std::string, std::string> values;  // the topic's own, after the change
  for (const ConfigEntry& e : now) {
    if (e.source == "DYNAMIC_TOPIC_CONFIG" && e.value.has_value()) values[e.name] = *e.value;
  }
  for (const std::string& name : remove) values.erase(name);
  for (const auto& [name, value] : set) values[name] = value;
  const std::string name(topic);
  ConfigResourcePtr resource = TopicResource(name);
  for (const auto& [k, v] : values) {
    RETURN_IF_ERROR(detail::ErrorStatus(
        rd_kafka_ConfigResource_set_config(resource.get(), k.c_str(), v.c_str()),
        fmt::format("{}: {} = '{}'", what, k, v)));
  }
  const auto left =
      std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 deadline - std::chrono::steady_clock::now()));
  ASSIGN_OR_RETURN(AdminOptionsPtr options,
                   MakeOptions(rk_.get(), RD_KAFKA_ADMIN_OP_ALTERCONFIGS, left, what));
  QueuePtr queue(rd_kafka_queue_new(rk_.get()));
  rd_kafka_ConfigResource_t* resources[] = {resource.get()};
  rd_kafka_AlterConfigs(rk_.get(), resources, 1, options.get(), queue.get());
  ASSIGN_OR_RETURN(EventPtr ev, WaitResult(queue.get(), left, what));
  const rd_kafka_AlterConfigs_result_t* result = rd_kafka_event_AlterConfigs_result(ev.get());
  if (result == nullptr)
    return InternalError("{}: unexpected event {}", what, rd_kafka_event_name(ev.get()));
  size_t count = 0;
  const rd_kafka_ConfigResource_t** altered =
      rd_kafka_AlterConfigs_result_resources(result, &count);
  for (size_t i = 0; i < count; ++i) {
    const char* text = rd_kafka_ConfigResource_error_string(altered[i]);
    RETURN_IF_ERROR(detail::ErrorStatus(rd_kafka_ConfigResource_error(altered[i]), what,
                                        text != nullptr ? text : ""));
  }
  return Status::OK();
}

Result<std::vector<Watermarks>> Admin::QueryWatermarks(
    const std::vector<TopicPartition>& partitions, std::chrono::milliseconds timeout) {
  std::vector<Watermarks> out(partitions.size());
  if (partitions.empty()) return out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // librdkafka 2.0 finds each answered partition in the request's list by a linear search:
  // a list of n partitions costs n²/2 string compares (2,000 partitions: 2M, most of a
  // 50 ms topic listing). Lists of kChunk keep that small for a few more round trips.
  constexpr size_t kChunk = 256;
  for (int64_t spec : {int64_t{RD_KAFKA_OFFSET_BEGINNING}, int64_t{RD_KAFKA_OFFSET_END}}) {
    for (size_t from = 0; from < partitions.size(); from += kChunk) {
      const size_t to = std::min(partitions.size(), from + kChunk);
      detail::PartitionListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(to - from)));
      for (size_t i = from; i < to; ++i) {
        rd_kafka_topic_partition_list_add(list.get(), partitions[i].topic.c_str(),
                                          partitions[i].partition)
            ->offset = spec;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      RETURN_IF_ERROR(detail::ErrorStatus(
          rd_kafka_offsets_for_times(rk_.get(), list.get(),
                                     static_cast<int>(std::max<int64_t>(left.count(), 1))),
          "watermarks"));
      for (size_t i = from; i < to; ++i) {
        const rd_kafka_topic_partition_t& e = list->elems[i - from];
        RETURN_IF_ERROR(detail::ErrorStatus(
            e.err,
            fmt::format("watermarks of {} [{}]", partitions[i].topic, partitions[i].partition)));
        (spec == RD_KAFKA_OFFSET_BEGINNING ? out[i].low : out[i].high) = e.offset;
      }
    }
  }
  return out;
}

}  // namespace sluice::kafka::client
