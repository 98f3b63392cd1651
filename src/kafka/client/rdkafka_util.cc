#include "kafka/client/rdkafka_util.h"

#include <syslog.h>

#include "base/logging.h"

namespace sluice::kafka::client {

namespace detail {
namespace {

const Logger kLog("kafka_client");

// librdkafka's log lines, from its own threads, at syslog levels.
void LogCallback(const rd_kafka_t* rk, int level, const char* facility, const char* buf) {
  LogLevel ours = level <= LOG_ERR       ? LogLevel::kError
                  : level == LOG_WARNING ? LogLevel::kWarn
                  : level <= LOG_INFO    ? LogLevel::kInfo
                                         : LogLevel::kDebug;
  if (!kLog.Enabled(ours)) return;
  kLog.Write(ours, fmt::format("{} {}: {}", rd_kafka_name(rk), facility, buf));
}

}  // namespace

void KafkaDeleter::operator()(rd_kafka_s* rk) const { rd_kafka_destroy(rk); }
void TopicDeleter::operator()(rd_kafka_topic_s* rkt) const { rd_kafka_topic_destroy(rkt); }
void QueueDeleter::operator()(rd_kafka_queue_s* rkqu) const { rd_kafka_queue_destroy(rkqu); }

Result<ConfPtr> MakeConf(const Config& config, std::string_view what, void* opaque) {
  ConfPtr conf(rd_kafka_conf_new());
  char errstr[512];
  for (const auto& [name, value] : config) {
    errstr[0] = '\0';
    rd_kafka_conf_res_t res =
        rd_kafka_conf_set(conf.get(), name.c_str(), value.c_str(), errstr, sizeof(errstr));
    if (res != RD_KAFKA_CONF_OK) {
      return InvalidArgumentError("{} config: {} = '{}': {}", what, name, value, errstr);
    }
  }
  rd_kafka_conf_set_log_cb(conf.get(), LogCallback);
  rd_kafka_conf_set_opaque(conf.get(), opaque);
  return conf;
}

Result<KafkaPtr> NewHandle(rd_kafka_type_t type, ConfPtr conf, std::string_view what) {
  char errstr[512] = "";
  // rd_kafka_new owns the configuration from here on when it succeeds.
  rd_kafka_t* rk = rd_kafka_new(type, conf.get(), errstr, sizeof(errstr));
  if (rk == nullptr) return InvalidArgumentError("{}: {}", what, errstr);
  (void)conf.release();
  return KafkaPtr(rk);
}

PartitionListPtr OffsetList(const std::vector<TopicPartition>& offsets) {
  PartitionListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size())));
  for (const TopicPartition& tp : offsets) {
    rd_kafka_topic_partition_list_add(list.get(), tp.topic.c_str(), tp.partition)->offset =
        tp.offset;
  }
  return list;
}

StatusCode CodeOf(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
      return StatusCode::kOk;
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:
      return StatusCode::kResourceExhausted;
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
      return StatusCode::kAborted;
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_PARTITIONS:
    case RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
    case RD_KAFKA_RESP_ERR_INVALID_CONFIG:
    case RD_KAFKA_RESP_ERR_INVALID_REQUEST:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_GROUP_ID:
      return StatusCode::kInvalidArgument;
    case RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS:
      return StatusCode::kAlreadyExists;
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
      return StatusCode::kNotFound;
    case RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE:
    case RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET:
      return StatusCode::kOutOfRange;
    case RD_KAFKA_RESP_ERR_INVALID_MSG:
    case RD_KAFKA_RESP_ERR__BAD_MSG:
    case RD_KAFKA_RESP_ERR__BAD_COMPRESSION:
      return StatusCode::kCorruption;
    case RD_KAFKA_RESP_ERR__UNKNOWN_GROUP:
    case RD_KAFKA_RESP_ERR__STATE:
    case RD_KAFKA_RESP_ERR__PREV_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR__CONFLICT:
    case RD_KAFKA_RESP_ERR__FATAL:
    case RD_KAFKA_RESP_ERR__NO_OFFSET:
    case RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID:
    case RD_KAFKA_RESP_ERR_NON_EMPTY_GROUP:
    case RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS:
      return StatusCode::kFailedPrecondition;
    case RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND:
      return StatusCode::kNotFound;
    case RD_KAFKA_RESP_ERR__NOT_IMPLEMENTED:
    case RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION:
      return StatusCode::kUnimplemented;
    default:
      // The broker or the network refused (transport, resolve, all brokers down, a
      // broker error code not listed above): the message says which.
      return StatusCode::kIOError;
  }
}

Status ErrorStatus(rd_kafka_resp_err_t err, std::string_view context, std::string_view detail) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return Status::OK();
  std::string_view text = detail.empty() ? std::string_view(rd_kafka_err2str(err)) : detail;
  return Status(CodeOf(err), fmt::format("{}: {} ({})", context, text, rd_kafka_err2name(err)));
}

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

Result<int64_t> ListOffset(rd_kafka_t* rk, const std::string& topic, int32_t partition,
                           int64_t spec, std::chrono::milliseconds timeout, std::string_view what) {
  PartitionListPtr list(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), partition)->offset = spec;
  rd_kafka_resp_err_t err =
      rd_kafka_offsets_for_times(rk, list.get(), static_cast<int>(timeout.count()));
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) err = list->elems[0].err;
  RETURN_IF_ERROR(ErrorStatus(err, what));
  return list->elems[0].offset;
}

}  // namespace detail

std::string LibraryVersion() { return rd_kafka_version_str(); }

Status CheckConfig(const Config& config) {
  return detail::MakeConf(config, "librdkafka", nullptr).status();
}

}  // namespace sluice::kafka::client
