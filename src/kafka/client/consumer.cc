#include "kafka/client/consumer.h"

#include <algorithm>
#include <utility>

#include "kafka/client/rdkafka_util.h"

namespace sluice::kafka::client {

struct ConsumerCallbacks {
  // Runs inside Poll; `opaque` is the Consumer.
  static void OnError(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
    auto* self = static_cast<Consumer*>(opaque);
    std::lock_guard<std::mutex> lock(self->error_mu_);
    self->last_error_ =
        detail::ErrorStatus(static_cast<rd_kafka_resp_err_t>(err), rd_kafka_name(rk), reason);
  }

  // Runs inside Poll; returns 0: librdkafka frees the JSON.
  static int OnStats(rd_kafka_t* /*rk*/, char* json, size_t json_len, void* opaque) {
    auto* self = static_cast<Consumer*>(opaque);
    if (self->on_stats_) self->on_stats_(std::string_view(json, json_len));
    return 0;
  }

  // Runs inside Poll for commits made with CommitAsync (and Commit, whose errors are
  // returned as well).
  static void OnCommitted(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t* offsets, void* opaque) {
    auto* self = static_cast<Consumer*>(opaque);
    if (err == RD_KAFKA_RESP_ERR__NO_OFFSET) return;  // nothing to commit
    self->RecordError(detail::ErrorStatus(err, "commit"));
    for (int i = 0; offsets != nullptr && i < offsets->cnt; ++i) {
      const rd_kafka_topic_partition_t& tp = offsets->elems[i];
      self->RecordError(detail::ErrorStatus(
          tp.err, fmt::format("commit {} [{}] at {}", tp.topic, tp.partition, tp.offset)));
    }
  }

  // Runs inside Poll (and inside rd_kafka_consumer_close). librdkafka leaves the
  // (un)assignment to the application once a rebalance callback is set: tell the
  // listener, then unassign at once, or assign as the Poll returns (below).
  static void OnRebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t* partitions, void* opaque) {
    auto* self = static_cast<Consumer*>(opaque);
    const bool cooperative = std::string_view(rd_kafka_rebalance_protocol(rk)) == "COOPERATIVE";
    RebalanceEvent event;
    for (int i = 0; i < partitions->cnt; ++i) {
      event.partitions.push_back(
          {partitions->elems[i].topic, partitions->elems[i].partition, RD_KAFKA_OFFSET_INVALID});
    }
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      event.kind = RebalanceEvent::Kind::kAssigned;
      if (self->rebalance_listener_) self->rebalance_listener_(event);
      // Start offsets the listener chose (the list is librdkafka's, in the same order).
      for (int i = 0; i < partitions->cnt && i < static_cast<int>(event.partitions.size()); ++i) {
        if (event.partitions[i].offset != RD_KAFKA_OFFSET_INVALID) {
          partitions->elems[i].offset = event.partitions[i].offset;
        }
      }
      // Taken when the Poll running this returns, not now: rd_kafka_consume_batch_queue
      // goes on collecting after a callback (rd_kafka_yield does not stop it), so records
      // of the new assignment would share one Poll with records fetched before a
      // revocation it also ran, and a caller could not tell them apart. CI lost 13
      // records of a partition revoked and assigned again inside one Poll.
      self->pending_assign_.emplace();
      for (int i = 0; i < partitions->cnt; ++i) {
        const rd_kafka_topic_partition_t& tp = partitions->elems[i];
        self->pending_assign_->push_back({tp.topic, tp.partition, tp.offset});
      }
      self->pending_cooperative_ = cooperative;
      // Closing: no Poll follows, and close waits for the group's assign call.
      if (self->closing_) {
        self->ApplyPendingAssign();
        return;
      }
      // Poll returns once the queue is empty instead of waiting out its timeout. (When
      // max_messages fills it first, the flag stays and the next Poll may return early,
      // possibly empty.)
      if (self->queue_ != nullptr) rd_kafka_queue_yield(self->queue_.get());
      return;
    }
    // Read before any assign: rd_kafka_assign clears the lost flag.
    event.kind =
        rd_kafka_assignment_lost(rk) ? RebalanceEvent::Kind::kLost : RebalanceEvent::Kind::kRevoked;
    // librdkafka starts no rebalance while it waits for an assign call, so none should be
    // pending here; if one is, it is what this revokes.
    self->ApplyPendingAssign();
    if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS && self->rebalance_listener_) {
      self->rebalance_listener_(event);
    }
    if (event.kind == RebalanceEvent::Kind::kRevoked && event.defer && !self->closing_) {
      // Given up by CompleteRevocation: librdkafka waits for the unassign call (within the
      // session timeout), and Poll returns once the queue is empty.
      self->pending_revoke_ = std::move(event.partitions);
      self->pending_revoke_cooperative_ = cooperative;
      if (self->queue_ != nullptr) rd_kafka_queue_yield(self->queue_.get());
      return;
    }
    // A deferred revocation still outstanding (the assignment was lost meanwhile): the
    // partitions it held are among those given up here, so it must not unassign again.
    self->pending_revoke_.reset();
    if (cooperative) {
      detail::ErrorPtr e(rd_kafka_incremental_unassign(rk, partitions));
      if (e)
        self->RecordError(
            detail::ErrorStatus(rd_kafka_error_code(e.get()), "incremental unassign"));
    } else {
      self->RecordError(detail::ErrorStatus(rd_kafka_assign(rk, nullptr), "unassign"));
    }
  }
};

