#include "core/reserved_env.h"

#include "core/task.h"

namespace gpusched::core {

bool IsReservedEnvName(std::string_view name) { return name.rfind("GPUSCHED_", 0) == 0; }

bool IsServerSetEnvName(std::string_view name) {
  return name == kArrayIndexEnv || name == "GPUSCHED_GANG_NODES" ||
         name == "GPUSCHED_TASKS_PER_NODE";
}

}  // namespace gpusched::core
