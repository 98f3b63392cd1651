// WindowEngine (pipeline.window, docs/design/0007 #3-#8) against a real DuckDB, driven as
// PipelineRunner drives it: per batch Add + Observe (+ NoteSources, + SaveState with a
// state file) in one transaction, then, while windows are due, Close in a transaction of
// its own. The harness keeps everything emitted in a table `emitted`; the tests compare it
// with references computed by DuckDB over the whole input (time_bucket for tumbling,
// generate_series for hopping, gaps and islands for sessions). The wall clock and the
// steady clock are the test's own: nothing sleeps, no duration is asserted.
//
#include "pipeline/window.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "duck/database.h"
#include "pipeline/state_writer.h"

namespace sluice::pipeline {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Steady = WindowEngine::SteadyTime;

#define ASSERT_OK(expr)                                               \
  do {                                                                \
    const ::sluice::Status _status = (expr);                          \
    ASSERT_TRUE(_status.ok()) << #expr << ": " << _status.ToString(); \
  } while (0)

#define EXPECT_OK(expr)                                               \
  do {                                                                \
    const ::sluice::Status _status = (expr);                          \
    EXPECT_TRUE(_status.ok()) << #expr << ": " << _status.ToString(); \
  } while (0)

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kMinute = 60 * kSecond;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kT0 = int64_t{1'704'067'200} * kSecond;  // 2024-01-01 00:00:00 UTC
constexpr int64_t kNoTime = WindowEngine::kNoTime;
const std::string kTopic = "in";

// kT0 + minutes:seconds.
constexpr int64_t At(int64_t minutes, int64_t seconds = 0) {
  return kT0 + minutes * kMinute + seconds * kSecond;
}

constexpr std::string_view kEmitSql =
    "SELECT window_start, window_end, k, count(*) AS n, sum(v) AS s FROM closed GROUP BY ALL";

// One decoded message: its event time (nullopt: NULL), key, value and partition.
struct Row {
  std::optional<int64_t> t;
  std::string k = "a";
  int64_t v = 1;
  int32_t partition = 0;
};

// A SELECT of `rows` as (ts TIMESTAMPTZ, k VARCHAR, v BIGINT), in order.
std::string RowsSql(const std::vector<Row>& rows) {
  std::string values;
  for (const Row& r : rows) {
    if (!values.empty()) values += ", ";
    values += fmt::format("({}, {}, {})", r.t ? fmt::format("make_timestamptz({})", *r.t) : "NULL",
                          duck::QuoteLiteral(r.k), r.v);
  }
  return fmt::format(
      "SELECT ts::TIMESTAMPTZ AS ts, k::VARCHAR AS k, v::BIGINT AS v FROM (VALUES {}) t(ts, k, v)",
      values);
}

std::vector<int32_t> PartitionsOf(const std::vector<Row>& rows) {
  std::vector<int32_t> out;
  for (const Row& r : rows) out.push_back(r.partition);
  return out;
}

WindowConfig Config(WindowType type) {
  WindowConfig c;
  c.type = type;
  c.time_column = "ts";
  c.emit_sql = std::string(kEmitSql);
  c.emit_origin = "t.yml:20";
  switch (type) {
    case WindowType::kTumbling:
      c.size_us = kMinute;
      break;
    case WindowType::kHopping:
      c.size_us = 5 * kMinute;
      c.slide_us = kMinute;
      break;
    case WindowType::kSession:
      c.gap_us = 2 * kMinute;
      break;
  }
  return c;
}

// A batch the harness fed: the rows Add kept and the ones it did not.
struct Fed {
  uint64_t kept = 0;
  std::vector<DroppedRow> dropped;
};

// One engine over one database (in memory, or on `path` with SaveState as with
// pipeline.state), fed and closed as the runner does. The table `batch` is the decoded
// batch and the view `res` over it the handler's result. Offsets count from 0 per
// partition across batches and reopenings.
class Harness {
 public:
  explicit Harness(WindowConfig config, std::string path = "")
      : config_(std::move(config)), path_(std::move(path)) {}
  // With write_behind, the engine's changes and progress go to a StateWriter over a
  // second (in-memory) database after each committed batch and close, as the runner does
  // with pipeline.state and a declarative window.
  void WriteBehind() { write_behind_ = true; }
  ~Harness() { Shut(); }

  // Opens the database (again), makes the engine and assigns partitions 0..partitions-1.
  Status Open(int partitions) {
    duck::DatabaseOptions options;
    options.path = path_;
    ASSIGN_OR_RETURN(db_, duck::Database::Open(options));
    ASSIGN_OR_RETURN(conn_, duck::Connection::Open(*db_));
    StateTables::Loaded loaded;
    if (durable()) {
      ASSIGN_OR_RETURN(tables_, StateTables::Open(*conn_));
      ASSIGN_OR_RETURN(loaded, tables_->Load());
    }
    ASSIGN_OR_RETURN(engine_, WindowEngine::Create(*conn_, config_, "t",
                                                   durable() ? &loaded : nullptr, write_behind_));
    if (write_behind_) {
      ASSIGN_OR_RETURN(copy_db_, duck::Database::Open(duck::DatabaseOptions{}));
      ASSIGN_OR_RETURN(auto writer_conn, duck::Connection::Open(*copy_db_));
      ASSIGN_OR_RETURN(auto tables, StateTables::Open(*writer_conn));
      writer_ = StateWriter::Start(std::move(writer_conn), std::move(tables), config_, "t", 4);
      ASSIGN_OR_RETURN(copy_conn_, duck::Connection::Open(*copy_db_));
    }
    shape_.clear();
    for (int p = 0; p < partitions; ++p) engine_->Assign(kTopic, p, steady);
    return Status::OK();
  }
  // The engine, then the connection, then the database.
  void Shut() {
    writer_.reset();
    copy_conn_.reset();
    copy_db_.reset();
    engine_.reset();
    tables_.reset();
    conn_.reset();
    db_.reset();
  }

  WindowEngine& engine() { return *engine_; }
  // Write-behind: every row of the engine's table and of the copy, as text, sorted.
  std::pair<std::vector<std::string>, std::vector<std::string>> TableAndCopy() {
    EXPECT_OK(writer_->Drain());
    auto rows = [](duck::Connection& c) {
      std::vector<std::string> out;
      auto r = c.QueryText("SELECT * FROM sluice_window_rows ORDER BY ALL");
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (!r.ok()) return out;
      for (const auto& row : *r) {
        std::string line;
        for (const auto& v : row) line += v.value_or("NULL") + "|";
        out.push_back(line);
      }
      return out;
    };
    return {rows(*conn_), rows(*copy_conn_)};
  }
  // Write-behind: the pipeline's watermark as the copy holds it once the progress since
  // the last batch (a Tick's advance) went too.
  std::string CopiedWatermark() {
    EXPECT_OK(SubmitChanges());
    EXPECT_OK(writer_->Drain());
    auto r = copy_conn_->QueryText(
        "SELECT arg_max(newest, seq) FROM sluice_watermarks WHERE \"partition\" = -1");
    return r.ok() && !r->empty() ? (*r)[0][0].value_or("NULL") : "error";
  }
  duck::Connection& conn() { return *conn_; }

  // One batch in its transaction, then the due windows closed.
  Result<Fed> Feed(const std::vector<Row>& rows) {
    return FeedSql(RowsSql(rows), PartitionsOf(rows));
  }
  Result<Fed> FeedSql(std::string_view select, const std::vector<int32_t>& partitions) {
    ASSIGN_OR_RETURN(Fed fed, FeedOnly(select, partitions, /*commit=*/true));
    RETURN_IF_ERROR(Tick());
    return fed;
  }
  // One batch in its transaction, committed or rolled back (then the engine restored).
  Result<Fed> FeedOnly(const std::vector<Row>& rows, bool commit) {
    return FeedOnly(RowsSql(rows), PartitionsOf(rows), commit);
  }
  Result<Fed> FeedOnly(std::string_view select, const std::vector<int32_t>& partitions,
                       bool commit) {
    RETURN_IF_ERROR(conn_->Execute(fmt::format("CREATE OR REPLACE TABLE batch AS {}", select)));
    ASSIGN_OR_RETURN(
        auto shape,
        conn_->QueryText(
            "SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY column_index) "
            "FROM duckdb_columns() WHERE table_name = 'batch' AND schema_name = 'main'"));
    if (shape[0][0].value_or("") != shape_) {  // the columns changed: the "handler" is made again
      RETURN_IF_ERROR(conn_->Execute("CREATE OR REPLACE VIEW res AS SELECT * FROM batch"));
      shape_ = shape[0][0].value_or("");
      ++generation_;
    }
    std::vector<SourceRun> runs;
    std::map<std::pair<std::string, int32_t>, int64_t> first;
    const auto offsets_before = next_offset_;
    for (int32_t p : partitions) {
      if (runs.empty() || runs.back().partition != p) runs.push_back({kTopic, p, 0});
      ++runs.back().rows;
      int64_t& offset = next_offset_[p];
      first.try_emplace({kTopic, p}, offset);
      ++offset;
    }
    Fed fed;
    auto snapshot = engine_->Snapshot();
    Status st = conn_->Execute("BEGIN TRANSACTION");
    if (st.ok()) {
      Result<uint64_t> kept = engine_->Add("res", generation_, &fed.dropped);
      st = kept.status();
      if (st.ok()) fed.kept = *kept;
    }
    if (st.ok()) st = engine_->Observe("batch", generation_, runs, wall_us, steady);
    if (st.ok() && fed.kept > 0) engine_->NoteSources(first);
    if (st.ok() && durable()) st = SaveState();
    if (st.ok() && commit) st = conn_->Execute("COMMIT");
    if (!st.ok() || !commit) {
      (void)conn_->Execute("ROLLBACK");
      engine_->Restore(*snapshot);
      if (tables_) tables_->Forget();
      next_offset_ = offsets_before;
      if (!st.ok()) return st;
      return fed;
    }
    RETURN_IF_ERROR(SubmitChanges());
    return fed;
  }

  // The runner's loop between batches: Tick, then Close(false) in a transaction when due.
  Status Tick() {
    engine_->Tick(steady);
    if (!engine_->CloseDue()) return Status::OK();
    RETURN_IF_ERROR(CloseInTransaction(false));
    // Everything the watermark closed went: nothing is due until it moves again.
    EXPECT_FALSE(engine_->CloseDue())
        << "still due after a Close at watermark " << engine_->watermark_us();
    return Status::OK();
  }
  // The end of `invoke`: every window.
  Status CloseAll() { return CloseInTransaction(true); }

  std::optional<int64_t> Floor(int32_t partition) const {
    return engine_->Floor(kTopic, partition);
  }

  // Text of every row of `select` (one column), in order; "NULL" for NULL.
  std::vector<std::string> Strings(std::string_view select) {
    auto rows = conn_->QueryText(select);
    EXPECT_TRUE(rows.ok()) << select << ": " << rows.status().ToString();
    std::vector<std::string> out;
    if (!rows.ok()) return out;
    for (const auto& row : *rows) out.push_back(row[0].value_or("NULL"));
    return out;
  }
  int64_t Count(std::string_view select) {
    auto s = Strings(fmt::format("SELECT count(*) FROM ({})", select));
    return s.empty() ? -1 : std::stoll(s[0]);
  }
  // Rows only in `a` and rows only in `b` (as multisets, at most 5 of each); "" when equal.
  std::string Diff(std::string_view a, std::string_view b) {
    auto lines = Strings(fmt::format(
        "(SELECT 'only in the first: ' || x::VARCHAR FROM (({0}) EXCEPT ALL ({1})) x LIMIT 5) "
        "UNION ALL "
        "(SELECT 'only in the second: ' || x::VARCHAR FROM (({1}) EXCEPT ALL ({0})) x LIMIT 5)",
        a, b));
    return fmt::format("{}", fmt::join(lines, "\n"));
  }
  bool HasEmitted() {
    return Count(
               "SELECT 1 FROM duckdb_tables() WHERE table_name = 'emitted' AND schema_name = "
               "'main'") == 1;
  }
  // What was emitted, as (window_start, window_end, k, n, s); before the first emission, an
  // empty relation of the reference's columns.
  std::string Emitted() {
    return HasEmitted() ? "SELECT window_start, window_end, k, n, s FROM emitted"
                        : "SELECT window_start, window_end, k, n, s FROM reference WHERE false";
  }
  // Every emitted row as "#emission [start,end) k n=.. s=..", times in seconds from kT0.
  std::vector<std::string> Emissions() {
    if (!HasEmitted()) return {};
    return Strings(
        fmt::format("SELECT format('#{{}} [{{}}s,{{}}s) {{}} n={{}} s={{}}', emission, "
                    "(epoch_us(window_start) - {0}) // {1}, "
                    "(epoch_us(window_end) - {0}) // {1}, k, n, s) FROM emitted ORDER BY emission, "
                    "window_start, k",
                    kT0, kSecond));
  }
  // The table `input` holds `rows`, and `reference` what `reference_sql` computes over it.
  void MakeReference(const std::vector<Row>& rows, std::string_view reference_sql) {
    ASSERT_OK(conn_->Execute(fmt::format("CREATE OR REPLACE TABLE input AS {}", RowsSql(rows))));
    ASSERT_OK(
        conn_->Execute(fmt::format("CREATE OR REPLACE TABLE reference AS {}", reference_sql)));
  }
  // What was emitted so far is exactly the reference's windows that end at or before the
  // watermark: none early, none missing, none twice.
  void ExpectEmittedUpToWatermark() {
    const int64_t w = engine_->watermark_us();
    std::string ended = w == kNoTime ? "false" : fmt::format("epoch_us(window_end) <= {}", w);
    EXPECT_EQ(Diff(Emitted(), "SELECT * FROM reference WHERE " + ended), "")
        << "at watermark " << w;
  }

  int64_t wall_us = kT0 + 24 * kHour;  // "now": the data is a replay of the day before
  Steady steady = Steady{} + std::chrono::hours(1);
  int fail_emits = 0;  // the sink fails (after writing) this many times

 private:
  bool durable() const { return !path_.empty(); }
  bool write_behind_ = false;
  std::unique_ptr<duck::Database> copy_db_;
  std::unique_ptr<duck::Connection> copy_conn_;  // reads the copy (after Drain)
  std::unique_ptr<StateWriter> writer_;
  // The progress into the state tables, as the runner does in the batch's transaction.
  Status SaveState() {
    StateProgress progress;
    engine_->TakeProgress(&progress);
    return tables_->Save(progress);
  }

  Status CloseInTransaction(bool all) {
    auto snapshot = engine_->Snapshot();
    Status st = conn_->Execute("BEGIN TRANSACTION");
    if (st.ok())
      st = engine_->Close(
          all, [this](std::string_view table, uint64_t rows) { return Emit(table, rows); });
    if (st.ok() && durable()) st = SaveState();
    if (st.ok()) st = conn_->Execute("COMMIT");
    if (!st.ok()) {
      (void)conn_->Execute("ROLLBACK");
      engine_->Restore(*snapshot);
      if (tables_) tables_->Forget();
      return st;
    }
    return SubmitChanges();
  }
  Status SubmitChanges() {
    if (!writer_) return Status::OK();
    StateDelta delta;
    delta.rows = engine_->TakeChanges();
    engine_->TakeProgress(&delta.progress);
    return writer_->Submit(std::move(delta));
  }

  // The sink: appends the emitted table to `emitted` with the emission's number.
  Status Emit(std::string_view table, uint64_t rows) {
    ++emissions_;
    RETURN_IF_ERROR(conn_->Execute(fmt::format(
        "CREATE TABLE IF NOT EXISTS emitted AS SELECT *, 0 AS emission FROM {} LIMIT 0", table)));
    RETURN_IF_ERROR(
        conn_->Execute(fmt::format("INSERT INTO emitted SELECT *, {} FROM {}", emissions_, table)));
    EXPECT_EQ(static_cast<int64_t>(rows), Count(fmt::format("SELECT * FROM {}", table)));
    if (fail_emits > 0) {
      --fail_emits;
      return InternalError("the sink failed (on purpose)");
    }
    return Status::OK();
  }

  WindowConfig config_;
  std::string path_;
  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
  std::unique_ptr<WindowEngine> engine_;
  std::unique_ptr<StateTables> tables_;
  std::string shape_;        // the batch's columns and types
  uint64_t generation_ = 0;  // of `res` and `batch`: changes with shape_
  std::map<int32_t, int64_t> next_offset_;
  int emissions_ = 0;
};

// `n` rows from kT0 on, a few seconds apart, each up to `disorder` earlier than the newest
// before it; now and then a pause of minutes (so that sessions end), now and then a time
// on a whole minute (a window's edge); keys a..e (e rare), values 1..100, random partitions.
std::vector<Row> RandomInput(uint64_t seed, size_t n, int partitions, int64_t disorder) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<Row> rows;
  int64_t base = kT0;
  for (size_t i = 0; i < n; ++i) {
    base += uniform(0, 7 * kSecond);
    if (uniform(0, 99) == 0) base += uniform(3 * kMinute, 10 * kMinute);
    Row r;
    r.t = base - uniform(0, disorder);
    const int64_t minute = base - (base - kT0) % kMinute;
    if (uniform(0, 19) == 0 && base - minute <= disorder) r.t = minute;
    const int64_t key = uniform(0, 99);
    r.k = key < 40 ? "a" : key < 70 ? "b" : key < 90 ? "c" : key < 99 ? "d" : "e";
    r.v = uniform(1, 100);
    r.partition = static_cast<int32_t>(uniform(0, partitions - 1));
    rows.push_back(std::move(r));
  }
  return rows;
}

// `rows` cut into batches of varied sizes (one over DuckDB's 2048-row vector), none over
// `max_size`.
std::vector<std::vector<Row>> Batches(const std::vector<Row>& rows, size_t max_size = SIZE_MAX) {
  static constexpr size_t kSizes[] = {1, 17, 90, 3, 64, 120, 5, 40, 33, 2100, 7, 150, 11, 60};
  std::vector<std::vector<Row>> out;
  size_t i = 0;
  for (size_t at = 0; at < rows.size(); ++i) {
    size_t n = std::min({kSizes[i % std::size(kSizes)], max_size, rows.size() - at});
    out.emplace_back(rows.begin() + static_cast<ptrdiff_t>(at),
                     rows.begin() + static_cast<ptrdiff_t>(at + n));
    at += n;
  }
  return out;
}

// A window kind, and the reference SQL over `input` that computes what it must emit.
struct Kind {
  std::string name;
  WindowConfig config;
  std::string reference;
};

// Sessions by gaps and islands: a row `gap` or more after the previous one (of its key)
// starts a session; a session is [first, last + gap). `by` is "" or "PARTITION BY k".
std::string SessionReference(int64_t gap, std::string_view by) {
  std::string island_by = by.empty() ? "PARTITION BY island" : fmt::format("{}, island", by);
  return fmt::format(
      "WITH o AS (SELECT epoch_us(ts) AS t, k, v, "
      "  CASE WHEN epoch_us(ts) - lag(epoch_us(ts)) OVER ({1} ORDER BY ts) >= {0} THEN 1 ELSE 0 "
      "END AS brk "
      "  FROM input), "
      "i AS (SELECT *, sum(brk) OVER ({1} ORDER BY t ROWS UNBOUNDED PRECEDING) AS island FROM o), "
      "s AS (SELECT *, min(t) OVER ({2}) AS s0, max(t) OVER ({2}) + {0} AS s1 FROM i) "
      "SELECT make_timestamptz(s0) AS window_start, make_timestamptz(s1) AS window_end, k, "
      "count(*) AS n, "
      "  sum(v) AS s FROM s GROUP BY ALL",
      gap, by, island_by);
}

std::vector<Kind> Kinds() {
  std::vector<Kind> kinds;
  kinds.push_back({"Tumbling", Config(WindowType::kTumbling),
                   "SELECT time_bucket(INTERVAL '1 minute', ts) AS window_start, "
                   "time_bucket(INTERVAL '1 minute', ts) + INTERVAL '1 minute' AS window_end, k, "
                   "count(*) AS n, "
                   "sum(v) AS s FROM input GROUP BY ALL"});
  kinds.push_back(
      {"Hopping", Config(WindowType::kHopping),
       "SELECT ws AS window_start, ws + INTERVAL '5 minutes' AS window_end, k, count(*) AS n, "
       "sum(v) AS s FROM (SELECT unnest(generate_series(time_bucket(INTERVAL '1 minute', ts) - "
       "INTERVAL '4 minutes', time_bucket(INTERVAL '1 minute', ts), INTERVAL '1 minute')) AS ws, "
       "k, v FROM input) GROUP BY ALL"});
  Kind keyed{"SessionByKey", Config(WindowType::kSession),
             SessionReference(2 * kMinute, "PARTITION BY k")};
  keyed.config.key = {"k"};
  kinds.push_back(keyed);
  kinds.push_back({"Session", Config(WindowType::kSession), SessionReference(2 * kMinute, "")});
  for (Kind& k : kinds) k.config.grace_us = 30 * kSecond;  // above the input's 20 s of disorder
  return kinds;
}

class WindowKindTest : public ::testing::TestWithParam<Kind> {};

// Every window of a few thousand rows over hours, fed in time order (disorder within
// grace) from three partitions: emitted once, when the watermark passes it, as the
// reference computes it.
TEST_P(WindowKindTest, EmitsTheReferenceWindows) {
  const Kind& kind = GetParam();
  Harness h(kind.config);
  ASSERT_OK(h.Open(3));
  const std::vector<Row> input = RandomInput(7, 5000, 3, 20 * kSecond);
  h.MakeReference(input, kind.reference);
  ASSERT_GT(h.Count("SELECT * FROM reference"), 100);
  for (const std::vector<Row>& batch : Batches(input)) {
    auto fed = h.Feed(batch);
    ASSERT_TRUE(fed.ok()) << fed.status().ToString();
    EXPECT_EQ(fed->kept, batch.size());
    EXPECT_TRUE(fed->dropped.empty());
    h.ExpectEmittedUpToWatermark();
  }
  EXPECT_GT(h.Count(h.Emitted()), 0);  // most windows closed on the way
  ASSERT_OK(h.CloseAll());
  EXPECT_EQ(h.Diff(h.Emitted(), "SELECT * FROM reference"), "");
  for (int32_t p = 0; p < 3; ++p) EXPECT_EQ(h.Floor(p), std::nullopt) << "partition " << p;
}

// Each batch is first added and rolled back (the engine restored from its snapshot), then
// added for real; every other Close fails in the sink and is rolled back. The result is as
// if each batch and each Close had happened once.
TEST_P(WindowKindTest, RolledBackBatchesAndClosesLeaveNoTrace) {
  const Kind& kind = GetParam();
  Harness h(kind.config);
  ASSERT_OK(h.Open(3));
  const std::vector<Row> input = RandomInput(11, 1500, 3, 20 * kSecond);
  h.MakeReference(input, kind.reference);
  int failed_closes = 0;
  int closes = 0;
  for (const std::vector<Row>& batch : Batches(input, 200)) {
    const int64_t watermark = h.engine().watermark_us();
    const std::vector<std::optional<int64_t>> floors = {h.Floor(0), h.Floor(1), h.Floor(2)};
    auto rolled_back = h.FeedOnly(batch, /*commit=*/false);
    ASSERT_TRUE(rolled_back.ok()) << rolled_back.status().ToString();
    EXPECT_EQ(h.engine().watermark_us(), watermark);
    EXPECT_EQ((std::vector<std::optional<int64_t>>{h.Floor(0), h.Floor(1), h.Floor(2)}), floors);

    auto fed = h.FeedOnly(batch, /*commit=*/true);
    ASSERT_TRUE(fed.ok()) << fed.status().ToString();
    EXPECT_EQ(fed->kept, batch.size());
    h.engine().Tick(h.steady);
    if (h.engine().CloseDue() && ++closes % 2 == 1) {
      h.fail_emits = 1;
      Status st = h.Tick();
      if (h.fail_emits == 0) {  // (a session's end is only known at Close: it may emit nothing)
        ++failed_closes;
        EXPECT_THAT(st.message(), HasSubstr("on purpose"));
        EXPECT_TRUE(h.engine().CloseDue());  // restored: the windows are still to close
      }
      h.fail_emits = 0;
    }
    ASSERT_OK(h.Tick());
    h.ExpectEmittedUpToWatermark();
  }
  EXPECT_GT(failed_closes, 2);
  ASSERT_OK(h.CloseAll());
  EXPECT_EQ(h.Diff(h.Emitted(), "SELECT * FROM reference"), "");
}

// With a state file: half the input, the engine, connection and database gone, the file
// opened again; the watermark and floors are back, and the rest of the input gives what
// an uninterrupted run gives.
TEST_P(WindowKindTest, ReopenedStateFinishesLikeAnUninterruptedRun) {
  const Kind& kind = GetParam();
  const std::vector<Row> input = RandomInput(13, 1500, 3, 20 * kSecond);
  const std::vector<std::vector<Row>> batches = Batches(input);
  const std::string emitted_text =
      "SELECT format('{} {} {} {} {}', epoch_us(window_start), epoch_us(window_end), k, n, s) AS e "
      "FROM emitted "
      "ORDER BY e";

  Harness whole(kind.config);
  ASSERT_OK(whole.Open(3));
  for (const auto& batch : batches) ASSERT_TRUE(whole.Feed(batch).ok());
  ASSERT_OK(whole.CloseAll());
  const std::vector<std::string> expected = whole.Strings(emitted_text);
  ASSERT_FALSE(expected.empty());

  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    fmt::format("sluice_window_test_{}_{}", getpid(), kind.name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    Harness h(kind.config, (dir / "state.duckdb").string());
    ASSERT_OK(h.Open(3));
    const size_t half = batches.size() / 2;
    for (size_t i = 0; i < half; ++i) ASSERT_TRUE(h.Feed(batches[i]).ok());
    const int64_t watermark = h.engine().watermark_us();
    const std::vector<std::optional<int64_t>> floors = {h.Floor(0), h.Floor(1), h.Floor(2)};
    EXPECT_NE(watermark, kNoTime);
    EXPECT_TRUE(floors[0] || floors[1] || floors[2]);  // windows are open across the restart

    h.Shut();
    ASSERT_OK(h.Open(3));
    EXPECT_EQ(h.engine().watermark_us(), watermark);
    EXPECT_EQ((std::vector<std::optional<int64_t>>{h.Floor(0), h.Floor(1), h.Floor(2)}), floors);
    for (size_t i = half; i < batches.size(); ++i) {
      auto fed = h.Feed(batches[i]);
      ASSERT_TRUE(fed.ok()) << fed.status().ToString();
    }
    ASSERT_OK(h.CloseAll());
    EXPECT_EQ(h.Strings(emitted_text), expected);
  }
  std::filesystem::remove_all(dir);
}

// Write-behind (pipeline.state with a declarative window): the StateWriter's copy, fed
// each committed batch's and close's changes (rows, DDL, closes replayed by ApplyClose,
// progress), holds exactly the engine's table and watermark, also with windows kept for
// lateness (rows marked emitted) and a rolled-back batch in between.
TEST_P(WindowKindTest, WriteBehindCopyHoldsTheEnginesState) {
  const Kind& kind = GetParam();
  WindowConfig config = kind.config;
  config.allowed_lateness_us = 2 * kMinute;
  Harness h(config);
  h.WriteBehind();
  ASSERT_OK(h.Open(3));
  const std::vector<Row> input = RandomInput(11, 3000, 3, 20 * kSecond);
  int n = 0;
  bool compared_open = false;
  bool kept = false;
  for (const std::vector<Row>& batch : Batches(input, 60)) {
    if (++n == 5) {
      ASSERT_TRUE(h.FeedOnly(batch, /*commit=*/false).ok());  // rolled back
    }
    auto fed = h.Feed(batch);
    ASSERT_TRUE(fed.ok()) << fed.status().ToString();
    if (n % 3 == 0) {
      auto [table, copy] = h.TableAndCopy();
      ASSERT_EQ(table, copy) << "after batch " << n;
      compared_open = compared_open || !table.empty();
      kept = kept || h.Count("SELECT * FROM sluice_window_rows WHERE sluice_emitted") > 0;
    }
  }
  EXPECT_TRUE(compared_open);
  EXPECT_TRUE(kept) << "no comparison saw rows kept for lateness";
  EXPECT_EQ(h.CopiedWatermark(), std::to_string(h.engine().watermark_us()));
  ASSERT_OK(h.CloseAll());
  auto [table, copy] = h.TableAndCopy();
  EXPECT_EQ(table, copy) << "after closing all";
}

INSTANTIATE_TEST_SUITE_P(Kinds, WindowKindTest, ::testing::ValuesIn(Kinds()),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return info.param.name;
                         });

