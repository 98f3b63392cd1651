#include "net/transport.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "storage/testing/files.h"

namespace sluice::net {
namespace {

class TransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds_), 0);
    a_ = MakePlaintext(fds_[0]);
    b_ = MakePlaintext(fds_[1]);
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  std::string ReadAll(Transport& t, size_t want) {
    std::string out;
    char buf[4096];
    while (out.size() < want) {
      IoResult r = t.Read(buf, sizeof(buf));
      if (!r.done()) break;
      out.append(buf, r.bytes);
    }
    return out;
  }

  int fds_[2] = {-1, -1};
  std::unique_ptr<Transport> a_, b_;
};

TEST_F(TransportTest, WritevThenReadCarriesTheBytesInOrder) {
  EXPECT_EQ(a_->name(), "plaintext");
  std::string x = "hello ", y = "world";
  iovec iov[2] = {{x.data(), x.size()}, {y.data(), y.size()}};
  IoResult w = a_->Writev(iov, 2);
  ASSERT_TRUE(w.done());
  EXPECT_EQ(w.bytes, 11u);
  ASSERT_TRUE(a_->Write("!", 1).done());
  EXPECT_EQ(ReadAll(*b_, 12), "hello world!");
}

TEST_F(TransportTest, NothingToReadIsWantReadAndAClosedPeerIsClosed) {
  char buf[16];
  EXPECT_EQ(b_->Read(buf, sizeof(buf)).state, IoResult::State::kWantRead);
  ::shutdown(fds_[0], SHUT_WR);
  EXPECT_EQ(b_->Read(buf, sizeof(buf)).state, IoResult::State::kClosed);
}

TEST_F(TransportTest, AFullSocketIsWantWriteAndAGonePeerAnError) {
  std::string chunk(1 << 16, 'x');
  IoResult r;
  do {
    r = a_->Write(chunk.data(), chunk.size());
  } while (r.done());
  EXPECT_EQ(r.state, IoResult::State::kWantWrite);
  b_.reset();
  ::close(fds_[1]);
  fds_[1] = -1;
  r = a_->Write("x", 1);  // no SIGPIPE: the test would die of it
  EXPECT_EQ(r.state, IoResult::State::kError);
  EXPECT_EQ(r.err, EPIPE);
}

TEST_F(TransportTest, SendFileMovesAFilesBytesFromAnOffset) {
  ASSERT_TRUE(a_->CanSendFile());
  storage::testing::TempDir dir("sluice-net");
  std::string path = dir.path() + "/f";
  storage::testing::WriteFileBytes(path, std::vector<uint8_t>{'0', '1', '2', '3', '4', '5', '6'});
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  IoResult r = a_->SendFile(fd, 2, 4);
  ASSERT_TRUE(r.done());
  EXPECT_EQ(r.bytes, 4u);
  EXPECT_EQ(ReadAll(*b_, 4), "2345");
  IoResult past = a_->SendFile(fd, 7, 4);  // the file ends there
  EXPECT_TRUE(past.done());
  EXPECT_EQ(past.bytes, 0u);
  ::close(fd);
}

}  // namespace
}  // namespace sluice::net
