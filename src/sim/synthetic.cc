#include "sim/synthetic.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace gpusched::sim {

Trace GenerateSyntheticTrace(const SyntheticOptions& options, Rng& rng) {
  struct Size {
    int64_t gpus;
    int64_t jobs;  // of Philly's 82,247
  };
  static constexpr Size kSizes[] = {{1, 76'627}, {2, 1'818}, {4, 1'870}, {8, 1'643}, {16, 289}};
  int64_t total = 0;
  for (const Size& s : kSizes) total += s.jobs;
  const double mu = std::log(1144.0);
  const double sigma = std::sqrt(2.0 * std::log(13136.0 / 1144.0));
  const double rate_per_s = options.arrivals_per_hour / 3600.0;

  Trace trace;
  trace.name = "synthetic";
  double now_s = 0;
  for (int64_t i = 0; i < options.jobs; ++i) {
    now_s += rng.Exponential(rate_per_s);
    int64_t pick = rng.UniformInt(1, total), gpus = 1;
    for (const Size& s : kSizes) {
      if (pick <= s.jobs) {
        gpus = s.gpus;
        break;
      }
      pick -= s.jobs;
    }
    TraceJob j;
    j.id = std::to_string(i);
    j.num_gpu = gpus;
    j.submit_ms = static_cast<TimeMs>(std::llround(now_s)) * 1000;
    j.duration_ms = std::max<int64_t>(1, std::llround(rng.LogNormal(mu, sigma))) * 1000;
    j.line = i + 2;
    trace.jobs.push_back(std::move(j));
  }
  return trace;
}

}  // namespace gpusched::sim
