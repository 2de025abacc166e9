#pragma once
// The node filters of the cluster pipeline (DESIGN.md step 3), one table in the order they run.
// CN115981827A: reachable (probe daemon, claim 9) -> GPU fit -> Kubernetes-style rules;
// CN109992422A: available (heartbeats, claims 5-6) and GPU memory fit (claim 1).
// A node is counted against the first filter that rejects it, so `why` can say
// "0/120 nodes fit: 80 insufficient GPU memory, 40 unreachable".
//
// kFilters holds one row per filter: its id, its name (metrics, `why --verbose`), the phrase
// `why` uses for the nodes it rejected, and its function. FirstRejectingFilter runs the rows
// in order, unrolled at compile time (direct, inlined calls on the hot path); FilterName and
// FilterReason read them. The GPU filters come last and read one tally of the node's GPUs
// (GpuTally), made once per node before the first of them runs; they say why fewer GPUs than
// asked can take the task, so a task that asks for none, and a node where enough GPUs take it
// (GpuFits), pass them all. A row may also answer from the node's compact summary
// (FirstRejectingFilterFast); a row without that form sends the node to FirstRejectingFilter,
// which is always right.
//
// Adding a filter is an id at the end of FilterId (ids are stable: metrics, reports and tests
// index by them), its function, and one row where it runs (before the GPU rows unless it
// reads the tally), e.g.
//   namespace filter {
//   inline bool DiskFits(const FilterInput& in) {
//     return in.node.disk_free_mib >= in.request.disk_mib;
//   }
//   }  // namespace filter
//   {kFilterDiskFit, "DiskFit", "insufficient disk",
//    FilterStage::kNode, Judges::kState, filter::DiskFits, nullptr},
// (nullptr: no summary form, so FirstRejectingFilterFast asks the node once the rows before
// it passed on the summary; give it one when NodeSummary carries what it reads.)

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/node.h"
#include "core/resources.h"