void Consumer::ApplyPendingAssign() {
  if (!pending_assign_) return;
  detail::PartitionListPtr list = detail::OffsetList(*pending_assign_);
  pending_assign_.reset();
  if (pending_cooperative_) {
    detail::ErrorPtr e(rd_kafka_incremental_assign(rk_.get(), list.get()));
    if (e) RecordError(detail::ErrorStatus(rd_kafka_error_code(e.get()), "incremental assign"));
  } else {
    RecordError(detail::ErrorStatus(rd_kafka_assign(rk_.get(), list.get()), "assign"));
  }
}

void Consumer::CompleteRevocation() {
  if (!pending_revoke_) return;
  std::vector<TopicPartition> revoked = std::move(*pending_revoke_);
  pending_revoke_.reset();
  if (pending_revoke_cooperative_) {
    detail::PartitionListPtr list(
        rd_kafka_topic_partition_list_new(static_cast<int>(revoked.size())));
    for (const TopicPartition& tp : revoked) {
      rd_kafka_topic_partition_list_add(list.get(), tp.topic.c_str(), tp.partition);
    }
    detail::ErrorPtr e(rd_kafka_incremental_unassign(rk_.get(), list.get()));
    if (e) RecordError(detail::ErrorStatus(rd_kafka_error_code(e.get()), "incremental unassign"));
  } else {
    RecordError(detail::ErrorStatus(rd_kafka_assign(rk_.get(), nullptr), "unassign"));
  }
}

void Consumer::RecordError(Status st) {
  if (st.ok()) return;
  std::lock_guard<std::mutex> lock(error_mu_);
  last_error_ = std::move(st);
}

void Consumer::SetRebalanceListener(RebalanceListener listener) {
  rebalance_listener_ = std::move(listener);
}

Result<std::vector<TopicPartition>> Consumer::Assignment() const {
  if (mode_ == Mode::kAssigned) {
    std::vector<TopicPartition> out;
    for (const Started& s : started_) {
      out.push_back({rd_kafka_topic_name(s.topic), s.partition, RD_KAFKA_OFFSET_INVALID});
    }
    return out;
  }
  rd_kafka_topic_partition_list_t* raw = nullptr;
  RETURN_IF_ERROR(detail::ErrorStatus(rd_kafka_assignment(rk_.get(), &raw), "assignment"));
  detail::PartitionListPtr list(raw);
  std::vector<TopicPartition> out;
  for (int i = 0; i < list->cnt; ++i) {
    out.push_back({list->elems[i].topic, list->elems[i].partition, RD_KAFKA_OFFSET_INVALID});
  }
  return out;
}

