#include "base/service_notify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace sluice {
namespace {

// A datagram socket standing in for systemd's, bound to `name` (a path or "@abstract").
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& name) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.data(), name.size());
    if (name[0] == '@') addr.sun_path[0] = '\0';
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0;
    timeval tv{2, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~NotifySocket() { ::close(fd_); }
  bool bound() const { return bound_; }
  std::string Receive() {
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    return n < 0 ? std::string("<nothing>") : std::string(buf, static_cast<size_t>(n));
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

class ServiceNotifyTest : public testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("NOTIFY_SOCKET");
    if (old != nullptr) saved_ = old;
  }
  void TearDown() override {
    if (saved_.empty()) {
      ::unsetenv("NOTIFY_SOCKET");
    } else {
      ::setenv("NOTIFY_SOCKET", saved_.c_str(), 1);
    }
  }
  std::string saved_;
};

TEST_F(ServiceNotifyTest, WithoutTheVariableNothingIsSent) {
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(NotifyServiceManager("READY=1").ok());
  ::setenv("NOTIFY_SOCKET", "", 1);
  EXPECT_TRUE(NotifyServiceManager("READY=1").ok());
}

TEST_F(ServiceNotifyTest, SendsTheStateToAPathSocket) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("sluice-notify-" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove(path);
  NotifySocket sock(path);
  ASSERT_TRUE(sock.bound());
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  ASSERT_TRUE(NotifyServiceManager("READY=1\nSTATUS=serving").ok());
  EXPECT_EQ(sock.Receive(), "READY=1\nSTATUS=serving");
  ASSERT_TRUE(NotifyServiceManager("STOPPING=1").ok());
  EXPECT_EQ(sock.Receive(), "STOPPING=1");
  std::filesystem::remove(path);
}

TEST_F(ServiceNotifyTest, SendsToAnAbstractSocket) {
  const std::string name = "@sluice-notify-test-" + std::to_string(::getpid());
  NotifySocket sock(name);
  ASSERT_TRUE(sock.bound());
  ::setenv("NOTIFY_SOCKET", name.c_str(), 1);
  ASSERT_TRUE(NotifyServiceManager("READY=1").ok());
  EXPECT_EQ(sock.Receive(), "READY=1");
}

TEST_F(ServiceNotifyTest, ABadOrMissingSocketIsAnError) {
  ::setenv("NOTIFY_SOCKET", "relative/path", 1);
  EXPECT_EQ(NotifyServiceManager("READY=1").code(), StatusCode::kInvalidArgument);
  ::setenv("NOTIFY_SOCKET", std::string(200, '/').c_str(), 1);
  EXPECT_EQ(NotifyServiceManager("READY=1").code(), StatusCode::kInvalidArgument);
  ::setenv("NOTIFY_SOCKET", "/nonexistent/sluice/notify", 1);
  Status st = NotifyServiceManager("READY=1");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent/sluice/notify"), std::string::npos);
}

}  // namespace
}  // namespace sluice
