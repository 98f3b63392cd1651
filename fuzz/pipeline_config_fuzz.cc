// Fuzz target for pipeline files: the input is a pipeline file's text, read with
// template substitution (a few variables set) and strict validation. Whatever it is, the
// reader must return a config or an error (no crash, no hang, bounded memory), and an
// accepted config must hold the invariants validation promises.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "pipeline/pipeline_config.h"

using namespace sluice::pipeline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const EnvLookup env = MapEnv({{"SQLFLOW_KAFKA_BROKERS", "localhost:9092"},
                                       {"SQLFLOW_ROOT_DIR", "/root"},
                                       {"EMPTY", ""},
                                       {"MULTI", "\n  - a\n  - b\n"}});
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto result = ParsePipeline(text, "fuzz.yml", env);
  if (!result.ok()) {
    if (result.status().message().empty()) std::abort();
    return 0;
  }
  const PipelineConfig& c = *result;
  if (c.batch_size < 1 || c.flush_interval_seconds < 1) std::abort();
  if (c.source.brokers.empty() || c.source.topics.empty() || c.source.group_id.empty()) {
    std::abort();
  }
  if (c.source.fetch.prefetch < 1 ||
      c.source.fetch.max_partition_bytes > c.source.fetch.max_bytes) {
    std::abort();
  }
  if (c.handler.sql.empty()) std::abort();
  if (c.on_error.policy == ErrorPolicy::kDlq && !c.on_error.dlq) std::abort();
  if (c.sink.type == SinkType::kPostgres && c.sink.postgres.mode == PostgresMode::kUpsert &&
      c.sink.postgres.key.empty()) {
    std::abort();
  }
  // exactly_once only where a Kafka transaction can hold everything a batch leaves.
  if (c.window && c.window->sink.kafka.exactly_once) std::abort();
  if (c.sink.kafka.exactly_once && (c.state || c.sink.type != SinkType::kKafka)) std::abort();
  if (c.on_error.dlq && c.on_error.dlq->kafka.exactly_once) std::abort();
  if (c.sink.kafka.exactly_once) (void)TransactionalId(c.sink.kafka, c.source, c.name);
  (void)DescribePipeline(c);
  (void)KafkaClientProperties(c.source);
  return 0;
}
