#pragma once
// Percentiles of measured values (latencies, job completion times), one definition for the
// simulator's reports and every bench: nearest rank, i.e. the value at position
// ceil(p/100 * n) (1-based) of the n values sorted ascending; p <= 0 gives the smallest.
// No interpolation: the result is always one of the values. Empty input gives 0.

#include <span>
#include <vector>

namespace gpusched {

// REQUIRES: `sorted` is in ascending order. `p` is in percent (50, 99, 99.9); values outside
// [0, 100] are clamped.
double Percentile(std::span<const double> sorted, double p);

// Percentile of unsorted values (sorts a copy).
double PercentileOf(std::vector<double> values, double p);

}  // namespace gpusched