// Partition 0 runs ten minutes ahead of partition 1: windows close when the slower one
// passes them (the watermark is the smallest newest time, minus grace), and none is lost.
TEST(WindowEngineTest, SkewedPartitionsCloseWindowsAtTheSlowestPartition) {
  Kind kind = Kinds()[0];
  Harness h(kind.config);
  ASSERT_OK(h.Open(2));
  std::vector<Row> input = RandomInput(17, 2000, 2, 20 * kSecond);
  for (Row& r : input) {
    if (r.partition == 0) *r.t += 10 * kMinute;
  }
  h.MakeReference(input, kind.reference);
  std::map<int32_t, int64_t> newest;
  int64_t expected = kNoTime;
  int64_t ahead_seen = 0;  // windows partition 0 alone would have closed, not yet emitted
  for (const std::vector<Row>& batch : Batches(input)) {
    ASSERT_TRUE(h.Feed(batch).ok());
    for (const Row& r : batch) {
      auto [it, inserted] = newest.try_emplace(r.partition, *r.t);
      it->second = std::max(it->second, *r.t);
    }
    if (newest.size() == 2)
      expected = std::max(expected, std::min(newest[0], newest[1]) - kind.config.grace_us);
    ASSERT_EQ(h.engine().watermark_us(), expected);
    h.ExpectEmittedUpToWatermark();
    if (expected != kNoTime) {
      ahead_seen = std::max(
          ahead_seen,
          h.Count(fmt::format("SELECT * FROM reference WHERE epoch_us(window_end) > {} AND "
                              "epoch_us(window_end) <= {}",
                              expected, newest[0] - kind.config.grace_us)));
    }
  }
  EXPECT_GT(ahead_seen, 5);
  EXPECT_LT(h.Count(h.Emitted()), h.Count("SELECT * FROM reference"));
  ASSERT_OK(h.CloseAll());
  EXPECT_EQ(h.Diff(h.Emitted(), "SELECT * FROM reference"), "");
}

