#pragma once
// Fragmentation-aware placement (the idea of FGD, Weng et al., ATC'23 "Beware of
// Fragmentation"; written here from the paper's definitions, no code taken).
//
// The workload M is the distribution of task shapes seen so far (WorkloadDistribution, learned
// online from every submitted task). A node's fragmentation for one shape m, in GPUs (free
// memory of a GPU / its size, summed), by one of two measures (FragmentationMeasure):
//   kNextTask (FGD's definition):
//   - the node cannot host m now (CPU or RAM short, or fewer than m.gpus GPUs that can take
//     one share of m): all its idle GPU memory counts;
//   - otherwise only the idle memory of the GPUs that cannot take a share of m counts.
//   kPacking (the default): the idle GPU share left unused when the node is filled with as many
//   tasks of shape m as its GPUs, CPU and RAM hold together.
// F_n(M) = Σ p_m F_n(m). The node order `min_fragmentation` places a task where F_n(M) grows
// least; the GPU order of the same name picks, inside a node, the GPUs whose use makes it grow
// least. Tasks without GPUs are left out of M: to either measure every idle GPU is a fragment
// for them wherever a task goes, so they would add the same amount to every choice. They are
// still placed by the orders, and kPacking sees the CPU and RAM they take from GPU tasks.
//
// Why kPacking: on the Alibaba allocation replay (sim/README.md) the next-task measure left
// 264.36 GPUs unallocated (best fit 339.56). At the end nearly all whole GPUs still free sat
// on nodes whose CPU could no longer feed a whole-GPU task: placing CPU (CPU-only tasks,
// CPU-heavy shares) where it leaves one more task fitting costs nothing to FGD's measure even
// when it strands GPUs for the tasks after it. The packing measure counts those GPUs and left
// 176.5 GPUs unallocated (-48 %). Replay wall time, one core: 45 s before the tallies were
// grouped by GPU demand and identical GPUs measured once; now 21.8 s with kPacking (its
// divisions cost more) and 10.0 s with kNextTask.
// Thread-safety: WorkloadDistribution is not synchronised (its owner, the ResourceManager, is
// serialised by the Scheduler); NodeFragmentation is scratch for one thread.

#include <compare>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "core/filters.h"
#include "core/node.h"

namespace gpusched::core {

// One task shape of the workload.
struct WorkloadShape {
  int64_t gpus = 0;
  MiB gpu_mem_mib = 0;  // per GPU; 0 when exclusive
  bool exclusive = false;
  int model_id = -1;    // -1 = any model
  int64_t cpu_milli = 0;
  MiB mem_mib = 0;

  static WorkloadShape Of(const PlacementRequest& r);
  auto operator<=>(const WorkloadShape&) const = default;
};

// How a node's fragmentation against one shape m is counted, in GPUs.
enum class FragmentationMeasure {
  // FGD's: the idle share that one more task of shape m could not use (see above).
  kNextTask,
  // The idle share left unused after the node is filled with as many tasks of shape m as its
  // GPUs, CPU and RAM allow together: idle - k x m's GPUs x m's share, k = min(whole slots for
  // m on the GPUs / m.gpus, free CPU / m.cpu, free RAM / m.mem). It sees what kNextTask misses:
  // CPU or RAM that runs out before the GPUs do, and the remainder a share leaves on a GPU.
  // Assumes the GPUs of a node are of one size (a share is counted against the largest).
  kPacking,
};
const char* FragmentationMeasureName(FragmentationMeasure m);

struct WeightedShape {
  WorkloadShape shape;
  double p = 0;  // probability in the typical workload; they sum to 1
};

// The task shapes seen so far, and the typical workload drawn from them: the most frequent
// shapes (ties by shape order) until they cover `coverage` of the tasks seen or `max_shapes`
// are kept, their probabilities renormalised. Deterministic: the same tasks in the same order
// give the same result. Defaults: every shape up to 256 (on the Alibaba replay with the
// next-task measure, 95 % coverage and 64 shapes left 292.7 GPUs unallocated, all shapes
// 264.4).
class WorkloadDistribution {
 public:
  struct Options {
    double coverage = 1.0;
    size_t max_shapes = 256;
    // Distinct shapes remembered; a new shape beyond this is not counted (bounds memory in a
    // long-running server).
    size_t max_distinct = 4096;
  };
  WorkloadDistribution() = default;
  explicit WorkloadDistribution(Options options) : options_(options) {}

