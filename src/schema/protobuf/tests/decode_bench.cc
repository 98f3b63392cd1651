// Benchmark, not a test: Protobuf decode (MakeRowDecoder into DuckDB chunks) against the JSON
// StructuredDecoder (in memory) on the same rows, in rows/s.
//   protobuf_decode_bench [messages=1000000] [batch=5000]
// Rows: a flat event of 9 fields (5 strings, a Timestamp, two doubles, an int64). Prints the
// best of three runs of each. Run the release build.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "json/json_decoder.h"
#include "schema/protobuf/protobuf_format.h"
#include "schema/protobuf/tests/test_util.h"

using namespace sluice;
using namespace sluice::schema;
using kafka::client::Message;
using protobuf::testing::Wire;

namespace {

void Die(const Status& st, const char* what) {
  if (st.ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, st.ToString().c_str());
  std::exit(1);
}

constexpr const char* kSchema = R"(syntax = "proto3";
import "google/protobuf/timestamp.proto";
message Event {
  string event = 1;
  google.protobuf.Timestamp timestamp = 2;
  string user_id = 3;
  string session_id = 4;
  string page = 5;
  string city = 6;
  double amount = 7;
  int64 count = 8;
  double score = 9;
})";

constexpr const char* kTable =
    "CREATE TABLE events (event VARCHAR, timestamp TIMESTAMPTZ, user_id VARCHAR, "
    "session_id VARCHAR, page VARCHAR, city VARCHAR, amount DOUBLE, count BIGINT, score DOUBLE)";

}  // namespace

int main(int argc, char** argv) {
  const size_t total = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1000000;
  const size_t batch = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 5000;
  static const char* kCities[] = {"Berlin", "Paris",  "Rome",   "Madrid", "Lisbon",
                                  "Vienna", "Prague", "Warsaw", "Oslo",   "Dublin"};
  static const char* kEvents[] = {"page_view", "click", "purchase", "signup"};
  std::vector<std::string> json, proto;
  json.reserve(total);
  proto.reserve(total);
  size_t json_bytes = 0, proto_bytes = 0;
  for (size_t i = 0; i < total; ++i) {
    std::string user = fmt::format("u-{:06}", i % 1000000);
    std::string session = fmt::format("s-{:016x}", i * 2654435761u);
    std::string page = fmt::format("/products/{}/item-{:05}", kCities[(i / 7) % 10], i % 99991);
    double amount = static_cast<double>(i % 500) + (i % 100) / 100.0;
    double score = static_cast<double>(i % 1000) / 7.0;
    int64_t seconds = 1714564800 + static_cast<int64_t>((i / 60) % 60 * 60 + i % 60);
    int64_t millis = static_cast<int64_t>(i % 1000);
    json.push_back(fmt::format(
        R"({{"event":"{}","timestamp":"2024-05-01T12:{:02}:{:02}.{:03}Z","user_id":"{}",)"
        R"("session_id":"{}","page":"{}","city":"{}","amount":{},"count":{},"score":{}}})",
        kEvents[i % 4], (i / 60) % 60, i % 60, millis, user, session, page, kCities[i % 10], amount,
        i, score));
    Wire w;
    w.Bytes(1, kEvents[i % 4])
        .Message(2, Wire().Varint(1, seconds).Varint(2, millis * 1000000))
        .Bytes(3, user)
        .Bytes(4, session)
        .Bytes(5, page)
        .Bytes(6, kCities[i % 10])
        .Double(7, amount)
        .Varint(8, i)
        .Double(9, score);
    proto.push_back(w.str());
    json_bytes += json.back().size();
    proto_bytes += proto.back().size();
  }

  auto db = duck::Database::Open({.memory_limit_bytes = 256 << 20, .threads = 1});
  Die(db.status(), "open");
  auto conn = duck::Connection::Open(**db);
  Die(conn.status(), "connect");
  Die((*conn)->Execute(kTable), "create");

  // JSON: StructuredDecoder, in memory (decode only, no table append).
  std::vector<Message> messages(total);
  for (size_t i = 0; i < total; ++i) {
    messages[i].topic = "events";
    messages[i].offset = static_cast<int64_t>(i);
    messages[i].value = json[i];
  }
  auto jdec = json::StructuredDecoder::Create(**conn, "events", {.in_memory = true});
  Die(jdec.status(), "json decoder");
  double json_best = 0;
  for (int run = 0; run < 3; ++run) {
    std::vector<json::DecodeError> errors;
    auto t0 = std::chrono::steady_clock::now();
    for (size_t off = 0; off < total; off += batch) {
      std::span<const Message> part(messages.data() + off, std::min(batch, total - off));
      auto rows = (*jdec)->Decode(part, &errors);
      Die(rows.status(), "json decode");
      if (!errors.empty()) Die(InternalError("{}", errors[0].reason), "json errors");
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    json_best = std::max(json_best, total / s);
  }
  jdec->reset();

  // Protobuf: the RowDecoder into chunks of the table's types (decode only).
  auto parsed = protobuf::Parse(kSchema, {});
  Die(parsed.status(), "parse");
  auto described = duck::DescribeTable(**conn, "events");
  Die(described.status(), "describe");
  std::vector<Column> columns;
  std::vector<duck::LogicalType> types;
  for (duck::TableColumn& c : *described) {
    types.push_back(c.type.Copy());
    columns.push_back({c.name, std::move(c.type)});
  }
  auto pdec = protobuf::MakeRowDecoder(*parsed, std::vector<int>{0}, columns);
  Die(pdec.status(), "protobuf decoder");
  auto chunk = duck::DataChunk::Create(types);
  Die(chunk.status(), "chunk");
  double proto_best = 0;
  for (int run = 0; run < 3; ++run) {
    auto t0 = std::chrono::steady_clock::now();
    std::string reason;
    uint64_t row = 0;
    chunk->Reset();
    (*pdec)->Bind(*chunk, 0);
    for (size_t i = 0; i < total; ++i) {
      if (!(*pdec)->Decode(proto[i], row, &reason)) Die(InternalError("{}", reason), "decode");
      if (++row == duck::DataChunk::Capacity()) {
        Die((*pdec)->Finish(row), "finish");
        chunk->SetSize(row);
        chunk->Reset();
        (*pdec)->Bind(*chunk, 0);
        row = 0;
      }
    }
    Die((*pdec)->Finish(row), "finish");
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    proto_best = std::max(proto_best, total / s);
  }
  std::printf("%zu rows: JSON %.0f bytes avg, StructuredDecoder in memory %.0f rows/s\n", total,
              double(json_bytes) / total, json_best);
  std::printf("%zu rows: Protobuf %.0f bytes avg, RowDecoder %.0f rows/s (%.2fx JSON)\n", total,
              double(proto_bytes) / total, proto_best, proto_best / json_best);
  return 0;
}
