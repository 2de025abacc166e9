#include "base/percentile.h"

#include <algorithm>
#include <cmath>

namespace gpusched {

double Percentile(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0;
  if (!(p > 0)) return sorted.front();  // also NaN
  const double n = static_cast<double>(sorted.size());
  // p * n / 100 rather than p / 100 * n: 99.9 * 1000 / 100 is exactly 999. The slack keeps
  // a rank that is a whole number up to rounding from moving to the next value.
  const double rank = std::ceil(std::min(p, 100.0) * n / 100 - 1e-9);
  const size_t index = static_cast<size_t>(std::max(1.0, rank)) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

double PercentileOf(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return Percentile(values, p);
}

}  // namespace gpusched
