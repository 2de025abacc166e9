#include "base/percentile.h"

#include <gtest/gtest.h>

#include <vector>

namespace gpusched {
namespace {

std::vector<double> OneTo(int n) {
  std::vector<double> v;
  for (int i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

TEST(Percentile, EmptyInputIsZero) {
  EXPECT_EQ(Percentile({}, 50), 0);
  EXPECT_EQ(PercentileOf({}, 99), 0);
}

TEST(Percentile, NearestRankNotInterpolation) {
  // Four values: the median is the 2nd (rank ceil(0.5 * 4) = 2), not the mean of 2nd and 3rd.
  const std::vector<double> v = {10, 20, 30, 40};
  EXPECT_EQ(Percentile(v, 50), 20);
  EXPECT_EQ(Percentile(v, 51), 30);
  EXPECT_EQ(Percentile(v, 75), 30);
  EXPECT_EQ(Percentile(v, 100), 40);
}

TEST(Percentile, P99OfHundredIsTheNinetyNinthNotTheMaximum) {
  const std::vector<double> v = OneTo(100);
  EXPECT_EQ(Percentile(v, 99), 99);
  EXPECT_EQ(Percentile(v, 50), 50);
  EXPECT_EQ(Percentile(OneTo(101), 99), 100);  // ceil(99.99) = 100
}

TEST(Percentile, FractionalPercentWhoseRankIsWholeStaysOnIt) {
  // 99.9 / 100 * 1000 is 999.0000000000001 in doubles; the rank is 999.
  EXPECT_EQ(Percentile(OneTo(1000), 99.9), 999);
  EXPECT_EQ(Percentile(OneTo(10), 70), 7);  // 0.7 * 10 is 7.000000000000001 in doubles
}

TEST(Percentile, EndsAndOutOfRangeClamp) {
  const std::vector<double> v = {1, 2, 3};
  EXPECT_EQ(Percentile(v, 0), 1);
  EXPECT_EQ(Percentile(v, -5), 1);
  EXPECT_EQ(Percentile(v, 250), 3);
  EXPECT_EQ(Percentile(std::vector<double>{7}, 99.9), 7);
}

TEST(Percentile, OfUnsortedSortsACopy) {
  EXPECT_EQ(PercentileOf({5, 1, 4, 2, 3}, 50), 3);
  EXPECT_EQ(PercentileOf({5, 1, 4, 2, 3}, 100), 5);
}

}  // namespace
}  // namespace gpusched
