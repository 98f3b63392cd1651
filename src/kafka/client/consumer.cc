#include "kafka/client/consumer.h"

#include <utility>

#include "kafka/client/rdkafka_util.h"

namespace sluice::kafka::client {

struct ConsumerCallbacks {
  // Runs inside Poll; `opaque` is the Consumer.
  static void OnError(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
    auto* self = static_cast<Consumer*>(opaque);
    std::lock_guard<std::mutex> lock(self->error_mu_);
    self->last_error_ = detail::ErrorStatus(static_cast<rd_kafka_resp_err_t>(err),
                                            rd_kafka_name(rk), reason);
  }
};

MessageBatch::MessageBatch(MessageBatch&& other) noexcept
    : messages_(std::exchange(other.messages_, {})),
      ends_(std::move(other.ends_)),
      errors_(std::move(other.errors_)) {}

MessageBatch& MessageBatch::operator=(MessageBatch&& other) noexcept {
  if (this != &other) {
    for (rd_kafka_message_t* m : messages_) rd_kafka_message_destroy(m);
    messages_ = std::exchange(other.messages_, {});
    ends_ = std::move(other.ends_);
    errors_ = std::move(other.errors_);
  }
  return *this;
}

MessageBatch::~MessageBatch() {
  for (rd_kafka_message_t* m : messages_) rd_kafka_message_destroy(m);
}

Message MessageBatch::operator[](size_t i) const {
  const rd_kafka_message_t* m = messages_[i];
  Message out;
  out.topic = rd_kafka_topic_name(m->rkt);
  out.partition = m->partition;
  out.offset = m->offset;
  rd_kafka_timestamp_type_t type;
  out.timestamp_ms = rd_kafka_message_timestamp(m, &type);
  out.key = std::string_view(static_cast<const char*>(m->key), m->key_len);
  out.value = std::string_view(static_cast<const char*>(m->payload), m->len);
  return out;
}

Result<std::unique_ptr<Consumer>> Consumer::Create(const Config& config) {
  std::unique_ptr<Consumer> c(new Consumer());
  Config effective = config;
  effective.emplace("enable.auto.commit", "false");  // kept when the caller set it
  auto group = config.find("group.id");
  c->has_group_ = group != config.end() && !group->second.empty();
  ASSIGN_OR_RETURN(detail::ConfPtr conf, detail::MakeConf(effective, "consumer", c.get()));
  rd_kafka_conf_set_error_cb(conf.get(), ConsumerCallbacks::OnError);
  ASSIGN_OR_RETURN(c->rk_, detail::NewHandle(RD_KAFKA_CONSUMER, std::move(conf), "consumer"));
  return c;
}

Consumer::~Consumer() {
  for (const Started& s : started_) rd_kafka_consume_stop(s.topic, s.partition);
  queue_.reset();
  topics_.clear();
  if (mode_ == Mode::kSubscribed) rd_kafka_consumer_close(rk_.get());
  rk_.reset();
}

Status Consumer::Assign(const std::vector<TopicPartition>& partitions) {
  if (mode_ != Mode::kNone) return FailedPreconditionError("consumer: Assign after {}",
                                                           mode_ == Mode::kAssigned ? "Assign" : "Subscribe");
  mode_ = Mode::kAssigned;
  queue_.reset(rd_kafka_queue_new(rk_.get()));
  for (const TopicPartition& tp : partitions) {
    rd_kafka_topic_t* rkt = nullptr;
    for (const detail::TopicPtr& t : topics_) {
      if (tp.topic == rd_kafka_topic_name(t.get())) rkt = t.get();
    }
    if (rkt == nullptr) {
      rkt = rd_kafka_topic_new(rk_.get(), tp.topic.c_str(), nullptr);
      if (rkt == nullptr) {
        return detail::ErrorStatus(rd_kafka_last_error(), fmt::format("topic '{}'", tp.topic));
      }
      topics_.emplace_back(rkt);
    }
    if (rd_kafka_consume_start_queue(rkt, tp.partition, tp.offset, queue_.get()) != 0) {
      return detail::ErrorStatus(rd_kafka_last_error(),
                                 fmt::format("assign {} [{}] at offset {}", tp.topic,
                                             tp.partition, tp.offset));
    }
    started_.push_back({rkt, tp.partition});
  }
  return Status::OK();
}

Status Consumer::Subscribe(const std::vector<std::string>& topics) {
  if (mode_ != Mode::kNone) return FailedPreconditionError("consumer: Subscribe after {}",
                                                           mode_ == Mode::kAssigned ? "Assign" : "Subscribe");
  if (!has_group_) return FailedPreconditionError("consumer: Subscribe needs group.id");
  detail::PartitionListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(topics.size())));
  for (const std::string& t : topics) {
    rd_kafka_topic_partition_list_add(list.get(), t.c_str(), RD_KAFKA_PARTITION_UA);
  }
  RETURN_IF_ERROR(detail::ErrorStatus(rd_kafka_subscribe(rk_.get(), list.get()), "subscribe"));
  mode_ = Mode::kSubscribed;
  // Group events and errors then arrive on the consumer queue, which Poll reads.
  RETURN_IF_ERROR(detail::ErrorStatus(rd_kafka_poll_set_consumer(rk_.get()), "subscribe"));
  queue_.reset(rd_kafka_queue_get_consumer(rk_.get()));
  return Status::OK();
}