Result<std::vector<PartitionLag>> Consumer::Lag() const {
  ASSIGN_OR_RETURN(std::vector<TopicPartition> assigned, Assignment());
  detail::PartitionListPtr list(
      rd_kafka_topic_partition_list_new(static_cast<int>(assigned.size())));
  for (const TopicPartition& tp : assigned) {
    rd_kafka_topic_partition_list_add(list.get(), tp.topic.c_str(), tp.partition);
  }
  RETURN_IF_ERROR(detail::ErrorStatus(rd_kafka_position(rk_.get(), list.get()), "position"));
  std::vector<PartitionLag> out;
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = list->elems[i];
    PartitionLag lag{tp.topic, tp.partition, tp.offset >= 0 ? tp.offset : -1, -1};
    int64_t low = -1;
    int64_t high = -1;
    if (rd_kafka_get_watermark_offsets(rk_.get(), tp.topic, tp.partition, &low, &high) ==
            RD_KAFKA_RESP_ERR_NO_ERROR &&
        high >= 0) {
      lag.high_watermark = high;
    }
    out.push_back(std::move(lag));
  }
  return out;
}

GroupMetadata GroupMetadata::Make(const std::string& group_id, int32_t generation,
                                  const std::string& member_id, const std::string& instance_id) {
  return GroupMetadata(rd_kafka_consumer_group_metadata_new_with_genid(
      group_id.c_str(), generation, member_id.c_str(),
      instance_id.empty() ? nullptr : instance_id.c_str()));
}

GroupMetadata& GroupMetadata::operator=(GroupMetadata&& other) noexcept {
  if (this != &other) {
    if (md_ != nullptr) rd_kafka_consumer_group_metadata_destroy(md_);
    md_ = std::exchange(other.md_, nullptr);
  }
  return *this;
}

GroupMetadata::~GroupMetadata() {
  if (md_ != nullptr) rd_kafka_consumer_group_metadata_destroy(md_);
}

Result<GroupMetadata> Consumer::CurrentGroupMetadata() const {
  rd_kafka_consumer_group_metadata_t* md = rd_kafka_consumer_group_metadata(rk_.get());
  if (md == nullptr) {
    return FailedPreconditionError("consumer {}: no group.id, so no group metadata", name());
  }
  return GroupMetadata(md);
}

std::string Consumer::MemberId() const {
  char* member = rd_kafka_memberid(rk_.get());
  if (member == nullptr) return "";
  std::string out(member);
  rd_kafka_mem_free(rk_.get(), member);
  return out;
}

Result<std::vector<TopicPartition>> Consumer::Committed(
    const std::vector<TopicPartition>& partitions, std::chrono::milliseconds timeout) const {
  if (!has_group_) return FailedPreconditionError("consumer {}: no group.id", name());
  detail::PartitionListPtr list(
      rd_kafka_topic_partition_list_new(static_cast<int>(partitions.size())));
  for (const TopicPartition& tp : partitions) {
    rd_kafka_topic_partition_list_add(list.get(), tp.topic.c_str(), tp.partition);
  }
  const int ms = static_cast<int>(std::min<int64_t>(timeout.count(), INT32_MAX));
  RETURN_IF_ERROR(
      detail::ErrorStatus(rd_kafka_committed(rk_.get(), list.get(), ms), "committed offsets"));
  std::vector<TopicPartition> out;
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = list->elems[i];
    RETURN_IF_ERROR(detail::ErrorStatus(
        tp.err, fmt::format("committed offset of {} [{}]", tp.topic, tp.partition)));
    out.push_back({tp.topic, tp.partition, tp.offset < 0 ? kOffsetInvalid : tp.offset});
  }
  return out;
}

