#pragma once
// CN115981827A claims 4-6: every task is scored from its CPU, GPU memory, RAM and expected
// duration; St is the sum of the four scores and Pt = floor(St / 4) its priority.
// A lower Pt is served first, so resource-heavy tasks go first (the claim read literally).
//
// Each dimension is a list of tiers (threshold, score), thresholds ascending. A request gets
// the score of the smallest tier whose threshold is >= the request; above every tier it gets
// `above_top_score`; a request of 0 gets `zero_score` ([choice], PATENTS.md section 4).

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace gpusched::core {

struct ScoreTier {
  int64_t threshold = 0;
  int score = 0;
};

struct ScoreDimension {
  std::vector<ScoreTier> tiers;
  int above_top_score = 1;
  int zero_score = 5;

  int Score(int64_t request) const;
};

struct ScoringTable {
  ScoreDimension cpu_milli;     // CPU in millicores
  ScoreDimension gpu_mem_mib;   // total GPU memory requested, MiB
  ScoreDimension mem_mib;       // RAM, MiB
  ScoreDimension duration_ms;   // expected run time, ms

  // The table of claim 5: 1/2/4/8/16 cores, 500MiB/1/2/4/8 GiB GPU memory, 1/2/4/8/16 GiB
  // RAM, durations (0,1], (1,6], (6,12], (12,24], >24 hours; scores 5 down to 1.
  static ScoringTable Claim5Default();
  Status Validate() const;
};

struct TaskScore {
  int cpu = 0, gpu_mem = 0, mem = 0, duration = 0;
  int st = 0;  // sum, in [4, 20] for the default table
  int pt = 0;  // floor(st / 4), in [1, 5]
};

TaskScore ScoreTask(const ScoringTable& table, int64_t cpu_milli, int64_t gpu_mem_mib,
                    int64_t mem_mib, int64_t duration_ms);

}  // namespace gpusched::core
