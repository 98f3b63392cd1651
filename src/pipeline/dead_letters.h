// Dead letters (on_error DLQ): what failed, in which phase, and the message (or the
// result row, as JSON) it failed on, loaded into a table for the DLQ sink.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/database.h"
#include "kafka/client/consumer.h"
#include "pipeline/error_phase.h"

namespace sluice::pipeline {

// The table the DLQ sink is handed.
inline constexpr std::string_view kDlqTable = "sluice_dead_letters";

struct DeadLetter {
  DeadLetter(std::string error, ErrorPhase phase, const kafka::client::Message& m)
      : error(std::move(error)),
        phase(phase),
        value(m.value.data() == nullptr ? std::nullopt : std::optional<std::string>(m.value)),
        topic(m.topic),
        partition(m.partition),
        offset(m.offset),
        timestamp_ms(m.timestamp_ms) {}
  std::string error;
  ErrorPhase phase;
  std::optional<std::string> value;
  std::string topic;
  int32_t partition;  // -1 for a result row
  int64_t offset;     // -1 for a result row
  int64_t timestamp_ms;
};

// A failure as the console shows it (app::PipelineSet keeps each pipeline's last ones): the
// dead letter with its value cut to what is shown, when, and whether it went to the DLQ
// (or was skipped, on_error IGNORE).
struct RecentFailure {
  int64_t time_ms = 0;
  bool dead_lettered = false;
  size_t value_size = 0;  // the value's size before the cut
  DeadLetter letter;
};

// A result row (not a message) as the message of a dead letter: its JSON as the value,
// no topic, partition or offset.
kafka::client::Message RowAsMessage(const std::string& row_json);

// (Re)creates kDlqTable on `conn` as (error, message, phase, topic, partition, offset,
// timestamp) holding `letters`; invalid UTF-8 becomes U+FFFD.
Status LoadDeadLetters(duck::Connection& conn, const std::vector<DeadLetter>& letters);

// `s` with every invalid UTF-8 sequence replaced by U+FFFD.
std::string ValidUtf8(std::string_view s);

}  // namespace sluice::pipeline
