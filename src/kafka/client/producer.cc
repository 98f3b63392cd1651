#include "kafka/client/producer.h"

#include <algorithm>

#include "kafka/client/rdkafka_util.h"

namespace sluice::kafka::client {

struct ProducerCallbacks {
  // Runs inside rd_kafka_poll / rd_kafka_flush; `opaque` is the Producer.
  static void OnDelivery(rd_kafka_t* rk, const rd_kafka_message_t* m, void* opaque) {
    auto* self = static_cast<Producer*>(opaque);
    // One thread serves reports at a time (the class contract), so the counters have a
    // single writer: a relaxed load and store, without a locked read-modify-write per
    // record; other threads read them with relaxed loads.
    auto bump = [](std::atomic<uint64_t>& counter, uint64_t by) {
      counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
    };
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      bump(self->delivered_, 1);
      bump(self->delivered_bytes_, m->len);
    } else {
      bump(self->failed_, 1);
    }
    if (!self->on_delivery_) return;
    DeliveryReport report;
    report.topic = rd_kafka_topic_name(m->rkt);
    report.partition = m->partition;
    report.offset = m->offset;
    report.value_bytes = m->len;
    report.cookie = reinterpret_cast<uintptr_t>(m->_private);
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      // Not rd_kafka_message_errstr: in a delivery report the payload is the record's
      // value, which that function would read as a C string.
      report.status = detail::ErrorStatus(
          m->err, fmt::format("delivery to {} [{}]", report.topic, report.partition));
    }
    self->on_delivery_(report);
  }

  // Returns 0: librdkafka frees the JSON.
  static int OnStats(rd_kafka_t* rk, char* json, size_t json_len, void* opaque) {
    auto* self = static_cast<Producer*>(opaque);
    if (self->on_stats_) self->on_stats_(std::string_view(json, json_len));
    return 0;
  }

  static void OnError(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
    auto* self = static_cast<Producer*>(opaque);
    std::lock_guard<std::mutex> lock(self->error_mu_);
    self->last_error_ =
        detail::ErrorStatus(static_cast<rd_kafka_resp_err_t>(err), rd_kafka_name(rk), reason);
  }
};

Result<std::unique_ptr<Producer>> Producer::Create(const Config& config,
                                                   DeliveryCallback on_delivery,
                                                   StatsCallback on_stats) {
  std::unique_ptr<Producer> p(new Producer(std::move(on_delivery), std::move(on_stats)));
  ASSIGN_OR_RETURN(detail::ConfPtr conf, detail::MakeConf(config, "producer", p.get()));
  rd_kafka_conf_set_dr_msg_cb(conf.get(), ProducerCallbacks::OnDelivery);
  if (p->on_stats_) rd_kafka_conf_set_stats_cb(conf.get(), ProducerCallbacks::OnStats);
  rd_kafka_conf_set_error_cb(conf.get(), ProducerCallbacks::OnError);
  ASSIGN_OR_RETURN(p->rk_, detail::NewHandle(RD_KAFKA_PRODUCER, std::move(conf), "producer"));
  return p;
}

Producer::~Producer() {
  topics_.clear();  // topic handles go before the handle that owns them
  rk_.reset();
}

rd_kafka_topic_t* Producer::Topic(std::string_view topic, Status* status) {
  auto it = topics_.find(topic);
  if (it != topics_.end()) return it->second.get();
  std::string name(topic);
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk_.get(), name.c_str(), nullptr);
  if (rkt == nullptr) {
    *status = detail::ErrorStatus(rd_kafka_last_error(), fmt::format("topic '{}'", topic));
    return nullptr;
  }
  topics_.emplace(std::move(name), detail::TopicPtr(rkt));
  return rkt;
}