  // Counts one task's shape. Requests without GPUs are ignored (see above).
  void Observe(const PlacementRequest& r);
  const std::vector<WeightedShape>& typical() const { return typical_; }
  int64_t observed() const { return observed_; }

 private:
  void Recompute();

  Options options_;
  std::map<WorkloadShape, int64_t> counts_;
  int64_t observed_ = 0;
  std::vector<WeightedShape> typical_;
};

// Fragmentation of `node` for one shape, in GPUs, by the definition above. Reads accounted
// free memory (or the reported one with o.use_reported_free); an unhealthy GPU has no idle
// memory.
double ShapeFragmentation(const NodeState& node, const FilterOptions& o, const WorkloadShape& m,
                          FragmentationMeasure measure = FragmentationMeasure::kNextTask);
// F_n(M) = Σ p_m ShapeFragmentation(node, m).
double ExpectedFragmentation(const NodeState& node, const FilterOptions& o,
                             std::span<const WeightedShape> workload,
                             FragmentationMeasure measure = FragmentationMeasure::kNextTask);

// Per-node tallies for fast "what if" questions: how F_n(M) would change if a request took
// some GPUs of the node. Shapes that ask the same of each GPU (share, exclusivity, model) share
// one tally, so Reset costs O(distinct GPU demands x GPUs + |M|) and Growth
// O(distinct GPU demands x GPUs taken + |M|). One object serves every node of a scan.
class NodeFragmentation {
 public:
  // REQUIRES: `workload` outlives the object and does not change while it is used.
  NodeFragmentation(std::span<const WeightedShape> workload, FragmentationMeasure measure);
  void Reset(const NodeState& node, const FilterOptions& o);
  double Expected() const { return expected_; }
  // F_n(M) after `r` takes one share (or, exclusive, the whole) of each of `gpus` (indices
  // into node.gpus, distinct) and its CPU and RAM, minus F_n(M) now. REQUIRES: Reset, and each
  // GPU can take a share of r.
  double Growth(const PlacementRequest& r, std::span<const int> gpus) const;

 private:
  // What a shape asks of each of its GPUs.
  struct GpuDemand {
    MiB gpu_mem_mib = 0;
    bool exclusive = false;
    int model_id = -1;
    auto operator<=>(const GpuDemand&) const = default;
  };
  struct Gpu {
    MiB free = 0, total = 0;
    int model_id = 0;
    bool healthy = true, whole_free = false;
  };
  struct Tally {
    int64_t fitting = 0;     // GPUs that can take a share of the demand
    int64_t unfit_idle = 0;  // idle memory of the others, in millionths of a GPU
    int64_t slots = 0;       // shares of the demand the GPUs can take (kPacking)
  };
  static bool Takes(const Gpu& g, const GpuDemand& d);
  static int64_t Slots(const Gpu& g, const GpuDemand& d);
  static int64_t Idle(const Gpu& g);  // millionths of a GPU
  void Add(const Gpu& g, int sign, std::span<Tally> tallies) const;
  int64_t Fragmentation(size_t shape, int64_t cpu_free, MiB mem_free, const Tally& t,
                        int64_t all_idle) const;

  std::span<const WeightedShape> workload_;
  FragmentationMeasure measure_;
  std::vector<GpuDemand> demands_;   // distinct, in order
  std::vector<size_t> demand_of_;    // by workload index
  std::vector<int64_t> share_;       // by demand: one share, millionths of a GPU (kPacking)
  std::vector<Gpu> gpus_;
  std::vector<Tally> tallies_;       // by demand
  std::vector<int64_t> now_;         // by workload index: F_n(m) now, millionths of a GPU
  int64_t cpu_free_ = 0;
  MiB mem_free_ = 0;
  int64_t all_idle_ = 0;  // millionths of a GPU
  double expected_ = 0;   // GPUs
};

}  // namespace gpusched::core
