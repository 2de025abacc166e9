#pragma once
// CN109992422A claim 1: the resource-usage (GPU memory) table that tells how much GPU memory a
// task needs from what it is: rows (task_type, model, batch, height, width) -> MiB matched
// exactly, a per-model fallback formula
//   base(model) + per_image(model) * batch * (h * w) / (h0 * w0),
// and what it has learned from the peaks agents measured for the same profile.
//
// Precedence ([choice]): an explicit value in the spec always wins (the Scheduler never asks
// the table then); else a learned peak (with headroom); else an exact row; else the formula;
// an unknown model is an error.
//
// Learning (issue 36): per profile, the last `window` peaks observed (oldest dropped) and the
// estimate's peak is their `percentile` (nearest rank), not the largest ever: one outlier
// among many runs does not set the estimate, and an old one ages out. What is observed is
// the caller's to vouch for: the server passes only peaks the agent measured itself.
//
// Thread-safety: none; owned by the Scheduler.

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "core/task.h"

namespace gpusched::core {

struct MemoryRow {
  MemoryProfile profile;
  MiB mib = 0;
};

struct MemoryFormula {
  std::string model;
  MiB base_mib = 0;
  double per_image_mib = 0;  // per image at the reference size
  int64_t ref_height = 224;
  int64_t ref_width = 224;
};

struct MemoryEstimate {
  MiB mib = 0;
  std::string source;  // "learned", "table", "formula"
};

// What was learned about one profile.
struct LearnedPeaks {
  std::vector<MiB> recent;   // the last peaks observed, oldest first; at most the window
  int64_t observations = 0;  // peaks observed in all (>= recent.size())
};

class GpuMemoryTable {
 public:
  struct Options {
    int64_t learned_headroom_percent = 10;  // estimate = peak + headroom, rounded up
    int min_observations = 1;       // peaks needed before the learned value is used
    int window = 20;                // peaks kept per profile (the last N)
    int percentile = 90;            // the learned peak: this percentile of the kept peaks
  };
  GpuMemoryTable() = default;
  explicit GpuMemoryTable(Options options) : options_(options) {}

  // Errors name the field: rows need a model, batch >= 1 and mib > 0.
  Status AddRow(const MemoryRow& row);
  Status AddFormula(const MemoryFormula& formula);

  StatusOr<MemoryEstimate> Estimate(const MemoryProfile& profile) const;
  // The table's own answer (row or formula), ignoring what was learned.
  StatusOr<MemoryEstimate> EstimateFromTable(const MemoryProfile& profile) const;

  // A peak measured for a task of this profile (claim 1's table "kept accurate" by what
  // really ran). Values <= 0 or beyond any GPU are ignored.
  void Observe(const MemoryProfile& profile, MiB peak_mib);
  // The learned peak of `profile` (the percentile of its kept peaks) and its observations;
  // (0, 0) when nothing.
  std::pair<MiB, int64_t> Learned(const MemoryProfile& profile) const;
  // Every learned profile, by profile.
  const std::map<MemoryProfile, LearnedPeaks>& learned() const { return learned_; }
  // Restores what a store kept after a restart; impossible peaks are dropped, the window
  // keeps the newest. Nothing valid: nothing is restored.
  void RestoreLearned(const MemoryProfile& profile, std::vector<MiB> recent,
                      int64_t observations);
  // Forgets what was learned for `profile`; false when there was nothing.
  bool Forget(const MemoryProfile& profile);

  std::vector<MemoryRow> rows() const;
  size_t learned_size() const { return learned_.size(); }

 private:
  MiB LearnedPeak(const LearnedPeaks& l) const;

  Options options_;
  std::map<MemoryProfile, MiB> rows_;
  std::map<std::string, MemoryFormula> formulas_;
  std::map<MemoryProfile, LearnedPeaks> learned_;
};

}  // namespace gpusched::core
