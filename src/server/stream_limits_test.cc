#include "server/stream_limits.h"

#include <gtest/gtest.h>

namespace gpusched::server {
namespace {

TEST(StreamLimiterTest, Issue36_CountsPerUserAndInTotalAndGivesSlotsBack) {
  StreamLimiter limiter(StreamLimits{3, 2});
  auto a1 = limiter.Acquire("alice");
  auto a2 = limiter.Acquire("alice");
  ASSERT_TRUE(a1.ok() && a2.ok());
  auto a3 = limiter.Acquire("alice");
  ASSERT_FALSE(a3.ok());
  EXPECT_EQ(a3.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(a3.status().message().find("stream_limit_per_user"), std::string::npos);
  auto b1 = limiter.Acquire("bob");
  ASSERT_TRUE(b1.ok());
  auto b2 = limiter.Acquire("bob");
  ASSERT_FALSE(b2.ok());
  EXPECT_NE(b2.status().message().find("stream_limit allows"), std::string::npos);
  a1 = StatusOr<StreamLimiter::Slot>(StreamLimiter::Slot());  // alice closes one
  EXPECT_TRUE(limiter.Acquire("bob").ok());
}

}  // namespace
}  // namespace gpusched::server