// allowed_lateness 2m: a late row whose window closed less than that ago is added and the
// window emitted again with it; one later than that is dropped as late and changes nothing.
TEST(WindowEngineTest, LateRowsWithinLatenessReemitAndBeyondAreDropped) {
  WindowConfig c = Config(WindowType::kTumbling);
  c.allowed_lateness_us = 2 * kMinute;
  Harness h(c);
  ASSERT_OK(h.Open(1));
  ASSERT_TRUE(h.Feed({{At(0, 10), "a", 1}, {At(0, 20), "a", 2}}).ok());
  EXPECT_THAT(h.Emissions(), ElementsAre());
  ASSERT_TRUE(h.Feed({{At(1, 30), "a", 4}}).ok());  // watermark 1:30: [0:00, 1:00) closes
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=2 s=3"));

  auto late = h.Feed({{At(0, 30), "a", 8}});  // 1:00 + 2m > 1:30: in time for lateness
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_EQ(late->kept, 1u);
  EXPECT_TRUE(late->dropped.empty());
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=2 s=3", "#2 [0s,60s) a n=3 s=11"));

  ASSERT_TRUE(h.Feed({{At(3, 30), "a", 16}}).ok());  // watermark 3:30: [1:00, 2:00) closes
  EXPECT_EQ(h.engine().watermark_us(), At(3, 30));
  auto mixed = h.Feed({{At(0, 40), "a", 32}, {At(1, 45), "b", 64}});
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  EXPECT_EQ(mixed->kept, 1u);
  ASSERT_EQ(mixed->dropped.size(), 1u);  // 0:40's window ended at 1:00; 1:00 + 2m <= 3:30
  EXPECT_TRUE(mixed->dropped[0].late);
  EXPECT_THAT(mixed->dropped[0].reason, HasSubstr("too late"));
  EXPECT_THAT(mixed->dropped[0].row_json, HasSubstr("32"));
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=2 s=3", "#2 [0s,60s) a n=3 s=11",
                                         "#3 [60s,120s) a n=1 s=4", "#4 [60s,120s) a n=1 s=4",
                                         "#4 [60s,120s) b n=1 s=64"));
}

