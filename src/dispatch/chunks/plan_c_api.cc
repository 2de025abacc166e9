// The C ABI of gpusched_chunks_c.h's stage plan (CN110955526B claim 2 across nodes) over
// PlanStage and ParseNodesJson. A plan handle is registered like the other chunk handles, so a
// freed or made-up one is refused, naming its kind.

#include <memory>
#include <new>
#include <string>
#include <vector>

#include "dispatch/c_api/c_status.h"
#include "dispatch/c_api/gpusched_chunks_c.h"
#include "dispatch/c_api/handle_registry.h"
#include "dispatch/chunks/stage_plan.h"

namespace capi = gpusched::capi;
namespace chunks = gpusched::chunks;
using gpusched::Status;

namespace {

struct ChunksPlan {
  std::vector<chunks::ExecutorOffer> executors;
  int min_free_cpus = 0;
  std::vector<chunks::PartitionPlacement> placements;  // of the last assign
};

}  // namespace

// Declares `plan`, the plan of live handle `handle`.
#define GS_CHECK_PLAN(plan, handle) \
  GS_ASSIGN_OR_RETURN(ChunksPlan* plan, capi::CheckLive<ChunksPlan>(handle, capi::HandleKind::kChunksPlan, "plan"))

int gpusched_chunks_plan_new(gpusched_chunks_plan** out) {
  return capi::Guard([&]() -> Status {
    if (!out) return capi::Null("out");
    GS_ASSIGN_OR_RETURN(*out, capi::NewHandle<gpusched_chunks_plan>(std::make_unique<ChunksPlan>(),
                                                                     capi::HandleKind::kChunksPlan));
    return Status::Ok();
  });
}

int gpusched_chunks_plan_add_executor(gpusched_chunks_plan* handle, const char* name,
                                      const char* node, const int64_t* gpu_free_bytes,
                                      int32_t gpu_count, int32_t free_cpus) {
  return capi::Guard([&]() -> Status {
    GS_CHECK_PLAN(plan, handle);
    if (!name) return capi::Null("name");
    if (gpu_count < 0) return gpusched::InvalidArgument("gpu_count: must be >= 0");
    if (gpu_count > 0 && !gpu_free_bytes) return capi::Null("gpu_free_bytes");
    chunks::ExecutorOffer e{name, node ? node : "", {}, free_cpus < 0 ? -1 : free_cpus};
    if (gpu_count > 0) e.gpu_free_bytes.assign(gpu_free_bytes, gpu_free_bytes + gpu_count);
    plan->executors.push_back(std::move(e));
    return Status::Ok();
  });
}

int gpusched_chunks_plan_add_nodes_json(gpusched_chunks_plan* handle, const char* json) {
  return capi::Guard([&]() -> Status {
    GS_CHECK_PLAN(plan, handle);
    if (!json) return capi::Null("json");
    GS_ASSIGN_OR_RETURN(std::vector<chunks::ExecutorOffer> parsed,
                        chunks::ParseNodesJson(json));
    for (chunks::ExecutorOffer& e : parsed) plan->executors.push_back(std::move(e));
    return Status::Ok();
  });
}

int gpusched_chunks_plan_set_min_free_cpu(gpusched_chunks_plan* handle, int32_t min_free_cpu) {
  return capi::Guard([&]() -> Status {
    GS_CHECK_PLAN(plan, handle);
    if (min_free_cpu < 0) return gpusched::InvalidArgument("min_free_cpu: must be >= 0");
    plan->min_free_cpus = min_free_cpu;
    return Status::Ok();
  });
}

int gpusched_chunks_plan_assign(gpusched_chunks_plan* handle, int32_t partitions,
                                int64_t subtask_bytes, int32_t cpus_per_partition) {
  return capi::Guard([&]() -> Status {
    GS_CHECK_PLAN(plan, handle);
    const chunks::StageDemand demand{partitions, subtask_bytes, cpus_per_partition, plan->min_free_cpus};
    GS_ASSIGN_OR_RETURN(plan->placements, chunks::PlanStage(plan->executors, demand));
    return Status::Ok();
  });
}

int gpusched_chunks_plan_partition(const gpusched_chunks_plan* handle, int32_t index,
                                   const char** executor, int32_t* gpu) {
  return capi::Guard([&]() -> Status {
    GS_CHECK_PLAN(plan, handle);
    if (index < 0 || index >= static_cast<int32_t>(plan->placements.size())) {
      return gpusched::InvalidArgument("index: " + std::to_string(index) + " not in [0, " +
                                       std::to_string(plan->placements.size()) + ")");
    }
    const chunks::PartitionPlacement& p = plan->placements[static_cast<size_t>(index)];
    if (executor) *executor = p.executor.c_str();
    if (gpu) *gpu = p.gpu;
    return Status::Ok();
  });
}

int gpusched_chunks_plan_free(gpusched_chunks_plan* handle) {
  return capi::Guard([&]() -> Status {
    if (handle == nullptr) return Status::Ok();
    GS_ASSIGN_OR_RETURN(void* plan, capi::TakeHandle(handle, capi::HandleKind::kChunksPlan, "plan"));
    delete static_cast<ChunksPlan*>(plan);
    return Status::Ok();
  });
}
