#include "rpc/log_capability.h"

#include <gtest/gtest.h>

namespace gpusched::rpc {
namespace {

TEST(LogCapabilityTest, Issue35_OnlyTheKeysSignatureForThatAttemptBeforeItsExpiryPasses) {
  auto key = NewLogReadKey();
  ASSERT_TRUE(key.ok());
  ASSERT_EQ(key->size(), 32u);
  const std::string cap = SignLogRead(*key, 7, 2, 1000);
  EXPECT_TRUE(CheckLogRead(*key, 7, 2, 1000, cap, 999).ok());
  EXPECT_TRUE(CheckLogRead(*key, 7, 2, 1000, cap, 1000).ok());
  // Expired, another task, another attempt, another expiry, another key, none at all.
  EXPECT_NE(CheckLogRead(*key, 7, 2, 1000, cap, 1001).message().find("expired"),
            std::string::npos);
  EXPECT_EQ(CheckLogRead(*key, 8, 2, 1000, cap, 0).code(), StatusCode::kPermissionDenied);
  EXPECT_FALSE(CheckLogRead(*key, 7, 1, 1000, cap, 0).ok());
  EXPECT_FALSE(CheckLogRead(*key, 7, 2, 99999, cap, 0).ok());
  auto other = NewLogReadKey();
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(CheckLogRead(*other, 7, 2, 1000, cap, 0).ok());
  EXPECT_FALSE(CheckLogRead(*key, 7, 2, 1000, "", 0).ok());
  EXPECT_FALSE(CheckLogRead("", 7, 2, 1000, SignLogRead("", 7, 2, 1000), 0).ok());
}

}  // namespace
}  // namespace gpusched::rpc