// A row whose time is NULL, or a VARCHAR that is not a timestamp, is dropped, not as late;
// a VARCHAR that is one is kept.
TEST(WindowEngineTest, RowsWithoutEventTimeAreDroppedNotLate) {
  Harness h(Config(WindowType::kTumbling));
  ASSERT_OK(h.Open(1));
  auto first = h.Feed({{std::nullopt, "a", 1}, {At(0, 10), "a", 2}});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->kept, 1u);
  ASSERT_EQ(first->dropped.size(), 1u);
  EXPECT_FALSE(first->dropped[0].late);
  EXPECT_THAT(first->dropped[0].reason, HasSubstr("ts"));

  auto text = h.FeedSql(
      "SELECT * FROM (VALUES ('2024-01-01 00:00:40+00', 'a', 4::BIGINT), ('not a time', 'a', "
      "8::BIGINT), "
      "(NULL, 'a', 16::BIGINT)) t(ts, k, v)",
      {0, 0, 0});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->kept, 1u);
  ASSERT_EQ(text->dropped.size(), 2u);
  for (const DroppedRow& d : text->dropped) {
    EXPECT_FALSE(d.late);
    EXPECT_THAT(d.reason, HasSubstr("no event time"));
  }
  EXPECT_EQ(h.engine().watermark_us(), At(0, 40));
  ASSERT_OK(h.CloseAll());
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=2 s=6"));
}

