// topic(): binding a call to its partitions' offset ranges, sampling values to infer their
// columns, and the scan reading messages with a consumer into the output chunks.
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
#include "duck/table_function.h"
#include "json/lenient_decoder.h"
#include "kafka/client/admin.h"
#include "kafka/client/consumer.h"
#include "query/topic_scan/value_schema.h"
#include "schema/decoder_plans.h"
#include "schema/key_column.h"

namespace sluice::query {
namespace {

namespace kc = kafka::client;

enum Column : uint64_t {
  kPartition,
  kOffset,
  kTimestamp,
  kKey,
  kValue,
  kKeyBytes,
  kValueBytes,
  kColumns
};
constexpr const char* kNames[kColumns] = {"partition", "offset",    "timestamp",  "key",
                                          "value",     "key_bytes", "value_bytes"};

constexpr std::string_view kReserved[kColumns] = {kNames[0], kNames[1], kNames[2], kNames[3],
                                                  kNames[4], kNames[5], kNames[6]};
constexpr int64_t kDefaultSampleSize = 1000;
constexpr int64_t kMaxSampleSize = 100'000;

struct Range {
  int32_t partition;
  int64_t from;  // first offset to read
  int64_t to;    // first offset not to read
};

struct TopicBind : duck::TableFunction::BindData {
  std::string topic;
  std::vector<Range> ranges;  // only those with rows
  int64_t from_ts_ms = std::numeric_limits<int64_t>::min();
  int64_t to_ts_ms = std::numeric_limits<int64_t>::max();
  std::vector<ValueColumn> value_columns;  // result columns kColumns, kColumns + 1, ...
  // Or, for a registered schema (docs/design/0022): its columns, decoded by schema id.
  schema::PayloadFormat schema_format = schema::PayloadFormat::kJson;
  std::vector<schema::Column> schema_columns;  // result columns kColumns, kColumns + 1, ...
  std::shared_ptr<const schema::ReaderShape> reader;
  // Framed keys decoded (the `<topic>-key` subject's schema): the `key` column's type.
  schema::PayloadFormat key_format = schema::PayloadFormat::kJson;
  std::shared_ptr<const schema::ReaderShape> key_reader;
  std::optional<duck::LogicalType> key_type;
};

struct TopicScan : duck::TableFunction::ScanState {
  std::unique_ptr<kc::Consumer> consumer;
  std::vector<uint64_t> columns;  // output column i is kNames[columns[i]], or a value column
  // When the query reads value columns: their decoder, and the output column of each.
  std::unique_ptr<json::LenientDecoder> values;
  std::vector<size_t> value_outputs;
  // When the query reads schema columns: the decoders, the chunk they write (every schema
  // column), and which output column shows which of its columns.
  std::unique_ptr<schema::DecoderPlans> plans;
  std::optional<duck::DataChunk> decoded;
  std::vector<std::pair<size_t, size_t>> schema_outputs;  // (output column, schema column)
  // When the query reads a decoded key: its decoder and output column.
  std::unique_ptr<schema::KeyColumn> key;
  size_t key_output = 0;
  std::map<int32_t, int64_t> end;        // partition -> first offset not to read; erased when done
  std::vector<kc::Message> pending;      // polled, not yet emitted
  std::optional<kc::MessageBatch> held;  // what `pending` points into
  size_t next = 0;
};

// Before 1970 is the start (ListOffsets takes -1 and -2 as latest and earliest).
std::optional<int64_t> NamedTimeMs(const duck::TableBind& bind, const char* name) {
  std::optional<int64_t> micros = bind.NamedTimestampTz(name);
  if (!micros) return std::nullopt;
  return *micros >= 0 ? *micros / 1000 : 0;
}

// A client's librdkafka config: the broker, the options' properties, then `more`.
kc::Config ClientConfig(const TopicFunctionOptions& options, kc::Config more) {
  kc::Config c{{"bootstrap.servers", options.bootstrap_servers}};
  for (const auto& [k, v] : options.client_properties) c[k] = v;
  for (auto& [k, v] : more) c[k] = std::move(v);
  return c;
}

// Up to `n` values of the messages in `data`'s ranges, the first ones the broker returns
// (each partition from its range's start), for schema inference.
Result<std::vector<std::string>> Sample(const TopicFunctionOptions& options, const TopicBind& data,
                                        size_t n) {
  std::vector<std::string> out;
  if (data.ranges.empty() || n == 0) return out;
  ASSIGN_OR_RETURN(auto consumer,
                   kc::Consumer::Create(ClientConfig(options, {{"enable.partition.eof", "true"}})));
  std::vector<kc::TopicPartition> assign;
  std::map<int32_t, int64_t> end;
  for (const Range& r : data.ranges) {
    assign.push_back({data.topic, r.partition, r.from});
    end[r.partition] = r.to;
  }
  RETURN_IF_ERROR(consumer->Assign(assign));
  auto last_progress = std::chrono::steady_clock::now();
  while (out.size() < n && !end.empty()) {
    ASSIGN_OR_RETURN(kc::MessageBatch batch,
                     consumer->Poll(std::chrono::milliseconds(200), n - out.size()));
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
      if (m.timestamp_ms >= 0 &&
          (m.timestamp_ms < data.from_ts_ms || m.timestamp_ms >= data.to_ts_ms))
        continue;
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

// The bind error `message` as the query's error text.
Status Fail(std::string message) {
  return Status(StatusCode::kInvalidArgument, std::move(message));
}

// Text columns hold UTF-8 without NUL bytes (Postgres text cannot carry one): other bytes
// are NULL there, and whole in the *_bytes columns.
void SetString(duck::Vector v, uint64_t row, std::string_view s, bool text) {
  if (s.data() == nullptr ||
      (text && (!IsValidUtf8(s) || s.find('\0') != std::string_view::npos))) {
    v.SetNull(row);
    return;
  }
  v.AssignString(row, s);
}

void NullRow(const duck::DataChunk& chunk, uint64_t row) {
  for (size_t c = 0; c < chunk.column_count(); ++c) {
    duck::Vector v = chunk.column(c);
    schema::SetNullCell(v, v.type(), row);
  }
}

schema::ReaderShape CopyOf(const schema::ReaderShape& r) {
  schema::ReaderShape copy;
  copy.record = r.record;
  copy.avro = r.avro;
  for (const schema::Column& c : r.columns) copy.columns.push_back({c.name, c.type.Copy()});
  return copy;
}

// A registered value schema: the latest of the topic's value subject (TopicNameStrategy)
// gives the columns after topic()'s own; `format` "avro" or "protobuf" insists on one of
// that type ("": when there is one).
Status BindValueSchema(const TopicFunctionOptions& options, const std::string& format,
                       TopicBind* data) {
  const bool framed = !format.empty();
  if (options.schemas != nullptr) {
    // A registered schema: the latest of the topic's value subject (TopicNameStrategy).
    const std::string subject = data->topic + "-value";
    Result<std::shared_ptr<const schema::SchemaRecord>> latest = options.schemas->Latest(subject);
    if (!latest.ok() && latest.status().code() != StatusCode::kNotFound) {
      return Fail(fmt::format("topic('{}'): {}", data->topic, latest.status().message()));
    }
    const bool usable = latest.ok() && ((*latest)->type == schema::SchemaType::kAvro ||
                                        (*latest)->type == schema::SchemaType::kProtobuf);
    if (usable &&
        (!framed || (format == "avro") == ((*latest)->type == schema::SchemaType::kAvro))) {
      Result<schema::ReaderShape> reader = schema::ReaderOf(**latest, {});
      if (!reader.ok()) {
        return Fail(fmt::format("topic('{}'): subject {}: {}", data->topic, subject,
                                reader.status().message()));
      }
      data->schema_format = (*latest)->type == schema::SchemaType::kAvro
                                ? schema::PayloadFormat::kAvro
                                : schema::PayloadFormat::kProtobuf;
      for (schema::Column& c : reader->columns) {
        // A field named like one of the function's own columns is prefixed.
        std::string name = c.name;
        for (std::string_view r : kReserved) {
          if (name.size() == r.size() &&
              std::equal(name.begin(), name.end(), r.begin(), [](char a, char b) {
                return std::tolower(static_cast<unsigned char>(a)) == b;
              })) {
            name = "value_" + name;
          }
        }
        data->schema_columns.push_back({std::move(name), c.type.Copy()});
      }
      data->reader = std::make_shared<const schema::ReaderShape>(std::move(reader).value());
    } else if (framed) {
      return Fail(
          fmt::format("topic('{}'): format '{}' needs {} schema registered under subject "
                      "{}",
                      data->topic, format, format == "avro" ? "an Avro" : "a Protobuf", subject));
    }
  } else if (framed) {
    return Fail(fmt::format("topic('{}'): format '{}' needs the schema registry, which is off",
                            data->topic, format));
  }
  return Status::OK();
}

// The key: decoded by the `<topic>-key` subject's latest schema when it is Avro or Protobuf
// (key_format 'auto'), or must be (key_format 'avro' or 'protobuf').
Status BindKey(const TopicFunctionOptions& options, const std::string& key_format,
               TopicBind* data) {
  const bool forced = key_format != "auto";
  if (options.schemas == nullptr) {
    if (!forced) return Status::OK();
    return Fail(fmt::format("topic('{}'): key_format '{}' needs the schema registry, which is off",
                            data->topic, key_format));
  }
  const std::string subject = data->topic + "-key";
  Result<std::shared_ptr<const schema::SchemaRecord>> latest = options.schemas->Latest(subject);
  if (!latest.ok() && latest.status().code() != StatusCode::kNotFound) {
    return Fail(fmt::format("topic('{}'): {}", data->topic, latest.status().message()));
  }
  const bool avro = latest.ok() && (*latest)->type == schema::SchemaType::kAvro;
  const bool protobuf = latest.ok() && (*latest)->type == schema::SchemaType::kProtobuf;
  if (!(forced ? (key_format == "avro" ? avro : protobuf) : (avro || protobuf))) {
    if (!forced) return Status::OK();
    return Fail(fmt::format(
        "topic('{}'): key_format '{}' needs {} schema registered under subject {}", data->topic,
        key_format, key_format == "avro" ? "an Avro" : "a Protobuf", subject));
  }
  data->key_format = avro ? schema::PayloadFormat::kAvro : schema::PayloadFormat::kProtobuf;
  Result<schema::ReaderShape> reader = schema::ReaderOf(**latest, {});
  if (reader.ok()) {
    Result<std::unique_ptr<schema::KeyColumn>> key =
        schema::KeyColumn::FromReader(options.schemas, data->key_format, CopyOf(*reader));
    if (key.ok()) {
      data->key_type = (*key)->type().Copy();
      data->key_reader = std::make_shared<const schema::ReaderShape>(std::move(reader).value());
      return Status::OK();
    }
    reader = key.status();
  }
  return Fail(
      fmt::format("topic('{}'): subject {}: {}", data->topic, subject, reader.status().message()));
}

// The columns of a bound call: the function's own, then the value columns (JSON or a
// registered schema's).
std::vector<schema::Column> ResultColumns(const TopicBind& data) {
  std::vector<schema::Column> out;
  for (uint64_t c = 0; c < kColumns; ++c) {
    duck::LogicalType t = duck::LogicalType::Varchar();
    if (c == kPartition) t = duck::LogicalType::Integer();
    if (c == kOffset) t = duck::LogicalType::BigInt();
    if (c == kTimestamp) t = duck::LogicalType::TimestampTz();
    if (c == kKey && data.key_type) t = data.key_type->Copy();
    if (c == kKeyBytes || c == kValueBytes) t = duck::LogicalType::Blob();
    out.push_back({kNames[c], std::move(t)});
  }
  for (const ValueColumn& c : data.value_columns) out.push_back({c.name, ValueLogicalType(c.type)});
  for (const schema::Column& c : data.schema_columns) out.push_back({c.name, c.type.Copy()});
  return out;
}

class TopicFunction : public duck::TableFunction {
 public:
  explicit TopicFunction(TopicFunctionOptions options) : options_(std::move(options)) {}

  Result<std::unique_ptr<duck::TableFunction::BindData>> Bind(duck::TableBind& bind) const override;
  Result<std::unique_ptr<duck::TableFunction::ScanState>> Init(
      const duck::TableFunction::BindData& bound, duck::TableInit& init) const override;
  Status Scan(const duck::TableFunction::BindData& bound, duck::TableFunction::ScanState& scan,
              duck::TableOutput& output) const override;

 private:
  TopicFunctionOptions options_;
};

Result<std::unique_ptr<duck::TableFunction::BindData>> TopicFunction::Bind(
    duck::TableBind& bind) const {
  const TopicFunctionOptions& options = options_;
  auto data = std::make_unique<TopicBind>();
  std::optional<std::string> name = bind.TextParameter(0);
  if (!name) return Fail("topic(): the topic name is NULL");
  data->topic = std::move(*name);

  std::optional<int64_t> partition = bind.NamedInt64("partition");
  std::optional<int64_t> from_offset = bind.NamedInt64("from_offset");
  std::optional<int64_t> to_offset = bind.NamedInt64("to_offset");
  std::optional<int64_t> from_ts = NamedTimeMs(bind, "from_ts");
  std::optional<int64_t> to_ts = NamedTimeMs(bind, "to_ts");
  // An upper time bound that holds only where timestamps grow with offsets: a topic whose
  // message.timestamp.type is LogAppendTime (the planner's, from WHERE; decision 31).
  std::optional<int64_t> to_ts_log_append = NamedTimeMs(bind, "to_ts_log_append");
  std::optional<std::set<int64_t>> partitions;
  if (std::optional<std::vector<int64_t>> list = bind.NamedInt64List("partitions")) {
    partitions.emplace(list->begin(), list->end());
  }
  std::optional<std::string> columns = bind.NamedText("columns");
  std::optional<std::string> format = bind.NamedText("format");
  std::optional<int64_t> sample_size = bind.NamedInt64("sample_size");
  std::optional<std::string> key_format = bind.NamedText("key_format");
  std::string format_name;
  for (char c : format.value_or(""))
    format_name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (format && format_name != "json" && format_name != "avro" && format_name != "protobuf") {
    return Fail(
        fmt::format("topic(): format '{}' is not supported (json, avro or protobuf)", *format));
  }
  const bool framed = format_name == "avro" || format_name == "protobuf";
  if (framed && columns) {
    return Fail(
        fmt::format("topic(): format '{}' takes its columns from the schema registry, "
                    "not from columns =>",
                    *format));
  }
  std::string key_format_name = "auto";
  if (key_format) {
    key_format_name.clear();
    for (char c : *key_format)
      key_format_name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (key_format_name != "auto" && key_format_name != "bytes" && key_format_name != "avro" &&
        key_format_name != "protobuf") {
      return Fail(
          fmt::format("topic(): key_format '{}' is not supported (auto, bytes, avro or protobuf)",
                      *key_format));
    }
  }
  if (sample_size && (*sample_size < 1 || *sample_size > kMaxSampleSize)) {
    return Fail(fmt::format("topic(): sample_size {} is not between 1 and {}", *sample_size,
                            kMaxSampleSize));
  }
  if (columns) {
    Result<std::vector<ValueColumn>> declared = ParseValueColumns(*columns, kReserved);
    if (!declared.ok()) return Fail(fmt::format("topic(): {}", declared.status().message()));
    data->value_columns = std::move(*declared);
  }
  if (from_offset && *from_offset < 0)
    return Fail(fmt::format("topic(): from_offset {} is negative", *from_offset));
  if (to_offset && *to_offset < 0)
    return Fail(fmt::format("topic(): to_offset {} is negative", *to_offset));
  if (from_ts) data->from_ts_ms = *from_ts;
  if (to_ts) data->to_ts_ms = *to_ts;

  // A query naming a topic must not create it on a broker that auto-creates topics.
  auto admin = kc::Admin::Create(ClientConfig(options, {{"allow.auto.create.topics", "false"}}));
  if (!admin.ok())
    return Fail(fmt::format("topic('{}'): {}", data->topic, admin.status().message()));
  Result<int> count = (*admin)->PartitionCount(data->topic, options.timeout);
  if (!count.ok()) {
    return Fail(count.status().code() == StatusCode::kNotFound
                    ? fmt::format("topic('{}'): no such topic", data->topic)
                    : fmt::format("topic('{}'): {}", data->topic, count.status().message()));
  }
  if (partition && (*partition < 0 || *partition >= *count)) {
    return Fail(fmt::format("topic('{}'): partition {} does not exist (it has {})", data->topic,
                            *partition, *count));
  }
  if (to_ts_log_append) {
    // Only a bound to read less: when the type cannot be read, everything is read.
    Result<std::string> type =
        (*admin)->TopicConfig(data->topic, "message.timestamp.type", options.timeout);
    if (type.ok() && *type == "LogAppendTime")
      to_ts = std::min(to_ts.value_or(*to_ts_log_append), *to_ts_log_append);
    if (to_ts) data->to_ts_ms = *to_ts;
  }
  for (int32_t p = 0; p < *count; ++p) {
    if (partition && p != *partition) continue;
    if (partitions && !partitions->contains(p)) continue;
    Result<kc::Watermarks> w = (*admin)->QueryWatermarks(data->topic, p, options.timeout);
    if (!w.ok()) return Fail(fmt::format("topic('{}'): {}", data->topic, w.status().message()));
    Range r{p, w->low, w->high};
    if (from_offset) r.from = std::max(r.from, *from_offset);
    if (to_offset) r.to = std::min(r.to, *to_offset);
    if (from_ts && r.from < r.to) {
      Result<int64_t> o = (*admin)->OffsetForTime(data->topic, p, *from_ts, options.timeout);
      if (!o.ok()) return Fail(fmt::format("topic('{}'): {}", data->topic, o.status().message()));
      r.from = std::max(r.from, *o);
    }
    if (to_ts && r.from < r.to) {
      Result<int64_t> o = (*admin)->OffsetForTime(data->topic, p, *to_ts, options.timeout);
      if (!o.ok()) return Fail(fmt::format("topic('{}'): {}", data->topic, o.status().message()));
      r.to = std::min(r.to, *o);
    }
    if (r.from < r.to) data->ranges.push_back(r);
  }

  if (!columns && (!format || framed)) {
    Status st = BindValueSchema(options, framed ? format_name : "", data.get());
    if (!st.ok()) return st;
  }
  if (key_format_name != "bytes") {
    Status st = BindKey(options, key_format_name, data.get());
    if (!st.ok()) return st;
  }
  if (format && !framed && !columns) {
    Result<std::vector<std::string>> sample =
        Sample(options, *data, static_cast<size_t>(sample_size.value_or(kDefaultSampleSize)));
    if (!sample.ok())
      return Fail(fmt::format("topic('{}'): {}", data->topic, sample.status().message()));
    data->value_columns = InferValueColumns(*sample, kReserved);
  }

  for (const schema::Column& c : ResultColumns(*data)) bind.AddResultColumn(c.name, c.type);
  int64_t rows = 0;
  for (const Range& r : data->ranges) rows += r.to - r.from;
  bind.SetCardinality(static_cast<uint64_t>(rows), false);
  return std::unique_ptr<duck::TableFunction::BindData>(std::move(data));
}

Result<std::unique_ptr<duck::TableFunction::ScanState>> TopicFunction::Init(
    const duck::TableFunction::BindData& bound, duck::TableInit& init) const {
  const TopicFunctionOptions& options = options_;
  const auto& data = static_cast<const TopicBind&>(bound);
  auto state = std::make_unique<TopicScan>();
  state->columns = init.ProjectedColumns();
  std::vector<json::Column> read;  // the value columns the query reads
  for (size_t i = 0; i < state->columns.size(); ++i) {
    const uint64_t c = state->columns[i];
    if (c < kColumns || c >= kColumns + data.value_columns.size()) continue;
    const ValueColumn& v = data.value_columns[c - kColumns];
    read.push_back({v.name, ValueLogicalType(v.type)});
    state->value_outputs.push_back(i);
  }
  for (size_t i = 0; i < state->columns.size(); ++i) {
    const uint64_t c = state->columns[i];
    if (c < kColumns || c >= kColumns + data.schema_columns.size()) continue;
    state->schema_outputs.emplace_back(i, c - kColumns);
  }
  if (!state->schema_outputs.empty()) {
    std::vector<schema::Column> columns;
    std::vector<duck::LogicalType> types;
    for (const schema::Column& c : data.reader->columns) {
      columns.push_back({c.name, c.type.Copy()});
      types.push_back(c.type.Copy());
    }
    state->plans = std::make_unique<schema::DecoderPlans>(options.schemas, data.schema_format,
                                                          std::move(columns), data.reader->avro);
    Result<duck::DataChunk> chunk = duck::DataChunk::Create(types);
    if (!chunk.ok())
      return Fail(fmt::format("topic('{}'): {}", data.topic, chunk.status().message()));
    state->decoded.emplace(std::move(chunk).value());
  }
  for (size_t i = 0; i < state->columns.size() && data.key_reader; ++i) {
    if (state->columns[i] != kKey) continue;
    Result<std::unique_ptr<schema::KeyColumn>> key =
        schema::KeyColumn::FromReader(options.schemas, data.key_format, CopyOf(*data.key_reader));
    if (!key.ok()) return Fail(fmt::format("topic('{}'): {}", data.topic, key.status().message()));
    state->key = std::move(key).value();
    state->key_output = i;
  }
  if (!read.empty()) {
    Result<std::unique_ptr<json::LenientDecoder>> decoder = json::LenientDecoder::Create(read);
    if (!decoder.ok())
      return Fail(fmt::format("topic('{}'): {}", data.topic, decoder.status().message()));
    state->values = std::move(*decoder);
  }
  init.SetMaxThreads(1);
  if (!data.ranges.empty()) {
    auto consumer =
        kc::Consumer::Create(ClientConfig(options, {{"enable.partition.eof", "true"},
                                                    {"fetch.max.bytes", "16777216"},
                                                    {"queued.max.messages.kbytes", "65536"}}));
    if (!consumer.ok())
      return Fail(fmt::format("topic('{}'): {}", data.topic, consumer.status().message()));
    std::vector<kc::TopicPartition> assign;
    for (const Range& r : data.ranges) {
      assign.push_back({data.topic, r.partition, r.from});
      state->end[r.partition] = r.to;
    }
    Status st = (*consumer)->Assign(assign);
    if (!st.ok()) return Fail(fmt::format("topic('{}'): {}", data.topic, st.message()));
    state->consumer = std::move(*consumer);
  }
  return std::unique_ptr<duck::TableFunction::ScanState>(std::move(state));
}

Status TopicFunction::Scan(const duck::TableFunction::BindData& bound,
                           duck::TableFunction::ScanState& scan, duck::TableOutput& output) const {
  const TopicFunctionOptions& options = options_;
  const auto& data = static_cast<const TopicBind&>(bound);
  auto& state = static_cast<TopicScan&>(scan);
  const uint64_t capacity = duck::TableOutput::Capacity();
  uint64_t rows = 0;
  auto last_progress = std::chrono::steady_clock::now();
  if (state.values) {
    std::vector<duck::Vector> value_out;
    for (size_t i : state.value_outputs) value_out.push_back(output.column(i));
    state.values->Bind(value_out);
  }
  std::vector<duck::Vector> out;
  for (size_t i = 0; i < state.columns.size(); ++i) out.push_back(output.column(i));
  schema::RowDecoder* writing = nullptr;      // the decoder the rows of `decoded` come from
  schema::RowDecoder* key_writing = nullptr;  // the decoder the output's keys come from
  if (state.decoded) state.decoded->Reset();
  while (rows < capacity) {
    if (state.next >= state.pending.size()) {
      if (state.end.empty() || rows > 0) break;  // done, or give DuckDB what we have
      state.pending.clear();
      state.next = 0;
      state.held.reset();
      Result<kc::MessageBatch> batch =
          state.consumer->Poll(std::chrono::milliseconds(200), capacity);
      if (!batch.ok())
        return Fail(fmt::format("topic('{}'): {}", data.topic, batch.status().message()));
      for (const Status& e : batch->errors())
        return Fail(fmt::format("topic('{}'): {}", data.topic, e.message()));
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
        return Fail(fmt::format(
            "topic('{}'): no messages for {} ms while {} partitions still had rows to read",
            data.topic, options.timeout.count(), state.end.size()));
      }
      continue;
    }
    const kc::Message& m = state.pending[state.next];
    if (m.timestamp_ms >= 0 &&
        (m.timestamp_ms < data.from_ts_ms || m.timestamp_ms >= data.to_ts_ms)) {
      ++state.next;
      continue;
    }
    schema::RowDecoder* dec = nullptr;
    std::string_view payload;
    if (state.plans) {
      std::string reason;
      Result<schema::RowDecoder*> found = state.plans->For(m.value, &payload, &reason);
      if (!found.ok())
        return Fail(fmt::format("topic('{}'): {}", data.topic, found.status().message()));
      dec = *found;
      // Each writer schema's decoder keeps its own list sizes: one per output chunk.
      if (dec != nullptr && writing != nullptr && dec != writing) break;
    }
    schema::RowDecoder* key_dec = nullptr;
    std::string_view key_payload;
    if (state.key && m.key.data() != nullptr) {
      std::string reason;
      Result<schema::RowDecoder*> found = state.key->For(m.key, &key_payload, &reason);
      if (!found.ok())
        return Fail(fmt::format("topic('{}'): {}", data.topic, found.status().message()));
      key_dec = *found;
      if (key_dec != nullptr && key_writing != nullptr && key_dec != key_writing) break;
    }
    ++state.next;
    for (size_t i = 0; i < state.columns.size(); ++i) {
      const duck::Vector& v = out[i];
      switch (state.columns[i]) {
        case kPartition:
          v.data<int32_t>()[rows] = m.partition;
          break;
        case kOffset:
          v.data<int64_t>()[rows] = m.offset;
          break;
        case kTimestamp:
          if (m.timestamp_ms < 0) {
            v.SetNull(rows);
          } else {
            v.data<int64_t>()[rows] = m.timestamp_ms * 1000;
          }
          break;
        case kKey:
          if (!state.key) {
            SetString(v, rows, m.key, true);
            break;
          }
          if (key_dec != nullptr && key_writing == nullptr) {
            // The rows before had no decodable key: NULL cells without list entries.
            state.key->Bind(key_dec, v);
            key_writing = key_dec;
          }
          // Lenient, as values: a key that is absent, not framed or does not decode is NULL.
          if (key_dec == nullptr) {
            schema::SetNullCell(v, state.key->type(), rows);
          } else {
            std::string reason;
            state.key->Decode(key_dec, key_payload, v, rows, &reason);
          }
          break;
        case kValue:
          SetString(v, rows, m.value, true);
          break;
        case kKeyBytes:
          SetString(v, rows, m.key, false);
          break;
        case kValueBytes:
          SetString(v, rows, m.value, false);
          break;
        default:
          break;  // a value column (below) or a virtual column
      }
    }
    if (state.values) state.values->Decode(rows, m.value);
    if (state.plans) {
      std::string reason;
      if (dec != nullptr && writing == nullptr) {
        dec->Bind(*state.decoded, 0);
        writing = dec;
      }
      // Lenient: a value that is not framed or does not decode is NULL (the decoder leaves
      // a failed row NULL).
      if (dec == nullptr || !dec->Decode(payload, rows, &reason)) NullRow(*state.decoded, rows);
    }
    ++rows;
  }
  if (state.values) RETURN_IF_ERROR(state.values->Finish());
  if (key_writing != nullptr) RETURN_IF_ERROR(key_writing->Finish(rows));
  if (state.plans) {
    if (writing != nullptr) RETURN_IF_ERROR(writing->Finish(rows));
    state.decoded->SetSize(rows);
    for (const auto& [out_column, schema_column] : state.schema_outputs) {
      out[out_column].Reference(state.decoded->column(schema_column));
    }
  }
  output.SetSize(rows);
  return Status::OK();
}

}  // namespace

Result<std::vector<schema::Column>> TopicColumns(const TopicFunctionOptions& options,
                                                 std::string_view topic) {
  TopicBind data;
  data.topic = std::string(topic);
  RETURN_IF_ERROR(BindValueSchema(options, "", &data));
  RETURN_IF_ERROR(BindKey(options, "auto", &data));
  return ResultColumns(data);
}

Status RegisterTopicFunction(duck::Connection& conn, const TopicFunctionOptions& options) {
  if (options.bootstrap_servers.empty())
    return InvalidArgumentError("topic(): no broker to read from");
  duck::TableFunctionSignature sig{.name = options.function_name, .projection_pushdown = true};
  sig.parameters.push_back(duck::LogicalType::Varchar());
  for (const char* name : {"partition", "from_offset", "to_offset"}) {
    sig.named_parameters.emplace_back(name, duck::LogicalType::BigInt());
  }
  for (const char* name : {"from_ts", "to_ts", "to_ts_log_append"}) {
    sig.named_parameters.emplace_back(name, duck::LogicalType::TimestampTz());
  }
  sig.named_parameters.emplace_back("partitions",
                                    duck::LogicalType::List(duck::LogicalType::BigInt()));
  sig.named_parameters.emplace_back("columns", duck::LogicalType::Varchar());
  sig.named_parameters.emplace_back("format", duck::LogicalType::Varchar());
  sig.named_parameters.emplace_back("sample_size", duck::LogicalType::BigInt());
  sig.named_parameters.emplace_back("key_format", duck::LogicalType::Varchar());
  return duck::RegisterTableFunction(conn, sig, std::make_unique<TopicFunction>(options));
}

}  // namespace sluice::query
