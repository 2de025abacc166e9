#pragma once
// A synthetic workload for users without a trace, shaped like the Philly trace
// (../shared/traces/README.md, philly_jobs_pollux.csv): Poisson arrivals; GPU counts 1, 2, 4,
// 8, 16 with Philly's frequencies (76,627 / 1,818 / 1,870 / 1,643 / 199 of 82,247 jobs, the
// rarer sizes folded into 16); log-normal durations with Philly's median (1,144 s) and mean
// (13,136 s), i.e. mu = ln 1144 and sigma = sqrt(2 ln(13136 / 1144)), at least 1 s.
// Deterministic for a seed (the caller prints it).

#include <cstdint>

#include "base/rng.h"
#include "sim/trace.h"

namespace gpusched::sim {

struct SyntheticOptions {
  int64_t jobs = 1000;
  double arrivals_per_hour = 30;
};

Trace GenerateSyntheticTrace(const SyntheticOptions& options, Rng& rng);

}  // namespace gpusched::sim
