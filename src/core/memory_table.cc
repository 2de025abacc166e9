#include "core/memory_table.h"

#include <algorithm>
#include <cmath>

#include "core/task_validation.h"

namespace gpusched::core {

Status GpuMemoryTable::AddRow(const MemoryRow& row) {
  if (row.profile.model.empty()) return InvalidArgument("memory_table.rows.model: must be set");
  if (row.profile.batch < 1) {
    return InvalidArgument("memory_table.rows.batch: must be >= 1, got " +
                           std::to_string(row.profile.batch));
  }
  if (row.profile.height < 0 || row.profile.width < 0) {
    return InvalidArgument("memory_table.rows.height/width: must be >= 0");
  }
  if (row.mib <= 0) {
    return InvalidArgument("memory_table.rows.mib: must be > 0, got " + std::to_string(row.mib));
  }
  rows_[row.profile] = row.mib;
  return Status::Ok();
}

Status GpuMemoryTable::AddFormula(const MemoryFormula& f) {
  if (f.model.empty()) return InvalidArgument("memory_table.formulas.model: must be set");
  if (f.base_mib < 0 || f.per_image_mib < 0) {
    return InvalidArgument("memory_table.formulas." + f.model + ": base and per_image must be >= 0");
  }
  if (f.ref_height <= 0 || f.ref_width <= 0) {
    return InvalidArgument("memory_table.formulas." + f.model + ": reference size must be > 0");
  }
  formulas_[f.model] = f;
  return Status::Ok();
}

StatusOr<MemoryEstimate> GpuMemoryTable::Estimate(const MemoryProfile& p) const {
  if (auto it = learned_.find(p);
      it != learned_.end() && it->second.observations >= options_.min_observations) {
    const MiB peak = LearnedPeak(it->second);
    return MemoryEstimate{peak + (peak * options_.learned_headroom_percent + 99) / 100, "learned"};
  }
  return EstimateFromTable(p);
}

StatusOr<MemoryEstimate> GpuMemoryTable::EstimateFromTable(const MemoryProfile& p) const {
  if (auto it = rows_.find(p); it != rows_.end()) return MemoryEstimate{it->second, "table"};
  auto f = formulas_.find(p.model);
  if (f == formulas_.end()) {
    return InvalidArgument("profile.model: unknown model \"" + p.model +
                           "\" (no row or formula in the GPU-memory table; give gpu_mem instead)");
  }
  const double h = p.height > 0 ? p.height : f->second.ref_height;
  const double w = p.width > 0 ? p.width : f->second.ref_width;
  const double scale = (h * w) / (static_cast<double>(f->second.ref_height) * f->second.ref_width);
  const double mib = f->second.base_mib +
                     f->second.per_image_mib * static_cast<double>(std::max<int64_t>(p.batch, 1)) *
                         scale;
  // A profile within ValidateTaskSpec's bounds can still take a formula past int64 MiB (the
  // cast would be undefined) or to NaN; more than a GPU can have is no estimate either.
  if (!(mib <= static_cast<double>(kMaxGpuMemMib))) {
    return InvalidArgument("profile: the formula of model \"" + p.model + "\" gives more than " +
                           FormatSizeMiB(kMaxGpuMemMib) + " per GPU for this batch and size");
  }
  return MemoryEstimate{static_cast<MiB>(std::ceil(mib)), "formula"};
}

// An agent's report is input: a peak beyond any GPU would overflow the estimate's headroom
// arithmetic, and teaches nothing true.
static bool PlausiblePeak(MiB peak_mib) { return peak_mib > 0 && peak_mib <= kMaxGpuMemMib; }

void GpuMemoryTable::Observe(const MemoryProfile& profile, MiB peak_mib) {
  if (!PlausiblePeak(peak_mib)) return;
  LearnedPeaks& l = learned_[profile];
  l.recent.push_back(peak_mib);
  const size_t window = static_cast<size_t>(std::max(options_.window, 1));
  if (l.recent.size() > window) l.recent.erase(l.recent.begin());
  ++l.observations;
}

// Nearest rank: the value at position ceil(percentile / 100 * n) of the sorted peaks.
MiB GpuMemoryTable::LearnedPeak(const LearnedPeaks& l) const {
  if (l.recent.empty()) return 0;
  std::vector<MiB> sorted = l.recent;
  std::sort(sorted.begin(), sorted.end());
  const int64_t n = static_cast<int64_t>(sorted.size());
  const int64_t p = std::clamp<int64_t>(options_.percentile, 1, 100);
  const int64_t rank = std::clamp<int64_t>((p * n + 99) / 100, 1, n);
  return sorted[static_cast<size_t>(rank - 1)];
}

std::pair<MiB, int64_t> GpuMemoryTable::Learned(const MemoryProfile& profile) const {
  auto it = learned_.find(profile);
  if (it == learned_.end()) return {0, 0};
  return {LearnedPeak(it->second), it->second.observations};
}

void GpuMemoryTable::RestoreLearned(const MemoryProfile& profile, std::vector<MiB> recent,
                                    int64_t observations) {
  std::erase_if(recent, [](MiB m) { return !PlausiblePeak(m); });
  const size_t window = static_cast<size_t>(std::max(options_.window, 1));
  if (recent.size() > window) recent.erase(recent.begin(), recent.end() - window);
  if (recent.empty()) return;
  const int64_t kept = static_cast<int64_t>(recent.size());
  learned_[profile] = {std::move(recent), std::max(observations, kept)};
}

bool GpuMemoryTable::Forget(const MemoryProfile& profile) { return learned_.erase(profile) > 0; }

std::vector<MemoryRow> GpuMemoryTable::rows() const {
  std::vector<MemoryRow> out;
  for (const auto& [p, mib] : rows_) out.push_back({p, mib});
  return out;
}

}  // namespace gpusched::core
