// ChunkFeed: a query on one thread reads what another pushes, in order, until the feed is
// closed; an abandoned feed fails the query; a reader that ended fails the pushes.
#include "duck/chunk_feed.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

namespace sluice::duck {
namespace {

class ChunkFeedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::Open({.threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().message();
    db_ = std::move(*db);
    for (auto* c : {&pusher_, &reader_}) {
      auto conn = Connection::Open(*db_);
      ASSERT_TRUE(conn.ok()) << conn.status().message();
      *c = std::move(*conn);
    }
    auto feed = ChunkFeed::Create(*pusher_, /*max_queued_chunks=*/2);
    ASSERT_TRUE(feed.ok()) << feed.status().message();
    feed_ = *feed;
    path_ = (std::filesystem::path(::testing::TempDir()) /
             fmt::format("sluice_chunk_feed_{}.parquet", ::getpid()))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // Rows [from, to) as (i BIGINT, s VARCHAR), from the pusher's connection.
  QueryResult Rows(int64_t from, int64_t to) {
    auto r = pusher_->Query(
        fmt::format("SELECT i::BIGINT AS i, 'row ' || i || repeat('.', 20) AS s FROM range({}, {}) "
                    "t(i)",
                    from, to));
    EXPECT_TRUE(r.ok()) << r.status().message();
    return std::move(*r);
  }

  void OpenFeed() {
    std::vector<LogicalType> types;
    types.push_back(LogicalType::BigInt());
    types.push_back(LogicalType::Varchar());
    feed_->Open({"i", "s"}, types);
  }

  // Runs COPY (feed) TO path on a thread of its own; its status when it ends.
  std::thread Copy(Status* out) {
    return std::thread([this, out] {
      *out = reader_->Execute(fmt::format("COPY (SELECT * FROM {}()) TO '{}' (FORMAT parquet)",
                                          feed_->function_name(), path_));
      feed_->ReaderGone(out->ok() ? "done" : out->message());
    });
  }

  std::unique_ptr<Database> db_;
  std::unique_ptr<Connection> pusher_, reader_;
  std::shared_ptr<ChunkFeed> feed_;
  std::string path_;
};

TEST_F(ChunkFeedTest, AQueryReadsEveryPushedRowInOrderUntilClosed) {
  OpenFeed();
  Status copied;
  std::thread reader = Copy(&copied);
  // More chunks than the queue holds: pushes wait for the reader.
  int64_t at = 0;
  for (int64_t n : {1, 5000, 0, 2048, 70000, 3}) {
    ASSERT_TRUE(feed_->Push(Rows(at, at + n)).ok());
    at += n;
  }
  EXPECT_EQ(feed_->rows(), static_cast<uint64_t>(at));
  feed_->Close();
  reader.join();
  ASSERT_TRUE(copied.ok()) << copied.message();
  auto check = pusher_->QueryText(
      fmt::format("SELECT count(*), sum(i), bool_and(s = 'row ' || i || repeat('.', 20)), "
                  "bool_and(i = rn - 1) FROM (SELECT *, row_number() OVER () AS rn FROM '{}')",
                  path_));
  ASSERT_TRUE(check.ok()) << check.status().message();
  EXPECT_EQ((*check)[0][0], std::to_string(at));
  EXPECT_EQ((*check)[0][1], std::to_string(at * (at - 1) / 2));
  EXPECT_EQ((*check)[0][2], "true");
  EXPECT_EQ((*check)[0][3], "true") << "rows in push order";

  // A second stream over the same function.
  OpenFeed();
  reader = Copy(&copied);
  ASSERT_TRUE(feed_->Push(Rows(0, 10)).ok());
  feed_->Close();
  reader.join();
  ASSERT_TRUE(copied.ok()) << copied.message();
  check = pusher_->QueryText(fmt::format("SELECT count(*) FROM '{}'", path_));
  ASSERT_TRUE(check.ok());
  EXPECT_EQ((*check)[0][0], "10");
}

TEST_F(ChunkFeedTest, AbandoningFailsTheReadingQuery) {
  OpenFeed();
  Status copied;
  std::thread reader = Copy(&copied);
  ASSERT_TRUE(feed_->Push(Rows(0, 100)).ok());
  feed_->Abandon("disk on fire");
  reader.join();
  EXPECT_FALSE(copied.ok());
  EXPECT_NE(copied.message().find("disk on fire"), std::string::npos) << copied.message();
  Status pushed = feed_->Push(Rows(0, 1));
  EXPECT_FALSE(pushed.ok());
}

TEST_F(ChunkFeedTest, PushesFailOnceTheReaderHasEnded) {
  OpenFeed();
  Status copied;
  // A reader that fails at once: its target cannot be written.
  std::thread reader([&] {
    copied =
        reader_->Execute(fmt::format("COPY (SELECT * FROM {}()) TO '/nonexistent/dir/x.parquet' "
                                     "(FORMAT parquet)",
                                     feed_->function_name()));
    feed_->ReaderGone(copied.message());
  });
  // Pushes fill the queue, then fail rather than wait for a reader that is gone.
  Status pushed;
  for (int i = 0; i < 10 && pushed.ok(); ++i) pushed = feed_->Push(Rows(0, 5000));
  reader.join();
  EXPECT_FALSE(copied.ok());
  EXPECT_FALSE(pushed.ok());
}

TEST_F(ChunkFeedTest, AFeedWithoutAnOpenStreamRefusesToBind) {
  Status st = reader_->Execute(fmt::format("SELECT * FROM {}()", feed_->function_name()));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no open stream"), std::string::npos) << st.message();
  EXPECT_FALSE(feed_->Push(Rows(0, 1)).ok());
}

}  // namespace
}  // namespace sluice::duck
