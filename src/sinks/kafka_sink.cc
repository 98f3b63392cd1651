#include "sinks/kafka_sink.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>

#include "sinks/duck_rows.h"

namespace sluice::sinks {

namespace {

using namespace std::chrono_literals;

constexpr std::string_view kDefaultMessageTimeoutMs = "60000";

}  // namespace

Result<std::unique_ptr<KafkaSink>> KafkaSink::Create(KafkaSinkOptions options) {
  if (options.topic.empty()) return InvalidArgumentError("kafka sink: topic is empty");
  if (options.brokers.empty()) return InvalidArgumentError("kafka sink: brokers is empty");
  for (size_t i = 0; i < options.brokers.size(); ++i) {
    if (options.brokers[i].empty()) {
      return InvalidArgumentError("kafka sink: brokers[{}] is empty", i);
    }
  }
  kafka::client::Config config;
  config["bootstrap.servers"] = fmt::format("{}", fmt::join(options.brokers, ","));
  config["message.timeout.ms"] = std::string(kDefaultMessageTimeoutMs);
  for (const auto& [name, value] : options.properties) config[name] = value;
  if (options.properties.contains("delivery.timeout.ms")) {
    // librdkafka's alias of message.timeout.ms: the user's value, not our default.
    config.erase("message.timeout.ms");
  }
  int64_t timeout_ms = 0;
  {
    auto it = config.find("message.timeout.ms");
    if (it == config.end()) it = config.find("delivery.timeout.ms");
    const std::string& v = it->second;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), timeout_ms);
    if (ec != std::errc() || end != v.data() + v.size() || timeout_ms < 0) {
      return InvalidArgumentError("kafka sink: {} is not a number of milliseconds: '{}'", it->first,
                                  v);
    }
  }

  auto sink = std::unique_ptr<KafkaSink>(new KafkaSink(std::move(options)));
  // 0 means no timeout for librdkafka; the flush then waits an hour at most.
  sink->flush_timeout_ =
      timeout_ms == 0 ? std::chrono::milliseconds(1h) : std::chrono::milliseconds(timeout_ms) + 10s;
  KafkaSink* self = sink.get();
  auto producer = kafka::client::Producer::Create(
      config, [self](const kafka::client::DeliveryReport& r) { self->OnDelivery(r); });
  if (!producer.ok()) return producer.status().WithContext("kafka sink");
  sink->producer_ = std::move(producer).value();
  return sink;
}

KafkaSink::~KafkaSink() = default;

void KafkaSink::OnDelivery(const kafka::client::DeliveryReport& report) {
  if (report.status.ok()) return;
  if (failed_since_flush_++ == 0) {
    first_failure_ =
        report.status.WithContext(fmt::format("record to {} [{}]", report.topic, report.partition));
  }
}

Status KafkaSink::Write(duck::Connection& conn, std::string_view table,
                        const SourceOffsets& offsets, std::vector<RejectedRow>* rejected) {
  ASSIGN_OR_RETURN(duck::QueryResult rows, RowsAsJson(conn, table));
  const auto deadline = std::chrono::steady_clock::now() + flush_timeout_;
  for (size_t i = 0; i < rows.chunk_count(); ++i) {
    duck::ResultChunk c = rows.chunk(i);
    for (size_t r = 0; r < c.size(); ++r) {
      std::string_view value = c.GetString(0, r);
      for (;;) {
        Status st = producer_->Produce(options_.topic, kafka::client::kAnyPartition,
                                       std::string_view(), value);
        if (st.ok()) {
          ++produced_since_flush_;
          break;
        }
        if (st.code() == StatusCode::kResourceExhausted) {
          // The local queue is full: serve delivery reports until there is room.
          if (std::chrono::steady_clock::now() > deadline) {
            return st.WithContext(
                fmt::format("kafka sink (topic {}): the producer queue "
                            "stayed full for {} ms",
                            options_.topic, flush_timeout_.count()));
          }
          producer_->Poll(100ms);
          continue;
        }
        if (st.code() == StatusCode::kInvalidArgument) {
          // This record alone (too large, say): the others go on.
          rejected->push_back({std::string(value), st.message()});
          break;
        }
        return st.WithContext(fmt::format("kafka sink (topic {})", options_.topic));
      }
    }
  }
  producer_->Poll(0ms);
  return Status::OK();
}

Status KafkaSink::Flush() {
  Status st = producer_->Flush(flush_timeout_);
  if (!st.ok()) {
    // Reports still due keep counting toward the next Flush, which waits again.
    return st.WithContext(fmt::format("kafka sink (topic {})", options_.topic));
  }
  const uint64_t produced = produced_since_flush_;
  const uint64_t failed = failed_since_flush_;
  Status first = std::move(first_failure_);
  produced_since_flush_ = 0;
  failed_since_flush_ = 0;
  first_failure_ = Status::OK();
  if (failed > 0) {
    return Status(first.code(),
                  fmt::format("kafka sink (topic {}): {} of {} records were not delivered; "
                              "the first: {}",
                              options_.topic, failed, produced, first.message()));
  }
  return Status::OK();
}

}  // namespace sluice::sinks
