// KafkaSchemaLog: `_schemas` through librdkafka (kafka_log.h).
#include "schema/registry/kafka_log.h"

#include <fmt/format.h>

#include "base/logging.h"

namespace sluice::schema::registry {

namespace kc = kafka::client;

namespace {
const Logger kLog("schema-registry");
}  // namespace

Result<std::unique_ptr<KafkaSchemaLog>> KafkaSchemaLog::Open(KafkaSchemaLogOptions options,
                                                             Registry* registry) {
  std::unique_ptr<KafkaSchemaLog> log(new KafkaSchemaLog());
  log->options_ = std::move(options);
  log->registry_ = registry;
  ASSIGN_OR_RETURN(log->admin_, kc::Admin::Create(log->options_.client));
  // Three copies as Confluent's kafkastore.topic.replication.factor, fewer on a cluster of
  // fewer brokers (a single broker keeps one).
  // Brokers of a cluster started together register one by one: three replicas are asked
  // for during the first seconds before fewer are taken.
  Status created;
  const auto patience = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  for (int rf : {3, 2, 1}) {
    if (log->options_.replication_factor > 0 && rf != log->options_.replication_factor) continue;
    if (log->options_.replication_factor <= 0 && !log->options_.cluster && rf != 1) continue;
    for (;;) {
      created = log->admin_->CreateTopic(log->options_.topic, 1, rf,
                                         kc::Config{{"cleanup.policy", "compact"}},
                                         log->options_.timeout);
      if (created.ok() || created.code() == StatusCode::kAlreadyExists || rf == 1 ||
          std::chrono::steady_clock::now() > patience) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (created.ok() || created.code() == StatusCode::kAlreadyExists) break;
  }
  if (!created.ok() && created.code() != StatusCode::kAlreadyExists) {
    return Status(created.code(),
                  fmt::format("the schema registry could not create its topic {}: {}",
                              log->options_.topic, created.message()));
  }
  kc::Config consumer = log->options_.client;
  consumer["group.id"] = "__sluice_schema_registry_reader";
  consumer["enable.auto.commit"] = "false";
  consumer["enable.partition.eof"] = "true";
  consumer["isolation.level"] = "read_committed";
  consumer["fetch.wait.max.ms"] = "50";
  ASSIGN_OR_RETURN(log->consumer_, kc::Consumer::Create(consumer));
  RETURN_IF_ERROR(log->consumer_->Assign({{log->options_.topic, 0, kc::kOffsetBeginning}}));
  log->reader_ = std::thread([l = log.get()] { l->ReadLoop(); });
  return log;
}

KafkaSchemaLog::~KafkaSchemaLog() {
  stop_ = true;
  if (reader_.joinable()) reader_.join();
}

void KafkaSchemaLog::ReadLoop() {
  int64_t logged_errors = 0;
  while (!stop_) {
    Result<kc::MessageBatch> batch = consumer_->Poll(std::chrono::milliseconds(100), 512);
    if (!batch.ok()) {
      if (logged_errors++ < 5) {
        SLUICE_LOG(kLog, kWarn, "reading {}: {}", options_.topic, batch.status().ToString());
      }
      continue;
    }
    for (size_t i = 0; i < batch->size(); ++i) {
      kc::Message m = (*batch)[i];
      std::optional<std::string_view> value;
      if (m.value.data() != nullptr) value = m.value;
      registry_->Feed(m.offset, m.key, value);
    }
    for (const kc::MessageBatch::PartitionEnd& end : batch->ends())
      registry_->ReachedEnd(end.offset);
  }
}

Status KafkaSchemaLog::BecomeWriter() {
  std::lock_guard lock(write_mu_);
  if (producer_ != nullptr && !producer_->Fenced() && producer_->FatalError().ok()) {
    return Status::OK();
  }
  producer_.reset();
  kc::Config config = options_.client;
  config["transactional.id"] = kWriterTransactionalId;
  config["acks"] = "all";
  config["linger.ms"] = "0";
  config["transaction.timeout.ms"] = "10000";
  config["message.timeout.ms"] = "10000";
  ASSIGN_OR_RETURN(producer_, kc::Producer::Create(config, [this](const kc::DeliveryReport& r) {
                     delivered_offset_ = r.offset;
                     delivered_status_ = r.status;
                   }));
  // A cluster's transaction coordinator may still be starting (its topic is made at the
  // first FindCoordinator): a retriable timeout is tried again, up to three times.
  Status st = producer_->InitTransactions(options_.timeout);
  for (int i = 0; i < 3 && st.code() == StatusCode::kResourceExhausted; ++i) {
    st = producer_->InitTransactions(options_.timeout);
  }
  if (!st.ok()) {
    producer_.reset();
    return Status(st.code(),
                  fmt::format("the schema registry could not become the writer of {}: {}",
                              options_.topic, st.message()));
  }
  return Status::OK();
}

Result<int64_t> KafkaSchemaLog::Append(const std::string& key,
                                       const std::optional<std::string>& value) {
  if (producer_ == nullptr) RETURN_IF_ERROR(BecomeWriter());
  std::lock_guard lock(write_mu_);
  delivered_offset_ = -1;
  delivered_status_ = Status::OK();
  RETURN_IF_ERROR(producer_->BeginTransaction());
  std::string_view v = value ? std::string_view(*value) : std::string_view();
  Status st = producer_->Produce(options_.topic, 0, key, v);
  if (st.ok()) st = producer_->CommitTransaction(options_.timeout);
  if (st.ok() && !delivered_status_.ok()) st = delivered_status_;
  if (st.ok()) return delivered_offset_;
  if (producer_->Fenced() || st.code() == StatusCode::kFailedPrecondition) {
    // Another broker became the writer: its records may change the decision.
    producer_.reset();
    return AbortedError("another broker wrote to {} first: {}", options_.topic, st.message());
  }
  // Anything else (a commit that timed out, say, with the transaction coordinator on a
  // broker that went away): a fresh producer for the next write, which finds the
  // coordinator again; this transaction is aborted by its InitTransactions.
  producer_.reset();
  if (st.code() == StatusCode::kAborted || st.code() == StatusCode::kResourceExhausted) {
    return AbortedError("the write to {} was aborted: {}", options_.topic, st.message());
  }
  return st;
}

Result<int64_t> KafkaSchemaLog::End() {
  ASSIGN_OR_RETURN(kc::Watermarks w, admin_->QueryWatermarks(options_.topic, 0, options_.timeout));
  return w.high;
}

}  // namespace sluice::schema::registry