Status Consumer::Seek(const std::vector<TopicPartition>& partitions,
                      std::chrono::milliseconds timeout) {
  if (partitions.empty()) return Status::OK();
  detail::PartitionListPtr list = detail::OffsetList(partitions);
  // librdkafka before 2.1.0 (#4230) waits for the seeks the timeout's milliseconds as
  // microseconds: 10 s became 10 ms, and a seek on a busy broker thread failed with
  // _TIMED_OUT. Passing a thousand times the timeout gives each partition's wait the time
  // asked for (so several partitions may take up to that much each).
  int64_t wait_ms = std::min<int64_t>(timeout.count(), INT32_MAX);
  if (rd_kafka_version() < 0x020100ff) wait_ms *= 1000;
  const int ms = static_cast<int>(std::min<int64_t>(wait_ms, INT32_MAX));
  detail::ErrorPtr e(rd_kafka_seek_partitions(rk_.get(), list.get(), ms));
  if (e) return detail::ErrorStatus(rd_kafka_error_code(e.get()), "seek");
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = list->elems[i];
    RETURN_IF_ERROR(detail::ErrorStatus(
        tp.err, fmt::format("seek {} [{}] to {}", tp.topic, tp.partition, tp.offset)));
  }
  return Status::OK();
}

MessageBatch::MessageBatch(MessageBatch&& other) noexcept
    : messages_(std::exchange(other.messages_, {})),
      bytes_(std::exchange(other.bytes_, 0)),
      ends_(std::move(other.ends_)),
      errors_(std::move(other.errors_)) {}

