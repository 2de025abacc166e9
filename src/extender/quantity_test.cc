#include "extender/quantity.h"

#include <gtest/gtest.h>

namespace gpusched::extender {
namespace {

TEST(Quantity, WholeCountsAcceptEveryKubernetesSpelling) {
  EXPECT_EQ(*ParseWholeQuantity("8", "f"), 8);
  EXPECT_EQ(*ParseWholeQuantity("+8", "f"), 8);
  EXPECT_EQ(*ParseWholeQuantity("2k", "f"), 2000);
  EXPECT_EQ(*ParseWholeQuantity("1Ki", "f"), 1024);
  EXPECT_EQ(*ParseWholeQuantity("1e3", "f"), 1000);
  EXPECT_EQ(*ParseWholeQuantity("1.5k", "f"), 1500);
  EXPECT_EQ(*ParseWholeQuantity("0", "f"), 0);
  EXPECT_EQ(*ParseWholeQuantity("0.000", "f"), 0);
  EXPECT_EQ(*ParseWholeQuantity("7199880192761", "f"), 7199880192761);
}

TEST(Quantity, ScalesExactlyWithRounding) {
  EXPECT_EQ(*ParseQuantity("500m", -3, 0, Rounding::kExact, "cpu"), 500);  // millicores
  EXPECT_EQ(*ParseQuantity("0.1", -3, 0, Rounding::kExact, "cpu"), 100);   // exact, no 100.0001
  EXPECT_EQ(*ParseQuantity("64Gi", 0, 20, Rounding::kExact, "mem"), 65536);  // MiB
  EXPECT_EQ(*ParseQuantity("1176512552Ki", 0, 20, Rounding::kDown, "mem"), 1148938);
  EXPECT_EQ(*ParseQuantity("1176512552Ki", 0, 20, Rounding::kUp, "mem"), 1148939);
  EXPECT_EQ(*ParseQuantity("1n", -3, 0, Rounding::kUp, "cpu"), 1);
  EXPECT_EQ(*ParseQuantity("1n", -3, 0, Rounding::kDown, "cpu"), 0);
}

TEST(Quantity, BadInputNamesTheFieldAndTheText) {
  const std::pair<std::string, std::string> cases[] = {
      {"1.5", "\"1.5\" is not a whole number"},
      {"500m", "\"500m\" is not a whole number"},
      {"-1", "\"-1\" is negative"},
      {"8GB", "unknown suffix \"GB\""},
      {"", "is not a Kubernetes quantity"},
      {"abc", "is not a Kubernetes quantity"},
      {"1e", "unknown suffix"},
      {"99999999999999999999", "is too large"},
      {"1234567890123456789012345678901", "too many digits"},
      {"1e-40", "outside the supported range"},
  };
  for (const auto& [text, message] : cases) {
    auto q = ParseWholeQuantity(text, "limits[\"nvidia.com/gpu\"]");
    ASSERT_FALSE(q.ok()) << text;
    EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(q.status().message().rfind("limits[\"nvidia.com/gpu\"]: ", 0), 0u)
        << q.status().message();
    EXPECT_NE(q.status().message().find(message), std::string::npos)
        << text << " -> " << q.status().message();
  }
}

}  // namespace
}  // namespace gpusched::extender
