// Fuzz target for the pipeline's JSON decoders: the input is a batch of Kafka message
// values separated by newlines (a line may hold any bytes but a newline). Every batch goes
// through a StructuredDecoder (a table with every directly decoded type, plus a DECIMAL
// table for the staged path when the first byte is odd) and an InferredDecoder, each both
// into tables and in memory (the runner's path: chunks behind a TEMP VIEW, on a second
// connection). Whatever the bytes, decoding must not crash, DuckDB must accept what was
// loaded, and every message is either a row or a DecodeError.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include "json/json_decoder.h"

using namespace sluice;

namespace {

struct State {
  std::unique_ptr<duck::Database> db;
  std::unique_ptr<duck::Connection> conn;
  std::unique_ptr<json::StructuredDecoder> direct;
  std::unique_ptr<json::StructuredDecoder> staged;
  std::unique_ptr<json::InferredDecoder> inferred;
  std::unique_ptr<duck::Connection> mem_conn;  // the in-memory decoders' views live here
  std::unique_ptr<json::StructuredDecoder> mem_direct;
  std::unique_ptr<json::InferredDecoder> mem_inferred;
};

void Check(bool ok) {
  if (!ok) std::abort();
}

State Make() {
  State made;
  State* st = &made;
  auto db = duck::Database::Open({.memory_limit_bytes = 256 << 20, .threads = 1});
  Check(db.ok());
  st->db = std::move(*db);
  auto conn = duck::Connection::Open(*st->db);
  Check(conn.ok());
  st->conn = std::move(*conn);
  Check(st->conn
            ->Execute("CREATE TABLE f (event VARCHAR, n INTEGER, big BIGINT, u UBIGINT, "
                      "small TINYINT, d DOUBLE, r FLOAT, ok BOOLEAN, ts TIMESTAMP, "
                      "tz TIMESTAMPTZ, ns TIMESTAMP_NS, day DATE, raw BLOB, j JSON, "
                      "tags VARCHAR[], grid DOUBLE[][], "
                      "properties STRUCT(city VARCHAR, amount DOUBLE, xs INTEGER[]), "
                      "items STRUCT(k VARCHAR, v STRUCT(w BIGINT))[])")
            .ok());
  Check(st->conn->Execute("CREATE TABLE s (n INTEGER, price DECIMAL(10,2), id UUID)").ok());
  auto direct = json::StructuredDecoder::Create(*st->conn, "f");
  Check(direct.ok());
  st->direct = std::move(*direct);
  auto staged = json::StructuredDecoder::Create(*st->conn, "s");
  Check(staged.ok());
  st->staged = std::move(*staged);
  auto inferred = json::InferredDecoder::Create(*st->conn);
  Check(inferred.ok());
  st->inferred = std::move(*inferred);
  auto mem_conn = duck::Connection::Open(*st->db);
  Check(mem_conn.ok());
  st->mem_conn = std::move(*mem_conn);
  auto mem_direct = json::StructuredDecoder::Create(*st->mem_conn, "f", {.in_memory = true});
  Check(mem_direct.ok());
  st->mem_direct = std::move(*mem_direct);
  auto mem_inferred =
      json::InferredDecoder::Create(*st->mem_conn, {.table = "mem_batch", .in_memory = true});
  Check(mem_inferred.ok());
  st->mem_inferred = std::move(*mem_inferred);
  return made;
}

State& Get() {
  static State s = Make();
  return s;
}

// Decodes into `table` on `conn` (emptied first when `empty_first`: the structured
// decoder's table path) and checks what SQL sees there.
template <typename Decoder>
void Run(Decoder* dec, const char* table, const std::vector<kafka::client::Message>& messages,
         duck::Connection& conn, bool empty_first) {
  if (empty_first) Check(conn.Execute(std::string("DELETE FROM ") + table).ok());
  std::vector<json::DecodeError> errors;
  auto rows = dec->Decode(messages, &errors);
  Check(rows.ok());
  Check(*rows + errors.size() == messages.size());
  auto count = conn.QueryText(std::string("SELECT count(*) FROM ") + table);
  Check(count.ok() && (*count)[0][0] == std::to_string(*rows));
  // Every value DuckDB holds must be readable (strings are valid UTF-8, lists consistent).
  Check(conn.QueryText(std::string("SELECT * FROM ") + table).ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  State& st = Get();
  bool use_staged = data[0] & 1;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<kafka::client::Message> messages;
  while (messages.size() < 5000) {
    size_t nl = rest.find('\n');
    kafka::client::Message m;
    m.topic = "fuzz";
    m.partition = static_cast<int32_t>(messages.size() % 3);
    m.offset = static_cast<int64_t>(messages.size());
    m.timestamp_ms = messages.size() % 2 ? -1 : 1700000000000;
    m.value = rest.substr(0, nl);
    if (messages.size() % 4 == 1) m.key = m.value.substr(0, 4);
    messages.push_back(m);
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  Run(st.direct.get(), "f", messages, *st.conn, true);
  Run(st.mem_direct.get(), "f", messages, *st.mem_conn, false);
  if (use_staged) Run(st.staged.get(), "s", messages, *st.conn, true);
  Run(st.inferred.get(), "batch", messages, *st.conn, false);
  Run(st.mem_inferred.get(), "mem_batch", messages, *st.mem_conn, false);
  return 0;
}
