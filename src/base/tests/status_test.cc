#include "base/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>

namespace sluice {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status st;
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kOk);
  EXPECT_EQ(st.message(), "");
  EXPECT_EQ(st, Status::OK());
}

TEST(StatusTest, FactoryFormatsMessageAndSetsCode) {
  Status st = CorruptionError("segment {} at byte {}: bad CRC", "0.log", 4096);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_EQ(st.message(), "segment 0.log at byte 4096: bad CRC");
}

TEST(StatusTest, EveryFactoryHasItsOwnCode) {
  EXPECT_EQ(InvalidArgumentError("x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(NotFoundError("x").code(), StatusCode::kNotFound);
  EXPECT_EQ(AlreadyExistsError("x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(OutOfRangeError("x").code(), StatusCode::kOutOfRange);
  EXPECT_EQ(CorruptionError("x").code(), StatusCode::kCorruption);
  EXPECT_EQ(IOError("x").code(), StatusCode::kIOError);
  EXPECT_EQ(ResourceExhaustedError("x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(FailedPreconditionError("x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(UnimplementedError("x").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(InternalError("x").code(), StatusCode::kInternal);
  EXPECT_EQ(AbortedError("x").code(), StatusCode::kAborted);
}

TEST(StatusTest, ToStringNamesCodeAndMessage) {
  EXPECT_EQ(Status::OK().ToString(), "OK");
  EXPECT_EQ(NotFoundError("topic {}", "orders").ToString(), "NotFound: topic orders");
  EXPECT_EQ(IOError("disk full").ToString(), "IOError: disk full");
}

TEST(StatusTest, WithContextPrefixesMessageAndKeepsCode) {
  Status st = IOError("short read").WithContext("segment 7");
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_EQ(st.message(), "segment 7: short read");
}

TEST(StatusTest, WithContextOnOkStaysOk) {
  EXPECT_EQ(Status::OK().WithContext("anything"), Status::OK());
}

TEST(StatusTest, ErrnoErrorNamesOpPathAndErrnoText) {
  Status st = ErrnoError("open", "/data/x", ENOENT);
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_EQ(st.message(), "open /data/x: No such file or directory");
}

TEST(StatusTest, StatusCodeNameCoversEveryCode) {
  EXPECT_EQ(StatusCodeName(StatusCode::kOk), "OK");
  EXPECT_EQ(StatusCodeName(StatusCode::kInvalidArgument), "InvalidArgument");
  EXPECT_EQ(StatusCodeName(StatusCode::kAborted), "Aborted");
  EXPECT_EQ(StatusCodeName(static_cast<StatusCode>(999)), "Unknown");
}

TEST(ResultTest, HoldsValue) {
  Result<int> r = 42;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.status(), Status::OK());
  EXPECT_EQ(r.value(), 42);
  EXPECT_EQ(*r, 42);
}

TEST(ResultTest, HoldsError) {
  Result<int> r = OutOfRangeError("offset {} past end", 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(r.status().message(), "offset 10 past end");
}

TEST(ResultTest, ArrowReachesMembers) {
  Result<std::string> r = std::string("abc");
  EXPECT_EQ(r->size(), 3u);
}

TEST(ResultTest, MovesOutMoveOnlyValue) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 7);
}

Status FailIf(bool fail) {
  if (fail) return AbortedError("asked to fail");
  return Status::OK();
}

Result<int> Half(int n) {
  if (n % 2 != 0) return InvalidArgumentError("{} is odd", n);
  return n / 2;
}

Status ReturnIfError(bool fail, int* reached) {
  RETURN_IF_ERROR(FailIf(fail));
  ++*reached;
  return Status::OK();
}

Result<int> Quarter(int n) {
  ASSIGN_OR_RETURN(int half, Half(n));
  ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status QuarterInto(int n, int* out) {
  ASSIGN_OR_RETURN(*out, Quarter(n));
  return Status::OK();
}

TEST(StatusMacroTest, ReturnIfErrorPassesOkThrough) {
  int reached = 0;
  EXPECT_TRUE(ReturnIfError(false, &reached).ok());
  EXPECT_EQ(reached, 1);
}

TEST(StatusMacroTest, ReturnIfErrorReturnsErrorEarly) {
  int reached = 0;
  Status st = ReturnIfError(true, &reached);
  EXPECT_EQ(st.code(), StatusCode::kAborted);
  EXPECT_EQ(reached, 0);
}

TEST(StatusMacroTest, ReturnIfErrorWorksInResultFunction) {
  auto f = [](bool fail) -> Result<int> {
    RETURN_IF_ERROR(FailIf(fail));
    return 1;
  };
  EXPECT_EQ(*f(false), 1);
  EXPECT_EQ(f(true).status().code(), StatusCode::kAborted);
}

TEST(StatusMacroTest, AssignOrReturnAssignsValue) {
  Result<int> r = Quarter(20);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 5);
}

TEST(StatusMacroTest, AssignOrReturnPropagatesFirstError) {
  EXPECT_EQ(Quarter(7).status().message(), "7 is odd");
  EXPECT_EQ(Quarter(10).status().message(), "5 is odd");
}

TEST(StatusMacroTest, AssignOrReturnIntoExistingVariableAndStatusFunction) {
  int out = -1;
  EXPECT_TRUE(QuarterInto(8, &out).ok());
  EXPECT_EQ(out, 2);
  out = -1;
  EXPECT_EQ(QuarterInto(6, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, -1);
}

}  // namespace
}  // namespace sluice
