#include "server/metrics.h"

#include <gtest/gtest.h>

namespace gpusched::server {
namespace {

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  Histogram h({0.001, 0.01});
  h.Observe(0.0005);
  h.Observe(0.005);
  h.Observe(5);
  std::string out;
  h.Render("x", out);
  EXPECT_NE(out.find("x_bucket{le=\"0.001\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"0.01\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_count 3\n"), std::string::npos) << out;
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  EXPECT_EQ(LabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

}  // namespace
}  // namespace gpusched::server