// A row stamped 2099 (beyond wall clock + max_future) moves no watermark and closes
// nothing; it is kept and emitted in its window at the end.
TEST(WindowEngineTest, FutureRowKeepsTheWatermarkAndIsEmittedAtTheEnd) {
  Harness h(Config(WindowType::kTumbling));
  ASSERT_OK(h.Open(1));
  h.wall_us = At(6);  // live data: "now" is just after it
  ASSERT_TRUE(h.Feed({{At(0, 10)}, {At(1, 10)}, {At(2, 10)}, {At(5, 10)}}).ok());
  EXPECT_EQ(h.engine().watermark_us(), At(5, 10));
  const std::vector<std::string> before = h.Emissions();
  EXPECT_EQ(before.size(), 3u);

  const int64_t year_2099 = int64_t{4'070'908'800} * kSecond;  // 2099-01-01 00:00:00 UTC
  auto future = h.Feed({{year_2099, "z", 7}});
  ASSERT_TRUE(future.ok()) << future.status().ToString();
  EXPECT_EQ(future->kept, 1u);
  EXPECT_EQ(h.engine().watermark_us(), At(5, 10));
  EXPECT_FALSE(h.engine().CloseDue());
  EXPECT_EQ(h.Emissions(), before);

  ASSERT_TRUE(h.Feed({{At(14, 0)}}).ok());  // within max_future (10m) of the wall clock: counts
  EXPECT_EQ(h.engine().watermark_us(), At(14, 0));
  ASSERT_OK(h.CloseAll());
  EXPECT_EQ(h.Count(fmt::format(
                "SELECT * FROM emitted WHERE k = 'z' AND n = 1 AND epoch_us(window_start) = {}",
                year_2099)),
            1);
}

// Partition 1 is assigned but silent: it holds the watermark back until it has been idle
// for idle_close (steady clock); then windows close from partition 0 alone.
TEST(WindowEngineTest, SilentAssignedPartitionHoldsUntilIdle) {
  WindowConfig c = Config(WindowType::kTumbling);
  c.idle_close_us = 60 * kSecond;
  Harness h(c);
  ASSERT_OK(h.Open(2));  // assigned now
  ASSERT_TRUE(h.Feed({{At(0, 10), "a", 1, 0}, {At(0, 50), "a", 2, 0}}).ok());
  EXPECT_EQ(h.engine().watermark_us(), kNoTime);
  h.steady += std::chrono::seconds(30);
  ASSERT_TRUE(h.Feed({{At(1, 10), "a", 4, 0}}).ok());
  EXPECT_EQ(h.engine().watermark_us(), kNoTime);
  h.steady += std::chrono::seconds(29);  // 59 s since the assignment
  ASSERT_OK(h.Tick());
  EXPECT_EQ(h.engine().watermark_us(), kNoTime);
  EXPECT_THAT(h.Emissions(), ElementsAre());

  h.steady += std::chrono::seconds(1);  // partition 1 idle; partition 0 heard from 30 s ago
  ASSERT_OK(h.Tick());
  EXPECT_EQ(h.engine().watermark_us(), At(1, 10));
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=2 s=3"));

  // Partition 1 speaks again, behind: it holds again but the watermark does not go back.
  ASSERT_TRUE(h.Feed({{At(1, 20), "b", 8, 1}}).ok());
  EXPECT_EQ(h.engine().watermark_us(), At(1, 10));
  ASSERT_TRUE(h.Feed({{At(2, 30), "a", 16, 0}}).ok());
  EXPECT_EQ(h.engine().watermark_us(), At(1, 20));
}

// When every partition is idle the watermark is the newest time seen minus grace.
TEST(WindowEngineTest, AllPartitionsIdleUseTheNewestTime) {
  WindowConfig c = Config(WindowType::kTumbling);
  c.idle_close_us = 60 * kSecond;
  c.grace_us = 5 * kSecond;
  Harness h(c);
  ASSERT_OK(h.Open(2));
  ASSERT_TRUE(h.Feed({{At(10, 0), "a", 1, 0}, {At(5, 0), "a", 2, 1}}).ok());
  EXPECT_EQ(h.engine().watermark_us(), At(4, 55));
  h.steady += std::chrono::seconds(59);
  ASSERT_OK(h.Tick());
  EXPECT_EQ(h.engine().watermark_us(), At(4, 55));
  h.steady += std::chrono::seconds(1);
  ASSERT_OK(h.Tick());
  EXPECT_EQ(h.engine().watermark_us(), At(9, 55));
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [300s,360s) a n=1 s=2"));
  ASSERT_OK(h.CloseAll());
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [300s,360s) a n=1 s=2", "#2 [600s,660s) a n=1 s=1"));
}

// grace 2m: a window [0:00, 1:00) closes when the newest time reaches 3:00, not before;
// older rows and a new partition behind the others never move the watermark back.
TEST(WindowEngineTest, WatermarkNeverMovesBackAndGraceDelaysClosing) {
  WindowConfig c = Config(WindowType::kTumbling);
  c.grace_us = 2 * kMinute;
  Harness h(c);
  ASSERT_OK(h.Open(1));
  ASSERT_TRUE(h.Feed({{At(0, 10), "a", 1}}).ok());
  EXPECT_EQ(h.engine().watermark_us(), At(-2, 10));
  ASSERT_TRUE(h.Feed({{At(2, 59), "b", 2}}).ok());
  EXPECT_EQ(h.engine().watermark_us(), At(0, 59));
  EXPECT_THAT(h.Emissions(), ElementsAre());
  ASSERT_TRUE(h.Feed({{At(3, 0), "b", 4}}).ok());
  EXPECT_EQ(h.engine().watermark_us(), At(1, 0));
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=1 s=1"));

  ASSERT_TRUE(h.Feed({{At(2, 30), "c", 8}}).ok());  // older, within grace
  EXPECT_EQ(h.engine().watermark_us(), At(1, 0));
  auto behind = h.Feed({{At(1, 30), "d", 16, 1}});  // a partition never seen, far behind
  ASSERT_TRUE(behind.ok());
  EXPECT_EQ(behind->kept, 1u);
  EXPECT_EQ(h.engine().watermark_us(), At(1, 0));
  ASSERT_TRUE(h.Feed({{At(4, 5), "a", 32, 0}, {At(4, 0), "a", 64, 1}}).ok());
  EXPECT_EQ(h.engine().watermark_us(), At(2, 0));
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=1 s=1", "#2 [60s,120s) d n=1 s=16"));
}

// Floor: the first offset of the oldest batch whose rows are still in an open window.
TEST(WindowEngineTest, FloorIsTheOldestBatchStillInAnOpenWindow) {
  Harness h(Config(WindowType::kTumbling));
  ASSERT_OK(h.Open(2));
  EXPECT_EQ(h.Floor(0), std::nullopt);
  ASSERT_TRUE(h.Feed({{At(0, 10), "a", 1, 0}, {At(0, 20), "a", 1, 0}}).ok());  // p0 offsets 0, 1
  EXPECT_EQ(h.Floor(0), 0);
  EXPECT_EQ(h.Floor(1), std::nullopt);
  ASSERT_TRUE(h.Feed({{At(0, 50), "a", 1, 0}, {At(0, 55), "a", 1, 1}}).ok());  // p0 2, p1 0
  EXPECT_EQ(h.Floor(0), 0);
  EXPECT_EQ(h.Floor(1), 0);
  ASSERT_TRUE(h.Feed({{At(1, 10), "a", 1, 0}}).ok());  // p0 3; the watermark is p1's 0:55
  EXPECT_EQ(h.engine().watermark_us(), At(0, 55));
  EXPECT_EQ(h.Floor(0), 0);
  ASSERT_TRUE(h.Feed({{At(1, 20), "a", 1, 1}}).ok());  // p1 1; watermark 1:10: [0:00, 1:00) closes
  EXPECT_EQ(h.engine().watermark_us(), At(1, 10));
  EXPECT_EQ(h.Count("SELECT * FROM emitted"), 1);
  // A lower bound: the list keeps one entry per partition between two closes, so the
  // batches before this close share the first one's offset.
  EXPECT_LE(h.Floor(0).value_or(99), 3);
  EXPECT_LE(h.Floor(1).value_or(99), 1);
  ASSERT_TRUE(h.Feed({{At(2, 10), "a", 1, 0}}).ok());  // p0 4, after the close: an entry of its own
  ASSERT_TRUE(h.Feed({{At(2, 20), "a", 1, 1}}).ok());  // p1 2; watermark 2:10: [1:00, 2:00) closes
  EXPECT_EQ(h.Count("SELECT * FROM emitted"), 2);
  EXPECT_EQ(h.Floor(0), 4);
  EXPECT_LE(h.Floor(1).value_or(99), 2);
  ASSERT_OK(h.CloseAll());
  EXPECT_EQ(h.Floor(0), std::nullopt);
  EXPECT_EQ(h.Floor(1), std::nullopt);
}

// The engine's calls on their own, as the runner makes them, over a prepared relation.
Result<uint64_t> AddAndObserve(Harness& h, std::string_view relation, uint64_t generation) {
  std::vector<DroppedRow> dropped;
  ASSIGN_OR_RETURN(uint64_t kept, h.engine().Add(relation, generation, &dropped));
  const SourceRun runs[] = {{kTopic, 0, 1}};
  RETURN_IF_ERROR(h.engine().Observe(relation, generation, runs, h.wall_us, h.steady));
  return kept;
}

TEST(WindowEngineTest, MissingTimeColumnNamesItAndTheColumns) {
  Harness h(Config(WindowType::kTumbling));
  ASSERT_OK(h.Open(1));
  ASSERT_OK(h.conn().Execute(
      fmt::format("CREATE TABLE r AS SELECT make_timestamptz({}) AS t, 'a' AS k, 1 AS v", At(0))));
  auto kept = AddAndObserve(h, "r", 1);
  ASSERT_FALSE(kept.ok());
  EXPECT_THAT(kept.status().message(), HasSubstr("time_column 'ts'"));
  EXPECT_THAT(kept.status().message(), HasSubstr("t, k, v"));
  const SourceRun runs[] = {{kTopic, 0, 1}};
  Status observed = h.engine().Observe("r", 1, runs, h.wall_us, h.steady);
  EXPECT_THAT(observed.message(), HasSubstr("'ts'"));
  EXPECT_THAT(observed.message(), HasSubstr("the batch"));
}

TEST(WindowEngineTest, NonTimeTypeIsAnErrorNamingTheType) {
  Harness h(Config(WindowType::kTumbling));
  ASSERT_OK(h.Open(1));
  ASSERT_OK(h.conn().Execute("CREATE TABLE r AS SELECT 5::INTEGER AS ts, 'a' AS k"));
  auto kept = AddAndObserve(h, "r", 1);
  ASSERT_FALSE(kept.ok());
  EXPECT_THAT(kept.status().message(), HasSubstr("'ts' is INTEGER"));
}

TEST(WindowEngineTest, ResultColumnsNamedLikeTheStateAreErrors) {
  Harness h(Config(WindowType::kTumbling));
  ASSERT_OK(h.Open(1));
  const std::string ts = fmt::format("make_timestamptz({}) AS ts", At(0, 10));
  uint64_t generation = 0;
  for (std::string_view column : {"window_start", "Window_End", "sluice_x"}) {
    ASSERT_OK(h.conn().Execute(
        fmt::format("CREATE OR REPLACE TABLE r AS SELECT {}, 1 AS {}", ts, column)));
    auto kept = AddAndObserve(h, "r", ++generation);
    ASSERT_FALSE(kept.ok()) << column;
    EXPECT_THAT(kept.status().message(), HasSubstr(std::string(column)));
  }
  // The engine is not stuck on them.
  ASSERT_OK(h.conn().Execute(fmt::format("CREATE OR REPLACE TABLE r AS SELECT {}, 1 AS v", ts)));
  auto kept = AddAndObserve(h, "r", ++generation);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, 1u);
}

