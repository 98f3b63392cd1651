// Status and Result<T>: the outcome of every fallible call in sluice.
//
// A Status is OK or an error code with a message that says what was wrong and where
// ("segment 00000000000000000000.log at byte 4096: batch CRC mismatch"). Result<T> is a
// value or a non-OK Status. Both are [[nodiscard]]; propagate with RETURN_IF_ERROR and
// ASSIGN_OR_RETURN.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace sluice {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong (bad batch, bad config value)
  kNotFound,
  kAlreadyExists,
  kOutOfRange,  // an offset or position outside what exists
  kCorruption,  // bytes on disk are not what was written
  kIOError,     // the operating system refused (errno in the message)
  kResourceExhausted,
  kFailedPrecondition,
  kUnimplemented,
  kInternal,
  kAborted,
  kUnavailable,  // a remote service failed: whether it acted on the request is unknown
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "Corruption: <message>", or "OK".
  std::string ToString() const;

  // A copy with "context: " put in front of the message.
  Status WithContext(std::string_view context) const;

  bool operator==(const Status& other) const = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// XxxError(fmt, args...) builds a Status with code kXxx from a fmt format string.
#define SLUICE_STATUS_FACTORY(Name, code)                                         \
  template <typename... Args>                                                     \
  Status Name(fmt::format_string<Args...> f, Args&&... args) {                    \
    return Status(StatusCode::code, fmt::format(f, std::forward<Args>(args)...)); \
  }
SLUICE_STATUS_FACTORY(InvalidArgumentError, kInvalidArgument)
SLUICE_STATUS_FACTORY(NotFoundError, kNotFound)
SLUICE_STATUS_FACTORY(AlreadyExistsError, kAlreadyExists)
SLUICE_STATUS_FACTORY(OutOfRangeError, kOutOfRange)
SLUICE_STATUS_FACTORY(CorruptionError, kCorruption)
SLUICE_STATUS_FACTORY(IOError, kIOError)
SLUICE_STATUS_FACTORY(ResourceExhaustedError, kResourceExhausted)
SLUICE_STATUS_FACTORY(FailedPreconditionError, kFailedPrecondition)
SLUICE_STATUS_FACTORY(UnimplementedError, kUnimplemented)
SLUICE_STATUS_FACTORY(InternalError, kInternal)
SLUICE_STATUS_FACTORY(AbortedError, kAborted)
SLUICE_STATUS_FACTORY(UnavailableError, kUnavailable)
#undef SLUICE_STATUS_FACTORY

// An IOError naming the operation, the path and errno's text.
Status ErrnoError(std::string_view op, std::string_view path, int err);

[[noreturn]] void AssertionFailed(const char* cond, const char* file, int line);

// Result<T>: a T or a non-OK Status. Construct from a T, or from a Status (which must
// not be OK).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  // `status` must not be OK: a Result holds a value or an error.
  Result(Status status) : value_(std::in_place_index<1>, std::move(status)) {  // NOLINT
    if (std::get<1>(value_).ok()) {
      std::get<1>(value_) = Status(StatusCode::kInternal, "Result made from an OK status");
    }
  }

  bool ok() const { return value_.index() == 0; }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<1>(value_);
  }

  // The value; calling these on an error is a bug in the caller (asserted).
  T& value() & { return Checked(); }
  const T& value() const& { return const_cast<Result*>(this)->Checked(); }
  T&& value() && { return std::move(Checked()); }
  T& operator*() & { return Checked(); }
  const T& operator*() const& { return const_cast<Result*>(this)->Checked(); }
  T* operator->() { return &Checked(); }
  const T* operator->() const { return &const_cast<Result*>(this)->Checked(); }

 private:
  T& Checked() {
    if (!ok()) AssertionFailed("Result::value() on an error", __FILE__, __LINE__);
    return std::get<0>(value_);
  }

  std::variant<T, Status> value_;
};

}  // namespace sluice

#define SLUICE_CONCAT_INNER(a, b) a##b
#define SLUICE_CONCAT(a, b) SLUICE_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)      \
  do {                             \
    ::sluice::Status _st = (expr); \
    if (!_st.ok()) return _st;     \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(SLUICE_CONCAT(_result_, __LINE__), lhs, expr)

// For invariants of sluice's own code only, never for outside input.
#define SLUICE_ASSERT(cond)                                            \
  do {                                                                 \
    if (!(cond)) ::sluice::AssertionFailed(#cond, __FILE__, __LINE__); \
  } while (0)
