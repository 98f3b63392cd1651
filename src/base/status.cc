#include "base/status.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sluice {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kAlreadyExists:
      return "AlreadyExists";
    case StatusCode::kOutOfRange:
      return "OutOfRange";
    case StatusCode::kCorruption:
      return "Corruption";
    case StatusCode::kIOError:
      return "IOError";
    case StatusCode::kResourceExhausted:
      return "ResourceExhausted";
    case StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case StatusCode::kUnimplemented:
      return "Unimplemented";
    case StatusCode::kInternal:
      return "Internal";
    case StatusCode::kAborted:
      return "Aborted";
    case StatusCode::kUnavailable:
      return "Unavailable";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return fmt::format("{}: {}", StatusCodeName(code_), message_);
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, fmt::format("{}: {}", context, message_));
}

Status ErrnoError(std::string_view op, std::string_view path, int err) {
  return Status(StatusCode::kIOError, fmt::format("{} {}: {}", op, path, std::strerror(err)));
}

void AssertionFailed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "sluice: assertion failed: %s at %s:%d\n", cond, file, line);
  std::abort();
}

}  // namespace sluice