// emit_sql fails (it reads a table not there yet): Close is an error naming emit_sql and
// where it was written; rolled back and restored, the windows are still there, and once the
// table exists they are emitted, each once.
TEST(WindowEngineTest, FailingEmitSqlIsAnErrorAndLosesNothing) {
  WindowConfig c = Config(WindowType::kTumbling);
  c.emit_sql =
      "SELECT window_start, window_end, k, count(*) AS n, sum(v) AS s FROM closed "
      "WHERE k IN (SELECT k FROM wanted) GROUP BY ALL;";
  Harness h(c);
  ASSERT_OK(h.Open(1));
  ASSERT_TRUE(
      h.FeedOnly({{At(0, 10), "a", 1}, {At(0, 20), "b", 2}, {At(1, 30), "a", 4}}, true).ok());
  EXPECT_TRUE(h.engine().CloseDue());
  Status st = h.Tick();
  EXPECT_THAT(st.message(), HasSubstr("t.yml:20: emit_sql"));
  EXPECT_THAT(st.message(), HasSubstr("wanted"));
  EXPECT_TRUE(h.engine().CloseDue());
  st = h.Tick();  // again: the same
  EXPECT_THAT(st.message(), HasSubstr("emit_sql"));

  ASSERT_OK(h.conn().Execute("CREATE TABLE wanted AS SELECT * FROM (VALUES ('a'), ('b')) t(k)"));
  ASSERT_OK(h.Tick());
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=1 s=1", "#1 [0s,60s) b n=1 s=2"));
  ASSERT_OK(h.CloseAll());
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=1 s=1", "#1 [0s,60s) b n=1 s=2",
                                         "#2 [60s,120s) a n=1 s=4"));
}

