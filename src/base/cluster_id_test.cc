#include "base/cluster_id.h"

#include <gtest/gtest.h>

namespace gpusched {
namespace {

TEST(ClusterId, Issue39_NewIdsAreValidAndDiffer) {
  auto a = NewClusterId();
  auto b = NewClusterId();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(ValidateClusterId(*a, "new").ok()) << *a;
  EXPECT_EQ(a->size(), kClusterIdLength);
  EXPECT_NE(*a, *b);
}

TEST(ClusterId, Issue39_OnlyThirtyTwoLowerCaseHexDigitsAreAccepted) {
  EXPECT_TRUE(ValidateClusterId("0123456789abcdef0123456789abcdef", "x").ok());
  for (const char* bad : {"", "0123456789abcdef0123456789abcde", "0123456789ABCDEF0123456789abcdef",
                          "../../../../etc/passwd/aaaaaaaaaaaa", "0123456789abcdef0123456789abcdef0"}) {
    const Status s = ValidateClusterId(bad, "Registered.cluster_id");
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("Registered.cluster_id"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(std::string("\"") + bad), std::string::npos) << s.message();
  }
  // A control character is not written into the message as it is.
  const Status s = ValidateClusterId(std::string("ab\ncd"), "file");
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gpusched
