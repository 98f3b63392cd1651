#include "query/topic_scan/topic_function.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "base/utf8.h"
#include "duckdb.h"
#include "kafka/client/admin.h"
#include "kafka/client/consumer.h"
#include "query/topic_scan/value_schema.h"

namespace sluice::query {
namespace {

namespace kc = kafka::client;

enum Column : idx_t { kPartition, kOffset, kTimestamp, kKey, kValue, kKeyBytes, kValueBytes, kColumns };
constexpr const char* kNames[kColumns] = {"partition", "offset", "timestamp", "key", "value", "key_bytes",
                                          "value_bytes"};

constexpr std::string_view kReserved[kColumns] = {kNames[0], kNames[1], kNames[2], kNames[3],
                                                kNames[4], kNames[5], kNames[6]};
constexpr int64_t kDefaultSampleSize = 1000;
constexpr int64_t kMaxSampleSize = 100'000;

struct Range {
  int32_t partition;
  int64_t from;  // first offset to read
  int64_t to;    // first offset not to read
};

struct BindData {
  std::string topic;
  std::vector<Range> ranges;  // only those with rows
  int64_t from_ts_ms = std::numeric_limits<int64_t>::min();
  int64_t to_ts_ms = std::numeric_limits<int64_t>::max();
  std::vector<ValueColumn> value_columns;  // output columns kColumns, kColumns + 1, ...
};

struct ScanState {
  std::unique_ptr<kc::Consumer> consumer;
  std::vector<idx_t> columns;           // output column i is kNames[columns[i]], or a value column
  std::unique_ptr<ValueDecoder> values;  // when the query reads a value column
  std::map<int32_t, int64_t> end;       // partition -> first offset not to read; erased when done
  std::vector<kc::Message> pending;     // polled, not yet emitted
  std::optional<kc::MessageBatch> held; // what `pending` points into
  size_t next = 0;
};

const TopicFunctionOptions& OptionsOf(void* extra) { return *static_cast<TopicFunctionOptions*>(extra); }

std::optional<int64_t> NamedInt(duckdb_bind_info info, const char* name) {
  duckdb_value v = duckdb_bind_get_named_parameter(info, name);
  if (v == nullptr) return std::nullopt;
  std::optional<int64_t> out;
  if (!duckdb_is_null_value(v)) out = duckdb_get_int64(v);
  duckdb_destroy_value(&v);
  return out;
}

std::optional<int64_t> NamedTimeMs(duckdb_bind_info info, const char* name) {
  duckdb_value v = duckdb_bind_get_named_parameter(info, name);
  if (v == nullptr) return std::nullopt;
  std::optional<int64_t> out;
  if (!duckdb_is_null_value(v)) {
    // Before 1970 is the start (ListOffsets takes -1 and -2 as latest and earliest).
    int64_t micros = duckdb_get_timestamp_tz(v).micros;
    out = micros >= 0 ? micros / 1000 : 0;
  }
  duckdb_destroy_value(&v);
  return out;
}

std::optional<std::string> NamedText(duckdb_bind_info info, const char* name) {
  duckdb_value v = duckdb_bind_get_named_parameter(info, name);
  if (v == nullptr) return std::nullopt;
  std::optional<std::string> out;
  if (!duckdb_is_null_value(v)) {
    char* text = duckdb_get_varchar(v);
    out = text;
    duckdb_free(text);
  }
  duckdb_destroy_value(&v);
  return out;
}

// `partitions => [0, 2]`: NULL elements are ignored.
std::optional<std::set<int64_t>> NamedIntList(duckdb_bind_info info, const char* name) {
  duckdb_value v = duckdb_bind_get_named_parameter(info, name);
  if (v == nullptr) return std::nullopt;
  std::optional<std::set<int64_t>> out;
  if (!duckdb_is_null_value(v)) {
    out.emplace();
    const idx_t n = duckdb_get_list_size(v);
    for (idx_t i = 0; i < n; ++i) {
      duckdb_value child = duckdb_get_list_child(v, i);
      if (child != nullptr && !duckdb_is_null_value(child)) out->insert(duckdb_get_int64(child));
      duckdb_destroy_value(&child);
    }
  }
  duckdb_destroy_value(&v);
  return out;
}

// Up to `n` values of the messages in `data`'s ranges, the first ones the broker returns
// (each partition from its range's start), for schema inference.
Result<std::vector<std::string>> Sample(const TopicFunctionOptions& options, const BindData& data, size_t n) {
  std::vector<std::string> out;
  if (data.ranges.empty() || n == 0) return out;
  ASSIGN_OR_RETURN(auto consumer, kc::Consumer::Create({{"bootstrap.servers", options.bootstrap_servers},
                                                        {"enable.partition.eof", "true"}}));
  std::vector<kc::TopicPartition> assign;
  std::map<int32_t, int64_t> end;
  for (const Range& r : data.ranges) {
    assign.push_back({data.topic, r.partition, r.from});
    end[r.partition] = r.to;
  }
  RETURN_IF_ERROR(consumer->Assign(assign));
  auto last_progress = std::chrono::steady_clock::now();
  while (out.size() < n && !end.empty()) {
    ASSIGN_OR_RETURN(kc::MessageBatch batch, consumer->Poll(std::chrono::milliseconds(200), n - out.size()));
    for (const Status& e : batch.errors()) return e;
    for (size_t i = 0; i < batch.size() && out.size() < n; ++i) {
      kc::Message m = batch[i];
      auto it = end.find(m.partition);
      if (it == end.end()) continue;
      if (m.offset >= it->second) {
        end.erase(it);
        continue;
      }
      if (m.offset + 1 >= it->second) end.erase(it);
      if (m.timestamp_ms >= 0 && (m.timestamp_ms < data.from_ts_ms || m.timestamp_ms >= data.to_ts_ms)) continue;
      if (m.value.data() != nullptr) out.emplace_back(m.value);
    }
    for (const auto& e : batch.ends()) end.erase(e.partition);
    if (batch.size() > 0) {
      last_progress = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last_progress > options.timeout) {
      return AbortedError("no messages for {} ms while sampling values", options.timeout.count());
    }
  }
  return out;
}

void Fail(duckdb_bind_info info, const std::string& message) { duckdb_bind_set_error(info, message.c_str()); }

void Bind(duckdb_bind_info info) {
  const TopicFunctionOptions& options = OptionsOf(duckdb_bind_get_extra_info(info));
  auto data = std::make_unique<BindData>();
  duckdb_value name = duckdb_bind_get_parameter(info, 0);
  if (duckdb_is_null_value(name)) {
    duckdb_destroy_value(&name);
    return Fail(info, "topic(): the topic name is NULL");
  }
  char* text = duckdb_get_varchar(name);
  data->topic = text;
  duckdb_free(text);
  duckdb_destroy_value(&name);

  std::optional<int64_t> partition = NamedInt(info, "partition");
  std::optional<int64_t> from_offset = NamedInt(info, "from_offset");
  std::optional<int64_t> to_offset = NamedInt(info, "to_offset");
  std::optional<int64_t> from_ts = NamedTimeMs(info, "from_ts");
  std::optional<int64_t> to_ts = NamedTimeMs(info, "to_ts");
  // An upper time bound that holds only where timestamps grow with offsets: a topic whose
  // message.timestamp.type is LogAppendTime (the planner's, from WHERE; decision 31).
  std::optional<int64_t> to_ts_log_append = NamedTimeMs(info, "to_ts_log_append");
  std::optional<std::set<int64_t>> partitions = NamedIntList(info, "partitions");
  std::optional<std::string> columns = NamedText(info, "columns");
  std::optional<std::string> format = NamedText(info, "format");
  std::optional<int64_t> sample_size = NamedInt(info, "sample_size");
  if (format && !(format->size() == 4 && std::equal(format->begin(), format->end(), "json", [](char a, char b) {
                    return std::tolower(static_cast<unsigned char>(a)) == b;
                  }))) {
    return Fail(info, fmt::format("topic(): format '{}' is not supported (only 'json')", *format));
  }
  if (sample_size && (*sample_size < 1 || *sample_size > kMaxSampleSize)) {
    return Fail(info, fmt::format("topic(): sample_size {} is not between 1 and {}", *sample_size, kMaxSampleSize));
  }
  if (columns) {
    Result<std::vector<ValueColumn>> declared = ParseValueColumns(*columns, kReserved);
    if (!declared.ok()) return Fail(info, fmt::format("topic(): {}", declared.status().message()));
    data->value_columns = std::move(*declared);
  }
  if (from_offset && *from_offset < 0) return Fail(info, fmt::format("topic(): from_offset {} is negative", *from_offset));
  if (to_offset && *to_offset < 0) return Fail(info, fmt::format("topic(): to_offset {} is negative", *to_offset));
  if (from_ts) data->from_ts_ms = *from_ts;
  if (to_ts) data->to_ts_ms = *to_ts;

  // A query naming a topic must not create it on a broker that auto-creates topics.
  auto admin = kc::Admin::Create(
      {{"bootstrap.servers", options.bootstrap_servers}, {"allow.auto.create.topics", "false"}});
  if (!admin.ok()) return Fail(info, fmt::format("topic('{}'): {}", data->topic, admin.status().message()));
  Result<int> count = (*admin)->PartitionCount(data->topic, options.timeout);
  if (!count.ok()) {
    return Fail(info, count.status().code() == StatusCode::kNotFound
                          ? fmt::format("topic('{}'): no such topic", data->topic)
                          : fmt::format("topic('{}'): {}", data->topic, count.status().message()));
  }
  if (partition && (*partition < 0 || *partition >= *count)) {
    return Fail(info, fmt::format("topic('{}'): partition {} does not exist (it has {})", data->topic, *partition,
                                  *count));
  }
  if (to_ts_log_append) {
    // Only a bound to read less: when the type cannot be read, everything is read.
    Result<std::string> type = (*admin)->TopicConfig(data->topic, "message.timestamp.type", options.timeout);
    if (type.ok() && *type == "LogAppendTime") to_ts = std::min(to_ts.value_or(*to_ts_log_append), *to_ts_log_append);
    if (to_ts) data->to_ts_ms = *to_ts;
  }
  for (int32_t p = 0; p < *count; ++p) {
    if (partition && p != *partition) continue;
    if (partitions && !partitions->contains(p)) continue;
    Result<kc::Watermarks> w = (*admin)->QueryWatermarks(data->topic, p, options.timeout);
    if (!w.ok()) return Fail(info, fmt::format("topic('{}'): {}", data->topic, w.status().message()));
    Range r{p, w->low, w->high};
    if (from_offset) r.from = std::max(r.from, *from_offset);
    if (to_offset) r.to = std::min(r.to, *to_offset);
    if (from_ts && r.from < r.to) {
      Result<int64_t> o = (*admin)->OffsetForTime(data->topic, p, *from_ts, options.timeout);
      if (!o.ok()) return Fail(info, fmt::format("topic('{}'): {}", data->topic, o.status().message()));
      r.from = std::max(r.from, *o);
    }
    if (to_ts && r.from < r.to) {
      Result<int64_t> o = (*admin)->OffsetForTime(data->topic, p, *to_ts, options.timeout);
      if (!o.ok()) return Fail(info, fmt::format("topic('{}'): {}", data->topic, o.status().message()));
      r.to = std::min(r.to, *o);
    }
    if (r.from < r.to) data->ranges.push_back(r);
  }

  if (format && !columns) {
    Result<std::vector<std::string>> sample =
        Sample(options, *data, static_cast<size_t>(sample_size.value_or(kDefaultSampleSize)));
    if (!sample.ok()) return Fail(info, fmt::format("topic('{}'): {}", data->topic, sample.status().message()));
    data->value_columns = InferValueColumns(*sample, kReserved);
  }

  duckdb_logical_type integer = duckdb_create_logical_type(DUCKDB_TYPE_INTEGER);
  duckdb_logical_type bigint = duckdb_create_logical_type(DUCKDB_TYPE_BIGINT);
  duckdb_logical_type tstz = duckdb_create_logical_type(DUCKDB_TYPE_TIMESTAMP_TZ);
  duckdb_logical_type varchar = duckdb_create_logical_type(DUCKDB_TYPE_VARCHAR);
  duckdb_logical_type blob = duckdb_create_logical_type(DUCKDB_TYPE_BLOB);
  duckdb_logical_type types[kColumns] = {integer, bigint, tstz, varchar, varchar, blob, blob};
  for (idx_t c = 0; c < kColumns; ++c) duckdb_bind_add_result_column(info, kNames[c], types[c]);
  for (duckdb_logical_type* t : {&integer, &bigint, &tstz, &varchar, &blob}) duckdb_destroy_logical_type(t);
  for (const ValueColumn& c : data->value_columns) {
    duckdb_logical_type t = CreateLogicalType(c.type);
    duckdb_bind_add_result_column(info, c.name.c_str(), t);
    duckdb_destroy_logical_type(&t);
  }
  int64_t rows = 0;
  for (const Range& r : data->ranges) rows += r.to - r.from;
  duckdb_bind_set_cardinality(info, static_cast<idx_t>(rows), false);
  duckdb_bind_set_bind_data(info, data.release(), [](void* p) { delete static_cast<BindData*>(p); });
}

void Init(duckdb_init_info info) {
  const TopicFunctionOptions& options = OptionsOf(duckdb_init_get_extra_info(info));
  const auto& data = *static_cast<BindData*>(duckdb_init_get_bind_data(info));
  auto state = std::make_unique<ScanState>();
  idx_t n = duckdb_init_get_column_count(info);
  bool reads_values = false;
  for (idx_t i = 0; i < n; ++i) {
    state->columns.push_back(duckdb_init_get_column_index(info, i));
    const idx_t c = state->columns.back();
    reads_values |= c >= kColumns && c < kColumns + data.value_columns.size();
  }
  if (reads_values) state->values = std::make_unique<ValueDecoder>(data.value_columns);
  duckdb_init_set_max_threads(info, 1);
  if (!data.ranges.empty()) {
    auto consumer = kc::Consumer::Create({{"bootstrap.servers", options.bootstrap_servers},
                                          {"enable.partition.eof", "true"},
                                          {"fetch.max.bytes", "16777216"},
                                          {"queued.max.messages.kbytes", "65536"}});
    if (!consumer.ok()) {
      duckdb_init_set_error(info, fmt::format("topic('{}'): {}", data.topic, consumer.status().message()).c_str());
      return;
    }
    std::vector<kc::TopicPartition> assign;
    for (const Range& r : data.ranges) {
      assign.push_back({data.topic, r.partition, r.from});
      state->end[r.partition] = r.to;
    }
    Status st = (*consumer)->Assign(assign);
    if (!st.ok()) {
      duckdb_init_set_error(info, fmt::format("topic('{}'): {}", data.topic, st.message()).c_str());
      return;
    }
    state->consumer = std::move(*consumer);
  }
  duckdb_init_set_init_data(info, state.release(), [](void* p) { delete static_cast<ScanState*>(p); });
}

void SetString(duckdb_vector v, idx_t row, std::string_view s, bool text) {
  if (s.data() == nullptr || (text && !IsValidUtf8(s))) {
    duckdb_vector_ensure_validity_writable(v);
    duckdb_validity_set_row_invalid(duckdb_vector_get_validity(v), row);
    return;
  }
  duckdb_vector_assign_string_element_len(v, row, s.data(), s.size());
}

void Scan(duckdb_function_info info, duckdb_data_chunk output) {
  const TopicFunctionOptions& options = OptionsOf(duckdb_function_get_extra_info(info));
  const auto& data = *static_cast<BindData*>(duckdb_function_get_bind_data(info));
  auto& state = *static_cast<ScanState*>(duckdb_function_get_init_data(info));
  const idx_t capacity = duckdb_vector_size();
  idx_t rows = 0;
  auto last_progress = std::chrono::steady_clock::now();
  // The value columns the query reads, by value column (nullptr: not read).
  std::vector<duckdb_vector> value_out(state.values ? data.value_columns.size() : 0, nullptr);
  for (size_t i = 0; i < state.columns.size() && state.values; ++i) {
    const idx_t c = state.columns[i];
    if (c >= kColumns && c < kColumns + value_out.size()) value_out[c - kColumns] = duckdb_data_chunk_get_vector(output, i);
  }
  while (rows < capacity) {
    if (state.next >= state.pending.size()) {
      if (state.end.empty() || rows > 0) break;  // done, or give DuckDB what we have
      state.pending.clear();
      state.next = 0;
      state.held.reset();
      Result<kc::MessageBatch> batch = state.consumer->Poll(std::chrono::milliseconds(200), capacity);
      if (!batch.ok()) {
        duckdb_function_set_error(info, fmt::format("topic('{}'): {}", data.topic, batch.status().message()).c_str());
        return;
      }
      for (const Status& e : batch->errors()) {
        duckdb_function_set_error(info, fmt::format("topic('{}'): {}", data.topic, e.message()).c_str());
        return;
      }
      for (size_t i = 0; i < batch->size(); ++i) {
        kc::Message m = (*batch)[i];
        auto it = state.end.find(m.partition);
        if (it == state.end.end()) continue;
        if (m.offset >= it->second) {
          // Past the bound (the offset before it was a transaction marker or compacted away).
          state.end.erase(it);
          continue;
        }
        if (m.offset + 1 >= it->second) state.end.erase(it);
        state.pending.push_back(m);
      }
      // At a partition's end (the high watermark, at or past the bound fixed at bind
      // time) nothing more comes for this scan: gaps of compaction or aborted
      // transactions end a range early.
      for (const auto& e : batch->ends()) state.end.erase(e.partition);
      if (!state.pending.empty() || batch->size() > 0) {
        last_progress = std::chrono::steady_clock::now();
        state.held = std::move(*batch);
      } else if (std::chrono::steady_clock::now() - last_progress > options.timeout) {
        duckdb_function_set_error(
            info, fmt::format("topic('{}'): no messages for {} ms while {} partitions still had rows to read",
                              data.topic, options.timeout.count(), state.end.size())
                      .c_str());
        return;
      }
      continue;
    }
    const kc::Message& m = state.pending[state.next++];
    if (m.timestamp_ms >= 0 && (m.timestamp_ms < data.from_ts_ms || m.timestamp_ms >= data.to_ts_ms)) continue;
    for (size_t i = 0; i < state.columns.size(); ++i) {
      duckdb_vector v = duckdb_data_chunk_get_vector(output, i);
      switch (state.columns[i]) {
        case kPartition: static_cast<int32_t*>(duckdb_vector_get_data(v))[rows] = m.partition; break;
        case kOffset: static_cast<int64_t*>(duckdb_vector_get_data(v))[rows] = m.offset; break;
        case kTimestamp:
          if (m.timestamp_ms < 0) {
            duckdb_vector_ensure_validity_writable(v);
            duckdb_validity_set_row_invalid(duckdb_vector_get_validity(v), rows);
          } else {
            static_cast<int64_t*>(duckdb_vector_get_data(v))[rows] = m.timestamp_ms * 1000;
          }
          break;
        case kKey: SetString(v, rows, m.key, true); break;
        case kValue: SetString(v, rows, m.value, true); break;
        case kKeyBytes: SetString(v, rows, m.key, false); break;
        case kValueBytes: SetString(v, rows, m.value, false); break;
        default: break;  // a value column (below) or a virtual column
      }
    }
    if (state.values) state.values->Decode(value_out, rows, m.value);
    ++rows;
  }
  duckdb_data_chunk_set_size(output, rows);
}

}  // namespace

Status RegisterTopicFunction(duck::Connection& conn, const TopicFunctionOptions& options) {
  if (options.bootstrap_servers.empty()) return InvalidArgumentError("topic(): no broker to read from");
  duckdb_table_function tf = duckdb_create_table_function();
  duckdb_table_function_set_name(tf, options.function_name.c_str());
  duckdb_logical_type varchar = duckdb_create_logical_type(DUCKDB_TYPE_VARCHAR);
  duckdb_logical_type bigint = duckdb_create_logical_type(DUCKDB_TYPE_BIGINT);
  duckdb_logical_type tstz = duckdb_create_logical_type(DUCKDB_TYPE_TIMESTAMP_TZ);
  duckdb_table_function_add_parameter(tf, varchar);
  duckdb_table_function_add_named_parameter(tf, "partition", bigint);
  duckdb_table_function_add_named_parameter(tf, "from_offset", bigint);
  duckdb_table_function_add_named_parameter(tf, "to_offset", bigint);
  duckdb_table_function_add_named_parameter(tf, "from_ts", tstz);
  duckdb_table_function_add_named_parameter(tf, "to_ts", tstz);
  duckdb_table_function_add_named_parameter(tf, "to_ts_log_append", tstz);
  duckdb_logical_type bigint_list = duckdb_create_list_type(bigint);
  duckdb_table_function_add_named_parameter(tf, "partitions", bigint_list);
  duckdb_destroy_logical_type(&bigint_list);
  duckdb_table_function_add_named_parameter(tf, "columns", varchar);
  duckdb_table_function_add_named_parameter(tf, "format", varchar);
  duckdb_table_function_add_named_parameter(tf, "sample_size", bigint);
  duckdb_destroy_logical_type(&varchar);
  duckdb_destroy_logical_type(&bigint);
  duckdb_destroy_logical_type(&tstz);
  duckdb_table_function_set_extra_info(tf, new TopicFunctionOptions(options),
                                       [](void* p) { delete static_cast<TopicFunctionOptions*>(p); });
  duckdb_table_function_set_bind(tf, Bind);
  duckdb_table_function_set_init(tf, Init);
  duckdb_table_function_set_function(tf, Scan);
  duckdb_table_function_supports_projection_pushdown(tf, true);
  duckdb_state registered = duckdb_register_table_function(conn.handle(), tf);
  duckdb_destroy_table_function(&tf);
  if (registered == DuckDBError) return InternalError("DuckDB: cannot register table function {}", options.function_name);
  return Status::OK();
}

}  // namespace sluice::query