// The sink fails after writing: the Close is rolled back with what the sink wrote, and the
// next Close emits the same windows, once.
TEST(WindowEngineTest, FailingSinkIsAnErrorAndLosesNothing) {
  Harness h(Config(WindowType::kSession));
  ASSERT_OK(h.Open(1));
  ASSERT_TRUE(
      h.FeedOnly({{At(0, 10), "a", 1}, {At(0, 20), "b", 2}, {At(5, 0), "a", 4}}, true).ok());
  h.fail_emits = 1;
  Status st = h.Tick();
  EXPECT_THAT(st.message(), HasSubstr("on purpose"));
  EXPECT_THAT(h.Emissions(), ElementsAre());
  ASSERT_OK(h.Tick());
  EXPECT_THAT(h.Emissions(), ElementsAre("#2 [10s,140s) a n=1 s=1", "#2 [10s,140s) b n=1 s=2"));
  ASSERT_OK(h.CloseAll());
  EXPECT_THAT(h.Emissions(), ElementsAre("#2 [10s,140s) a n=1 s=1", "#2 [10s,140s) b n=1 s=2",
                                         "#3 [300s,420s) a n=1 s=4"));
}

// Sessions with allowed_lateness: a late row re-emits its (now longer) session; at the end
// only the sessions with rows not yet emitted are emitted.
TEST(WindowEngineTest, LateRowReemitsItsSession) {
  WindowConfig c = Config(WindowType::kSession);
  c.gap_us = kMinute;
  c.allowed_lateness_us = 5 * kMinute;
  Harness h(c);
  ASSERT_OK(h.Open(1));
  {
    auto f = h.Feed({{At(0, 0), "a", 1}, {At(0, 30), "a", 2}});
    ASSERT_TRUE(f.ok()) << f.status().ToString();
  }
  ASSERT_TRUE(h.Feed({{At(3, 0), "a", 4}}).ok());
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,90s) a n=2 s=3"));
  auto late = h.Feed({{At(0, 45), "a", 8}});
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_EQ(late->kept, 1u);
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,90s) a n=2 s=3", "#2 [0s,105s) a n=3 s=11"));
  ASSERT_OK(h.CloseAll());
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,90s) a n=2 s=3", "#2 [0s,105s) a n=3 s=11",
                                         "#3 [180s,240s) a n=1 s=4"));
}

