#include "base/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace sluice {

Status NotifyServiceManager(std::string_view state) {
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env == nullptr || env[0] == '\0') return Status::OK();
  const std::string_view name = env;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if ((name[0] != '/' && name[0] != '@') || name.size() >= sizeof(addr.sun_path)) {
    return InvalidArgumentError("NOTIFY_SOCKET '{}' is not a socket path or an abstract name",
                                name);
  }
  std::memcpy(addr.sun_path, name.data(), name.size());
  if (name[0] == '@') addr.sun_path[0] = '\0';  // abstract: no file
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return IOError("NOTIFY_SOCKET: socket: {}", std::strerror(errno));
  ssize_t sent;
  do {
    sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                    reinterpret_cast<const sockaddr*>(&addr), len);
  } while (sent < 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (sent < 0) return IOError("NOTIFY_SOCKET {}: {}", name, std::strerror(err));
  return Status::OK();
}

}  // namespace sluice
