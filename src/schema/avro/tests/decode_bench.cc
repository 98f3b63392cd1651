// Benchmark, not a test: the Avro RowDecoder against the JSON StructuredDecoder on the same
// rows, decode alone, in msgs/s.
//   avro_decode_bench [messages=1000000] [memory|table]
// Flat page-view records of 8 fields (5 strings, a timestamp, a double, a long), as Avro
// binary and as JSON text. `memory` (default) keeps the decoded chunks (the JSON decoder's
// in_memory mode, the Avro decoder's chunks reset and reused); `table` appends every chunk
// to the table in both. Prints the best of three runs. Run the release build.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "duck/appender.h"
#include "json/json_decoder.h"
#include "schema/avro/avro_format.h"

using namespace sluice;
using kafka::client::Message;

namespace {

void Die(const Status& st, const char* what) {
  if (st.ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, st.ToString().c_str());
  std::exit(1);
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

void Long(int64_t v, std::string* out) {
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  while (z >= 0x80) {
    out->push_back(static_cast<char>((z & 0x7F) | 0x80));
    z >>= 7;
  }
  out->push_back(static_cast<char>(z));
}

void Str(std::string_view s, std::string* out) {
  Long(static_cast<int64_t>(s.size()), out);
  out->append(s);
}

constexpr const char* kSchema = R"({"type":"record","name":"PageView","fields":[
  {"name":"event","type":"string"},
  {"name":"timestamp","type":{"type":"long","logicalType":"timestamp-micros"}},
  {"name":"user_id","type":"string"},{"name":"session_id","type":"string"},
  {"name":"page","type":"string"},{"name":"city","type":"string"},
  {"name":"amount","type":"double"},{"name":"quantity","type":"long"}]})";

}  // namespace