namespace gpusched::core {

// What one placement asks for, digested from a Task for fast filtering.
struct PlacementRequest {
  int64_t gpus = 0;
  MiB gpu_mem_mib = 0;  // per GPU; ignored when exclusive
  bool exclusive = false;  // whole GPUs: nothing else may hold them
  int model_id = -1;       // required GPU model, -1 = any
  Resources resources;
  const std::map<std::string, std::string>* node_selector = nullptr;
  const std::vector<Toleration>* tolerations = nullptr;
};

struct FilterOptions {
  // CN109992422A bookkeeping flag: free = min(reported free, accounted free).
  bool use_reported_free = false;
};

// Stable ids (the index of FilterCounts); not the order the filters run in (kFilters).
enum FilterId : int {
  kFilterReachable = 0,
  kFilterAvailable,
  kFilterSchedulable,
  kFilterTaintToleration,
  kFilterNodeSelector,
  kFilterCpuFit,
  kFilterMemoryFit,
  kFilterGpuModel,
  kFilterGpuCount,
  kFilterGpuMemory,
  kFilterGpuHealth,  // last so the ids of the others stay as they were
  kNumFilters,
};

// Filter name (as in metrics) and the phrase `why` uses for nodes it rejected; "none" for an
// id out of range.
const char* FilterName(int id);
const char* FilterReason(int id);
// True for filters that reject a node for what it is (taints, labels, its GPUs), not for its
// state or free capacity: a task every node rejects so is infeasible, not waiting.
bool RejectsForWhatTheNodeIs(int id);

using FilterCounts = std::array<int64_t, kNumFilters>;

inline MiB EffectiveFree(const GpuState& g, const FilterOptions& o) {
  const MiB accounted = g.accounted_free();
  if (o.use_reported_free && g.reported_free_mib >= 0 && g.reported_free_mib < accounted) {
    return g.reported_free_mib;
  }
  return accounted;
}

// True when GPU `g` can take one share of `r`.
inline bool GpuFits(const GpuState& g, const PlacementRequest& r, const FilterOptions& o) {
  if (!g.healthy) return false;
  if (r.model_id >= 0 && g.model_id != r.model_id) return false;
  if (r.exclusive) return g.tasks == 0 && g.allocated_mib == 0;
  return EffectiveFree(g, o) >= r.gpu_mem_mib;
}

bool ToleratesAll(const std::vector<Taint>& taints, const std::vector<Toleration>* tolerations);
bool MatchesSelector(const std::map<std::string, std::string>& labels,
                     const std::map<std::string, std::string>* selector);

// What the GPU filters read of a node: one pass over its GPUs. Counting stops once every GPU
// filter's answer is known: at once when the node has fewer GPUs than asked (GpuCount
// rejects), and when `fits` reaches the request (every GPU filter passes).
struct GpuTally {
  int64_t total = 0;          // GPUs on the node
  int64_t model_matches = 0;  // of the requested model (every GPU when any model will do)
  int64_t healthy = 0;        // healthy among model_matches
  int64_t fits = 0;           // able to take one share of the request (GpuFits)
};

inline GpuTally TallyGpus(const NodeState& n, const PlacementRequest& r, const FilterOptions& o) {
  GpuTally t;
  t.total = static_cast<int64_t>(n.gpus.size());
  if (t.total < r.gpus) return t;
  for (const GpuState& g : n.gpus) {
    if (r.model_id >= 0 && g.model_id != r.model_id) continue;
    ++t.model_matches;
    t.healthy += g.healthy ? 1 : 0;
    if (GpuFits(g, r, o) && ++t.fits >= r.gpus) break;
  }
  return t;
}

// One node and one request: what a filter reads. `gpus` is filled before the first GPU filter.
struct FilterInput {
  const NodeState& node;
  const PlacementRequest& request;
  const FilterOptions& options;
  GpuTally gpus;
};

// The same from the node's compact summary (the hot path).
struct SummaryInput {
  const NodeSummary& summary;
  const PlacementRequest& request;
  const FilterOptions& options;
};

// A filter's answer from the summary: kAskNode when the summary cannot tell.
enum class Verdict : uint8_t { kPass, kReject, kAskNode };

// The filters (node form, then summary form). Each answers for its own filter, given that
// the filters before it passed; a summary form answers kAskNode where the summary cannot tell.
namespace filter {

inline bool Reachable(const FilterInput& in) { return in.node.reachable; }
inline bool Available(const FilterInput& in) { return in.node.available; }
inline bool Schedulable(const FilterInput& in) { return !in.node.cordoned && !in.node.draining; }
inline bool TaintsTolerated(const FilterInput& in) {
  return in.node.taints.empty() || ToleratesAll(in.node.taints, in.request.tolerations);
}
inline bool SelectorMatches(const FilterInput& in) {
  const auto* selector = in.request.node_selector;
  return selector == nullptr || selector->empty() || MatchesSelector(in.node.labels, selector);
}
inline bool CpuFits(const FilterInput& in) {
  return in.node.capacity.cpu_milli - in.node.allocated.cpu_milli >=
         in.request.resources.cpu_milli;
}
inline bool MemoryFits(const FilterInput& in) {
  return in.node.capacity.mem_mib - in.node.allocated.mem_mib >= in.request.resources.mem_mib;
}
// A node with too few GPUs in all is GpuCount's, even with none of the model.
inline bool GpuModelPresent(const FilterInput& in) {
  return in.gpus.model_matches > 0 || in.gpus.total < in.request.gpus;
}
inline bool GpuCountFits(const FilterInput& in) { return in.gpus.model_matches >= in.request.gpus; }
inline bool GpusHealthy(const FilterInput& in) { return in.gpus.healthy >= in.request.gpus; }
inline bool GpuMemoryFits(const FilterInput& in) { return in.gpus.fits >= in.request.gpus; }

inline Verdict PassIf(bool passes) { return passes ? Verdict::kPass : Verdict::kReject; }
// True when every GPU of the node is of the requested model (or any model will do).
inline bool OneMatchingModel(const SummaryInput& in) {
  return in.request.model_id < 0 || in.summary.model_id == in.request.model_id;
}

// `schedulable` answers the first three rows at once (the common case, one test).
inline Verdict ReachableSummary(const SummaryInput& in) {
  return PassIf(in.summary.schedulable || in.summary.reachable);
}
inline Verdict AvailableSummary(const SummaryInput& in) {
  return PassIf(in.summary.schedulable || in.summary.available);
}
inline Verdict SchedulableSummary(const SummaryInput& in) {
  return PassIf(in.summary.schedulable || !in.summary.unschedulable);
}
inline Verdict TaintsSummary(const SummaryInput& in) {
  return in.summary.has_taints ? Verdict::kAskNode : Verdict::kPass;
}
inline Verdict SelectorSummary(const SummaryInput& in) {
  const auto* selector = in.request.node_selector;
  return selector == nullptr || selector->empty() ? Verdict::kPass : Verdict::kAskNode;
}
inline Verdict CpuFitsSummary(const SummaryInput& in) {
  return PassIf(in.summary.cpu_free >= in.request.resources.cpu_milli);
}
inline Verdict MemoryFitsSummary(const SummaryInput& in) {
  return PassIf(in.summary.mem_free >= in.request.resources.mem_mib);
}
inline Verdict GpuModelSummary(const SummaryInput& in) {
  if (in.summary.gpu_count < in.request.gpus || OneMatchingModel(in)) return Verdict::kPass;
  return in.summary.model_id >= 0 ? Verdict::kReject : Verdict::kAskNode;  // < 0: mixed
}
inline Verdict GpuCountSummary(const SummaryInput& in) {
  if (in.summary.gpu_count < in.request.gpus) return Verdict::kReject;
  return OneMatchingModel(in) ? Verdict::kPass : Verdict::kAskNode;
}
inline Verdict GpusHealthySummary(const SummaryInput& in) {
  if (in.summary.unhealthy_gpus == 0) return Verdict::kPass;  // GpuCount passed
  if (!OneMatchingModel(in)) return Verdict::kAskNode;
  return PassIf(in.summary.gpu_count - in.summary.unhealthy_gpus >= in.request.gpus);
}
// The summary's free GPUs and memory are those of healthy GPUs, by accounted free memory.
inline Verdict GpuMemorySummary(const SummaryInput& in) {
  const PlacementRequest& r = in.request;
  if (in.options.use_reported_free || !OneMatchingModel(in)) return Verdict::kAskNode;
  if (r.exclusive) return PassIf(in.summary.whole_free_gpus >= r.gpus);
  if (r.gpus > 1) return Verdict::kAskNode;
  return PassIf(in.summary.max_gpu_free_mib >= r.gpu_mem_mib);
}

}  // namespace filter

enum class FilterStage : uint8_t {
  kNode,  // reads the node
  kGpu,   // reads FilterInput::gpus; runs only when fewer GPUs than asked take the task
};
enum class Judges : uint8_t {
  kState,          // the node's state or free capacity: may change by the next pass
  kWhatTheNodeIs,  // its taints, labels or GPUs (RejectsForWhatTheNodeIs)
};

struct FilterDef {
  FilterId id;
  const char* name;    // as in metrics
  const char* reason;  // what `why` says of the nodes it rejected
  FilterStage stage;
  Judges judges;
  bool (*passes)(const FilterInput&);
  Verdict (*on_summary)(const SummaryInput&);  // nullptr: ask the node
};

// The filters, in the order they run. A row: id, name, reason; stage, what it judges, node
// form, summary form.
inline constexpr std::array<FilterDef, kNumFilters> kFilters = {{
    {kFilterReachable, "Reachable", "unreachable",
     FilterStage::kNode, Judges::kState, filter::Reachable, filter::ReachableSummary},
    {kFilterAvailable, "Available", "unavailable (no heartbeat)",
     FilterStage::kNode, Judges::kState, filter::Available, filter::AvailableSummary},
    {kFilterSchedulable, "NodeUnschedulable", "cordoned or draining",
     FilterStage::kNode, Judges::kState, filter::Schedulable, filter::SchedulableSummary},
    {kFilterTaintToleration, "TaintToleration", "untolerated taint",
     FilterStage::kNode, Judges::kWhatTheNodeIs, filter::TaintsTolerated, filter::TaintsSummary},
    {kFilterNodeSelector, "NodeSelector", "node selector mismatch",
     FilterStage::kNode, Judges::kWhatTheNodeIs, filter::SelectorMatches, filter::SelectorSummary},
    {kFilterCpuFit, "CpuFit", "insufficient CPU",
     FilterStage::kNode, Judges::kState, filter::CpuFits, filter::CpuFitsSummary},
    {kFilterMemoryFit, "MemoryFit", "insufficient memory",
     FilterStage::kNode, Judges::kState, filter::MemoryFits, filter::MemoryFitsSummary},
    {kFilterGpuModel, "GpuModel", "no GPU of the requested model",
     FilterStage::kGpu, Judges::kWhatTheNodeIs, filter::GpuModelPresent, filter::GpuModelSummary},
    {kFilterGpuCount, "GpuCount", "too few GPUs",
     FilterStage::kGpu, Judges::kWhatTheNodeIs, filter::GpuCountFits, filter::GpuCountSummary},
    {kFilterGpuHealth, "GpuHealth",
     "unhealthy GPUs (Xid, ECC or lost; back after the health period)",
     FilterStage::kGpu, Judges::kState, filter::GpusHealthy, filter::GpusHealthySummary},
    {kFilterGpuMemory, "GpuMemoryFit", "insufficient GPU memory",
     FilterStage::kGpu, Judges::kState, filter::GpuMemoryFits, filter::GpuMemorySummary},
}};

// kFilters' row of each id.
inline constexpr std::array<size_t, kNumFilters> kFilterRow = [] {
  std::array<size_t, kNumFilters> row{};
  for (size_t i = 0; i < kFilters.size(); ++i) row[static_cast<size_t>(kFilters[i].id)] = i;
  return row;
}();

namespace filters_internal {

constexpr bool EveryIdOnce() {
  std::array<int, kNumFilters> seen{};
  for (const FilterDef& f : kFilters) {
    if (f.id < 0 || f.id >= kNumFilters || seen[static_cast<size_t>(f.id)]++ > 0) return false;
  }
  return true;
}
static_assert(EveryIdOnce(), "kFilters must hold every FilterId exactly once");

constexpr size_t FirstGpuRow() {
  for (size_t i = 0; i < kFilters.size(); ++i) {
    if (kFilters[i].stage == FilterStage::kGpu) return i;
  }
  return kFilters.size();
}

inline constexpr size_t kFirstGpuRow = FirstGpuRow();

constexpr bool GpuRowsLast() {
  for (size_t i = kFirstGpuRow; i < kFilters.size(); ++i) {
    if (kFilters[i].stage != FilterStage::kGpu) return false;
  }
  return true;
}
static_assert(GpuRowsLast(), "the GPU rows of kFilters come last: FirstRejecting skips them whole");

// Row I of FirstRejectingFilter: false to go on to the next row, true to stop with *rejected
// set (kNumFilters: the node passes). Before the first GPU row: no GPUs asked, or enough GPUs
// fit, passes every GPU row; else the tally is made for them.
template <size_t I>
inline bool Decides(FilterInput& in, int* rejected) {
  constexpr FilterDef f = kFilters[I];
  if constexpr (I == kFirstGpuRow) {
    if (in.request.gpus == 0) return true;
    in.gpus = TallyGpus(in.node, in.request, in.options);
    if (in.gpus.fits >= in.request.gpus) return true;
  }
  if (f.passes(in)) return false;
  *rejected = f.id;
  return true;
}

template <size_t... I>
inline int FirstRejecting(FilterInput& in, std::index_sequence<I...>) {
  int rejected = kNumFilters;
  (void)(Decides<I>(in, &rejected) || ...);
  return rejected;
}

// Row I of FirstRejectingFilterFast: false to go on, true to stop with *verdict and *id set.
template <size_t I>
inline bool DecidesOnSummary(const SummaryInput& in, Verdict* verdict, int* id) {
  constexpr FilterDef f = kFilters[I];
  if constexpr (I == kFirstGpuRow) {
    if (in.request.gpus == 0) return true;  // *verdict stays kPass
  }
  // A plain `if` (folded all the same): GCC's sanitizer builds do not take a function
  // pointer's comparison with nullptr as a constant expression.
  *verdict = f.on_summary == nullptr ? Verdict::kAskNode : f.on_summary(in);
  if (*verdict == Verdict::kPass) return false;
  *id = f.id;
  return true;
}

template <size_t... I>
inline Verdict FirstNotPassingOnSummary(const SummaryInput& in, int* id,
                                        std::index_sequence<I...>) {
  Verdict v = Verdict::kPass;
  (void)(DecidesOnSummary<I>(in, &v, id) || ...);
  return v;
}

}  // namespace filters_internal

// Runs the filters in order; returns kNumFilters when the node passes all of them, else the
// id of the first filter that rejects it.
inline int FirstRejectingFilter(const NodeState& n, const PlacementRequest& r,
                                const FilterOptions& o) {
  FilterInput in{n, r, o, {}};
  return filters_internal::FirstRejecting(in, std::make_index_sequence<kFilters.size()>());
}

// The same answer as FirstRejectingFilter, from the compact summary where each filter's
// summary form can tell (no taints, selector or mixed GPU models under a model request; one
// GPU or whole GPUs), else from the full node.
inline int FirstRejectingFilterFast(const NodeSummary& s, const NodeState& n,
                                    const PlacementRequest& r, const FilterOptions& o) {
  const SummaryInput in{s, r, o};
  int id = kNumFilters;
  const Verdict v = filters_internal::FirstNotPassingOnSummary(
      in, &id, std::make_index_sequence<kFilters.size()>());
  if (v == Verdict::kAskNode) return FirstRejectingFilter(n, r, o);
  return v == Verdict::kReject ? id : kNumFilters;
}

}  // namespace gpusched::core
