// LocalSession against a real QueryServer in process: a trusted session over a socket
// pair (no password even where the server asks one of TCP clients), results streamed by
// callbacks, errors with their position, a cancel from another thread, a stop from the
// row callback, and the session still usable after each.
#include "query/local_session.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "query/server.h"

namespace sluice::query {
namespace {

class LocalSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sluice-local-session-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    QueryServerOptions o;
    o.port = 0;
    o.memory_limit_bytes = 256 << 20;
    o.threads = 1;
    o.temp_directory = (dir_ / "spill").string();
    o.users = {{"alice", "alice-secret"}};  // TCP clients must give a password
    o.timeout_ms = 60'000;                  // a cancel that failed ends the test anyway
    o.max_running = 1;                      // a second statement waits for its turn
    auto s = QueryServer::Start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }
  void TearDown() override {
    if (server_) server_->Stop();
    std::filesystem::remove_all(dir_);
  }

  // Runs `sql`, collecting what the callbacks saw.
  struct Seen {
    std::vector<std::vector<LocalColumn>> columns;
    std::vector<std::vector<std::optional<std::string>>> rows;
    std::vector<std::string> tags;
    LocalOutcome outcome;
  };
  Seen RunAll(LocalSession& s, std::string_view sql) {
    Seen seen;
    LocalHandler h;
    h.on_columns = [&](const std::vector<LocalColumn>& c) { seen.columns.push_back(c); };
    h.on_row = [&](const std::vector<std::optional<std::string_view>>& values) {
      std::vector<std::optional<std::string>> row;
      for (const auto& v : values) {
        row.push_back(v ? std::optional<std::string>(std::string(*v)) : std::nullopt);
      }
      seen.rows.push_back(std::move(row));
      return true;
    };
    h.on_complete = [&](std::string_view tag) { seen.tags.emplace_back(tag); };
    auto r = s.Run(sql, h);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) seen.outcome = *r;
    return seen;
  }

  std::filesystem::path dir_;
  std::unique_ptr<QueryServer> server_;
};

