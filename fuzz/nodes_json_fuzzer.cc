// The gpusched server's REST nodes list as the CN110955526B stage planner reads it
// (dispatch/chunks/stage_plan.h: ParseNodesJson). What parses gives executors with names,
// non-negative free GPU memory and a CPU count that is -1 or >= 0, which PlanStage accepts
// whenever the names are unique; what does not is an InvalidArgument naming the field.

#include <set>
#include <string>

#include "dispatch/chunks/stage_plan.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  const std::string_view text = fuzz::Text(data, size);
  const std::string shown(text);
  auto executors = chunks::ParseNodesJson(text);
  if (!executors.ok()) {
    FUZZ_REQUIRE(executors.status().code() == StatusCode::kInvalidArgument,
                 executors.status().ToString());
    FUZZ_REQUIRE(executors.status().message().starts_with("nodes"),
                 executors.status().ToString());
    return 0;
  }
  std::set<std::string> names;
  for (const chunks::ExecutorOffer& e : *executors) {
    FUZZ_REQUIRE(!e.name.empty() && e.free_cpus >= -1, shown);
    for (int64_t b : e.gpu_free_bytes) FUZZ_REQUIRE(b >= 0, shown);
    names.insert(e.name);
  }
  auto plan = chunks::PlanStage(*executors, {.partitions = 4, .subtask_bytes = 1 << 20});
  FUZZ_REQUIRE(plan.ok() == (names.size() == executors->size()), shown);
  if (plan.ok()) FUZZ_REQUIRE(plan->size() == 4, shown);
  return 0;
}