Status Producer::Produce(std::string_view topic, int32_t partition, std::string_view key,
                         std::string_view value, uint64_t cookie, Value value_mode,
                         int64_t timestamp_ms) {
  Status st;
  rd_kafka_topic_t* rkt = Topic(topic, &st);
  if (rkt == nullptr) return st;
  // librdkafka takes a non-const pointer but, without RD_KAFKA_MSG_F_FREE, only reads it.
  int flags = value_mode == Value::kCopy ? RD_KAFKA_MSG_F_COPY : 0;
  if (timestamp_ms != 0) {
    rd_kafka_resp_err_t err = rd_kafka_producev(
        rk_.get(), RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_PARTITION(partition), RD_KAFKA_V_MSGFLAGS(flags),
        RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
        RD_KAFKA_V_KEY(key.data(), key.size()),
        RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<uintptr_t>(cookie))),
        RD_KAFKA_V_TIMESTAMP(timestamp_ms), RD_KAFKA_V_END);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return detail::ErrorStatus(err, fmt::format("produce to {} [{}]", topic, partition));
    }
  } else {
    int rc = rd_kafka_produce(rkt, partition, flags, const_cast<char*>(value.data()), value.size(),
                              key.data(), key.size(),
                              reinterpret_cast<void*>(static_cast<uintptr_t>(cookie)));
    if (rc != 0) {
      rd_kafka_resp_err_t err = rd_kafka_last_error();
      return detail::ErrorStatus(err, fmt::format("produce to {} [{}]", topic, partition));
    }
  }
  // Produce runs on one thread at a time: a single writer, as above.
  produced_.store(produced_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return Status::OK();
}

Status Producer::ProduceRecord(std::string_view topic, int32_t partition,
                               std::optional<std::string_view> key,
                               std::optional<std::string_view> value,
                               const std::vector<RecordHeader>& headers, uint64_t cookie) {
  const std::string what = fmt::format("produce to {} [{}]", topic, partition);
  rd_kafka_headers_t* hdrs = rd_kafka_headers_new(headers.size());
  for (const RecordHeader& h : headers) {
    rd_kafka_header_add(hdrs, h.name.data(), static_cast<ssize_t>(h.name.size()),
                        h.value ? h.value->data() : nullptr,
                        h.value ? static_cast<ssize_t>(h.value->size()) : 0);
  }
  const std::string name(topic);
  // On success librdkafka owns the headers; on failure they are still ours.
  // (librdkafka's macros cast their arguments unparenthesized: plain variables only.)
  void* value_data = value ? const_cast<char*>(value->data()) : nullptr;
  const size_t value_size = value ? value->size() : 0;
  const void* key_data = key ? key->data() : nullptr;
  const size_t key_size = key ? key->size() : 0;
  void* opaque = reinterpret_cast<void*>(static_cast<uintptr_t>(cookie));
  rd_kafka_resp_err_t err = rd_kafka_producev(
      rk_.get(), RD_KAFKA_V_TOPIC(name.c_str()), RD_KAFKA_V_PARTITION(partition),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_VALUE(value_data, value_size),
      RD_KAFKA_V_KEY(key_data, key_size), RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(opaque),
      RD_KAFKA_V_END);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_headers_destroy(hdrs);
    return detail::ErrorStatus(err, what);
  }
  produced_.store(produced_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return Status::OK();
}

int Producer::Poll(std::chrono::milliseconds timeout) {
  return rd_kafka_poll(rk_.get(), static_cast<int>(timeout.count()));
}

Status Producer::Flush(std::chrono::milliseconds timeout) {
  rd_kafka_resp_err_t err = rd_kafka_flush(rk_.get(), static_cast<int>(timeout.count()));
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return Status::OK();
  return detail::ErrorStatus(err, "flush",
                             fmt::format("{} records still in flight after {} ms",
                                         rd_kafka_outq_len(rk_.get()), timeout.count()));
}

int64_t Producer::InFlight() const { return rd_kafka_outq_len(rk_.get()); }

ProducerCounters Producer::counters() const {
  ProducerCounters c;
  c.produced = produced_.load(std::memory_order_relaxed);
  c.delivered = delivered_.load(std::memory_order_relaxed);
  c.failed = failed_.load(std::memory_order_relaxed);
  c.delivered_bytes = delivered_bytes_.load(std::memory_order_relaxed);
  return c;
}

