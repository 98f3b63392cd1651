// `sluice topic|group|cluster`: topics, messages and consumer groups of any Kafka cluster
// over the Kafka admin API (librdkafka), with rpk's conventions: `--brokers` (else
// $SLUICE_BROKERS, else 127.0.0.1:9092), `-X key=value` for any librdkafka property (TLS,
// SASL), aligned tables on a terminal and `--json` for one JSON document
// (docs/design/0026-console.md, decision 9). The console's /api/v1 runs the same
// operations (console::KafkaOps).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sluice::cli {

struct KafkaCmdFlags {
  std::string brokers;             // HOST:PORT[,...]
  std::vector<std::string> props;  // -X key=value
  bool json = false;
  int64_t timeout_ms = 10000;

  // topic
  std::vector<std::string> topics;   // the positional names
  int partitions = -1;               // create: -p
  int replicas = -1;                 // create: -r
  std::vector<std::string> configs;  // create: -c k=v; alter-config: --set k=v
  std::vector<std::string> remove;   // alter-config: --delete k
  bool internal = false;             // list: -i
  int add_partitions_total = 0;      // add-partitions: --num (the new total)
  // produce
  std::optional<std::string> key;    // -k
  std::string key_separator;         // -K SEP: each line is KEY SEP VALUE
  std::vector<std::string> headers;  // -H k=v
  int32_t partition = -1;            // -p for produce and consume
  // consume
  std::string offset = "start";  // -o start|end|N|-N|@TIME
  std::string from_time;         // --from-time
  int64_t count = 0;             // -n (0: until stopped)
  bool exit_at_end = false;      // -e
  std::string group;             // -g
  std::string format;            // -f
  // group
  std::string reset_to;                   // earliest, latest, offset, datetime
  int64_t reset_offset = -1;              // --to-offset
  std::string reset_datetime;             // --to-datetime
  std::vector<std::string> reset_topics;  // --topic T[:P,P]
  bool execute = false;
};

int RunTopicList(const KafkaCmdFlags& f);
int RunTopicCreate(const KafkaCmdFlags& f);
int RunTopicDelete(const KafkaCmdFlags& f);
int RunTopicDescribe(const KafkaCmdFlags& f);
int RunTopicAlterConfig(const KafkaCmdFlags& f);
int RunTopicAddPartitions(const KafkaCmdFlags& f);
int RunTopicProduce(const KafkaCmdFlags& f);
int RunTopicConsume(const KafkaCmdFlags& f);
int RunGroupList(const KafkaCmdFlags& f);
int RunGroupDescribe(const KafkaCmdFlags& f);
int RunGroupResetOffsets(const KafkaCmdFlags& f);
int RunGroupDelete(const KafkaCmdFlags& f);
int RunClusterInfo(const KafkaCmdFlags& f);

}  // namespace sluice::cli
