// Private to kafka/client: building librdkafka configurations and turning librdkafka
// errors into Status. No other module includes this header.
#pragma once

#include <librdkafka/rdkafka.h>

#include <memory>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kafka/client/config.h"
#include "kafka/client/consumer.h"

namespace sluice::kafka::client::detail {

struct ConfDeleter {
  void operator()(rd_kafka_conf_t* conf) const { rd_kafka_conf_destroy(conf); }
};
struct MessageDeleter {
  void operator()(rd_kafka_message_t* m) const { rd_kafka_message_destroy(m); }
};
struct EventDeleter {
  void operator()(rd_kafka_event_t* ev) const { rd_kafka_event_destroy(ev); }
};
struct PartitionListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
struct AdminOptionsDeleter {
  void operator()(rd_kafka_AdminOptions_t* o) const { rd_kafka_AdminOptions_destroy(o); }
};
struct NewTopicDeleter {
  void operator()(rd_kafka_NewTopic_t* t) const { rd_kafka_NewTopic_destroy(t); }
};
struct DeleteTopicDeleter {
  void operator()(rd_kafka_DeleteTopic_t* t) const { rd_kafka_DeleteTopic_destroy(t); }
};
struct ErrorDeleter {
  void operator()(rd_kafka_error_t* e) const { rd_kafka_error_destroy(e); }
};
struct MetadataDeleter {
  void operator()(const rd_kafka_metadata_t* m) const { rd_kafka_metadata_destroy(m); }
};
using ConfPtr = std::unique_ptr<rd_kafka_conf_t, ConfDeleter>;
using MessagePtr = std::unique_ptr<rd_kafka_message_t, MessageDeleter>;
using EventPtr = std::unique_ptr<rd_kafka_event_t, EventDeleter>;
using PartitionListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, PartitionListDeleter>;
using AdminOptionsPtr = std::unique_ptr<rd_kafka_AdminOptions_t, AdminOptionsDeleter>;
using NewTopicPtr = std::unique_ptr<rd_kafka_NewTopic_t, NewTopicDeleter>;
using DeleteTopicPtr = std::unique_ptr<rd_kafka_DeleteTopic_t, DeleteTopicDeleter>;
using ErrorPtr = std::unique_ptr<rd_kafka_error_t, ErrorDeleter>;
using MetadataPtr = std::unique_ptr<const rd_kafka_metadata_t, MetadataDeleter>;

// A configuration with every property of `config` set, librdkafka's log lines routed to
// the "kafka_client" logger, and `opaque` as the handle's opaque. A property librdkafka
// does not know, or a value it refuses, is an InvalidArgument naming the property, the
// value and librdkafka's reason; `what` ("producer") goes in front.
Result<ConfPtr> MakeConf(const Config& config, std::string_view what, void* opaque);

// rd_kafka_new over `conf` (which it consumes, also on failure).
Result<KafkaPtr> NewHandle(rd_kafka_type_t type, ConfPtr conf, std::string_view what);

// A partition list with each partition's offset set (TopicPartition::offset).
PartitionListPtr OffsetList(const std::vector<TopicPartition>& offsets);

// The StatusCode closest to a librdkafka error code.
StatusCode CodeOf(rd_kafka_resp_err_t err);

// "<context>: <librdkafka's text> (<error name>)" with CodeOf(err). `detail`, when not
// empty, replaces librdkafka's generic text (brokers often send a better one).
Status ErrorStatus(rd_kafka_resp_err_t err, std::string_view context, std::string_view detail = {});

// Admin options with both the client's request timeout and the broker's operation
// timeout (topic creation and deletion only) set to `timeout`.
Result<AdminOptionsPtr> MakeOptions(rd_kafka_t* rk, rd_kafka_admin_op_t op,
                                    std::chrono::milliseconds timeout, std::string_view what);

// Waits for the one result event of an admin call on `queue`; checks its request-level
// error.
Result<EventPtr> WaitResult(rd_kafka_queue_t* queue, std::chrono::milliseconds timeout,
                            std::string_view what);

// ListOffsets of one partition: `spec` is a timestamp or RD_KAFKA_OFFSET_END (the high
// watermark, the last stable offset for a read_committed handle) or
// RD_KAFKA_OFFSET_BEGINNING (the log start). Through rd_kafka_offsets_for_times, which
// gives up at `timeout`: rd_kafka_query_watermark_offsets (librdkafka 2.0) retries a
// request to a leader that went away for as long as that broker stays down, whatever its
// timeout, and held the caller (a pipeline's runner, a registry write) forever. `what`
// names the query in an error.
Result<int64_t> ListOffset(rd_kafka_t* rk, const std::string& topic, int32_t partition,
                           int64_t spec, std::chrono::milliseconds timeout, std::string_view what);

}  // namespace sluice::kafka::client::detail