// Hopping 5m/1m with allowed_lateness 1m: a late row goes into those of its windows that
// closed less than 1m ago (emitted again) or are open, and into no other.
TEST(WindowEngineTest, LateRowInHoppingWindowsReemitsOnlyWindowsWithinLateness) {
  WindowConfig c = Config(WindowType::kHopping);
  c.allowed_lateness_us = kMinute;
  Harness h(c);
  ASSERT_OK(h.Open(1));
  ASSERT_TRUE(h.Feed({{At(0, 30), "a", 1}}).ok());
  ASSERT_TRUE(h.Feed({{At(5, 30), "a", 2}}).ok());  // watermark 5:30: 0:30's five windows close
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [-240s,60s) a n=1 s=1", "#1 [-180s,120s) a n=1 s=1",
                                         "#1 [-120s,180s) a n=1 s=1", "#1 [-60s,240s) a n=1 s=1",
                                         "#1 [0s,300s) a n=1 s=1"));
  auto late = h.Feed({{At(0, 45), "a", 4}});  // of its windows only [0:00, 5:00) is within 1m
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_EQ(late->kept, 1u);
  EXPECT_THAT(h.Emissions(), ::testing::Contains("#2 [0s,300s) a n=2 s=5"));
  EXPECT_EQ(h.Emissions().size(), 6u);

  ASSERT_TRUE(h.Feed({{At(6, 30), "a", 16}}).ok());  // [1:00, 6:00) closes; [0:00, 5:00) goes
  EXPECT_EQ(h.Emissions().back(), "#3 [60s,360s) a n=1 s=2");
  auto beyond = h.Feed({{At(0, 50), "a", 32}});  // its last window ended 5:00; 5:00 + 1m <= 6:30
  ASSERT_TRUE(beyond.ok()) << beyond.status().ToString();
  EXPECT_EQ(beyond->kept, 0u);
  ASSERT_EQ(beyond->dropped.size(), 1u);
  EXPECT_TRUE(beyond->dropped[0].late);
  EXPECT_EQ(h.Emissions().size(), 7u);
}

// TIMESTAMP (read as UTC) and DATE time columns.
TEST(WindowEngineTest, TimestampAndDateColumnsAreEventTimes) {
  Harness h(Config(WindowType::kTumbling));
  ASSERT_OK(h.Open(1));
  ASSERT_TRUE(
      h.FeedSql("SELECT TIMESTAMP '2024-01-01 00:00:10' AS ts, 'a' AS k, 1::BIGINT AS v", {0})
          .ok());
  ASSERT_TRUE(
      h.FeedSql("SELECT TIMESTAMP '2024-01-01 00:01:10' AS ts, 'a' AS k, 2::BIGINT AS v", {0})
          .ok());
  EXPECT_EQ(h.engine().watermark_us(), At(1, 10));
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=1 s=1"));
  ASSERT_TRUE(h.FeedSql("SELECT DATE '2024-01-02' AS ts, 'b' AS k, 4::BIGINT AS v", {0}).ok());
  EXPECT_EQ(h.engine().watermark_us(), At(24 * 60));
  EXPECT_EQ(h.Emissions().back(), "#2 [60s,120s) a n=1 s=2");
  ASSERT_OK(h.CloseAll());
  EXPECT_EQ(h.Emissions().back(), "#3 [86400s,86460s) b n=1 s=4");
}

// A session row is judged late by the session it joins, not by its own [t, t + gap): here
// it falls within `gap` of an open session of its key (which ends at 2:00, after the
// watermark 1:30), so it is kept and the session starts at 0:20.
TEST(WindowEngineTest, LateRowJoiningAnOpenSessionIsKept) {
  WindowConfig c = Config(WindowType::kSession);
  c.gap_us = kMinute;
  c.key = {"k"};
  Harness h(c);
  ASSERT_OK(h.Open(1));
  ASSERT_TRUE(h.Feed({{At(1, 0), "a", 1}, {At(1, 30), "b", 2}}).ok());
  EXPECT_EQ(h.engine().watermark_us(), At(1, 30));
  auto late = h.Feed({{At(0, 20), "a", 4}});  // 1:00 - 0:20 < gap: joins a's open session
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_EQ(late->kept, 1u);
  EXPECT_TRUE(late->dropped.empty()) << late->dropped.front().reason;
  ASSERT_OK(h.CloseAll());
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [20s,120s) a n=2 s=5", "#1 [90s,150s) b n=1 s=2"));
}

// Close(true) does not emit again the tumbling or hopping windows already emitted and only
// kept for allowed_lateness (sessions: their NOT sluice_done filter does the same).
TEST(WindowEngineTest, CloseAllDoesNotReemitWindowsKeptForLateness) {
  WindowConfig c = Config(WindowType::kTumbling);
  c.allowed_lateness_us = 2 * kMinute;
  Harness h(c);
  ASSERT_OK(h.Open(1));
  ASSERT_TRUE(h.Feed({{At(0, 10), "a", 1}, {At(1, 30), "a", 2}}).ok());
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=1 s=1"));
  ASSERT_OK(h.CloseAll());
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=1 s=1", "#2 [60s,120s) a n=1 s=2"));
}

// The handler's result gains a column after windows were emitted (the batch's inferred
// schema changed): the state takes the column, and closing goes on.
TEST(WindowEngineTest, ResultGainingAColumnKeepsEmitting) {
  Harness h(Config(WindowType::kTumbling));
  ASSERT_OK(h.Open(1));
  ASSERT_TRUE(h.Feed({{At(0, 10), "a", 1}, {At(1, 10), "a", 2}}).ok());
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=1 s=1"));
  auto wider =
      h.FeedSql(fmt::format("SELECT make_timestamptz({}) AS ts, 'b' AS k, 4::BIGINT AS v, 'x' AS w",
                            At(2, 10)),
                {0});
  ASSERT_TRUE(wider.ok()) << wider.status().ToString();
  ASSERT_OK(h.CloseAll());
  EXPECT_THAT(h.Emissions(), ElementsAre("#1 [0s,60s) a n=1 s=1", "#2 [60s,120s) a n=1 s=2",
                                         "#3 [120s,180s) b n=1 s=4"));
}

}  // namespace
}  // namespace sluice::pipeline