MessageBatch& MessageBatch::operator=(MessageBatch&& other) noexcept {
  if (this != &other) {
    for (rd_kafka_message_t* m : messages_) rd_kafka_message_destroy(m);
    messages_ = std::exchange(other.messages_, {});
    bytes_ = std::exchange(other.bytes_, 0);
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

std::vector<RecordHeader> MessageBatch::Headers(size_t i) const {
  std::vector<RecordHeader> out;
  rd_kafka_headers_t* headers = nullptr;
  // The message is librdkafka's; reading its headers parses and caches them in it.
  if (rd_kafka_message_headers(messages_[i], &headers) != RD_KAFKA_RESP_ERR_NO_ERROR) return out;
  const char* name = nullptr;
  const void* value = nullptr;
  size_t size = 0;
  for (size_t h = 0;
       rd_kafka_header_get_all(headers, h, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
       ++h) {
    RecordHeader rh{name != nullptr ? name : "", std::nullopt};
    if (value != nullptr) rh.value.emplace(static_cast<const char*>(value), size);
    out.push_back(std::move(rh));
  }
  return out;
}

bool MessageBatch::KeyIsNull(size_t i) const { return messages_[i]->key == nullptr; }

bool MessageBatch::ValueIsNull(size_t i) const { return messages_[i]->payload == nullptr; }

Result<std::unique_ptr<Consumer>> Consumer::Create(const Config& config, StatsCallback on_stats) {
  std::unique_ptr<Consumer> c(new Consumer());
  c->on_stats_ = std::move(on_stats);
  Config effective = config;
  effective.emplace("enable.auto.commit", "false");  // kept when the caller set it
  auto group = config.find("group.id");
  c->has_group_ = group != config.end() && !group->second.empty();
  ASSIGN_OR_RETURN(detail::ConfPtr conf, detail::MakeConf(effective, "consumer", c.get()));
  rd_kafka_conf_set_error_cb(conf.get(), ConsumerCallbacks::OnError);
  if (c->on_stats_) rd_kafka_conf_set_stats_cb(conf.get(), ConsumerCallbacks::OnStats);
  if (c->has_group_) {
    rd_kafka_conf_set_rebalance_cb(conf.get(), ConsumerCallbacks::OnRebalance);
    rd_kafka_conf_set_offset_commit_cb(conf.get(), ConsumerCallbacks::OnCommitted);
  }
  ASSIGN_OR_RETURN(c->rk_, detail::NewHandle(RD_KAFKA_CONSUMER, std::move(conf), "consumer"));
  return c;
}

Consumer::~Consumer() {
  for (const Started& s : started_) rd_kafka_consume_stop(s.topic, s.partition);
  queue_.reset();
  topics_.clear();
  // Closing revokes the assignment through the rebalance callback: the owner of the
  // listener may already be half destroyed, so it is not told.
  rebalance_listener_ = nullptr;
  // An assignment announced after the last Poll, or inside close itself, is taken at once:
  // close waits (without a timeout) until the group has had its assign call.
  closing_ = true;
  CompleteRevocation();
  ApplyPendingAssign();
  if (mode_ == Mode::kSubscribed) rd_kafka_consumer_close(rk_.get());
  rk_.reset();
}

Status Consumer::Assign(const std::vector<TopicPartition>& partitions) {
  if (mode_ != Mode::kNone)
    return FailedPreconditionError("consumer: Assign after {}",
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
      return detail::ErrorStatus(
          rd_kafka_last_error(),
          fmt::format("assign {} [{}] at offset {}", tp.topic, tp.partition, tp.offset));
    }
    started_.push_back({rkt, tp.partition});
  }
  return Status::OK();
}

Status Consumer::Subscribe(const std::vector<std::string>& topics) {
  if (mode_ != Mode::kNone)
    return FailedPreconditionError("consumer: Subscribe after {}",
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
  if (mode_ == Mode::kNone)
    return FailedPreconditionError("consumer: Poll before Assign or Subscribe");
  if (max_messages == 0) return InvalidArgumentError("consumer: Poll for 0 messages");
  // Assign reads its own queue; errors and logs stay on the main queue.
  if (mode_ == Mode::kAssigned) rd_kafka_poll(rk_.get(), 0);
  CompleteRevocation();  // a Poll never runs with a revocation outstanding
  MessageBatch batch;
  if (scratch_.size() < max_messages) scratch_.resize(max_messages);
  ssize_t n = rd_kafka_consume_batch_queue(queue_.get(), static_cast<int>(timeout.count()),
                                           scratch_.data(), max_messages);
  ApplyPendingAssign();  // records of the new assignment come in the next Poll
  if (n < 0) return detail::ErrorStatus(rd_kafka_last_error(), "consumer poll");
  batch.messages_.reserve(static_cast<size_t>(n));
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    rd_kafka_message_t* m = scratch_[i];
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      batch.messages_.push_back(m);
      batch.bytes_ += m->key_len + m->len;
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
  return batch;
}

Status Consumer::Commit(const std::vector<TopicPartition>& offsets) {
  if (mode_ != Mode::kSubscribed) {
    return FailedPreconditionError("consumer: Commit needs Subscribe (a group member)");
  }
  detail::PartitionListPtr list = detail::OffsetList(offsets);
  RETURN_IF_ERROR(detail::ErrorStatus(rd_kafka_commit(rk_.get(), list.get(), 0), "commit"));
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = list->elems[i];
    RETURN_IF_ERROR(detail::ErrorStatus(
        tp.err, fmt::format("commit {} [{}] at {}", tp.topic, tp.partition, tp.offset)));
  }
  return Status::OK();
}

Status Consumer::CommitAsync(const std::vector<TopicPartition>& offsets) {
  if (mode_ != Mode::kSubscribed) {
    return FailedPreconditionError("consumer: Commit needs Subscribe (a group member)");
  }
  detail::PartitionListPtr list = detail::OffsetList(offsets);
  return detail::ErrorStatus(rd_kafka_commit(rk_.get(), list.get(), 1), "commit");
}

Result<int64_t> Consumer::QueryHighWatermark(const std::string& topic, int32_t partition,
                                             std::chrono::milliseconds timeout) {
  return detail::ListOffset(rk_.get(), topic, partition, RD_KAFKA_OFFSET_END, timeout,
                            fmt::format("watermarks of {} [{}]", topic, partition));
}

Status Consumer::last_error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return last_error_;
}

std::string Consumer::name() const { return rd_kafka_name(rk_.get()); }

}  // namespace sluice::kafka::client