Status Producer::last_error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return last_error_;
}

std::string Producer::name() const { return rd_kafka_name(rk_.get()); }

// librdkafka's error object (consumed) as a Status whose code is its class (producer.h).
Status Producer::TxnStatus(rd_kafka_error_t* raw, std::string_view what) {
  if (raw == nullptr) {
    last_txn_error_ = TxnError::kNone;
    return Status::OK();
  }
  detail::ErrorPtr error(raw);
  const rd_kafka_resp_err_t code = rd_kafka_error_code(raw);
  switch (code) {
    case RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION:
    case RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID:
      last_txn_error_ = TxnError::kMembership;
      break;
    case RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID:
      last_txn_error_ = TxnError::kFencedInstance;
      break;
    default:
      last_txn_error_ = TxnError::kOther;
  }
  std::string text =
      fmt::format("{}: {} ({})", what, rd_kafka_error_string(raw), rd_kafka_err2name(code));
  if (rd_kafka_error_is_fatal(raw)) {
    return Status(StatusCode::kFailedPrecondition, "fatal: " + text);
  }
  if (rd_kafka_error_txn_requires_abort(raw)) return Status(StatusCode::kAborted, text);
  if (rd_kafka_error_is_retriable(raw)) return Status(StatusCode::kResourceExhausted, text);
  if (code == RD_KAFKA_RESP_ERR__STATE || code == RD_KAFKA_RESP_ERR__INVALID_ARG ||
      code == RD_KAFKA_RESP_ERR__NOT_CONFIGURED) {
    return Status(StatusCode::kInvalidArgument, text);
  }
  return Status(
      detail::CodeOf(code) == StatusCode::kOk ? StatusCode::kInternal : detail::CodeOf(code), text);
}

namespace {

int Millis(std::chrono::milliseconds timeout) {
  return static_cast<int>(std::min<int64_t>(timeout.count(), INT32_MAX));
}

}  // namespace

Status Producer::InitTransactions(std::chrono::milliseconds timeout) {
  return TxnStatus(rd_kafka_init_transactions(rk_.get(), Millis(timeout)), "init transactions");
}

Status Producer::BeginTransaction() {
  return TxnStatus(rd_kafka_begin_transaction(rk_.get()), "begin transaction");
}

Status Producer::SendOffsetsToTransaction(const std::vector<TopicPartition>& offsets,
                                          const GroupMetadata& group,
                                          std::chrono::milliseconds timeout) {
  if (group.get() == nullptr) {
    return InvalidArgumentError("send offsets to transaction: no consumer group metadata");
  }
  detail::PartitionListPtr list = detail::OffsetList(offsets);
  return TxnStatus(
      rd_kafka_send_offsets_to_transaction(rk_.get(), list.get(), group.get(), Millis(timeout)),
      "send offsets to transaction");
}

Status Producer::CommitTransaction(std::chrono::milliseconds timeout) {
  return TxnStatus(rd_kafka_commit_transaction(rk_.get(), Millis(timeout)), "commit transaction");
}

Status Producer::AbortTransaction(std::chrono::milliseconds timeout) {
  return TxnStatus(rd_kafka_abort_transaction(rk_.get(), Millis(timeout)), "abort transaction");
}

bool Producer::Fenced() const {
  const rd_kafka_resp_err_t err = rd_kafka_fatal_error(rk_.get(), nullptr, 0);
  return err == RD_KAFKA_RESP_ERR__FENCED || err == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
         err == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

Status Producer::FatalError() const {
  char reason[512];
  rd_kafka_resp_err_t err = rd_kafka_fatal_error(rk_.get(), reason, sizeof(reason));
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return Status::OK();
  return Status(
      StatusCode::kFailedPrecondition,
      fmt::format("fatal: {}: {} ({})", rd_kafka_name(rk_.get()), reason, rd_kafka_err2name(err)));
}

}  // namespace sluice::kafka::client