int main(int argc, char** argv) {
  const size_t total = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1000000;
  const bool table = argc > 2 && std::strcmp(argv[2], "table") == 0;
  constexpr size_t kBatch = 5000;

  static const char* kCities[] = {"Berlin", "Paris",  "Rome",   "Madrid", "Lisbon",
                                  "Vienna", "Prague", "Warsaw", "Oslo",   "Dublin"};
  static const char* kEvents[] = {"page_view", "click", "purchase", "signup"};
  std::vector<std::string> json, avro;
  json.reserve(total);
  avro.reserve(total);
  size_t json_bytes = 0, avro_bytes = 0;
  const int64_t base_micros = 1714564800000000;
  for (size_t i = 0; i < total; ++i) {
    std::string user = fmt::format("u-{:06}", i % 1000000);
    std::string session = fmt::format("s-{:016x}", i * 2654435761u);
    std::string page = fmt::format("/products/{}/item-{:05}", kCities[(i / 7) % 10], i % 99991);
    double amount = static_cast<double>(i % 500) + static_cast<double>(i % 100) / 100;
    int64_t micros = base_micros + static_cast<int64_t>(i) * 1000 + static_cast<int64_t>(i % 1000);
    json.push_back(fmt::format(
        R"({{"event":"{}","timestamp":"2024-05-01T12:{:02}:{:02}.{:06}Z","user_id":"{}",)"
        R"("session_id":"{}","page":"{}","city":"{}","amount":{},"quantity":{}}})",
        kEvents[i % 4], (i / 60000) % 60, (i / 1000) % 60, (i % 1000) * 1000 + i % 1000, user,
        session, page, kCities[i % 10], amount, i % 7));
    json_bytes += json.back().size();
    std::string a;
    Str(kEvents[i % 4], &a);
    Long(micros, &a);
    Str(user, &a);
    Str(session, &a);
    Str(page, &a);
    Str(kCities[i % 10], &a);
    a.append(reinterpret_cast<const char*>(&amount), 8);
    Long(static_cast<int64_t>(i % 7), &a);
    avro_bytes += a.size();
    avro.push_back(std::move(a));
  }
  std::vector<Message> messages(total);
  for (size_t i = 0; i < total; ++i) {
    messages[i].topic = "events";
    messages[i].offset = static_cast<int64_t>(i);
    messages[i].value = json[i];
  }

  auto db = duck::Database::Open({.memory_limit_bytes = 512 << 20, .threads = 1});
  Die(db.status(), "open");
  auto conn = duck::Connection::Open(**db);
  Die(conn.status(), "connect");
  duck::Connection& c = **conn;
  const char* ddl =
      "(event VARCHAR, timestamp TIMESTAMP, user_id VARCHAR, session_id VARCHAR, page VARCHAR, "
      "city VARCHAR, amount DOUBLE, quantity BIGINT)";
  Die(c.Execute(fmt::format("CREATE TABLE events {}", ddl)), "create");
  Die(c.Execute(fmt::format("CREATE TABLE avro_events {}", ddl)), "create");

  auto jdec = json::StructuredDecoder::Create(c, "events", {.in_memory = !table});
  Die(jdec.status(), "json decoder");
  auto cols = duck::DescribeTable(c, "avro_events");
  Die(cols.status(), "describe");
  std::vector<schema::Column> columns;
  std::vector<duck::LogicalType> types;
  for (const duck::TableColumn& col : *cols) {
    columns.push_back({col.name, col.type.Copy()});
    types.push_back(col.type.Copy());
  }
  auto writer = schema::avro::Parse(kSchema);
  Die(writer.status(), "schema");
  auto adec = schema::avro::MakeRowDecoder(*writer, nullptr, columns);
  Die(adec.status(), "avro decoder");
  auto chunk = duck::DataChunk::Create(types);
  Die(chunk.status(), "chunk");
  auto app = duck::Appender::Open(c, "avro_events");
  Die(app.status(), "appender");

  double best_json = 0, best_avro = 0;
  for (int run = 0; run < 3; ++run) {
    std::vector<json::DecodeError> errors;
    auto t0 = std::chrono::steady_clock::now();
    for (size_t off = 0; off < total; off += kBatch) {
      std::span<const Message> part(messages.data() + off, std::min(kBatch, total - off));
      auto rows = (*jdec)->Decode(part, &errors);
      Die(rows.status(), "json decode");
      if (!errors.empty()) Die(InternalError("{}", errors[0].reason), "json errors");
    }
    double json_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    if (table) Die(c.Execute("DELETE FROM avro_events"), "empty");
    auto t1 = std::chrono::steady_clock::now();
    std::string reason;
    uint64_t row = 0;
    (*adec)->Bind(*chunk, 0);
    auto flush = [&]() {
      Die((*adec)->Finish(row), "finish");
      chunk->SetSize(row);
      if (table) Die(app->Append(*chunk), "append");
      chunk->Reset();
      (*adec)->Bind(*chunk, 0);
      row = 0;
    };
    for (size_t i = 0; i < total; ++i) {
      if (!(*adec)->Decode(avro[i], row, &reason)) Die(InternalError("{}", reason), "avro decode");
      if (++row == duck::DataChunk::Capacity()) flush();
    }
    flush();
    if (table) Die(app->Flush(), "flush");
    double avro_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    std::printf("run %d: json %.0f msgs/s (%.0f ns/msg), avro %.0f msgs/s (%.0f ns/msg), load %s\n",
                run, total / json_s, json_s * 1e9 / total, total / avro_s, avro_s * 1e9 / total,
                LoadAverage().c_str());
    best_json = std::max(best_json, total / json_s);
    best_avro = std::max(best_avro, total / avro_s);
  }
  std::printf(
      "%zu msgs (%s): json %.0f bytes avg, best %.0f msgs/s; avro %.0f bytes avg, best %.0f "
      "msgs/s; avro/json %.2fx; load %s\n",
      total, table ? "into the table" : "in memory", double(json_bytes) / total, best_json,
      double(avro_bytes) / total, best_avro, best_avro / best_json, LoadAverage().c_str());
  return 0;
}
