#include "base/status.h"

#include <gtest/gtest.h>

namespace gpusched {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("x: must be even, got " + std::to_string(x));
  return x / 2;
}

Status Quarter(int x, int* out) {
  GS_ASSIGN_OR_RETURN(int h, Half(x));
  GS_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(Status, ToStringNamesCodeAndMessage) {
  EXPECT_EQ(Status::Ok().ToString(), "ok");
  EXPECT_EQ(InvalidArgument("gpu_mem: must be >= 0").ToString(),
            "invalid_argument: gpu_mem: must be >= 0");
}

TEST(StatusOr, PropagatesErrorsThroughMacros) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "x: must be even, got 3");
}

TEST(StatusOr, OkStatusWithoutValueBecomesInternal) {
  StatusOr<int> v(Status::Ok());
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace gpusched
