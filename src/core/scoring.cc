#include "core/scoring.h"

#include <string>

namespace gpusched::core {

int ScoreDimension::Score(int64_t request) const {
  if (request <= 0) return zero_score;
  for (const ScoreTier& tier : tiers) {
    if (request <= tier.threshold) return tier.score;
  }
  return above_top_score;
}

ScoringTable ScoringTable::Claim5Default() {
  constexpr int64_t kGiB = 1024;
  constexpr int64_t kHour = 3'600'000;
  ScoringTable t;
  t.cpu_milli.tiers = {{1000, 5}, {2000, 4}, {4000, 3}, {8000, 2}, {16000, 1}};
  t.gpu_mem_mib.tiers = {{500, 5}, {1 * kGiB, 4}, {2 * kGiB, 3}, {4 * kGiB, 2}, {8 * kGiB, 1}};
  t.mem_mib.tiers = {{1 * kGiB, 5}, {2 * kGiB, 4}, {4 * kGiB, 3}, {8 * kGiB, 2}, {16 * kGiB, 1}};
  // Durations have four bounded tiers; anything above 24 h scores 1.
  t.duration_ms.tiers = {{1 * kHour, 5}, {6 * kHour, 4}, {12 * kHour, 3}, {24 * kHour, 2}};
  return t;
}

Status ScoringTable::Validate() const {
  const std::pair<const char*, const ScoreDimension*> dims[] = {
      {"cpu", &cpu_milli}, {"gpu_mem", &gpu_mem_mib}, {"mem", &mem_mib},
      {"duration", &duration_ms}};
  for (const auto& [name, dim] : dims) {
    if (dim->tiers.empty()) {
      return InvalidArgument(std::string("scoring.") + name + ": needs at least one tier");
    }
    for (size_t i = 0; i < dim->tiers.size(); ++i) {
      if (dim->tiers[i].threshold <= 0 || (i > 0 && dim->tiers[i].threshold <=
                                                        dim->tiers[i - 1].threshold)) {
        return InvalidArgument(std::string("scoring.") + name + ".tiers[" + std::to_string(i) +
                               "]: thresholds must be positive and ascending, got " +
                               std::to_string(dim->tiers[i].threshold));
      }
    }
  }
  return Status::Ok();
}

TaskScore ScoreTask(const ScoringTable& table, int64_t cpu_milli, int64_t gpu_mem_mib,
                    int64_t mem_mib, int64_t duration_ms) {
  TaskScore s;
  s.cpu = table.cpu_milli.Score(cpu_milli);
  s.gpu_mem = table.gpu_mem_mib.Score(gpu_mem_mib);
  s.mem = table.mem_mib.Score(mem_mib);
  s.duration = table.duration_ms.Score(duration_ms);
  s.st = s.cpu + s.gpu_mem + s.mem + s.duration;
  s.pt = s.st / 4;
  return s;
}

}  // namespace gpusched::core
