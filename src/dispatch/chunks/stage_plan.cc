#include "dispatch/chunks/stage_plan.h"

#include <algorithm>
#include <optional>
#include <set>
#include <variant>

#include "dispatch/chunks/executor_choice.h"

namespace gpusched::chunks {
namespace {

Status CheckInput(const std::vector<ExecutorOffer>& executors, const StageDemand& d) {
  if (d.partitions < 0) return InvalidArgument("partitions: must be >= 0");
  if (d.subtask_bytes < 0) return InvalidArgument("subtask_bytes: must be >= 0");
  if (d.cpus < 1) return InvalidArgument("cpus: must be >= 1");
  if (d.min_free_cpus < 0) return InvalidArgument("min_free_cpus: must be >= 0");
  std::set<std::string> names;
  for (const ExecutorOffer& e : executors) {
    if (e.name.empty()) return InvalidArgument("executor.name: must not be empty");
    if (!names.insert(e.name).second) {
      return InvalidArgument("executor.name: \"" + e.name + "\" given twice");
    }
    for (int64_t b : e.gpu_free_bytes) {
      if (b < 0) return InvalidArgument("executor \"" + e.name + "\": negative free GPU memory");
    }
  }
  return Status::Ok();
}

// One executor's offer for the next partition: its GPU with the most free memory that fits
// (ties by index), or its CPU executor; nullopt when its free CPUs are under the limit.
struct Offer {
  size_t executor = 0;
  int gpu = -1;
  int64_t gpu_free = 0;
  std::string decision;
};

std::optional<Offer> OfferOf(const ExecutorOffer& e, size_t index, const StageDemand& d) {
  // The free-CPU limit: an executor under min_free_cpus is not used at all.
  if (e.free_cpus >= 0 && e.free_cpus < d.min_free_cpus) return std::nullopt;
  std::vector<GpuView> gpus;
  for (size_t g = 0; g < e.gpu_free_bytes.size(); ++g) {
    gpus.push_back(GpuView{static_cast<int>(g), e.gpu_free_bytes[g], e.gpu_free_bytes[g], 1});
  }
  // CN110955526B claim 2 (executor_choice.h): free CPUs, then free memory GPU by GPU.
  const ExecutorDecision choice = ChooseExecutor(gpus, e.free_cpus, {d.subtask_bytes, d.cpus});
  if (std::holds_alternative<NoExecutor>(choice)) return std::nullopt;
  Offer offer{index, -1, 0, DescribeDecision(choice)};
  if (std::holds_alternative<GpuExecutor>(choice)) {
    for (const GpuView& g : gpus) {
      if (g.free_bytes >= d.subtask_bytes && (offer.gpu < 0 || g.free_bytes > offer.gpu_free)) {
        offer.gpu = g.gpu;
        offer.gpu_free = g.free_bytes;
      }
    }
  }
  return offer;
}

// Is `a` the better offer? GPU before CPU; more free GPU memory; more free CPUs (an unknown
// count ranks first); then the executors' order (sorted by name).
bool Better(const Offer& a, const Offer& b, const std::vector<ExecutorOffer>& executors) {
  if ((a.gpu >= 0) != (b.gpu >= 0)) return a.gpu >= 0;
  if (a.gpu >= 0 && a.gpu_free != b.gpu_free) return a.gpu_free > b.gpu_free;
  const auto cpus = [](int c) { return c < 0 ? INT32_MAX : c; };
  const int ca = cpus(executors[a.executor].free_cpus), cb = cpus(executors[b.executor].free_cpus);
  if (a.gpu < 0 && ca != cb) return ca > cb;
  return a.executor < b.executor;
}

}  // namespace

StatusOr<std::vector<PartitionPlacement>> PlanStage(std::vector<ExecutorOffer> executors,
                                                    const StageDemand& demand) {
  GS_RETURN_IF_ERROR(CheckInput(executors, demand));
  std::sort(executors.begin(), executors.end(),
            [](const ExecutorOffer& a, const ExecutorOffer& b) { return a.name < b.name; });
  std::vector<PartitionPlacement> plan;
  for (int p = 0; p < demand.partitions; ++p) {
    std::optional<Offer> best;
    for (size_t i = 0; i < executors.size(); ++i) {
      std::optional<Offer> o = OfferOf(executors[i], i, demand);
      if (o && (!best || Better(*o, *best, executors))) best = std::move(o);
    }
    PartitionPlacement placed{p, "", -1, "no-executor (no executor has the free CPUs)"};
    if (best) {
      ExecutorOffer& e = executors[best->executor];
      placed = {p, e.name, best->gpu, best->decision};
      // The partition holds its CPUs and, on a GPU, its subtask's memory until it ends.
      if (e.free_cpus >= 0) e.free_cpus -= demand.cpus;
      if (best->gpu >= 0) e.gpu_free_bytes[best->gpu] -= demand.subtask_bytes;
    }
    plan.push_back(std::move(placed));
  }
  return plan;
}

}  // namespace gpusched::chunks