TEST_F(LocalSessionTest, RunsAsTheTrustedUserWithoutAPassword) {
  auto s = LocalSession::Open(*server_, "alice", "", "console");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Seen seen = RunAll(**s, "SELECT current_user AS u, 42::BIGINT AS n, NULL::VARCHAR AS nothing");
  ASSERT_TRUE(seen.outcome.ok) << seen.outcome.message;
  ASSERT_EQ(seen.columns.size(), 1u);
  ASSERT_EQ(seen.columns[0].size(), 3u);
  EXPECT_EQ(seen.columns[0][1].name, "n");
  EXPECT_EQ(seen.columns[0][1].type, "int8");
  EXPECT_TRUE(seen.columns[0][1].numeric);
  EXPECT_FALSE(seen.columns[0][0].numeric);
  ASSERT_EQ(seen.rows.size(), 1u);
  EXPECT_EQ(seen.rows[0][1], "42");
  EXPECT_EQ(seen.rows[0][2], std::nullopt);
  EXPECT_EQ(seen.tags, std::vector<std::string>{"SELECT 1"});
  EXPECT_EQ(server_->session_count(), 1);
  s->reset();
  for (int i = 0; i < 100 && server_->session_count() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(server_->session_count(), 0) << "the session ends with its LocalSession";
}

TEST_F(LocalSessionTest, EveryStatementAndTheFirstErrorWithItsPosition) {
  auto s = LocalSession::Open(*server_, "alice", "", "console");
  ASSERT_TRUE(s.ok());
  Seen seen = RunAll(**s, "SELECT 1; SELECT range FROM range(3)");
  ASSERT_TRUE(seen.outcome.ok);
  EXPECT_EQ(seen.columns.size(), 2u);
  EXPECT_EQ(seen.rows.size(), 4u);
  EXPECT_EQ(seen.tags, (std::vector<std::string>{"SELECT 1", "SELECT 3"}));

  seen = RunAll(**s, "SELECT * FROM no_such_table");
  EXPECT_FALSE(seen.outcome.ok);
  EXPECT_EQ(seen.outcome.sqlstate, "42P01");
  EXPECT_NE(seen.outcome.message.find("no_such_table"), std::string::npos);
  EXPECT_EQ(seen.outcome.position, 15);

  // The session goes on after an error, and an empty query is no error.
  seen = RunAll(**s, " ; ");
  EXPECT_TRUE(seen.outcome.ok);
  seen = RunAll(**s, "SELECT 2");
  ASSERT_EQ(seen.rows.size(), 1u);
  EXPECT_EQ(seen.rows[0][0], "2");
}

TEST_F(LocalSessionTest, CancelFromAnotherThreadInterruptsTheStatement) {
  auto s = LocalSession::Open(*server_, "alice", "", "console");
  ASSERT_TRUE(s.ok());
  std::atomic<bool> answered{false};
  std::thread canceller([&] {
    // Until the query answers: a cancel that lands before it started is ignored.
    while (!answered.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      (*s)->Cancel();
    }
  });
  Seen seen = RunAll(**s, "SELECT count(*) FROM range(1000000000) a, range(1000) b");
  answered = true;
  canceller.join();
  EXPECT_FALSE(seen.outcome.ok);
  EXPECT_EQ(seen.outcome.sqlstate, "57014");
  // The canceller may have called once more after the answer: a cancel between runs stops
  // the next run (the console's DELETE may come before its query is sent). The one after
  // runs.
  seen = RunAll(**s, "SELECT 3");
  if (!seen.outcome.ok) EXPECT_EQ(seen.outcome.sqlstate, "57014");
  seen = RunAll(**s, "SELECT 4");
  ASSERT_EQ(seen.rows.size(), 1u);
  EXPECT_EQ(seen.rows[0][0], "4");
}

TEST_F(LocalSessionTest, ACancelStopsAStatementWaitingForItsTurn) {
  // max_running 1: `busy` holds the only turn while `waiting`'s CREATE TABLE waits for it.
  auto busy = LocalSession::Open(*server_, "alice", "", "console");
  auto waiting = LocalSession::Open(*server_, "alice", "", "console");
  ASSERT_TRUE(busy.ok() && waiting.ok());
  std::thread hog(
      [&] { RunAll(**busy, "SELECT count(*) FROM range(1000000000) a, range(1000) b"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    (*waiting)->Cancel();
  });
  Seen seen = RunAll(**waiting, "CREATE TABLE q AS SELECT 42 AS answer");
  canceller.join();
  EXPECT_FALSE(seen.outcome.ok);
  EXPECT_EQ(seen.outcome.sqlstate, "57014") << seen.outcome.message;
  (*busy)->Cancel();
  hog.join();
  // It never ran: no table, and the session goes on.
  seen = RunAll(**waiting, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'q'");
  ASSERT_EQ(seen.rows.size(), 1u);
  EXPECT_EQ(seen.rows[0][0], "0");
  // A cancel before a run (the console's DELETE can come before its query is sent) stops
  // that run, and only that one.
  (*waiting)->Cancel();
  seen = RunAll(**waiting, "SELECT 5");
  EXPECT_EQ(seen.outcome.sqlstate, "57014");
  seen = RunAll(**waiting, "SELECT 6");
  EXPECT_TRUE(seen.outcome.ok) << seen.outcome.message;
  ASSERT_EQ(seen.rows.size(), 1u);
}

TEST_F(LocalSessionTest, TheRowCallbackStopsARun) {
  auto s = LocalSession::Open(*server_, "alice", "", "console");
  ASSERT_TRUE(s.ok());
  int rows = 0;
  LocalHandler h;
  h.on_row = [&](const std::vector<std::optional<std::string_view>>&) { return ++rows < 10; };
  auto r = (*s)->Run("SELECT * FROM range(100000000)", h);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->stopped);
  EXPECT_EQ(rows, 10);
  Seen seen = RunAll(**s, "SELECT 4");
  ASSERT_EQ(seen.rows.size(), 1u);
  EXPECT_EQ(seen.rows[0][0], "4");
}

TEST_F(LocalSessionTest, AfterACutTheNextStatementsAreHandedOn) {
  auto s = LocalSession::Open(*server_, "alice", "", "console");
  ASSERT_TRUE(s.ok());
  // The first result is small: it has ended before the cancel, and the next statement runs
  // and is reported (or is the one the cancel stopped: then its 57014 is).
  std::vector<std::string> tags;
  LocalHandler h;
  h.on_row = [&](const std::vector<std::optional<std::string_view>>&) { return false; };
  h.on_complete = [&](std::string_view tag) { tags.emplace_back(tag); };
  auto r = (*s)->Run("SELECT * FROM range(3); CREATE TABLE after_cut AS SELECT 1 AS x", h);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stopped);
  // The cut SELECT's own tag is never handed on (its caller says it was cut).
  const bool reported = (tags.size() == 1 && tags[0] != "SELECT 3" && r->ok) ||
                        (tags.empty() && !r->ok && r->sqlstate == "57014");
  EXPECT_TRUE(reported) << (tags.empty() ? std::string("no tag") : tags[0]) << ", error "
                        << r->sqlstate;
}

TEST_F(LocalSessionTest, AStoppedServerRefusesNewSessions) {
  server_->Stop();
  auto s = LocalSession::Open(*server_, "alice", "", "console");
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace sluice::query
