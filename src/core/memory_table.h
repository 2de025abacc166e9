#pragma once
// CN109992422A claim 1: the resource-usage (GPU memory) table that tells how much GPU memory a
// task needs from what it is: rows (task_type, model, batch, height, width) -> MiB matched
// exactly, a per-model fallback formula
//   base(model) + per_image(model) * batch * (h * w) / (h0 * w0),
// and what it has learned from the peaks agents observed for the same profile.
//
// Precedence ([choice]): an explicit value in the spec always wins (the Scheduler never asks
// the table then); else a learned peak (with headroom); else an exact row; else the formula;
// an unknown model is an error.
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

class GpuMemoryTable {
 public:
  struct Options {
    int64_t learned_headroom_percent = 10;  // estimate = peak + headroom, rounded up
    int min_observations = 1;       // peaks needed before the learned value is used
  };
  GpuMemoryTable() = default;
  explicit GpuMemoryTable(Options options) : options_(options) {}

  // Errors name the field: rows need a model, batch >= 1 and mib > 0.
  Status AddRow(const MemoryRow& row);
  Status AddFormula(const MemoryFormula& formula);

  StatusOr<MemoryEstimate> Estimate(const MemoryProfile& profile) const;

  // An agent observed `peak_mib` for a task of this profile (claim 1's table "kept
  // accurate" by what really ran).
  void Observe(const MemoryProfile& profile, MiB peak_mib);
  // What was learned for `profile`: (largest peak, observations); (0, 0) when nothing.
  std::pair<MiB, int64_t> Learned(const MemoryProfile& profile) const;
  // Restores an aggregate a store kept (one row per profile) after a restart.
  void RestoreLearned(const MemoryProfile& profile, MiB max_peak_mib, int64_t observations);

  std::vector<MemoryRow> rows() const;
  size_t learned_size() const { return learned_.size(); }

 private:
  struct LearnedPeak {
    MiB max_peak = 0;
    int64_t observations = 0;
  };
  Options options_;
  std::map<MemoryProfile, MiB> rows_;
  std::map<std::string, MemoryFormula> formulas_;
  std::map<MemoryProfile, LearnedPeak> learned_;
};

}  // namespace gpusched::core