Result<MessageBatch> Consumer::Poll(std::chrono::milliseconds timeout, size_t max_messages) {
  if (mode_ == Mode::kNone) return FailedPreconditionError("consumer: Poll before Assign or Subscribe");
  if (max_messages == 0) return InvalidArgumentError("consumer: Poll for 0 messages");
  // Assign reads its own queue; errors and logs stay on the main queue.
  if (mode_ == Mode::kAssigned) rd_kafka_poll(rk_.get(), 0);
  MessageBatch batch;
  batch.messages_.resize(max_messages);
  ssize_t n = rd_kafka_consume_batch_queue(queue_.get(), static_cast<int>(timeout.count()),
                                           batch.messages_.data(), max_messages);
  if (n < 0) {
    batch.messages_.clear();
    return detail::ErrorStatus(rd_kafka_last_error(), "consumer poll");
  }
  size_t kept = 0;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    rd_kafka_message_t* m = batch.messages_[i];
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      batch.messages_[kept++] = m;
      continue;
    }
    std::string topic = m->rkt != nullptr ? rd_kafka_topic_name(m->rkt) : "";
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      batch.ends_.push_back({std::move(topic), m->partition, m->offset});
    } else {
      batch.errors_.push_back(detail::ErrorStatus(
          m->err, fmt::format("consume {} [{}]", topic, m->partition), rd_kafka_message_errstr(m)));
    }
    rd_kafka_message_destroy(m);
  }
  batch.messages_.resize(kept);
  return batch;
}

Status Consumer::Commit(const std::vector<TopicPartition>& offsets) {
  if (mode_ != Mode::kSubscribed) {
    return FailedPreconditionError("consumer: Commit needs Subscribe (a group member)");
  }
  detail::PartitionListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size())));
  for (const TopicPartition& tp : offsets) {
    rd_kafka_topic_partition_list_add(list.get(), tp.topic.c_str(), tp.partition)->offset = tp.offset;
  }
  RETURN_IF_ERROR(detail::ErrorStatus(rd_kafka_commit(rk_.get(), list.get(), 0), "commit"));
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = list->elems[i];
    RETURN_IF_ERROR(detail::ErrorStatus(
        tp.err, fmt::format("commit {} [{}] at {}", tp.topic, tp.partition, tp.offset)));
  }
  return Status::OK();
}

Status Consumer::last_error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return last_error_;
}

std::string Consumer::name() const { return rd_kafka_name(rk_.get()); }

}  // namespace sluice::kafka::client
