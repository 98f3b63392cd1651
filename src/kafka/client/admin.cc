#include "kafka/client/admin.h"

#include "kafka/client/rdkafka_util.h"

namespace sluice::kafka::client {
namespace {

using detail::AdminOptionsPtr;
using detail::EventPtr;
using detail::QueuePtr;

// Admin options with both the client's request timeout and the broker's operation
// timeout set to `timeout`.
Result<AdminOptionsPtr> MakeOptions(rd_kafka_t* rk, rd_kafka_admin_op_t op,
                                    std::chrono::milliseconds timeout, std::string_view what) {
  AdminOptionsPtr options(rd_kafka_AdminOptions_new(rk, op));
  char errstr[512] = "";
  int ms = static_cast<int>(timeout.count());
  // The operation timeout is for topic creation and deletion only (librdkafka refuses it
  // elsewhere).
  const bool topic_op =
      op == RD_KAFKA_ADMIN_OP_CREATETOPICS || op == RD_KAFKA_ADMIN_OP_DELETETOPICS;
  if (rd_kafka_AdminOptions_set_request_timeout(options.get(), ms, errstr, sizeof(errstr)) ||
      (topic_op &&
       rd_kafka_AdminOptions_set_operation_timeout(options.get(), ms, errstr, sizeof(errstr)))) {
    return InvalidArgumentError("{}: timeout {} ms: {}", what, ms, errstr);
  }
  return options;
}

// Waits for the one result event of an admin call on `queue`; checks its request-level
// error. librdkafka answers by the request timeout; the extra second only guards.
Result<EventPtr> WaitResult(rd_kafka_queue_t* queue, std::chrono::milliseconds timeout,
                            std::string_view what) {
  EventPtr ev(rd_kafka_queue_poll(queue, static_cast<int>(timeout.count()) + 1000));
  if (ev == nullptr) return AbortedError("{}: no answer within {} ms", what, timeout.count());
  rd_kafka_resp_err_t err = rd_kafka_event_error(ev.get());
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* text = rd_kafka_event_error_string(ev.get());
    return detail::ErrorStatus(err, what, text != nullptr ? text : "");
  }
  return ev;
}

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
  ASSIGN_OR_RETURN(detail::ConfPtr conf, detail::MakeConf(config, "admin", a.get()));
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
  std::string what = fmt::format("config {} of topic '{}'", name, topic);
  std::string topic_name(topic);
  std::unique_ptr<rd_kafka_ConfigResource_t, decltype(&rd_kafka_ConfigResource_destroy)> resource(
      rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic_name.c_str()),
      &rd_kafka_ConfigResource_destroy);
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
  for (size_t i = 0; i < count; ++i) {
    rd_kafka_resp_err_t err = rd_kafka_ConfigResource_error(described[i]);
    if (err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
      return NotFoundError("{}: no such topic", what);
    RETURN_IF_ERROR(detail::ErrorStatus(err, what));
    size_t entries = 0;
    const rd_kafka_ConfigEntry_t** configs =
        rd_kafka_ConfigResource_configs(described[i], &entries);
    for (size_t j = 0; j < entries; ++j) {
      const char* entry_name = rd_kafka_ConfigEntry_name(configs[j]);
      const char* value = rd_kafka_ConfigEntry_value(configs[j]);
      if (entry_name != nullptr && name == entry_name)
        return std::string(value != nullptr ? value : "");
    }
  }
  return NotFoundError("{}: not in the broker's answer", what);
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
